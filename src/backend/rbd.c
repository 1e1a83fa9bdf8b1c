/* SPDX-License-Identifier: MIT */
/*
 * rbd=POOL/IMAGE[,conf=PATH][,id=USER][,ro][,timeout=SECONDS]: a Ceph RBD image through
 * librbd.
 *
 * Reads and writes go to librbd with the caller's iovecs (guest memory on the target):
 * rbd_aio_readv / rbd_aio_writev, no copy in our code (librbd copies a write's payload
 * into its own buffers unless rbd_disable_zero_copy_writes is false, which keeps a guest
 * that changes memory under an in-flight write from breaking the messenger's checksums).
 * FLUSH is rbd_aio_flush; a FUA write is the write, then rbd_aio_flush once it completed
 * (librbd has no FUA; a flush covers the writes completed before it).  DISCARD is
 * rbd_aio_discard and WRITE_ZEROES rbd_aio_write_zeroes; partial discards are not skipped
 * (rbd_skip_partial_discard is turned off), so a discarded range reads as zeros, as the
 * SCSI layer promises (LBPRZ).
 *
 * librbd calls completions on its own threads.  The callback only hands the request to
 * the submitting thread's I/O context (vs_io_req_remote_done: a lock-free push, and an
 * eventfd write when the list was empty); the bio's done() runs there, at its next reap.
 * No librbd call is made from a librbd thread.
 *
 * Size: from the image at open; a watch on the image header (rbd_update_watch) tells of
 * a resize, and a thread of this backend re-reads the size (not in librbd's callback: it
 * may refresh the image synchronously, which must not block the thread that delivers
 * notifications) and reports a change (vs_backend_size_changed).
 *
 * timeout=S sets rados_osd_op_timeout and rados_mon_op_timeout: a request Ceph does not
 * answer within S seconds fails with -ETIMEDOUT.  Without it (Ceph's default), requests
 * wait for the cluster however long it takes.  Connecting never does: client_mount_timeout
 * and rados_mon_op_timeout are S, or RBD_CONNECT_TIMEOUT_S without timeout= (Ceph's own
 * default is 300 s for the first and none for the second), so that an unreachable cluster
 * fails the open (a LUN added at run time, the target's start) instead of holding it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rados/librados.h>
#include <rbd/librbd.h>

#include <vioscope/trace.h>

#include "backend/backend_int.h"

#define RBD_MAX_TIMEOUT_S     86400
#define RBD_CONNECT_TIMEOUT_S 30 /* connecting and monitor requests, without timeout= */

enum rbd_stage { STAGE_IO, STAGE_FUA_FLUSH };

struct vs_be_rbd {
	rados_t cluster;
	rados_ioctx_t io;
	rbd_image_t image;
	struct vs_backend *be;
	uint64_t watch;
	bool watching;
	/* The size thread: woken by the header watch, re-reads the size. */
	pthread_t thread;
	bool thread_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool notified, stopping;
	char name[300]; /* POOL/IMAGE, for messages */
};

/* What the spec asks for. */
struct rbd_spec {
	char pool[128];
	char image[160];
	char conf[4096];
	char id[64];
	bool ro;
	unsigned timeout_s;
};

static int spec_parse(const char *args, struct rbd_spec *s, char *why, size_t whylen)
{
	static const char usage[] = "use rbd=POOL/IMAGE[,conf=PATH][,id=USER][,ro][,timeout=S]";
	const char *comma = strchr(args, ',');
	size_t n = comma ? (size_t)(comma - args) : strlen(args);
	const char *slash = memchr(args, '/', n), *opt;
	size_t olen;
	uint64_t v;

	memset(s, 0, sizeof(*s));
	if (!slash || slash == args || slash + 1 == args + n ||
	    memchr(slash + 1, '/', n - (size_t)(slash + 1 - args)))
		return vs_fail(why, whylen, -EINVAL, "rbd=%.*s: expected POOL/IMAGE (%s)", (int)n,
			       args, usage);
	if ((size_t)(slash - args) >= sizeof(s->pool) ||
	    n - (size_t)(slash + 1 - args) >= sizeof(s->image))
		return vs_fail(why, whylen, -EINVAL, "rbd=%.*s: pool or image name too long",
			       (int)n, args);
	snprintf(s->pool, sizeof(s->pool), "%.*s", (int)(slash - args), args);
	snprintf(s->image, sizeof(s->image), "%.*s", (int)(n - (size_t)(slash + 1 - args)),
		 slash + 1);
	while (vs_be_next_opt(&comma, &opt, &olen)) {
		if (olen == 2 && !strncmp(opt, "ro", 2)) {
			s->ro = true;
		} else if (olen > 5 && !strncmp(opt, "conf=", 5) && olen - 5 < sizeof(s->conf)) {
			snprintf(s->conf, sizeof(s->conf), "%.*s", (int)olen - 5, opt + 5);
		} else if (olen > 3 && !strncmp(opt, "id=", 3) && olen - 3 < sizeof(s->id)) {
			snprintf(s->id, sizeof(s->id), "%.*s", (int)olen - 3, opt + 3);
		} else if (olen > 8 && !strncmp(opt, "timeout=", 8)) {
			char num[24];

			snprintf(num, sizeof(num), "%.*s", (int)olen - 8, opt + 8);
			if (olen - 8 >= sizeof(num) || vs_parse_u64(num, 1, RBD_MAX_TIMEOUT_S, &v))
				return vs_fail(why, whylen, -EINVAL,
					       "rbd: timeout=%.*s: expected whole seconds, 1..%u",
					       (int)olen - 8, opt + 8, RBD_MAX_TIMEOUT_S);
			s->timeout_s = (unsigned)v;
		} else {
			return vs_fail(why, whylen, -EINVAL, "rbd: bad option '%.*s' (%s)",
				       (int)olen, opt, usage);
		}
	}
	return 0;
}

int vs_be_rbd_check(const char *args, char *why, size_t whylen)
{
	struct rbd_spec s;

	return spec_parse(args, &s, why, whylen);
}

/* ---- I/O ----------------------------------------------------------------------------------- */
/* librbd's thread: hand the request back to its context's thread, nothing else. */
static void aio_done(rbd_completion_t c, void *arg)
{
	struct vs_io_req *req = arg;
	ssize_t r = rbd_aio_get_return_value(c);

	rbd_aio_release(c);
	VS_VERBOSE_HP(BACKEND, "rbd %s%s off %llu len %llu: librbd completed, res %zd",
		      req->stage == STAGE_FUA_FLUSH ? "FUA flush of " : "",
		      vs_bio_op_name(req->bio->op), (unsigned long long)req->bio->offset,
		      (unsigned long long)req->bio->len, r);
	vs_io_req_remote_done(req, r);
}

/* Send req's current stage to librbd: 0 or -errno (then nothing was sent). */
static int stage_send(struct vs_io_req *req)
{
	struct vs_be_rbd *r = req->be->rbd;
	struct vs_bio *bio = req->bio;
	rbd_completion_t c;
	int rc;

	rc = rbd_aio_create_completion(req, aio_done, &c);
	if (rc < 0)
		return rc;
	if (req->stage == STAGE_FUA_FLUSH) {
		rc = rbd_aio_flush(r->image, c);
	} else {
		switch (bio->op) {
		case VS_BIO_READ:
			rc = rbd_aio_readv(r->image, bio->iov, bio->iovcnt, bio->offset, c);
			break;
		case VS_BIO_WRITE:
			rc = rbd_aio_writev(r->image, bio->iov, bio->iovcnt, bio->offset, c);
			break;
		case VS_BIO_FLUSH:
			rc = rbd_aio_flush(r->image, c);
			break;
		case VS_BIO_DISCARD:
			rc = rbd_aio_discard(r->image, bio->offset, bio->len, c);
			break;
		case VS_BIO_WRITE_ZEROES:
			rc = rbd_aio_write_zeroes(r->image, bio->offset, bio->len, c, 0, 0);
			break;
		}
	}
	if (rc < 0) {
		rbd_aio_release(c);
		return rc;
	}
	VS_VERBOSE_HP(BACKEND, "rbd %s%s off %llu len %llu: sent to librbd",
		      req->stage == STAGE_FUA_FLUSH ? "FUA flush of " : "", vs_bio_op_name(bio->op),
		      (unsigned long long)bio->offset, (unsigned long long)bio->len);
	return 0;
}

static int be_rbd_submit(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	struct vs_io_req *req = vs_io_req_get(ctx, be, bio);
	int rc;

	if (!req)
		return -EAGAIN;
	req->stage = STAGE_IO;
	vs_io_req_remote_start(ctx, req); /* the callback may run before stage_send returns */
	rc = stage_send(req);
	if (rc < 0)
		vs_io_req_remote_cancel(ctx, req);
	return rc;
}

/* Back on the context's thread: the FUA write's flush, or the bio is done. */
static bool be_rbd_again(struct vs_io_ctx *ctx, struct vs_io_req *req, int64_t *res)
{
	struct vs_bio *bio = req->bio;
	int rc;

	(void)ctx; /* req stays counted in it while its next stage is out */
	if (*res < 0)
		return false;
	if (bio->op == VS_BIO_READ && (uint64_t)*res != bio->len) {
		/* The SCSI layer never reads beyond the size: the image shrank under us. */
		VS_ERROR(BACKEND, "rbd read off %llu len %llu: only %lld bytes (image shrunk?)",
			 (unsigned long long)bio->offset, (unsigned long long)bio->len,
			 (long long)*res);
		*res = -EIO;
		return false;
	}
	*res = 0;
	if (bio->op != VS_BIO_WRITE || !bio->fua || req->stage != STAGE_IO)
		return false;
	req->stage = STAGE_FUA_FLUSH;
	rc = stage_send(req);
	if (rc < 0) {
		VS_ERROR(BACKEND, "rbd FUA write off %llu: flush not sent: %s",
			 (unsigned long long)bio->offset, strerror(-rc));
		*res = rc;
		return false;
	}
	return true;
}

/* Test options only (stale-read). */
static int be_rbd_read_sync(struct vs_backend *be, void *buf, uint64_t len, uint64_t off)
{
	ssize_t n = rbd_read(be->rbd->image, off, len, buf);

	return n < 0 ? (int)n : (uint64_t)n == len ? 0 : -EIO;
}

/* ---- size ----------------------------------------------------------------------------------- */
/* librbd's notification thread: wake ours (see the top of the file). */
static void header_changed(void *arg)
{
	struct vs_be_rbd *r = arg;

	pthread_mutex_lock(&r->lock);
	r->notified = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static void *size_thread(void *arg)
{
	struct vs_be_rbd *r = arg;
	uint64_t size;
	int rc;

	pthread_setname_np(pthread_self(), "vs-rbd-size");
	pthread_mutex_lock(&r->lock);
	for (;;) {
		while (!r->notified && !r->stopping)
			pthread_cond_wait(&r->cond, &r->lock);
		if (r->stopping)
			break;
		r->notified = false;
		pthread_mutex_unlock(&r->lock);
		rc = rbd_get_size(r->image, &size);
		if (rc < 0)
			VS_WARNING(BACKEND, "rbd %s: header changed, size unknown: %s", r->name,
				   strerror(-rc));
		else
			vs_backend_size_changed(r->be, size);
		pthread_mutex_lock(&r->lock);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* ---- open / close --------------------------------------------------------------------------- */
static void be_rbd_close(struct vs_backend *be)
{
	struct vs_be_rbd *r = be->rbd;
	int rc;

	if (!r)
		return;
	if (r->watching && (rc = rbd_update_unwatch(r->image, r->watch)) < 0)
		VS_WARNING(BACKEND, "rbd %s: unwatch: %s", r->name, strerror(-rc));
	if (r->thread_started) {
		pthread_mutex_lock(&r->lock);
		r->stopping = true;
		pthread_cond_signal(&r->cond);
		pthread_mutex_unlock(&r->lock);
		pthread_join(r->thread, NULL);
	}
	if (r->image && (rc = rbd_close(r->image)) < 0)
		VS_WARNING(BACKEND, "rbd %s: close: %s", r->name, strerror(-rc));
	if (r->io)
		rados_ioctx_destroy(r->io);
	if (r->cluster)
		rados_shutdown(r->cluster);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	VS_INFO(BACKEND, "rbd %s: closed", r->name);
	free(r);
	be->rbd = NULL;
}

static const struct vs_be_ops be_rbd_ops = {
    .kind = "rbd",
    .submit = be_rbd_submit,
    .close = be_rbd_close,
    .read_sync = be_rbd_read_sync,
    .remote_again = be_rbd_again,
};

/* The cluster handle: the configuration file, $CEPH_ARGS, then what vioscope needs. */
static int cluster_connect(struct vs_be_rbd *r, const struct rbd_spec *s, char *why, size_t whylen)
{
	char t[16];
	int rc;

	rc = rados_create(&r->cluster, s->id[0] ? s->id : NULL);
	if (rc < 0)
		return vs_fail(why, whylen, rc, "rbd %s: rados_create(%s): %s", r->name,
			       s->id[0] ? s->id : "admin", strerror(-rc));
	/* NULL: $CEPH_CONF, then /etc/ceph/ceph.conf, ~/.ceph/config, ./ceph.conf */
	rc = rados_conf_read_file(r->cluster, s->conf[0] ? s->conf : NULL);
	if (rc < 0)
		return vs_fail(why, whylen, rc, "rbd %s: cannot read %s: %s", r->name,
			       s->conf[0] ? s->conf : "a ceph.conf ($CEPH_CONF or /etc/ceph)",
			       strerror(-rc));
	if ((rc = rados_conf_parse_env(r->cluster, NULL)) < 0)
		return vs_fail(why, whylen, rc, "rbd %s: bad $CEPH_ARGS: %s", r->name,
			       strerror(-rc));
	/* A discarded range must read as zeros (LBPRZ), partial objects included. */
	if ((rc = rados_conf_set(r->cluster, "rbd_skip_partial_discard", "false")) < 0)
		return vs_fail(why, whylen, rc, "rbd %s: rbd_skip_partial_discard: %s", r->name,
			       strerror(-rc));
	snprintf(t, sizeof(t), "%u", s->timeout_s ? s->timeout_s : RBD_CONNECT_TIMEOUT_S);
	if ((s->timeout_s && (rc = rados_conf_set(r->cluster, "rados_osd_op_timeout", t)) < 0) ||
	    (rc = rados_conf_set(r->cluster, "rados_mon_op_timeout", t)) < 0 ||
	    (rc = rados_conf_set(r->cluster, "client_mount_timeout", t)) < 0)
		return vs_fail(why, whylen, rc, "rbd %s: timeout: %s", r->name, strerror(-rc));
	rc = rados_connect(r->cluster);
	if (rc < 0)
		return vs_fail(why, whylen, rc, "rbd %s: cannot connect to the cluster as %s%s: %s",
			       r->name, s->id[0] ? "client." : "client.admin", s->id,
			       strerror(-rc));
	return 0;
}

static int image_open(struct vs_be_rbd *r, const struct rbd_spec *s, char *why, size_t whylen)
{
	char id[sizeof(s->image)] = "";
	uint64_t size;
	int rc;

	rc = rados_ioctx_create(r->cluster, s->pool, &r->io);
	if (rc < 0)
		return vs_fail(why, whylen, rc, "rbd %s: pool '%s': %s", r->name, s->pool,
			       rc == -ENOENT ? "no such pool" : strerror(-rc));
	rc = s->ro ? rbd_open_read_only(r->io, s->image, &r->image, NULL)
		   : rbd_open(r->io, s->image, &r->image, NULL);
	if (rc < 0) {
		r->image = NULL;
		return vs_fail(why, whylen, rc, "rbd %s: cannot open image '%s' in pool '%s': %s",
			       r->name, s->image, s->pool,
			       rc == -ENOENT ? "no such image" : strerror(-rc));
	}
	if ((rc = rbd_get_size(r->image, &size)) < 0)
		return vs_fail(why, whylen, rc, "rbd %s: size: %s", r->name, strerror(-rc));
	if (size == 0)
		return vs_fail(why, whylen, -EINVAL,
			       "rbd %s: the image is empty (rbd resize --size 1G %s)", r->name,
			       r->name);
	r->be->size = size;
	if (rbd_get_id(r->image, id, sizeof(id)) < 0)
		snprintf(id, sizeof(id), "%s", s->image); /* format 1 images have no id */
	snprintf(r->be->identity, sizeof(r->be->identity), "rbd:%s/%s", s->pool, id);
	return 0;
}

static int size_watch_start(struct vs_be_rbd *r, char *why, size_t whylen)
{
	int rc = pthread_create(&r->thread, NULL, size_thread, r);

	if (rc)
		return vs_fail(why, whylen, -rc, "rbd %s: thread: %s", r->name, strerror(rc));
	r->thread_started = true;
	rc = rbd_update_watch(r->image, &r->watch, header_changed, r);
	if (rc < 0)
		return vs_fail(why, whylen, rc, "rbd %s: watching the image header: %s", r->name,
			       strerror(-rc));
	r->watching = true;
	return 0;
}

int vs_be_rbd_open(struct vs_backend *be, const char *args, char *why, size_t whylen)
{
	struct rbd_spec *s = malloc(sizeof(*s));
	struct vs_be_rbd *r = calloc(1, sizeof(*r));
	char dummy[1];
	int rc;

	if (!why) {
		why = dummy;
		whylen = sizeof(dummy);
	}
	if (!s || !r) {
		free(s);
		free(r);
		return vs_fail(why, whylen, -ENOMEM, "rbd: out of memory");
	}
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->be = be;
	be->ops = &be_rbd_ops;
	be->rbd = r;
	if ((rc = spec_parse(args, s, why, whylen)) < 0)
		goto out_err;
	snprintf(r->name, sizeof(r->name), "%s/%s", s->pool, s->image);
	be->ro = s->ro;
	be->durable = true;
	be->discard = !s->ro;
	if ((rc = cluster_connect(r, s, why, whylen)) < 0 ||
	    (rc = image_open(r, s, why, whylen)) < 0 || (rc = size_watch_start(r, why, whylen)) < 0)
		goto out_err;
	VS_INFO(BACKEND, "rbd %s (%s): %llu bytes%s, as %s, conf %s, timeout %u s (0: none)",
		r->name, be->identity, (unsigned long long)be->size, s->ro ? ", read-only" : "",
		s->id[0] ? s->id : "admin", s->conf[0] ? s->conf : "(default)", s->timeout_s);
	free(s);
	return 0;
out_err:
	VS_ERROR(BACKEND, "rbd backend '%s': %s", args, why == dummy ? "failed" : why);
	free(s);
	be_rbd_close(be);
	return rc;
}
