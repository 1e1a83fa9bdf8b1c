/* SPDX-License-Identifier: MIT */
/*
 * Stateful fuzzing of a whole target: one input is a guest memory image and a sequence of
 * vhost-user messages, kicks, guest memory writes and shrinks, run against the real
 * device code: vs_vhost_dev (the protocol state machine) with the target's own ops, its
 * queues, workers, SCSI device and RAM/null LUNs, in the target's manual mode (no threads:
 * worker commands and passes run here, in order, so an input always does the same).
 * One-message fuzzing misses what only a sequence reaches: a memory table changed under
 * running rings, a ring restarted at a new base, a TMF for requests still in flight, memory
 * that shrinks between two passes.
 *
 * Input:
 *   [u16 le n][n bytes]   guest memory from offset 0 (MEM_SIZE bytes, the rest zeros)
 *   then operations, each one byte op and its operands:
 *     0x00-0x3f  a vhost-user message: [fd byte][12-byte header][payload of header.size];
 *                fd byte: low 4 bits how many fds, bit 6 eventfds, else bit 7 dups of the
 *                guest memfd, else /dev/null (the same as fuzz/vhost/fuzz_vhost_msg.c)
 *     0x40-0x7f  kick queue op & 7 and run passes until the target is quiet
 *     0x80-0xbf  write guest memory: [u16 le offset][u8 len][len bytes]
 *     0xc0-0xdf  shrink the guest memory file to ((op & 0x1f) << 12) bytes (the target's
 *                guard must turn its next access there into a dropped session)
 *     0xe0-0xff  run passes (completions)
 * A message the device refuses as the server would (a negative return), a worker failure
 * (tq_fail) or a memory fault ends the "connection": the session is reset, as the server
 * does, and the next operations start a new one.  Every fd handed over must be closed or
 * kept, every queue stopped and every request finished when the input ends.
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

#include "target/target_int.h"

#define MEM_SIZE  (256u << 10)
#define NQ	  (VS_VIRTIO_SCSI_VQ_REQ0 + 2)
#define MAX_PUMPS 16

static int memfd = -1;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	memfd = memfd_create("fuzz-guest", MFD_CLOEXEC);
	if (memfd < 0)
		__builtin_trap();
	return 0;
}

static void guest_reset(const uint8_t *image, size_t n)
{
	if (ftruncate(memfd, 0) < 0 || ftruncate(memfd, MEM_SIZE) < 0 ||
	    (n && pwrite(memfd, image, n, 0) != (ssize_t)n))
		__builtin_trap();
}

/* What the server does when a session ends. */
static void session_end(struct vs_target *t, struct vs_vhost_dev *d)
{
	vs_vhost_dev_reset(d);
	vs_target__ops.disconnected(t, "fuzz");
	vs_target__ops.connected(t);
}

/* Passes until nothing is left to look at (bounded: a guest can keep rings busy). */
static void settle(struct vs_target *t)
{
	vs_target__pump(t, MAX_PUMPS);
}

static bool session_failed(struct vs_target *t, struct vs_vhost_dev *d)
{
	char why[256];

	return vs_target__failed(t) || vs_vhost_dev_fault(d, why, sizeof(why));
}

/* One vhost-user message chunk; returns the bytes it took (0: not enough input). */
static size_t message(struct vs_target *t, struct vs_vhost_dev *d, const uint8_t *p, size_t left)
{
	struct vs_vhost_msg msg, reply;
	unsigned nfds;
	uint32_t psize;
	char why[VS_VHOST_WHY_LEN];
	int fds[16], rc;
	size_t len;

	if (left < 1 + VS_VHOST_HDR_SIZE)
		return 0;
	nfds = p[0] & 0x0f;
	memcpy(&psize, p + 1 + 8, 4);
	len = left - 1 - VS_VHOST_HDR_SIZE < psize ? left - 1 : VS_VHOST_HDR_SIZE + psize;
	for (unsigned i = 0; i < nfds; i++) {
		fds[i] = (p[0] & 0x40)	 ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)
			 : (p[0] & 0x80) ? dup(memfd)
					 : open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fds[i] < 0)
			__builtin_trap();
	}
	rc = vs_vhost_msg_parse(p + 1, len, fds, nfds, &msg, why, sizeof(why));
	if (rc) {
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]); /* parse never takes them on failure */
		if (rc == -EBADMSG)
			rc = vs_vhost_dev_reject(d, &msg, &reply);
	} else {
		rc = vs_vhost_dev_handle(d, &msg, &reply); /* consumes the fds */
	}
	if (rc == 1 && (reply.size > VS_VHOST_MAX_PAYLOAD || reply.nfds))
		__builtin_trap();
	if (vs_vhost_dev_wedged(d))
		__builtin_trap(); /* manual mode never times out a worker */
	if (rc < 0 || session_failed(t, d))
		session_end(t, d);
	return 1 + len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vs_target_lun luns[2] = {{0, "ram=1M"}, {1, "null=1M"}};
	struct vs_target_config cfg = {.num_queues = 2, .workers = 2, .nluns = 2, .luns = luns};
	int first_free_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	struct vs_target *t;
	struct vs_vhost_dev *d;
	size_t n;

	close(first_free_fd);
	if (size < 2)
		return 0;
	n = data[0] | (size_t)data[1] << 8;
	if (n > size - 2)
		n = size - 2;
	if (n > MEM_SIZE)
		n = MEM_SIZE;
	guest_reset(data + 2, n);
	data += 2 + n;
	size -= 2 + n;

	if (vs_target__create_manual(&t, &cfg))
		__builtin_trap();
	d = vs_vhost_dev_new(NQ, vs_target_device_features(), &vs_target__ops, t);
	if (!d)
		__builtin_trap();
	vs_target__ops.connected(t);

	while (size) {
		uint8_t op = data[0];
		size_t used = 1;

		if (op < 0x40) {
			used += message(t, d, data + 1, size - 1);
		} else if (op < 0x80) {
			unsigned q = op & 7;
			if (q < NQ && t->q[q].running)
				t->q[q].kicked = true;
			settle(t);
		} else if (op < 0xc0) {
			if (size < 4)
				break;
			uint16_t off = (uint16_t)(data[1] | data[2] << 8);
			uint8_t len = data[3];
			if (size - 4 < len)
				len = (uint8_t)(size - 4);
			if (pwrite(memfd, data + 4, len, off) != len)
				__builtin_trap();
			used = 4 + (size_t)len;
		} else if (op < 0xe0) {
			if (ftruncate(memfd, (off_t)(op & 0x1f) << 12) < 0)
				__builtin_trap();
		} else {
			settle(t);
		}
		if (session_failed(t, d))
			session_end(t, d);
		data += used;
		size -= used;
	}

	/* The end of the connection: every queue stops, every request completes. */
	vs_vhost_dev_free(d);
	for (unsigned i = 0; i < TQ_MAX; i++)
		if (t->q[i].running || t->q[i].inflight)
			__builtin_trap();
	vs_target_destroy(t);

	int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd != first_free_fd)
		__builtin_trap(); /* an fd handed to the target was neither kept nor closed */
	close(fd);
	return 0;
}
