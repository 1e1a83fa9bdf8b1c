/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the tools' side of a trace file (src/tracetools/shm.c) on hostile
 * files.  Each input is a whole trace file image, written to a file of ours in a
 * private directory and given to
 *   1. `vioscope trace dump` (vs_trace_dump), whose capture is then decoded;
 *   2. vs_shm_open, after which the file is rewritten under the mapping, as a hostile
 *      owner would: its last 72 input bytes go over the header's geometry (providers,
 *      metadata, rings offset, ring count, ring size, data offset); then every
 *      ring is copied from its tail and from position 0, into buffers of exactly the
 *      ring size the open checked, and a capture is written from the copies and
 *      decoded.
 * ASan sees any read or write outside the file or a buffer; nothing may hang.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracetools/tracetools.h"

static char shm_path[512], cap_path[64];
static int shm_fd = -1;
static FILE *devnull;

static char shm_dir[64];

static void cleanup(void)
{
	unlink(shm_path);
	rmdir(shm_dir);
}

/* The trace file needs a name (vs_shm_open takes a path and refuses the magic links
 * of /proc/self/fd): one file of ours in a private directory, removed at exit. */
static void init(void)
{
	int cap_fd = memfd_create("capture", MFD_CLOEXEC);
	snprintf(shm_dir, sizeof shm_dir, "/tmp/vioscope-fuzz-shm-XXXXXX");
	if (!mkdtemp(shm_dir) || cap_fd < 0)
		abort();
	snprintf(shm_path, sizeof shm_path, "%s/%s1", shm_dir, VS_SHM_PREFIX);
	snprintf(cap_path, sizeof cap_path, "/proc/self/fd/%d", cap_fd);
	shm_fd = open(shm_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	devnull = fopen("/dev/null", "we");
	if (shm_fd < 0 || !devnull)
		abort();
	atexit(cleanup);
}

static void decode_capture(void)
{
	char why[512];
	struct vs_decode_opts o = {.to_s = -1};
	vs_trace_decode(cap_path, &o, devnull, why, sizeof why);
}

/* The geometry fields, in header order: providers_offset, provider_slots, nproviders,
 * meta_offset, meta_capacity, meta_used, rings_offset, ring_count + pad, ring_size,
 * data_offset (72 bytes in trace file version 2). */
#define FLIP_FIRST offsetof(struct vs_shm_header, providers_offset)
#define FLIP_BYTES (offsetof(struct vs_shm_header, data_offset) + 8 - FLIP_FIRST)
_Static_assert(FLIP_BYTES == 72, "the geometry fields are these, contiguous");

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vs_shm s;
	struct vs_dump_stats st;
	char why[512];

	if (shm_fd < 0)
		init();
	if (ftruncate(shm_fd, 0) < 0 || ftruncate(shm_fd, (off_t)size) < 0 ||
	    (size && pwrite(shm_fd, data, size, 0) != (ssize_t)size))
		abort();

	if (vs_trace_dump(shm_path, cap_path, &st, why, sizeof why) == 0)
		decode_capture();

	if (vs_shm_open(&s, shm_path, why, sizeof why) < 0)
		return 0;
	if (size >= sizeof(struct vs_shm_header) + FLIP_BYTES)
		memcpy((uint8_t *)s.hdr + FLIP_FIRST, data + size - FLIP_BYTES, FLIP_BYTES);
	struct vs_capw w;
	uint8_t *buf = malloc(s.snap.ring_size);
	if (buf && vs_capw_open(&w, cap_path, &s) == 0) {
		for (unsigned i = 0; i < s.snap.ring_count; i++) {
			struct vs_shm_ring *r = vs_shm_ring(&s, i);
			uint64_t head = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
			uint64_t from = __atomic_load_n(&r->tail, __ATOMIC_RELAXED);
			size_t n = vs_ring_copy(&s, i, &from, head, buf, s.snap.ring_size);
			vs_capw_events(&w, r, i, buf, n);
			from = 0;
			n = vs_ring_copy(&s, i, &from, head, buf, s.snap.ring_size / 2);
			vs_capw_loss(&w, r, i, r->dropped, r->overwritten);
		}
		if (vs_capw_close(&w, &s) == 0)
			decode_capture();
	}
	free(buf);
	vs_shm_close(&s);
	return 0;
}
