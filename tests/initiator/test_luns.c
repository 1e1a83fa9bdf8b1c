/* SPDX-License-Identifier: MIT */
/*
 * The initiator follows LUNs that change at run time, end to end: a target in this process
 * (so that the test can add, remove and resize its LUNs through vs_target_lun_*) and the
 * initiator connected to it over its vhost-user socket.  The initiator is never asked to
 * rescan: it learns of each change from the target's events (TRANSPORT_RESET: rescan;
 * PARAM_CHANGE: capacity read again; EVENTS_MISSED: full rescan) and tells the
 * application through luns_changed and vs_ini_lun_generation.
 * One scenario per test; `test_initiator_luns NAME` runs one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <vioscope/target.h>

#include "harness.h"

#define WAIT_MS 20000

struct fx {
	struct tgt t;	      /* the target, in this process (t.tg.t) */
	struct vs_target *tg; /* = t.tg.t */
	struct vs_ini *ini;
	struct vs_ini_queue *q;
	unsigned changed; /* luns_changed calls (atomic) */
	uint8_t *buf;	  /* 1 MiB of shared memory */
	char spec[160];	  /* LUN 1's */
};

static void on_luns_changed(void *arg)
{
	struct fx *x = arg;

	__atomic_fetch_add(&x->changed, 1, __ATOMIC_RELAXED);
}

/* A target with LUN 0 = ram=8M and LUN 1 = lun1 (NULL: none; "FILE": an 8 MiB file),
 * and the initiator connected, polling. */
static struct fx *fx_open(const char *lun1)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct vs_ini_opts o;

	assert_non_null(x);
	tgt_init(&x->t);
	x->t.o.in_process = true;
	x->t.o.luns[0] = "0:ram=8M";
	if (lun1 && !strcmp(lun1, "FILE")) {
		x->t.o.file_size = 8 << 20;
		lun1 = "file=%F";
	}
	if (lun1) {
		snprintf(x->spec, sizeof(x->spec), "1:%s", lun1);
		x->t.o.luns[1] = x->spec;
	}
	assert_int_equal(tgt_start(&x->t), 0);
	x->tg = x->t.tg.t;
	o = ini_opts(&x->t, 1);
	o.luns_changed = on_luns_changed;
	o.luns_changed_arg = x;
	assert_int_equal(vs_ini_open(&x->ini, &o), 0);
	x->q = vs_ini_get_queue(x->ini, 0);
	x->buf = vs_ini_alloc(x->ini, 1 << 20, 4096);
	assert_non_null(x->buf);
	return x;
}

static void fx_close(struct fx *x)
{
	vs_ini_close(x->ini);
	assert_int_equal(target_stop(&x->t.tg, 0, 0, NULL), 0); /* vs_target_destroy's */
	tgt_fini(&x->t);
	free(x);
}

/* Wait (bounded) until the initiator's table changed since generation g. */
static void wait_table_change(struct fx *x, unsigned g)
{
	uint64_t end = now_ms() + WAIT_MS;

	while (vs_ini_lun_generation(x->ini) == g) {
		if (now_ms() > end)
			fail_msg("the initiator never saw the change (generation %u)", g);
		sched_yield();
	}
}

/* The table index of LUN number id, or -1. */
static int lun_index(struct fx *x, unsigned id, struct vs_ini_lun *out)
{
	for (unsigned i = 0; i < vs_ini_lun_count(x->ini); i++)
		if (!vs_ini_lun_info(x->ini, i, out) && out->lun == id)
			return (int)i;
	return -1;
}

/* Write a pattern to 64 KiB at lba of table index idx and read it back. */
static void write_read(struct fx *x, unsigned idx, uint64_t lba, uint64_t seed)
{
	const size_t len = 64 << 10;

	pattern_fill(x->buf, len, seed, lba * 512);
	assert_int_equal(io_sync(x->q, VS_INI_WRITE, idx, lba, len / 512, x->buf, len, 4), 0);
	memset(x->buf, 0, len);
	assert_int_equal(io_sync(x->q, VS_INI_READ, idx, lba, len / 512, x->buf, len, 4), 0);
	assert_true(pattern_check(x->buf, len, seed, lba * 512));
}

/* A LUN added at run time appears in the initiator's table without a rescan call, and
 * data moves to and from it. */
static void test_lun_appears(void **state)
{
	struct fx *x = fx_open(NULL);
	struct vs_target_lun l = {.id = 3, .spec = "ram=4M"};
	struct vs_ini_lun info;
	unsigned g = vs_ini_lun_generation(x->ini);
	char err[256];
	int idx;

	(void)state;
	assert_int_equal(vs_ini_lun_count(x->ini), 1);
	assert_int_equal(vs_target_lun_add(x->tg, NULL, &l, err, sizeof(err)), 0);
	wait_table_change(x, g);
	assert_int_equal(vs_ini_lun_count(x->ini), 2);
	idx = lun_index(x, 3, &info);
	assert_true(idx >= 0);
	assert_int_equal(info.num_blocks, 8192);
	assert_int_equal(info.block_size, 512);
	assert_true(__atomic_load_n(&x->changed, __ATOMIC_RELAXED) >= 1);
	write_read(x, (unsigned)idx, 8000 - 128, 1);
	fx_close(x);
}

/* A file LUN resized at run time: the initiator's table shows the new capacity (its scan
 * took the unit attention: the next command is GOOD), the old data is intact, the new
 * blocks take data; a shrink is seen too. */
static void test_resize_seen(void **state)
{
	struct fx *x = fx_open("FILE");
	struct vs_ini_lun info;
	unsigned g;
	char err[256];
	int idx;

	(void)state;
	idx = lun_index(x, 1, &info);
	assert_int_equal(idx, 1);
	assert_int_equal(info.num_blocks, 16384);
	write_read(x, 1, 0, 7);

	g = vs_ini_lun_generation(x->ini);
	assert_int_equal(vs_target_lun_resize(x->tg, NULL, 1, 16 << 20, err, sizeof(err)), 0);
	wait_table_change(x, g);
	assert_int_equal(lun_index(x, 1, &info), 1);
	assert_int_equal(info.num_blocks, 32768);
	/* No UNIT ATTENTION left for this command: the scan consumed it. */
	assert_int_equal(io_sync(x->q, VS_INI_READ, 1, 0, 128, x->buf, 64 << 10, 1), 0);
	assert_true(pattern_check(x->buf, 64 << 10, 7, 0));
	write_read(x, 1, 32768 - 128, 8);

	g = vs_ini_lun_generation(x->ini);
	assert_int_equal(vs_target_lun_resize(x->tg, NULL, 1, 4 << 20, err, sizeof(err)), 0);
	wait_table_change(x, g);
	assert_int_equal(lun_index(x, 1, &info), 1);
	assert_int_equal(info.num_blocks, 8192);
	/* Beyond the new end: refused by the initiator itself now. */
	assert_int_equal(io_sync(x->q, VS_INI_READ, 1, 8192, 8, x->buf, 4096, 1), -EINVAL);
	fx_close(x);
}

/* A LUN removed at run time leaves the initiator's table; commands addressed to it get
 * CHECK CONDITION, LOGICAL UNIT NOT SUPPORTED; the other LUN is untouched. */
static void test_removal_seen(void **state)
{
	struct fx *x = fx_open("ram=4M");
	static struct waiter w;
	struct vs_ini_lun info;
	uint8_t cdb[6] = {0};
	unsigned g = vs_ini_lun_generation(x->ini);
	char err[256];

	(void)state;
	assert_int_equal(vs_ini_lun_count(x->ini), 2);
	assert_int_equal(vs_target_lun_remove(x->tg, NULL, 1, err, sizeof(err)), 0);
	wait_table_change(x, g);
	assert_int_equal(vs_ini_lun_count(x->ini), 1);
	assert_int_equal(lun_index(x, 1, &info), -1);
	assert_int_equal(lun_index(x, 0, &info), 0);

	waiter_prep(&w, VS_INI_READ, 0, 0, 0, x->buf, 0, 0);
	assert_int_equal(vs_ini_submit_cdb(x->q, &w.io, 0, 1, cdb, sizeof(cdb), false), 0);
	waiter_wait(x->q, &w);
	assert_int_equal(w.io.result, -EIO);
	assert_int_equal(w.io.scsi_status, 2);
	assert_int_equal(w.io.sense[2] & 0x0f, 5); /* ILLEGAL REQUEST */
	assert_int_equal(w.io.sense[12], 0x25);	   /* LOGICAL UNIT NOT SUPPORTED */
	/* An index past the table is refused before it reaches the target. */
	assert_int_equal(io_sync(x->q, VS_INI_READ, 1, 0, 8, x->buf, 4096, 1), -EINVAL);
	write_read(x, 0, 0, 3);
	fx_close(x);
}

/* Adds and removes of another LUN while this thread writes and verifies LUN 0: no I/O
 * error, every byte as written; the initiator ends with the table the target has. */
static void test_churn_under_io(void **state)
{
	struct fx *x = fx_open(NULL);
	/* at least 30 adds and removes, and on until this thread has done 30 rounds */
	struct lun_churn c = {
	    .t = x->tg, .lun = {.id = 5, .spec = "ram=1M"}, .min_cycles = 30, .min_rounds = 30};
	uint64_t end = now_ms() + 60000;
	struct vs_ini_lun info;
	unsigned rounds = 0;

	(void)state;
	assert_int_equal(lun_churn_start(&c), 0);
	while (lun_churn_running(&c) && now_ms() < end) {
		write_read(x, 0, (rounds % 64) * 128, rounds);
		rounds++;
		lun_churn_round(&c);
	}
	if (lun_churn_join(&c))
		fail_msg("add/remove: %d %s", c.rc, c.err);
	assert_true(rounds >= 30);
	assert_true(c.cycles >= 30);
	/* The last event (a removal) leads to a table with LUN 0 alone. */
	while (vs_ini_lun_count(x->ini) != 1 || lun_index(x, 5, &info) >= 0) {
		if (now_ms() > end)
			fail_msg("the initiator's table never settled: %u LUNs",
				 vs_ini_lun_count(x->ini));
		sched_yield();
	}
	assert_int_equal(lun_index(x, 0, &info), 0);
	fx_close(x);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lun_appears),
	    cmocka_unit_test(test_resize_seen),
	    cmocka_unit_test(test_removal_seen),
	    cmocka_unit_test(test_churn_under_io),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
