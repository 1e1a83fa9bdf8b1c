/* SPDX-License-Identifier: MIT */
/*
 * Hostile captures given to the tools on top of the decoder (issue 22, defect 8): a FIFO
 * named as a capture must be refused at once by `trace decode`, `decode --ctf` and
 * `trace latency` (opening it waited for a writer for ever).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver.h"

#define CLI_WAIT_MS 30000 /* bounds the wait for a command that must end at once */

/* ---- a FIFO named as a capture ------------------------------------------------------------ */

/* `vioscope trace ARGS...` (NULL-terminated) in TD, with a deadline: its exit status, or
 * -2 when it had to be killed. */
static int cli_within(const struct th_tmpdir *td, const char *const args[])
{
	const char *argv[16] = {VIOSCOPE_CLI, "trace"};
	const char *env[] = {td->env_dir, NULL};
	size_t n = 2;
	for (; *args; args++) {
		assert_true(n < sizeof argv / sizeof argv[0] - 1);
		argv[n++] = *args;
	}
	argv[n] = NULL;
	pid_t pid = th_spawn(argv, env, NULL, td->out, td->err);
	assert_true(pid > 0);
	return th_wait_within(pid, CLI_WAIT_MS);
}

/* Nobody writes the FIFO: every command that reads captures refuses it, saying what it is,
 * instead of waiting in open() for a writer. */
static void test_fifo_as_a_capture_is_refused_at_once(void **state)
{
	struct th_tmpdir *td = *state;
	char fifo[600], ctf[600];
	snprintf(fifo, sizeof fifo, "%s/capture.vst", td->dir);
	snprintf(ctf, sizeof ctf, "%s/ctf", td->dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	const char *const decode[] = {"decode", fifo, NULL};
	const char *const export[] = {"decode", fifo, "--ctf", ctf, NULL};
	const char *const latency[] = {"latency", fifo, NULL};
	const char *const *cmds[] = {decode, export, latency};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		assert_int_equal(cli_within(td, cmds[i]), 1);
		assert_true(th_file_contains(td->err, "a FIFO, not a regular file"));
	}
	assert_int_equal(access(ctf, F_OK), -1); /* nothing exported */
}

static int setup(void **state)
{
	return th_tmpdir_setup(state, "hostile-tools");
}

static int teardown(void **state)
{
	return th_tmpdir_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_fifo_as_a_capture_is_refused_at_once, setup,
					    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
