/* SPDX-License-Identifier: MIT */
/*
 * LUNs: opened at create (from the command line) and added, removed and resized while
 * the target runs (the public vs_target_lun_* calls).  The driver is told through the
 * event queue (events.c).
 *
 * luns_lock is held only to look at and change a LUN's state (enum tq_lun_state), never
 * across a wait: opening a backend (a FIFO, an unreachable Ceph cluster), waiting for
 * requests in flight and flushing all happen outside it, on a LUN a change has taken for
 * itself (OPENING, RESIZING, REMOVING), so that two changes of one LUN cannot both
 * proceed while others, and the vhost thread's flush on a disconnect, go on.  Every wait
 * is bounded by the worker timeout.
 *
 * Publication: the SCSI device's LUN table is read by every command on the workers
 * without a lock (src/scsi/dev.c): an added LUN is published, fully built, with a release
 * store; a removed one is unpublished first, so that commands popped from then on get
 * LOGICAL UNIT NOT SUPPORTED, and destroyed only after a grace period.  Two kinds of
 * reader may have looked it up before: a request, which is in a request queue's in-flight
 * list (tracked before vs_scsi_exec loads the entry), so once the requests tracked before
 * the unpublish completed no request holds the LUN; and a TMF on the control thread, which
 * looks LUNs up and resets them under tmf_lun_lock, so once the removal had that lock no
 * TMF holds it.  Removal waits for those requests to complete normally (their data has
 * moved, their status is the real one) and only then flushes and closes the backend:
 * nothing acknowledged is lost.
 *
 * A shrink follows the same rule: the capacity is lowered first (commands checked from
 * then on fail past the new end), then the requests that may have been checked against
 * the old one are waited for, and only then is the storage cut, so that no write in flight
 * lands past the new end and makes the file long again.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "target/target_int.h"

#define DRAIN_POLL_NS 1000000ull /* how often a drain looks at the in-flight lists */

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
	struct vs_controller *c = arg;

	VS_INFO(EVENT, "LUN %u: capacity now %llu blocks", id, (unsigned long long)blocks);
	tq_event_post(c, VS_VIRTIO_SCSI_T_PARAM_CHANGE, id,
		      VS_ASC_CAPACITY_DATA_CHANGED >> 8 | (VS_ASC_CAPACITY_DATA_CHANGED & 0xff)
							      << 8);
}

/* Open l's backend and make a SCSI LUN of it, outside luns_lock: 0 or -errno (why set),
 * nothing left behind on failure. */
static int lun_build(struct vs_controller *c, const struct vs_target_lun *l,
		     struct vs_backend **pbe, struct vs_scsi_lun **plun, char *why, size_t whylen)
{
	struct vs_scsi_lun_params p = {
	    .block_size = c->block_size, .resized = lun_resized, .resized_arg = c};
	struct vs_backend_opts o = {
	    .testing = c->testing, .root = c->lun_root, .block_size = c->block_size};
	struct vs_scsi_lun *lun = NULL;
	struct vs_backend *be = NULL;
	char cause[512] = "", name[PATH_MAX + 8];
	int rc;

	rc = vs_backend_open_opts(&be, l->spec, &o, cause, sizeof(cause)); /* sizes checked there */
	if (rc)
		return tq_err(why, whylen, rc, "LUN %u (%s): %s", l->id, l->spec,
			      *cause ? cause : strerror(-rc));
	lun_name(name, sizeof(name), l, be);
	p.be = be;
	p.name = name;
	if ((rc = vs_scsi_lun_create(&lun, &p))) {
		rc = tq_err(why, whylen, rc,
			    "LUN %u (%s): cannot make a %u-byte-block LUN of it (alignment %u): %s",
			    l->id, l->spec, c->block_size, vs_backend_alignment(be), strerror(-rc));
		goto fail;
	}
	*pbe = be;
	*plun = lun;
	return 0;
fail:
	vs_backend_close(be);
	return rc;
}

/* Publish a built LUN (luns_lock held, or during create): it becomes PRESENT.  0 or -errno
 * (why set); the caller destroys what it built on failure. */
static int lun_publish(struct vs_controller *c, const struct vs_target_lun *l,
		       struct vs_backend *be, struct vs_scsi_lun *lun, char *why, size_t whylen)
{
	int rc;

	if (!(c->spec[l->id] = strdup(l->spec)))
		return tq_err(why, whylen, -ENOMEM, "LUN %u: out of memory", l->id);
	/* its limits before its first request */
	tq_qos_reset(c, l->id);
	if (l->qos)
		tq_qos_apply(c, l->id, l->qos);
	/* atomic: the statistics' readers look at be[] without luns_lock */
	__atomic_store_n(&c->be[l->id], be, __ATOMIC_RELEASE);
	if ((rc = vs_scsi_dev_attach(c->dev, l->id, lun))) {
		free(c->spec[l->id]);
		c->spec[l->id] = NULL;
		__atomic_store_n(&c->be[l->id], NULL, __ATOMIC_RELEASE);
		return tq_err(why, whylen, rc, "LUN %u: attach: %s", l->id, strerror(-rc));
	}
	c->lun_state[l->id] = TQ_LUN_PRESENT;
	c->flush_stuck[l->id] = false;
	VS_INFO(INIT, "LUN %u: %s, %llu bytes, %s%s", l->id, l->spec,
		(unsigned long long)vs_backend_size(be), vs_backend_kind(be),
		vs_scsi_lun_read_only(lun) ? ", read-only" : "");
	return 0;
}

int vs_target_lun_check(const struct vs_target_config *cfg, const struct vs_target_lun *l,
			char *why, size_t whylen)
{
	struct vs_backend_opts o = {.testing = cfg->testing,
				    .block_size = cfg->block_size ? cfg->block_size : 512};
	char cause[512] = "";
	int rc;

	if (l->id >= VS_TARGET_MAX_LUNS)
		return vs_fail(why, whylen, -EINVAL, "LUN %u: LUN numbers are 0..%u", l->id,
			       VS_TARGET_MAX_LUNS - 1);
	if (!l->spec || !*l->spec)
		return vs_fail(why, whylen, -EINVAL, "LUN %u: no backend", l->id);
	if ((rc = tq_qos_check(l->qos, l->id, why, whylen)))
		return rc;
	rc = vs_backend_spec_check(l->spec, &o, cause, sizeof(cause));
	if (rc)
		return vs_fail(why, whylen, rc, "LUN %u (%s): %s", l->id, l->spec,
			       *cause ? cause : strerror(-rc));
	return 0;
}

int tq_lun_open(struct vs_controller *c, const struct vs_target_lun *l, char *why, size_t whylen)
{
	struct vs_scsi_lun *lun;
	struct vs_backend *be;
	int rc;

	if (l->id >= VS_TARGET_MAX_LUNS)
		return tq_err(why, whylen, -EINVAL, "LUN %u: LUN numbers are 0..%u", l->id,
			      VS_TARGET_MAX_LUNS - 1);
	if (!l->spec || !*l->spec)
		return tq_err(why, whylen, -EINVAL, "LUN %u: no backend", l->id);
	if ((rc = tq_qos_check(l->qos, l->id, why, whylen)))
		return rc;
	if ((rc = lun_build(c, l, &be, &lun, why, whylen)))
		return rc;
	if ((rc = lun_publish(c, l, be, lun, why, whylen))) {
		vs_scsi_lun_destroy(lun);
		vs_backend_close(be);
	}
	return rc;
}

/* Why LUN id cannot be changed now (luns_lock held): -EEXIST, -EBUSY or -ENOENT with err
 * set; 0 when it is in state want. */
static int lun_check(struct vs_controller *c, unsigned id, enum tq_lun_state want, char *why,
		     size_t whylen)
{
	enum tq_lun_state s = c->lun_state[id];

	if (s == want)
		return 0;
	switch (s) {
	case TQ_LUN_OPENING:
		return tq_err(why, whylen, -EBUSY, "LUN %u is being added", id);
	case TQ_LUN_RESIZING:
		return tq_err(why, whylen, -EBUSY, "LUN %u is being resized", id);
	case TQ_LUN_REMOVING:
		return tq_err(why, whylen, -EBUSY, "LUN %u is being removed", id);
	case TQ_LUN_UNFINISHED:
		return tq_err(why, whylen, want == TQ_LUN_FREE ? -EBUSY : -ENOENT,
			      "LUN %u is still being removed (requests of it in flight)", id);
	case TQ_LUN_PRESENT:
		return tq_err(why, whylen, -EEXIST, "LUN %u exists (%s)", id, c->spec[id]);
	case TQ_LUN_FREE:
		break;
	}
	return tq_err(why, whylen, -ENOENT, "no LUN %u", id);
}

int tq_lun_add(struct vs_controller *c, const struct vs_target_lun *l, char *why, size_t whylen)
{
	struct vs_scsi_lun *lun = NULL;
	struct vs_backend *be = NULL;
	int rc;

	if (why && whylen)
		*why = 0;
	if (!l)
		return tq_err(why, whylen, -EINVAL, "no LUN given");
	if (l->id >= VS_TARGET_MAX_LUNS)
		return tq_err(why, whylen, -EINVAL, "LUN %u: LUN numbers are 0..%u", l->id,
			      VS_TARGET_MAX_LUNS - 1);
	if (!l->spec || !*l->spec)
		return tq_err(why, whylen, -EINVAL, "LUN %u: no backend", l->id);
	if ((rc = tq_qos_check(l->qos, l->id, why, whylen)))
		return rc;
	/* The id is reserved first: a second add of it is refused while this one opens. */
	pthread_mutex_lock(&c->luns_lock);
	if (!(rc = lun_check(c, l->id, TQ_LUN_FREE, why, whylen)))
		c->lun_state[l->id] = TQ_LUN_OPENING;
	pthread_mutex_unlock(&c->luns_lock);
	if (rc)
		return rc;
	tgt_stats_lun_clear(c, l->id); /* the statistics of an added LUN start at 0 */
	rc = lun_build(c, l, &be, &lun, why, whylen);
	pthread_mutex_lock(&c->luns_lock);
	if (rc || (rc = lun_publish(c, l, be, lun, why, whylen)))
		c->lun_state[l->id] = TQ_LUN_FREE;
	pthread_mutex_unlock(&c->luns_lock);
	if (rc) {
		vs_scsi_lun_destroy(lun); /* both NULL when the build failed */
		vs_backend_close(be);
		return rc;
	}
	VS_INFO(EVENT, "LUN %u added at run time: %s", l->id, l->spec);
	tq_event_post(c, VS_VIRTIO_SCSI_T_TRANSPORT_RESET, l->id, VS_VIRTIO_SCSI_EVT_RESET_RESCAN);
	return 0;
}

/* ---- waiting for the requests of a LUN ------------------------------------------------------ */
/* The last request each request queue tracked so far. */
struct lun_snap {
	uint64_t seq[TQ_MAX];
};

/* Taken after a change every later request must see (the LUN unpublished, its capacity
 * lowered): a request tracked after this takes its queue's mutex after we released it, and
 * so runs after the change; only those tracked before may not have seen it. */
static void lun_snapshot(struct vs_controller *c, struct lun_snap *s)
{
	for (unsigned i = VS_VIRTIO_SCSI_VQ_REQ0; i < VS_VIRTIO_SCSI_VQ_REQ0 + c->num_queues; i++) {
		pthread_mutex_lock(&c->q[i].lock);
		s->seq[i] = c->q[i].track_seq;
		pthread_mutex_unlock(&c->q[i].lock);
	}
}

/* Requests of LUN id tracked before the snapshot and still in flight. */
static unsigned lun_in_flight(struct vs_controller *c, unsigned id, const struct lun_snap *s)
{
	unsigned n = 0;

	for (unsigned i = VS_VIRTIO_SCSI_VQ_REQ0; i < VS_VIRTIO_SCSI_VQ_REQ0 + c->num_queues; i++) {
		struct tq *q = &c->q[i];

		pthread_mutex_lock(&q->lock);
		for (struct treq *r = q->active.next; r != &q->active; r = r->next)
			n += r->lun == id && r->seq <= s->seq[i];
		pthread_mutex_unlock(&q->lock);
	}
	return n;
}

/* Wait (up to the worker timeout) until the requests of LUN id in flight at the snapshot
 * have completed: 0 or -ETIMEDOUT.  Their number only goes down. */
static int lun_drain(struct vs_controller *c, unsigned id, const struct lun_snap *snap)
{
	uint64_t start = vs_mono_ns(), limit = (uint64_t)c->worker_timeout_ms * 1000000ull;
	unsigned n, first = lun_in_flight(c, id, snap);

	if (!first)
		return 0;
	VS_INFO(EVENT, "LUN %u: waiting for %u requests in flight", id, first);
	while ((n = lun_in_flight(c, id, snap))) {
		struct timespec ts = {0, (long)DRAIN_POLL_NS};

		if (vs_mono_ns() - start >= limit) {
			VS_ERROR(EVENT, "LUN %u: %u requests still in flight after %u ms", id, n,
				 c->worker_timeout_ms);
			return -ETIMEDOUT;
		}
		if (c->manual)
			vs_target__pump(c->t, 1);
		else
			nanosleep(&ts, NULL);
	}
	VS_INFO(EVENT, "LUN %u: %u requests completed after %llu us", id, first,
		(unsigned long long)(vs_mono_ns() - start) / 1000);
	return 0;
}

/* ---- remove ---------------------------------------------------------------------------------- */
/* Wait until no flush of the target (vs_target_flush) uses LUN id's backend (luns_lock held);
 * they end within the worker timeout: false when one did not. */
static bool lun_unpinned(struct vs_controller *c, unsigned id)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(2 * c->worker_timeout_ms / 1000 + 1);
	while (c->flush_pins[id])
		if (pthread_cond_timedwait(&c->luns_cond, &c->luns_lock, &until) == ETIMEDOUT)
			return false;
	return true;
}

/* The LUN's requests completed and its SCSI LUN is gone: flush (bounded) and close its
 * backend, and free the id.  A flush that did not finish leaves the backend open for good
 * (its flush may still complete into it).  0 or the flush's error. */
static int lun_retire(struct vs_controller *c, unsigned id, char *why, size_t whylen)
{
	struct vs_backend *be;
	bool stuck;
	int rc = 0, res;

	pthread_mutex_lock(&c->luns_lock);
	be = c->be[id];
	stuck = c->flush_stuck[id] || !lun_unpinned(c, id);
	pthread_mutex_unlock(&c->luns_lock);
	if (stuck) {
		rc =
		    tq_err(why, whylen, -ETIMEDOUT,
			   "LUN %u removed, but an earlier flush of it never finished: its backend "
			   "is left open",
			   id);
	} else {
		tq_flush_backends(c, &be, 1, &res);
		if (res == -ETIMEDOUT) {
			stuck = true;
			rc = tq_err(
			    why, whylen, res,
			    "LUN %u removed, but its final flush did not finish within %u ms: "
			    "its backend is left open",
			    id, c->worker_timeout_ms);
		} else if (res) {
			rc = tq_err(why, whylen, res, "LUN %u removed, but its final flush failed",
				    id);
		}
	}
	if (!stuck)
		vs_backend_close(be);
	pthread_mutex_lock(&c->luns_lock);
	__atomic_store_n(&c->be[id], NULL, __ATOMIC_RELEASE);
	VS_INFO(EVENT, "LUN %u removed at run time (was %s)", id, c->spec[id]);
	free(c->spec[id]);
	c->spec[id] = NULL;
	c->flush_stuck[id] = false;
	c->lun_state[id] = TQ_LUN_FREE;
	pthread_mutex_unlock(&c->luns_lock);
	return rc;
}

int tq_lun_remove(struct vs_controller *c, unsigned id, char *why, size_t whylen)
{
	struct vs_scsi_lun *lun = NULL;
	struct lun_snap snap;
	int rc;

	if (why && whylen)
		*why = 0;
	if (id >= VS_TARGET_MAX_LUNS)
		return tq_err(why, whylen, -ENOENT, "no LUN %u", id);
	/* Unpublish (or take the one an earlier removal gave up on) ... */
	pthread_mutex_lock(&c->luns_lock);
	if (c->lun_state[id] == TQ_LUN_UNFINISHED ||
	    !(rc = lun_check(c, id, TQ_LUN_PRESENT, why, whylen))) {
		rc = 0;
		lun = c->detached[id] ? c->detached[id] : vs_scsi_dev_detach(c->dev, id);
		c->detached[id] = NULL;
		c->lun_state[id] = TQ_LUN_REMOVING;
	}
	pthread_mutex_unlock(&c->luns_lock);
	if (rc)
		return rc;
	/* Its parked requests go now (and find it gone), not when its limits would let them. */
	tq_qos_reset(c, id);
	/* ... then the grace period: a TMF that loaded the LUN from the table before it was
	 * unpublished is done with it once we had tmf_lun_lock (control.c), and requests are
	 * done with it once those tracked until now completed. */
	pthread_mutex_lock(&c->tmf_lun_lock);
	pthread_mutex_unlock(&c->tmf_lun_lock);
	lun_snapshot(c, &snap);
	if ((rc = lun_drain(c, id, &snap))) {
		pthread_mutex_lock(&c->luns_lock);
		c->detached[id] = lun;
		c->lun_state[id] = TQ_LUN_UNFINISHED;
		pthread_mutex_unlock(&c->luns_lock);
		return tq_err(why, whylen, rc,
			      "LUN %u is gone for the driver, but requests of it did not complete "
			      "within %u ms: its backend stays open (remove it again to retry)",
			      id, c->worker_timeout_ms);
	}
	vs_scsi_lun_destroy(lun);
	rc = lun_retire(c, id, why, whylen);
	/* The driver is told even when the flush failed: the LUN is gone. */
	tq_event_post(c, VS_VIRTIO_SCSI_T_TRANSPORT_RESET, id, VS_VIRTIO_SCSI_EVT_RESET_REMOVED);
	return rc;
}

/* ---- resize ---------------------------------------------------------------------------------- */
struct shrink {
	struct vs_controller *c;
	unsigned id;
};

/* A shrink lowered the capacity (commands past the new end now fail): wait for the requests
 * that may have been checked against the old one before the storage is cut. */
static int shrink_drain(void *arg)
{
	struct shrink *sh = arg;
	struct lun_snap snap;

	lun_snapshot(sh->c, &snap);
	return lun_drain(sh->c, sh->id, &snap);
}

int tq_lun_resize(struct vs_controller *c, unsigned id, uint64_t new_bytes, char *why,
		  size_t whylen)
{
	struct shrink sh = {c, id};
	struct vs_backend *be = NULL;
	char cause[256] = "";
	int rc;

	if (why && whylen)
		*why = 0;
	if (id >= VS_TARGET_MAX_LUNS)
		return tq_err(why, whylen, -ENOENT, "no LUN %u", id);
	pthread_mutex_lock(&c->luns_lock);
	if (c->lun_state[id] != TQ_LUN_PRESENT) {
		rc = c->lun_state[id] == TQ_LUN_UNFINISHED
			 ? tq_err(why, whylen, -ENOENT, "no LUN %u", id)
			 : lun_check(c, id, TQ_LUN_PRESENT, why, whylen);
	} else if (!new_bytes || new_bytes % c->block_size) {
		rc = tq_err(why, whylen, -EINVAL,
			    "LUN %u: %llu bytes is not a whole, non-zero number of %u-byte blocks",
			    id, (unsigned long long)new_bytes, c->block_size);
	} else {
		rc = 0;
		be = c->be[id];
		c->lun_state[id] = TQ_LUN_RESIZING;
	}
	pthread_mutex_unlock(&c->luns_lock);
	if (rc)
		return rc;
	/* The LUN's capacity, its unit attention and the event follow the backend's size
	 * watcher (lun_resized), when it changed; a shrink waits for the requests in flight
	 * between lowering the capacity and cutting the storage. */
	if ((rc = vs_backend_resize(be, new_bytes, shrink_drain, &sh, cause, sizeof(cause))))
		tq_err(why, whylen, rc, "LUN %u (%s): %s", id, c->spec[id], cause);
	pthread_mutex_lock(&c->luns_lock);
	c->lun_state[id] = TQ_LUN_PRESENT;
	pthread_mutex_unlock(&c->luns_lock);
	return rc;
}

unsigned tq_lun_list(struct vs_controller *c, struct vs_target_lun_info *out, unsigned max)
{
	unsigned n = 0;

	pthread_mutex_lock(&c->luns_lock);
	for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++) {
		struct vs_scsi_lun *lun;
		struct vs_target_lun_info *i;

		/* A LUN being resized exists; one being added or removed does not (yet, any
		 * more), and its SCSI LUN may be going away without the lock. */
		if ((c->lun_state[id] != TQ_LUN_PRESENT && c->lun_state[id] != TQ_LUN_RESIZING) ||
		    !(lun = vs_scsi_dev_lun(c->dev, id)))
			continue;
		if (n < max && out) {
			i = &out[n];
			memset(i, 0, sizeof(*i));
			i->id = id;
			snprintf(i->spec, sizeof(i->spec), "%s", c->spec[id]);
			snprintf(i->kind, sizeof(i->kind), "%s", vs_backend_kind(c->be[id]));
			i->block_size = vs_scsi_lun_block_size(lun);
			i->bytes = vs_scsi_lun_blocks(lun) * i->block_size;
			i->read_only = vs_scsi_lun_read_only(lun);
			tq_qos_info(c, id, &i->qos);
		}
		n++;
	}
	pthread_mutex_unlock(&c->luns_lock);
	return n;
}
