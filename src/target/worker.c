/* SPDX-License-Identifier: MIT */
/*
 * Worker threads.  Each owns some queues and (request workers) one I/O context.  Event
 * mode sleeps in epoll on the kick eventfds, the I/O context's eventfd and a command
 * eventfd; poll mode spins over the rings and the I/O context.  One pass: reap
 * completions, pop and dispatch what the rings hold, submit the I/O, then publish the used
 * entries and signal the driver once per queue.
 *
 * The vhost thread hands queues over with one command at a time (worker_cmd), waiting
 * for it: START gives the worker a queue, STOP takes it back once its in-flight requests
 * have completed (they write into guest memory, which may go away after the stop).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "target/target_int.h"

/* epoll tags: the command fd, the I/O context fd, then queue idx + EV_QUEUE. */
#define EV_CMD	 0ull
#define EV_IO	 1ull
#define EV_QUEUE 2ull

static void fd_drain(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing pending */
	}
}

static void fd_signal(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0) {
		/* only fails when the counter would overflow: a signal is pending anyway */
	}
}

void tq__notify(struct tq *q, const char *caller)
{
	bool n;

	q->unsignalled = false;
	vs_vq_dev_flush(&q->vq);
	n = vs_vq_dev_should_notify(&q->vq);
	VS_VERBOSE_HP(NOTIFY, "q %u used idx %u: %s (from %s)", q->idx, q->vq.used_idx,
		      n ? (q->call_fd >= 0 ? "signal" : "signal (no call fd)") : "suppressed", caller);
	if (n && q->call_fd >= 0) {
		fd_signal(q->call_fd);
		wstat_inc(&q->w->st.notifies);
	} else if (n) {
		q->missed_signal = true; /* given to the next call fd */
	}
}

void tq_kill(struct tq *q, const char *why)
{
	if (q->dead)
		return;
	q->dead = true;
	VS_ERROR(QUEUE, "queue %u stopped: %s (last avail %u, %u requests in flight)", q->idx, why,
		 q->vq.last_avail_idx, q->inflight);
	if (q->err_fd >= 0)
		fd_signal(q->err_fd); /* QEMU logs "vhost vring error" */
}

/* ---- queue handoff (worker thread side) ----------------------------------------------------- */
static void q_start(struct worker *w, struct tq *q)
{
	q->running = true;
	q->stopping = q->dead = q->throttled = q->unsignalled = q->missed_signal = false;
	q->inflight = 0;
	q->polled = w->poll || q->kick_fd < 0;
	if (q->kind != TQ_EVENT && !q->polled) {
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = EV_QUEUE + q->idx};
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, q->kick_fd, &ev) < 0) {
			VS_WARNING(QUEUE, "queue %u: cannot watch kick fd %d (%s): polling it",
				   q->idx, q->kick_fd, strerror(errno));
			q->polled = true;
		}
	}
	/* A polled ring wants no kicks; an evented one enables them in its first pass. */
	if (q->kind != TQ_EVENT && q->polled)
		vs_vq_dev_set_notification(&q->vq, false);
	q->kicked = true; /* the ring may hold requests from before the (re)start */
	w->queues[w->nq++] = q;
	VS_INFO(QUEUE, "queue %u running on %s %u (%s, size %u, avail %u, used %u)", q->idx,
		w->ctl ? "control thread" : "worker", w->id, q->polled ? "polled" : "kicks",
		q->vq.size, q->vq.last_avail_idx, q->vq.used_idx);
}

static void q_stop_begin(struct worker *w, struct tq *q)
{
	q->stopping = true;
	if (q->kind != TQ_EVENT && !q->polled)
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, q->kick_fd, NULL);
	VS_INFO(QUEUE, "queue %u stopping: %u requests in flight", q->idx, q->inflight);
}

static void q_stop_end(struct worker *w, struct tq *q)
{
	if (q->unsignalled)
		tq_notify(q);
	q->running = false;
	for (unsigned i = 0; i < w->nq; i++) {
		if (w->queues[i] == q) {
			w->queues[i] = w->queues[--w->nq];
			break;
		}
	}
	VS_INFO(QUEUE, "queue %u stopped at avail %u used %u", q->idx, q->vq.last_avail_idx,
		q->vq.used_idx);
}

static void cmd_finish(struct worker *w)
{
	pthread_mutex_lock(&w->lock);
	w->cmd = WCMD_NONE;
	w->cmd_done = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Run a pending command; false when told to exit. */
static bool cmd_run(struct worker *w)
{
	enum wcmd cmd;
	struct tq *q;
	int arg;

	if (!__atomic_load_n(&w->cmd_pending, __ATOMIC_ACQUIRE))
		return true;
	fd_drain(w->cmd_fd);
	pthread_mutex_lock(&w->lock);
	cmd = w->cmd;
	q = w->cmd_q;
	arg = w->cmd_arg;
	__atomic_store_n(&w->cmd_pending, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&w->lock);

	switch (cmd) {
	case WCMD_START:
		q_start(w, q);
		break;
	case WCMD_STOP:
		q_stop_begin(w, q);
		if (q->inflight) {
			w->stopping = q; /* finished by a later pass */
			return true;
		}
		q_stop_end(w, q);
		break;
	case WCMD_CALLFD:
		VS_INFO(NOTIFY, "queue %u call fd %d -> %d%s", q->idx, q->call_fd, arg,
			q->missed_signal && arg >= 0 ? " (signalled: one was due)" : "");
		q->call_fd = arg;
		/* QEMU sets call fds after starting rings: an interrupt due meanwhile is
		 * sent now (a spurious one is harmless, a lost one hangs the driver). */
		if (q->missed_signal && arg >= 0) {
			q->missed_signal = false;
			fd_signal(arg);
		}
		break;
	case WCMD_EXIT:
		cmd_finish(w);
		return false;
	case WCMD_NONE:
		break;
	}
	cmd_finish(w);
	return true;
}

void worker_cmd(struct worker *w, enum wcmd cmd, struct tq *q, int arg)
{
	pthread_mutex_lock(&w->lock);
	w->cmd = cmd;
	w->cmd_q = q;
	w->cmd_arg = arg;
	w->cmd_done = false;
	__atomic_store_n(&w->cmd_pending, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&w->lock);
	fd_signal(w->cmd_fd);
	pthread_mutex_lock(&w->lock);
	while (!w->cmd_done)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

/* ---- the loop ------------------------------------------------------------------------------- */
static void worker_pass(struct worker *w)
{
	if (w->io && vs_io_ctx_inflight(w->io) && (!w->poll || vs_io_ctx_pending(w->io))) {
		int rc = vs_io_ctx_reap(w->io, false);
		if (rc < 0)
			VS_ERROR(IO, "worker %u: reap failed: %s", w->id, strerror(-rc));
	}
	for (unsigned i = 0; i < w->nq; i++) {
		struct tq *q = w->queues[i];

		if (!q->kicked && !(q->polled && q->kind != TQ_EVENT))
			continue;
		q->kicked = false;
		if (q->kind == TQ_REQ)
			tq_req_process(q);
		else if (q->kind == TQ_CTRL)
			tq_ctl_process(q);
	}
	if (w->io) {
		int rc = vs_io_ctx_submit(w->io);
		if (rc < 0)
			VS_ERROR(IO, "worker %u: submit failed: %s", w->id, strerror(-rc));
	}
	for (unsigned i = 0; i < w->nq; i++)
		if (w->queues[i]->unsignalled)
			tq_notify(w->queues[i]);
	if (w->stopping && !w->stopping->inflight) {
		q_stop_end(w, w->stopping);
		w->stopping = NULL;
		cmd_finish(w);
	}
}

/* Milliseconds epoll may sleep: 0 while a ring has work left (or is polled). */
static int worker_timeout(const struct worker *w)
{
	for (unsigned i = 0; i < w->nq; i++) {
		const struct tq *q = w->queues[i];
		if (q->kind == TQ_EVENT || q->stopping)
			continue;
		if (q->kicked)
			return 0;
		if (q->polled)
			return w->ctl ? 1 : 0; /* a polled control ring need not burn a CPU */
	}
	return -1;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct epoll_event ev[32];
	char name[16];

	snprintf(name, sizeof(name), w->ctl ? "vs-ctl" : "vs-worker-%u", w->id);
	pthread_setname_np(pthread_self(), name);
	VS_INFO(INIT, "%s started (%s mode)", name, w->poll ? "poll" : "event");
	for (;;) {
		/* A polling worker still sleeps while it owns no queue. */
		if (!w->poll || !w->nq) {
			int n = epoll_wait(w->epfd, ev, 32, worker_timeout(w));

			if (n < 0 && errno != EINTR) {
				VS_CRITICAL(INIT, "%s: epoll_wait: %s", name, strerror(errno));
				n = 0;
			}
			for (int i = 0; i < n; i++) {
				uint64_t tag = ev[i].data.u64;
				if (tag >= EV_QUEUE && tag - EV_QUEUE < TQ_MAX) {
					struct tq *q = &w->t->q[tag - EV_QUEUE];
					fd_drain(q->kick_fd);
					q->kicked = true;
				}
			}
		}
		if (!cmd_run(w))
			break;
		worker_pass(w);
	}
	VS_INFO(INIT, "%s exiting", name);
	return NULL;
}

int worker_init(struct vs_target *t, struct worker *w, unsigned id, bool ctl, bool poll)
{
	struct epoll_event ev = {.events = EPOLLIN};
	int rc;

	memset(w, 0, sizeof(*w));
	w->t = t;
	w->id = id;
	w->ctl = ctl;
	w->poll = poll && !ctl;
	w->epfd = w->cmd_fd = -1;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	w->cmd_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	w->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (w->cmd_fd < 0 || w->epfd < 0) {
		rc = -errno;
		VS_ERROR(INIT, "worker %u: eventfd/epoll: %s", id, strerror(errno));
		return rc;
	}
	ev.data.u64 = EV_CMD;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->cmd_fd, &ev) < 0)
		return -errno;
	if (ctl) {
		w->scratch = malloc(sizeof(*w->scratch));
		return w->scratch ? 0 : -ENOMEM;
	}
	rc = vs_io_ctx_create(&w->io, TQ_IO_DEPTH);
	if (rc) {
		VS_ERROR(INIT, "worker %u: I/O context: %s", id, strerror(-rc));
		return rc;
	}
	/* A polling worker looks at the completion ring itself: no eventfd traffic. */
	if (w->poll && (rc = vs_io_ctx_set_polled(w->io, true)) < 0)
		VS_WARNING(INIT, "worker %u: cannot quiet the I/O eventfd (%s): it stays on", id,
			   strerror(-rc));
	ev.data.u64 = EV_IO;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, vs_io_ctx_fd(w->io), &ev) < 0)
		return -errno;
	return 0;
}

int worker_start(struct worker *w)
{
	int rc = pthread_create(&w->thread, NULL, worker_main, w);

	if (rc) {
		VS_ERROR(INIT, "worker %u: pthread_create: %s", w->id, strerror(rc));
		return -rc;
	}
	w->started = true;
	return 0;
}

void worker_fini(struct worker *w)
{
	if (w->started) {
		worker_cmd(w, WCMD_EXIT, NULL, -1);
		pthread_join(w->thread, NULL);
		w->started = false;
	}
	if (w->io)
		vs_io_ctx_destroy(w->io);
	if (w->epfd >= 0)
		close(w->epfd);
	if (w->cmd_fd >= 0)
		close(w->cmd_fd);
	free(w->scratch);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	memset(w, 0, sizeof(*w));
	w->epfd = w->cmd_fd = -1;
}
