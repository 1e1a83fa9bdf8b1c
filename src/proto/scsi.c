/* SPDX-License-Identifier: MIT */
/* SCSI names for traces and tools, and sense parsing (SPC-4 4.5). */
#include "proto/scsi_proto.h"

bool vs_scsi_sense_parse(const uint8_t *sense, size_t len, uint8_t *key, uint8_t *asc,
			 uint8_t *ascq)
{
	uint8_t code = sense && len ? sense[0] & 0x7f : 0;

	if ((code == 0x70 || code == 0x71) && len >= 14) {
		*key = sense[2] & 0x0f;
		*asc = sense[12];
		*ascq = sense[13];
		return true;
	}
	if ((code == 0x72 || code == 0x73) && len >= 4) {
		*key = sense[1] & 0x0f;
		*asc = sense[2];
		*ascq = sense[3];
		return true;
	}
	return false;
}

const char *vs_scsi_asc_name(uint8_t asc, uint8_t ascq)
{
	/* SPC-4 Annex D (table D.1), the codes a disk target or its initiator meets; the
	 * codes this target sets are the enum's (scsi_proto.h). */
	static const struct {
		uint16_t code;
		const char *name;
	} names[] = {
	    {VS_ASC_NONE, "NO ADDITIONAL SENSE INFORMATION"},
	    {0x0006, "I/O PROCESS TERMINATED"},
	    {0x0016, "OPERATION IN PROGRESS"},
	    {0x0400, "LOGICAL UNIT NOT READY, CAUSE NOT REPORTABLE"},
	    {0x0401, "LOGICAL UNIT IS IN PROCESS OF BECOMING READY"},
	    {0x0402, "LOGICAL UNIT NOT READY, INITIALIZING COMMAND REQUIRED"},
	    {0x0403, "LOGICAL UNIT NOT READY, MANUAL INTERVENTION REQUIRED"},
	    {0x0404, "LOGICAL UNIT NOT READY, FORMAT IN PROGRESS"},
	    {0x0800, "LOGICAL UNIT COMMUNICATION FAILURE"},
	    {VS_ASC_LUN_COMM_TIMEOUT, "LOGICAL UNIT COMMUNICATION TIME-OUT"},
	    {VS_ASC_WRITE_ERROR, "WRITE ERROR"},
	    {0x0c02, "WRITE ERROR - AUTO REALLOCATION FAILED"},
	    {0x1000, "ID CRC OR ECC ERROR"},
	    {VS_ASC_UNRECOVERED_READ_ERROR, "UNRECOVERED READ ERROR"},
	    {0x1400, "RECORDED ENTITY NOT FOUND"},
	    {VS_ASC_PARAM_LIST_LENGTH_ERROR, "PARAMETER LIST LENGTH ERROR"},
	    {VS_ASC_MISCOMPARE_DURING_VERIFY, "MISCOMPARE DURING VERIFY OPERATION"},
	    {VS_ASC_INVALID_OPCODE, "INVALID COMMAND OPERATION CODE"},
	    {VS_ASC_LBA_OUT_OF_RANGE, "LOGICAL BLOCK ADDRESS OUT OF RANGE"},
	    {VS_ASC_INVALID_FIELD_IN_CDB, "INVALID FIELD IN CDB"},
	    {VS_ASC_LUN_NOT_SUPPORTED, "LOGICAL UNIT NOT SUPPORTED"},
	    {VS_ASC_INVALID_FIELD_IN_PARAM, "INVALID FIELD IN PARAMETER LIST"},
	    {0x2601, "PARAMETER NOT SUPPORTED"},
	    {0x2602, "PARAMETER VALUE INVALID"},
	    {VS_ASC_WRITE_PROTECTED, "WRITE PROTECTED"},
	    {0x2701, "HARDWARE WRITE PROTECTED"},
	    {0x2702, "LOGICAL UNIT SOFTWARE WRITE PROTECTED"},
	    {VS_ASC_SPACE_ALLOC_FAILED_WP, "SPACE ALLOCATION FAILED WRITE PROTECT"},
	    {0x2800, "NOT READY TO READY CHANGE, MEDIUM MAY HAVE CHANGED"},
	    {VS_ASC_POWER_ON_RESET, "POWER ON, RESET, OR BUS DEVICE RESET OCCURRED"},
	    {0x2901, "POWER ON OCCURRED"},
	    {0x2902, "SCSI BUS RESET OCCURRED"},
	    {0x2903, "BUS DEVICE RESET FUNCTION OCCURRED"},
	    {0x2904, "DEVICE INTERNAL RESET"},
	    {0x2907, "I_T NEXUS LOSS OCCURRED"},
	    {0x2a01, "MODE PARAMETERS CHANGED"},
	    {VS_ASC_CAPACITY_DATA_CHANGED, "CAPACITY DATA HAS CHANGED"},
	    {0x2c00, "COMMAND SEQUENCE ERROR"},
	    {0x3000, "INCOMPATIBLE MEDIUM INSTALLED"},
	    {0x3100, "MEDIUM FORMAT CORRUPTED"},
	    {VS_ASC_SAVING_PARAMS_UNSUPPORTED, "SAVING PARAMETERS NOT SUPPORTED"},
	    {0x3a00, "MEDIUM NOT PRESENT"},
	    {0x3e00, "LOGICAL UNIT HAS NOT SELF-CONFIGURED YET"},
	    {0x3f00, "TARGET OPERATING CONDITIONS HAVE CHANGED"},
	    {0x3f01, "MICROCODE HAS BEEN CHANGED"},
	    {VS_ASC_REPORTED_LUNS_CHANGED, "REPORTED LUNS DATA HAS CHANGED"},
	    {VS_ASC_INTERNAL_TARGET_FAILURE, "INTERNAL TARGET FAILURE"},
	    {0x4700, "SCSI PARITY ERROR"},
	    {0x4b00, "DATA PHASE ERROR"},
	    {0x4e00, "OVERLAPPED COMMANDS ATTEMPTED"},
	    {0x5300, "MEDIA LOAD OR EJECT FAILED"},
	    {0x5302, "MEDIUM REMOVAL PREVENTED"},
	    {0x5500, "SYSTEM RESOURCE FAILURE"},
	    {0x5503, "INSUFFICIENT RESOURCES"},
	    {0x5d00, "FAILURE PREDICTION THRESHOLD EXCEEDED"},
	};
	uint16_t code = (uint16_t)(asc << 8 | ascq);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].code == code)
			return names[i].name;
	return NULL;
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
	case VS_SCSI_OP_TEST_UNIT_READY:
		return "TEST UNIT READY";
	case VS_SCSI_OP_REQUEST_SENSE:
		return "REQUEST SENSE";
	case VS_SCSI_OP_READ_6:
		return "READ(6)";
	case VS_SCSI_OP_WRITE_6:
		return "WRITE(6)";
	case VS_SCSI_OP_INQUIRY:
		return "INQUIRY";
	case VS_SCSI_OP_MODE_SELECT_6:
		return "MODE SELECT(6)";
	case VS_SCSI_OP_MODE_SENSE_6:
		return "MODE SENSE(6)";
	case VS_SCSI_OP_START_STOP_UNIT:
		return "START STOP UNIT";
	case VS_SCSI_OP_READ_CAPACITY_10:
		return "READ CAPACITY(10)";
	case VS_SCSI_OP_READ_10:
		return "READ(10)";
	case VS_SCSI_OP_WRITE_10:
		return "WRITE(10)";
	case VS_SCSI_OP_VERIFY_10:
		return "VERIFY(10)";
	case VS_SCSI_OP_SYNCHRONIZE_CACHE_10:
		return "SYNCHRONIZE CACHE(10)";
	case VS_SCSI_OP_WRITE_SAME_10:
		return "WRITE SAME(10)";
	case VS_SCSI_OP_UNMAP:
		return "UNMAP";
	case VS_SCSI_OP_MODE_SELECT_10:
		return "MODE SELECT(10)";
	case VS_SCSI_OP_MODE_SENSE_10:
		return "MODE SENSE(10)";
	case VS_SCSI_OP_ATA_PASS_THROUGH_16:
		return "ATA PASS-THROUGH(16)";
	case VS_SCSI_OP_READ_16:
		return "READ(16)";
	case VS_SCSI_OP_WRITE_16:
		return "WRITE(16)";
	case VS_SCSI_OP_VERIFY_16:
		return "VERIFY(16)";
	case VS_SCSI_OP_SYNCHRONIZE_CACHE_16:
		return "SYNCHRONIZE CACHE(16)";
	case VS_SCSI_OP_WRITE_SAME_16:
		return "WRITE SAME(16)";
	case VS_SCSI_OP_SERVICE_ACTION_IN_16:
		return "SERVICE ACTION IN(16)";
	case VS_SCSI_OP_REPORT_LUNS:
		return "REPORT LUNS";
	case VS_SCSI_OP_ATA_PASS_THROUGH_12:
		return "ATA PASS-THROUGH(12)";
	case VS_SCSI_OP_MAINTENANCE_IN:
		return "MAINTENANCE IN";
	case VS_SCSI_OP_READ_12:
		return "READ(12)";
	case VS_SCSI_OP_WRITE_12:
		return "WRITE(12)";
	case VS_SCSI_OP_VERIFY_12:
		return "VERIFY(12)";
	default:
		return "unsupported";
	}
}
