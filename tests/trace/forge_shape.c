/* SPDX-License-Identifier: MIT */
/*
 * trace_forge_shape: writes the hostile capture shapes of forge.h to a file, to measure
 * the tools on them (docs/SECURITY.md, "Trace files and capture files"):
 *   trace_forge_shape threads N K FILE          N threads of K events each, interleaved
 *   trace_forge_shape busy N M first|last FILE  N one-event threads, M more of one
 *   trace_forge_shape requests N FILE           2N requests: N never completed, N of one tag
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge.h"
#include "helpers.h"

static int usage(void)
{
	fputs("usage: trace_forge_shape threads N K FILE | busy N M first|last FILE | requests N "
	      "FILE\n",
	      stderr);
	return 2;
}

int main(int argc, char **argv)
{
	struct fbuf cap = {0};
	const char *file;

	if (argc == 5 && !strcmp(argv[1], "threads")) {
		forge_shape_threads(&cap, (unsigned)strtoul(argv[2], NULL, 0),
				    (unsigned)strtoul(argv[3], NULL, 0));
		file = argv[4];
	} else if (argc == 6 && !strcmp(argv[1], "busy")) {
		forge_shape_busy_thread(&cap, (unsigned)strtoul(argv[2], NULL, 0),
					(unsigned)strtoul(argv[3], NULL, 0),
					!strcmp(argv[4], "last"));
		file = argv[5];
	} else if (argc == 4 && !strcmp(argv[1], "requests")) {
		forge_shape_requests(&cap, (unsigned)strtoul(argv[2], NULL, 0));
		file = argv[3];
	} else {
		return usage();
	}
	int rc = th_write_file(file, cap.p, cap.len);
	fb_free(&cap);
	if (rc < 0)
		fprintf(stderr, "%s: %s\n", file, strerror(-rc));
	return rc < 0;
}
