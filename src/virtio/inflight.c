/* SPDX-License-Identifier: MIT */
/*
 * In-flight tracking of a device-side split ring in the frontend's region (vhost-user.rst,
 * "Inflight I/O tracking", split rings): a head is marked when taken from the avail ring,
 * chained into the "last batch" when its used entry is written, and cleared once used->idx
 * covers it.  A device killed at any point leaves a region from which its successor knows
 * exactly which requests were taken and never answered:
 *   - killed between taking a head and marking it: the head is not marked, and the ring
 *     resumes at used->idx + (marked heads), which is that head's avail slot: taken again;
 *   - killed after publishing used->idx but before clearing the batch: the region's used_idx
 *     lags used->idx, and the batch list says which heads to clear.
 * The region is the frontend's memory: the successor copies it before believing it.
 */
#include <errno.h>
#include <stdlib.h>

#include "virtio/virtio_int.h"

#define VQ_MASK(vq) ((vq)->size - 1)

void vs_vq_dev__inflight_take(struct vs_vq_dev *vq, uint16_t head)
{
	struct vs_vhost_inflight_desc *d = &vq->inflight->desc[head];

	d->counter = vq->inflight_counter++;
	/* The counter first: a successor that sees the mark sees its order. */
	__atomic_store_n(&d->inflight, 1, __ATOMIC_RELEASE);
}

void vs_vq_dev__inflight_fill(struct vs_vq_dev *vq, uint16_t head)
{
	vq->inflight->desc[head].next = vq->inflight_batch_head;
	__atomic_store_n(&vq->inflight->last_batch_head, head, __ATOMIC_RELEASE);
	vq->inflight_batch_head = head;
}

/* After used->idx was published: the batch is answered, its marks go. */
void vs_vq_dev__inflight_flush(struct vs_vq_dev *vq)
{
	struct vs_vhost_inflight_split *r = vq->inflight;
	uint16_t n = (uint16_t)(vq->used_idx - vq->inflight_used_idx);
	uint16_t head = vq->inflight_batch_head;

	for (uint16_t i = 0; i < n; i++) {
		__atomic_store_n(&r->desc[head].inflight, 0, __ATOMIC_RELAXED);
		/* Our own links, but in the frontend's memory: a head it rewrote out of range
		 * ends the walk (the marks left behind only harm its own recovery). */
		head = __atomic_load_n(&r->desc[head].next, __ATOMIC_RELAXED);
		if (head >= vq->size)
			break;
	}
	__atomic_store_n(&r->used_idx, vq->used_idx, __ATOMIC_RELEASE);
	vq->inflight_used_idx = vq->used_idx;
}

static int entry_order(const void *a, const void *b)
{
	const struct vs_inflight_entry *x = a, *y = b;

	if (x->counter != y->counter)
		return x->counter < y->counter ? -1 : 1;
	return x->head < y->head ? -1 : x->head > y->head;
}

/* A region the frontend just got from GET_INFLIGHT_FD (or one it zeroed). */
static void region_init(struct vs_vq_dev *vq, struct vs_vhost_inflight_split *r)
{
	memset(r->desc, 0, (size_t)vq->size * sizeof(r->desc[0]));
	r->features = 0;
	r->desc_num = (uint16_t)vq->size;
	r->last_batch_head = 0;
	r->used_idx = vq->used_idx;
	__atomic_store_n(&r->version, VS_VHOST_INFLIGHT_VERSION, __ATOMIC_RELEASE);
	vq->inflight_batch_head = 0;
	vq->inflight_used_idx = vq->used_idx;
	vq->inflight_counter = 0;
	vq->resubmit_num = vq->resubmit_next = 0;
}

int vs_vq_dev_set_inflight(struct vs_vq_dev *vq, struct vs_vhost_inflight_split *r,
			   struct vs_inflight_entry *scratch, char *why, size_t whylen)
{
	uint16_t version = __atomic_load_n(&r->version, __ATOMIC_ACQUIRE);
	uint16_t desc_num = r->desc_num, batch_head = r->last_batch_head;
	uint16_t region_used = r->used_idx, used = vq->used_idx;
	uint16_t avail = vs_le16(ring_read_acquire(&vq->avail->idx));
	uint16_t lag = (uint16_t)(used - region_used), head = batch_head;
	uint64_t next_counter = 0;
	unsigned n = 0;

	vq->inflight = r;
	vq->resubmit = scratch;
	if (version == 0) {
		region_init(vq, r);
		VS_INFO(QUEUE, "vq %u in-flight region: fresh, laid out for %u entries", vq->qid,
			vq->size);
		return 0;
	}
	vq->inflight = NULL; /* until the region is believed */
	if (version != VS_VHOST_INFLIGHT_VERSION || desc_num != vq->size)
		return vs_fail(why, whylen, -EPROTO,
			       "in-flight region of vq %u: version %u for %u entries, the ring "
			       "has %u",
			       vq->qid, version, desc_num, vq->size);
	/* Copy the marks and order numbers once: everything below uses the copy. */
	for (unsigned i = 0; i < vq->size; i++) {
		scratch[i].head = __atomic_load_n(&r->desc[i].inflight, __ATOMIC_RELAXED);
		scratch[i].counter = r->desc[i].counter;
		if (scratch[i].head > 1)
			return vs_fail(why, whylen, -EPROTO,
				       "in-flight region of vq %u: head %u is marked %u", vq->qid,
				       i, scratch[i].head);
		n += scratch[i].head;
	}
	if (n == 0) {
		/* Nothing in flight (every stop drains the ring): whatever the region's used
		 * index says, a ring the driver reset since included, it starts from here. */
		region_init(vq, r);
		vq->inflight = r;
		vq->last_avail_idx = vq->shadow_avail_idx = used;
		VS_INFO(QUEUE, "vq %u in-flight region: nothing in flight (used %u)", vq->qid,
			used);
		return 0;
	}
	/* A device killed after publishing a batch but before clearing it: clear it now. */
	if (lag > vq->size)
		return vs_fail(why, whylen, -EPROTO,
			       "in-flight region of vq %u: its used index %u is %u behind the "
			       "used ring's %u, more than the ring holds",
			       vq->qid, region_used, lag, used);
	for (uint16_t i = 0; i < lag; i++) {
		if (head >= vq->size)
			return vs_fail(why, whylen, -EPROTO,
				       "in-flight region of vq %u: its last batch runs through "
				       "head %u, beyond the ring's %u",
				       vq->qid, head, vq->size);
		scratch[head].head = 0;
		head = __atomic_load_n(&r->desc[head].next, __ATOMIC_RELAXED);
	}
	n = 0;
	for (unsigned i = 0; i < vq->size; i++) {
		if (scratch[i].head && scratch[i].counter >= next_counter)
			next_counter = scratch[i].counter + 1;
		n += scratch[i].head;
	}
	/* Every head in flight was made available and not used: no more of them than that. */
	if (n > (uint16_t)(avail - used))
		return vs_fail(why, whylen, -EPROTO,
			       "in-flight region of vq %u: %u requests in flight, but the driver "
			       "made only %u available beyond the used index %u",
			       vq->qid, n, (uint16_t)(avail - used), used);

	/* Believed: the region says what the copy says (the finished batch cleared), and the
	 * heads in flight go out again oldest first. */
	n = 0;
	for (unsigned i = 0; i < vq->size; i++) {
		r->desc[i].inflight = (uint8_t)scratch[i].head;
		if (scratch[i].head) {
			scratch[n].counter = scratch[i].counter;
			scratch[n++].head = (uint16_t)i;
		}
	}
	qsort(scratch, n, sizeof(scratch[0]), entry_order);
	__atomic_store_n(&r->used_idx, used, __ATOMIC_RELEASE);

	if ((uint16_t)(used + n) != vq->last_avail_idx)
		VS_INFO(QUEUE, "vq %u resumes at avail %u (used %u + %u in flight), not at base %u",
			vq->qid, (uint16_t)(used + n), used, n, vq->last_avail_idx);
	vq->last_avail_idx = vq->shadow_avail_idx = (uint16_t)(used + n);
	vq->inflight_counter = next_counter;
	vq->inflight_batch_head = batch_head;
	vq->inflight_used_idx = used;
	vq->resubmit_num = n;
	vq->resubmit_next = 0;
	vq->inflight = r;
	VS_INFO(QUEUE,
		"vq %u in-flight region: %u request(s) to resubmit, %u cleared from the "
		"last batch (used %u)",
		vq->qid, n, lag, used);
	return 0;
}
