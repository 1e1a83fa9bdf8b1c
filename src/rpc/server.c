/* SPDX-License-Identifier: MIT */
/*
 * The management socket's server: one thread, poll() over the listening socket, a wake
 * eventfd and up to VS_RPC_MAX_CLIENTS clients, every socket non-blocking.  Nothing here
 * waits on a client, and no client holds the others up (docs/SECURITY.md, "The management
 * socket"):
 *
 * - Who: a peer must run under a uid of the allow list (SO_PEERCRED, as it connected); any
 *   other gets one error line and is closed.
 * - Room: a newcomer to a full table closes the client idle longest among those of the uid
 *   that holds the most connections.  Idle clients are kept until then (`stats --watch`
 *   asks every few seconds on one connection).
 * - Time: a started request line must be completed within VS_RPC_STALL_MS, and replies
 *   waiting may go that long without a byte read, else the client is closed.
 * - Work: one request at a time (a batch element by element), always one of the ready
 *   client whose uid, and then which itself, has had the least of this thread's time
 *   lately (the time spent on its requests, halving every second), the one ready longest
 *   among equals.  So clients that make the server work yield to one that seldom does: an
 *   operator's call waits for the request under way, not for a turn of every other client,
 *   whatever they send; and one uid (a frontend's, say) cannot crowd out another's by
 *   opening more connections.
 * - Memory: a line holds at most VS_RPC_MAX_LINE bytes (a longer one is refused with
 *   -32600 and its client closed); a line's replies are bounded before it runs
 *   (methods.c); while a client's replies are not written out, none of its requests are
 *   read or answered, so one that never reads holds only its own replies.
 */
#define _GNU_SOURCE /* accept4, struct ucred */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "rpc/rpc_int.h"
#include "util/util.h"

#define VS_RPC_MAX_OUT (8u << 20) /* replies a client may leave unread before it is dropped */
#define STALL_NS       ((uint64_t)VS_RPC_STALL_MS * 1000000)

void rpc_log(struct vs_rpc *rpc, const char *fmt, ...)
{
	VS_LOG_LINE(&rpc->log, INFO, GENERAL, fmt);
}

static void client_close(struct vs_rpc *rpc, struct rpc_client *c)
{
	if (c->fd < 0)
		return;
	close(c->fd);
	rpc_session_end(rpc, &c->session);
	rpc_line_free(c->line);
	free(c->in);
	free(c->out);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

/* One error line to a peer we are about to close; text is ours (nothing to escape). */
static void tell(int fd, int code, const char *text)
{
	char line[512];
	int n = snprintf(line, sizeof(line),
			 "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":%d,\"message\":\"%s\"},"
			 "\"id\":null}\n",
			 code, text);

	(void)!send(fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1,
		    MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Queue s and a newline; false when the client has left too much unread. */
static bool client_queue(struct vs_rpc *rpc, struct rpc_client *c, const char *s)
{
	size_t n = strlen(s), need = c->out_len + n + 1;

	if (need > VS_RPC_MAX_OUT) {
		rpc_log(rpc, "rpc: client fd %d dropped: %zu bytes of replies left unread", c->fd,
			c->out_len - c->out_off);
		return false;
	}
	if (need > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		char *p;

		while (cap < need)
			cap *= 2;
		p = realloc(c->out, cap);
		if (!p)
			return false;
		c->out = p;
		c->out_cap = cap;
	}
	if (!c->out_len)
		c->unread_ns = vs_mono_ns();
	memcpy(c->out + c->out_len, s, n);
	c->out[c->out_len + n] = '\n';
	c->out_len += n + 1;
	return true;
}

/* Write what the socket takes now: 0, or -1 when the client is gone. */
static int client_flush(struct rpc_client *c)
{
	while (c->out_off < c->out_len) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
		c->out_off += (size_t)n;
		c->unread_ns = vs_mono_ns(); /* it reads: not stalled */
	}
	c->out_off = c->out_len = 0;
	c->unread_ns = 0;
	return 0;
}

/* Refuse the client with a -32600 line, then close it once that is read.  false: close
 * it now. */
static bool client_refuse(struct vs_rpc *rpc, struct rpc_client *c, const char *why)
{
	char refusal[256];

	snprintf(refusal, sizeof(refusal),
		 "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":%d,\"message\":\"%s\"},\"id\":null}",
		 VS_RPC_INVALID_REQUEST, why);
	rpc_log(rpc, "rpc: client fd %d (pid %d uid %u) refused: %s", c->fd, c->pid, c->uid, why);
	c->closing = true;
	c->in_len = c->scanned = 0;
	rpc_line_free(c->line);
	c->line = NULL;
	return client_queue(rpc, c, refusal) && client_flush(c) == 0;
}

/* Read what is there (at most the buffer's room).  false: close the client. */
static bool client_read(struct vs_rpc *rpc, struct rpc_client *c)
{
	ssize_t n;

	if (c->closing) { /* refused: what it still sends is dropped, unread data would reset
			     the connection before our refusal is read */
		char sink[4096];

		while (recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
			;
		return true;
	}
	if (c->eof || c->in_len > VS_RPC_MAX_LINE)
		return true; /* nothing more to come, or no room before a line is answered */
	n = recv(c->fd, c->in + c->in_len, VS_RPC_MAX_LINE + 1 - c->in_len, MSG_DONTWAIT);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
	if (n == 0) { /* it sent all it will: answer what came, then close */
		c->eof = true;
		return true;
	}
	c->in_len += (size_t)n;
	if (c->in_len > VS_RPC_MAX_LINE && !memchr(c->in, '\n', c->in_len)) {
		char why[64];

		snprintf(why, sizeof(why), "request line longer than %u bytes", VS_RPC_MAX_LINE);
		return client_refuse(rpc, c, why);
	}
	return true;
}

/* A complete line is buffered (scanning each byte once). */
static bool has_line(struct rpc_client *c)
{
	char *nl = memchr(c->in + c->scanned, '\n', c->in_len - c->scanned);

	c->scanned = nl ? (size_t)(nl - c->in) : c->in_len;
	return nl != NULL;
}

/* Whether c has a request to answer now, and since when it holds only part of a line. */
static void client_look(struct vs_rpc *rpc, struct rpc_client *c, uint64_t now)
{
	bool line = !c->closing && has_line(c);
	bool ready = !c->closing && !c->out_len && (c->line || line);

	if (ready && !c->ready) /* among equals, it queues behind those ready before it */
		c->ready_seq = ++rpc->ready_seq;
	c->ready = ready;
	/* Timed only while we read from it: not while its replies wait to be read. */
	if (!c->closing && !c->eof && !c->out_len && !c->line && !line && c->in_len) {
		if (!c->partial_ns)
			c->partial_ns = now;
	} else {
		c->partial_ns = 0;
	}
}

/* Nothing is left to do for c: refused and told, or it sent all it will and was answered. */
static bool client_done(struct rpc_client *c)
{
	return !c->out_len && (c->closing || (c->eof && !c->line && !has_line(c)));
}

/* A timer started at since (0: not running) has run out at now. */
static bool stalled(uint64_t since, uint64_t now)
{
	return since && now > since && now - since >= STALL_NS;
}

/* Close c if it took too long or is done.  false: closed. */
static bool client_expire(struct vs_rpc *rpc, struct rpc_client *c, uint64_t now)
{
	char why[96];

	if (stalled(c->partial_ns, now)) {
		snprintf(why, sizeof(why), "no complete request line within %u ms",
			 VS_RPC_STALL_MS);
		if (!client_refuse(rpc, c, why))
			goto close;
	} else if (stalled(c->unread_ns, now)) {
		rpc_log(rpc,
			"rpc: client fd %d (pid %d uid %u) dropped: its replies went unread for "
			"%u ms",
			c->fd, c->pid, c->uid, VS_RPC_STALL_MS);
		goto close;
	}
	if (!client_done(c))
		return true;
close:
	client_close(rpc, c);
	return false;
}

static double usage(const struct rpc_usage *u, uint64_t now)
{
	return u->ns > 0 ? u->ns * exp2(-(double)(now - u->at) / RPC_USAGE_HALF_LIFE_NS) : 0;
}

static void charge(struct rpc_usage *u, uint64_t ns, uint64_t now)
{
	u->ns = usage(u, now) + (double)ns;
	u->at = now;
}

/* a comes before b: its uid has had less of our time lately, then itself, then it has
 * waited longer. */
static bool before(const struct vs_rpc *rpc, const struct rpc_client *a, const struct rpc_client *b,
		   uint64_t now)
{
	double ua = usage(&rpc->use[a->who], now), ub = usage(&rpc->use[b->who], now);

	if (ua != ub)
		return ua < ub;
	ua = usage(&a->use, now);
	ub = usage(&b->use, now);
	if (ua != ub)
		return ua < ub;
	return a->ready_seq < b->ready_seq;
}

/* Answer one request, of the ready client that comes first. */
static void serve_one(struct vs_rpc *rpc, uint64_t now)
{
	struct rpc_client *c = NULL;
	char *reply = NULL;
	uint64_t t0, spent;
	bool ok = true;

	for (unsigned i = 0; i < VS_RPC_MAX_CLIENTS; i++) {
		struct rpc_client *k = &rpc->clients[i];

		if (k->fd >= 0 && k->ready && (!c || before(rpc, k, c, now)))
			c = k;
	}
	if (!c)
		return;
	t0 = vs_mono_ns();
	if (!c->line) {
		char *nl = memchr(c->in, '\n', c->in_len);
		size_t len = (size_t)(nl - c->in);

		c->line = rpc_line_start(rpc, &c->session, c->in, len, &reply);
		c->in_len -= len + 1;
		memmove(c->in, nl + 1, c->in_len);
		c->scanned = 0;
	}
	if (c->line && rpc_line_step(rpc, c->line, &reply))
		c->line = NULL;
	spent = vs_mono_ns() - t0 + 1;
	charge(&c->use, spent, now);
	charge(&rpc->use[c->who], spent, now);
	c->active_ns = now;
	if (reply)
		ok = client_queue(rpc, c, reply) && client_flush(c) == 0;
	free(reply);
	if (ok)
		client_look(rpc, c, now);
	else
		client_close(rpc, c);
}

/* uid's index in the allow list, or -1. */
static int allowed(const struct vs_rpc *rpc, uint32_t uid)
{
	for (unsigned i = 0; i < rpc->nallow; i++)
		if (rpc->allow[i] == uid)
			return (int)i;
	return -1;
}

/* A peer of a uid not allowed: told, closed and logged (once a second at most: a flood
 * of them must not flood the log). */
static void refuse_peer(struct vs_rpc *rpc, int fd, const struct ucred *peer, uint64_t now)
{
	char text[128];

	snprintf(text, sizeof(text), "uid %u may not use this management socket (--rpc-allow)",
		 (unsigned)peer->uid);
	tell(fd, VS_RPC_TARGET_ERROR, text);
	close(fd);
	if (rpc->refusal_logged_ns && now - rpc->refusal_logged_ns < 1000000000ull) {
		rpc->refusals_unlogged++;
		return;
	}
	text[0] = 0;
	if (rpc->refusals_unlogged)
		snprintf(text, sizeof(text), " (and %u more since the last such line)",
			 rpc->refusals_unlogged);
	rpc_log(rpc, "rpc: refused a client: pid %d uid %u is not allowed (--rpc-allow)%s",
		(int)peer->pid, (unsigned)peer->uid, text);
	rpc->refusal_logged_ns = now;
	rpc->refusals_unlogged = 0;
}

/* The table is full: close the client idle longest (not ready, least recently answered)
 * among those of the uid that holds the most, and give its slot. */
static struct rpc_client *evict(struct vs_rpc *rpc)
{
	struct rpc_client *v = NULL;
	unsigned v_count = 0;

	for (unsigned i = 0; i < VS_RPC_MAX_CLIENTS; i++) {
		struct rpc_client *c = &rpc->clients[i];
		unsigned count = 0;

		for (unsigned k = 0; k < VS_RPC_MAX_CLIENTS; k++)
			count += rpc->clients[k].uid == c->uid;
		if (!v || count > v_count ||
		    (count == v_count && (c->ready < v->ready ||
					  (c->ready == v->ready && c->active_ns < v->active_ns)))) {
			v = c;
			v_count = count;
		}
	}
	rpc_log(rpc,
		"rpc: client fd %d (pid %d uid %u) closed: %u clients connected and another came; "
		"it had been idle longest (of uid %u, which holds %u)",
		v->fd, v->pid, v->uid, VS_RPC_MAX_CLIENTS, v->uid, v_count);
	if (!v->out_len) /* not in the middle of a reply */
		tell(v->fd, VS_RPC_TARGET_ERROR,
		     "closed: the server was full and this connection was idle longest");
	client_close(rpc, v);
	return v;
}

static void accept_client(struct vs_rpc *rpc, uint64_t now)
{
	struct ucred peer = {0};
	socklen_t len = sizeof(peer);
	int fd = accept4(rpc->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct rpc_client *c = NULL;
	int who;

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) || len != sizeof(peer)) {
		rpc_log(rpc, "rpc: a client whose credentials cannot be read: closed (%s)",
			strerror(errno));
		close(fd);
		return;
	}
	if ((who = allowed(rpc, peer.uid)) < 0) {
		refuse_peer(rpc, fd, &peer, now);
		return;
	}
	for (unsigned i = 0; i < VS_RPC_MAX_CLIENTS && !c; i++)
		if (rpc->clients[i].fd < 0)
			c = &rpc->clients[i];
	if (!c)
		c = evict(rpc);
	c->in = malloc(VS_RPC_MAX_LINE + 1);
	if (!c->in) {
		close(fd);
		return;
	}
	c->fd = fd;
	c->uid = peer.uid;
	c->who = (unsigned)who;
	c->pid = peer.pid;
	c->active_ns = now;
	/* Its request may be here already: then it is busy, not idle, if the table fills. */
	if (!client_read(rpc, c))
		client_close(rpc, c);
	else
		client_look(rpc, c, now);
}

static bool woken(struct vs_rpc *rpc)
{
	uint64_t v;

	return read(rpc->wake_fd, &v, sizeof(v)) == sizeof(v);
}

/* What to poll for c; its earliest deadline lowers *deadline. */
static short client_events(const struct rpc_client *c, uint64_t *deadline)
{
	uint64_t d = c->partial_ns  ? c->partial_ns + STALL_NS
		     : c->unread_ns ? c->unread_ns + STALL_NS
				    : UINT64_MAX;

	if (d < *deadline)
		*deadline = d;
	/* Replies pending: wait until they can be written, read nothing more (a refused
	 * client is still drained, so that it sees its refusal). */
	return (short)((c->out_len ? POLLOUT : 0) |
		       (c->closing || (!c->out_len && !c->eof) ? POLLIN : 0));
}

static void *server_main(void *arg)
{
	struct vs_rpc *rpc = arg;
	struct pollfd pfd[VS_RPC_MAX_CLIENTS + 2];
	unsigned who[VS_RPC_MAX_CLIENTS + 2];

	for (;;) {
		uint64_t deadline = UINT64_MAX, now;
		bool work = false;
		unsigned n = 2;
		int timeout = -1;

		pfd[0] = (struct pollfd){.fd = rpc->wake_fd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = rpc->listen_fd, .events = POLLIN};
		for (unsigned i = 0; i < VS_RPC_MAX_CLIENTS; i++) {
			struct rpc_client *c = &rpc->clients[i];

			if (c->fd < 0)
				continue;
			work |= c->ready;
			pfd[n] =
			    (struct pollfd){.fd = c->fd, .events = client_events(c, &deadline)};
			who[n++] = i;
		}
		now = vs_mono_ns();
		if (work)
			timeout = 0;
		else if (deadline != UINT64_MAX)
			timeout = deadline <= now ? 0 : (int)((deadline - now) / 1000000) + 1;
		if (poll(pfd, n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			rpc_log(rpc, "rpc: poll: %s; the management socket stops", strerror(errno));
			return NULL;
		}
		if ((pfd[0].revents & POLLIN) && woken(rpc))
			return NULL;
		for (unsigned k = 2; k < n; k++) {
			struct rpc_client *c = &rpc->clients[who[k]];
			bool ok = true;

			if (!pfd[k].revents)
				continue;
			if (pfd[k].revents & POLLOUT)
				ok = client_flush(c) == 0;
			if (ok && (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				ok = client_read(rpc, c);
			if (!ok)
				client_close(rpc, c);
		}
		now = vs_mono_ns();
		if (pfd[1].revents & POLLIN)
			accept_client(rpc, now);
		for (unsigned i = 0; i < VS_RPC_MAX_CLIENTS; i++)
			if (rpc->clients[i].fd >= 0)
				client_look(rpc, &rpc->clients[i], now);
		serve_one(rpc, now);
		/* After the answer too: a client it finished with is closed now, not at the
		 * next wake-up. */
		now = vs_mono_ns();
		for (unsigned i = 0; i < VS_RPC_MAX_CLIENTS; i++) {
			struct rpc_client *c = &rpc->clients[i];

			if (c->fd >= 0 && client_expire(rpc, c, now))
				client_look(rpc, c, now);
		}
	}
}

int vs_rpc_new(struct vs_rpc **out, const struct vs_rpc_config *cfg)
{
	struct vs_rpc *rpc = calloc(1, sizeof(*rpc));

	*out = NULL;
	if (!rpc)
		return -ENOMEM;
	rpc->cfg = *cfg;
	rpc->log = (struct vs_log_sink){cfg->log, cfg->arg};
	rpc->listen_fd = rpc->wake_fd = -1;
	for (unsigned i = 0; i < VS_RPC_MAX_CLIENTS; i++)
		rpc->clients[i].fd = -1;
	if (cfg->nallow_uids > VS_RPC_MAX_ALLOW) {
		free(rpc);
		return -E2BIG;
	}
	for (unsigned i = 0; i < cfg->nallow_uids; i++)
		rpc->allow[rpc->nallow++] = cfg->allow_uids[i];
	if (!rpc->nallow) {
		rpc->allow[rpc->nallow++] = 0;
		if (geteuid())
			rpc->allow[rpc->nallow++] = geteuid();
	}
	rpc->cfg.allow_uids = NULL; /* the copy above is what counts */
	*out = rpc;
	return 0;
}

int vs_rpc_start(struct vs_rpc **out, const struct vs_rpc_config *cfg, char *why, size_t whylen)
{
	struct vs_rpc *rpc;
	int rc = vs_rpc_new(&rpc, cfg);

	*out = NULL;
	if (rc == -E2BIG)
		return vs_fail(why, whylen, -EINVAL, "%u uids allowed: at most %u",
			       cfg->nallow_uids, VS_RPC_MAX_ALLOW);
	if (rc)
		return vs_fail(why, whylen, rc, "out of memory");
	rpc->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rpc->wake_fd < 0) {
		rc = vs_fail(why, whylen, -errno, "eventfd: %s", strerror(errno));
		goto fail;
	}
	rc = vs_listen_unix(cfg->path, 16, why, whylen);
	if (rc < 0)
		goto fail;
	rpc->listen_fd = rc;
	rpc->path = strdup(cfg->path);
	if (!rpc->path) {
		rc = vs_fail(why, whylen, -ENOMEM, "out of memory");
		goto fail;
	}
	rpc->cfg.path = rpc->path;
	if ((rc = -pthread_create(&rpc->thread, NULL, server_main, rpc))) {
		vs_fail(why, whylen, rc, "cannot start the management thread: %s", strerror(-rc));
		goto fail;
	}
	rpc->started = true;
	VS_INFO(GENERAL, "management socket on %s", cfg->path);
	*out = rpc;
	return 0;
fail:
	vs_rpc_stop(rpc);
	return rc;
}

void vs_rpc_stop(struct vs_rpc *rpc)
{
	uint64_t one = 1;

	if (!rpc)
		return;
	if (rpc->started) {
		if (write(rpc->wake_fd, &one, sizeof(one)) < 0)
			rpc_log(rpc, "rpc: cannot wake the server: %s", strerror(errno));
		pthread_join(rpc->thread, NULL);
	}
	for (unsigned i = 0; i < VS_RPC_MAX_CLIENTS; i++) {
		client_flush(&rpc->clients[i]); /* a last try: e.g. shutdown's own reply */
		client_close(rpc, &rpc->clients[i]);
	}
	if (rpc->listen_fd >= 0) {
		close(rpc->listen_fd);
		if (rpc->path)
			unlink(rpc->path);
		else
			unlink(rpc->cfg.path);
	}
	if (rpc->wake_fd >= 0)
		close(rpc->wake_fd);
	rpc_session_end(rpc, &rpc->own);
	free(rpc->path);
	free(rpc);
}
