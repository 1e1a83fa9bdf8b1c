/* SPDX-License-Identifier: MIT */
/*
 * Token buckets in the time domain (the generic cell rate algorithm): a bucket of `burst`
 * units refilling at `rate` units a second is kept as the moment its charges are paid off
 * (paid_at).  A request costing c ns (units * 1e9 / rate) fits when paying it off ends at
 * most burst_ns after now.  Integer nanoseconds, with the division's remainder carried to
 * the next charge: over any span the charges sum to exactly units * 1e9 / rate, so the
 * achieved rate has no drift from rounding, from 1 a second to QOS_RATE_MAX.  Time since
 * the last request needs no refill step: it is in now - paid_at.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "target/qos.h"

#define NS_PER_S 1000000000ull

static const char *const dir_names[QOS_DIRS] = {"read", "write", "total"};
static const char *const unit_names[QOS_UNITS] = {"iops", "bps"};

void qos_set_init(struct qos_set *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
}

void qos_set_fini(struct qos_set *s)
{
	pthread_mutex_destroy(&s->lock);
}

int qos_limits_check(const struct qos_limits *l, char *why, size_t whylen)
{
	for (unsigned i = 0; i < QOS_LIMITS; i++) {
		const char *u = unit_names[i / QOS_DIRS], *d = dir_names[i % QOS_DIRS];

		if (l->rate[i] > QOS_RATE_MAX || l->burst[i] > QOS_RATE_MAX) {
			if (why)
				snprintf(why, whylen, "%s %s limit or burst above %llu", d, u,
					 (unsigned long long)QOS_RATE_MAX);
			return -EINVAL;
		}
		if (l->burst[i] && !l->rate[i]) {
			if (why)
				snprintf(why, whylen, "%s %s burst without a %s %s limit", d, u, d,
					 u);
			return -EINVAL;
		}
	}
	return 0;
}

uint64_t qos_burst_default(enum qos_unit unit, uint64_t rate)
{
	uint64_t b = rate / 10;

	(void)unit; /* bytes too: a bigger I/O goes once the bucket is full (qos_admit) */
	return b ? b : 1;
}

void qos_set_limits(struct qos_set *s, const struct qos_limits *l, uint64_t now)
{
	bool limited = false;

	pthread_mutex_lock(&s->lock);
	s->lim = *l;
	for (unsigned i = 0; i < QOS_LIMITS; i++) {
		struct qos_bucket *b = &s->b[i];
		uint64_t burst = l->burst[i]
				     ? l->burst[i]
				     : qos_burst_default((enum qos_unit)(i / QOS_DIRS), l->rate[i]);

		memset(b, 0, sizeof(*b));
		if (!l->rate[i])
			continue;
		limited = true;
		b->rate = l->rate[i];
		b->burst_ns = (uint64_t)((unsigned __int128)burst * NS_PER_S / b->rate);
		if (!b->burst_ns)
			b->burst_ns = 1;
		b->paid_at = now; /* full */
	}
	__atomic_store_n(&s->limited, limited, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&s->lock);
}

void qos_get_limits(struct qos_set *s, struct qos_limits *l)
{
	pthread_mutex_lock(&s->lock);
	*l = s->lim;
	pthread_mutex_unlock(&s->lock);
}

/* The ns that units cost in b, and the remainder to carry (not yet charged). */
static uint64_t bucket_cost(const struct qos_bucket *b, uint64_t units, uint64_t *rem)
{
	unsigned __int128 v = (unsigned __int128)units * NS_PER_S + b->rem;

	*rem = (uint64_t)(v % b->rate);
	v /= b->rate;
	return v > UINT64_MAX / 2 ? UINT64_MAX / 2 : (uint64_t)v;
}

/* 0 when b lets units go at now, else the earliest time it would. */
static uint64_t bucket_when(const struct qos_bucket *b, uint64_t units, uint64_t now)
{
	uint64_t rem, cost = bucket_cost(b, units, &rem), start;

	if (b->paid_at <= now)
		return 0; /* full: even an I/O bigger than the bucket goes (as debt) */
	start = b->paid_at;
	if (start + cost - now <= b->burst_ns)
		return 0;
	/* Room for it once start + cost - burst_ns is reached; and a full bucket takes
	 * anything, at paid_at. */
	return cost > b->burst_ns ? start : start + cost - b->burst_ns;
}

static void bucket_charge(struct qos_bucket *b, uint64_t units, uint64_t now)
{
	uint64_t rem, cost = bucket_cost(b, units, &rem);

	b->paid_at = (b->paid_at > now ? b->paid_at : now) + cost;
	b->rem = rem;
}

/* The buckets a request of dir meets, with their units: its direction's and the total's. */
static unsigned buckets_of(enum qos_dir dir, uint64_t bytes, unsigned idx[4], uint64_t units[4])
{
	idx[0] = QOS_IOPS * QOS_DIRS + dir;
	idx[1] = QOS_IOPS * QOS_DIRS + QOS_TOTAL;
	idx[2] = QOS_BPS * QOS_DIRS + dir;
	idx[3] = QOS_BPS * QOS_DIRS + QOS_TOTAL;
	units[0] = units[1] = 1;
	units[2] = units[3] = bytes;
	return 4;
}

bool qos_admit(struct qos_set *const *sets, unsigned n, enum qos_dir dir, uint64_t bytes,
	       uint64_t now, uint64_t *when)
{
	unsigned idx[4];
	uint64_t units[4], latest = 0;
	unsigned nb = buckets_of(dir, bytes, idx, units);

	for (unsigned i = 0; i < n; i++)
		pthread_mutex_lock(&sets[i]->lock);
	for (unsigned i = 0; i < n; i++)
		for (unsigned k = 0; k < nb; k++) {
			const struct qos_bucket *b = &sets[i]->b[idx[k]];
			uint64_t t;

			if (b->rate && (t = bucket_when(b, units[k], now)) > latest)
				latest = t;
		}
	if (!latest)
		for (unsigned i = 0; i < n; i++)
			for (unsigned k = 0; k < nb; k++)
				if (sets[i]->b[idx[k]].rate)
					bucket_charge(&sets[i]->b[idx[k]], units[k], now);
	for (unsigned i = n; i-- > 0;)
		pthread_mutex_unlock(&sets[i]->lock);
	*when = latest;
	return !latest;
}

void qos_account(struct qos_set *s, uint64_t waited_ns)
{
	__atomic_fetch_add(&s->throttled_ns, waited_ns, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->throttled, 1, __ATOMIC_RELAXED);
}
