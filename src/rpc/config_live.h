/* SPDX-License-Identifier: MIT */
/*
 * The configuration a running target was started from (--config FILE) and what changed
 * since: what save_config writes, --config-autosave keeps on disk, and SIGHUP reloads.
 * Shared by the management thread (save_config, autosave after a change) and the main
 * thread (reload): one of them at a time, under the lock.
 */
#ifndef VS_RPC_CONFIG_LIVE_H
#define VS_RPC_CONFIG_LIVE_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>

#include "rpc/config.h"

struct vs_config_live {
	pthread_mutex_t lock;
	struct vs_config base; /* the settings as loaded (its LUNs: as loaded, not live) */
	char path[PATH_MAX];   /* the --config file */
	bool autosave;	       /* save to path after every change made over the socket */
	struct vs_target *target;
	char trace[VS_CONFIG_MAX_TRACE]; /* the trace spec last applied ("": none) */
	void (*log)(void *arg, const char *line);
	void *log_arg;
};

/* l for a target started from c, read from path.  0, or -ENAMETOOLONG. */
int vs_config_live_init(struct vs_config_live *l, const struct vs_config *c, const char *path,
			bool autosave, struct vs_target *t,
			void (*log)(void *arg, const char *line), void *log_arg);
void vs_config_live_fini(struct vs_config_live *l);

/* Write the live configuration (the settings, the target's LUNs now, the trace spec) to
 * the --config file, or, with name, to the file of that name in its directory: a plain
 * name (no '/', not starting with '.'), so that a client of the management socket can
 * write nowhere else.  Atomically (vs_config_write).  0, or -errno with err saying why. */
int vs_config_live_save(struct vs_config_live *l, const char *name, const char **written, char *err,
			size_t errlen);

/* A change was made (a LUN added, removed, resized; the trace spec): with autosave, save
 * to the --config file, a failure logged (the change stays made). */
void vs_config_live_changed(struct vs_config_live *l);

/* Apply a trace spec and remember it for saving: 0, or -EINVAL with why. */
int vs_config_live_trace(struct vs_config_live *l, const char *spec, char *why, size_t whylen);

/* Read the --config file again and apply what changed as the methods would (LUNs added,
 * removed, replaced; the trace spec), logging each step.  The whole file is checked
 * first: an invalid one, or one changing a setting that needs a restart, changes nothing.
 * A step that fails stops the reload, logged with what was applied before it.  0, or
 * -errno. */
int vs_config_live_reload(struct vs_config_live *l);

#endif
