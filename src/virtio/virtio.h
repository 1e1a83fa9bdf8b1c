/* SPDX-License-Identifier: MIT */
/*
 * virtio layer: guest memory map, split virtqueue (device side and driver side),
 * virtio feature bits and (in virtio_scsi.h, included at the end) the virtio-scsi
 * wire structures.  Spec: virtio 1.2, "Split Virtqueues" and "SCSI Host Device".
 *
 * Everything the other side of a ring writes is hostile: every index, length and
 * address read from shared memory is read once into a local and validated before use.
 * Lower layer: depends on trace only.  Not thread-safe: one thread owns a queue.
 */
#ifndef VS_VIRTIO_H
#define VS_VIRTIO_H

#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#include <vioscope/trace.h>

#include "proto/vhost_proto.h" /* the in-flight region's layout */
#include "proto/virtio_proto.h"

#include "util/util.h" /* vs_iov_to_buf() and friends for the iovecs popped here */

/* ---- guest memory map ------------------------------------------------------------------ */
#define VS_MEM_MAX_REGIONS 8 /* vhost-user's default max_mem_slots */

struct vs_mem_region {
	uint64_t gpa;  /* guest-physical start */
	uint64_t size; /* bytes, > 0 */
	uint64_t uva;  /* the frontend's user address of the start (vring addresses use these) */
	uint8_t *host; /* our mapping of the start */
};

struct vs_mem {
	unsigned nregions;
	struct vs_mem_region regions[VS_MEM_MAX_REGIONS];
};

/* Empty the map (mappings are the caller's to unmap). */
void vs_mem_reset(struct vs_mem *m);
/* Append a region: -EINVAL if size is 0, gpa/uva + size wraps, or it overlaps another
 * region's gpa or uva range; -ENOSPC when full. */
int vs_mem_add(struct vs_mem *m, uint64_t gpa, uint64_t size, uint64_t uva, void *host);
/* Host pointer for [gpa, gpa + len) iff it lies inside ONE region, else NULL.  Overflow
 * safe.  len 0 is looked up as len 1 (the address must still be inside a region). */
void *vs_mem_gpa(const struct vs_mem *m, uint64_t gpa, uint64_t len);
/* The same for the frontend's user addresses. */
void *vs_mem_uva(const struct vs_mem *m, uint64_t uva, uint64_t len);
/* Map [gpa, gpa + len) into iovecs, one per region crossed.  Returns the number used (0 for
 * len 0), -EFAULT if any byte is outside every region, -ENOBUFS if more than max_iov needed. */
int vs_mem_gpa_iov(const struct vs_mem *m, uint64_t gpa, uint64_t len, struct iovec *iov,
		   int max_iov);

/* ---- dirty-page log (live migration) ------------------------------------------------------ */
#define VS_LOG_PAGE 4096u
#define VS_LOG_NONE UINT64_MAX /* no guest address: the used ring is not logged */

/* The frontend's log of the guest pages we wrote while it migrates the guest (dirty_log.c):
 * one bit per VS_LOG_PAGE of guest-physical memory, set atomically. */
struct vs_dirty_log {
	uint8_t *bits;		  /* shared with the frontend */
	uint64_t bytes;		  /* the log covers bytes * 8 pages */
	const struct vs_mem *mem; /* to turn host pointers back into guest addresses */
	bool skip_data_in;	  /* test only (VIOSCOPE_TEST_SKIP_DATA_IN_LOG): data-in unlogged */
	uint64_t outside;	  /* writes that could not be marked (atomic): beyond the log */
};

/* ---- device-side split virtqueue (the target) -------------------------------------------- */
#define VS_VQ_MAX_SEGS	      258		   /* per direction: 256 data + header + response */
#define VS_VQ_MAX_INDIRECT    1024		   /* entries in one indirect table (fixed cap) */
#define VS_VQ_MAX_CHAIN_BYTES ((64u << 20) + 4096) /* readable + writable bytes of one chain */

struct vs_vq_dev {
	unsigned size;		    /* power of 2, <= VS_VRING_MAX_SIZE */
	unsigned qid;		    /* queue number, for traces only (caller sets it) */
	struct vs_vring_desc *desc; /* host pointers, validated by the caller (see init) */
	struct vs_vring_avail *avail;
	struct vs_vring_used *used;
	uint16_t last_avail_idx;   /* next avail entry to pop */
	uint16_t shadow_avail_idx; /* avail->idx as last read */
	uint16_t used_idx;	   /* next used entry to fill (published by flush) */
	uint16_t signalled_used;   /* used idx at the last should_notify() */
	bool signalled_used_valid; /* false until the first should_notify() */
	bool event_idx;		   /* VS_VIRTIO_F_EVENT_IDX negotiated */
	bool indirect;		   /* VS_VIRTIO_F_INDIRECT_DESC negotiated */
	bool notify_enabled;	   /* see vs_vq_dev_set_notification() */
	bool broken;		   /* ring structure is corrupt: no further pops */
	const char *broken_reason; /* static string, set with broken */
	struct vs_dirty_log *log;  /* NULL unless the frontend is migrating the guest */
	uint64_t log_used_gpa;	   /* the used ring's guest address, or VS_LOG_NONE */
	/* In-flight tracking (vs_vq_dev_set_inflight), NULL when the frontend keeps no region. */
	struct vs_vhost_inflight_split *inflight; /* shared with the frontend */
	uint64_t inflight_counter;		  /* the next head's order number */
	uint16_t inflight_batch_head;		  /* our copy of last_batch_head */
	uint16_t inflight_used_idx;		  /* our copy of the region's used_idx */
	const struct vs_inflight_entry *resubmit; /* taken before a restart, oldest first */
	unsigned resubmit_num, resubmit_next;	  /* entries; the next to give out */
};

/* One request a restarted device found in flight (vs_vq_dev_set_inflight). */
struct vs_inflight_entry {
	uint64_t counter;
	uint16_t head;
};

/* One popped chain.  out[] is device-readable, in[] device-writable, in chain order.  A
 * descriptor crossing adjacent memory regions takes several iovecs. */
struct vs_vq_elem {
	uint16_t head; /* give back with vs_vq_dev_push(vq, head, len) */
	bool bad;      /* the chain is invalid; counts/iovecs below are empty */
	unsigned out_num, in_num;
	uint64_t out_len, in_len; /* bytes */
	struct iovec out[VS_VQ_MAX_SEGS], in[VS_VQ_MAX_SEGS];
};

/* desc/avail/used must cover vs_vring_*_bytes(size) of mapped memory (the caller checked
 * them against the memory map) and be 16/2/4-byte aligned.  used_idx is read from used->idx.
 * -EINVAL on a bad size, NULL or misaligned pointer. */
int vs_vq_dev_init(struct vs_vq_dev *vq, unsigned size, void *desc, void *avail, void *used,
		   bool event_idx, bool indirect, uint16_t last_avail_idx);
/* Log this ring's writes to guest memory into log (NULL: stop); used_gpa: where the used ring
 * is, or VS_LOG_NONE when its writes are not to be logged.  Set while the ring is not served. */
void vs_vq_dev_set_log(struct vs_vq_dev *vq, struct vs_dirty_log *log, uint64_t used_gpa);
void vs_vq_dev__log_written(struct vs_vq_dev *vq, const struct vs_vq_elem *e, size_t hdr);
void vs_vq_dev__log_used(struct vs_vq_dev *vq);
/* The device wrote (some of) e's writable buffers: while logging, mark them all (a read that
 * failed half-way wrote part of its data too).  Call before the chain is filled into the used
 * ring.  hdr: the bytes of response header, the only ones a test-only switch still logs.  Off
 * the migration, one predictable branch. */
static inline void vs_vq_dev_log_written(struct vs_vq_dev *vq, const struct vs_vq_elem *e,
					 size_t hdr)
{
	if (__builtin_expect(vq->log != NULL, 0))
		vs_vq_dev__log_written(vq, e, hdr);
}

/* Track what this ring takes and returns in the frontend's in-flight region (vhost-user's
 * INFLIGHT_SHMFD), and first recover from it: after init (last_avail_idx from SET_VRING_BASE),
 * before the ring is served.  A fresh region (version 0) is laid out for this ring.  Otherwise
 * the requests the region shows taken and never used are given out again by the next pops,
 * oldest first, exactly once, before anything new, and the ring resumes at used->idx plus their
 * number (what a device that crashed had consumed).  The region comes from the frontend: it is
 * read once into scratch (size entries, the caller's, kept until the ring stops) and refused
 * (-EPROTO, why says why) when it cannot be true: another ring size or version, a last batch
 * longer than the ring or through a head beyond it, more in flight than the ring holds.
 * Off the tracking, pop/fill/flush pay one predictable branch each. */
int vs_vq_dev_set_inflight(struct vs_vq_dev *vq, struct vs_vhost_inflight_split *region,
			   struct vs_inflight_entry *scratch, char *why, size_t whylen);
void vs_vq_dev__inflight_take(struct vs_vq_dev *vq, uint16_t head);
void vs_vq_dev__inflight_fill(struct vs_vq_dev *vq, uint16_t head);
void vs_vq_dev__inflight_flush(struct vs_vq_dev *vq);

/* Pop the next chain.  Returns:
 *   0        elem is a valid chain.
 *   -EAGAIN  nothing available.
 *   -EIO     the queue is broken (now or before; reason in vq->broken_reason): avail idx ran
 *            more than size ahead, a head or a next index >= size, or a loop in the descriptor
 *            table.  elem is undefined; the queue needs a reset.
 *   other    the chain is bad but its head is valid: elem->bad = true, elem->head set, no
 *            iovecs; the caller must give it back (vs_vq_dev_push(vq, head, 0)).
 *            -EFAULT an address range outside guest memory; -EINVAL bad layout (readable
 *            after writable, INDIRECT not negotiated / with NEXT / nested / not at the head,
 *            indirect length not a non-zero multiple of 16 or > VS_VQ_MAX_INDIRECT entries,
 *            next index or loop inside an indirect table); -E2BIG more than
 *            VS_VQ_MAX_CHAIN_BYTES; -ENOBUFS more than VS_VQ_MAX_SEGS iovecs in a direction.
 * With EVENT_IDX and notifications enabled, avail_event follows last_avail_idx. */
int vs_vq_dev_pop(struct vs_vq_dev *vq, const struct vs_mem *mem, struct vs_vq_elem *elem);
/* Return a chain: fill one used entry and publish used->idx (release).  fill + flush batch
 * several completions behind one used->idx store. */
void vs_vq_dev_push(struct vs_vq_dev *vq, uint16_t head, uint32_t len);
void vs_vq_dev_fill(struct vs_vq_dev *vq, uint16_t head, uint32_t len);
void vs_vq_dev_flush(struct vs_vq_dev *vq);
/* After pushing: must the driver be interrupted?  EVENT_IDX: vs_vring_need_event(used_event,
 * used idx, used idx at the previous call); else !(avail->flags & NO_INTERRUPT).  Includes
 * the full barrier between the used->idx store and reading the driver's fields. */
bool vs_vq_dev_should_notify(struct vs_vq_dev *vq);
/* Ask for (or stop asking for) kicks.  EVENT_IDX: enable writes avail_event = last_avail_idx,
 * disable stops updating it; else used->flags NO_NOTIFY.  Enabling ends with a full barrier:
 * re-check vs_vq_dev_has_work() afterwards, a kick for work already there is not sent. */
void vs_vq_dev_set_notification(struct vs_vq_dev *vq, bool enable);
/* Entries available and not yet popped (reads avail->idx; 0 when broken). */
unsigned vs_vq_dev_avail_count(struct vs_vq_dev *vq);
/* clang-format off */
static inline bool vs_vq_dev_has_work(struct vs_vq_dev *vq) { return vs_vq_dev_avail_count(vq); }
/* clang-format on */

/* Drain a ring the way every queue of a device does (Linux's virtscsi_vq_done, from the
 * device's side): with kicks off, call handle(opaque) until it reports the ring empty or
 * `budget` chains are handled; then, unless `polled` (a polled ring never wants kicks),
 * ask for kicks again and look once more, because a chain made available before the
 * driver saw the re-enable sent no kick.
 * handle() pops and answers one chain: 1 handled, 0 the ring is empty, < 0 stop now.
 * Returns 0 when the ring is empty (kicks re-armed unless polled), 1 when the budget ran
 * out with work left (call again after other work), or handle()'s negative code.
 * Inline, so that handle() is inlined into the loop. */
static inline __attribute__((always_inline)) int vs_vq_dev_drain(struct vs_vq_dev *vq,
								 unsigned budget, bool polled,
								 int (*handle)(void *opaque),
								 void *opaque)
{
	if (!polled)
		vs_vq_dev_set_notification(vq, false);
	for (;;) {
		int rc;

		while (budget && (rc = handle(opaque)) > 0)
			budget--;
		if (!budget)
			return 1;
		if (rc < 0)
			return rc;
		if (polled)
			return 0;
		vs_vq_dev_set_notification(vq, true);
		if (!vs_vq_dev_has_work(vq))
			return 0;
		vs_vq_dev_set_notification(vq, false);
	}
}

/* ---- driver-side split virtqueue (the initiator) ----------------------------------------- */
struct vs_vq_buf {
	uint64_t addr; /* as the device translates it (e.g. an offset into shared memory) */
	uint32_t len;
	bool write; /* device-writable; all readable buffers must come first */
};

struct vs_vq_drv {
	unsigned size;		    /* power of 2, <= VS_VRING_MAX_SIZE */
	unsigned qid;		    /* for traces only */
	struct vs_vring_desc *desc; /* laid out by init in the caller's memory */
	struct vs_vring_avail *avail;
	struct vs_vring_used *used; /* written by the device: validated on read */
	uint16_t free_head;	    /* first free descriptor */
	unsigned num_free;
	uint16_t avail_idx;	   /* next avail entry (published at once) */
	uint16_t kicked_avail_idx; /* avail idx at the last should_kick() */
	uint16_t last_used_idx;	   /* next used entry to read */
	bool event_idx, indirect;  /* negotiated */
	bool cb_enabled;	   /* see vs_vq_drv_enable_cb() */
	bool broken;		   /* the device wrote a bad used ring */
	const char *broken_reason;
	uint16_t *next;	     /* private free list / chain links (not the shared table) */
	uint16_t *chain_len; /* per head: descriptors in flight, 0 = free */
	uint32_t *in_cap;    /* per head: device-writable bytes, to check used.len */
};

/* Bytes of ring memory for `size` (desc | avail | used, used 64-byte aligned). */
size_t vs_vq_drv_ring_bytes(unsigned size);
/* Lay the ring out in `mem` (16-byte aligned, vs_vq_drv_ring_bytes(size), zeroed here) and
 * allocate the private state.  -EINVAL, -ENOMEM. */
int vs_vq_drv_init(struct vs_vq_drv *vq, unsigned size, void *mem, bool event_idx, bool indirect);
void vs_vq_drv_destroy(struct vs_vq_drv *vq);
/* Add a chain of n buffers and publish it (release).  Direct: takes n descriptors.  Indirect:
 * table (host pointer, n * 16 bytes, caller-owned until the chain is used) seen by the device
 * at table_addr; takes one descriptor.  *head identifies the chain.  -EINVAL (n 0 or too big,
 * readable after writable, indirect not negotiated), -ENOSPC (not enough free descriptors). */
#define vs_vq_drv_add(vq, bufs, n, head) vs_vq_drv_add_indirect(vq, bufs, n, NULL, 0, head)
int vs_vq_drv_add_indirect(struct vs_vq_drv *vq, const struct vs_vq_buf *bufs, unsigned n,
			   void *table, uint64_t table_addr, uint16_t *head);
/* Must the device be kicked for what was added since the last call?  Full barrier inside. */
bool vs_vq_drv_should_kick(struct vs_vq_drv *vq);
/* Take one used chain: 0 with *head, *len; -EAGAIN none; -EIO broken (used idx runaway, id
 * >= size or not in flight, len > the chain's writable bytes). */
int vs_vq_drv_get_used(struct vs_vq_drv *vq, uint16_t *head, uint32_t *len);
bool vs_vq_drv_has_used(struct vs_vq_drv *vq);
/* used->idx as the device last published it (acquire), unchecked: a look for "anything
 * new?" that need not own the queue.  `used` is vq->used, which such a caller keeps a copy
 * of, fixed once the ring is laid out (vs_vq_drv_init rewrites vq itself). */
static inline uint16_t vs_vq_drv_used_idx(const struct vs_vring_used *used)
{
	return vs_le16(__atomic_load_n(&used->idx, __ATOMIC_ACQUIRE));
}
/* Interrupt suppression.  EVENT_IDX: enable writes used_event = last_used_idx, disable stops
 * updating it; else avail->flags NO_INTERRUPT.  Enabling ends with a full barrier: re-check
 * vs_vq_drv_has_used() afterwards. */
void vs_vq_drv_enable_cb(struct vs_vq_drv *vq, bool enable);

#endif /* VS_VIRTIO_H */
