/* SPDX-License-Identifier: MIT */
/* Hostile or broken chains: the target answers what it can and keeps serving. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"

#define REQ0 VS_VIRTIO_SCSI_VQ_REQ0

static void inquiry_ok(struct fx *x, unsigned q)
{
	uint8_t data[36];
	struct fe_cmd c = {.cdb = {0x12, 0, 0, 0, 36, 0}, .in = data, .in_len = 36};

	assert_int_equal(fe_scsi(&x->fe, q, &c), 0);
	assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
	assert_memory_equal(data + 8, "VIOSCOPE", 8);
}

/* A data-in buffer in the hole between the memory regions: the chain comes back with
 * length 0, nothing is written, and the next command on the queue is served. */
static void test_buffer_outside_memory(void **state)
{
	struct fx *x = *state;
	struct vs_virtio_scsi_cmd_req req = {.cdb = {0x12, 0, 0, 0, 36, 0}};
	const uint64_t h = FE_SLOT(1), rs = h + FE_SLOT_RESP;
	struct vs_vq_buf bufs[3] = {
	    {h, sizeof(req), false},
	    {rs, 108, true},
	    {FE_GAP_START + 0x100, 36, true},
	};
	uint32_t len = 1234;

	vs_vscsi_lun_encode(req.lun, 0, 0);
	memcpy(fe_host(&x->fe, h), &req, sizeof(req));
	memset(fe_host(&x->fe, rs), 0xee, 108);
	assert_int_equal(fe_run_chain(&x->fe, REQ0, bufs, 3, &len), 0);
	assert_int_equal(len, 0);
	assert_int_equal(*(uint8_t *)fe_host(&x->fe, rs), 0xee);
	inquiry_ok(x, REQ0);
}

/* An address beyond all memory (and wrapping): same outcome. */
static void test_buffer_wraps(void **state)
{
	struct fx *x = *state;
	const uint64_t h = FE_SLOT(1), rs = h + FE_SLOT_RESP;
	struct vs_vq_buf bufs[2] = {{h, 51, false}, {UINT64_MAX - 10, 108, true}};
	uint32_t len = 1234;

	(void)rs;
	assert_int_equal(fe_run_chain(&x->fe, REQ0, bufs, 2, &len), 0);
	assert_int_equal(len, 0);
	inquiry_ok(x, REQ0);
}

/* A request header of 20 bytes (51 needed), with room for a response: FAILURE. */
static void test_short_request(void **state)
{
	struct fx *x = *state;
	const uint64_t h = FE_SLOT(1), rs = h + FE_SLOT_RESP;
	struct vs_vq_buf bufs[2] = {{h, 20, false}, {rs, 108, true}};
	struct vs_virtio_scsi_cmd_resp resp;
	uint32_t len;

	memset(fe_host(&x->fe, h), 0, 20);
	assert_int_equal(fe_run_chain(&x->fe, REQ0, bufs, 2, &len), 0);
	assert_int_equal(len, sizeof(resp));
	memcpy(&resp, fe_host(&x->fe, rs), sizeof(resp));
	assert_int_equal(resp.response, VS_VIRTIO_SCSI_S_FAILURE);
	inquiry_ok(x, REQ0);
}

/* No room for the response (50 writable bytes): returned with length 0, untouched. */
static void test_short_response(void **state)
{
	struct fx *x = *state;
	struct vs_virtio_scsi_cmd_req req = {.cdb = {0}};
	const uint64_t h = FE_SLOT(1), rs = h + FE_SLOT_RESP;
	struct vs_vq_buf bufs[2] = {{h, sizeof(req), false}, {rs, 50, true}};
	uint32_t len = 1234;

	vs_vscsi_lun_encode(req.lun, 0, 0);
	memcpy(fe_host(&x->fe, h), &req, sizeof(req));
	memset(fe_host(&x->fe, rs), 0xee, 50);
	assert_int_equal(fe_run_chain(&x->fe, REQ0, bufs, 2, &len), 0);
	assert_int_equal(len, 0);
	assert_int_equal(*(uint8_t *)fe_host(&x->fe, rs), 0xee);
	inquiry_ok(x, REQ0);
}

/* A corrupt ring (avail entry naming head 500 of 128) stops that queue only: the target
 * signals the queue's error eventfd (QEMU logs "vhost vring error"), takes nothing more from
 * that ring, and the other request queue keeps serving. */
static void test_broken_ring_isolated(void **state)
{
	struct fx *x = *state;
	struct vs_vq_drv *vq = &x->fe.vq[REQ0];
	uint16_t idx = vs_le16(vq->avail->idx), used = vs_le16(vq->used->idx);
	struct pollfd p = {.fd = x->fe.err[REQ0], .events = POLLIN};
	uint64_t one = 1, v;

	vq->avail->ring[idx % x->fe.qsize[REQ0]] = vs_le16(500);
	__atomic_store_n(&vq->avail->idx, vs_le16((uint16_t)(idx + 1)), __ATOMIC_RELEASE);
	assert_int_equal(write(x->fe.kick[REQ0], &one, sizeof(one)), sizeof(one));
	assert_int_equal(poll(&p, 1, 20000), 1); /* signalled, within a deadline */
	assert_int_equal(read(x->fe.err[REQ0], &v, sizeof(v)), sizeof(v));
	assert_true(v >= 1);
	inquiry_ok(x, REQ0 + 1);
	/* Nothing was used on the broken ring (the bad entry was not "completed"). */
	assert_int_equal(vs_le16(__atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE)), used);
	/* The other queue's ring is untouched by the error. */
	p.fd = x->fe.err[REQ0 + 1];
	assert_int_equal(poll(&p, 1, 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_buffer_outside_memory, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_buffer_wraps, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_short_request, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_short_response, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_broken_ring_isolated, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
