/* SPDX-License-Identifier: MIT */
/*
 * trace_isolate PROGRAM [ARGS...]
 *
 * Runs a test program that is itself traced in a fresh VIOSCOPE_TRACE_DIR: the
 * trace runtime creates its file before main(), so the directory must be set
 * before the program starts.  Afterwards the directory must be empty (a process
 * that exits normally removes its trace file); it is removed either way.
 * Exit status: the program's (128 + signal if killed), or 1 if it left files.
 * Not traced itself: it links no trace runtime.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

int main(int argc, char **argv)
{
	char dir[512], env[600];
	int made;

	if (argc < 2) {
		fprintf(stderr, "usage: trace_isolate PROGRAM [ARGS...]\n");
		return 2;
	}
	if ((made = tmpdir_make(dir, sizeof dir, NULL, "isolate")) < 0) {
		fprintf(stderr, "trace_isolate: scratch directory: %s\n", strerror(-made));
		return 1;
	}
	snprintf(env, sizeof env, "VIOSCOPE_TRACE_DIR=%s", dir);
	const char *const envs[] = {env, NULL};
	int rc = th_run((const char *const *)argv + 1, envs, NULL, NULL);
	int left = th_count_files(dir, NULL);
	if (rc == 0 && left != 0) {
		fprintf(stderr, "trace_isolate: %s left %d file(s) in %s\n", argv[1], left, dir);
		rc = 1;
	}
	tmpdir_remove(dir);
	return rc < 0 ? 1 : rc;
}
