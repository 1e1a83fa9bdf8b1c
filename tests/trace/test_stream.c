/* SPDX-License-Identifier: MIT */
/*
 * Streaming a live process: the workload (all flavour) writes numbered events
 * while a recorder drains its rings, either vs_trace_record in a thread of this
 * test or the `vioscope trace record` command.  Each test has its own
 * VIOSCOPE_TRACE_DIR.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver.h"
#include "tracetools/tracetools.h"
#include "workload.h"

/* Each test runs in its own VIOSCOPE_TRACE_DIR (helpers.h, struct th_tmpdir). */
static int setup(void **state)
{
	return th_tmpdir_setup(state, "stream");
}
#define TMPDIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup, th_tmpdir_teardown)

/* ---- checking a stream of numbered events ---------------------------------------------- */
#define MAX_THREADS 8

struct check {
	unsigned threads, per_thread;
	unsigned next[MAX_THREADS]; /* next expected number per thread */
	uint64_t events, lost, markers;
	uint64_t bad_text, bad_order;
	bool allow_gaps;       /* unpaced: gaps allowed, but each exactly marked */
	uint64_t pending_lost; /* marker counts not yet matched to a gap (one thread) */
	char first_bad[512];
};

static int check_event(const struct th_event *e, void *opaque)
{
	struct check *k = opaque;
	char want[256];
	unsigned t, i;

	if (!e->ev->site) {
		k->markers++;
		k->lost += e->ev->lost;
		k->pending_lost += e->ev->lost;
		return 0;
	}
	if (sscanf(e->msg, "seq t=%u i=%u", &t, &i) != 2 || t >= k->threads) {
		k->bad_text++;
		return 0;
	}
	wl_expect_seq(want, sizeof want, t, i);
	if (e->fmt_rc != 0 || strcmp(want, e->msg) != 0) {
		if (!k->bad_text++)
			snprintf(k->first_bad, sizeof k->first_bad, "got \"%s\" want \"%s\"",
				 e->msg, want);
	}
	if (k->allow_gaps) {
		/* single thread: the gap before this event is what the markers said */
		if (i != k->next[t] + k->pending_lost)
			k->bad_order++;
		k->pending_lost = 0;
	} else if (i != k->next[t]) {
		k->bad_order++;
	}
	k->next[t] = i + 1;
	k->events++;
	return 0;
}

static void check_capture(const char *path, struct check *k)
{
	th_walk_or_fail(path, check_event, k);
	if (k->bad_text)
		print_error("%llu bad messages, first: %s\n", (unsigned long long)k->bad_text,
			    k->first_bad);
	assert_int_equal(k->bad_text, 0);
	assert_int_equal(k->bad_order, 0);
}

/* ---- recorder thread --------------------------------------------------------------------- */
struct recorder {
	pthread_t th;
	sem_t started;
	char target[600], out[600], why[512];
	int rc;
	struct vs_dump_stats st;
};

static void rec_started(void *opaque)
{
	sem_post(&((struct recorder *)opaque)->started);
}

static void *rec_main(void *arg)
{
	struct recorder *r = arg;
	struct vs_record_opts o = {.started = rec_started, .opaque = r};
	r->rc = vs_trace_record(r->target, r->out, &o, &r->st, r->why, sizeof r->why);
	if (r->rc < 0)
		sem_post(&r->started);
	return NULL;
}

/* Run the workload (all flavour, seq mode, EXTRA options) with a 4 KiB ring while
 * vs_trace_record streams it from a thread here; returns the workload's status. */
static int record_workload(struct th_tmpdir *td, const char *n, const char *extra, const char *out,
			   struct vs_dump_stats *st)
{
	struct th_gated w;
	struct recorder rec = {0};

	const char *argv[] = {WORKLOAD_ALL, "seq", "-n", n, extra, NULL}; /* EXTRA may be NULL */
	const char *env[] = {"VIOSCOPE_TRACE_RING=4096", NULL};
	th_start_gated(td, &w, argv, env);

	th_shm_path(rec.target, sizeof rec.target, td->dir, w.pid);
	snprintf(rec.out, sizeof rec.out, "%s", out);
	sem_init(&rec.started, 0, 0);
	assert_int_equal(pthread_create(&rec.th, NULL, rec_main, &rec), 0);
	sem_wait(&rec.started);
	if (rec.rc < 0)
		fail_msg("record: %s", rec.why);
	int status = th_let_go_and_wait(&w);
	pthread_join(rec.th, NULL);
	if (rec.rc < 0)
		fail_msg("record: %s", rec.why);
	*st = rec.st;
	sem_destroy(&rec.started);
	return status;
}

/* Scenario: a 4 KiB ring streamed by vs_trace_record while one thread writes 20000
 * events (~1.2 MB, the ring wraps ~300 times), pacing itself so the recorder keeps
 * up: every event arrives once, in order, with its values intact; nothing dropped. */
static void test_wrap_paced_every_event_arrives_intact(void **state)
{
	struct th_tmpdir *td = *state;
	struct vs_dump_stats st;
	struct check k = {.threads = 1};
	char out[600];

	snprintf(out, sizeof out, "%s/wrap.vstrace", td->dir);
	assert_int_equal(record_workload(td, "20000", "-p", out, &st), 0);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.overwritten, 0);
	assert_true(st.bytes > 100 * 4096);
	check_capture(out, &k);
	assert_int_equal(k.events, 20000);
	assert_int_equal(k.next[0], 20000);
	assert_int_equal(k.markers, 0);
	unlink(out);
	/* a normal exit leaves no trace file behind */
	assert_int_equal(th_count_files(td->dir, VS_SHM_PREFIX), 0);
}

/* Scenario: the same without pacing (200000 events into 4 KiB): the recorder may
 * fall behind, but nothing is lost silently: events arrive in order with their
 * values intact, every gap is exactly the count of the drop marker before it (or
 * of the report at the end), and arrived + reported lost == written. */
static void test_wrap_unpaced_every_gap_is_accounted(void **state)
{
	struct th_tmpdir *td = *state;
	struct vs_dump_stats st;
	struct check k = {.threads = 1, .allow_gaps = true};
	char out[600];

	snprintf(out, sizeof out, "%s/wrap-unpaced.vstrace", td->dir);
	assert_int_equal(record_workload(td, "200000", NULL, out, &st), 0);
	assert_int_equal(st.overwritten, 0);
	check_capture(out, &k);
	print_message("arrived %llu, dropped %llu (%llu reports)\n", (unsigned long long)k.events,
		      (unsigned long long)k.lost, (unsigned long long)k.markers);
	assert_int_equal(k.events + k.lost, 200000);
	assert_int_equal(k.lost, st.dropped);
	assert_int_equal(k.next[0] + k.pending_lost, 200000); /* drops after the last event */
	unlink(out);
}

/* ---- `vioscope trace record` with four threads ------------------------------------------- */
/* Scenario: four threads write 200000 numbered events each (16 MiB rings: room
 * for all of it) while `vioscope trace record PID -o FILE` streams: the command
 * ends when the process exits, and every event is there exactly once, in order per
 * thread, values intact; nothing dropped. */
static void test_cli_record_four_threads_every_event_once(void **state)
{
	enum { T = 4, N = 200000 };
	struct th_tmpdir *td = *state;
	struct check k = {.threads = T};
	struct th_gated w;
	struct vs_shm shm;

	const char *argv[] = {WORKLOAD_ALL, "seq", "-n", "200000", "-t", "4", NULL};
	const char *env[] = {"VIOSCOPE_TRACE_RING=16M", "VIOSCOPE_TRACE_THREADS=8", NULL};
	th_start_gated(td, &w, argv, env);
	pid_t recorder = th_start_recording(td, w.pid, td->cap, NULL, &shm);
	vs_shm_close(&shm);

	assert_int_equal(th_let_go_and_wait(&w), 0);
	assert_int_equal(th_wait(recorder), 0);

	check_capture(td->cap, &k);
	assert_int_equal(k.events, (uint64_t)T * N);
	for (unsigned t = 0; t < T; t++)
		assert_int_equal(k.next[t], N);
	assert_int_equal(k.markers, 0);
	assert_true(th_file_contains(td->err, " 0 dropped, 0 overwritten"));
	unlink(td->cap);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TMPDIR_TEST(test_wrap_paced_every_event_arrives_intact),
	    TMPDIR_TEST(test_wrap_unpaced_every_gap_is_accounted),
	    TMPDIR_TEST(test_cli_record_four_threads_every_event_once),
	};
	return cmocka_run_group_tests_name("trace.stream", tests, NULL, NULL);
}
