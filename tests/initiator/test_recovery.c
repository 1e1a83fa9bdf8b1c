/* SPDX-License-Identifier: MIT */
/*
 * The initiator when things go wrong, against a real `vioscope target` process: LUN reset
 * under load, abort, the target killed and restarted, and interrupt-mode completions.
 * One scenario per test; `test_initiator_recovery NAME` runs one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gate.h"
#include "harness.h"
#include "thread_wait.h"

#define LOAD_DEPTH 48

/* A load generator: LOAD_DEPTH writes kept in flight on one queue, resubmitted from their
 * callbacks until told to stop.  Every submission gets a sequence number. */
struct load;
struct lreq {
	struct vs_ini_io io;
	struct iovec iov;
	struct load *l;
	uint64_t seq; /* of the current submission */
	bool busy;    /* submitted and not completed */
};

struct load {
	struct vs_ini_queue *q;
	pthread_mutex_t lock;
	pthread_t thread;
	struct lreq r[LOAD_DEPTH];
	uint64_t seq, completed, ok, reset, notconn, other, submit_notconn;
	bool stop;   /* atomic */
	bool pause;  /* atomic: the thread stops polling ... */
	bool paused; /* atomic: ... and says so (it is outside vs_ini_poll) */
	uint64_t lba0;
	char failure[256]; /* what went wrong on a thread other than the test's (lock held) */
};

/* A failure seen on the load thread or in a callback: kept for the test thread to report. */
static void load_fail(struct load *l, const char *what, long a, long b)
{
	if (!l->failure[0])
		snprintf(l->failure, sizeof(l->failure), "%s (%ld, %ld)", what, a, b);
}

/* The test thread's view of failures seen elsewhere. */
static void load_assert_ok(struct load *l)
{
	pthread_mutex_lock(&l->lock);
	if (l->failure[0]) {
		print_error("load: %s\n", l->failure);
		pthread_mutex_unlock(&l->lock);
		fail();
	}
	pthread_mutex_unlock(&l->lock);
}

/* Wait (deadline 20 s) until *field reaches at least n. */
static uint64_t load_get(struct load *l, const uint64_t *field);
static void load_wait_for(struct load *l, const uint64_t *field, uint64_t n)
{
	uint64_t end = now_ms() + 20000;

	while (load_get(l, field) < n) {
		assert_true(now_ms() < end);
		usleep(100);
	}
}

/* A counter of l, read under its lock. */
static uint64_t load_get(struct load *l, const uint64_t *field)
{
	uint64_t v;

	pthread_mutex_lock(&l->lock);
	v = *field;
	pthread_mutex_unlock(&l->lock);
	return v;
}

static bool load_stopped(struct load *l)
{
	return __atomic_load_n(&l->stop, __ATOMIC_ACQUIRE);
}

static void load_submit(struct lreq *r); /* lock held */

static void load_done(struct vs_ini_io *io)
{
	struct lreq *r = io->opaque;
	struct load *l = r->l;

	pthread_mutex_lock(&l->lock);
	if (!r->busy)
		load_fail(l, "a request completed that was not in flight", (long)(r - l->r), 0);
	r->busy = false;
	l->completed++;
	if (io->result == 0)
		l->ok++;
	else if (io->result == -ECONNRESET)
		l->reset++;
	else if (io->result == -ENOTCONN)
		l->notconn++;
	else
		l->other++;
	if (!load_stopped(l) && io->result != -ENOTCONN)
		load_submit(r);
	pthread_mutex_unlock(&l->lock);
}

static void load_submit(struct lreq *r)
{
	struct load *l = r->l;
	int rc;

	memset(&r->io, 0, sizeof(r->io));
	r->io.op = VS_INI_WRITE;
	r->io.lba = l->lba0 + (uint64_t)(r - l->r) * 8;
	r->io.nblocks = 8;
	r->io.iov = &r->iov;
	r->io.iovcnt = 1;
	r->io.done = load_done;
	r->io.opaque = r;
	r->seq = ++l->seq;
	r->busy = true;
	rc = vs_ini_submit(l->q, &r->io);
	if (rc) {
		r->busy = false;
		if (rc == -ENOTCONN)
			l->submit_notconn++;
		else if (rc != -EBUSY)
			load_fail(l, "submit failed", rc, (long)(r - l->r));
	}
}

static void *load_main(void *arg)
{
	struct load *l = arg;

	while (!load_stopped(l)) {
		if (__atomic_load_n(&l->pause, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&l->paused, true, __ATOMIC_RELEASE);
			usleep(100);
			continue;
		}
		__atomic_store_n(&l->paused, false, __ATOMIC_RELEASE);
		if (!vs_ini_poll(l->q, 64))
			usleep(20);
		/* Requests refused while the target was away are tried again. */
		pthread_mutex_lock(&l->lock);
		for (unsigned i = 0; i < LOAD_DEPTH && !load_stopped(l); i++)
			if (!l->r[i].busy)
				load_submit(&l->r[i]);
		pthread_mutex_unlock(&l->lock);
	}
	return NULL;
}

static void load_start(struct load *l, struct vs_ini *ini, struct vs_ini_queue *q, uint64_t lba0)
{
	uint8_t *buf = vs_ini_alloc(ini, LOAD_DEPTH * 4096, 4096);

	assert_non_null(buf);
	memset(l, 0, sizeof(*l));
	l->q = q;
	l->lba0 = lba0;
	pthread_mutex_init(&l->lock, NULL);
	pthread_mutex_lock(&l->lock);
	for (unsigned i = 0; i < LOAD_DEPTH; i++) {
		l->r[i].l = l;
		l->r[i].iov = (struct iovec){buf + i * 4096, 4096};
		memset(buf + i * 4096, (int)i, 4096);
		load_submit(&l->r[i]);
	}
	pthread_mutex_unlock(&l->lock);
	assert_int_equal(pthread_create(&l->thread, NULL, load_main, l), 0);
}

/* Stop resubmitting, then reap until nothing of ours is in flight. */
static void load_stop(struct load *l)
{
	uint64_t end = now_ms() + 20000;
	bool busy;

	__atomic_store_n(&l->stop, true, __ATOMIC_RELEASE);
	pthread_join(l->thread, NULL);
	do {
		vs_ini_poll(l->q, 64);
		pthread_mutex_lock(&l->lock);
		busy = false;
		for (unsigned i = 0; i < LOAD_DEPTH; i++)
			busy |= l->r[i].busy;
		pthread_mutex_unlock(&l->lock);
		assert_true(now_ms() < end);
	} while (busy);
}

/* The load thread stops polling (deadline 20 s): from now on completions run where the test
 * thread polls (a LUN reset polls every queue itself). */
static void load_pause(struct load *l)
{
	uint64_t end = now_ms() + 20000;

	__atomic_store_n(&l->pause, true, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&l->paused, __ATOMIC_ACQUIRE)) {
		assert_true(now_ms() < end);
		usleep(100);
	}
}

/* The gate socket's end: every held bio goes, and no more are held.  A failure to say so
 * shows as requests that never complete (the test's deadlines). */
static void gate_open_all(void *arg)
{
	line_send(*(int *)arg, "open\n");
}

/* Start t, whose LUN spec names the test gate's socket (gate-sock=%G), and take the gate's
 * connection: its fd. */
static int start_gated(struct tgt *t)
{
	int lfd = gate_listen(t->tg.gate), fd;

	assert_true(lfd >= 0);
	t->o.args[0] = "--testing";
	assert_int_equal(tgt_start(t), 0);
	fd = gate_accept(lfd, 20000);
	close(lfd);
	assert_true(fd >= 0);
	return fd;
}

/* LUN reset while 48 writes are in flight, held by the test gate until the reset waits for
 * them (after 200 writes that went through): when the reset returns, every request
 * submitted before it has completed, each of the 48 with -ECONNRESET, and I/O goes on
 * afterwards.  (The writes were held 20 ms by a delay before: under load they had all
 * completed before the reset came, 1 run in 3.) */
static void test_lun_reset_under_load(void **state)
{
	struct tgt t;
	struct vs_ini *ini;
	struct vs_ini_opts o;
	static struct load l;
	struct when_waiting ctl = {.comm = "vs-ctl", .act = gate_open_all};
	uint64_t snap;
	uint8_t *b;
	int gate;

	(void)state;
	tgt_init(&t);
	t.o.luns[0] = "0:ram=64M,gate=write:201-,gate-sock=%G";
	t.o.queues = 2;
	gate = start_gated(&t);
	o = ini_opts(&t, 2);
	assert_int_equal(vs_ini_open(&ini, &o), 0);
	b = vs_ini_alloc(ini, 4096, 4096);
	load_start(&l, ini, vs_ini_get_queue(ini, 0), 0);
	load_wait_for(&l, &l.completed, 200);
	assert_int_equal(gate_wait_held(gate, LOAD_DEPTH, 20000), 0);
	/* Completions now run on this thread only: when the reset returns, its callbacks have. */
	load_pause(&l);
	pthread_mutex_lock(&l.lock);
	snap = l.seq;
	pthread_mutex_unlock(&l.lock);
	assert_int_equal(l.completed, 200); /* the rest are held */
	/* The held writes go once the target's control thread waits for them: the reset has
	 * marked them and waits for their completions. */
	ctl.pid = t.tg.pid;
	ctl.arg = &gate;
	assert_int_equal(when_waiting_start(&ctl), 0);
	assert_int_equal(vs_ini_lun_reset(ini, 0), 0);
	assert_true(when_waiting_join(&ctl)); /* the reset waited for the held writes */
	pthread_mutex_lock(&l.lock);
	for (unsigned i = 0; i < LOAD_DEPTH; i++)
		assert_false(l.r[i].busy && l.r[i].seq <= snap);
	pthread_mutex_unlock(&l.lock);
	load_stop(&l);
	load_assert_ok(&l);
	assert_int_equal(l.other, 0);
	assert_int_equal(l.notconn, 0);
	assert_int_equal(l.completed, l.ok + l.reset);
	assert_int_equal(l.reset, LOAD_DEPTH); /* every write in flight, and the reset got them */
	print_message("  %llu completions, %llu reset by the TMF\n",
		      (unsigned long long)l.completed, (unsigned long long)l.reset);
	/* The unit attention the reset left is absorbed by a retry. */
	pattern_fill(b, 4096, 3, 0);
	assert_int_equal(io_sync(vs_ini_get_queue(ini, 1), VS_INI_WRITE, 0, 4096, 8, b, 4096, 1),
			 0);
	memset(b, 0, 4096);
	assert_int_equal(io_sync(vs_ini_get_queue(ini, 0), VS_INI_READ, 0, 4096, 8, b, 4096, 1), 0);
	assert_true(pattern_check(b, 4096, 3, 0));
	vs_ini_close(ini);
	close(gate);
	tgt_fini(&t);
}

/* After a LUN reset the target reports UNIT ATTENTION once: a pass-through command sees
 * it (29h), a block read absorbs it with a retry and succeeds. */
static void test_unit_attention_retry(void **state)
{
	struct tgt t;
	struct vs_ini *ini;
	struct vs_ini_opts o;
	struct vs_ini_queue *q;
	static struct waiter w;
	uint8_t tur[6] = {0}, *b;

	(void)state;
	tgt_init(&t);
	t.o.luns[0] = "0:ram=16M";
	assert_int_equal(tgt_start(&t), 0);
	o = ini_opts(&t, 1);
	assert_int_equal(vs_ini_open(&ini, &o), 0);
	q = vs_ini_get_queue(ini, 0);
	b = vs_ini_alloc(ini, 4096, 4096);
	assert_int_equal(vs_ini_lun_reset(ini, 0), 0);
	waiter_prep(&w, VS_INI_READ, 0, 0, 0, b, 0, 0);
	assert_int_equal(vs_ini_submit_cdb(q, &w.io, 0, 0, tur, 6, false), 0);
	waiter_wait(q, &w);
	assert_int_equal(w.io.result, -EIO);
	assert_int_equal(w.io.sense[2] & 0xf, 6);
	assert_int_equal(w.io.sense[12], 0x29);
	assert_int_equal(vs_ini_lun_reset(ini, 0), 0);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 0, 8, b, 4096, 1), 0);
	assert_int_equal(vs_ini_lun_reset(ini, 1), -EINVAL);
	vs_ini_close(ini);
	tgt_fini(&t);
}

/* ABORT TASK: an io not in flight is -ENOENT; one in flight at the target (LUN 0's reads
 * held by the test gate until the abort waits for them; a read of LUN 1 behind it on the
 * same queue has completed) completes with -ECANCELED.  (It was held 500 ms by a delay:
 * a loaded machine could let it complete before the abort came.) */
static void test_abort(void **state)
{
	struct tgt t;
	struct vs_ini *ini;
	struct vs_ini_opts o;
	struct vs_ini_queue *q;
	static struct waiter w, behind;
	struct when_waiting ctl = {.comm = "vs-ctl", .act = gate_open_all};
	uint8_t *b;
	int gate;

	(void)state;
	tgt_init(&t);
	t.o.luns[0] = "0:ram=16M,gate=read,gate-sock=%G";
	t.o.luns[1] = "1:ram=16M";
	gate = start_gated(&t);
	o = ini_opts(&t, 1);
	assert_int_equal(vs_ini_open(&ini, &o), 0);
	assert_int_equal(vs_ini_lun_count(ini), 2);
	q = vs_ini_get_queue(ini, 0);
	b = vs_ini_alloc(ini, 2u << 20, 4096);
	waiter_prep(&w, VS_INI_READ, 0, 0, 2048, b, 1u << 20, 1);
	assert_int_equal(vs_ini_abort(ini, q, &w.io), -ENOENT);
	assert_int_equal(waiter_submit(q, &w), 0);
	assert_int_equal(gate_wait_held(gate, 1, 20000), 0);
	waiter_prep(&behind, VS_INI_READ, 1, 0, 8, b + (1u << 20), 4096, 1);
	assert_int_equal(waiter_submit(q, &behind), 0);
	waiter_wait(q, &behind);
	assert_int_equal(behind.io.result, 0);
	assert_false(__atomic_load_n(&w.done, __ATOMIC_ACQUIRE));
	ctl.pid = t.tg.pid;
	ctl.arg = &gate;
	assert_int_equal(when_waiting_start(&ctl), 0);
	assert_int_equal(vs_ini_abort(ini, q, &w.io), 0);
	assert_true(when_waiting_join(&ctl)); /* the abort waited for the held read */
	waiter_wait(q, &w);
	assert_int_equal(w.io.result, -ECANCELED);
	assert_int_equal(vs_ini_inflight(q), 0);
	vs_ini_close(ini);
	close(gate);
	tgt_fini(&t);
}

/* The target is killed mid-run: in-flight requests complete with -ENOTCONN and submits
 * fail with -ENOTCONN; once it is restarted on the same file the driver reconnects and
 * the data written before the last acknowledged flush reads back intact. */
static void test_reconnect_after_kill(void **state)
{
	struct tgt t;
	struct vs_ini *ini;
	struct vs_ini_opts o;
	struct vs_ini_queue *q;
	static struct load l;
	char spec[160];
	uint8_t *b;
	uint64_t end;
	int fd, rc;

	(void)state;
	tgt_init(&t);
	fd = open(t.tg.file, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 16 << 20), 0);
	close(fd);
	snprintf(spec, sizeof(spec), "0:file=%s", t.tg.file);
	t.o.luns[0] = spec;
	assert_int_equal(tgt_start(&t), 0);
	o = ini_opts(&t, 1);
	o.reconnect = true;
	assert_int_equal(vs_ini_open(&ini, &o), 0);
	q = vs_ini_get_queue(ini, 0);
	b = vs_ini_alloc(ini, 1u << 20, 4096);
	pattern_fill(b, 1u << 20, 11, 0);
	assert_int_equal(io_sync(q, VS_INI_WRITE, 0, 0, 2048, b, 1u << 20, 16), 0);
	assert_int_equal(io_sync(q, VS_INI_FLUSH, 0, 0, 0, NULL, 0, 0), 0);

	load_start(&l, ini, q, 8192);
	load_wait_for(&l, &l.completed, 1000);
	tgt_kill(&t, SIGKILL);
	end = now_ms() + 20000;
	while (!load_get(&l, &l.submit_notconn)) {
		usleep(1000);
		assert_true(now_ms() < end);
	}
	load_stop(&l);
	load_assert_ok(&l);
	assert_int_equal(l.other, 0);
	assert_int_equal(l.reset, 0);
	assert_int_equal(l.completed, l.ok + l.notconn);
	print_message("  %llu completions, %llu with -ENOTCONN, %llu submits refused\n",
		      (unsigned long long)l.completed, (unsigned long long)l.notconn,
		      (unsigned long long)l.submit_notconn);
	assert_int_equal(vs_ini_inflight(q), 0);

	assert_int_equal(tgt_start(&t), 0);
	end = now_ms() + 20000;
	while (vs_ini_connections(ini) < 2) {
		usleep(1000);
		assert_true(now_ms() < end);
	}
	assert_int_equal(vs_ini_lun_count(ini), 1);
	memset(b, 0, 1u << 20);
	while ((rc = io_sync(q, VS_INI_READ, 0, 0, 2048, b, 1u << 20, 1)) == -ENOTCONN) {
		assert_true(now_ms() < end);
		usleep(1000);
	}
	assert_int_equal(rc, 0);
	assert_true(pattern_check(b, 1u << 20, 11, 0));
	vs_ini_close(ini);
	tgt_fini(&t);
}

/* Interrupt mode: completions arrive from the completion thread, nobody polls. */
static void test_interrupt_mode(void **state)
{
	struct tgt t;
	struct vs_ini *ini;
	struct vs_ini_opts o;
	struct vs_ini_queue *q;
	static struct waiter w;
	uint64_t end;
	uint8_t *b;

	(void)state;
	tgt_init(&t);
	t.o.luns[0] = "0:ram=16M";
	t.o.queues = 2;
	assert_int_equal(tgt_start(&t), 0);
	o = ini_opts(&t, 2);
	o.interrupt = true;
	assert_int_equal(vs_ini_open(&ini, &o), 0);
	assert_int_equal(vs_ini_lun_count(ini), 1);
	b = vs_ini_alloc(ini, 65536, 4096);
	for (unsigned i = 0; i < 2; i++) {
		q = vs_ini_get_queue(ini, i);
		pattern_fill(b, 65536, 20 + i, 0);
		waiter_prep(&w, i ? VS_INI_READ : VS_INI_WRITE, 0, 64, 128, b, 65536, 8);
		if (i)
			memset(b, 0, 65536);
		assert_int_equal(vs_ini_submit(q, &w.io), 0);
		end = now_ms() + 20000;
		while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE)) {
			usleep(100);
			assert_true(now_ms() < end);
		}
		assert_int_equal(w.io.result, 0);
	}
	assert_true(pattern_check(b, 65536, 20, 0));
	vs_ini_close(ini);
	tgt_fini(&t);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lun_reset_under_load),
	    cmocka_unit_test(test_unit_attention_retry),
	    cmocka_unit_test(test_abort),
	    cmocka_unit_test(test_reconnect_after_kill),
	    cmocka_unit_test(test_interrupt_mode),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
