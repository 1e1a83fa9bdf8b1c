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

#include "driver.h"
#include "workload.h"

/* Each test runs in its own VIOSCOPE_TRACE_DIR (helpers.h, struct th_tmpdir). */
static int setup(void **state)
{
	return th_tmpdir_setup(state, "cli");
}
#define TMPDIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup, th_tmpdir_teardown)

/* The cold workload, three threads of 300 numbered events each. */
static const char *const three_threads[] = {WORKLOAD_COLD, "seq", "-n", "300", "-t", "3", NULL};

/* A cold workload that stays alive (hold mode) until killed. */
static pid_t start_holder(struct th_tmpdir *td)
{
	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "10", NULL};
	return th_start_holding(td, argv, NULL);
}

/* Scenario: a traced process with three threads exits normally: its trace file
 * is gone, the directory is empty. */
static void test_exit_leaves_nothing_behind(void **state)
{
	struct th_tmpdir *td = *state;
	th_run_workload(td, three_threads, NULL, NULL);
	assert_int_equal(th_count_files(td->dir, NULL), 0);
}

/* Scenario: the same with VIOSCOPE_TRACE_KEEP=1: the file stays, `trace list`
 * shows the process as dead, and its flight record can still be dumped. */
static void test_keep_leaves_the_file_for_a_dump(void **state)
{
	struct th_tmpdir *td = *state;
	const char *keep[] = {"VIOSCOPE_TRACE_KEEP=1", NULL};
	char shm[600], line[64];
	struct stat st;

	pid_t pid = th_run_workload(td, three_threads, keep, NULL);
	th_shm_path(shm, sizeof shm, td->dir, pid);
	assert_int_equal(stat(shm, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600); /* owner-only */
	assert_int_equal(th_count_files(td->dir, NULL), 1);

	assert_int_equal(th_cli(td, "list", NULL), 0);
	snprintf(line, sizeof line, "\n%-8d dead  cold", (int)pid);
	assert_true(th_file_contains(td->out, line));

	th_dump(td, pid);
	assert_true(th_file_contains(td->err, "3 thread(s)"));
	assert_int_equal(th_cli(td, "decode", td->cap, NULL), 0);
	assert_true(th_file_contains(td->out, "seq t=2 i=299 "));
	unlink(td->cap);
}

/* Scenario: `trace list` shows a live process with its pid, state, flavour,
 * level and program. */
static void test_list_shows_live_process(void **state)
{
	struct th_tmpdir *td = *state;
	char line[64];

	pid_t pid = start_holder(td);
	assert_int_equal(th_cli(td, "list", NULL), 0);
	assert_true(th_file_contains(td->out, "PID      STATE FLAVOUR"));
	snprintf(line, sizeof line, "\n%-8d live  cold       info     all", (int)pid);
	assert_true(th_file_contains(td->out, line));
	assert_true(th_file_contains(td->out, "trace_workload-cold\n"));
	th_kill_holding(pid);
}

/* Scenario: `trace clean` leaves the file of a live process alone. */
static void test_clean_keeps_live_process_files(void **state)
{
	struct th_tmpdir *td = *state;
	char shm[600];
	struct stat st;

	pid_t pid = start_holder(td);
	assert_int_equal(th_cli(td, "clean", NULL), 0);
	assert_true(th_file_contains(td->out, "no trace files of dead processes"));
	th_shm_path(shm, sizeof shm, td->dir, pid);
	assert_int_equal(stat(shm, &st), 0);
	th_kill_holding(pid);
	/* now dead: --dry-run names it and leaves it, clean removes it */
	assert_int_equal(th_cli(td, "clean", "--dry-run", NULL), 0);
	assert_true(th_file_contains(td->out, "would remove"));
	assert_int_equal(stat(shm, &st), 0);
	assert_int_equal(th_cli(td, "clean", NULL), 0);
	assert_int_equal(stat(shm, &st), -1);
}

/* Scenario: bad input gets exit status 2 (usage) or 1 (failure) and a message
 * saying what is wrong; nothing else happens. */
static void test_bad_input_is_refused_clearly(void **state)
{
	struct th_tmpdir *td = *state;
	const char *cap = td->cap;
	char pidstr[32];
	struct stat st;

	assert_int_equal(th_cli(td, "frobnicate", NULL), 2);
	assert_true(th_file_contains(td->err, "unknown subcommand 'frobnicate'"));
	assert_int_equal(th_cli(td, NULL), 2);
	assert_true(th_file_contains(td->err, "usage: vioscope trace"));

	pid_t pid = start_holder(td);
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	assert_int_equal(th_cli(td, "enable", pidstr, "verbose:nosuchflag", NULL), 1);
	assert_true(th_file_contains(td->err, "unknown flag 'nosuchflag'"));
	assert_true(th_file_contains(td->err, "test")); /* lists the known flags */
	assert_int_equal(th_cli(td, "enable", pidstr, "loud", NULL), 1);
	assert_true(th_file_contains(td->err, "unknown level 'loud'"));
	assert_int_equal(th_cli(td, "enable", pidstr, NULL), 2);
	assert_true(th_file_contains(td->err, "usage"));
	assert_int_equal(th_cli(td, "dump", pidstr, NULL), 2);
	assert_true(th_file_contains(td->err, "usage: dump PID -o FILE"));
	assert_int_equal(th_cli(td, "record", pidstr, NULL), 2);
	assert_true(th_file_contains(td->err, "usage: record PID -o FILE"));
	assert_int_equal(th_cli(td, "record", pidstr, "-o", cap, "--duration=abc", NULL), 2);
	assert_true(th_file_contains(td->err, "bad --duration 'abc'"));
	assert_int_equal(stat(cap, &st), -1); /* nothing written */
	th_kill_holding(pid);

	assert_int_equal(th_cli(td, "enable", "2147483646", "info", NULL), 1);
	assert_true(th_file_contains(td->err, "no traced process with that pid"));
	assert_int_equal(th_cli(td, "dump", "2147483646", "-o", cap, NULL), 1);
	assert_true(th_file_contains(td->err, "no traced process with that pid"));
	assert_int_equal(stat(cap, &st), -1);
	assert_int_equal(th_cli(td, "decode", NULL), 2);
	assert_true(th_file_contains(td->err, "usage: decode FILE"));
	assert_int_equal(th_cli(td, "decode", "/nonexistent/capture", NULL), 1);
	assert_true(th_file_contains(td->err, "No such file or directory"));
	assert_int_equal(th_cli(td, "decode", "--level", "loud", "x", NULL), 2);
	assert_true(th_file_contains(td->err, "--level loud"));
	assert_int_equal(th_cli(td, "list", "extra", NULL), 2);
	assert_int_equal(th_cli(td, "clean", "--force", NULL), 2);
}

/* ---- captures, as text --------------------------------------------------------------- */
struct msgs {
	char text[64][192]; /* the first 64 messages */
	unsigned n;	    /* all events */
	uint64_t lost;	    /* sum of loss reports */
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
	memset(m, 0, sizeof *m);
	th_dump_and_walk(td, pid, collect, m);
}

/* Run ARGV to its end with RINGS thread rings (VIOSCOPE_TRACE_THREADS), its trace
 * file kept, and collect what its dump holds: for the tests of running short of rings. */
static void run_with_rings(struct th_tmpdir *td, const char *const argv[], unsigned rings,
			   struct msgs *m)
{
	char env_rings[64];
	snprintf(env_rings, sizeof env_rings, "VIOSCOPE_TRACE_THREADS=%u", rings);
	const char *env[] = {env_rings, "VIOSCOPE_TRACE_KEEP=1", NULL};
	dump_collect(td, th_run_workload(td, argv, env, NULL), m);
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

	const char *argv[] = {WORKLOAD_COLD, "fork", "-n", "2", NULL};
	const char *env[] = {"VIOSCOPE_TRACE_KEEP=1", NULL};
	pid_t parent = th_run_workload(td, argv, env, td->out);
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
	char shm[600];
	struct stat st;

	const char *argv[] = {WORKLOAD_COLD, "fork", "-n", "0", NULL};
	pid_t pid = th_start_holding(td, argv, td->out); /* done: the child has exited */
	th_shm_path(shm, sizeof shm, td->dir, pid);
	assert_int_equal(stat(shm, &st), 0);
	assert_int_equal(th_count_files(td->dir, NULL), 1);
	th_kill_holding(pid);
}

/* Scenario: 4 threads alive at once with room for 2 (VIOSCOPE_TRACE_THREADS=2):
 * the 2 without a ring lose all their events, and the capture counts every one of
 * them ("no free thread ring"); the others arrive whole. */
static void test_no_free_ring_events_are_counted(void **state)
{
	struct th_tmpdir *td = *state;
	struct msgs m;

	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "50", "-t", "4", "-B", NULL};
	run_with_rings(td, argv, 2, &m);
	assert_int_equal(m.n, 100);
	assert_int_equal(m.lost, 100);
	assert_non_null(strstr(m.lost_what, "no free thread ring"));
}

/* Was a bug (seen under LeakSanitizer, i.e. in the sanitizer build): a thread
 * that has a ring and calls fork() leaves the child its struct thread_ring and
 * 64 KiB scratch buffer (src/trace/runtime.c child_after_fork sets my_ring = NULL
 * without freeing it), and the child attaches a new ring on its first event: the
 * old one leaks in every such child.  In every build the child compares the heap it
 * has in use after its events with what its parent had before the fork (glibc's
 * mallinfo2: the leaked 64 KiB show) and fails when it holds both rings; in the
 * sanitizer build its LeakSanitizer report fails it too.  Either way the parent
 * fails with it. */
static void test_fork_child_frees_parent_ring(void **state)
{
	struct th_tmpdir *td = *state;
	const char *argv[] = {WORKLOAD_COLD, "fork", "-n", "1", "-M", NULL};
	th_run_workload(td, argv, NULL, td->out);
}

/* Was a bug: in flight mode a new thread reuses a retired thread's ring when no
 * slot is free (src/trace/runtime.c attach_ring, pass 1): it sets the tail to the
 * head, so the retired thread's last events vanish, and nothing counts them: here
 * thread 0's 50 events are gone and the capture reports no loss. */
static void test_reused_ring_counts_lost_events(void **state)
{
	struct th_tmpdir *td = *state;
	struct msgs m;

	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "50", "-t", "2", "-S", NULL};
	run_with_rings(td, argv, 1, &m);
	assert_int_equal(m.n + m.lost, 100);
}

/* Scenario: decode's filters and outputs on a capture with one event of each
 * kind: --level, --flag, --thread select; an unknown flag is refused; --json
 * writes one object per line; --chrome one trace-event array of instant events.
 * Flags are addressed as provider.flag or by name for every provider. */
static void test_decode_filters_and_json(void **state)
{
	struct th_tmpdir *td = *state;
	const char *cap = td->cap;
	char tid[32];

	const char *argv[] = {WORKLOAD_COLD, "kinds", NULL};
	const char *env[] = {"VIOSCOPE_TRACE=verbose:all", "VIOSCOPE_TRACE_KEEP=1", NULL};
	pid_t pid = th_run_workload(td, argv, env, NULL);
	th_dump(td, pid);

	assert_int_equal(th_cli(td, "decode", cap, "--level", "warning", NULL), 0);
	char *out = th_read_file(td->out, NULL);
	assert_non_null(out);
	assert_non_null(strstr(out, " WARN  app.CONFIG     wl_kinds: empty |\n"));
	assert_null(strstr(out, "str abc"));
	assert_null(strstr(out, "enter"));
	free(out);

	assert_int_equal(th_cli(td, "decode", cap, "--flag", "general", NULL), 0);
	out = th_read_file(td->out, NULL);
	assert_non_null(strstr(out, "wl_kinds: --> enter\n"));
	assert_non_null(strstr(out, "wl_kinds: <-- exit rc=-22\n"));
	assert_null(strstr(out, "str abc"));
	free(out);
	assert_int_equal(th_cli(td, "decode", cap, "--flag", "app.general", NULL), 0);
	assert_true(th_file_contains(td->out, "wl_kinds: --> enter\n"));
	assert_false(th_file_contains(td->out, "str abc"));
	assert_int_equal(th_cli(td, "decode", cap, "--flag", "app.all", NULL), 0);
	assert_true(th_file_contains(td->out, "str abc"));
	assert_int_equal(th_cli(td, "decode", cap, "--flag", "nosuchflag", NULL), 1);
	assert_true(th_file_contains(td->err, "unknown flag 'nosuchflag' (known: app.general"));
	assert_int_equal(th_cli(td, "decode", cap, "--flag", "app.nosuchflag", NULL), 1);
	assert_true(th_file_contains(td->err, "provider 'app' has no flag 'nosuchflag'"));
	assert_int_equal(th_cli(td, "decode", cap, "--flag", "nosuch.test", NULL), 1);
	assert_true(
	    th_file_contains(td->err, "no provider 'nosuch' in 'nosuch.test' (providers: app)"));

	snprintf(tid, sizeof tid, "%d", (int)pid); /* the main thread */
	assert_int_equal(th_cli(td, "decode", cap, "--thread", tid, NULL), 0);
	assert_true(th_file_contains(td->out, "str abc"));
	assert_int_equal(th_cli(td, "decode", cap, "--thread", "1", NULL), 0);
	out = th_read_file(td->out, NULL);
	assert_string_equal(out, "");
	free(out);

	assert_int_equal(th_cli(td, "decode", cap, "--json", NULL), 0);
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
	assert_true(th_file_contains(td->out, "\"level\":\"info\",\"provider\":\"app\","
					      "\"flag\":\"TEST\",\"function\":\"wl_kinds\""));
	assert_true(th_file_contains(td->out, "\"message\":\"str abc\"}"));

	/* Chrome trace-event JSON: one array of instant events */
	assert_int_equal(th_cli(td, "decode", cap, "--chrome", NULL), 0);
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
	assert_int_equal(b, 0);
	assert_int_equal(e, 0);
	assert_int_equal(i, lines);
	assert_non_null(strstr(out, "\"name\":\"wl_kinds\",\"cat\":\"app.TEST\","
				    "\"args\":{\"level\":\"info\",\"message\":\"str abc\"}}"));
	free(out);
	unlink(cap);
}

/* Scenario: a capture of the first format (version 1: one metadata blob, sites named
 * by address, no providers), made by an earlier vioscope, still decodes: text with
 * the flag alone, --flag by name, JSON with an empty provider. */
static void test_version1_capture_still_decodes(void **state)
{
	struct th_tmpdir *td = *state;
	assert_int_equal(th_cli(td, "decode", V1_CAPTURE, NULL), 0);
	char *out = th_read_file(td->out, NULL);
	assert_non_null(out);
	assert_non_null(strstr(out, " INFO  TEST           wl_kinds: str abc\n"));
	assert_non_null(strstr(out, " WARN  CONFIG         wl_kinds: empty |\n"));
	assert_non_null(strstr(out, " VERB  GENERAL        wl_kinds: --> enter\n"));
	free(out);
	assert_int_equal(th_cli(td, "decode", V1_CAPTURE, "--flag", "config", NULL), 0);
	out = th_read_file(td->out, NULL);
	assert_non_null(strstr(out, "wl_kinds: empty |\n"));
	assert_null(strstr(out, "str abc"));
	free(out);
	assert_int_equal(th_cli(td, "decode", V1_CAPTURE, "--json", NULL), 0);
	assert_true(th_file_contains(td->out, "\"provider\":\"\",\"flag\":\"TEST\""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TMPDIR_TEST(test_exit_leaves_nothing_behind),
	    TMPDIR_TEST(test_version1_capture_still_decodes),
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
