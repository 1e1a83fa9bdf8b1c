/* SPDX-License-Identifier: MIT */
/*
 * The options every backend kind takes, in one place: the write log (log-writes=LOG) and
 * the test-only delay and faults.  A backend with none of them has be->hooks NULL and its
 * bios never come here; with any of them, every bio passes vs_be_hooks_submit() before the
 * backend sees it and vs_be_hooks_done() after it completed, before its done().
 *
 * The faults are what a verifier must catch and name (`vioscope check verify`), each done
 * once, on the Kth write bio counted from the backend's opening:
 *   drop-write=K       acknowledged, never written (a lost write)
 *   misdirect-write=K  written one 512-byte sector away from where it was asked (further
 *                      on, or back when it ends the device)
 *   stale-read=K       what the write replaces is kept; the first read that overlaps the
 *                      write afterwards gets that old content there (a stale read)
 * and, on the Kth flush bio:
 *   fail-flush=K       fails with -EIO without reaching the storage (a writeback error,
 *                      reported once, as the kernel reports one to each open file)
 * The test gate (gate=, gate-sock=) is gate.c's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vioscope/trace.h>

#include "backend/backend_int.h"

#define SECTOR 512u

struct vs_be_hooks {
	uint64_t delay_us;    /* test-only completion delay (0: none) ... */
	uint64_t delay_every; /* ... for every Nth bio */
	uint64_t delay_seq;   /* bios counted for delay_every (atomic) */
	uint64_t drop_write, misdirect_write, stale_write; /* write numbers, 0: off */
	uint64_t writes;				   /* write bios seen (atomic) */
	uint64_t fail_flush;				   /* flush number, 0: off */
	uint64_t flushes;				   /* flush bios seen (atomic) */
	struct vs_be_gate *gate;			   /* gate.c, or NULL */
	char *log_path;
	struct vs_wlog *log;
	pthread_mutex_t lock; /* the stale-read capture below */
	bool stale_armed;
	uint64_t stale_off, stale_len;
	void *stale_old;
};

static struct vs_be_hooks *hooks_get(struct vs_backend *be)
{
	if (!be->hooks) {
		be->hooks = calloc(1, sizeof(*be->hooks));
		if (be->hooks) {
			be->hooks->delay_every = 1;
			pthread_mutex_init(&be->hooks->lock, NULL);
		}
	}
	return be->hooks;
}

/* "name=NUMBER" in [min, max] into *out: 1, or -EINVAL with why set. */
static int number_option(const char *field, size_t name_len, uint64_t min, uint64_t max,
			 uint64_t *out, char *why, size_t whylen)
{
	if (vs_parse_u64(field + name_len, min, max, out))
		return vs_fail(why, whylen, -EINVAL, "%s: expected a whole number in %llu..%llu",
			       field, (unsigned long long)min, (unsigned long long)max);
	return 1;
}

int vs_be_hooks_parse(struct vs_backend *be, const char *field, bool testing, char *why,
		      size_t whylen)
{
	static const struct {
		const char *name;
		uint64_t min, max;
		size_t off;
	} numbers[] = {
	    {"delay=", 1, 60000000, offsetof(struct vs_be_hooks, delay_us)},
	    {"delay-every=", 1, UINT32_MAX, offsetof(struct vs_be_hooks, delay_every)},
	    {"drop-write=", 1, UINT64_MAX, offsetof(struct vs_be_hooks, drop_write)},
	    {"misdirect-write=", 1, UINT64_MAX, offsetof(struct vs_be_hooks, misdirect_write)},
	    {"stale-read=", 1, UINT64_MAX, offsetof(struct vs_be_hooks, stale_write)},
	    {"fail-flush=", 1, UINT64_MAX, offsetof(struct vs_be_hooks, fail_flush)},
	};
	struct vs_be_hooks *h;
	uint64_t v;
	int rc;

	/* Faults, delays and held bios in a production target are an attack, not a test. */
	if (!testing && vs_backend_test_option(field))
		return vs_fail(
		    why, whylen, -EPERM,
		    "'%s' is a test-only option (the target must be started with --testing)",
		    field);
	for (size_t i = 0; i < sizeof(numbers) / sizeof(numbers[0]); i++) {
		size_t n = strlen(numbers[i].name);

		if (strncmp(field, numbers[i].name, n))
			continue;
		if ((rc = number_option(field, n, numbers[i].min, numbers[i].max, &v, why,
					whylen)) < 0)
			return rc;
		if (!(h = hooks_get(be)))
			return vs_fail(why, whylen, -ENOMEM, "out of memory");
		*(uint64_t *)((char *)h + numbers[i].off) = v;
		return 1;
	}
	if (!strncmp(field, "gate", 4)) {
		if (!(h = hooks_get(be)))
			return vs_fail(why, whylen, -ENOMEM, "out of memory");
		if ((rc = vs_be_gate_parse(&h->gate, field, why, whylen)))
			return rc;
	}
	if (!strncmp(field, "log-writes=", 11)) {
		if (!field[11])
			return vs_fail(why, whylen, -EINVAL, "log-writes=: expected a file name");
		if (!(h = hooks_get(be)) ||
		    (free(h->log_path), !(h->log_path = strdup(field + 11))))
			return vs_fail(why, whylen, -ENOMEM, "out of memory");
		return 1;
	}
	return 0;
}

int vs_be_hooks_start(struct vs_backend *be, const struct vs_backend_opts *o, char *why,
		      size_t whylen)
{
	struct vs_be_hooks *h = be->hooks;
	int rc;

	if (!h)
		return 0;
	if (h->stale_write && !be->ops->read_sync)
		return vs_fail(why, whylen, -EINVAL, "stale-read: not supported by %s backends",
			       be->ops->kind);
	if (h->log_path && (rc = vs_wlog_open(&h->log, h->log_path, o, why, whylen)) < 0)
		return rc;
	if ((rc = vs_be_gate_start(h->gate, why, whylen)) < 0)
		return rc;
	if (h->delay_us)
		VS_WARNING(BACKEND, "test option delay: 1 bio in %llu completes %llu us late",
			   (unsigned long long)h->delay_every, (unsigned long long)h->delay_us);
	if (h->drop_write || h->misdirect_write || h->stale_write || h->fail_flush)
		VS_WARNING(BACKEND,
			   "test faults armed: drop write %llu, misdirect write %llu, "
			   "stale read after write %llu, fail flush %llu (0: none)",
			   (unsigned long long)h->drop_write,
			   (unsigned long long)h->misdirect_write,
			   (unsigned long long)h->stale_write, (unsigned long long)h->fail_flush);
	if (h->log)
		VS_INFO(BACKEND, "logging writes to %s", h->log_path);
	return 0;
}

void vs_be_hooks_close(struct vs_backend *be)
{
	struct vs_be_hooks *h = be->hooks;

	if (!h)
		return;
	vs_be_gate_close(h->gate); /* first: what it still holds fails, unlogged */
	vs_wlog_close(h->log);
	pthread_mutex_destroy(&h->lock);
	free(h->stale_old);
	free(h->log_path);
	free(h);
	be->hooks = NULL;
}

/* stale-read: keep what the write at off/len is about to replace. */
static void stale_capture(struct vs_backend *be, struct vs_be_hooks *h, const struct vs_bio *bio)
{
	void *old = malloc(bio->len ? bio->len : 1);
	int rc = old ? be->ops->read_sync(be, old, bio->len, bio->offset) : -ENOMEM;

	if (rc < 0) {
		VS_ERROR(BACKEND, "stale-read: cannot keep the old data at %llu: %s",
			 (unsigned long long)bio->offset, strerror(-rc));
		free(old);
		return;
	}
	pthread_mutex_lock(&h->lock);
	free(h->stale_old);
	h->stale_old = old;
	h->stale_off = bio->offset;
	h->stale_len = bio->len;
	h->stale_armed = true;
	pthread_mutex_unlock(&h->lock);
	VS_WARNING(BACKEND,
		   "test fault: the next read over %llu+%llu returns the data before "
		   "this write",
		   (unsigned long long)bio->offset, (unsigned long long)bio->len);
}

/* stale-read: a completed read overlapping the kept range gets the old content there. */
static void stale_serve(struct vs_be_hooks *h, const struct vs_bio *bio)
{
	uint64_t from, to;

	pthread_mutex_lock(&h->lock);
	if (h->stale_armed) {
		from = bio->offset > h->stale_off ? bio->offset : h->stale_off;
		to = bio->offset + bio->len < h->stale_off + h->stale_len
			 ? bio->offset + bio->len
			 : h->stale_off + h->stale_len;
		if (from < to) {
			vs_iov_from_buf(bio->iov, (unsigned)bio->iovcnt, from - bio->offset,
					(uint8_t *)h->stale_old + (from - h->stale_off), to - from);
			h->stale_armed = false;
			VS_WARNING(BACKEND,
				   "test fault: read %llu+%llu returned stale data at "
				   "%llu+%llu",
				   (unsigned long long)bio->offset, (unsigned long long)bio->len,
				   (unsigned long long)from, (unsigned long long)(to - from));
		}
	}
	pthread_mutex_unlock(&h->lock);
}

int vs_be_hooks_submit(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	struct vs_be_hooks *h = be->hooks;

	if (h->delay_us &&
	    __atomic_add_fetch(&h->delay_seq, 1, __ATOMIC_RELAXED) % h->delay_every == 0)
		bio->delay_us = (uint32_t)h->delay_us;
	if (bio->op == VS_BIO_WRITE) {
		uint64_t n = __atomic_add_fetch(&h->writes, 1, __ATOMIC_RELAXED);
		uint64_t size = vs_backend_size(be);

		if (n == h->drop_write) {
			VS_WARNING(BACKEND, "test fault: write %llu (%llu+%llu) dropped",
				   (unsigned long long)n, (unsigned long long)bio->offset,
				   (unsigned long long)bio->len);
			vs_io_ctx_defer(ctx, bio, 0);
			return 1; /* never written, never logged: the device lost it */
		}
		if (n == h->misdirect_write && bio->len + SECTOR <= size) {
			uint64_t to = bio->offset + bio->len + SECTOR <= size
					  ? bio->offset + SECTOR
					  : bio->offset - SECTOR;

			VS_WARNING(BACKEND, "test fault: write %llu (%llu+%llu) goes to %llu",
				   (unsigned long long)n, (unsigned long long)bio->offset,
				   (unsigned long long)bio->len, (unsigned long long)to);
			bio->offset = to;
		}
		if (n == h->stale_write)
			stale_capture(be, h, bio);
	}
	bio->hooked = be;
	if (bio->op == VS_BIO_FLUSH && h->fail_flush &&
	    __atomic_add_fetch(&h->flushes, 1, __ATOMIC_RELAXED) == h->fail_flush) {
		VS_WARNING(BACKEND, "test fault: flush %llu fails",
			   (unsigned long long)h->fail_flush);
		vs_io_ctx_defer(ctx, bio, -EIO);
		return 1; /* its completion still passes the hooks: the backend keeps the error */
	}
	if (h->gate && vs_be_gate_hold(h->gate, ctx, bio))
		return 1;
	vs_be_hooks_resume(bio);
	return 0;
}

void vs_be_hooks_resume(struct vs_bio *bio)
{
	struct vs_be_hooks *h = bio->hooked->hooks;

	if (bio->op == VS_BIO_FLUSH && h->log)
		vs_wlog_flush_submitted(h->log, bio);
}

struct vs_be_gate *vs_be_hooks_gate(struct vs_backend *be)
{
	return be->hooks ? be->hooks->gate : NULL;
}

bool vs_backend_test_option(const char *field)
{
	static const char *const test_only[] = {
	    "delay=",	   "delay-every=", "drop-write=", "misdirect-write=",
	    "stale-read=", "fail-flush=",  "gate=",	  "gate-sock="};

	for (size_t i = 0; i < sizeof(test_only) / sizeof(test_only[0]); i++)
		if (!strncmp(field, test_only[i], strlen(test_only[i])))
			return true;
	return false;
}

void vs_be_hooks_done(struct vs_bio *bio, int res)
{
	struct vs_be_hooks *h = bio->hooked->hooks;

	if (!h)
		return; /* a flush watched for its result alone (backend.c) */
	if (bio->op == VS_BIO_READ) {
		if (res == 0 && h->stale_write &&
		    __atomic_load_n(&h->stale_armed, __ATOMIC_RELAXED))
			stale_serve(h, bio);
		return;
	}
	if (h->log)
		vs_wlog_completed(h->log, bio, res);
}
