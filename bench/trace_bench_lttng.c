/* SPDX-License-Identifier: MIT */
/*
 * libvioscope_bench_lttng.so (built when liblttng-ust-dev is installed): the LTTng-UST
 * peer of `vioscope bench trace --peers`, a tracepoint with two integer fields in the
 * loop the binary-2-ints case runs.  A module that the benchmark loads only for
 * --peers, so that no other vioscope command carries liblttng-ust (its constructor
 * starts threads and looks for a session daemon).
 */
#define TRACEPOINT_CREATE_PROBES
#define TRACEPOINT_DEFINE
#include "bench/trace_bench_lttng_tp.h"

#include "bench/trace_bench.h"

__attribute__((visibility("default"))) void vs_bench_loop_lttng(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		tracepoint(vioscope_bench, two_ints, (unsigned)i, 42u);
		__asm__ __volatile__("" ::: "memory");
	}
}

__attribute__((visibility("default"))) int vs_bench_lttng_enabled(void)
{
	return tracepoint_enabled(vioscope_bench, two_ints) != 0;
}
