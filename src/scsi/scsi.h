/* SPDX-License-Identifier: MIT */
/*
 * SCSI block device emulation (an SPC-4/SBC-3 subset) over a block backend.
 *
 * A struct vs_scsi_dev is one SCSI target holding up to VS_SCSI_MAX_LUNS logical
 * units, numbered by plain integers 0..255 (how a transport encodes them, e.g.
 * virtio-scsi's 8-byte LUN field, is the transport's business).  The device answers
 * REPORT LUNS itself and routes every other command to the addressed LUN; a missing
 * LUN answers INQUIRY with peripheral qualifier 011b and everything else with
 * LOGICAL UNIT NOT SUPPORTED.
 *
 * Completion rule: vs_scsi_exec() returns 0 and then calls cmd->done() exactly once,
 * either before it returns (commands without I/O, and every rejected command) or
 * later, from the bio completions run by vs_io_ctx_reap() on the same context.  The
 * caller must therefore accept done() from inside vs_scsi_exec().  A negative return
 * means the caller broke the contract (see vs_scsi_exec); done() is then not called.
 *
 * I/O: commands queue bios on the struct vs_io_ctx given to vs_scsi_exec().  The caller
 * calls vs_io_ctx_submit() after a batch of vs_scsi_exec() calls AND after every
 * vs_io_ctx_reap(), because a completion may queue the next step of a multi-step
 * command (UNMAP with several descriptors, a long WRITE SAME, VERIFY).
 *
 * Threads: any number of threads may run vs_scsi_exec() on one device at once, each
 * with its own vs_io_ctx.  LUNs may be attached and detached while commands run (the
 * table is published lock-free, see dev.c); a detached LUN may still be in use by
 * commands that looked it up before the detach: destroy it only once they completed.
 */
#ifndef VS_SCSI_H
#define VS_SCSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "backend/backend.h"
#include "proto/scsi_proto.h"

#define VS_SCSI_MAX_LUNS 256

struct vs_scsi_cmd;
typedef void (*vs_scsi_done_fn)(struct vs_scsi_cmd *cmd);

/* Private to src/scsi: progress of a command that does I/O.  In the public struct only
 * so that callers can embed commands without allocation. */
struct vs_scsi_cmd_state {
	struct vs_scsi_lun *lun;
	struct vs_io_ctx *ctx;
	int (*step)(struct vs_scsi_cmd *cmd); /* next stage when all bios are done */
	struct vs_bio bio[2];
	struct iovec split; /* the cut last iovec of a buffer prefix (bio[1]) */
	struct iovec *iovs; /* allocated iovec array, or NULL */
	void *buf;	    /* allocated bounce/parameter buffer, or NULL */
	uint64_t lba;	    /* next block of a multi-step command */
	uint64_t blocks;    /* blocks left of a multi-step command */
	size_t in_xfer;	    /* data-in bytes delivered on success */
	size_t out_xfer;    /* data-out bytes consumed on success */
	uint32_t pos;	    /* multi-step position (e.g. UNMAP descriptor) */
	uint32_t count;	    /* multi-step end */
	int err;	    /* first bio error (-errno) */
	uint8_t nbio;	    /* bios prepared in bio[] */
	uint8_t next;	    /* next bio to submit */
	uint8_t inflight;   /* bios submitted, not completed */
	uint8_t kind;	    /* what an I/O error maps to (private enum) */
	bool fua;
};

struct vs_scsi_cmd {
	/* ---- set by the caller ---- */
	const uint8_t *cdb;	     /* command descriptor block */
	uint32_t cdb_len;	     /* 1..VS_SCSI_CDB_MAX bytes available at cdb */
	const struct iovec *out_iov; /* data-out: initiator -> device */
	int out_iovcnt;
	size_t out_len;		    /* must equal the sum of out_iov lengths */
	const struct iovec *in_iov; /* data-in: device -> initiator */
	int in_iovcnt;
	size_t in_len;	      /* must equal the sum of in_iov lengths */
	uint64_t tag;	      /* for traces only */
	vs_scsi_done_fn done; /* called exactly once (see the completion rule) */
	void *priv;	      /* the caller's */

	/* ---- results, valid in done() ---- */
	uint8_t status;			  /* enum vs_scsi_status */
	uint8_t sense_len;		  /* bytes valid in sense[] (0 unless CHECK CONDITION) */
	bool overrun;			  /* the command had more data than the buffer held */
	uint8_t sense[VS_SCSI_SENSE_MAX]; /* fixed format (response code 0x70) */
	size_t in_residual;		  /* in_len minus data-in bytes written */
	size_t out_residual;		  /* out_len minus data-out bytes used */

	struct vs_scsi_cmd_state st; /* private */
};

/* ---- logical units ---- */

struct vs_scsi_lun;

struct vs_scsi_lun_params {
	struct vs_backend *be; /* where the blocks live; not owned, outlives the LUN */
	uint32_t block_size;   /* 512 or 4096; 0 means 512 */
	bool read_only;	       /* force read-only (also read-only when the backend is) */
	bool power_on_ua;      /* start with a POWER ON unit attention pending */
	const char *name;      /* stable identity: serial and designators derive from it */
	/* Called after the capacity changed (the backend was resized, on the resizer's or
	 * the backend's own thread) while the LUN is attached: blocks is the new capacity,
	 * and CAPACITY DATA HAS CHANGED is already pending.  NULL: nobody is told. */
	void (*resized)(void *arg, unsigned id, uint64_t blocks);
	void *resized_arg;
};

/* 0 or -errno (-EINVAL: bad block size, backend smaller than one block or aligned
 * coarser than the block size). */
int vs_scsi_lun_create(struct vs_scsi_lun **lun, const struct vs_scsi_lun_params *p);
void vs_scsi_lun_destroy(struct vs_scsi_lun *lun);
uint64_t vs_scsi_lun_blocks(const struct vs_scsi_lun *lun);
uint32_t vs_scsi_lun_block_size(const struct vs_scsi_lun *lun);
bool vs_scsi_lun_read_only(const struct vs_scsi_lun *lun);
/* The unit serial number (VPD page 0x80), NUL-terminated. */
const char *vs_scsi_lun_serial(const struct vs_scsi_lun *lun);
/* LOGICAL UNIT RESET / I_T NEXUS RESET: the next command other than INQUIRY, REPORT
 * LUNS and REQUEST SENSE gets UNIT ATTENTION, POWER ON, RESET, OR BUS DEVICE RESET
 * OCCURRED (29h/00h), once.  Commands in flight are not aborted. */
void vs_scsi_lun_reset(struct vs_scsi_lun *lun);

/* ---- the target device ---- */

struct vs_scsi_dev;

int vs_scsi_dev_create(struct vs_scsi_dev **dev);
/* Destroys the attached LUNs too (not their backends). */
void vs_scsi_dev_destroy(struct vs_scsi_dev *dev);
/* The device takes ownership of lun.  -EINVAL: id >= VS_SCSI_MAX_LUNS; -EEXIST: taken. */
int vs_scsi_dev_attach(struct vs_scsi_dev *dev, unsigned id, struct vs_scsi_lun *lun);
/* Gives the LUN back to the caller, or NULL when none is attached at id. */
struct vs_scsi_lun *vs_scsi_dev_detach(struct vs_scsi_dev *dev, unsigned id);
struct vs_scsi_lun *vs_scsi_dev_lun(const struct vs_scsi_dev *dev, unsigned id);
/* Target reset / I_T nexus reset: vs_scsi_lun_reset() on every LUN. */
void vs_scsi_dev_reset(struct vs_scsi_dev *dev);

/* Run one command on LUN lun.  Returns 0 (done() called exactly once, maybe already),
 * or -EINVAL without calling done() when the caller's cmd is malformed: dev, cmd,
 * cmd->done, cmd->cdb or ctx NULL, cdb_len 0 or above VS_SCSI_CDB_MAX, or a length
 * that differs from its iovec total.  Guest-controlled content (CDB bytes, buffer
 * sizes, parameter lists) never makes it fail: it yields a SCSI status and sense.
 *
 * Buffers: a data-in buffer larger than the data gets a residual; a smaller one gets
 * what fits and overrun set (READ then reads the whole blocks that fit).  A data-out
 * buffer smaller than the command's transfer is refused with INVALID FIELD IN CDB
 * (writing fewer blocks than asked would lose data silently). */
int vs_scsi_exec(struct vs_scsi_dev *dev, unsigned lun, struct vs_scsi_cmd *cmd,
		 struct vs_io_ctx *ctx);

#endif /* VS_SCSI_H */
