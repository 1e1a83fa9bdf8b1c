/* SPDX-License-Identifier: MIT */
/* Sessions: rings stopped and restarted (as QEMU does between SeaBIOS and Linux), and a
 * frontend that disconnects and comes back. */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"

#define REQ0 VS_VIRTIO_SCSI_VQ_REQ0

/* WRITE(10) (op 0x2a) or READ(10) (0x28) of 2 blocks at lba from / into b: GOOD. */
static void rw_blocks(struct fx *x, unsigned q, unsigned lun, uint8_t op, uint32_t lba, uint8_t *b)
{
	struct fe_cmd c = {.lun = lun};

	if (op == 0x2a)
		c.out = b, c.out_len = 1024;
	else
		c.in = b, c.in_len = 1024;
	cdb10(c.cdb, op, 0, lba, 2);
	assert_int_equal(fe_scsi(&x->fe, q, &c), 0);
	assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
	assert_int_equal(c.resp.status, 0);
}

/* Data written in one session is there in the next, on both LUNs, and the target
 * counted two connections. */
static void test_reconnect_keeps_data(void **state)
{
	struct fx *x = *state;
	uint8_t a[1024], b[1024], in[1024];
	struct vs_target_stats st;

	memset(a, 0xa5, sizeof(a));
	memset(b, 0x5b, sizeof(b));
	rw_blocks(x, REQ0, 0, 0x2a, 40, a);
	rw_blocks(x, REQ0 + 1, 1, 0x2a, 50, b);
	fe_close(&x->fe);
	assert_int_equal(fx_connect(x), 0);
	rw_blocks(x, REQ0 + 1, 0, 0x28, 40, in);
	assert_memory_equal(in, a, sizeof(a));
	rw_blocks(x, REQ0, 1, 0x28, 50, in);
	assert_memory_equal(in, b, sizeof(b));
	vs_target_get_stats(x->g.t, &st);
	assert_int_equal(st.connections, 2);
}

/* GET_VRING_BASE stops each ring and reports how far it consumed; a new kick fd restarts
 * it from there and commands flow again. */
static void test_ring_stop_restart(void **state)
{
	struct fx *x = *state;
	uint8_t a[1024], in[1024];
	uint16_t base;

	memset(a, 0x3c, sizeof(a));
	rw_blocks(x, REQ0, 1, 0x2a, 8, a);
	rw_blocks(x, REQ0, 1, 0x28, 8, in);
	rw_blocks(x, REQ0, 1, 0x28, 8, in);
	for (unsigned q = 0; q < FX_NQ; q++) {
		assert_int_equal(vs_vhost_drv_get_vring_base(&x->fe.drv, q, &base), 0);
		assert_int_equal(base, q == REQ0 ? 3 : 0);
	}
	for (unsigned q = 0; q < FX_NQ; q++) {
		assert_int_equal(vs_vhost_drv_set_vring_base(&x->fe.drv, q, q == REQ0 ? 3 : 0), 0);
		assert_int_equal(vs_vhost_drv_set_vring_kick(&x->fe.drv, q, x->fe.kick[q]), 0);
	}
	memset(in, 0, sizeof(in));
	rw_blocks(x, REQ0, 1, 0x28, 8, in);
	assert_memory_equal(in, a, sizeof(a));
}

/* SYNCHRONIZE CACHE(10) of lun: 0 GOOD, else sense key << 16 | ASC << 8 | ASCQ. */
static int sync_cache(struct fx *x, unsigned lun)
{
	struct fe_cmd c = {.lun = lun, .cdb = {0x35}};

	assert_int_equal(fe_scsi(&x->fe, REQ0, &c), 0);
	assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
	if (!c.resp.status)
		return 0;
	assert_int_equal(c.resp.status, 2);
	return sense_key(&c.resp) << 16 | sense_asc(&c.resp) << 8 | c.resp.sense[13];
}

static int setup_fail_flush(void **state)
{
	return fx_setup_with(state, ",fail-flush=1");
}

/* A writeback error met by the flush of a disconnect (fail-flush=1: LUN 0's first flush
 * fails, as the kernel reports a lost write once) stays with the LUN: the next session's
 * SYNCHRONIZE CACHE answers MEDIUM ERROR / WRITE ERROR (03/0c/00), every time, until the LUN
 * is opened again; the other LUN is not affected. */
static void test_flush_error_outlives_the_session(void **state)
{
	struct fx *x = *state;
	struct vs_target_lun l0 = {.id = 0, .spec = x->g.file};
	char err[256], spec[128];
	uint8_t a[1024];

	memset(a, 0x77, sizeof(a));
	rw_blocks(x, REQ0, 0, 0x2a, 40, a);
	fe_close(&x->fe); /* its flush fails */
	assert_int_equal(fx_connect(x), 0);
	assert_int_equal(sync_cache(x, 0), 0x030c00);
	assert_int_equal(sync_cache(x, 0), 0x030c00);
	assert_int_equal(sync_cache(x, 1), 0);
	/* Re-opened: the error went with the old backend. */
	assert_int_equal(vs_target_lun_remove(x->g.t, NULL, 0, err, sizeof(err)), -EIO);
	assert_non_null(strstr(err, "final flush failed"));
	snprintf(spec, sizeof(spec), "file=%s", x->g.file);
	l0.spec = spec;
	assert_int_equal(vs_target_lun_add(x->g.t, NULL, &l0, err, sizeof(err)), 0);
	assert_int_equal(sync_cache(x, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    FX_TEST(test_reconnect_keeps_data),
	    FX_TEST(test_ring_stop_restart),
	    cmocka_unit_test_setup_teardown(test_flush_error_outlives_the_session, setup_fail_flush,
					    fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
