/* SPDX-License-Identifier: MIT */
/* `vioscope bench ...` */
#include <stdio.h>
#include <string.h>

#include "tools/commands.h"

int cmd_bench(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "trace"))
		return cmd_bench_trace(argc - 1, argv + 1);
	fprintf(stderr, "usage: vioscope bench trace [--json] [--quick]\n");
	return 2;
}
