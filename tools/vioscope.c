/* SPDX-License-Identifier: MIT */
/* vioscope: one command, subcommands per job.  Each command registers itself
 * (VS_CLI_COMMAND): this file only finds them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vioscope/trace.h>

#include "tools/commands.h"
#include "tracetools/tracetools.h"
#include "util/util.h"

/* This process's trace file is made only for commands that do something worth
 * tracing: `vioscope trace ...`, help and bad command lines read or print and leave
 * no file behind, so `trace list` never shows the tool looking at it. */
const int vs__file_on_demand = 1;

/* `CMD --version` and `CMD SUB --version` of a command whose options are not yet parsed
 * from its help (vs_cli_next answers --version for those that are). */
static bool asks_version(const struct vs_cli_command *c, int argc, char **argv)
{
	if (vs_cli_help_find(c->name))
		return false;
	return (argc == 3 && !strcmp(argv[2], "--version")) ||
	       (argc == 4 && argv[2][0] != '-' && !strcmp(argv[3], "--version"));
}

int main(int argc, char **argv)
{
	const struct vs_cli_command *cmds;
	size_t n;

	/* A copy: getopt_long reorders the argv a command parses, and every --json output
	 * gives the command line as it was typed. */
	vs_cli_argv = calloc((size_t)argc + 1, sizeof(*vs_cli_argv));
	if (!vs_cli_argv)
		return VS_EXIT_CANNOT_RUN;
	memcpy(vs_cli_argv, argv, (size_t)argc * sizeof(*argv));
	vs_cli_flavour = vs_trace_flavour();
	if (argc < 2) {
		cli_usage(stderr);
		return VS_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		cli_usage(stdout);
		return VS_EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		vs_cli_version_print(stdout);
		return VS_EXIT_OK;
	}
	vs_cli_commands(&cmds, &n);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			if (asks_version(&cmds[i], argc, argv)) {
				vs_cli_version_print(stdout);
				return VS_EXIT_OK;
			}
			if (!cmds[i].inspects)
				vs__file_start(); /* it says why if it cannot */
			return cmds[i].fn(argc - 1, argv + 1);
		}
	fprintf(stderr, "vioscope: unknown command '%s' (`vioscope --help` lists them)\n", argv[1]);
	return VS_EXIT_USAGE;
}
