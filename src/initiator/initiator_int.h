/* SPDX-License-Identifier: MIT */
/*
 * Private to src/initiator.  The driver's state, in the vioscsi miniport's shape:
 * one adapter (struct vs_ini) owning the vhost-user connection, one shared memory
 * region and the virtqueues; per request queue a slot table (SRB extensions: request
 * and response headers, indirect table, UNMAP parameter list, all preallocated in the
 * shared region) behind a per-queue lock.
 *
 * Locks, outermost first: conn_lock (lifecycle, reconnection, rescans, TMFs), then a
 * queue's lock, the control or event queue's lock, lun_lock, alloc_lock.  No lock is
 * held while a completion callback runs.
 */
#ifndef VS_INITIATOR_INT_H
#define VS_INITIATOR_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include <vioscope/initiator.h>
#include <vioscope/trace.h>

#include "proto/scsi_proto.h"
#include "proto/virtio_scsi_proto.h"
#include "util/util.h"
#include "vhost/vhost_drv.h"
#include "virtio/virtio.h"

#define INI_AUX_QSIZE	16   /* control and event rings */
#define INI_EVENTS	8    /* event buffers kept posted */
#define INI_DIRECT_MAX	4    /* chains up to this long go direct, longer ones indirect */
#define INI_POLL_BATCH	32   /* completions reaped per lock hold */
#define INI_KICK_BATCH	4    /* resubmissions from callbacks before an early kick */
#define INI_UA_RETRIES	2    /* UNIT ATTENTION retries of block commands */
#define INI_SCAN_BUF	4096 /* data buffer of scan commands */
#define INI_SEG_MAX_CAP 256  /* data segments: the target's per-direction cap */
#define INI_SECTORS_CAP 0xffff
#define INI_LUN_NONE	0xffff

/* Slot layout in shared memory: request header, response header, UNMAP parameters,
 * indirect table; each part on its own cache lines. */
#define SLOT_REQ_OFF   0
#define SLOT_RESP_OFF  64
#define SLOT_PARAM_OFF 192
#define SLOT_TABLE_OFF 256

enum {
	SLOT_PASSTHRU = 1, /* vs_ini_submit_cdb: no UA retry, no cmd_per_lun accounting */
	SLOT_RESET = 2,	   /* pending when a LUN reset started: UA means reset, not retry */
	SLOT_ORPHAN = 4,   /* completed to the caller (timeout); waits for the device */
	SLOT_DATA_IN = 8,
	SLOT_UNMAP = 16,  /* the data-out is the slot's UNMAP parameter list */
	SLOT_NODATA = 32, /* the caller's iovecs are not part of the command */
};
#define INI_ANY_LEN UINT64_MAX

struct ini_slot {
	struct vs_ini_io *io; /* NULL when free or orphaned */
	struct vs_virtio_scsi_cmd_req *req;
	struct vs_virtio_scsi_cmd_resp *resp;
	uint8_t *param; /* UNMAP parameter list */
	void *table;	/* indirect descriptors, seg_max + 2 */
	uint64_t gpa;	/* of the slot's shared part (req at +0 ...) */
	uint64_t tag;
	uint64_t lun_key;  /* the 8 LUN bytes, for TMF matching */
	uint32_t gen;	   /* bumped on every use: part of the tag */
	uint32_t data_len; /* bytes of data the command moves */
	uint16_t lun_idx;  /* cmd_per_lun accounting, INI_LUN_NONE for pass-through */
	uint8_t flags;
	uint8_t retries;
};

/* A virtqueue and its notifiers (index: 0 control, 1 event, 2.. request). */
struct ini_vq {
	struct vs_vq_drv vq;
	unsigned idx;
	unsigned size;
	uint8_t *ring; /* in shared memory */
	int kick_fd;
	int call_fd; /* -1: polled */
};

struct vs_ini_queue {
	pthread_mutex_t lock;
	struct ini_vq v;
	struct vs_vring_used *used; /* the ring's, for vs_ini_poll's look without the lock */
	uint16_t seen_used;	    /* used idx reaped up to (atomic: the lock-free empty check) */
	bool ready;		    /* connected: submit and poll allowed (atomic writes) */
	unsigned in_poll;	    /* pollers running callbacks: the last one kicks */
	uint64_t submitted, kicks;  /* statistics, traced at close */
	unsigned inflight;	    /* slots held by requests (orphans included) */
	unsigned nfree;
	uint16_t *free_slots;	/* stack of free slot indexes */
	uint16_t *head_slot;	/* chain head -> slot */
	struct ini_slot *slots; /* ini->nslots */
	struct vs_ini *ini;
	unsigned num;	  /* request queue number (0..) */
	pthread_t thread; /* interrupt mode: the DPC analog */
	bool thread_started;
	atomic_bool thread_stop;
	uint16_t lun_inflight[VS_INI_MAX_LUNS];
};

/* What the submit path reads of a LUN, lock-free (rescans store with atomics). */
struct ini_lun_hot {
	uint64_t lun_key;
	uint64_t num_blocks;
	uint32_t block_size;
	uint32_t present;
};

struct vs_ini {
	struct vs_ini_opts opts; /* as settled by the driver (defaults filled in) */
	char *socket_path;
	struct vs_vhost_drv vhost; /* the connection to the target */
	pthread_mutex_t conn_lock;
	atomic_bool connected; /* rings running and LUNs scanned */
	atomic_uint connections;

	/* negotiation and configuration */
	uint64_t dev_features, features, proto_features;
	unsigned nqueues, queue_size, seg_max, max_sectors, cmd_per_lun, nslots;

	/* the shared region: gpa = offset, uva = our address */
	int memfd;
	int log_fd; /* opts.dirty_log: the dirty log's memory file (-1: none) */
	uint64_t log_bytes;
	/* opts.keep_inflight: the target's in-flight region (GET_INFLIGHT_FD), kept for the
	 * initiator's life and handed to every later connection (SET_INFLIGHT_FD) */
	int inflight_fd; /* -1: none yet */
	uint64_t inflight_size, inflight_offset;
	uint16_t inflight_queues, inflight_qsize;
	/* Disconnected with the requests in flight kept: the rings hold what the last target
	 * saw (conn_lock).  resume: this connection sets them up again as they are. */
	bool keep_rings, resume;
	uint8_t *base;
	size_t size, data_off, alloc_next;
	pthread_mutex_t alloc_lock;

	/* queues */
	struct ini_vq ctl, evt;
	pthread_mutex_t ctl_lock, evt_lock;
	struct vs_ini_queue *q;		    /* nqueues */
	uint64_t tmf_gpa;		    /* TMF request + response */
	uint64_t evt_gpa;		    /* INI_EVENTS event buffers */
	uint8_t evt_of_head[INI_AUX_QSIZE]; /* event ring head -> event buffer */
	uint8_t *scan_buf;		    /* INI_SCAN_BUF, in the data area */

	/* LUN table */
	pthread_mutex_t lun_lock;
	atomic_uint nluns;
	struct vs_ini_lun luns[VS_INI_MAX_LUNS];
	struct ini_lun_hot hot[VS_INI_MAX_LUNS];
	atomic_uint lun_generation; /* +1 each time a scan changes the table */

	/* background */
	pthread_t ctl_thread;
	bool ctl_thread_started;
	atomic_bool stop;
	atomic_bool reset_wanted; /* the device misbehaved: drop and reconnect */
	atomic_bool rescan_wanted;
	int wake_fd; /* eventfd: wakes the control thread */
	int sync_fd; /* eventfd: a synchronous command completed */
};

static inline uint64_t ini_gpa(const struct vs_ini *ini, const void *p)
{
	return (uint64_t)((const uint8_t *)p - ini->base);
}

static inline uint64_t ini_lun_key(const uint8_t lun[8])
{
	uint64_t k;
	memcpy(&k, lun, 8);
	return k;
}

/* shm.c: the region and its layout */
int ini_shm_create(struct vs_ini *ini);
void ini_shm_destroy(struct vs_ini *ini);

/* lifecycle.c: the driver's steps, in order */
int ini_initialize(struct vs_ini *ini);
int ini_negotiate(struct vs_ini *ini);
int ini_settle_config(struct vs_ini *ini, bool first);
int ini_setup_inflight(struct vs_ini *ini);
int ini_setup_queues(struct vs_ini *ini);
int ini_mark_ready(struct vs_ini *ini);
/* ... then ini_scan_luns (scan.c).  All of the above after the first open (conn_lock held). */
int ini_reconnect(struct vs_ini *ini);
/* Close the socket after a failure (conn_lock held).  may_keep: the target went away (not a
 * reset the driver wants): with keep_inflight and INFLIGHT_SHMFD negotiated, the requests
 * in flight stay in flight for the next target to resume; otherwise they fail. */
void ini_drop_connection(struct vs_ini *ini, bool may_keep);
/* Whether a target going away now keeps the requests in flight (see ini_drop_connection). */
bool ini_may_keep_inflight(const struct vs_ini *ini);
/* Stop the queues without failing what they hold (submissions get -ENOTCONN). */
void ini_hold_queues(struct vs_ini *ini);

/* complete.c */
void ini_fail_all(struct vs_ini *ini, int result, const char *why);
int ini_start_cq_threads(struct vs_ini *ini);
void ini_stop_cq_threads(struct vs_ini *ini);
void ini_queue_reset_slots(struct vs_ini_queue *q);
int ini_map_response(struct vs_ini_io *io, const struct vs_virtio_scsi_cmd_resp *resp,
		     uint32_t used_len, uint32_t data_len);

/* submit.c */
/* cdb: VS_VIRTIO_SCSI_CDB_SIZE bytes, zero padded; expect: the bytes the iovecs must hold
 * (INI_ANY_LEN: whatever they hold). */
int ini_submit(struct vs_ini_queue *q, struct vs_ini_io *io, const uint8_t lun[8], uint16_t lun_idx,
	       const uint8_t *cdb, uint8_t flags, uint64_t expect);
/* Re-add a slot whose io is still attached (UNIT ATTENTION retry); queue lock held. */
int ini_slot_requeue(struct vs_ini_queue *q, uint16_t s);
/* Take io out of its slot without completing it (the slot becomes an orphan). */
bool ini_detach(struct vs_ini_queue *q, struct vs_ini_io *io);

/* scan.c */
int ini_scan_luns(struct vs_ini *ini);

/* sync.c: synchronous commands and bounded waits */
int ini_exec_sync(struct vs_ini *ini, unsigned target, unsigned lun, const uint8_t *cdb,
		  unsigned cdb_len, uint32_t len, bool data_in, struct vs_ini_io *res);
/* Wait up to timeout_us for fd (< 0: none) or the socket's hang-up: 1 fd ready (drained),
 * 0 timeout, -ENOTCONN when the target is gone. */
int ini_wait_fd(struct vs_ini *ini, int fd, unsigned timeout_us);

/* control.c: control thread, event queue, TMFs */
int ini_start_ctl_thread(struct vs_ini *ini);
/* Ask the control thread to drop the connection (broken ring, failed kick). */
void ini_schedule_reset(struct vs_ini *ini, const char *why);
void ini_stop_ctl_thread(struct vs_ini *ini);
int ini_post_events(struct vs_ini *ini);
enum ini_event_action { INI_EV_NONE, INI_EV_RESCAN, INI_EV_FULL_RESCAN };
enum ini_event_action ini_event_action(const struct vs_virtio_scsi_event *ev);

/* submit.c and complete.c: wake the device for what a request queue's ring holds (the
 * kick eventfd); a failed write means the target is gone: reset.  The caller records the
 * kick's event, saying why it kicks. */
static inline void ini_kick(struct vs_ini_queue *q)
{
	uint64_t one = 1;

	if (write(q->v.kick_fd, &one, sizeof(one)) != sizeof(one))
		ini_schedule_reset(q->ini, "kick eventfd write failed");
}

#endif /* VS_INITIATOR_INT_H */
