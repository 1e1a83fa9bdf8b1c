/* SPDX-License-Identifier: MIT */
/*
 * Interrupt mode costs CPU per completion, not per unit of time: a completion thread waits
 * on its queue's call eventfd, whatever file status flags that eventfd's open file carries
 * (the target sets O_NONBLOCK on the one it shares with us, src/vhost/dev.c).
 *
 * CPU time is the kernel's accounting for this process (CLOCK_PROCESS_CPUTIME_ID: every
 * thread of the initiator and of the test; the target is a child process, not counted).
 * The test thread waits for completions on an eventfd the callbacks write, so its own
 * waiting costs nothing either.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

#define DEPTH 16

static uint64_t clock_ns(clockid_t c)
{
	struct timespec ts;

	clock_gettime(c, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Requests kept in flight from their own callbacks (on the completion thread) until
 * `want` completions; the test thread sleeps on done_fd meanwhile. */
struct load {
	struct vs_ini_queue *q;
	struct vs_ini_io io[DEPTH];
	struct iovec iov[DEPTH];
	unsigned want;
	unsigned submitted; /* (atomic) */
	unsigned done;	    /* completions (atomic) */
	unsigned failed;    /* completions with an error or a failed resubmission (atomic) */
	unsigned inflight;
	int done_fd; /* written once when the last request of the load has come back */
};

static void load_submit(struct load *l, unsigned i);

static void load_done(struct vs_ini_io *io)
{
	struct load *l = io->opaque;
	unsigned i = (unsigned)(io - l->io);
	uint64_t one = 1;

	if (io->result)
		__atomic_add_fetch(&l->failed, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&l->done, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&l->submitted, __ATOMIC_RELAXED) < l->want) {
		load_submit(l, i);
		return;
	}
	if (__atomic_sub_fetch(&l->inflight, 1, __ATOMIC_RELAXED) == 0 &&
	    write(l->done_fd, &one, sizeof(one)) != sizeof(one))
		__atomic_add_fetch(&l->failed, 1, __ATOMIC_RELAXED);
}

static void load_submit(struct load *l, unsigned i)
{
	struct vs_ini_io *io = &l->io[i];

	__atomic_add_fetch(&l->submitted, 1, __ATOMIC_RELAXED);
	memset(io, 0, sizeof(*io));
	io->op = VS_INI_READ;
	io->lba = (uint64_t)i * 8;
	io->nblocks = 8;
	io->iov = &l->iov[i];
	io->iovcnt = 1;
	io->done = load_done;
	io->opaque = l;
	if (vs_ini_submit(l->q, io)) {
		uint64_t one = 1;

		__atomic_add_fetch(&l->failed, 1, __ATOMIC_RELAXED);
		if (__atomic_sub_fetch(&l->inflight, 1, __ATOMIC_RELAXED) == 0 &&
		    write(l->done_fd, &one, sizeof(one)) != sizeof(one))
			fail_msg("done eventfd write: %s", strerror(errno));
	}
}

/* The target with LUN 0 as given, an interrupt-mode initiator on one queue. */
static struct vs_ini *open_interrupt(struct tgt *t, const char *lun)
{
	struct vs_ini_opts o;
	struct vs_ini *ini;

	tgt_init(t);
	t->o.luns[0] = lun;
	t->o.args[0] = "--testing"; /* one test holds requests with delay= */
	t->o.queues = 1;
	assert_int_equal(tgt_start(t), 0);
	o = ini_opts(t, 1);
	o.interrupt = true;
	assert_int_equal(vs_ini_open(&ini, &o), 0);
	assert_int_equal(vs_ini_lun_count(ini), 1);
	return ini;
}

/* Connected, one request done (the completion thread has run and gone back to waiting),
 * then nothing in flight for a second: the initiator uses under 5% of a CPU. */
static void test_interrupt_idle_sleeps(void **state)
{
	static uint8_t *buf;
	struct tgt t;
	struct vs_ini *ini = open_interrupt(&t, "0:ram=16M");
	struct vs_ini_queue *q = vs_ini_get_queue(ini, 0);
	struct timespec left = {1, 0};
	uint64_t t0, c0, t1, c1;
	struct waiter w;
	double share;

	(void)state;
	buf = vs_ini_alloc(ini, 4096, 4096);
	assert_non_null(buf);
	waiter_prep(&w, VS_INI_READ, 0, 0, 8, buf, 4096, 1);
	assert_int_equal(vs_ini_submit(q, &w.io), 0);
	uint64_t end = now_ms() + 20000;
	while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE)) {
		usleep(100); /* polling a condition, with the deadline below */
		assert_true(now_ms() < end);
	}
	assert_int_equal(w.io.result, 0);
	t0 = clock_ns(CLOCK_MONOTONIC);
	c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	while (nanosleep(&left, &left) < 0) {
		/* interrupted: sleep the rest */
	}
	c1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	t1 = clock_ns(CLOCK_MONOTONIC);
	share = (double)(c1 - c0) / (double)(t1 - t0);
	fprintf(stderr, "   idle interrupt-mode initiator: %.2f%% of a CPU\n", 100 * share);
	assert_true(share < 0.05);
	vs_ini_close(ini);
	tgt_fini(&t);
}

/* DEPTH requests kept in flight against a backend that holds each one 20 ms (about 800
 * completions a second): the initiator's CPU per completion is a wake-up and a callback,
 * under 50 us (a thread that spins between completions costs 100s of us each). */
static void test_interrupt_slow_backend_cheap(void **state)
{
	struct tgt t;
	struct vs_ini *ini = open_interrupt(&t, "0:ram=16M,delay=20000");
	struct load l = {.q = vs_ini_get_queue(ini, 0), .want = 400, .inflight = DEPTH};
	struct pollfd p;
	uint64_t t0, c0, t1, c1, end;
	double per;

	(void)state;
	l.done_fd = eventfd(0, EFD_CLOEXEC);
	assert_true(l.done_fd >= 0);
	for (unsigned i = 0; i < DEPTH; i++) {
		l.iov[i].iov_base = vs_ini_alloc(ini, 4096, 4096);
		l.iov[i].iov_len = 4096;
		assert_non_null(l.iov[i].iov_base);
	}
	t0 = clock_ns(CLOCK_MONOTONIC);
	c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (unsigned i = 0; i < DEPTH; i++)
		load_submit(&l, i);
	end = now_ms() + 30000;
	p = (struct pollfd){.fd = l.done_fd, .events = POLLIN};
	while (poll(&p, 1, 100) == 0)
		assert_true(now_ms() < end);
	c1 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	t1 = clock_ns(CLOCK_MONOTONIC);
	assert_int_equal(__atomic_load_n(&l.failed, __ATOMIC_RELAXED), 0);
	assert_true(l.done >= l.want);
	per = (double)(c1 - c0) / 1000.0 / l.done;
	fprintf(stderr,
		"   interrupt mode, 20 ms backend: %u completions in %.2f s, %.1f us of CPU "
		"each (%.2f%% of a CPU)\n",
		l.done, (double)(t1 - t0) / 1e9, per,
		100.0 * (double)(c1 - c0) / (double)(t1 - t0));
	assert_true(per < 50);
	close(l.done_fd);
	vs_ini_close(ini);
	tgt_fini(&t);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_interrupt_idle_sleeps),
	    cmocka_unit_test(test_interrupt_slow_backend_cheap),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
