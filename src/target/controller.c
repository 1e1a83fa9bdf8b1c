/* SPDX-License-Identifier: MIT */
/*
 * A controller: one vhost-user-scsi device of the target, with its socket and frontend (one
 * VM), its LUNs, its queues and its control thread.  Its vhost-user session is served by a
 * thread of its own (a frontend that stalls its protocol stalls nobody else); its request
 * queues are handed to the target's shared workers when the frontend starts them (the ops
 * below, on that thread); on a disconnect and at the end its data is made durable.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "target/target_int.h"

/* ---- lines for the operator ------------------------------------------------------------ */
/* A line of c's, traced and handed to the target's log; named after c when it has a name of
 * its own (not the one --socket makes), so that an operator of many VMs knows which. */
static void ctrl_line(struct vs_controller *c, bool error, const char *fmt, va_list ap)
{
	char line[512];
	int n = 0;

	if (strcmp(c->name, VS_TARGET_DEFAULT_CONTROLLER))
		n = snprintf(line, sizeof(line), "controller %s: ", c->name);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (error)
		VS_ERROR(VHOST, "%s", line);
	else
		VS_INFO(VHOST, "%s", line);
	if (c->t->log.fn)
		c->t->log.fn(c->t->log.arg, line);
}

void tq_log(struct vs_controller *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ctrl_line(c, true, fmt, ap);
	va_end(ap);
}

void tq_note(struct vs_controller *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ctrl_line(c, false, fmt, ap);
	va_end(ap);
}

void tq_fail(struct vs_controller *c, const char *fmt, ...)
{
	char why[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	VS_ERROR(VHOST, "controller %s: the frontend's session must end: %s", c->name, why);
	__atomic_store_n(&c->failed, 1, __ATOMIC_RELEASE);
	if (c->vs)
		vs_vhost_server_drop(c->vs, why); /* logged when it disconnects */
}

/* ---- vhost ops: all on the serving thread ---------------------------------------------------- */
static int op_queue_start(void *opaque, unsigned idx, const struct vs_vhost_vring *vr)
{
	struct vs_controller *c = opaque;
	struct tq *q;
	int rc;

	if (idx >= VS_VIRTIO_SCSI_VQ_REQ0 + c->num_queues) {
		VS_ERROR(QUEUE, "queue %u: the device has %u queues", idx,
			 VS_VIRTIO_SCSI_VQ_REQ0 + c->num_queues);
		return -EINVAL;
	}
	q = &c->q[idx];
	rc = vs_vq_dev_init(&q->vq, vr->size, vr->desc, vr->avail, vr->used, vr->event_idx,
			    !!(vr->features & VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC)),
			    vr->last_avail_idx);
	if (rc) {
		VS_ERROR(QUEUE, "queue %u: ring rejected: %s", idx, strerror(-rc));
		return rc;
	}
	q->vq.qid = idx;
	vs_vq_dev_set_log(&q->vq, vr->log, vr->log_used_gpa);
	if (vr->inflight) {
		char why[160];
		/* Before any worker sees the ring: the requests a crashed predecessor took and
		 * never answered come out of the next pops. */
		rc = vs_vq_dev_set_inflight(&q->vq, vr->inflight, vr->inflight_scratch, why,
					    sizeof(why));
		if (rc) {
			/* The operator's line: a frontend handing back a region that lies. */
			tq_log(c, "queue %u not started: %s", idx, why);
			return rc;
		}
		if (q->vq.resubmit_num)
			tq_note(c,
				"queue %u: %u request(s) taken before a restart and never "
				"answered: resubmitted",
				idx, q->vq.resubmit_num);
	}
	q->mem = vr->mem;
	q->kick_fd = vr->kick_fd;
	q->call_fd = vr->call_fd;
	q->err_fd = vr->err_fd;
	VS_INFO(QUEUE, "queue %u (%s) start: size %u avail %u kick %d call %d features %#llx", idx,
		q->kind == TQ_CTRL    ? "control"
		: q->kind == TQ_EVENT ? "event"
				      : "request",
		vr->size, vr->last_avail_idx, vr->kick_fd, vr->call_fd,
		(unsigned long long)vr->features);
	if (q->kind == TQ_REQ)
		q->w = ctrl_pick_worker(c->t);
	rc = worker_cmd(q->w, WCMD_START, q, -1);
	if (rc && q->kind == TQ_REQ) {
		ctrl_unpick_worker(c->t, q->w);
		q->w = NULL;
	}
	return rc;
}

static int op_queue_stop(void *opaque, unsigned idx, uint16_t *last_avail_idx)
{
	struct vs_controller *c = opaque;
	struct tq *q;
	int rc;

	if (idx >= VS_VIRTIO_SCSI_VQ_REQ0 + c->num_queues)
		return 0;
	q = &c->q[idx];
	if (!q->w)
		return 0; /* never started */
	if ((rc = worker_cmd(q->w, WCMD_STOP, q, -1)))
		return rc;
	if (q->kind == TQ_REQ) {
		ctrl_unpick_worker(c->t, q->w);
		q->w = NULL;
	}
	*last_avail_idx = q->vq.last_avail_idx;
	VS_INFO(QUEUE, "queue %u stop: last avail %u used %u", idx, q->vq.last_avail_idx,
		q->vq.used_idx);
	return 0;
}

static int op_call_fd_changed(void *opaque, unsigned idx, int call_fd)
{
	struct vs_controller *c = opaque;

	if (idx >= VS_VIRTIO_SCSI_VQ_REQ0 + c->num_queues)
		return 0;
	if (!c->q[idx].w) { /* not running: taken at its start */
		c->q[idx].call_fd = call_fd;
		return 0;
	}
	return worker_cmd(c->q[idx].w, WCMD_CALLFD, &c->q[idx], call_fd);
}

static void op_mem_changed(void *opaque, const struct vs_mem *mem)
{
	(void)opaque;
	VS_INFO(MEMORY, "memory table: %u regions", mem->nregions);
	for (unsigned i = 0; i < mem->nregions; i++)
		VS_INFO(MEMORY, "  region %u: gpa %#llx size %#llx uva %#llx host %p", i,
			(unsigned long long)mem->regions[i].gpa,
			(unsigned long long)mem->regions[i].size,
			(unsigned long long)mem->regions[i].uva, mem->regions[i].host);
}

/* A frontend (a guest's QEMU) that may use the management socket can export any file the
 * target may open: the operator must hear of it. */
static void warn_if_manager(struct vs_controller *c)
{
	pid_t pid;
	uid_t uid;

	if (!c->vs || vs_vhost_server_peer(c->vs, &pid, &uid))
		return;
	for (unsigned i = 0; i < c->t->nmanager_uids; i++)
		if (c->t->manager_uids[i] == uid) {
			tq_log(c,
			       "warning: the frontend (pid %d) runs as uid %u, which may use the "
			       "management socket: run QEMU under another uid (docs/SECURITY.md)",
			       (int)pid, (unsigned)uid);
			return;
		}
}

/* A migration's start and end, for the operator (the log's size says the guest's). */
static void op_logging(void *opaque, bool on, uint64_t log_bytes)
{
	struct vs_controller *c = opaque;

	if (on)
		tq_note(c,
			"live migration: dirty logging on (a log of %llu bytes: guest memory up "
			"to %llu MiB)",
			(unsigned long long)log_bytes,
			(unsigned long long)(log_bytes * 8 * VS_LOG_PAGE >> 20));
	else
		tq_note(c, "live migration: dirty logging off");
}

static void op_connected(void *opaque)
{
	struct vs_controller *c = opaque;

	pid_t pid = 0;
	uid_t uid = (uid_t)-1;

	__atomic_fetch_add(&c->connections, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&c->failed, 0, __ATOMIC_RELAXED);
	tq_events_connected(c, true);
	if (c->vs)
		vs_vhost_server_peer(c->vs, &pid, &uid);
	c->peer_pid = (int)pid;
	/* The operator sees who uses the device, and when (a QEMU restarted, a guest gone). */
	if (pid > 0)
		tq_note(c, "connection %llu: a frontend connected (pid %d, uid %u)",
			(unsigned long long)__atomic_load_n(&c->connections, __ATOMIC_RELAXED),
			(int)pid, (unsigned)uid);
	else
		tq_note(c, "connection %llu: a frontend connected",
			(unsigned long long)__atomic_load_n(&c->connections, __ATOMIC_RELAXED));
	warn_if_manager(c);
}

static void op_disconnected(void *opaque, const char *why)
{
	struct vs_controller *c = opaque;
	int rc;

	tq_events_connected(c, false); /* a new driver scans anyway */
	if (why)
		tq_log(c, "connection %llu dropped: %s",
		       (unsigned long long)__atomic_load_n(&c->connections, __ATOMIC_RELAXED), why);
	/* Every queue is stopped (in-flight requests completed): make their writes durable
	 * before anyone, such as a restarted QEMU, can ask for them again.  Bounded: a LUN
	 * whose flush hangs is named in the log, and the next frontend is served.  A flush
	 * error stays with its backend: the next session's SYNCHRONIZE CACHE reports it. */
	rc = tq_ctrl_flush(c);
	if (!why) /* a drop was logged above, with its reason */
		tq_note(c,
			"connection %llu: the frontend (pid %d) disconnected; backends flushed%s%s",
			(unsigned long long)__atomic_load_n(&c->connections, __ATOMIC_RELAXED),
			c->peer_pid, rc ? ": " : "", rc ? strerror(-rc) : "");
	else
		VS_INFO(VHOST, "frontend dropped; backends flushed: %s", rc ? strerror(-rc) : "ok");
}

const struct vs_vhost_dev_ops vs_controller__ops = {
    .queue_start = op_queue_start,
    .queue_stop = op_queue_stop,
    .mem_changed = op_mem_changed,
    .call_fd_changed = op_call_fd_changed,
    .logging = op_logging,
    .connected = op_connected,
    .disconnected = op_disconnected,
};

/* ---- flush ----------------------------------------------------------------------------------- */
/* One flush of several backends.  On the heap: one that misses its deadline is abandoned
 * with its I/O context and bios, which the storage may still complete, and kept for the
 * process's life (abandoned below: nothing it points to may be freed, and a checker sees it
 * reachable). */
struct tq_flush {
	struct tq_flush *next; /* abandoned ones */
	struct vs_io_ctx *io;
	unsigned pending;
	struct vs_backend *be[VS_TARGET_MAX_LUNS];
	int res[VS_TARGET_MAX_LUNS];
	struct vs_bio bio[VS_TARGET_MAX_LUNS];
};

static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tq_flush *abandoned;

static void flush_done(struct vs_bio *bio, int res)
{
	struct tq_flush *fl = bio->priv;

	fl->res[bio - fl->bio] = res;
	fl->pending--;
}

/* Only writable files and RBD images hold anything durable (RAM and null have nothing to
 * flush). */
static bool needs_flush(const struct vs_backend *be)
{
	return be && !vs_backend_read_only(be) && vs_backend_durable(be);
}

int tq_flush_backends(struct vs_controller *c, struct vs_backend *const *be, unsigned n, int *res)
{
	uint64_t deadline = vs_mono_ns() + (uint64_t)c->worker_timeout_ms * 1000000ull;
	struct tq_flush *fl;
	unsigned todo = 0;
	int rc, first = 0;

	if (n > VS_TARGET_MAX_LUNS)
		n = VS_TARGET_MAX_LUNS;
	for (unsigned i = 0; i < n; i++) {
		res[i] = 0;
		todo += needs_flush(be[i]);
	}
	if (!todo)
		return 0;
	if (!(fl = calloc(1, sizeof(*fl))))
		return -ENOMEM;
	if ((rc = vs_io_ctx_create(&fl->io, todo))) {
		free(fl);
		return rc;
	}
	for (unsigned i = 0; i < n; i++) {
		if (!needs_flush(be[i]))
			continue;
		fl->be[i] = be[i];
		fl->bio[i] = (struct vs_bio){.op = VS_BIO_FLUSH, .done = flush_done, .priv = fl};
		if ((rc = vs_backend_submit(be[i], fl->io, &fl->bio[i]))) {
			VS_ERROR(BACKEND, "backend %u: flush refused: %s", i, strerror(-rc));
			fl->res[i] = rc;
			continue;
		}
		fl->res[i] = 1; /* pending */
		fl->pending++;
	}
	while (fl->pending) {
		uint64_t now;

		vs_io_ctx_submit(fl->io);
		if ((rc = vs_io_ctx_reap(fl->io, false)) < 0) {
			VS_ERROR(BACKEND, "flush: reap failed: %s", strerror(-rc));
			break;
		}
		if (!fl->pending || (now = vs_mono_ns()) >= deadline)
			break;
		vs_io_ctx_wait(fl->io, (unsigned)((deadline - now + 999999) / 1000000));
	}
	for (unsigned i = 0; i < n; i++) {
		res[i] = fl->res[i] == 1 ? -ETIMEDOUT : fl->res[i];
		if (res[i] && !first)
			first = res[i];
		if (res[i] == -ETIMEDOUT)
			VS_ERROR(BACKEND, "backend %u: flush did not finish within %u ms", i,
				 c->worker_timeout_ms);
		else if (res[i])
			VS_ERROR(BACKEND, "backend %u: flush failed: %s", i, strerror(-res[i]));
	}
	if (fl->pending) {
		pthread_mutex_lock(&abandoned_lock);
		fl->next = abandoned;
		abandoned = fl;
		pthread_mutex_unlock(&abandoned_lock);
	} else {
		vs_io_ctx_destroy(fl->io);
		free(fl);
	}
	return first;
}

/* Flush every LUN the target holds but those being added or removed (their changes own
 * them), outside luns_lock: their backends are pinned meanwhile (a removal waits before it
 * closes one).  Each LUN whose flush failed or did not finish is named in the log; one that
 * did not finish is never flushed again nor closed.  0 or the first error. */
int tq_ctrl_flush(struct vs_controller *c)
{
	struct vs_backend *be[VS_TARGET_MAX_LUNS] = {0};
	int res[VS_TARGET_MAX_LUNS], rc = 0, frc;

	pthread_mutex_lock(&c->luns_lock);
	for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++) {
		enum tq_lun_state s = c->lun_state[id];

		if (!c->be[id] || s == TQ_LUN_OPENING || s == TQ_LUN_REMOVING)
			continue;
		if (c->flush_stuck[id] && needs_flush(c->be[id])) {
			tq_log(c, "LUN %u (%s): not flushed: an earlier flush of it never finished",
			       id, c->spec[id]);
			rc = rc ? rc : -ETIMEDOUT;
			continue;
		}
		be[id] = c->be[id];
		c->flush_pins[id]++;
	}
	pthread_mutex_unlock(&c->luns_lock);
	frc = tq_flush_backends(c, be, VS_TARGET_MAX_LUNS, res);
	pthread_mutex_lock(&c->luns_lock);
	for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++) {
		if (!be[id])
			continue;
		c->flush_pins[id]--;
		if (res[id] == -ETIMEDOUT) {
			c->flush_stuck[id] = true;
			tq_log(c, "LUN %u (%s): its flush did not finish within %u ms", id,
			       c->spec[id], c->worker_timeout_ms);
		} else if (res[id]) {
			tq_log(c, "LUN %u (%s): flush failed: %s", id, c->spec[id],
			       strerror(-res[id]));
		}
	}
	pthread_cond_broadcast(&c->luns_cond);
	pthread_mutex_unlock(&c->luns_lock);
	return rc ? rc : frc;
}

/* ---- create / start / destroy ------------------------------------------------------------- */
static int luns_open(struct vs_controller *c, const struct vs_target_controller *cc, char *why,
		     size_t whylen)
{
	for (unsigned i = 0; i < cc->nluns; i++) {
		const struct vs_target_lun *l = &cc->luns[i];
		int rc;

		if (l->id < VS_TARGET_MAX_LUNS && c->lun_state[l->id] != TQ_LUN_FREE)
			return tq_err(why, whylen, -EEXIST, "LUN %u given twice", l->id);
		if ((rc = tq_lun_open(c, l, why, whylen)))
			return rc;
	}
	return 0;
}

static void queues_init(struct vs_controller *c)
{
	for (unsigned i = 0; i < TQ_MAX; i++) {
		struct tq *q = &c->q[i];

		q->c = c;
		q->idx = i;
		q->kind = i == VS_VIRTIO_SCSI_VQ_CTRL	 ? TQ_CTRL
			  : i == VS_VIRTIO_SCSI_VQ_EVENT ? TQ_EVENT
							 : TQ_REQ;
		q->kick_fd = q->call_fd = q->err_fd = -1;
		q->active.next = q->active.prev = &q->active;
		pthread_mutex_init(&q->lock, NULL);
		/* Control and event queues on the controller's control thread; a request queue
		 * on the request worker chosen when it starts (op_queue_start). */
		q->w = q->kind == TQ_REQ ? NULL : &c->ctl;
	}
}

static bool name_ok(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
		      (s[n] >= '0' && s[n] <= '9') || s[n] == '-' || s[n] == '_' || s[n] == '.'))
			return false;
	return n >= 1 && n <= VS_TARGET_NAME_MAX;
}

int ctrl_create(struct vs_target *t, const struct vs_target_controller *cc,
		struct vs_controller **out, char *why, size_t whylen)
{
	struct vs_controller *c;
	pthread_condattr_t ca;
	int rc;

	*out = NULL;
	if (!cc->name || !name_ok(cc->name))
		return tq_err(why, whylen, -EINVAL,
			      "controller name '%.80s': 1 to %u letters, digits, '-', '_' or '.'",
			      cc->name ? cc->name : "", VS_TARGET_NAME_MAX);
	if (!t->manual && (!cc->socket_path || !*cc->socket_path))
		return tq_err(why, whylen, -EINVAL, "controller %s: no socket path", cc->name);
	if (cc->num_queues > VS_TARGET_MAX_QUEUES)
		return tq_err(why, whylen, -EINVAL, "controller %s: %u request queues: at most %u",
			      cc->name, cc->num_queues, VS_TARGET_MAX_QUEUES);
	if (!cc->nluns || !cc->luns)
		return tq_err(why, whylen, -EINVAL, "controller %s: no LUN", cc->name);
	if ((rc = tq_ctrl_qos_check(cc->qos, cc->name, why, whylen)))
		return rc;
	if (!(c = calloc(1, sizeof(*c))))
		return tq_err(why, whylen, -ENOMEM, "out of memory");
	c->t = t;
	snprintf(c->name, sizeof(c->name), "%s", cc->name);
	c->num_queues = cc->num_queues ? cc->num_queues : 1;
	c->manual = t->manual;
	c->block_size = t->block_size;
	c->worker_timeout_ms = t->worker_timeout_ms;
	c->testing = t->testing;
	c->lun_root = t->lun_root;
	c->ctl.epfd = c->ctl.cmd_fd = c->ctl.timer_fd = c->ctl.wake_fd = -1;
	pthread_mutex_init(&c->tmf_lock, NULL);
	pthread_cond_init(&c->tmf_cond, NULL);
	pthread_mutex_init(&c->luns_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->luns_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&c->tmf_lun_lock, NULL);
	tq_events_init(c);
	for (unsigned i = 0; i < VS_TARGET_MAX_LUNS; i++)
		qos_set_init(&c->qos[i]);
	qos_set_init(&c->qos_all);
	queues_init(c);
	*out = c;
	if (cc->socket_path && !(c->socket_path = strdup(cc->socket_path))) {
		rc = tq_err(why, whylen, -ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = ts_init(c))) {
		tq_err(why, whylen, rc, "out of memory");
		goto fail;
	}
	VS_INFO(INIT, "controller %s: socket %s, %u request queues, %u LUNs", c->name,
		c->socket_path ? c->socket_path : "(none: manual)", c->num_queues, cc->nluns);
	if ((rc = vs_scsi_dev_create(&c->dev)))
		goto fail;
	if ((rc = luns_open(c, cc, why, whylen)))
		goto fail;
	if (cc->qos)
		tq_qos_apply_set(c, &c->qos_all, cc->qos);
	if ((rc = worker_init(t, c, &c->ctl, 0, true, false, 0))) {
		tq_err(why, whylen, rc, "controller %s: control thread: %s", c->name,
		       strerror(-rc));
		goto fail;
	}
	return 0;
fail:
	if (why && whylen && !*why)
		snprintf(why, whylen, "%s", strerror(-rc));
	ctrl_destroy(c);
	*out = NULL;
	return rc;
}

/* What c's queues have taken so far, and whether any has requests in flight or runs. */
static uint64_t ctrl_activity(struct vs_controller *c, bool *busy, bool *running)
{
	uint64_t seen = 0;

	*busy = *running = false;
	for (unsigned i = 0; i < TQ_MAX; i++) {
		struct tq *q = &c->q[i];

		pthread_mutex_lock(&q->lock);
		seen += q->track_seq;
		*busy |= __atomic_load_n(&q->inflight, __ATOMIC_RELAXED) != 0;
		*running |= __atomic_load_n(&q->running, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&q->lock);
	}
	return seen;
}

int ctrl_unplug(struct vs_controller *c, char *why, size_t whylen)
{
	/* After the events, the driver removes its disks and sends a last command or two as
	 * it does (sd's SYNCHRONIZE CACHE): each must be answered (LUN NOT SUPPORTED), or the
	 * guest's removal waits for it forever.  So the controller is served until its
	 * frontend goes or stops its rings (the VM's device unplugged or reset), or its
	 * queues have been idle for UNPLUG_QUIET_NS with every event taken; at most
	 * UNPLUG_GRACE_MS (or the worker timeout): a guest that does not take part must not
	 * hold the removal up. */
	enum { UNPLUG_GRACE_MS = 5000 };
	const uint64_t UNPLUG_QUIET_NS = 1000000000;
	uint64_t grace_ms =
	    c->worker_timeout_ms < UNPLUG_GRACE_MS ? c->worker_timeout_ms : UNPLUG_GRACE_MS;
	uint64_t now = vs_mono_ns(), end = now + grace_ms * 1000000, quiet_since = now, last;
	unsigned removed = 0;
	bool busy, running;
	char err[256];
	int rc, first = 0;

	for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++) {
		enum tq_lun_state st;

		pthread_mutex_lock(&c->luns_lock);
		st = c->lun_state[id];
		pthread_mutex_unlock(&c->luns_lock);
		if (st != TQ_LUN_PRESENT && st != TQ_LUN_RESIZING)
			continue;
		if ((rc = tq_lun_remove(c, id, err, sizeof(err)))) {
			tq_log(c, "removing: %s", err);
			if (!first)
				first = tq_err(why, whylen, rc, "%s", err);
		}
		removed++; /* told the driver even when its flush failed */
	}
	last = ctrl_activity(c, &busy, &running);
	while (removed && __atomic_load_n(&c->ev_live, __ATOMIC_RELAXED) && running) {
		struct timespec tick = {0, 20000000};
		uint64_t seen;

		if ((now = vs_mono_ns()) >= end) {
			tq_log(c,
			       "removing: its frontend still used it %llu ms after its LUNs were "
			       "removed; closing the socket",
			       (unsigned long long)grace_ms);
			break;
		}
		seen = ctrl_activity(c, &busy, &running);
		if (seen != last || busy) {
			last = seen;
			quiet_since = now;
		} else if (!tq_events_waiting(c) && now - quiet_since >= UNPLUG_QUIET_NS) {
			break;
		}
		nanosleep(&tick, NULL); /* a management call's bounded wait, not the I/O path */
	}
	return first;
}

static void *ctrl_main(void *arg)
{
	struct vs_controller *c = arg;
	char name[16];

	snprintf(name, sizeof(name), "vs-vhost-%.6s", c->name);
	pthread_setname_np(pthread_self(), name);
	c->serve_rc = vs_vhost_server_serve(c->vs, &c->stop);
	if (c->serve_rc) {
		tq_log(c, "serving stopped: %s", strerror(-c->serve_rc));
		tgt_wake_run(c->t); /* vs_target_run returns the error */
	}
	return NULL;
}

int ctrl_start(struct vs_controller *c, char *why, size_t whylen)
{
	int rc;

	if ((rc = worker_start(&c->ctl)))
		return tq_err(why, whylen, rc, "controller %s: control thread: %s", c->name,
			      strerror(-rc));
	c->vs = vs_vhost_server_create(c->socket_path, VS_VIRTIO_SCSI_VQ_REQ0 + c->num_queues,
				       vs_target_device_features(), &vs_controller__ops, c);
	if (!c->vs) {
		rc = -errno;
		return tq_err(why, whylen, rc, "cannot listen on %s: %s", c->socket_path,
			      rc == -EEXIST	  ? "it exists and is not a socket"
			      : rc == -EADDRINUSE ? "another process is listening on it"
						  : strerror(-rc));
	}
	if ((rc = -pthread_create(&c->thread, NULL, ctrl_main, c)))
		return tq_err(why, whylen, rc, "controller %s: thread: %s", c->name, strerror(-rc));
	c->thread_started = true;
	return 0;
}

int ctrl_destroy(struct vs_controller *c)
{
	int rc = 0;

	if (!c)
		return 0;
	if (c->thread_started) {
		__atomic_store_n(&c->stop, 1, __ATOMIC_RELAXED); /* read by its serving thread */
		vs_vhost_server_wake(c->vs);
		pthread_join(c->thread, NULL);
		c->thread_started = false;
	}
	/* Stops every running queue first: in-flight requests complete into guest memory. */
	vs_vhost_server_destroy(c->vs);
	c->vs = NULL;
	if (__atomic_load_n(&c->t->lost, __ATOMIC_ACQUIRE)) {
		/* A worker that stopped answering may still run and use anything of ours: make
		 * what completed durable, and leave the rest to the process's exit. */
		rc = c->dev ? tq_ctrl_flush(c) : 0;
		return rc ? rc : -ETIMEDOUT;
	}
	if (c->ctl.epfd >= 0 || c->ctl.started)
		worker_fini(&c->ctl);
	if (c->dev)
		rc = tq_ctrl_flush(c);
	for (unsigned i = 0; i < TQ_MAX; i++) {
		tq_req_pool_free(&c->q[i]);
		pthread_mutex_destroy(&c->q[i].lock);
	}
	vs_scsi_dev_destroy(c->dev);
	for (unsigned i = 0; i < VS_TARGET_MAX_LUNS; i++) {
		vs_scsi_lun_destroy(c->detached[i]); /* a remove that gave up waiting */
		if (!c->flush_stuck[i])		     /* else an abandoned flush keeps it */
			vs_backend_close(c->be[i]);
		free(c->spec[i]);
		qos_set_fini(&c->qos[i]);
	}
	qos_set_fini(&c->qos_all);
	tq_events_fini(c);
	pthread_mutex_destroy(&c->luns_lock);
	pthread_cond_destroy(&c->luns_cond);
	pthread_mutex_destroy(&c->tmf_lun_lock);
	pthread_mutex_destroy(&c->tmf_lock);
	pthread_cond_destroy(&c->tmf_cond);
	ts_fini(c);
	VS_INFO(INIT, "controller %s stopped%s", c->name, rc ? " (flush failed)" : "");
	free(c->socket_path);
	free(c);
	return rc;
}
