/* SPDX-License-Identifier: MIT */
/*
 * The target's always-on statistics (src/target/stats.c): a target in this process (its
 * library, so that the test reads vs_target_lun_stats / vs_target_queue_stats and clears
 * a LUN as the run-time LUN code does) driven by the initiator library over its socket.
 */
#include <errno.h>
#include <pthread.h>
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

#define DEADLINE_MS 20000

struct fx {
	struct tgt tg;	     /* the target, in this process */
	struct vs_target *t; /* = tg.tg.t */
	struct vs_ini *ini;
	char specs[2][160];
};

/* A target with LUNs 0 and 1 (specs) and two request queues on two workers, and an
 * initiator (polled) connected to it with both queues. */
static struct fx *fx_open(const char *lun0, const char *lun1)
{
	struct vs_ini_opts o = {.queues = 2, .data_mem = 8u << 20};
	struct fx *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	tgt_init(&x->tg);
	snprintf(x->specs[0], sizeof(x->specs[0]), "0:%s", lun0);
	snprintf(x->specs[1], sizeof(x->specs[1]), "1:%s", lun1);
	/* testing: one test holds requests in flight with gate=, one slows them with delay= */
	x->tg.o = (struct target_opts){.in_process = true,
				       .luns = {x->specs[0], x->specs[1]},
				       .queues = 2,
				       .workers = 2,
				       .testing = true};
	assert_int_equal(tgt_start(&x->tg), 0);
	x->t = x->tg.tg.t;
	o.socket = x->tg.tg.sock;
	assert_int_equal(vs_ini_open(&x->ini, &o), 0);
	assert_int_equal(vs_ini_queue_count(x->ini), 2);
	return x;
}

static void fx_close(struct fx *x)
{
	vs_ini_close(x->ini);
	assert_int_equal(target_stop(&x->tg.tg, 0, 0, NULL), 0); /* vs_target_destroy's */
	tgt_fini(&x->tg);
	free(x);
}

static struct vs_target_lun_stats lun_stats(struct fx *x, unsigned id)
{
	struct vs_target_lun_stats s[4];
	unsigned n = vs_target_lun_stats(x->t, NULL, s, 4);

	assert_int_equal(n, 2);
	assert_true(id < n && s[id].id == id);
	return s[id];
}

static struct vs_target_queue_stats queue_stats(struct fx *x, unsigned q)
{
	struct vs_target_queue_stats s[VS_TARGET_MAX_QUEUES];

	assert_int_equal(vs_target_queue_stats(x->t, NULL, s, VS_TARGET_MAX_QUEUES), 2);
	assert_int_equal(s[q].queue, q);
	return s[q];
}

/* n requests of op, nblocks each (512-byte blocks), one after the other on queue q, in a
 * range of blocks of its own (from 1024 * q): two workers never touch the same RAM bytes,
 * whose ordering through the rings ThreadSanitizer cannot see. */
static void run(struct fx *x, unsigned q, enum vs_ini_op op, unsigned lun, uint32_t nblocks,
		unsigned n)
{
	struct vs_ini_queue *iq = vs_ini_get_queue(x->ini, q);
	size_t len = (size_t)nblocks * 512;
	void *buf = len ? vs_ini_alloc(x->ini, len, 4096) : NULL;

	assert_true(!len || buf);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(io_sync(iq, op, lun, 1024ull * q + 16 * (i % 64), nblocks, buf,
					 len, len ? 1 : 0),
				 0);
}

/* A known workload gives exactly its counts, per LUN and per queue: on LUN 0, 10 reads of
 * 4 KiB and 3 flushes on queue 0, 6 writes of 8 KiB and 2 unmaps on queue 1; on LUN 1,
 * 4 reads of 4 KiB on queue 0 and 5 writes of 8 KiB on queue 1.  Nothing else moves. */
static void test_known_workload(void **state)
{
	struct fx *x = fx_open("ram=16M", "ram=16M");
	struct vs_target_lun_stats a0 = lun_stats(x, 0), a1 = lun_stats(x, 1), b0, b1;
	struct vs_target_queue_stats q0 = queue_stats(x, 0), q1 = queue_stats(x, 1), e0, e1;
	struct vs_target_stats t0, t1;

	(void)state;
	vs_target_get_stats(x->t, &t0);
	run(x, 0, VS_INI_READ, 0, 8, 10);
	run(x, 0, VS_INI_FLUSH, 0, 0, 3);
	run(x, 1, VS_INI_WRITE, 0, 16, 6);
	run(x, 1, VS_INI_UNMAP, 0, 8, 2);
	run(x, 0, VS_INI_READ, 1, 8, 4);
	run(x, 1, VS_INI_WRITE, 1, 16, 5);
	b0 = lun_stats(x, 0);
	b1 = lun_stats(x, 1);
	e0 = queue_stats(x, 0);
	e1 = queue_stats(x, 1);
	vs_target_get_stats(x->t, &t1);

	assert_int_equal(b0.reads - a0.reads, 10);
	assert_int_equal(b0.writes - a0.writes, 6);
	assert_int_equal(b0.flushes - a0.flushes, 3);
	assert_int_equal(b0.unmaps - a0.unmaps, 2);
	assert_int_equal(b0.others, a0.others);
	assert_int_equal(b0.read_bytes - a0.read_bytes, 10 * 4096);
	assert_int_equal(b0.write_bytes - a0.write_bytes, 6 * 8192);
	assert_int_equal(b0.failures, 0);
	assert_int_equal(b0.in_flight, 0);
	for (unsigned k = 0; k < 16; k++)
		assert_int_equal(b0.sense_keys[k], a0.sense_keys[k]);
	assert_true(b0.read_p50_ns > 0 && b0.read_p50_ns <= b0.read_p99_ns &&
		    b0.read_p99_ns <= b0.read_p999_ns);
	assert_true(b0.write_p50_ns > 0 && b0.write_p50_ns <= b0.write_p99_ns &&
		    b0.write_p99_ns <= b0.write_p999_ns);

	assert_int_equal(b1.reads - a1.reads, 4);
	assert_int_equal(b1.writes - a1.writes, 5);
	assert_int_equal(b1.flushes, a1.flushes);
	assert_int_equal(b1.unmaps, a1.unmaps);
	assert_int_equal(b1.others, a1.others);
	assert_int_equal(b1.read_bytes - a1.read_bytes, 4 * 4096);
	assert_int_equal(b1.write_bytes - a1.write_bytes, 5 * 8192);
	assert_int_equal(b1.in_flight, 0);

	/* Queues: every command, and all data moved (an UNMAP's 24-byte parameter list too). */
	assert_int_equal(e0.requests - q0.requests, 10 + 3 + 4);
	assert_int_equal(e0.bytes - q0.bytes, 10 * 4096 + 4 * 4096);
	assert_int_equal(e1.requests - q1.requests, 6 + 2 + 5);
	assert_int_equal(e1.bytes - q1.bytes, 6 * 8192 + 2 * VS_SCSI_UNMAP_PARAM_LEN + 5 * 8192);
	assert_int_equal(e0.in_flight, 0);
	assert_int_equal(e1.in_flight, 0);
	/* The target's totals are the queues' (counted once: tq_count_answered). */
	assert_int_equal(t1.requests - t0.requests, 10 + 3 + 4 + 6 + 2 + 5);
	fx_close(x);
}

/* Commands that fail with CHECK CONDITION count under their sense key (ILLEGAL REQUEST
 * here): a READ(10) past the end (a read) and an opcode nobody supports (an other).  A
 * command to a target that does not exist counts on its queue, on no LUN. */
static void test_check_condition_by_sense_key(void **state)
{
	struct fx *x = fx_open("ram=1M", "ram=1M");
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	struct vs_target_lun_stats a = lun_stats(x, 1), b, l0a = lun_stats(x, 0), l0b;
	struct vs_target_queue_stats qa = queue_stats(x, 0), qb;
	uint8_t past_end[10] = {VS_SCSI_OP_READ_10, 0, 0, 0, 0x10, 0, 0, 0, 8, 0}; /* LBA 4096 */
	uint8_t bogus[6] = {0xc7, 0, 0, 0, 0, 0};
	uint8_t *buf = vs_ini_alloc(x->ini, 4096, 4096);
	static struct waiter w;

	(void)state;
	waiter_prep(&w, VS_INI_READ, 0, 0, 0, buf, 4096, 1);
	assert_int_equal(vs_ini_submit_cdb(q, &w.io, 0, 1, past_end, 10, true), 0);
	waiter_wait(q, &w);
	assert_int_equal(w.io.scsi_status, VS_SCSI_CHECK_CONDITION);
	waiter_prep(&w, VS_INI_READ, 0, 0, 0, NULL, 0, 0);
	assert_int_equal(vs_ini_submit_cdb(q, &w.io, 0, 1, bogus, 6, false), 0);
	waiter_wait(q, &w);
	assert_int_equal(w.io.scsi_status, VS_SCSI_CHECK_CONDITION);
	waiter_prep(&w, VS_INI_READ, 0, 0, 0, NULL, 0, 0);
	assert_int_equal(vs_ini_submit_cdb(q, &w.io, 1, 0, bogus, 6, false), 0); /* target 1 */
	waiter_wait(q, &w);
	assert_int_equal(w.io.result, -ENODEV);

	b = lun_stats(x, 1);
	l0b = lun_stats(x, 0);
	qb = queue_stats(x, 0);
	assert_int_equal(
	    b.sense_keys[VS_SENSE_ILLEGAL_REQUEST] - a.sense_keys[VS_SENSE_ILLEGAL_REQUEST], 2);
	for (unsigned k = 0; k < 16; k++)
		if (k != VS_SENSE_ILLEGAL_REQUEST)
			assert_int_equal(b.sense_keys[k], a.sense_keys[k]);
	assert_int_equal(b.reads - a.reads, 1);
	assert_int_equal(b.read_bytes, a.read_bytes);
	assert_int_equal(b.others - a.others, 1);
	assert_int_equal(b.failures, a.failures); /* the virtio response was OK */
	assert_memory_equal(&l0a, &l0b, sizeof(l0a));
	assert_int_equal(qb.requests - qa.requests, 3);
	fx_close(x);
}

struct held {
	struct waiter w[5];
	unsigned done;
};

/* Requests held by the test gate (LUN 0's reads) count in flight on their LUN and queue
 * while held, and no longer once they complete.  (A delay of 1 s held them before: on a
 * loaded machine the first could complete before the fifth arrived.) */
static void test_in_flight_while_held(void **state)
{
	struct fx *x = fx_open("null=64M,gate=read", "ram=1M");
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 1);
	uint8_t *buf = vs_ini_alloc(x->ini, 5 * 4096, 4096);
	static struct held h;
	struct vs_target_lun_stats s;
	struct vs_target_queue_stats qs;
	uint64_t end = now_ms() + DEADLINE_MS;

	(void)state;
	memset(&h, 0, sizeof(h));
	for (unsigned i = 0; i < 5; i++) {
		waiter_prep(&h.w[i], VS_INI_READ, 0, 8 * i, 8, buf + 4096 * i, 4096, 1);
		assert_int_equal(waiter_submit(q, &h.w[i]), 0);
	}
	assert_int_equal(vs_backend_gate_wait(x->t->ctrls->be[0], 5, DEADLINE_MS), 0);
	do { /* counted once the worker has put the last one on its list */
		s = lun_stats(x, 0);
		assert_true(now_ms() < end);
	} while (s.in_flight < 5);
	qs = queue_stats(x, 1);
	assert_int_equal(s.in_flight, 5);
	assert_int_equal(qs.in_flight, 5);
	assert_int_equal(lun_stats(x, 1).in_flight, 0);
	assert_int_equal(queue_stats(x, 0).in_flight, 0);
	/* Not one of them completed yet: they were held. */
	assert_int_equal(s.reads, 0);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(__atomic_load_n(&h.w[i].done, __ATOMIC_ACQUIRE), 0);

	assert_int_equal(vs_backend_gate_open(x->t->ctrls->be[0]), 5);
	for (unsigned i = 0; i < 5; i++) {
		waiter_wait(q, &h.w[i]);
		assert_int_equal(h.w[i].io.result, 0);
	}
	s = lun_stats(x, 0);
	assert_int_equal(s.in_flight, 0);
	assert_int_equal(s.reads, 5);
	assert_int_equal(queue_stats(x, 1).in_flight, 0);
	fx_close(x);
}

/* Latency lands in the right bucket: on a LUN whose every bio completes 20 ms late, even
 * p50 of reads and writes is at least 20 ms; on an undelayed RAM LUN, p50 is far below:
 * under a tenth of the slow LUN's (a ratio of the run's own figures; it asserted 2 ms). */
static void test_latency_percentiles(void **state)
{
	struct fx *x = fx_open("null=64M,delay=20000", "ram=1M");
	struct vs_target_lun_stats slow, fast;

	(void)state;
	run(x, 0, VS_INI_READ, 0, 8, 10);
	run(x, 1, VS_INI_WRITE, 0, 8, 5);
	run(x, 0, VS_INI_READ, 1, 8, 50);
	run(x, 1, VS_INI_WRITE, 1, 8, 50);
	slow = lun_stats(x, 0);
	fast = lun_stats(x, 1);
	assert_true(slow.read_p50_ns >= 20000000);
	assert_true(slow.read_p99_ns >= slow.read_p50_ns && slow.read_p999_ns >= slow.read_p99_ns);
	assert_true(slow.write_p50_ns >= 20000000);
	assert_true(slow.write_p99_ns >= 20000000);
	/* Tens of microseconds against 20 ms. */
	assert_true(fast.read_p50_ns > 0 && fast.read_p50_ns < slow.read_p50_ns / 10);
	assert_true(fast.write_p50_ns > 0 && fast.write_p50_ns < slow.write_p50_ns / 10);
	fx_close(x);
}

/* ---- the histogram's arithmetic ------------------------------------------------------------ */
/* Every value lands in a bucket whose highest value is at most 1/32 above it; buckets are
 * in value order; below 32 ticks they are exact. */
static void test_histogram_buckets(void **state)
{
	unsigned prev = 0;

	(void)state;
	for (uint64_t v = 0; v < TS_SUB; v++)
		assert_int_equal(ts_bucket_high(ts_bucket(v)), v);
	for (uint64_t v = 1; v < (1ull << 43); v += v / 7 + 1) {
		unsigned b = ts_bucket(v);
		uint64_t hi = ts_bucket_high(b);

		assert_true(b >= prev && b < TS_BUCKETS - 1);
		assert_true(hi >= v);
		assert_true(hi - v <= v / 32);
		assert_true(b == 0 || ts_bucket_high(b - 1) < v);
		prev = b;
	}
	assert_int_equal(ts_bucket(1ull << 43), TS_BUCKETS - 1);
	assert_int_equal(ts_bucket(UINT64_MAX), TS_BUCKETS - 1);
	assert_int_equal(ts_bucket_high(TS_BUCKETS - 1), UINT64_MAX);
}

/* Percentiles of known values: 1000 values 1000, 2000 .. 1,000,000 ticks (p50 = 500,000,
 * p99 = 990,000, p99.9 = 999,000, each reported as its bucket's top, within 1/32); one
 * value; none. */
static void test_histogram_percentiles(void **state)
{
	static uint64_t h[TS_BUCKETS];
	const struct {
		double p;
		uint64_t v;
	} want[] = {{0.5, 500000}, {0.99, 990000}, {0.999, 999000}, {1.0, 1000000}};

	(void)state;
	memset(h, 0, sizeof(h));
	assert_int_equal(ts_percentile(h, 0.5), 0);
	for (uint64_t v = 1000; v <= 1000000; v += 1000)
		h[ts_bucket(v)]++;
	for (unsigned i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		uint64_t got = ts_percentile(h, want[i].p);

		assert_int_equal(got, ts_bucket_high(ts_bucket(want[i].v)));
		assert_true(got >= want[i].v && got - want[i].v <= want[i].v / 32);
	}
	memset(h, 0, sizeof(h));
	h[ts_bucket(12345)] = 1;
	assert_int_equal(ts_percentile(h, 0.5), ts_bucket_high(ts_bucket(12345)));
	assert_int_equal(ts_percentile(h, 0.999), ts_bucket_high(ts_bucket(12345)));
	/* 999 fast values and one slow: p99 is fast, p99.9 still fast, p100 the slow one. */
	memset(h, 0, sizeof(h));
	h[ts_bucket(100)] = 999;
	h[ts_bucket(1000000)] = 1;
	assert_int_equal(ts_percentile(h, 0.99), ts_bucket_high(ts_bucket(100)));
	assert_int_equal(ts_percentile(h, 0.999), ts_bucket_high(ts_bucket(100)));
	assert_int_equal(ts_percentile(h, 1.0), ts_bucket_high(ts_bucket(1000000)));
}

/* ---- clearing while a worker counts -------------------------------------------------------- */
#define CLEAR_DEPTH 4

struct clearer {
	struct fx *x;
	unsigned long submitted; /* atomic: reads submitted by the test thread */
	int stop;		 /* atomic */
	unsigned clears;
	char failure[256]; /* the first broken invariant, for the test thread */
};

static void *clear_loop(void *arg)
{
	struct clearer *c = arg;

	while (!__atomic_load_n(&c->stop, __ATOMIC_ACQUIRE) && !c->failure[0]) {
		struct vs_target_lun_stats s[2];
		unsigned long before = __atomic_load_n(&c->submitted, __ATOMIC_ACQUIRE), after;

		tgt_stats_lun_clear(c->x->t->ctrls, 0);
		__atomic_store_n(&c->clears, c->clears + 1, __ATOMIC_RELAXED);
		vs_target_lun_stats(c->x->t, NULL, s, 2);
		after = __atomic_load_n(&c->submitted, __ATOMIC_ACQUIRE);
		/* Counted since the clear: at most what was submitted since, plus what was in
		 * flight at the clear, with its bytes (each worker's counts are taken whole, at
		 * the clear and here).  A torn or underflowed value would be far off. */
		if (s[0].reads > after - before + CLEAR_DEPTH ||
		    s[0].read_bytes != s[0].reads * 4096 || s[0].in_flight > CLEAR_DEPTH ||
		    s[0].sense_keys[0] || s[0].failures)
			snprintf(c->failure, sizeof(c->failure),
				 "after clear %u: reads %llu (submitted %lu since), bytes %llu, in "
				 "flight %llu",
				 c->clears, (unsigned long long)s[0].reads, after - before,
				 (unsigned long long)s[0].read_bytes,
				 (unsigned long long)s[0].in_flight);
		if (s[1].reads != 100)
			snprintf(c->failure, sizeof(c->failure), "LUN 1 reads %llu, not 100",
				 (unsigned long long)s[1].reads);
	}
	return NULL;
}

/* A LUN cleared again and again while its worker counts reads (as a LUN added at run time
 * is): every read after a clear counts only what came after it, never a torn or
 * underflowed value; the other LUN keeps its counts; once idle, a clear reads all zero. */
static void test_clear_while_counting(void **state)
{
	struct fx *x = fx_open("ram=1M", "ram=1M");
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	uint8_t *buf = vs_ini_alloc(x->ini, CLEAR_DEPTH * 4096, 4096);
	static struct waiter w[CLEAR_DEPTH];
	static struct clearer c;
	struct vs_target_lun_stats s;
	pthread_t thr;
	uint64_t end;

	(void)state;
	run(x, 0, VS_INI_READ, 1, 8, 100);
	memset(&c, 0, sizeof(c));
	c.x = x;
	assert_int_equal(pthread_create(&thr, NULL, clear_loop, &c), 0);
	/* Keep CLEAR_DEPTH reads in flight until the clearer has run a while. */
	end = now_ms() + DEADLINE_MS;
	for (unsigned i = 0; i < CLEAR_DEPTH; i++) {
		waiter_prep(&w[i], VS_INI_READ, 0, 8 * i, 8, buf + 4096 * i, 4096, 1);
		__atomic_add_fetch(&c.submitted, 1, __ATOMIC_RELEASE);
		assert_int_equal(waiter_submit(q, &w[i]), 0);
	}
	for (unsigned long n = 0; n < 5000 || __atomic_load_n(&c.clears, __ATOMIC_RELAXED) < 200;) {
		if (!vs_ini_poll(q, CLEAR_DEPTH))
			continue;
		for (unsigned i = 0; i < CLEAR_DEPTH; i++) {
			if (!__atomic_load_n(&w[i].done, __ATOMIC_ACQUIRE))
				continue;
			assert_int_equal(w[i].io.result, 0);
			waiter_prep(&w[i], VS_INI_READ, 0, 8 * i, 8, buf + 4096 * i, 4096, 1);
			__atomic_add_fetch(&c.submitted, 1, __ATOMIC_RELEASE);
			assert_int_equal(waiter_submit(q, &w[i]), 0);
			n++;
		}
		if (now_ms() > end)
			break;
	}
	for (unsigned i = 0; i < CLEAR_DEPTH; i++)
		waiter_wait(q, &w[i]);
	__atomic_store_n(&c.stop, 1, __ATOMIC_RELEASE);
	pthread_join(thr, NULL);
	if (c.failure[0])
		fail_msg("%s", c.failure);
	assert_true(c.clears > 0);

	tgt_stats_lun_clear(x->t->ctrls, 0);
	s = lun_stats(x, 0);
	assert_int_equal(s.reads, 0);
	assert_int_equal(s.read_bytes, 0);
	assert_int_equal(s.in_flight, 0);
	assert_int_equal(s.read_p50_ns, 0);
	assert_int_equal(s.read_p999_ns, 0);
	assert_int_equal(lun_stats(x, 1).reads, 100);
	/* And it counts again from there. */
	run(x, 0, VS_INI_READ, 0, 8, 3);
	assert_int_equal(lun_stats(x, 0).reads, 3);
	fx_close(x);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_known_workload),
	    cmocka_unit_test(test_check_condition_by_sense_key),
	    cmocka_unit_test(test_in_flight_while_held),
	    cmocka_unit_test(test_latency_percentiles),
	    cmocka_unit_test(test_histogram_buckets),
	    cmocka_unit_test(test_histogram_percentiles),
	    cmocka_unit_test(test_clear_while_counting),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
