/* SPDX-License-Identifier: MIT */
/*
 * The target's configuration file (`vioscope target --config FILE`, docs/TARGET.md): JSON
 * in the shape `save_config` writes, so that a saved file starts the same target again.
 * Target-wide settings at the top, and "controllers", each a vhost-user-scsi device with
 * its socket, queues and LUNs (up to VS_TARGET_MAX_CONTROLLERS).
 *
 * Everything a file says is checked here before anything is created (the LUN specs with
 * vs_target_lun_check), and an error names the file, the line and column of the value at
 * fault and its JSON path, so that a target never starts half-configured and the operator
 * finds the mistake.
 */
#ifndef VS_RPC_CONFIG_H
#define VS_RPC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <vioscope/target.h>

#include "rpc/rpc.h"

#define VS_CONFIG_MAX_BYTES   (1u << 20) /* a longer file is refused: 256 LUNs fit in 100 KiB */
#define VS_CONFIG_MAX_PATH    108	 /* a socket path: what sockaddr_un holds */
#define VS_CONFIG_MAX_NAME    64
#define VS_CONFIG_MAX_SPEC    256 /* as vs_target_lun_info keeps it */
#define VS_CONFIG_MAX_TRACE   256
#define VS_CONFIG_MAX_LUNROOT 4096

struct vs_config_lun {
	unsigned id;
	char spec[VS_CONFIG_MAX_SPEC];
	struct vs_target_qos qos; /* "qos", as --qos and qos_set name the limits; 0: none */
};

/* A controller of the file (a vhost-user-scsi device): its socket, queues and LUNs. */
struct vs_config_ctrl {
	char name[VS_TARGET_NAME_MAX + 1];
	char socket[VS_CONFIG_MAX_PATH];
	unsigned queues;	  /* 1 when absent */
	struct vs_target_qos qos; /* over all its LUNs (all 0 when absent) */
	unsigned nluns;
	struct vs_config_lun luns[VS_TARGET_MAX_LUNS];
	struct vs_target_lun tluns[VS_TARGET_MAX_LUNS]; /* vs_config_target's, into luns */
};

struct vs_config {
	/* Target-wide; 0 or "" where absent: the command line's default. */
	unsigned workers;
	bool poll;
	bool has_adaptive_poll;
	unsigned adaptive_poll_us; /* 0: off */
	unsigned block_size;	   /* 512 or 4096 */
	unsigned worker_timeout_ms;
	char rpc[VS_CONFIG_MAX_PATH];
	unsigned nallow; /* rpc_allow: as written (a name or a uid) and resolved */
	char allow[VS_RPC_MAX_ALLOW][VS_CONFIG_MAX_NAME];
	uint32_t allow_uids[VS_RPC_MAX_ALLOW];
	char lun_root[VS_CONFIG_MAX_LUNROOT];
	bool testing;
	char trace[VS_CONFIG_MAX_TRACE];
	/* The controllers (malloc'd: vs_config_free). */
	unsigned nctrls;
	struct vs_config_ctrl *ctrls;
	struct vs_target_controller *tcs; /* vs_config_target's, one per controller */
};

/* What c holds besides itself (its controllers); c is then empty. */
void vs_config_free(struct vs_config *c);
/* *to freed, then given what *from holds; *from is then empty. */
void vs_config_move(struct vs_config *to, struct vs_config *from);
/* A copy of from into *to (which holds nothing): 0 or -ENOMEM. */
int vs_config_copy(struct vs_config *to, const struct vs_config *from);
/* The controller named name, or NULL. */
const struct vs_config_ctrl *vs_config_ctrl(const struct vs_config *c, const char *name);

/* Read and check path into c: 0; -EINVAL when what it says is wrong (a usage error: err is
 * "PATH:LINE:COLUMN: JSON.PATH: what"); another -errno when it cannot be read (err says
 * so). */
int vs_config_load(const char *path, struct vs_config *c, char *err, size_t errlen);
/* The same on text already read (name is only for messages). */
int vs_config_parse(const char *text, size_t len, const char *name, struct vs_config *c, char *err,
		    size_t errlen);

/* The target's settings from c: every controller in tc->controllers (pointing into c). */
void vs_config_target(struct vs_config *c, struct vs_target_config *tc);

/* c's settings, with the controllers, LUNs (with their QoS limits) and trace that are live
 * in t (added and removed at run time too), as the file's JSON text (malloc'd; NULL: out
 * of memory). */
char *vs_config_dump(const struct vs_config *c, struct vs_target *t, const char *trace);

/* Replace path with text atomically: a temporary file beside it (O_EXCL, 0600), written,
 * fsync'd, renamed over path, and the directory fsync'd; on any error the temporary file
 * is removed and path is left as it was.  0, or -errno with err saying which step. */
int vs_config_write(const char *path, const char *text, char *err, size_t errlen);

#endif
