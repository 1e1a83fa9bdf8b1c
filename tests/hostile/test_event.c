/* SPDX-License-Identifier: MIT */
/*
 * A hostile guest on the event queue (issue 22, defect 2).  The control thread owns the
 * event queue, the control queue and the commands of the vhost thread.  While an event
 * waits for a buffer, a guest that keeps the event ring full of buffers too short to take
 * it (each a walk of 258 descriptors, then returned empty) must not starve the rest: TMFs
 * and a new call fd are answered between two budgets of buffers, and the event still
 * reaches the first buffer that can take it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostile.h"

#define EVQ	  VS_VIRTIO_SCSI_VQ_EVENT
#define EV_SIZE	  32768
#define CHAIN	  258	     /* readable descriptors per chain: the limit per direction */
#define EV_TABLE  FE_SLOT(1) /* the flood's indirect table */
#define EV_BYTES  FE_SLOT(2) /* its CHAIN readable bytes */
#define EV_GOOD	  FE_SLOT(3) /* the good buffer posted at the end: 16 writable bytes */
#define GOOD_HEAD 1

struct flood {
	struct sess *s;
	pthread_t thr;
	int stop;		  /* atomic */
	uint64_t returned;	  /* chains the target gave back (atomic) */
	unsigned min_outstanding; /* fewest chains available the guest ever saw (atomic) */
	uint16_t avail;		  /* the avail index it published last (read after join) */
	int err;
};

/* The guest, written straight into the event ring: every avail entry is head 0, one
 * indirect chain of CHAIN one-byte readable descriptors, no writable byte, so no event
 * fits.  Each chain given back is made available again at once, so the ring is full
 * whenever the guest runs, and it records how empty it ever saw the ring: a control
 * thread that drains this ring to the end before anything else finds it empty. */
static void *flood_main(void *arg)
{
	struct flood *f = arg;
	struct fe *fe = &f->s->fe;
	struct vs_vq_drv *vq = &fe->vq[EVQ];
	struct vs_vring_desc *t = gmem_host(fe->g, EV_TABLE);
	uint16_t avail = 0, prev = 0;
	bool filled = false; /* the ring was full once: from then on, watch how empty it gets */
	uint64_t one = 1;

	for (unsigned i = 0; i < CHAIN; i++)
		t[i] = (struct vs_vring_desc){
		    .addr = vs_le64(EV_BYTES + i),
		    .len = vs_le32(1),
		    .flags = vs_le16(i + 1 < CHAIN ? VS_VRING_DESC_F_NEXT : 0),
		    .next = vs_le16((uint16_t)(i + 1 < CHAIN ? i + 1 : 0))};
	vq->desc[0] = (struct vs_vring_desc){.addr = vs_le64(EV_TABLE),
					     .len = vs_le32(16 * CHAIN),
					     .flags = vs_le16(VS_VRING_DESC_F_INDIRECT)};
	for (unsigned i = 0; i < EV_SIZE; i++)
		vq->avail->ring[i] = 0;
	f->min_outstanding = EV_SIZE;
	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		uint16_t used = vs_le16(__atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE));
		unsigned outstanding = (uint16_t)(avail - used);

		if (filled && outstanding < __atomic_load_n(&f->min_outstanding, __ATOMIC_RELAXED))
			__atomic_store_n(&f->min_outstanding, outstanding, __ATOMIC_RELAXED);
		__atomic_fetch_add(&f->returned, (uint16_t)(used - prev), __ATOMIC_RELAXED);
		prev = used;
		if (outstanding == EV_SIZE)
			continue;
		avail = (uint16_t)(used + EV_SIZE);
		__atomic_store_n(&vq->avail->idx, vs_le16(avail), __ATOMIC_RELEASE);
		filled = true;
		if (write(fe->kick[EVQ], &one, sizeof(one)) < 0) {
			f->err = -errno;
			break;
		}
	}
	f->avail = avail;
	return NULL;
}

/* Wait until the flood saw at least n chains given back, or the deadline. */
static void wait_returned(struct flood *f, uint64_t n)
{
	for (uint64_t deadline = now_ms() + FE_WAIT_MS;
	     __atomic_load_n(&f->returned, __ATOMIC_RELAXED) < n && now_ms() < deadline;)
		usleep(1000);
}

/* The used index of the event ring reaches idx (false at the deadline). */
static bool wait_used_idx(struct fe *fe, uint16_t idx)
{
	struct vs_vq_drv *vq = &fe->vq[EVQ];

	for (uint64_t deadline = now_ms() + FE_WAIT_MS;; usleep(1000)) {
		if (vs_le16(__atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE)) == idx)
			return true;
		if (now_ms() >= deadline)
			return false;
	}
}

/* While LUN 1's rescan event waits and the guest keeps the event ring full of chains too
 * short for it, an ABORT TASK on the control queue and SET_VRING_CALL for the event queue
 * (what QEMU sends when the guest masks its MSI-X vector) are answered, and the ring never
 * ran dry meanwhile: the control thread ran them between two budgets of chains, instead of
 * after draining the ring (which the guest keeps from ever happening).  Then the guest
 * stops, posts one good buffer, and the event is in it. */
static void full_event_ring_does_not_starve_the_control_thread(void **state)
{
	const char *const args[] = {"--lun", "0:ram=16M", "--rpc", "%R", NULL};
	const struct fe_opts opts = {.nq = 3, .qsize = {128, EV_SIZE, 128}};
	struct sess *s = *state;
	struct flood f = {.s = s};
	struct vs_vq_drv *vq = &s->fe.vq[EVQ];
	struct vs_virtio_scsi_event ev;
	char reply[4096];
	uint64_t idx = EVQ, before, one = 1;
	uint8_t tmf_resp = 0xee;
	unsigned target = 9, lun = 999;
	int rpc, tmf, efd;
	int64_t call;

	assert_int_equal(sess_start(s, args, &opts), 0);
	assert_int_equal(pthread_create(&f.thr, NULL, flood_main, &f), 0);
	/* The event: LUN 1 added, a rescan for the driver. */
	rpc = target_rpc(&s->p,
			 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_add\","
			 "\"params\":{\"controller\":\"default\",\"id\":1,\"spec\":\"ram=4M\"}}",
			 reply, sizeof(reply), FE_WAIT_MS);
	/* Busy: the control thread walks the flood's chains for it. */
	wait_returned(&f, 1000);
	tmf = fe_tmf(&s->fe, VS_VIRTIO_SCSI_T_TMF_ABORT_TASK, 0, 0, 0x1234, &tmf_resp);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	call = fe_ask(&s->fe, VS_VHOST_SET_VRING_CALL, &idx, sizeof(idx), &efd, 1);
	unsigned dry = __atomic_load_n(&f.min_outstanding, __ATOMIC_RELAXED);
	/* The guest is still being served after both. */
	before = __atomic_load_n(&f.returned, __ATOMIC_RELAXED);
	wait_returned(&f, before + 1000);
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
	pthread_join(f.thr, NULL);
	close(s->fe.call[EVQ]);
	s->fe.call[EVQ] = efd; /* closed with the frontend */
	print_message("%llu chains given back, never fewer than %u of %u available\n",
		      (unsigned long long)f.returned, dry, EV_SIZE);
	if (rpc || tmf || call)
		target_log_dump(&s->p);
	assert_int_equal(f.err, 0);
	assert_int_equal(rpc, 0);
	assert_non_null(strstr(reply, "\"result\""));
	assert_int_equal(tmf, 0);
	assert_int_equal(tmf_resp, VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_int_equal(call, 0);
	assert_true(dry > 0); /* never drained to the end */
	assert_true(f.returned >= before + 1000);

	/* Every bad chain comes back; the event still waits, and the first good buffer gets
	 * it. */
	assert_true(wait_used_idx(&s->fe, f.avail));
	memset(gmem_host(&s->g, EV_GOOD), 0xee, sizeof(ev));
	vq->desc[GOOD_HEAD] = (struct vs_vring_desc){.addr = vs_le64(EV_GOOD),
						     .len = vs_le32(sizeof(ev)),
						     .flags = vs_le16(VS_VRING_DESC_F_WRITE)};
	vq->avail->ring[f.avail % EV_SIZE] = vs_le16(GOOD_HEAD);
	__atomic_store_n(&vq->avail->idx, vs_le16((uint16_t)(f.avail + 1)), __ATOMIC_RELEASE);
	assert_int_equal(write(s->fe.kick[EVQ], &one, sizeof(one)), sizeof(one));
	assert_true(wait_used_idx(&s->fe, (uint16_t)(f.avail + 1)));
	assert_int_equal(vs_le32(vq->used->ring[f.avail % EV_SIZE].id), GOOD_HEAD);
	assert_int_equal(vs_le32(vq->used->ring[f.avail % EV_SIZE].len), sizeof(ev));
	memcpy(&ev, gmem_host(&s->g, EV_GOOD), sizeof(ev));
	assert_int_equal(vs_le32(ev.event), VS_VIRTIO_SCSI_T_TRANSPORT_RESET);
	assert_int_equal(vs_le32(ev.reason), VS_VIRTIO_SCSI_EVT_RESET_RESCAN);
	assert_int_equal(vs_vscsi_lun_decode(ev.lun, &target, &lun), 0);
	assert_int_equal(target, 0);
	assert_int_equal(lun, 1);
	assert_int_equal(sess_end(s), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    SESS_TEST(full_event_ring_does_not_starve_the_control_thread),
	};

	return hostile_init(argc, argv) ?: cmocka_run_group_tests(tests, NULL, NULL);
}
