/* SPDX-License-Identifier: MIT */
/*
 * Driver side of a split virtqueue, over a ring in memory we own and share with a device.
 * The free list and per-chain state stay in private memory: the device can scribble on the
 * shared descriptor table without misleading us, and what it writes to the used ring is
 * checked before use.
 */
#include <errno.h>
#include <stdlib.h>

#include "virtio/virtio_int.h"

#define VQ_MASK(vq) ((vq)->size - 1)

static inline uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static inline uint64_t used_offset(unsigned size)
{
	/* Own cache line for the device-written part. */
	return align_up(vs_vring_desc_bytes(size) + vs_vring_avail_bytes(size), 64);
}

size_t vs_vq_drv_ring_bytes(unsigned size)
{
	return (size_t)(used_offset(size) + vs_vring_used_bytes(size));
}

#define vq_used_event(vq)  vs_vring_used_event((vq)->avail, (vq)->size)
#define vq_avail_event(vq) vs_vring_avail_event((vq)->used, (vq)->size)

static void vq_break(struct vs_vq_drv *vq, const char *why)
{
	if (vq->broken)
		return;
	vq->broken = true;
	vq->broken_reason = why;
	VS_ERROR(QUEUE, "driver vq %u broken: %s (last_used %u avail %u)", vq->qid, why,
		 vq->last_used_idx, vq->avail_idx);
}

int vs_vq_drv_init(struct vs_vq_drv *vq, unsigned size, void *mem, bool event_idx, bool indirect)
{
	if (!ring_size_ok(size) || !mem || ((uintptr_t)mem & 15)) {
		VS_ERROR(QUEUE, "driver vq init: size %u mem %p: %s", size, mem,
			 "size not a power of 2 <= 32768, or memory NULL or not 16-byte aligned");
		return -EINVAL;
	}
	memset(vq, 0, sizeof(*vq));
	vq->next = calloc(size, sizeof(*vq->next));
	vq->chain_len = calloc(size, sizeof(*vq->chain_len));
	vq->in_cap = calloc(size, sizeof(*vq->in_cap));
	if (!vq->next || !vq->chain_len || !vq->in_cap) {
		VS_ERROR(QUEUE, "driver vq init: size %u: out of memory", size);
		vs_vq_drv_destroy(vq);
		return -ENOMEM;
	}
	memset(mem, 0, vs_vq_drv_ring_bytes(size));
	vq->size = size;
	vq->desc = mem;
	vq->avail = (void *)((uint8_t *)mem + vs_vring_desc_bytes(size));
	vq->used = (void *)((uint8_t *)mem + used_offset(size));
	for (unsigned i = 0; i < size; i++)
		vq->next[i] = (uint16_t)((i + 1) & (size - 1));
	vq->num_free = size;
	vq->event_idx = event_idx;
	vq->indirect = indirect;
	vq->cb_enabled = true;
	VS_INFO(QUEUE, "driver vq init: size %u ring %p (%zu bytes) event_idx %d indirect %d", size,
		mem, vs_vq_drv_ring_bytes(size), event_idx, indirect);
	return 0;
}

void vs_vq_drv_destroy(struct vs_vq_drv *vq)
{
	free(vq->next);
	free(vq->chain_len);
	free(vq->in_cap);
	vq->next = vq->chain_len = NULL;
	vq->in_cap = NULL;
}

static inline void desc_write(void *p, uint64_t addr, uint32_t len, uint16_t flags, uint16_t next)
{
	struct vs_vring_desc d = {
	    .addr = vs_le64(addr),
	    .len = vs_le32(len),
	    .flags = vs_le16(flags),
	    .next = vs_le16(next),
	};
	memcpy(p, &d, sizeof(d));
}

/* A chain refused: bad size (readable_after < 0) or a readable buffer after a writable
 * one.  Out of line (TRACING.md section 8): the add runs on every request. */
static __attribute__((noinline, cold)) int add_refused(const struct vs_vq_drv *vq, unsigned n,
						       bool indirect, int readable_after)
{
	if (readable_after < 0)
		VS_ERROR(QUEUE, "driver vq %u add: %u buffers, %s: bad chain", vq->qid, n,
			 indirect ? "indirect" : "direct");
	else
		VS_ERROR(QUEUE, "driver vq %u add: readable buffer %d after a writable one",
			 vq->qid, readable_after);
	(void)vq, (void)n, (void)indirect; /* the off flavour */
	return -EINVAL;
}

int vs_vq_drv_add_indirect(struct vs_vq_drv *vq, const struct vs_vq_buf *bufs, unsigned n,
			   void *table, uint64_t table_addr, uint16_t *head)
{
	uint64_t in_bytes = 0;
	bool seen_write = false;
	unsigned needed = table ? 1 : n;
	uint16_t h, idx;

	if (vq->broken)
		return -EIO;
	if (n == 0 || n > (table ? VS_VQ_MAX_INDIRECT : vq->size) || (table && !vq->indirect))
		return add_refused(vq, n, table != NULL, -1);
	for (unsigned i = 0; i < n; i++) {
		if (bufs[i].write) {
			seen_write = true;
			in_bytes += bufs[i].len;
		} else if (seen_write) {
			return add_refused(vq, n, table != NULL, (int)i);
		}
	}
	if (vq->num_free < needed)
		return -ENOSPC;

	h = vq->free_head;
	idx = h;
	if (table) {
		for (unsigned i = 0; i < n; i++)
			desc_write((uint8_t *)table + 16u * i, bufs[i].addr, bufs[i].len,
				   (bufs[i].write ? VS_VRING_DESC_F_WRITE : 0) |
				       (i + 1 < n ? VS_VRING_DESC_F_NEXT : 0),
				   (uint16_t)(i + 1 < n ? i + 1 : 0));
		desc_write(&vq->desc[h], table_addr, 16u * n, VS_VRING_DESC_F_INDIRECT, 0);
	} else {
		/* Chain along the private free list; freeing walks the same links. */
		for (unsigned i = 0; i < n; i++) {
			bool more = i + 1 < n;
			desc_write(&vq->desc[idx], bufs[i].addr, bufs[i].len,
				   (bufs[i].write ? VS_VRING_DESC_F_WRITE : 0) |
				       (more ? VS_VRING_DESC_F_NEXT : 0),
				   more ? vq->next[idx] : 0);
			if (more)
				idx = vq->next[idx];
		}
	}
	vq->free_head = vq->next[idx];
	vq->num_free -= needed;
	vq->chain_len[h] = (uint16_t)needed;
	vq->in_cap[h] = in_bytes > UINT32_MAX ? UINT32_MAX : (uint32_t)in_bytes;

	ring_write(&vq->avail->ring[vq->avail_idx & VQ_MASK(vq)], vs_le16(h));
	vq->avail_idx++;
	/* Release: the device that sees the new idx sees the descriptors and the entry. */
	ring_write_release(&vq->avail->idx, vs_le16(vq->avail_idx));
	*head = h;
	return 0;
}

bool vs_vq_drv_should_kick(struct vs_vq_drv *vq)
{
	uint16_t old = vq->kicked_avail_idx, now = vq->avail_idx;
	bool kick;

	/* Our avail->idx store before reading the device's suppression fields. */
	ring_mb();
	vq->kicked_avail_idx = now;
	if (old == now)
		kick = false;
	else if (vq->event_idx)
		kick = vs_vring_need_event(vs_le16(ring_read(vq_avail_event(vq))), now, old);
	else
		kick = !(vs_le16(ring_read(&vq->used->flags)) & VS_VRING_USED_F_NO_NOTIFY);
	return kick;
}

bool vs_vq_drv_has_used(struct vs_vq_drv *vq)
{
	return !vq->broken && vs_vq_drv_used_idx(vq->used) != vq->last_used_idx;
}

/* What was wrong with a used entry, reported out of line: with the error sites in
 * the polling function itself, its empty-poll path paid for their register saves. */
enum used_fault { USED_RUNAWAY, USED_BAD_ID, USED_BAD_LEN };

static __attribute__((noinline, cold)) int used_bad(struct vs_vq_drv *vq, enum used_fault f,
						    uint16_t idx, uint32_t id, uint32_t len)
{
	switch (f) {
	case USED_RUNAWAY:
		VS_ERROR(QUEUE, "driver vq %u used idx %u is %u ahead of last_used %u", vq->qid,
			 idx, (uint16_t)(idx - vq->last_used_idx), vq->last_used_idx);
		vq_break(vq, "used idx ran more than the queue size ahead");
		break;
	case USED_BAD_ID:
		VS_ERROR(QUEUE, "driver vq %u used[%u] id %u len %u", vq->qid, vq->last_used_idx,
			 id, len);
		vq_break(vq, "used id is not a chain in flight");
		break;
	case USED_BAD_LEN:
		VS_ERROR(QUEUE, "driver vq %u used[%u] id %u len %u > writable %u", vq->qid,
			 vq->last_used_idx, id, len, vq->in_cap[id]);
		vq_break(vq, "used len beyond the chain's writable bytes");
		break;
	}
	return -EIO;
}

int vs_vq_drv_get_used(struct vs_vq_drv *vq, uint16_t *head, uint32_t *len)
{
	struct vs_vring_used_elem *u;
	uint16_t idx, id;
	uint32_t l;

	if (vq->broken)
		return -EIO;
	/* Acquire: the used entry read below is at least as new as the idx. */
	idx = vs_vq_drv_used_idx(vq->used);
	if (idx == vq->last_used_idx)
		return -EAGAIN;
	if ((uint16_t)(idx - vq->last_used_idx) > vq->size)
		return used_bad(vq, USED_RUNAWAY, idx, 0, 0);
	u = &vq->used->ring[vq->last_used_idx & VQ_MASK(vq)];
	uint32_t id32 = vs_le32(ring_read(&u->id));
	l = vs_le32(ring_read(&u->len));
	if (id32 >= vq->size || !vq->chain_len[id32])
		return used_bad(vq, USED_BAD_ID, idx, id32, l);
	id = (uint16_t)id32;
	if (l > vq->in_cap[id])
		return used_bad(vq, USED_BAD_LEN, idx, id, l);

	/* Give the chain back to the free list (private links, same order as taken). */
	unsigned n = vq->chain_len[id];
	uint16_t last = id;
	for (unsigned i = 1; i < n; i++)
		last = vq->next[last];
	vq->next[last] = vq->free_head;
	vq->free_head = id;
	vq->num_free += n;
	vq->chain_len[id] = 0;

	vq->last_used_idx++;
	if (vq->event_idx && vq->cb_enabled)
		ring_write(vq_used_event(vq), vs_le16(vq->last_used_idx));
	*head = id;
	*len = l;
	/* The driver's poll instant (trace latency). */
	VS_STAGE_OOL(QUEUE, poll, "driver vq %u used head %u len %u", (vq, vq->qid), (head, id),
		     (len, l));
	return 0;
}

void vs_vq_drv_enable_cb(struct vs_vq_drv *vq, bool enable)
{
	vq->cb_enabled = enable;
	if (vq->event_idx) {
		if (enable)
			ring_write(vq_used_event(vq), vs_le16(vq->last_used_idx));
	} else {
		ring_write(&vq->avail->flags, vs_le16(enable ? 0 : VS_VRING_AVAIL_F_NO_INTERRUPT));
	}
	/* The caller re-checks used->idx next: order that read after our write. */
	if (enable)
		ring_mb();
}
