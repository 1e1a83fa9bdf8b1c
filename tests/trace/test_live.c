/* SPDX-License-Identifier: MIT */
/*
 * A running process, seen from outside through the `vioscope trace` command:
 * enabling and disabling its tracing live, recording it until Ctrl-C, recovering
 * the flight record of a process killed with SIGKILL, and the flight record of
 * several threads over many wraps.  Each test has
 * its own VIOSCOPE_TRACE_DIR.
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
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver.h"
#include "sequence.h"
#include "workload.h"

/* Each test runs in its own VIOSCOPE_TRACE_DIR (helpers.h, struct th_tmpdir). */
static int setup(void **state)
{
	return th_tmpdir_setup(state, "live");
}
#define TMPDIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup, th_tmpdir_teardown)

/* ---- what a dump holds ----------------------------------------------------------------- */
/* The tick numbers of a capture, into a struct th_sequence. */
static int on_tick(const struct th_event *e, void *opaque)
{
	unsigned v;
	if (e->ev->site && sscanf(e->msg, "tick %u", &v) == 1)
		th_sequence_add(opaque, v);
	return 0;
}

static void dump_ticks(struct th_tmpdir *td, pid_t pid, struct th_sequence *t)
{
	memset(t, 0, sizeof *t);
	th_dump_and_walk(td, pid, on_tick, t);
}

/* ---- the tick workload ------------------------------------------------------------------- */
struct ticker {
	pid_t pid;
	int cmd, reply, ready;
	uint32_t target;
};

static uint32_t tick_count(struct ticker *t)
{
	uint32_t n = 0;
	assert_int_equal(write(t->cmd, &(char){WL_CMD_COUNT}, 1), 1);
	assert_int_equal(read(t->reply, &n, sizeof n), sizeof n);
	return n;
}

static bool reached(void *opaque)
{
	struct ticker *t = opaque;
	return tick_count(t) >= t->target;
}

/* Wait until the workload has emitted (or skipped) N more ticks. */
static void wait_ticks(struct ticker *t, uint32_t from, uint32_t n)
{
	t->target = from + n;
	assert_true(wait_until(reached, t, 60000));
}

static void ticker_start(struct th_tmpdir *td, struct ticker *t, const char *spec)
{
	int cmd[2], reply[2], ready[2];
	char cfd[16], ofd[16], rfd[16], env_spec[64];

	assert_int_equal(th_pipe(cmd), 0);
	assert_int_equal(th_pipe(reply), 0);
	assert_int_equal(th_pipe(ready), 0);
	snprintf(cfd, sizeof cfd, "%d", cmd[0]);
	snprintf(ofd, sizeof ofd, "%d", reply[1]);
	snprintf(rfd, sizeof rfd, "%d", ready[1]);
	snprintf(env_spec, sizeof env_spec, "VIOSCOPE_TRACE=%s", spec);
	const char *argv[] = {WORKLOAD_COLD, "tick", "-c", cfd, "-o", ofd, "-r", rfd, NULL};
	const char *env[] = {td->env_dir, env_spec, NULL};
	const int keep[] = {cmd[0], reply[1], ready[1], -1};
	t->pid = th_spawn(argv, env, keep, NULL, NULL);
	assert_true(t->pid > 0);
	close(cmd[0]);
	close(reply[1]);
	close(ready[1]);
	t->cmd = cmd[1];
	t->reply = reply[0];
	t->ready = ready[0];
	assert_int_equal(th_read_byte(t->ready), 'r');
}

static void ticker_quit(struct ticker *t)
{
	uint32_t n;
	assert_int_equal(write(t->cmd, &(char){WL_CMD_QUIT}, 1), 1);
	assert_int_equal(read(t->reply, &n, sizeof n), sizeof n);
	assert_int_equal(th_wait(t->pid), 0);
	close(t->cmd);
	close(t->reply);
	close(t->ready);
}

/* Scenario: a process started with VIOSCOPE_TRACE=off ticks every millisecond.
 * Its dump holds no ticks; `trace enable PID verbose:test` makes the following
 * ticks appear (contiguous, past the count read after the command); `trace
 * enable PID off` stops them: ticks counted after that command never show up,
 * though the process keeps ticking.  The process is never restarted. */
static void test_enable_then_disable_live(void **state)
{
	struct th_tmpdir *td = *state;
	struct ticker t;
	struct th_sequence d;
	char pidstr[32];

	ticker_start(td, &t, "off");
	snprintf(pidstr, sizeof pidstr, "%d", (int)t.pid);
	wait_ticks(&t, tick_count(&t), 5);
	dump_ticks(td, t.pid, &d);
	assert_int_equal(d.n, 0);

	assert_int_equal(th_cli(td, "enable", pidstr, "verbose:test", NULL), 0);
	assert_true(th_file_contains(td->out, "tracing set to verbose:test"));
	uint32_t on_at = tick_count(&t); /* every tick from here on passed an enabled check */
	wait_ticks(&t, on_at, 5);
	dump_ticks(td, t.pid, &d);
	assert_true(d.n >= 5);
	assert_true(d.contiguous);
	assert_true(d.first <= on_at);
	assert_true(d.last >= on_at + 4);

	assert_int_equal(th_cli(td, "enable", pidstr, "off", NULL), 0);
	uint32_t off_at = tick_count(&t); /* every tick from here on passed a disabled check */
	wait_ticks(&t, off_at, 20);
	dump_ticks(td, t.pid, &d);
	assert_true(d.n >= 5);
	assert_true(d.last >= on_at + 4);
	assert_true(d.last < off_at);
	uint32_t later = tick_count(&t);
	assert_true(later >= off_at + 20); /* still running, same process */
	assert_int_equal(waitpid(t.pid, NULL, WNOHANG), 0);
	ticker_quit(&t);
}

/* Scenario: `trace record PID -o FILE --enable verbose:test` on a process started
 * with tracing off turns its ticks on as streaming starts, and Ctrl-C (SIGINT)
 * ends the recording cleanly: exit 0, a complete capture holding the ticks
 * counted while it ran, none lost; the process goes on, back in flight mode. */
static void test_record_enables_and_stops_on_sigint(void **state)
{
	struct th_tmpdir *td = *state;
	struct ticker t;
	struct vs_shm shm;
	struct th_sequence d = {0};

	ticker_start(td, &t, "off");
	pid_t recorder = th_start_recording(td, t.pid, td->cap, "verbose:test", &shm);
	uint32_t on_at = tick_count(&t);
	wait_ticks(&t, on_at, 5);
	assert_int_equal(kill(recorder, SIGINT), 0);
	assert_int_equal(th_wait(recorder), 0);
	assert_int_equal(shm.hdr->mode, VS_MODE_FLIGHT);
	assert_int_equal(shm.hdr->recorder_pid, 0);
	vs_shm_close(&shm);

	th_walk_or_fail(td->cap, on_tick, &d);
	assert_true(d.n >= 5);
	assert_true(d.contiguous);
	assert_true(d.first <= on_at);
	assert_true(d.last >= on_at + 4);
	assert_true(th_file_contains(td->err, " 0 dropped, 0 overwritten"));
	assert_int_equal(waitpid(t.pid, NULL, WNOHANG), 0);
	ticker_quit(&t);
}

/* ---- flight recorder after SIGKILL ------------------------------------------------------- */
struct seq {
	struct th_sequence seen; /* the event numbers */
	uint64_t lost;
	unsigned bad_text;
};

static int on_seq(const struct th_event *e, void *opaque)
{
	struct seq *s = opaque;
	char want[256];
	unsigned t, i;
	if (!e->ev->site) {
		s->lost += e->ev->lost;
		return 0;
	}
	if (sscanf(e->msg, "seq t=%u i=%u", &t, &i) != 2) {
		s->bad_text++;
		return 0;
	}
	wl_expect_seq(want, sizeof want, t, i);
	if (strcmp(want, e->msg) != 0)
		s->bad_text++;
	th_sequence_add(&s->seen, i);
	return 0;
}

/* Scenario: a process (flight recorder, 1 MiB ring) writes 100000 numbered events,
 * says so, and is killed with SIGKILL (no exit handler runs).  Its trace file
 * survives; `trace list` shows it dead; `trace dump PID -o FILE` recovers the
 * newest events up to the very last one, intact and contiguous, and the counts add
 * up; `trace clean` then removes the file. */
static void test_sigkill_flight_record_recovered_then_cleaned(void **state)
{
	enum { N = 100000 };
	struct th_tmpdir *td = *state;
	char shm[600];
	struct seq s = {0};
	struct stat st;

	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "100000", NULL};
	pid_t pid = th_start_holding(td, argv, NULL); /* all events written */
	th_kill_holding(pid);

	th_shm_path(shm, sizeof shm, td->dir, pid);
	assert_int_equal(stat(shm, &st), 0);
	assert_int_equal(th_cli(td, "list", NULL), 0);
	char line_start[64];
	snprintf(line_start, sizeof line_start, "\n%-8d dead", (int)pid);
	assert_true(th_file_contains(td->out, line_start));

	th_dump(td, pid);
	assert_true(th_file_contains(td->err, "(process not running)"));
	th_walk_or_fail(td->cap, on_seq, &s);
	assert_int_equal(s.bad_text, 0);
	assert_true(s.seen.n > 0);
	assert_int_equal(s.seen.last, N - 1);
	assert_true(s.seen.contiguous);
	assert_int_equal(s.seen.first, N - s.seen.n);
	assert_int_equal(s.seen.n + s.lost, N);
	unlink(td->cap);

	assert_int_equal(th_cli(td, "clean", NULL), 0);
	char removed[700];
	snprintf(removed, sizeof removed, "removed %s", shm);
	assert_true(th_file_contains(td->out, removed));
	assert_int_equal(stat(shm, &st), -1);
	assert_int_equal(errno, ENOENT);
}

/* Per thread of the seq workload: what a capture holds. */
struct per_thread {
	struct {
		uint32_t tid;
		struct th_sequence seen; /* its event numbers; contiguous only from one tid */
	} t[4];
	struct {
		uint32_t tid;
		uint64_t lost;
	} loss[8];
	unsigned nloss, bad_text;
};

static int on_threads(const struct th_event *e, void *opaque)
{
	struct per_thread *p = opaque;
	char want[256];
	unsigned t, i;
	if (!e->ev->site) {
		if (p->nloss < 8)
			p->loss[p->nloss++] = (typeof(p->loss[0])){e->ev->tid, e->ev->lost};
		return 0;
	}
	if (sscanf(e->msg, "seq t=%u i=%u", &t, &i) != 2 || t >= 4) {
		p->bad_text++;
		return 0;
	}
	wl_expect_seq(want, sizeof want, t, i);
	p->bad_text += strcmp(want, e->msg) != 0;
	if (p->t[t].seen.n == 0)
		p->t[t].tid = e->ev->tid;
	else if (e->ev->tid != p->t[t].tid)
		p->t[t].seen.contiguous = false;
	th_sequence_add(&p->t[t].seen, i);
	return 0;
}

/* Scenario: three threads write 20000 events each, of varying sizes, into 16 KiB
 * flight rings (dozens of wraps) and the process exits with its file kept: the
 * dump holds each thread's newest events, contiguous up to its last, and each
 * thread's overwritten report is exactly the number of its events missing. */
static void test_flight_three_threads_counts_add_up(void **state)
{
	enum { T = 3, N = 20000 };
	struct th_tmpdir *td = *state;
	struct per_thread p = {0};

	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "20000", "-t", "3", NULL};
	const char *env[] = {"VIOSCOPE_TRACE_RING=16K", "VIOSCOPE_TRACE_KEEP=1", NULL};
	pid_t pid = th_run_workload(td, argv, env, NULL);
	th_dump_and_walk(td, pid, on_threads, &p);
	assert_int_equal(p.bad_text, 0);
	assert_int_equal(p.nloss, T);
	for (unsigned t = 0; t < T; t++) {
		uint64_t lost = UINT64_MAX;
		for (unsigned k = 0; k < p.nloss; k++)
			if (p.loss[k].tid == p.t[t].tid)
				lost = p.loss[k].lost;
		assert_true(p.t[t].seen.n > 0);
		assert_true(p.t[t].seen.contiguous);
		assert_int_equal(p.t[t].seen.last, N - 1);
		assert_int_equal(p.t[t].seen.first, N - p.t[t].seen.n);
		assert_int_equal(lost, N - p.t[t].seen.n);
	}
}

/* ---- `vioscope trace live` ---------------------------------------------------------- */
struct live_view {
	pid_t pid;
	char out[700];
};

static void live_start(struct th_tmpdir *td, struct live_view *v, pid_t target)
{
	char pid[32];
	snprintf(pid, sizeof pid, "%d", (int)target);
	snprintf(v->out, sizeof v->out, "%s.live", td->out);
	const char *argv[] = {VIOSCOPE_CLI, "trace", "live", pid, NULL};
	const char *env[] = {td->env_dir, NULL};
	v->pid = th_spawn(argv, env, NULL, v->out, td->err);
	assert_true(v->pid > 0);
}

static bool live_shows_ticks(void *opaque)
{
	struct live_view *v = opaque;
	size_t len;
	char *text = th_read_file(v->out, &len);
	bool yes = text && strstr(text, " tick ");
	free(text);
	return yes;
}

static bool live_exited(void *opaque)
{
	struct live_view *v = opaque;
	int st;
	pid_t r = waitpid(v->pid, &st, WNOHANG);
	if (r == v->pid)
		v->pid = WIFEXITED(st) ? -WEXITSTATUS(st) - 1 : -1000; /* -1: exit 0 */
	return r == v->pid || v->pid < 0;
}

/* A process ticking (verbose:test) and `trace live` on it, once the view shows ticks. */
static void live_on_a_ticker(struct th_tmpdir *td, struct ticker *t, struct live_view *v)
{
	ticker_start(td, t, "verbose:test");
	live_start(td, v, t->pid);
	assert_true(wait_until(live_shows_ticks, v, 30000));
}

/* The tick numbers `trace live` printed: the first and last, and whether every one in
 * between is there, once, in order, with no loss marker. */
static void live_ticks(const char *path, uint32_t *first, uint32_t *last, bool *contiguous)
{
	size_t len;
	char *text = th_read_file(path, &len);
	assert_non_null(text);
	bool any = false;
	*contiguous = !strstr(text, "*****");
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		const char *t = strstr(l, "run_tick: tick ");
		if (!t)
			continue;
		uint32_t n = (uint32_t)strtoul(t + 15, NULL, 10);
		if (any && n != *last + 1)
			*contiguous = false;
		if (!any)
			*first = n;
		*last = n;
		any = true;
	}
	assert_true(any);
	free(text);
}

/* Scenario: a process ticks every millisecond (verbose:test); `trace live PID` shows
 * its ticks as they happen, every one of them in order with no loss marker, and ends
 * by itself (exit 0) when the process exits, with the last ticks shown. */
static void test_live_view_follows_until_the_process_exits(void **state)
{
	struct ticker t;
	struct live_view v;
	live_on_a_ticker(*state, &t, &v);
	uint32_t now = tick_count(&t);
	wait_ticks(&t, now, 300);
	ticker_quit(&t);
	assert_true(wait_until(live_exited, &v, 30000));
	assert_int_equal(v.pid, -1); /* exit status 0 */
	uint32_t first, last;
	bool contiguous;
	live_ticks(v.out, &first, &last, &contiguous);
	assert_true(contiguous);
	assert_true(last >= now + 300 - 1);
	unlink(v.out);
}

/* Scenario: Ctrl-C (SIGINT) ends `trace live` cleanly (exit 0) while the process goes
 * on ticking. */
static void test_live_view_stops_on_sigint(void **state)
{
	struct ticker t;
	struct live_view v;
	live_on_a_ticker(*state, &t, &v);
	assert_int_equal(kill(v.pid, SIGINT), 0);
	assert_true(wait_until(live_exited, &v, 30000));
	assert_int_equal(v.pid, -1);
	uint32_t before = tick_count(&t);
	wait_ticks(&t, before, 10); /* the process did not notice */
	ticker_quit(&t);
	unlink(v.out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TMPDIR_TEST(test_enable_then_disable_live),
	    TMPDIR_TEST(test_record_enables_and_stops_on_sigint),
	    TMPDIR_TEST(test_sigkill_flight_record_recovered_then_cleaned),
	    TMPDIR_TEST(test_flight_three_threads_counts_add_up),
	    TMPDIR_TEST(test_live_view_follows_until_the_process_exits),
	    TMPDIR_TEST(test_live_view_stops_on_sigint),
	};
	return cmocka_run_group_tests_name("trace.live", tests, NULL, NULL);
}
