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

/* Keep the tail of what the child says on the pipe fd (non-blocking) in buf[len]. */
static void keep_tail(int fd, char *buf, size_t len)
{
	size_t have = strlen(buf);
	ssize_t n;

	for (;;) {
		if (have + 1 >= len) { /* full: the newer half stays */
			size_t keep = (len - 1) / 2;

			memmove(buf, buf + have - keep, keep);
			have = keep;
		}
		n = read(fd, buf + have, len - 1 - have);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	buf[have] = '\0';
}

/* What the child said, on one line: its lines joined by "; ", without the last newline. */
static void one_line(char *s)
{
	size_t n = strlen(s);

	while (n && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = '\0';
	for (char *p = s; *p; p++)
		if (*p == '\n' || *p == '\t' || (unsigned char)*p < 0x20)
			*p = *p == '\n' ? ';' : ' ';
}

int vs_spawn_server(char *const argv[], const char *sock, unsigned timeout_ms, bool show_stderr,
		    int *pid, char *why, size_t whylen)
{
	uint64_t end = vs_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
	char said[768] = "";
	int status, err[2] = {-1, -1};
	pid_t p;

	*pid = -1;
	unlink(sock); /* a killed server leaves its socket behind */
	/* Its stderr comes to us until it listens: when it fails to start, its own words are
	 * the reason.  Once it listens the pipe is closed (it ignores SIGPIPE, as the target
	 * does before its socket exists): what it says later is dropped. */
	if (!show_stderr && pipe2(err, O_CLOEXEC | O_NONBLOCK) < 0)
		return vs_fail(why, whylen, -errno, "pipe: %s", strerror(errno));
	p = fork();
	if (p < 0) {
		int rc = -errno;

		if (err[0] >= 0) {
			close(err[0]);
			close(err[1]);
		}
		return vs_fail(why, whylen, rc, "fork: %s", strerror(-rc));
	}
	if (p == 0) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the parent */
		if (fd >= 0)
			dup2(fd, 1);
		if (err[1] >= 0) {
			dup2(err[1], 2);
			fcntl(2, F_SETFL, 0); /* blocking for the child, whose writes are small */
		}
		execv(argv[0], argv);
		fprintf(stderr, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (err[1] >= 0)
		close(err[1]);
	for (;;) {
		struct stat st;

		if (err[0] >= 0)
			keep_tail(err[0], said, sizeof(said));
		if (stat(sock, &st) == 0 && S_ISSOCK(st.st_mode)) {
			if (err[0] >= 0)
				close(err[0]);
			*pid = p;
			return 0;
		}
		if (waitpid(p, &status, WNOHANG) == p) {
			if (err[0] >= 0) {
				keep_tail(err[0], said, sizeof(said));
				close(err[0]);
			}
			one_line(said);
			return vs_fail(why, whylen, -EIO,
				       "%s exited before listening on %s (%s %d)%s%s", argv[0],
				       sock, WIFEXITED(status) ? "status" : "signal",
				       WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
				       said[0]	     ? ": "
				       : show_stderr ? ": see its messages above"
						     : "",
				       said);
		}
		if (vs_mono_ns() > end)
			break;
		usleep(5000);
	}
	if (err[0] >= 0)
		close(err[0]);
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
