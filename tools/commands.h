/* SPDX-License-Identifier: MIT */
#ifndef VS_TOOLS_COMMANDS_H
#define VS_TOOLS_COMMANDS_H

#include <stddef.h>

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};

/* Each returns the process exit status: 0 ok, 1 failure, 2 bad command line. */
int cmd_trace(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_bench_trace(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_target(int argc, char **argv);
/* The storage part of `vioscope demo` (tools/cmd_demo_storage.c). */
int demo_storage(const char *bindir, const char *out);

/* main()'s argv, for commands that re-execute themselves. */
extern char **vs_main_argv;
/* This binary's path (empty if unknown): commands run it again, or its siblings. */
void vs_self_exe(char *buf, size_t len);

/* Parse a non-negative decimal number of seconds; -1 when malformed. */
double parse_seconds(const char *s);

#endif
