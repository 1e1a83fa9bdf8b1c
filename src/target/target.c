/* SPDX-License-Identifier: MIT */
/*
 * The target's life: open the backends, build the SCSI device, start the workers, serve
 * vhost-user, and hand queues between the vhost thread and the workers (the ops below);
 * on a disconnect and at the end, make the data durable.
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

bool vs_target_have_rbd(void)
{
	return vs_backend_have_rbd();
}

uint64_t vs_target_device_features(void)
{
	return VS_VIRTIO_BIT(VS_VIRTIO_F_VERSION_1) | VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC) |
	       VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX) | VS_VIRTIO_BIT(VS_VIRTIO_SCSI_F_HOTPLUG) |
	       VS_VIRTIO_BIT(VS_VIRTIO_SCSI_F_CHANGE);
}

int tq_err(char *why, size_t whylen, int rc, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vs_vfail(buf, sizeof(buf), rc, fmt, ap);
	va_end(ap);
	VS_ERROR(INIT, "target: %s", buf);
	return vs_fail(why, whylen, rc, "%s", buf);
}

/* ---- failures the operator must hear of ------------------------------------------------------ */
void tq_log(struct vs_target *t, const char *fmt, ...)
{
	VS_LOG_LINE(&t->log, ERROR, VHOST, fmt);
}

void tq_note(struct vs_target *t, const char *fmt, ...)
{
	VS_LOG_LINE(&t->log, INFO, VHOST, fmt);
}

void tq_fail(struct vs_target *t, const char *fmt, ...)
{
	char why[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	VS_ERROR(VHOST, "the frontend's session must end: %s", why);
	__atomic_store_n(&t->failed, 1, __ATOMIC_RELEASE);
	if (t->vs)
		vs_vhost_server_drop(t->vs, why); /* logged when it disconnects */
}

/* ---- vhost ops: all on the serving thread ---------------------------------------------------- */
static int op_queue_start(void *opaque, unsigned idx, const struct vs_vhost_vring *vr)
{
	struct vs_target *t = opaque;
	struct tq *q;
	int rc;

	if (idx >= VS_VIRTIO_SCSI_VQ_REQ0 + t->num_queues) {
		VS_ERROR(QUEUE, "queue %u: the device has %u queues", idx,
			 VS_VIRTIO_SCSI_VQ_REQ0 + t->num_queues);
		return -EINVAL;
	}
	q = &t->q[idx];
	rc = vs_vq_dev_init(&q->vq, vr->size, vr->desc, vr->avail, vr->used, vr->event_idx,
			    !!(vr->features & VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC)),
			    vr->last_avail_idx);
	if (rc) {
		VS_ERROR(QUEUE, "queue %u: ring rejected: %s", idx, strerror(-rc));
		return rc;
	}
	q->vq.qid = idx;
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
	return worker_cmd(q->w, WCMD_START, q, -1);
}

static int op_queue_stop(void *opaque, unsigned idx, uint16_t *last_avail_idx)
{
	struct vs_target *t = opaque;
	struct tq *q;
	int rc;

	if (idx >= VS_VIRTIO_SCSI_VQ_REQ0 + t->num_queues)
		return 0;
	q = &t->q[idx];
	if ((rc = worker_cmd(q->w, WCMD_STOP, q, -1)))
		return rc;
	*last_avail_idx = q->vq.last_avail_idx;
	VS_INFO(QUEUE, "queue %u stop: last avail %u used %u", idx, q->vq.last_avail_idx,
		q->vq.used_idx);
	return 0;
}

static int op_call_fd_changed(void *opaque, unsigned idx, int call_fd)
{
	struct vs_target *t = opaque;

	if (idx >= VS_VIRTIO_SCSI_VQ_REQ0 + t->num_queues)
		return 0;
	return worker_cmd(t->q[idx].w, WCMD_CALLFD, &t->q[idx], call_fd);
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
static void warn_if_manager(struct vs_target *t)
{
	pid_t pid;
	uid_t uid;

	if (!t->vs || vs_vhost_server_peer(t->vs, &pid, &uid))
		return;
	for (unsigned i = 0; i < t->nmanager_uids; i++)
		if (t->manager_uids[i] == uid) {
			tq_log(t,
			       "warning: the frontend (pid %d) runs as uid %u, which may use the "
			       "management socket: run QEMU under another uid (docs/SECURITY.md)",
			       (int)pid, (unsigned)uid);
			return;
		}
}

static void op_connected(void *opaque)
{
	struct vs_target *t = opaque;

	pid_t pid = 0;
	uid_t uid = (uid_t)-1;

	__atomic_fetch_add(&t->connections, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&t->failed, 0, __ATOMIC_RELAXED);
	tq_events_connected(t, true);
	if (t->vs)
		vs_vhost_server_peer(t->vs, &pid, &uid);
	t->peer_pid = (int)pid;
	/* The operator sees who uses the device, and when (a QEMU restarted, a guest gone). */
	if (pid > 0)
		tq_note(t, "connection %llu: a frontend connected (pid %d, uid %u)",
			(unsigned long long)__atomic_load_n(&t->connections, __ATOMIC_RELAXED),
			(int)pid, (unsigned)uid);
	else
		tq_note(t, "connection %llu: a frontend connected",
			(unsigned long long)__atomic_load_n(&t->connections, __ATOMIC_RELAXED));
	warn_if_manager(t);
}

static void op_disconnected(void *opaque, const char *why)
{
	struct vs_target *t = opaque;
	int rc;

	tq_events_connected(t, false); /* a new driver scans anyway */
	if (why)
		tq_log(t, "connection %llu dropped: %s",
		       (unsigned long long)__atomic_load_n(&t->connections, __ATOMIC_RELAXED), why);
	/* Every queue is stopped (in-flight requests completed): make their writes durable
	 * before anyone, such as a restarted QEMU, can ask for them again.  Bounded: a LUN
	 * whose flush hangs is named in the log, and the next frontend is served.  A flush
	 * error stays with its backend: the next session's SYNCHRONIZE CACHE reports it. */
	rc = vs_target_flush(t);
	if (!why) /* a drop was logged above, with its reason */
		tq_note(t,
			"connection %llu: the frontend (pid %d) disconnected; backends flushed%s%s",
			(unsigned long long)__atomic_load_n(&t->connections, __ATOMIC_RELAXED),
			t->peer_pid, rc ? ": " : "", rc ? strerror(-rc) : "");
	else
		VS_INFO(VHOST, "frontend dropped; backends flushed: %s", rc ? strerror(-rc) : "ok");
}

const struct vs_vhost_dev_ops vs_target__ops = {
    .queue_start = op_queue_start,
    .queue_stop = op_queue_stop,
    .mem_changed = op_mem_changed,
    .call_fd_changed = op_call_fd_changed,
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

int tq_flush_backends(struct vs_target *t, struct vs_backend *const *be, unsigned n, int *res)
{
	uint64_t deadline = vs_mono_ns() + (uint64_t)t->worker_timeout_ms * 1000000ull;
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
				 t->worker_timeout_ms);
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
int vs_target_flush(struct vs_target *t)
{
	struct vs_backend *be[VS_TARGET_MAX_LUNS] = {0};
	int res[VS_TARGET_MAX_LUNS], rc = 0, frc;

	pthread_mutex_lock(&t->luns_lock);
	for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++) {
		enum tq_lun_state s = t->lun_state[id];

		if (!t->be[id] || s == TQ_LUN_OPENING || s == TQ_LUN_REMOVING)
			continue;
		if (t->flush_stuck[id] && needs_flush(t->be[id])) {
			tq_log(t, "LUN %u (%s): not flushed: an earlier flush of it never finished",
			       id, t->spec[id]);
			rc = rc ? rc : -ETIMEDOUT;
			continue;
		}
		be[id] = t->be[id];
		t->flush_pins[id]++;
	}
	pthread_mutex_unlock(&t->luns_lock);
	frc = tq_flush_backends(t, be, VS_TARGET_MAX_LUNS, res);
	pthread_mutex_lock(&t->luns_lock);
	for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++) {
		if (!be[id])
			continue;
		t->flush_pins[id]--;
		if (res[id] == -ETIMEDOUT) {
			t->flush_stuck[id] = true;
			tq_log(t, "LUN %u (%s): its flush did not finish within %u ms", id,
			       t->spec[id], t->worker_timeout_ms);
		} else if (res[id]) {
			tq_log(t, "LUN %u (%s): flush failed: %s", id, t->spec[id],
			       strerror(-res[id]));
		}
	}
	pthread_cond_broadcast(&t->luns_cond);
	pthread_mutex_unlock(&t->luns_lock);
	return rc ? rc : frc;
}

/* ---- create / run / destroy ------------------------------------------------------------------ */
static int luns_open(struct vs_target *t, const struct vs_target_config *cfg, char *why,
		     size_t whylen)
{
	for (unsigned i = 0; i < cfg->nluns; i++) {
		const struct vs_target_lun *l = &cfg->luns[i];
		int rc;

		if (l->id < VS_TARGET_MAX_LUNS && t->lun_state[l->id] != TQ_LUN_FREE)
			return tq_err(why, whylen, -EEXIST, "LUN %u given twice", l->id);
		if ((rc = tq_lun_open(t, l, why, whylen)))
			return rc;
	}
	return 0;
}

static unsigned cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

static void queues_init(struct vs_target *t)
{
	for (unsigned i = 0; i < TQ_MAX; i++) {
		struct tq *q = &t->q[i];

		q->t = t;
		q->idx = i;
		q->kind = i == VS_VIRTIO_SCSI_VQ_CTRL	 ? TQ_CTRL
			  : i == VS_VIRTIO_SCSI_VQ_EVENT ? TQ_EVENT
							 : TQ_REQ;
		q->kick_fd = q->call_fd = q->err_fd = -1;
		q->active.next = q->active.prev = &q->active;
		pthread_mutex_init(&q->lock, NULL);
		/* Request queue n on worker n mod workers; control and event on the control thread.
		 */
		q->w = q->kind == TQ_REQ ? &t->workers[(i - VS_VIRTIO_SCSI_VQ_REQ0) % t->nworkers]
					 : &t->ctl;
	}
}

/* The LUN root must be a directory now, not at the first LUN added through the socket. */
static int lun_root_check(struct vs_target *t, const char *root, char *why, size_t whylen)
{
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return tq_err(why, whylen, -errno, "LUN root %s: %s", root, strerror(errno));
	close(fd);
	if (!(t->lun_root = strdup(root)))
		return tq_err(why, whylen, -ENOMEM, "out of memory");
	return 0;
}

/* Everything but the threads and the socket.  manual: a target without threads. */
static int target_create(struct vs_target **out, const struct vs_target_config *cfg, bool manual,
			 char *why, size_t whylen)
{
	struct vs_target *t;
	pthread_condattr_t ca;
	uint64_t ap_ns;
	int rc;

	*out = NULL;
	if (why && whylen)
		*why = 0;
	if (!cfg || (!manual && (!cfg->socket_path || !*cfg->socket_path)))
		return tq_err(why, whylen, -EINVAL, "no socket path");
	if (cfg->num_queues > VS_TARGET_MAX_QUEUES)
		return tq_err(why, whylen, -EINVAL, "%u request queues: at most %u",
			      cfg->num_queues, VS_TARGET_MAX_QUEUES);
	if (cfg->workers > VS_TARGET_MAX_WORKERS)
		return tq_err(why, whylen, -EINVAL, "%u workers: at most %u", cfg->workers,
			      VS_TARGET_MAX_WORKERS);
	if (cfg->block_size && cfg->block_size != 512 && cfg->block_size != 4096)
		return tq_err(why, whylen, -EINVAL, "block size %u: 512 or 4096", cfg->block_size);
	if (!cfg->nluns || !cfg->luns)
		return tq_err(why, whylen, -EINVAL, "no LUN");
	if (cfg->adaptive_poll_us > VS_TARGET_ADAPTIVE_POLL_MAX &&
	    cfg->adaptive_poll_us != VS_TARGET_ADAPTIVE_POLL_OFF)
		return tq_err(why, whylen, -EINVAL, "adaptive poll of %u us: at most %u",
			      cfg->adaptive_poll_us, VS_TARGET_ADAPTIVE_POLL_MAX);
	if (cfg->nmanager_uids > VS_TARGET_MAX_MANAGERS)
		return tq_err(why, whylen, -EINVAL, "%u manager uids: at most %u",
			      cfg->nmanager_uids, VS_TARGET_MAX_MANAGERS);

	t = calloc(1, sizeof(*t));
	if (!t)
		return tq_err(why, whylen, -ENOMEM, "out of memory");
	t->manual = manual;
	t->num_queues = cfg->num_queues ? cfg->num_queues : 1;
	t->block_size = cfg->block_size ? cfg->block_size : 512;
	t->poll = cfg->poll;
	ap_ns = cfg->adaptive_poll_us ? cfg->adaptive_poll_us : VS_TARGET_ADAPTIVE_POLL_US;
	ap_ns *= 1000;
	if (cfg->adaptive_poll_us == VS_TARGET_ADAPTIVE_POLL_OFF)
		ap_ns = 0;
	t->worker_timeout_ms =
	    cfg->worker_timeout_ms ? cfg->worker_timeout_ms : TQ_WORKER_TIMEOUT_MS;
	t->log = (struct vs_log_sink){cfg->log, cfg->log_arg};
	t->testing = cfg->testing;
	for (unsigned i = 0; i < cfg->nmanager_uids; i++)
		t->manager_uids[i] = cfg->manager_uids[i];
	t->nmanager_uids = cfg->nmanager_uids;
	t->nworkers = cfg->workers ? cfg->workers : t->num_queues < cpus() ? t->num_queues : cpus();
	if (t->nworkers > t->num_queues)
		t->nworkers = t->num_queues; /* more would idle */
	pthread_mutex_init(&t->tmf_lock, NULL);
	pthread_cond_init(&t->tmf_cond, NULL);
	pthread_mutex_init(&t->luns_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->luns_cond, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&t->tmf_lun_lock, NULL);
	tq_events_init(t);
	ts_init(t);
	for (unsigned i = 0; i < VS_TARGET_MAX_LUNS; i++)
		qos_set_init(&t->qos[i]);
	t->workers = calloc(t->nworkers, sizeof(*t->workers));
	if (!t->workers) {
		for (unsigned i = 0; i < VS_TARGET_MAX_LUNS; i++)
			qos_set_fini(&t->qos[i]);
		ts_fini(t);
		tq_events_fini(t);
		pthread_mutex_destroy(&t->luns_lock);
		pthread_cond_destroy(&t->luns_cond);
		pthread_mutex_destroy(&t->tmf_lun_lock);
		free(t);
		return tq_err(why, whylen, -ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < t->nworkers; i++)
		t->workers[i].epfd = t->workers[i].cmd_fd = t->workers[i].timer_fd =
		    t->workers[i].wake_fd = -1;
	t->ctl.epfd = t->ctl.cmd_fd = t->ctl.timer_fd = t->ctl.wake_fd = -1;
	queues_init(t);
	*out = t;

	VS_INFO(INIT,
		"target: socket %s, %u request queues, %u workers (%s), block size %u, %u LUNs",
		manual ? "(none: manual)" : cfg->socket_path, t->num_queues, t->nworkers,
		t->poll ? "poll" : "event", t->block_size, cfg->nluns);
	if (cfg->lun_root && (rc = lun_root_check(t, cfg->lun_root, why, whylen)))
		goto fail;
	if ((rc = vs_scsi_dev_create(&t->dev)))
		goto fail;
	if ((rc = luns_open(t, cfg, why, whylen)))
		goto fail;
	if ((rc = worker_init(t, &t->ctl, 0, true, false, 0))) {
		tq_err(why, whylen, rc, "control thread: %s", strerror(-rc));
		goto fail;
	}
	for (unsigned i = 0; i < t->nworkers; i++) {
		if ((rc = worker_init(t, &t->workers[i], i, false, t->poll, ap_ns))) {
			tq_err(why, whylen, rc, "worker %u: %s", i, strerror(-rc));
			goto fail;
		}
	}
	return 0;
fail:
	if (why && whylen && !*why)
		snprintf(why, whylen, "%s", strerror(-rc));
	vs_target_destroy(t);
	*out = NULL;
	return rc;
}

int vs_target_create(struct vs_target **out, const struct vs_target_config *cfg, char *why,
		     size_t whylen)
{
	struct vs_target *t;
	int rc = target_create(&t, cfg, false, why, whylen);

	if (rc)
		return rc;
	if ((rc = worker_start(&t->ctl)))
		goto fail;
	for (unsigned i = 0; i < t->nworkers; i++)
		if ((rc = worker_start(&t->workers[i])))
			goto fail;
	t->vs = vs_vhost_server_create(cfg->socket_path, VS_VIRTIO_SCSI_VQ_REQ0 + t->num_queues,
				       vs_target_device_features(), &vs_target__ops, t);
	if (!t->vs) {
		rc = -errno;
		tq_err(why, whylen, rc, "cannot listen on %s: %s", cfg->socket_path,
		       rc == -EEXIST	   ? "it exists and is not a socket"
		       : rc == -EADDRINUSE ? "another process is listening on it"
					   : strerror(-rc));
		goto fail;
	}
	*out = t;
	return 0;
fail:
	if (why && whylen && !*why)
		snprintf(why, whylen, "%s", strerror(-rc));
	vs_target_destroy(t);
	return rc;
}

int vs_target__create_manual(struct vs_target **t, const struct vs_target_config *cfg)
{
	char err[256];
	int rc = target_create(t, cfg, true, err, sizeof(err));

	if (rc)
		VS_ERROR(INIT, "manual target: %s", err);
	return rc;
}

void vs_target__pump(struct vs_target *t, unsigned passes)
{
	for (unsigned i = 0; i < passes; i++) {
		worker_pass(&t->ctl);
		for (unsigned k = 0; k < t->nworkers; k++)
			worker_pass(&t->workers[k]);
	}
}

bool vs_target__failed(const struct vs_target *t)
{
	return __atomic_load_n(&t->failed, __ATOMIC_ACQUIRE);
}

int vs_target_run(struct vs_target *t, volatile sig_atomic_t *stop)
{
	int rc = vs_vhost_server_serve(t->vs, stop);

	if (!rc && __atomic_load_n(&t->lost, __ATOMIC_ACQUIRE))
		rc = -ETIMEDOUT;
	if (rc)
		VS_ERROR(VHOST, "serving stopped: %s", strerror(-rc));
	return rc;
}

void vs_target_wake(struct vs_target *t)
{
	if (t && t->vs)
		vs_vhost_server_wake(t->vs);
}

int vs_target_destroy(struct vs_target *t)
{
	int rc = 0;

	if (!t)
		return 0;
	/* Stops every running queue first: in-flight requests complete into guest memory. */
	vs_vhost_server_destroy(t->vs);
	t->vs = NULL;
	if (__atomic_load_n(&t->lost, __ATOMIC_ACQUIRE)) {
		/* A worker that stopped answering may still run and use anything of ours: make
		 * what completed durable, and leave the rest to the process's exit. */
		rc = t->dev ? vs_target_flush(t) : 0;
		VS_CRITICAL(INIT, "target abandoned (a worker was lost)%s",
			    rc ? "; the flush failed too" : "");
		return rc ? rc : -ETIMEDOUT;
	}
	for (unsigned i = 0; i < t->nworkers; i++)
		if (t->workers[i].epfd >= 0 || t->workers[i].started)
			worker_fini(&t->workers[i]);
	if (t->ctl.epfd >= 0 || t->ctl.started)
		worker_fini(&t->ctl);
	if (t->dev)
		rc = vs_target_flush(t);
	for (unsigned i = 0; i < TQ_MAX; i++) {
		tq_req_pool_free(&t->q[i]);
		pthread_mutex_destroy(&t->q[i].lock);
	}
	vs_scsi_dev_destroy(t->dev);
	for (unsigned i = 0; i < VS_TARGET_MAX_LUNS; i++) {
		vs_scsi_lun_destroy(t->detached[i]); /* a remove that gave up waiting */
		if (!t->flush_stuck[i])		     /* else an abandoned flush keeps it */
			vs_backend_close(t->be[i]);
		free(t->spec[i]);
		qos_set_fini(&t->qos[i]);
	}
	tq_events_fini(t);
	pthread_mutex_destroy(&t->luns_lock);
	pthread_cond_destroy(&t->luns_cond);
	pthread_mutex_destroy(&t->tmf_lun_lock);
	pthread_mutex_destroy(&t->tmf_lock);
	pthread_cond_destroy(&t->tmf_cond);
	ts_fini(t);
	free(t->workers);
	free(t->lun_root);
	VS_INFO(INIT, "target stopped%s", rc ? " (flush failed)" : "");
	free(t);
	return rc;
}

void vs_target_get_stats(const struct vs_target *t, struct vs_target_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->connections = __atomic_load_n(&t->connections, __ATOMIC_RELAXED);
	for (unsigned i = 0; i <= t->nworkers; i++) {
		const struct worker *w = i < t->nworkers ? &t->workers[i] : &t->ctl;
		s->requests += __atomic_load_n(&w->st.requests, __ATOMIC_RELAXED);
		s->bad_requests += __atomic_load_n(&w->st.bad_requests, __ATOMIC_RELAXED);
		s->tmfs += __atomic_load_n(&w->st.tmfs, __ATOMIC_RELAXED);
		s->notifies += __atomic_load_n(&w->st.notifies, __ATOMIC_RELAXED);
		s->polled_idle += __atomic_load_n(&w->st.polled_idle, __ATOMIC_RELAXED);
		s->sleeps += __atomic_load_n(&w->st.sleeps, __ATOMIC_RELAXED);
		s->preempted += __atomic_load_n(&w->st.preempted, __ATOMIC_RELAXED);
	}
	if (VS_STATS) /* counted per queue only (tq_count_answered, tq_count_notify) */
		for (unsigned i = 0; i < TQ_MAX; i++) {
			s->requests += __atomic_load_n(&t->q[i].ts.requests, __ATOMIC_RELAXED);
			s->notifies += __atomic_load_n(&t->q[i].ts.notifies, __ATOMIC_RELAXED);
		}
}
