/* SPDX-License-Identifier: MIT */
/* Compiled with VS_TRACE_PRINT=1 whatever the binary's flavour (tools/CMakeLists.txt),
 * so one binary can compare the print backend with the binary one. */
#include <vioscope/trace.h>

#include "bench/trace_bench.h"

void vs_bench_loop_print(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		VS_INFO(BENCH, "event %u %u", (unsigned)i, 42u);
		__asm__ __volatile__("" ::: "memory");
	}
}
