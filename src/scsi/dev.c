/* SPDX-License-Identifier: MIT */
/*
 * The target device: its LUN table, REPORT LUNS, unit attentions, the dispatch of each
 * command to its handler, and the final completion of every command (vs_scsi_complete).
 *
 * The LUN table is read by every command, on any thread, without a lock: an entry is
 * published with a release store (the LUN is fully built before anyone can load it) and
 * loaded with an acquire load (a plain load on x86).  Attach and detach may run while
 * commands do; the caller of detach owns the grace period: it must not destroy the LUN
 * before every command that may have loaded it has completed (src/target waits for the
 * requests of that LUN in flight, which were tracked before they loaded the entry).
 */
#include <errno.h>
#include <stdlib.h>

#include "scsi/scsi_int.h"

typedef int (*vs_scsi_handler)(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd);

/* The entry at id (< VS_SCSI_MAX_LUNS), as published (see the top of the file). */
static inline struct vs_scsi_lun *lun_get(const struct vs_scsi_dev *dev, unsigned id)
{
	return __atomic_load_n(&dev->luns[id], __ATOMIC_ACQUIRE);
}

int vs_scsi_dev_create(struct vs_scsi_dev **out)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	VS_INFO(SCSI, "scsi dev %p created", *out);
	return 0;
}

void vs_scsi_dev_destroy(struct vs_scsi_dev *dev)
{
	if (!dev)
		return;
	for (unsigned i = 0; i < VS_SCSI_MAX_LUNS; i++)
		vs_scsi_lun_destroy(dev->luns[i]);
	VS_INFO(SCSI, "scsi dev %p destroyed", dev);
	free(dev);
}

int vs_scsi_dev_attach(struct vs_scsi_dev *dev, unsigned id, struct vs_scsi_lun *lun)
{
	if (id >= VS_SCSI_MAX_LUNS || !lun) {
		VS_ERROR(SCSI, "scsi dev %p: cannot attach lun %u (max %u)", dev, id,
			 VS_SCSI_MAX_LUNS - 1);
		return -EINVAL;
	}
	if (lun_get(dev, id)) {
		VS_ERROR(SCSI, "scsi dev %p: lun %u already attached", dev, id);
		return -EEXIST;
	}
	lun->id = id;
	__atomic_store_n(&lun->attached, true, __ATOMIC_RELAXED);
	__atomic_store_n(&dev->luns[id], lun, __ATOMIC_RELEASE); /* built before seen */
	VS_INFO(SCSI, "scsi dev %p: lun %u = '%s'", dev, id, lun->name);
	return 0;
}

struct vs_scsi_lun *vs_scsi_dev_detach(struct vs_scsi_dev *dev, unsigned id)
{
	struct vs_scsi_lun *lun;

	if (id >= VS_SCSI_MAX_LUNS || !(lun = lun_get(dev, id)))
		return NULL;
	__atomic_store_n(&dev->luns[id], NULL, __ATOMIC_SEQ_CST);
	__atomic_store_n(&lun->attached, false, __ATOMIC_RELAXED);
	VS_INFO(SCSI, "scsi dev %p: lun %u ('%s') detached", dev, id, lun->name);
	return lun;
}

struct vs_scsi_lun *vs_scsi_dev_lun(const struct vs_scsi_dev *dev, unsigned id)
{
	return id < VS_SCSI_MAX_LUNS ? lun_get(dev, id) : NULL;
}

void vs_scsi_dev_reset(struct vs_scsi_dev *dev)
{
	VS_INFO(TMF, "scsi dev %p: reset", dev);
	for (unsigned i = 0; i < VS_SCSI_MAX_LUNS; i++) {
		struct vs_scsi_lun *lun = lun_get(dev, i);

		if (lun)
			vs_scsi_lun_reset(lun);
	}
}

static int report_luns(struct vs_scsi_dev *dev, struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	uint8_t buf[8 + 8 * VS_SCSI_MAX_LUNS];
	uint32_t alloc = vs_be32(&cdb[6]);
	unsigned n = 0;

	/* SELECT REPORT: 0 all LUNs, 1 well-known LUNs only (we have none), 2 both. */
	if (cdb[2] > 2) {
		vs_scsi_bad_cdb(cmd, 2, -1, "unsupported SELECT REPORT");
		return VS_SCSI_DONE;
	}
	if (alloc < 16) {
		vs_scsi_bad_cdb(cmd, 6, -1, "allocation length below 16");
		return VS_SCSI_DONE;
	}
	memset(buf, 0, 8);
	if (cdb[2] != 1) {
		for (unsigned i = 0; i < VS_SCSI_MAX_LUNS; i++)
			if (lun_get(dev, i))
				vs_scsi_lun_sam(&buf[8 + 8 * n++], i);
	}
	vs_put_be32(buf, 8 * n);
	vs_scsi_data_in(cmd, buf, 8 + 8 * n, alloc);
	return VS_SCSI_DONE;
}

static int tur(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	(void)lun;
	(void)cmd;
	return VS_SCSI_DONE;
}

static vs_scsi_handler lookup(uint8_t op)
{
	switch (op) {
	case VS_SCSI_OP_TEST_UNIT_READY:
		return tur;
	case VS_SCSI_OP_REQUEST_SENSE:
		return vs_scsi_request_sense;
	case VS_SCSI_OP_INQUIRY:
		return vs_scsi_inquiry;
	case VS_SCSI_OP_MODE_SENSE_6:
	case VS_SCSI_OP_MODE_SENSE_10:
		return vs_scsi_mode_sense;
	case VS_SCSI_OP_MODE_SELECT_6:
	case VS_SCSI_OP_MODE_SELECT_10:
		return vs_scsi_mode_select;
	case VS_SCSI_OP_START_STOP_UNIT:
		return vs_scsi_start_stop_unit;
	case VS_SCSI_OP_READ_CAPACITY_10:
		return vs_scsi_read_capacity_10;
	case VS_SCSI_OP_SERVICE_ACTION_IN_16:
		return vs_scsi_service_action_in_16;
	case VS_SCSI_OP_READ_6:
	case VS_SCSI_OP_READ_10:
	case VS_SCSI_OP_READ_12:
	case VS_SCSI_OP_READ_16:
	case VS_SCSI_OP_WRITE_6:
	case VS_SCSI_OP_WRITE_10:
	case VS_SCSI_OP_WRITE_12:
	case VS_SCSI_OP_WRITE_16:
		return vs_scsi_rw;
	case VS_SCSI_OP_VERIFY_10:
	case VS_SCSI_OP_VERIFY_12:
	case VS_SCSI_OP_VERIFY_16:
		return vs_scsi_verify;
	case VS_SCSI_OP_SYNCHRONIZE_CACHE_10:
	case VS_SCSI_OP_SYNCHRONIZE_CACHE_16:
		return vs_scsi_sync_cache;
	case VS_SCSI_OP_UNMAP:
		return vs_scsi_unmap;
	case VS_SCSI_OP_WRITE_SAME_10:
	case VS_SCSI_OP_WRITE_SAME_16:
		return vs_scsi_write_same;
	/* Not implemented, on purpose: MAINTENANCE IN (REPORT SUPPORTED OPERATION CODES,
	 * REPORT TARGET PORT GROUPS) and ATA PASS-THROUGH, which Linux probes and takes
	 * "invalid opcode" for "not supported". */
	default:
		return NULL;
	}
}

/* CDB length by group code (SPC-4 4.2.5.1); 0 for variable or vendor groups. */
static uint32_t cdb_group_len(uint8_t op)
{
	switch (op >> 5) {
	case 0:
		return 6;
	case 1:
	case 2:
		return 10;
	case 4:
		return 16;
	case 5:
		return 12;
	default:
		return 0;
	}
}

/* The checks every CDB passes: long enough for its group, NACA clear. */
static bool cdb_ok(struct vs_scsi_cmd *cmd)
{
	uint32_t len = cdb_group_len(cmd->cdb[0]);

	if (!len)
		return true; /* not one we implement; the caller says so */
	if (cmd->cdb_len < len) {
		vs_scsi_bad_cdb(cmd, 0, -1, "CDB shorter than its group length");
		return false;
	}
	if (cmd->cdb[len - 1] & 0x04) {
		vs_scsi_bad_cdb(cmd, (uint16_t)(len - 1), 2, "NACA not supported");
		return false;
	}
	return true;
}

static int lun_exec(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	uint8_t op = cmd->cdb[0];
	vs_scsi_handler h;
	uint16_t asc;

	/* SAM-5 5.14: a pending unit attention goes to the first other command. */
	if (op != VS_SCSI_OP_INQUIRY && op != VS_SCSI_OP_REQUEST_SENSE &&
	    vs_scsi_ua_take(lun, &asc)) {
		VS_INFO(SCSI, "lun %u: reporting unit attention %#x{asc} to op %#x{scsi_op}",
			lun->id, asc, op);
		vs_scsi_sense(cmd, VS_SENSE_UNIT_ATTENTION, asc);
		return VS_SCSI_DONE;
	}
	h = lookup(op);
	if (!h) {
		vs_scsi_reject(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_INVALID_OPCODE,
			       "unsupported operation code");
		return VS_SCSI_DONE;
	}
	if (!cdb_ok(cmd))
		return VS_SCSI_DONE;
	return h(lun, cmd);
}

/* Commands to a LUN that does not exist (SPC-4 7.4.2 for INQUIRY, 6.39 for REQUEST
 * SENSE; the rest get LOGICAL UNIT NOT SUPPORTED). */
static int no_lun_exec(unsigned id, struct vs_scsi_cmd *cmd)
{
	uint8_t op = cmd->cdb[0];

	if ((op == VS_SCSI_OP_INQUIRY || op == VS_SCSI_OP_REQUEST_SENSE) && cdb_ok(cmd))
		return op == VS_SCSI_OP_INQUIRY ? vs_scsi_inquiry_no_lun(cmd)
						: vs_scsi_request_sense(NULL, cmd);
	if (cmd->status != VS_SCSI_GOOD)
		return VS_SCSI_DONE;
	VS_WARNING(SCSI, "tag %#llx op %#x{scsi_op} to lun %u: no such lun",
		   (unsigned long long)cmd->tag, op, id);
	vs_scsi_sense(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_LUN_NOT_SUPPORTED);
	return VS_SCSI_DONE;
}

/* Bytes of the CDB worth recording: its group's length, or all of it. */
static inline size_t cdb_shown(const struct vs_scsi_cmd *cmd)
{
	size_t n = vs_scsi_cdb_len(cmd->cdb[0]);
	return n && n < cmd->cdb_len ? n : cmd->cdb_len;
}

static bool iov_len_ok(const struct iovec *iov, int cnt, size_t len)
{
	size_t sum;

	if (cnt < 0 || (cnt && !iov))
		return false;
	return vs_iov_total(iov, (unsigned)cnt, &sum) && sum == len;
}

int vs_scsi_exec(struct vs_scsi_dev *dev, unsigned id, struct vs_scsi_cmd *cmd,
		 struct vs_io_ctx *ctx)
{
	struct vs_scsi_lun *lun;
	int rc;

	if (!dev || !cmd || !cmd->done || !cmd->cdb || !ctx || !cmd->cdb_len ||
	    cmd->cdb_len > VS_SCSI_CDB_MAX) {
		VS_ERROR(SCSI, "exec: malformed command %p (dev %p ctx %p)", cmd, dev, ctx);
		return -EINVAL;
	}
	if (!iov_len_ok(cmd->in_iov, cmd->in_iovcnt, cmd->in_len) ||
	    !iov_len_ok(cmd->out_iov, cmd->out_iovcnt, cmd->out_len)) {
		VS_ERROR(SCSI,
			 "exec: tag %#llx: buffer lengths (in %zu, out %zu) differ from iovecs",
			 (unsigned long long)cmd->tag, cmd->in_len, cmd->out_len);
		return -EINVAL;
	}
	cmd->status = VS_SCSI_GOOD;
	cmd->sense_len = 0;
	cmd->overrun = false;
	cmd->in_residual = cmd->out_residual = 0;
	memset(&cmd->st, 0, sizeof(cmd->st));
	lun = id < VS_SCSI_MAX_LUNS ? lun_get(dev, id) : NULL;
	cmd->st.lun = lun;
	cmd->st.ctx = ctx;
	/* The CDB as its opcode's group sizes it: the decoder names the command. */
	VS_VERBOSE_HP_OOL(SCSI, "tag %#llx lun %u cdb %s{cdb} in %zu out %zu",
			  (unsigned long long)cmd->tag, id, VS_BYTES(cmd->cdb, cdb_shown(cmd)),
			  cmd->in_len, cmd->out_len);

	if (cmd->cdb[0] == VS_SCSI_OP_REPORT_LUNS)
		rc = cdb_ok(cmd) ? report_luns(dev, cmd) : VS_SCSI_DONE;
	else if (!lun)
		rc = no_lun_exec(id, cmd);
	else
		rc = lun_exec(lun, cmd);
	if (rc == VS_SCSI_DONE)
		vs_scsi_complete(cmd);
	return 0;
}

void vs_scsi_complete(struct vs_scsi_cmd *cmd)
{
	struct vs_scsi_cmd_state *st = &cmd->st;

	if (cmd->status == VS_SCSI_GOOD) {
		cmd->in_residual = cmd->in_len - st->in_xfer;
		cmd->out_residual = cmd->out_len - st->out_xfer;
	} else {
		cmd->in_residual = cmd->in_len;
		cmd->out_residual = cmd->out_len;
	}
	free(st->buf);
	free(st->iovs);
	st->buf = NULL;
	st->iovs = NULL;
	/* GOOD needs no event here: the transport's completion event says it (one per
	 * stage); a CHECK CONDITION's sense is said here, where it is known. */
	if (__builtin_expect(cmd->status != 0, 0))
		VS_VERBOSE_HP_OOL(SCSI,
				  "tag %#llx op %#x{scsi_op} done: status %#x{scsi_status} sense "
				  "%s{sense} resid in %zu out %zu",
				  (unsigned long long)cmd->tag, cmd->cdb[0], cmd->status,
				  VS_BYTES(cmd->sense, cmd->sense_len < 18 ? cmd->sense_len : 18),
				  cmd->in_residual, cmd->out_residual);
	cmd->done(cmd);
}
