/* SPDX-License-Identifier: MIT */
/* The running target's configuration: save, autosave, reload (config_live.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vioscope/target.h>
#include <vioscope/trace.h>

#include "rpc/config_live.h"

static void say(struct vs_config_live *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void say(struct vs_config_live *l, const char *fmt, ...)
{
	char line[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	VS_INFO(GENERAL, "%s", line);
	if (l->log)
		l->log(l->log_arg, line);
}

int vs_config_live_init(struct vs_config_live *l, const struct vs_config *c, const char *path,
			bool autosave, struct vs_target *t,
			void (*log)(void *arg, const char *line), void *log_arg)
{
	memset(l, 0, sizeof(*l));
	if (strlen(path) >= sizeof(l->path))
		return -ENAMETOOLONG;
	if (vs_config_copy(&l->base, c))
		return -ENOMEM;
	pthread_mutex_init(&l->lock, NULL);
	strcpy(l->path, path);
	strcpy(l->trace, c->trace);
	l->autosave = autosave;
	l->target = t;
	l->log = log;
	l->log_arg = log_arg;
	return 0;
}

void vs_config_live_fini(struct vs_config_live *l)
{
	vs_config_free(&l->base);
	pthread_mutex_destroy(&l->lock);
}

/* Under the lock. */
static int save_locked(struct vs_config_live *l, const char *to, char *err, size_t errlen)
{
	char *text = vs_config_dump(&l->base, l->target, l->trace);
	int rc;

	if (!text) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	rc = vs_config_write(to, text, err, errlen);
	free(text);
	return rc;
}

int vs_config_live_save(struct vs_config_live *l, const char *name, const char **written, char *err,
			size_t errlen)
{
	static char to[PATH_MAX]; /* under the lock; the caller reads it before the next */
	const char *slash = strrchr(l->path, '/');
	int rc;

	if (name && (!*name || strchr(name, '/') || name[0] == '.')) {
		snprintf(err, errlen,
			 "'%.64s': a file name in the --config file's directory (no '/', not "
			 "starting with '.')",
			 name);
		return -EINVAL;
	}
	pthread_mutex_lock(&l->lock);
	if (!name)
		snprintf(to, sizeof(to), "%s", l->path);
	else if (snprintf(to, sizeof(to), "%.*s%s", slash ? (int)(slash - l->path) + 1 : 0, l->path,
			  name) >= (int)sizeof(to)) {
		snprintf(err, errlen, "'%.64s': the path is too long", name);
		rc = -ENAMETOOLONG;
		goto out;
	}
	rc = save_locked(l, to, err, errlen);
	*written = to;
out:
	pthread_mutex_unlock(&l->lock);
	return rc;
}

void vs_config_live_changed(struct vs_config_live *l)
{
	char err[1024];

	if (!l || !l->autosave)
		return;
	pthread_mutex_lock(&l->lock);
	if (save_locked(l, l->path, err, sizeof(err)))
		say(l,
		    "config: autosave failed, %s still holds the configuration before the "
		    "change: %s",
		    l->path, err);
	pthread_mutex_unlock(&l->lock);
}

int vs_config_live_trace(struct vs_config_live *l, const char *spec, char *why, size_t whylen)
{
	int rc;

	if (strlen(spec) >= sizeof(l->trace)) {
		snprintf(why, whylen, "longer than %zu bytes", sizeof(l->trace) - 1);
		return -EINVAL;
	}
	pthread_mutex_lock(&l->lock);
	rc = vs_trace_set_spec_why(spec, why, whylen);
	if (!rc)
		strcpy(l->trace, spec);
	pthread_mutex_unlock(&l->lock);
	return rc < 0 ? rc : 0;
}

/* ---- reload ---------------------------------------------------------------------------- */

/* The first target-wide setting that differs between a and b and takes a restart, or
 * NULL. */
static const char *restart_needed(const struct vs_config *a, const struct vs_config *b)
{
	if (a->workers != b->workers)
		return "workers";
	if (a->poll != b->poll)
		return "poll";
	if (a->has_adaptive_poll != b->has_adaptive_poll ||
	    a->adaptive_poll_us != b->adaptive_poll_us)
		return "adaptive_poll_us";
	if (a->block_size != b->block_size)
		return "block_size";
	if (a->worker_timeout_ms != b->worker_timeout_ms)
		return "worker_timeout_ms";
	if (strcmp(a->rpc, b->rpc))
		return "rpc";
	if (a->nallow != b->nallow ||
	    memcmp(a->allow_uids, b->allow_uids, a->nallow * sizeof(a->allow_uids[0])))
		return "rpc_allow";
	if (strcmp(a->lun_root, b->lun_root))
		return "lun_root";
	if (a->testing != b->testing)
		return "testing";
	return NULL;
}

static const struct vs_config_lun *find_lun(const struct vs_config_ctrl *c, unsigned id)
{
	for (unsigned i = 0; i < c->nluns; i++)
		if (c->luns[i].id == id)
			return &c->luns[i];
	return NULL;
}

/* What a reload did so far, for the log line of a step that failed. */
struct done {
	char text[1024];
	size_t len;
};

static void done_add(struct done *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void done_add(struct done *d, const char *fmt, ...)
{
	va_list ap;

	if (d->len >= sizeof(d->text))
		return;
	va_start(ap, fmt);
	d->len += (size_t)vsnprintf(d->text + d->len, sizeof(d->text) - d->len, fmt, ap);
	va_end(ap);
}

/* Controller c's LUNs as the file says (want): removals (and the old half of a changed
 * spec) first, then limits, then additions. */
static int reload_luns(struct vs_config_live *l, const struct vs_config_ctrl *want,
		       struct vs_target_lun_info *now, struct done *d)
{
	const char *ctrl = want->name;
	char err[1024];
	unsigned n = vs_target_lun_list(l->target, ctrl, now, VS_TARGET_MAX_LUNS);
	int rc;

	n = n < VS_TARGET_MAX_LUNS ? n : VS_TARGET_MAX_LUNS;
	for (unsigned i = 0; i < n; i++) {
		const struct vs_config_lun *w = find_lun(want, now[i].id);

		if (w && !strcmp(w->spec, now[i].spec)) {
			if (!memcmp(&w->qos, &now[i].qos, sizeof(w->qos)))
				continue;
			if ((rc = vs_target_qos_set(l->target, ctrl, now[i].id, &w->qos, err,
						    sizeof(err)))) {
				say(l, "reload: %s: %s LUN %u's QoS: %s; applied before it: %s",
				    l->path, ctrl, now[i].id, err, d->len ? d->text : "nothing");
				return rc;
			}
			done_add(d, "%sLUN %u's QoS", d->len ? ", " : "", now[i].id);
			continue;
		}
		if ((rc = vs_target_lun_remove(l->target, ctrl, now[i].id, err, sizeof(err)))) {
			say(l, "reload: %s: removing LUN %u failed: %s; applied before it: %s",
			    l->path, now[i].id, err, d->len ? d->text : "nothing");
			return rc;
		}
		done_add(d, "%sremoved LUN %u (%s)", d->len ? ", " : "", now[i].id, now[i].spec);
	}
	for (unsigned i = 0; i < want->nluns; i++) {
		struct vs_target_lun lun = {
		    .id = want->luns[i].id, .spec = want->luns[i].spec, .qos = &want->luns[i].qos};
		bool kept = false;

		for (unsigned k = 0; k < n && !kept; k++)
			kept = now[k].id == lun.id && !strcmp(now[k].spec, lun.spec);
		if (kept)
			continue;
		if ((rc = vs_target_lun_add(l->target, ctrl, &lun, err, sizeof(err)))) {
			say(l, "reload: %s: adding LUN %u failed: %s; applied before it: %s",
			    l->path, lun.id, err, d->len ? d->text : "nothing");
			return rc;
		}
		done_add(d, "%sadded LUN %u (%s)", d->len ? ", " : "", lun.id, lun.spec);
	}
	return 0;
}

static int reload_locked(struct vs_config_live *l, struct vs_config *next,
			 struct vs_target_lun_info *now, struct done *d)
{
	static struct vs_target_controller_info live[VS_TARGET_MAX_CONTROLLERS]; /* l->lock */
	struct vs_target_config tc;
	char err[1024];
	const char *what;
	unsigned nlive;
	int rc;

	if ((rc = vs_config_load(l->path, next, err, sizeof(err)))) {
		say(l, "reload: %s; nothing changed", err);
		return rc;
	}
	if ((what = restart_needed(&l->base, next))) {
		say(l, "reload: %s: %s changed: that takes a restart; nothing changed", l->path,
		    what);
		return -EINVAL;
	}
	nlive = vs_target_controller_list(l->target, live, VS_TARGET_MAX_CONTROLLERS);
	nlive = nlive < VS_TARGET_MAX_CONTROLLERS ? nlive : VS_TARGET_MAX_CONTROLLERS;
	/* A controller kept must keep its device: a new socket or queue count is a new
	 * device (remove it and add it again, or restart). */
	for (unsigned k = 0; k < next->nctrls; k++)
		for (unsigned i = 0; i < nlive; i++) {
			if (strcmp(live[i].name, next->ctrls[k].name))
				continue;
			what = strcmp(live[i].socket_path, next->ctrls[k].socket) ? "socket"
			       : live[i].num_queues != next->ctrls[k].queues	  ? "queues"
										  : NULL;
			if (what) {
				say(l,
				    "reload: %s: controllers[%u].%s changed: that takes removing "
				    "the controller and adding it again (or a restart); nothing "
				    "changed",
				    l->path, k, what);
				return -EINVAL;
			}
		}
	/* The trace spec first: refused, it is checked and nothing else has changed. */
	if (next->trace[0] && strcmp(next->trace, l->trace)) {
		if (vs_trace_set_spec_why(next->trace, err, sizeof(err)) < 0) {
			say(l, "reload: %s: trace '%s': %s; nothing changed", l->path, next->trace,
			    err);
			return -EINVAL;
		}
		strcpy(l->trace, next->trace);
		done_add(d, "%strace %s", d->len ? ", " : "", next->trace);
	}
	/* Controllers the file no longer has go first, then the LUNs of those it keeps,
	 * then the new ones come. */
	for (unsigned i = 0; i < nlive; i++) {
		if (vs_config_ctrl(next, live[i].name))
			continue;
		if ((rc = vs_target_controller_remove(l->target, live[i].name, err, sizeof(err)))) {
			say(l,
			    "reload: %s: removing controller %s failed: %s; applied before it: %s",
			    l->path, live[i].name, err, d->len ? d->text : "nothing");
			return rc;
		}
		done_add(d, "%sremoved controller %s", d->len ? ", " : "", live[i].name);
	}
	vs_config_target(next, &tc);
	for (unsigned k = 0; k < next->nctrls; k++) {
		const struct vs_config_ctrl *want = &next->ctrls[k];
		unsigned i = 0;

		while (i < nlive && strcmp(live[i].name, want->name))
			i++;
		if (i < nlive) { /* kept: its limits, then its LUNs */
			if (memcmp(&live[i].qos, &want->qos, sizeof(want->qos))) {
				if ((rc = vs_target_controller_qos_set(
					 l->target, want->name, &want->qos, err, sizeof(err)))) {
					say(l,
					    "reload: %s: controller %s's QoS: %s; applied before "
					    "it: %s",
					    l->path, want->name, err, d->len ? d->text : "nothing");
					return rc;
				}
				done_add(d, "%scontroller %s's QoS", d->len ? ", " : "",
					 want->name);
			}
			if ((rc = reload_luns(l, want, now, d)))
				return rc;
			continue;
		}
		if ((rc = vs_target_controller_add(l->target, &tc.controllers[k], err,
						   sizeof(err)))) {
			say(l, "reload: %s: adding controller %s failed: %s; applied before it: %s",
			    l->path, next->ctrls[k].name, err, d->len ? d->text : "nothing");
			return rc;
		}
		done_add(d, "%sadded controller %s (%s)", d->len ? ", " : "", next->ctrls[k].name,
			 next->ctrls[k].socket);
	}
	say(l, "reload: %s: %s", l->path, d->len ? d->text : "nothing to change");
	vs_config_move(&l->base, next);
	return 0;
}

int vs_config_live_reload(struct vs_config_live *l)
{
	struct vs_target_lun_info *now = calloc(VS_TARGET_MAX_LUNS, sizeof(*now));
	struct vs_config *next = calloc(1, sizeof(*next));
	struct done d = {.len = 0};
	int rc = -ENOMEM;

	if (!now || !next) {
		say(l, "reload: out of memory; nothing changed");
		goto out;
	}
	pthread_mutex_lock(&l->lock);
	rc = reload_locked(l, next, now, &d);
	pthread_mutex_unlock(&l->lock);
out:
	free(now);
	if (next)
		vs_config_free(next); /* moved into l->base when it was applied */
	free(next);
	return rc;
}
