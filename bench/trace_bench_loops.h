/* SPDX-License-Identifier: MIT */
/* The measured loops of `vioscope bench trace` that have trace sites, compiled twice
 * from this one source: into the program (trace_bench.c) and into a shared library
 * (trace_bench_so.c), so the two can be compared site for site. */
#ifndef VS_BENCH_TRACE_BENCH_LOOPS_H
#define VS_BENCH_TRACE_BENCH_LOOPS_H

#include <stdint.h>

#include <vioscope/trace.h>

#define BARRIER() __asm__ __volatile__("" ::: "memory")

static __attribute__((unused)) void loop_disabled(uint64_t n)
{
	/* BENCH is enabled only up to info level here: this verbose site is compiled in,
	 * switched off, and re-tested each iteration (the barrier forbids hoisting). */
	for (uint64_t i = 0; i < n; i++) {
		VS_VERBOSE(BENCH, "disabled %llu %d", (unsigned long long)i, 7);
		BARRIER();
	}
}

static __attribute__((unused)) void loop_args0(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		VS_INFO(BENCH, "event without arguments");
		BARRIER();
	}
}

static __attribute__((unused)) void loop_args2(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		VS_INFO(BENCH, "event %u %u", (unsigned)i, 42u);
		BARRIER();
	}
}

static __attribute__((unused)) void loop_args4(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		VS_INFO(BENCH, "event %u %u %u %u", (unsigned)i, 1u, 2u, 3u);
		BARRIER();
	}
}

/* A 16-byte string the compiler cannot see through (its length and bytes are read at
 * run time, as a program's strings are). */
static const char *volatile loop_string16 = "sixteen-chars-ab";

static __attribute__((unused)) void loop_string(uint64_t n)
{
	const char *s = loop_string16;
	for (uint64_t i = 0; i < n; i++) {
		VS_INFO(BENCH, "event %u %s", (unsigned)i, s);
		BARRIER();
	}
}

/* The shared library's loops, as it exports them. */
struct vs_bench_so_loops {
	void (*disabled)(uint64_t n);
	void (*args2)(uint64_t n);
	void (*string)(uint64_t n);
};
#define VS_BENCH_SO_FILE   "libvioscope_bench_so.so"
#define VS_BENCH_SO_SYMBOL "vs_bench_so_loops"

#endif
