/* SPDX-License-Identifier: MIT */
#ifndef VS_BENCH_TRACE_BENCH_H
#define VS_BENCH_TRACE_BENCH_H
#include <stdint.h>
/* The print-backend case lives in its own file, compiled as the print flavour. */
void vs_bench_loop_print(uint64_t n);
/* `vioscope bench trace`: the cost of one trace event, case against case. */
int cmd_bench_trace(int argc, char **argv);
#endif
