/* SPDX-License-Identifier: MIT */
/* What the files of `vioscope trace` share (cmd_trace*.c). */
#ifndef VS_TOOLS_CMD_TRACE_H
#define VS_TOOLS_CMD_TRACE_H

#include <stdio.h>

#include "tracetools/tracetools.h"

/* "vioscope trace SUB: WHY" on stderr, WHY escaped: it may quote a file's contents. */
void trace_error(const char *sub, const char *why);
/* The exit status (enum vs_exit) of an operation that failed with rc (-errno): could not
 * run when it could not start on what it was given (no such process or file, a file that
 * is not ours, an output that exists, a recording someone else has), else failed. */
int trace_exit_status(int rc);
/* A PID|SHMFILE argument: a number that is no PID ("0", "-5") is a usage error (said,
 * and 2 returned); anything else is a pid or a path (0). */
int trace_target_arg(const char *sub, const char *arg);
/* Open a PID|SHMFILE for sub; 0, or the exit status (said why). */
int trace_open_target(const char *sub, const char *arg, struct vs_shm *s);
/* Is the process of an opened trace file running? */
bool trace_owner_running(const struct vs_shm *s);

/* `trace list` and `trace show` (cmd_trace_show.c); `trace latency` is in commands.h. */
int trace_list(int argc, char **argv);
int trace_show(int argc, char **argv);

#endif
