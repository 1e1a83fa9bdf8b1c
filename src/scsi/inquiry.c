/* SPDX-License-Identifier: MIT */
/*
 * INQUIRY: standard data and the vital product data pages (SPC-4 6.6, 7.8; SBC-3 6.6).
 */
#include "scsi/scsi_int.h"

#define STD_INQUIRY_LEN 96
#define PQ_NOT_CAPABLE	0x7f /* peripheral qualifier 011b, device type 1Fh */

/* Copy s into a fixed, space-padded ASCII field. */
static void put_ascii(uint8_t *p, size_t len, const char *s)
{
	size_t n = strlen(s);

	memset(p, ' ', len);
	memcpy(p, s, n < len ? n : len);
}

static size_t std_inquiry(uint8_t *b, uint8_t peripheral)
{
	memset(b, 0, STD_INQUIRY_LEN);
	b[0] = peripheral;
	b[2] = 0x06;	    /* VERSION: SPC-4 */
	b[3] = 0x10 | 0x02; /* HISUP, RESPONSE DATA FORMAT 2 */
	b[4] = STD_INQUIRY_LEN - 5;
	b[7] = 0x02; /* CMDQUE */
	put_ascii(&b[8], 8, VS_SCSI_VENDOR);
	put_ascii(&b[16], 16, VS_SCSI_PRODUCT);
	put_ascii(&b[32], 4, VS_SCSI_REVISION);
	/* Version descriptors: SAM-5, SPC-4, SBC-3 (no version claimed). */
	vs_put_be16(&b[58], 0x00a0);
	vs_put_be16(&b[60], 0x0460);
	vs_put_be16(&b[62], 0x04c0);
	return STD_INQUIRY_LEN;
}

static const uint8_t supported_pages[] = {VS_SCSI_VPD_SUPPORTED,       VS_SCSI_VPD_SERIAL,
					  VS_SCSI_VPD_DEVICE_ID,       VS_SCSI_VPD_BLOCK_LIMITS,
					  VS_SCSI_VPD_CHARACTERISTICS, VS_SCSI_VPD_LBP};

static size_t vpd_supported(uint8_t *b)
{
	b[3] = sizeof(supported_pages);
	memcpy(&b[4], supported_pages, sizeof(supported_pages));
	return 4 + sizeof(supported_pages);
}

static size_t vpd_serial(const struct vs_scsi_lun *lun, uint8_t *b)
{
	size_t n = strlen(lun->serial);

	b[3] = (uint8_t)n;
	memcpy(&b[4], lun->serial, n);
	return 4 + n;
}

/* Device identification: an NAA 6 designator and a T10 vendor ID one, both of the LU. */
static size_t vpd_devid(const struct vs_scsi_lun *lun, uint8_t *b)
{
	uint8_t *d = &b[4];

	d[0] = 0x01; /* code set: binary */
	d[1] = 0x03; /* association: LU; type: NAA */
	d[3] = sizeof(lun->naa);
	memcpy(&d[4], lun->naa, sizeof(lun->naa));
	d += 4 + sizeof(lun->naa);

	d[0] = 0x02; /* code set: ASCII */
	d[1] = 0x01; /* association: LU; type: T10 vendor ID */
	d[3] = 8 + VS_SCSI_SERIAL_LEN;
	put_ascii(&d[4], 8, VS_SCSI_VENDOR);
	put_ascii(&d[12], VS_SCSI_SERIAL_LEN, lun->serial);
	d += 4 + 8 + VS_SCSI_SERIAL_LEN;

	vs_put_be16(&b[2], (uint16_t)(d - &b[4]));
	return (size_t)(d - b);
}

static size_t vpd_block_limits(const struct vs_scsi_lun *lun, uint8_t *b)
{
	vs_put_be16(&b[2], 0x3c);
	b[4] = 0x01;			      /* WSNZ: WRITE SAME of 0 blocks refused */
	vs_put_be16(&b[6], lun->granularity); /* optimal transfer length granularity */
	vs_put_be32(&b[8], lun->max_xfer_blocks);
	vs_put_be32(&b[12], lun->opt_xfer_blocks);
	if (lun->discard) {
		vs_put_be32(&b[20], lun->max_unmap_blocks);
		vs_put_be32(&b[24], VS_SCSI_MAX_UNMAP_DESC);
		vs_put_be32(&b[28], lun->granularity); /* optimal unmap granularity */
	}
	vs_put_be64(&b[36], lun->max_ws_blocks);
	return 4 + 0x3c;
}

static size_t vpd_block_characteristics(uint8_t *b)
{
	vs_put_be16(&b[2], 0x3c);
	vs_put_be16(&b[4], 0x0001); /* MEDIUM ROTATION RATE: non-rotating */
	return 4 + 0x3c;
}

static size_t vpd_provisioning(const struct vs_scsi_lun *lun, uint8_t *b)
{
	vs_put_be16(&b[2], 4);
	if (lun->discard) {
		/* LBPU, LBPWS, LBPWS10, LBPRZ: the backend contract is that discarded
		 * blocks read as zeros. */
		b[5] = VS_SCSI_LBP_LBPU | 0x40 | 0x20 | 0x04;
		b[6] = 0x02; /* PROVISIONING TYPE: thin */
	}
	return 8;
}

int vs_scsi_inquiry(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	uint8_t b[256];
	uint16_t alloc = vs_be16(&cdb[3]);
	size_t len;

	if (cdb[1] & 0x02) {
		vs_scsi_bad_cdb(cmd, 1, 1, "CMDDT is obsolete");
		return VS_SCSI_DONE;
	}
	if (!(cdb[1] & 0x01)) {
		if (cdb[2]) {
			vs_scsi_bad_cdb(cmd, 2, -1, "page code without EVPD");
			return VS_SCSI_DONE;
		}
		len = std_inquiry(b, 0x00);
		vs_scsi_data_in(cmd, b, len, alloc);
		return VS_SCSI_DONE;
	}
	memset(b, 0, sizeof(b));
	b[1] = cdb[2];
	switch (cdb[2]) {
	case VS_SCSI_VPD_SUPPORTED:
		len = vpd_supported(b);
		break;
	case VS_SCSI_VPD_SERIAL:
		len = vpd_serial(lun, b);
		break;
	case VS_SCSI_VPD_DEVICE_ID:
		len = vpd_devid(lun, b);
		break;
	case VS_SCSI_VPD_BLOCK_LIMITS:
		len = vpd_block_limits(lun, b);
		break;
	case VS_SCSI_VPD_CHARACTERISTICS:
		len = vpd_block_characteristics(b);
		break;
	case VS_SCSI_VPD_LBP:
		len = vpd_provisioning(lun, b);
		break;
	default:
		vs_scsi_bad_cdb(cmd, 2, -1, "unsupported VPD page");
		return VS_SCSI_DONE;
	}
	vs_scsi_data_in(cmd, b, len, alloc);
	return VS_SCSI_DONE;
}

int vs_scsi_inquiry_no_lun(struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	uint8_t b[STD_INQUIRY_LEN];

	if (cdb[1] & 0x03) {
		vs_scsi_reject(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_LUN_NOT_SUPPORTED,
			       "VPD/CMDDT of a missing lun");
		return VS_SCSI_DONE;
	}
	if (cdb[2]) {
		vs_scsi_bad_cdb(cmd, 2, -1, "page code without EVPD");
		return VS_SCSI_DONE;
	}
	vs_scsi_data_in(cmd, b, std_inquiry(b, PQ_NOT_CAPABLE), vs_be16(&cdb[3]));
	return VS_SCSI_DONE;
}
