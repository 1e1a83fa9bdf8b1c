/* SPDX-License-Identifier: MIT */
/*
 * Private to src/scsi: wire accessors, opcodes, limits, the LUN and device objects,
 * and the helpers the command files share.
 *
 * Command handlers have the shape  int h(struct vs_scsi_lun *, struct vs_scsi_cmd *):
 * they return VS_SCSI_DONE when the result (status, sense, data-in) is set and the
 * dispatcher should complete the command, or VS_SCSI_ASYNC once vs_scsi_io_start()
 * owns it (from then on the handler must not touch cmd: it may be complete already).
 */
#ifndef VS_SCSI_INT_H
#define VS_SCSI_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <vioscope/trace.h>

#include "scsi/scsi.h"
#include "util/util.h"

/* ---- limits we advertise (Block Limits VPD) and enforce ---- */
#define VS_SCSI_MAX_XFER_BYTES	(32u << 20) /* READ/WRITE/VERIFY transfer length */
#define VS_SCSI_OPT_XFER_BYTES	(1u << 20)
#define VS_SCSI_MAX_UNMAP_BYTES (1ull << 30) /* sum of one UNMAP's descriptors */
#define VS_SCSI_MAX_UNMAP_DESC	64
#define VS_SCSI_MAX_WS_BYTES	(1ull << 30) /* WRITE SAME number of blocks */
#define VS_SCSI_SERIAL_LEN	16
#define VS_SCSI_VENDOR		"VIOSCOPE"
#define VS_SCSI_PRODUCT		"vioscope disk"
#define VS_SCSI_REVISION	"0001"

struct vs_scsi_lun {
	struct vs_backend *be;
	uint64_t blocks; /* atomic: the backend may be resized (lun_blocks()) */
	uint32_t block_size;
	unsigned block_shift;
	unsigned id;   /* LUN number while attached (traces) */
	bool attached; /* atomic: in a device's table (the resize hook names the LUN by id) */
	void (*resized)(void *arg, unsigned id, uint64_t blocks); /* vs_scsi_lun_params */
	void *resized_arg;
	bool read_only;
	bool discard; /* backend deallocates; such blocks read as zeros */
	int wce;      /* atomic: write cache enabled (MODE SELECT caching) */
	int ua;	      /* atomic: pending unit attention ASC/ASCQ, 0 none */
	uint32_t max_xfer_blocks;
	uint32_t opt_xfer_blocks;
	uint32_t max_unmap_blocks; /* 0 without discard */
	uint32_t max_ws_blocks;
	uint16_t granularity; /* 4 KiB in blocks (1 for 4096-byte blocks) */
	uint8_t naa[16];      /* NAA 6 designator */
	char serial[VS_SCSI_SERIAL_LEN + 1];
	char name[64];
};

struct vs_scsi_dev {
	struct vs_scsi_lun *luns[VS_SCSI_MAX_LUNS];
};

enum { VS_SCSI_DONE = 0, VS_SCSI_ASYNC = 1 };

/* What an I/O error of a command maps to (cmd->st.kind). */
enum vs_scsi_io_kind {
	VS_IO_KIND_READ,
	VS_IO_KIND_WRITE,
};

/* ---- sense (sense.c) ---- */
/* Fill cmd's status/sense: CHECK CONDITION with key and asc (ASC << 8 | ASCQ). */
void vs_scsi_sense(struct vs_scsi_cmd *cmd, uint8_t key, uint16_t asc);
/* Same, with a sense-key specific field pointer (in_cdb: CDB, else parameter list;
 * bit < 0: no bit pointer). */
void vs_scsi_sense_field(struct vs_scsi_cmd *cmd, uint8_t key, uint16_t asc, bool in_cdb,
			 uint16_t byte, int bit);
/* Set the INFORMATION field (VALID bit) of the sense already in cmd. */
void vs_scsi_sense_info(struct vs_scsi_cmd *cmd, uint32_t info);
/* Build fixed-format sense into buf (>= 18 bytes); returns its length. */
size_t vs_scsi_sense_build(uint8_t *buf, uint8_t key, uint16_t asc);

/* Rejections: sense plus a warning trace naming the reason.  Use the macros, which
 * pass the calling function's name (the trace says which handler rejected). */
void vs_scsi__reject(struct vs_scsi_cmd *cmd, uint8_t key, uint16_t asc, const char *why,
		     const char *caller);
void vs_scsi__bad_cdb(struct vs_scsi_cmd *cmd, uint16_t byte, int bit, const char *why,
		      const char *caller);
void vs_scsi__bad_param(struct vs_scsi_cmd *cmd, uint16_t byte, int bit, const char *why,
			const char *caller);
#define vs_scsi_reject(cmd, key, asc, why)     vs_scsi__reject(cmd, key, asc, why, __func__)
#define vs_scsi_bad_cdb(cmd, byte, bit, why)   vs_scsi__bad_cdb(cmd, byte, bit, why, __func__)
#define vs_scsi_bad_param(cmd, byte, bit, why) vs_scsi__bad_param(cmd, byte, bit, why, __func__)
#define vs_scsi_param_len_error(cmd, why)                                                          \
	vs_scsi_reject(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_PARAM_LIST_LENGTH_ERROR, why)
/* LOGICAL BLOCK ADDRESS OUT OF RANGE for [lba, lba + n), traced. */
void vs_scsi__lba_out_of_range(struct vs_scsi_cmd *cmd, uint64_t lba, uint64_t n,
			       const char *caller);
#define vs_scsi_lba_out_of_range(cmd, lba, n) vs_scsi__lba_out_of_range(cmd, lba, n, __func__)
/* A failed bio (-errno) as status/sense for a command of the given kind. */
void vs_scsi_sense_errno(struct vs_scsi_cmd *cmd, int err, enum vs_scsi_io_kind kind);

/* ---- data buffers (iov.c) ---- */
/* Return len bytes of response, cut to the allocation length and the buffer. */
void vs_scsi_data_in(struct vs_scsi_cmd *cmd, const void *buf, size_t len, size_t alloc);
/* Fetch up to want bytes of parameter data from data-out into buf; returns how many
 * (less when the buffer is shorter: overrun is then set). */
size_t vs_scsi_data_out(struct vs_scsi_cmd *cmd, void *buf, size_t want);
static inline bool vs_scsi_all_zero(const uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

/* ---- I/O (io.c) ---- */
/* Prepare bio[idx] (no data for FLUSH/DISCARD/WRITE_ZEROES). */
void vs_scsi_io_prep(struct vs_scsi_cmd *cmd, unsigned idx, enum vs_bio_op op, uint64_t offset,
		     uint64_t len, const struct iovec *iov, int iovcnt);
/* Prepare READ/WRITE bios covering the first len bytes of iov[]: bio[0] takes the whole
 * iovecs, bio[1] the cut one.  -EINVAL when the iovecs hold less than len. */
int vs_scsi_io_prep_prefix(struct vs_scsi_cmd *cmd, enum vs_bio_op op, uint64_t offset,
			   const struct iovec *iov, int iovcnt, size_t len);
/* Submit the prepared bios; the command completes when they are done and step (if set)
 * has nothing more to do.  Always returns VS_SCSI_ASYNC. */
int vs_scsi_io_start(struct vs_scsi_cmd *cmd);
/* The LUN's current number of blocks (it changes when the backend is resized). */
static inline uint64_t vs_scsi_lun_nblocks(const struct vs_scsi_lun *lun)
{
	return __atomic_load_n(&lun->blocks, __ATOMIC_RELAXED);
}
/* Range check for [lba, lba + n) */
static inline bool vs_scsi_lba_ok(const struct vs_scsi_lun *lun, uint64_t lba, uint64_t n)
{
	uint64_t blocks = vs_scsi_lun_nblocks(lun);

	return lba <= blocks && n <= blocks - lba;
}
void *vs_scsi_alloc_io_buf(const struct vs_scsi_lun *lun, size_t len);

/* Take the pending unit attention (ASC/ASCQ) of lun, if any: reported once. */
static inline bool vs_scsi_ua_take(struct vs_scsi_lun *lun, uint16_t *asc)
{
	int v;

	if (!__atomic_load_n(&lun->ua, __ATOMIC_RELAXED))
		return false;
	v = __atomic_exchange_n(&lun->ua, 0, __ATOMIC_ACQ_REL);
	if (!v)
		return false; /* another thread reported it first */
	*asc = (uint16_t)v;
	return true;
}

/* LBA, transfer length (raw: READ(6)'s 0 stays 0) and the length field's byte, for
 * the READ/WRITE/VERIFY/SYNCHRONIZE CACHE/WRITE SAME layouts of each CDB size. */
void vs_scsi_decode_lba(const uint8_t *cdb, uint64_t *lba, uint32_t *n, uint16_t *len_at);

/* ---- completion (dev.c) ---- */
/* Finish a command: residuals, free private buffers, trace, done(). */
void vs_scsi_complete(struct vs_scsi_cmd *cmd);

/* ---- command handlers ---- */
int vs_scsi_inquiry(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);
int vs_scsi_inquiry_no_lun(struct vs_scsi_cmd *cmd);
int vs_scsi_mode_sense(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);
int vs_scsi_mode_select(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);
int vs_scsi_read_capacity_10(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);
int vs_scsi_service_action_in_16(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);
/* lun may be NULL: then the sense data says LOGICAL UNIT NOT SUPPORTED. */
int vs_scsi_request_sense(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);
int vs_scsi_start_stop_unit(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);
int vs_scsi_rw(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);
int vs_scsi_verify(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);
int vs_scsi_sync_cache(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);
int vs_scsi_unmap(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);
int vs_scsi_write_same(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);

#endif /* VS_SCSI_INT_H */
