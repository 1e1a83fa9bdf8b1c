/* SPDX-License-Identifier: MIT */
/*
 * Block backends: where a LUN's blocks live.  file (io_uring, buffered or O_DIRECT),
 * ram (anonymous memory), null (discards writes, reads zeros) and, when built with
 * librbd, rbd (a Ceph RBD image).
 *
 * I/O is asynchronous and per thread: each worker thread owns one struct vs_io_ctx
 * (an io_uring and an eventfd) and submits bios of any backend into it.  Completion
 * callbacks run on that thread, from vs_io_ctx_reap(), never from inside
 * vs_backend_submit() (so a caller never re-enters itself), also for backends whose
 * library completes requests on threads of its own (rbd): those completions are handed
 * to the context's thread, which its eventfd wakes.
 */
#ifndef VS_BACKEND_H
#define VS_BACKEND_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

enum vs_bio_op {
	VS_BIO_READ,
	VS_BIO_WRITE,
	VS_BIO_FLUSH,	     /* make every completed write durable (fdatasync) */
	VS_BIO_DISCARD,	     /* deallocate; reads of the range then return zeros */
	VS_BIO_WRITE_ZEROES, /* like DISCARD but the range must read as zeros */
};
/* "read", "write", ...: for messages and trace events.  Inline: hot trace sites take it as
 * an argument, and a call there would keep the site's other arguments in saved registers,
 * which the function's prologue pays for whether the site is on or off. */
static inline const char *vs_bio_op_name(enum vs_bio_op op)
{
	switch (op) {
	case VS_BIO_READ:
		return "read";
	case VS_BIO_WRITE:
		return "write";
	case VS_BIO_FLUSH:
		return "flush";
	case VS_BIO_DISCARD:
		return "discard";
	case VS_BIO_WRITE_ZEROES:
		return "write-zeroes";
	}
	return "bad-op";
}

struct vs_bio;
typedef void (*vs_bio_done_fn)(struct vs_bio *bio, int res); /* res: 0 or -errno */

struct vs_bio {
	enum vs_bio_op op;
	uint64_t offset;	 /* bytes from the start of the backend */
	uint64_t len;		 /* bytes; must equal the iovec total for READ/WRITE */
	const struct iovec *iov; /* caller-owned, valid until done() */
	int iovcnt;
	bool fua; /* WRITE: durable before completion (RWF_DSYNC) */
	vs_bio_done_fn done;
	void *priv;		   /* caller's */
	struct vs_bio *next;	   /* backend-private: completion list link */
	int res;		   /* backend-private */
	uint32_t delay_us;	   /* backend-private: test-only completion delay (see below) */
	struct vs_backend *hooked; /* backend-private: test options or the write log watch it */
};

struct vs_io_ctx;
struct vs_backend;

/* Per-thread I/O context: an io_uring of `depth` entries and an eventfd that tells the
 * owner completions wait (how: vs_io_ctx_set_wait). */
int vs_io_ctx_create(struct vs_io_ctx **ctx, unsigned depth);
void vs_io_ctx_destroy(struct vs_io_ctx *ctx);
int vs_io_ctx_fd(const struct vs_io_ctx *ctx);
/* Submit what was queued since the last call (callers batch, then submit once). */
int vs_io_ctx_submit(struct vs_io_ctx *ctx);
/* Run the done() callbacks of completed bios; returns how many, or -errno.
 * wait_one: block until at least one completes (used when draining). */
int vs_io_ctx_reap(struct vs_io_ctx *ctx, bool wait_one);
/* Block until a completion waits to be reaped, or timeout_ms pass: 0 (also when nothing is
 * in flight), -ETIMEDOUT, or -errno.  For waits that must end (vs_io_ctx_reap's wait_one
 * has no limit). */
int vs_io_ctx_wait(struct vs_io_ctx *ctx, unsigned timeout_ms);
/* Bios submitted and not yet completed. */
unsigned vs_io_ctx_inflight(const struct vs_io_ctx *ctx);
/* Completions are waiting to be reaped (no system call: for polling loops). */
bool vs_io_ctx_pending(const struct vs_io_ctx *ctx);
/* How the owner learns that completions wait: */
enum vs_io_wait {
	/* The default: the fd is readable while completions wait (poll or epoll it);
	 * reaping reads it, submitting writes it for completions the backend made at once. */
	VS_IO_WAIT_LEVEL,
	/* The kernel writes the fd for each completion it posts (and a library's thread, rbd,
	 * for the first completion it hands back); the fd is never read:
	 * watch it edge-triggered (EPOLLET) and look at vs_io_ctx_pending() before sleeping,
	 * because completions made at once (ram, null, tmpfs files) are not signalled.  No
	 * system call of ours per completion. */
	VS_IO_WAIT_EDGE,
	/* No eventfd traffic at all: the owner polls vs_io_ctx_pending(). */
	VS_IO_WAIT_POLL,
};
int vs_io_ctx_set_wait(struct vs_io_ctx *ctx, enum vs_io_wait how);

/* Open a backend from a spec: "file=PATH[,ro][,direct][,shared]", "ram=SIZE", "null=SIZE",
 * "rbd=POOL/IMAGE[,conf=PATH][,id=USER][,ro][,timeout=SECONDS]" (see rbd.c).
 * SIZE takes K/M/G/T suffixes (powers of 1024).  On error returns -errno and, when
 * why is not NULL, a message saying what was wrong.
 * Options for any kind:
 *   "log-writes=LOG"  record every completed write, discard and flush in LOG, in the
 *                     dm-log-writes format (proto/logwrites_proto.h), for crash-state
 *                     replay (`vioscope check flush`); LOG is created, never overwritten
 * Test-only options, for any kind: "delay=USEC" holds every bio's completion back by USEC
 * microseconds (the data has moved; done() runs late), "delay-every=N" only every Nth
 * bio's.  They make requests stay in flight on purpose (TMF and reset tests) and a slow
 * stage show up where it belongs (trace analysis).  Faults, each once, on the Kth write
 * bio (counted from 1): "drop-write=K" acknowledges it without writing, "misdirect-write=K"
 * writes it one 512-byte sector further on (back, at the end of the device),
 * "stale-read=K" makes the first read that overlaps it return what it replaced; on the Kth
 * flush bio, "fail-flush=K" fails it with -EIO (a writeback error).  The test gate
 * (src/backend/gate.c) holds bios before the backend sees them until the test lets them
 * go: "gate=KIND[:FIRST[-[LAST]]]" (KIND read, write, flush, discard or any; the FIRST..
 * LAST bios of that kind counted from 1, all of them without a range), driven by the
 * vs_backend_gate_*() calls below or, from another process, "gate-sock=PATH" (gate.c).
 * vs_backend_test_option() names these test-only options.
 *
 * A flush that fails with a writeback error (anything but -ETIMEDOUT, -EAGAIN, -ENOMEM,
 * -ECANCELED) is remembered: every later flush of the backend fails with that error
 * until the backend is opened again, so that a write lost once is never reported
 * durable by a later flush (the kernel reports such an error only once per open file). */
int vs_backend_open(struct vs_backend **be, const char *spec, char *why, size_t whylen);
/* What a spec may do, for callers that take specs from others (the target: its command
 * line and its management socket).  vs_backend_open() is the trusting form: test options
 * taken, paths anywhere, any size. */
struct vs_backend_opts {
	bool testing;	     /* take the test-only options; without it they are refused (-EPERM) */
	const char *root;    /* NULL, or file= and log-writes= paths must resolve beneath this
				directory (relative to it, or absolute under it; openat2
				RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS): -EXDEV otherwise */
	uint32_t block_size; /* > 0: the size must be a whole, non-zero number of these (-EINVAL) */
};
/* The whole spec is checked (every option, its values, what the caller allows) before
 * anything is opened; the data is opened and its size checked before a log-writes= file is
 * created, and that file must not exist yet (O_EXCL | O_NOFOLLOW: -EEXIST). */
int vs_backend_open_opts(struct vs_backend **be, const char *spec,
			 const struct vs_backend_opts *opts, char *why, size_t whylen);
/* What vs_backend_open_opts() checks before it opens anything, alone: the kind, every
 * option and its value, what opts allow (test-only options), and for ram= and null= the
 * size in whole blocks.  Nothing is opened or created.  0, or -EINVAL / -EPERM with why
 * set: a mistake in the spec itself, not in the world it names. */
int vs_backend_spec_check(const char *spec, const struct vs_backend_opts *opts, char *why,
			  size_t whylen);
void vs_backend_close(struct vs_backend *be);
/* Bytes.  May change while the backend is in use (an RBD image resized by its owner):
 * see vs_backend_watch_size. */
uint64_t vs_backend_size(const struct vs_backend *be);
bool vs_backend_read_only(const struct vs_backend *be);
bool vs_backend_supports_discard(const struct vs_backend *be);
const char *vs_backend_kind(const struct vs_backend *be); /* "file", "ram", "null", "rbd" */
/* Completed writes outlive the process (file, rbd): worth a FLUSH before exiting. */
bool vs_backend_durable(const struct vs_backend *be);
/* A name that identifies the storage across restarts whatever the spec's spelling
 * ("rbd:POOL/IMAGE-ID"), or "" when the backend has none of its own (the caller then
 * names it, e.g. by its file's real path). */
const char *vs_backend_identity(const struct vs_backend *be);
/* The backend's size changed to new_size bytes.  Runs on a thread of the backend's own
 * (an RBD image resized by its owner), or inside vs_backend_resize() on its caller's;
 * never inside another vs_backend_* call. */
typedef void (*vs_backend_size_fn)(void *arg, uint64_t old_size, uint64_t new_size);
/* Be told when the size changes (one watcher per backend: -EBUSY if another watches).
 * Backends whose size cannot change never call it. */
int vs_backend_watch_size(struct vs_backend *be, vs_backend_size_fn fn, void *arg);
/* Stop watching (arg as given to vs_backend_watch_size); once it returns, fn is not
 * running and will not run again. */
void vs_backend_unwatch_size(struct vs_backend *be, void *arg);
/* Grow or shrink the storage to new_size bytes while it is in use, telling the size
 * watcher (on the caller's thread).  Growing: the storage grows, then the size.  Shrinking:
 * the size is lowered first (bios past the new end are refused with -ERANGE from then on),
 * then drain(arg) (when not NULL) waits for the bios in flight that were checked against
 * the old size (0, or -errno: the old size is put back and that is the result), then the
 * storage is cut, so that no write in flight lands past the new end.  file: ftruncate
 * (regular files only); ram: grows (up to max(64 GiB, the size it was opened with): the
 * address range reserved at open).  0, or -errno with why set: -ENOTSUP (null, rbd, a block
 * device, ram shrinking, read-only), -ENOSPC (ram beyond its reservation), drain's error,
 * the system call's error (the old size is back). */
int vs_backend_resize(struct vs_backend *be, uint64_t new_size, int (*drain)(void *arg), void *arg,
		      char *why, size_t whylen);
/* The writeback error a flush of be met (kept: see vs_backend_open), or 0. */
int vs_backend_flush_error(const struct vs_backend *be);
/* Built with the rbd backend (librbd was found when vioscope was built). */
bool vs_backend_have_rbd(void);
/* Alignment O_DIRECT needs for buffers, offsets and lengths (1 when buffered). */
unsigned vs_backend_alignment(const struct vs_backend *be);
/* O_DIRECT bios that did not meet that alignment and were still served, through a
 * bounce buffer or the page cache (a slow path worth watching; 0 when buffered). */
uint64_t vs_backend_bounce_count(const struct vs_backend *be);

/* Queue a bio on ctx (not yet submitted to the kernel: call vs_io_ctx_submit).
 * Returns 0, or -errno for a bio that is invalid: then done() is NOT called.
 *   -EINVAL      malformed: no done(), unknown op, len != iovec total, iovcnt > IOV_MAX
 *   -ERANGE      offset + len beyond the size (or overflowing)
 *   -EROFS       WRITE, DISCARD or WRITE_ZEROES on a read-only backend
 *   -EOPNOTSUPP  DISCARD or WRITE_ZEROES where vs_backend_supports_discard() is false
 *   -EAGAIN      the context is full (depth bios in flight): reap and retry
 * FLUSH ignores offset and len.  Zero-length bios complete with 0.  Misalignment for
 * O_DIRECT is not an error (see vs_backend_bounce_count).  done() may report -EIO for
 * a READ that meets end of file (the file shrank after open), and -ETIMEDOUT for a bio
 * of an rbd backend with timeout=S that Ceph did not answer within S seconds. */
int vs_backend_submit(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio);

/* ---- test-only: the gate (gate= in the spec) ----------------------------------------------
 * Any thread.  Bios held now (0 without a gate). */
unsigned vs_backend_gate_held(struct vs_backend *be);
/* Wait until at least n bios are held: 0, -ETIMEDOUT after timeout_ms, -ENOENT no gate. */
int vs_backend_gate_wait(struct vs_backend *be, unsigned n, unsigned timeout_ms);
/* Let the n oldest held bios go on to the backend: how many went. */
unsigned vs_backend_gate_release(struct vs_backend *be, unsigned n);
/* Let every held bio go, and hold no more: how many went. */
unsigned vs_backend_gate_open(struct vs_backend *be);
/* The spec field ("name=value") is one of the test-only options above. */
bool vs_backend_test_option(const char *field);

#endif /* VS_BACKEND_H */
