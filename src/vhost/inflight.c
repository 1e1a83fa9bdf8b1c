/* SPDX-License-Identifier: MIT */
/*
 * In-flight tracking (vhost-user.rst "Inflight I/O tracking",
 * VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD): the frontend asks us for a region once (GET_INFLIGHT_FD:
 * we make a sealed memfd and keep it mapped), keeps it for the device's life, and hands it back to
 * every back-end that connects (SET_INFLIGHT_FD) -- a back-end restarted after a crash among them.
 * Each ring's part records what the ring took and has not answered (src/virtio/inflight.c); a ring
 * started with a part that shows requests in flight gives them out again first.
 *
 * The region handed back is the frontend's memory like guest memory: a memory file, guarded
 * against shrinking, and never believed before its ring checked its copy of it.  The workers
 * write into it while their rings run, so it is replaced or unmapped only with every ring
 * stopped.
 */
#define _GNU_SOURCE /* memfd_create, the seals */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "vhost/vhost_int.h"

#define FAIL(code, ...) vs_fail(why, whylen, code, __VA_ARGS__)

void vs_vhost_inflight_unmap(struct vs_vhost_dev *d)
{
	if (d->wedged)
		return; /* a queue may still write into it */
	vs_vhost_unmap_file(&d->inflight_map);
	if (d->inflight_fd >= 0)
		close(d->inflight_fd);
	d->inflight_fd = -1;
	free(d->inflight_scratch);
	d->inflight_scratch = NULL;
	d->inflight = NULL;
	d->inflight_queues = d->inflight_qsize = 0;
}

/* The shape both messages carry: a part for each of num_queues rings of up to queue_size. */
static int inflight_shape(const struct vs_vhost_dev *d, const struct vs_vhost_inflight *in,
			  const char *what, char *why, size_t whylen)
{
	if (!(d->protocol_features & (1ull << VS_VHOST_PROTOCOL_F_INFLIGHT_SHMFD)))
		return FAIL(-EINVAL, "%s before INFLIGHT_SHMFD was negotiated", what);
	if (in->num_queues == 0 || in->num_queues > d->max_queues)
		return FAIL(-EINVAL, "%s for %u queues: the device has 1..%u", what, in->num_queues,
			    d->max_queues);
	if (in->queue_size == 0 || in->queue_size > VS_VRING_MAX_SIZE ||
	    (in->queue_size & (in->queue_size - 1)))
		return FAIL(-EINVAL, "%s for rings of %u entries: not a power of two up to %u",
			    what, in->queue_size, VS_VRING_MAX_SIZE);
	for (unsigned i = 0; i < d->max_queues; i++)
		if (d->rings[i].running)
			return FAIL(-EBUSY, "%s while ring %u runs", what, i);
	return 0;
}

/* Make map (fd, size bytes) the region for num_queues rings of queue_size. */
static int inflight_install(struct vs_vhost_dev *d, struct vs_vhost_map *map, uint8_t *host, int fd,
			    uint16_t num_queues, uint16_t queue_size, char *why, size_t whylen)
{
	struct vs_inflight_entry *scratch =
	    calloc((size_t)num_queues * queue_size, sizeof(*scratch));

	if (!scratch) {
		vs_vhost_unmap_file(map);
		if (fd >= 0)
			close(fd);
		return FAIL(-ENOMEM, "no memory for the in-flight region's copy");
	}
	vs_vhost_inflight_unmap(d);
	d->inflight_map = *map;
	d->inflight = host;
	d->inflight_fd = fd;
	d->inflight_scratch = scratch;
	d->inflight_queues = num_queues;
	d->inflight_qsize = queue_size;
	return 0;
}

int vs_vhost_get_inflight_fd_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg,
				  struct vs_vhost_msg *reply, char *why, size_t whylen)
{
	const struct vs_vhost_inflight *in = &msg->payload.inflight;
	uint64_t size = (uint64_t)in->num_queues * VS_VHOST_INFLIGHT_RING_BYTES(in->queue_size);
	struct vs_vhost_mem_region r = {.memory_size = size};
	struct vs_vhost_map map = {.guard = -1};
	uint8_t *host;
	int fd, rc;

	if ((rc = inflight_shape(d, in, "GET_INFLIGHT_FD", why, whylen)))
		return rc;
	fd = memfd_create("vioscope-inflight", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return FAIL(-errno, "memfd_create: %s", strerror(errno));
	/* Sealed at its size: neither side can make the other's mapping fault. */
	if (ftruncate(fd, (off_t)size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		rc = -errno;
		close(fd);
		return FAIL(rc, "in-flight region of %#llx bytes: %s", (unsigned long long)size,
			    strerror(-rc));
	}
	if ((rc = vs_vhost_map_file(d, &r, fd, &map, &host, why, whylen))) {
		close(fd);
		return rc;
	}
	/* Zeroes: version 0, which each ring lays out when it starts. */
	if ((rc = inflight_install(d, &map, host, fd, in->num_queues, in->queue_size, why, whylen)))
		return rc;
	reply->size = sizeof(reply->payload.inflight);
	reply->payload.inflight = *in;
	reply->payload.inflight.mmap_size = size;
	reply->payload.inflight.mmap_offset = 0;
	reply->payload.inflight.padding = 0;
	reply->fds[0] = fd; /* still ours: sent, not closed, by the server */
	reply->nfds = 1;
	VS_INFO(VHOST, "in-flight region made: %u queues of up to %u entries, %#llx bytes",
		in->num_queues, in->queue_size, (unsigned long long)size);
	return 0;
}

int vs_vhost_set_inflight_fd_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, char *why,
				  size_t whylen)
{
	const struct vs_vhost_inflight *in = &msg->payload.inflight;
	uint64_t size = (uint64_t)in->num_queues * VS_VHOST_INFLIGHT_RING_BYTES(in->queue_size);
	struct vs_vhost_mem_region r = {.memory_size = size, .mmap_offset = in->mmap_offset};
	struct vs_vhost_map map = {.guard = -1};
	uint8_t *host;
	int rc;

	if ((rc = inflight_shape(d, in, "SET_INFLIGHT_FD", why, whylen)))
		return rc;
	if (in->mmap_size < size || in->mmap_offset > UINT64_MAX - size)
		return FAIL(-EINVAL,
			    "in-flight region of %#llx bytes at %#llx: %u queues of %u entries "
			    "need %#llx",
			    (unsigned long long)in->mmap_size, (unsigned long long)in->mmap_offset,
			    in->num_queues, in->queue_size, (unsigned long long)size);
	/* Its counters are u64s and its marks are stored atomically: at an offset that breaks
	 * their alignment every access would be a misaligned one (QEMU sends offset 0). */
	if (in->mmap_offset % _Alignof(struct vs_vhost_inflight_split))
		return FAIL(-EINVAL, "in-flight region at offset %#llx: not %zu-byte aligned",
			    (unsigned long long)in->mmap_offset,
			    _Alignof(struct vs_vhost_inflight_split));
	/* A memory file that holds the region now, guarded against shrinking later. */
	if ((rc = vs_vhost_map_file(d, &r, msg->fds[0], &map, &host, why, whylen)))
		return rc;
	if ((rc = inflight_install(d, &map, host, -1, in->num_queues, in->queue_size, why, whylen)))
		return rc;
	VS_INFO(VHOST, "in-flight region handed over: %u queues of up to %u entries",
		in->num_queues, in->queue_size);
	return 0;
}

int vs_vhost_inflight_ring(struct vs_vhost_dev *d, unsigned idx, uint32_t num,
			   struct vs_vhost_vring *vr, char *why, size_t whylen)
{
	if (!d->inflight || idx >= d->inflight_queues)
		return 0; /* not tracked (a frontend may keep fewer queues than the device has) */
	if (num > d->inflight_qsize)
		return FAIL(-EINVAL, "ring %u of %u entries: the in-flight region holds %u", idx,
			    num, d->inflight_qsize);
	vr->inflight =
	    (struct vs_vhost_inflight_split *)(d->inflight + idx * VS_VHOST_INFLIGHT_RING_BYTES(
								       d->inflight_qsize));
	vr->inflight_scratch = d->inflight_scratch + (size_t)idx * d->inflight_qsize;
	return 0;
}
