/* SPDX-License-Identifier: MIT */
/*
 * The self-describing sector every verify and stress write carries, so that a read names
 * what went wrong without a copy of the data: which sector it was written for (a block at
 * the wrong place is a misdirected write), which write wrote it (an older generation is a
 * lost write or a stale read), by whom, and a checksum over the rest (a sector only partly
 * on the medium is torn).
 *
 *   0  magic "VBLK"     4  writer     8  run id     16  lba     24  generation
 *   32 checksum of bytes 0..31 and 40..511          40  content derived from the above
 *
 * The checksum only has to notice a sector mixing old and new bytes, not resist anyone:
 * a 64-bit multiply-rotate mix over the sector's words does that, at memory speed.
 */
#include <string.h>

#include "check/check.h"

#define OFF_MAGIC  0
#define OFF_WRITER 4
#define OFF_RUN	   8
#define OFF_LBA	   16
#define OFF_GEN	   24
#define OFF_SUM	   32
#define OFF_DATA   40

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ull;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dull;
	return x ^ (x >> 33);
}

static uint64_t sector_sum(const uint8_t *s)
{
	uint64_t h = 0x243f6a8885a308d3ull, w;

	for (unsigned off = 0; off < VS_VB_SECTOR; off += 8) {
		if (off == OFF_SUM)
			continue;
		memcpy(&w, s + off, 8);
		h = (h ^ w) * 0x9e3779b97f4a7c15ull;
		h = (h << 31) | (h >> 33);
	}
	return mix(h);
}

void vs_vb_fill(uint8_t *s, uint64_t run, uint64_t lba, uint64_t gen, uint32_t writer)
{
	uint32_t magic = VS_VB_MAGIC;
	uint64_t x = mix(run ^ mix(lba ^ mix(gen))), sum;

	memcpy(s + OFF_MAGIC, &magic, 4);
	memcpy(s + OFF_WRITER, &writer, 4);
	memcpy(s + OFF_RUN, &run, 8);
	memcpy(s + OFF_LBA, &lba, 8);
	memcpy(s + OFF_GEN, &gen, 8);
	for (unsigned off = OFF_DATA; off < VS_VB_SECTOR; off += 8) {
		x += 0x9e3779b97f4a7c15ull;
		uint64_t v = mix(x);
		memcpy(s + off, &v, 8);
	}
	sum = sector_sum(s);
	memcpy(s + OFF_SUM, &sum, 8);
}

enum vs_vb_kind vs_vb_parse(const uint8_t *s, uint64_t run, struct vs_vb_hdr *h)
{
	uint32_t magic;
	uint64_t r, sum;

	memcpy(&magic, s + OFF_MAGIC, 4);
	memcpy(&r, s + OFF_RUN, 8);
	if (magic != VS_VB_MAGIC || r != run) {
		for (unsigned i = 0; i < VS_VB_SECTOR; i++)
			if (s[i])
				return VS_VB_FOREIGN;
		return VS_VB_ZERO;
	}
	memcpy(&h->writer, s + OFF_WRITER, 4);
	memcpy(&h->lba, s + OFF_LBA, 8);
	memcpy(&h->gen, s + OFF_GEN, 8);
	memcpy(&sum, s + OFF_SUM, 8);
	return sum == sector_sum(s) ? VS_VB_OURS : VS_VB_TORN;
}
