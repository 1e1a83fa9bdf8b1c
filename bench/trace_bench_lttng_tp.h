/* SPDX-License-Identifier: MIT */
/* The LTTng-UST tracepoint `vioscope bench trace --peers` compares ours with: two
 * integer fields, as the binary-2-ints case records. */
#undef TRACEPOINT_PROVIDER
#define TRACEPOINT_PROVIDER vioscope_bench

#undef TRACEPOINT_INCLUDE
#define TRACEPOINT_INCLUDE "bench/trace_bench_lttng_tp.h"

#if !defined(VS_BENCH_TRACE_BENCH_LTTNG_TP_H) || defined(TRACEPOINT_HEADER_MULTI_READ)
#define VS_BENCH_TRACE_BENCH_LTTNG_TP_H

#include <lttng/tracepoint.h>

TRACEPOINT_EVENT(vioscope_bench, two_ints, TP_ARGS(unsigned, a, unsigned, b),
		 TP_FIELDS(ctf_integer(unsigned, a, a) ctf_integer(unsigned, b, b)))

#endif

#include <lttng/tracepoint-event.h>
