/* SPDX-License-Identifier: MIT */
/*
 * rpc: the target's management socket.  JSON-RPC 2.0 over an owner-only Unix socket, one
 * request per line and one response per line, served on a thread of its own so that
 * neither a slow method nor a stuck client ever touches the target's data path.
 *
 * Methods (docs/TARGET.md): lun_add, lun_remove, lun_resize, lun_list, stats, trace_set,
 * save_config, shutdown.  They call the target's public API (include/vioscope/target.h) and nothing
 * below it.
 */
#ifndef VS_RPC_H
#define VS_RPC_H

#include <stddef.h>
#include <stdint.h>

#define VS_RPC_MAX_LINE 65536 /* a longer request line is refused, and its client closed */
/* Connections at once.  A newcomer to a full table closes the client idle longest among
 * those of the uid that holds the most connections (told why). */
#define VS_RPC_MAX_CLIENTS 64
/* The most the replies to one line may take (a batch is refused whole past it, before any
 * of it runs) */
#define VS_RPC_MAX_REPLY (1u << 20)
/* How long a started request line may take to be completed, and replies waiting to be
 * read may go unread, before the client is closed. */
#define VS_RPC_STALL_MS	 5000
#define VS_RPC_MAX_ALLOW 16 /* uids in an allow list */

/* JSON-RPC 2.0 error codes (the spec's, and ours in its -32000..-32099 range). */
enum vs_rpc_code {
	VS_RPC_PARSE_ERROR = -32700,
	VS_RPC_INVALID_REQUEST = -32600,
	VS_RPC_METHOD_NOT_FOUND = -32601,
	VS_RPC_INVALID_PARAMS = -32602,
	VS_RPC_INTERNAL_ERROR = -32603,
	VS_RPC_TARGET_ERROR = -32000, /* the target refused: its own message, data.errno */
};

struct vs_target;
struct vs_config_live;

struct vs_rpc_config {
	const char *path;	  /* the socket (created 0600; removed by vs_rpc_stop) */
	struct vs_target *target; /* served; outlives the server */
	/* The shutdown method: stop the target as SIGTERM does.  Called on the server's
	 * thread, after the reply is queued; NULL: shutdown is refused. */
	void (*shutdown)(void *arg);
	void *arg;
	/* Lines for the operator (a client dropped, and why); NULL: none. */
	void (*log)(void *arg, const char *line);
	/* Uids whose processes may connect (the kernel's SO_PEERCRED); any other gets one
	 * error line saying so and is closed.  None: root and this process's own uid. */
	const uint32_t *allow_uids;
	unsigned nallow_uids; /* at most VS_RPC_MAX_ALLOW */
	/* The configuration file the target was started from (rpc/config_live.h), for
	 * save_config, autosave after every change and trace_set's spec; NULL: save_config
	 * is refused. */
	struct vs_config_live *live;
};

struct vs_rpc;

/* Listen on cfg->path and start the server's thread.  0, or -errno with why saying what
 * (the path exists and is not a socket, another process listens on it, too many uids...).
 *
 * One thread serves every client, a request at a time (a batch too): the next is one of
 * the client whose uid, then which itself, has had the least of the thread's time lately,
 * so one that makes it work waits for its own requests, not the others. */
int vs_rpc_start(struct vs_rpc **rpc, const struct vs_rpc_config *cfg, char *why, size_t whylen);

/* Stop the thread (replies already queued get one last try), close every client and remove
 * the socket. */
void vs_rpc_stop(struct vs_rpc *rpc);

/* A server without a socket or a thread, for tests and fuzzers: only vs_rpc_handle, on the
 * caller's thread (cfg->path is not used).  Freed by vs_rpc_stop.  0, -ENOMEM, or -E2BIG
 * (more than VS_RPC_MAX_ALLOW uids allowed). */
int vs_rpc_new(struct vs_rpc **rpc, const struct vs_rpc_config *cfg);

/* One request line (without its newline) to its response line (without one; malloc'd, the
 * caller frees it); NULL when nothing is to be answered (notifications).  Used by the
 * server for every line, and by tests and fuzzers directly. */
char *vs_rpc_handle(struct vs_rpc *rpc, const char *line, size_t len);

#endif /* VS_RPC_H */
