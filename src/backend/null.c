/* SPDX-License-Identifier: MIT */
/*
 * null=SIZE: reads return zeros, writes and discards are dropped.  For measuring
 * the stack above without any storage cost.
 */
#define _GNU_SOURCE
#include <string.h>

#include "backend/backend_int.h"

static void null_close(struct vs_backend *be)
{
	(void)be;
}

static int null_submit(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	(void)be;
	if (bio->op == VS_BIO_READ) {
		for (int i = 0; i < bio->iovcnt; i++)
			memset(bio->iov[i].iov_base, 0, bio->iov[i].iov_len);
	}
	vs_io_ctx_defer(ctx, bio, 0);
	return 0;
}

static int null_read_sync(struct vs_backend *be, void *buf, uint64_t len, uint64_t off)
{
	(void)be;
	(void)off;
	memset(buf, 0, len);
	return 0;
}

static const struct vs_be_ops null_ops = {
    .kind = "null",
    .submit = null_submit,
    .close = null_close,
    .read_sync = null_read_sync,
};

int vs_be_null_open(struct vs_backend *be, uint64_t size, char *why, size_t whylen)
{
	(void)why;
	(void)whylen;
	be->ops = &null_ops;
	be->size = size;
	be->discard = true;
	return 0;
}
