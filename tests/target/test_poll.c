/* SPDX-License-Identifier: MIT */
/* The target with --poll: workers spin over rings and I/O instead of sleeping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>

#include <cmocka.h>

#include "frontend.h"

static int setup_poll(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));

	if (!x || tgt_start_poll(&x->g, 2, true) || fe_init(&x->fe) ||
	    fe_connect(&x->fe, x->g.sock))
		return -1;
	*state = x;
	return 0;
}

/* Writes and reads on both request queues and both LUNs round-trip without a single kick
 * (the workers poll the rings), across a reconnect (the workers go from spinning to sleeping
 * and back). */
static void test_poll_rw_reconnect(void **state)
{
	struct fx *x = *state;
	static uint8_t out[2048], in[2048];
	uint8_t cdb[10];

	x->fe.no_kick = true;
	for (unsigned i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i ^ 0x5a);
	for (unsigned round = 0; round < 2; round++) {
		for (unsigned q = 0; q < 2; q++) {
			for (unsigned lun = 0; lun < 2; lun++) {
				struct fe_cmd w = {.lun = lun,
						   .cdb = cdb,
						   .cdb_len = 10,
						   .out = out,
						   .out_len = sizeof(out)};
				struct fe_cmd r = {.lun = lun,
						   .cdb = cdb,
						   .cdb_len = 10,
						   .in = in,
						   .in_len = sizeof(in)};

				cdb_rw10(cdb, 0x2a, 64 * q + 8 * lun, 4);
				assert_int_equal(fe_scsi(&x->fe, VS_VIRTIO_SCSI_VQ_REQ0 + q, &w),
						 0);
				assert_int_equal(w.resp.status, 0);
				cdb_rw10(cdb, 0x28, 64 * q + 8 * lun, 4);
				memset(in, 0, sizeof(in));
				assert_int_equal(fe_scsi(&x->fe, VS_VIRTIO_SCSI_VQ_REQ0 + q, &r),
						 0);
				assert_int_equal(r.resp.status, 0);
				assert_memory_equal(in, out, sizeof(out));
			}
		}
		fe_disconnect(&x->fe);
		assert_int_equal(fe_connect(&x->fe, x->g.sock), 0);
	}
	for (unsigned q = 0; q < FE_NQ; q++)
		assert_int_equal(x->fe.kicks[q], 0);
}

/* The control: without --poll, a request nobody kicks for stays in the ring (bounded look,
 * 500 ms), and the kick then gets it served.  So the test above tells polling apart. */
static void test_event_mode_needs_kick(void **state)
{
	struct fx *x = *state;
	uint8_t cdb[6] = {0}; /* TEST UNIT READY */
	struct vs_virtio_scsi_cmd_req req = {0};
	const uint64_t h = FE_SLOT + 0x3000, rs = FE_SLOT + 0x3100;
	struct vs_vq_buf bufs[2] = {{h, sizeof(req), false}, {rs, 108, true}};
	struct vs_vq_drv *vq = &x->fe.vq[VS_VIRTIO_SCSI_VQ_REQ0];
	struct pollfd p = {.fd = x->fe.call[VS_VIRTIO_SCSI_VQ_REQ0], .events = POLLIN};
	uint16_t head, used = vs_le16(vq->used->idx), got;
	uint64_t one = 1;
	uint32_t len;

	vs_vscsi_lun_encode(req.lun, 0, 0);
	memcpy(req.cdb, cdb, sizeof(cdb));
	memcpy(fe_host(&x->fe, h), &req, sizeof(req));
	x->fe.no_kick = true;
	assert_int_equal(fe_post(&x->fe, VS_VIRTIO_SCSI_VQ_REQ0, bufs, 2, &head), 0);
	assert_int_equal(poll(&p, 1, 500), 0);
	assert_int_equal(vs_le16(__atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE)), used);
	assert_int_equal(write(x->fe.kick[VS_VIRTIO_SCSI_VQ_REQ0], &one, sizeof(one)), sizeof(one));
	assert_int_equal(fe_wait_used(&x->fe, VS_VIRTIO_SCSI_VQ_REQ0, &got, &len), 0);
	assert_int_equal(got, head);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_poll_rw_reconnect, setup_poll, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_event_mode_needs_kick, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
