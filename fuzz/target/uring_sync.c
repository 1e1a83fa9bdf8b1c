/* SPDX-License-Identifier: MIT */
/*
 * File LUNs in manual mode, made as deterministic as RAM ones: linked with
 * -Wl,--wrap=io_uring_submit, every submission of an I/O context (src/backend/io_ctx.c)
 * returns only once the kernel has finished everything the ring holds, so that each
 * completion is in the completion queue when the next pass reaps it, as a RAM bio's is.
 *
 * Why: manual mode waits for requests by counting passes (a queue's stop gives up after
 * 1000 of them, then the device is wedged), which suits RAM and null, whose bios complete
 * at the next pass.  io_uring runs a file's fallocate (UNMAP) and fsync (SYNCHRONIZE
 * CACHE) on its own worker threads, and buffered I/O too when it would block: under load
 * those finished after 1000 passes or before, by chance, and one input crashed one run in
 * five (a stop at the end of the input found its UNMAP still in flight).  The requests still
 * stay in flight until a pass reaps them, so an operation can meet them there.
 *
 * Every ring submitted here is a struct vs_io_ctx's (the fuzzer links no other io_uring
 * user).
 */
#include <errno.h>
#include <stddef.h>

#include <liburing.h>

#include "backend/backend_int.h"

int __real_io_uring_submit(struct io_uring *ring);
int __wrap_io_uring_submit(struct io_uring *ring);

int __wrap_io_uring_submit(struct io_uring *ring)
{
	struct vs_io_ctx *ctx =
	    (struct vs_io_ctx *)(void *)((char *)ring - offsetof(struct vs_io_ctx, ring));
	struct io_uring_cqe *cqe;
	int rc = __real_io_uring_submit(ring);

	if (rc < 0 || io_uring_sq_ready(ring))
		return rc; /* not all of it went out: the caller sees it as it would */
	/* ring_busy: the context's requests the ring holds, each with one SQE submitted or its
	 * CQE waiting to be reaped. */
	while (io_uring_cq_ready(ring) < ctx->ring_busy) {
		int w = io_uring_wait_cqe_nr(ring, &cqe, ctx->ring_busy);

		if (w < 0 && w != -EINTR)
			__builtin_trap(); /* the kernel refused to wait: nothing to fuzz */
	}
	return rc;
}
