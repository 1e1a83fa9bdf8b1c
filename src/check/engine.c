/* SPDX-License-Identifier: MIT */
/*
 * The verification engine of `vioscope check verify` and `stress` (see check_int.h).
 *
 * One thread per queue keeps requests in flight at a queue depth that changes by phases
 * (1, 4, 16, the deepest; each thread starts at another one), on random ranges of 512 B to
 * 1 MiB at offsets unrelated to their size.  Writes carry self-describing sectors
 * (vblock.c); reads are checked sector by sector against what the model allows.  A read
 * that finds older data is read again while its range is still reserved: right the second
 * time, the first was a stale read; still wrong, the write was lost (or, when other sectors
 * of the same write are there, torn).  A final pass reads every sector back.
 *
 * Completions may be reported on any thread (a LUN reset polls every queue, a lost
 * connection fails requests from the initiator's control thread): eng_done() only moves the
 * request to its thread's done list; the owning thread does the rest.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check/check_int.h"
#include "util/util.h"

static const unsigned depth_steps[] = {1, 4, 16, 0 /* the deepest */};

const char *eng_op_name(enum eng_op op)
{
	static const char *const n[] = {"read", "write", "flush", "unmap"};
	return op < ENG_OPS ? n[op] : "?";
}

const char *eng_err_name(enum eng_err k)
{
	static const char *const n[] = {"lost write",	     "stale read",   "misdirected write",
					"torn write",	     "phantom data", "I/O error",
					"double completion", "hung request", "resource leak"};
	return k < E_COUNT ? n[k] : "?";
}

const char *eng_res_name(enum eng_res r)
{
	static const char *const n[] = {"ok",	     "aborted", "reset", "not connected",
					"timed out", "other"};
	return r < RES_COUNT ? n[r] : "?";
}

double eng_elapsed(const struct eng *e)
{
	return (double)(vs_mono_ns() - e->t0) / 1e9;
}

void eng_error(struct eng *e, enum eng_err k, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&e->err_lock);
	if (!e->err[k]++) {
		int n = snprintf(e->first[k], sizeof(e->first[k]), "%.1f s: ", eng_elapsed(e));

		va_start(ap, fmt);
		vsnprintf(e->first[k] + n, sizeof(e->first[k]) - (size_t)n, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&e->err_lock);
}

uint64_t eng_errors(const struct eng *e)
{
	uint64_t n = 0;

	for (unsigned k = 0; k < E_COUNT; k++)
		n += e->err[k];
	return n;
}

void eng_print_errors(const struct eng *e, FILE *out)
{
	for (unsigned k = 0; k < E_COUNT; k++)
		if (e->err[k])
			fprintf(out, "  %s: %llu; first at %s\n", eng_err_name(k),
				(unsigned long long)e->err[k], e->first[k]);
}

void eng_totals(const struct eng *e, uint64_t ops[ENG_OPS], uint64_t bytes[ENG_OPS],
		uint64_t res[RES_COUNT], uint64_t *sectors)
{
	memset(ops, 0, sizeof(uint64_t) * ENG_OPS);
	memset(bytes, 0, sizeof(uint64_t) * ENG_OPS);
	memset(res, 0, sizeof(uint64_t) * RES_COUNT);
	*sectors = 0;
	for (unsigned i = 0; i < e->nthreads; i++) {
		const struct eng_thread *t = &e->th[i];

		for (unsigned k = 0; k < ENG_OPS; k++) {
			ops[k] += t->ops[k];
			bytes[k] += t->bytes[k];
		}
		for (unsigned k = 0; k < RES_COUNT; k++)
			res[k] += t->res[k];
		*sectors += t->sectors_verified;
	}
}

uint64_t eng_refused(const struct eng *e)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < e->nthreads; i++)
		n += e->th[i].refused;
	return n;
}

/* ---- the model ---- */

/* Reserve [s, s+n) unless a request holds part of it (lock held). */
static bool reserve(struct eng *e, uint64_t s, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (e->m[s + i].flags & SEC_BUSY)
			return false;
	for (uint32_t i = 0; i < n; i++)
		e->m[s + i].flags |= SEC_BUSY;
	return true;
}

static void release(struct eng *e, uint64_t s, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		e->m[s + i].flags &= (uint8_t)~SEC_BUSY;
}

/* A write or unmap ended: acknowledged (ok) or in doubt. */
static void model_written(struct eng *e, const struct eng_req *r, bool ok)
{
	uint32_t writer = r->op == ENG_WRITE ? r->t->idx + 1 : 0;

	for (uint32_t i = 0; i < r->nsect; i++) {
		struct eng_sector *m = &e->m[r->sector + i];

		if (ok) {
			m->lo = m->hi = r->gen;
			m->writer = writer;
			m->flags = (uint8_t)(SEC_BUSY | (r->op == ENG_UNMAP ? SEC_ZERO : 0));
		} else {
			if (r->gen > m->hi)
				m->hi = r->gen;
			if (r->op == ENG_UNMAP)
				m->flags |= SEC_ZERO;
		}
	}
}

/* Verdicts for one sector read back. */
enum verdict { V_OK, V_OLD, V_MISDIRECTED, V_TORN, V_PHANTOM };

static enum verdict judge(const struct eng *e, uint64_t x, const uint8_t *s, struct vs_vb_hdr *h,
			  enum vs_vb_kind *kind)
{
	const struct eng_sector *m = &e->m[x];

	*kind = vs_vb_parse(s, e->run, h);
	switch (*kind) {
	case VS_VB_OURS:
		if (h->lba != x)
			return V_MISDIRECTED;
		if (h->gen >= m->lo && h->gen <= m->hi && h->gen)
			return h->gen == m->lo && m->writer && h->writer != m->writer ? V_PHANTOM
										      : V_OK;
		return h->gen < m->lo ? V_OLD : V_PHANTOM;
	case VS_VB_TORN:
		return V_TORN;
	case VS_VB_ZERO:
		return m->flags & (SEC_ZERO | SEC_ANY) ? V_OK : V_OLD;
	default:
		return m->flags & SEC_ANY ? V_OK : V_OLD;
	}
}

static void describe_found(char *buf, size_t len, enum vs_vb_kind kind, const struct vs_vb_hdr *h)
{
	if (kind == VS_VB_OURS)
		snprintf(buf, len, "generation %llu by writer %u (written for sector %llu)",
			 (unsigned long long)h->gen, h->writer, (unsigned long long)h->lba);
	else
		snprintf(buf, len, "%s",
			 kind == VS_VB_ZERO   ? "zeros"
			 : kind == VS_VB_TORN ? "a sector of this run whose checksum fails"
					      : "data not written in this run");
}

static void describe_expected(char *buf, size_t len, const struct eng_sector *m)
{
	if (m->lo == m->hi)
		snprintf(buf, len, "generation %llu by writer %u%s", (unsigned long long)m->lo,
			 m->writer, m->flags & SEC_ZERO ? " (an unmap: zeros)" : "");
	else
		snprintf(buf, len, "a generation in %llu..%llu%s", (unsigned long long)m->lo,
			 (unsigned long long)m->hi, m->flags & SEC_ZERO ? " or zeros" : "");
}

/* After a read judged wholly right: what it found is now what is expected. */
static void model_confirm(struct eng *e, uint64_t x, enum vs_vb_kind kind,
			  const struct vs_vb_hdr *h)
{
	struct eng_sector *m = &e->m[x];

	if (kind == VS_VB_OURS) {
		m->lo = m->hi = h->gen;
		m->writer = h->writer;
		m->flags &= SEC_BUSY;
	}
}

/* After an error: expect what is there now, so one fault is reported once. */
static void model_accept(struct eng *e, uint64_t x, enum vs_vb_kind kind, const struct vs_vb_hdr *h)
{
	struct eng_sector *m = &e->m[x];

	if (kind == VS_VB_OURS && h->lba == x) {
		model_confirm(e, x, kind, h);
	} else {
		m->lo = 0;
		m->writer = 0;
		m->flags |= SEC_ANY | SEC_ZERO;
	}
}

/* Check a completed read (lock held).  Returns true when it must be read again. */
static bool check_read(struct eng *e, struct eng_req *r)
{
	struct vs_vb_hdr h;
	enum vs_vb_kind kind;
	bool again = false;
	char found[128], want[128];

	if (!r->reread)
		memset(r->bad, 0, (r->nsect + 7) / 8);
	for (uint32_t i = 0; i < r->nsect; i++) {
		uint64_t x = r->sector + i;
		const uint8_t *s = r->buf + (size_t)i * VS_VB_SECTOR;
		enum verdict v = judge(e, x, s, &h, &kind);
		bool was_bad = r->reread && (r->bad[i / 8] & (1u << (i % 8)));

		if (v == V_OK) {
			if (was_bad) {
				describe_found(found, sizeof(found), kind, &h);
				eng_error(e, E_STALE,
					  "sector %llu: the first read returned older data, the "
					  "second %s (%s of %llu+%u)",
					  (unsigned long long)x, found, eng_op_name(r->op),
					  (unsigned long long)r->sector, r->nsect);
			}
			continue;
		}
		describe_found(found, sizeof(found), kind, &h);
		describe_expected(want, sizeof(want), &e->m[x]);
		if (v == V_OLD && !r->reread) {
			r->bad[i / 8] |= (uint8_t)(1u << (i % 8));
			again = true;
			continue;
		}
		if (v == V_OLD) {
			/* Still old: lost, or torn when another sector of that write is there. */
			bool torn = false;

			for (uint32_t j = 0; j < r->nsect && !torn; j++) {
				struct vs_vb_hdr h2;
				const struct eng_sector *m2 = &e->m[r->sector + j];

				torn = j != i && m2->lo == e->m[x].lo && e->m[x].lo &&
				       vs_vb_parse(r->buf + (size_t)j * VS_VB_SECTOR, e->run,
						   &h2) == VS_VB_OURS &&
				       h2.gen == e->m[x].lo;
			}
			eng_error(e, torn ? E_TORN : E_LOST,
				  "sector %llu should hold %s, it holds %s%s",
				  (unsigned long long)x, want, found,
				  torn ? ": other sectors of the same write are there"
				       : ", twice read: the write never reached the medium");
		} else if (v == V_MISDIRECTED) {
			eng_error(e, E_MISDIRECTED,
				  "sector %llu holds the block written for sector %llu (generation "
				  "%llu, writer %u); it should hold %s",
				  (unsigned long long)x, (unsigned long long)h.lba,
				  (unsigned long long)h.gen, h.writer, want);
		} else if (v == V_TORN) {
			eng_error(e, E_TORN,
				  "sector %llu is partly written (its checksum fails); "
				  "it should hold %s",
				  (unsigned long long)x, want);
		} else {
			eng_error(e, E_PHANTOM, "sector %llu holds %s, newer than %s",
				  (unsigned long long)x, found, want);
		}
		model_accept(e, x, kind, &h);
	}
	if (again)
		return true;
	for (uint32_t i = 0; i < r->nsect; i++) {
		uint64_t x = r->sector + i;

		if (judge(e, x, r->buf + (size_t)i * VS_VB_SECTOR, &h, &kind) == V_OK)
			model_confirm(e, x, kind, &h);
	}
	r->t->sectors_verified += r->nsect;
	return false;
}

static enum eng_res classify(int result)
{
	switch (result) {
	case 0:
		return RES_OK;
	case -ECANCELED:
		return RES_ABORTED;
	case -ECONNRESET:
		return RES_RESET;
	case -ENOTCONN:
		return RES_NOTCONN;
	case -ETIMEDOUT:
		return RES_TIMEDOUT;
	default:
		return RES_OTHER;
	}
}

/* ---- requests ---- */

static void req_submit(struct eng_thread *t, struct eng_req *r);

/* The owning thread takes a completed request: model, checks, accounting. */
static void req_finish(struct eng_thread *t, struct eng_req *r)
{
	struct eng *e = t->e;
	enum eng_res res = classify(r->result);
	bool again = false;

	atomic_store(&r->stage, ST_COMPLETED);
	if (r->refused)
		t->refused++;
	else
		t->res[res]++;
	if (r->readback && e->stress && res != RES_OK && res != RES_OTHER && r->retries++ < 2000 &&
	    !vs_interrupted()) {
		usleep(10000); /* the target is coming back: every sector is read back */
		req_submit(t, r);
		return;
	}
	/* Allowed: a full ring as the random phase ends (the request was never sent); in
	 * stress, the defined errors of a disrupted device and refusals while it is away. */
	/* Interrupted, a request may fail for that alone: a Ctrl-C at a terminal stops the
	 * target too. */
	if (res != RES_OK && !(r->refused && r->result == -EBUSY) && !vs_interrupted() &&
	    (!e->stress || (r->refused ? r->result != -ENOTCONN : res == RES_OTHER)))
		eng_error(e, E_IO, "%s of sectors %llu+%u on queue %u %s: %s", eng_op_name(r->op),
			  (unsigned long long)r->sector, r->nsect, t->idx,
			  r->refused ? "refused" : "failed", strerror(-r->result));
	pthread_mutex_lock(&e->lock);
	switch (r->op) {
	case ENG_WRITE:
	case ENG_UNMAP:
		model_written(e, r, res == RES_OK);
		break;
	case ENG_READ:
		if (res == RES_OK)
			again = check_read(e, r);
		break;
	default:
		break;
	}
	if (again) {
		pthread_mutex_unlock(&e->lock);
		r->reread = true;
		req_submit(t, r);
		return;
	}
	if (r->op != ENG_FLUSH)
		release(e, r->sector, r->nsect);
	pthread_mutex_unlock(&e->lock);
	atomic_store(&r->stage, ST_FREE);
	t->inflight--;
}

static void req_submit(struct eng_thread *t, struct eng_req *r)
{
	int rc;

	r->result = 1;
	r->refused = false;
	__atomic_store_n(&r->t_submit, vs_mono_ns(), __ATOMIC_RELEASE);
	atomic_store(&r->stage, ST_SUBMITTING);
	atomic_store(&r->armed, true);
	while ((rc = t->e->ops->submit(r)) == -EBUSY) {
		if (atomic_load(&t->e->stop) && !t->e->readback_phase)
			break;
		t->e->ops->poll(t, 100); /* a full ring: make room */
	}
	if (rc == 0) {
		t->ops[r->op]++;
		t->bytes[r->op] += (uint64_t)r->nsect * VS_VB_SECTOR;
		atomic_store(&r->stage, ST_IN_FLIGHT);
		return;
	}
	/* Not submitted: it ends now, with the submission's error. */
	atomic_store(&r->armed, false);
	r->result = rc;
	r->refused = true;
	req_finish(t, r);
}

void eng_done(struct eng_req *r)
{
	struct eng_thread *t = r->t;

	if (!atomic_exchange(&r->armed, false)) {
		eng_error(t->e, E_TWICE, "%s of sectors %llu+%u on queue %u completed again",
			  eng_op_name(r->op), (unsigned long long)r->sector, r->nsect, t->idx);
		return;
	}
	pthread_mutex_lock(&t->done_lock);
	r->next_done = t->done_head;
	t->done_head = r;
	pthread_mutex_unlock(&t->done_lock);
}

static void take_done(struct eng_thread *t)
{
	struct eng_req *list;

	pthread_mutex_lock(&t->done_lock);
	list = t->done_head;
	t->done_head = NULL;
	pthread_mutex_unlock(&t->done_lock);
	while (list) {
		struct eng_req *r = list;

		list = r->next_done;
		req_finish(t, r);
	}
}

/* Sectors for a random request: log-uniform in blocks, 1 block .. max_sect. */
static uint32_t pick_size(struct eng *e, uint64_t *rng, uint32_t max)
{
	uint32_t blocks = max / e->unit, bits = 0, n;

	while ((2u << bits) <= blocks)
		bits++;
	n = 1u << (vs_xorshift64(rng) % (bits + 1));
	n += (uint32_t)(vs_xorshift64(rng) % n);
	if (n > blocks)
		n = blocks;
	return n * e->unit;
}

/* Choose and reserve a random request into r: false when the range was taken. */
static bool pick(struct eng_thread *t, struct eng_req *r)
{
	struct eng *e = t->e;
	unsigned dice = (unsigned)(vs_xorshift64(&t->rng) % 100);
	uint32_t max = e->max_sect;
	uint64_t blocks;
	bool ok = false;

	if (e->stress)
		r->op = dice < 40      ? ENG_READ
			: dice < 88    ? ENG_WRITE
			: dice < 95    ? ENG_FLUSH
			: e->can_unmap ? ENG_UNMAP
				       : ENG_WRITE;
	else
		r->op = dice < 50 ? ENG_READ : ENG_WRITE;
	r->reread = false;
	r->readback = false;
	if (r->op == ENG_FLUSH) {
		r->sector = 0;
		r->nsect = 0;
		return true;
	}
	if (r->op == ENG_UNMAP && max > 512)
		max = 512;
	r->nsect = pick_size(e, &t->rng, max);
	blocks = (e->nsect - r->nsect) / e->unit + 1;
	pthread_mutex_lock(&e->lock);
	for (unsigned tries = 0; tries < 4 && !ok; tries++) {
		r->sector = (vs_xorshift64(&t->rng) % blocks) * e->unit;
		ok = reserve(e, r->sector, r->nsect);
	}
	pthread_mutex_unlock(&e->lock);
	if (ok && (r->op == ENG_WRITE || r->op == ENG_UNMAP))
		r->gen = atomic_fetch_add(&e->gen, 1) + 1;
	return ok;
}

static void fill(struct eng_thread *t, struct eng_req *r)
{
	for (uint32_t i = 0; i < r->nsect; i++)
		vs_vb_fill(r->buf + (size_t)i * VS_VB_SECTOR, t->e->run, r->sector + i, r->gen,
			   t->idx + 1);
}

static struct eng_req *free_req(struct eng_thread *t)
{
	for (unsigned i = 0; i < t->e->max_depth; i++)
		if (atomic_load(&t->reqs[i].stage) == ST_FREE)
			return &t->reqs[i];
	return NULL;
}

static unsigned current_depth(struct eng_thread *t)
{
	struct eng *e = t->e;
	unsigned phase = (unsigned)(eng_elapsed(e) / e->phase_s) + t->idx;
	unsigned d = depth_steps[phase % (sizeof(depth_steps) / sizeof(depth_steps[0]))];

	return d && d < e->max_depth ? d : e->max_depth;
}

static void drain(struct eng_thread *t)
{
	while (t->inflight) {
		t->e->ops->poll(t, 1000);
		take_done(t);
	}
}

/* The random phase of one thread. */
static void run_random(struct eng_thread *t)
{
	struct eng *e = t->e;

	while (!atomic_load(&e->stop)) {
		unsigned depth = current_depth(t);
		struct eng_req *r;
		bool submitted = false;

		while (t->inflight < depth && !atomic_load(&e->stop) && (r = free_req(t))) {
			if (!pick(t, r))
				break;
			if (r->op == ENG_WRITE)
				fill(t, r);
			t->inflight++;
			req_submit(t, r);
			submitted = !r->refused;
			if (!submitted)
				break; /* the target is away: wait a little */
		}
		e->ops->poll(t, submitted ? 0 : 1000);
		take_done(t);
	}
	drain(t);
}

/* The read-back pass of one thread: its share of the region, in order. */
static void run_readback(struct eng_thread *t)
{
	struct eng *e = t->e;
	uint64_t per = (e->nsect / e->nthreads) / e->unit * e->unit;
	uint64_t s = per * t->idx, end = t->idx + 1 == e->nthreads ? e->nsect : s + per;
	uint32_t chunk = e->max_sect < 1024 ? e->max_sect : 1024;
	unsigned depth = e->max_depth < 8 ? e->max_depth : 8;

	while (s < end || t->inflight) {
		struct eng_req *r;

		if (vs_interrupted())
			s = end; /* what is in flight still completes */
		while (s < end && t->inflight < depth && (r = free_req(t))) {
			r->op = ENG_READ;
			r->reread = false;
			r->readback = true;
			r->retries = 0;
			r->sector = s;
			r->nsect = end - s < chunk ? (uint32_t)(end - s) : chunk;
			pthread_mutex_lock(&e->lock);
			reserve(e, r->sector, r->nsect);
			pthread_mutex_unlock(&e->lock);
			s += r->nsect;
			t->inflight++;
			req_submit(t, r);
		}
		e->ops->poll(t, 200);
		take_done(t);
	}
}

static void *thread_main(void *arg)
{
	struct eng_thread *t = arg;

	if (t->e->readback_phase)
		run_readback(t);
	else
		run_random(t);
	return NULL;
}

/* Requests in flight far too long: named with their stage, and the run stops. */
static void *watchdog_main(void *arg)
{
	struct eng *e = arg;

	while (!atomic_load(&e->finished)) {
		uint64_t limit = (uint64_t)e->hang_after_s * 1000000000ull;

		for (unsigned i = 0; i < e->nthreads; i++) {
			for (unsigned k = 0; k < e->max_depth; k++) {
				struct eng_req *r = &e->th[i].reqs[k];
				int st = atomic_load(&r->stage);
				/* Its own submission time, then the clock: never the other way
				 * round. */
				uint64_t at = __atomic_load_n(&r->t_submit, __ATOMIC_ACQUIRE);
				uint64_t now = vs_mono_ns();

				if ((st != ST_IN_FLIGHT && st != ST_SUBMITTING) || now < at ||
				    now - at < limit)
					continue;
				eng_error(
				    e, E_HANG, "%s of sectors %llu+%u on queue %u: %s for %.1f s",
				    eng_op_name(r->op), (unsigned long long)r->sector, r->nsect, i,
				    st == ST_SUBMITTING
					? "still being submitted (the ring never had room)"
					: "submitted, the driver never completed it",
				    (double)(now - at) / 1e9);
				fflush(stdout);
				fprintf(stderr, "vioscope check: watchdog: %s\n", e->first[E_HANG]);
				/* A fault found; a hung request cannot be taken back: stop here. */
				exit(VS_EXIT_FAILED);
			}
		}
		for (unsigned n = 0; n < 10 && !atomic_load(&e->finished); n++)
			usleep(100000);
	}
	return NULL;
}

int eng_init(struct eng *e, const struct eng_port_ops *ops, void *port_ctx, uint64_t bytes,
	     uint32_t block, unsigned nthreads, const struct vs_check_io_opts *o, bool stress,
	     char *why, size_t whylen)
{
	uint64_t seed = o->seed ? o->seed : vs_mono_ns() ^ ((uint64_t)getpid() << 32);
	int rc;

	memset(e, 0, sizeof(*e));
	e->ops = ops;
	e->port_ctx = port_ctx;
	e->stress = stress;
	e->unit = block / VS_VB_SECTOR;
	if (!e->unit || block % VS_VB_SECTOR)
		return vs_fail(why, whylen, -EINVAL, "block size %u is not whole sectors", block);
	if (o->size && o->size < bytes)
		bytes = o->size;
	if (!o->size && bytes > (1ull << 30))
		bytes = 1ull << 30;
	e->nsect = bytes / VS_VB_SECTOR / e->unit * e->unit;
	e->max_sect = ENG_MAX_SECT / e->unit * e->unit;
	if (e->max_sect > e->nsect)
		e->max_sect = (uint32_t)e->nsect;
	if (e->nsect < e->unit * 4ull)
		return vs_fail(why, whylen, -EINVAL, "%llu bytes are too few to verify",
			       (unsigned long long)bytes);
	e->max_writes = o->max_writes;
	e->max_depth = o->max_depth ? o->max_depth : 32;
	if (e->max_depth > ENG_DEPTH_MAX)
		e->max_depth = ENG_DEPTH_MAX;
	e->nthreads = nthreads;
	e->hang_after_s = 60;
	e->seed = seed;
	e->run = seed * 0x9e3779b97f4a7c15ull | 1;
	atomic_init(&e->gen, 0);
	pthread_mutex_init(&e->lock, NULL);
	pthread_mutex_init(&e->err_lock, NULL);
	e->m = calloc(e->nsect, sizeof(*e->m));
	e->th = calloc(nthreads, sizeof(*e->th));
	if (!e->m || !e->th)
		return vs_fail(why, whylen, -ENOMEM, "no memory for %llu sectors",
			       (unsigned long long)e->nsect);
	for (uint64_t i = 0; i < e->nsect; i++)
		e->m[i].flags = SEC_ANY | SEC_ZERO;
	for (unsigned i = 0; i < nthreads; i++) {
		struct eng_thread *t = &e->th[i];

		t->e = e;
		t->idx = i;
		t->rng = seed + 0x9e3779b97f4a7c15ull * (i + 1);
		pthread_mutex_init(&t->done_lock, NULL);
		for (unsigned k = 0; k < ENG_DEPTH_MAX; k++)
			t->reqs[k].t = t;
		if ((rc = ops->thread_init(t, why, whylen)) < 0)
			return rc;
		t->started = true;
	}
	if (o->out)
		fprintf(o->out, "  seed %llu (--seed to repeat), run id %016llx\n",
			(unsigned long long)seed, (unsigned long long)e->run);
	return 0;
}

static int run_threads(struct eng *e, char *why, size_t whylen)
{
	unsigned started = 0;
	int rc = 0;

	for (unsigned i = 0; i < e->nthreads; i++) {
		if ((rc = pthread_create(&e->th[i].thread, NULL, thread_main, &e->th[i]))) {
			atomic_store(&e->stop, true);
			vs_fail(why, whylen, -rc, "pthread_create: %s", strerror(rc));
			break;
		}
		started++;
	}
	return rc ? -rc : (int)started;
}

/* One line of how the random phase goes. */
static void eng_progress(const struct eng *e)
{
	uint64_t ops[ENG_OPS], bytes[ENG_OPS], res[RES_COUNT], sect;

	eng_totals(e, ops, bytes, res, &sect);
	fprintf(
	    e->progress, "  %7.1f s: %llu requests (%.0f MiB), %llu errors so far\n",
	    eng_elapsed(e),
	    (unsigned long long)(ops[ENG_READ] + ops[ENG_WRITE] + ops[ENG_FLUSH] + ops[ENG_UNMAP]),
	    (double)(bytes[ENG_READ] + bytes[ENG_WRITE]) / (1 << 20),
	    (unsigned long long)eng_errors(e));
	fflush(e->progress);
}

int eng_run(struct eng *e, double seconds, char *why, size_t whylen)
{
	uint64_t end, next_progress;
	int n, rc;

	e->t0 = vs_mono_ns();
	e->phase_s = seconds / 8 < 0.25 ? 0.25 : seconds / 8;
	if (!e->watchdog_started) {
		if ((rc = pthread_create(&e->watchdog, NULL, watchdog_main, e)))
			return vs_fail(why, whylen, -rc, "pthread_create: %s", strerror(rc));
		e->watchdog_started = true;
	}
	n = run_threads(e, why, whylen);
	end = e->t0 + (uint64_t)(seconds * 1e9);
	next_progress = e->progress ? e->t0 + (uint64_t)(e->progress_s * 1e9) : UINT64_MAX;
	while (n > 0 && vs_mono_ns() < end && !atomic_load(&e->stop) && !vs_interrupted()) {
		usleep(e->max_writes ? 1000 : 20000); /* a signal cuts it short */
		if (e->max_writes) {
			uint64_t ops[ENG_OPS], bytes[ENG_OPS], res[RES_COUNT], sectors;

			eng_totals(e, ops, bytes, res, &sectors);
			if (ops[ENG_WRITE] >= e->max_writes)
				break;
		}
		if (vs_mono_ns() >= next_progress) {
			eng_progress(e);
			next_progress += (uint64_t)(e->progress_s * 1e9);
		}
	}
	atomic_store(&e->stop, true);
	for (int i = 0; i < (n > 0 ? n : 0); i++)
		pthread_join(e->th[i].thread, NULL);
	return n < 0 ? n : 0;
}

int eng_readback(struct eng *e, char *why, size_t whylen)
{
	int n;

	e->readback_phase = true;
	n = run_threads(e, why, whylen);
	for (int i = 0; i < (n > 0 ? n : 0); i++)
		pthread_join(e->th[i].thread, NULL);
	e->readback_phase = false;
	return n < 0 ? n : 0;
}

void eng_fini(struct eng *e)
{
	atomic_store(&e->stop, true);
	atomic_store(&e->finished, true);
	if (e->watchdog_started)
		pthread_join(e->watchdog, NULL);
	for (unsigned i = 0; e->th && i < e->nthreads; i++) {
		if (e->th[i].started)
			e->ops->thread_fini(&e->th[i]);
		pthread_mutex_destroy(&e->th[i].done_lock);
	}
	free(e->th);
	free(e->m);
	pthread_mutex_destroy(&e->lock);
	pthread_mutex_destroy(&e->err_lock);
}
