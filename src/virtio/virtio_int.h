/* SPDX-License-Identifier: MIT */
/* Private to src/virtio: shared-memory access and barriers for both ring halves.
 * The other side of a ring runs in another process or a guest, so every access to a
 * shared field is atomic (no tearing, no compiler re-fetch) and ordered explicitly. */
#ifndef VS_VIRTIO_INT_H
#define VS_VIRTIO_INT_H

#include "virtio/virtio.h"

/* Plain once-only access (READ_ONCE / WRITE_ONCE). */
#define ring_read(p)	 __atomic_load_n((p), __ATOMIC_RELAXED)
#define ring_write(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
/* An index read that orders the ring entries read after it (the spec's read barrier). */
#define ring_read_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
/* An index write that publishes the ring entries written before it (write barrier). */
#define ring_write_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
/* Store-then-load ordering: our index/event write before reading the other side's
 * flags/event (notification decisions); only a full barrier orders those. */
#define ring_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)

/* Take one private copy of a descriptor: the guest may rewrite it while we look, so every
 * check and every use must see the same bytes.  The compiler barrier stops the compiler from
 * re-reading shared memory in place of the copy.  memcpy also copes with an indirect table
 * that is not 16-byte aligned. */
static inline void ring_desc_read(struct vs_vring_desc *d, const struct vs_vring_desc *p)
{
	memcpy(d, p, sizeof(*d));
	__asm__ __volatile__("" ::: "memory");
	d->addr = vs_le64(d->addr);
	d->len = vs_le32(d->len);
	d->flags = vs_le16(d->flags);
	d->next = vs_le16(d->next);
}

static inline bool ring_size_ok(unsigned size)
{
	return size && size <= VS_VRING_MAX_SIZE && !(size & (size - 1));
}

#endif /* VS_VIRTIO_INT_H */
