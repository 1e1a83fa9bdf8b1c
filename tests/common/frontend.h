/* SPDX-License-Identifier: MIT */
/*
 * The tests' vhost-user frontend: what QEMU and a guest driver do to a target, over its real
 * socket, and whatever they should not (any message with any fds, rings rewritten under the
 * target, memory that shrinks).  The target may run in this process or as a process
 * (target.h): the frontend only knows its socket.
 *
 * Guest memory (struct gmem, FE_MEM bytes of one memfd; regions as QEMU makes them: a hole
 * at [0xa0000, 0xc0000)):
 *   FE_RING(q)  0x100000 + q * 1 MiB     ring of queue q (up to 32768 entries)
 *   FE_SLOT(s)  0x800000 + s * 0x4000    command slot s: request header (+0), response
 *                                         (+0x100), indirect table (+0x200), data (+0x1000,
 *                                         FE_SLOT_DATA bytes)
 *   FE_BIG      0x2000000 ... 0x4000000  a 32 MiB data buffer
 * Every wait has a deadline; functions return 0 / -errno and tests assert.
 */
#ifndef TESTS_COMMON_FRONTEND_H
#define TESTS_COMMON_FRONTEND_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/virtio_scsi_proto.h"
#include "vhost/vhost_drv.h"
#include "vhost/vhost_msg.h"
#include "virtio/virtio.h"

#define FE_MEM	      (64ull << 20)
#define FE_GAP_START  0xa0000ull
#define FE_GAP_END    0xc0000ull
#define FE_RING(q)    (0x100000ull + (uint64_t)(q)*0x100000)
#define FE_SLOT(s)    (0x800000ull + (uint64_t)(s)*0x4000)
#define FE_SLOTS      1024
#define FE_SLOT_RESP  0x100
#define FE_SLOT_TABLE 0x200
#define FE_SLOT_DATA  0x1000
#define FE_DATA_MAX   0x3000u /* data a slot holds */
#define FE_BIG	      0x2000000ull
#define FE_BIG_LEN    (32u << 20)
#define FE_MAXQ	      6 /* control, event, up to 4 request queues */
#define FE_WAIT_MS    20000

/* ---- guest memory ------------------------------------------------------------------------ */
struct gmem {
	int fd;
	uint8_t *mem; /* our mapping: its addresses are the "user addresses" */
};
int gmem_init(struct gmem *g);
void gmem_fini(struct gmem *g);
static inline void *gmem_host(struct gmem *g, uint64_t gpa)
{
	return g->mem + gpa;
}
/* The two regions QEMU would send for this memory (fd = g->fd for both). */
void gmem_regions(struct gmem *g, struct vs_vhost_mem_region r[2]);

/* ---- the frontend ------------------------------------------------------------------------ */
struct fe {
	struct vs_vhost_drv drv; /* drv.sock: the connection */
	struct gmem *g;
	uint64_t features; /* negotiated */
	unsigned nq;	   /* rings set up */
	unsigned qsize[FE_MAXQ];
	struct vs_vq_drv vq[FE_MAXQ];
	int kick[FE_MAXQ], call[FE_MAXQ], err[FE_MAXQ]; /* err: the device's "ring broken" */
	unsigned kicks[FE_MAXQ];			/* kicks sent */
	bool no_kick;  /* chains are made available without kicking */
	bool indirect; /* chains go in an indirect table (a command's in its slot, fe_post_chain's
			  at FE_CHAIN_TABLE): INDIRECT_DESC negotiated, and not o->direct */
};
#define FE_CHAIN_TABLE (FE_SLOT(FE_SLOTS - 2) + FE_SLOT_TABLE)

struct fe_opts {
	unsigned nq;		 /* rings to set up (2 + request queues) */
	unsigned qsize[FE_MAXQ]; /* 0: 128 */
	bool no_indirect;	 /* do not negotiate INDIRECT_DESC */
	bool direct;		 /* negotiate it, but post direct chains (fe->indirect false) */
	bool hotplug;		 /* negotiate VIRTIO_SCSI_F_HOTPLUG (events of LUN changes) */
	bool err_fds;		 /* give every ring an error eventfd (SET_VRING_ERR) */
	bool no_rings;		 /* negotiate and send the memory table only */
	bool log_shmfd;		 /* ack VHOST_USER_PROTOCOL_F_LOG_SHMFD (dirty logging) */
};

/* A frontend that is not connected (fe_close does nothing to it). */
void fe_clear(struct fe *fe);
/* Connect (no message yet). */
int fe_connect(struct fe *fe, const char *sock, struct gmem *g);
/* Negotiate, send the memory table, set up and enable the rings. */
int fe_setup(struct fe *fe, const struct fe_opts *o);
/* connect + setup. */
int fe_open(struct fe *fe, const char *sock, struct gmem *g, const struct fe_opts *o);
/* Close the connection and the rings' fds (again: nothing). */
void fe_close(struct fe *fe);

/* Send any message: payload of size bytes, nfds fds. */
int fe_send(struct fe *fe, uint32_t request, uint32_t flags, const void *payload, uint32_t size,
	    const int *fds, unsigned nfds);
/* Receive a reply (the socket's receive timeout bounds it). */
int fe_reply(struct fe *fe, struct vs_vhost_msg *reply);
/* Send with NEED_REPLY and return the u64 status the target answered (0 ok), or -errno. */
int64_t fe_ask(struct fe *fe, uint32_t request, const void *payload, uint32_t size, const int *fds,
	       unsigned nfds);
/* The target closed the connection within timeout_ms. */
bool fe_dropped(struct fe *fe, int timeout_ms);

/* Guest memory at gpa, through the frontend. */
static inline void *fe_host(struct fe *fe, uint64_t gpa)
{
	return gmem_host(fe->g, gpa);
}

/* ---- chains -------------------------------------------------------------------------------- */
/* Make a chain of bufs available on queue q (and kick, unless no_kick or the device said it
 * needs none); *head identifies it. */
int fe_post_chain(struct fe *fe, unsigned q, const struct vs_vq_buf *bufs, unsigned n,
		  uint16_t *head);
/* Wait for the next used chain of queue q (by its call fd, or polling when it has none). */
int fe_wait_used(struct fe *fe, unsigned q, uint16_t *head, uint32_t *len, int timeout_ms);
/* post + wait: the chain must come back next; *used_len what the device reported. */
int fe_run_chain(struct fe *fe, unsigned q, const struct vs_vq_buf *bufs, unsigned n,
		 uint32_t *used_len);

/* ---- SCSI commands ------------------------------------------------------------------------- */
struct fe_cmd {
	unsigned target, lun; /* encoded in the virtio-scsi LUN field */
	uint64_t tag;
	uint8_t cdb[32];
	const void *out; /* data-out, copied into the slot (<= FE_DATA_MAX) ... */
	uint32_t out_len;
	uint64_t out_gpa; /* ... or read from here, when set (e.g. FE_BIG) */
	void *in;	  /* data-in, copied here from the slot by fe_result (may be NULL) ... */
	uint32_t in_len;
	uint64_t in_gpa; /* ... or written here, when set */
	/* results */
	struct vs_virtio_scsi_cmd_resp resp;
	uint32_t used_len;
};

/* Make command c available on queue q using slot s; *head identifies it. */
int fe_post(struct fe *fe, unsigned q, unsigned s, const struct fe_cmd *c, uint16_t *head);
/* Slot s's response (and data-in, when c->in) into c. */
void fe_result(struct fe *fe, unsigned s, struct fe_cmd *c);
/* Data-in of slot s. */
void *fe_slot_in(struct fe *fe, unsigned s);
/* post + wait + result, on slot 0 of queue q. */
int fe_scsi(struct fe *fe, unsigned q, struct fe_cmd *c);
/* One TMF on the control queue (slot FE_SLOTS - 1); *response. */
int fe_tmf(struct fe *fe, uint32_t subtype, unsigned target, unsigned lun, uint64_t tag,
	   uint8_t *response);
/* A READ(10) of one 512-byte block at lba of LUN 0 on queue q: 0 when it came back GOOD. */
int fe_read_ok(struct fe *fe, unsigned q, uint32_t lba);

/* Sense of a CHECK CONDITION response: key, ASC, ASCQ (-1 when absent). */
int sense_key(const struct vs_virtio_scsi_cmd_resp *r);
int sense_asc(const struct vs_virtio_scsi_cmd_resp *r);
int sense_ascq(const struct vs_virtio_scsi_cmd_resp *r);
/* Sense-key specific field pointer (SKSV set): the byte, -1 when absent. */
int sense_field(const struct vs_virtio_scsi_cmd_resp *r);

/* CDB builders (big-endian fields). */
void cdb16(uint8_t *cdb, uint8_t op, uint8_t b1, uint64_t lba, uint32_t n);
void cdb10(uint8_t *cdb, uint8_t op, uint8_t b1, uint32_t lba, uint16_t n);

/* Wait (timeout_ms at most) until every request worker thread of this process (vs-worker-N:
 * a target in this process) sleeps in epoll_wait: its rings' notifications armed, looking
 * at no ring until something wakes it.  0, or -ETIMEDOUT. */
int fe_wait_workers_asleep(unsigned timeout_ms);

#endif /* TESTS_COMMON_FRONTEND_H */
