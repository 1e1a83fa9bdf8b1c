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

struct vs_ini_opts {
	const char *socket;    /* vhost-user-scsi socket of the target */
	unsigned queues;       /* request queues wanted (capped by the target's) */
	unsigned queue_size;   /* descriptors per queue, power of two (default 256) */
	unsigned seg_max;      /* max data segments per request (default 128) */
	unsigned max_sectors;  /* max 512-byte sectors per request (default 2048: 1 MiB) */
	unsigned cmd_per_lun;  /* max requests in flight per LUN per queue (default queue_size) */
	size_t data_mem;       /* bytes of shared memory for vs_ini_alloc (default 64 MiB) */
	bool interrupt;        /* completion threads on call eventfds (else the caller polls) */
	bool reconnect;        /* reconnect and rescan when the target comes back (default on) */
};

struct vs_ini_lun {
	unsigned target, lun;  /* virtio-scsi addressing */
	uint32_t block_size;
	uint64_t num_blocks;
	bool read_only;
	bool thin;             /* UNMAP supported (LBPME) */
	char vendor[9], product[17], revision[5];
};

enum vs_ini_op { VS_INI_READ, VS_INI_WRITE, VS_INI_FLUSH, VS_INI_UNMAP };

struct vs_ini_io;
typedef void (*vs_ini_done_fn)(struct vs_ini_io *io);

/* One request.  Caller-owned and untouched by the caller until done() runs. */
struct vs_ini_io {
	enum vs_ini_op op;
	unsigned lun;            /* index into the LUN table (vs_ini_lun_info) */
	uint64_t lba;            /* in the LUN's blocks */
	uint32_t nblocks;
	const struct iovec *iov; /* buffers from vs_ini_alloc; total = nblocks * block_size */
	int iovcnt;
	bool fua;
	vs_ini_done_fn done;
	void *opaque;
	/* results, valid in done() */
	int result;              /* 0; -EIO with scsi_status/sense; -ENOTCONN target gone;
				    -ECONNRESET reset by a TMF; -ETIMEDOUT; -ENODEV bad target */
	uint8_t response;        /* virtio-scsi response code */
	uint8_t scsi_status;
	uint8_t sense_len;
	uint8_t sense[96];
	uint32_t resid;
	uint64_t submit_ns;      /* CLOCK_MONOTONIC when submitted (for latency) */
	void *priv[4];           /* initiator-private */
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
 * -ENOTCONN (target gone and not back yet).  Requests larger than max_sectors or
 * seg_max are refused, never silently cut. */
int vs_ini_submit(struct vs_ini_queue *q, struct vs_ini_io *io);
/* Reap up to max completions, calling done(); returns how many. */
int vs_ini_poll(struct vs_ini_queue *q, unsigned max);
unsigned vs_ini_inflight(const struct vs_ini_queue *q);

/* Task management, on the control queue: abort one request, or reset a LUN (every
 * pending request of the LUN completes with -ECONNRESET). */
int vs_ini_abort(struct vs_ini *ini, struct vs_ini_queue *q, struct vs_ini_io *io);
int vs_ini_lun_reset(struct vs_ini *ini, unsigned lun);
/* Rescan LUNs (REPORT LUNS, INQUIRY, READ CAPACITY 16). */
int vs_ini_rescan(struct vs_ini *ini);

#endif /* VS_INITIATOR_H */
