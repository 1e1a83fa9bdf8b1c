/* SPDX-License-Identifier: MIT */
/*
 * Sense data (fixed format, SPC-4 4.5.3), the errno -> sense mapping for failed
 * bios, and names for traces.
 */
#include <errno.h>

#include "scsi/scsi_int.h"

#define FIXED_SENSE_LEN 18

size_t vs_scsi_sense_build(uint8_t *buf, uint8_t key, uint16_t asc)
{
	memset(buf, 0, FIXED_SENSE_LEN);
	buf[0] = 0x70; /* current error, fixed format */
	buf[2] = key & 0x0f;
	buf[7] = FIXED_SENSE_LEN - 8; /* additional sense length */
	buf[12] = (uint8_t)(asc >> 8);
	buf[13] = (uint8_t)asc;
	return FIXED_SENSE_LEN;
}

void vs_scsi_sense(struct vs_scsi_cmd *cmd, uint8_t key, uint16_t asc)
{
	cmd->status = VS_SCSI_CHECK_CONDITION;
	cmd->sense_len = (uint8_t)vs_scsi_sense_build(cmd->sense, key, asc);
}

void vs_scsi_sense_field(struct vs_scsi_cmd *cmd, uint8_t key, uint16_t asc, bool in_cdb,
			 uint16_t byte, int bit)
{
	vs_scsi_sense(cmd, key, asc);
	/* Sense-key specific bytes 15..17: SKSV, C/D, BPV + bit pointer, field pointer. */
	cmd->sense[15] = 0x80 | (in_cdb ? 0x40 : 0);
	if (bit >= 0 && bit <= 7)
		cmd->sense[15] |= 0x08 | (uint8_t)bit;
	vs_put_be16(&cmd->sense[16], byte);
}

void vs_scsi_sense_info(struct vs_scsi_cmd *cmd, uint32_t info)
{
	cmd->sense[0] |= 0x80; /* VALID: the INFORMATION field means something */
	vs_put_be32(&cmd->sense[3], info);
}

bool vs_scsi_sense_decode(const uint8_t *sense, size_t len, uint8_t *key, uint8_t *asc,
			  uint8_t *ascq)
{
	if (!sense || len < 14 || ((sense[0] & 0x7f) != 0x70 && (sense[0] & 0x7f) != 0x71))
		return false;
	*key = sense[2] & 0x0f;
	*asc = sense[12];
	*ascq = sense[13];
	return true;
}

static uint8_t cmd_op(const struct vs_scsi_cmd *cmd)
{
	return cmd->cdb_len ? cmd->cdb[0] : 0xff;
}

void vs_scsi__reject(struct vs_scsi_cmd *cmd, uint8_t key, uint16_t asc,
		     const char *why VS_CALLER_PARAM)
{
	VS_WARNING(SCSI, "tag %#llx op %#x (%s) rejected: %s (%s, asc %#x/%#x)",
		   (unsigned long long)cmd->tag, cmd_op(cmd), vs_scsi_op_name(cmd_op(cmd)), why,
		   vs_scsi_sense_key_name(key), asc >> 8, asc & 0xff);
	vs_scsi_sense(cmd, key, asc);
}

void vs_scsi__bad_cdb(struct vs_scsi_cmd *cmd, uint16_t byte, int bit,
		      const char *why VS_CALLER_PARAM)
{
	VS_WARNING(SCSI, "tag %#llx op %#x (%s): invalid field in CDB byte %u bit %d: %s",
		   (unsigned long long)cmd->tag, cmd_op(cmd), vs_scsi_op_name(cmd_op(cmd)), byte,
		   bit, why);
	vs_scsi_sense_field(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_INVALID_FIELD_IN_CDB, true, byte,
			    bit);
}

void vs_scsi__bad_param(struct vs_scsi_cmd *cmd, uint16_t byte, int bit,
			const char *why VS_CALLER_PARAM)
{
	VS_WARNING(SCSI, "tag %#llx op %#x (%s): invalid field in parameter list byte %u: %s",
		   (unsigned long long)cmd->tag, cmd_op(cmd), vs_scsi_op_name(cmd_op(cmd)), byte,
		   why);
	vs_scsi_sense_field(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_INVALID_FIELD_IN_PARAM, false,
			    byte, bit);
}

void vs_scsi__lba_out_of_range(struct vs_scsi_cmd *cmd, uint64_t lba, uint64_t n VS_CALLER_PARAM)
{
	VS_WARNING(SCSI, "tag %#llx op %#x (%s): lba %llu + %llu blocks beyond the end",
		   (unsigned long long)cmd->tag, cmd_op(cmd), vs_scsi_op_name(cmd_op(cmd)),
		   (unsigned long long)lba, (unsigned long long)n);
	vs_scsi_sense(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_LBA_OUT_OF_RANGE);
}

void vs_scsi_sense_errno(struct vs_scsi_cmd *cmd, int err, enum vs_scsi_io_kind kind)
{
	bool rd = kind == VS_IO_KIND_READ;

	switch (err) {
	case -EAGAIN:
	case -ENOMEM:
		/* Out of I/O slots or memory: a transient condition the initiator retries. */
		cmd->status = VS_SCSI_BUSY;
		cmd->sense_len = 0;
		return;
	case -EROFS:
		vs_scsi_sense(cmd, VS_SENSE_DATA_PROTECT, VS_ASC_WRITE_PROTECTED);
		break;
	case -ENOSPC:
		/* A thin-provisioned device out of space (SBC-3 4.7.3.7). */
		vs_scsi_sense(cmd, VS_SENSE_DATA_PROTECT, VS_ASC_SPACE_ALLOC_FAILED_WP);
		break;
	case -ERANGE:
		vs_scsi_sense(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_LBA_OUT_OF_RANGE);
		break;
	default:
		vs_scsi_sense(cmd, VS_SENSE_MEDIUM_ERROR,
			      rd ? VS_ASC_UNRECOVERED_READ_ERROR : VS_ASC_WRITE_ERROR);
		break;
	}
	VS_ERROR(SCSI, "tag %#llx op %#x (%s): backend %s error %d: %s",
		 (unsigned long long)cmd->tag, cmd_op(cmd), vs_scsi_op_name(cmd_op(cmd)),
		 rd ? "read" : "write", err, strerror(-err));
}

const char *vs_scsi_status_name(uint8_t status)
{
	switch (status) {
	case VS_SCSI_GOOD:
		return "GOOD";
	case VS_SCSI_CHECK_CONDITION:
		return "CHECK CONDITION";
	case VS_SCSI_CONDITION_MET:
		return "CONDITION MET";
	case VS_SCSI_BUSY:
		return "BUSY";
	case VS_SCSI_RESERVATION_CONFLICT:
		return "RESERVATION CONFLICT";
	case VS_SCSI_TASK_SET_FULL:
		return "TASK SET FULL";
	case VS_SCSI_ACA_ACTIVE:
		return "ACA ACTIVE";
	case VS_SCSI_TASK_ABORTED:
		return "TASK ABORTED";
	default:
		return "?";
	}
}

const char *vs_scsi_sense_key_name(uint8_t key)
{
	static const char *const names[16] = {
	    "NO SENSE",	      "RECOVERED ERROR", "NOT READY",	   "MEDIUM ERROR",
	    "HARDWARE ERROR", "ILLEGAL REQUEST", "UNIT ATTENTION", "DATA PROTECT",
	    "BLANK CHECK",    "VENDOR SPECIFIC", "COPY ABORTED",   "ABORTED COMMAND",
	    "RESERVED",	      "VOLUME OVERFLOW", "MISCOMPARE",	   "COMPLETED",
	};

	return names[key & 0x0f];
}

const char *vs_scsi_op_name(uint8_t op)
{
	switch (op) {
	case VS_OP_TEST_UNIT_READY:
		return "TEST UNIT READY";
	case VS_OP_REQUEST_SENSE:
		return "REQUEST SENSE";
	case VS_OP_READ_6:
		return "READ(6)";
	case VS_OP_WRITE_6:
		return "WRITE(6)";
	case VS_OP_INQUIRY:
		return "INQUIRY";
	case VS_OP_MODE_SELECT_6:
		return "MODE SELECT(6)";
	case VS_OP_MODE_SENSE_6:
		return "MODE SENSE(6)";
	case VS_OP_START_STOP_UNIT:
		return "START STOP UNIT";
	case VS_OP_READ_CAPACITY_10:
		return "READ CAPACITY(10)";
	case VS_OP_READ_10:
		return "READ(10)";
	case VS_OP_WRITE_10:
		return "WRITE(10)";
	case VS_OP_VERIFY_10:
		return "VERIFY(10)";
	case VS_OP_SYNCHRONIZE_CACHE_10:
		return "SYNCHRONIZE CACHE(10)";
	case VS_OP_WRITE_SAME_10:
		return "WRITE SAME(10)";
	case VS_OP_UNMAP:
		return "UNMAP";
	case VS_OP_MODE_SELECT_10:
		return "MODE SELECT(10)";
	case VS_OP_MODE_SENSE_10:
		return "MODE SENSE(10)";
	case VS_OP_ATA_PASS_THROUGH_16:
		return "ATA PASS-THROUGH(16)";
	case VS_OP_READ_16:
		return "READ(16)";
	case VS_OP_WRITE_16:
		return "WRITE(16)";
	case VS_OP_VERIFY_16:
		return "VERIFY(16)";
	case VS_OP_SYNCHRONIZE_CACHE_16:
		return "SYNCHRONIZE CACHE(16)";
	case VS_OP_WRITE_SAME_16:
		return "WRITE SAME(16)";
	case VS_OP_SERVICE_ACTION_IN_16:
		return "SERVICE ACTION IN(16)";
	case VS_OP_REPORT_LUNS:
		return "REPORT LUNS";
	case VS_OP_ATA_PASS_THROUGH_12:
		return "ATA PASS-THROUGH(12)";
	case VS_OP_MAINTENANCE_IN:
		return "MAINTENANCE IN";
	case VS_OP_READ_12:
		return "READ(12)";
	case VS_OP_WRITE_12:
		return "WRITE(12)";
	case VS_OP_VERIFY_12:
		return "VERIFY(12)";
	default:
		return "unsupported";
	}
}
