/* SPDX-License-Identifier: MIT */
/*
 * The user-space virtio-scsi initiator (the driver): a vhost-user frontend built
 * like the vioscsi miniport.  API in the liburing spirit: open a connection, learn
 * the LUNs, submit I/O on a queue with a completion callback, poll the queue (or
 * let a completion thread per queue call back).  Every function returns 0 or a
 * negative errno.
 *
 * Data buffers must live in the initiator's shared memory (vs_ini_alloc): that is
 * the memory the target can see, as guest RAM is for a real device.
 */
#ifndef VS_INITIATOR_H
#define VS_INITIATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct vs_ini;
struct vs_ini_queue;

#define VS_INI_MAX_QUEUES 64  /* request queues */
#define VS_INI_MAX_LUNS	  256 /* entries in the LUN table */

struct vs_ini_opts {
	const char *socket;   /* vhost-user-scsi socket of the target */
	unsigned queues;      /* request queues wanted (capped by the target's) */
	unsigned queue_size;  /* descriptors per queue, power of two (default 256) */
	unsigned seg_max;     /* max data segments per request (default 128) */
	unsigned max_sectors; /* max 512-byte sectors per request (default 2048: 1 MiB) */
	unsigned cmd_per_lun; /* max requests in flight per LUN per queue (default queue_size) */
	size_t data_mem;      /* bytes of shared memory for vs_ini_alloc (default 64 MiB) */
	bool interrupt;	      /* completion threads on call eventfds (else the caller polls) */
	bool reconnect;	      /* reconnect and rescan when the target comes back (a zeroed
				 struct leaves it off: set it to get reconnection) */
	unsigned timeout_ms;  /* TMF, scan command and reset drain timeout (default 10000) */
	/* Called after a scan changed the LUN table (a LUN appeared or went away, a capacity
	 * changed): scans follow the target's events (hot-plug, parameter change, events
	 * missed) on the initiator's control thread, or run in vs_ini_rescan on the caller's.
	 * It must not call vs_ini_rescan, TMFs or close (they wait for the scan).  Table
	 * indices may shift when a LUN goes away: look LUNs up again by their number. */
	void (*luns_changed)(void *arg);
	void *luns_changed_arg;
	/* Act as a frontend migrating its guest would: share a dirty log (one bit per 4 KiB of
	 * the shared memory), ask for VHOST_F_LOG_ALL and the used rings' logging, so that the
	 * target marks every page it writes (what a live migration costs the target). */
	bool dirty_log;
	/* With reconnect: requests in flight when the target goes away stay in flight and
	 * complete once a restarted target resubmits them, when the target offers
	 * VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD (the initiator asks for its in-flight region at
	 * the first connection and hands it to every later one, resuming the rings where they
	 * were).  Without that feature, or when the driver itself resets the connection (a
	 * broken ring, a task management timeout), they fail with -ENOTCONN as without the
	 * option.  Submissions while the target is away still fail with -ENOTCONN; the
	 * callbacks of kept requests run after the reconnection; vs_ini_close fails whatever is
	 * still kept with -ENOTCONN. */
	bool keep_inflight;
	bool test_drop_flushes; /* test only: a FLUSH sends TEST UNIT READY instead and
				   "succeeds" (a driver that loses flushes, for the crash-state
				   checker to catch) */
};

struct vs_ini_lun {
	unsigned target, lun; /* virtio-scsi addressing */
	uint32_t block_size;
	uint64_t num_blocks;
	bool read_only;
	bool thin; /* UNMAP supported (LBPME) */
	char vendor[9], product[17], revision[5];
};

enum vs_ini_op { VS_INI_READ, VS_INI_WRITE, VS_INI_FLUSH, VS_INI_UNMAP };

struct vs_ini_io;
typedef void (*vs_ini_done_fn)(struct vs_ini_io *io);

/* One request.  Caller-owned and untouched by the caller until done() runs. */
struct vs_ini_io {
	enum vs_ini_op op;
	unsigned lun; /* index into the LUN table (vs_ini_lun_info) */
	uint64_t lba; /* in the LUN's blocks */
	uint32_t nblocks;
	const struct iovec *iov; /* buffers from vs_ini_alloc; total = nblocks * block_size */
	int iovcnt;
	bool fua;
	vs_ini_done_fn done;
	void *opaque;
	/* results, valid in done() */
	int result;	  /* 0; -EIO with scsi_status/sense (also a short transfer);
			     -ENOTCONN target gone; -ECONNRESET reset by a TMF;
			     -ECANCELED aborted by a TMF; -ETIMEDOUT never given back
			     after a reset; -ENODEV bad target; -ENXIO incorrect LUN;
			     -EBUSY, -EAGAIN device or LUN busy; -EOVERFLOW overrun;
			     -ENOLINK, -EREMOTEIO, -EBADE transport, target, nexus
			     failure; -EPROTO malformed (see vs_ini_result_errno) */
	uint8_t response; /* virtio-scsi response code */
	uint8_t scsi_status;
	uint8_t sense_len;
	uint8_t sense[96];
	uint32_t resid;
	uint64_t submit_ns; /* CLOCK_MONOTONIC when submitted (for latency); submit
			       sets it only when 0: a caller that stamps it pays once */
	void *priv[4];	    /* initiator-private */
};

int vs_ini_open(struct vs_ini **ini, const struct vs_ini_opts *opts);
void vs_ini_close(struct vs_ini *ini);
unsigned vs_ini_lun_count(const struct vs_ini *ini);
int vs_ini_lun_info(const struct vs_ini *ini, unsigned idx, struct vs_ini_lun *out);
unsigned vs_ini_queue_count(const struct vs_ini *ini);
struct vs_ini_queue *vs_ini_get_queue(struct vs_ini *ini, unsigned idx);

/* Shared memory for data buffers; freed with the initiator. */
void *vs_ini_alloc(struct vs_ini *ini, size_t size, size_t align);

/* Submit: 0, -EBUSY (queue full: poll and retry), -EINVAL (limits, bad LUN/range),
 * -EFAULT (a buffer outside vs_ini_alloc memory), -ENOTCONN (target gone and not back
 * yet).  Requests larger than max_sectors or seg_max are refused, never silently cut.
 * READ/WRITE: iov total = nblocks * block_size; FLUSH: lba/nblocks a range (0/0: all),
 * no data; UNMAP: one range, no data (the parameter list is the initiator's). */
int vs_ini_submit(struct vs_ini_queue *q, struct vs_ini_io *io);
/* SCSI pass-through (the SPTI analog): any CDB (<= 32 bytes) to any target/LUN address,
 * data in one direction (data_in: device to us) through io->iov; io->op, lun, lba,
 * nblocks, fua are ignored.  Limits as for vs_ini_submit; not retried on UNIT ATTENTION. */
int vs_ini_submit_cdb(struct vs_ini_queue *q, struct vs_ini_io *io, unsigned target, unsigned lun,
		      const uint8_t *cdb, unsigned cdb_len, bool data_in);
/* Reap up to max completions, calling done(); returns how many. */
int vs_ini_poll(struct vs_ini_queue *q, unsigned max);
unsigned vs_ini_inflight(const struct vs_ini_queue *q);

/* Task management, on the control queue: abort one request (it completes with
 * -ECANCELED, or normally if it finished first; -ENOENT if not in flight on q), or reset a
 * LUN (every request of the LUN pending at the call completes before the call returns:
 * with -ECONNRESET, its own result if it had finished, or -ETIMEDOUT if the target never
 * gave it back within timeout_ms).  0, -EINVAL, -ENOTCONN, -ETIMEDOUT, -ENODEV (no such
 * LUN at the target), -EOPNOTSUPP (rejected), -EIO. */
int vs_ini_abort(struct vs_ini *ini, struct vs_ini_queue *q, struct vs_ini_io *io);
int vs_ini_lun_reset(struct vs_ini *ini, unsigned lun);
/* Rescan LUNs (REPORT LUNS, INQUIRY, READ CAPACITY 16).  TMFs and rescans wait for the
 * target: call them from an application thread, never from a done() callback. */
int vs_ini_rescan(struct vs_ini *ini);

/* +1 each time a scan changed the LUN table (see luns_changed): compare two readings to
 * learn that LUNs changed without a callback. */
unsigned vs_ini_lun_generation(const struct vs_ini *ini);

/* Send the memory table again, describing the shared memory as nregions (1..8) regions
 * split inside the data area, as a frontend does when guest memory changes.  Requests may
 * be in flight: the target stops and restarts its rings around the change.  0, -EINVAL,
 * -ENOTCONN, or the refusal (the connection is then reset). */
int vs_ini_remap_memory(struct vs_ini *ini, unsigned nregions);

/* The errno a virtio-scsi response code and SCSI status map to (io->result). */
int vs_ini_result_errno(uint8_t response, uint8_t scsi_status);
/* Settled limits (after negotiation with the target). */
struct vs_ini_limits {
	unsigned queues, queue_size, seg_max, max_sectors, cmd_per_lun;
	uint64_t features; /* negotiated virtio features */
};
void vs_ini_get_limits(const struct vs_ini *ini, struct vs_ini_limits *out);
/* Connections made so far (1 after open; +1 per reconnection). */
unsigned vs_ini_connections(const struct vs_ini *ini);

#endif /* VS_INITIATOR_H */
