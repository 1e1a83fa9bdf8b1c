/* SPDX-License-Identifier: MIT */
/*
 * The management socket's server: one thread, poll() over the listening socket, a wake
 * eventfd and up to VS_RPC_MAX_CLIENTS clients, every socket non-blocking.  Each client
 * has a bounded line buffer (a line longer than VS_RPC_MAX_LINE is refused with -32600 and
 * the client closed) and a reply buffer: while a client's replies are not written out, no
 * more of its requests are read, so a client that never reads holds only its own replies,
 * and past VS_RPC_MAX_OUT of them it is dropped.  Nothing here waits on a client.  A peer
 * must run under a uid of the allow list (SO_PEERCRED, as it connected); any other gets
 * one error line and is closed.
 */
#define _GNU_SOURCE /* accept4, struct ucred */
#include <errno.h>
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

void rpc_log(struct vs_rpc *rpc, const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	VS_INFO(GENERAL, "%s", line);
	if (rpc->cfg.log)
		rpc->cfg.log(rpc->cfg.arg, line);
}

static void client_close(struct rpc_client *c)
{
	if (c->fd < 0)
		return;
	close(c->fd);
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
	}
	c->out_off = c->out_len = 0;
	return 0;
}

/* Answer the complete lines buffered, while the replies are written out as fast as they
 * come (a client that does not read stops us answering it, nobody else).  Then refuse a
 * buffer full without a newline.  false: close the client. */
static bool client_answer(struct vs_rpc *rpc, struct rpc_client *c)
{
	char *nl;

	while (!c->out_len && !c->closing && (nl = memchr(c->in, '\n', c->in_len))) {
		size_t len = (size_t)(nl - c->in);
		char *reply = vs_rpc_handle(rpc, c->in, len);
		bool ok = !reply || client_queue(rpc, c, reply);

		free(reply);
		c->in_len -= len + 1;
		memmove(c->in, nl + 1, c->in_len);
		if (!ok || client_flush(c))
			return false;
	}
	if (!c->closing && c->in_len > VS_RPC_MAX_LINE && !memchr(c->in, '\n', c->in_len)) {
		char refusal[160];

		snprintf(refusal, sizeof(refusal),
			 "{\"jsonrpc\":\"2.0\",\"error\":{\"code\":%d,\"message\":\"request line "
			 "longer than %u bytes\"},\"id\":null}",
			 VS_RPC_INVALID_REQUEST, VS_RPC_MAX_LINE);
		rpc_log(rpc, "rpc: client fd %d refused: a request line longer than %u bytes",
			c->fd, VS_RPC_MAX_LINE);
		c->closing = true;
		c->in_len = 0;
		if (!client_queue(rpc, c, refusal) || client_flush(c))
			return false;
	}
	return !(c->closing && !c->out_len);
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
	n = recv(c->fd, c->in + c->in_len, VS_RPC_MAX_LINE + 1 - c->in_len, MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
		return false;
	if (n > 0)
		c->in_len += (size_t)n;
	return client_answer(rpc, c);
}

static bool allowed(const struct vs_rpc *rpc, uint32_t uid)
{
	for (unsigned i = 0; i < rpc->nallow; i++)
		if (rpc->allow[i] == uid)
			return true;
	return false;
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

static void accept_client(struct vs_rpc *rpc)
{
	struct ucred peer = {0};
	socklen_t len = sizeof(peer);
	int fd = accept4(rpc->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct rpc_client *c = NULL;

	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) || len != sizeof(peer)) {
		rpc_log(rpc, "rpc: a client whose credentials cannot be read: closed (%s)",
			strerror(errno));
		close(fd);
		return;
	}
	if (!allowed(rpc, peer.uid)) {
		refuse_peer(rpc, fd, &peer, vs_mono_ns());
		return;
	}
	for (unsigned i = 0; i < VS_RPC_MAX_CLIENTS && !c; i++)
		if (rpc->clients[i].fd < 0)
			c = &rpc->clients[i];
	if (!c) {
		rpc_log(rpc, "rpc: more than %u clients: one refused", VS_RPC_MAX_CLIENTS);
		close(fd);
		return;
	}
	c->in = malloc(VS_RPC_MAX_LINE + 1);
	if (!c->in) {
		close(fd);
		return;
	}
	c->fd = fd;
}

static bool woken(struct vs_rpc *rpc)
{
	uint64_t v;

	return read(rpc->wake_fd, &v, sizeof(v)) == sizeof(v);
}

static void *server_main(void *arg)
{
	struct vs_rpc *rpc = arg;
	struct pollfd pfd[VS_RPC_MAX_CLIENTS + 2];
	unsigned who[VS_RPC_MAX_CLIENTS + 2];

	for (;;) {
		unsigned n = 2;

		pfd[0] = (struct pollfd){.fd = rpc->wake_fd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = rpc->listen_fd, .events = POLLIN};
		for (unsigned i = 0; i < VS_RPC_MAX_CLIENTS; i++) {
			struct rpc_client *c = &rpc->clients[i];

			if (c->fd < 0)
				continue;
			/* Replies pending: wait until they can be written, read nothing more
			 * (a refused client is still drained, so that it sees its refusal). */
			pfd[n] = (struct pollfd){
			    .fd = c->fd,
			    .events = (short)((c->out_len ? POLLOUT : 0) |
					      (!c->out_len || c->closing ? POLLIN : 0))};
			who[n++] = i;
		}
		if (poll(pfd, n, -1) < 0) {
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
				ok = client_flush(c) == 0 && client_answer(rpc, c);
			if (ok && (pfd[k].revents & (POLLIN | POLLHUP | POLLERR)))
				ok = client_read(rpc, c);
			if (!ok)
				client_close(c);
		}
		if (pfd[1].revents & POLLIN)
			accept_client(rpc);
	}
}

int vs_rpc_start(struct vs_rpc **out, const struct vs_rpc_config *cfg, char *err, size_t errlen)
{
	struct vs_rpc *rpc = calloc(1, sizeof(*rpc));
	int rc;

	*out = NULL;
	if (!rpc)
		return vs_fail(err, errlen, -ENOMEM, "out of memory");
	rpc->cfg = *cfg;
	rpc->listen_fd = rpc->wake_fd = -1;
	for (unsigned i = 0; i < VS_RPC_MAX_CLIENTS; i++)
		rpc->clients[i].fd = -1;
	if (cfg->nallow_uids > VS_RPC_MAX_ALLOW) {
		rc = vs_fail(err, errlen, -EINVAL, "%u uids allowed: at most %u", cfg->nallow_uids,
			     VS_RPC_MAX_ALLOW);
		goto fail;
	}
	for (unsigned i = 0; i < cfg->nallow_uids; i++)
		rpc->allow[rpc->nallow++] = cfg->allow_uids[i];
	if (!rpc->nallow) {
		rpc->allow[rpc->nallow++] = 0;
		if (geteuid())
			rpc->allow[rpc->nallow++] = geteuid();
	}
	rpc->cfg.allow_uids = NULL; /* the copy above is what counts */
	rpc->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (rpc->wake_fd < 0) {
		rc = vs_fail(err, errlen, -errno, "eventfd: %s", strerror(errno));
		goto fail;
	}
	rc = vs_listen_unix(cfg->path, 16, err, errlen);
	if (rc < 0)
		goto fail;
	rpc->listen_fd = rc;
	rpc->path = strdup(cfg->path);
	if (!rpc->path) {
		rc = vs_fail(err, errlen, -ENOMEM, "out of memory");
		goto fail;
	}
	rpc->cfg.path = rpc->path;
	if ((rc = -pthread_create(&rpc->thread, NULL, server_main, rpc))) {
		vs_fail(err, errlen, rc, "cannot start the management thread: %s", strerror(-rc));
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
		client_close(&rpc->clients[i]);
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
	free(rpc->path);
	free(rpc);
}
