/* SPDX-License-Identifier: MIT */
/*
 * The flavour table (`vioscope bench --flavours`, the demo): statistics over interleaved
 * rounds and the table drawn from them, as text, JSON or SVG.
 *
 * A cell is the median over the rounds with its spread: half the range (max - min),
 * relative to the median.  A ratio against the reference row (`off`) is the median of the
 * per-round ratios: each round runs every flavour once, so a round's ratio compares runs
 * made seconds apart, and drifts of the machine's load cancel out.  Its interval is the
 * distribution-free confidence interval of that median (the sign test: the k-th smallest
 * and k-th largest per-round ratio, for the largest k that still covers the median with
 * probability >= BENCH_CONFIDENCE).  The difference is within the noise (`~`) when that
 * interval holds 1.0; with fewer than BENCH_MIN_ROUNDS rounds there is no such interval
 * and the ratio is marked `?` (not judged).
 */
#ifndef VS_BENCH_TABLE_H
#define VS_BENCH_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_CONFIDENCE 0.90
#define BENCH_MIN_ROUNDS 5 /* the fewest for a >= 90% interval: [min, max] covers 93.75% */
#define BENCH_MAX_ROUNDS 64

struct bench_stat {
	int n;
	double median, min, max;
	double spread; /* (max - min) / 2 / median; 0 for n < 2 */
};
/* v[0..n-1] (left as is). */
void bench_stat(const double *v, int n, struct bench_stat *s);

struct bench_ratio {
	int n;		       /* rounds both rows ran in */
	double median, lo, hi; /* lo..hi: the interval (median, median when not judged) */
	bool judged;	       /* n >= BENCH_MIN_ROUNDS */
	bool noise;	       /* judged and lo <= 1 <= hi */
};
/* Per-round pairs: round r counts when has[r] and has_ref[r] (NULL: every round). */
void bench_ratio(const double *x, const double *ref, const bool *has, const bool *has_ref,
		 int rounds, struct bench_ratio *r);
/* "~" within the noise, "?" not judged, "" a difference. */
const char *bench_ratio_mark(const struct bench_ratio *r);

/* The table: two throughput columns (MiB/s), then IOPS and mean latency of the second. */
enum { BENCH_COL_A, BENCH_COL_B, BENCH_COL_IOPS, BENCH_COL_US, BENCH_NCOLS };
#define BENCH_TABLE_ROWS 8

struct bench_row {
	const char *label;
	struct bench_stat cell[BENCH_NCOLS];
	struct bench_ratio ratio[2]; /* columns A and B against the reference row */
	bool has_ratio;		     /* a flavour row (not the raw fio row) */
	bool recorded;		     /* trace events were recorded: lost is meaningful */
	uint64_t lost;		     /* trace events lost while recording (all rounds) */
};

struct bench_table {
	char title[2][48]; /* "SEQ1M Q8T1 MiB/s" ... */
	int rounds;	   /* asked for */
	int nrows;
	struct bench_row row[BENCH_TABLE_ROWS];
};

void bench_table_print(FILE *f, const struct bench_table *t);
/* head (may be NULL) prints the first members of the object (the build and command line). */
void bench_table_json(FILE *f, const struct bench_table *t, void (*head)(FILE *f));
/* Bars of the two throughput columns with whiskers from min to max; 0 or -errno (why). */
int bench_table_svg(const char *path, const struct bench_table *t, char *why, size_t whylen);

#endif
