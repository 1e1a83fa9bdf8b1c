/* SPDX-License-Identifier: MIT */
/*
 * READ and WRITE (6/10/12/16), VERIFY (10/12/16) and SYNCHRONIZE CACHE (10/16)
 * (SBC-3 5.x).  Data moves straight between the backend and the caller's iovecs.
 */
#include <errno.h>

#include "scsi/scsi_int.h"

#define VERIFY_CHUNK (1u << 20) /* VERIFY reads and compares this much at a time */

void vs_scsi_decode_lba(const uint8_t *cdb, uint64_t *lba, uint32_t *n, uint16_t *len_at)
{
	switch (cdb[0] >> 5) {
	case 0: /* 6-byte: 21-bit LBA */
		*lba = vs_be24(&cdb[1]) & 0x1fffff;
		*n = cdb[4];
		*len_at = 4;
		break;
	case 5: /* 12-byte */
		*lba = vs_be32(&cdb[2]);
		*n = vs_be32(&cdb[6]);
		*len_at = 6;
		break;
	case 4: /* 16-byte */
		*lba = vs_be64(&cdb[2]);
		*n = vs_be32(&cdb[10]);
		*len_at = 10;
		break;
	default: /* 10-byte */
		*lba = vs_be32(&cdb[2]);
		*n = vs_be16(&cdb[7]);
		*len_at = 7;
		break;
	}
}

static void internal_error(struct vs_scsi_cmd *cmd, const char *why)
{
	VS_ERROR(SCSI, "tag %#llx: internal error: %s", (unsigned long long)cmd->tag, why);
	vs_scsi_sense(cmd, VS_SENSE_HARDWARE_ERROR, VS_ASC_INTERNAL_TARGET_FAILURE);
}

int vs_scsi_rw(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	struct vs_scsi_cmd_state *st = &cmd->st;
	bool write = cdb[0] == VS_SCSI_OP_WRITE_6 || cdb[0] == VS_SCSI_OP_WRITE_10 ||
		     cdb[0] == VS_SCSI_OP_WRITE_12 || cdb[0] == VS_SCSI_OP_WRITE_16;
	bool fua = false;
	uint64_t lba;
	uint32_t n;
	uint16_t len_at;
	size_t bytes;
	int rc;

	vs_scsi_decode_lba(cdb, &lba, &n, &len_at);
	if (cdb[0] >> 5 == 0) {
		if (!n)
			n = 256; /* READ(6)/WRITE(6): 0 means 256 blocks */
	} else {
		if (cdb[1] & 0xe0) {
			vs_scsi_bad_cdb(cmd, 1, 7, "RDPROTECT/WRPROTECT without protection info");
			return VS_SCSI_DONE;
		}
		fua = cdb[1] & 0x08; /* DPO (0x10) is a cache hint: ignored */
	}
	if (n > lun->max_xfer_blocks) {
		vs_scsi_bad_cdb(cmd, len_at, -1, "transfer length above the maximum");
		return VS_SCSI_DONE;
	}
	if (!vs_scsi_lba_ok(lun, lba, n)) {
		vs_scsi_lba_out_of_range(cmd, lba, n);
		return VS_SCSI_DONE;
	}
	if (write && lun->read_only) {
		vs_scsi_reject(cmd, VS_SENSE_DATA_PROTECT, VS_ASC_WRITE_PROTECTED,
			       "write to a read-only lun");
		return VS_SCSI_DONE;
	}
	if (!n)
		return VS_SCSI_DONE; /* SBC-3: not an error, nothing moves */
	bytes = (size_t)n << lun->block_shift;
	if (write) {
		if (cmd->out_len < bytes) {
			cmd->overrun = true;
			vs_scsi_bad_cdb(cmd, len_at, -1,
					"data-out buffer shorter than the transfer");
			return VS_SCSI_DONE;
		}
		st->kind = VS_IO_KIND_WRITE;
		st->fua = fua || !__atomic_load_n(&lun->wce, __ATOMIC_RELAXED);
		st->out_xfer = bytes;
		rc = vs_scsi_io_prep_prefix(cmd, VS_BIO_WRITE, lba << lun->block_shift,
					    cmd->out_iov, cmd->out_iovcnt, bytes);
	} else {
		if (cmd->in_len < bytes) {
			/* Overflow: read the whole blocks that fit, report the rest. */
			cmd->overrun = true;
			bytes = cmd->in_len >> lun->block_shift << lun->block_shift;
			VS_WARNING(SCSI, "tag %#llx: read of %u blocks into %zu bytes: %zu read",
				   (unsigned long long)cmd->tag, n, cmd->in_len, bytes);
			if (!bytes)
				return VS_SCSI_DONE;
		}
		st->kind = VS_IO_KIND_READ;
		st->in_xfer = bytes;
		rc = vs_scsi_io_prep_prefix(cmd, VS_BIO_READ, lba << lun->block_shift, cmd->in_iov,
					    cmd->in_iovcnt, bytes);
	}
	if (rc < 0) {
		internal_error(cmd, "iovecs shorter than checked");
		return VS_SCSI_DONE;
	}
	return vs_scsi_io_start(cmd);
}

/* Read the next chunk of a VERIFY into the bounce buffer. */
static void verify_next(struct vs_scsi_cmd *cmd)
{
	struct vs_scsi_cmd_state *st = &cmd->st;
	const struct vs_scsi_lun *lun = st->lun;
	uint64_t blocks = VERIFY_CHUNK >> lun->block_shift;

	if (blocks > st->blocks)
		blocks = st->blocks;
	st->count = (uint32_t)(blocks << lun->block_shift);
	st->split.iov_base = st->buf;
	st->split.iov_len = st->count;
	vs_scsi_io_prep(cmd, 0, VS_BIO_READ, st->lba << lun->block_shift, st->count, &st->split, 1);
	st->nbio = 1;
}

/* Offset of the first byte where iov[] (from off) and buf differ, or len. */
static size_t iov_compare(const struct iovec *iov, int cnt, size_t off, const uint8_t *buf,
			  size_t len)
{
	uint8_t tmp[512];
	size_t done = 0;

	while (done < len) {
		size_t n = len - done < sizeof(tmp) ? len - done : sizeof(tmp);

		n = vs_iov_to_buf(iov, (unsigned)cnt, off + done, tmp, n);
		if (!n)
			return done;
		if (memcmp(tmp, buf + done, n)) {
			for (size_t i = 0; i < n; i++)
				if (tmp[i] != buf[done + i])
					return done + i;
		}
		done += n;
	}
	return len;
}

static int verify_step(struct vs_scsi_cmd *cmd)
{
	struct vs_scsi_cmd_state *st = &cmd->st;
	size_t at = iov_compare(cmd->out_iov, cmd->out_iovcnt, st->pos, st->buf, st->count);

	if (at < st->count) {
		VS_WARNING(SCSI, "tag %#llx: VERIFY miscompare at byte %zu",
			   (unsigned long long)cmd->tag, st->pos + at);
		vs_scsi_sense(cmd, VS_SENSE_MISCOMPARE, VS_ASC_MISCOMPARE_DURING_VERIFY);
		vs_scsi_sense_info(cmd, (uint32_t)(st->pos + at));
		return 0;
	}
	st->pos += st->count;
	st->lba += st->count >> st->lun->block_shift;
	st->blocks -= st->count >> st->lun->block_shift;
	if (!st->blocks)
		return 0;
	verify_next(cmd);
	return 1;
}

int vs_scsi_verify(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	struct vs_scsi_cmd_state *st = &cmd->st;
	unsigned bytchk = (cdb[1] >> 1) & 0x03;
	uint64_t lba;
	uint32_t n;
	uint16_t len_at;
	size_t bytes;

	vs_scsi_decode_lba(cdb, &lba, &n, &len_at);
	if (cdb[1] & 0xe0) {
		vs_scsi_bad_cdb(cmd, 1, 7, "VRPROTECT without protection info");
		return VS_SCSI_DONE;
	}
	if (bytchk > 1) {
		vs_scsi_bad_cdb(cmd, 1, 2, "BYTCHK mode not supported");
		return VS_SCSI_DONE;
	}
	VS_VERBOSE_HP(SCSI, "tag %#llx verify lba %llu blocks %u bytchk %u",
		      (unsigned long long)cmd->tag, (unsigned long long)lba, n, bytchk);
	if (n > lun->max_xfer_blocks) {
		vs_scsi_bad_cdb(cmd, len_at, -1, "verification length above the maximum");
		return VS_SCSI_DONE;
	}
	if (!vs_scsi_lba_ok(lun, lba, n)) {
		vs_scsi_lba_out_of_range(cmd, lba, n);
		return VS_SCSI_DONE;
	}
	/* BYTCHK 0: the medium has no checks of its own to run; the range is all. */
	if (!bytchk || !n)
		return VS_SCSI_DONE;
	bytes = (size_t)n << lun->block_shift;
	if (cmd->out_len < bytes) {
		cmd->overrun = true;
		vs_scsi_bad_cdb(cmd, len_at, -1, "data-out buffer shorter than the verification");
		return VS_SCSI_DONE;
	}
	st->buf = vs_scsi_alloc_io_buf(lun, bytes < VERIFY_CHUNK ? bytes : VERIFY_CHUNK);
	if (!st->buf) {
		vs_scsi_sense_errno(cmd, -ENOMEM, VS_IO_KIND_READ);
		return VS_SCSI_DONE;
	}
	st->kind = VS_IO_KIND_READ;
	st->out_xfer = bytes;
	st->lba = lba;
	st->blocks = n;
	st->pos = 0;
	st->step = verify_step;
	verify_next(cmd);
	return vs_scsi_io_start(cmd);
}

int vs_scsi_sync_cache(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	uint64_t lba;
	uint32_t n;
	uint16_t len_at;

	/* IMMED is ignored: we answer when the flush is done, which is always allowed. */
	vs_scsi_decode_lba(cmd->cdb, &lba, &n, &len_at);
	VS_VERBOSE_HP(SCSI, "tag %#llx sync cache lba %llu blocks %u", (unsigned long long)cmd->tag,
		      (unsigned long long)lba, n);
	/* 0 blocks means "to the end"; the flush covers everything either way. */
	if (!vs_scsi_lba_ok(lun, lba, n)) {
		vs_scsi_lba_out_of_range(cmd, lba, n);
		return VS_SCSI_DONE;
	}
	cmd->st.kind = VS_IO_KIND_WRITE;
	vs_scsi_io_prep(cmd, 0, VS_BIO_FLUSH, 0, 0, NULL, 0);
	cmd->st.nbio = 1;
	return vs_scsi_io_start(cmd);
}
