/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

void tgt_init(struct tgt *t)
{
	memset(t, 0, sizeof(*t));
	assert_int_equal(target_init(&t->tg, "ini", VIOSCOPE_BIN), 0);
	t->o.queues = 1;
}

int tgt_start(struct tgt *t)
{
	return target_start(&t->tg, &t->o);
}

void tgt_kill(struct tgt *t, int sig)
{
	target_stop(&t->tg, sig, 20000, NULL);
}

void tgt_fini(struct tgt *t)
{
	/* SIGTERM first: a killed RBD client keeps its image's lock and watch for 30 s */
	target_stop(&t->tg, SIGTERM, 20000, NULL);
	target_fini(&t->tg);
}

struct vs_ini_opts ini_opts(const struct tgt *t, unsigned queues)
{
	return (struct vs_ini_opts){.socket = t->tg.sock, .queues = queues, .data_mem = 32u << 20};
}

static void waiter_done(struct vs_ini_io *io)
{
	struct waiter *w = io->opaque;
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
}

void waiter_prep(struct waiter *w, enum vs_ini_op op, unsigned lun, uint64_t lba, uint32_t nblocks,
		 void *buf, size_t len, unsigned nseg)
{
	memset(w, 0, sizeof(*w));
	assert_true(nseg <= 256);
	for (unsigned i = 0; i < nseg; i++) {
		size_t a = len * i / nseg, b = len * (i + 1) / nseg;
		w->iov[i] = (struct iovec){(uint8_t *)buf + a, b - a};
	}
	w->io.op = op;
	w->io.lun = lun;
	w->io.lba = lba;
	w->io.nblocks = nblocks;
	w->io.iov = w->iov;
	w->io.iovcnt = (int)nseg;
	w->io.done = waiter_done;
	w->io.opaque = w;
	w->io.result = 1; /* must be overwritten */
}

int waiter_submit(struct vs_ini_queue *q, struct waiter *w)
{
	int rc;

	while ((rc = vs_ini_submit(q, &w->io)) == -EBUSY)
		vs_ini_poll(q, 16);
	return rc;
}

void waiter_wait(struct vs_ini_queue *q, struct waiter *w)
{
	uint64_t end = now_ms() + 20000;

	while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE)) {
		if (!vs_ini_poll(q, 16))
			usleep(10);
		assert_true(now_ms() < end);
	}
}

int io_sync(struct vs_ini_queue *q, enum vs_ini_op op, unsigned lun, uint64_t lba, uint32_t nblocks,
	    void *buf, size_t len, unsigned nseg)
{
	static struct waiter w; /* big: keep it off the stack */
	int rc;

	waiter_prep(&w, op, lun, lba, nblocks, buf, len, nseg);
	if ((rc = waiter_submit(q, &w)))
		return rc;
	waiter_wait(q, &w);
	return w.io.result;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

void pattern_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(mix(seed * 0x9e3779b97f4a7c15ull + ((off + i) >> 3)) >>
				   (((off + i) & 7) * 8));
}

bool pattern_check(const uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != (uint8_t)(mix(seed * 0x9e3779b97f4a7c15ull + ((off + i) >> 3)) >>
					(((off + i) & 7) * 8)))
			return false;
	return true;
}
