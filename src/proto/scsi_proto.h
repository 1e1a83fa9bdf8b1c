/* SPDX-License-Identifier: MIT */
/*
 * SCSI wire vocabulary (SAM-5, SPC-4, SBC-3), shared by the device (src/scsi) and the
 * driver (src/initiator): status codes, sense keys, additional sense codes, operation
 * codes, big-endian field accessors, sense parsing and names for traces and tools.
 * Like Linux's <scsi/scsi_proto.h> or SPDK's scsi_spec.h: declarations, no emulation.
 */
#ifndef VS_SCSI_PROTO_H
#define VS_SCSI_PROTO_H

#include <endian.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define VS_SCSI_CDB_MAX	  32 /* the longest CDB either side handles */
#define VS_SCSI_SENSE_MAX 96 /* sense bytes either side keeps */

/* ---- status codes (SAM-5) ---- */
enum vs_scsi_status {
	VS_SCSI_GOOD = 0x00,
	VS_SCSI_CHECK_CONDITION = 0x02,
	VS_SCSI_CONDITION_MET = 0x04,
	VS_SCSI_BUSY = 0x08,
	VS_SCSI_RESERVATION_CONFLICT = 0x18,
	VS_SCSI_TASK_SET_FULL = 0x28,
	VS_SCSI_ACA_ACTIVE = 0x30,
	VS_SCSI_TASK_ABORTED = 0x40,
};

/* ---- sense keys (SPC-4) ---- */
enum vs_scsi_sense_key {
	VS_SENSE_NO_SENSE = 0x0,
	VS_SENSE_RECOVERED_ERROR = 0x1,
	VS_SENSE_NOT_READY = 0x2,
	VS_SENSE_MEDIUM_ERROR = 0x3,
	VS_SENSE_HARDWARE_ERROR = 0x4,
	VS_SENSE_ILLEGAL_REQUEST = 0x5,
	VS_SENSE_UNIT_ATTENTION = 0x6,
	VS_SENSE_DATA_PROTECT = 0x7,
	VS_SENSE_ABORTED_COMMAND = 0xb,
	VS_SENSE_MISCOMPARE = 0xe,
};

/* ---- additional sense codes, as ASC << 8 | ASCQ ---- */
enum {
	VS_ASC_NONE = 0x0000,
	VS_ASC_WRITE_ERROR = 0x0c00,
	VS_ASC_LUN_COMM_TIMEOUT = 0x0801,
	VS_ASC_UNRECOVERED_READ_ERROR = 0x1100,
	VS_ASC_PARAM_LIST_LENGTH_ERROR = 0x1a00,
	VS_ASC_MISCOMPARE_DURING_VERIFY = 0x1d00,
	VS_ASC_INVALID_OPCODE = 0x2000,
	VS_ASC_LBA_OUT_OF_RANGE = 0x2100,
	VS_ASC_INVALID_FIELD_IN_CDB = 0x2400,
	VS_ASC_LUN_NOT_SUPPORTED = 0x2500,
	VS_ASC_INVALID_FIELD_IN_PARAM = 0x2600,
	VS_ASC_WRITE_PROTECTED = 0x2700,
	VS_ASC_SPACE_ALLOC_FAILED_WP = 0x2707,
	VS_ASC_POWER_ON_RESET = 0x2900,
	VS_ASC_CAPACITY_DATA_CHANGED = 0x2a09,
	VS_ASC_SAVING_PARAMS_UNSUPPORTED = 0x3900,
	VS_ASC_INTERNAL_TARGET_FAILURE = 0x4400,
	VS_ASC_REPORTED_LUNS_CHANGED = 0x3f0e,
};

/* ---- operation codes (SPC-4, SBC-3) ---- */
enum {
	VS_SCSI_OP_TEST_UNIT_READY = 0x00,
	VS_SCSI_OP_REQUEST_SENSE = 0x03,
	VS_SCSI_OP_READ_6 = 0x08,
	VS_SCSI_OP_WRITE_6 = 0x0a,
	VS_SCSI_OP_INQUIRY = 0x12,
	VS_SCSI_OP_MODE_SELECT_6 = 0x15,
	VS_SCSI_OP_MODE_SENSE_6 = 0x1a,
	VS_SCSI_OP_START_STOP_UNIT = 0x1b,
	VS_SCSI_OP_READ_CAPACITY_10 = 0x25,
	VS_SCSI_OP_READ_10 = 0x28,
	VS_SCSI_OP_WRITE_10 = 0x2a,
	VS_SCSI_OP_VERIFY_10 = 0x2f,
	VS_SCSI_OP_SYNCHRONIZE_CACHE_10 = 0x35,
	VS_SCSI_OP_WRITE_SAME_10 = 0x41,
	VS_SCSI_OP_UNMAP = 0x42,
	VS_SCSI_OP_MODE_SELECT_10 = 0x55,
	VS_SCSI_OP_MODE_SENSE_10 = 0x5a,
	VS_SCSI_OP_ATA_PASS_THROUGH_16 = 0x85,
	VS_SCSI_OP_READ_16 = 0x88,
	VS_SCSI_OP_WRITE_16 = 0x8a,
	VS_SCSI_OP_VERIFY_16 = 0x8f,
	VS_SCSI_OP_SYNCHRONIZE_CACHE_16 = 0x91,
	VS_SCSI_OP_WRITE_SAME_16 = 0x93,
	VS_SCSI_OP_SERVICE_ACTION_IN_16 = 0x9e,
	VS_SCSI_OP_REPORT_LUNS = 0xa0,
	VS_SCSI_OP_ATA_PASS_THROUGH_12 = 0xa1,
	VS_SCSI_OP_MAINTENANCE_IN = 0xa3,
	VS_SCSI_OP_READ_12 = 0xa8,
	VS_SCSI_OP_WRITE_12 = 0xaa,
	VS_SCSI_OP_VERIFY_12 = 0xaf,
};
#define VS_SCSI_SAI_READ_CAPACITY_16 0x10 /* SERVICE ACTION IN(16) */

/* ---- CDB and data fields both sides build or read ---- */
#define VS_SCSI_RW16_FUA	    0x08 /* READ/WRITE(16) byte 1 */
#define VS_SCSI_INQUIRY_EVPD	    0x01 /* INQUIRY byte 1 */
#define VS_SCSI_PERIPHERAL_TYPE	    0x1f /* standard INQUIRY byte 0: device type ... */
#define VS_SCSI_TYPE_DISK	    0x00 /* ... a direct-access block device */
#define VS_SCSI_VPD_SUPPORTED	    0x00 /* VPD page codes */
#define VS_SCSI_VPD_SERIAL	    0x80
#define VS_SCSI_VPD_DEVICE_ID	    0x83
#define VS_SCSI_VPD_BLOCK_LIMITS    0xb0
#define VS_SCSI_VPD_CHARACTERISTICS 0xb1
#define VS_SCSI_VPD_LBP		    0xb2 /* Logical Block Provisioning */
#define VS_SCSI_LBP_LBPU	    0x80 /* VPD B2h byte 5: UNMAP supported */
#define VS_SCSI_RC16_LBPME	    0x80 /* READ CAPACITY(16) byte 14: thin provisioned */
#define VS_SCSI_RC16_LBPRZ	    0x40 /* ... and unmapped blocks read as zeros */
#define VS_SCSI_MODE_ALL_PAGES	    0x3f
#define VS_SCSI_MODE_DBD	    0x08 /* MODE SENSE byte 1: no block descriptors */
#define VS_SCSI_MODE_WP		    0x80 /* device-specific parameter: write protected */
#define VS_SCSI_UNMAP_PARAM_LEN	    24	 /* an UNMAP parameter list with one descriptor */
#define VS_SCSI_FIXED_SENSE_LEN	    18

/* ---- big-endian field accessors (every SCSI field is big-endian) ----
 * Unaligned loads and stores with one byte swap each: they sit in the per-command paths
 * of both sides (CDB decoding, CDB building). */
/* clang-format off */
static inline uint16_t vs_be16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return be16toh(v); }
static inline uint32_t vs_be32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return be32toh(v); }
static inline uint64_t vs_be64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return be64toh(v); }
static inline uint32_t vs_be24(const uint8_t *p)
{ return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2]; }
static inline void vs_put_be16(uint8_t *p, uint16_t v) { v = htobe16(v); memcpy(p, &v, 2); }
static inline void vs_put_be32(uint8_t *p, uint32_t v) { v = htobe32(v); memcpy(p, &v, 4); }
static inline void vs_put_be64(uint8_t *p, uint64_t v) { v = htobe64(v); memcpy(p, &v, 8); }
static inline void vs_put_be24(uint8_t *p, uint32_t v)
{ p[0] = (uint8_t)(v >> 16); p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)v; }
/* clang-format on */

/* ---- CDB ---- */
/* A CDB's length by its operation code's group (SPC-4 4.2.5.1): 6, 10, 12 or 16 bytes;
 * 0 for the groups whose length is not given by the code (variable, vendor). */
static inline size_t vs_scsi_cdb_len(uint8_t op)
{
	static const uint8_t by_group[8] = {6, 10, 10, 0, 16, 12, 0, 0};
	return by_group[op >> 5];
}

/* ---- LUNs ---- */
/* SAM-5 single level LUN (REPORT LUNS data; bytes 2-3 of a virtio-scsi event's LUN):
 * peripheral device addressing below 256, flat space above (byte 0 = 01b << 6 | LUN bits
 * 13..8). */
static inline void vs_scsi_lun_sam(uint8_t p[8], unsigned id)
{
	memset(p, 0, 8);
	p[0] = id < 256 ? 0 : (uint8_t)(0x40 | ((id >> 8) & 0x3f));
	p[1] = (uint8_t)id;
}

/* ---- sense data ---- */
/* The sense key of fixed-format (70h/71h) or descriptor-format (72h/73h) sense; 0
 * (NO SENSE) when too short or of another format.  Inline: drivers test it per command. */
static inline uint8_t vs_scsi_sense_key(const uint8_t *sense, size_t len)
{
	uint8_t code = len ? sense[0] & 0x7f : 0;

	if ((code == 0x70 || code == 0x71) && len > 2)
		return sense[2] & 0xf;
	if ((code == 0x72 || code == 0x73) && len > 1)
		return sense[1] & 0xf;
	return 0;
}
/* Key, ASC and ASCQ of fixed- or descriptor-format sense: false when too short or of
 * another format. */
bool vs_scsi_sense_parse(const uint8_t *sense, size_t len, uint8_t *key, uint8_t *asc,
			 uint8_t *ascq);

/* ---- names for traces and tools ---- */
const char *vs_scsi_op_name(uint8_t op);	 /* "READ(10)", or "unsupported" */
const char *vs_scsi_status_name(uint8_t status); /* "CHECK CONDITION" */
const char *vs_scsi_sense_key_name(uint8_t key); /* "ILLEGAL REQUEST" */
/* "LOGICAL BLOCK ADDRESS OUT OF RANGE", or NULL for a code not in our table. */
const char *vs_scsi_asc_name(uint8_t asc, uint8_t ascq);

#endif /* VS_SCSI_PROTO_H */
