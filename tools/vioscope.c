/* SPDX-License-Identifier: MIT */
/* vioscope: one command, subcommands per job. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "tools/commands.h"

static const struct command commands[] = {
	{ "trace", cmd_trace, "list, enable, record, dump, decode and clean traces" },
	{ "bench", cmd_bench, "benchmarks (`vioscope bench trace`)" },
	{ "demo", cmd_demo, "a small traced workload, recorded and decoded" },
	{ "target", cmd_target, "vhost-user-scsi target (device)" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: vioscope COMMAND [ARGS]   (this binary: %s flavour)\n\ncommands:\n",
		vs_trace_flavour());
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		fprintf(f, "  %-8s %s\n", commands[i].name, commands[i].help);
	fprintf(f, "\n`vioscope COMMAND --help` for a command's options.\n");
}

char **vs_main_argv;

void vs_self_exe(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	buf[n > 0 ? n : 0] = '\0';
}

int main(int argc, char **argv)
{
	vs_main_argv = argv;
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
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].fn(argc - 1, argv + 1);
	fprintf(stderr, "vioscope: unknown command '%s'\n\n", argv[1]);
	usage(stderr);
	return 2;
}
