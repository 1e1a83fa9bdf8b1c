/* SPDX-License-Identifier: MIT */
/*
 * `trace latency --svg FILE`: the stage distributions as a standalone SVG a browser
 * opens.  One row per stage; time runs left to right on a log scale (decades from
 * 100 ns up to the largest value); each row is a histogram of its requests over that
 * scale, with marks at p50, p90, p99, p99.9 and max.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracetools/tracetools.h"

#define WIDTH  960
#define LEFT   130 /* stage names */
#define RIGHT  20
#define ROW    56
#define TOP    40
#define BINS   120
#define MIN_NS 100.0

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

/* x of a time on the log axis [MIN_NS, max_ns]. */
static double x_of(double ns, double max_ns)
{
	double lo = log10(MIN_NS), hi = log10(max_ns);
	double v = log10(ns < MIN_NS ? MIN_NS : ns);
	return LEFT + (v - lo) / (hi - lo) * (WIDTH - LEFT - RIGHT);
}

static void axis(FILE *f, double max_ns, int bottom)
{
	static const char *const units[] = {"100ns", "1µs",   "10µs", "100µs", "1ms",
					    "10ms",  "100ms", "1s",   "10s",   "100s"};
	double ns = MIN_NS;
	for (int i = 0; ns <= max_ns * 1.0001 && i < 10; i++, ns *= 10) {
		double x = x_of(ns, max_ns);
		fprintf(
		    f,
		    "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#ddd\"/>\n"
		    "<text x=\"%.1f\" y=\"%d\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n",
		    x, TOP - 8, x, bottom, x, TOP - 12, units[i]);
	}
}

static void row(FILE *f, const char *name, uint64_t *v, size_t n, double max_ns, int y)
{
	unsigned bins[BINS] = {0}, top = 1;
	double lo = log10(MIN_NS), hi = log10(max_ns);
	qsort(v, n, sizeof *v, cmp_u64);
	for (size_t i = 0; i < n; i++) {
		double t = log10(v[i] < MIN_NS ? MIN_NS : (double)v[i]);
		int b = (int)((t - lo) / (hi - lo) * (BINS - 1));
		b = b < 0 ? 0 : b >= BINS ? BINS - 1 : b;
		if (++bins[b] > top)
			top = bins[b];
	}
	fprintf(f,
		"<text x=\"%d\" y=\"%d\" font-size=\"13\" text-anchor=\"end\">%s</text>\n"
		"<text x=\"%d\" y=\"%d\" font-size=\"10\" text-anchor=\"end\" fill=\"#666\">%zu "
		"requests</text>\n",
		LEFT - 8, y + ROW / 2, name, LEFT - 8, y + ROW / 2 + 13, n);
	double bw = (double)(WIDTH - LEFT - RIGHT) / BINS;
	for (int b = 0; b < BINS; b++) {
		if (!bins[b])
			continue;
		/* a bar's height by the log of its count: rare slow requests stay visible */
		double h = (ROW - 12) * (log1p(bins[b]) / log1p(top));
		fprintf(f,
			"<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
			"fill=\"#4a7ebb\"><title>%u"
			"</title></rect>\n",
			LEFT + b * bw, y + ROW - 6 - h, bw, h, bins[b]);
	}
	static const struct {
		double p;
		const char *label, *colour;
	} marks[] = {{.5, "p50", "#2a2"},
		     {.9, "p90", "#c80"},
		     {.99, "p99", "#d40"},
		     {.999, "p99.9", "#b00"},
		     {1.0, "max", "#000"}};
	for (size_t m = 0; m < sizeof marks / sizeof marks[0]; m++) {
		size_t k = (size_t)(marks[m].p * (double)n + 0.999999);
		uint64_t val = v[k ? (k > n ? n - 1 : k - 1) : 0];
		double x = x_of((double)val, max_ns);
		fprintf(f,
			"<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" "
			"stroke-width=\"1.5\"><title>%s %.1f µs</title></line>\n",
			x, y + 4, x, y + ROW - 6, marks[m].colour, marks[m].label, val / 1e3);
	}
	fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#999\"/>\n", LEFT,
		y + ROW - 6, WIDTH - RIGHT, y + ROW - 6);
}

int vs_latency_svg(const struct vs_lat_set *set, const char *path, char *why, size_t whylen)
{
	uint64_t *v = malloc((set->n ? set->n : 1) * sizeof *v);
	uint64_t max = 1000;
	unsigned rows = 0;
	if (!v) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}
	for (unsigned s = 0; vs_latency_stage(s); s++) {
		size_t n = vs_latency_values(set, s, v);
		rows += n > 0;
		for (size_t i = 0; i < n; i++)
			max = v[i] > max ? v[i] : max;
	}
	FILE *f = fopen(path, "w");
	if (!f) {
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		free(v);
		return -errno;
	}
	int height = TOP + (int)rows * ROW + 30;
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
		"<title>vioscope trace latency: time per stage</title>\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		WIDTH, height, WIDTH, height);
	axis(f, (double)max, TOP + (int)rows * ROW);
	int y = TOP;
	for (unsigned s = 0; vs_latency_stage(s); s++) {
		size_t n = vs_latency_values(set, s, v);
		if (!n)
			continue;
		row(f, vs_latency_stage(s), v, n, (double)max, y);
		y += ROW;
	}
	fprintf(f,
		"<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#444\">marks: p50 (green), p90, "
		"p99, p99.9 (red), max (black); bars: requests per bin, log height</text>\n"
		"</svg>\n",
		LEFT, y + 20);
	int rc = ferror(f) ? -EIO : 0;
	if (fclose(f) != 0 && !rc)
		rc = -errno;
	if (rc)
		snprintf(why, whylen, "%s: %s", path, strerror(-rc));
	free(v);
	return rc;
}
