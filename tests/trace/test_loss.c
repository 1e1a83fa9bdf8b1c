/* SPDX-License-Identifier: MIT */
/*
 * Drop and overwrite accounting, in-process with a 4 KiB ring per thread
 * (VIOSCOPE_TRACE_RING=4096, set by ctest; the test runs under trace_isolate).
 * Each scenario writes from a fresh thread, so it gets a fresh ring with zeroed
 * counters; the scenarios find their events by that thread's tid.
 *
 *
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <vioscope/trace.h>

#include "tracetools/tracetools.h"

#include "sequence.h"
#include "stepper.h"

#define RING 4096u
/* "loss %u": 16-byte header + one u32, rounded up to 8 */
#define REC 24u

static struct vs_shm self;

static struct vs_shm_ring *ring_of(uint32_t tid)
{
	for (unsigned i = 0; i < self.snap.ring_count; i++) {
		struct vs_shm_ring *r = vs_shm_ring(&self, i);
		if (r->tid == tid && __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) != VS_RING_FREE)
			return r;
	}
	return NULL;
}

/* Bounded wait (60 s) for a recorder to hand back everything in a ring. */
static bool wait_drained(struct vs_shm_ring *r)
{
	for (unsigned i = 0; i < 600000; i++) {
		if (__atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) ==
		    __atomic_load_n(&r->head, __ATOMIC_ACQUIRE))
			return true;
		usleep(100);
	}
	return false;
}

/* ---- a writer thread driven step by step (stepper.h) ----------------------------------- */
enum step { STEP_RANGE, STEP_AFTER, STEP_OVERSIZE };

struct writer {
	struct th_stepper s;
	enum step step;
	unsigned first, count; /* STEP_RANGE: "loss %u" for first..first+count-1 */
};

static void writer_step(void *arg)
{
	struct writer *w = arg;
	char big[VS_TRACE_STR_MAX + 1];

	memset(big, 'B', sizeof big - 1);
	big[sizeof big - 1] = '\0';
	switch (w->step) {
	case STEP_RANGE:
		for (unsigned i = w->first; i < w->first + w->count; i++)
			VS_INFO(TEST, "loss %u", i);
		break;
	case STEP_AFTER:
		VS_INFO(TEST, "after");
		break;
	case STEP_OVERSIZE: /* 16 + 8 * 130 bytes: more than a quarter of the ring */
		VS_INFO(TEST, "big %s %s %s %s %s %s %s %s", big, big, big, big, big, big, big,
			big);
		break;
	}
}

static void writer_start(struct writer *w)
{
	memset(w, 0, sizeof *w);
	assert_int_equal(th_stepper_start(&w->s), 0);
}

static void writer_do(struct writer *w, enum step step, unsigned first, unsigned count)
{
	w->step = step;
	w->first = first;
	w->count = count;
	assert_int_equal(th_stepper_run(&w->s, writer_step, w, 60), 0);
}

/* The thread exits: its ring is retired, its data stays for dumps. */
static void writer_stop(struct writer *w)
{
	th_stepper_stop(&w->s);
}

/* ---- recorder thread (vs_trace_record on our own pid) ----------------------------------- */
struct recorder {
	pthread_t th;
	sem_t started;
	volatile sig_atomic_t stop;
	char path[600];
	int rc;
	char why[512];
	struct vs_dump_stats st;
};

static void rec_started(void *opaque)
{
	sem_post(&((struct recorder *)opaque)->started);
}

static void *rec_main(void *arg)
{
	struct recorder *r = arg;
	char pid[32];
	struct vs_record_opts o = {.stop = &r->stop, .started = rec_started, .opaque = r};
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	r->rc = vs_trace_record(pid, r->path, &o, &r->st, r->why, sizeof r->why);
	if (r->rc < 0)
		sem_post(&r->started);
	return NULL;
}

static void recorder_start(struct recorder *r, const char *name)
{
	memset(r, 0, sizeof *r);
	snprintf(r->path, sizeof r->path, "%s/%s-%d.vstrace", vs_shm_dir(), name, (int)getpid());
	sem_init(&r->started, 0, 0);
	assert_int_equal(pthread_create(&r->th, NULL, rec_main, r), 0);
	sem_wait(&r->started);
	if (r->rc < 0)
		fail_msg("record: %s", r->why);
}

static void recorder_stop(struct recorder *r)
{
	r->stop = 1;
	pthread_join(r->th, NULL);
	sem_destroy(&r->started);
	if (r->rc < 0)
		fail_msg("record: %s", r->why);
}

/* ---- what a capture holds for one thread -------------------------------------------------- */
struct seen {
	uint32_t tid;
	struct th_sequence numbers; /* of the "loss %u" events */
	unsigned markers;	    /* loss reports for this thread */
	uint64_t lost;		    /* sum of their counts */
	bool dropped_kind, overwritten_kind;
	int marker_after; /* events seen before the first loss report, -1 if none */
	unsigned after;	  /* "after" events */
	bool after_follows_marker;
	bool last_was_marker;
};

static int on_event(const struct vs_cap_event *ev, void *opaque)
{
	struct seen *s = opaque;
	char msg[256];
	unsigned n;

	if (ev->tid != s->tid)
		return 0;
	if (!ev->site) {
		if (s->markers++ == 0)
			s->marker_after = (int)s->numbers.n;
		s->lost += ev->lost;
		s->dropped_kind |= strstr(ev->lost_what, "dropped") != NULL;
		s->overwritten_kind |= strstr(ev->lost_what, "overwritten") != NULL;
		s->last_was_marker = true;
		return 0;
	}
	assert_int_equal(vs_format_message(msg, sizeof msg, ev->site, ev->args, ev->args_len), 0);
	if (!strcmp(msg, "after")) {
		s->after++;
		s->after_follows_marker = s->last_was_marker;
	} else if (sscanf(msg, "loss %u", &n) == 1) {
		th_sequence_add(&s->numbers, n);
	}
	s->last_was_marker = false;
	return 0;
}

static void walk_capture(const char *path, struct seen *s, uint32_t tid)
{
	struct vs_capture *c;
	char why[512];

	memset(s, 0, sizeof *s);
	s->tid = tid;
	s->marker_after = -1;
	if (vs_capture_open(&c, path, why, sizeof why) < 0)
		fail_msg("%s", why);
	assert_int_equal(vs_capture_walk(c, on_event, s, why, sizeof why), 0);
	vs_capture_close(c);
}

static void dump_self(const char *name, char *path, size_t len, struct vs_dump_stats *st)
{
	char pid[32], why[512];
	snprintf(path, len, "%s/%s-%d.vstrace", vs_shm_dir(), name, (int)getpid());
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	if (vs_trace_dump(pid, path, st, why, sizeof why) < 0)
		fail_msg("dump: %s", why);
}

static void set_mode(uint32_t mode)
{
	__atomic_store_n(&self.hdr->mode, mode, __ATOMIC_RELEASE);
}

/* In MODE, a fresh thread (so a fresh ring with zeroed counters) takes STEP once
 * (STEP_RANGE: "loss 0" to "loss N-1") and exits, its ring retired with the data
 * kept for dumps; then back to flight mode.  Returns the ring and, in *TID, the
 * thread's tid, which finds its events in a capture. */
static struct vs_shm_ring *thread_writes_and_exits(uint32_t mode, enum step step, unsigned n,
						   uint32_t *tid)
{
	struct writer w;

	set_mode(mode);
	writer_start(&w);
	writer_do(&w, step, 0, n);
	writer_stop(&w);
	set_mode(VS_MODE_FLIGHT);
	struct vs_shm_ring *r = ring_of(w.s.tid);
	assert_non_null(r);
	*tid = w.s.tid;
	return r;
}

/* Dump this process (as NAME) and see what the capture holds for thread TID. */
static void dump_thread(const char *name, uint32_t tid, struct seen *s)
{
	struct vs_dump_stats st;
	char path[600];

	dump_self(name, path, sizeof path, &st);
	walk_capture(path, s, tid);
	unlink(path);
}

/* ---- scenarios -------------------------------------------------------------------------- */

static void decode_text(const char *path, char **text)
{
	struct vs_decode_opts o = {.to_s = -1};
	char why[512];
	size_t len;
	FILE *f = open_memstream(text, &len);
	assert_non_null(f);
	if (vs_trace_decode(path, &o, f, why, sizeof why) < 0)
		fail_msg("decode: %s", why);
	fclose(f);
}

/* Scenario: stream mode, nobody draining, 1000 events into a 4 KiB ring.  What fits
 * (4096 / 24 = 170 records) stays and the ring counts the other 830 as dropped;
 * once a recorder has drained the ring, the thread's next event comes right after
 * a drop marker carrying 830, and the decoder prints "830 events dropped". */
static void test_stream_full_ring_counts_drops_then_marks_them(void **state)
{
	enum { N = 1000, FIT = RING / REC };
	struct writer w;
	struct recorder rec;
	struct seen s;
	char *text, want[64];
	(void)state;

	set_mode(VS_MODE_STREAM); /* as a recorder would, but nobody drains */
	writer_start(&w);
	writer_do(&w, STEP_RANGE, 0, N);
	struct vs_shm_ring *r = ring_of(w.s.tid);
	assert_non_null(r);
	assert_int_equal(r->generation, 1); /* a fresh slot: the stream starts at 0 */
	assert_int_equal(r->head - r->tail, FIT * REC);
	assert_int_equal(r->dropped, N - FIT);
	assert_int_equal(r->overwritten, 0);

	recorder_start(&rec, "stream-drops");
	assert_true(wait_drained(r));
	writer_do(&w, STEP_AFTER, 0, 0);
	assert_true(wait_drained(r));
	recorder_stop(&rec);
	writer_stop(&w);
	assert_int_equal(rec.st.dropped, N - FIT);

	walk_capture(rec.path, &s, w.s.tid);
	assert_int_equal(s.numbers.n, FIT);
	assert_int_equal(s.numbers.first, 0);
	assert_int_equal(s.numbers.last, FIT - 1);
	assert_true(s.numbers.contiguous);
	assert_int_equal(s.markers, 1);
	assert_int_equal(s.lost, N - FIT);
	assert_true(s.dropped_kind);
	assert_int_equal(s.marker_after, FIT);
	assert_int_equal(s.after, 1);
	assert_true(s.after_follows_marker);

	decode_text(rec.path, &text);
	snprintf(want, sizeof want, " %d events dropped", N - FIT);
	assert_non_null(strstr(text, want));
	free(text);
	unlink(rec.path);
}

/* Scenario: stream mode, nobody draining, and the thread exits with drops that no
 * later event could mark: the capture still reports them (from the ring's counter)
 * after the thread's last event. */
static void test_stream_drops_at_thread_end_are_reported(void **state)
{
	enum { N = 500, FIT = RING / REC };
	struct seen s;
	uint32_t tid;
	(void)state;

	struct vs_shm_ring *r = thread_writes_and_exits(VS_MODE_STREAM, STEP_RANGE, N, &tid);
	assert_int_equal(r->generation, 1);
	assert_int_equal(r->dropped, N - FIT);

	dump_thread("stream-end", tid, &s);
	assert_int_equal(s.numbers.n, FIT);
	assert_true(s.numbers.contiguous);
	assert_int_equal(s.numbers.last, FIT - 1);
	assert_int_equal(s.markers, 1);
	assert_int_equal(s.marker_after, FIT); /* after the last event */
	assert_int_equal(s.lost, N - FIT);
	assert_true(s.dropped_kind);
}

/* What a flight-mode dump of a thread that wrote "loss 0" to "loss N-1" must hold:
 * its newest events, contiguous up to the last, and with the OVERWRITTEN ones all N. */
static void check_newest_kept(const struct seen *s, uint64_t overwritten, unsigned n)
{
	assert_true(s->numbers.n > 0);
	assert_int_equal(s->numbers.n + overwritten, n);
	assert_int_equal(s->numbers.last, n - 1);
	assert_true(s->numbers.contiguous);
}

/* Scenario: flight mode (the default), 1000 events into a 4 KiB ring: the oldest
 * are overwritten and counted, overwritten == emitted - retained, and the dump
 * holds exactly the newest events, contiguous up to the last one, announced by
 * one "overwritten" report before them. */
static void test_flight_overwrites_oldest_and_keeps_newest(void **state)
{
	enum { N = 1000 };
	struct seen s;
	uint32_t tid;
	(void)state;

	struct vs_shm_ring *r = thread_writes_and_exits(VS_MODE_FLIGHT, STEP_RANGE, N, &tid);
	assert_int_equal(r->generation, 1);
	assert_int_equal(r->dropped, 0);
	uint64_t overwritten = r->overwritten;

	dump_thread("flight", tid, &s);
	check_newest_kept(&s, overwritten, N);
	assert_true(s.numbers.n <= RING / REC);
	assert_true(overwritten > 0);
	assert_int_equal(s.numbers.first, N - s.numbers.n);
	assert_int_equal(s.markers, 1);
	assert_int_equal(s.marker_after, 0);
	assert_int_equal(s.lost, overwritten);
	assert_true(s.overwritten_kind);
	assert_false(s.dropped_kind);
}

/* Scenario: flight mode keeps going across many wraps: after 20000 events the dump
 * still holds the newest ones, contiguous, and the counts add up. */
static void test_flight_many_wraps_counts_add_up(void **state)
{
	enum { N = 20000 };
	struct seen s;
	uint32_t tid;
	(void)state;

	struct vs_shm_ring *r = thread_writes_and_exits(VS_MODE_FLIGHT, STEP_RANGE, N, &tid);
	dump_thread("flight-wraps", tid, &s);
	check_newest_kept(&s, r->overwritten, N);
}

/* Scenario: flight mode, then a recorder drains the ring and leaves, then flight
 * mode again over several wraps (the overwrites now start from a tail the
 * recorder put there): every event is in the recording, in the final dump, or
 * counted as overwritten, exactly once, and each capture is contiguous. */
static void test_flight_after_recorder_counts_add_up(void **state)
{
	enum { N1 = 1000, N = 3000 };
	struct writer w;
	struct recorder rec;
	struct seen rs, ds;
	(void)state;

	set_mode(VS_MODE_FLIGHT);
	writer_start(&w);
	writer_do(&w, STEP_RANGE, 0, N1);
	struct vs_shm_ring *r = ring_of(w.s.tid);
	assert_non_null(r);
	recorder_start(&rec, "flight-rec");
	assert_true(wait_drained(r));
	recorder_stop(&rec);
	assert_int_equal(self.hdr->mode, VS_MODE_FLIGHT);
	writer_do(&w, STEP_RANGE, N1, N - N1);
	writer_stop(&w);
	dump_thread("flight-after", w.s.tid, &ds);
	walk_capture(rec.path, &rs, w.s.tid);
	assert_true(rs.numbers.n > 0 && rs.numbers.contiguous);
	assert_int_equal(rs.numbers.last, N1 - 1);
	assert_true(ds.numbers.n > 0 && ds.numbers.contiguous);
	assert_int_equal(ds.numbers.last, N - 1);
	assert_true(ds.numbers.first > rs.numbers.last);
	assert_int_equal(rs.numbers.n + ds.numbers.n + r->overwritten, N);
	unlink(rec.path);
}

/* Was a bug: an event larger than a quarter of the ring is dropped in the slow path
 * (src/trace/runtime.c vs__reserve_slow, `len > tr->size / 4`) by bumping only the
 * thread-private pending_drops: the ring's `dropped` counter never counts it, a
 * later event reports it as "dropped (ring full while streaming)" even in flight
 * mode, and if the thread emits nothing else the loss is silent. */
static void test_oversize_event_is_counted(void **state)
{
	struct seen s;
	uint32_t tid;
	(void)state;

	/* the thread's first and only event: the slow path */
	struct vs_shm_ring *r = thread_writes_and_exits(VS_MODE_FLIGHT, STEP_OVERSIZE, 0, &tid);
	dump_thread("oversize", tid, &s);
	assert_int_equal(r->dropped + r->overwritten, 1);
	assert_int_equal(s.lost, 1);
}

static void *one_event(void *arg)
{
	(void)arg;
	VS_INFO(TEST, "loss %u", 0u);
	return NULL;
}

/* Scenario: each thread that emits gets a writer state and a 64 KiB scratch buffer;
 * 200 threads that start, emit and end leave the heap where it was (they were
 * once leaked: ~13 MB here).  Sanitizer builds: LeakSanitizer checks this too. */
static void test_thread_exit_frees_ring_memory(void **state)
{
	pthread_t th;
	(void)state;

	/* one round first: lazily allocated runtime and libc state */
	assert_int_equal(pthread_create(&th, NULL, one_event, NULL), 0);
	pthread_join(th, NULL);
	size_t before = mallinfo2().uordblks;
	for (int i = 0; i < 200; i++) {
		assert_int_equal(pthread_create(&th, NULL, one_event, NULL), 0);
		pthread_join(th, NULL);
	}
	size_t after = mallinfo2().uordblks;
	print_message("heap in use grew by %zu bytes over 200 threads\n", after - before);
	assert_true(after - before < 200 * 1024); /* a leak would be 200 * ~65 KiB */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stream_full_ring_counts_drops_then_marks_them),
	    cmocka_unit_test(test_stream_drops_at_thread_end_are_reported),
	    cmocka_unit_test(test_flight_overwrites_oldest_and_keeps_newest),
	    cmocka_unit_test(test_flight_many_wraps_counts_add_up),
	    cmocka_unit_test(test_flight_after_recorder_counts_add_up),
	    cmocka_unit_test(test_thread_exit_frees_ring_memory),
	    cmocka_unit_test(test_oversize_event_is_counted),
	};
	char pid[32], why[512];
	int rc;

	snprintf(pid, sizeof pid, "%d", (int)getpid());
	if (vs_shm_open(&self, pid, why, sizeof why) < 0) {
		fprintf(stderr, "test_trace_loss: %s (run it under trace_isolate)\n", why);
		return 1;
	}
	if (self.snap.ring_size != RING) {
		fprintf(stderr, "test_trace_loss: needs VIOSCOPE_TRACE_RING=%u\n", RING);
		vs_shm_close(&self);
		return 1;
	}
	rc = cmocka_run_group_tests_name("trace.loss", tests, NULL, NULL);
	vs_shm_close(&self);
	return rc;
}
