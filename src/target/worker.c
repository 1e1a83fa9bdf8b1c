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
 *
 * The frontend's fds are eventfds made non-blocking (src/vhost checks them).  Kick fds are
 * watched edge-triggered and never read: every write to an eventfd wakes its watchers, so
 * no read is needed to see the next kick, and a read is a wait a frontend could arrange
 * (the same blocking eventfd as the kick of two queues: the first read empties it, the
 * second blocks).  A call or err fd that refuses a write (a full counter: the frontend
 * never reads it) ends the session.  A frontend may also make such an fd blocking again
 * (the flag lives in the open file it shares with us) and fill it: then the write blocks,
 * and worker_cmd() interrupts the worker with a signal after a second without an answer;
 * the write fails with EINTR and that ends the session too.  A worker that still does not
 * answer within the worker timeout is lost: the target fails cleanly (target.c).
 */
#define _GNU_SOURCE /* pthread_setname_np */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "target/target_int.h"

/* epoll tags: the command fd, the I/O context fd, the control thread's event-post fd, the
 * QoS timer and wake fds; any other tag is the struct tq of a kick fd (a heap address, far
 * above these: queues of several controllers share a worker). */
#define EV_CMD	 0ull
#define EV_IO	 1ull
#define EV_POST	 2ull
#define EV_TIMER 3ull /* a parked request may go (request workers) */
#define EV_WAKE	 4ull /* look at the parked requests (worker_park_check) */
#define EV_QUEUE 4096ull

#define INTERRUPT_MS 1000 /* a command unanswered this long: interrupt the worker */

/* Our own eventfds (non-blocking): a failed write means a signal is pending anyway. */
static void own_signal(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0) {
		/* full counter: pending anyway */
	}
}

static void own_drain(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing pending */
	}
}

/* Signal one of the frontend's eventfds: 0 or -errno. */
static inline int fe_signal(int fd)
{
	uint64_t one = 1;

	return write(fd, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
}

/* A call or err fd refused a write: it is not written again, and the session ends. */
static __attribute__((noinline, cold)) void fe_signal_failed(struct tq *q, int *fd,
							     const char *name, int rc)
{
	tq_fail(
	    q->c, "queue %u: writing its %s fd failed: %s", q->idx, name,
	    rc == -EAGAIN ? "the eventfd's counter is full (the frontend never reads it)"
	    : rc == -EINTR
		? "the write blocked (the frontend made the eventfd blocking and never reads it)"
		: strerror(-rc));
	*fd = -1; /* the vhost layer closes it */
}

void tq__notify(struct tq *q, const char *caller)
{
	bool n;
	int rc;

	q->unsignalled = false;
	vs_vq_dev_flush(&q->vq);
	n = vs_vq_dev_should_notify(&q->vq);
	VS_VERBOSE_HP_OOL(NOTIFY, "q %u used idx %u: %s (from %s)", q->idx, q->vq.used_idx,
			  n ? (q->call_fd >= 0 ? "signal" : "signal (no call fd)") : "suppressed",
			  caller);
	if (n && q->call_fd >= 0) {
		if (__builtin_expect((rc = fe_signal(q->call_fd)) != 0, 0))
			fe_signal_failed(q, &q->call_fd, "call", rc);
		else {
			tq_count_notify(q);
		}
	} else if (n) {
		q->missed_signal = true; /* given to the next call fd */
	}
}

void tq_kill(struct tq *q, const char *why)
{
	int rc;

	if (q->dead)
		return;
	q->dead = true;
	VS_ERROR(QUEUE, "queue %u stopped: %s (last avail %u, %u requests in flight)", q->idx, why,
		 q->vq.last_avail_idx, q->inflight);
	/* QEMU logs "vhost vring error" */
	if (q->err_fd >= 0 && (rc = fe_signal(q->err_fd)))
		fe_signal_failed(q, &q->err_fd, "err", rc);
}

/* The kick eventfd reports an error: its counter overflowed (only the kernel's own
 * signalling can get it there, after a frontend wrote it nearly full). */
static __attribute__((noinline, cold)) void kick_failed(struct worker *w, struct tq *q)
{
	epoll_ctl(w->epfd, EPOLL_CTL_DEL, q->kick_fd, NULL);
	tq_fail(q->c, "queue %u: its kick eventfd reports an error (counter overflow)", q->idx);
}

/* ---- queue handoff (worker thread side) ----------------------------------------------------- */
static int q_start(struct worker *w, struct tq *q)
{
	q->stopping = q->dead = q->throttled = q->unsignalled = q->missed_signal = false;
	tq_inflight_set(q, 0);
	q->polled = w->poll || q->kick_fd < 0;
	if (!q->polled) {
		/* Edge-triggered, never read: see the top of the file. */
		struct epoll_event ev = {.events = EPOLLIN | EPOLLET,
					 .data.u64 = (uint64_t)(uintptr_t)q};
		if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, q->kick_fd, &ev) < 0) {
			int rc = -errno;
			VS_ERROR(QUEUE, "queue %u: cannot watch kick fd %d: %s", q->idx, q->kick_fd,
				 strerror(errno));
			return rc;
		}
	}
	q->running = true;
	/* A polled ring never wants kicks, and an arm-on-sleep worker's rings want them only
	 * while it sleeps; any other evented ring enables them in its first pass. */
	if (q->kind != TQ_EVENT && (q->polled || w->arm_on_sleep))
		vs_vq_dev_set_notification(&q->vq, false);
	q->kicked = true; /* the ring may hold requests from before the (re)start */
	w->queues[w->nq++] = q;
	VS_INFO(QUEUE, "queue %u running on %s %u (%s, size %u, avail %u, used %u)", q->idx,
		w->ctl ? "control thread" : "worker", w->id, q->polled ? "polled" : "kicks",
		q->vq.size, q->vq.last_avail_idx, q->vq.used_idx);
	return 0;
}

static void q_stop_begin(struct worker *w, struct tq *q)
{
	q->stopping = true;
	if (!q->polled)
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

static void cmd_finish(struct worker *w, int rc)
{
	pthread_mutex_lock(&w->lock);
	w->cmd = WCMD_NONE;
	w->cmd_rc = rc;
	w->cmd_done = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* Run a pending command; false when told to exit. */
static bool cmd_run(struct worker *w)
{
	enum wcmd cmd;
	struct tq *q;
	int arg, rc = 0;

	if (!__atomic_load_n(&w->cmd_pending, __ATOMIC_ACQUIRE))
		return true;
	own_drain(w->cmd_fd);
	pthread_mutex_lock(&w->lock);
	cmd = w->cmd;
	q = w->cmd_q;
	arg = w->cmd_arg;
	__atomic_store_n(&w->cmd_pending, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&w->lock);

	switch (cmd) {
	case WCMD_START:
		rc = q_start(w, q);
		break;
	case WCMD_STOP:
		q_stop_begin(w, q);
		/* Parked requests run now, whatever their limits: the frontend takes the ring
		 * back once its requests are done, and one never run would be lost. */
		if (q->park_head)
			tq_park_release(q, vs_mono_ns(), true);
		if (q->inflight) {
			w->stopping = q; /* finished by a later pass */
			return true;
		}
		q_stop_end(w, q);
		break;
	case WCMD_CALLFD:
		VS_INFO(NOTIFY, "queue %u call fd %d -> %d%s", q->idx, q->call_fd, arg,
			arg >= 0 ? " (signalled once)" : "");
		q->call_fd = arg;
		/* QEMU sets call fds after starting rings (after a reconnect too): an
		 * interrupt due meanwhile, or one sent on the old fd just before the swap, is
		 * sent again on the new one (a spurious one costs the driver a look at its used
		 * ring, a lost one hangs it; libvhost-user does the same). */
		if (arg >= 0) {
			q->missed_signal = false;
			if ((rc = fe_signal(arg)))
				fe_signal_failed(q, &q->call_fd, "call", rc);
			rc = 0;
		}
		break;
	case WCMD_EXIT:
		cmd_finish(w, 0);
		return false;
	case WCMD_NONE:
		break;
	}
	cmd_finish(w, rc);
	return true;
}

/* ---- commands (vhost thread side) ---------------------------------------------------------- */
static void on_interrupt(int sig)
{
	(void)sig; /* only there to make a blocking system call fail with EINTR */
}

static pthread_once_t interrupt_once = PTHREAD_ONCE_INIT;
static int interrupt_sig; /* 0: workers cannot be interrupted */

/* A real-time signal nobody else handles; without SA_RESTART, so a blocked call fails. */
static void interrupt_install(void)
{
	int sig = SIGRTMIN + 5;
	struct sigaction sa = {.sa_handler = on_interrupt}, old;

	sigemptyset(&sa.sa_mask);
	if (sig > SIGRTMAX || sigaction(sig, NULL, &old) < 0 || old.sa_handler != SIG_DFL ||
	    (old.sa_flags & SA_SIGINFO) || sigaction(sig, &sa, NULL) < 0) {
		VS_WARNING(INIT, "no free signal to interrupt a blocked worker with: a worker "
				 "blocked on a frontend's fd is only given up on");
		return;
	}
	interrupt_sig = sig;
}

/* Manual mode: run the command here, then passes until it is done (a STOP waits for its
 * in-flight requests, which complete within a few passes on RAM). */
static int manual_cmd(struct worker *w)
{
	if (!cmd_run(w))
		return 0; /* EXIT */
	for (unsigned i = 0; i < 1000 && !w->cmd_done; i++)
		worker_pass(w);
	return w->cmd_done ? w->cmd_rc : -ETIMEDOUT;
}

static __attribute__((noinline, cold)) void worker_lost(struct worker *w, enum wcmd cmd,
							const struct tq *q)
{
	static const char *const names[] = {"none", "start", "stop", "call fd", "exit"};
	char what[32] = "";

	if (q)
		snprintf(what, sizeof(what), " of queue %u", q->idx);
	w->lost = true;
	__atomic_store_n(&w->t->lost, true, __ATOMIC_RELEASE);
	tgt_log(w->t,
		"%s %u did not finish '%s'%s within %u ms (even when interrupted): it is given "
		"up on, and so is the target",
		w->ctl ? "the control thread" : "worker", w->id, names[cmd], what,
		w->t->worker_timeout_ms);
}

static int cmd_one(struct worker *w, enum wcmd cmd, struct tq *q, int arg)
{
	uint64_t start = vs_mono_ns(), limit = (uint64_t)w->t->worker_timeout_ms * 1000000;
	bool done;
	int rc;

	if (w->lost)
		return -ETIMEDOUT;
	pthread_mutex_lock(&w->lock);
	w->cmd = cmd;
	w->cmd_q = q;
	w->cmd_arg = arg;
	w->cmd_rc = 0;
	w->cmd_done = false;
	__atomic_store_n(&w->cmd_pending, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&w->lock);
	if (w->t->manual)
		return manual_cmd(w);
	own_signal(w->cmd_fd);
	pthread_mutex_lock(&w->lock);
	while (!w->cmd_done) {
		uint64_t waited = vs_mono_ns() - start, ns;
		struct timespec until;

		if (waited >= limit)
			break;
		ns = limit - waited < INTERRUPT_MS * 1000000ull ? limit - waited
								: INTERRUPT_MS * 1000000ull;
		clock_gettime(CLOCK_MONOTONIC, &until);
		ns += (uint64_t)until.tv_nsec;
		until.tv_sec += (time_t)(ns / 1000000000);
		until.tv_nsec = (long)(ns % 1000000000);
		if (pthread_cond_timedwait(&w->cond, &w->lock, &until) == ETIMEDOUT &&
		    !w->cmd_done && interrupt_sig) {
			/* Blocked on a frontend's fd?  Harmless if it is only busy. */
			VS_WARNING(INIT, "%s %u: no answer yet, interrupting it",
				   w->ctl ? "control thread" : "worker", w->id);
			pthread_kill(w->thread, interrupt_sig);
		}
	}
	done = w->cmd_done;
	rc = w->cmd_rc;
	pthread_mutex_unlock(&w->lock);
	if (done)
		return rc;
	worker_lost(w, cmd, q);
	return -ETIMEDOUT;
}

/* The controllers' vhost threads share the request workers: one command at a time each. */
int worker_cmd(struct worker *w, enum wcmd cmd, struct tq *q, int arg)
{
	int rc;

	pthread_mutex_lock(&w->cmd_serial);
	rc = cmd_one(w, cmd, q, arg);
	pthread_mutex_unlock(&w->cmd_serial);
	return rc;
}

/* Manual mode: passes of every thread until no TMF waits (the control thread's TMF waits
 * for requests the request workers complete). */
void worker_manual_settle(struct vs_controller *c)
{
	struct vs_target *t = c->t;

	for (unsigned i = 0; i < 1000 && __atomic_load_n(&c->tmf_pending, __ATOMIC_ACQUIRE); i++)
		for (unsigned k = 0; k < t->nworkers; k++)
			worker_pass(&t->workers[k]);
}

/* ---- the loop ------------------------------------------------------------------------------- */
/* Whether this pass looks at q: kicked, or polled (a polled event ring only while events
 * wait for its buffers: it has nothing to take from the driver otherwise). */
static inline bool q_due(struct tq *q)
{
	if (q->kicked)
		return true;
	if (!q->polled)
		return false;
	return q->kind != TQ_EVENT || tq_events_waiting(q->c);
}

void worker_park_check(struct vs_target *t)
{
	for (unsigned i = 0; i < t->nworkers; i++) {
		struct worker *w = &t->workers[i];

		__atomic_store_n(&w->park_check, 1, __ATOMIC_RELEASE);
		if (w->wake_fd >= 0 && !t->manual)
			own_signal(w->wake_fd);
	}
}

/* Release the parked requests whose time has come (or that a TMF marked): the clock is
 * read only while some are parked. */
static void park_pass(struct worker *w)
{
	bool check = __atomic_load_n(&w->park_check, __ATOMIC_RELAXED) &&
		     __atomic_exchange_n(&w->park_check, 0, __ATOMIC_ACQ_REL);
	uint64_t now = 0;

	for (unsigned i = 0; i < w->nq; i++) {
		struct tq *q = w->queues[i];

		if (!q->park_head)
			continue;
		if (!now)
			now = vs_mono_ns();
		if (check || now >= q->park_until)
			tq_park_release(q, now, false);
	}
}

/* Event mode: have the timer wake the worker when the first parked request may go, so that
 * a queue waiting for its limit costs no CPU (poll mode: park_pass compares the clock). */
static void park_arm(struct worker *w)
{
	struct itimerspec its = {{0, 0}, {0, 0}};
	uint64_t next = 0;

	if (w->timer_fd < 0 || w->poll)
		return;
	for (unsigned i = 0; i < w->nq; i++) {
		const struct tq *q = w->queues[i];

		if (q->park_head && q->park_until && (!next || q->park_until < next))
			next = q->park_until;
	}
	if (next == w->timer_at)
		return;
	its.it_value.tv_sec = (time_t)(next / 1000000000);
	its.it_value.tv_nsec = (long)(next % 1000000000);
	if (timerfd_settime(w->timer_fd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
		VS_ERROR(QUEUE, "worker %u: timerfd_settime: %s", w->id, strerror(errno));
		return;
	}
	w->timer_at = next;
}

void worker_pass(struct worker *w)
{
	if (VS_STATS)
		w->ts_pass = 0; /* ts_pass_now: read again at this pass's first use */
	if (w->io && vs_io_ctx_pending(w->io)) {
		int rc = vs_io_ctx_reap(w->io, false);
		if (__builtin_expect(rc < 0, 0))
			VS_ERROR(IO, "worker %u: reap failed: %s", w->id, strerror(-rc));
	}
	if (w->io)
		park_pass(w);
	for (unsigned i = 0; i < w->nq; i++) {
		struct tq *q = w->queues[i];

		if (!q_due(q))
			continue;
		q->kicked = false;
		if (q->kind == TQ_REQ)
			tq_req_process(q);
		else if (q->kind == TQ_CTRL)
			tq_ctl_process(q);
		else
			tq_event_process(q);
	}
	if (w->io) {
		int rc = vs_io_ctx_submit(w->io);
		if (__builtin_expect(rc < 0, 0))
			VS_ERROR(IO, "worker %u: submit failed: %s", w->id, strerror(-rc));
		park_arm(w);
	}
	for (unsigned i = 0; i < w->nq; i++)
		if (w->queues[i]->unsignalled)
			tq_notify(w->queues[i]);
	if (w->stopping && !w->stopping->inflight) {
		q_stop_end(w, w->stopping);
		w->stopping = NULL;
		cmd_finish(w, 0);
	}
}

/* Milliseconds epoll may sleep: 0 while a ring has work left (or is polled). */
static int worker_timeout(const struct worker *w)
{
	for (unsigned i = 0; i < w->nq; i++) {
		const struct tq *q = w->queues[i];
		if (q->stopping)
			continue;
		if (q->kicked)
			return 0; /* its budget ran out: more in this ring */
		if (q->kind == TQ_EVENT) {
			if (q->polled && tq_events_waiting(w->c))
				return 1; /* no kicks to tell of buffers: look every millisecond */
			continue;
		}
		if (q->polled)
			return w->ctl ? 1 : 0; /* a polled control ring need not burn a CPU */
	}
	return -1;
}

/* Sleep in epoll (timeout as epoll_wait's) and mark the rings whose kick fds fired. */
static void worker_wait(struct worker *w, int timeout)
{
	struct epoll_event ev[32];
	int n = epoll_wait(w->epfd, ev, 32, timeout);

	if (n < 0 && errno != EINTR) {
		VS_CRITICAL(INIT, "worker %u: epoll_wait: %s", w->id, strerror(errno));
		n = 0;
	}
	for (int i = 0; i < n; i++) {
		uint64_t tag = ev[i].data.u64;
		if (tag == EV_TIMER || tag == EV_WAKE) {
			/* park_pass looks at the clock and the flag: only quiet the fd */
			own_drain(tag == EV_TIMER ? w->timer_fd : w->wake_fd);
		} else if (tag == EV_POST) {
			own_drain(w->c->ev_fd); /* an event was posted: deliver it */
			w->c->q[VS_VIRTIO_SCSI_VQ_EVENT].kicked = true;
		} else if (tag >= EV_QUEUE) {
			struct tq *q = (struct tq *)(uintptr_t)tag;
			if (__builtin_expect(ev[i].events & (EPOLLERR | EPOLLHUP), 0))
				kick_failed(w, q);
			q->kicked = true;
		}
	}
}

/* ---- idle: poll adaptively, then arm the kicks and sleep (arm-on-sleep workers) ---------- */
/* A ring whose kicks this worker arms when it sleeps, and which it looks at while polling.
 * Not a throttled one: what waits in it cannot be popped before a completion (which marks
 * it kicked), and looking at it would find work again and again: a spin. */
static inline bool q_armed_by_sleep(const struct tq *q)
{
	return q->running && !q->stopping && !q->dead && !q->throttled && !q->polled &&
	       q->kind == TQ_REQ;
}

/* Work for a pass without waiting for any: a ring to look at, completions, a command. */
static inline bool worker_has_work(const struct worker *w)
{
	for (unsigned i = 0; i < w->nq; i++)
		if (w->queues[i]->kicked || (w->queues[i]->polled && !w->queues[i]->stopping))
			return true;
	return vs_io_ctx_pending(w->io) || __atomic_load_n(&w->cmd_pending, __ATOMIC_RELAXED);
}

/* Look at the rings themselves (their kicks are off): mark those with requests waiting,
 * or broken under us (the pass kills them); true when there is any work. */
static inline bool worker_look(struct worker *w)
{
	bool found = false;

	for (unsigned i = 0; i < w->nq; i++) {
		struct tq *q = w->queues[i];

		if (q_armed_by_sleep(q) && (vs_vq_dev_has_work(&q->vq) || q->vq.broken)) {
			q->kicked = true;
			found = true;
		}
	}
	return found || vs_io_ctx_pending(w->io) ||
	       __atomic_load_n(&w->cmd_pending, __ATOMIC_RELAXED);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Look again and again for up to the adaptive window; true when work turned up.  Out of
 * line so that callgrind shows (and bench/callgrind-per-io.sh leaves out) the time spent
 * waiting here, which is no work done for any request. */
static __attribute__((noinline)) bool worker_poll_idle(struct worker *w, uint64_t start)
{
	uint64_t window = ap_window(&w->ap, start), last = start;

	if (!window)
		return false;
	for (;;) {
		uint64_t now;

		if (worker_look(w)) {
			wstat_inc(&w->st.polled_idle);
			return true;
		}
		now = vs_mono_ns();
		if (now - last >= AP_PREEMPT_NS) {
			ap_preempted(&w->ap, now);
			wstat_inc(&w->st.preempted);
			return false;
		}
		if (now - start >= window)
			return false;
		last = now;
		cpu_relax();
	}
}

/* Arm every ring's kicks, look once more (a request made available before the driver saw
 * the arming sent no kick), sleep until a kick, a completion or a command; then disarm:
 * while the worker is awake it looks at its rings itself, and the driver need not kick. */
static void worker_sleep(struct worker *w)
{
	for (unsigned i = 0; i < w->nq; i++)
		if (q_armed_by_sleep(w->queues[i]))
			vs_vq_dev_set_notification(&w->queues[i]->vq, true); /* full barrier */
	if (!worker_look(w)) {
		wstat_inc(&w->st.sleeps);
		worker_wait(w, worker_timeout(w));
	}
	for (unsigned i = 0; i < w->nq; i++)
		if (q_armed_by_sleep(w->queues[i]))
			vs_vq_dev_set_notification(&w->queues[i]->vq, false);
}

/* Nothing left from the last pass: poll for the adaptive window, then sleep. */
static void worker_idle(struct worker *w)
{
	uint64_t start;

	if (worker_has_work(w))
		return;
	start = vs_mono_ns();
	if (!worker_poll_idle(w, start))
		worker_sleep(w);
	ap_idle_ended(&w->ap, start, vs_mono_ns());
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	char name[16];

	snprintf(name, sizeof(name), w->ctl ? "vs-ctl" : "vs-worker-%u", w->id);
	pthread_setname_np(pthread_self(), name);
	VS_INFO(INIT, "%s started (%s mode%s)", name, w->poll ? "poll" : "event",
		w->arm_on_sleep && w->ap.max_ns ? ", adaptive polling" : "");
	for (;;) {
		/* A polling worker still sleeps while it owns no queue. */
		if (w->poll && w->nq)
			;
		else if (w->arm_on_sleep)
			worker_idle(w);
		else
			worker_wait(w, worker_timeout(w));
		if (!cmd_run(w))
			break;
		worker_pass(w);
	}
	VS_INFO(INIT, "%s exiting", name);
	return NULL;
}

int worker_init(struct vs_target *t, struct vs_controller *c, struct worker *w, unsigned id,
		bool ctl, bool poll, uint64_t adaptive_poll_ns)
{
	struct epoll_event ev = {.events = EPOLLIN};
	pthread_condattr_t ca;
	int rc;

	memset(w, 0, sizeof(*w));
	w->t = t;
	w->c = c;
	w->id = id;
	w->ctl = ctl;
	w->poll = poll && !ctl;
	w->epfd = w->cmd_fd = w->timer_fd = w->wake_fd = -1;
	pthread_mutex_init(&w->cmd_serial, NULL);
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
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
		ev.data.u64 = EV_POST;
		if (c->ev_fd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->ev_fd, &ev) < 0)
			return c->ev_fd < 0 ? -EMFILE : -errno;
		w->scratch = malloc(sizeof(*w->scratch));
		return w->scratch ? 0 : -ENOMEM;
	}
	w->timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->timer_fd < 0 || w->wake_fd < 0)
		return -errno;
	ev.data.u64 = EV_TIMER;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->timer_fd, &ev) < 0)
		return -errno;
	ev.data.u64 = EV_WAKE;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->wake_fd, &ev) < 0)
		return -errno;
	rc = vs_io_ctx_create(&w->io, t->manual ? TQ_IO_DEPTH_MANUAL : TQ_IO_DEPTH);
	if (rc) {
		VS_ERROR(INIT, "worker %u: I/O context: %s", id, strerror(-rc));
		return rc;
	}
	/* A polling worker looks at the completion ring itself: no eventfd traffic.  An
	 * event-mode one sees the kernel's completions on the fd, edge-triggered like the
	 * kicks, and looks for the others before it sleeps (manual mode: no sleeping). */
	if (w->poll && (rc = vs_io_ctx_set_wait(w->io, VS_IO_WAIT_POLL)) < 0)
		VS_WARNING(INIT, "worker %u: cannot quiet the I/O eventfd (%s): it stays on", id,
			   strerror(-rc));
	if (!w->poll && !t->manual && !vs_io_ctx_set_wait(w->io, VS_IO_WAIT_EDGE)) {
		w->arm_on_sleep = true;
		ap_init(&w->ap, adaptive_poll_ns);
		ev.events |= EPOLLET;
	}
	ev.data.u64 = EV_IO;
	if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, vs_io_ctx_fd(w->io), &ev) < 0)
		return -errno;
	return 0;
}

int worker_start(struct worker *w)
{
	int rc;

	pthread_once(&interrupt_once, interrupt_install);
	rc = pthread_create(&w->thread, NULL, worker_main, w);

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
		if (worker_cmd(w, WCMD_EXIT, NULL, -1))
			return; /* lost: it may still run, so it keeps everything it has */
		pthread_join(w->thread, NULL);
		w->started = false;
	}
	if (w->io)
		vs_io_ctx_destroy(w->io);
	if (w->epfd >= 0)
		close(w->epfd);
	if (w->cmd_fd >= 0)
		close(w->cmd_fd);
	if (w->timer_fd >= 0)
		close(w->timer_fd);
	if (w->wake_fd >= 0)
		close(w->wake_fd);
	free(w->scratch);
	pthread_mutex_destroy(&w->cmd_serial);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	memset(w, 0, sizeof(*w));
	w->epfd = w->cmd_fd = w->timer_fd = w->wake_fd = -1;
}
