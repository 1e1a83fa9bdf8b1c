/* SPDX-License-Identifier: MIT */
/* What the CLI's command files share beyond util's command table. */
#ifndef VS_TOOLS_COMMANDS_H
#define VS_TOOLS_COMMANDS_H

#include <stdbool.h>
#include <stdio.h>

/* `vioscope --help`: the commands and what they share (tools/cmd_help.c). */
void cli_usage(FILE *f);
/* Tell systemd (a Type=notify unit) the service's state, e.g. "READY=1\nSTATUS=...":
 * 0 when sent or when not started by systemd ($NOTIFY_SOCKET unset), else -errno
 * (tools/sd_notify.c). */
int cli_sd_notify(const char *state);

/* The storage part of `vioscope demo` (tools/cmd_demo_storage.c). */
struct demo_opts {
	unsigned rounds; /* of the flavour table */
	double seconds;	 /* per profile and round */
	bool keep_image; /* leave the 1 GiB image in /dev/shm (and say where) */
	const char *svg; /* also draw the table here, or NULL */
};
int demo_storage(const char *bindir, const char *out, const struct demo_opts *o);
/* `vioscope trace latency` (tools/cmd_trace_latency.c). */
int trace_latency(int argc, char **argv);

#endif
