/* SPDX-License-Identifier: MIT */
/*
 * The event queue (virtio 1.2, 5.6.6.3): events for the driver when LUNs come, go or
 * change size.  Any thread posts an event (tq_event_post) into a bounded list and wakes
 * the control thread, which owns the event queue and writes pending events into the
 * buffers the driver keeps posted there, oldest first, at most a budget of buffers per
 * pass as on every queue (a bad buffer counts: the guest chooses what it posts).
 *
 * An event that finds no buffer waits for one: the control thread asks for kicks on the
 * event ring and delivers when the driver adds buffers.  When more than TQ_EVENTS_MAX
 * wait, later ones are dropped and the next event delivered carries
 * VIRTIO_SCSI_T_EVENTS_MISSED, which tells the driver to rescan everything.  Events
 * posted while no frontend is connected are dropped: a driver that connects scans anyway.
 */
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "target/target_int.h"

void tq_events_init(struct vs_controller *c)
{
	pthread_mutex_init(&c->ev_lock, NULL);
	c->ev_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); /* checked by worker_init */
}

void tq_events_fini(struct vs_controller *c)
{
	if (c->ev_fd >= 0)
		close(c->ev_fd);
	c->ev_fd = -1;
	pthread_mutex_destroy(&c->ev_lock);
}

void tq_events_connected(struct vs_controller *c, bool connected)
{
	unsigned dropped;

	pthread_mutex_lock(&c->ev_lock);
	dropped = c->ev_count;
	c->ev_live = connected;
	c->ev_dropped += dropped;
	__atomic_store_n(&c->ev_count, 0, __ATOMIC_RELAXED);
	c->ev_head = 0;
	c->ev_missed = false;
	pthread_mutex_unlock(&c->ev_lock);
	if (dropped)
		VS_INFO(EVENT, "%u undelivered events dropped: the frontend went away", dropped);
}

void tq_event_post(struct vs_controller *c, uint32_t event, unsigned lun, uint32_t reason)
{
	uint64_t one = 1;
	bool wake = true;

	pthread_mutex_lock(&c->ev_lock);
	if (!c->ev_live) {
		c->ev_dropped++;
		wake = false;
		VS_INFO(EVENT, "event %s lun %u reason %#x: no frontend, dropped",
			vs_virtio_scsi_event_name(event), lun, reason);
	} else if (c->ev_count == TQ_EVENTS_MAX) {
		c->ev_missed = true;
		c->ev_dropped++;
		VS_WARNING(EVENT,
			   "event %s lun %u reason %#x: %u events wait already, dropped "
			   "(the next one says events were missed)",
			   vs_virtio_scsi_event_name(event), lun, reason, TQ_EVENTS_MAX);
	} else {
		c->ev[(c->ev_head + c->ev_count) % TQ_EVENTS_MAX] =
		    (struct tq_event){.event = event, .reason = reason, .lun = lun};
		__atomic_store_n(&c->ev_count, c->ev_count + 1, __ATOMIC_RELAXED);
		VS_INFO(EVENT, "event %s lun %u reason %#x queued (%u waiting)",
			vs_virtio_scsi_event_name(event), lun, reason, c->ev_count);
	}
	pthread_mutex_unlock(&c->ev_lock);
	if (wake && write(c->ev_fd, &one, sizeof(one)) < 0) {
		/* full counter: the control thread has a wake-up pending anyway */
	}
}

/* The oldest pending event in wire form (EVENTS_MISSED or-ed in when some were lost), or
 * NO_EVENT when the list was emptied meanwhile (a disconnect). */
static void event_take(struct vs_controller *c, struct vs_virtio_scsi_event *ev)
{
	struct tq_event e = {.event = VS_VIRTIO_SCSI_T_NO_EVENT};

	pthread_mutex_lock(&c->ev_lock);
	if (c->ev_count) {
		e = c->ev[c->ev_head];
		c->ev_head = (c->ev_head + 1) % TQ_EVENTS_MAX;
		__atomic_store_n(&c->ev_count, c->ev_count - 1, __ATOMIC_RELAXED);
		if (c->ev_missed)
			e.event |= VS_VIRTIO_SCSI_T_EVENTS_MISSED;
		c->ev_missed = false;
		c->ev_sent++;
	}
	pthread_mutex_unlock(&c->ev_lock);
	memset(ev, 0, sizeof(*ev));
	ev->event = vs_le32(e.event);
	ev->reason = vs_le32(e.reason);
	vs_vscsi_event_lun_encode(ev->lun, 0, e.lun);
}

/* Pop one event buffer and fill it (vs_vq_dev_drain's handler): 1 delivered (or a bad
 * buffer returned), 0 no buffer, -EIO the ring is broken, -ENOMSG no event waits. */
static int event_deliver_one(void *opaque)
{
	struct tq *q = opaque;
	struct vs_vq_elem *e = q->w->scratch;
	struct vs_virtio_scsi_event ev;
	int rc;

	if (!tq_events_waiting(q->c))
		return -ENOMSG; /* the buffers left in the ring wait for the next event */
	rc = tq_pop(q, e);
	if (rc == -EAGAIN)
		return 0; /* nothing in the ring */
	if (rc == -EIO)
		return -EIO;   /* broken: tq_pop killed it */
	q->unsignalled = true; /* the pass signals the driver once, after every ring */
	if (rc || e->in_len < sizeof(ev)) {
		/* The event stays pending for the next buffer. */
		VS_ERROR(EVENT, "event head %u: %s: returned empty", e->head,
			 rc ? strerror(-rc) : "fewer than 16 writable bytes");
		vs_vq_dev_push(&q->vq, e->head, 0);
		return 1;
	}
	event_take(q->c, &ev);
	vs_iov_from_buf(e->in, e->in_num, 0, &ev, sizeof(ev));
	vs_vq_dev_log_written(&q->vq, e, sizeof(ev));
	vs_vq_dev_push(&q->vq, e->head, sizeof(ev));
	VS_INFO(EVENT, "event %#x lun %u reason %#x delivered (head %u)", vs_le32(ev.event),
		ev.lun[3], vs_le32(ev.reason), e->head);
	return 1;
}

void tq_event_process(struct tq *q)
{
	if (!q->running || q->stopping || q->dead || !tq_events_waiting(q->c))
		return;
	/* The request queues' budget, bad buffers included: a guest that keeps this ring full
	 * of buffers too short to take an event (each a walk of up to 258 descriptors) while an
	 * event waits must not starve the TMFs and commands that run between passes.  With no
	 * buffer left, kicks are asked for (when the driver adds one, the event goes out);
	 * with no event left, the buffers stay in the ring, kicks off until the next event. */
	if (vs_vq_dev_drain(&q->vq, TQ_POP_BUDGET, q->polled, event_deliver_one, q) == 1)
		q->kicked = true; /* more next pass */
}
