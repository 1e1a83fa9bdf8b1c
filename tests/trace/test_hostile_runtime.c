/* SPDX-License-Identifier: MIT */
/*
 * The traced process as the victim: whoever can open its trace file (a recorder gone
 * wrong, a tool running as its user) writes nonsense into the shared ring headers and
 * the file's header.  The process must stay up, its threads must not hang, and its
 * own events must stay correct.
 *
 * In-process, with 4 KiB rings (VIOSCOPE_TRACE_RING=4096, set by ctest; runs under
 * trace_isolate).  The test plays the hostile party through its own mapping of its own
 * trace file.  Each scenario writes from a fresh thread, so from a fresh ring; every
 * wait for a writer has a deadline, so a hang fails the test instead of stalling it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include <vioscope/trace.h>

#include "tracetools/tracetools.h"

#include "stepper.h"

#define RING	   4096u
#define DEADLINE_S 60

static struct vs_shm self;

/* ---- a writer thread driven step by step (stepper.h), with a deadline on each step --- */
struct writer {
	struct th_stepper s;
	unsigned first, count; /* "hostile %u" for first .. first + count - 1 */
};

static void writer_step(void *arg)
{
	struct writer *w = arg;
	for (unsigned i = w->first; i < w->first + w->count; i++)
		VS_INFO(TEST, "hostile %u", i);
}

static void writer_start(struct writer *w)
{
	memset(w, 0, sizeof *w);
	assert_int_equal(th_stepper_start(&w->s), 0);
}

/* Events FIRST .. FIRST + COUNT - 1; fails the test if they take more than 60 s (a
 * thread stuck in the runtime: the process then exits with it still stuck). */
static void writer_emit(struct writer *w, unsigned first, unsigned count)
{
	w->first = first;
	w->count = count;
	if (th_stepper_run(&w->s, writer_step, w, DEADLINE_S) < 0)
		fail_msg("the writer thread did not finish %u events within %d s: stuck in the "
			 "trace runtime",
			 count, DEADLINE_S);
}

static void writer_stop(struct writer *w)
{
	th_stepper_stop(&w->s);
}

static unsigned ring_slot(uint32_t tid)
{
	for (unsigned i = 0; i < self.snap.ring_count; i++) {
		struct vs_shm_ring *r = vs_shm_ring(&self, i);
		if (r->tid == tid && __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == VS_RING_ACTIVE)
			return i;
	}
	fail_msg("no active ring for thread %u", tid);
	return 0;
}

/* What the ring holds now, from its tail: the numbers of its "hostile %u" events,
 * which must be whole records of that site and consecutive.  Returns how many, and
 * the last in *LAST. */
static unsigned ring_events(unsigned slot, unsigned *last)
{
	struct vs_shm_ring *r = vs_shm_ring(&self, slot);
	uint8_t *buf = malloc(RING);
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	uint64_t from = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	unsigned n = 0, prev = 0;

	assert_non_null(buf);
	assert_true(from <= head && head - from <= RING);
	size_t len = vs_ring_copy(&self, slot, &from, head, buf, RING);
	assert_int_equal(from, head); /* everything between tail and head parsed */
	for (size_t o = 0; o < len;) {
		struct vs_event_header e;
		unsigned v;
		memcpy(&e, buf + o, sizeof e);
		if (e.site == VS_EVENT_DROPS) {
			o += e.size;
			continue;
		}
		int64_t idx = vs_meta_site_index(&self.meta, e.site);
		assert_true(idx >= 0);
		assert_string_equal(self.meta.sites[idx].fmt, "hostile %u");
		memcpy(&v, buf + o + sizeof e, 4);
		if (n && v != prev + 1)
			fail_msg("event %u follows %u in the ring", v, prev);
		prev = v;
		n++;
		o += e.size;
	}
	free(buf);
	*last = prev;
	return n;
}

/* The ring's counters and positions are those of a working ring. */
/* The ring's positions are sane and its counters within what was emitted; over_by: how
 * many overwritten events more may be counted (see test_tail_rewritten_continuously). */
static void assert_sane_but(unsigned slot, unsigned emitted, uint64_t over_by)
{
	struct vs_shm_ring *r = vs_shm_ring(&self, slot);
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	assert_true(tail <= head);
	assert_true(head - tail <= RING);
	assert_true(head <= (uint64_t)emitted * 24 + 2 * RING); /* no jump in position */
	assert_true(r->overwritten <= emitted + over_by);
	assert_true(r->dropped <= emitted);
}

static void assert_sane(unsigned slot, unsigned emitted)
{
	assert_sane_but(slot, emitted, 0);
}

/* ---- a tail past the head, or far behind it ------------------------------------------ */
enum bad_tail { PAST_HEAD_BY_ONE, PAST_HEAD_BY_RINGS, MAX_TAIL, RINGS_BEHIND };

static uint64_t bad_tail_value(enum bad_tail how, uint64_t head)
{
	switch (how) {
	case PAST_HEAD_BY_ONE:
		return head + 1;
	case PAST_HEAD_BY_RINGS:
		return head + 3 * RING;
	case MAX_TAIL:
		return UINT64_MAX;
	case RINGS_BEHIND:
		break;
	}
	return head - 5 * RING;
}

/* Flight mode, 600 events (several laps of a 4 KiB ring), then the hostile tail, then
 * 2000 more: the thread finishes them, the ring ends with its newest events, whole and
 * in order, and its counters stay within what was emitted. */
static void run_bad_tail(enum bad_tail how)
{
	struct writer w;
	unsigned last;

	writer_start(&w);
	writer_emit(&w, 0, 600);
	unsigned slot = ring_slot(w.s.tid);
	struct vs_shm_ring *r = vs_shm_ring(&self, slot);
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	__atomic_store_n(&r->tail, bad_tail_value(how, head), __ATOMIC_RELEASE);
	writer_emit(&w, 600, 2000);
	assert_sane(slot, 2600);
	unsigned n = ring_events(slot, &last);
	assert_int_equal(last, 2599);
	assert_true(n >= RING / 24 / 2); /* at least half a ring of newest events */
	writer_stop(&w);
}

static void test_tail_just_past_head(void **state)
{
	(void)state;
	run_bad_tail(PAST_HEAD_BY_ONE);
}

static void test_tail_rings_past_head(void **state)
{
	(void)state;
	run_bad_tail(PAST_HEAD_BY_RINGS);
}

static void test_tail_at_max(void **state)
{
	(void)state;
	run_bad_tail(MAX_TAIL);
}

static void test_tail_rings_behind_head(void **state)
{
	(void)state;
	run_bad_tail(RINGS_BEHIND);
}

/* Stream mode, a recorder that is alive (our own pid) writes a tail past the head: the
 * events that follow fit in the ring, so all of them are kept, none dropped. */
static void test_stream_recorder_writes_tail_past_head(void **state)
{
	struct writer w;
	unsigned last;
	(void)state;

	writer_start(&w);
	writer_emit(&w, 0, 10);
	unsigned slot = ring_slot(w.s.tid);
	struct vs_shm_ring *r = vs_shm_ring(&self, slot);
	/* a recorder took everything so far */
	__atomic_store_n(&r->tail, __atomic_load_n(&r->head, __ATOMIC_ACQUIRE), __ATOMIC_RELEASE);
	__atomic_store_n(&self.hdr->recorder_pid, (int32_t)getpid(), __ATOMIC_RELAXED);
	__atomic_store_n(&self.hdr->mode, VS_MODE_STREAM, __ATOMIC_RELEASE);
	__atomic_store_n(&r->tail, __atomic_load_n(&r->head, __ATOMIC_ACQUIRE) + 4 * RING,
			 __ATOMIC_RELEASE);
	writer_emit(&w, 10, 50);
	__atomic_store_n(&self.hdr->mode, VS_MODE_FLIGHT, __ATOMIC_RELEASE);
	__atomic_store_n(&self.hdr->recorder_pid, 0, __ATOMIC_RELAXED);
	assert_int_equal(r->dropped, 0);
	assert_sane(slot, 60);
	unsigned n = ring_events(slot, &last);
	assert_int_equal(last, 59);
	assert_true(n >= 50);
	writer_stop(&w);
}

/* ---- a tail that keeps changing ------------------------------------------------------ */
struct chaos {
	pthread_t th;
	struct vs_shm_ring *r;
	int stop;
	unsigned long writes;
};

static void *chaos_main(void *arg)
{
	struct chaos *c = arg;
	uint64_t x = 0x9e3779b97f4a7c15ull;
	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE)) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		__atomic_store_n(&c->r->tail, x, __ATOMIC_RELEASE);
		c->writes++;
	}
	return NULL;
}

/* A thread writes random tails as fast as it can while the writer emits 5000 events:
 * every event returns (some may be dropped, counted); once it stops, the ring works
 * as before and holds the newest events whole and in order. */
static void test_tail_rewritten_continuously(void **state)
{
	struct writer w;
	struct chaos c = {0};
	unsigned last;
	(void)state;

	writer_start(&w);
	writer_emit(&w, 0, 1);
	unsigned slot = ring_slot(w.s.tid);
	c.r = vs_shm_ring(&self, slot);
	assert_int_equal(pthread_create(&c.th, NULL, chaos_main, &c), 0);
	writer_emit(&w, 1, 5000);
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
	pthread_join(c.th, NULL);
	writer_emit(&w, 5001, 400);
	/* Counts exact: a tail behind the one the writer set, or inside a record, is not
	 * walked from (the runtime's trusted_start). */
	assert_sane(slot, 5401);
	unsigned n = ring_events(slot, &last);
	assert_int_equal(last, 5400);
	assert_true(n >= RING / 24 / 2);
	print_message("%lu hostile tails, %llu events dropped\n", c.writes,
		      (unsigned long long)c.r->dropped);
	writer_stop(&w);
}

/* ---- the file's header rewritten before a thread attaches --------------------------- */

/* Ring geometry in the header set to places far outside the file: a thread that
 * starts tracing afterwards still gets a ring where the process put them, and its
 * events read back intact through the geometry the tools checked at open. */
static void test_header_geometry_rewritten_before_attach(void **state)
{
	struct writer w;
	struct vs_shm_header saved;
	unsigned last;
	(void)state;

	memcpy(&saved, self.hdr, sizeof saved);
	self.hdr->rings_offset = 1ull << 40;
	self.hdr->data_offset = 1ull << 41;
	self.hdr->ring_size = 1ull << 30;
	self.hdr->ring_count = 4096;
	writer_start(&w);
	writer_emit(&w, 0, 100);
	unsigned slot = ring_slot(w.s.tid);
	assert_sane(slot, 100);
	assert_int_equal(ring_events(slot, &last), 100);
	assert_int_equal(last, 99);
	writer_stop(&w);
	self.hdr->rings_offset = saved.rings_offset;
	self.hdr->data_offset = saved.data_offset;
	self.hdr->ring_size = saved.ring_size;
	self.hdr->ring_count = saved.ring_count;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tail_just_past_head),
	    cmocka_unit_test(test_tail_rings_past_head),
	    cmocka_unit_test(test_tail_at_max),
	    cmocka_unit_test(test_tail_rings_behind_head),
	    cmocka_unit_test(test_stream_recorder_writes_tail_past_head),
	    cmocka_unit_test(test_tail_rewritten_continuously),
	    cmocka_unit_test(test_header_geometry_rewritten_before_attach),
	};
	char pid[32], why[512];
	int rc;

	snprintf(pid, sizeof pid, "%d", (int)getpid());
	if (vs_shm_open(&self, pid, why, sizeof why) < 0) {
		fprintf(stderr, "test_trace_hostile_runtime: %s (run it under trace_isolate)\n",
			why);
		return 1;
	}
	if (self.snap.ring_size != RING) {
		fprintf(stderr, "test_trace_hostile_runtime: needs VIOSCOPE_TRACE_RING=%u\n", RING);
		vs_shm_close(&self);
		return 1;
	}
	rc = cmocka_run_group_tests_name("trace.hostile_runtime", tests, NULL, NULL);
	vs_shm_close(&self);
	return rc;
}
