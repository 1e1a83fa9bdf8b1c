/* SPDX-License-Identifier: MIT */
/* The flavour table: medians, spreads and ratios over interleaved rounds (rules in
 * bench/table.h), printed as text, JSON or SVG bars. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/table.h"

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Sorts v.  The median of an even count is the mean of the middle two. */
static double sorted_median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	if (!n)
		return 0;
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void bench_stat(const double *v, int n, struct bench_stat *s)
{
	double tmp[BENCH_MAX_ROUNDS];

	if (n > BENCH_MAX_ROUNDS)
		n = BENCH_MAX_ROUNDS;
	memcpy(tmp, v, (size_t)n * sizeof(*v));
	*s = (struct bench_stat){.n = n};
	if (!n)
		return;
	s->median = sorted_median(tmp, n);
	s->min = tmp[0];
	s->max = tmp[n - 1];
	if (n > 1 && s->median > 0)
		s->spread = (s->max - s->min) / 2 / s->median;
}

/* The sign test's interval for the median of n values: the k-th smallest and k-th largest,
 * for the largest k whose coverage 1 - 2 P(Bin(n, 1/2) < k) is still >= BENCH_CONFIDENCE;
 * 0 when even [min, max] falls short. */
static int sign_test_k(int n)
{
	double below = 0, term = ldexp(1.0, -n); /* P(Bin = 0) */
	int k = 0;

	for (int i = 0; i < n / 2; i++) {
		below += term; /* P(Bin <= i) */
		if (1 - 2 * below < BENCH_CONFIDENCE)
			break;
		k = i + 1;
		term = term * (n - i) / (i + 1);
	}
	return k;
}

void bench_ratio(const double *x, const double *ref, const bool *has, const bool *has_ref,
		 int rounds, struct bench_ratio *r)
{
	double v[BENCH_MAX_ROUNDS];
	int n = 0, k;

	*r = (struct bench_ratio){0};
	for (int i = 0; i < rounds && i < BENCH_MAX_ROUNDS; i++)
		if ((!has || has[i]) && (!has_ref || has_ref[i]) && ref[i] > 0)
			v[n++] = x[i] / ref[i];
	r->n = n;
	r->median = sorted_median(v, n);
	r->lo = r->hi = r->median;
	k = n >= BENCH_MIN_ROUNDS ? sign_test_k(n) : 0;
	if (!k)
		return;
	r->judged = true;
	r->lo = v[k - 1];
	r->hi = v[n - k];
	r->noise = r->lo <= 1.0 && 1.0 <= r->hi;
}

const char *bench_ratio_mark(const struct bench_ratio *r)
{
	return !r->judged ? "?" : r->noise ? "~" : "";
}

/* ---- text ------------------------------------------------------------------------------ */
static const char *const fmt_value[BENCH_NCOLS] = {"%.1f", "%.1f", "%.0f", "%.1f"};

/* "5114.0 ±1.2%", or the value alone for a single run. */
static void cell_text(char *buf, size_t len, const struct bench_stat *s, int col)
{
	int n = snprintf(buf, len, fmt_value[col], s->median);

	if (s->n > 1 && n > 0 && (size_t)n < len)
		snprintf(buf + n, len - (size_t)n, " ±%.1f%%", 100 * s->spread);
}

/* Characters on a terminal: UTF-8 continuation bytes (of the ±) take no column. */
static int text_width(const char *s)
{
	int w = 0;

	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

static int col_width(const struct bench_table *t, int col)
{
	static const char *const fixed[BENCH_NCOLS] = {NULL, NULL, "IOPS", "us"};
	const char *title = fixed[col] ? fixed[col] : t->title[col];
	int w = (int)strlen(title);

	for (int i = 0; i < t->nrows; i++) {
		char buf[64];

		cell_text(buf, sizeof(buf), &t->row[i].cell[col], col);
		if (text_width(buf) > w)
			w = text_width(buf);
	}
	return w;
}

/* "0.985", or "  n/a" when no round has both values (the reference measured nothing). */
static void ratio_text(char *buf, size_t len, const struct bench_ratio *r)
{
	if (r->n)
		snprintf(buf, len, "%.3f", r->median);
	else
		snprintf(buf, len, "  n/a");
}

void bench_table_print(FILE *f, const struct bench_table *t)
{
	int w[BENCH_NCOLS];

	for (int c = 0; c < BENCH_NCOLS; c++)
		w[c] = col_width(t, c);
	fprintf(f, "%-24s | %*s | %*s | %*s | %*s | %s\n", "flavour", w[0], t->title[0], w[1],
		t->title[1], w[2], "IOPS", w[3], "us", "x off (col 1 / col 2)");
	for (int i = 0; i < t->nrows; i++) {
		const struct bench_row *r = &t->row[i];

		fprintf(f, "%-24s |", r->label);
		for (int c = 0; c < BENCH_NCOLS; c++) {
			char buf[64];

			cell_text(buf, sizeof(buf), &r->cell[c], c);
			fprintf(f, " %*s%s |", w[c] - text_width(buf), "", buf);
		}
		if (r->has_ratio) {
			char a[16], b[16];

			ratio_text(a, sizeof(a), &r->ratio[0]);
			ratio_text(b, sizeof(b), &r->ratio[1]);
			fprintf(f, " %s %-1s / %s%s%s", a, bench_ratio_mark(&r->ratio[0]), b,
				*bench_ratio_mark(&r->ratio[1]) ? " " : "",
				bench_ratio_mark(&r->ratio[1]));
		}
		if (r->recorded && r->lost)
			fprintf(f, "  (%llu trace events lost)", (unsigned long long)r->lost);
		fprintf(f, "\n");
	}
	fprintf(
	    f,
	    "Cells: median ±half the range over %d interleaved round%s.  x off: median of the "
	    "per-round ratios;\n~ within the noise (the ratio's %.0f%% interval over the rounds "
	    "holds 1.0), ? not judged (fewer than %d rounds).\n",
	    t->rounds, t->rounds == 1 ? "" : "s", 100 * BENCH_CONFIDENCE, BENCH_MIN_ROUNDS);
}

/* ---- JSON ------------------------------------------------------------------------------ */
static void stat_json(FILE *f, const struct bench_stat *s)
{
	fprintf(f, "{\"median\": %.3f, \"min\": %.3f, \"max\": %.3f, \"n\": %d}", s->median, s->min,
		s->max, s->n);
}

static void ratio_json(FILE *f, const struct bench_ratio *r)
{
	fprintf(f,
		"{\"median\": %.4f, \"lo\": %.4f, \"hi\": %.4f, \"n\": %d, \"judged\": %s, "
		"\"noise\": %s}",
		r->median, r->lo, r->hi, r->n, r->judged ? "true" : "false",
		r->noise ? "true" : "false");
}

void bench_table_json(FILE *f, const struct bench_table *t, void (*head)(FILE *f))
{
	static const char *const key[BENCH_NCOLS] = {"mib_s_1", "mib_s_2", "iops_2", "mean_us_2"};

	fputc('{', f);
	if (head) {
		head(f);
		fputs(", ", f);
	}
	fprintf(f,
		"\"columns\": [\"%s\", \"%s\"], \"rounds\": %d, \"confidence\": %.2f, "
		"\"rows\": [",
		t->title[0], t->title[1], t->rounds, BENCH_CONFIDENCE);
	for (int i = 0; i < t->nrows; i++) {
		const struct bench_row *r = &t->row[i];

		fprintf(f, "%s\n  {\"flavour\": \"%s\"", i ? "," : "", r->label);
		for (int c = 0; c < BENCH_NCOLS; c++) {
			fprintf(f, ", \"%s\": ", key[c]);
			stat_json(f, &r->cell[c]);
		}
		if (r->has_ratio) {
			fprintf(f, ", \"ratio_to_off\": [");
			ratio_json(f, &r->ratio[0]);
			fprintf(f, ", ");
			ratio_json(f, &r->ratio[1]);
			fprintf(f, "]");
		}
		if (r->recorded)
			fprintf(f, ", \"trace_lost\": %llu", (unsigned long long)r->lost);
		fprintf(f, "}");
	}
	fprintf(f, "\n]}\n");
}

/* ---- SVG ------------------------------------------------------------------------------- */
#define SVG_W	   820
#define SVG_LABEL  200 /* bars start here */
#define SVG_BAR_W  440 /* the longest whisker's length */
#define SVG_ROW_H  24
#define SVG_HEAD_H 34

/* Text content: the labels are ours, but escape anyway. */
static void svg_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '&')
			fputs("&amp;", f);
		else if (*s == '<')
			fputs("&lt;", f);
		else if (*s == '>')
			fputs("&gt;", f);
		else
			fputc(*s, f);
	}
}

static void svg_panel(FILE *f, const struct bench_table *t, int col, int y0)
{
	double top = 0;

	for (int i = 0; i < t->nrows; i++)
		if (t->row[i].cell[col].max > top)
			top = t->row[i].cell[col].max;
	if (top <= 0)
		top = 1;
	fprintf(f, "<text x=\"10\" y=\"%d\" font-weight=\"bold\">", y0 + 20);
	svg_text(f, t->title[col]);
	fprintf(f, " (median, whisker: min..max over the rounds)</text>\n");
	for (int i = 0; i < t->nrows; i++) {
		const struct bench_row *r = &t->row[i];
		const struct bench_stat *s = &r->cell[col];
		int y = y0 + SVG_HEAD_H + i * SVG_ROW_H;
		double x_med = SVG_LABEL + SVG_BAR_W * s->median / top;
		double x_lo = SVG_LABEL + SVG_BAR_W * s->min / top;
		double x_hi = SVG_LABEL + SVG_BAR_W * s->max / top;
		const char *fill = !r->has_ratio ? "#e8a33d" : i == 0 ? "#8c8c8c" : "#4a7fb5";

		fprintf(f, "<text x=\"10\" y=\"%d\">", y + 15);
		svg_text(f, r->label);
		fprintf(f,
			"</text>\n<rect x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"16\" "
			"fill=\"%s\"/>\n",
			SVG_LABEL, y + 2, x_med - SVG_LABEL, fill);
		if (s->n > 1)
			fprintf(f,
				"<path d=\"M%.1f %d V%d M%.1f %d H%.1f M%.1f %d V%d\" "
				"stroke=\"black\" fill=\"none\"/>\n",
				x_lo, y + 5, y + 15, x_lo, y + 10, x_hi, x_hi, y + 5, y + 15);
		fprintf(f, "<text x=\"%.1f\" y=\"%d\">%.1f", x_hi + 6, y + 15, s->median);
		if (s->n > 1)
			fprintf(f, " ±%.1f%%", 100 * s->spread);
		if (r->has_ratio && i > 0)
			fprintf(f, "  x%.3f %s", r->ratio[col].median,
				bench_ratio_mark(&r->ratio[col]));
		fprintf(f, "</text>\n");
	}
}

int bench_table_svg(const char *path, const struct bench_table *t, char *why, size_t whylen)
{
	int panel_h = SVG_HEAD_H + t->nrows * SVG_ROW_H + 16, rc = 0;
	FILE *f = fopen(path, "w");

	if (!f) {
		rc = -errno;
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		return rc;
	}
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"font-family=\"sans-serif\" font-size=\"13\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		SVG_W, 2 * panel_h + 30);
	for (int col = 0; col < 2; col++)
		svg_panel(f, t, col, col * panel_h);
	fprintf(f,
		"<text x=\"10\" y=\"%d\" font-size=\"11\">%d interleaved rounds; ~ within the "
		"noise (the ratio's %.0f%% interval holds 1.0), ? not judged</text>\n</svg>\n",
		2 * panel_h + 16, t->rounds, 100 * BENCH_CONFIDENCE);
	if (ferror(f))
		rc = -EIO;
	if (fclose(f) && !rc)
		rc = -errno;
	if (rc)
		snprintf(why, whylen, "%s: %s", path, strerror(-rc));
	return rc;
}
