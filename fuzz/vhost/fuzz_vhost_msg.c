/* SPDX-License-Identifier: MIT */
/*
 * Fuzz the vhost-user codec and device state machine together, without a socket.
 *
 * Input: a stream of chunks, each [fd byte][12-byte header][payload of header.size bytes].
 * The fd byte's low 4 bits give how many fds ride along (0..15; more than 8 is a framing
 * error); bits 6-7 pick their kind: bit 6 an eventfd (what kick, call and err fds must
 * be), else bit 7 a dup of a 1 MiB memfd (so memory tables can map and rings can start),
 * else /dev/null (which must be refused); the memfd is the dirty log too (SET_LOG_BASE).
 * Every chunk is parsed; valid
 * ones go through vs_vhost_dev_handle(), invalid ones through _reject().  A dropped
 * "connection" resets the session, as the server does.  Started rings are touched end to
 * end, so a translation that escapes the mapping crashes; fd leaks trap.
 */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vhost/vhost_dev.h"

#define MEM_SIZE 0x100000

static int memfd = -1;

static void touch(const void *p, uint64_t len)
{
	const volatile uint8_t *b = p;
	(void)b[0];
	(void)b[len - 1];
}

static int fz_start(void *opaque, unsigned idx, const struct vs_vhost_vring *vr)
{
	(void)opaque;
	if (idx != vr->index || !vr->size || (vr->size & (vr->size - 1)) || !vr->mem)
		__builtin_trap();
	touch(vr->desc, vs_vring_desc_bytes(vr->size));
	touch(vr->avail, vs_vring_avail_bytes(vr->size));
	touch(vr->used, vs_vring_used_bytes(vr->size));
	/* Dirty logging: the whole log is mapped, and a used ring's log address has its bits. */
	if (vr->log) {
		if (!vr->log->bits || !vr->log->bytes || vr->log->mem != vr->mem)
			__builtin_trap();
		touch(vr->log->bits, vr->log->bytes);
		if (vr->log_used_gpa != VS_LOG_NONE &&
		    (vr->log_used_gpa + vs_vring_used_bytes(vr->size) - 1) / VS_LOG_PAGE / 8 >=
			vr->log->bytes)
			__builtin_trap();
	} else if (vr->log_used_gpa != VS_LOG_NONE) {
		__builtin_trap();
	}
	return idx == 3 ? -EIO : 0; /* one queue refuses to start: exercise that path */
}

static int fz_stop(void *opaque, unsigned idx, uint16_t *last)
{
	(void)opaque;
	*last = (uint16_t)(*last + idx);
	return 0;
}

static void fz_mem(void *opaque, const struct vs_mem *mem)
{
	(void)opaque;
	for (unsigned i = 0; i < mem->nregions; i++)
		touch(mem->regions[i].host, mem->regions[i].size);
}

static const struct vs_vhost_dev_ops fz_ops = {
    .queue_start = fz_start,
    .queue_stop = fz_stop,
    .mem_changed = fz_mem,
};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = memfd_create("fuzz-guest", MFD_CLOEXEC);
	if (memfd < 0 || ftruncate(memfd, MEM_SIZE) < 0)
		__builtin_trap();
	return 0;
}

static void close_all(const int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		close(fds[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vs_vhost_dev *d =
	    vs_vhost_dev_new(4, (1ull << 32) | (1ull << 29) | (1ull << 28), &fz_ops, NULL);
	struct vs_vhost_msg msg, reply;
	char why[192];
	int first_free_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);

	close(first_free_fd);
	if (!d)
		__builtin_trap();
	while (size >= 1 + VS_VHOST_HDR_SIZE) {
		unsigned nfds = data[0] & 0x0f;
		bool use_mem = data[0] & 0x80, use_event = data[0] & 0x40;
		uint32_t psize;
		int fds[16];
		size_t len;

		data++;
		size--;
		memcpy(&psize, data + 8, 4);
		/* A chunk claiming more than is left is parsed truncated (and refused). */
		len = size - VS_VHOST_HDR_SIZE < psize ? size : VS_VHOST_HDR_SIZE + psize;
		for (unsigned i = 0; i < nfds; i++) {
			fds[i] = use_event ? eventfd(0, EFD_CLOEXEC)
				 : use_mem ? dup(memfd)
					   : open("/dev/null", O_RDWR | O_CLOEXEC);
			if (fds[i] < 0)
				__builtin_trap();
		}
		int rc = vs_vhost_msg_parse(data, len, fds, nfds, &msg, why, sizeof(why));
		if (rc) {
			close_all(fds, nfds); /* parse never takes them on failure */
			if (rc == -EBADMSG)
				rc = vs_vhost_dev_reject(d, &msg, &reply);
		} else {
			rc = vs_vhost_dev_handle(d, &msg, &reply); /* consumes the fds */
		}
		if (rc == 1 && (reply.size > VS_VHOST_MAX_PAYLOAD || reply.nfds))
			__builtin_trap();
		if (rc < 0)
			vs_vhost_dev_reset(d); /* the server would drop the connection */
		data += len;
		size -= len;
	}
	vs_vhost_dev_free(d);

	/* Everything handed to the layer must have been kept or closed: no fd leaks. */
	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd != first_free_fd)
		__builtin_trap();
	close(fd);
	return 0;
}
