/* SPDX-License-Identifier: MIT */
/*
 * Trace files over a process's life (exit, keep, fork, too many threads), and the
 * `vioscope trace` command's answers to good and bad input.  Each test has its own
 * VIOSCOPE_TRACE_DIR.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "helpers.h"
#include "workload.h"

/* Each test runs in its own VIOSCOPE_TRACE_DIR (helpers.h, struct th_tmpdir). */
static int setup(void **state)
{
	return th_tmpdir_setup(state, "cli");
}
#define TMPDIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup, th_tmpdir_teardown)

static int cli(struct th_tmpdir *td, const char *a1, const char *a2, const char *a3, const char *a4,
	       const char *a5)
{
	const char *argv[] = { VIOSCOPE_CLI, "trace", a1, a2, a3, a4, a5, NULL };
	const char *env[] = { td->env_dir, NULL };
	return th_run(argv, env, td->out, td->err);
}


/* Run the cold workload in seq mode to completion with extra environment ENV2. */
static pid_t run_workload(struct th_tmpdir *td, const char *env2, int *status)
{
	const char *argv[] = { WORKLOAD_COLD, "seq", "-n", "300", "-t", "3", NULL };
	const char *env[] = { td->env_dir, env2, NULL };
	pid_t pid = th_spawn(argv, env, NULL, NULL, NULL);
	assert_true(pid > 0);
	*status = th_wait(pid);
	return pid;
}

/* A workload that stays alive (hold mode) until killed. */
static pid_t start_holder(struct th_tmpdir *td)
{
	int ready[2];
	char rfd[16];
	assert_int_equal(th_pipe(ready), 0);
	snprintf(rfd, sizeof rfd, "%d", ready[1]);
	const char *argv[] = { WORKLOAD_COLD, "seq", "-n", "10", "-r", rfd, "-H", NULL };
	const char *env[] = { td->env_dir, NULL };
	const int keep[] = { ready[1], -1 };
	pid_t pid = th_spawn(argv, env, keep, NULL, NULL);
	assert_true(pid > 0);
	close(ready[1]);
	assert_int_equal(th_read_byte(ready[0]), 'r');
	assert_int_equal(th_read_byte(ready[0]), 'd');
	close(ready[0]);
	return pid;
}

static void stop_holder(pid_t pid)
{
	kill(pid, SIGKILL);
	assert_int_equal(th_wait(pid), 128 + SIGKILL);
}

/* Scenario: a traced process with three threads exits normally: its trace file
 * is gone, the directory is empty. */
static void test_exit_leaves_nothing_behind(void **state)
{
	struct th_tmpdir *td = *state;
	int status;
	run_workload(td, NULL, &status);
	assert_int_equal(status, 0);
	assert_int_equal(th_count_files(td->dir, NULL), 0);
}

/* Scenario: the same with VIOSCOPE_TRACE_KEEP=1: the file stays, `trace list`
 * shows the process as dead, and its flight record can still be dumped. */
static void test_keep_leaves_the_file_for_a_dump(void **state)
{
	struct th_tmpdir *td = *state;
	char shm[600], pidstr[32], cap[700], line[64];
	struct stat st;
	int status;

	pid_t pid = run_workload(td, "VIOSCOPE_TRACE_KEEP=1", &status);
	assert_int_equal(status, 0);
	th_shm_path(shm, sizeof shm, td->dir, pid);
	assert_int_equal(stat(shm, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600); /* owner-only */
	assert_int_equal(th_count_files(td->dir, NULL), 1);

	assert_int_equal(cli(td, "list", NULL, NULL, NULL, NULL), 0);
	snprintf(line, sizeof line, "\n%-8d dead  cold", (int)pid);
	assert_true(th_file_contains(td->out, line));

	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	snprintf(cap, sizeof cap, "%s.vstrace", td->dir);
	assert_int_equal(cli(td, "dump", pidstr, "-o", cap, NULL), 0);
	assert_true(th_file_contains(td->err, "3 thread(s)"));
	assert_int_equal(cli(td, "decode", cap, NULL, NULL, NULL), 0);
	assert_true(th_file_contains(td->out, "seq t=2 i=299 "));
	unlink(cap);
}

/* Scenario: `trace list` shows a live process with its pid, state, flavour,
 * level and program. */
static void test_list_shows_live_process(void **state)
{
	struct th_tmpdir *td = *state;
	char line[64];

	pid_t pid = start_holder(td);
	assert_int_equal(cli(td, "list", NULL, NULL, NULL, NULL), 0);
	assert_true(th_file_contains(td->out, "PID      STATE FLAVOUR"));
	snprintf(line, sizeof line, "\n%-8d live  cold       info     all", (int)pid);
	assert_true(th_file_contains(td->out, line));
	assert_true(th_file_contains(td->out, "trace_workload-cold\n"));
	stop_holder(pid);
}

/* Scenario: `trace clean` leaves the file of a live process alone. */
static void test_clean_keeps_live_process_files(void **state)
{
	struct th_tmpdir *td = *state;
	char shm[600];
	struct stat st;

	pid_t pid = start_holder(td);
	assert_int_equal(cli(td, "clean", NULL, NULL, NULL, NULL), 0);
	assert_true(th_file_contains(td->out, "no trace files of dead processes"));
	th_shm_path(shm, sizeof shm, td->dir, pid);
	assert_int_equal(stat(shm, &st), 0);
	stop_holder(pid);
	/* now dead: --dry-run names it and leaves it, clean removes it */
	assert_int_equal(cli(td, "clean", "--dry-run", NULL, NULL, NULL), 0);
	assert_true(th_file_contains(td->out, "would remove"));
	assert_int_equal(stat(shm, &st), 0);
	assert_int_equal(cli(td, "clean", NULL, NULL, NULL, NULL), 0);
	assert_int_equal(stat(shm, &st), -1);
}

/* Scenario: bad input gets exit status 2 (usage) or 1 (failure) and a message
 * saying what is wrong; nothing else happens. */
static void test_bad_input_is_refused_clearly(void **state)
{
	struct th_tmpdir *td = *state;
	char pidstr[32], cap[700];
	struct stat st;

	assert_int_equal(cli(td, "frobnicate", NULL, NULL, NULL, NULL), 2);
	assert_true(th_file_contains(td->err, "unknown subcommand 'frobnicate'"));
	assert_int_equal(cli(td, NULL, NULL, NULL, NULL, NULL), 2);
	assert_true(th_file_contains(td->err, "usage: vioscope trace"));

	pid_t pid = start_holder(td);
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	assert_int_equal(cli(td, "enable", pidstr, "verbose:nosuchflag", NULL, NULL), 1);
	assert_true(th_file_contains(td->err, "unknown flag 'nosuchflag'"));
	assert_true(th_file_contains(td->err, "test")); /* lists the known flags */
	assert_int_equal(cli(td, "enable", pidstr, "loud", NULL, NULL), 1);
	assert_true(th_file_contains(td->err, "unknown level 'loud'"));
	assert_int_equal(cli(td, "enable", pidstr, NULL, NULL, NULL), 2);
	assert_true(th_file_contains(td->err, "usage"));
	assert_int_equal(cli(td, "dump", pidstr, NULL, NULL, NULL), 2);
	assert_true(th_file_contains(td->err, "usage: dump PID -o FILE"));
	assert_int_equal(cli(td, "record", pidstr, NULL, NULL, NULL), 2);
	assert_true(th_file_contains(td->err, "usage: record PID -o FILE"));
	snprintf(cap, sizeof cap, "%s.vstrace", td->dir);
	assert_int_equal(cli(td, "record", pidstr, "-o", cap, "--duration=abc"), 2);
	assert_true(th_file_contains(td->err, "bad --duration 'abc'"));
	assert_int_equal(stat(cap, &st), -1); /* nothing written */
	stop_holder(pid);

	assert_int_equal(cli(td, "enable", "2147483646", "info", NULL, NULL), 1);
	assert_true(th_file_contains(td->err, "no traced process with that pid"));
	assert_int_equal(cli(td, "dump", "2147483646", "-o", cap, NULL), 1);
	assert_true(th_file_contains(td->err, "no traced process with that pid"));
	assert_int_equal(stat(cap, &st), -1);
	assert_int_equal(cli(td, "decode", NULL, NULL, NULL, NULL), 2);
	assert_true(th_file_contains(td->err, "usage: decode FILE"));
	assert_int_equal(cli(td, "decode", "/nonexistent/capture", NULL, NULL, NULL), 1);
	assert_true(th_file_contains(td->err, "No such file or directory"));
	assert_int_equal(cli(td, "decode", "--level", "loud", "x", NULL), 2);
	assert_true(th_file_contains(td->err, "--level loud"));
	assert_int_equal(cli(td, "list", "extra", NULL, NULL, NULL), 2);
	assert_int_equal(cli(td, "clean", "--force", NULL, NULL, NULL), 2);
}

/* ---- captures, as text --------------------------------------------------------------- */
struct msgs {
	char text[64][192]; /* the first 64 messages */
	unsigned n;         /* all events */
	uint64_t lost;      /* sum of loss reports */
	char lost_what[256];
};

static int collect(const struct th_event *e, void *opaque)
{
	struct msgs *m = opaque;
	if (!e->ev->site) {
		m->lost += e->ev->lost;
		snprintf(m->lost_what, sizeof m->lost_what, "%s", e->ev->lost_what);
		return 0;
	}
	if (m->n < 64)
		snprintf(m->text[m->n], sizeof m->text[0], "%s", e->msg);
	m->n++;
	return 0;
}

/* `trace dump PID` and the messages in it. */
static void dump_collect(struct th_tmpdir *td, pid_t pid, struct msgs *m)
{
	char pidstr[32], cap[700], why[512];
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	snprintf(cap, sizeof cap, "%s.vstrace", td->dir);
	assert_int_equal(cli(td, "dump", pidstr, "-o", cap, NULL), 0);
	memset(m, 0, sizeof *m);
	if (th_walk(cap, collect, m, why, sizeof why) != 0)
		fail_msg("%s", why);
	unlink(cap);
}

/* Run the cold workload with ARGV (after the program) and ENV2; its stdout in td->out. */
static pid_t run_args(struct th_tmpdir *td, const char *const *args, const char *env2)
{
	const char *argv[16] = { WORKLOAD_COLD };
	for (int i = 0; args[i] && i < 14; i++)
		argv[i + 1] = args[i];
	const char *env[] = { td->env_dir, env2, NULL };
	pid_t pid = th_spawn(argv, env, NULL, td->out, NULL);
	assert_true(pid > 0);
	assert_int_equal(th_wait(pid), 0);
	return pid;
}

/* Scenario: a traced process sets verbose:test, emits (from another thread) and
 * forks; the child's events go to a file of its own (kept, like the parent's,
 * with VIOSCOPE_TRACE_KEEP=1), under the settings it inherited; the parent's file
 * holds only the parent's. */
static void test_fork_child_gets_its_own_file(void **state)
{
	struct th_tmpdir *td = *state;
	struct msgs m;
	char want[64];

	const char *args[] = { "fork", "-n", "2", NULL };
	pid_t parent = run_args(td, args, "VIOSCOPE_TRACE_KEEP=1");
	char *out = th_read_file(td->out, NULL);
	assert_non_null(out);
	pid_t child = (pid_t)atoi(out);
	free(out);
	assert_true(child > 0 && child != parent);
	assert_int_equal(th_count_files(td->dir, VS_SHM_PREFIX), 2);

	dump_collect(td, child, &m);
	assert_int_equal(m.n, 2);
	assert_string_equal(m.text[0], "fork child 0");
	assert_string_equal(m.text[1], "fork child 1");
	dump_collect(td, parent, &m);
	assert_int_equal(m.n, 2);
	assert_string_equal(m.text[0], "fork parent before");
	snprintf(want, sizeof want, "fork parent after child %d", (int)child);
	assert_string_equal(m.text[1], want);
}

/* Scenario: a forked child that emits nothing and exits creates no file and
 * leaves its parent's file alone. */
static void test_fork_silent_child_leaves_parent_file(void **state)
{
	struct th_tmpdir *td = *state;
	int ready[2];
	char rfd[16], shm[600];
	struct stat st;

	assert_int_equal(th_pipe(ready), 0);
	snprintf(rfd, sizeof rfd, "%d", ready[1]);
	const char *argv[] = { WORKLOAD_COLD, "fork", "-n", "0", "-r", rfd, "-H", NULL };
	const char *env[] = { td->env_dir, NULL };
	const int keep[] = { ready[1], -1 };
	pid_t pid = th_spawn(argv, env, keep, td->out, NULL);
	assert_true(pid > 0);
	close(ready[1]);
	assert_int_equal(th_read_byte(ready[0]), 'r');
	assert_int_equal(th_read_byte(ready[0]), 'd'); /* the child has exited */
	close(ready[0]);
	th_shm_path(shm, sizeof shm, td->dir, pid);
	assert_int_equal(stat(shm, &st), 0);
	assert_int_equal(th_count_files(td->dir, NULL), 1);
	stop_holder(pid);
}

/* Scenario: 4 threads alive at once with room for 2 (VIOSCOPE_TRACE_THREADS=2):
 * the 2 without a ring lose all their events, and the capture counts every one of
 * them ("no free thread ring"); the others arrive whole. */
static void test_no_free_ring_events_are_counted(void **state)
{
	struct th_tmpdir *td = *state;
	struct msgs m;

	const char *argv[] = { WORKLOAD_COLD, "seq", "-n", "50", "-t", "4", "-B", NULL };
	const char *env[] = { td->env_dir, "VIOSCOPE_TRACE_THREADS=2", "VIOSCOPE_TRACE_KEEP=1",
			      NULL };
	pid_t pid = th_spawn(argv, env, NULL, NULL, NULL);
	assert_int_equal(th_wait(pid), 0);
	dump_collect(td, pid, &m);
	assert_int_equal(m.n, 100);
	assert_int_equal(m.lost, 100);
	assert_non_null(strstr(m.lost_what, "no free thread ring"));
}

/* Was a bug (seen under LeakSanitizer, i.e. in the sanitizer build): a thread
 * that has a ring and calls fork() leaves the child its struct thread_ring and
 * 64 KiB scratch buffer (src/trace/runtime.c child_after_fork sets my_ring = NULL
 * without freeing it), and the child attaches a new ring on its first event: the
 * old one leaks in every such child.  Here the child's LeakSanitizer report fails
 * it, and the parent with it. */
static void test_fork_child_frees_parent_ring(void **state)
{
	struct th_tmpdir *td = *state;
	const char *args[] = { "fork", "-n", "1", "-M", NULL };
	run_args(td, args, NULL);
}

/* Was a bug: in flight mode a new thread reuses a retired thread's ring when no
 * slot is free (src/trace/runtime.c attach_ring, pass 1): it sets the tail to the
 * head, so the retired thread's last events vanish, and nothing counts them: here
 * thread 0's 50 events are gone and the capture reports no loss. */
static void test_reused_ring_counts_lost_events(void **state)
{
	struct th_tmpdir *td = *state;
	struct msgs m;

	const char *argv[] = { WORKLOAD_COLD, "seq", "-n", "50", "-t", "2", "-S", NULL };
	const char *env[] = { td->env_dir, "VIOSCOPE_TRACE_THREADS=1", "VIOSCOPE_TRACE_KEEP=1",
			      NULL };
	pid_t pid = th_spawn(argv, env, NULL, NULL, NULL);
	assert_int_equal(th_wait(pid), 0);
	dump_collect(td, pid, &m);
	assert_int_equal(m.n + m.lost, 100);
}

/* Scenario: decode's filters and outputs on a capture with one event of each
 * kind: --level, --flag, --thread select; an unknown flag is refused; --json
 * writes one object per line; --chrome one trace-event array, entry/exit as a
 * begin/end pair. */
static void test_decode_filters_and_json(void **state)
{
	struct th_tmpdir *td = *state;
	char pidstr[32], cap[700], tid[32];

	const char *argv[] = { WORKLOAD_COLD, "kinds", NULL };
	const char *env[] = { td->env_dir, "VIOSCOPE_TRACE=verbose:all", "VIOSCOPE_TRACE_KEEP=1",
			      NULL };
	pid_t pid = th_spawn(argv, env, NULL, NULL, NULL);
	assert_int_equal(th_wait(pid), 0);
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	snprintf(cap, sizeof cap, "%s.vstrace", td->dir);
	assert_int_equal(cli(td, "dump", pidstr, "-o", cap, NULL), 0);

	assert_int_equal(cli(td, "decode", cap, "--level", "warning", NULL), 0);
	char *out = th_read_file(td->out, NULL);
	assert_non_null(out);
	assert_non_null(strstr(out, " WARN  CONFIG   wl_kinds: empty |\n"));
	assert_null(strstr(out, "str abc"));
	assert_null(strstr(out, "enter"));
	free(out);

	assert_int_equal(cli(td, "decode", cap, "--flag", "general", NULL), 0);
	out = th_read_file(td->out, NULL);
	assert_non_null(strstr(out, "wl_kinds: --> enter\n"));
	assert_non_null(strstr(out, "wl_kinds: <-- exit rc=-22\n"));
	assert_null(strstr(out, "str abc"));
	free(out);
	assert_int_equal(cli(td, "decode", cap, "--flag", "nosuchflag", NULL), 1);
	assert_true(th_file_contains(td->err, "unknown flag 'nosuchflag'"));

	snprintf(tid, sizeof tid, "%d", (int)pid); /* the main thread */
	assert_int_equal(cli(td, "decode", cap, "--thread", tid, NULL), 0);
	assert_true(th_file_contains(td->out, "str abc"));
	assert_int_equal(cli(td, "decode", cap, "--thread", "1", NULL), 0);
	out = th_read_file(td->out, NULL);
	assert_string_equal(out, "");
	free(out);

	assert_int_equal(cli(td, "decode", cap, "--json", NULL, NULL), 0);
	out = th_read_file(td->out, NULL);
	unsigned lines = 0;
	char *save = NULL;
	for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		assert_true(!strncmp(l, "{\"type\":\"event\",", strlen("{\"type\":\"event\",")));
		assert_true(l[strlen(l) - 1] == '}');
		lines++;
	}
	assert_true(lines >= 10);
	free(out);
	assert_true(th_file_contains(td->out, "\"level\":\"info\",\"flag\":\"TEST\","
					  "\"function\":\"wl_kinds\""));
	assert_true(th_file_contains(td->out, "\"message\":\"str abc\"}"));

	/* Chrome trace-event JSON: one array; entry/exit become B/E, the rest instants */
	assert_int_equal(cli(td, "decode", cap, "--chrome", NULL, NULL), 0);
	out = th_read_file(td->out, NULL);
	assert_true(!strncmp(out, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n",
			     strlen("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")));
	assert_non_null(strstr(out, "\n]}\n"));
	assert_int_equal(strlen(strstr(out, "\n]}\n")), 4);
	unsigned b = 0, e = 0, i = 0;
	for (char *p = out; (p = strstr(p, "{\"ph\":\"")); p++) {
		b += p[7] == 'B';
		e += p[7] == 'E';
		i += p[7] == 'i';
	}
	assert_int_equal(b, 1);
	assert_int_equal(e, 1);
	assert_int_equal(b + e + i, lines);
	assert_non_null(strstr(out, "\"name\":\"wl_kinds\",\"cat\":\"TEST\",\"s\":\"t\","
				    "\"args\":{\"level\":\"info\",\"message\":\"str abc\"}}"));
	free(out);
	unlink(cap);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		TMPDIR_TEST(test_exit_leaves_nothing_behind),
		TMPDIR_TEST(test_keep_leaves_the_file_for_a_dump),
		TMPDIR_TEST(test_list_shows_live_process),
		TMPDIR_TEST(test_clean_keeps_live_process_files),
		TMPDIR_TEST(test_bad_input_is_refused_clearly),
		TMPDIR_TEST(test_fork_child_gets_its_own_file),
		TMPDIR_TEST(test_fork_silent_child_leaves_parent_file),
		TMPDIR_TEST(test_no_free_ring_events_are_counted),
		TMPDIR_TEST(test_decode_filters_and_json),
		TMPDIR_TEST(test_reused_ring_counts_lost_events),
		TMPDIR_TEST(test_fork_child_frees_parent_ring),
	};
	return cmocka_run_group_tests_name("trace.cli", tests, NULL, NULL);
}
