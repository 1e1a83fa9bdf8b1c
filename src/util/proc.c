/* SPDX-License-Identifier: MIT */
/* Child servers (a `vioscope target` started by a benchmark, a check or a test): start one
 * and wait until it listens, stop it and tell how it ended. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

int vs_spawn_server(char *const argv[], const char *sock, unsigned timeout_ms, bool show_stderr,
		    int *pid, char *why, size_t whylen)
{
	uint64_t end = vs_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	int status;
	pid_t p;

	*pid = -1;
	unlink(sock); /* a killed server leaves its socket behind */
	p = fork();
	if (p < 0)
		return vs_fail(why, whylen, -errno, "fork: %s", strerror(errno));
	if (p == 0) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the parent */
		if (fd >= 0) {
			dup2(fd, 1);
			if (!show_stderr)
				dup2(fd, 2);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	for (;;) {
		struct stat st;

		if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode)) {
			*pid = p;
			return 0;
		}
		if (waitpid(p, &status, WNOHANG) == p)
			return vs_fail(why, whylen, -EIO,
				       "%s exited before listening on %s (status %d): run it by "
				       "hand to see why",
				       argv[0], sock, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		if (vs_mono_ns() > end)
			break;
		usleep(5000);
	}
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	return vs_fail(why, whylen, -ETIMEDOUT, "%s did not listen on %s within %u ms", argv[0],
		       sock, timeout_ms);
}

int vs_child_stop(int pid, int sig, unsigned timeout_ms)
{
	uint64_t end = vs_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	int status;

	if (pid <= 0)
		return -EINVAL;
	kill(pid, sig);
	for (;;) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (vs_mono_ns() > end)
			break;
		usleep(2000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return -ETIMEDOUT;
}
