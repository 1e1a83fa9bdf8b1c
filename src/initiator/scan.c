/* SPDX-License-Identifier: MIT */
/*
 * LUN discovery (the miniport's bus scan): REPORT LUNS on target 0, then per LUN
 * INQUIRY, READ CAPACITY(16) (READ CAPACITY(10) when that is refused), MODE SENSE(6)
 * for write protection, and the Logical Block Provisioning VPD page (B2h) when READ
 * CAPACITY(16) says LBPME.  Commands run synchronously (sync.c) with the scan buffer in
 * the shared data area; callers hold conn_lock, so one runs at a time.
 */
#include <errno.h>
#include <stdlib.h>

#include "initiator/initiator_int.h"

#define SCAN_PROBE_MAX 8 /* LUNs probed when REPORT LUNS fails */

static void copy_trim(char *dst, const uint8_t *src, size_t n)
{
	memcpy(dst, src, n);
	dst[n] = 0;
	while (n && (dst[n - 1] == ' ' || dst[n - 1] == 0))
		dst[--n] = 0;
}

static int cmp_uint(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}

/* LUN numbers of target 0, sorted.  -EIO when REPORT LUNS fails. */
static int report_luns(struct vs_ini *ini, unsigned *ids, unsigned *n)
{
	uint8_t cdb[12] = {VS_SCSI_OP_REPORT_LUNS};
	struct vs_ini_io r;
	uint32_t len, got;
	int rc;

	vs_put_be32(cdb + 6, INI_SCAN_BUF); /* allocation length */
	if ((rc = ini_exec_sync(ini, 0, 0, cdb, sizeof(cdb), INI_SCAN_BUF, true, &r)))
		return rc;
	if (r.result) {
		VS_WARNING(SCSI, "REPORT LUNS: result %d status %#x: probing instead", r.result,
			   r.scsi_status);
		return -EIO;
	}
	got = INI_SCAN_BUF - r.resid;
	len = got >= 8 ? vs_be32(ini->scan_buf) : 0;
	if (len > got - 8)
		len = got >= 8 ? got - 8 : 0; /* more LUNs than the buffer: keep what came */
	*n = 0;
	for (uint32_t off = 8; off + 8 <= len + 8 && *n < VS_INI_MAX_LUNS; off += 8) {
		const uint8_t *e = ini->scan_buf + off;
		unsigned method = e[0] >> 6, id;

		if (method == 0)
			id = e[1];
		else if (method == 1)
			id = ((unsigned)(e[0] & 0x3f) << 8) | e[1];
		else {
			VS_WARNING(SCSI, "REPORT LUNS: entry %02x %02x: unsupported addressing",
				   e[0], e[1]);
			continue;
		}
		ids[(*n)++] = id;
	}
	qsort(ids, *n, sizeof(*ids), cmp_uint);
	VS_INFO(SCSI, "REPORT LUNS: %u LUNs", *n);
	return 0;
}

/* 0 with *l filled; -ENODEV when nothing usable is there; -errno when it cannot run. */
static int probe_lun(struct vs_ini *ini, unsigned id, struct vs_ini_lun *l, bool *lbpme)
{
	uint8_t inq[6] = {VS_SCSI_OP_INQUIRY, 0, 0, 0, 96, 0};
	uint8_t rc16[16] = {VS_SCSI_OP_SERVICE_ACTION_IN_16, VS_SCSI_SAI_READ_CAPACITY_16};
	uint8_t rc10[10] = {VS_SCSI_OP_READ_CAPACITY_10};
	uint8_t ms[6] = {
	    VS_SCSI_OP_MODE_SENSE_6, VS_SCSI_MODE_DBD, VS_SCSI_MODE_ALL_PAGES, 0, 192, 0};
	uint8_t *b = ini->scan_buf;
	struct vs_ini_io r;
	int rc;

	memset(l, 0, sizeof(*l));
	l->lun = id;
	if ((rc = ini_exec_sync(ini, 0, id, inq, sizeof(inq), 96, true, &r)))
		return rc;
	if (r.result || (b[0] >> 5) != 0) {
		VS_INFO(SCSI, "LUN %u: INQUIRY result %d qualifier %u: not present", id, r.result,
			b[0] >> 5);
		return -ENODEV;
	}
	if ((b[0] & VS_SCSI_PERIPHERAL_TYPE) != VS_SCSI_TYPE_DISK) {
		VS_INFO(SCSI, "LUN %u: device type %#x is not a block device: skipped", id,
			b[0] & VS_SCSI_PERIPHERAL_TYPE);
		return -ENODEV;
	}
	copy_trim(l->vendor, b + 8, 8);
	copy_trim(l->product, b + 16, 16);
	copy_trim(l->revision, b + 32, 4);

	rc16[13] = 32;
	if ((rc = ini_exec_sync(ini, 0, id, rc16, sizeof(rc16), 32, true, &r)))
		return rc;
	if (!r.result && r.resid <= 32 - 15) {
		l->num_blocks = vs_be64(b) + 1;
		l->block_size = vs_be32(b + 8);
		*lbpme = b[14] & VS_SCSI_RC16_LBPME;
	} else {
		VS_INFO(SCSI, "LUN %u: READ CAPACITY(16) result %d: trying (10)", id, r.result);
		if ((rc = ini_exec_sync(ini, 0, id, rc10, sizeof(rc10), 8, true, &r)))
			return rc;
		if (r.result || r.resid) {
			VS_ERROR(SCSI, "LUN %u: READ CAPACITY failed (result %d): skipped", id,
				 r.result);
			return -ENODEV;
		}
		l->num_blocks = (uint64_t)vs_be32(b) + 1;
		l->block_size = vs_be32(b + 4);
		*lbpme = false;
	}
	if (l->block_size < 512 || l->block_size > 65536 || (l->block_size & (l->block_size - 1)) ||
	    !l->num_blocks) {
		VS_ERROR(SCSI, "LUN %u: capacity %llu blocks of %u bytes: unusable, skipped", id,
			 (unsigned long long)l->num_blocks, l->block_size);
		return -ENODEV;
	}
	if ((rc = ini_exec_sync(ini, 0, id, ms, sizeof(ms), 192, true, &r)))
		return rc;
	l->read_only = !r.result && r.resid <= 192 - 4 && (b[2] & VS_SCSI_MODE_WP);
	return 0;
}

/* Thin provisioning: LBPME and, when the page is there, LBPU of VPD B2h. */
static int probe_thin(struct vs_ini *ini, unsigned id, bool *thin)
{
	uint8_t cdb[6] = {VS_SCSI_OP_INQUIRY, VS_SCSI_INQUIRY_EVPD, VS_SCSI_VPD_LBP, 0, 64, 0};
	struct vs_ini_io r;
	int rc;

	if ((rc = ini_exec_sync(ini, 0, id, cdb, sizeof(cdb), 64, true, &r)))
		return rc;
	if (r.result || r.resid > 64 - 6 || ini->scan_buf[1] != VS_SCSI_VPD_LBP) {
		VS_INFO(SCSI, "LUN %u: no provisioning VPD page (result %d): LBPME alone decides",
			id, r.result);
		return 0;
	}
	*thin = ini->scan_buf[5] & VS_SCSI_LBP_LBPU;
	return 0;
}

/* Replace the table; true when it changed (a LUN came or went, a capacity changed). */
static bool publish(struct vs_ini *ini, const struct vs_ini_lun *luns, unsigned n)
{
	bool changed;

	pthread_mutex_lock(&ini->lun_lock);
	changed = n != atomic_load(&ini->nluns) || memcmp(ini->luns, luns, n * sizeof(*luns));
	/* Shrink first: a submit never sees an index past the entries being rewritten. */
	if (n < atomic_load(&ini->nluns))
		atomic_store(&ini->nluns, n);
	for (unsigned i = 0; i < n; i++) {
		uint8_t lb[8];
		uint64_t key;

		ini->luns[i] = luns[i];
		vs_vscsi_lun_encode(lb, luns[i].target, luns[i].lun);
		key = ini_lun_key(lb);
		__atomic_store_n(&ini->hot[i].lun_key, key, __ATOMIC_RELAXED);
		__atomic_store_n(&ini->hot[i].num_blocks, luns[i].num_blocks, __ATOMIC_RELAXED);
		__atomic_store_n(&ini->hot[i].block_size, luns[i].block_size, __ATOMIC_RELAXED);
		__atomic_store_n(&ini->hot[i].present, 1, __ATOMIC_RELAXED);
	}
	atomic_store_explicit(&ini->nluns, n, memory_order_release);
	if (changed)
		atomic_fetch_add(&ini->lun_generation, 1);
	pthread_mutex_unlock(&ini->lun_lock);
	return changed;
}

int ini_scan_luns(struct vs_ini *ini)
{
	unsigned *ids = calloc(VS_INI_MAX_LUNS, sizeof(*ids)), n = 0, found = 0;
	struct vs_ini_lun *luns = calloc(VS_INI_MAX_LUNS, sizeof(*luns));
	int rc;

	if (!ids || !luns) {
		rc = -ENOMEM;
		goto out;
	}
	VS_INFO(INIT, "scan: target 0 of %s", ini->socket_path);
	rc = report_luns(ini, ids, &n);
	if (rc == -EIO) {
		for (n = 0; n < SCAN_PROBE_MAX; n++)
			ids[n] = n;
	} else if (rc) {
		goto out;
	}
	for (unsigned i = 0; i < n; i++) {
		struct vs_ini_lun *l = &luns[found];
		bool lbpme = false;

		rc = probe_lun(ini, ids[i], l, &lbpme);
		if (rc == -ENODEV)
			continue;
		if (rc)
			goto out;
		if (lbpme) {
			l->thin = true;
			if ((rc = probe_thin(ini, ids[i], &l->thin)))
				goto out;
		}
		VS_INFO(INIT, "scan: LUN %u: %.8s %.16s %.4s, %llu blocks of %u bytes%s%s", l->lun,
			l->vendor, l->product, l->revision, (unsigned long long)l->num_blocks,
			l->block_size, l->read_only ? ", read-only" : "", l->thin ? ", thin" : "");
		found++;
	}
	if (publish(ini, luns, found) && ini->opts.luns_changed) {
		VS_INFO(INIT, "scan: %u LUNs usable: the table changed", found);
		ini->opts.luns_changed(ini->opts.luns_changed_arg);
	} else {
		VS_INFO(INIT, "scan: %u LUNs usable", found);
	}
	rc = 0;
out:
	if (rc)
		VS_ERROR(INIT, "scan failed: %s", strerror(-rc));
	free(ids);
	free(luns);
	return rc;
}

unsigned vs_ini_lun_generation(const struct vs_ini *ini)
{
	return atomic_load(&((struct vs_ini *)ini)->lun_generation);
}

int vs_ini_rescan(struct vs_ini *ini)
{
	int rc = -ENOTCONN;

	pthread_mutex_lock(&ini->conn_lock);
	if (atomic_load(&ini->connected))
		rc = ini_scan_luns(ini);
	pthread_mutex_unlock(&ini->conn_lock);
	return rc;
}
