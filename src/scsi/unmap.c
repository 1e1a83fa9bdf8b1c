/* SPDX-License-Identifier: MIT */
/*
 * Logical block provisioning: UNMAP and WRITE SAME (10)/(16) (SBC-3 5.28, 5.41-5.42).
 */
#include <errno.h>
#include <stdlib.h>

#include "scsi/scsi_int.h"

#define UNMAP_HDR      8
#define UNMAP_DESC     16
#define WS_PATTERN_MAX (256u << 10) /* one buffer of repeated blocks ... */
#define WS_IOVS	       64	    /* ... referenced this many times per bio (16 MiB) */

/* Queue the DISCARD of the next non-empty descriptor; false when none is left. */
static bool unmap_next(struct vs_scsi_cmd *cmd)
{
	struct vs_scsi_cmd_state *st = &cmd->st;
	const uint8_t *descs = st->buf;
	unsigned shift = st->lun->block_shift;

	while (st->pos < st->count) {
		const uint8_t *d = &descs[UNMAP_DESC * st->pos++];
		uint64_t lba = vs_be64(d);
		uint32_t n = vs_be32(&d[8]);

		if (!n)
			continue;
		VS_VERBOSE_HP(SCSI, "tag %#llx unmap lba %llu blocks %u",
			      (unsigned long long)cmd->tag, (unsigned long long)lba, n);
		vs_scsi_io_prep(cmd, 0, VS_BIO_DISCARD, lba << shift, (uint64_t)n << shift, NULL,
				0);
		st->nbio = 1;
		return true;
	}
	return false;
}

static int unmap_step(struct vs_scsi_cmd *cmd)
{
	return unmap_next(cmd) ? 1 : 0;
}

int vs_scsi_unmap(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	struct vs_scsi_cmd_state *st = &cmd->st;
	size_t plen = vs_be16(&cdb[7]), avail;
	uint8_t hdr[UNMAP_HDR];
	uint32_t udl, bddl, ndesc;
	uint64_t total = 0;
	uint8_t *descs;

	if (lun->read_only) {
		vs_scsi_reject(cmd, VS_SENSE_DATA_PROTECT, VS_ASC_WRITE_PROTECTED,
			       "UNMAP on a read-only lun");
		return VS_SCSI_DONE;
	}
	if (!lun->discard) {
		vs_scsi_reject(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_INVALID_OPCODE,
			       "UNMAP without backend discard");
		return VS_SCSI_DONE;
	}
	if (cdb[1] & 0x01) {
		vs_scsi_bad_cdb(cmd, 1, 0, "ANCHOR not supported");
		return VS_SCSI_DONE;
	}
	if (!plen)
		return VS_SCSI_DONE; /* SBC-3: no parameter data is not an error */
	if (plen < UNMAP_HDR) {
		vs_scsi_param_len_error(cmd, "parameter list shorter than its header");
		return VS_SCSI_DONE;
	}
	avail = plen < cmd->out_len ? plen : cmd->out_len;
	if (vs_scsi_data_out(cmd, hdr, UNMAP_HDR) < UNMAP_HDR) {
		vs_scsi_param_len_error(cmd, "data-out shorter than the header");
		return VS_SCSI_DONE;
	}
	if (plen > cmd->out_len)
		cmd->overrun = true;
	udl = vs_be16(&hdr[0]);
	bddl = vs_be16(&hdr[2]);
	if (udl + 2 > avail || bddl + UNMAP_HDR > avail) {
		vs_scsi_param_len_error(cmd, "data lengths beyond the parameter data");
		return VS_SCSI_DONE;
	}
	if (bddl + 6 > udl) {
		vs_scsi_bad_param(cmd, 2, -1, "block descriptor length beyond the data length");
		return VS_SCSI_DONE;
	}
	ndesc = bddl / UNMAP_DESC; /* SBC-3: a cut last descriptor is ignored */
	if (ndesc > VS_SCSI_MAX_UNMAP_DESC) {
		vs_scsi_bad_param(cmd, 2, -1, "more descriptors than the block limits allow");
		return VS_SCSI_DONE;
	}
	st->out_xfer = avail;
	if (!ndesc)
		return VS_SCSI_DONE;
	descs = malloc((size_t)ndesc * UNMAP_DESC);
	if (!descs) {
		vs_scsi_sense_errno(cmd, -ENOMEM, VS_IO_KIND_WRITE);
		return VS_SCSI_DONE;
	}
	st->buf = descs; /* freed at completion, whatever happens below */
	vs_iov_to_buf(cmd->out_iov, (unsigned)cmd->out_iovcnt, UNMAP_HDR, descs,
		      (size_t)ndesc * UNMAP_DESC);
	for (uint32_t i = 0; i < ndesc; i++) {
		const uint8_t *d = &descs[UNMAP_DESC * i];
		uint64_t lba = vs_be64(d);
		uint32_t n = vs_be32(&d[8]);

		if (!vs_scsi_lba_ok(lun, lba, n)) {
			vs_scsi_lba_out_of_range(cmd, lba, n);
			return VS_SCSI_DONE;
		}
		total += n;
		if (total > lun->max_unmap_blocks) {
			vs_scsi_bad_param(cmd, (uint16_t)(UNMAP_HDR + UNMAP_DESC * i + 8), -1,
					  "more blocks than the block limits allow");
			return VS_SCSI_DONE;
		}
	}
	st->kind = VS_IO_KIND_WRITE;
	st->pos = 0;
	st->count = ndesc;
	st->step = unmap_step;
	if (!unmap_next(cmd))
		return VS_SCSI_DONE; /* every descriptor was empty */
	return vs_scsi_io_start(cmd);
}

/* Queue the WRITE of the next chunk of a WRITE SAME: iovecs all pointing at the
 * pattern buffer (st->buf, st->count bytes of repeated blocks). */
static void ws_next(struct vs_scsi_cmd *cmd)
{
	struct vs_scsi_cmd_state *st = &cmd->st;
	unsigned shift = st->lun->block_shift;
	uint64_t chunk = st->blocks << shift, left;
	int k = 0;

	if (chunk > (uint64_t)WS_IOVS * st->count)
		chunk = (uint64_t)WS_IOVS * st->count;
	for (left = chunk; left; k++) {
		size_t l = left < st->count ? (size_t)left : st->count;

		st->iovs[k].iov_base = st->buf;
		st->iovs[k].iov_len = l;
		left -= l;
	}
	vs_scsi_io_prep(cmd, 0, VS_BIO_WRITE, st->lba << shift, chunk, st->iovs, k);
	st->nbio = 1;
	st->pos = (uint32_t)(chunk >> shift);
}

static int ws_step(struct vs_scsi_cmd *cmd)
{
	struct vs_scsi_cmd_state *st = &cmd->st;

	st->lba += st->pos;
	st->blocks -= st->pos;
	if (!st->blocks)
		return 0;
	ws_next(cmd);
	return 1;
}

int vs_scsi_write_same(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	struct vs_scsi_cmd_state *st = &cmd->st;
	bool sixteen = cdb[0] == VS_SCSI_OP_WRITE_SAME_16;
	bool unmap = cdb[1] & 0x08, ndob = sixteen && (cdb[1] & 0x01), zero;
	uint32_t bs = lun->block_size, n;
	uint64_t lba;
	uint16_t len_at;
	size_t plen;
	uint8_t *buf;

	vs_scsi_decode_lba(cdb, &lba, &n, &len_at);
	if (cdb[1] & 0xe0) {
		vs_scsi_bad_cdb(cmd, 1, 7, "WRPROTECT without protection info");
		return VS_SCSI_DONE;
	}
	if (cdb[1] & 0x10) {
		vs_scsi_bad_cdb(cmd, 1, 4, "ANCHOR not supported");
		return VS_SCSI_DONE;
	}
	if (cdb[1] & 0x06) {
		vs_scsi_bad_cdb(cmd, 1, 2, "PBDATA/LBDATA not supported");
		return VS_SCSI_DONE;
	}
	VS_VERBOSE_HP(SCSI, "tag %#llx write same lba %llu blocks %u unmap %d ndob %d",
		      (unsigned long long)cmd->tag, (unsigned long long)lba, n, unmap, ndob);
	if (!n) {
		vs_scsi_bad_cdb(cmd, len_at, -1, "0 blocks (WSNZ is set)");
		return VS_SCSI_DONE;
	}
	if (n > lun->max_ws_blocks) {
		vs_scsi_bad_cdb(cmd, len_at, -1, "above the maximum write same length");
		return VS_SCSI_DONE;
	}
	if (!vs_scsi_lba_ok(lun, lba, n)) {
		vs_scsi_lba_out_of_range(cmd, lba, n);
		return VS_SCSI_DONE;
	}
	if (lun->read_only) {
		vs_scsi_reject(cmd, VS_SENSE_DATA_PROTECT, VS_ASC_WRITE_PROTECTED,
			       "WRITE SAME on a read-only lun");
		return VS_SCSI_DONE;
	}
	if (!ndob && cmd->out_len < bs) {
		cmd->overrun = true;
		vs_scsi_bad_cdb(cmd, len_at, -1, "data-out buffer shorter than one block");
		return VS_SCSI_DONE;
	}
	plen = (uint64_t)n * bs < WS_PATTERN_MAX ? (size_t)n * bs : WS_PATTERN_MAX;
	buf = vs_scsi_alloc_io_buf(lun, plen);
	if (!buf) {
		vs_scsi_sense_errno(cmd, -ENOMEM, VS_IO_KIND_WRITE);
		return VS_SCSI_DONE;
	}
	st->buf = buf;
	if (ndob) {
		memset(buf, 0, bs);
	} else {
		vs_iov_to_buf(cmd->out_iov, (unsigned)cmd->out_iovcnt, 0, buf, bs);
		st->out_xfer = bs;
	}
	zero = vs_scsi_all_zero(buf, bs);
	st->kind = VS_IO_KIND_WRITE;
	st->fua = !__atomic_load_n(&lun->wce, __ATOMIC_RELAXED);
	if (zero && lun->discard) {
		/* Both read back as zeros (the backend contract), so UNMAP may deallocate. */
		vs_scsi_io_prep(cmd, 0, unmap ? VS_BIO_DISCARD : VS_BIO_WRITE_ZEROES,
				lba << lun->block_shift, (uint64_t)n << lun->block_shift, NULL, 0);
		st->nbio = 1;
		return vs_scsi_io_start(cmd);
	}
	for (size_t off = bs; off < plen; off += bs)
		memcpy(buf + off, buf, bs);
	st->iovs = malloc(WS_IOVS * sizeof(*st->iovs));
	if (!st->iovs) {
		vs_scsi_sense_errno(cmd, -ENOMEM, VS_IO_KIND_WRITE);
		return VS_SCSI_DONE;
	}
	st->lba = lba;
	st->blocks = n;
	st->count = (uint32_t)plen;
	st->step = ws_step;
	ws_next(cmd);
	return vs_scsi_io_start(cmd);
}
