/* SPDX-License-Identifier: MIT */
/*
 * The target: the process's shared request workers, its settings and its controllers
 * (controller.c: one vhost-user-scsi device each), found by name for the public functions,
 * which hold the controller while they use it so that a removal waits for them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
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

void tgt_log(struct vs_target *t, const char *fmt, ...)
{
	VS_LOG_LINE(&t->log, ERROR, VHOST, fmt);
}

void tgt_wake_run(struct vs_target *t)
{
	uint64_t one = 1;

	if (t->run_fd >= 0 && write(t->run_fd, &one, sizeof(one)) < 0) {
		/* a full counter: woken anyway */
	}
}

/* ---- the controllers -------------------------------------------------------------------- */
/* Find a controller and hold it (ctrl_put): a removal waits until no one holds it. */
static int ctrl_get(struct vs_target *t, const char *name, struct vs_controller **out, char *why,
		    size_t whylen)
{
	struct vs_controller *c = NULL;
	int rc = 0;

	pthread_mutex_lock(&t->ctrl_lock);
	if (!name) {
		if (t->nctrls == 1)
			c = t->ctrls;
		else
			rc = -EINVAL;
	} else {
		for (c = t->ctrls; c && strcmp(c->name, name); c = c->next)
			;
		if (!c)
			rc = -ENOENT;
	}
	if (c && c->removing) {
		c = NULL;
		rc = -ENOENT;
	}
	if (c)
		c->users++;
	pthread_mutex_unlock(&t->ctrl_lock);
	*out = c;
	if (rc == -EINVAL)
		return vs_fail(why, whylen, rc, "which controller? the target has %u", t->nctrls);
	if (rc)
		return vs_fail(why, whylen, rc, "no controller '%.64s'", name);
	return 0;
}

static void ctrl_put(struct vs_controller *c)
{
	struct vs_target *t = c->t;

	pthread_mutex_lock(&t->ctrl_lock);
	if (!--c->users)
		pthread_cond_broadcast(&t->ctrl_cond);
	pthread_mutex_unlock(&t->ctrl_lock);
}

struct worker *ctrl_pick_worker(struct vs_target *t)
{
	struct worker *best = &t->workers[0];

	pthread_mutex_lock(&t->ctrl_lock);
	for (unsigned i = 1; i < t->nworkers; i++)
		if (t->workers[i].nrunning < best->nrunning)
			best = &t->workers[i];
	best->nrunning++;
	pthread_mutex_unlock(&t->ctrl_lock);
	return best;
}

void ctrl_unpick_worker(struct vs_target *t, struct worker *w)
{
	pthread_mutex_lock(&t->ctrl_lock);
	w->nrunning--;
	pthread_mutex_unlock(&t->ctrl_lock);
}

/* Add c to the list (last) unless its name or socket is taken or the list is full. */
static int ctrl_link(struct vs_target *t, struct vs_controller *c, char *why, size_t whylen)
{
	struct vs_controller **p;
	int rc = 0;

	pthread_mutex_lock(&t->ctrl_lock);
	for (p = &t->ctrls; *p && !rc; p = &(*p)->next)
		if (!strcmp((*p)->name, c->name))
			rc = vs_fail(why, whylen, -EEXIST, "controller %s exists", c->name);
		else if (c->socket_path && (*p)->socket_path &&
			 !strcmp((*p)->socket_path, c->socket_path))
			rc = vs_fail(why, whylen, -EEXIST, "controller %s serves %s", (*p)->name,
				     c->socket_path);
	if (!rc && t->nctrls >= VS_TARGET_MAX_CONTROLLERS)
		rc = vs_fail(why, whylen, -ENOSPC, "%u controllers: at most %u", t->nctrls + 1,
			     VS_TARGET_MAX_CONTROLLERS);
	if (!rc) {
		c->serial = ++t->ctrl_serial;
		c->removing = true; /* found once started (ctrl_publish) */
		*p = c;
		t->nctrls++;
	}
	pthread_mutex_unlock(&t->ctrl_lock);
	return rc;
}

static void ctrl_publish(struct vs_controller *c)
{
	pthread_mutex_lock(&c->t->ctrl_lock);
	c->removing = false;
	pthread_mutex_unlock(&c->t->ctrl_lock);
}

static void ctrl_unlink(struct vs_controller *c)
{
	struct vs_target *t = c->t;

	pthread_mutex_lock(&t->ctrl_lock);
	for (struct vs_controller **p = &t->ctrls; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			t->nctrls--;
			break;
		}
	pthread_mutex_unlock(&t->ctrl_lock);
}

static int ctrl_add(struct vs_target *t, const struct vs_target_controller *cc, char *why,
		    size_t whylen)
{
	struct vs_controller *c;
	int rc = ctrl_create(t, cc, &c, why, whylen);

	if (rc)
		return rc;
	if ((rc = ctrl_link(t, c, why, whylen))) {
		ctrl_destroy(c);
		return rc;
	}
	if (!t->manual && (rc = ctrl_start(c, why, whylen))) {
		ctrl_unlink(c);
		ctrl_destroy(c);
		return rc;
	}
	ctrl_publish(c);
	return 0;
}

int vs_target_controller_add(struct vs_target *t, const struct vs_target_controller *cc, char *why,
			     size_t whylen)
{
	if (why && whylen)
		*why = 0;
	if (!cc)
		return vs_fail(why, whylen, -EINVAL, "no controller");
	int rc = ctrl_add(t, cc, why, whylen);

	if (!rc)
		VS_INFO(EVENT, "controller %s added at run time (%s)", cc->name, cc->socket_path);
	return rc;
}

int vs_target_controller_remove(struct vs_target *t, const char *name, char *why, size_t whylen)
{
	struct vs_controller *c;
	char err[256];
	int rc, rc2;

	if (why && whylen)
		*why = 0;
	if (!name)
		return vs_fail(why, whylen, -EINVAL, "no controller name");
	pthread_mutex_lock(&t->ctrl_lock);
	for (c = t->ctrls; c && strcmp(c->name, name); c = c->next)
		;
	if (!c || c->removing) {
		pthread_mutex_unlock(&t->ctrl_lock);
		return vs_fail(why, whylen, c ? -EBUSY : -ENOENT,
			       c ? "controller %s is being removed" : "no controller '%.64s'",
			       name);
	}
	c->removing = true; /* no new user finds it */
	while (c->users)
		pthread_cond_wait(&t->ctrl_cond, &t->ctrl_lock);
	pthread_mutex_unlock(&t->ctrl_lock);
	/* The guest sees its disks go (events), each after its requests in flight completed
	 * and its backend was flushed and closed; then the socket closes and the frontend's
	 * queues stop (what it sent meanwhile completes, LUN NOT SUPPORTED). */
	if ((rc = ctrl_unplug(c, err, sizeof(err))))
		vs_fail(why, whylen, rc, "controller %s removed; %s", name, err);
	ctrl_unlink(c);
	if ((rc2 = ctrl_destroy(c)) && !rc) {
		rc = rc2;
		vs_fail(why, whylen, rc, "controller %s removed; its flush failed: %s", name,
			strerror(-rc));
	}
	VS_INFO(EVENT, "controller %s removed at run time", name);
	return rc;
}

unsigned vs_target_controller_list(struct vs_target *t, struct vs_target_controller_info *out,
				   unsigned max)
{
	unsigned n = 0;

	pthread_mutex_lock(&t->ctrl_lock);
	for (struct vs_controller *c = t->ctrls; c; c = c->next) {
		if (c->removing)
			continue;
		if (n < max) {
			struct vs_target_controller_info *i = &out[n];
			unsigned luns = 0;

			memset(i, 0, sizeof(*i));
			snprintf(i->name, sizeof(i->name), "%s", c->name);
			snprintf(i->socket_path, sizeof(i->socket_path), "%s",
				 c->socket_path ? c->socket_path : "");
			i->num_queues = c->num_queues;
			pthread_mutex_lock(&c->luns_lock);
			for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++)
				luns += c->lun_state[id] == TQ_LUN_PRESENT ||
					c->lun_state[id] == TQ_LUN_RESIZING;
			pthread_mutex_unlock(&c->luns_lock);
			i->nluns = luns;
			i->connected = __atomic_load_n(&c->ev_live, __ATOMIC_RELAXED);
			i->peer_pid = __atomic_load_n(&c->peer_pid, __ATOMIC_RELAXED);
			i->connections = __atomic_load_n(&c->connections, __ATOMIC_RELAXED);
			tq_ctrl_qos_info(c, &i->qos);
			i->throttled = __atomic_load_n(&c->qos_all.throttled, __ATOMIC_RELAXED);
			i->throttled_ns =
			    __atomic_load_n(&c->qos_all.throttled_ns, __ATOMIC_RELAXED);
		}
		n++;
	}
	pthread_mutex_unlock(&t->ctrl_lock);
	return n;
}

/* ---- a controller's LUNs and statistics: find it, hold it, call ----------------------------- */
int vs_target_lun_add(struct vs_target *t, const char *ctrl, const struct vs_target_lun *lun,
		      char *why, size_t whylen)
{
	struct vs_controller *c;
	int rc = ctrl_get(t, ctrl, &c, why, whylen);

	if (rc)
		return rc;
	rc = tq_lun_add(c, lun, why, whylen);
	ctrl_put(c);
	return rc;
}

int vs_target_lun_remove(struct vs_target *t, const char *ctrl, unsigned id, char *why,
			 size_t whylen)
{
	struct vs_controller *c;
	int rc = ctrl_get(t, ctrl, &c, why, whylen);

	if (rc)
		return rc;
	rc = tq_lun_remove(c, id, why, whylen);
	ctrl_put(c);
	return rc;
}

int vs_target_lun_resize(struct vs_target *t, const char *ctrl, unsigned id, uint64_t new_bytes,
			 char *why, size_t whylen)
{
	struct vs_controller *c;
	int rc = ctrl_get(t, ctrl, &c, why, whylen);

	if (rc)
		return rc;
	rc = tq_lun_resize(c, id, new_bytes, why, whylen);
	ctrl_put(c);
	return rc;
}

int vs_target_qos_set(struct vs_target *t, const char *ctrl, unsigned id,
		      const struct vs_target_qos *q, char *why, size_t whylen)
{
	struct vs_controller *c;
	int rc = ctrl_get(t, ctrl, &c, why, whylen);

	if (rc)
		return rc;
	rc = tq_qos_set(c, id, q, why, whylen);
	ctrl_put(c);
	return rc;
}

int vs_target_controller_qos_set(struct vs_target *t, const char *ctrl,
				 const struct vs_target_qos *q, char *why, size_t whylen)
{
	struct vs_controller *c;
	int rc = ctrl_get(t, ctrl, &c, why, whylen);

	if (rc)
		return rc;
	rc = tq_ctrl_qos_set(c, q, why, whylen);
	ctrl_put(c);
	return rc;
}

unsigned vs_target_lun_list(struct vs_target *t, const char *ctrl, struct vs_target_lun_info *out,
			    unsigned max)
{
	struct vs_controller *c;
	unsigned n;

	if (ctrl_get(t, ctrl, &c, NULL, 0))
		return 0;
	n = tq_lun_list(c, out, max);
	ctrl_put(c);
	return n;
}

unsigned vs_target_lun_stats(struct vs_target *t, const char *ctrl, struct vs_target_lun_stats *out,
			     unsigned max)
{
	struct vs_controller *c;
	unsigned n;

	if (ctrl_get(t, ctrl, &c, NULL, 0))
		return 0;
	n = tq_lun_stats(c, out, max);
	ctrl_put(c);
	return n;
}

unsigned vs_target_lun_stats_since(struct vs_target *t, const char *ctrl,
				   struct vs_target_stats_mark *m, struct vs_target_lun_stats *out,
				   bool *over_interval, unsigned max)
{
	struct vs_controller *c;
	unsigned n;

	if (ctrl_get(t, ctrl, &c, NULL, 0))
		return 0;
	n = tq_lun_stats_since(c, m, out, over_interval, max);
	ctrl_put(c);
	return n;
}

unsigned vs_target_queue_stats(struct vs_target *t, const char *ctrl,
			       struct vs_target_queue_stats *out, unsigned max)
{
	struct vs_controller *c;
	unsigned n;

	if (ctrl_get(t, ctrl, &c, NULL, 0))
		return 0;
	n = tq_queue_stats(c, out, max);
	ctrl_put(c);
	return n;
}

/* Every controller's backends (each held meanwhile). */
int vs_target_flush(struct vs_target *t)
{
	int rc = 0;

	for (uint64_t serial = 0;;) {
		struct vs_controller *c = NULL;
		int frc;

		/* the next controller by serial: the list may change meanwhile */
		pthread_mutex_lock(&t->ctrl_lock);
		for (struct vs_controller *k = t->ctrls; k; k = k->next)
			if (!k->removing && k->serial > serial && (!c || k->serial < c->serial))
				c = k;
		if (c)
			c->users++;
		pthread_mutex_unlock(&t->ctrl_lock);
		if (!c)
			return rc;
		serial = c->serial;
		frc = tq_ctrl_flush(c);
		rc = rc ? rc : frc;
		ctrl_put(c);
	}
}

/* ---- create / run / destroy ------------------------------------------------------------------ */
static unsigned cpus(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
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

/* The config's own controller (socket_path), then controllers[]. */
static unsigned config_controllers(const struct vs_target_config *cfg,
				   struct vs_target_controller *own)
{
	*own = (struct vs_target_controller){.name = VS_TARGET_DEFAULT_CONTROLLER,
					     .socket_path = cfg->socket_path,
					     .num_queues = cfg->num_queues,
					     .nluns = cfg->nluns,
					     .luns = cfg->luns,
					     .qos = cfg->qos};
	return (cfg->socket_path || cfg->nluns ? 1 : 0) + cfg->ncontrollers;
}

/* The workers and the controllers, without threads when manual. */
static int target_create(struct vs_target **out, const struct vs_target_config *cfg, bool manual,
			 char *why, size_t whylen)
{
	struct vs_target_controller own;
	struct vs_target *t;
	pthread_condattr_t ca;
	unsigned nctrl, queues = 0;
	int rc;

	*out = NULL;
	if (why && whylen)
		*why = 0;
	if (!cfg)
		return tq_err(why, whylen, -EINVAL, "no configuration");
	nctrl = config_controllers(cfg, &own);
	if (!nctrl)
		return tq_err(why, whylen, -EINVAL, "no controller");
	if (cfg->ncontrollers && !cfg->controllers)
		return tq_err(why, whylen, -EINVAL, "no controllers given");
	if (manual && nctrl != 1)
		return tq_err(why, whylen, -EINVAL, "a manual target has one controller");
	if (nctrl > VS_TARGET_MAX_CONTROLLERS)
		return tq_err(why, whylen, -EINVAL, "%u controllers: at most %u", nctrl,
			      VS_TARGET_MAX_CONTROLLERS);
	if (cfg->workers > VS_TARGET_MAX_WORKERS)
		return tq_err(why, whylen, -EINVAL, "%u workers: at most %u", cfg->workers,
			      VS_TARGET_MAX_WORKERS);
	if (cfg->block_size && cfg->block_size != 512 && cfg->block_size != 4096)
		return tq_err(why, whylen, -EINVAL, "block size %u: 512 or 4096", cfg->block_size);
	if (cfg->adaptive_poll_us > VS_TARGET_ADAPTIVE_POLL_MAX &&
	    cfg->adaptive_poll_us != VS_TARGET_ADAPTIVE_POLL_OFF)
		return tq_err(why, whylen, -EINVAL, "adaptive poll of %u us: at most %u",
			      cfg->adaptive_poll_us, VS_TARGET_ADAPTIVE_POLL_MAX);
	if (cfg->nmanager_uids > VS_TARGET_MAX_MANAGERS)
		return tq_err(why, whylen, -EINVAL, "%u manager uids: at most %u",
			      cfg->nmanager_uids, VS_TARGET_MAX_MANAGERS);
	for (unsigned i = 0; i < nctrl; i++) {
		const struct vs_target_controller *cc =
		    i == 0 && nctrl > cfg->ncontrollers
			? &own
			: &cfg->controllers[i - (nctrl - cfg->ncontrollers)];
		unsigned n = cc->num_queues ? cc->num_queues : 1;

		if (n > VS_TARGET_MAX_QUEUES)
			return tq_err(why, whylen, -EINVAL, "%u request queues: at most %u", n,
				      VS_TARGET_MAX_QUEUES);
		queues += n;
	}

	t = calloc(1, sizeof(*t));
	if (!t)
		return tq_err(why, whylen, -ENOMEM, "out of memory");
	t->manual = manual;
	t->run_fd = -1;
	t->block_size = cfg->block_size ? cfg->block_size : 512;
	t->poll = cfg->poll;
	t->ap_ns =
	    (uint64_t)(cfg->adaptive_poll_us ? cfg->adaptive_poll_us : VS_TARGET_ADAPTIVE_POLL_US) *
	    1000;
	if (cfg->adaptive_poll_us == VS_TARGET_ADAPTIVE_POLL_OFF)
		t->ap_ns = 0;
	t->worker_timeout_ms =
	    cfg->worker_timeout_ms ? cfg->worker_timeout_ms : TQ_WORKER_TIMEOUT_MS;
	t->log = (struct vs_log_sink){cfg->log, cfg->log_arg};
	t->testing = cfg->testing;
	for (unsigned i = 0; i < cfg->nmanager_uids; i++)
		t->manager_uids[i] = cfg->manager_uids[i];
	t->nmanager_uids = cfg->nmanager_uids;
	/* Default: a worker per request queue of the controllers at start, at most one per
	 * CPU (more would idle, or fight over the CPUs). */
	t->nworkers = cfg->workers ? cfg->workers : queues < cpus() ? queues : cpus();
	if (!cfg->workers && !t->nworkers)
		t->nworkers = 1;
	pthread_mutex_init(&t->ctrl_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->ctrl_cond, &ca);
	pthread_condattr_destroy(&ca);
	ts_clock_init(t);
	t->workers = calloc(t->nworkers, sizeof(*t->workers));
	if (!t->workers) {
		pthread_mutex_destroy(&t->ctrl_lock);
		pthread_cond_destroy(&t->ctrl_cond);
		free(t);
		return tq_err(why, whylen, -ENOMEM, "out of memory");
	}
	for (unsigned i = 0; i < t->nworkers; i++)
		t->workers[i].epfd = t->workers[i].cmd_fd = t->workers[i].timer_fd =
		    t->workers[i].wake_fd = -1;
	*out = t;

	VS_INFO(INIT, "target: %u controllers, %u workers (%s), block size %u", nctrl, t->nworkers,
		t->poll ? "poll" : "event", t->block_size);
	if (!manual && (t->run_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0) {
		rc = tq_err(why, whylen, -errno, "eventfd: %s", strerror(errno));
		goto fail;
	}
	if (cfg->lun_root && (rc = lun_root_check(t, cfg->lun_root, why, whylen)))
		goto fail;
	for (unsigned i = 0; i < t->nworkers; i++) {
		if ((rc = worker_init(t, NULL, &t->workers[i], i, false, t->poll, t->ap_ns))) {
			tq_err(why, whylen, rc, "worker %u: %s", i, strerror(-rc));
			goto fail;
		}
	}
	if (!manual)
		for (unsigned i = 0; i < t->nworkers; i++)
			if ((rc = worker_start(&t->workers[i]))) {
				tq_err(why, whylen, rc, "worker %u: %s", i, strerror(-rc));
				goto fail;
			}
	for (unsigned i = 0; i < nctrl; i++) {
		const struct vs_target_controller *cc =
		    i == 0 && nctrl > cfg->ncontrollers
			? &own
			: &cfg->controllers[i - (nctrl - cfg->ncontrollers)];

		if ((rc = ctrl_add(t, cc, why, whylen)))
			goto fail;
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
	return target_create(out, cfg, false, why, whylen);
}

int vs_target__create_manual(struct vs_target **t, const struct vs_target_config *cfg)
{
	char err[256];
	int rc = target_create(t, cfg, true, err, sizeof(err));

	if (rc)
		VS_ERROR(INIT, "manual target: %s", err);
	return rc;
}

struct vs_controller *vs_target__controller(struct vs_target *t)
{
	return t->ctrls;
}

void vs_target__pump(struct vs_target *t, unsigned passes)
{
	for (unsigned i = 0; i < passes; i++) {
		for (struct vs_controller *c = t->ctrls; c; c = c->next)
			worker_pass(&c->ctl);
		for (unsigned k = 0; k < t->nworkers; k++)
			worker_pass(&t->workers[k]);
	}
}

bool vs_target__failed(const struct vs_target *t)
{
	return t->ctrls && __atomic_load_n(&t->ctrls->failed, __ATOMIC_ACQUIRE);
}

/* A controller whose serving failed (its socket): its error. */
static int serve_failed(struct vs_target *t)
{
	int rc = 0;

	pthread_mutex_lock(&t->ctrl_lock);
	for (struct vs_controller *c = t->ctrls; c && !rc; c = c->next)
		rc = __atomic_load_n(&c->serve_rc, __ATOMIC_ACQUIRE);
	pthread_mutex_unlock(&t->ctrl_lock);
	return rc;
}

int vs_target_run(struct vs_target *t, volatile sig_atomic_t *stop)
{
	int rc = 0;

	/* The controllers serve on their own threads; this one waits for the end. */
	while (!__atomic_load_n(stop, __ATOMIC_RELAXED) && !rc) { /* set by a signal or a thread */
		struct pollfd p = {.fd = t->run_fd, .events = POLLIN};
		uint64_t v;

		if (__atomic_load_n(&t->lost, __ATOMIC_ACQUIRE))
			rc = -ETIMEDOUT;
		else
			rc = serve_failed(t);
		if (rc)
			break;
		if (poll(&p, 1, 200) > 0 && read(t->run_fd, &v, sizeof(v)) < 0) {
			/* EAGAIN: taken by another */
		}
	}
	if (rc)
		VS_ERROR(VHOST, "serving stopped: %s", strerror(-rc));
	return rc;
}

void vs_target_wake(struct vs_target *t)
{
	if (t)
		tgt_wake_run(t); /* async-signal-safe: write(2) */
}

int vs_target_destroy(struct vs_target *t)
{
	struct vs_controller *c;
	int rc = 0, crc;

	if (!t)
		return 0;
	/* Each controller stops serving, its queues stop (in-flight requests complete into
	 * guest memory), its backends are flushed. */
	while ((c = t->ctrls)) {
		t->ctrls = c->next;
		crc = ctrl_destroy(c);
		rc = rc ? rc : crc;
	}
	if (__atomic_load_n(&t->lost, __ATOMIC_ACQUIRE)) {
		/* A worker that stopped answering may still run and use anything of ours. */
		VS_CRITICAL(INIT, "target abandoned (a worker was lost)%s",
			    rc && rc != -ETIMEDOUT ? "; a flush failed too" : "");
		return rc ? rc : -ETIMEDOUT;
	}
	for (unsigned i = 0; i < t->nworkers; i++)
		if (t->workers[i].epfd >= 0 || t->workers[i].started)
			worker_fini(&t->workers[i]);
	pthread_mutex_destroy(&t->ctrl_lock);
	pthread_cond_destroy(&t->ctrl_cond);
	if (t->run_fd >= 0)
		close(t->run_fd);
	free(t->workers);
	free(t->lun_root);
	VS_INFO(INIT, "target stopped%s", rc ? " (flush failed)" : "");
	free(t);
	return rc;
}

void vs_target_get_stats(const struct vs_target *t, struct vs_target_stats *s)
{
	struct vs_target *tt = (struct vs_target *)t; /* the lock, not the figures */

	memset(s, 0, sizeof(*s));
	for (unsigned i = 0; i < t->nworkers; i++) {
		const struct worker *w = &t->workers[i];
		s->requests += __atomic_load_n(&w->st.requests, __ATOMIC_RELAXED);
		s->bad_requests += __atomic_load_n(&w->st.bad_requests, __ATOMIC_RELAXED);
		s->tmfs += __atomic_load_n(&w->st.tmfs, __ATOMIC_RELAXED);
		s->notifies += __atomic_load_n(&w->st.notifies, __ATOMIC_RELAXED);
		s->polled_idle += __atomic_load_n(&w->st.polled_idle, __ATOMIC_RELAXED);
		s->sleeps += __atomic_load_n(&w->st.sleeps, __ATOMIC_RELAXED);
		s->preempted += __atomic_load_n(&w->st.preempted, __ATOMIC_RELAXED);
	}
	pthread_mutex_lock(&tt->ctrl_lock);
	for (const struct vs_controller *c = t->ctrls; c; c = c->next) {
		const struct worker *w = &c->ctl;

		s->connections += __atomic_load_n(&c->connections, __ATOMIC_RELAXED);
		s->requests += __atomic_load_n(&w->st.requests, __ATOMIC_RELAXED);
		s->bad_requests += __atomic_load_n(&w->st.bad_requests, __ATOMIC_RELAXED);
		s->tmfs += __atomic_load_n(&w->st.tmfs, __ATOMIC_RELAXED);
		s->notifies += __atomic_load_n(&w->st.notifies, __ATOMIC_RELAXED);
		if (VS_STATS) /* counted per queue only (tq_count_answered, tq_count_notify) */
			for (unsigned i = 0; i < TQ_MAX; i++) {
				s->requests +=
				    __atomic_load_n(&c->q[i].ts.requests, __ATOMIC_RELAXED);
				s->notifies +=
				    __atomic_load_n(&c->q[i].ts.notifies, __ATOMIC_RELAXED);
			}
	}
	pthread_mutex_unlock(&tt->ctrl_lock);
}
