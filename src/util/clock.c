/* SPDX-License-Identifier: MIT */
/* The TSC as a clock: whether to use it, its rate, and the calibration points taken on it.
 * One copy for the trace runtime (built into it: it is installed without the rest of util)
 * and the target's statistics. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "util/util.h"

static bool tsc_invariant(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned a, b, c, d;

	if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007)
		return false;
	__get_cpuid(0x80000007, &a, &b, &c, &d);
	return (d >> 8) & 1;
#else
	return false;
#endif
}

bool vs_tsc_clock(const char *force_env)
{
	const char *force = getenv(force_env);

	if (force && strcmp(force, "monotonic") == 0)
		return false;
	return tsc_invariant();
}

static struct {
	pthread_once_t once;
	double ns_per_tick;
} rate = {.once = PTHREAD_ONCE_INIT};

/* Over 5 ms: an error of about 1e-5, the pairs being read within ~50 ns of each other. */
static void rate_measure(void)
{
	uint64_t t0, n0, t1, n1, real;
	struct timespec ts = {.tv_nsec = 5000000};

	if (!tsc_invariant())
		return;
	vs_clock_sample(true, &t0, &n0, &real);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	vs_clock_sample(true, &t1, &n1, &real);
	if (t1 > t0 && n1 > n0)
		rate.ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
}

double vs_tsc_ns_per_tick(void)
{
	pthread_once(&rate.once, rate_measure);
	return rate.ns_per_tick;
}

void vs_clock_sample(bool tsc, uint64_t *ts, uint64_t *mono, uint64_t *real)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 8; i++) {
		struct timespec m, r;
		uint64_t t0 = vs_rdtsc();
		clock_gettime(CLOCK_MONOTONIC, &m);
		clock_gettime(CLOCK_REALTIME, &r);
		uint64_t t1 = vs_rdtsc();
		uint64_t m_ns = (uint64_t)m.tv_sec * 1000000000ull + (uint64_t)m.tv_nsec;
		if (i && t1 - t0 >= best)
			continue; /* (without the TSC, the first sample is kept) */
		best = t1 - t0;
		*ts = tsc ? t0 + (t1 - t0) / 2 : m_ns;
		*mono = m_ns;
		*real = (uint64_t)r.tv_sec * 1000000000ull + (uint64_t)r.tv_nsec;
		if (!tsc)
			return;
	}
}
