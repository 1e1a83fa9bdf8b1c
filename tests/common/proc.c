/* SPDX-License-Identifier: MIT */
/* A command run to its end: see proc.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "deadline.h"
#include "proc.h"

int proc_run(const char *const argv[], char *why, size_t whylen, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	size_t got = 0;
	int pfd[2], st, rc;
	pid_t pid;

	if (whylen < 1)
		return -EINVAL;
	why[0] = 0;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(pfd[0]);
		close(pfd[1]);
		return rc;
	}
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);

		if (null >= 0)
			dup2(null, 1);
		dup2(pfd[1], 2);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(pfd[1]);
	/* Its stderr until it closes it (at exit), then its status: both within the deadline. */
	for (;;) {
		struct pollfd p = {.fd = pfd[0], .events = POLLIN};
		char sink[512];
		ssize_t n;

		if (poll(&p, 1, ms_left(deadline)) != 1) {
			close(pfd[0]);
			goto late;
		}
		if (got + 1 < whylen)
			n = read(pfd[0], why + got, whylen - 1 - got);
		else
			n = read(pfd[0], sink, sizeof(sink)); /* past what err holds: dropped */
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (got + 1 < whylen) {
			got += (size_t)n;
			why[got] = 0;
		}
	}
	close(pfd[0]);
	while ((rc = waitpid(pid, &st, WNOHANG)) == 0) {
		if (!ms_left(deadline))
			goto late;
		poll(NULL, 0, 1);
	}
	if (rc < 0)
		return -errno;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
late:
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -ETIMEDOUT;
}
