/* SPDX-License-Identifier: MIT */
/*
 * The vioscope tool's own trace file: commands that only read traces (`vioscope
 * trace ...`, help, a bad command line) make none; the others make one, owner-only,
 * and remove it when they exit normally.  Each test has its own VIOSCOPE_TRACE_DIR.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver.h"

/* A command a test started: stopped by the teardown if the test failed first. */
static pid_t started = -1;

static int setup(void **state)
{
	started = -1;
	return th_tmpdir_setup(state, "toolfile");
}
static int teardown(void **state)
{
	if (started > 0) {
		kill(started, SIGKILL);
		th_wait(started);
	}
	return th_tmpdir_teardown(state);
}
#define TMPDIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* `vioscope ARGS...` in TD's directory with VIOSCOPE_TRACE_KEEP=1: a trace file the
 * command made would stay behind after it exits.  Returns its exit status. */
static int run_keeping(const struct th_tmpdir *td, const char *const args[])
{
	const char *argv[16] = {VIOSCOPE_CLI};
	const char *env[] = {td->env_dir, "VIOSCOPE_TRACE_KEEP=1", NULL};
	size_t n = 1;
	for (; args[n - 1]; n++) {
		assert_true(n < sizeof argv / sizeof argv[0] - 1);
		argv[n] = args[n - 1];
	}
	argv[n] = NULL;
	return th_run(argv, env, td->out, td->err);
}

/* Scenario: every inspecting command runs with VIOSCOPE_TRACE_KEEP=1 and still
 * leaves the trace directory empty: none of them made a trace file (nor began one). */
static void test_inspecting_commands_make_no_trace_file(void **state)
{
	struct th_tmpdir *td = *state;
	const char *const list[] = {"trace", "list", NULL};
	const char *const decode[] = {"trace", "decode", "/nonexistent.vst", NULL};
	const char *const show[] = {"trace", "show", "1", NULL};
	const char *const clean[] = {"trace", "clean", "--dry-run", NULL};
	const char *const help[] = {"--help", NULL};
	const char *const unknown[] = {"no-such-command", NULL};

	assert_int_equal(run_keeping(td, list), 0);
	/* the header only: the tool did not list itself */
	assert_false(th_file_contains(td->out, "vioscope"));
	assert_int_equal(run_keeping(td, decode), 1);
	assert_int_equal(run_keeping(td, show), 1);
	assert_int_equal(run_keeping(td, clean), 0);
	assert_int_equal(run_keeping(td, help), 0);
	assert_int_equal(run_keeping(td, unknown), 2);
	assert_int_equal(th_count_files(td->dir, NULL), 0);
}

struct file_seen {
	char path[600];
};
static bool file_exists(void *opaque)
{
	struct file_seen *f = opaque;
	return access(f->path, F_OK) == 0;
}

/* Scenario: `vioscope target` (a command that works) has its trace file while it
 * runs, owner-only, listed as live; on SIGTERM it exits 0 and the file is gone. */
static void test_working_command_file_is_private_and_removed(void **state)
{
	struct th_tmpdir *td = *state;
	char sock[700], line[64];
	struct file_seen f;
	struct stat st;

	snprintf(sock, sizeof sock, "%s.sock", td->out); /* beside the directory, not in it */
	const char *argv[] = {VIOSCOPE_CLI, "target", "--socket", sock, "--lun", "0:null=1M", NULL};
	const char *env[] = {td->env_dir, NULL};
	pid_t pid = started = th_spawn(argv, env, NULL, NULL, td->err);
	assert_true(pid > 0);
	th_shm_path(f.path, sizeof f.path, td->dir, pid);
	assert_true(wait_until(file_exists, &f, 30000));
	assert_int_equal(stat(f.path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(st.st_uid, geteuid());

	assert_int_equal(th_cli(td, "list", NULL), 0);
	snprintf(line, sizeof line, "\n%-8d live  ", (int)pid);
	assert_true(th_file_contains(td->out, line));
	assert_true(th_file_contains(td->out, " info     all "));
	/* its providers registered before the file existed, and have their slots */
	snprintf(line, sizeof line, "%d", (int)pid);
	assert_int_equal(th_cli(td, "show", line, NULL), 0);
	assert_true(th_file_contains(td->out, "\n  target       info     on: all"));
	assert_true(th_file_contains(td->out, "\n  scsi         info     on: all"));

	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(th_wait(pid), 0);
	started = -1;
	assert_false(th_file_contains(td->err, "vioscope trace:")); /* no complaint at all */
	assert_int_equal(access(f.path, F_OK), -1);
	assert_int_equal(th_count_files(td->dir, NULL), 0);
	unlink(sock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TMPDIR_TEST(test_inspecting_commands_make_no_trace_file),
	    TMPDIR_TEST(test_working_command_file_is_private_and_removed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
