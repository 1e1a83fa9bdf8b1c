/* SPDX-License-Identifier: MIT */
/*
 * Test harness for the target: an in-process target on a temporary socket, and a minimal
 * virtio-scsi frontend driving it the way QEMU + a guest driver would: one memfd as guest
 * memory (two regions, like QEMU's 0-0xa0000 and 0xc0000-end), vhost-user set-up through
 * the vhost layer's front-end helpers, and driver-side rings (vs_vq_drv) for the control,
 * event and request queues.  Functions return 0 / -errno; tests assert.
 */
#ifndef TESTS_TARGET_FRONTEND_H
#define TESTS_TARGET_FRONTEND_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>

#include <vioscope/target.h>

#include "proto/virtio_scsi_proto.h"
#include "vhost/vhost_drv.h"
#include "virtio/virtio.h"

#define FE_MEM_SIZE  0x400000ull /* 4 MiB of "guest memory" */
#define FE_GAP_START 0xa0000ull	 /* no memory in [0xa0000, 0xc0000) */
#define FE_GAP_END   0xc0000ull
#define FE_NQ	     4 /* control, event, 2 request queues */
#define FE_QSIZE     128
#define FE_SLOT	     0x200000ull /* where a command's headers and buffers go */
#define FE_DATA_MAX  0x40000u	 /* per direction */

struct fe {
	int memfd;
	uint8_t *mem; /* our mapping: its addresses are the "user addresses" */
	struct vs_vhost_drv f;
	uint64_t features; /* negotiated */
	struct vs_vq_drv vq[FE_NQ];
	int kick[FE_NQ], call[FE_NQ], err[FE_NQ]; /* err: the device's "ring broken" signal */
	unsigned kicks[FE_NQ];			  /* kicks fe_post sent */
	bool no_kick; /* fe_post never kicks (a polling device must not need it) */
	bool connected;
	bool indirect; /* fe_run_chain uses an indirect table (at FE_TABLE) */
};

#define FE_TABLE (FE_SLOT + 0xc00)

/* An in-process target: LUN 0 = file (path in file), LUN 1 = ram, both 1 MiB. */
struct tgt {
	char dir[64], sock[96], file[96];
	struct vs_target *t;
	pthread_t thr;
	volatile sig_atomic_t stop;
};

int tgt_start(struct tgt *g, unsigned queues);
int tgt_start_poll(struct tgt *g, unsigned queues, bool poll);
/* lun0_opts: appended to LUN 0's backend spec (e.g. ",gate=write": requests in flight). */
int tgt_start_opts(struct tgt *g, unsigned queues, bool poll, const char *lun0_opts);
void tgt_stop(struct tgt *g);

/* Guest memory: mapped once, kept across connections. */
int fe_init(struct fe *fe);
void fe_fini(struct fe *fe);
/* Connect, negotiate, send the memory table, set up and enable all FE_NQ rings. */
int fe_connect(struct fe *fe, const char *sock);
void fe_disconnect(struct fe *fe);

static inline void *fe_host(struct fe *fe, uint64_t gpa)
{
	return fe->mem + gpa;
}

/* Make a chain of bufs available on queue q, kick, and wait for it to be used (by the
 * call eventfd: a missing interrupt fails).  *used_len: what the device reported. */
int fe_run_chain(struct fe *fe, unsigned q, const struct vs_vq_buf *bufs, unsigned n,
		 uint32_t *used_len);

/* The two halves: make a chain available (and kick), wait for the next used chain. */
int fe_post(struct fe *fe, unsigned q, const struct vs_vq_buf *bufs, unsigned n, uint16_t *head);
int fe_wait_used(struct fe *fe, unsigned q, uint16_t *head, uint32_t *len);

struct fe_cmd {
	unsigned target, lun; /* encoded in the virtio-scsi LUN field */
	uint64_t tag;
	const uint8_t *cdb;
	unsigned cdb_len;
	const void *out; /* data-out */
	uint32_t out_len;
	void *in; /* data-in */
	uint32_t in_len;
	/* results */
	struct vs_virtio_scsi_cmd_resp resp;
	uint32_t used_len;
};

/* One SCSI command on request queue q (2..). */
int fe_scsi(struct fe *fe, unsigned q, struct fe_cmd *c);
/* One TMF on the control queue; *response on success. */
int fe_tmf(struct fe *fe, uint32_t subtype, unsigned target, unsigned lun, uint64_t tag,
	   uint8_t *response);

/* cmocka fixture: a target with 2 request queues and a connected frontend. */
struct fx {
	struct tgt g;
	struct fe fe;
};
int fx_setup(void **state);
/* The same with lun0_opts appended to LUN 0's spec (e.g. ",fail-flush=1"). */
int fx_setup_with(void **state, const char *lun0_opts);
int fx_teardown(void **state);

/* Sense key / ASC of a CHECK CONDITION response, -1 if none. */
int resp_sense_key(const struct vs_virtio_scsi_cmd_resp *r);
int resp_asc(const struct vs_virtio_scsi_cmd_resp *r);

/* Wait (timeout_ms at most) until every request worker thread of this process
 * (vs-worker-N) is blocked in epoll_wait: asleep, its rings' notifications armed, looking
 * at no ring until something wakes it.  0, or -ETIMEDOUT. */
int fe_wait_workers_asleep(unsigned timeout_ms);

/* CDB builders. */
void cdb_rw10(uint8_t cdb[10], uint8_t op, uint32_t lba, uint16_t blocks);

#endif /* TESTS_TARGET_FRONTEND_H */
