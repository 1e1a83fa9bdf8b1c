/* SPDX-License-Identifier: MIT */
/*
 * The test gate (test-only spec options gate= and gate-sock=): bios held in flight, before
 * the backend sees them, until the test lets them go.  Tests need requests in flight at a
 * moment of their choosing (a removal waiting for them, a shrink cutting past them, a flush
 * that never finishes); a delay only makes that likely, the gate makes it so.
 *
 *   gate=KIND[:FIRST[-[LAST]]]  hold bios of KIND (read, write, flush, discard: also
 *                               write-zeroes, or any), counted from 1 from the backend's
 *                               opening: all of them, the FIRSTth only, FIRST.. on
 *                               ("FIRST-"), or FIRST..LAST
 *   gate-sock=PATH              a test in another process drives the gate through the unix
 *                               stream socket it listens on at PATH (the backend connects
 *                               when it opens): it reads "held H T\n" each time the number
 *                               held changes (H held now, T held so far) and writes
 *                               "release N\n" (the N oldest go) or "open\n" (all go, and
 *                               no more are held); end of file opens the gate
 *
 * In-process tests use vs_backend_gate_*() instead (backend.h).  A held bio keeps its
 * place in its I/O context (counted in flight, a request slot standing for it as for a
 * library's request: vs_io_ctx_hold); once released, any thread hands it back to that
 * context (vs_io_req_remote_done) and the context's own thread sends it on at its next
 * reap, as if it had been submitted then.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "backend/backend_int.h"

#define GATE_ANY (-1)

struct gate_node {
	struct gate_node *next;
	struct vs_io_req *req; /* stands for the bio in its context (vs_io_ctx_hold) */
};

struct vs_be_gate {
	int kind;	      /* enum vs_bio_op (DISCARD: WRITE_ZEROES too), or GATE_ANY */
	uint64_t first, last; /* which bios of the kind, counted from 1 */
	char *sock_path;      /* gate-sock=, or NULL */
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC: held changed */
	uint64_t seen;	     /* bios of the kind so far */
	bool open;	     /* let go for good: nothing more is held */
	unsigned held;
	uint64_t held_total;
	struct gate_node *head, **tail; /* oldest first */
	int sock, wake_fd;		/* gate-sock: the connection, and the thread's stop */
	pthread_t thread;
	bool thread_started;
};

static struct vs_be_gate *gate_new(void)
{
	struct vs_be_gate *g = calloc(1, sizeof(*g));
	pthread_condattr_t ca;

	if (!g)
		return NULL;
	g->kind = GATE_ANY;
	g->first = 1;
	g->last = UINT64_MAX;
	g->sock = g->wake_fd = -1;
	g->tail = &g->head;
	pthread_mutex_init(&g->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&g->cond, &ca);
	pthread_condattr_destroy(&ca);
	return g;
}

/* "KIND[:FIRST[-[LAST]]]": 0, or -EINVAL with why set. */
static int gate_parse_which(struct vs_be_gate *g, const char *v, char *why, size_t whylen)
{
	static const struct {
		const char *name;
		int kind;
	} kinds[] = {{"read", VS_BIO_READ},
		     {"write", VS_BIO_WRITE},
		     {"flush", VS_BIO_FLUSH},
		     {"discard", VS_BIO_DISCARD},
		     {"any", GATE_ANY}};
	const char *colon = strchr(v, ':');
	size_t klen = colon ? (size_t)(colon - v) : strlen(v), nlen;
	char first[24];
	const char *dash;
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strlen(kinds[i].name) == klen && !strncmp(v, kinds[i].name, klen))
			break;
	if (i == sizeof(kinds) / sizeof(kinds[0]))
		goto bad;
	g->kind = kinds[i].kind;
	if (!colon)
		return 0; /* every bio of the kind */
	/* FIRST, then nothing (FIRST only), "-" (FIRST on) or "-LAST" */
	dash = strchr(colon + 1, '-');
	nlen = dash ? (size_t)(dash - (colon + 1)) : strlen(colon + 1);
	if (nlen >= sizeof(first))
		goto bad;
	memcpy(first, colon + 1, nlen);
	first[nlen] = 0;
	if (vs_parse_u64(first, 1, UINT64_MAX, &g->first))
		goto bad;
	g->last = !dash ? g->first : UINT64_MAX;
	if (dash && dash[1] && vs_parse_u64(dash + 1, g->first, UINT64_MAX, &g->last))
		goto bad;
	return 0;
bad:
	return vs_fail(why, whylen, -EINVAL,
		       "gate=%s: expected read|write|flush|discard|any[:FIRST[-[LAST]]]", v);
}

int vs_be_gate_parse(struct vs_be_gate **gp, const char *field, char *why, size_t whylen)
{
	bool which = !strncmp(field, "gate=", 5), sock = !strncmp(field, "gate-sock=", 10);
	int rc;

	if (!which && !sock)
		return 0;
	if (!*gp && !(*gp = gate_new()))
		return vs_fail(why, whylen, -ENOMEM, "out of memory");
	if (which)
		return (rc = gate_parse_which(*gp, field + 5, why, whylen)) < 0 ? rc : 1;
	if (!field[10] || strlen(field + 10) >= sizeof(((struct sockaddr_un *)0)->sun_path))
		return vs_fail(why, whylen, -EINVAL, "gate-sock=: expected a socket path");
	free((*gp)->sock_path);
	if (!((*gp)->sock_path = strdup(field + 10)))
		return vs_fail(why, whylen, -ENOMEM, "out of memory");
	return 1;
}

/* Under g->lock: tell the test's socket how many are held (dropped when it does not read). */
static void gate_tell(struct vs_be_gate *g)
{
	char line[64];
	int n;

	pthread_cond_broadcast(&g->cond);
	if (g->sock < 0)
		return;
	n = snprintf(line, sizeof(line), "held %u %llu\n", g->held,
		     (unsigned long long)g->held_total);
	if (send(g->sock, line, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n)
		VS_WARNING(BACKEND, "gate: the test's socket did not take '%.*s'", n - 1, line);
}

/* Take the n oldest held bios off the list (under g->lock): the list of them. */
static struct gate_node *gate_take(struct vs_be_gate *g, unsigned n)
{
	struct gate_node *list = g->head, **end = &g->head;
	unsigned k = 0;

	while (*end && k < n) {
		end = &(*end)->next;
		k++;
	}
	g->head = *end;
	*end = NULL;
	if (!g->head)
		g->tail = &g->head;
	g->held -= k;
	if (k)
		gate_tell(g);
	return k ? list : NULL;
}

/* Hand each bio of list back to its context; res < 0: complete it with res instead. */
static unsigned gate_send_on(struct gate_node *list, int res)
{
	unsigned n = 0;

	while (list) {
		struct gate_node *node = list;

		list = node->next;
		if (res < 0)
			node->req->bio->hooked = NULL; /* its backend is going: no hook may run */
		vs_io_req_remote_done(node->req, res);
		free(node);
		n++;
	}
	return n;
}

static unsigned gate_release(struct vs_be_gate *g, unsigned n, bool open)
{
	struct gate_node *list;

	pthread_mutex_lock(&g->lock);
	if (open)
		g->open = true;
	list = gate_take(g, n);
	pthread_mutex_unlock(&g->lock);
	n = gate_send_on(list, 0);
	VS_WARNING(BACKEND, "gate: %u bios released%s", n, open ? ", the gate is open" : "");
	return n;
}

/* gate-sock: one command line from the test. */
static void gate_command(struct vs_be_gate *g, const char *line)
{
	uint64_t n;

	if (!strcmp(line, "open"))
		gate_release(g, UINT32_MAX, true);
	else if (!strncmp(line, "release ", 8) && !vs_parse_u64(line + 8, 1, UINT32_MAX, &n))
		gate_release(g, (unsigned)n, false);
	else
		VS_WARNING(BACKEND, "gate: unknown command '%s' (release N, open)", line);
}

static void *gate_thread(void *arg)
{
	struct vs_be_gate *g = arg;
	char buf[256];
	size_t len = 0;

	for (;;) {
		struct pollfd p[2] = {{.fd = g->wake_fd, .events = POLLIN},
				      {.fd = g->sock, .events = POLLIN}};
		char *nl;
		ssize_t n;

		if (poll(p, 2, -1) < 0)
			continue; /* EINTR */
		if (p[0].revents)
			return NULL;
		n = recv(g->sock, buf + len, sizeof(buf) - 1 - len, MSG_DONTWAIT);
		if (n < 0)
			continue;
		if (n == 0) { /* the test went away: nobody is left to let them go */
			gate_release(g, UINT32_MAX, true);
			return NULL;
		}
		len += (size_t)n;
		buf[len] = 0;
		while ((nl = strchr(buf, '\n'))) {
			*nl = 0;
			gate_command(g, buf);
			len -= (size_t)(nl + 1 - buf);
			memmove(buf, nl + 1, len + 1);
		}
		if (len == sizeof(buf) - 1)
			len = 0; /* a line too long: dropped */
	}
}

int vs_be_gate_start(struct vs_be_gate *g, char *why, size_t whylen)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int rc;

	if (!g)
		return 0;
	VS_WARNING(BACKEND, "test gate: %s bios %llu..%llu are held until released",
		   g->kind == GATE_ANY ? "all" : vs_bio_op_name((enum vs_bio_op)g->kind),
		   (unsigned long long)g->first, (unsigned long long)g->last);
	if (!g->sock_path)
		return 0;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", g->sock_path);
	g->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	g->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (g->sock < 0 || g->wake_fd < 0 || connect(g->sock, (struct sockaddr *)&sa, sizeof(sa)))
		return vs_fail(why, whylen, -errno, "gate-sock=%s: %s", g->sock_path,
			       strerror(errno));
	if ((rc = pthread_create(&g->thread, NULL, gate_thread, g)))
		return vs_fail(why, whylen, -rc, "gate-sock: thread: %s", strerror(rc));
	g->thread_started = true;
	return 0;
}

bool vs_be_gate_hold(struct vs_be_gate *g, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	bool kind = g->kind == GATE_ANY || (int)bio->op == g->kind ||
		    (g->kind == VS_BIO_DISCARD && bio->op == VS_BIO_WRITE_ZEROES);
	struct gate_node *node;
	uint64_t n;

	if (!kind)
		return false;
	pthread_mutex_lock(&g->lock);
	n = ++g->seen;
	if (g->open || n < g->first || n > g->last || !(node = malloc(sizeof(*node)))) {
		pthread_mutex_unlock(&g->lock);
		return false;
	}
	/* Before anyone can let it go: we are the context's thread. */
	if (!(node->req = vs_io_ctx_hold(ctx, bio->hooked, bio))) {
		pthread_mutex_unlock(&g->lock);
		free(node);
		VS_ERROR(BACKEND, "gate: no request slot to hold a bio with: it goes on");
		return false;
	}
	node->next = NULL;
	*g->tail = node;
	g->tail = &node->next;
	g->held++;
	g->held_total++;
	gate_tell(g);
	pthread_mutex_unlock(&g->lock);
	VS_WARNING(BACKEND, "gate: %s bio %llu (off %llu len %llu) held", vs_bio_op_name(bio->op),
		   (unsigned long long)n, (unsigned long long)bio->offset,
		   (unsigned long long)bio->len);
	return true;
}

void vs_be_gate_close(struct vs_be_gate *g)
{
	uint64_t one = 1;
	unsigned n;

	if (!g)
		return;
	if (g->thread_started) {
		if (write(g->wake_fd, &one, sizeof(one)) < 0)
			VS_ERROR(BACKEND, "gate: cannot stop its thread: %s", strerror(errno));
		pthread_join(g->thread, NULL);
	}
	pthread_mutex_lock(&g->lock);
	g->open = true;
	n = gate_send_on(gate_take(g, UINT32_MAX), -ECANCELED);
	pthread_mutex_unlock(&g->lock);
	if (n)
		VS_ERROR(BACKEND, "gate: the backend closed with %u bios held: they fail", n);
	if (g->sock >= 0)
		close(g->sock);
	if (g->wake_fd >= 0)
		close(g->wake_fd);
	pthread_mutex_destroy(&g->lock);
	pthread_cond_destroy(&g->cond);
	free(g->sock_path);
	free(g);
}

/* ---- the in-process test's side (backend.h) ---------------------------------------------- */
unsigned vs_backend_gate_held(struct vs_backend *be)
{
	struct vs_be_gate *g = vs_be_hooks_gate(be);
	unsigned n;

	if (!g)
		return 0;
	pthread_mutex_lock(&g->lock);
	n = g->held;
	pthread_mutex_unlock(&g->lock);
	return n;
}

int vs_backend_gate_wait(struct vs_backend *be, unsigned n, unsigned timeout_ms)
{
	struct vs_be_gate *g = vs_be_hooks_gate(be);
	struct timespec until;
	int rc = 0;

	if (!g)
		return -ENOENT;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(timeout_ms / 1000);
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&g->lock);
	while (g->held < n && rc != ETIMEDOUT)
		rc = pthread_cond_timedwait(&g->cond, &g->lock, &until);
	rc = g->held >= n ? 0 : -ETIMEDOUT;
	pthread_mutex_unlock(&g->lock);
	return rc;
}

unsigned vs_backend_gate_release(struct vs_backend *be, unsigned n)
{
	struct vs_be_gate *g = vs_be_hooks_gate(be);

	return g ? gate_release(g, n, false) : 0;
}

unsigned vs_backend_gate_open(struct vs_backend *be)
{
	struct vs_be_gate *g = vs_be_hooks_gate(be);

	return g ? gate_release(g, UINT32_MAX, true) : 0;
}
