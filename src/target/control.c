/* SPDX-License-Identifier: MIT */
/*
 * The control queue: task management functions and asynchronous-notification requests
 * (virtio 1.2, 5.6.6.2), on the control thread.
 *
 * A TMF that aborts or resets acts on requests of every request queue (those parked by QoS
 * too: their workers answer them without running them): it marks the
 * matching in-flight requests (under each queue's lock), then waits until their workers
 * have completed them (with VS_VIRTIO_SCSI_S_ABORTED or _RESET) and published the used
 * entries, and only then answers.  Drivers rely on that order: Linux polls its request
 * queues right after a TMF succeeds and then considers the commands finished.  Backend
 * I/O cannot be cancelled, so "abort" means "complete with ABORTED when the I/O ends".
 *
 * A TMF looks LUNs up in the SCSI device's table and resets them under tmf_lun_lock, which a
 * removal takes once after unpublishing its LUN (luns.c): without it, a LUN RESET or an
 * I_T NEXUS RESET that loaded a LUN just before the removal unpublished it would write its
 * unit attention into a LUN the removal had freed meanwhile.
 *
 * The event queue is on the control thread too: events.c.
 */
#include <errno.h>
#include <string.h>

#include "target/target_int.h"

void tmf_release(struct vs_controller *c)
{
	pthread_mutex_lock(&c->tmf_lock);
	c->tmf_pending--;
	if (!c->tmf_pending)
		pthread_cond_broadcast(&c->tmf_cond);
	pthread_mutex_unlock(&c->tmf_lock);
}

struct tmf_match {
	bool any_lun; /* I_T nexus: every LUN */
	unsigned lun;
	bool by_tag; /* ABORT_TASK, QUERY_TASK */
	uint64_t tag;
	uint8_t mark; /* response to impose (0: query only) */
};

/* Count the in-flight requests matching m, marking them when m->mark is set. */
static unsigned tmf_scan(struct vs_controller *c, const struct tmf_match *m)
{
	unsigned found = 0, marked_all = 0;

	for (unsigned i = VS_VIRTIO_SCSI_VQ_REQ0; i < VS_VIRTIO_SCSI_VQ_REQ0 + c->num_queues; i++) {
		struct tq *q = &c->q[i];
		unsigned marked = 0;

		pthread_mutex_lock(&q->lock);
		for (struct treq *r = q->active.next; r != &q->active; r = r->next) {
			if ((!m->any_lun && r->lun != m->lun) || (m->by_tag && r->tag != m->tag))
				continue;
			found++;
			if (m->mark && !r->tmf_wait) {
				r->abort_resp = m->mark;
				r->tmf_wait = true;
				marked++;
			}
		}
		marked_all += marked;
		if (marked) {
			/* Counted before the lock drops: the completion decrements after. */
			pthread_mutex_lock(&c->tmf_lock);
			c->tmf_pending += marked;
			pthread_mutex_unlock(&c->tmf_lock);
		}
		pthread_mutex_unlock(&q->lock);
	}
	/* Some may be parked by QoS, never to complete on their own before their limits let
	 * them: their workers answer them now (tq_park_release). */
	if (marked_all)
		worker_park_check(c->t);
	return found;
}

static void tmf_wait_all(struct vs_controller *c)
{
	if (c->manual) {
		worker_manual_settle(c);
		return;
	}
	pthread_mutex_lock(&c->tmf_lock);
	while (c->tmf_pending)
		pthread_cond_wait(&c->tmf_cond, &c->tmf_lock);
	pthread_mutex_unlock(&c->tmf_lock);
}

/* Execute one TMF; returns its response code. */
static uint8_t tmf_exec(struct vs_controller *c, const struct vs_virtio_scsi_ctrl_tmf_req *req)
{
	uint32_t subtype = vs_le32(req->subtype);
	struct tmf_match m = {.tag = vs_le64(req->tag)};
	struct vs_scsi_lun *lun;
	unsigned target, found;
	bool present;

	if (vs_vscsi_lun_decode(req->lun, &target, &m.lun) || target != 0) {
		VS_WARNING(TMF, "%u{tmf}: no such target (lun field %02x %02x %02x %02x)", subtype,
			   req->lun[0], req->lun[1], req->lun[2], req->lun[3]);
		return VS_VIRTIO_SCSI_S_BAD_TARGET;
	}
	/* The LUNs it looks up are used under tmf_lun_lock: a removal waits for it before it
	 * destroys one (luns.c).  The unit attention first: a command arriving during the
	 * wait below sees it. */
	pthread_mutex_lock(&c->tmf_lun_lock);
	lun = vs_scsi_dev_lun(c->dev, m.lun);
	present = lun != NULL;
	if (lun && subtype == VS_VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET)
		vs_scsi_lun_reset(lun);
	else if (subtype == VS_VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET)
		vs_scsi_dev_reset(c->dev);
	pthread_mutex_unlock(&c->tmf_lun_lock); /* lun may be freed from here on */
	if (!present && subtype != VS_VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET) {
		VS_WARNING(TMF, "%u{tmf}: no LUN %u", subtype, m.lun);
		return VS_VIRTIO_SCSI_S_INCORRECT_LUN;
	}
	switch (subtype) {
	case VS_VIRTIO_SCSI_T_TMF_ABORT_TASK:
		m.by_tag = true;
		m.mark = VS_VIRTIO_SCSI_S_ABORTED;
		found = tmf_scan(c, &m);
		tmf_wait_all(c);
		VS_INFO(TMF, "ABORT_TASK lun %u tag %#llx: %s", m.lun, (unsigned long long)m.tag,
			found ? "aborted" : "not in flight");
		return VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE;
	case VS_VIRTIO_SCSI_T_TMF_ABORT_TASK_SET:
	case VS_VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET:
		m.mark = VS_VIRTIO_SCSI_S_ABORTED;
		found = tmf_scan(c, &m);
		tmf_wait_all(c);
		VS_INFO(TMF, "%u{tmf} lun %u: %u requests aborted", subtype, m.lun, found);
		return VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE;
	case VS_VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET:
		m.mark = VS_VIRTIO_SCSI_S_RESET;
		found = tmf_scan(c, &m);
		tmf_wait_all(c);
		VS_INFO(TMF, "LOGICAL_UNIT_RESET lun %u: %u requests reset", m.lun, found);
		return VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE;
	case VS_VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET:
		m.any_lun = true;
		m.mark = VS_VIRTIO_SCSI_S_RESET;
		found = tmf_scan(c, &m);
		tmf_wait_all(c);
		VS_INFO(TMF, "I_T_NEXUS_RESET: %u requests reset", found);
		return VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE;
	case VS_VIRTIO_SCSI_T_TMF_QUERY_TASK:
		m.by_tag = true;
		/* fall through */
	case VS_VIRTIO_SCSI_T_TMF_QUERY_TASK_SET:
		found = tmf_scan(c, &m);
		VS_INFO(TMF, "%u{tmf} lun %u tag %#llx: %u in flight", subtype, m.lun,
			(unsigned long long)m.tag, found);
		return found ? VS_VIRTIO_SCSI_S_FUNCTION_SUCCEEDED
			     : VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE;
	case VS_VIRTIO_SCSI_T_TMF_CLEAR_ACA: /* no ACA is ever established (NACA is refused) */
	default:
		VS_WARNING(TMF, "%u{tmf} lun %u: rejected", subtype, m.lun);
		return VS_VIRTIO_SCSI_S_FUNCTION_REJECTED;
	}
}

/* One control request; returns the used length. */
static uint32_t ctl_one(struct tq *q, struct vs_vq_elem *e)
{
	union {
		struct vs_virtio_scsi_ctrl_tmf_req tmf;
		struct vs_virtio_scsi_ctrl_an_req an;
		uint8_t bytes[sizeof(struct vs_virtio_scsi_ctrl_tmf_req)];
	} req;
	uint32_t type;
	uint8_t resp;

	memset(&req, 0, sizeof(req));
	if (e->out_len < sizeof(type)) {
		VS_ERROR(TMF, "control head %u: %llu readable bytes, no request type", e->head,
			 (unsigned long long)e->out_len);
		goto fail;
	}
	vs_iov_to_buf(e->out, e->out_num, 0, &req, sizeof(req));
	type = vs_le32(req.tmf.type);
	switch (type) {
	case VS_VIRTIO_SCSI_T_TMF:
		if (e->out_len < sizeof(req.tmf) ||
		    e->in_len < sizeof(struct vs_virtio_scsi_ctrl_tmf_resp)) {
			VS_ERROR(TMF, "control head %u: TMF chain too short (out %llu in %llu)",
				 e->head, (unsigned long long)e->out_len,
				 (unsigned long long)e->in_len);
			goto fail;
		}
		VS_INFO(TMF, "TMF %u{tmf} lun %02x %02x %02x %02x tag %#llx",
			vs_le32(req.tmf.subtype), req.tmf.lun[0], req.tmf.lun[1], req.tmf.lun[2],
			req.tmf.lun[3], (unsigned long long)vs_le64(req.tmf.tag));
		resp = tmf_exec(q->c, &req.tmf);
		wstat_inc(&q->w->st.tmfs);
		VS_INFO(TMF, "TMF %u{tmf}: response %u{vscsi_response}", vs_le32(req.tmf.subtype),
			resp);
		return (uint32_t)vs_iov_from_buf(e->in, e->in_num, 0, &resp, sizeof(resp));
	case VS_VIRTIO_SCSI_T_AN_QUERY:
	case VS_VIRTIO_SCSI_T_AN_SUBSCRIBE: {
		struct vs_virtio_scsi_ctrl_an_resp an = {.event_actual = 0,
							 .response = VS_VIRTIO_SCSI_S_OK};

		if (e->out_len < sizeof(req.an) || e->in_len < sizeof(an)) {
			VS_ERROR(EVENT, "control head %u: AN chain too short (out %llu in %llu)",
				 e->head, (unsigned long long)e->out_len,
				 (unsigned long long)e->in_len);
			goto fail;
		}
		/* No asynchronous notifications are supported: none granted. */
		VS_INFO(EVENT, "AN %s events %#x: none supported",
			type == VS_VIRTIO_SCSI_T_AN_QUERY ? "query" : "subscribe",
			vs_le32(req.an.event_requested));
		return (uint32_t)vs_iov_from_buf(e->in, e->in_num, 0, &an, sizeof(an));
	}
	default:
		VS_ERROR(TMF, "control head %u: unknown request type %u", e->head, type);
		goto fail;
	}
fail:
	wstat_inc(&q->w->st.bad_requests);
	if (e->in_len >= 1) {
		resp = VS_VIRTIO_SCSI_S_FAILURE; /* the response byte leads every control reply */
		return (uint32_t)vs_iov_from_buf(e->in, e->in_num, 0, &resp, 1);
	}
	return 0;
}

/* Pop and answer one control request (vs_vq_dev_drain's handler): 1 handled, 0 the ring
 * is empty, -EIO the ring is broken. */
static inline int ctl_pop_one(void *opaque)
{
	struct tq *q = opaque;
	struct vs_vq_elem *e = q->w->scratch;
	uint32_t len = 0;
	int rc = tq_pop(q, e);

	if (rc == -EAGAIN)
		return 0; /* nothing in the ring */
	if (rc == -EIO)
		return -EIO; /* broken: tq_pop killed it */
	if (rc) {
		wstat_inc(&q->w->st.bad_requests);
		VS_ERROR(TMF, "control head %u: bad chain (%s): returned empty", e->head,
			 strerror(-rc));
	} else {
		len = ctl_one(q, e);
		vs_vq_dev_log_written(&q->vq, e, len);
	}
	vs_vq_dev_push(&q->vq, e->head, len);
	tq_notify(q);
	return 1;
}

void tq_ctl_process(struct tq *q)
{
	if (!q->running || q->stopping || q->dead)
		return;
	/* A budget as on the request queues: a guest that keeps this ring full must not
	 * starve the commands that run between passes (a new call fd when it masks MSI-X). */
	if (vs_vq_dev_drain(&q->vq, TQ_POP_BUDGET, q->polled, ctl_pop_one, q) == 1)
		q->kicked = true; /* more next pass */
}
