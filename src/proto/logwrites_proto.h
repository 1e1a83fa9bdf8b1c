/* SPDX-License-Identifier: MIT */
/*
 * The write-log format of Linux's dm-log-writes target (drivers/md/dm-log-writes.c), which
 * xfstests' replay-log (src/log-writes/) reads.  The backend writes it (log-writes=LOG),
 * `vioscope check flush` reads it.  Declarations only.
 *
 * Layout, in units of the log's sector size (`sectorsize` in the super block):
 *   sector 0            struct vs_lw_super, zero padded
 *   then per entry      one sector: struct vs_lw_entry (+ the mark's text for MARK), zero
 *                       padded; then nr_sectors sectors of data (none for DISCARD/FLUSH)
 * `sector` and `nr_sectors` count sectors of `sectorsize` bytes on the logged device.
 * All fields little-endian.
 *
 * Order (as dm-log-writes): a write is logged once it no longer sits in a volatile cache.
 * FUA writes when they complete; other writes and discards when a later flush that was
 * submitted after they completed completes, just before that FLUSH entry.  So every
 * prefix of the log ending at a FLUSH or FUA entry is exactly what a crash right after
 * that point is guaranteed to keep.
 */
#ifndef VS_LOGWRITES_PROTO_H
#define VS_LOGWRITES_PROTO_H

#include <stdint.h>

#define VS_LW_MAGIC   0x6a736677736872ull /* WRITE_LOG_MAGIC */
#define VS_LW_VERSION 1ull

enum vs_lw_flag {
	VS_LW_FLUSH = 1u << 0,	  /* everything logged before is durable */
	VS_LW_FUA = 1u << 1,	  /* this write is durable when it completes */
	VS_LW_DISCARD = 1u << 2,  /* the range reads as zeros; no data follows */
	VS_LW_MARK = 1u << 3,	  /* a named point; the name follows the entry */
	VS_LW_METADATA = 1u << 4, /* a hint (REQ_META); replayed like any write */
};
#define VS_LW_KNOWN_FLAGS 0x1fu

struct vs_lw_super {
	uint64_t magic;
	uint64_t version;
	uint64_t nr_entries;
	uint32_t sectorsize;
} __attribute__((packed));

struct vs_lw_entry {
	uint64_t sector;
	uint64_t nr_sectors;
	uint64_t flags;
	uint64_t data_len; /* MARK: the name's length; 0 otherwise */
} __attribute__((packed));

/* The name of the mark the writer closes a log with (dm-log-writes' own). */
#define VS_LW_END_MARK "dm-log-writes-end"

#endif /* VS_LOGWRITES_PROTO_H */
