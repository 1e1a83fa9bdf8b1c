/* SPDX-License-Identifier: MIT */
/*
 * QoS limits: token buckets per LUN for IOPS and bandwidth, each for reads, writes and
 * both (total).  Pure arithmetic on a caller's monotonic clock (ns), so that tests drive it
 * with a fake one; the target's request path parks what a bucket refuses (request.c).
 *
 * A request may be checked against several sets at once (a LUN's, later its controller's):
 * it goes only when every set lets it, and then is charged to each.
 */
#ifndef VS_TARGET_QOS_H
#define VS_TARGET_QOS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

enum qos_dir { QOS_READ, QOS_WRITE, QOS_TOTAL, QOS_DIRS };
enum qos_unit { QOS_IOPS, QOS_BPS, QOS_UNITS };
#define QOS_LIMITS (QOS_DIRS * QOS_UNITS) /* index: unit * QOS_DIRS + dir */

/* Highest rate accepted: 2^40 a second (1 TiB/s, a trillion IOPS) keeps every product
 * below 2^64 with 128-bit intermediates to spare. */
#define QOS_RATE_MAX (1ull << 40) /* = VS_TARGET_QOS_MAX */

/* What an operator sets: 0 = unlimited; a burst of 0 = the default (qos_burst_default). */
struct qos_limits {
	uint64_t rate[QOS_LIMITS];  /* per second */
	uint64_t burst[QOS_LIMITS]; /* requests or bytes the bucket holds */
};

/* One token bucket kept as the time its debt is paid off (GCRA): no per-tick refill, so
 * no drift, and the refill is exact however long since the last request. */
struct qos_bucket {
	uint64_t rate;	   /* units per second, 0: unlimited */
	uint64_t burst_ns; /* the bucket's size as time: burst * 1e9 / rate */
	uint64_t paid_at;  /* monotonic ns at which everything charged so far is paid */
	uint64_t rem;	   /* remainder of the charges' ns (units * 1e9 mod rate) */
};

struct qos_set {
	pthread_mutex_t lock; /* the buckets, lim */
	bool limited;	      /* any rate set (atomic: the request path's test, no lock) */
	struct qos_limits lim;
	struct qos_bucket b[QOS_LIMITS];
	uint64_t throttled_ns; /* atomic: sum of the time requests waited for it */
	uint64_t throttled;    /* atomic: requests that waited */
};

void qos_set_init(struct qos_set *s);
void qos_set_fini(struct qos_set *s);
/* 0, or -EINVAL with why saying which limit is out of range. */
int qos_limits_check(const struct qos_limits *l, char *why, size_t whylen);
/* The burst used when none is set: a tenth of a second's worth, at least one request (an
 * I/O bigger than its bandwidth bucket still goes: see qos_admit). */
uint64_t qos_burst_default(enum qos_unit unit, uint64_t rate);
/* Apply checked limits at now: the buckets start full.  Any thread. */
void qos_set_limits(struct qos_set *s, const struct qos_limits *l, uint64_t now);
void qos_get_limits(struct qos_set *s, struct qos_limits *l);
static inline bool qos_limited(const struct qos_set *s)
{
	return __atomic_load_n(&s->limited, __ATOMIC_RELAXED);
}
/* May a request (dir QOS_READ or QOS_WRITE, bytes) go at now against every set of sets?
 * true: charged to each.  false: nothing charged; *when is the earliest monotonic ns at
 * which it may (asking again then may still say no if others went first).  A request
 * bigger than a bucket goes once that bucket is full, its excess taken as debt. */
bool qos_admit(struct qos_set *const *sets, unsigned n, enum qos_dir dir, uint64_t bytes,
	       uint64_t now, uint64_t *when);
/* A request waited waited_ns for s. */
void qos_account(struct qos_set *s, uint64_t waited_ns);

#endif /* VS_TARGET_QOS_H */
