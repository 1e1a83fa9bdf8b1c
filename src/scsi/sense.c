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

static uint8_t cmd_op(const struct vs_scsi_cmd *cmd)
{
	return cmd->cdb_len ? cmd->cdb[0] : 0xff;
}

/* The sense data as built, for a site to record whole: the decoder names key and
 * ASC/ASCQ ("ILLEGAL REQUEST: LOGICAL BLOCK ADDRESS OUT OF RANGE"). */
static struct vs_bytes sense_bytes(const struct vs_scsi_cmd *cmd)
{
	return VS_BYTES(cmd->sense, cmd->sense_len);
}

void vs_scsi__reject(struct vs_scsi_cmd *cmd, uint8_t key, uint16_t asc, const char *why,
		     const char *caller)
{
	vs_scsi_sense(cmd, key, asc);
	VS_WARNING(SCSI, "tag %#llx op %#x{scsi_op} rejected by %s: %s: %s{sense}",
		   (unsigned long long)cmd->tag, cmd_op(cmd), caller, why, sense_bytes(cmd));
}

void vs_scsi__bad_cdb(struct vs_scsi_cmd *cmd, uint16_t byte, int bit, const char *why,
		      const char *caller)
{
	vs_scsi_sense_field(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_INVALID_FIELD_IN_CDB, true, byte,
			    bit);
	VS_WARNING(SCSI, "tag %#llx op %#x{scsi_op}: CDB byte %u bit %d: %s (%s): %s{sense}",
		   (unsigned long long)cmd->tag, cmd_op(cmd), byte, bit, why, caller,
		   sense_bytes(cmd));
}

void vs_scsi__bad_param(struct vs_scsi_cmd *cmd, uint16_t byte, int bit, const char *why,
			const char *caller)
{
	vs_scsi_sense_field(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_INVALID_FIELD_IN_PARAM, false,
			    byte, bit);
	VS_WARNING(SCSI, "tag %#llx op %#x{scsi_op}: parameter list byte %u: %s (%s): %s{sense}",
		   (unsigned long long)cmd->tag, cmd_op(cmd), byte, why, caller, sense_bytes(cmd));
}

void vs_scsi__lba_out_of_range(struct vs_scsi_cmd *cmd, uint64_t lba, uint64_t n,
			       const char *caller)
{
	vs_scsi_sense(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_LBA_OUT_OF_RANGE);
	VS_WARNING(SCSI, "tag %#llx op %#x{scsi_op}: lba %llu + %llu blocks (%s): %s{sense}",
		   (unsigned long long)cmd->tag, cmd_op(cmd), (unsigned long long)lba,
		   (unsigned long long)n, caller, sense_bytes(cmd));
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
	case -ETIMEDOUT:
		/* The storage behind the LUN did not answer in time (an rbd backend's
		 * timeout=S): the medium is not known to be bad.  HARDWARE ERROR, which Linux
		 * fails at once rather than retrying a request that already waited S seconds. */
		vs_scsi_sense(cmd, VS_SENSE_HARDWARE_ERROR, VS_ASC_LUN_COMM_TIMEOUT);
		break;
	default:
		vs_scsi_sense(cmd, VS_SENSE_MEDIUM_ERROR,
			      rd ? VS_ASC_UNRECOVERED_READ_ERROR : VS_ASC_WRITE_ERROR);
		break;
	}
	VS_ERROR(SCSI, "tag %#llx op %#x{scsi_op}: backend %s error %d (%s): %s{sense}",
		 (unsigned long long)cmd->tag, cmd_op(cmd), rd ? "read" : "write", err,
		 strerror(-err), sense_bytes(cmd));
}
