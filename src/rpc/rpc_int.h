/* SPDX-License-Identifier: MIT */
/* rpc's private header: the server (server.c) and the methods (methods.c). */
#ifndef VS_RPC_INT_H
#define VS_RPC_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "rpc/rpc.h"

struct rpc_client {
	int fd;	  /* -1: slot free */
	char *in; /* VS_RPC_MAX_LINE + 1 bytes: one line and its newline at most */
	size_t in_len;
	char *out; /* replies not yet written */
	size_t out_len, out_cap, out_off;
	bool closing; /* refused: close once the replies are out */
};

struct vs_rpc {
	struct vs_rpc_config cfg;
	char *path;
	uint32_t allow[VS_RPC_MAX_ALLOW];
	unsigned nallow;
	uint64_t refusal_logged_ns; /* refused peers are logged once a second at most ... */
	unsigned refusals_unlogged; /* ... and counted in between */
	int listen_fd, wake_fd;
	pthread_t thread;
	bool started;
	struct rpc_client clients[VS_RPC_MAX_CLIENTS];
};

/* "vs_rpc: ..." to cfg.log, when there is one. */
void rpc_log(struct vs_rpc *rpc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
