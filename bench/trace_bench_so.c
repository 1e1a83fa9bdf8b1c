/* SPDX-License-Identifier: MIT */
/* libvioscope_bench_so.so: the loops of trace_bench_loops.h in a shared library that
 * `vioscope bench trace` loads, so a site in a shared library is measured beside the
 * same site in the program.  Same provider (vioscope) and flags as the program. */
#include "bench/trace_bench_loops.h"

__attribute__((visibility("default"))) const struct vs_bench_so_loops vs_bench_so_loops = {
    .disabled = loop_disabled,
    .args2 = loop_args2,
    .string = loop_string,
};
