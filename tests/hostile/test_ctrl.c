/* SPDX-License-Identifier: MIT */
/*
 * Hostile guests on the control queue (issue 8, defect 5), and task management during a
 * large transfer: a guest that keeps the control ring full must not starve the commands
 * the vhost thread gives the control thread (a new call fd when the guest masks MSI-X);
 * ABORT TASK and LOGICAL UNIT RESET during a 32 MiB READ leave nothing writing guest
 * memory once they are answered.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostile.h"

#define REQ0 VS_VIRTIO_SCSI_VQ_REQ0
#define CTRL VS_VIRTIO_SCSI_VQ_CTRL

/* ---- a control ring kept full ---------------------------------------------------------------- */
#define CTRL_SIZE 32768
#define CHAIN_OUT 257 /* readable descriptors per chain (the limit is 258 per direction) */

struct flood {
	struct sess *s;
	pthread_t thr;
	int stop;		  /* atomic */
	uint64_t answered;	  /* chains the target answered (atomic) */
	unsigned min_outstanding; /* fewest chains available the guest ever saw (atomic) */
	int err;
};

/* The guest, written straight into the ring: every avail entry is head 0, one indirect
 * chain of CHAIN_OUT one-byte readable descriptors holding an asynchronous-notification
 * query, and its response.  Each answered chain is made available again at once (a head
 * may be in the ring many times: the target answers control chains one by one), so the
 * ring is full whenever the guest runs; and answering one costs the target a walk of 258
 * descriptors, so the guest outruns it by far.  It records how empty it ever saw the ring:
 * a target that drains this ring to the end before anything else finds it empty. */
static void *flood_main(void *arg)
{
	struct flood *f = arg;
	struct fe *fe = &f->s->fe;
	struct vs_vq_drv *vq = &fe->vq[CTRL];
	const uint64_t table = FE_SLOT(1), req = FE_SLOT(2), resp = FE_SLOT(2) + 0x800;
	struct vs_vring_desc *t = gmem_host(fe->g, table);
	struct vs_virtio_scsi_ctrl_an_req an = {.type = vs_le32(VS_VIRTIO_SCSI_T_AN_QUERY)};
	uint16_t avail = 0, prev = 0;
	bool filled = false; /* the ring was full once: from then on, watch how empty it gets */
	uint64_t one = 1;

	vs_vscsi_lun_encode(an.lun, 0, 0);
	memset(gmem_host(fe->g, req), 0, CHAIN_OUT);
	memcpy(gmem_host(fe->g, req), &an, sizeof(an));
	for (unsigned i = 0; i < CHAIN_OUT; i++)
		t[i] = (struct vs_vring_desc){.addr = vs_le64(req + i),
					      .len = vs_le32(1),
					      .flags = vs_le16(VS_VRING_DESC_F_NEXT),
					      .next = vs_le16((uint16_t)(i + 1))};
	t[CHAIN_OUT] =
	    (struct vs_vring_desc){.addr = vs_le64(resp),
				   .len = vs_le32(sizeof(struct vs_virtio_scsi_ctrl_an_resp)),
				   .flags = vs_le16(VS_VRING_DESC_F_WRITE)};
	vq->desc[0] = (struct vs_vring_desc){.addr = vs_le64(table),
					     .len = vs_le32(16 * (CHAIN_OUT + 1)),
					     .flags = vs_le16(VS_VRING_DESC_F_INDIRECT)};
	for (unsigned i = 0; i < CTRL_SIZE; i++)
		vq->avail->ring[i] = 0;
	f->min_outstanding = CTRL_SIZE;
	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		uint16_t used = vs_le16(__atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE));
		unsigned outstanding = (uint16_t)(avail - used);

		if (filled && outstanding < __atomic_load_n(&f->min_outstanding, __ATOMIC_RELAXED))
			__atomic_store_n(&f->min_outstanding, outstanding, __ATOMIC_RELAXED);
		__atomic_fetch_add(&f->answered, (uint16_t)(used - prev), __ATOMIC_RELAXED);
		prev = used;
		if (outstanding == CTRL_SIZE)
			continue;
		avail = (uint16_t)(used + CTRL_SIZE);
		__atomic_store_n(&vq->avail->idx, vs_le16(avail), __ATOMIC_RELEASE);
		filled = true;
		if (write(fe->kick[CTRL], &one, sizeof(one)) < 0) {
			f->err = -errno;
			break;
		}
	}
	return NULL;
}

/* While the guest keeps the control ring full, SET_VRING_CALL for it (what QEMU sends when
 * the guest masks the queue's MSI-X vector) is answered, and the ring never ran dry
 * meanwhile: the control thread ran the command between two budgets of chains, instead of
 * after draining the ring (which a guest can keep from ever happening). */
static void full_control_ring_does_not_starve_a_new_call_fd(void **state)
{
	const char *const args[] = {"--lun", "0:ram=16M", NULL};
	const struct fe_opts opts = {.nq = 3, .qsize = {CTRL_SIZE, 128, 128}};
	struct sess *s = *state;
	struct flood f = {.s = s};
	uint64_t idx = CTRL, before;
	uint64_t deadline;
	int efd;

	assert_int_equal(sess_start(s, args, &opts), 0);
	assert_int_equal(pthread_create(&f.thr, NULL, flood_main, &f), 0);
	/* Busy: the target answers chains. */
	for (deadline = now_ms() + FE_WAIT_MS;
	     __atomic_load_n(&f.answered, __ATOMIC_RELAXED) < 1000 && now_ms() < deadline;)
		usleep(1000);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int64_t st = fe_ask(&s->fe, VS_VHOST_SET_VRING_CALL, &idx, sizeof(idx), &efd, 1);
	unsigned dry = __atomic_load_n(&f.min_outstanding, __ATOMIC_RELAXED);
	/* The guest is still being served after the switch. */
	before = __atomic_load_n(&f.answered, __ATOMIC_RELAXED);
	for (deadline = now_ms() + FE_WAIT_MS;
	     __atomic_load_n(&f.answered, __ATOMIC_RELAXED) < before + 1000 && now_ms() < deadline;)
		usleep(1000);
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
	pthread_join(f.thr, NULL);
	assert_int_equal(f.err, 0);
	assert_int_equal(st, 0);
	assert_true(dry > 0); /* never drained to the end */
	assert_true(f.answered >= before + 1000);
	close(efd);
	assert_int_equal(sess_end(s), 0);
}

/* ---- task management during a 32 MiB READ ---------------------------------------------------- */
#define BIG_BLOCKS (FE_BIG_LEN / 512)

static bool all_bytes(const uint8_t *p, size_t len, uint8_t v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* A READ of 32 MiB into FE_BIG is in flight (its completion held back by the backend's
 * test delay); the TMF is answered FUNCTION COMPLETE only once the READ came back with
 * `expect`.  Then the data buffer and the response are overwritten with a pattern, a
 * command on the same LUN (itself held back as long) completes, and the pattern is intact:
 * nothing of the aborted READ wrote guest memory after the TMF's answer. */
static void tmf_during_big_read(struct sess *s, uint32_t tmf, uint8_t expect, unsigned barriers)
{
	struct fe_cmd rd = {.tag = 0x77, .in_len = FE_BIG_LEN, .in_gpa = FE_BIG};
	uint8_t *big = gmem_host(&s->g, FE_BIG), *resp = gmem_host(&s->g, FE_SLOT(1) + 0x100);
	uint16_t head, h;
	uint32_t len;
	uint8_t r;

	memset(big, 0xa5, FE_BIG_LEN);
	cdb16(rd.cdb, 0x88, 0, 0, BIG_BLOCKS);
	assert_int_equal(fe_post(&s->fe, REQ0, 1, &rd, &head), 0);
	/* In flight: the data moved (it reads as zeros), the completion waits. */
	for (uint64_t deadline = now_ms() + FE_WAIT_MS; big[FE_BIG_LEN - 1] != 0;) {
		assert_true(now_ms() < deadline);
		usleep(1000);
	}
	assert_false(vs_vq_drv_has_used(&s->fe.vq[REQ0]));
	assert_int_equal(fe_tmf(&s->fe, tmf, 0, 0, rd.tag, &r), 0);
	assert_int_equal(r, VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	/* Answered after the READ was: its used entry is there already. */
	assert_true(vs_vq_drv_has_used(&s->fe.vq[REQ0]));
	assert_int_equal(vs_vq_drv_get_used(&s->fe.vq[REQ0], &h, &len), 0);
	assert_int_equal(h, head);
	fe_result(&s->fe, 1, &rd);
	assert_int_equal(rd.resp.response, expect);

	memset(big, 0x5a, FE_BIG_LEN);
	memset(resp, 0x5a, sizeof(struct vs_virtio_scsi_cmd_resp));
	for (unsigned i = 0; i < barriers; i++) {
		struct fe_cmd c = {.in_len = 512};
		cdb10(c.cdb, 0x28, 0, 1, 1);
		assert_int_equal(fe_scsi(&s->fe, REQ0, &c), 0);
	}
	assert_true(all_bytes(big, FE_BIG_LEN, 0x5a));
	assert_true(all_bytes(resp, sizeof(struct vs_virtio_scsi_cmd_resp), 0x5a));
}

static void abort_task_during_a_32mib_read(void **state)
{
	const char *const args[] = {"--testing", "--lun", "0:ram=64M,delay=2000000", NULL};
	struct sess *s = *state;

	assert_int_equal(sess_start(s, args, &(struct fe_opts){.nq = 3}), 0);
	tmf_during_big_read(s, VS_VIRTIO_SCSI_T_TMF_ABORT_TASK, VS_VIRTIO_SCSI_S_ABORTED, 1);
	assert_int_equal(sess_end(s), 0);
}

static void lun_reset_during_a_32mib_read(void **state)
{
	/* A file LUN: the kernel writes the data (io_uring), then the completion waits. */
	const char *const args[] = {"--testing", "--lun", "0:file=%F,delay=2000000", NULL};
	struct sess *s = *state;

	assert_int_equal(sess_start(s, args, &(struct fe_opts){.nq = 3}), 0);
	/* After the reset, the first command gets the unit attention (no I/O): two barriers. */
	tmf_during_big_read(s, VS_VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, VS_VIRTIO_SCSI_S_RESET, 2);
	assert_int_equal(sess_end(s), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    SESS_TEST(full_control_ring_does_not_starve_a_new_call_fd),
	    SESS_TEST(abort_task_during_a_32mib_read),
	    SESS_TEST(lun_reset_during_a_32mib_read),
	};

	return hostile_init(argc, argv) ?: cmocka_run_group_tests(tests, NULL, NULL);
}
