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
