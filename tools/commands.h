/* SPDX-License-Identifier: MIT */
/* What the CLI's command files share beyond util's command table. */
#ifndef VS_TOOLS_COMMANDS_H
#define VS_TOOLS_COMMANDS_H

/* The storage part of `vioscope demo` (tools/cmd_demo_storage.c). */
int demo_storage(const char *bindir, const char *out);
/* `vioscope trace latency` (tools/cmd_trace_latency.c). */
int trace_latency(int argc, char **argv);

#endif
