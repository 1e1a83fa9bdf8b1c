/* SPDX-License-Identifier: MIT */
/*
 * Test helper: a fake guest.  One malloc'd buffer is mapped as three regions:
 *   A  gpa 0x00000-0x10000  host +0x00000  (rings, indirect tables, small buffers)
 *   B  gpa 0x10000-0x20000  host +0x30000  (adjacent to A in gpa, not in host memory)
 *   C  gpa 0x80000-0x90000  host +0x10000  (after a gap)
 * so gpa->host translation errors and region crossings show up.  A device-side queue of
 * QSIZE entries has its rings in A.
 */
#ifndef TESTS_VIRTIO_GUEST_H
#define TESTS_VIRTIO_GUEST_H

#include <stdlib.h>

#include "virtio/virtio.h"

#define GUEST_BYTES 0x40000
#define GPA_A	    0x00000ull
#define GPA_B	    0x10000ull
#define GPA_C	    0x80000ull
#define REGION_SIZE 0x10000ull
#define QSIZE	    16
#define GPA_DESC    0x1000ull
#define GPA_AVAIL   0x2000ull
#define GPA_USED    0x3000ull
#define GPA_IND	    0x4000ull /* indirect tables: 0x4000-0x8000 */
#define GPA_DATA    0x8000ull /* small buffers in A */

struct guest {
	uint8_t *buf;
	struct vs_mem mem;
	struct vs_vring_avail *avail;
	struct vs_vring_used *used;
	uint16_t avail_idx;
};

static inline void *gva(struct guest *g, uint64_t gpa)
{
	return vs_mem_gpa(&g->mem, gpa, 1);
}

static inline int guest_init(struct guest *g)
{
	memset(g, 0, sizeof(*g));
	g->buf = calloc(1, GUEST_BYTES);
	if (!g->buf)
		return -1;
	if (vs_mem_add(&g->mem, GPA_A, REGION_SIZE, 0x7f0000000000ull, g->buf) ||
	    vs_mem_add(&g->mem, GPA_B, REGION_SIZE, 0x7f0000010000ull, g->buf + 0x30000) ||
	    vs_mem_add(&g->mem, GPA_C, REGION_SIZE, 0x7f0000080000ull, g->buf + 0x10000))
		return -1;
	g->avail = gva(g, GPA_AVAIL);
	g->used = gva(g, GPA_USED);
	return 0;
}

static inline void guest_fini(struct guest *g)
{
	free(g->buf);
}

/* Write descriptor i of the table at table_gpa. */
static inline void guest_desc(struct guest *g, uint64_t table_gpa, unsigned i, uint64_t addr,
			      uint32_t len, uint16_t flags, uint16_t next)
{
	uint8_t *p = gva(g, table_gpa + 16ull * i);
	vs_st_le64(p, addr);
	vs_st_le32(p + 8, len);
	vs_st_le16(p + 12, flags);
	vs_st_le16(p + 14, next);
}

/* Make head available (the driver's side of the protocol). */
static inline void guest_avail(struct guest *g, uint16_t head)
{
	g->avail->ring[g->avail_idx % QSIZE] = vs_le16(head);
	g->avail_idx++;
	__atomic_store_n(&g->avail->idx, vs_le16(g->avail_idx), __ATOMIC_RELEASE);
}

static inline int guest_vq_init(struct guest *g, struct vs_vq_dev *vq, bool event_idx,
				bool indirect)
{
	return vs_vq_dev_init(vq, QSIZE, gva(g, GPA_DESC), g->avail, g->used, event_idx, indirect,
			      0);
}

#endif /* TESTS_VIRTIO_GUEST_H */
