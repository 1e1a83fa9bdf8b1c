/* SPDX-License-Identifier: MIT */
/* What the CLI's command files share beyond util's command table. */
#ifndef VS_TOOLS_COMMANDS_H
#define VS_TOOLS_COMMANDS_H

#include <stdbool.h>

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
