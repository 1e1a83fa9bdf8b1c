/* SPDX-License-Identifier: MIT */
/* Runtime entry points for tools and benchmarks inside this repository. */
#ifndef VS_TRACE_RUNTIME_H
#define VS_TRACE_RUNTIME_H

/* Set up the control block and rings (runs before main(); idempotent). */
int vs__runtime_init(void);
/* Send the print backend's output to a file (benchmarks). */
int vs__print_to(const char *path);

#endif
