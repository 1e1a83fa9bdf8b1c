/* SPDX-License-Identifier: MIT */
/*
 * The engine's requests on a file or block device with io_uring (verify --device): the
 * same check inside a guest, on the disk its own driver gives it.  O_DIRECT when the file
 * system or device takes it, so that reads come from the device and not the page cache;
 * one ring per engine thread (blk-mq spreads them over the device's queues by CPU).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "check/check_int.h"
#include "util/util.h"

struct uring_thread {
	struct io_uring ring;
	void *mem;
};

static int uring_thread_init(struct eng_thread *t, char *why, size_t whylen)
{
	struct uring_thread *u = calloc(1, sizeof(*u));
	size_t per = ENG_MAX_SECT * VS_VB_SECTOR;
	int rc;

	if (!u || posix_memalign(&u->mem, 4096, per * t->e->max_depth)) {
		free(u);
		return vs_fail(why, whylen, -ENOMEM, "no buffers for thread %u", t->idx);
	}
	if ((rc = io_uring_queue_init(t->e->max_depth, &u->ring, 0)) < 0) {
		free(u->mem);
		free(u);
		return vs_fail(why, whylen, rc, "io_uring_queue_init: %s", strerror(-rc));
	}
	t->port = u;
	for (unsigned k = 0; k < t->e->max_depth; k++)
		t->reqs[k].buf = (uint8_t *)u->mem + per * k;
	return 0;
}

static void uring_thread_fini(struct eng_thread *t)
{
	struct uring_thread *u = t->port;

	if (!u)
		return;
	io_uring_queue_exit(&u->ring);
	free(u->mem);
	free(u);
}

static int uring_submit(struct eng_req *r)
{
	struct port_uring *p = r->t->e->port_ctx;
	struct uring_thread *u = r->t->port;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);
	off_t off = (off_t)(r->sector * VS_VB_SECTOR);
	unsigned len = r->nsect * VS_VB_SECTOR;
	int rc;

	if (!sqe)
		return -EBUSY;
	switch (r->op) {
	case ENG_READ:
		io_uring_prep_read(sqe, p->fd, r->buf, len, off);
		break;
	case ENG_WRITE:
		io_uring_prep_write(sqe, p->fd, r->buf, len, off);
		break;
	case ENG_FLUSH:
		io_uring_prep_fsync(sqe, p->fd, IORING_FSYNC_DATASYNC);
		break;
	default:
		io_uring_prep_fallocate(sqe, p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
					len);
		break;
	}
	io_uring_sqe_set_data(sqe, r);
	rc = io_uring_submit(&u->ring);
	return rc < 0 ? rc : 0;
}

static void uring_poll(struct eng_thread *t, unsigned wait_us)
{
	struct uring_thread *u = t->port;
	struct io_uring_cqe *cqe;
	struct __kernel_timespec ts = {0, (long long)wait_us * 1000};

	if (io_uring_peek_cqe(&u->ring, &cqe) != 0 && wait_us &&
	    io_uring_wait_cqe_timeout(&u->ring, &cqe, &ts) != 0)
		return;
	while (io_uring_peek_cqe(&u->ring, &cqe) == 0) {
		struct eng_req *r = io_uring_cqe_get_data(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&u->ring, cqe);
		if (res >= 0 && (r->op == ENG_READ || r->op == ENG_WRITE))
			res = (unsigned)res == r->nsect * VS_VB_SECTOR ? 0 : -EIO;
		r->result = res < 0 ? res : 0;
		eng_done(r);
	}
}

const struct eng_port_ops eng_port_uring = {
    .thread_init = uring_thread_init,
    .thread_fini = uring_thread_fini,
    .submit = uring_submit,
    .poll = uring_poll,
};

int port_uring_open(struct port_uring *p, const char *path, unsigned max_depth, char *why,
		    size_t whylen)
{
	struct stat st;
	int lbs = 512;

	memset(p, 0, sizeof(*p));
	p->depth = max_depth;
	p->direct = true;
	p->fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (p->fd < 0 && errno == EINVAL) {
		p->direct = false; /* tmpfs and friends: through the page cache */
		p->fd = open(path, O_RDWR | O_CLOEXEC);
	}
	if (p->fd < 0)
		return vs_fail(why, whylen, -errno, "%s: %s", path, strerror(errno));
	if (fstat(p->fd, &st) < 0)
		return vs_fail(why, whylen, -errno, "%s: fstat: %s", path, strerror(errno));
	if (S_ISBLK(st.st_mode)) {
		if (ioctl(p->fd, BLKGETSIZE64, &p->size) < 0 || ioctl(p->fd, BLKSSZGET, &lbs) < 0)
			return vs_fail(why, whylen, -errno, "%s: %s", path, strerror(errno));
	} else if (S_ISREG(st.st_mode)) {
		p->size = (uint64_t)st.st_size;
		lbs = p->direct ? 4096 : 512; /* O_DIRECT on any file system */
	} else {
		return vs_fail(why, whylen, -EINVAL, "%s is neither a file nor a block device",
			       path);
	}
	p->block = (uint32_t)lbs;
	return 0;
}

void port_uring_close(struct port_uring *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
}
