/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver.h"

/* Room for an argument or environment vector with what the helpers add to it. */
#define MAX_VEC 32

/* Append SRC's entries (NULL-terminated, may be NULL) to VEC from index AT;
 * returns the new end.  VEC keeps room for its terminating NULL. */
static size_t append(const char **vec, size_t at, const char *const src[])
{
	for (size_t i = 0; src && src[i]; i++) {
		assert_true(at < MAX_VEC - 1);
		vec[at++] = src[i];
	}
	vec[at] = NULL;
	return at;
}

/* TD's VIOSCOPE_TRACE_DIR, then ENV. */
static void test_env(const char **vec, const struct th_tmpdir *td, const char *const env[])
{
	const char *dir[] = {td->env_dir, NULL};
	append(vec, append(vec, 0, dir), env);
}

int th_cli(const struct th_tmpdir *td, ...)
{
	const char *argv[2 + 8 + 1] = {VIOSCOPE_CLI, "trace"};
	const char *env[] = {td->env_dir, NULL};
	size_t n = 2;
	va_list ap;

	va_start(ap, td);
	for (const char *a; (a = va_arg(ap, const char *));) {
		assert_true(n < sizeof argv / sizeof argv[0] - 1);
		argv[n++] = a;
	}
	va_end(ap);
	argv[n] = NULL;
	return th_run(argv, env, td->out, td->err);
}

pid_t th_run_workload(const struct th_tmpdir *td, const char *const argv[], const char *const env[],
		      const char *out)
{
	const char *envs[MAX_VEC];
	test_env(envs, td, env);
	pid_t pid = th_spawn(argv, envs, NULL, out, NULL);
	assert_true(pid > 0);
	assert_int_equal(th_wait(pid), 0);
	return pid;
}

pid_t th_start_holding(const struct th_tmpdir *td, const char *const argv[], const char *out)
{
	const char *args[MAX_VEC];
	const char *env[] = {td->env_dir, NULL};
	int ready[2];
	char rfd[16];

	assert_int_equal(th_pipe(ready), 0);
	snprintf(rfd, sizeof rfd, "%d", ready[1]);
	const char *hold[] = {"-r", rfd, "-H", NULL};
	append(args, append(args, 0, argv), hold);
	const int keep[] = {ready[1], -1};
	pid_t pid = th_spawn(args, env, keep, out, NULL);
	assert_true(pid > 0);
	close(ready[1]);
	assert_int_equal(th_read_byte(ready[0]), 'r');
	assert_int_equal(th_read_byte(ready[0]), 'd');
	close(ready[0]);
	return pid;
}

void th_kill_holding(pid_t pid)
{
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(th_wait(pid), 128 + SIGKILL);
}

void th_start_gated(const struct th_tmpdir *td, struct th_gated *w, const char *const argv[],
		    const char *const env[])
{
	const char *args[MAX_VEC], *envs[MAX_VEC];
	int ready[2], go[2];
	char rfd[16], gfd[16];

	assert_int_equal(th_pipe(ready), 0);
	assert_int_equal(th_pipe(go), 0);
	snprintf(rfd, sizeof rfd, "%d", ready[1]);
	snprintf(gfd, sizeof gfd, "%d", go[0]);
	const char *gate[] = {"-r", rfd, "-g", gfd, NULL};
	append(args, append(args, 0, argv), gate);
	test_env(envs, td, env);
	const int keep[] = {ready[1], go[0], -1};
	w->pid = th_spawn(args, envs, keep, NULL, NULL);
	assert_true(w->pid > 0);
	close(ready[1]);
	close(go[0]);
	w->ready = ready[0];
	w->go = go[1];
	assert_int_equal(th_read_byte(w->ready), 'r');
}

int th_let_go_and_wait(struct th_gated *w)
{
	assert_int_equal(write(w->go, "g", 1), 1);
	int status = th_wait(w->pid);
	close(w->ready);
	close(w->go);
	return status;
}

struct attach {
	const struct vs_shm *shm;
	pid_t recorder;
};

static bool recorder_attached(void *opaque)
{
	const struct attach *a = opaque;
	return __atomic_load_n(&a->shm->hdr->mode, __ATOMIC_ACQUIRE) == VS_MODE_STREAM &&
	       __atomic_load_n(&a->shm->hdr->recorder_pid, __ATOMIC_ACQUIRE) == a->recorder;
}

pid_t th_start_recording(const struct th_tmpdir *td, pid_t pid, const char *out, const char *enable,
			 struct vs_shm *shm)
{
	char pidstr[32], path[600], why[512];

	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	const char *argv[] = {
	    VIOSCOPE_CLI, "trace", "record", pidstr, "-o", out, enable ? "--enable" : NULL,
	    enable,	  NULL};
	const char *env[] = {td->env_dir, NULL};
	struct attach a = {.shm = shm};
	a.recorder = th_spawn(argv, env, NULL, NULL, td->err);
	assert_true(a.recorder > 0);
	th_shm_path(path, sizeof path, td->dir, pid);
	if (vs_shm_open(shm, path, why, sizeof why) < 0)
		fail_msg("%s", why);
	assert_true(wait_until(recorder_attached, &a, 60000));
	return a.recorder;
}

void th_dump(const struct th_tmpdir *td, pid_t pid)
{
	char pidstr[32];
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	assert_int_equal(th_cli(td, "dump", pidstr, "-o", td->cap, NULL), 0);
}

void th_walk_or_fail(const char *capture, th_event_fn fn, void *opaque)
{
	char why[512] = "";
	if (th_walk(capture, fn, opaque, why, sizeof why) != 0)
		fail_msg("walk %s: %s", capture, why);
}

void th_dump_and_walk(const struct th_tmpdir *td, pid_t pid, th_event_fn fn, void *opaque)
{
	th_dump(td, pid);
	th_walk_or_fail(td->cap, fn, opaque);
	unlink(td->cap);
}
