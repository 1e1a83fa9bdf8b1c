/* SPDX-License-Identifier: MIT */
#ifndef VS_BENCH_TRACE_BENCH_H
#define VS_BENCH_TRACE_BENCH_H
#include <stddef.h>
#include <stdint.h>
/* The print-backend case lives in its own file, compiled as the print flavour. */
void vs_bench_loop_print(uint64_t n);
/* The LTTng-UST peer's loop, in libvioscope_bench_lttng.so (trace_bench_lttng.c). */
void vs_bench_loop_lttng(uint64_t n);
#define VS_BENCH_LTTNG_FILE "libvioscope_bench_lttng.so"
/* ... and whether a session enabled its tracepoint in this process. */
int vs_bench_lttng_enabled(void);
/* lttng_session.c: a session daemon of our own with the peer's tracepoint enabled
 * (0, or -1 with `why`), to start before the measuring process; and its end. */
int vs_bench_lttng_start(char *why, size_t whylen);
void vs_bench_lttng_stop(void);
/* `vioscope bench trace`: the cost of one trace event, case against case. */
int cmd_bench_trace(int argc, char **argv);
#endif
