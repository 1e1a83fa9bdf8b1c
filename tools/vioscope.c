/* SPDX-License-Identifier: MIT */
/* vioscope: one command, subcommands per job.  Each command registers itself
 * (VS_CLI_COMMAND): this file only finds them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vioscope/trace.h>

#include "tracetools/tracetools.h"
#include "util/util.h"

/* This process's trace file is made only for commands that do something worth
 * tracing: `vioscope trace ...`, help and bad command lines read or print and leave
 * no file behind, so `trace list` never shows the tool looking at it. */
const int vs__file_on_demand = 1;

static int by_order(const void *a, const void *b)
{
	const struct vs_cli_command *x = *(const struct vs_cli_command *const *)a;
	const struct vs_cli_command *y = *(const struct vs_cli_command *const *)b;

	return (x->order > y->order) - (x->order < y->order);
}

static void usage(FILE *f)
{
	const struct vs_cli_command *cmds, *sorted[32];
	size_t n;

	vs_cli_commands(&cmds, &n);
	if (n > sizeof sorted / sizeof sorted[0])
		n = sizeof sorted / sizeof sorted[0];
	for (size_t i = 0; i < n; i++)
		sorted[i] = &cmds[i];
	qsort(sorted, n, sizeof sorted[0], by_order);
	fprintf(f, "usage: vioscope COMMAND [ARGS]   (this binary: %s flavour)\n\ncommands:\n",
		vs_trace_flavour());
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-8s %s\n", sorted[i]->name, sorted[i]->help);
	fprintf(f, "\n`vioscope COMMAND --help` for a command's options.\n");
}

int main(int argc, char **argv)
{
	const struct vs_cli_command *cmds;
	size_t n;

	vs_cli_argv = argv;
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("vioscope %s (%s flavour)\n", VIOSCOPE_VERSION, vs_trace_flavour());
		return 0;
	}
	vs_cli_commands(&cmds, &n);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			if (!cmds[i].inspects)
				vs__file_start(); /* it says why if it cannot */
			return cmds[i].fn(argc - 1, argv + 1);
		}
	fprintf(stderr, "vioscope: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
