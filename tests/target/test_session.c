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

#include "frontend.h"

#define REQ0 VS_VIRTIO_SCSI_VQ_REQ0

static void write_blocks(struct fx *x, unsigned q, unsigned lun, uint32_t lba, const uint8_t *b)
{
	uint8_t cdb[10];
	struct fe_cmd c = {.lun = lun, .cdb = cdb, .cdb_len = 10, .out = b, .out_len = 1024};

	cdb_rw10(cdb, 0x2a, lba, 2);
	assert_int_equal(fe_scsi(&x->fe, q, &c), 0);
	assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
	assert_int_equal(c.resp.status, 0);
}

static void read_blocks(struct fx *x, unsigned q, unsigned lun, uint32_t lba, uint8_t *b)
{
	uint8_t cdb[10];
	struct fe_cmd c = {.lun = lun, .cdb = cdb, .cdb_len = 10, .in = b, .in_len = 1024};

	cdb_rw10(cdb, 0x28, lba, 2);
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
	write_blocks(x, REQ0, 0, 40, a);
	write_blocks(x, REQ0 + 1, 1, 50, b);
	fe_disconnect(&x->fe);
	assert_int_equal(fe_connect(&x->fe, x->g.sock), 0);
	read_blocks(x, REQ0 + 1, 0, 40, in);
	assert_memory_equal(in, a, sizeof(a));
	read_blocks(x, REQ0, 1, 50, in);
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
	write_blocks(x, REQ0, 1, 8, a);
	read_blocks(x, REQ0, 1, 8, in);
	read_blocks(x, REQ0, 1, 8, in);
	for (unsigned q = 0; q < FE_NQ; q++) {
		assert_int_equal(vs_vhost_drv_get_vring_base(&x->fe.f, q, &base), 0);
		assert_int_equal(base, q == REQ0 ? 3 : 0);
	}
	for (unsigned q = 0; q < FE_NQ; q++) {
		assert_int_equal(vs_vhost_drv_set_vring_base(&x->fe.f, q, q == REQ0 ? 3 : 0), 0);
		assert_int_equal(vs_vhost_drv_set_vring_kick(&x->fe.f, q, x->fe.kick[q]), 0);
	}
	memset(in, 0, sizeof(in));
	read_blocks(x, REQ0, 1, 8, in);
	assert_memory_equal(in, a, sizeof(a));
}

/* SYNCHRONIZE CACHE(10) of lun: 0 GOOD, else sense key << 16 | ASC << 8 | ASCQ. */
static int sync_cache(struct fx *x, unsigned lun)
{
	uint8_t cdb[10] = {0x35};
	struct fe_cmd c = {.lun = lun, .cdb = cdb, .cdb_len = 10};

	assert_int_equal(fe_scsi(&x->fe, REQ0, &c), 0);
	assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
	if (!c.resp.status)
		return 0;
	assert_int_equal(c.resp.status, 2);
	return resp_sense_key(&c.resp) << 16 | resp_asc(&c.resp) << 8 | c.resp.sense[13];
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
	struct vs_target_lun l0 = {0, x->g.file};
	char err[256], spec[128];
	uint8_t a[1024];

	memset(a, 0x77, sizeof(a));
	write_blocks(x, REQ0, 0, 40, a);
	fe_disconnect(&x->fe); /* its flush fails */
	assert_int_equal(fe_connect(&x->fe, x->g.sock), 0);
	assert_int_equal(sync_cache(x, 0), 0x030c00);
	assert_int_equal(sync_cache(x, 0), 0x030c00);
	assert_int_equal(sync_cache(x, 1), 0);
	/* Re-opened: the error went with the old backend. */
	assert_int_equal(vs_target_lun_remove(x->g.t, 0, err, sizeof(err)), -EIO);
	assert_non_null(strstr(err, "final flush failed"));
	snprintf(spec, sizeof(spec), "file=%s", x->g.file);
	l0.spec = spec;
	assert_int_equal(vs_target_lun_add(x->g.t, &l0, err, sizeof(err)), 0);
	assert_int_equal(sync_cache(x, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_reconnect_keeps_data, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_ring_stop_restart, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_flush_error_outlives_the_session, setup_fail_flush,
					    fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
