/* SPDX-License-Identifier: MIT */
/*
 * The initiator against a real `vioscope target` process: discovery, data integrity
 * (block sizes, scatter lists, queue counts), flush, unmap, error mapping and limits.
 * One scenario per test; `test_initiator_e2e NAME` runs one.
 *
 * VIOSCOPE_TEST_RBD=POOL/IMAGE,conf=PATH puts LUN 0 of every scenario on that RBD image
 * (16 MiB) instead of RAM or a file, the same options appended (ctest -L ceph: ceph.e2e).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "tmpdir.h"
#include "../lwlog.h"

struct fx {
	struct tgt t;
	struct vs_ini *ini;
	char spec[4400];
};

/* Start a target with the given LUNs ("FILE[,opts]": an 8 MiB image in the test's directory) and
 * connect with opts (NULL: defaults). */
static struct fx *fx_open(const char *lun0, const char *lun1, unsigned queues, unsigned block_size,
			  const struct vs_ini_opts *opts)
{
	struct fx *x = calloc(1, sizeof(*x));
	const char *rbd = getenv("VIOSCOPE_TEST_RBD");
	struct vs_ini_opts o;

	assert_non_null(x);
	tgt_init(&x->t);
	if (rbd && *rbd && (!strncmp(lun0, "FILE", 4) || !strncmp(lun0, "0:ram=", 6))) {
		snprintf(x->spec, sizeof(x->spec), "0:rbd=%s%s", rbd,
			 lun0[0] == 'F' ? lun0 + 4 : "");
		lun0 = x->spec;
	} else if (!strncmp(lun0, "FILE", 4)) {
		x->t.o.file_size = 8 << 20;
		snprintf(x->spec, sizeof(x->spec), "0:file=%%F%s", lun0 + 4);
		lun0 = x->spec;
	}
	x->t.o.luns[0] = lun0;
	x->t.o.luns[1] = lun1;
	x->t.o.queues = queues;
	x->t.o.block_size = block_size;
	assert_int_equal(tgt_start(&x->t), 0);
	o = opts ? *opts : ini_opts(&x->t, queues);
	o.socket = x->t.tg.sock;
	assert_int_equal(vs_ini_open(&x->ini, &o), 0);
	return x;
}

static void fx_close(struct fx *x)
{
	vs_ini_close(x->ini);
	tgt_fini(&x->t);
	free(x);
}

/* Scan: REPORT LUNS finds LUNs 0 and 3 with their sizes; RAM LUNs are thin, writable. */
static void test_scan_luns(void **state)
{
	struct fx *x = fx_open("0:ram=16M", "3:ram=8M", 1, 0, NULL);
	struct vs_ini_lun l;

	(void)state;
	assert_int_equal(vs_ini_lun_count(x->ini), 2);
	assert_int_equal(vs_ini_lun_info(x->ini, 0, &l), 0);
	assert_int_equal(l.lun, 0);
	assert_int_equal(l.block_size, 512);
	assert_int_equal(l.num_blocks, (16u << 20) / 512);
	assert_true(l.thin);
	assert_false(l.read_only);
	assert_true(strlen(l.vendor) > 0);
	assert_int_equal(vs_ini_lun_info(x->ini, 1, &l), 0);
	assert_int_equal(l.lun, 3);
	assert_int_equal(l.num_blocks, (8u << 20) / 512);
	assert_int_equal(vs_ini_lun_info(x->ini, 2, &l), -EINVAL);
	assert_int_equal(vs_ini_rescan(x->ini), 0);
	assert_int_equal(vs_ini_lun_count(x->ini), 2);
	fx_close(x);
}

/* A read-only file LUN is reported read-only; a write to it fails with -EIO and DATA
 * PROTECT sense, a read succeeds. */
static void test_read_only_lun(void **state)
{
	struct fx *x = fx_open("FILE,ro", NULL, 1, 4096, NULL);
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	uint8_t *b = vs_ini_alloc(x->ini, 4096, 4096);
	static struct waiter w;
	struct vs_ini_lun l;

	(void)state;
	assert_int_equal(vs_ini_lun_info(x->ini, 0, &l), 0);
	assert_true(l.read_only);
	assert_int_equal(l.block_size, 4096);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 1, 1, b, 4096, 1), 0);
	waiter_prep(&w, VS_INI_WRITE, 0, 1, 1, b, 4096, 1);
	assert_int_equal(waiter_submit(q, &w), 0);
	waiter_wait(q, &w);
	assert_int_equal(w.io.result, -EIO);
	assert_int_equal(w.io.scsi_status, 2);
	assert_int_equal(w.io.sense[2] & 0xf, 7); /* DATA PROTECT */
	fx_close(x);
}

/* Patterns written in several request sizes read back identical. */
static void data_roundtrip(unsigned block_size)
{
	static const uint32_t sizes[] = {4096, 8192, 65536, 1u << 20};
	struct fx *x = fx_open("0:ram=64M", NULL, 1, block_size, NULL);
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	uint8_t *w = vs_ini_alloc(x->ini, 1u << 20, 4096),
		*r = vs_ini_alloc(x->ini, 1u << 20, 4096);
	struct vs_ini_lun l;
	uint64_t lba = 0;

	assert_int_equal(vs_ini_lun_info(x->ini, 0, &l), 0);
	assert_int_equal(l.block_size, block_size);
	for (unsigned i = 0; i < 4; i++) {
		uint32_t n = sizes[i] / block_size;

		pattern_fill(w, sizes[i], i + 1, lba * block_size);
		assert_int_equal(io_sync(q, VS_INI_WRITE, 0, lba, n, w, sizes[i], 1), 0);
		memset(r, 0, sizes[i]);
		assert_int_equal(io_sync(q, VS_INI_READ, 0, lba, n, r, sizes[i], 1), 0);
		assert_true(pattern_check(r, sizes[i], i + 1, lba * block_size));
		lba += n + 7; /* unaligned next start */
	}
	/* The last blocks of the LUN too. */
	pattern_fill(w, 8192, 9, (l.num_blocks * block_size) - 8192);
	assert_int_equal(io_sync(q, VS_INI_WRITE, 0, l.num_blocks - 8192 / block_size,
				 8192 / block_size, w, 8192, 1),
			 0);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, l.num_blocks - 8192 / block_size,
				 8192 / block_size, r, 8192, 1),
			 0);
	assert_true(pattern_check(r, 8192, 9, (l.num_blocks * block_size) - 8192));
	fx_close(x);
}

static void test_data_512(void **state)
{
	(void)state;
	data_roundtrip(512);
}

static void test_data_4096(void **state)
{
	(void)state;
	data_roundtrip(4096);
}

/* 128 small segments (indirect descriptors) written, read back as 1 and as 37 segments. */
static void test_scatter_indirect(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL, 1, 512, NULL);
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	uint8_t *w = vs_ini_alloc(x->ini, 65536, 4096), *r = vs_ini_alloc(x->ini, 65536, 4096);
	struct vs_ini_limits lim;

	(void)state;
	vs_ini_get_limits(x->ini, &lim);
	assert_true(lim.features & (1ull << 28)); /* INDIRECT_DESC */
	assert_true(lim.seg_max >= 128);
	pattern_fill(w, 65536, 42, 512 * 100);
	assert_int_equal(io_sync(q, VS_INI_WRITE, 0, 100, 128, w, 65536, 128), 0);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 100, 128, r, 65536, 1), 0);
	assert_true(pattern_check(r, 65536, 42, 512 * 100));
	memset(r, 0, 65536);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 100, 128, r, 65536, 37), 0);
	assert_true(pattern_check(r, 65536, 42, 512 * 100));
	fx_close(x);
}

/* Four queues: each writes its own stretch, another queue reads it back. */
static void test_queues_4(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL, 4, 512, NULL);
	uint8_t *buf = vs_ini_alloc(x->ini, 4 * 32768, 4096);

	(void)state;
	assert_int_equal(vs_ini_queue_count(x->ini), 4);
	for (unsigned i = 0; i < 4; i++) {
		pattern_fill(buf + i * 32768, 32768, 100 + i, i * 1048576ull);
		assert_int_equal(io_sync(vs_ini_get_queue(x->ini, i), VS_INI_WRITE, 0, i * 2048, 64,
					 buf + i * 32768, 32768, 4),
				 0);
	}
	memset(buf, 0, 4 * 32768);
	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(io_sync(vs_ini_get_queue(x->ini, (i + 1) % 4), VS_INI_READ, 0,
					 i * 2048, 64, buf + i * 32768, 32768, 1),
				 0);
		assert_true(pattern_check(buf + i * 32768, 32768, 100 + i, i * 1048576ull));
	}
	assert_null(vs_ini_get_queue(x->ini, 4));
	fx_close(x);
}

/* FUA and SYNCHRONIZE CACHE reach the device as such, on a file LUN whose writes the target
 * logs (log-writes): the FUA write is logged as FUA as soon as it completes; a plain write
 * is logged only once a flush made it durable, just before that FLUSH entry. */
static void test_flush(void **state)
{
	char dir[64], log[96], lun0[128];
	struct fx *x;
	struct vs_ini_queue *q;
	struct lw_test_entry e[8];
	uint8_t *w;
	static struct waiter wt;

	(void)state;
	/* the target creates the log: it never reuses a file */
	assert_int_equal(tmpdir_make(dir, sizeof(dir), NULL, "e2e-log"), 0);
	snprintf(log, sizeof(log), "%s/log", dir);
	snprintf(lun0, sizeof(lun0), "FILE,log-writes=%s", log);
	x = fx_open(lun0, NULL, 1, 512, NULL);
	q = vs_ini_get_queue(x->ini, 0);
	w = vs_ini_alloc(x->ini, 4096, 4096);
	memset(w, 'F', 4096);
	waiter_prep(&wt, VS_INI_WRITE, 0, 0, 8, w, 4096, 1);
	wt.io.fua = true;
	assert_int_equal(waiter_submit(q, &wt), 0);
	waiter_wait(q, &wt);
	assert_int_equal(wt.io.result, 0);
	assert_int_equal(lw_test_read(log, e, 8), 1);
	assert_true(e[0].flags == VS_LW_FUA && e[0].sector == 0 && e[0].nr_sectors == 8 &&
		    e[0].first_byte == 'F');
	memset(w, 'P', 4096);
	assert_int_equal(io_sync(q, VS_INI_WRITE, 0, 64, 8, w, 4096, 1), 0);
	assert_int_equal(lw_test_read(log, e, 8), 1); /* not durable yet */
	assert_int_equal(io_sync(q, VS_INI_FLUSH, 0, 0, 0, NULL, 0, 0), 0);
	assert_int_equal(lw_test_read(log, e, 8), 3);
	assert_true(e[1].flags == 0 && e[1].sector == 64 && e[1].nr_sectors == 8 &&
		    e[1].first_byte == 'P');
	assert_true(e[2].flags == VS_LW_FLUSH);
	fx_close(x);
	tmpdir_remove(dir);
}

/* UNMAP of written blocks: they read back as zeros, the neighbours keep their data. */
static void test_unmap_zeros(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL, 1, 512, NULL);
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	uint8_t *w = vs_ini_alloc(x->ini, 65536, 4096), *r = vs_ini_alloc(x->ini, 65536, 4096);

	(void)state;
	pattern_fill(w, 65536, 7, 0);
	assert_int_equal(io_sync(q, VS_INI_WRITE, 0, 0, 128, w, 65536, 1), 0);
	assert_int_equal(io_sync(q, VS_INI_UNMAP, 0, 32, 64, NULL, 0, 0), 0);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 0, 128, r, 65536, 1), 0);
	assert_true(pattern_check(r, 16384, 7, 0));
	for (unsigned i = 16384; i < 49152; i++)
		assert_int_equal(r[i], 0);
	assert_true(pattern_check(r + 49152, 16384, 7, 49152));
	fx_close(x);
}

/* A command to a target that does not exist: BAD_TARGET, -ENODEV. */
static void test_bad_target(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL, 1, 512, NULL);
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	uint8_t *b = vs_ini_alloc(x->ini, 96, 64);
	uint8_t inq[6] = {0x12, 0, 0, 0, 96, 0};
	static struct waiter w;

	(void)state;
	waiter_prep(&w, VS_INI_READ, 0, 0, 0, b, 96, 1);
	assert_int_equal(vs_ini_submit_cdb(q, &w.io, 1, 0, inq, 6, true), 0);
	waiter_wait(q, &w);
	assert_int_equal(w.io.response, 3); /* VS_VIRTIO_SCSI_S_BAD_TARGET */
	assert_int_equal(w.io.result, -ENODEV);
	fx_close(x);
}

/* READ past the end: the driver refuses it; passed through, the target answers
 * CHECK CONDITION, ILLEGAL REQUEST, LOGICAL BLOCK ADDRESS OUT OF RANGE (21h/00h). */
static void test_lba_out_of_range(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL, 1, 512, NULL);
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	uint8_t *b = vs_ini_alloc(x->ini, 512, 4096);
	uint8_t cdb[16] = {0x88};
	uint64_t end = (16u << 20) / 512;
	static struct waiter w;

	(void)state;
	assert_int_equal(io_sync(q, VS_INI_READ, 0, end, 1, b, 512, 1), -EINVAL);
	for (int i = 0; i < 8; i++)
		cdb[2 + i] = (uint8_t)(end >> (56 - 8 * i));
	cdb[13] = 1;
	waiter_prep(&w, VS_INI_READ, 0, 0, 0, b, 512, 1);
	assert_int_equal(vs_ini_submit_cdb(q, &w.io, 0, 0, cdb, 16, true), 0);
	waiter_wait(q, &w);
	assert_int_equal(w.io.result, -EIO);
	assert_int_equal(w.io.response, 0);
	assert_int_equal(w.io.scsi_status, 2);
	assert_true(w.io.sense_len >= 14);
	assert_int_equal(w.io.sense[2] & 0xf, 5);
	assert_int_equal(w.io.sense[12], 0x21);
	assert_int_equal(w.io.sense[13], 0x00);
	fx_close(x);
}

/* max_sectors 8: a 4 KiB read passes, 4.5 KiB is refused with -EINVAL. */
static void test_limit_max_sectors(void **state)
{
	struct vs_ini_opts o = {.max_sectors = 8, .data_mem = 1u << 20};
	struct fx *x = fx_open("0:ram=16M", NULL, 1, 512, &o);
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	uint8_t *b = vs_ini_alloc(x->ini, 8192, 4096);

	(void)state;
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 0, 8, b, 4096, 1), 0);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 0, 9, b, 4608, 1), -EINVAL);
	assert_int_equal(vs_ini_inflight(q), 0);
	fx_close(x);
}

/* seg_max 4: four segments pass, five are refused; buffers outside shared memory and a
 * length that does not match the blocks are refused too. */
static void test_limit_seg_max(void **state)
{
	struct vs_ini_opts o = {.seg_max = 4, .data_mem = 1u << 20};
	struct fx *x = fx_open("0:ram=16M", NULL, 1, 512, &o);
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	uint8_t *b = vs_ini_alloc(x->ini, 8192, 4096);
	static uint8_t outside[4096];

	(void)state;
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 0, 8, b, 4096, 4), 0);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 0, 8, b, 4096, 5), -EINVAL);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 0, 8, outside, 4096, 1), -EFAULT);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 0, 8, b, 4000, 1), -EINVAL);
	assert_int_equal(io_sync(q, VS_INI_READ, 1, 0, 8, b, 4096, 1), -EINVAL); /* no LUN 1 */
	fx_close(x);
}

/* A 16-entry ring takes 3-descriptor chains direct while half of it is free (two), then
 * each through an indirect table in one descriptor (ten more): twelve in flight, the
 * thirteenth gets -EBUSY (direct only, five would fill it); after a poll the queue
 * accepts again and every request completed. */
static void test_ring_full_busy(void **state)
{
	struct vs_ini_opts o = {.queue_size = 16, .data_mem = 1u << 20};
	struct fx *x = fx_open("0:ram=16M", NULL, 1, 512, &o);
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	uint8_t *b = vs_ini_alloc(x->ini, 16 * 512, 4096);
	static struct waiter w[16];
	unsigned n = 0;
	int rc;

	(void)state;
	for (;;) {
		waiter_prep(&w[n], VS_INI_READ, 0, n, 1, b + n * 512, 512, 1);
		if ((rc = vs_ini_submit(q, &w[n].io)))
			break;
		n++;
		assert_true(n < 16);
	}
	assert_int_equal(rc, -EBUSY);
	assert_int_equal(n, 12);
	assert_int_equal(vs_ini_inflight(q), 12);
	for (unsigned i = 0; i < n; i++) {
		waiter_wait(q, &w[i]);
		assert_int_equal(w[i].io.result, 0);
	}
	assert_int_equal(vs_ini_submit(q, &w[n].io), 0);
	waiter_wait(q, &w[n]);
	assert_int_equal(w[n].io.result, 0);
	fx_close(x);
}

/* cmd_per_lun 2: the third request in flight to the LUN gets -EBUSY. */
static void test_limit_cmd_per_lun(void **state)
{
	struct vs_ini_opts o = {.cmd_per_lun = 2, .data_mem = 1u << 20};
	struct fx *x = fx_open("0:ram=16M", NULL, 1, 512, &o);
	struct vs_ini_queue *q = vs_ini_get_queue(x->ini, 0);
	uint8_t *b = vs_ini_alloc(x->ini, 4 * 512, 4096);
	static struct waiter w[3];

	(void)state;
	for (unsigned i = 0; i < 3; i++)
		waiter_prep(&w[i], VS_INI_READ, 0, i, 1, b + i * 512, 512, 1);
	assert_int_equal(vs_ini_submit(q, &w[0].io), 0);
	assert_int_equal(vs_ini_submit(q, &w[1].io), 0);
	assert_int_equal(vs_ini_submit(q, &w[2].io), -EBUSY);
	waiter_wait(q, &w[0]);
	waiter_wait(q, &w[1]);
	assert_int_equal(vs_ini_submit(q, &w[2].io), 0);
	waiter_wait(q, &w[2]);
	assert_int_equal(w[2].io.result, 0);
	fx_close(x);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scan_luns),
	    cmocka_unit_test(test_read_only_lun),
	    cmocka_unit_test(test_data_512),
	    cmocka_unit_test(test_data_4096),
	    cmocka_unit_test(test_scatter_indirect),
	    cmocka_unit_test(test_queues_4),
	    cmocka_unit_test(test_flush),
	    cmocka_unit_test(test_unmap_zeros),
	    cmocka_unit_test(test_bad_target),
	    cmocka_unit_test(test_lba_out_of_range),
	    cmocka_unit_test(test_limit_max_sectors),
	    cmocka_unit_test(test_limit_seg_max),
	    cmocka_unit_test(test_ring_full_busy),
	    cmocka_unit_test(test_limit_cmd_per_lun),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
