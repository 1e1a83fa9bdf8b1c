/* SPDX-License-Identifier: MIT */
/*
 * The dirty-page log of a live migration (vhost-user docs/interop/vhost-user.rst, "Migration"):
 * a bitmap the frontend shares with us, one bit per 4 KiB page of guest-physical memory, bit
 * (page % 8) of byte (page / 8) (QEMU's u64 words, little-endian).  The frontend fetches and
 * clears it while we set it, so every mark is an atomic OR, made after the write it reports:
 * a page marked before its data lands could be copied and cleared in between, and the data
 * would never reach the destination.
 */
#include "virtio/virtio_int.h"

/* Mark [gpa, gpa + len): false when some of it lies beyond the log (nothing marked there). */
static bool log_range(struct vs_dirty_log *l, uint64_t gpa, uint64_t len)
{
	uint64_t first, last;

	if (!len)
		return true;
	first = gpa / VS_LOG_PAGE;
	last = (gpa + len - 1) / VS_LOG_PAGE;
	if (gpa + len - 1 < gpa || last / 8 >= l->bytes) {
		__atomic_fetch_add(&l->outside, 1, __ATOMIC_RELAXED);
		return false;
	}
	/* Release: whoever sees the bit sees the data written before it (QEMU fetches the bits
	 * with an atomic exchange, then copies the page). */
	for (uint64_t p = first; p <= last; p++)
		__atomic_fetch_or(&l->bits[p / 8], (uint8_t)(1u << (p % 8)), __ATOMIC_RELEASE);
	return true;
}

/* A host pointer into guest memory back to its guest address (iovecs never cross regions:
 * vs_mem_gpa_iov splits them). */
static void log_host(struct vs_dirty_log *l, const uint8_t *p, size_t len)
{
	const struct vs_mem *m = l->mem;

	for (unsigned i = 0; i < m->nregions; i++) {
		const struct vs_mem_region *r = &m->regions[i];
		if (p >= r->host && (uint64_t)(p - r->host) < r->size) {
			uint64_t off = (uint64_t)(p - r->host);
			log_range(l, r->gpa + off, len < r->size - off ? len : r->size - off);
			return;
		}
	}
	__atomic_fetch_add(&l->outside, 1, __ATOMIC_RELAXED);
}

/* Mark the pages behind the first limit bytes of iovecs into l->mem. */
static void log_iov(struct vs_dirty_log *l, const struct iovec *iov, unsigned n, size_t limit)
{
	for (unsigned i = 0; i < n && limit; i++) {
		size_t len = iov[i].iov_len < limit ? iov[i].iov_len : limit;
		log_host(l, iov[i].iov_base, len);
		limit -= len;
	}
}

/* The whole used ring: flags, index, entries and avail_event (1 or 2 pages for a ring of up to
 * 256 entries; marking them all is cheaper than tracking which entries a flush wrote). */
void vs_vq_dev__log_used(struct vs_vq_dev *vq)
{
	if (vq->log_used_gpa != VS_LOG_NONE)
		log_range(vq->log, vq->log_used_gpa, vs_vring_used_bytes(vq->size));
}

void vs_vq_dev__log_written(struct vs_vq_dev *vq, const struct vs_vq_elem *e, size_t hdr)
{
	log_iov(vq->log, e->in, e->in_num, vq->log->skip_data_in ? hdr : SIZE_MAX);
}

void vs_vq_dev_set_log(struct vs_vq_dev *vq, struct vs_dirty_log *log, uint64_t used_gpa)
{
	vq->log = log;
	vq->log_used_gpa = log ? used_gpa : VS_LOG_NONE;
	if (log)
		VS_INFO(QUEUE, "vq %u: dirty logging on (used ring at gpa %#llx%s)", vq->qid,
			(unsigned long long)used_gpa,
			used_gpa == VS_LOG_NONE ? ": not logged" : "");
}
