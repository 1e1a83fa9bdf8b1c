/* SPDX-License-Identifier: MIT */
/*
 * LUNs: opened at create (from the command line) and added, removed and resized while
 * the target runs (the public vs_target_lun_* calls), one change at a time under
 * luns_lock.  The driver is told through the event queue (events.c).
 *
 * Publication: the SCSI device's LUN table is read by every command on the workers
 * without a lock (src/scsi/dev.c): an added LUN is published, fully built, with a release
 * store; a removed one is unpublished first, so that commands popped from then on get
 * LOGICAL UNIT NOT SUPPORTED, and destroyed only after a grace period.  Two kinds of
 * reader may have looked it up before: a request, which is in a request queue's in-flight
 * list (tracked before vs_scsi_exec loads the entry), so once no request of that LUN is in
 * any list no request holds the LUN; and a TMF on the control thread, which looks LUNs up
 * and resets them under tmf_lun_lock, so once the removal had that lock no TMF holds it.
 * Removal waits for those requests to complete normally (their data has moved, their
 * status is the real one) and only then flushes and closes the backend: nothing
 * acknowledged is lost.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "target/target_int.h"

#define REMOVE_POLL_NS 1000000ull /* how often a removal looks at the in-flight lists */

/* A stable identity for a LUN: the backend's own (an RBD image's pool and id), the file's
 * real path, or the LUN number for memory. */
static void lun_name(char *buf, size_t len, const struct vs_target_lun *l,
		     const struct vs_backend *be)
{
	char path[PATH_MAX], *comma;

	if (*vs_backend_identity(be)) {
		snprintf(buf, len, "%s", vs_backend_identity(be));
		return;
	}
	if (!strcmp(vs_backend_kind(be), "file") && !strncmp(l->spec, "file=", 5)) {
		snprintf(path, sizeof(path), "%s", l->spec + 5);
		comma = strchr(path, ',');
		if (comma)
			*comma = 0;
		char *real = realpath(path, NULL);
		snprintf(buf, len, "file:%s", real ? real : path);
		free(real);
		return;
	}
	snprintf(buf, len, "%s-lun%u", vs_backend_kind(be), l->id);
}

/* The LUN's capacity changed (a resize here, or an RBD image resized by its owner): the
 * unit attention is pending already; tell the driver (virtio 1.2 5.6.6.3.3). */
static void lun_resized(void *arg, unsigned id, uint64_t blocks)
{
	struct vs_target *t = arg;

	VS_INFO(EVENT, "LUN %u: capacity now %llu blocks", id, (unsigned long long)blocks);
	tq_event_post(t, VS_VIRTIO_SCSI_T_PARAM_CHANGE, id,
		      VS_ASC_CAPACITY_DATA_CHANGED >> 8 | (VS_ASC_CAPACITY_DATA_CHANGED & 0xff)
							      << 8);
}

int tq_lun_open(struct vs_target *t, const struct vs_target_lun *l, char *err, size_t errlen)
{
	struct vs_scsi_lun_params p = {
	    .block_size = t->block_size, .resized = lun_resized, .resized_arg = t};
	struct vs_scsi_lun *lun = NULL;
	struct vs_backend *be = NULL;
	char why[256] = "", name[PATH_MAX + 8];
	uint64_t size;
	int rc;

	if (l->id >= VS_TARGET_MAX_LUNS)
		return tq_err(err, errlen, -EINVAL, "LUN %u: LUN numbers are 0..%u", l->id,
			      VS_TARGET_MAX_LUNS - 1);
	if (!l->spec || !*l->spec)
		return tq_err(err, errlen, -EINVAL, "LUN %u: no backend", l->id);
	rc = vs_backend_open(&be, l->spec, why, sizeof(why));
	if (rc)
		return tq_err(err, errlen, rc, "LUN %u (%s): %s", l->id, l->spec,
			      *why ? why : strerror(-rc));
	size = vs_backend_size(be);
	if (size < t->block_size || size % t->block_size) {
		rc = tq_err(err, errlen, -EINVAL,
			    "LUN %u (%s): size %llu bytes is not a whole number of %u-byte blocks",
			    l->id, l->spec, (unsigned long long)size, t->block_size);
		goto fail;
	}
	lun_name(name, sizeof(name), l, be);
	p.be = be;
	p.name = name;
	if ((rc = vs_scsi_lun_create(&lun, &p))) {
		rc = tq_err(err, errlen, rc,
			    "LUN %u (%s): cannot make a %u-byte-block LUN of it (alignment %u): %s",
			    l->id, l->spec, t->block_size, vs_backend_alignment(be), strerror(-rc));
		goto fail;
	}
	if (!(t->spec[l->id] = strdup(l->spec))) {
		rc = tq_err(err, errlen, -ENOMEM, "LUN %u: out of memory", l->id);
		goto fail;
	}
	/* atomic: the statistics' readers look at be[] without luns_lock */
	__atomic_store_n(&t->be[l->id], be, __ATOMIC_RELEASE);
	if ((rc = vs_scsi_dev_attach(t->dev, l->id, lun))) {
		free(t->spec[l->id]);
		t->spec[l->id] = NULL;
		__atomic_store_n(&t->be[l->id], NULL, __ATOMIC_RELEASE);
		rc = tq_err(err, errlen, rc, "LUN %u: attach: %s", l->id, strerror(-rc));
		goto fail;
	}
	VS_INFO(INIT, "LUN %u: %s, %llu bytes, %s%s", l->id, l->spec, (unsigned long long)size,
		vs_backend_kind(be), vs_scsi_lun_read_only(lun) ? ", read-only" : "");
	return 0;
fail:
	vs_scsi_lun_destroy(lun);
	vs_backend_close(be);
	return rc;
}

int vs_target_lun_add(struct vs_target *t, const struct vs_target_lun *l, char *err, size_t errlen)
{
	int rc;

	if (err && errlen)
		*err = 0;
	if (!l)
		return tq_err(err, errlen, -EINVAL, "no LUN given");
	pthread_mutex_lock(&t->luns_lock);
	if (l->id < VS_TARGET_MAX_LUNS && t->be[l->id]) {
		rc =
		    t->detached[l->id]
			? tq_err(err, errlen, -EBUSY,
				 "LUN %u is still being removed (requests of it in flight)", l->id)
			: tq_err(err, errlen, -EEXIST, "LUN %u exists (%s)", l->id, t->spec[l->id]);
		goto out;
	}
	tgt_stats_lun_clear(t, l->id); /* the statistics of an added LUN start at 0 */
	if ((rc = tq_lun_open(t, l, err, errlen)))
		goto out;
	VS_INFO(EVENT, "LUN %u added at run time: %s", l->id, l->spec);
out:
	pthread_mutex_unlock(&t->luns_lock);
	if (!rc)
		tq_event_post(t, VS_VIRTIO_SCSI_T_TRANSPORT_RESET, l->id,
			      VS_VIRTIO_SCSI_EVT_RESET_RESCAN);
	return rc;
}

/* Requests of LUN id in any request queue's in-flight list. */
static unsigned lun_in_flight(struct vs_target *t, unsigned id)
{
	unsigned n = 0;

	for (unsigned i = VS_VIRTIO_SCSI_VQ_REQ0; i < VS_VIRTIO_SCSI_VQ_REQ0 + t->num_queues; i++) {
		struct tq *q = &t->q[i];

		pthread_mutex_lock(&q->lock);
		for (struct treq *r = q->active.next; r != &q->active; r = r->next)
			n += r->lun == id;
		pthread_mutex_unlock(&q->lock);
	}
	return n;
}

/* Wait (up to the worker timeout) until no request of LUN id is in flight: 0 or
 * -ETIMEDOUT.  The LUN is unpublished already, so the count only goes down. */
static int lun_drain(struct vs_target *t, unsigned id)
{
	uint64_t start = vs_mono_ns(), limit = (uint64_t)t->worker_timeout_ms * 1000000ull;
	unsigned n, first = lun_in_flight(t, id);

	if (!first)
		return 0;
	VS_INFO(EVENT, "LUN %u: waiting for %u requests in flight", id, first);
	while ((n = lun_in_flight(t, id))) {
		struct timespec ts = {0, (long)REMOVE_POLL_NS};

		if (vs_mono_ns() - start >= limit) {
			VS_ERROR(EVENT, "LUN %u: %u requests still in flight after %u ms", id, n,
				 t->worker_timeout_ms);
			return -ETIMEDOUT;
		}
		if (t->manual)
			vs_target__pump(t, 1);
		else
			nanosleep(&ts, NULL);
	}
	VS_INFO(EVENT, "LUN %u: %u requests completed after %llu us", id, first,
		(unsigned long long)(vs_mono_ns() - start) / 1000);
	return 0;
}

int vs_target_lun_remove(struct vs_target *t, unsigned id, char *err, size_t errlen)
{
	struct vs_scsi_lun *lun;
	struct vs_backend *be;
	int rc;

	if (err && errlen)
		*err = 0;
	pthread_mutex_lock(&t->luns_lock);
	if (id >= VS_TARGET_MAX_LUNS || !t->be[id]) {
		rc = tq_err(err, errlen, -ENOENT, "no LUN %u", id);
		goto out;
	}
	/* Unpublish (or find the one an earlier removal gave up on), then the grace period. */
	lun = t->detached[id] ? t->detached[id] : vs_scsi_dev_detach(t->dev, id);
	t->detached[id] = lun;
	pthread_mutex_lock(&t->tmf_lun_lock); /* a TMF that loaded the LUN is done with it */
	pthread_mutex_unlock(&t->tmf_lun_lock);
	if ((rc = lun_drain(t, id))) {
		rc = tq_err(err, errlen, rc,
			    "LUN %u is gone for the driver, but requests of it did not complete "
			    "within %u ms: its backend stays open (remove it again to retry)",
			    id, t->worker_timeout_ms);
		goto out;
	}
	t->detached[id] = NULL;
	vs_scsi_lun_destroy(lun);
	be = t->be[id];
	if ((rc = tq_flush_backends(&be, 1)))
		tq_err(err, errlen, rc, "LUN %u removed, but its final flush failed", id);
	vs_backend_close(be);
	__atomic_store_n(&t->be[id], NULL, __ATOMIC_RELEASE);
	VS_INFO(EVENT, "LUN %u removed at run time (was %s)", id, t->spec[id]);
	free(t->spec[id]);
	t->spec[id] = NULL;
	/* The driver is told even when the flush failed: the LUN is gone. */
	tq_event_post(t, VS_VIRTIO_SCSI_T_TRANSPORT_RESET, id, VS_VIRTIO_SCSI_EVT_RESET_REMOVED);
out:
	pthread_mutex_unlock(&t->luns_lock);
	return rc;
}

int vs_target_lun_resize(struct vs_target *t, unsigned id, uint64_t new_bytes, char *err,
			 size_t errlen)
{
	char why[256] = "";
	int rc;

	if (err && errlen)
		*err = 0;
	pthread_mutex_lock(&t->luns_lock);
	if (id >= VS_TARGET_MAX_LUNS || !t->be[id] || t->detached[id]) {
		rc = tq_err(err, errlen, -ENOENT, "no LUN %u", id);
	} else if (!new_bytes || new_bytes % t->block_size) {
		rc = tq_err(err, errlen, -EINVAL,
			    "LUN %u: %llu bytes is not a whole, non-zero number of %u-byte blocks",
			    id, (unsigned long long)new_bytes, t->block_size);
	} else if ((rc = vs_backend_resize(t->be[id], new_bytes, why, sizeof(why)))) {
		/* The LUN's capacity, its unit attention and the event follow the backend's
		 * size watcher (lun_resized), when it changed. */
		tq_err(err, errlen, rc, "LUN %u (%s): %s", id, t->spec[id], why);
	}
	pthread_mutex_unlock(&t->luns_lock);
	return rc;
}

unsigned vs_target_lun_list(struct vs_target *t, struct vs_target_lun_info *out, unsigned max)
{
	unsigned n = 0;

	pthread_mutex_lock(&t->luns_lock);
	for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++) {
		struct vs_scsi_lun *lun;
		struct vs_target_lun_info *i;

		if (!t->be[id] || t->detached[id] || !(lun = vs_scsi_dev_lun(t->dev, id)))
			continue;
		if (n < max && out) {
			i = &out[n];
			memset(i, 0, sizeof(*i));
			i->id = id;
			snprintf(i->spec, sizeof(i->spec), "%s", t->spec[id]);
			snprintf(i->kind, sizeof(i->kind), "%s", vs_backend_kind(t->be[id]));
			i->block_size = vs_scsi_lun_block_size(lun);
			i->bytes = vs_scsi_lun_blocks(lun) * i->block_size;
			i->read_only = vs_scsi_lun_read_only(lun);
		}
		n++;
	}
	pthread_mutex_unlock(&t->luns_lock);
	return n;
}
