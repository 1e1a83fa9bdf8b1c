/* SPDX-License-Identifier: MIT */
/* rpc's private header: the server (server.c) and the methods (methods.c). */
#ifndef VS_RPC_INT_H
#define VS_RPC_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "rpc/rpc.h"
#include "util/util.h"

struct rpc_line;
struct vs_target_stats_mark;

/* What a method keeps for one connection between its requests: where the latency
 * histograms stood at its last `stats` with interval (vs_target_lun_stats_since). */
struct rpc_session {
	struct vs_target_stats_mark *mark; /* NULL until it asks for an interval */
	uint64_t mark_ns;		   /* CLOCK_MONOTONIC of that last look */
};
/* Connections that may hold a mark at once (each up to 20 KiB per LUN). */
#define RPC_MAX_MARKS 8

/* The server's time spent on someone's requests, halving every RPC_USAGE_HALF_LIFE_NS: who
 * has had the least of it lately is answered first. */
#define RPC_USAGE_HALF_LIFE_NS 1000000000.0
struct rpc_usage {
	double ns;   /* as of at */
	uint64_t at; /* CLOCK_MONOTONIC ns */
};

struct rpc_client {
	int fd;	      /* -1: slot free */
	uint32_t uid; /* of the peer, as it connected */
	unsigned who; /* uid's index in the allow list */
	int pid;
	char *in; /* VS_RPC_MAX_LINE + 1 bytes: one line and its newline at most */
	size_t in_len;
	size_t scanned;	       /* in[0..scanned) holds no newline */
	struct rpc_line *line; /* being answered, a request a turn */
	char *out;	       /* replies not yet written */
	size_t out_len, out_cap, out_off;
	bool closing;	      /* refused: close once the replies are out */
	bool eof;	      /* it sent all it will: close once its lines are answered */
	bool ready;	      /* had a request to answer at the last look */
	uint64_t partial_ns;  /* since when in holds only part of a line (0: not so) */
	uint64_t unread_ns;   /* since when replies wait and none went out (0: none wait) */
	uint64_t active_ns;   /* accepted, or last answered: who is idle longest */
	struct rpc_usage use; /* of this connection (its uid's is in the server) */
	uint64_t ready_seq;   /* when it became ready, in the order of such events */
	struct rpc_session session;
};

struct vs_rpc {
	struct vs_rpc_config cfg;
	struct vs_log_sink log; /* cfg's log and arg */
	char *path;
	uint32_t allow[VS_RPC_MAX_ALLOW];
	unsigned nallow;
	int listen_fd, wake_fd;
	pthread_t thread;
	bool started;
	struct rpc_usage use[VS_RPC_MAX_ALLOW]; /* of each allowed uid, all its connections */
	uint64_t ready_seq;			/* clients that became ready so far */
	uint64_t refusal_logged_ns; /* refused peers are logged once a second at most ... */
	unsigned refusals_unlogged; /* ... and counted in between */
	struct rpc_client clients[VS_RPC_MAX_CLIENTS];
	struct rpc_session own; /* vs_rpc_handle's (tests, fuzzers) */
	unsigned marks;		/* sessions holding a mark */
};

/* A session ends (its connection closed): what it holds is freed. */
void rpc_session_end(struct vs_rpc *rpc, struct rpc_session *s);

/* "rpc: ..." to cfg.log, when there is one; also traced as an INFO. */
void rpc_log(struct vs_rpc *rpc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A request line being answered, one request at a time (methods.c).  Parse it: NULL with
 * *reply set when it is answered at once (not JSON, an empty batch, a batch whose replies
 * could pass VS_RPC_MAX_REPLY), else the line, for rpc_line_step. */
struct rpc_line *rpc_line_start(struct vs_rpc *rpc, struct rpc_session *s, const char *text,
				size_t len, char **reply);
/* Answer the line's next request: false while more are left; true when it is done: then
 * *reply is the response line (malloc'd; NULL when there is none: notifications) and the
 * line is freed. */
bool rpc_line_step(struct vs_rpc *rpc, struct rpc_line *l, char **reply);
void rpc_line_free(struct rpc_line *l);

#endif
