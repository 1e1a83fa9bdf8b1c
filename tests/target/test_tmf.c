/* SPDX-License-Identifier: MIT */
/* The control queue: task management functions and asynchronous-notification requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "fixture.h"
#include "target/target_int.h"
#include "thread_wait.h"
#include "util/util.h"

#define REQ0 VS_VIRTIO_SCSI_VQ_REQ0

/* The fixture with LUN 0's writes held by the test gate (the in-process API). */
static int fx_setup_gated(void **state)
{
	return fx_setup_with(state, ",gate=write");
}

/* TEST UNIT READY on lun; returns the sense key (0 when GOOD). */
static int tur(struct fx *x, unsigned lun)
{
	struct fe_cmd c = {.lun = lun};

	assert_int_equal(fe_scsi(&x->fe, REQ0, &c), 0);
	assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
	if (c.resp.status == 0)
		return 0;
	assert_int_equal(c.resp.status, 2);
	assert_int_equal(sense_asc(&c.resp), 0x29); /* POWER ON, RESET ... OCCURRED */
	return sense_key(&c.resp);
}

/* LOGICAL UNIT RESET answers FUNCTION COMPLETE; the LUN's next command gets UNIT
 * ATTENTION once; the other LUN is not affected. */
static void test_lun_reset_unit_attention(void **state)
{
	struct fx *x = *state;
	uint8_t resp = 0xee;

	assert_int_equal(fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, 1, 0, &resp),
			 0);
	assert_int_equal(resp, VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_int_equal(tur(x, 1), 6);
	assert_int_equal(tur(x, 1), 0);
	assert_int_equal(tur(x, 0), 0);
}

/* I_T NEXUS RESET leaves a unit attention on every LUN. */
static void test_nexus_reset(void **state)
{
	struct fx *x = *state;
	uint8_t resp = 0xee;

	assert_int_equal(fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET, 0, 0, 0, &resp), 0);
	assert_int_equal(resp, VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_int_equal(tur(x, 0), 6);
	assert_int_equal(tur(x, 1), 6);
}

/* ABORT TASK of a tag not in flight: FUNCTION COMPLETE (nothing to abort). */
static void test_abort_task_idle(void **state)
{
	struct fx *x = *state;
	uint8_t resp = 0xee;

	assert_int_equal(fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_ABORT_TASK, 0, 0, 42, &resp), 0);
	assert_int_equal(resp, VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
}

/* QUERY TASK SET with nothing in flight: FUNCTION COMPLETE (not SUCCEEDED). */
static void test_query_task_set_idle(void **state)
{
	struct fx *x = *state;
	uint8_t resp = 0xee;

	assert_int_equal(fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_QUERY_TASK_SET, 0, 0, 0, &resp), 0);
	assert_int_equal(resp, VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
}

/* CLEAR ACA is rejected (no ACA is ever established). */
static void test_clear_aca_rejected(void **state)
{
	struct fx *x = *state;
	uint8_t resp = 0xee;

	assert_int_equal(fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_CLEAR_ACA, 0, 0, 0, &resp), 0);
	assert_int_equal(resp, VS_VIRTIO_SCSI_S_FUNCTION_REJECTED);
}

/* A TMF for LUN 9 (not attached) gets INCORRECT LUN; for target 3, BAD TARGET. */
static void test_tmf_bad_address(void **state)
{
	struct fx *x = *state;
	uint8_t resp = 0xee;

	assert_int_equal(fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, 9, 0, &resp),
			 0);
	assert_int_equal(resp, VS_VIRTIO_SCSI_S_INCORRECT_LUN);
	assert_int_equal(fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 3, 0, 0, &resp),
			 0);
	assert_int_equal(resp, VS_VIRTIO_SCSI_S_BAD_TARGET);
}

/* AN QUERY: no asynchronous events supported, response OK. */
static void test_an_query(void **state)
{
	struct fx *x = *state;
	const uint64_t reqa = FE_SLOT(1), respa = reqa + FE_SLOT_RESP;
	struct vs_virtio_scsi_ctrl_an_req req = {.type = vs_le32(VS_VIRTIO_SCSI_T_AN_QUERY),
						 .event_requested = vs_le32(0x7e)};
	struct vs_virtio_scsi_ctrl_an_resp resp;
	struct vs_vq_buf bufs[2] = {{reqa, sizeof(req), false}, {respa, sizeof(resp), true}};
	uint32_t len;

	memcpy(fe_host(&x->fe, reqa), &req, sizeof(req));
	memset(fe_host(&x->fe, respa), 0xee, sizeof(resp));
	assert_int_equal(fe_run_chain(&x->fe, VS_VIRTIO_SCSI_VQ_CTRL, bufs, 2, &len), 0);
	assert_int_equal(len, sizeof(resp));
	memcpy(&resp, fe_host(&x->fe, respa), sizeof(resp));
	assert_int_equal(resp.response, VS_VIRTIO_SCSI_S_OK);
	assert_int_equal(vs_le32(resp.event_actual), 0);
}

/* LUN 0's test gate lets every write go, for good. */
static void gate_open_all(void *arg)
{
	vs_backend_gate_open(arg);
}

/* A TMF answered while LUN 0's gate holds writes: they go once the target's control thread
 * waits for them (the TMF has marked them); *resp.  The thread was seen waiting. */
static void tmf_releasing(struct fx *x, uint32_t subtype, uint64_t tag, uint8_t *resp)
{
	struct when_waiting ctl = {
	    .comm = "vs-ctl", .act = gate_open_all, .arg = x->g.t->ctrls->be[0]};

	assert_int_equal(when_waiting_start(&ctl), 0);
	assert_int_equal(fe_tmf(&x->fe, subtype, 0, 0, tag, resp), 0);
	assert_true(when_waiting_join(&ctl));
}

/* ABORT TASK SET while many large writes are in flight (LUN 0's test gate holds every
 * write until the TMF waits for them): every request completes, each GOOD or ABORTED, at
 * least one was aborted, and every ABORTED one was already in the used ring when the TMF
 * answered (drivers poll their queues right after a TMF and then forget the commands).
 * (A delay of 1 s held them before: a loaded machine could let them all complete first.) */
#define NREQ   40  /* 3 descriptors each: fits the 128-entry ring */
#define BLOCKS 256 /* 128 KiB each */
static void test_abort_task_set_under_load(void **state)
{
	struct fx *x = *state;
	const uint64_t data = FE_BIG;
	struct vs_vq_drv *vq = &x->fe.vq[REQ0];
	uint16_t used_at_tmf, used_before = vs_le16(vq->used->idx);
	unsigned aborted = 0;
	uint8_t tmf = 0xee;

	for (unsigned i = 0; i < NREQ; i++) {
		struct vs_virtio_scsi_cmd_req req = {.tag = vs_le64(1000 + i)};
		uint64_t s = FE_SLOT(1 + i);
		struct vs_vq_buf bufs[3] = {{s, sizeof(req), false},
					    {data, BLOCKS * 512, false},
					    {s + FE_SLOT_RESP, 108, true}};
		uint16_t head;

		vs_vscsi_lun_encode(req.lun, 0, 0);
		cdb10(req.cdb, 0x2a, 0, i * BLOCKS % 1536, BLOCKS);
		memcpy(fe_host(&x->fe, s), &req, sizeof(req));
		assert_int_equal(fe_post_chain(&x->fe, REQ0, bufs, 3, &head), 0);
	}
	/* In flight at the target, held, and QUERY TASK SET sees them. */
	assert_int_equal(vs_backend_gate_wait(x->g.t->ctrls->be[0], 1, 10000), 0);
	assert_int_equal(fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_QUERY_TASK_SET, 0, 0, 0, &tmf), 0);
	assert_int_equal(tmf, VS_VIRTIO_SCSI_S_FUNCTION_SUCCEEDED);
	tmf_releasing(x, VS_VIRTIO_SCSI_T_TMF_ABORT_TASK_SET, 0, &tmf);
	used_at_tmf = vs_le16(__atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE));
	assert_int_equal(tmf, VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	for (unsigned i = 0; i < NREQ; i++) {
		struct vs_virtio_scsi_cmd_resp resp;
		uint16_t head;
		uint32_t len;

		assert_int_equal(fe_wait_used(&x->fe, REQ0, &head, &len, FE_WAIT_MS), 0);
		assert_int_equal(len, sizeof(resp));
		/* head's slot: the chain's first descriptor address tells which request */
		uint64_t s = vs_le64(vq->desc[head].addr);
		memcpy(&resp, fe_host(&x->fe, s + FE_SLOT_RESP), sizeof(resp));
		if (resp.response == VS_VIRTIO_SCSI_S_ABORTED) {
			aborted++;
			assert_true(i < (uint16_t)(used_at_tmf - used_before));
		} else {
			assert_int_equal(resp.response, VS_VIRTIO_SCSI_S_OK);
			assert_int_equal(resp.status, 0);
		}
	}
	print_message("%u of %u writes aborted\n", aborted, NREQ);
	assert_true(aborted > 0);
}

/* ABORT TASK of one write in flight (held by the test gate until the abort waits for it):
 * QUERY TASK finds it (FUNCTION SUCCEEDED), the abort answers FUNCTION COMPLETE, and the
 * write comes back ABORTED, already in the used ring. */
static void test_abort_task_in_flight(void **state)
{
	struct fx *x = *state;
	const uint64_t data = FE_BIG, s = FE_SLOT(1), tag = 4242;
	struct vs_vq_drv *vq = &x->fe.vq[REQ0];
	struct vs_virtio_scsi_cmd_req req = {.tag = vs_le64(tag)};
	struct vs_vq_buf bufs[3] = {
	    {s, sizeof(req), false}, {data, 4096, false}, {s + FE_SLOT_RESP, 108, true}};
	struct vs_virtio_scsi_cmd_resp resp;
	uint16_t head, used_head, used_at_tmf, used_before = vs_le16(vq->used->idx);
	uint8_t r = 0xee;
	uint32_t len;

	vs_vscsi_lun_encode(req.lun, 0, 0);
	cdb10(req.cdb, 0x2a, 0, 8, 8);
	memcpy(fe_host(&x->fe, s), &req, sizeof(req));
	assert_int_equal(fe_post_chain(&x->fe, REQ0, bufs, 3, &head), 0);
	/* In flight at the target, held, and QUERY TASK finds it. */
	assert_int_equal(vs_backend_gate_wait(x->g.t->ctrls->be[0], 1, 10000), 0);
	assert_int_equal(fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_QUERY_TASK, 0, 0, tag, &r), 0);
	assert_int_equal(r, VS_VIRTIO_SCSI_S_FUNCTION_SUCCEEDED);
	tmf_releasing(x, VS_VIRTIO_SCSI_T_TMF_ABORT_TASK, tag, &r);
	used_at_tmf = vs_le16(__atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE));
	assert_int_equal(r, VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_int_equal((uint16_t)(used_at_tmf - used_before), 1);
	assert_int_equal(fe_wait_used(&x->fe, REQ0, &used_head, &len, FE_WAIT_MS), 0);
	assert_int_equal(used_head, head);
	memcpy(&resp, fe_host(&x->fe, s + FE_SLOT_RESP), sizeof(resp));
	assert_int_equal(resp.response, VS_VIRTIO_SCSI_S_ABORTED);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    FX_TEST(test_lun_reset_unit_attention),
	    FX_TEST(test_nexus_reset),
	    FX_TEST(test_abort_task_idle),
	    FX_TEST(test_query_task_set_idle),
	    FX_TEST(test_clear_aca_rejected),
	    FX_TEST(test_tmf_bad_address),
	    FX_TEST(test_an_query),
	    cmocka_unit_test_setup_teardown(test_abort_task_set_under_load, fx_setup_gated,
					    fx_teardown),
	    cmocka_unit_test_setup_teardown(test_abort_task_in_flight, fx_setup_gated, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
