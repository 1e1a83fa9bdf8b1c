/* SPDX-License-Identifier: MIT */
/*
 * A session daemon of our own for the LTTng-UST peer of `vioscope bench trace --peers`
 * (the tracepoint itself is in libvioscope_bench_lttng.so, trace_bench_lttng.c).
 *
 * Everything is private to this run: LTTNG_HOME is a scratch directory, and as root
 * (where lttng uses /run/lttng whatever LTTNG_HOME says) the benchmark first moves into
 * a mount namespace with a tmpfs of its own on /run and a network namespace of its own
 * (the daemon's agent port, 127.0.0.1:5345, then belongs to nobody else).  The daemon,
 * the `lttng` client and the measuring process all start after that, so they meet in
 * the private /run, and a session daemon someone else runs on the machine is neither
 * used nor disturbed.  The daemon is stopped by its pid.
 *
 * The session writes into the scratch directory through a discard channel of 8 x 4 MiB
 * sub-buffers (as LTTng's earlier figures in docs/PERFORMANCE.md were measured); the
 * measured cost is the producer's, as for our rings.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/trace_bench.h"
#include "util/util.h"

#define DEADLINE_NS (30 * 1000000000ull)

static pid_t sessiond_pid;
static char session[64];
static char home[256];
static char log_path[300];

/* Run `lttng --no-sessiond ARGS...` with its output in the log; its exit status. */
static int lttng(const char *const args[])
{
	const char *argv[16] = {"lttng", "--no-sessiond"};
	unsigned n = 2;
	for (unsigned i = 0; args[i] && n < 15; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp("lttng", (char *const *)argv);
		_exit(127);
	}
	int st;
	if (pid < 0 || waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A daemon answers on this socket (a file left by a dead one refuses connections). */
static bool answers(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	size_t len = strlen(path);
	if (len >= sizeof a.sun_path)
		return false;
	memcpy(a.sun_path, path, len + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* As root: a /run and a network of our own (see the top of the file). */
static int private_run(char *why, size_t whylen)
{
	if (unshare(CLONE_NEWNS | CLONE_NEWNET) < 0) {
		snprintf(why, whylen, "unshare(mount, network namespaces): %s", strerror(errno));
		return -1;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("vioscope-bench", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") < 0) {
		snprintf(why, whylen, "a private /run: %s", strerror(errno));
		return -1;
	}
	return 0;
}

void vs_bench_lttng_stop(void)
{
	if (session[0]) {
		const char *destroy[] = {"destroy", session, NULL};
		lttng(destroy);
		session[0] = '\0';
	}
	if (sessiond_pid > 0) {
		kill(sessiond_pid, SIGTERM);
		uint64_t end = vs_mono_ns() + DEADLINE_NS;
		while (waitpid(sessiond_pid, NULL, WNOHANG) == 0) {
			if (vs_mono_ns() > end) {
				fprintf(stderr,
					"bench trace: lttng-sessiond (pid %d) ignored SIGTERM "
					"for 30 s: killed\n",
					(int)sessiond_pid);
				kill(sessiond_pid, SIGKILL);
				waitpid(sessiond_pid, NULL, 0);
				break;
			}
			usleep(10000); /* polling a child's exit, with a deadline */
		}
		sessiond_pid = 0;
	}
	if (home[0]) {
		if (vs_remove_tree(home) < 0)
			fprintf(stderr, "bench trace: could not remove %s\n", home);
		home[0] = '\0';
	}
}

int vs_bench_lttng_start(char *why, size_t whylen)
{
	char out[300], sock[300];
	snprintf(home, sizeof home, "/tmp/vioscope-lttng-XXXXXX");
	if (!mkdtemp(home)) {
		home[0] = '\0';
		snprintf(why, whylen, "mkdtemp: %s", strerror(errno));
		return -1;
	}
	snprintf(log_path, sizeof log_path, "%s/lttng.log", home);
	if (geteuid() == 0) {
		if (private_run(why, whylen) < 0)
			goto fail;
		snprintf(sock, sizeof sock, "/run/lttng/client-lttng-sessiond");
	} else {
		snprintf(sock, sizeof sock, "%s/.lttng/client-lttng-sessiond", home);
	}
	setenv("LTTNG_HOME", home, 1);
	/* The measuring process waits for its registration (the default 3 s is short under
	 * valgrind, and a tracepoint registered late would be measured disabled). */
	setenv("LTTNG_UST_REGISTER_TIMEOUT", "30000", 1);
	sessiond_pid = fork();
	if (sessiond_pid == 0) {
		int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execlp("lttng-sessiond", "lttng-sessiond", "--no-kernel", (char *)NULL);
		_exit(127);
	}
	if (sessiond_pid < 0) {
		sessiond_pid = 0;
		snprintf(why, whylen, "fork: %s", strerror(errno));
		goto fail;
	}
	uint64_t end = vs_mono_ns() + DEADLINE_NS;
	while (!answers(sock)) {
		if (waitpid(sessiond_pid, NULL, WNOHANG) == sessiond_pid) {
			sessiond_pid = 0;
			snprintf(why, whylen, "lttng-sessiond exited");
			goto fail;
		}
		if (vs_mono_ns() > end) {
			snprintf(why, whylen, "lttng-sessiond did not answer on %s in 30 s", sock);
			goto fail;
		}
		usleep(10000); /* polling for the daemon's socket, with a deadline */
	}
	snprintf(session, sizeof session, "vioscope-bench-%d", (int)getpid());
	snprintf(out, sizeof out, "%s/traces", home);
	const char *create[] = {"create", session, "--output", out, NULL};
	const char *channel[] = {
	    "enable-channel", "-u", "-s", session, "--discard", "--subbuf-size", "4M",
	    "--num-subbuf",   "8",  "ch", NULL};
	const char *event[] = {
	    "enable-event", "-u", "-s", session, "-c", "ch", "vioscope_bench:two_ints", NULL};
	const char *start[] = {"start", session, NULL};
	if (lttng(create) != 0) {
		session[0] = '\0';
		snprintf(why, whylen, "lttng create failed");
		goto fail;
	}
	if (lttng(channel) || lttng(event) || lttng(start)) {
		snprintf(why, whylen, "lttng could not set up the session");
		goto fail;
	}
	return 0;
fail:;
	/* the daemon's or the client's last words, then everything goes */
	FILE *f = fopen(log_path, "re");
	char line[256], last[256] = "";
	while (f && fgets(line, sizeof line, f))
		if (line[0] != '\n')
			snprintf(last, sizeof last, "%s", line);
	if (f)
		fclose(f);
	last[strcspn(last, "\n")] = '\0';
	size_t used = strlen(why);
	if (last[0] && used < whylen)
		snprintf(why + used, whylen - used, " (last: %s)", last);
	vs_bench_lttng_stop();
	return -1;
}
