/* SPDX-License-Identifier: MIT */
/* Helpers shared by the backend tests (cmocka). */
#ifndef VS_TEST_BACKEND_COMMON_H
#define VS_TEST_BACKEND_COMMON_H

#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "backend/backend.h"
#include "util/util.h"

struct waiter {
	int calls;
	int res;
};

static inline void waiter_done(struct vs_bio *bio, int res)
{
	struct waiter *w = bio->priv;

	w->calls++;
	w->res = res;
}

static inline void bio_init(struct vs_bio *bio, enum vs_bio_op op, uint64_t off,
			    const struct iovec *iov, int iovcnt, uint64_t len, struct waiter *w)
{
	memset(bio, 0, sizeof(*bio));
	bio->op = op;
	bio->offset = off;
	bio->iov = iov;
	bio->iovcnt = iovcnt;
	bio->len = len;
	bio->done = waiter_done;
	bio->priv = w;
}

/* Submit one bio and reap until its done() ran exactly once; returns its result,
 * or the (negative) submit error, in which case done() must not have run. */
static inline int run_bio(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	struct waiter *w = bio->priv;
	int rc;

	w->calls = 0;
	rc = vs_backend_submit(be, ctx, bio);
	if (rc < 0) {
		assert_int_equal(w->calls, 0);
		return rc;
	}
	assert_int_equal(w->calls, 0); /* never from inside submit */
	assert_int_equal(vs_io_ctx_submit(ctx), 0);
	while (!w->calls)
		assert_true(vs_io_ctx_reap(ctx, true) >= 0);
	assert_int_equal(w->calls, 1);
	return w->res;
}

static inline int run_rw(struct vs_backend *be, struct vs_io_ctx *ctx, enum vs_bio_op op,
			 uint64_t off, void *buf, size_t len, bool fua)
{
	struct iovec iov = {buf, len};
	struct waiter w;
	struct vs_bio bio;

	bio_init(&bio, op, off, &iov, 1, len, &w);
	bio.fua = fua;
	return run_bio(be, ctx, &bio);
}

static inline int run_op(struct vs_backend *be, struct vs_io_ctx *ctx, enum vs_bio_op op,
			 uint64_t off, uint64_t len)
{
	struct waiter w;
	struct vs_bio bio;

	bio_init(&bio, op, off, NULL, 0, len, &w);
	return run_bio(be, ctx, &bio);
}

/* Open the backend spec (failing the test with the reason it was refused) and an I/O
 * context of depth. */
static inline void open_pair(const char *spec, struct vs_backend **be, struct vs_io_ctx **ctx,
			     unsigned depth)
{
	char err[256];

	if (vs_backend_open(be, spec, err, sizeof(err)))
		fail_msg("%s: %s", spec, err);
	assert_int_equal(vs_io_ctx_create(ctx, depth), 0);
}

/* Close the context and the backend, nothing left in flight. */
static inline void close_pair(struct vs_backend *be, struct vs_io_ctx *ctx)
{
	assert_int_equal(vs_io_ctx_inflight(ctx), 0);
	vs_io_ctx_destroy(ctx);
	vs_backend_close(be);
}

/* One 512-byte bio and what it needs while in flight. */
struct bio512 {
	struct vs_bio bio;
	struct iovec iov;
	struct waiter w;
	char buf[512];
};

/* Submit b: op over 512 bytes at off, its buffer filled with byte first (what a write
 * writes).  It completes on a later reap. */
static inline void submit_512(struct vs_backend *be, struct vs_io_ctx *ctx, struct bio512 *b,
			      enum vs_bio_op op, uint64_t off, int byte)
{
	memset(b->buf, byte, sizeof(b->buf));
	b->iov = (struct iovec){b->buf, sizeof(b->buf)};
	b->w = (struct waiter){0};
	bio_init(&b->bio, op, off, &b->iov, 1, sizeof(b->buf), &b->w);
	assert_int_equal(vs_backend_submit(be, ctx, &b->bio), 0);
}

/* Split [buf, buf+len) into iovecs of irregular sizes (1, 7, 4089, 13, ... bytes). */
static inline int scatter(struct iovec *iov, int max, char *buf, size_t len)
{
	static const size_t sizes[] = {1, 7, 4089, 13, 512, 3, 8192, 100};
	int n = 0;

	for (size_t off = 0; off < len && n < max; n++) {
		size_t s = sizes[n % (sizeof(sizes) / sizeof(sizes[0]))];

		if (s > len - off || n == max - 1)
			s = len - off;
		iov[n].iov_base = buf + off;
		iov[n].iov_len = s;
		off += s;
	}
	return n;
}

static inline void fill_pattern(char *buf, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)((i * 31 + seed * 7 + (i >> 9)) & 0xff);
}

static inline bool all_zero(const char *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i])
			return false;
	return true;
}

/* DISCARD, then WRITE_ZEROES, of [zoff, zoff + zlen) in len bytes of pattern written at 0:
 * read back, zeros inside, the pattern untouched outside. */
static inline void zeroing_reads_zeros(struct vs_backend *be, struct vs_io_ctx *ctx, size_t len,
				       uint64_t zoff, uint64_t zlen)
{
	static const enum vs_bio_op ops[] = {VS_BIO_DISCARD, VS_BIO_WRITE_ZEROES};
	char *ref = malloc(len), *back = malloc(len);

	assert_true(ref && back);
	for (unsigned k = 0; k < 2; k++) {
		fill_pattern(ref, len, 11 + k);
		ref[zoff] |= 1; /* the range starts with a byte that is not zero */
		assert_int_equal(run_rw(be, ctx, VS_BIO_WRITE, 0, ref, len, false), 0);
		assert_int_equal(run_op(be, ctx, ops[k], zoff, zlen), 0);
		assert_int_equal(run_rw(be, ctx, VS_BIO_READ, 0, back, len, false), 0);
		assert_memory_equal(back, ref, zoff);
		assert_true(all_zero(back + zoff, zlen));
		assert_memory_equal(back + zoff + zlen, ref + zoff + zlen, len - zoff - zlen);
	}
	free(ref);
	free(back);
}

/* A scratch file of size bytes (pattern filled) in dir; returns its path in path. */
static inline void make_file(const char *dir, const char *name, size_t size, char *path,
			     size_t pathlen)
{
	char *buf = malloc(size);
	int fd;

	assert_non_null(buf);
	snprintf(path, pathlen, "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	fill_pattern(buf, size, 99);
	assert_int_equal(pwrite(fd, buf, size, 0), (ssize_t)size);
	close(fd);
	free(buf);
}

#endif
