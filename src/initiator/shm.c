/* SPDX-License-Identifier: MIT */
/*
 * The one shared memory region the target sees (vhost-user allows few regions; one
 * memfd keeps SET_MEM_TABLE to a single entry).  Its "guest physical" addresses are
 * offsets into the region, its user addresses are our mapping.  Layout, all parts
 * cache-line aligned:
 *
 *   control ring | event ring | TMF req/resp | event buffers |
 *   per request queue: ring, then nslots slots (req hdr, resp hdr, UNMAP params, table) |
 *   data area (page aligned): scan buffer, then vs_ini_alloc chunks
 *
 * The layout is fixed at the first connection and reused by every reconnection.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "initiator/initiator_int.h"

static size_t align_up(size_t v, size_t a)
{
	return (v + a - 1) & ~(a - 1);
}

static size_t slot_stride(const struct vs_ini *ini)
{
	return align_up(SLOT_TABLE_OFF + 16u * (ini->seg_max + 2), 64);
}

static int queue_alloc(struct vs_ini *ini, struct vs_ini_queue *q, unsigned num)
{
	q->num = num;
	q->v.idx = VS_VIRTIO_SCSI_VQ_REQ0 + num;
	q->v.size = ini->queue_size;
	q->v.kick_fd = q->v.call_fd = -1;
	q->slots = calloc(ini->nslots, sizeof(*q->slots));
	q->free_slots = calloc(ini->nslots, sizeof(*q->free_slots));
	q->head_slot = calloc(ini->queue_size, sizeof(*q->head_slot));
	if (!q->slots || !q->free_slots || !q->head_slot || pthread_mutex_init(&q->lock, NULL))
		return -ENOMEM;
	q->ini = ini; /* marks the queue as fully built */
	return 0;
}

int ini_shm_create(struct vs_ini *ini)
{
	size_t off = 0, stride = slot_stride(ini), qring = vs_vq_drv_ring_bytes(ini->queue_size);
	size_t aux = align_up(vs_vq_drv_ring_bytes(INI_AUX_QSIZE), 64);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	int rc;

	ini->q = calloc(ini->nqueues, sizeof(*ini->q));
	if (!ini->q)
		return -ENOMEM;
	ini->ctl.idx = VS_VIRTIO_SCSI_VQ_CTRL;
	ini->evt.idx = VS_VIRTIO_SCSI_VQ_EVENT;
	ini->ctl.size = ini->evt.size = INI_AUX_QSIZE;
	ini->ctl.kick_fd = ini->ctl.call_fd = ini->evt.kick_fd = ini->evt.call_fd = -1;
	ini->ctl.ring = (void *)(uintptr_t)off; /* offsets for now, pointers below */
	off += aux;
	ini->evt.ring = (void *)(uintptr_t)off;
	off += aux;
	ini->tmf_gpa = off;
	off += 64;
	ini->evt_gpa = off;
	off += align_up(INI_EVENTS * sizeof(struct vs_virtio_scsi_event), 64);
	for (unsigned i = 0; i < ini->nqueues; i++) {
		struct vs_ini_queue *q = &ini->q[i];

		if ((rc = queue_alloc(ini, q, i))) {
			VS_ERROR(MEMORY, "queue %u: no memory for %u slots", i, ini->nslots);
			return rc;
		}
		q->v.ring = (void *)(uintptr_t)off;
		off = align_up(off + qring, 64);
		for (unsigned s = 0; s < ini->nslots; s++) {
			q->slots[s].gpa = off;
			off += stride;
		}
	}
	ini->data_off = align_up(off, page);
	ini->size = align_up(ini->data_off + INI_SCAN_BUF + ini->opts.data_mem, page);

	ini->memfd = memfd_create("vioscope-initiator", MFD_CLOEXEC);
	if (ini->memfd < 0) {
		rc = -errno;
		VS_ERROR(MEMORY, "memfd_create: %s", strerror(errno));
		return rc;
	}
	if (ftruncate(ini->memfd, (off_t)ini->size) < 0) {
		rc = -errno;
		VS_ERROR(MEMORY, "ftruncate memfd to %zu bytes: %s", ini->size, strerror(errno));
		return rc;
	}
	/* Populated up front: no page fault ever lands on the I/O path. */
	ini->base =
	    mmap(NULL, ini->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, ini->memfd, 0);
	if (ini->base == MAP_FAILED) {
		rc = -errno;
		ini->base = NULL;
		VS_ERROR(MEMORY, "mmap %zu bytes of the memfd: %s", ini->size, strerror(errno));
		return rc;
	}
	ini->ctl.ring = ini->base + (uintptr_t)ini->ctl.ring;
	ini->evt.ring = ini->base + (uintptr_t)ini->evt.ring;
	for (unsigned i = 0; i < ini->nqueues; i++) {
		struct vs_ini_queue *q = &ini->q[i];

		q->v.ring = ini->base + (uintptr_t)q->v.ring;
		for (unsigned s = 0; s < ini->nslots; s++) {
			struct ini_slot *sl = &q->slots[s];
			uint8_t *p = ini->base + sl->gpa;

			sl->req = (void *)(p + SLOT_REQ_OFF);
			sl->resp = (void *)(p + SLOT_RESP_OFF);
			sl->param = p + SLOT_PARAM_OFF;
			sl->table = p + SLOT_TABLE_OFF;
		}
	}
	ini->alloc_next = ini->data_off;
	ini->scan_buf = vs_ini_alloc(ini, INI_SCAN_BUF, page);
	VS_INFO(MEMORY,
		"shared region: memfd %d, %zu bytes at %p (rings and %u slots x %u queues "
		"of %zu bytes, data from offset %#zx)",
		ini->memfd, ini->size, ini->base, ini->nslots, ini->nqueues, stride, ini->data_off);
	return 0;
}

void ini_shm_destroy(struct vs_ini *ini)
{
	for (unsigned i = 0; ini->q && i < ini->nqueues; i++) {
		struct vs_ini_queue *q = &ini->q[i];

		vs_vq_drv_destroy(&q->v.vq);
		free(q->slots);
		free(q->free_slots);
		free(q->head_slot);
		if (q->ini)
			pthread_mutex_destroy(&q->lock);
	}
	free(ini->q);
	ini->q = NULL;
	vs_vq_drv_destroy(&ini->ctl.vq);
	vs_vq_drv_destroy(&ini->evt.vq);
	if (ini->base)
		munmap(ini->base, ini->size);
	if (ini->memfd >= 0)
		close(ini->memfd);
	if (ini->log_fd >= 0)
		close(ini->log_fd);
	ini->base = NULL;
	ini->memfd = ini->log_fd = -1;
}

void *vs_ini_alloc(struct vs_ini *ini, size_t size, size_t align)
{
	void *p = NULL;
	size_t at;

	if (!align)
		align = 64;
	if (align & (align - 1) || !size) {
		VS_ERROR(MEMORY, "alloc %zu bytes aligned %zu: %s", size, align,
			 !size ? "zero size" : "alignment not a power of two");
		return NULL;
	}
	pthread_mutex_lock(&ini->alloc_lock);
	at = align_up(ini->alloc_next, align);
	if (at >= ini->alloc_next && at <= ini->size && size <= ini->size - at) {
		p = ini->base + at;
		ini->alloc_next = at + size;
	}
	pthread_mutex_unlock(&ini->alloc_lock);
	if (!p)
		VS_ERROR(MEMORY, "alloc %zu bytes: shared data area exhausted (%zu of %zu used)",
			 size, ini->alloc_next - ini->data_off, ini->size - ini->data_off);
	else
		VS_VERBOSE(MEMORY, "alloc %zu bytes at offset %#zx", size, (size_t)(at));
	return p;
}
