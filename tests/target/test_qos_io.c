/* SPDX-License-Identifier: MIT */
/*
 * QoS limits end to end: a target in this process (its library: the test sets limits with
 * vs_target_qos_set and reads vs_target_lun_stats) driven by the initiator library.  Rates
 * are compared with the limits as ratios over the test's own run; requests held by a limit
 * are held with one of a byte a second (a 4 KiB read would wait over an hour), never by a
 * delay, so that what releases them is the thing under test.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../initiator/harness.h"
#include "target/target_int.h"

#define DEADLINE_MS 60000 /* any wait: fails the test rather than hang */
#define DEPTH	    32	  /* requests in flight per LUN */
#define BLOCKS	    8	  /* 4 KiB reads of 512-byte blocks */

struct fx {
	struct tgt tg;
	struct vs_target *t;
	struct vs_ini *ini;
	struct vs_ini_queue *q;
};

/* LUNs 0 and 1 on RAM, one request queue (both LUNs share its ring and its worker). */
static struct fx *fx_open(bool poll)
{
	struct vs_ini_opts o = {.queues = 1, .data_mem = 8u << 20};
	struct fx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	tgt_init(&x->tg);
	x->tg.o = (struct target_opts){
	    .in_process = true, .luns = {"0:ram=16M", "1:ram=16M"}, .queues = 1, .poll = poll};
	assert_int_equal(tgt_start(&x->tg), 0);
	x->t = x->tg.tg.t;
	o.socket = x->tg.tg.sock;
	assert_int_equal(vs_ini_open(&x->ini, &o), 0);
	x->q = vs_ini_get_queue(x->ini, 0);
	return x;
}

static void fx_close(struct fx *x)
{
	vs_ini_close(x->ini);
	assert_int_equal(target_stop(&x->tg.tg, 0, 0, NULL), 0);
	tgt_fini(&x->tg);
	free(x);
}

/* burst: of the IOPS limit (0: the default, a tenth of a second's worth) */
static void qos_set_burst(struct fx *x, unsigned lun, uint64_t iops, uint64_t burst, uint64_t bps)
{
	struct vs_target_qos q;
	char why[256];

	memset(&q, 0, sizeof(q));
	q.iops[VS_QOS_TOTAL] = iops;
	q.burst_iops[VS_QOS_TOTAL] = burst;
	q.bps[VS_QOS_TOTAL] = bps;
	assert_int_equal(vs_target_qos_set(x->t, NULL, lun, &q, why, sizeof(why)), 0);
}

static void qos_set(struct fx *x, unsigned lun, uint64_t iops, uint64_t bps)
{
	qos_set_burst(x, lun, iops, 0, bps);
}

/* A limit with a burst of half a second's worth: a worker or test thread kept off the CPU
 * for less than that costs the LUN none of its rate (the bucket keeps the credit, the 32
 * requests held spend it when the worker is back).  Rates are measured over 4 s after the
 * burst was spent, so that even a burst left whole (the test thread too slow to spend it
 * before the window) adds at most 1/8: the bounds below hold by construction. */
static void qos_set_rate(struct fx *x, unsigned lun, uint64_t iops)
{
	qos_set_burst(x, lun, iops, iops / 2, 0);
}

static struct vs_target_lun_stats lun_stats(struct fx *x, unsigned id)
{
	struct vs_target_lun_stats s[4];

	assert_int_equal(vs_target_lun_stats(x->t, NULL, s, 4), 2);
	return s[id];
}

/* DEPTH reads in flight on each LUN of luns, resubmitted as they complete. */
struct stream {
	unsigned lun;
	struct waiter *w; /* DEPTH */
	uint8_t *buf;
	uint64_t done;
};

static void stream_init(struct fx *x, struct stream *s, unsigned lun)
{
	s->lun = lun;
	s->done = 0;
	s->w = calloc(DEPTH, sizeof(*s->w));
	s->buf = vs_ini_alloc(x->ini, DEPTH * 4096, 4096);
	assert_non_null(s->w);
	assert_non_null(s->buf);
	for (unsigned i = 0; i < DEPTH; i++) {
		waiter_prep(&s->w[i], VS_INI_READ, lun, i * BLOCKS, BLOCKS, s->buf + i * 4096, 4096,
			    1);
		assert_int_equal(waiter_submit(x->q, &s->w[i]), 0);
	}
}

/* Resubmit what completed (each must have succeeded); how many did. */
static unsigned stream_turn(struct fx *x, struct stream *s)
{
	unsigned n = 0;

	for (unsigned i = 0; i < DEPTH; i++) {
		if (!__atomic_load_n(&s->w[i].done, __ATOMIC_ACQUIRE))
			continue;
		assert_int_equal(s->w[i].io.result, 0);
		n++;
		waiter_prep(&s->w[i], VS_INI_READ, s->lun, i * BLOCKS, BLOCKS, s->buf + i * 4096,
			    4096, 1);
		assert_int_equal(waiter_submit(x->q, &s->w[i]), 0);
	}
	s->done += n;
	return n;
}

/* Let the streams' last requests finish. */
static void stream_drain(struct fx *x, struct stream *s)
{
	for (unsigned i = 0; i < DEPTH; i++)
		waiter_wait(x->q, &s->w[i]);
	free(s->w);
}

/* Drive the streams for at least span_ns after skip completions of the first (its burst);
 * its rate over that span, per second, counted by the target as it pushed the answers (the
 * test thread being off the CPU does not move what it counts). */
static double measure(struct fx *x, struct stream *s, unsigned n, uint64_t skip, uint64_t span_ns)
{
	uint64_t end = now_ms() + DEADLINE_MS, start = s[0].done + skip, t0 = 0, c0 = 0, t1;

	for (;;) {
		vs_ini_poll(x->q, 64);
		for (unsigned i = 0; i < n; i++)
			stream_turn(x, &s[i]);
		if (!t0 && s[0].done >= start) {
			c0 = lun_stats(x, s[0].lun).reads;
			t0 = vs_mono_ns();
		}
		if (t0 && vs_mono_ns() - t0 >= span_ns)
			break;
		assert_true(now_ms() < end);
	}
	t1 = vs_mono_ns();
	return (double)(lun_stats(x, s[0].lun).reads - c0) * 1e9 / (double)(t1 - t0);
}

static void assert_rate(double got, double limit)
{
	print_message("achieved %.1f IOPS against a limit of %.0f (%.3f)\n", got, limit,
		      got / limit);
	assert_true(got / limit > 0.8 && got / limit < 1.2);
}

/* A LUN limited to 200 IOPS gets 200 over 4 s (after its burst). */
static void limit_holds(bool poll)
{
	struct fx *x = fx_open(poll);
	struct stream a;

	qos_set_rate(x, 0, 200);
	stream_init(x, &a, 0);
	assert_rate(measure(x, &a, 1, 100, 4000000000), 200);
	stream_drain(x, &a);
	assert_true(lun_stats(x, 0).throttled > 0 && lun_stats(x, 0).throttled_ns > 0);
	assert_int_equal(lun_stats(x, 1).throttled, 0);
	fx_close(x);
}

static void test_limit_holds(void **state)
{
	(void)state;
	limit_holds(false);
}

/* The same with busy-polling workers (the release is by the clock, not the timer). */
static void test_limit_holds_poll(void **state)
{
	(void)state;
	limit_holds(true);
}

/* The unlimited LUN beside one limited to 2 IOPS, on the same ring and worker, is not
 * queued behind it: it completes 1,000 reads before the limited one completes 20 (10 s
 * at its limit; behind it, the unlimited one would go at its pace, a few a second). */
static void unlimited_beside(bool poll)
{
	struct fx *x = fx_open(poll);
	uint64_t end = now_ms() + DEADLINE_MS;
	struct stream s[2];

	qos_set(x, 0, 2, 0);
	stream_init(x, &s[0], 0);
	stream_init(x, &s[1], 1);
	while (s[1].done < 1000) {
		vs_ini_poll(x->q, 64);
		stream_turn(x, &s[0]);
		stream_turn(x, &s[1]);
		assert_true(s[0].done < 20);
		assert_true(now_ms() < end);
	}
	print_message("unlimited LUN: %llu reads while the limited one did %llu\n",
		      (unsigned long long)s[1].done, (unsigned long long)s[0].done);
	stream_drain(x, &s[1]);
	qos_set(x, 0, 0, 0); /* its last ones need not wait */
	stream_drain(x, &s[0]);
	fx_close(x);
}

static void test_unlimited_beside_limited(void **state)
{
	(void)state;
	unlimited_beside(false);
}

static void test_unlimited_beside_limited_poll(void **state)
{
	(void)state;
	unlimited_beside(true);
}

/* qos_set at run time: 100 IOPS, then 200, each achieved as set. */
static void test_qos_set_takes_effect(void **state)
{
	struct fx *x = fx_open(false);
	struct stream a;

	(void)state;
	qos_set_rate(x, 0, 100);
	stream_init(x, &a, 0);
	assert_rate(measure(x, &a, 1, 50, 4000000000), 100);
	qos_set_rate(x, 0, 200);
	assert_rate(measure(x, &a, 1, 100, 4000000000), 200);
	stream_drain(x, &a);
	fx_close(x);
}

/* The controller's limit over all its LUNs: 200 IOPS shared by two LUNs driven at once
 * (each unlimited alone) is 200 in all, each getting a part of it. */
static void test_controller_limit_holds(void **state)
{
	struct fx *x = fx_open(false);
	uint64_t end = now_ms() + DEADLINE_MS, t0 = 0, c0 = 0, t1, c1;
	struct vs_target_controller_info ci;
	struct vs_target_qos q;
	struct stream s[2];
	char why[256];
	double got;

	(void)state;
	memset(&q, 0, sizeof(q));
	q.iops[VS_QOS_TOTAL] = 200;
	q.burst_iops[VS_QOS_TOTAL] = 100;
	assert_int_equal(vs_target_controller_qos_set(x->t, NULL, &q, why, sizeof(why)), 0);
	stream_init(x, &s[0], 0);
	stream_init(x, &s[1], 1);
	for (;;) {
		vs_ini_poll(x->q, 64);
		stream_turn(x, &s[0]);
		stream_turn(x, &s[1]);
		if (!t0 && s[0].done + s[1].done >= 200) { /* past the burst */
			c0 = lun_stats(x, 0).reads + lun_stats(x, 1).reads;
			t0 = vs_mono_ns();
		}
		if (t0 && vs_mono_ns() - t0 >= 4000000000)
			break;
		assert_true(now_ms() < end);
	}
	t1 = vs_mono_ns();
	c1 = lun_stats(x, 0).reads + lun_stats(x, 1).reads;
	got = (double)(c1 - c0) * 1e9 / (double)(t1 - t0);
	assert_rate(got, 200);
	print_message("LUN 0: %llu reads, LUN 1: %llu\n", (unsigned long long)s[0].done,
		      (unsigned long long)s[1].done);
	assert_true(s[0].done > 100 && s[1].done > 100);
	/* counted for the controller, not for the LUNs (they have no limits of their own) */
	assert_int_equal(vs_target_controller_list(x->t, &ci, 1), 1);
	assert_true(ci.throttled > 0 && ci.throttled_ns > 0);
	assert_int_equal(ci.qos.iops[VS_QOS_TOTAL], 200);
	assert_int_equal(lun_stats(x, 0).throttled, 0);
	memset(&q, 0, sizeof(q)); /* the last ones need not wait */
	assert_int_equal(vs_target_controller_qos_set(x->t, NULL, &q, why, sizeof(why)), 0);
	stream_drain(x, &s[0]);
	stream_drain(x, &s[1]);
	fx_close(x);
}

/* Both limits apply: a LUN limited to 2 IOPS under a controller limit of 10,000 still
 * goes at 2 (its 20th read takes 10 s), while its unlimited neighbour goes on. */
static void test_lun_limit_under_controller_limit(void **state)
{
	struct fx *x = fx_open(false);
	uint64_t end = now_ms() + DEADLINE_MS;
	struct vs_target_qos q;
	struct stream s[2];
	char why[256];

	(void)state;
	memset(&q, 0, sizeof(q));
	q.iops[VS_QOS_TOTAL] = 10000;
	assert_int_equal(vs_target_controller_qos_set(x->t, NULL, &q, why, sizeof(why)), 0);
	qos_set(x, 0, 2, 0);
	stream_init(x, &s[0], 0);
	stream_init(x, &s[1], 1);
	while (s[1].done < 1000) {
		vs_ini_poll(x->q, 64);
		stream_turn(x, &s[0]);
		stream_turn(x, &s[1]);
		assert_true(s[0].done < 20);
		assert_true(now_ms() < end);
	}
	stream_drain(x, &s[1]);
	qos_set(x, 0, 0, 0);
	stream_drain(x, &s[0]);
	fx_close(x);
}

/* A controller limit refused leaves the one set before. */
static void test_controller_limit_refused(void **state)
{
	struct fx *x = fx_open(false);
	struct vs_target_controller_info ci;
	struct vs_target_qos q;
	char why[256];

	(void)state;
	memset(&q, 0, sizeof(q));
	q.iops[VS_QOS_TOTAL] = 500;
	assert_int_equal(vs_target_controller_qos_set(x->t, NULL, &q, why, sizeof(why)), 0);
	q.iops[VS_QOS_TOTAL] = VS_TARGET_QOS_MAX + 1;
	assert_int_equal(vs_target_controller_qos_set(x->t, NULL, &q, why, sizeof(why)), -EINVAL);
	print_message("refused: %s\n", why);
	assert_non_null(strstr(why, "controller"));
	assert_int_equal(vs_target_controller_qos_set(x->t, "nosuch", &q, why, sizeof(why)),
			 -ENOENT);
	assert_int_equal(vs_target_controller_list(x->t, &ci, 1), 1);
	assert_int_equal(ci.qos.iops[VS_QOS_TOTAL], 500);
	fx_close(x);
}

/* Four reads at a byte a second: the first goes (a full bucket takes any one request),
 * three are parked; wait until the target holds them. */
static void park_three(struct fx *x, struct waiter *w, uint8_t *buf)
{
	uint64_t end = now_ms() + DEADLINE_MS;

	qos_set(x, 0, 0, 1);
	for (unsigned i = 0; i < 4; i++) {
		waiter_prep(&w[i], VS_INI_READ, 0, i * BLOCKS, BLOCKS, buf + i * 4096, 4096, 1);
		assert_int_equal(waiter_submit(x->q, &w[i]), 0);
	}
	waiter_wait(x->q, &w[0]);
	assert_int_equal(w[0].io.result, 0);
	while (lun_stats(x, 0).in_flight != 3)
		assert_true(now_ms() < end);
}

/* Lifting the limit releases what waited for it at once (it would have waited hours). */
static void test_unlimit_releases_parked(void **state)
{
	struct fx *x = fx_open(false);
	struct waiter *w = calloc(4, sizeof(*w));
	uint8_t *buf = vs_ini_alloc(x->ini, 4 * 4096, 4096);

	(void)state;
	park_three(x, w, buf);
	qos_set(x, 0, 0, 0);
	for (unsigned i = 1; i < 4; i++) {
		waiter_wait(x->q, &w[i]);
		assert_int_equal(w[i].io.result, 0);
	}
	assert_int_equal(lun_stats(x, 0).throttled, 3);
	assert_true(lun_stats(x, 0).throttled_ns > 0);
	free(w);
	fx_close(x);
}

/* A LUN RESET answers the parked requests with RESET without running them; the TMF does
 * not wait for the limit.  An ABORT TASK of one parked request answers that one only. */
static void test_tmf_answers_parked(void **state)
{
	struct fx *x = fx_open(false);
	struct waiter *w = calloc(4, sizeof(*w));
	uint8_t *buf = vs_ini_alloc(x->ini, 4 * 4096, 4096);
	uint64_t failures = lun_stats(x, 0).failures;

	(void)state;
	park_three(x, w, buf);
	assert_int_equal(vs_ini_abort(x->ini, x->q, &w[2].io), 0);
	waiter_wait(x->q, &w[2]);
	assert_int_equal(w[2].io.result, -ECANCELED);
	assert_false(__atomic_load_n(&w[1].done, __ATOMIC_ACQUIRE));
	assert_int_equal(lun_stats(x, 0).in_flight, 2);

	assert_int_equal(vs_ini_lun_reset(x->ini, 0), 0);
	for (unsigned i = 1; i < 4; i += 2) {
		assert_true(__atomic_load_n(&w[i].done, __ATOMIC_ACQUIRE));
		assert_int_equal(w[i].io.result, -ECONNRESET);
	}
	assert_int_equal(lun_stats(x, 0).in_flight, 0);
	assert_int_equal(lun_stats(x, 0).failures, failures + 3);
	/* the LUN still serves, at its limit: lift it and read */
	qos_set(x, 0, 0, 0);
	assert_int_equal(io_sync(x->q, VS_INI_READ, 0, 0, BLOCKS, buf, 4096, 1), 0);
	free(w);
	fx_close(x);
}

/* A frontend that takes its rings back (closes) while requests are parked gets them all
 * done: the stop runs them rather than wait for the limit (or lose them). */
static void test_stop_runs_parked(void **state)
{
	struct fx *x = fx_open(false);
	struct waiter *w = calloc(4, sizeof(*w));
	uint8_t *buf = vs_ini_alloc(x->ini, 4 * 4096, 4096);
	struct vs_ini_opts o = {.queues = 1, .data_mem = 8u << 20, .socket = x->tg.tg.sock};

	(void)state;
	park_three(x, w, buf);
	vs_ini_close(x->ini); /* returns once the target has given the rings back */
	for (unsigned i = 1; i < 4; i++) {
		assert_true(__atomic_load_n(&w[i].done, __ATOMIC_ACQUIRE));
		assert_int_equal(w[i].io.result, 0);
	}
	assert_int_equal(lun_stats(x, 0).in_flight, 0);
	/* and the next frontend is served */
	assert_int_equal(vs_ini_open(&x->ini, &o), 0);
	x->q = vs_ini_get_queue(x->ini, 0);
	qos_set(x, 0, 0, 0);
	buf = vs_ini_alloc(x->ini, 4096, 4096);
	assert_int_equal(io_sync(x->q, VS_INI_READ, 0, 0, BLOCKS, buf, 4096, 1), 0);
	free(w);
	fx_close(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_limit_holds),
	    cmocka_unit_test(test_limit_holds_poll),
	    cmocka_unit_test(test_unlimited_beside_limited),
	    cmocka_unit_test(test_unlimited_beside_limited_poll),
	    cmocka_unit_test(test_qos_set_takes_effect),
	    cmocka_unit_test(test_unlimit_releases_parked),
	    cmocka_unit_test(test_tmf_answers_parked),
	    cmocka_unit_test(test_stop_runs_parked),
	    cmocka_unit_test(test_controller_limit_holds),
	    cmocka_unit_test(test_lun_limit_under_controller_limit),
	    cmocka_unit_test(test_controller_limit_refused),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
