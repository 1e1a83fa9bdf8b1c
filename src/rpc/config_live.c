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
	pthread_mutex_init(&l->lock, NULL);
	l->base = *c;
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
	pthread_mutex_destroy(&l->lock);
}

/* Under the lock. */
static int save_locked(struct vs_config_live *l, const char *to, char *err, size_t errlen)
{
	static struct vs_target_lun_info luns[VS_TARGET_MAX_LUNS]; /* under the lock */
	unsigned n = vs_target_lun_list(l->target, NULL, luns, VS_TARGET_MAX_LUNS);
	char *text = vs_config_dump(&l->base, luns, n < VS_TARGET_MAX_LUNS ? n : VS_TARGET_MAX_LUNS,
				    l->trace);
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

/* The first setting that differs between a and b and takes a restart, or NULL. */
static const char *restart_needed(const struct vs_config *a, const struct vs_config *b)
{
	if (strcmp(a->socket, b->socket))
		return "controllers[0].socket";
	if (strcmp(a->name, b->name))
		return "controllers[0].name";
	if (a->queues != b->queues)
		return "controllers[0].queues";
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

static const struct vs_config_lun *find_lun(const struct vs_config *c, unsigned id)
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

static int reload_locked(struct vs_config_live *l, struct vs_config *next,
			 struct vs_target_lun_info *now, struct done *d)
{
	char err[1024];
	const char *what;
	unsigned n;
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
	n = vs_target_lun_list(l->target, NULL, now, VS_TARGET_MAX_LUNS);
	n = n < VS_TARGET_MAX_LUNS ? n : VS_TARGET_MAX_LUNS;
	/* Removals (and the old half of a changed spec) first: the id is then free. */
	for (unsigned i = 0; i < n; i++) {
		const struct vs_config_lun *want = find_lun(next, now[i].id);

		if (want && !strcmp(want->spec, now[i].spec)) {
			if (!memcmp(&want->qos, &now[i].qos, sizeof(want->qos)))
				continue;
			if ((rc = vs_target_qos_set(l->target, NULL, now[i].id, &want->qos, err,
						    sizeof(err)))) {
				say(l, "reload: %s: LUN %u's QoS: %s; applied before it: %s",
				    l->path, now[i].id, err, d->len ? d->text : "nothing");
				return rc;
			}
			done_add(d, "%sLUN %u's QoS", d->len ? ", " : "", now[i].id);
			continue;
		}
		if ((rc = vs_target_lun_remove(l->target, NULL, now[i].id, err, sizeof(err)))) {
			say(l, "reload: %s: removing LUN %u failed: %s; applied before it: %s",
			    l->path, now[i].id, err, d->len ? d->text : "nothing");
			return rc;
		}
		done_add(d, "%sremoved LUN %u (%s)", d->len ? ", " : "", now[i].id, now[i].spec);
	}
	for (unsigned i = 0; i < next->nluns; i++) {
		struct vs_target_lun lun = {
		    .id = next->luns[i].id, .spec = next->luns[i].spec, .qos = &next->luns[i].qos};
		bool kept = false;

		for (unsigned k = 0; k < n && !kept; k++)
			kept = now[k].id == lun.id && !strcmp(now[k].spec, lun.spec);
		if (kept)
			continue;
		if ((rc = vs_target_lun_add(l->target, NULL, &lun, err, sizeof(err)))) {
			say(l, "reload: %s: adding LUN %u failed: %s; applied before it: %s",
			    l->path, lun.id, err, d->len ? d->text : "nothing");
			return rc;
		}
		done_add(d, "%sadded LUN %u (%s)", d->len ? ", " : "", lun.id, lun.spec);
	}
	l->base = *next;
	say(l, "reload: %s: %s", l->path, d->len ? d->text : "nothing to change");
	return 0;
}

int vs_config_live_reload(struct vs_config_live *l)
{
	struct vs_target_lun_info *now = calloc(VS_TARGET_MAX_LUNS, sizeof(*now));
	struct vs_config *next = malloc(sizeof(*next));
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
	free(next);
	return rc;
}
