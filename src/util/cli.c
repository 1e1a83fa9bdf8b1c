/* SPDX-License-Identifier: MIT */
/* What every `vioscope` command shares: option values with one error message format, the
 * table of registered commands, and the path of the running binary. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "util/util.h"

char **vs_cli_argv;

int vs_cli_uint(const char *cmd, const char *opt, const char *arg, uint64_t min, uint64_t max,
		uint64_t *out)
{
	if (vs_parse_u64(arg, min, max, out) == 0)
		return 0;
	fprintf(stderr, "%s: --%s '%s': expected a whole number in %llu..%llu\n", cmd, opt, arg,
		(unsigned long long)min, (unsigned long long)max);
	return -1;
}

int vs_cli_seconds(const char *cmd, const char *opt, const char *arg, double min, double max,
		   double *out)
{
	if (vs_parse_seconds(arg, out) == 0 && *out >= min && *out <= max)
		return 0;
	fprintf(stderr, "%s: --%s '%s': expected a time in %g..%g s (e.g. 30, 1.5, 500ms, 2m)\n",
		cmd, opt, arg, min, max);
	return -1;
}

/* The linker makes these for the section VS_CLI_COMMAND fills; weak, so that a program
 * linking this file without any command still links. */
extern const struct vs_cli_command __start_vs_cli_command_table[] __attribute__((weak));
extern const struct vs_cli_command __stop_vs_cli_command_table[] __attribute__((weak));

void vs_cli_commands(const struct vs_cli_command **first, size_t *count)
{
	*first = __start_vs_cli_command_table;
	*count = __start_vs_cli_command_table
		     ? (size_t)(__stop_vs_cli_command_table - __start_vs_cli_command_table)
		     : 0;
}

void vs_self_exe(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);

	buf[n > 0 ? n : 0] = '\0';
}

const char *vs_tmp_dir(void)
{
	const char *t = getenv("TMPDIR");

	return t && *t ? t : "/tmp";
}
