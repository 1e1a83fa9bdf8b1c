/* SPDX-License-Identifier: MIT */
/*
 * check: the conformance suites a storage device and its driver are held to, the way the
 * seed driver was held to the Windows HCK Flush Test, Disk Verification and Disk Stress
 * (`vioscope check flush|verify|stress`, docs/RELIABILITY.md).
 *
 *   flush   every crash state a write log (dm-log-writes format, a LUN's log-writes=LOG)
 *           allows, each run through the user's checkers (fsck, a verifier)
 *   verify  self-describing blocks written and read back through the initiator or, on a
 *           file or block device, io_uring; every bad read is named: lost, stale,
 *           misdirected or torn write
 *   stress  verify's traffic with flushes and unmaps, under ABORT TASK and LUN RESET
 *           storms, target kills and memory-table changes, with invariants checked
 *
 * Each function prints its progress and figures to opts->out and returns 0 when the check
 * passed, 1 when it found a fault (said on out), or -errno when it could not run (why set).
 * Interrupted (vs_interrupted(), util.h), a check stops, says on out what it checked and
 * its seed, stops its target, removes what it made, and returns as for what it found so
 * far; the caller makes that 128 + the signal.
 */
#ifndef VS_CHECK_H
#define VS_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- the self-describing sector (vblock.c) ---- */
#define VS_VB_SECTOR 512
#define VS_VB_MAGIC  0x4b4c4256u /* "VBLK" */

/* What a sector carries, when it is one of ours. */
struct vs_vb_hdr {
	uint64_t lba;	 /* the 512-byte sector it was written for */
	uint64_t gen;	 /* the write's generation (unique per write in a run) */
	uint32_t writer; /* the thread or queue that wrote it */
};

enum vs_vb_kind {
	VS_VB_OURS,    /* a sector of this run, checksum intact */
	VS_VB_TORN,    /* a sector of this run whose checksum fails: partly written */
	VS_VB_ZERO,    /* all zeros */
	VS_VB_FOREIGN, /* anything else (another run, the image's old content) */
};

/* Fill one sector for (run, lba, gen, writer): a header and content derived from them,
 * with a checksum over the rest of the sector. */
void vs_vb_fill(uint8_t *sector, uint64_t run, uint64_t lba, uint64_t gen, uint32_t writer);
/* Classify one sector read back; *h is set for OURS and TORN (as far as readable). */
enum vs_vb_kind vs_vb_parse(const uint8_t *sector, uint64_t run, struct vs_vb_hdr *h);

/* ---- verify and stress ---- */
struct vs_check_io_opts {
	const char *socket;	 /* a running target's vhost-user socket ... */
	const char *target_spec; /* ... or a backend spec for a target started here ... */
	const char *device;	 /* ... or a file or block device (io_uring, verify only) */
	const char *exe;	 /* the vioscope binary that runs a target */
	const char *dir;	 /* stress: where the target's image and socket go */
	double seconds;		 /* how long the random phase runs */
	uint64_t max_writes;	 /* ... or until it made this many writes (0: no bound) */
	unsigned queues;	 /* request queues / device threads (0: 2) */
	unsigned lun;		 /* LUN index (initiator) */
	uint64_t size;		 /* bytes of the LUN or device to use (0: all, at most 1 GiB) */
	uint64_t seed;		 /* random sequence (0: from the clock; printed) */
	unsigned max_depth;	 /* deepest queue depth of the phases (0: 32) */
	FILE *out;
};

int vs_check_verify(const struct vs_check_io_opts *o, char *why, size_t whylen);
int vs_check_stress(const struct vs_check_io_opts *o, char *why, size_t whylen);

/* ---- flush ---- */
struct vs_check_flush_opts {
	const char *log;     /* the write log */
	const char *base;    /* the image the log starts from (not modified) */
	const char *fsck;    /* shell command run on each crash state's image (path appended) */
	const char *verify;  /* another one, run after fsck on the same image */
	unsigned subsets;    /* random subsets of the unflushed writes tried per mark */
	uint64_t seed;	     /* of those subsets (0: from the clock; printed) */
	const char *workdir; /* scratch images go here (default: $TMPDIR or /tmp) */
	bool keep;	     /* keep the first bad crash state's image (its path is printed) */
	FILE *out;
};

int vs_check_flush(const struct vs_check_flush_opts *o, char *why, size_t whylen);

#endif /* VS_CHECK_H */
