/* SPDX-License-Identifier: MIT */
/*
 * Private to src/backend: the backend object, the per-kind ops table and the
 * per-thread I/O context internals shared by io_ctx.c and the backends.
 */
#ifndef VS_BACKEND_INT_H
#define VS_BACKEND_INT_H

#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <sys/types.h>
#include <liburing.h>

#include "backend/backend.h"
#include "util/util.h"

struct vs_io_req;

struct vs_be_ops {
	const char *kind;
	/* Called after the common checks (valid bio, in range, writable, ctx not full,
	 * len > 0 for data ops).  Returns 0 once the bio is queued or deferred. */
	int (*submit)(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio);
	void (*close)(struct vs_backend *be);
	/* Copy len bytes at off into buf, synchronously: 0 or -errno.  Test options only
	 * (stale-read keeps what a write is about to replace). */
	int (*read_sync)(struct vs_backend *be, void *buf, uint64_t len, uint64_t off);
	/* Backends whose library completes requests on its own threads (rbd): req came
	 * back through vs_io_req_remote_done() with *res, on the context's thread.  True
	 * when the backend sent req out again (a next stage); else the bio completes with
	 * *res (which the backend may rewrite: 0 or -errno). */
	bool (*remote_again)(struct vs_io_ctx *ctx, struct vs_io_req *req, int64_t *res);
	/* Whether the storage can go from old to new_size bytes (vs_backend_resize checked:
	 * writable, another size): 0, or -errno with why set.  Asked before anything changes.
	 * Then resize changes it: 0 or -errno (why set); the caller keeps the size and tells
	 * the watcher.  NULL: the size is fixed (null) or changed only by its owner (rbd). */
	int (*resize_check)(struct vs_backend *be, uint64_t old, uint64_t new_size, char *why,
			    size_t whylen);
	int (*resize)(struct vs_backend *be, uint64_t old, uint64_t new_size, char *why,
		      size_t whylen);
};

struct vs_be_rbd; /* rbd.c */

struct vs_backend {
	const struct vs_be_ops *ops;
	uint64_t size;		   /* bytes (atomic: an rbd image may be resized while in use) */
	bool ro;		   /* writes, discards rejected with -EROFS */
	bool discard;		   /* DISCARD / WRITE_ZEROES supported */
	unsigned mem_align;	   /* O_DIRECT buffer address alignment; 1 when buffered */
	unsigned off_align;	   /* O_DIRECT offset/length alignment; 1 when buffered */
	uint64_t bounces;	   /* bios not sent O_DIRECT as given (atomic, relaxed) */
	struct vs_be_hooks *hooks; /* test options and the write log (hooks.c), or NULL */
	bool durable;		   /* completed writes outlive the process */
	int flush_err;		   /* a flush's writeback error, kept (atomic; 0: none) */
	char identity[300];	   /* vs_backend_identity(), "" when none */
	pthread_mutex_t size_lock; /* the size watcher below */
	vs_backend_size_fn size_fn;
	void *size_arg;
	union {
		struct {
			int fd;		 /* O_DIRECT when direct */
			int fd_buffered; /* page-cache fd for unaligned bios, or -1 */
			bool direct;
			bool bdev;
			bool memory_fs; /* tmpfs: reads and writes are memory copies */
		} file;
		struct {
			void *mem;
			size_t map_len;	  /* the reservation: the most the LUN may grow to */
			uint64_t claimed; /* of the machine's memory (ram.c: ram_claim) */
		} ram;
		struct vs_be_rbd *rbd;
	};
};

/* One io_uring operation in flight (file backend).  Lives in ctx->reqs. */
struct vs_io_req {
	struct vs_bio *bio;
	struct vs_backend *be;
	int fd;			     /* fd the operation goes to (may switch to fd_buffered) */
	unsigned retries;	     /* -EINTR/-EAGAIN resubmissions */
	uint64_t done;		     /* READ/WRITE bytes transferred so far */
	void *bounce;		     /* O_DIRECT bounce buffer, or NULL */
	struct iovec biov;	     /* the bounce buffer as an iovec */
	struct iovec *tail;	     /* remainder iovecs after a short transfer, or NULL */
	bool delay;		     /* a test-only delay: a timeout that completes bio */
	bool held;		     /* a hook holds bio (vs_io_ctx_hold) */
	struct __kernel_timespec ts; /* its length */
	struct vs_io_req *next;	     /* free list; the remote list while handed back */
	/* Requests a library completes on its own threads (rbd): */
	struct vs_io_ctx *ctx; /* whose thread finishes it */
	int64_t remote_res;    /* the library's result */
	unsigned stage;	       /* the backend's: which step of the bio is out */
};

struct vs_io_ctx {
	struct io_uring ring;
	int efd;		   /* eventfd registered with the ring */
	unsigned depth;		   /* bios accepted at most (io_uring + deferred) */
	unsigned inflight;	   /* accepted, done() not yet called */
	unsigned ring_busy;	   /* reqs owned by io_uring */
	bool signalled;		   /* efd already written for the deferred list (LEVEL) */
	enum vs_io_wait wait;	   /* how the owner learns of completions (atomic: read by
				      vs_io_req_remote_done on a library's thread) */
	struct vs_bio *defer_head; /* synchronously completed, done() pending */
	struct vs_bio **defer_tail;
	unsigned remote_busy; /* reqs owned by a library's threads (rbd) */
	/* Lock-free, filled by those threads, emptied by the owner (atomic exchange): */
	struct vs_io_req *remote; /* completed there, LIFO, through req->next */
	unsigned remote_pushing;  /* threads between their push and their eventfd write */
	struct vs_io_req *free;
	struct vs_io_req reqs[];
};

/* On ctx's thread: a hook (the test gate) keeps bio, counted in flight, for a while: a
 * request slot stands for it as for a library's request (vs_io_req_remote_start), so the
 * owner's waits watch the eventfd.  NULL when no slot is free.  Any thread hands it back
 * with vs_io_req_remote_done(req, res): at the owner's next reap the bio goes on to its
 * backend (res 0), or completes with res (< 0; bio->hooked NULL: no hook runs). */
struct vs_io_req *vs_io_ctx_hold(struct vs_io_ctx *ctx, struct vs_backend *be, struct vs_bio *bio);
/* Send a valid bio that passed the hooks on to its backend (vs_backend_submit's second
 * half): 0, or -errno (-EAGAIN: no room now). */
int vs_be_dispatch(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio);
/* A flush of be completed with res: a writeback error is kept, and every later flush of be
 * fails with it (the kernel reports one only once to each open file). */
void vs_be_flush_completed(struct vs_backend *be, int res);
/* Queue bio for completion with res at the next reap (ram, null, zero-length). */
void vs_io_ctx_defer(struct vs_io_ctx *ctx, struct vs_bio *bio, int res);
/* Take a free request slot for bio on be (NULL when none); the caller then takes an
 * SQE, so that nothing it cannot undo happens before every fallible step. */
struct vs_io_req *vs_io_req_get(struct vs_io_ctx *ctx, struct vs_backend *be, struct vs_bio *bio);
/* Give back a slot that was never submitted; frees its bounce buffer. */
void vs_io_req_put(struct vs_io_ctx *ctx, struct vs_io_req *req);
/* Fill sqe with the READ/WRITE remainder of req (from req->done on); 0 or -ENOMEM. */
int vs_io_req_prep_rw(struct vs_io_req *req, struct io_uring_sqe *sqe);
/* Hand a prepared sqe to the ring on behalf of req (sets user_data, counts it). */
void vs_io_req_queue(struct vs_io_ctx *ctx, struct vs_io_req *req, struct io_uring_sqe *sqe);
/* req is about to go to a library that completes it on a thread of its own: call before
 * handing it over (the completion may come before the hand-over call returns). */
void vs_io_req_remote_start(struct vs_io_ctx *ctx, struct vs_io_req *req);
/* The hand-over failed: req was never sent (undoes vs_io_req_remote_start). */
void vs_io_req_remote_cancel(struct vs_io_ctx *ctx, struct vs_io_req *req);
/* On any thread: req is finished with res.  Hands it to the context's thread without a
 * lock and wakes that thread (eventfd) when its list was empty; the backend's
 * remote_again() and the bio's done() then run in vs_io_ctx_reap().  Neither req nor its
 * bio may be touched after this call. */
void vs_io_req_remote_done(struct vs_io_req *req, int64_t res);

int vs_be_file_open(struct vs_backend *be, const char *args, const struct vs_backend_opts *o,
		    char *why, size_t whylen);
int vs_be_ram_open(struct vs_backend *be, uint64_t size, char *why, size_t whylen);
/* The kind's arguments parsed without opening anything (vs_backend_spec_check): 0 or
 * -EINVAL with why set. */
int vs_be_file_check(const char *args, char *why, size_t whylen);
int vs_be_null_open(struct vs_backend *be, uint64_t size, char *why, size_t whylen);
#ifdef VS_HAVE_RBD
int vs_be_rbd_open(struct vs_backend *be, const char *args, char *why, size_t whylen);
int vs_be_rbd_check(const char *args, char *why, size_t whylen);
#endif
/* ---- path.c: a path from a spec, opened where the spec's giver may (o->root) ----
 * The fd, or -errno with why set: strerror's text, or which rule of the root refused it. */
int vs_be_open(const struct vs_backend_opts *o, const char *path, int flags, mode_t mode, char *why,
	       size_t whylen);
/* The size changed (a backend's own thread): store it, tell the watcher. */
void vs_backend_size_changed(struct vs_backend *be, uint64_t new_size);

/* A spec's options one by one: *cursor is at the comma before the next one (NULL: none
 * left).  Sets *opt and *olen (not NUL-terminated) and moves *cursor on. */
static inline bool vs_be_next_opt(const char **cursor, const char **opt, size_t *olen)
{
	if (!*cursor)
		return false;
	*opt = *cursor + 1;
	*cursor = strchr(*opt, ',');
	*olen = *cursor ? (size_t)(*cursor - *opt) : strlen(*opt);
	return true;
}

/* ---- hooks.c: what the options every kind takes do ----
 * The test options (delay, drop-write, misdirect-write, stale-read) and the write log
 * (log-writes=PATH) all act here, on bios of a backend with be->hooks set: at submission
 * (vs_be_hooks_submit) and when the bio completes, just before its done() runs
 * (vs_be_hooks_done). */
/* One "name=value" field of a backend spec: 1 taken, 0 not one of ours, -EINVAL (why set);
 * a test-only option without testing: -EPERM. */
int vs_be_hooks_parse(struct vs_backend *be, const char *field, bool testing, char *why,
		      size_t whylen);
/* After the backend opened: create the log, say what is armed.  0 or -errno (why set). */
int vs_be_hooks_start(struct vs_backend *be, const struct vs_backend_opts *o, char *why,
		      size_t whylen);
/* A valid bio about to go to the backend: 0 go on, 1 the hook completed it (deferred) or
 * holds it (the gate: it comes back through vs_io_req_remote_done). */
int vs_be_hooks_submit(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio);
/* A bio the gate held is about to go to the backend after all. */
void vs_be_hooks_resume(struct vs_bio *bio);
/* be's gate, or NULL. */
struct vs_be_gate *vs_be_hooks_gate(struct vs_backend *be);
/* bio (bio->hooked) completed with res; runs before its done(). */
void vs_be_hooks_done(struct vs_bio *bio, int res);
void vs_be_hooks_close(struct vs_backend *be);

/* ---- gate.c: the test gate (gate=, gate-sock=) ---- */
struct vs_be_gate;
/* One spec field: 1 taken (*g made on the first), 0 not one of ours, -EINVAL (why set). */
int vs_be_gate_parse(struct vs_be_gate **g, const char *field, char *why, size_t whylen);
/* After the backend opened (g may be NULL): connect gate-sock.  0 or -errno (why set). */
int vs_be_gate_start(struct vs_be_gate *g, char *why, size_t whylen);
/* On ctx's thread: true when the gate keeps bio (it comes back through
 * vs_io_req_remote_done once released). */
bool vs_be_gate_hold(struct vs_be_gate *g, struct vs_io_ctx *ctx, struct vs_bio *bio);
/* What is still held fails with -ECANCELED (g may be NULL). */
void vs_be_gate_close(struct vs_be_gate *g);

/* ---- wlog.c: the write log, in dm-log-writes' format (proto/logwrites_proto.h) ---- */
struct vs_wlog;
/* Create the log at path (which must not exist: never overwritten, no symlink followed). */
int vs_wlog_open(struct vs_wlog **log, const char *path, const struct vs_backend_opts *o, char *why,
		 size_t whylen);
/* A flush is about to be submitted: it covers the writes completed so far. */
void vs_wlog_flush_submitted(struct vs_wlog *log, const struct vs_bio *flush);
/* A write, discard, write-zeroes or flush completed with res (< 0: not logged). */
void vs_wlog_completed(struct vs_wlog *log, const struct vs_bio *bio, int res);
/* Log what is left (unflushed writes, an end mark), close.  Entries logged are counted. */
void vs_wlog_close(struct vs_wlog *log);

static inline void vs_be_count_bounce(struct vs_backend *be)
{
	__atomic_fetch_add(&be->bounces, 1, __ATOMIC_RELAXED);
}

#endif /* VS_BACKEND_INT_H */
