/* SPDX-License-Identifier: MIT */
/*
 * MODE SENSE / MODE SELECT (6) and (10) (SPC-4 6.11-6.14, SBC-3 6.4): the caching page
 * (WCE changeable: writes become FUA when it is cleared) and the control page.
 */
#include "scsi/scsi_int.h"

#define PAGE_CACHING	0x08
#define PAGE_CONTROL	0x0a
#define PAGE_ALL	0x3f
#define CACHING_LEN	20
#define CONTROL_LEN	12
#define MODE_SELECT_MAX 256 /* longer than header + descriptor + both pages: refused */

enum { PC_CURRENT, PC_CHANGEABLE, PC_DEFAULT, PC_SAVED };

static size_t caching_page(const struct vs_scsi_lun *lun, uint8_t *p, int pc)
{
	memset(p, 0, CACHING_LEN);
	p[0] = PAGE_CACHING;
	p[1] = CACHING_LEN - 2;
	if (pc == PC_CURRENT)
		p[2] = __atomic_load_n(&lun->wce, __ATOMIC_RELAXED) ? 0x04 : 0;
	else
		p[2] = 0x04; /* WCE: changeable, and on by default */
	return CACHING_LEN;
}

static size_t control_page(uint8_t *p, int pc)
{
	memset(p, 0, CONTROL_LEN);
	p[0] = PAGE_CONTROL;
	p[1] = CONTROL_LEN - 2;
	if (pc != PC_CHANGEABLE)
		p[3] = 0x10; /* QUEUE ALGORITHM MODIFIER 1: unrestricted reordering */
	return CONTROL_LEN;
}

/* The page as reported for pc, or 0 when we do not have it. */
static size_t mode_page(const struct vs_scsi_lun *lun, uint8_t code, uint8_t *p, int pc)
{
	switch (code) {
	case PAGE_CACHING:
		return caching_page(lun, p, pc);
	case PAGE_CONTROL:
		return control_page(p, pc);
	default:
		return 0;
	}
}

static size_t block_descriptor(const struct vs_scsi_lun *lun, uint8_t *p, bool llba)
{
	uint64_t blocks = vs_scsi_lun_nblocks(lun);

	if (llba) {
		memset(p, 0, 16);
		vs_put_be64(&p[0], blocks);
		vs_put_be32(&p[12], lun->block_size);
		return 16;
	}
	memset(p, 0, 8);
	vs_put_be32(&p[0], blocks > 0xffffffffull ? 0xffffffffu : (uint32_t)blocks);
	vs_put_be24(&p[5], lun->block_size);
	return 8;
}

int vs_scsi_mode_sense(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	bool ten = cdb[0] == VS_SCSI_OP_MODE_SENSE_10;
	bool dbd = cdb[1] & 0x08;
	bool llba = ten && (cdb[1] & 0x10);
	int pc = cdb[2] >> 6;
	uint8_t code = cdb[2] & 0x3f;
	size_t hdr = ten ? 8 : 4, off, bdl = 0;
	uint32_t alloc = ten ? vs_be16(&cdb[7]) : cdb[4];
	uint8_t b[8 + 16 + CACHING_LEN + CONTROL_LEN];
	uint8_t dsp;

	if (pc == PC_SAVED) {
		vs_scsi_reject(cmd, VS_SENSE_ILLEGAL_REQUEST, VS_ASC_SAVING_PARAMS_UNSUPPORTED,
			       "saved values requested");
		return VS_SCSI_DONE;
	}
	if (cdb[3] != 0 && cdb[3] != 0xff) {
		vs_scsi_bad_cdb(cmd, 3, -1, "unsupported subpage");
		return VS_SCSI_DONE;
	}
	memset(b, 0, hdr);
	off = hdr;
	if (!dbd) {
		bdl = block_descriptor(lun, &b[off], llba);
		off += bdl;
	}
	if (code == PAGE_ALL) {
		off += mode_page(lun, PAGE_CACHING, &b[off], pc);
		off += mode_page(lun, PAGE_CONTROL, &b[off], pc);
	} else {
		size_t n = mode_page(lun, code, &b[off], pc);

		if (!n) {
			vs_scsi_bad_cdb(cmd, 2, 5, "unsupported mode page");
			return VS_SCSI_DONE;
		}
		off += n;
	}
	/* Device-specific parameter: WP, and DPOFUA so that initiators send FUA. */
	dsp = (lun->read_only ? VS_SCSI_MODE_WP : 0) | 0x10;
	if (ten) {
		vs_put_be16(&b[0], (uint16_t)(off - 2));
		b[3] = dsp;
		b[4] = bdl == 16 ? 0x01 : 0; /* LONGLBA */
		vs_put_be16(&b[6], (uint16_t)bdl);
	} else {
		b[0] = (uint8_t)(off - 1);
		b[2] = dsp;
		b[3] = (uint8_t)bdl;
	}
	vs_scsi_data_in(cmd, b, off, alloc);
	return VS_SCSI_DONE;
}

/* A block descriptor may restate the geometry; it cannot change it. */
static bool check_block_descriptor(const struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd,
				   const uint8_t *p, size_t bdl, uint16_t at)
{
	uint64_t blocks = bdl == 16 ? vs_be64(&p[0]) : vs_be32(&p[0]);
	uint32_t len = bdl == 16 ? vs_be32(&p[12]) : vs_be24(&p[5]);
	uint64_t now = vs_scsi_lun_nblocks(lun);
	uint64_t cur = bdl == 16 || now <= 0xffffffffull ? now : 0xffffffffull;

	if (len != lun->block_size) {
		vs_scsi_bad_param(cmd, (uint16_t)(at + (bdl == 16 ? 12 : 5)), -1,
				  "block length change");
		return false;
	}
	if (blocks && blocks != cur) {
		vs_scsi_bad_param(cmd, at, -1, "number of blocks change");
		return false;
	}
	return true;
}

int vs_scsi_mode_select(struct vs_scsi_lun *lun, struct vs_scsi_cmd *cmd)
{
	const uint8_t *cdb = cmd->cdb;
	bool ten = cdb[0] == VS_SCSI_OP_MODE_SELECT_10;
	size_t plen = ten ? vs_be16(&cdb[7]) : cdb[4];
	size_t hdr = ten ? 8 : 4, n, off, bdl;
	uint8_t buf[MODE_SELECT_MAX], cur[CACHING_LEN], chg[CACHING_LEN];
	int wce = __atomic_load_n(&lun->wce, __ATOMIC_RELAXED);

	if (cdb[1] & 0x01) {
		vs_scsi_bad_cdb(cmd, 1, 0, "SP: saving pages not supported");
		return VS_SCSI_DONE;
	}
	if (!plen)
		return VS_SCSI_DONE;
	if (!(cdb[1] & 0x10)) {
		vs_scsi_bad_cdb(cmd, 1, 4, "PF clear (vendor-specific pages)");
		return VS_SCSI_DONE;
	}
	if (plen > sizeof(buf)) {
		vs_scsi_bad_cdb(cmd, ten ? 7 : 4, -1, "parameter list longer than any we accept");
		return VS_SCSI_DONE;
	}
	n = vs_scsi_data_out(cmd, buf, plen);
	if (n < plen || n < hdr) {
		vs_scsi_param_len_error(cmd, n < plen ? "data-out shorter than the parameter list"
						      : "parameter list shorter than its header");
		return VS_SCSI_DONE;
	}
	if (buf[ten ? 2 : 1]) {
		vs_scsi_bad_param(cmd, ten ? 2 : 1, -1, "medium type not 0");
		return VS_SCSI_DONE;
	}
	bdl = ten ? vs_be16(&buf[6]) : buf[3];
	if (bdl && bdl != ((ten && (buf[4] & 0x01)) ? 16u : 8u)) {
		vs_scsi_bad_param(cmd, ten ? 6 : 3, -1, "bad block descriptor length");
		return VS_SCSI_DONE;
	}
	if (bdl > n - hdr) {
		vs_scsi_param_len_error(cmd, "block descriptor beyond the parameter list");
		return VS_SCSI_DONE;
	}
	if (bdl && !check_block_descriptor(lun, cmd, &buf[hdr], bdl, (uint16_t)hdr))
		return VS_SCSI_DONE;

	/* Validate every page before applying any. */
	for (off = hdr + bdl; off < n;) {
		uint8_t code = buf[off] & 0x3f;
		size_t len;

		if (n - off < 2 || (size_t)buf[off + 1] + 2 > n - off) {
			vs_scsi_param_len_error(cmd, "mode page beyond the parameter list");
			return VS_SCSI_DONE;
		}
		if (buf[off] & 0x40) {
			vs_scsi_bad_param(cmd, (uint16_t)off, 6, "subpage format not supported");
			return VS_SCSI_DONE;
		}
		len = mode_page(lun, code, cur, PC_CURRENT);
		if (!len) {
			vs_scsi_bad_param(cmd, (uint16_t)off, 5, "unsupported mode page");
			return VS_SCSI_DONE;
		}
		if ((size_t)buf[off + 1] + 2 != len) {
			vs_scsi_bad_param(cmd, (uint16_t)(off + 1), -1, "wrong page length");
			return VS_SCSI_DONE;
		}
		mode_page(lun, code, chg, PC_CHANGEABLE);
		for (size_t i = 2; i < len; i++) {
			if ((buf[off + i] ^ cur[i]) & ~chg[i]) {
				vs_scsi_bad_param(cmd, (uint16_t)(off + i), -1,
						  "change to an unchangeable field");
				return VS_SCSI_DONE;
			}
		}
		if (code == PAGE_CACHING)
			wce = !!(buf[off + 2] & 0x04);
		off += len;
	}
	if (__atomic_exchange_n(&lun->wce, wce, __ATOMIC_RELAXED) != wce)
		VS_INFO(SCSI, "lun %u: write cache %s", lun->id,
			wce ? "enabled" : "disabled (writes are FUA)");
	return VS_SCSI_DONE;
}
