/* SPDX-License-Identifier: MIT */
/*
 * Small commands: READ CAPACITY (10) and (16), REQUEST SENSE, START STOP UNIT.
 */
#include "scsi/scsi_int.h"

int vs_scsi_read_capacity_10(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	uint64_t last = vs_scsi_lun_nblocks(lun) - 1;
	uint8_t b[8];

	/* SBC-3: an LBA with PMI clear is an error (PMI itself is obsolete, ignored). */
	if (!(cdb[8] & 0x01) && vs_be32(&cdb[2])) {
		vs_scsi_bad_cdb(cmd, 2, -1, "LBA set without PMI");
		return VS_SCSI_DONE;
	}
	/* 0xFFFFFFFF tells the initiator to use READ CAPACITY (16). */
	vs_put_be32(&b[0], last > 0xfffffffeull ? 0xffffffffu : (uint32_t)last);
	vs_put_be32(&b[4], lun->block_size);
	vs_scsi_data_in(cmd, b, sizeof(b), sizeof(b));
	return VS_SCSI_DONE;
}

int vs_scsi_service_action_in_16(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	uint8_t b[32];

	if ((cdb[1] & 0x1f) != VS_SCSI_SAI_READ_CAPACITY_16) {
		vs_scsi_bad_cdb(cmd, 1, 4, "unsupported service action");
		return VS_SCSI_DONE;
	}
	if (!(cdb[14] & 0x01) && vs_be64(&cdb[2])) {
		vs_scsi_bad_cdb(cmd, 2, -1, "LBA set without PMI");
		return VS_SCSI_DONE;
	}
	memset(b, 0, sizeof(b));
	vs_put_be64(&b[0], vs_scsi_lun_nblocks(lun) - 1);
	vs_put_be32(&b[8], lun->block_size);
	if (lun->discard)
		b[14] = VS_SCSI_RC16_LBPME | VS_SCSI_RC16_LBPRZ;
	vs_scsi_data_in(cmd, b, sizeof(b), vs_be32(&cdb[10]));
	return VS_SCSI_DONE;
}

/* SPC-4 6.39: with autosense there is never deferred sense to return, only a pending
 * unit attention (reported and cleared here) or NO SENSE. */
int vs_scsi_request_sense(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	uint8_t b[18];
	uint16_t asc;
	size_t len;

	if (cdb[1] & 0x01) {
		vs_scsi_bad_cdb(cmd, 1, 0, "descriptor format sense not supported");
		return VS_SCSI_DONE;
	}
	if (!lun)
		len = vs_scsi_sense_build(b, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_LUN_NOT_SUPPORTED);
	else if (vs_scsi_ua_take(lun, &asc))
		len = vs_scsi_sense_build(b, VS_SENSE_UNIT_ATTENTION, asc);
	else
		len = vs_scsi_sense_build(b, VS_SENSE_NO_SENSE, VS_ASC_NONE);
	vs_scsi_data_in(cmd, b, len, cdb[4]);
	return VS_SCSI_DONE;
}

/* Nothing spins and nothing ejects: every power condition is accepted as is. */
int vs_scsi_start_stop_unit(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	VS_INFO(SCSI, "lun %u: START STOP UNIT start %u loej %u power condition %u (accepted)",
		lun->id, cmd->cdb[4] & 0x01, (cmd->cdb[4] >> 1) & 0x01, cmd->cdb[4] >> 4);
	return VS_SCSI_DONE;
}
