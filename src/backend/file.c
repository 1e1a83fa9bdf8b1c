/* SPDX-License-Identifier: MIT */
/*
 * file=PATH[,ro][,direct][,shared]: a regular file or a block device through io_uring.
 *
 * Data goes straight between the kernel and the caller's iovecs.  With O_DIRECT, a
 * bio whose buffers do not meet the memory alignment goes through a bounce buffer,
 * and one whose offset or length does not meet the block alignment goes through a
 * second, buffered fd of the same file (the kernel keeps both views coherent: direct
 * I/O writes back and invalidates the page cache of its range).  Either way it is
 * counted (vs_backend_bounce_count), never refused.
 *
 * DISCARD and WRITE_ZEROES are fallocate(PUNCH_HOLE | KEEP_SIZE) for both kinds:
 * on a regular file the range then reads as zeros; on a block device the kernel
 * turns it into a zero-out that may unmap (blkdev_fallocate), which needs offsets and
 * lengths aligned to the logical block size and fails with -EOPNOTSUPP on devices
 * that cannot zero without writing.  Done asynchronously, unlike BLKDISCARD/BLKZEROOUT.
 *
 * Two writers of one image corrupt it (each orders and caches its own writes, a file
 * system on it is mounted twice), so the image is locked as QEMU locks its images: a
 * read-write LUN holds an exclusive lock on the whole file, a read-only one a shared lock;
 * a second target, a second LUN of this one, or QEMU itself then cannot open it
 * read-write (nor read-only while it is written).  OFD locks (F_OFD_SETLK): they belong
 * to the open file, so two LUNs of one process conflict as two processes do, and they go
 * away with the fd, a crash included.  Advisory: a program that takes no lock is not
 * stopped.
 *
 * `shared` (QEMU's share-rw=on) is for users that take turns on one image, e.g. the
 * source and the destination target of a live migration on one host (the source writes
 * until the switchover, then the destination): a read-write LUN then takes the shared
 * lock too, so several `shared` openers (and read-only ones) coexist, while an exclusive
 * writer (read-write without `shared`) is still refused next to them, and they next to it.
 * Who writes when is then the users' business.
 *
 * On tmpfs (buffered), reads and writes are done synchronously: tmpfs cannot read
 * without blocking (RWF_NOWAIT is refused), so io_uring would hand every one of them
 * to a kernel worker thread, which costs a context switch per I/O for what is only a
 * memory copy.  Completion still comes through the I/O context, like ram's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <linux/magic.h>

#include <vioscope/trace.h>

#include "backend/backend_int.h"

#define VS_FILE_DEFAULT_ALIGN 512

static void file_close(struct vs_backend *be)
{
	if (be->file.fd_buffered >= 0)
		close(be->file.fd_buffered);
	if (be->file.fd >= 0)
		close(be->file.fd);
}

static bool iov_aligned(const struct vs_bio *bio, unsigned mem_align, unsigned len_align)
{
	for (int i = 0; i < bio->iovcnt; i++) {
		if ((uintptr_t)bio->iov[i].iov_base % mem_align || bio->iov[i].iov_len % len_align)
			return false;
	}
	return true;
}

/* O_DIRECT: pick the fd and, when the buffers are misaligned, a bounce buffer. */
static void file_direct_route(struct vs_backend *be, struct vs_io_req *req)
{
	struct vs_bio *bio = req->bio;
	size_t align, size;

	req->fd = be->file.fd;
	if ((bio->offset | bio->len) % be->off_align) {
		req->fd = be->file.fd_buffered;
		vs_be_count_bounce(be);
		VS_VERBOSE_HP(BACKEND, "%s off %llu len %llu unaligned: buffered fd",
			      vs_bio_op_name(bio->op), (unsigned long long)bio->offset,
			      (unsigned long long)bio->len);
		return;
	}
	if (iov_aligned(bio, be->mem_align, be->off_align))
		return;
	vs_be_count_bounce(be);
	align = vs_backend_alignment(be);
	size = (bio->len + align - 1) / align * align;
	req->bounce = aligned_alloc(align, size);
	if (!req->bounce) {
		req->fd = be->file.fd_buffered; /* no memory for a copy: no copy needed */
		return;
	}
	req->biov.iov_base = req->bounce;
	req->biov.iov_len = bio->len;
	if (bio->op == VS_BIO_WRITE)
		vs_iov_to_buf(bio->iov, (unsigned)bio->iovcnt, 0, req->bounce, bio->len);
	VS_VERBOSE_HP(BACKEND, "%s off %llu len %llu misaligned buffers: bounce %p",
		      vs_bio_op_name(bio->op), (unsigned long long)bio->offset,
		      (unsigned long long)bio->len, req->bounce);
}

/* tmpfs: the whole bio now, short transfers continued; 0 or -errno. */
static int file_rw_sync(struct vs_backend *be, struct vs_bio *bio)
{
	struct iovec iov[64];
	uint64_t done = 0;
	int rwf = bio->op == VS_BIO_WRITE && bio->fua ? RWF_DSYNC : 0;

	while (done < bio->len) {
		/* the part of the iovecs from `done` on, up to 64 at a time */
		int n = (int)vs_iov_tail(iov, 64, bio->iov, (unsigned)bio->iovcnt, done);
		off_t off = (off_t)(bio->offset + done);
		ssize_t r = bio->op == VS_BIO_READ ? preadv2(be->file.fd, iov, n, off, 0)
						   : pwritev2(be->file.fd, iov, n, off, rwf);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -EIO; /* the file shrank under us */
		done += (uint64_t)r;
	}
	return 0;
}

static int file_submit(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	struct vs_io_req *req;
	struct io_uring_sqe *sqe;
	bool rw = bio->op == VS_BIO_READ || bio->op == VS_BIO_WRITE;

	if (rw && be->file.memory_fs) {
		vs_io_ctx_defer(ctx, bio, file_rw_sync(be, bio));
		return 0;
	}
	req = vs_io_req_get(ctx, be, bio);
	if (!req)
		return -EAGAIN;
	req->fd = be->file.fd;
	if (rw && be->file.direct)
		file_direct_route(be, req);
	sqe = io_uring_get_sqe(&ctx->ring);
	if (!sqe) {
		vs_io_req_put(ctx, req);
		return -EAGAIN;
	}
	switch (bio->op) {
	case VS_BIO_READ:
	case VS_BIO_WRITE:
		vs_io_req_prep_rw(req, sqe); /* done == 0: cannot fail */
		break;
	case VS_BIO_FLUSH:
		io_uring_prep_fsync(sqe, req->fd, IORING_FSYNC_DATASYNC);
		break;
	case VS_BIO_DISCARD:
	case VS_BIO_WRITE_ZEROES:
		io_uring_prep_fallocate(sqe, req->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					(off_t)bio->offset, (off_t)bio->len);
		break;
	}
	vs_io_req_queue(ctx, req, sqe);
	return 0;
}

/* Through the page-cache fd: no alignment to meet, and coherent with O_DIRECT writes. */
static int file_read_sync(struct vs_backend *be, void *buf, uint64_t len, uint64_t off)
{
	int fd = be->file.fd_buffered >= 0 ? be->file.fd_buffered : be->file.fd;
	uint64_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (uint64_t)n;
	}
	return 0;
}

/* Regular files only: a block device's size is its own. */
static int file_resize_check(struct vs_backend *be, uint64_t old, uint64_t new_size, char *why,
			     size_t whylen)
{
	(void)old;
	if (be->file.bdev) {
		vs_fail(why, whylen, 0, "a block device cannot be resized here");
		return -ENOTSUP;
	}
	if (new_size > INT64_MAX) {
		vs_fail(why, whylen, 0, "%llu bytes: too large for a file",
			(unsigned long long)new_size);
		return -EFBIG;
	}
	return 0;
}

static int file_resize(struct vs_backend *be, uint64_t old, uint64_t new_size, char *why,
		       size_t whylen)
{
	(void)old;
	if (ftruncate(be->file.fd, (off_t)new_size) < 0) {
		int rc = -errno;

		vs_fail(why, whylen, rc, "ftruncate to %llu bytes: %s",
			(unsigned long long)new_size, strerror(-rc));
		return rc;
	}
	return 0;
}

static const struct vs_be_ops file_ops = {
    .kind = "file",
    .submit = file_submit,
    .close = file_close,
    .read_sync = file_read_sync,
    .resize_check = file_resize_check,
    .resize = file_resize,
};

/* Direct I/O alignment: statx(STATX_DIOALIGN) where the kernel reports it (6.1+),
 * else the device's logical block size, else 512. */
static void file_dio_align(struct vs_backend *be, int fd)
{
	struct statx stx;
	int lbs = 0;

	be->mem_align = be->off_align = VS_FILE_DEFAULT_ALIGN;
	if (be->file.bdev && ioctl(fd, BLKSSZGET, &lbs) == 0 && lbs > 0)
		be->mem_align = be->off_align = (unsigned)lbs;
	if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align) {
		be->mem_align = stx.stx_dio_mem_align ? stx.stx_dio_mem_align : 1;
		be->off_align = stx.stx_dio_offset_align;
	}
}

/* "file:REALPATH" of the file open on fd, as the target names file LUNs. */
static void file_identity(struct vs_backend *be, int fd)
{
	char link[32], real[PATH_MAX];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, real, sizeof(real) - 1);
	if (n <= 0)
		return;
	real[n] = 0;
	if (n >= (ssize_t)sizeof(be->identity) - 5)
		return; /* too long to name it: the target names it by the LUN */
	memcpy(be->identity, "file:", 5);
	memcpy(be->identity + 5, real, (size_t)n + 1);
}

struct file_opts {
	bool ro, direct, shared;
};

static int file_parse(const char *args, char *path, size_t pathlen, struct file_opts *fo, char *why,
		      size_t whylen)
{
	const char *comma = strchr(args, ',');
	size_t n = comma ? (size_t)(comma - args) : strlen(args), olen;
	const char *opt;

	if (n == 0 || n >= pathlen) {
		snprintf(why, whylen, "file=%s: %s", args, n ? "path too long" : "missing path");
		return -EINVAL;
	}
	memcpy(path, args, n);
	path[n] = '\0';
	while (vs_be_next_opt(&comma, &opt, &olen)) {
		if (olen == 2 && !strncmp(opt, "ro", 2)) {
			fo->ro = true;
		} else if (olen == 6 && !strncmp(opt, "direct", 6)) {
			fo->direct = true;
		} else if (olen == 6 && !strncmp(opt, "shared", 6)) {
			fo->shared = true;
		} else {
			snprintf(why, whylen,
				 "file=%s: unknown option '%.*s' (use ro, direct, shared)", args,
				 (int)olen, opt);
			return -EINVAL;
		}
	}
	return 0;
}

/* A target killed with I/O in flight keeps its lock until the kernel has finished that I/O
 * (io_uring completes it after the process is gone, and the file with its lock is released
 * only then): a conflict is retried this long before it is reported. */
#define FILE_LOCK_WAIT_NS (2 * 1000000000ull)

/* The image's lock (see the top of this file): shared when read-only or `shared`, else
 * exclusive.  0, or -EBUSY with why set when another holds one that conflicts.  A file
 * system without OFD locks (-EINVAL, -ENOLCK, -EOPNOTSUPP) is served unlocked, as QEMU
 * does, and the trace says so. */
static int file_lock(int fd, const struct file_opts *fo, const char *args, const char *path,
		     char *why, size_t whylen)
{
	bool sh = fo->ro || fo->shared;
	struct flock fl = {.l_type = sh ? F_RDLCK : F_WRLCK, .l_whence = SEEK_SET};
	uint64_t give_up = vs_mono_ns() + FILE_LOCK_WAIT_NS;

	while (fcntl(fd, F_OFD_SETLK, &fl) < 0) {
		if (errno != EAGAIN && errno != EACCES) {
			VS_WARNING(BACKEND, "file=%s: no lock on %s (%s): served unlocked", args,
				   path, strerror(errno));
			return 0;
		}
		if (vs_mono_ns() >= give_up) {
			snprintf(why, whylen,
				 "file=%s: %s is in use: another LUN or process (a vioscope "
				 "target, QEMU) holds a lock on it, and %s (failed to get the %s "
				 "lock)",
				 args, path,
				 fo->shared ? "is writing it without `shared`"
				 : fo->ro   ? "is writing it"
					    : "two users writing one image would corrupt it",
				 sh ? "shared" : "write");
			return -EBUSY;
		}
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
	}
	return 0;
}

int vs_be_file_check(const char *args, char *why, size_t whylen)
{
	char path[4096], dummy[1];
	struct file_opts fo = {0};

	if (!why) {
		why = dummy;
		whylen = sizeof(dummy);
	}
	return file_parse(args, path, sizeof(path), &fo, why, whylen);
}

/* Open path as the backend's storage: O_NONBLOCK, so that a FIFO (or a device that waits
 * for a carrier) cannot block the open, then refused unless fstat on the very fd opened says
 * a regular file or a block device (a path checked before the open could be swapped);
 * O_NONBLOCK is cleared then (io_uring would fail reads with -EAGAIN instead of waiting).
 * The fd, or -errno with why set. */
static int open_storage(const char *args, const struct vs_backend_opts *o, const char *path,
			int flags, struct stat *st, char *why, size_t whylen)
{
	char cause[200];
	int fd = vs_be_open(o, path, flags | O_NONBLOCK | O_NOCTTY, 0, cause, sizeof(cause)), rc;

	if (fd < 0) {
		rc = fd;
		if ((flags & O_DIRECT) && rc == -EINVAL)
			snprintf(
			    why, whylen,
			    "file=%s: O_DIRECT not supported by the file system of %s, or %s is "
			    "neither a regular file nor a block device",
			    args, path, path);
		else
			snprintf(why, whylen, "file=%s: cannot open %s: %s", args, path, cause);
		return rc;
	}
	if (fstat(fd, st) < 0) {
		rc = -errno;
		snprintf(why, whylen, "file=%s: fstat: %s", args, strerror(-rc));
		goto fail;
	}
	if (!S_ISREG(st->st_mode) && !S_ISBLK(st->st_mode)) {
		rc = -EINVAL;
		snprintf(why, whylen, "file=%s: %s is neither a regular file nor a block device",
			 args, path);
		goto fail;
	}
	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		rc = -errno;
		snprintf(why, whylen, "file=%s: fcntl: %s", args, strerror(-rc));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}

int vs_be_file_open(struct vs_backend *be, const char *args, const struct vs_backend_opts *o,
		    char *why, size_t whylen)
{
	char path[4096], dummy[1], again[32];
	struct file_opts fo = {0};
	bool ro, direct;
	struct stat st;
	int flags, fd = -1, rc;

	if (!why) {
		why = dummy;
		whylen = sizeof(dummy);
	}
	rc = file_parse(args, path, sizeof(path), &fo, why, whylen);
	if (rc < 0)
		goto out_err;
	ro = fo.ro;
	direct = fo.direct;
	be->ops = &file_ops;
	be->durable = true;
	be->ro = ro;
	be->file.direct = direct;
	flags = (ro ? O_RDONLY : O_RDWR) | O_CLOEXEC;
	if ((fd = rc = open_storage(args, o, path, flags | (direct ? O_DIRECT : 0), &st, why,
				    whylen)) < 0)
		goto out_err;
	be->file.fd = fd;
	if ((rc = file_lock(fd, &fo, args, path, why, whylen)) < 0)
		goto out_err;
	if (o && o->root)
		file_identity(be, fd); /* the spec's path is relative to the root, not to us */
	if (S_ISBLK(st.st_mode)) {
		be->file.bdev = true;
		if (ioctl(fd, BLKGETSIZE64, &be->size) < 0) {
			rc = -errno;
			snprintf(why, whylen, "file=%s: BLKGETSIZE64: %s", args, strerror(-rc));
			goto out_err;
		}
	} else {
		struct statfs sfs;
		be->size = (uint64_t)st.st_size;
		be->file.memory_fs = !direct && fstatfs(fd, &sfs) == 0 && sfs.f_type == TMPFS_MAGIC;
	}
	if (be->size == 0) {
		rc = -EINVAL;
		snprintf(why, whylen, "file=%s: %s is empty (size it first, e.g. truncate -s 1G)",
			 args, path);
		goto out_err;
	}
	if (direct) {
		file_dio_align(be, fd);
		/* The file just opened, not whatever its path names now. */
		snprintf(again, sizeof(again), "/proc/self/fd/%d", fd);
		be->file.fd_buffered = open(again, flags);
		if (be->file.fd_buffered < 0) {
			rc = -errno;
			snprintf(why, whylen, "file=%s: cannot open %s again: %s", args, path,
				 strerror(-rc));
			goto out_err;
		}
	}
	/* Punching a hole past the end is a no-op that tells whether the file system
	 * can punch at all; block devices can be asked only with real data at stake. */
	if (!ro)
		be->discard =
		    be->file.bdev || fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					       (off_t)be->size, 4096) == 0;
	return 0;
out_err:
	VS_ERROR(BACKEND, "file backend '%s': %s", args, why == dummy ? "failed" : why);
	file_close(be);
	return rc;
}
