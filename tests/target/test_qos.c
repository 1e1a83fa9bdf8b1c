/* SPDX-License-Identifier: MIT */
/* The QoS token buckets' arithmetic (src/target/qos.c) on a fake clock: achieved rates
 * against the limits, bursts, directions, several sets, and the limits' validation. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "target/qos.h"

#define S  1000000000ull
#define T0 (5 * S) /* an arbitrary "now" */

static void set_one(struct qos_set *s, unsigned idx, uint64_t rate, uint64_t burst)
{
	struct qos_limits l;

	memset(&l, 0, sizeof(l));

	l.rate[idx] = rate;
	l.burst[idx] = burst;
	assert_int_equal(qos_limits_check(&l, NULL, 0), 0);
	qos_set_limits(s, &l, T0);
}

/* A client that always has a request of `bytes` ready in dir and looks every `step` ns (a
 * worker's wake-ups; 0: exactly when the bucket says): how many went in `span` ns. */
static uint64_t drive(struct qos_set *s, enum qos_dir dir, uint64_t bytes, uint64_t step,
		      uint64_t span)
{
	uint64_t now = T0, n = 0, when;

	while (now < T0 + span) {
		if (qos_admit(&s, 1, dir, bytes, now, &when)) {
			n++;
			continue;
		}
		assert_true(when > now);
		now = step ? now + step : when;
	}
	return n;
}

static void assert_ratio(uint64_t got, uint64_t want)
{
	double r = (double)got / (double)want;

	print_message("achieved %llu of %llu (%.4f)\n", (unsigned long long)got,
		      (unsigned long long)want, r);
	assert_true(r >= 0.95 && r <= 1.05);
}

/* 10 s at each rate with the default burst (a tenth of a second): within 5%, and exactly
 * rate * 10 + the burst when the client asks just in time (no drift from rounding). */
static void test_iops_accuracy(void **state)
{
	static const uint64_t rates[] = {10, 100, 1000, 50000, 1000000};

	(void)state;
	for (unsigned i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		struct qos_set s;
		uint64_t n, burst = qos_burst_default(QOS_IOPS, rates[i]);

		qos_set_init(&s);
		set_one(&s, QOS_IOPS * QOS_DIRS + QOS_TOTAL, rates[i], 0);
		n = drive(&s, QOS_READ, 4096, 0, 10 * S);
		assert_ratio(n, rates[i] * 10);
		/* the last one paid off at or before T0 + 10 s went at T0 + 10 s - 1 at most */
		assert_true(n >= rates[i] * 10 + burst - 1 && n <= rates[i] * 10 + burst);
		qos_set_fini(&s);
	}
}

/* A worker that wakes only every 57 us (timer slack) still gets the rate: the bucket
 * keeps the credit that built up meanwhile, up to its burst. */
static void test_iops_accuracy_coarse_wakeups(void **state)
{
	static const uint64_t rates[] = {10, 100, 1000, 50000};

	(void)state;
	for (unsigned i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		struct qos_set s;

		qos_set_init(&s);
		set_one(&s, QOS_IOPS * QOS_DIRS + QOS_READ, rates[i], 0);
		assert_ratio(drive(&s, QOS_READ, 512, 57000, 10 * S), rates[i] * 10);
		qos_set_fini(&s);
	}
}

/* A rate whose cost per request is no whole number of ns (1e9 / 3): over an hour of
 * simulated time, exactly 3 a second (the burst of 1 is the one at the start): the
 * remainder is carried. */
static void test_no_drift(void **state)
{
	struct qos_set s;

	(void)state;
	qos_set_init(&s);
	set_one(&s, QOS_IOPS * QOS_DIRS + QOS_TOTAL, 3, 1);
	assert_int_equal(drive(&s, QOS_WRITE, 512, 0, 3600 * S), 3 * 3600);
	qos_set_fini(&s);
}

/* Bandwidth: 64 KiB requests against 10 MB/s for 10 s. */
static void test_bandwidth(void **state)
{
	struct qos_set s;
	uint64_t n;

	(void)state;
	qos_set_init(&s);
	set_one(&s, QOS_BPS * QOS_DIRS + QOS_WRITE, 10000000, 0);
	n = drive(&s, QOS_WRITE, 65536, 0, 10 * S);
	assert_ratio(n * 65536, 100000000);
	qos_set_fini(&s);
}

/* A request bigger than its bucket goes once the bucket is full; the next waits until its
 * cost is paid: never stuck, and the rate still holds. */
static void test_big_io_never_stuck(void **state)
{
	struct qos_set s;
	uint64_t when;
	struct qos_set *sp = &s;

	(void)state;
	qos_set_init(&s);
	set_one(&s, QOS_BPS * QOS_DIRS + QOS_TOTAL, 1000000, 1000); /* 1 MB/s, 1 KB burst */
	assert_true(qos_admit(&sp, 1, QOS_READ, 1 << 20, T0, &when));
	assert_false(qos_admit(&sp, 1, QOS_READ, 1 << 20, T0, &when));
	assert_int_equal(when, T0 + (1ull << 20) * 1000); /* 1 MiB at 1 byte per us */
	assert_true(qos_admit(&sp, 1, QOS_READ, 1 << 20, when, &when));
	set_one(&s, QOS_BPS * QOS_DIRS + QOS_TOTAL, 1000000, 1000); /* full again, at T0 */
	assert_ratio(drive(&s, QOS_READ, 1 << 20, 0, 100 * S) << 20, 100000000);
	qos_set_fini(&s);
}

/* A full bucket lets `burst` requests go at once and no more; idle time refills it to
 * the burst, never beyond. */
static void test_burst(void **state)
{
	struct qos_set s, *sp = &s;
	uint64_t when, now = T0;

	(void)state;
	qos_set_init(&s);
	set_one(&s, QOS_IOPS * QOS_DIRS + QOS_TOTAL, 1000, 50);
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 50; i++)
			assert_true(qos_admit(&sp, 1, QOS_READ, 512, now, &when));
		assert_false(qos_admit(&sp, 1, QOS_READ, 512, now, &when));
		assert_int_equal(when, now + 1000000); /* one request's worth: 1 ms */
		now += 60 * S;			       /* a minute idle: still 50 */
	}
	/* the default: a tenth of a second's worth, at least one */
	assert_int_equal(qos_burst_default(QOS_IOPS, 50000), 5000);
	assert_int_equal(qos_burst_default(QOS_IOPS, 5), 1);
	qos_set_fini(&s);
}

/* Read, write and total limits apply to their own requests: a read limit leaves writes
 * alone; a total limit is shared by both. */
static void test_directions(void **state)
{
	struct qos_set s, *sp = &s;
	struct qos_limits l;

	memset(&l, 0, sizeof(l));
	uint64_t when, reads = 0, writes = 0;

	(void)state;
	qos_set_init(&s);
	set_one(&s, QOS_IOPS * QOS_DIRS + QOS_READ, 100, 1);
	for (int i = 0; i < 1000; i++)
		assert_true(qos_admit(&sp, 1, QOS_WRITE, 512, T0, &when));
	assert_true(qos_admit(&sp, 1, QOS_READ, 512, T0, &when));
	assert_false(qos_admit(&sp, 1, QOS_READ, 512, T0, &when));

	l.rate[QOS_IOPS * QOS_DIRS + QOS_TOTAL] = 1000;
	l.rate[QOS_IOPS * QOS_DIRS + QOS_WRITE] = 300;
	qos_set_limits(&s, &l, T0);
	/* alternate asks, 10 s: writes capped at 300/s, reads take the rest of 1000/s */
	for (uint64_t now = T0; now < T0 + 10 * S; now += 100000) {
		while (qos_admit(&sp, 1, QOS_WRITE, 512, now, &when))
			writes++;
		while (qos_admit(&sp, 1, QOS_READ, 512, now, &when))
			reads++;
	}
	assert_ratio(writes, 3000);
	assert_ratio(reads + writes, 10000);
	qos_set_fini(&s);
}

/* Several sets (a LUN's and its controller's): the request goes only when all let it, and
 * a refusal charges none of them. */
static void test_several_sets(void **state)
{
	struct qos_set lun, ctl;
	struct qos_set *both[2] = {&lun, &ctl}, *lun_only = &lun;
	uint64_t when;

	(void)state;
	qos_set_init(&lun);
	qos_set_init(&ctl);
	set_one(&lun, QOS_IOPS * QOS_DIRS + QOS_TOTAL, 1000, 2);
	set_one(&ctl, QOS_IOPS * QOS_DIRS + QOS_TOTAL, 1000, 1);
	assert_true(qos_admit(both, 2, QOS_READ, 512, T0, &when));
	assert_false(qos_admit(both, 2, QOS_READ, 512, T0, &when)); /* ctl is empty */
	assert_int_equal(when, T0 + 1000000);
	/* the refusal took nothing from the LUN: its second token is still there */
	assert_true(qos_admit(&lun_only, 1, QOS_READ, 512, T0, &when));
	assert_false(qos_admit(&lun_only, 1, QOS_READ, 512, T0, &when));
	qos_set_fini(&lun);
	qos_set_fini(&ctl);
}

/* Unlimited unless a rate is set; bad limits are refused with the limit named. */
static void test_limits_check(void **state)
{
	struct qos_limits l;

	memset(&l, 0, sizeof(l));
	struct qos_set s;
	char why[128];

	(void)state;
	qos_set_init(&s);
	assert_false(qos_limited(&s));
	qos_set_limits(&s, &l, T0);
	assert_false(qos_limited(&s));
	l.burst[QOS_BPS * QOS_DIRS + QOS_READ] = 10;
	assert_int_equal(qos_limits_check(&l, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "read bps burst without a read bps limit");
	l.burst[QOS_BPS * QOS_DIRS + QOS_READ] = 0;
	l.rate[QOS_IOPS * QOS_DIRS + QOS_WRITE] = QOS_RATE_MAX + 1;
	assert_int_equal(qos_limits_check(&l, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "write iops"));
	l.rate[QOS_IOPS * QOS_DIRS + QOS_WRITE] = QOS_RATE_MAX;
	assert_int_equal(qos_limits_check(&l, why, sizeof(why)), 0);
	qos_set_limits(&s, &l, T0);
	assert_true(qos_limited(&s));
	qos_set_fini(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_iops_accuracy),
	    cmocka_unit_test(test_iops_accuracy_coarse_wakeups),
	    cmocka_unit_test(test_no_drift),
	    cmocka_unit_test(test_bandwidth),
	    cmocka_unit_test(test_big_io_never_stuck),
	    cmocka_unit_test(test_burst),
	    cmocka_unit_test(test_directions),
	    cmocka_unit_test(test_several_sets),
	    cmocka_unit_test(test_limits_check),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
