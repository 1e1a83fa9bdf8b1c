/* SPDX-License-Identifier: MIT */
/*
 * Per-thread I/O context: one io_uring, one eventfd, a list of bios that completed
 * synchronously (ram, null) whose done() must still wait for a reap, so that a caller
 * of vs_backend_submit() is never re-entered, and a lock-free list of requests that a
 * library completed on threads of its own (rbd: librbd's callbacks), which the owner
 * takes in one atomic exchange per reap.  The thread that makes that list non-empty
 * writes the eventfd, so the owner sleeps in its event loop as for io_uring completions
 * and a burst of completions costs one wake-up.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>

#include <vioscope/trace.h>

#include "backend/backend_int.h"

#define VS_IO_MAX_DEPTH	  4096
#define VS_IO_MAX_RETRIES 8

int vs_io_ctx_create(struct vs_io_ctx **out, unsigned depth)
{
	struct vs_io_ctx *ctx;
	int rc;

	*out = NULL;
	if (depth == 0 || depth > VS_IO_MAX_DEPTH) {
		VS_ERROR(BACKEND, "io ctx: depth %u out of range 1..%u", depth, VS_IO_MAX_DEPTH);
		return -EINVAL;
	}
	ctx = calloc(1, sizeof(*ctx) + depth * sizeof(ctx->reqs[0]));
	if (!ctx)
		return -ENOMEM;
	ctx->depth = depth;
	ctx->defer_tail = &ctx->defer_head;
	for (unsigned i = depth; i-- > 0;) {
		ctx->reqs[i].next = ctx->free;
		ctx->free = &ctx->reqs[i];
	}
	/* COOP_TASKRUN: completions are run when we next enter the kernel rather than
	 * by interrupting this thread; one context belongs to one thread anyway.  Older
	 * kernels refuse the flag: then without it. */
	rc = io_uring_queue_init(depth, &ctx->ring, IORING_SETUP_COOP_TASKRUN);
	if (rc == -EINVAL)
		rc = io_uring_queue_init(depth, &ctx->ring, 0);
	if (rc < 0) {
		VS_ERROR(BACKEND, "io ctx: io_uring_queue_init(%u): %s", depth, strerror(-rc));
		free(ctx);
		return rc;
	}
	ctx->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ctx->efd < 0) {
		rc = -errno;
		VS_ERROR(BACKEND, "io ctx: eventfd: %s", strerror(-rc));
		goto out_ring;
	}
	rc = io_uring_register_eventfd(&ctx->ring, ctx->efd);
	if (rc < 0) {
		VS_ERROR(BACKEND, "io ctx: io_uring_register_eventfd: %s", strerror(-rc));
		close(ctx->efd);
		goto out_ring;
	}
	VS_INFO(BACKEND, "io ctx %p: depth %u, eventfd %d", ctx, depth, ctx->efd);
	*out = ctx;
	return 0;
out_ring:
	io_uring_queue_exit(&ctx->ring);
	free(ctx);
	return rc;
}

void vs_io_ctx_destroy(struct vs_io_ctx *ctx)
{
	if (!ctx)
		return;
	/* The kernel may still write into caller buffers: never tear the ring down
	 * under live requests.  Their done() runs here (callers should drain first). */
	if (ctx->inflight)
		VS_WARNING(BACKEND, "io ctx %p: destroyed with %u bios in flight, draining", ctx,
			   ctx->inflight);
	while (ctx->inflight) {
		if (vs_io_ctx_reap(ctx, true) < 0)
			break;
	}
	/* A library's thread may still be writing the eventfd for a request it handed back. */
	while (__atomic_load_n(&ctx->remote_pushing, __ATOMIC_ACQUIRE))
		sched_yield();
	io_uring_queue_exit(&ctx->ring);
	close(ctx->efd);
	VS_INFO(BACKEND, "io ctx %p: destroyed", ctx);
	free(ctx);
}

int vs_io_ctx_fd(const struct vs_io_ctx *ctx)
{
	return ctx->efd;
}

unsigned vs_io_ctx_inflight(const struct vs_io_ctx *ctx)
{
	return ctx->inflight;
}

/* Make the fd readable for deferred completions too: once per non-empty list. */
static void ctx_signal_deferred(struct vs_io_ctx *ctx)
{
	uint64_t one = 1;

	if (!ctx->defer_head || ctx->signalled || ctx->wait != VS_IO_WAIT_LEVEL)
		return;
	if (write(ctx->efd, &one, sizeof(one)) == sizeof(one))
		ctx->signalled = true;
}

/* Out of line (docs/TRACING.md, "Keeping hot functions lean"): vs_io_ctx_submit runs on
 * every worker pass, and the error's record inline made it save a register on each
 * (bench/callgrind-per-io.sh, target: 4 instructions a command). */
static __attribute__((noinline, cold)) void submit_failed(const struct vs_io_ctx *ctx, int rc)
{
	VS_ERROR(BACKEND, "io ctx %p: io_uring_submit: %s", ctx, strerror(-rc));
	(void)ctx, (void)rc; /* the off flavour */
}

int vs_io_ctx_submit(struct vs_io_ctx *ctx)
{
	int rc = 0;

	if (io_uring_sq_ready(&ctx->ring)) {
		rc = io_uring_submit(&ctx->ring);
		if (__builtin_expect(rc < 0, 0))
			submit_failed(ctx, rc);
	}
	ctx_signal_deferred(ctx);
	return rc < 0 ? rc : 0;
}

bool vs_io_ctx_pending(const struct vs_io_ctx *ctx)
{
	return ctx->defer_head || io_uring_cq_ready(&ctx->ring) ||
	       __atomic_load_n(&ctx->remote, __ATOMIC_RELAXED);
}

int vs_io_ctx_set_wait(struct vs_io_ctx *ctx, enum vs_io_wait how)
{
	/* The kernel stops writing the eventfd for completions while polled. */
	if (how == VS_IO_WAIT_POLL || ctx->wait == VS_IO_WAIT_POLL) {
		int rc = io_uring_cq_eventfd_toggle(&ctx->ring, how != VS_IO_WAIT_POLL);

		if (rc < 0)
			return rc;
	}
	__atomic_store_n(&ctx->wait, how, __ATOMIC_RELAXED);
	if (how == VS_IO_WAIT_LEVEL)
		ctx_signal_deferred(ctx); /* what waits now shows on the fd */
	return 0;
}

void vs_io_req_remote_start(struct vs_io_ctx *ctx, struct vs_io_req *req)
{
	req->ctx = ctx;
	ctx->remote_busy++;
}

void vs_io_req_remote_cancel(struct vs_io_ctx *ctx, struct vs_io_req *req)
{
	ctx->remote_busy--;
	vs_io_req_put(ctx, req);
}

void vs_io_req_remote_done(struct vs_io_req *req, int64_t res)
{
	struct vs_io_ctx *ctx = req->ctx;
	struct vs_io_req *head;
	uint64_t one = 1;

	/* Counted first: the owner, once it has reaped req, may be destroying ctx; it waits
	 * for this count to drop before closing the eventfd and freeing ctx. */
	__atomic_add_fetch(&ctx->remote_pushing, 1, __ATOMIC_ACQUIRE);
	req->remote_res = res;
	head = __atomic_load_n(&ctx->remote, __ATOMIC_RELAXED);
	do
		req->next = head;
	while (!__atomic_compare_exchange_n(&ctx->remote, &head, req, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
	/* Only the push onto an empty list wakes the owner: it has not taken the list since
	 * (else the list would be empty again and the next push would write). */
	if (!head && __atomic_load_n(&ctx->wait, __ATOMIC_RELAXED) != VS_IO_WAIT_POLL &&
	    write(ctx->efd, &one, sizeof(one)) < 0) {
		/* full counter: the owner is woken anyway */
	}
	__atomic_sub_fetch(&ctx->remote_pushing, 1, __ATOMIC_RELEASE);
}

struct vs_io_req *vs_io_ctx_hold(struct vs_io_ctx *ctx, struct vs_backend *be, struct vs_bio *bio)
{
	struct vs_io_req *req = vs_io_req_get(ctx, be, bio);

	if (req) {
		req->held = true;
		vs_io_req_remote_start(ctx, req);
	}
	return req;
}

void vs_io_ctx_defer(struct vs_io_ctx *ctx, struct vs_bio *bio, int res)
{
	bio->res = res;
	bio->next = NULL;
	*ctx->defer_tail = bio;
	ctx->defer_tail = &bio->next;
}

struct vs_io_req *vs_io_req_get(struct vs_io_ctx *ctx, struct vs_backend *be, struct vs_bio *bio)
{
	struct vs_io_req *req = ctx->free;

	if (!req)
		return NULL;
	ctx->free = req->next;
	memset(req, 0, sizeof(*req));
	req->bio = bio;
	req->be = be;
	req->fd = -1;
	return req;
}

void vs_io_req_put(struct vs_io_ctx *ctx, struct vs_io_req *req)
{
	free(req->bounce);
	free(req->tail);
	req->bounce = NULL;
	req->tail = NULL;
	req->next = ctx->free;
	ctx->free = req;
}

void vs_io_req_queue(struct vs_io_ctx *ctx, struct vs_io_req *req, struct io_uring_sqe *sqe)
{
	io_uring_sqe_set_data(sqe, req);
	ctx->ring_busy++;
}

int vs_io_req_prep_rw(struct vs_io_req *req, struct io_uring_sqe *sqe)
{
	const struct vs_bio *bio = req->bio;
	const struct iovec *iov = req->bounce ? &req->biov : bio->iov;
	int cnt = req->bounce ? 1 : bio->iovcnt;

	if (req->done) {
		/* Short transfer: describe what is left.  Rare, so allocate here. */
		if (!req->tail) {
			req->tail = malloc(sizeof(*req->tail) * (size_t)cnt);
			if (!req->tail)
				return -ENOMEM;
		}
		cnt = (int)vs_iov_tail(req->tail, (unsigned)cnt, iov, (unsigned)cnt, req->done);
		iov = req->tail;
	}
	if (bio->op == VS_BIO_READ)
		io_uring_prep_readv2(sqe, req->fd, iov, (unsigned)cnt, bio->offset + req->done, 0);
	else
		io_uring_prep_writev2(sqe, req->fd, iov, (unsigned)cnt, bio->offset + req->done,
				      bio->fua ? RWF_DSYNC : 0);
	return 0;
}

/* A test-only delay (backend option delay=USEC): hold bio's completion back with an
 * io_uring timeout, so that the thread keeps serving other work meanwhile.  False when no
 * slot or SQE is free: then it completes now. */
static __attribute__((noinline, cold)) bool delay_start(struct vs_io_ctx *ctx, struct vs_bio *bio,
							int res)
{
	struct vs_io_req *req = vs_io_req_get(ctx, NULL, bio);
	struct io_uring_sqe *sqe;

	if (!req)
		return false;
	sqe = io_uring_get_sqe(&ctx->ring);
	if (!sqe) {
		vs_io_req_put(ctx, req);
		return false;
	}
	req->delay = true;
	req->ts.tv_sec = bio->delay_us / 1000000;
	req->ts.tv_nsec = (long long)(bio->delay_us % 1000000) * 1000;
	bio->res = res;
	bio->delay_us = 0;
	io_uring_prep_timeout(sqe, &req->ts, 0, 0);
	vs_io_req_queue(ctx, req, sqe);
	VS_VERBOSE(BACKEND, "%s off %llu len %llu: completion delayed by %lld.%06lld s",
		   vs_bio_op_name(bio->op), (unsigned long long)bio->offset,
		   (unsigned long long)bio->len, (long long)req->ts.tv_sec,
		   (long long)req->ts.tv_nsec / 1000);
	return true;
}

/* A bio the backend's options watch (bio->hooked): a test-only delay holds it back (true:
 * it comes back here when the delay ends); else the hooks see its completion. */
static __attribute__((noinline, cold)) bool hooked_complete(struct vs_io_ctx *ctx,
							    struct vs_bio *bio, int res)
{
	if (bio->delay_us && delay_start(ctx, bio, res))
		return true;
	if (bio->op == VS_BIO_FLUSH)
		vs_be_flush_completed(bio->hooked, res);
	vs_be_hooks_done(bio, res);
	bio->hooked = NULL;
	return false;
}

/* Run bio's done(): true, or false when a test-only delay holds it back for later. */
static inline __attribute__((always_inline)) bool bio_complete(struct vs_io_ctx *ctx,
							       struct vs_bio *bio, int res)
{
	if (__builtin_expect(bio->hooked != NULL, 0) && hooked_complete(ctx, bio, res))
		return false;
	ctx->inflight--;
	if (__builtin_expect(res < 0, 0))
		VS_WARNING(BACKEND, "%s off %llu len %llu failed: %s", vs_bio_op_name(bio->op),
			   (unsigned long long)bio->offset, (unsigned long long)bio->len,
			   strerror(-res));
	bio->done(bio, res);
	return true;
}

/* Resubmit what is left of req; false when no SQE or memory (then res is the error). */
static bool req_resubmit(struct vs_io_ctx *ctx, struct vs_io_req *req, int *res)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ctx->ring);
	enum vs_bio_op op = req->bio->op;

	/* Cannot happen: each slot owns at most one SQE and the SQ has depth entries. */
	if (!sqe) {
		*res = -EBUSY;
		return false;
	}
	if (op == VS_BIO_READ || op == VS_BIO_WRITE) {
		*res = vs_io_req_prep_rw(req, sqe);
		if (*res < 0) {
			io_uring_prep_nop(sqe); /* an SQE once taken must be submitted */
			io_uring_sqe_set_data(sqe, NULL);
			return false;
		}
	} else if (op == VS_BIO_FLUSH) {
		io_uring_prep_fsync(sqe, req->fd, IORING_FSYNC_DATASYNC);
	} else {
		io_uring_prep_fallocate(sqe, req->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					(off_t)req->bio->offset, (off_t)req->bio->len);
	}
	io_uring_sqe_set_data(sqe, req);
	return true;
}

/* One CQE for req: finish the bio, or resubmit it (returns true) after a short
 * transfer, an interrupted call, or O_DIRECT refusing what the alignment check allowed;
 * true as well when a test-only delay holds the finished bio back (a timeout to submit). */
static bool req_cqe(struct vs_io_ctx *ctx, struct vs_io_req *req, int res)
{
	struct vs_bio *bio = req->bio;
	struct vs_backend *be = req->be;
	bool rw = bio->op == VS_BIO_READ || bio->op == VS_BIO_WRITE;

	if (req->delay) { /* the timeout of delay_start(): the bio's result is in bio->res */
		ctx->ring_busy--;
		vs_io_req_put(ctx, req);
		return !bio_complete(ctx, bio, bio->res);
	}
	if ((res == -EINTR || res == -EAGAIN) && req->retries++ < VS_IO_MAX_RETRIES)
		goto again;
	if (res == -EINVAL && rw && req->fd == be->file.fd && be->file.fd_buffered >= 0) {
		VS_WARNING(BACKEND, "O_DIRECT %s off %llu len %llu refused, retrying buffered",
			   vs_bio_op_name(bio->op), (unsigned long long)bio->offset,
			   (unsigned long long)bio->len);
		vs_be_count_bounce(be);
		req->fd = be->file.fd_buffered;
		goto again;
	}
	if (res > 0 && rw) {
		req->done += (unsigned)res;
		if (req->done < bio->len) {
			VS_VERBOSE_HP(BACKEND, "short %s off %llu: %llu of %llu done, resubmitting",
				      vs_bio_op_name(bio->op), (unsigned long long)bio->offset,
				      (unsigned long long)req->done, (unsigned long long)bio->len);
			goto again;
		}
		res = 0;
	} else if (res == 0 && rw) {
		/* A read at end of file, or a write making no progress.  The SCSI layer
		 * never reads beyond the size, so this means the file shrank under us. */
		VS_ERROR(BACKEND, "%s off %llu: no progress at %llu of %llu (file truncated?)",
			 vs_bio_op_name(bio->op), (unsigned long long)bio->offset,
			 (unsigned long long)req->done, (unsigned long long)bio->len);
		res = -EIO;
	}
	goto finish;
again:
	if (req_resubmit(ctx, req, &res))
		return true;
finish:
	if (res == 0 && req->bounce && bio->op == VS_BIO_READ)
		vs_iov_from_buf(bio->iov, (unsigned)bio->iovcnt, 0, req->bounce, bio->len);
	ctx->ring_busy--;
	vs_io_req_put(ctx, req);
	/* Held back (test-only delay): a new SQE to submit, like a resubmission. */
	return !bio_complete(ctx, bio, res < 0 ? res : 0);
}

/* A bio a hook held came back (req, vs_io_ctx_hold): it goes on to its backend now, or
 * completes with the error it came back with.  1 when it completed; *sent counts those
 * that went to the backend (their SQEs want submitting). */
static __attribute__((noinline, cold)) int held_resume(struct vs_io_ctx *ctx, struct vs_io_req *req,
						       int res, unsigned *sent)
{
	struct vs_bio *bio = req->bio;

	ctx->remote_busy--;
	vs_io_req_put(ctx, req); /* before the dispatch: it may need a slot */
	if (!res && bio->hooked) {
		vs_be_hooks_resume(bio);
		res = vs_be_dispatch(bio->hooked, ctx, bio);
		if (res == -EAGAIN) { /* the SQ is full of this pass's work: make room */
			io_uring_submit(&ctx->ring);
			res = vs_be_dispatch(bio->hooked, ctx, bio);
		}
		if (!res) {
			(*sent)++;
			return 0;
		}
	}
	return bio_complete(ctx, bio, res);
}

/* Requests a library's threads handed back, oldest first: done() runs in the order the
 * completions came.  A request sent out again (a next stage) stays the library's; a bio a
 * hook held goes on (held_resume). */
static int remote_reap(struct vs_io_ctx *ctx)
{
	struct vs_io_req *list = __atomic_exchange_n(&ctx->remote, NULL, __ATOMIC_ACQUIRE);
	struct vs_io_req *fifo = NULL;
	unsigned sent = 0;
	int n = 0;

	while (list) { /* reverse the LIFO */
		struct vs_io_req *req = list;

		list = req->next;
		req->next = fifo;
		fifo = req;
	}
	while (fifo) {
		struct vs_io_req *req = fifo;
		struct vs_bio *bio = req->bio;
		int64_t res = req->remote_res;

		fifo = req->next;
		if (__builtin_expect(req->held, 0)) {
			n += held_resume(ctx, req, (int)res, &sent);
			continue;
		}
		if (req->be->ops->remote_again(ctx, req, &res))
			continue;
		ctx->remote_busy--;
		vs_io_req_put(ctx, req);
		if (bio_complete(ctx, bio, res < 0 ? (int)res : 0))
			n++;
	}
	if (sent)
		io_uring_submit(&ctx->ring);
	return n;
}

/* Milliseconds left until deadline (monotonic ns; 0: none, -1 returned), at least 1. */
static int ms_left(uint64_t deadline)
{
	uint64_t now = vs_mono_ns();

	if (!deadline)
		return -1;
	if (now >= deadline)
		return 0;
	return (deadline - now) / 1000000 >= INT32_MAX ? INT32_MAX
						       : (int)((deadline - now + 999999) / 1000000);
}

/* Block until something completes or deadline passes (monotonic ns, 0: none): 0, -ETIMEDOUT
 * or -errno.  io_uring's wait when only the ring has requests out; else the eventfd (which
 * io_uring, the libraries' threads and a hook letting a bio go all write), or, for a polled
 * context, whose eventfd stays quiet, a spin that also lets io_uring post. */
static int ctx_wait(struct vs_io_ctx *ctx, uint64_t deadline)
{
	struct pollfd p = {.fd = ctx->efd, .events = POLLIN};
	uint64_t cnt;
	int rc, ms;

	if (!ctx->remote_busy) {
		struct io_uring_cqe *cqe;

		do {
			struct __kernel_timespec ts;

			if (!deadline) {
				rc = io_uring_submit_and_wait(&ctx->ring, 1);
				continue;
			}
			if (!(ms = ms_left(deadline)))
				return -ETIMEDOUT;
			ts =
			    (struct __kernel_timespec){ms / 1000, (long long)(ms % 1000) * 1000000};
			rc = io_uring_submit_and_wait_timeout(&ctx->ring, &cqe, 1, &ts, NULL);
			if (rc == -ETIME)
				rc = -EINTR; /* look at the clock again */
		} while (rc == -EINTR);
		return rc < 0 ? rc : 0;
	}
	while (!vs_io_ctx_pending(ctx)) {
		if ((rc = io_uring_submit_and_get_events(&ctx->ring)) < 0 && rc != -EINTR)
			return rc;
		if (vs_io_ctx_pending(ctx))
			break;
		if (!(ms = ms_left(deadline)))
			return -ETIMEDOUT;
		if (ctx->wait == VS_IO_WAIT_POLL) {
			sched_yield();
			continue;
		}
		if (poll(&p, 1, ms) < 0 && errno != EINTR)
			return -errno;
		/* A late write for a request reaped already: drain it, or poll would spin. */
		if (!vs_io_ctx_pending(ctx) && read(ctx->efd, &cnt, sizeof(cnt)) < 0 &&
		    errno != EAGAIN)
			return -errno;
	}
	return 0;
}

int vs_io_ctx_wait(struct vs_io_ctx *ctx, unsigned timeout_ms)
{
	if (ctx->defer_head || (!ctx->ring_busy && !ctx->remote_busy))
		return 0; /* something to reap already, or nothing that could complete */
	return ctx_wait(ctx, vs_mono_ns() + (uint64_t)timeout_ms * 1000000 + 1);
}

int vs_io_ctx_reap(struct vs_io_ctx *ctx, bool wait_one)
{
	struct io_uring_cqe *cqe;
	struct vs_bio *list;
	unsigned resubmits = 0, budget;
	uint64_t cnt;
	int n = 0, rc;

	/* Drain first: a completion posted after this read signals again.  Only the level
	 * mode reads the fd (no system call per reap otherwise). */
	if (ctx->wait == VS_IO_WAIT_LEVEL && read(ctx->efd, &cnt, sizeof(cnt)) < 0 &&
	    errno != EAGAIN)
		return -errno;
	ctx->signalled = false;

	if (wait_one && !ctx->defer_head && (ctx->ring_busy || ctx->remote_busy) &&
	    (rc = ctx_wait(ctx, 0)) < 0) {
		VS_ERROR(BACKEND, "io ctx %p: wait: %s", ctx, strerror(-rc));
		return rc;
	}

	/* Bounded, so callbacks that keep submitting cannot keep us here forever. */
	budget = 2 * ctx->depth;
	while (budget-- && io_uring_peek_cqe(&ctx->ring, &cqe) == 0) {
		struct vs_io_req *req = io_uring_cqe_get_data(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&ctx->ring, cqe);
		if (!req)
			continue; /* a NOP standing in for a failed resubmission */
		if (req_cqe(ctx, req, res))
			resubmits++;
		else
			n++;
	}
	if (resubmits) {
		rc = io_uring_submit(&ctx->ring);
		if (rc < 0)
			VS_ERROR(BACKEND, "io ctx %p: resubmit: %s", ctx, strerror(-rc));
	}
	if (ctx->remote_busy)
		n += remote_reap(ctx);

	/* Deferred bios: take the list as it is; bios their done() adds go to the next reap. */
	list = ctx->defer_head;
	ctx->defer_head = NULL;
	ctx->defer_tail = &ctx->defer_head;
	while (list) {
		struct vs_bio *bio = list;

		list = bio->next;
		if (bio_complete(ctx, bio, bio->res))
			n++;
	}
	ctx_signal_deferred(ctx);
	return n;
}
