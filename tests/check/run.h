/* SPDX-License-Identifier: MIT */
/* Running `vioscope check ...` (or any program) with its output captured, for the tests. */
#ifndef TESTS_CHECK_RUN_H
#define TESTS_CHECK_RUN_H

#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run argv (NULL-terminated) with stdout and stderr into a buffer (*out, malloc'd, NUL
 * terminated, echoed to our stdout); its exit status, or -1.  Killed after timeout_s. */
static inline int run_capture(char *const argv[], char **out, unsigned timeout_s)
{
	char path[] = "/tmp/vs-check-out-XXXXXX";
	int fd = mkstemp(path), status = -1;
	pid_t p;
	FILE *f;
	long len;

	*out = NULL;
	if (fd < 0)
		return -1;
	unlink(path);
	p = fork();
	if (p == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		alarm(timeout_s); /* a hung check fails the test instead of hanging it */
		execv(argv[0], argv);
		_exit(127);
	}
	if (p > 0)
		waitpid(p, &status, 0);
	f = fdopen(fd, "r");
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	*out = calloc(1, (size_t)len + 1);
	if (*out && fread(*out, 1, (size_t)len, f) != (size_t)len)
		(*out)[0] = 0;
	fclose(f);
	printf("%s", *out ? *out : "");
	if (p < 0)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#endif
