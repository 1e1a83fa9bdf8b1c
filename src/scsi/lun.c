/* SPDX-License-Identifier: MIT */
/*
 * Logical units: geometry and limits from the backend, a stable identity from a
 * name, and the unit attention a reset leaves behind.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "scsi/scsi_int.h"

/* A locally administered company ID (the "local" bit 0x02 of the first octet set):
 * not an IEEE assignment, so no one else's NAA space is claimed. */
#define VS_SCSI_LOCAL_OUI 0x025653u /* 02 'V' 'S' */

/* FNV-1a: tiny, and good enough to spread names over serials and designators. */
static uint64_t fnv1a64(const char *s, uint64_t h)
{
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 0x100000001b3ull;
	}
	return h;
}

static void lun_identity(struct vs_scsi_lun *lun, const char *name)
{
	uint64_t h1 = fnv1a64(name, 0xcbf29ce484222325ull);
	uint64_t h2 = fnv1a64("vioscope-naa-ext", h1);
	uint64_t hi;

	snprintf(lun->name, sizeof(lun->name), "%s", name);
	snprintf(lun->serial, sizeof(lun->serial), "%016llx", (unsigned long long)h1);
	/* NAA 6 (IEEE Registered Extended): NAA(4) | company ID(24) | VSID(36), then a
	 * 64-bit extension. */
	hi = (uint64_t)6 << 60 | (uint64_t)VS_SCSI_LOCAL_OUI << 36 | (h1 & 0xfffffffffull);
	vs_put_be64(lun->naa, hi);
	vs_put_be64(lun->naa + 8, h2);
}

/* The backend was resized (its own thread, or vs_backend_resize's caller): the new
 * capacity, and CAPACITY DATA HAS CHANGED for the next command (SBC-3 4.6), as a SAN array
 * does when a volume grows; then the LUN's owner is told (the target sends the event). */
static void lun_resized(void *arg, uint64_t old_size, uint64_t new_size)
{
	struct vs_scsi_lun *lun = arg;
	uint64_t blocks = new_size >> lun->block_shift;

	VS_WARNING(SCSI,
		   "lun '%s' (%u): capacity %llu -> %llu blocks (backend %llu -> %llu bytes)%s",
		   lun->name, lun->id, (unsigned long long)vs_scsi_lun_nblocks(lun),
		   (unsigned long long)blocks, (unsigned long long)old_size,
		   (unsigned long long)new_size, blocks ? "" : ": below one block, kept");
	if (!blocks)
		return; /* every command would fail anyway: keep a LUN that reports one */
	__atomic_store_n(&lun->blocks, blocks, __ATOMIC_RELAXED);
	__atomic_store_n(&lun->ua, VS_ASC_CAPACITY_DATA_CHANGED, __ATOMIC_RELEASE);
	if (lun->resized && __atomic_load_n(&lun->attached, __ATOMIC_RELAXED))
		lun->resized(lun->resized_arg, lun->id, blocks);
}

static uint32_t clamp_blocks(uint64_t bytes, unsigned shift)
{
	uint64_t b = bytes >> shift;

	return b > UINT32_MAX ? UINT32_MAX : (uint32_t)b;
}

int vs_scsi_lun_create(struct vs_scsi_lun **out, const struct vs_scsi_lun_params *p)
{
	struct vs_scsi_lun *lun;
	uint32_t bs;
	uint64_t size;
	unsigned align;

	*out = NULL;
	if (!p || !p->be) {
		VS_ERROR(SCSI, "lun create: no backend");
		return -EINVAL;
	}
	bs = p->block_size ? p->block_size : 512;
	if (bs != 512 && bs != 4096) {
		VS_ERROR(SCSI, "lun create: block size %u (512 or 4096 only)", bs);
		return -EINVAL;
	}
	size = vs_backend_size(p->be);
	if (size < bs) {
		VS_ERROR(SCSI, "lun create: backend of %llu bytes holds no %u-byte block",
			 (unsigned long long)size, bs);
		return -EINVAL;
	}
	align = vs_backend_alignment(p->be);
	if (align > bs) {
		VS_ERROR(SCSI, "lun create: backend needs %u-byte alignment, blocks are %u bytes",
			 align, bs);
		return -EINVAL;
	}
	lun = calloc(1, sizeof(*lun));
	if (!lun)
		return -ENOMEM;
	lun->be = p->be;
	lun->block_size = bs;
	lun->block_shift = bs == 512 ? 9 : 12;
	lun->blocks = size >> lun->block_shift;
	lun->read_only = p->read_only || vs_backend_read_only(p->be);
	lun->discard = vs_backend_supports_discard(p->be) && !lun->read_only;
	lun->wce = 1;
	lun->resized = p->resized;
	lun->resized_arg = p->resized_arg;
	lun->ua = p->power_on_ua ? VS_ASC_POWER_ON_RESET : 0;
	lun->max_xfer_blocks = VS_SCSI_MAX_XFER_BYTES >> lun->block_shift;
	lun->opt_xfer_blocks = VS_SCSI_OPT_XFER_BYTES >> lun->block_shift;
	lun->max_unmap_blocks =
	    lun->discard ? clamp_blocks(VS_SCSI_MAX_UNMAP_BYTES, lun->block_shift) : 0;
	lun->max_ws_blocks = clamp_blocks(VS_SCSI_MAX_WS_BYTES, lun->block_shift);
	lun->granularity = (uint16_t)(4096 >> lun->block_shift);
	lun_identity(lun, p->name && *p->name ? p->name : "lun");
	if (vs_backend_watch_size(p->be, lun_resized, lun) < 0)
		VS_WARNING(SCSI,
			   "lun '%s': its backend serves another LUN, told of resizes instead",
			   lun->name);
	else if (vs_backend_size(p->be) != size) /* resized before we watched */
		lun_resized(lun, size, vs_backend_size(p->be));
	VS_INFO(SCSI, "lun '%s': %s backend, %llu blocks of %u bytes%s%s, serial %s", lun->name,
		vs_backend_kind(p->be), (unsigned long long)lun->blocks, bs,
		lun->read_only ? ", read-only" : "", lun->discard ? ", discard" : "", lun->serial);
	*out = lun;
	return 0;
}

void vs_scsi_lun_destroy(struct vs_scsi_lun *lun)
{
	if (!lun)
		return;
	vs_backend_unwatch_size(lun->be, lun);
	VS_INFO(SCSI, "lun '%s': destroyed", lun->name);
	free(lun);
}

uint64_t vs_scsi_lun_blocks(const struct vs_scsi_lun *lun)
{
	return vs_scsi_lun_nblocks(lun);
}

uint32_t vs_scsi_lun_block_size(const struct vs_scsi_lun *lun)
{
	return lun->block_size;
}

bool vs_scsi_lun_read_only(const struct vs_scsi_lun *lun)
{
	return lun->read_only;
}

const char *vs_scsi_lun_serial(const struct vs_scsi_lun *lun)
{
	return lun->serial;
}

void vs_scsi_lun_reset(struct vs_scsi_lun *lun)
{
	VS_INFO(TMF, "lun '%s' (%u): reset, unit attention pending", lun->name, lun->id);
	__atomic_store_n(&lun->ua, VS_ASC_POWER_ON_RESET, __ATOMIC_RELEASE);
}
