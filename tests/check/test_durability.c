/* SPDX-License-Identifier: MIT */
/*
 * Process-kill durability: a target process is killed (SIGKILL) right after it acknowledges
 * a flush, 100 times, on a file LUN on a real file system (not tmpfs: its page cache is all
 * there is), buffered and O_DIRECT.  Each time the driver reconnects to the restarted target
 * and reads back: no write acknowledged before an acknowledged flush may be missing.
 * The kill is sent from the flush's completion callback, before anything else runs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "../initiator/harness.h"
#include "tmpdir.h"

#define ROUNDS	100
#define NBLK	4096 /* 4 KiB blocks: a 16 MiB LUN */
#define WRITES	16   /* per round, each acknowledged before the flush */
#define IMG_DIR "/var/tmp"

struct run {
	struct tgt t;
	struct vs_ini *ini;
	struct vs_ini_queue *q;
	uint8_t *buf;
	uint64_t seed[NBLK]; /* what each block must hold (0: never written) */
	char dir[64], img[96], spec[160];
	volatile int killed_at_ack;
};

static struct run *the_run;

/* The flush's callback: acknowledged, so the target dies now. */
static void flush_done(struct vs_ini_io *io)
{
	struct waiter *w = io->opaque;

	if (io->result == 0) {
		kill(the_run->t.tg.pid, SIGKILL);
		the_run->killed_at_ack = 1;
	}
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
}

static int read_retry(struct run *r, uint64_t blk, uint8_t *b)
{
	uint64_t end = now_ms() + 20000;
	int rc;

	/* The connection counts before its queues are ready: -ENOTCONN for a moment. */
	while ((rc = io_sync(r->q, VS_INI_READ, 0, blk * 8, 8, b, 4096, 1)) == -ENOTCONN &&
	       now_ms() < end)
		usleep(1000);
	return rc;
}

static void check_block(struct run *r, uint64_t blk, unsigned round)
{
	uint8_t *b = r->buf + WRITES * 4096;

	assert_int_equal(read_retry(r, blk, b), 0);
	if (!pattern_check(b, 4096, r->seed[blk], 0)) {
		print_error("round %u: block %llu lost its acknowledged, flushed write\n", round,
			    (unsigned long long)blk);
		fail();
	}
}

static void one_round(struct run *r, unsigned round, uint64_t *rng)
{
	static struct waiter w[WRITES], fw;
	uint64_t blk[WRITES];
	unsigned before = vs_ini_connections(r->ini);
	uint64_t end;

	for (unsigned i = 0; i < WRITES; i++) {
		bool dup;

		do {
			*rng ^= *rng << 13, *rng ^= *rng >> 7, *rng ^= *rng << 17;
			blk[i] = *rng % NBLK;
			dup = false;
			for (unsigned k = 0; k < i; k++)
				dup |= blk[k] == blk[i];
		} while (dup);
		pattern_fill(r->buf + i * 4096, 4096, (uint64_t)round * NBLK + blk[i] + 1, 0);
		waiter_prep(&w[i], VS_INI_WRITE, 0, blk[i] * 8, 8, r->buf + i * 4096, 4096, 1);
		assert_int_equal(waiter_submit(r->q, &w[i]), 0);
	}
	for (unsigned i = 0; i < WRITES; i++) {
		waiter_wait(r->q, &w[i]);
		assert_int_equal(w[i].io.result, 0);
	}
	waiter_prep(&fw, VS_INI_FLUSH, 0, 0, 0, NULL, 0, 0);
	fw.io.done = flush_done;
	r->killed_at_ack = 0;
	assert_int_equal(waiter_submit(r->q, &fw), 0);
	waiter_wait(r->q, &fw);
	assert_int_equal(fw.io.result, 0);
	assert_true(r->killed_at_ack);
	for (unsigned i = 0; i < WRITES; i++)
		r->seed[blk[i]] = (uint64_t)round * NBLK + blk[i] + 1;

	tgt_kill(&r->t, SIGKILL); /* reaped: it was killed in the callback */
	assert_int_equal(tgt_start(&r->t), 0);
	end = now_ms() + 20000;
	while (vs_ini_connections(r->ini) <= before) {
		assert_true(now_ms() < end);
		usleep(1000);
	}
	for (unsigned i = 0; i < WRITES; i++)
		check_block(r, blk[i], round);
	if (round % 25 == 24) /* and every block written so far, now and then */
		for (uint64_t b = 0; b < NBLK; b++)
			if (r->seed[b])
				check_block(r, b, round);
}

static void rounds(bool direct)
{
	struct run *r = calloc(1, sizeof(*r));
	struct vs_ini_opts o;
	struct statfs sfs;
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	int fd;

	assert_non_null(r);
	the_run = r;
	assert_int_equal(tmpdir_make(r->dir, sizeof(r->dir), IMG_DIR, "durability"), 0);
	assert_int_equal(statfs(r->dir, &sfs), 0);
	if (sfs.f_type == TMPFS_MAGIC) {
		print_error("%s is on tmpfs: this test needs a real file system\n", IMG_DIR);
		fail();
	}
	snprintf(r->img, sizeof(r->img), "%s/lun0.img", r->dir);
	fd = open(r->img, O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, NBLK * 4096), 0);
	close(fd);
	snprintf(r->spec, sizeof(r->spec), "0:file=%s%s", r->img, direct ? ",direct" : "");
	tgt_init(&r->t);
	r->t.o.luns[0] = r->spec;
	assert_int_equal(tgt_start(&r->t), 0);
	o = ini_opts(&r->t, 1);
	o.reconnect = true;
	assert_int_equal(vs_ini_open(&r->ini, &o), 0);
	r->q = vs_ini_get_queue(r->ini, 0);
	r->buf = vs_ini_alloc(r->ini, (WRITES + 1) * 4096, 4096);
	assert_non_null(r->buf);
	for (unsigned round = 0; round < ROUNDS; round++)
		one_round(r, round, &rng);
	print_message("  %u kills right after a flush was acknowledged, %u reconnections, "
		      "every acknowledged write there (%s)\n",
		      ROUNDS, vs_ini_connections(r->ini) - 1, direct ? "O_DIRECT" : "buffered");
	vs_ini_close(r->ini);
	tgt_fini(&r->t);
	tmpdir_remove(r->dir);
	free(r);
}

static void test_kill_after_flush_buffered(void **state)
{
	(void)state;
	rounds(false);
}

static void test_kill_after_flush_direct(void **state)
{
	(void)state;
	rounds(true);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kill_after_flush_buffered),
	    cmocka_unit_test(test_kill_after_flush_direct),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
