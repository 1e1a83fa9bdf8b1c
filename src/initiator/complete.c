/* SPDX-License-Identifier: MIT */
/*
 * The completion path: reap the used ring (vs_ini_poll, from the caller's thread or from
 * a completion thread per queue blocked on the call eventfd: the DPC analog), map each
 * response to io->result, copy status, sense and residual, give the slot back, and run
 * the callbacks with no lock held (they may resubmit on the same queue).  A block
 * command that meets a UNIT ATTENTION is retried in place, as the SCSI midlayer would.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "initiator/initiator_int.h"

#define RESP_FIXED_LEN offsetof(struct vs_virtio_scsi_cmd_resp, sense)

int vs_ini_result_errno(uint8_t response, uint8_t status)
{
	switch (response) {
	case VS_VIRTIO_SCSI_S_OK:
		if (status == VS_SCSI_GOOD || status == VS_SCSI_CONDITION_MET)
			return 0;
		if (status == VS_SCSI_BUSY || status == VS_SCSI_TASK_SET_FULL)
			return -EAGAIN;
		return -EIO;
	case VS_VIRTIO_SCSI_S_OVERRUN:
		return -EOVERFLOW;
	case VS_VIRTIO_SCSI_S_ABORTED:
		return -ECANCELED;
	case VS_VIRTIO_SCSI_S_BAD_TARGET:
		return -ENODEV;
	case VS_VIRTIO_SCSI_S_RESET:
		return -ECONNRESET;
	case VS_VIRTIO_SCSI_S_BUSY:
		return -EBUSY;
	case VS_VIRTIO_SCSI_S_TRANSPORT_FAILURE:
		return -ENOLINK;
	case VS_VIRTIO_SCSI_S_TARGET_FAILURE:
		return -EREMOTEIO;
	case VS_VIRTIO_SCSI_S_NEXUS_FAILURE:
		return -EBADE;
	case VS_VIRTIO_SCSI_S_FAILURE:
		return -EIO;
	case VS_VIRTIO_SCSI_S_INCORRECT_LUN:
		return -ENXIO;
	default: /* FUNCTION_SUCCEEDED/REJECTED belong to TMFs, not commands */
		return -EPROTO;
	}
}

/* Response header (device-written) into io; returns io->result.  Every length is
 * distrusted: the used length bounds what is read, sense and residual are clamped. */
static inline int map_response(struct vs_ini_io *io, const struct vs_virtio_scsi_cmd_resp *resp,
			       uint32_t used_len, uint32_t data_len, uint8_t flags VS_CALLER_PARAM)
{
	struct vs_virtio_scsi_cmd_resp r;
	uint32_t sl, resid;

	if (used_len < RESP_FIXED_LEN) {
		VS_ERROR_HP(IO, "response of %u bytes, the header needs %zu", used_len,
			    RESP_FIXED_LEN);
		io->response = VS_VIRTIO_SCSI_S_FAILURE;
		io->scsi_status = 0;
		io->sense_len = 0;
		io->resid = data_len;
		return io->result = -EPROTO;
	}
	memcpy(&r, resp, RESP_FIXED_LEN);
	__asm__ __volatile__("" ::: "memory"); /* one read of shared memory, then the copy */
	io->response = r.response;
	io->scsi_status = r.status;
	sl = vs_le32(r.sense_len);
	if (sl > VS_VIRTIO_SCSI_SENSE_SIZE)
		sl = VS_VIRTIO_SCSI_SENSE_SIZE;
	if (sl > used_len - RESP_FIXED_LEN)
		sl = used_len - RESP_FIXED_LEN;
	io->sense_len = (uint8_t)sl;
	if (sl)
		memcpy(io->sense, resp->sense, sl);
	resid = vs_le32(r.resid);
	if (resid > data_len) {
		VS_WARNING_HP(IO, "residual %u beyond the %u data bytes: clamped", resid, data_len);
		resid = data_len;
	}
	io->resid = resid;
	io->result = vs_ini_result_errno(r.response, r.status);
	if (!io->result && resid && !(flags & SLOT_PASSTHRU)) {
		VS_WARNING_HP(IO, "short transfer: %u of %u bytes not moved", resid, data_len);
		io->result = -EIO;
	}
	return io->result;
}

int ini_map_response(struct vs_ini_io *io, const struct vs_virtio_scsi_cmd_resp *resp,
		     uint32_t used_len, uint32_t data_len)
{
	return map_response(io, resp, used_len, data_len, SLOT_PASSTHRU VS_CALLER_ARG);
}

static inline void slot_free(struct vs_ini_queue *q, uint16_t s)
{
	struct ini_slot *sl = &q->slots[s];

	if (sl->lun_idx != INI_LUN_NONE && q->lun_inflight[sl->lun_idx])
		q->lun_inflight[sl->lun_idx]--;
	sl->io = NULL;
	sl->flags = 0;
	__atomic_store_n(&q->inflight, q->inflight - 1, __ATOMIC_RELAXED);
	q->free_slots[q->nfree++] = s;
}

/* Take one used chain.  1: consumed (*out the io to complete, or NULL when the slot was an
 * orphan or was requeued), 0: none, -EIO: the ring is broken.  Queue lock held. */
static inline int reap_one(struct vs_ini_queue *q, struct vs_ini_io **out VS_CALLER_PARAM)
{
	struct ini_slot *sl;
	struct vs_ini_io *io;
	uint32_t len;
	uint16_t head, s;
	int rc = vs_vq_drv_get_used(&q->v.vq, &head, &len);

	if (rc == -EAGAIN)
		return 0;
	if (rc) {
		ini_schedule_reset(q->ini, "request ring broken by the device");
		return -EIO;
	}
	s = q->head_slot[head];
	sl = &q->slots[s];
	io = sl->io;
	*out = NULL;
	if (!io) {
		VS_VERBOSE_HP(IO, "q %u tag %#llx: orphan given back", q->v.idx,
			      (unsigned long long)sl->tag);
		slot_free(q, s);
		return 1;
	}
	map_response(io, sl->resp, len, sl->data_len, sl->flags VS_CALLER_ARG);
	if (io->scsi_status == VS_SCSI_CHECK_CONDITION && io->response == VS_VIRTIO_SCSI_S_OK &&
	    vs_scsi_sense_key(io->sense, io->sense_len) == VS_SENSE_UNIT_ATTENTION) {
		if (sl->flags & SLOT_RESET) {
			io->result = -ECONNRESET; /* it never ran: the reset got there first */
		} else if (!(sl->flags & SLOT_PASSTHRU) && sl->retries) {
			sl->retries--;
			if (!ini_slot_requeue(q, s))
				return 1;
		}
	}
	/* The driver's completion instant (trace latency), named after reap_one's caller.  No
	 * latency argument: it took a clock read per request (the event's own timestamp is a
	 * TSC read), and `trace latency` has it from the submit and done events' timestamps. */
	VS_STAGE_OOL(IO, done,
		     "q %u tag %#llx done: response %u status %#x sense %u key %u resid %u "
		     "result %d",
		     (q, q->v.idx), (tag, (unsigned long long)sl->tag), (response, io->response),
		     (status, io->scsi_status), (sense_len, io->sense_len),
		     (sense_key, vs_scsi_sense_key(io->sense, io->sense_len)), (resid, io->resid),
		     (result, io->result));
	slot_free(q, s);
	*out = io;
	return 1;
}

/* The reaping half of vs_ini_poll, kept out of line: an empty poll stays a few loads. */
static __attribute__((noinline)) int poll_reap(struct vs_ini_queue *q, unsigned max)
{
	struct vs_ini_io *done[INI_POLL_BATCH];
	unsigned total = 0;
	bool kick = false;

	pthread_mutex_lock(&q->lock);
	q->in_poll++;
	while (q->ready && total < max) {
		unsigned n = 0;
		struct vs_ini_io *io;

		while (n < INI_POLL_BATCH && n < max - total && reap_one(q, &io VS_CALLER_ARG) > 0)
			if (io)
				done[n++] = io;
		if (!n)
			break;
		pthread_mutex_unlock(&q->lock);
		for (unsigned i = 0; i < n; i++)
			done[i]->done(done[i]);
		total += n;
		pthread_mutex_lock(&q->lock);
	}
	__atomic_store_n(&q->seen_used, q->v.vq.last_used_idx, __ATOMIC_RELAXED);
	/* The last poller out kicks once for whatever the callbacks resubmitted. */
	if (--q->in_poll == 0 && q->ready && q->v.vq.avail_idx != q->v.vq.kicked_avail_idx &&
	    (kick = vs_vq_drv_should_kick(&q->v.vq)))
		q->kicks++;
	pthread_mutex_unlock(&q->lock);
	if (kick) {
		VS_STAGE(NOTIFY, kick, "q %u kick after %u completions", (q, q->v.idx),
			 (completions, total));
		ini_kick(q);
	}
	return (int)total;
}

int vs_ini_poll(struct vs_ini_queue *q, unsigned max)
{
	/* Nothing used: no lock.  A stale seen_used only sends us the slow way. */
	const struct vs_vring_used *used = __atomic_load_n(&q->used, __ATOMIC_RELAXED);

	if (!max || !__atomic_load_n(&q->ready, __ATOMIC_RELAXED) || !used ||
	    vs_vq_drv_used_idx(used) == __atomic_load_n(&q->seen_used, __ATOMIC_RELAXED))
		return 0;
	return poll_reap(q, max);
}

unsigned vs_ini_inflight(const struct vs_ini_queue *q)
{
	return __atomic_load_n(&q->inflight, __ATOMIC_RELAXED);
}

void ini_queue_reset_slots(struct vs_ini_queue *q)
{
	unsigned n = q->ini->nslots;

	for (unsigned i = 0; i < n; i++) {
		q->slots[i].io = NULL;
		q->slots[i].flags = 0;
		q->free_slots[i] = (uint16_t)(n - 1 - i); /* slot 0 goes out first */
	}
	q->nfree = n;
	__atomic_store_n(&q->inflight, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&q->seen_used, 0, __ATOMIC_RELAXED);
	memset(q->lun_inflight, 0, sizeof(q->lun_inflight));
}

void ini_fail_all(struct vs_ini *ini, int result, const char *why)
{
	unsigned failed = 0;

	for (unsigned i = 0; ini->q && i < ini->nqueues; i++) {
		struct vs_ini_queue *q = &ini->q[i];

		if (!q->ini)
			continue;
		pthread_mutex_lock(&q->lock);
		__atomic_store_n(&q->ready, false, __ATOMIC_RELAXED);
		for (unsigned s = 0; s < ini->nslots; s++) {
			struct ini_slot *sl = &q->slots[s];
			struct vs_ini_io *io = sl->io;

			if (!io && !(sl->flags & SLOT_ORPHAN))
				continue;
			slot_free(q, (uint16_t)s);
			if (!io)
				continue;
			io->response = VS_VIRTIO_SCSI_S_TRANSPORT_FAILURE;
			io->scsi_status = 0;
			io->sense_len = 0;
			io->resid = sl->data_len;
			io->result = result;
			failed++;
			VS_VERBOSE(IO, "q %u tag %#llx: failed (%d): %s", q->v.idx,
				   (unsigned long long)sl->tag, result, why);
			/* Callbacks run unlocked: a resubmission sees the queue not ready. */
			pthread_mutex_unlock(&q->lock);
			io->done(io);
			pthread_mutex_lock(&q->lock);
		}
		pthread_mutex_unlock(&q->lock);
	}
	if (failed)
		VS_WARNING(IO, "%u outstanding requests completed with %d: %s", failed, result,
			   why);
}

/* ---- interrupt mode: one completion thread per queue (the DPC analog) ---------------------- */

/* Sleep until the call eventfd is signalled, then consume it: 0, or -errno.  poll(), not a
 * blocking read: the eventfd's open file is shared with the target, which makes it
 * non-blocking (src/vhost/dev.c), so a read that was meant to block returns EAGAIN at
 * once, and a thread looping on it spins a CPU between completions. */
static int cq_wait(struct vs_ini_queue *q)
{
	struct pollfd p = {.fd = q->v.call_fd, .events = POLLIN};
	uint64_t v;

	if (poll(&p, 1, -1) < 0)
		return errno == EINTR ? 0 : -errno;
	if (p.revents & (POLLERR | POLLNVAL))
		return -EBADF;
	if (read(q->v.call_fd, &v, sizeof(v)) < 0 && errno != EAGAIN && errno != EINTR)
		return -errno; /* EAGAIN: another reader of the shared counter was first */
	return 0;
}

static void *cq_thread(void *arg)
{
	struct vs_ini_queue *q = arg;

	VS_INFO(QUEUE, "q %u: completion thread on call fd %d", q->v.idx, q->v.call_fd);
	for (;;) {
		int rc = cq_wait(q);
		bool more;

		if (atomic_load(&q->thread_stop))
			break;
		if (rc) {
			VS_ERROR(QUEUE, "q %u: call eventfd: %s", q->v.idx, strerror(-rc));
			break;
		}
		do {
			while (vs_ini_poll(q, ~0u) > 0)
				;
			/* Re-arm, then look again: a completion between the two is not lost. */
			pthread_mutex_lock(&q->lock);
			vs_vq_drv_enable_cb(&q->v.vq, true);
			more = q->ready && vs_vq_drv_has_used(&q->v.vq);
			pthread_mutex_unlock(&q->lock);
		} while (more);
	}
	VS_INFO(QUEUE, "q %u: completion thread ends", q->v.idx);
	return NULL;
}

int ini_start_cq_threads(struct vs_ini *ini)
{
	int rc;

	if (!ini->opts.interrupt)
		return 0;
	for (unsigned i = 0; i < ini->nqueues; i++) {
		struct vs_ini_queue *q = &ini->q[i];

		atomic_store(&q->thread_stop, false);
		if ((rc = pthread_create(&q->thread, NULL, cq_thread, q))) {
			VS_ERROR(QUEUE, "q %u: cannot start the completion thread: %s", q->v.idx,
				 strerror(rc));
			return -rc;
		}
		q->thread_started = true;
	}
	return 0;
}

void ini_stop_cq_threads(struct vs_ini *ini)
{
	uint64_t one = 1;

	for (unsigned i = 0; ini->q && i < ini->nqueues; i++) {
		struct vs_ini_queue *q = &ini->q[i];

		if (!q->thread_started)
			continue;
		atomic_store(&q->thread_stop, true);
		if (write(q->v.call_fd, &one, sizeof(one)) != sizeof(one))
			VS_ERROR(QUEUE, "q %u: cannot wake the completion thread", q->v.idx);
		pthread_join(q->thread, NULL);
		q->thread_started = false;
	}
}
