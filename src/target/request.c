/* SPDX-License-Identifier: MIT */
/*
 * Request queues: pop virtio-scsi commands, run them with vs_scsi_exec() on iovecs that
 * point straight into guest memory, and give them back with their response.
 *
 * Chain layout (virtio 1.2, 5.6.6): readable = virtio_scsi_cmd_req (51 bytes) + data-out;
 * writable = virtio_scsi_cmd_resp (108 bytes) + data-in.  Either header may be split over
 * descriptors, and the guest may rewrite it while we work, so the request header is copied
 * out once and the response assembled privately, then written with bounds checks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "target/target_int.h"

#define REQ_HDR	 sizeof(struct vs_virtio_scsi_cmd_req)
#define RESP_HDR sizeof(struct vs_virtio_scsi_cmd_resp)

/* ---- the pool and the in-flight list ---------------------------------------------------- */
static struct treq *req_get(struct tq *q)
{
	struct treq *r = q->free;

	if (r) {
		q->free = r->next_free;
		return r;
	}
	/* Grows to the ring's concurrency (at most its size, see tq_req_process). */
	r = malloc(sizeof(*r));
	if (!r)
		return NULL;
	r->q = q;
	r->all_next = q->all;
	q->all = r;
	return r;
}

static void req_put(struct tq *q, struct treq *r)
{
	r->next_free = q->free;
	q->free = r;
}

void tq_req_pool_free(struct tq *q)
{
	while (q->all) {
		struct treq *r = q->all;
		q->all = r->all_next;
		free(r);
	}
	q->free = NULL;
}

/* Visible to TMFs from here until req_untrack(). */
static void req_track(struct tq *q, struct treq *r)
{
	pthread_mutex_lock(&q->lock);
	r->seq = ++q->track_seq;
	r->abort_resp = 0;
	r->tmf_wait = false;
	r->next = &q->active;
	r->prev = q->active.prev;
	q->active.prev->next = r;
	q->active.prev = r;
	pthread_mutex_unlock(&q->lock);
}

/* Returns the response a TMF imposed (0: none); *wake when a TMF waits for this one. */
static uint8_t req_untrack(struct tq *q, struct treq *r, bool *wake)
{
	uint8_t resp;

	pthread_mutex_lock(&q->lock);
	r->prev->next = r->next;
	r->next->prev = r->prev;
	resp = r->abort_resp;
	*wake = r->tmf_wait;
	pthread_mutex_unlock(&q->lock);
	return resp;
}

/* ---- statistics (stats.c reads them) -------------------------------------------------------- */
/* Opcode -> enum ts_kind (TS_OTHER is 0 in the table: every opcode not listed). */
#define TS_WRITE_SAME (TS_KINDS + 1) /* a write, or an unmap with the UNMAP bit */
static const uint8_t ts_kind_tab[256] = {
    [VS_SCSI_OP_READ_6] = TS_READ + 1,
    [VS_SCSI_OP_READ_10] = TS_READ + 1,
    [VS_SCSI_OP_READ_12] = TS_READ + 1,
    [VS_SCSI_OP_READ_16] = TS_READ + 1,
    [VS_SCSI_OP_WRITE_6] = TS_WRITE + 1,
    [VS_SCSI_OP_WRITE_10] = TS_WRITE + 1,
    [VS_SCSI_OP_WRITE_12] = TS_WRITE + 1,
    [VS_SCSI_OP_WRITE_16] = TS_WRITE + 1,
    [VS_SCSI_OP_WRITE_SAME_10] = TS_WRITE_SAME + 1,
    [VS_SCSI_OP_WRITE_SAME_16] = TS_WRITE_SAME + 1,
    [VS_SCSI_OP_SYNCHRONIZE_CACHE_10] = TS_FLUSH + 1,
    [VS_SCSI_OP_SYNCHRONIZE_CACHE_16] = TS_FLUSH + 1,
    [VS_SCSI_OP_UNMAP] = TS_UNMAP + 1,
};

static inline enum ts_kind ts_kind_of(const uint8_t *cdb)
{
	unsigned k = ts_kind_tab[cdb[0]];

	if (!k)
		return TS_OTHER;
	if (__builtin_expect(k == TS_WRITE_SAME + 1, 0))
		return cdb[1] & 0x08 ? TS_UNMAP : TS_WRITE; /* the UNMAP bit: a discard */
	return (enum ts_kind)(k - 1);
}

/* A request about to run: its kind, its LUN's counters, and (reads and writes) its start:
 * the pass's clock (see ts_pass_now). */
static inline __attribute__((always_inline)) void ts_req_start(struct tq *q, struct treq *r)
{
	struct ts_lun *ls = NULL;

	if (!VS_STATS)
		return;
	r->ts_kind = (uint8_t)ts_kind_of(r->hdr.cdb);
	r->t_pop = ts_pass_now(q->w); /* one read per pass: see ts_pass_now */
	if (__builtin_expect(r->lun < VS_TARGET_MAX_LUNS, 1)) {
		ls = *ts_slot(q->c, q->w, r->lun);
		if (__builtin_expect(!ls, 0))
			ls = ts_lun_make(q->c, q->w, r->lun); /* once per worker and LUN */
		if (ls)
			ts_add(&ls->c.popped, 1); /* outside the sequence: see struct ts_lun */
	}
	r->ls = ls;
}

/* The request's response is about to be pushed. */
static inline __attribute__((always_inline)) void
ts_req_end(struct tq *q, struct treq *r, uint8_t response, size_t in, size_t out)
{
	struct ts_lun *ls = r->ls;
	unsigned k = r->ts_kind;

	if (!VS_STATS)
		return;
	ts_add(&q->ts.bytes, in + out); /* its requests: tq_count_answered */
	if (ls) {
		uint64_t lat = k <= TS_WRITE ? ts_pass_now(q->w) - r->t_pop : 0;

		ts_write_begin(ls);
		if (k <= TS_WRITE) {
			ts_add(&ls->hist[k][ts_bucket(lat)], 1);
			if (k == TS_READ)
				ts_add(&ls->c.read_bytes, in);
			else
				ts_add(&ls->c.write_bytes, out);
		}
		if (response != VS_VIRTIO_SCSI_S_OK)
			ts_add(&ls->c.failures, 1);
		else if (r->cmd.status == VS_SCSI_CHECK_CONDITION)
			ts_add(&ls->c.sense[vs_scsi_sense_key(r->cmd.sense, r->cmd.sense_len)], 1);
		ts_add(&ls->c.kind[k], 1);
		ts_write_end(ls);
	}
}

/* ---- completion ------------------------------------------------------------------------------ */
/* Write the response header into the chain's writable part and return the chain.
 * data_len: data-in bytes transferred after the header. */
static void req_push(struct tq *q, struct vs_vq_elem *e, const struct vs_virtio_scsi_cmd_resp *resp,
		     size_t data_len)
{
	size_t n = vs_iov_from_buf(e->in, e->in_num, 0, resp, RESP_HDR);

	/* Callers checked in_len >= RESP_HDR; data_len <= in_len - RESP_HDR. */
	vs_vq_dev_log_written(&q->vq, e, RESP_HDR);
	vs_vq_dev_fill(&q->vq, e->head, (uint32_t)(n + data_len));
	q->unsignalled = true;
}

/* Answer a chain that never reached the SCSI layer. */
static void req_reject(struct tq *q, struct vs_vq_elem *e, uint8_t response, const char *why)
{
	struct vs_virtio_scsi_cmd_resp resp = {.response = response};

	wstat_inc(&q->w->st.bad_requests);
	if (e->in_len >= RESP_HDR) {
		VS_WARNING(QUEUE, "queue %u head %u: %s: response %u{vscsi_response}", q->idx,
			   e->head, why, response);
		req_push(q, e, &resp, 0);
	} else {
		VS_ERROR(QUEUE,
			 "queue %u head %u: %s; no room for a response (%llu writable bytes)",
			 q->idx, e->head, why, (unsigned long long)e->in_len);
		vs_vq_dev_fill(&q->vq, e->head, 0);
		q->unsignalled = true;
	}
}

static void req_done(struct vs_scsi_cmd *cmd)
{
	struct treq *r = cmd->priv;
	struct tq *q = r->q;
	struct vs_virtio_scsi_cmd_resp resp;
	size_t data = 0, out = 0;
	bool wake;
	uint8_t forced = req_untrack(q, r, &wake);

	memset(&resp, 0, sizeof(resp));
	if (forced) {
		/* Aborted or reset by a TMF: the data may or may not have moved. */
		resp.response = forced;
	} else {
		uint32_t sl = cmd->sense_len < VS_VIRTIO_SCSI_SENSE_SIZE
				  ? cmd->sense_len
				  : VS_VIRTIO_SCSI_SENSE_SIZE;
		size_t resid = r->data_in_len ? cmd->in_residual : cmd->out_residual;

		resp.status = cmd->status;
		resp.sense_len = vs_le32(sl);
		memcpy(resp.sense, cmd->sense, sl);
		resp.resid = vs_le32(resid > UINT32_MAX ? UINT32_MAX : (uint32_t)resid);
		/* virtio 1.2 5.6.6.1: the CDB wanted more data than the buffers held. */
		resp.response = cmd->overrun ? VS_VIRTIO_SCSI_S_OVERRUN : VS_VIRTIO_SCSI_S_OK;
		data = r->data_in_len -
		       (cmd->in_residual < r->data_in_len ? cmd->in_residual : r->data_in_len);
		out = cmd->out_len -
		      (cmd->out_residual < cmd->out_len ? cmd->out_residual : cmd->out_len);
	}
	if (r->in_split >= 0)
		r->elem.in[r->in_split] = r->in_saved; /* the response header lives there too */
	/* Recorded before the push: once the used entry is out, a polling driver may see it
	 * at once, and `trace latency` wants the device's push before the driver's poll. */
	VS_STAGE(IO, push,
		 "q %u tag %#llx lun %u op %#x done: response %u status %#x sense %u data-in %zu "
		 "resid %u latency %llu ns",
		 (q, q->idx), (tag, (unsigned long long)r->tag), (lun, r->lun), (op, r->hdr.cdb[0]),
		 (response, resp.response), (status, resp.status),
		 (sense_len, vs_le32(resp.sense_len)), (data_in, data),
		 (resid, vs_le32(resp.resid)),
		 (latency_ns, (unsigned long long)tq_req_age_ns(q, r)));
	ts_req_end(q, r, resp.response, data, out);
	req_push(q, &r->elem, &resp, data);
	tq_inflight_set(q, q->inflight - 1);
	if (q->throttled) {
		q->throttled = false;
		q->kicked = true;
	}
	tq_count_answered(q);
	req_put(q, r);
	if (wake) {
		/* The driver polls its request queues when the TMF completes (Linux does):
		 * the used entry must be visible before the TMF response is. */
		tq_notify(q);
		tmf_release(q->c);
	}
}

/* ---- dispatch -------------------------------------------------------------------------------- */
/* First iovec at byte offset off: *idx, with that iovec cut to start there.  When the cut
 * is inside an iovec, it is saved in *saved and *cut = its index. */
static void iov_advance(struct iovec *iov, unsigned n, size_t off, unsigned *idx, int *cut,
			struct iovec *saved)
{
	unsigned i = vs_iov_skip(iov, n, &off);

	*cut = -1;
	if (i < n && off) {
		*saved = iov[i];
		*cut = (int)i;
		iov[i].iov_base = (uint8_t *)iov[i].iov_base + off;
		iov[i].iov_len -= off;
	}
	*idx = i;
}

/* Everything before vs_scsi_exec(); false when the chain was answered here. */
static bool req_prepare(struct tq *q, struct treq *r)
{
	struct vs_vq_elem *e = &r->elem;
	unsigned target, oi, ii;
	int ocut;
	struct iovec osaved;

	if (e->out_len < REQ_HDR || e->in_len < RESP_HDR) {
		req_reject(q, e, VS_VIRTIO_SCSI_S_FAILURE, "chain too short for the headers");
		return false;
	}
	vs_iov_to_buf(e->out, e->out_num, 0, &r->hdr, REQ_HDR);
	r->tag = vs_le64(r->hdr.tag);
	VS_STAGE(IO, pop, "q %u head %u tag %#llx lun %02x%02x op %#x{scsi_op}: out %llu in %llu",
		 (q, q->idx), (head, e->head), (tag, (unsigned long long)r->tag),
		 (lun_hi, r->hdr.lun[2]), (lun_lo, r->hdr.lun[3]), (op, r->hdr.cdb[0]),
		 (out, (unsigned long long)e->out_len), (in, (unsigned long long)e->in_len));
	if (vs_vscsi_lun_decode(r->hdr.lun, &target, &r->lun) || target != 0) {
		/* Linux scans targets 0..max_target: every one but 0 lands here. */
		VS_VERBOSE_HP(IO, "q %u tag %#llx: no target %02x %02x %02x %02x", q->idx,
			      (unsigned long long)r->tag, r->hdr.lun[0], r->hdr.lun[1],
			      r->hdr.lun[2], r->hdr.lun[3]);
		struct vs_virtio_scsi_cmd_resp resp = {.response = VS_VIRTIO_SCSI_S_BAD_TARGET};
		req_push(q, e, &resp, 0);
		tq_count_answered(q);
		return false;
	}
	/* Data-out after the request header, data-in after the response header; the cut
	 * in-iovec is restored before the response is written through it. */
	iov_advance(e->out, e->out_num, REQ_HDR, &oi, &ocut, &osaved);
	iov_advance(e->in, e->in_num, RESP_HDR, &ii, &r->in_split, &r->in_saved);
	r->data_in_len = e->in_len - RESP_HDR;

	memset(&r->cmd, 0, offsetof(struct vs_scsi_cmd, st));
	r->cmd.cdb = r->hdr.cdb;
	r->cmd.cdb_len = VS_VIRTIO_SCSI_CDB_SIZE;
	r->cmd.out_len = e->out_len - REQ_HDR;
	r->cmd.out_iov = r->cmd.out_len ? &e->out[oi] : NULL;
	r->cmd.out_iovcnt = r->cmd.out_len ? (int)(e->out_num - oi) : 0;
	r->cmd.in_len = r->data_in_len;
	r->cmd.in_iov = r->data_in_len ? &e->in[ii] : NULL;
	r->cmd.in_iovcnt = r->data_in_len ? (int)(e->in_num - ii) : 0;
	r->cmd.tag = r->tag;
	r->cmd.done = req_done;
	r->cmd.priv = r;
	return true;
}

/* Hand a tracked request to the SCSI layer. */
static void req_exec(struct tq *q, struct treq *r)
{
	int rc = vs_scsi_exec(q->c->dev, r->lun, &r->cmd, q->w->io);

	if (rc < 0) {
		/* Our own bug (a malformed cmd), never the guest's: answer and go on. */
		bool wake;

		VS_ERROR(SCSI, "q %u tag %#llx: vs_scsi_exec refused the command: %s", q->idx,
			 (unsigned long long)r->tag, strerror(-rc));
		req_untrack(q, r, &wake);
		tq_inflight_set(q, q->inflight - 1);
		ts_req_end(q, r, VS_VIRTIO_SCSI_S_FAILURE, 0, 0);
		tq_count_answered(q);
		if (r->in_split >= 0)
			r->elem.in[r->in_split] = r->in_saved;
		req_reject(q, &r->elem, VS_VIRTIO_SCSI_S_FAILURE, "internal error");
		req_put(q, r);
		if (wake)
			tmf_release(q->c);
	}
}

/* ---- QoS: parking what is over its LUN's or its controller's limit ---------------------- */
/* Whether r waits for QoS (then it is parked, at the tail).  Only reads and writes are
 * limited: a TEST UNIT READY or a flush slowed down helps nobody. */
static bool req_park(struct tq *q, struct treq *r)
{
	struct qos_set *sets[2];
	enum ts_kind k;
	uint64_t now, when = 0;

	r->qos_dir = QOS_DIRS;
	if (__builtin_expect(r->lun >= VS_TARGET_MAX_LUNS, 0))
		return false;
	sets[0] = &q->c->qos[r->lun];
	sets[1] = &q->c->qos_all;
	if (__builtin_expect(!qos_limited(sets[0]) && !qos_limited(sets[1]), 1))
		return false;
	k = ts_kind_of(r->hdr.cdb);
	if (k != TS_READ && k != TS_WRITE)
		return false;
	r->qos_dir = k == TS_READ ? QOS_READ : QOS_WRITE;
	r->qos_bytes = k == TS_READ ? r->cmd.in_len : r->cmd.out_len;
	now = vs_mono_ns();
	/* Behind its LUN's parked ones without asking: its order is kept. */
	if (!q->parked_lun[r->lun] &&
	    qos_admit(sets, 2, (enum qos_dir)r->qos_dir, r->qos_bytes, now, &when))
		return false;
	r->t_park = now;
	r->qos_held = (uint8_t)(qos_limited(sets[0]) | qos_limited(sets[1]) << 1);
	r->park_next = NULL;
	if (q->park_tail)
		q->park_tail->park_next = r;
	else
		q->park_head = r;
	q->park_tail = r;
	q->parked_lun[r->lun]++;
	if (when && (!q->park_until || when < q->park_until))
		q->park_until = when;
	VS_VERBOSE_HP(IO, "q %u tag %#llx lun %u: parked by QoS", q->idx,
		      (unsigned long long)r->tag, r->lun);
	return true;
}

void tq_park_release(struct tq *q, uint64_t now, bool all)
{
	uint64_t blocked[VS_TARGET_MAX_LUNS / 64] = {0}, next = 0, when = 0;
	struct treq **link = &q->park_head, *r, *prev = NULL;

	while ((r = *link)) {
		struct qos_set *sets[2] = {&q->c->qos[r->lun], &q->c->qos_all};
		uint64_t bit = 1ull << (r->lun % 64);
		uint8_t resp;

		pthread_mutex_lock(&q->lock);
		resp = r->abort_resp;
		pthread_mutex_unlock(&q->lock);
		if (!resp && !all) {
			/* one refusal per LUN and pass: its later ones stay behind it */
			if ((blocked[r->lun / 64] & bit) ||
			    !qos_admit(sets, 2, (enum qos_dir)r->qos_dir, r->qos_bytes, now,
				       &when)) {
				if (!(blocked[r->lun / 64] & bit) && (!next || when < next))
					next = when;
				blocked[r->lun / 64] |= bit;
				prev = r;
				link = &r->park_next;
				continue;
			}
		}
		*link = r->park_next;
		if (q->park_tail == r)
			q->park_tail = prev;
		q->parked_lun[r->lun]--;
		/* the wait is counted for each of the LUN and the controller that had limits
		 * when it was parked (either may have held it) */
		for (unsigned i = 0; i < 2; i++)
			if (r->qos_held & (1u << i))
				qos_account(sets[i], now > r->t_park ? now - r->t_park : 0);
		if (resp)
			req_done(&r->cmd); /* answered with the TMF's response, never run */
		else
			req_exec(q, r);
	}
	q->park_until = next;
}

static void req_start(struct tq *q, struct treq *r)
{
	if (VS_HP_COMPILED && !VS_STATS)
		r->t_start = vs_mono_ns(); /* tq_req_age_ns */
	if (!req_prepare(q, r)) {
		req_put(q, r);
		return;
	}
	tq_inflight_set(q, q->inflight + 1);
	ts_req_start(q, r);
	req_track(q, r);
	if (req_park(q, r))
		return;
	req_exec(q, r);
}

/* Pop and start one request (vs_vq_dev_drain's handler): 1 handled, 0 the ring is empty,
 * < 0 stop: throttled (look again after a completion) or the ring is broken. */
static inline int req_pop_one(void *opaque)
{
	struct tq *q = opaque;
	struct treq *r;
	int rc;

	/* A driver that makes a head available twice could keep us allocating; a ring never
	 * has more than size requests in flight. */
	if (q->inflight >= q->vq.size) {
		q->throttled = true;
		return -ENOBUFS;
	}
	r = req_get(q);
	if (!r) {
		VS_ERROR(QUEUE, "queue %u: out of memory for requests", q->idx);
		q->throttled = true;
		return -ENOMEM;
	}
	rc = vs_vq_dev_pop(&q->vq, q->mem, &r->elem);
	if (rc == -EAGAIN) {
		req_put(q, r);
		return 0;
	}
	if (rc == -EIO) {
		req_put(q, r);
		tq_kill(q, q->vq.broken_reason ? q->vq.broken_reason : "broken ring");
		return -EIO;
	}
	if (rc) {
		/* A bad chain with a valid head: no iovecs to answer through. */
		wstat_inc(&q->w->st.bad_requests);
		VS_ERROR(QUEUE, "queue %u head %u: bad chain (%s): returned empty", q->idx,
			 r->elem.head, strerror(-rc));
		vs_vq_dev_fill(&q->vq, r->elem.head, 0);
		q->unsignalled = true;
		req_put(q, r);
		return 1;
	}
	req_start(q, r);
	return 1;
}

void tq_req_process(struct tq *q)
{
	if (!q->running || q->stopping || q->dead)
		return;
	/* Kicks stay as they are when polled or when the worker arms them as it sleeps. */
	if (vs_vq_dev_drain(&q->vq, TQ_POP_BUDGET, q->polled || q->w->arm_on_sleep, req_pop_one,
			    q) == 1)
		q->kicked = true; /* more next pass, after completions */
}
