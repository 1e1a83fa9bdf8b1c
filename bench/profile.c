/* SPDX-License-Identifier: MIT */
/* Benchmark profiles ("seq1m-q8t1", "rnd4k-q32t16") and latency statistics. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/storage.h"

int bench_profile_parse(const char *s, struct bench_profile *p, char *why, size_t whylen)
{
	char kind[4];
	unsigned long size, q, t;
	char unit;
	int n = 0;

	memset(p, 0, sizeof *p);
	if (sscanf(s, "%3[a-z]%lu%c-q%lut%lu%n", kind, &size, &unit, &q, &t, &n) != 5 ||
	    s[n] != '\0') {
		snprintf(why, whylen,
			 "profile '%s': expected seqNm-qQtT or rndNk-qQtT, e.g. "
			 "seq1m-q8t1, rnd4k-q32t16",
			 s);
		return -EINVAL;
	}
	if (strcmp(kind, "seq") && strcmp(kind, "rnd")) {
		snprintf(why, whylen, "profile '%s': '%s' is neither seq nor rnd", s, kind);
		return -EINVAL;
	}
	unsigned long mult = unit == 'k' ? 1024 : unit == 'm' ? 1024 * 1024 : 0;
	if (!mult) {
		snprintf(why, whylen, "profile '%s': block size unit must be k or m", s);
		return -EINVAL;
	}
	if (size == 0 || size * mult > 64ul << 20 || q == 0 || q > 1024 || t == 0 || t > 256) {
		snprintf(why, whylen,
			 "profile '%s': block size 1k-64m, queue depth 1-1024, threads "
			 "1-256",
			 s);
		return -EINVAL;
	}
	snprintf(p->name, sizeof p->name, "%s", s);
	p->random = kind[0] == 'r';
	p->block = (uint32_t)(size * mult);
	p->depth = (unsigned)q;
	p->threads = (unsigned)t;
	return 0;
}

/* Log-linear histogram: 64 sub-buckets per power of two of nanoseconds, so a
 * percentile is within 1.6% of the truth whatever the range. */
static unsigned bucket_of(uint64_t ns)
{
	if (ns < 64)
		return (unsigned)ns;
	unsigned e = 63u - (unsigned)__builtin_clzll(ns); /* >= 6 */
	unsigned sub = (unsigned)(ns >> (e - 6)) & 63;
	unsigned b = (e - 5) * 64 + sub;
	return b < BENCH_HIST_BUCKETS ? b : BENCH_HIST_BUCKETS - 1;
}

static uint64_t bucket_value(unsigned b)
{
	if (b < 64)
		return b;
	unsigned e = b / 64 + 5, sub = b % 64;
	return ((uint64_t)(64 + sub) << (e - 6)) + ((1ull << (e - 6)) >> 1);
}

void bench_hist_add(struct bench_hist *h, uint64_t ns)
{
	h->count[bucket_of(ns)]++;
	h->n++;
	h->sum += ns;
}

void bench_hist_merge(struct bench_hist *into, const struct bench_hist *from)
{
	for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++)
		into->count[i] += from->count[i];
	into->n += from->n;
	into->sum += from->sum;
}

double bench_hist_percentile_us(const struct bench_hist *h, double pct)
{
	if (!h->n)
		return 0;
	uint64_t want = (uint64_t)ceil(pct / 100.0 * (double)h->n), seen = 0;
	if (want == 0)
		want = 1;
	for (unsigned i = 0; i < BENCH_HIST_BUCKETS; i++) {
		seen += h->count[i];
		if (seen >= want)
			return (double)bucket_value(i) / 1000.0;
	}
	return 0;
}

double bench_hist_mean_us(const struct bench_hist *h)
{
	return h->n ? (double)h->sum / (double)h->n / 1000.0 : 0;
}

void bench_result_print_header(FILE *f)
{
	fprintf(f, "%-16s %-5s %10s %10s %10s %10s %10s %10s\n", "profile", "rw", "MiB/s", "IOPS",
		"mean us", "p50 us", "p99 us", "p99.9 us");
}

void bench_result_print(FILE *f, const struct bench_result *r)
{
	fprintf(f, "%-16s %-5s %10.1f %10.0f %10.1f %10.1f %10.1f %10.1f\n", r->profile, r->rw,
		r->mib_s, r->iops, r->mean_us, r->p50_us, r->p99_us, r->p999_us);
	if (r->idle_cpu >= 0)
		fprintf(f, "  then idle %.1f s, connected: the target used %.2f%% of a CPU\n",
			r->seconds_idle, 100 * r->idle_cpu);
	if (r->cpu_us < 0)
		return;
	if (!strncmp(r->rw, "fio", 3)) {
		fprintf(f, "  CPU per request: fio %.1f us\n", r->cpu_us);
		return;
	}
	fprintf(f, "  CPU per request: initiator (%s) %.1f us",
		r->interrupt ? "interrupt" : "polling", r->cpu_us);
	if (r->target_cpu_us >= 0)
		fprintf(f, ", target %.1f us", r->target_cpu_us);
	fputc('\n', f);
}

/* What a result says beyond its row: failed requests, a starved poller, an interruption. */
void bench_result_notes(FILE *f, const struct bench_result *r)
{
	if (r->errors)
		fprintf(f, "  %llu requests failed; the first: %s\n", (unsigned long long)r->errors,
			r->failure[0] ? r->failure : "(not recorded)");
	if (r->starved)
		fprintf(f,
			"  the polling initiator was starved: its threads waited for a CPU %.0f%% "
			"of the run (other processes wanted the CPUs), and its spinning took CPU "
			"time the target needed; the figures show the machine's load, not the "
			"stack: --interrupt serves a busy machine\n",
			100 * r->cpu_wait);
	if (r->interrupted)
		fprintf(f, "  interrupted: measured over the %.2f s before the signal\n",
			r->seconds);
}

void bench_result_json(FILE *f, const struct bench_result *r)
{
	fprintf(f,
		"{\"profile\": \"%s\", \"rw\": \"%s\", \"mib_s\": %.2f, \"iops\": %.1f, "
		"\"mean_us\": %.2f, \"p50_us\": %.2f, \"p99_us\": %.2f, \"p999_us\": %.2f, "
		"\"errors\": %llu, \"seconds\": %.3f",
		r->profile, r->rw, r->mib_s, r->iops, r->mean_us, r->p50_us, r->p99_us, r->p999_us,
		(unsigned long long)r->errors, r->seconds);
	if (r->idle_cpu >= 0)
		fprintf(f, ", \"idle_cpu\": %.4f", r->idle_cpu);
	if (r->cpu_us >= 0)
		fprintf(f, ", \"cpu_us\": %.2f", r->cpu_us);
	if (r->target_cpu_us >= 0)
		fprintf(f, ", \"target_cpu_us\": %.2f", r->target_cpu_us);
	if (strcmp(r->rw, "read") == 0 || strcmp(r->rw, "write") == 0)
		fprintf(f, ", \"initiator\": \"%s\"", r->interrupt ? "interrupt" : "poll");
	if (r->cpu_wait >= 0)
		fprintf(f, ", \"initiator_cpu_wait\": %.4f, \"starved\": %s", r->cpu_wait,
			r->starved ? "true" : "false");
	if (r->interrupted)
		fprintf(f, ", \"interrupted\": true");
	if (r->errors && r->failure[0]) {
		fputs(", \"first_failure\": \"", f);
		for (const char *c = r->failure; *c; c++)
			if (*c == '"' || *c == '\\')
				fprintf(f, "\\%c", *c);
			else if ((unsigned char)*c >= 0x20)
				fputc(*c, f);
		fputc('"', f);
	}
	fprintf(f, "}");
}

/* Pull a number out of a flat JSON object by key: enough for our own output and
 * for the few fields of fio's that we read. */
double bench_json_number(const char *json, const char *key, double dflt)
{
	char pat[80];
	snprintf(pat, sizeof pat, "\"%s\"", key);
	const char *p = strstr(json, pat);
	if (!p)
		return dflt;
	p = strchr(p + strlen(pat), ':');
	if (!p)
		return dflt;
	char *end;
	double v = strtod(p + 1, &end);
	return end == p + 1 ? dflt : v;
}
