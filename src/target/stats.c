/* SPDX-License-Identifier: MIT */
/*
 * Always-on statistics: per LUN and per request queue, read by any thread while the
 * workers count (request.c counts; this file allocates, clears and reads).
 *
 * Cost on the request path: each worker counts into its own blocks (one per LUN it
 * serves, struct ts_lun; one per queue it owns, struct ts_queue) with plain stores, so no
 * cache line is shared between workers and no atomic read-modify-write is needed.  The
 * clock is read once per worker pass (ts_pass_now): the TSC when it is invariant, converted
 * to ns only by the reader, else CLOCK_MONOTONIC.
 *
 * Clearing (a LUN added at run time) never touches the workers' blocks: it snapshots their
 * sum as the LUN's baseline, which readers subtract.  Every counter only grows and each
 * worker's counts are taken whole (a sequence count), so a baseline is at most what any
 * later read sees, and consistent with it.
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "target/target_int.h"

#define TS_WORDS (sizeof(struct ts_counts) / sizeof(uint64_t))
_Static_assert(sizeof(struct ts_counts) % sizeof(uint64_t) == 0, "struct ts_counts: only uint64_t");

/* ---- the clock ---------------------------------------------------------------------------- */
/* The TSC when it is invariant (util/clock.c: the same choice and calibration as the trace
 * runtime's); VIOSCOPE_STATS_CLOCK=monotonic forces CLOCK_MONOTONIC. */
void ts_clock_init(struct vs_target *t)
{
	double ns_per_tick = vs_tsc_clock("VIOSCOPE_STATS_CLOCK") ? vs_tsc_ns_per_tick() : 0;

	t->ts_tsc = ns_per_tick > 0;
	t->ts_ns_per_tick = t->ts_tsc ? ns_per_tick : 1.0;
}

int ts_init(struct vs_controller *c)
{
	c->ts = calloc((size_t)c->t->nworkers * VS_TARGET_MAX_LUNS, sizeof(*c->ts));
	if (!c->ts)
		return -ENOMEM;
	pthread_mutex_init(&c->ts_lock, NULL);
	return 0;
}

/* No worker counts for c any more (its queues stopped), no reader reads (it is gone). */
void ts_fini(struct vs_controller *c)
{
	if (!c->ts)
		return;
	for (size_t i = 0; i < (size_t)c->t->nworkers * VS_TARGET_MAX_LUNS; i++)
		free(c->ts[i]);
	free(c->ts);
	c->ts = NULL;
	for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++)
		free(c->ts_base[id]);
	pthread_mutex_destroy(&c->ts_lock);
}

/* ---- the histogram ------------------------------------------------------------------------ */
uint64_t ts_bucket_high(unsigned b)
{
	unsigned e, shift;

	if (b < TS_SUB)
		return b;
	if (b >= TS_BUCKETS - 1)
		return UINT64_MAX;
	e = b / TS_SUB + TS_SUB_BITS - 1; /* the power of two */
	shift = e - TS_SUB_BITS;	  /* sub-bucket width: 2^shift */
	return (((uint64_t)TS_SUB + b % TS_SUB + 1) << shift) - 1;
}

uint64_t ts_percentile(const uint64_t hist[TS_BUCKETS], double p)
{
	uint64_t total = 0, rank, seen = 0;

	for (unsigned b = 0; b < TS_BUCKETS; b++)
		total += hist[b];
	if (!total)
		return 0;
	/* The smallest value with at least p of the values at or below it: rank ceil(p * n). */
	rank = (uint64_t)(p * (double)total);
	if ((double)rank < p * (double)total)
		rank++;
	if (rank < 1)
		rank = 1;
	if (rank > total)
		rank = total;
	for (unsigned b = 0; b < TS_BUCKETS; b++) {
		seen += hist[b];
		if (seen >= rank)
			return ts_bucket_high(b);
	}
	return ts_bucket_high(TS_BUCKETS - 1);
}

/* ---- the blocks --------------------------------------------------------------------------- */
/* Only for a LUN the device has: a guest addressing LUNs that do not exist must not make
 * the workers allocate. */
struct ts_lun *ts_lun_make(struct vs_controller *c, struct worker *w, unsigned lun)
{
	struct ts_lun *ls;

	if (!vs_scsi_dev_lun(c->dev, lun))
		return NULL;
	ls = calloc(1, sizeof(*ls));
	if (!ls) {
		VS_ERROR(QUEUE, "worker %u: out of memory for LUN %u's statistics", w->id, lun);
		return NULL;
	}
	/* Readers find it through this pointer: published with its zeroes. */
	__atomic_store_n(ts_slot(c, w, lun), ls, __ATOMIC_RELEASE);
	return ls;
}

/* Add a worker's counts to sum, as of one moment: the seqlock's read side (retried while
 * the worker was writing them; it writes a few words per request, so it finishes soon).
 * popped is the last word loaded (see struct ts_lun). */
static void counts_add(const struct ts_lun *ls, uint64_t *sum)
{
	const uint64_t *w = (const uint64_t *)&ls->c;
	uint64_t copy[TS_WORDS];

	for (unsigned tries = 0;; tries++) {
		uint64_t s0 = __atomic_load_n(&ls->seq, __ATOMIC_ACQUIRE), s1;

		for (size_t k = 0; k < TS_WORDS; k++)
			copy[k] = __atomic_load_n(&w[k], __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		s1 = __atomic_load_n(&ls->seq, __ATOMIC_RELAXED);
		if (!(s0 & 1) && s0 == s1)
			break;
		if (tries > 100)
			sched_yield(); /* the worker was preempted while writing */
	}
	for (size_t k = 0; k < TS_WORDS; k++)
		sum[k] += copy[k];
}

/* The sum over the workers of LUN id's blocks, into sum (zeroed by the caller). */
static void lun_sum(struct vs_controller *c, unsigned id, struct ts_lun *sum)
{
	for (unsigned i = 0; i < c->t->nworkers; i++) {
		const struct ts_lun *ls =
		    __atomic_load_n(&c->ts[(size_t)i * VS_TARGET_MAX_LUNS + id], __ATOMIC_ACQUIRE);

		if (!ls)
			continue;
		counts_add(ls, (uint64_t *)&sum->c);
		for (unsigned d = 0; d < 2; d++)
			for (unsigned b = 0; b < TS_BUCKETS; b++)
				sum->hist[d][b] +=
				    __atomic_load_n(&ls->hist[d][b], __ATOMIC_RELAXED);
	}
}

void tgt_stats_lun_clear(struct vs_controller *c, unsigned id)
{
	struct ts_lun *base;

	if (id >= VS_TARGET_MAX_LUNS)
		return;
	pthread_mutex_lock(&c->ts_lock);
	base = c->ts_base[id];
	if (!base) {
		base = calloc(1, sizeof(*base));
		if (!base) {
			pthread_mutex_unlock(&c->ts_lock);
			tq_log(c, "LUN %u: out of memory to clear its statistics", id);
			return;
		}
		c->ts_base[id] = base;
	}
	memset(base, 0, sizeof(*base));
	lun_sum(c, id, base);
	c->ts_gen[id]++; /* a mark's histograms of the LUN before are not this LUN's */
	pthread_mutex_unlock(&c->ts_lock);
}

/* ---- the readers -------------------------------------------------------------------------- */
/* A LUN the target has (luns.c changes the table at run time). */
static bool lun_present(struct vs_controller *c, unsigned id)
{
	return __atomic_load_n(&c->be[id], __ATOMIC_ACQUIRE) != NULL;
}

static void sub_clamped(uint64_t *a, const uint64_t *b, size_t n)
{
	for (size_t k = 0; k < n; k++)
		a[k] = a[k] > b[k] ? a[k] - b[k] : 0;
}

/* A reader's latency histograms of each LUN as of its last look (vs_target_lun_stats_since). */
struct vs_target_stats_mark {
	uint64_t ctrl; /* the controller it looked at last (its serial; 0: none) */
	struct {
		bool seen;    /* hist holds the LUN as of the last look */
		uint64_t gen; /* ts_gen of the LUN then */
		uint64_t (*hist)[TS_BUCKETS];
	} lun[VS_TARGET_MAX_LUNS];
};

struct vs_target_stats_mark *vs_target_stats_mark_new(void)
{
	return calloc(1, sizeof(struct vs_target_stats_mark));
}

void vs_target_stats_mark_free(struct vs_target_stats_mark *m)
{
	if (!m)
		return;
	for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++)
		free(m->lun[id].hist);
	free(m);
}

/* The latency histograms since the mark's last look at LUN id (when it saw this very LUN)
 * into sum, and the mark moved to now: true when they are over that interval. */
static bool mark_interval(struct vs_controller *c, struct vs_target_stats_mark *m, unsigned id,
			  struct ts_lun *sum)
{
	uint64_t now[2][TS_BUCKETS];
	bool interval = m->lun[id].seen && m->lun[id].gen == c->ts_gen[id];

	if (!m->lun[id].hist && !(m->lun[id].hist = malloc(sizeof(now))))
		return false; /* out of memory: since the LUN was added, as without a mark */
	memcpy(now, sum->hist, sizeof(now));
	if (interval)
		sub_clamped(&sum->hist[0][0], &m->lun[id].hist[0][0], 2 * TS_BUCKETS);
	memcpy(m->lun[id].hist, now, sizeof(now));
	m->lun[id].seen = true;
	m->lun[id].gen = c->ts_gen[id];
	return interval;
}

/* Under ts_lock; sum: scratch; m: NULL, or a reader's mark (latency since its last look). */
static bool lun_read(struct vs_controller *c, unsigned id, struct ts_lun *sum,
		     struct vs_target_stats_mark *m, struct vs_target_lun_stats *out)
{
	const struct ts_lun *base = c->ts_base[id];
	struct ts_counts *cnt = &sum->c;
	uint64_t completed = 0;
	bool interval = false;

	memset(sum, 0, sizeof(*sum));
	memset(out, 0, sizeof(*out));
	out->id = id;
	lun_sum(c, id, sum);
	/* Not cleared: what is in flight now, whatever the baseline. */
	for (unsigned k = 0; k < TS_KINDS; k++)
		completed += cnt->kind[k];
	out->in_flight = cnt->popped > completed ? cnt->popped - completed : 0;
	if (base) {
		/* Each worker's counts only grow, and the baseline took them whole: no count
		 * goes below it.  A histogram read while a request was being counted may. */
		sub_clamped((uint64_t *)cnt, (const uint64_t *)&base->c, TS_WORDS);
		sub_clamped(&sum->hist[0][0], &base->hist[0][0], 2 * TS_BUCKETS);
	}
	if (m)
		interval = mark_interval(c, m, id, sum);

	out->reads = cnt->kind[TS_READ];
	out->writes = cnt->kind[TS_WRITE];
	out->flushes = cnt->kind[TS_FLUSH];
	out->unmaps = cnt->kind[TS_UNMAP];
	out->others = cnt->kind[TS_OTHER];
	out->read_bytes = cnt->read_bytes;
	out->write_bytes = cnt->write_bytes;
	memcpy(out->sense_keys, cnt->sense, sizeof(out->sense_keys));
	out->failures = cnt->failures;
	out->read_p50_ns = ts_ticks_ns(c->t, ts_percentile(sum->hist[TS_READ], 0.50));
	out->read_p99_ns = ts_ticks_ns(c->t, ts_percentile(sum->hist[TS_READ], 0.99));
	out->read_p999_ns = ts_ticks_ns(c->t, ts_percentile(sum->hist[TS_READ], 0.999));
	out->write_p50_ns = ts_ticks_ns(c->t, ts_percentile(sum->hist[TS_WRITE], 0.50));
	out->write_p99_ns = ts_ticks_ns(c->t, ts_percentile(sum->hist[TS_WRITE], 0.99));
	out->write_p999_ns = ts_ticks_ns(c->t, ts_percentile(sum->hist[TS_WRITE], 0.999));
	/* since the LUN was added (tq_qos_reset), kept by qos.c, not per worker */
	out->throttled = __atomic_load_n(&c->qos[id].throttled, __ATOMIC_RELAXED);
	out->throttled_ns = __atomic_load_n(&c->qos[id].throttled_ns, __ATOMIC_RELAXED);
	return interval;
}

static unsigned lun_stats(struct vs_controller *c, struct vs_target_stats_mark *m,
			  struct vs_target_lun_stats *out, bool *over_interval, unsigned max)
{
	struct ts_lun *sum = max ? malloc(sizeof(*sum)) : NULL;
	unsigned n = 0;

	pthread_mutex_lock(&c->ts_lock);
	if (m && m->ctrl != c->serial) { /* another controller's LUNs: none seen */
		for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++)
			m->lun[id].seen = false;
		m->ctrl = c->serial;
	}
	for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++) {
		bool interval = false;

		if (!lun_present(c, id)) {
			if (m) /* gone: a LUN added there later starts afresh */
				m->lun[id].seen = false;
			continue;
		}
		if (n < max && sum) {
			interval = lun_read(c, id, sum, m, &out[n]);
		} else if (n < max) { /* out of memory: the ids, no figures */
			memset(&out[n], 0, sizeof(out[n]));
			out[n].id = id;
		}
		if (n < max && over_interval)
			over_interval[n] = interval;
		n++;
	}
	pthread_mutex_unlock(&c->ts_lock);
	free(sum);
	return n;
}

unsigned tq_lun_stats(struct vs_controller *c, struct vs_target_lun_stats *out, unsigned max)
{
	return lun_stats(c, NULL, out, NULL, max);
}

unsigned tq_lun_stats_since(struct vs_controller *c, struct vs_target_stats_mark *m,
			    struct vs_target_lun_stats *out, bool *over_interval, unsigned max)
{
	return lun_stats(c, m, out, over_interval, max);
}

unsigned tq_queue_stats(struct vs_controller *c, struct vs_target_queue_stats *out, unsigned max)
{
	for (unsigned i = 0; i < c->num_queues && i < max; i++) {
		const struct tq *q = &c->q[VS_VIRTIO_SCSI_VQ_REQ0 + i];

		out[i] = (struct vs_target_queue_stats){
		    .queue = i,
		    .requests = __atomic_load_n(&q->ts.requests, __ATOMIC_RELAXED),
		    .bytes = __atomic_load_n(&q->ts.bytes, __ATOMIC_RELAXED),
		    .in_flight = __atomic_load_n(&q->inflight, __ATOMIC_RELAXED),
		    .notifies = __atomic_load_n(&q->ts.notifies, __ATOMIC_RELAXED),
		};
	}
	return c->num_queues;
}
