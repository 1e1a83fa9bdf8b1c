/* SPDX-License-Identifier: MIT */
/*
 * Device side of a split virtqueue: pop descriptor chains the driver made available,
 * validate them against the ring and the guest memory map, return them through the used ring.
 * Spec: virtio 1.2, 2.7 "Split Virtqueues".
 */
#include <errno.h>

#include "virtio/virtio_int.h"

#define VQ_MASK(vq) ((vq)->size - 1)

#define vq_used_event(vq)  vs_vring_used_event((vq)->avail, (vq)->size)
#define vq_avail_event(vq) vs_vring_avail_event((vq)->used, (vq)->size)

static void vq_break(struct vs_vq_dev *vq, const char *why)
{
	if (vq->broken)
		return;
	vq->broken = true;
	vq->broken_reason = why;
	VS_ERROR(QUEUE, "vq %u broken: %s (last_avail %u used %u)", vq->qid, why,
		 vq->last_avail_idx, vq->used_idx);
}

int vs_vq_dev_init(struct vs_vq_dev *vq, unsigned size, void *desc, void *avail, void *used,
		   bool event_idx, bool indirect, uint16_t last_avail_idx)
{
	if (!ring_size_ok(size) || !desc || !avail || !used || ((uintptr_t)desc & 15) ||
	    ((uintptr_t)avail & 1) || ((uintptr_t)used & 3)) {
		VS_ERROR(QUEUE, "vq init: size %u desc %p avail %p used %p: %s", size, desc, avail,
			 used, "size not a power of 2 <= 32768, or ring part NULL or misaligned");
		return -EINVAL;
	}
	memset(vq, 0, sizeof(*vq));
	vq->size = size;
	vq->desc = desc;
	vq->avail = avail;
	vq->used = used;
	vq->event_idx = event_idx;
	vq->indirect = indirect;
	vq->last_avail_idx = last_avail_idx;
	vq->shadow_avail_idx = last_avail_idx;
	vq->used_idx = vs_le16(ring_read(&vq->used->idx));
	vq->notify_enabled = true;
	vq->log_used_gpa = VS_LOG_NONE;
	VS_INFO(QUEUE, "vq init: size %u last_avail %u used %u event_idx %d indirect %d", size,
		last_avail_idx, vq->used_idx, event_idx, indirect);
	return 0;
}

/* Out of line (TRACING.md section 8): the error's record inline cost the two callers below,
 * run on every pass, saved registers in every flavour with sites. */
static __attribute__((noinline, cold)) int avail_runaway(struct vs_vq_dev *vq, uint16_t idx)
{
	VS_ERROR(QUEUE, "vq %u avail idx %u is %u ahead of last_avail %u, size %u", vq->qid, idx,
		 (uint16_t)(idx - vq->last_avail_idx), vq->last_avail_idx, vq->size);
	vq_break(vq, "avail idx ran more than the queue size ahead");
	return -EIO;
}

/* Re-read avail->idx (acquire: ring entries read later are at least as new). */
static inline int vq_load_avail(struct vs_vq_dev *vq)
{
	uint16_t idx = vs_le16(ring_read_acquire(&vq->avail->idx));

	if (__builtin_expect((uint16_t)(idx - vq->last_avail_idx) > vq->size, 0))
		return avail_runaway(vq, idx);
	vq->shadow_avail_idx = idx;
	return 0;
}

unsigned vs_vq_dev_avail_count(struct vs_vq_dev *vq)
{
	if (vq->broken || vq_load_avail(vq))
		return 0;
	return (uint16_t)(vq->shadow_avail_idx - vq->last_avail_idx) +
	       (vq->resubmit_num - vq->resubmit_next);
}

/* Where and why a chain failed, for one trace line. */
struct chain_err {
	const char *why;
	bool fatal; /* the ring itself is corrupt: break the queue */
	bool in_indirect;
	unsigned idx;
	struct vs_vring_desc d;
};

#define CHAIN_FAIL(rc_, why_, fatal_)                                                              \
	do {                                                                                       \
		rc = (rc_);                                                                        \
		e->why = (why_);                                                                   \
		e->fatal = (fatal_);                                                               \
		goto out;                                                                          \
	} while (0)

/* Map one descriptor's buffer into elem.  Readable buffers must all precede writable ones
 * (spec 2.7.4.2); the byte and segment caps keep one chain's cost bounded. */
static int vq_map_desc(const struct vs_mem *mem, struct vs_vq_elem *elem,
		       const struct vs_vring_desc *d, bool *seen_write, struct chain_err *e)
{
	bool write = d->flags & VS_VRING_DESC_F_WRITE;
	unsigned *num = write ? &elem->in_num : &elem->out_num;
	struct iovec *iov = write ? &elem->in[*num] : &elem->out[*num];
	int rc = 0;

	if (!write && *seen_write)
		CHAIN_FAIL(-EINVAL, "device-readable descriptor after a device-writable one",
			   false);
	if (d->len > VS_VQ_MAX_CHAIN_BYTES - elem->out_len - elem->in_len)
		CHAIN_FAIL(-E2BIG, "chain longer than VS_VQ_MAX_CHAIN_BYTES", false);
	rc = vs_mem_gpa_iov(mem, d->addr, d->len, iov, (int)(VS_VQ_MAX_SEGS - *num));
	if (rc == -EFAULT)
		CHAIN_FAIL(rc, "buffer outside guest memory", false);
	if (rc < 0)
		CHAIN_FAIL(-ENOBUFS, "more than VS_VQ_MAX_SEGS segments in one direction", false);
	*num += (unsigned)rc;
	if (write) {
		elem->in_len += d->len;
		*seen_write = true;
	} else {
		elem->out_len += d->len;
	}
	rc = 0;
out:
	return rc;
}

/* Walk the chain at head (a valid index) into elem; see vs_vq_dev_pop() for the contract. */
static int vq_map_chain(struct vs_vq_dev *vq, const struct vs_mem *mem, struct vs_vq_elem *elem,
			uint16_t head, struct chain_err *e)
{
	const uint8_t *table = (const uint8_t *)vq->desc;
	unsigned tsize = vq->size, count = 0;
	bool seen_write = false;
	struct vs_vring_desc *d = &e->d;
	int rc = 0;

	e->idx = head;
	ring_desc_read(d, (const void *)(table + 16u * head));
	if (d->flags & VS_VRING_DESC_F_INDIRECT) {
		if (!vq->indirect)
			CHAIN_FAIL(-EINVAL,
				   "INDIRECT descriptor, VS_VIRTIO_F_INDIRECT_DESC not negotiated",
				   false);
		if (d->flags & VS_VRING_DESC_F_NEXT)
			CHAIN_FAIL(-EINVAL, "INDIRECT and NEXT on the same descriptor", false);
		if (d->len == 0 || d->len % 16)
			CHAIN_FAIL(-EINVAL, "indirect table length not a non-zero multiple of 16",
				   false);
		if (d->len / 16 > VS_VQ_MAX_INDIRECT)
			CHAIN_FAIL(-EINVAL, "indirect table longer than VS_VQ_MAX_INDIRECT entries",
				   false);
		/* The table must be contiguous in our mapping: one region. */
		table = vs_mem_gpa(mem, d->addr, d->len);
		if (!table)
			CHAIN_FAIL(-EFAULT, "indirect table outside guest memory or across regions",
				   false);
		tsize = d->len / 16;
		e->in_indirect = true;
		e->idx = 0;
		ring_desc_read(d, (const void *)table);
	}
	for (;;) {
		if (d->flags & VS_VRING_DESC_F_INDIRECT)
			CHAIN_FAIL(-EINVAL,
				   e->in_indirect ? "INDIRECT descriptor inside an indirect table"
						  : "INDIRECT descriptor not at the chain head",
				   false);
		rc = vq_map_desc(mem, elem, d, &seen_write, e);
		if (rc)
			goto out;
		if (!(d->flags & VS_VRING_DESC_F_NEXT))
			break;
		/* More descriptors than the table holds means a loop. In the ring's own table
		 * that is a corrupt ring; in an indirect table it is one bad buffer. */
		if (++count >= tsize)
			CHAIN_FAIL(e->in_indirect ? -EINVAL : -EIO, "descriptor chain loops",
				   !e->in_indirect);
		if (d->next >= tsize)
			CHAIN_FAIL(e->in_indirect ? -EINVAL : -EIO, "next index beyond the table",
				   !e->in_indirect);
		e->idx = d->next;
		ring_desc_read(d, (const void *)(table + 16u * d->next));
	}
out:
	return rc;
}

int vs_vq_dev_pop(struct vs_vq_dev *vq, const struct vs_mem *mem, struct vs_vq_elem *elem)
{
	struct chain_err e = {0};
	uint16_t head;
	int rc;

	if (__builtin_expect(vq->broken, 0))
		return -EIO;
	if (__builtin_expect(vq->inflight != NULL, 0) && vq->resubmit_next < vq->resubmit_num) {
		/* Taken by the device before a restart (still marked in flight): first. */
		head = vq->resubmit[vq->resubmit_next++].head;
		VS_INFO(QUEUE, "vq %u head %u resubmitted (taken before the restart)", vq->qid,
			head);
		goto map;
	}
	if (vq->shadow_avail_idx == vq->last_avail_idx) {
		if (vq_load_avail(vq))
			return -EIO;
		if (vq->shadow_avail_idx == vq->last_avail_idx)
			return -EAGAIN;
	}
	head = vs_le16(ring_read(&vq->avail->ring[vq->last_avail_idx & VQ_MASK(vq)]));
	if (head >= vq->size) {
		VS_ERROR(QUEUE, "vq %u avail[%u] head %u >= size %u", vq->qid, vq->last_avail_idx,
			 head, vq->size);
		vq_break(vq, "head index beyond the descriptor table");
		return -EIO;
	}
	vq->last_avail_idx++;
	if (vq->event_idx && vq->notify_enabled)
		ring_write(vq_avail_event(vq), vs_le16(vq->last_avail_idx));
	if (__builtin_expect(vq->inflight != NULL, 0))
		vs_vq_dev__inflight_take(vq, head);

map:
	elem->head = head;
	elem->bad = false;
	elem->out_num = elem->in_num = 0;
	elem->out_len = elem->in_len = 0;
	rc = vq_map_chain(vq, mem, elem, head, &e);
	if (__builtin_expect(rc, 0)) {
		VS_ERROR(QUEUE,
			 "vq %u head %u: %s (%s desc %u: addr %#llx len %u flags %#x next %u)",
			 vq->qid, head, e.why, e.in_indirect ? "indirect" : "ring", e.idx,
			 (unsigned long long)e.d.addr, e.d.len, e.d.flags, e.d.next);
		if (e.fatal) {
			vq_break(vq, e.why);
			return -EIO;
		}
		elem->bad = true;
		elem->out_num = elem->in_num = 0;
		elem->out_len = elem->in_len = 0;
		return rc;
	}
	return 0;
}

/* Write one used entry (not yet published); false for a head that is not ours to return. */
static inline bool vq_fill(struct vs_vq_dev *vq, uint16_t head, uint32_t len)
{
	struct vs_vring_used_elem *u = &vq->used->ring[vq->used_idx & VQ_MASK(vq)];

	if (__builtin_expect(head >= vq->size, 0)) {
		VS_ERROR(QUEUE, "vq %u push of head %u >= size %u ignored", vq->qid, head,
			 vq->size);
		return false;
	}
	if (__builtin_expect(vq->inflight != NULL, 0))
		vs_vq_dev__inflight_fill(vq, head);
	ring_write(&u->id, vs_le32(head));
	ring_write(&u->len, vs_le32(len));
	vq->used_idx++;
	return true;
}

void vs_vq_dev_fill(struct vs_vq_dev *vq, uint16_t head, uint32_t len)
{
	/* No event of its own: the layer above says what it answered (one per stage). */
	vq_fill(vq, head, len);
}

void vs_vq_dev_flush(struct vs_vq_dev *vq)
{
	/* Release: the driver that sees the new idx sees the entries written before it. */
	ring_write_release(&vq->used->idx, vs_le16(vq->used_idx));
	/* The entries, the index and any avail_event written since the last flush. */
	if (__builtin_expect(vq->log != NULL, 0))
		vs_vq_dev__log_used(vq);
	if (__builtin_expect(vq->inflight != NULL, 0))
		vs_vq_dev__inflight_flush(vq);
}

void vs_vq_dev_push(struct vs_vq_dev *vq, uint16_t head, uint32_t len)
{
	if (!vq_fill(vq, head, len))
		return;
	vs_vq_dev_flush(vq);
	VS_VERBOSE_HP(QUEUE, "vq %u push head %u len %u used %u", vq->qid, head, len, vq->used_idx);
}

bool vs_vq_dev_should_notify(struct vs_vq_dev *vq)
{
	bool notify;

	/* Our used->idx store must be visible before we read the driver's suppression
	 * fields, or both sides can decide the other will act and nobody does. */
	ring_mb();
	if (!vq->event_idx) {
		notify = !(vs_le16(ring_read(&vq->avail->flags)) & VS_VRING_AVAIL_F_NO_INTERRUPT);
	} else {
		uint16_t old = vq->signalled_used, now = vq->used_idx;
		uint16_t ev = vs_le16(ring_read(vq_used_event(vq)));
		notify = !vq->signalled_used_valid || vs_vring_need_event(ev, now, old);
		vq->signalled_used = now;
		vq->signalled_used_valid = true;
	}
	return notify;
}

void vs_vq_dev_set_notification(struct vs_vq_dev *vq, bool enable)
{
	vq->notify_enabled = enable;
	if (vq->event_idx) {
		if (enable)
			ring_write(vq_avail_event(vq), vs_le16(vq->last_avail_idx));
	} else {
		ring_write(&vq->used->flags, vs_le16(enable ? 0 : VS_VRING_USED_F_NO_NOTIFY));
	}
	if (__builtin_expect(vq->log != NULL, 0))
		vs_vq_dev__log_used(vq);
	/* The caller re-checks avail->idx next: order that read after our write. */
	if (enable)
		ring_mb();
}
