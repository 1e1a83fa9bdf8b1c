/* SPDX-License-Identifier: MIT */
/* The flavour table's statistics and rendering on fixed inputs (bench/table.c): medians,
 * spreads, the per-round ratio and its interval, the `~` / `?` marks, lost events. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bench/table.h"

#define EPS 1e-9

static void test_stat_median_and_spread(void **state)
{
	const double odd[] = {5, 1, 3, 2, 4}, even[] = {10, 40, 20, 30};
	struct bench_stat s;

	(void)state;
	bench_stat(odd, 5, &s);
	assert_int_equal(s.n, 5);
	assert_float_equal(s.median, 3, EPS);
	assert_float_equal(s.min, 1, EPS);
	assert_float_equal(s.max, 5, EPS);
	assert_float_equal(s.spread, (5.0 - 1.0) / 2 / 3, EPS);
	assert_float_equal(odd[0], 5, EPS); /* the input is left as it was */
	bench_stat(even, 4, &s);
	assert_float_equal(s.median, 25, EPS);
	bench_stat(even, 1, &s); /* one run: no spread */
	assert_float_equal(s.median, 10, EPS);
	assert_float_equal(s.spread, 0, EPS);
}

/* Five rounds whose ratios straddle 1.0: within the noise; five that all lie below it: a
 * difference.  [min, max] of five covers the median with 93.75%. */
static void test_ratio_noise_or_difference(void **state)
{
	const double ref[] = {100, 200, 100, 150, 100};
	const double close[] = {98, 202, 99, 153, 97}, slower[] = {90, 182, 89, 138, 91};
	struct bench_ratio r;

	(void)state;
	bench_ratio(close, ref, NULL, NULL, 5, &r);
	assert_true(r.judged);
	assert_float_equal(r.median, 0.99, EPS);
	assert_float_equal(r.lo, 0.97, EPS);
	assert_float_equal(r.hi, 1.02, EPS);
	assert_true(r.noise);
	assert_string_equal(bench_ratio_mark(&r), "~");

	bench_ratio(slower, ref, NULL, NULL, 5, &r);
	assert_true(r.judged);
	assert_float_equal(r.median, 0.91, EPS);
	assert_float_equal(r.hi, 0.92, EPS);
	assert_false(r.noise);
	assert_string_equal(bench_ratio_mark(&r), "");
}

/* Fewer than five rounds: no interval reaches 90%, so the ratio is not judged, however
 * far from 1.0 it is (one round read as a result is what the issue complained about). */
static void test_ratio_too_few_rounds_not_judged(void **state)
{
	const double ref[] = {100, 100, 100, 100}, x[] = {84, 85, 83, 86};
	struct bench_ratio r;

	(void)state;
	bench_ratio(x, ref, NULL, NULL, 4, &r);
	assert_false(r.judged);
	assert_false(r.noise);
	assert_float_equal(r.median, 0.845, EPS);
	assert_string_equal(bench_ratio_mark(&r), "?");
	bench_ratio(x, ref, NULL, NULL, 1, &r);
	assert_string_equal(bench_ratio_mark(&r), "?");
}

/* Eight rounds: the interval drops the extreme ratio at each end (k = 2, 93%), so one
 * outlier round does not make a real difference look like noise. */
static void test_ratio_interval_drops_outliers(void **state)
{
	const double ref[8] = {100, 100, 100, 100, 100, 100, 100, 100};
	const double x[8] = {95, 96, 50, 97, 120, 97, 98, 99};
	struct bench_ratio r;

	(void)state;
	bench_ratio(x, ref, NULL, NULL, 8, &r);
	assert_true(r.judged);
	assert_float_equal(r.lo, 0.95, EPS);
	assert_float_equal(r.hi, 0.99, EPS);
	assert_false(r.noise);
}

/* Only rounds in which both rows ran are paired: a failed run leaves no hole read as 0. */
static void test_ratio_pairs_rounds_both_ran(void **state)
{
	const double ref[] = {100, 100, 100, 100, 100, 100, 0};
	const double x[] = {101, 0, 99, 102, 98, 100, 100};
	const bool has[] = {true, false, true, true, true, true, true};
	const bool has_ref[] = {true, true, true, true, true, true, false};
	struct bench_ratio r;

	(void)state;
	bench_ratio(x, ref, has, has_ref, 7, &r);
	assert_int_equal(r.n, 5);
	assert_float_equal(r.median, 1.0, EPS);
	assert_float_equal(r.lo, 0.98, EPS);
	assert_true(r.noise);
}

static struct bench_table fixed_table(void)
{
	const double ref[] = {100, 101, 99, 100, 100}, near[] = {98, 100, 100, 99, 99};
	const double slow[] = {60, 61, 59, 62, 60};
	struct bench_table t = {
	    .title = {"SEQ1M Q8T1 MiB/s", "RND4K Q32T1 MiB/s"}, .rounds = 5, .nrows = 4};
	const double *rows[3] = {ref, near, slow};
	const char *labels[3] = {"off", "cold", "all (hot on, recorded)"};

	for (int i = 0; i < 3; i++) {
		struct bench_row *r = &t.row[i];

		r->label = labels[i];
		r->has_ratio = true;
		for (int c = 0; c < BENCH_NCOLS; c++)
			bench_stat(rows[i], 5, &r->cell[c]);
		for (int c = 0; c < 2; c++)
			bench_ratio(rows[i], ref, NULL, NULL, 5, &r->ratio[c]);
	}
	t.row[1].recorded = false;
	t.row[1].lost = 99; /* not recorded: not shown */
	t.row[2].recorded = true;
	t.row[2].lost = 1841;
	t.row[3].label = "fio io_uring (1 run)";
	for (int c = 0; c < BENCH_NCOLS; c++)
		bench_stat(ref, 1, &t.row[3].cell[c]);
	return t;
}

static char *render(const struct bench_table *t, bool json)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	if (json)
		bench_table_json(f, t, NULL);
	else
		bench_table_print(f, t);
	fclose(f);
	return buf;
}

/* The line of out that starts with prefix (a copy), or NULL. */
static char *line_of(const char *out, const char *prefix)
{
	for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, prefix, strlen(prefix)))
			return strndup(l, strcspn(l, "\n"));
	return NULL;
}

/* One line per row with median ±spread cells; ratios with their marks; lost events only
 * on a recorded row and only when there were some; a legend that states the rule. */
static void test_table_text(void **state)
{
	struct bench_table t = fixed_table();
	char *out, *line;

	(void)state;
	out = render(&t, false);
	line = line_of(out, "flavour ");
	assert_non_null(line);
	assert_non_null(strstr(line, "| RND4K Q32T1 MiB/s |"));
	free(line);
	line = line_of(out, "off ");
	assert_non_null(line);
	assert_non_null(strstr(line, "| 100.0 ±1.0% |"));
	assert_non_null(strstr(line, "| 1.000 ~ / 1.000 ~"));
	free(line);
	line = line_of(out, "cold ");
	assert_non_null(line);
	assert_non_null(strstr(line, "| 0.990 ~ / 0.990 ~"));
	assert_null(strstr(line, "lost")); /* 99 lost, but not a recorded row */
	free(line);
	line = line_of(out, "all (hot on, recorded) ");
	assert_non_null(line);
	assert_non_null(strstr(line, "  60.0 ±2.5% |"));
	assert_non_null(strstr(line, "| 0.600   / 0.600  (1841 trace events lost)"));
	free(line);
	line = line_of(out, "fio io_uring (1 run) ");
	assert_non_null(line);
	assert_null(strstr(line, "±"));	  /* a single run has no spread */
	assert_null(strstr(line, " / ")); /* and no ratio */
	free(line);
	assert_non_null(strstr(out, "~ within the noise (the ratio's 90% interval"));
	free(out);

	t.row[2].lost = 0; /* nothing lost: nothing said */
	out = render(&t, false);
	assert_null(strstr(out, "lost"));
	free(out);
}

static void test_table_json(void **state)
{
	struct bench_table t = fixed_table();
	char *out;

	(void)state;
	out = render(&t, true);
	assert_non_null(strstr(out, "\"flavour\": \"cold\""));
	assert_non_null(strstr(out, "\"judged\": true, \"noise\": true"));
	assert_non_null(strstr(out, "\"judged\": true, \"noise\": false"));
	assert_non_null(strstr(out, "\"trace_lost\": 1841"));
	free(out);
}

/* The SVG: one bar per row and column, whiskers only where there is a spread. */
static void test_table_svg(void **state)
{
	struct bench_table t = fixed_table();
	char path[] = "/tmp/vs-table-XXXXXX", why[256], buf[16384];
	size_t n;
	FILE *f;
	int fd = mkstemp(path), bars = 0, whiskers = 0;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(bench_table_svg(path, &t, why, sizeof(why)), 0);
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	unlink(path);
	buf[n] = '\0';
	for (const char *p = buf; (p = strstr(p, "<rect x=")); p++)
		bars++;
	for (const char *p = buf; (p = strstr(p, "<path ")); p++)
		whiskers++;
	assert_int_equal(bars, 2 * 4);
	assert_int_equal(whiskers, 2 * 3);
	assert_non_null(strstr(buf, "</svg>"));
	assert_int_equal(bench_table_svg("/nonexistent/dir/x.svg", &t, why, sizeof(why)), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stat_median_and_spread),
	    cmocka_unit_test(test_ratio_noise_or_difference),
	    cmocka_unit_test(test_ratio_too_few_rounds_not_judged),
	    cmocka_unit_test(test_ratio_interval_drops_outliers),
	    cmocka_unit_test(test_ratio_pairs_rounds_both_ran),
	    cmocka_unit_test(test_table_text),
	    cmocka_unit_test(test_table_json),
	    cmocka_unit_test(test_table_svg),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
