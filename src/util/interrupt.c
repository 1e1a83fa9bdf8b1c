/* SPDX-License-Identifier: MIT */
/*
 * Ctrl-C, SIGTERM and SIGHUP end a long command cleanly instead of killing it: the signal
 * only notes itself here; the command sees it in its loops, stops what it started, removes
 * what it made, prints what it measured and exits 128 + the signal.  The children it runs
 * as jobs get the signal from here the moment it arrives (the handler passes it on), so a
 * `kill PID` reaches them as Ctrl-C at a terminal does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/util.h"

#define MAX_PASS 8

static volatile sig_atomic_t caught;
static volatile uint64_t caught_ns = UINT64_MAX; /* written before caught is set */
static volatile pid_t pass_to[MAX_PASS];	 /* kill() targets: a pid, or -pgid */
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void on_stop(int sig)
{
	int saved = errno;

	if (!caught) {
		caught_ns = vs_mono_ns(); /* clock_gettime is async-signal-safe */
		caught = sig;
	}
	for (unsigned i = 0; i < MAX_PASS; i++)
		if (pass_to[i])
			kill(pass_to[i], sig);
	errno = saved;
}

void vs_interrupt_catch(void)
{
	struct sigaction sa = {.sa_handler = on_stop, .sa_flags = SA_RESTART};

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++)
		sigaction(stop_signals[i], &sa, NULL);
}

int vs_interrupted(void)
{
	return caught;
}

uint64_t vs_interrupted_ns(void)
{
	return caught ? caught_ns : UINT64_MAX;
}

volatile sig_atomic_t *vs_interrupt_flag(void)
{
	return &caught;
}

int vs_interrupt_status(int rc)
{
	return caught ? 128 + caught : rc;
}

const char *vs_signal_name(int sig)
{
	return sig == SIGINT	? "SIGINT"
	       : sig == SIGTERM ? "SIGTERM"
	       : sig == SIGHUP	? "SIGHUP"
				: "a signal";
}

/* The handler reads the table at any moment: a slot is filled or cleared in one store. */
void vs_interrupt_pass(int target)
{
	for (unsigned i = 0; i < MAX_PASS; i++)
		if (!pass_to[i]) {
			pass_to[i] = target;
			break;
		}
	/* Caught before it was listed: pass it on now. */
	if (caught)
		kill(target, caught);
}

void vs_interrupt_pass_end(int target)
{
	for (unsigned i = 0; i < MAX_PASS; i++)
		if (pass_to[i] == target)
			pass_to[i] = 0;
}

int vs_job_start(const char *cmd, int *out_fd, int *pid)
{
	int pipefd[2] = {-1, -1};
	pid_t p;

	if (out_fd && pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	fflush(NULL); /* nothing of ours printed twice by the child */
	p = fork();
	if (p < 0) {
		int rc = -errno;

		if (out_fd) {
			close(pipefd[0]);
			close(pipefd[1]);
		}
		return rc;
	}
	if (p == 0) {
		setpgid(0, 0);
		if (out_fd)
			dup2(pipefd[1], 1);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	setpgid(p, p); /* also here: whichever runs first, the group exists before a kill */
	vs_interrupt_pass(-p);
	if (out_fd) {
		close(pipefd[1]);
		*out_fd = pipefd[0];
	}
	*pid = p;
	return 0;
}

int vs_job_wait(int pid)
{
	int status;
	pid_t r;

	while ((r = waitpid(pid, &status, 0)) < 0 && errno == EINTR)
		;
	vs_interrupt_pass_end(-pid);
	if (r < 0)
		return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int vs_job_run(const char *cmd)
{
	int pid, rc = vs_job_start(cmd, NULL, &pid);

	return rc < 0 ? rc : vs_job_wait(pid);
}
