/* SPDX-License-Identifier: MIT */
/*
 * The stateful fuzzers' common harness: see session.h.  A message the device refuses as
 * the server would (a negative return), a worker failure (tq_fail) or a memory fault ends
 * the "connection": the session is reset, as the server does, and the next operations
 * start a new one.  Every fd handed over must be closed or kept, every queue stopped and
 * every request finished when the input ends.
 */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "session.h"

#define MAX_PUMPS 16

static int memfd = -1;

void fz_session_init(void)
{
	memfd = memfd_create("fuzz-guest", MFD_CLOEXEC);
	if (memfd < 0)
		__builtin_trap();
}

static void guest_reset(const uint8_t *image, size_t n)
{
	if (ftruncate(memfd, 0) < 0 || ftruncate(memfd, FZ_MEM_SIZE) < 0 ||
	    (n && pwrite(memfd, image, n, 0) != (ssize_t)n))
		__builtin_trap();
}

/* What the server does when a session ends. */
static void session_end(struct fz_session *s)
{
	vs_vhost_dev_reset(s->d);
	vs_controller__ops.disconnected(vs_target__controller(s->t), "fuzz");
	vs_controller__ops.connected(vs_target__controller(s->t));
}

void fz_session_check(struct fz_session *s)
{
	char why[256];

	if (vs_target__failed(s->t) || vs_vhost_dev_fault(s->d, why, sizeof(why)))
		session_end(s);
}

/* Passes until nothing is left to look at (bounded: a guest can keep rings busy). */
static void settle(struct fz_session *s)
{
	vs_target__pump(s->t, MAX_PUMPS);
}

void fz_session_kick(struct fz_session *s, unsigned q, unsigned passes)
{
	if (q < FZ_NQ && s->t->ctrls->q[q].running)
		s->t->ctrls->q[q].kicked = true;
	vs_target__pump(s->t, passes);
}

/* One vhost-user message chunk; returns the bytes it took (0: not enough input). */
static size_t message(struct fz_session *s, const uint8_t *p, size_t left)
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
			rc = vs_vhost_dev_reject(s->d, &msg, &reply);
	} else {
		rc = vs_vhost_dev_handle(s->d, &msg, &reply); /* consumes the fds */
	}
	if (rc == 1 && (reply.size > VS_VHOST_MAX_PAYLOAD || reply.nfds))
		__builtin_trap();
	if (vs_vhost_dev_wedged(s->d))
		__builtin_trap(); /* manual mode never times out a worker */
	if (rc < 0)
		session_end(s);
	return 1 + len;
}

size_t fz_session_begin(struct fz_session *s, const struct vs_target_config *cfg,
			const uint8_t *data, size_t size)
{
	size_t n = data[0] | (size_t)data[1] << 8;

	s->first_free_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	close(s->first_free_fd);
	if (n > size - 2)
		n = size - 2;
	if (n > FZ_MEM_SIZE)
		n = FZ_MEM_SIZE;
	guest_reset(data + 2, n);

	if (vs_target__create_manual(&s->t, cfg))
		__builtin_trap();
	s->d = vs_vhost_dev_new(FZ_NQ, vs_target_device_features(), &vs_controller__ops,
				vs_target__controller(s->t));
	if (!s->d)
		__builtin_trap();
	vs_controller__ops.connected(vs_target__controller(s->t));
	return 2 + n;
}

size_t fz_session_op(struct fz_session *s, const uint8_t *data, size_t size)
{
	uint8_t op = data[0];
	size_t used = 1;

	if (op < 0x40) {
		used += message(s, data + 1, size - 1);
	} else if (op < 0x80) {
		fz_session_kick(s, op & 7, MAX_PUMPS);
	} else if (op < 0xc0) {
		if (size < 4)
			return size; /* the input ends here */
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
		settle(s);
	}
	fz_session_check(s);
	return used;
}

void fz_session_end(struct fz_session *s)
{
	int fd;

	vs_vhost_dev_free(s->d);
	for (unsigned i = 0; i < TQ_MAX; i++)
		if (s->t->ctrls->q[i].running || s->t->ctrls->q[i].inflight)
			__builtin_trap();
	vs_target_destroy(s->t);

	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd != s->first_free_fd)
		__builtin_trap(); /* an fd handed to the target was neither kept nor closed */
	close(fd);
}
