/* SPDX-License-Identifier: MIT */
/*
 * The control side: task management on the control queue (abort task, logical unit
 * reset), the event queue (buffers kept posted; hot-plug and parameter-change events
 * trigger a rescan), and the control thread that watches the vhost-user socket: when the
 * target goes away every outstanding request completes with -ENOTCONN, and with
 * reconnection on the whole lifecycle runs again once the socket answers.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "initiator/initiator_int.h"

#define TMF_RESP_OFF   32
#define BACKOFF_MIN_MS 50
#define BACKOFF_MAX_MS 1000

static int tmf_errno(uint8_t response)
{
	switch (response) {
	case VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE:
	case VS_VIRTIO_SCSI_S_FUNCTION_SUCCEEDED:
		return 0;
	case VS_VIRTIO_SCSI_S_FUNCTION_REJECTED:
		return -EOPNOTSUPP;
	case VS_VIRTIO_SCSI_S_BAD_TARGET:
	case VS_VIRTIO_SCSI_S_INCORRECT_LUN:
		return -ENODEV;
	default:
		return -EIO;
	}
}

/* One TMF on the control queue, waited for here (conn_lock held: one at a time). */
static int tmf_exec(struct vs_ini *ini, uint32_t subtype, const uint8_t lun[8], uint64_t tag)
{
	struct vs_virtio_scsi_ctrl_tmf_req req = {
	    .type = vs_le32(VS_VIRTIO_SCSI_T_TMF),
	    .subtype = vs_le32(subtype),
	    .tag = vs_le64(tag),
	};
	struct vs_vq_buf b[2] = {
	    {ini->tmf_gpa, sizeof(req), false},
	    {ini->tmf_gpa + TMF_RESP_OFF, sizeof(struct vs_virtio_scsi_ctrl_tmf_resp), true},
	};
	uint64_t deadline = vs_mono_ns() + (uint64_t)ini->opts.timeout_ms * 1000000ull, one = 1;
	uint8_t *resp = ini->base + ini->tmf_gpa + TMF_RESP_OFF;
	uint32_t len = 0;
	uint16_t head, mine;
	bool kick;
	int rc;

	memcpy(req.lun, lun, 8);
	memcpy(ini->base + ini->tmf_gpa, &req, sizeof(req));
	*resp = 0xff;
	VS_INFO(TMF, "%u{tmf} lun %02x%02x tag %#llx: sending", subtype, lun[2], lun[3],
		(unsigned long long)tag);
	pthread_mutex_lock(&ini->ctl_lock);
	rc = vs_vq_drv_add(&ini->ctl.vq, b, 2, &head);
	kick = !rc && vs_vq_drv_should_kick(&ini->ctl.vq);
	pthread_mutex_unlock(&ini->ctl_lock);
	if (rc) {
		VS_ERROR(TMF, "%u{tmf}: control ring refused the request: %s", subtype,
			 strerror(-rc));
		return rc == -ENOSPC ? -EBUSY : rc;
	}
	if (kick && write(ini->ctl.kick_fd, &one, sizeof(one)) != sizeof(one))
		ini_schedule_reset(ini, "control queue kick failed");
	mine = head;
	for (;;) {
		pthread_mutex_lock(&ini->ctl_lock);
		rc = vs_vq_drv_get_used(&ini->ctl.vq, &head, &len);
		pthread_mutex_unlock(&ini->ctl_lock);
		if (!rc && head != mine) {
			/* An earlier TMF given up on (the target went away), answered by a
			 * target that resumed the ring (keep_inflight): not ours. */
			VS_WARNING(TMF, "%u{tmf}: a stale answer (head %u) skipped", subtype, head);
			continue;
		}
		if (rc != -EAGAIN)
			break;
		if ((rc = ini_wait_fd(ini, ini->ctl.call_fd, 100000)) < 0) {
			VS_ERROR(TMF, "%u{tmf}: the target went away", subtype);
			return rc;
		}
		if (vs_mono_ns() > deadline) {
			/* The response buffer is still the device's: reset it to take it back. */
			VS_ERROR(TMF, "%u{tmf}: no answer in %u ms", subtype, ini->opts.timeout_ms);
			ini_schedule_reset(ini, "task management timed out");
			return -ETIMEDOUT;
		}
	}
	if (rc) {
		ini_schedule_reset(ini, "control ring broken by the device");
		return -EIO;
	}
	if (len < 1) {
		VS_ERROR(TMF, "%u{tmf}: empty response", subtype);
		return -EPROTO;
	}
	rc = tmf_errno(*(volatile uint8_t *)resp);
	VS_INFO(TMF, "%u{tmf} lun %02x%02x tag %#llx: response %u{vscsi_response} (%d)", subtype,
		lun[2], lun[3], (unsigned long long)tag, *resp, rc);
	return rc;
}

int vs_ini_abort(struct vs_ini *ini, struct vs_ini_queue *q, struct vs_ini_io *io)
{
	uint64_t tag = 0, key = 0;
	uint8_t lun[8];
	int rc = -ENOENT;

	pthread_mutex_lock(&ini->conn_lock);
	if (!atomic_load(&ini->connected)) {
		rc = -ENOTCONN;
		goto out;
	}
	pthread_mutex_lock(&q->lock);
	for (unsigned s = 0; s < ini->nslots; s++) {
		if (q->slots[s].io == io) {
			tag = q->slots[s].tag;
			key = q->slots[s].lun_key;
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&q->lock);
	if (rc) {
		VS_WARNING(TMF, "abort q %u io %p: not in flight", q->v.idx, (void *)io);
		goto out;
	}
	memcpy(lun, &key, 8);
	rc = tmf_exec(ini, VS_VIRTIO_SCSI_T_TMF_ABORT_TASK, lun, tag);
out:
	pthread_mutex_unlock(&ini->conn_lock);
	return rc;
}

/* Requests of the LUN still marked by the reset: counted, or (timeout) taken back and
 * completed with -ETIMEDOUT; the slots wait for the device as orphans. */
static unsigned reset_sweep(struct vs_ini *ini, uint64_t key, bool expire)
{
	unsigned pending = 0;

	for (unsigned i = 0; i < ini->nqueues; i++) {
		struct vs_ini_queue *q = &ini->q[i];

		pthread_mutex_lock(&q->lock);
		for (unsigned s = 0; s < ini->nslots; s++) {
			struct ini_slot *sl = &q->slots[s];
			struct vs_ini_io *io = sl->io;

			if (!io || !(sl->flags & SLOT_RESET) || sl->lun_key != key)
				continue;
			pending++;
			if (!expire)
				continue;
			sl->io = NULL;
			sl->flags |= SLOT_ORPHAN;
			io->response = VS_VIRTIO_SCSI_S_FAILURE;
			io->scsi_status = 0;
			io->sense_len = 0;
			io->resid = sl->data_len;
			io->result = -ETIMEDOUT;
			VS_ERROR(TMF, "q %u tag %#llx: not given back after the reset: timed out",
				 q->v.idx, (unsigned long long)sl->tag);
			pthread_mutex_unlock(&q->lock);
			io->done(io);
			pthread_mutex_lock(&q->lock);
		}
		pthread_mutex_unlock(&q->lock);
	}
	return pending;
}

int vs_ini_lun_reset(struct vs_ini *ini, unsigned idx)
{
	uint64_t key, deadline;
	unsigned marked = 0, left;
	uint8_t lun[8];
	int rc, w;

	if (idx >= atomic_load(&ini->nluns)) {
		VS_ERROR(TMF, "LUN reset: index %u, the table has %u", idx,
			 atomic_load(&ini->nluns));
		return -EINVAL;
	}
	key = __atomic_load_n(&ini->hot[idx].lun_key, __ATOMIC_RELAXED);
	memcpy(lun, &key, 8);
	pthread_mutex_lock(&ini->conn_lock);
	if (!atomic_load(&ini->connected)) {
		rc = -ENOTCONN;
		goto out;
	}
	/* What is pending now must be accounted for when the reset returns. */
	for (unsigned i = 0; i < ini->nqueues; i++) {
		struct vs_ini_queue *q = &ini->q[i];

		pthread_mutex_lock(&q->lock);
		for (unsigned s = 0; s < ini->nslots; s++) {
			if (q->slots[s].io && q->slots[s].lun_key == key) {
				q->slots[s].flags |= SLOT_RESET;
				marked++;
			}
		}
		pthread_mutex_unlock(&q->lock);
	}
	VS_INFO(TMF, "LUN reset %u (lun %u): %u requests pending", idx, lun[3], marked);
	rc = tmf_exec(ini, VS_VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, lun, 0);
	deadline = vs_mono_ns() + (uint64_t)ini->opts.timeout_ms * 1000000ull;
	for (;;) {
		if (!ini->opts.interrupt)
			for (unsigned i = 0; i < ini->nqueues; i++)
				vs_ini_poll(&ini->q[i], ~0u);
		if (!(left = reset_sweep(ini, key, false)))
			break;
		if (vs_mono_ns() > deadline) {
			reset_sweep(ini, key, true);
			rc = rc ? rc : -ETIMEDOUT;
			break;
		}
		if ((w = ini_wait_fd(ini, -1, 200)) < 0) {
			/* The control thread fails them all with -ENOTCONN. */
			rc = w;
			break;
		}
	}
	VS_INFO(TMF, "LUN reset %u: done (%d)", idx, rc);
out:
	pthread_mutex_unlock(&ini->conn_lock);
	return rc;
}

/* ---- event queue ---------------------------------------------------------------------------- */
enum ini_event_action ini_event_action(const struct vs_virtio_scsi_event *ev)
{
	uint32_t event = vs_le32(ev->event), reason = vs_le32(ev->reason);
	unsigned target = 0, lun = 0;

	if (event & VS_VIRTIO_SCSI_T_EVENTS_MISSED) {
		VS_WARNING(EVENT, "events were missed (%#x): full rescan", event);
		return INI_EV_FULL_RESCAN;
	}
	if (vs_vscsi_lun_decode(ev->lun, &target, &lun))
		VS_WARNING(EVENT, "%s: LUN field %02x %02x %02x %02x not understood",
			   vs_virtio_scsi_event_name(event), ev->lun[0], ev->lun[1], ev->lun[2],
			   ev->lun[3]);
	switch (event) {
	case VS_VIRTIO_SCSI_T_NO_EVENT:
		return INI_EV_NONE;
	case VS_VIRTIO_SCSI_T_TRANSPORT_RESET:
		VS_INFO(EVENT, "transport reset, target %u lun %u, reason %u (%s): rescan", target,
			lun, reason,
			reason == VS_VIRTIO_SCSI_EVT_RESET_RESCAN    ? "rescan"
			: reason == VS_VIRTIO_SCSI_EVT_RESET_REMOVED ? "removed"
								     : "hard");
		return INI_EV_RESCAN;
	case VS_VIRTIO_SCSI_T_PARAM_CHANGE:
		VS_INFO(EVENT, "parameter change, lun %u, asc %#x ascq %#x: rescan", lun,
			reason & 0xff, reason >> 8);
		return INI_EV_RESCAN;
	case VS_VIRTIO_SCSI_T_ASYNC_NOTIFY:
		VS_INFO(EVENT, "asynchronous notification %#x: nothing to do", reason);
		return INI_EV_NONE;
	default:
		VS_WARNING(EVENT, "unknown event %#x reason %#x: ignored", event, reason);
		return INI_EV_NONE;
	}
}

static int post_event(struct vs_ini *ini, unsigned i)
{
	struct vs_vq_buf b = {ini->evt_gpa + i * sizeof(struct vs_virtio_scsi_event),
			      sizeof(struct vs_virtio_scsi_event), true};
	uint16_t head;
	int rc;

	memset(ini->base + b.addr, 0, b.len);
	if ((rc = vs_vq_drv_add(&ini->evt.vq, &b, 1, &head)))
		return rc;
	ini->evt_of_head[head] = (uint8_t)i;
	return 0;
}

int ini_post_events(struct vs_ini *ini)
{
	int rc;

	for (unsigned i = 0; i < INI_EVENTS; i++)
		if ((rc = post_event(ini, i)))
			return rc;
	VS_INFO(EVENT, "%u event buffers posted", INI_EVENTS);
	return 0;
}

static void events_reap(struct vs_ini *ini)
{
	struct vs_virtio_scsi_event ev;
	uint64_t one = 1;
	uint32_t len;
	uint16_t head;
	bool kick, more;
	int rc;

	pthread_mutex_lock(&ini->evt_lock);
	do {
		while (!(rc = vs_vq_drv_get_used(&ini->evt.vq, &head, &len))) {
			unsigned i = ini->evt_of_head[head];

			memcpy(&ev, ini->base + ini->evt_gpa + i * sizeof(ev), sizeof(ev));
			if (len < sizeof(ev))
				VS_WARNING(EVENT, "event buffer %u: %u bytes: ignored", i, len);
			else if (ini_event_action(&ev) != INI_EV_NONE)
				atomic_store(&ini->rescan_wanted, true);
			if ((rc = post_event(ini, i)))
				break;
		}
		if (rc != -EAGAIN) {
			ini_schedule_reset(ini, "event ring broken");
			break;
		}
		vs_vq_drv_enable_cb(&ini->evt.vq, true);
		more = vs_vq_drv_has_used(&ini->evt.vq);
	} while (more);
	kick = vs_vq_drv_should_kick(&ini->evt.vq);
	pthread_mutex_unlock(&ini->evt_lock);
	if (kick && write(ini->evt.kick_fd, &one, sizeof(one)) != sizeof(one))
		ini_schedule_reset(ini, "event queue kick failed");
}

/* ---- the control thread ------------------------------------------------------------------- */
void ini_schedule_reset(struct vs_ini *ini, const char *why)
{
	uint64_t one = 1;

	if (atomic_exchange(&ini->reset_wanted, true))
		return;
	VS_ERROR(INIT, "the device must be reset: %s", why);
	if (write(ini->wake_fd, &one, sizeof(one)) != sizeof(one))
		VS_ERROR(INIT, "cannot wake the control thread");
}

static void drain(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		VS_ERROR(GENERAL, "eventfd %d read: %s", fd, strerror(errno));
}

/* may_keep: the target went away (its requests may stay in flight for the next one to
 * resume), rather than the driver resetting it. */
static void lose_connection(struct vs_ini *ini, const char *why, bool may_keep)
{
	VS_WARNING(INIT, "target %s: %s", ini->socket_path, why);
	/* First, without waiting for conn_lock: fail them, or hold them (keep_inflight). */
	if (may_keep && ini_may_keep_inflight(ini))
		ini_hold_queues(ini);
	else
		ini_fail_all(ini, -ENOTCONN, why);
	pthread_mutex_lock(&ini->conn_lock);
	ini_drop_connection(ini, may_keep);
	pthread_mutex_unlock(&ini->conn_lock);
}

static void *ctl_thread(void *arg)
{
	struct vs_ini *ini = arg;
	unsigned backoff = BACKOFF_MIN_MS;

	VS_INFO(INIT, "control thread: watching %s", ini->socket_path);
	while (!atomic_load(&ini->stop)) {
		struct pollfd p[3] = {
		    {.fd = ini->wake_fd, .events = POLLIN},
		    {.fd = ini->vhost.sock, .events = POLLRDHUP},
		    {.fd = ini->evt.call_fd, .events = POLLIN},
		};

		if (atomic_exchange(&ini->reset_wanted, false) && atomic_load(&ini->connected)) {
			lose_connection(ini, "reset by the driver", false);
			continue;
		}
		if (!atomic_load(&ini->connected)) {
			int rc = -ENOTCONN;

			if (ini->opts.reconnect) {
				pthread_mutex_lock(&ini->conn_lock);
				if (!atomic_load(&ini->stop))
					rc = ini_reconnect(ini);
				pthread_mutex_unlock(&ini->conn_lock);
			}
			if (!rc) {
				backoff = BACKOFF_MIN_MS;
				continue;
			}
			if (poll(p, 1, ini->opts.reconnect ? (int)backoff : -1) > 0)
				drain(ini->wake_fd);
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
			continue;
		}
		if (atomic_exchange(&ini->rescan_wanted, false)) {
			pthread_mutex_lock(&ini->conn_lock);
			if (atomic_load(&ini->connected))
				ini_scan_luns(ini);
			pthread_mutex_unlock(&ini->conn_lock);
			continue;
		}
		if (poll(p, 3, -1) <= 0)
			continue;
		if (p[0].revents)
			drain(ini->wake_fd);
		if (p[1].revents) {
			lose_connection(ini, "the connection closed", true);
			continue;
		}
		if (p[2].revents) {
			drain(ini->evt.call_fd);
			events_reap(ini);
		}
	}
	VS_INFO(INIT, "control thread ends");
	return NULL;
}

int ini_start_ctl_thread(struct vs_ini *ini)
{
	int rc;

	atomic_store(&ini->stop, false);
	if ((rc = pthread_create(&ini->ctl_thread, NULL, ctl_thread, ini))) {
		VS_ERROR(INIT, "cannot start the control thread: %s", strerror(rc));
		return -rc;
	}
	ini->ctl_thread_started = true;
	return 0;
}

void ini_stop_ctl_thread(struct vs_ini *ini)
{
	uint64_t one = 1;

	if (!ini->ctl_thread_started)
		return;
	atomic_store(&ini->stop, true);
	if (write(ini->wake_fd, &one, sizeof(one)) != sizeof(one))
		VS_ERROR(INIT, "cannot wake the control thread");
	pthread_join(ini->ctl_thread, NULL);
	ini->ctl_thread_started = false;
}
