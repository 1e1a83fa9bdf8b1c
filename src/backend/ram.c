/* SPDX-License-Identifier: MIT */
/*
 * ram=SIZE: anonymous memory, reserved lazily (MAP_NORESERVE), so a large LUN costs
 * only what is written.  Bios complete synchronously and are handed to the context's
 * deferred list, so done() still runs from vs_io_ctx_reap().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include <vioscope/trace.h>

#include "backend/backend_int.h"

static void ram_close(struct vs_backend *be)
{
	if (be->ram.mem)
		munmap(be->ram.mem, be->ram.map_len);
}

/* Whole pages go back to the kernel (they then read as zeros); the edges are cleared. */
static void ram_zero(struct vs_backend *be, uint64_t off, uint64_t len)
{
	char *base = be->ram.mem;
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t first = (off + pg - 1) / pg * pg, last = (off + len) / pg * pg;

	if (first >= last || madvise(base + first, last - first, MADV_DONTNEED) < 0) {
		memset(base + off, 0, len);
		return;
	}
	memset(base + off, 0, first - off);
	memset(base + last, 0, off + len - last);
}

static int ram_submit(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	char *p = (char *)be->ram.mem + bio->offset;

	switch (bio->op) {
	case VS_BIO_READ:
		vs_iov_from_buf(bio->iov, (unsigned)bio->iovcnt, 0, p, bio->len);
		break;
	case VS_BIO_WRITE:
		vs_iov_to_buf(bio->iov, (unsigned)bio->iovcnt, 0, p, bio->len);
		break;
	case VS_BIO_DISCARD:
	case VS_BIO_WRITE_ZEROES:
		ram_zero(be, bio->offset, bio->len);
		break;
	case VS_BIO_FLUSH:
		break; /* nothing outlives the process anyway */
	}
	vs_io_ctx_defer(ctx, bio, 0);
	return 0;
}

static int ram_read_sync(struct vs_backend *be, void *buf, uint64_t len, uint64_t off)
{
	memcpy(buf, (char *)be->ram.mem + off, len);
	return 0;
}

static const struct vs_be_ops ram_ops = {
    .kind = "ram",
    .submit = ram_submit,
    .close = ram_close,
    .read_sync = ram_read_sync,
};

int vs_be_ram_open(struct vs_backend *be, uint64_t size, char *err, size_t errlen)
{
	void *mem;

	if (size > SIZE_MAX) {
		if (err)
			snprintf(err, errlen, "ram=%llu: too large", (unsigned long long)size);
		return -ENOMEM;
	}
	mem = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (mem == MAP_FAILED) {
		int rc = -errno;

		if (err)
			snprintf(err, errlen, "ram: cannot map %llu bytes: %s",
				 (unsigned long long)size, strerror(-rc));
		VS_ERROR(BACKEND, "ram: mmap of %llu bytes: %s", (unsigned long long)size,
			 strerror(-rc));
		return rc;
	}
	be->ops = &ram_ops;
	be->size = size;
	be->discard = true;
	be->ram.mem = mem;
	be->ram.map_len = (size_t)size;
	return 0;
}
