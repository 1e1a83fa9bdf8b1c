/* SPDX-License-Identifier: MIT */
/*
 * Between the two halves of the runtime: runtime.c (the process's trace file, thread
 * rings, the slow path, the print backend) and registry.c (objects, providers,
 * metadata, settings).
 */
#ifndef VS_TRACE_RUNTIME_INT_H
#define VS_TRACE_RUNTIME_INT_H

#include <limits.h>
#include <stdbool.h>

#include "trace/trace_shared.h"

#define VS__PRIVATE __attribute__((visibility("hidden")))

/* Providers one process can have (slots of control words in its file). */
#define VS_RT_PROVIDER_SLOTS 256

/* The process's trace file as the runtime made it.  The file is writable by any
 * process of our user (a recorder, a tool), so its geometry is kept here and the
 * file's header fields are never read back. */
struct vs_rt_file {
	struct vs_shm_header *hdr; /* NULL: no file yet (or a forked child's, not yet made) */
	size_t size;
	struct vs_shm_provider *provs;
	uint32_t provider_slots;
	uint8_t *meta;
	uint64_t meta_capacity;
	struct vs_shm_ring *rings;
	uint8_t *ring_data;
	uint32_t ring_count;
	uint64_t ring_size;
	bool clock_mono; /* timestamps are CLOCK_MONOTONIC ns, not TSC ticks */
	char path[PATH_MAX];
	char tmp_path[PATH_MAX];
};
extern struct vs_rt_file vs_rt VS__PRIVATE;

/* runtime.c: make and publish the file (idempotent); 0, or -errno (then no tracing).
 * Called by the registry, under its lock. */
VS__PRIVATE int vs_rt_file_create(void);
/* runtime.c: should registration leave the file for later (vs__file_on_demand)?  If
 * so, the file's geometry (metadata room, provider slots) is fixed now, so that what
 * registers meanwhile fits. */
VS__PRIVATE bool vs_rt_file_deferred(void);
/* The process has begun exit(): the file is marked and (unless kept) unlinked. */
VS__PRIVATE bool vs_rt_exiting(void);
/* The program itself has registered: make sure the exit handler runs before the
 * objects' destructors. */
VS__PRIVATE void vs_rt_exit_hook_late(void);

/* registry.c: a forked child makes its own file at its first event (and a program
 * that makes it on demand, at vs__file_start()): this re-creates
 * its providers' slots (with the settings it inherited) and the metadata there.
 * Returns false when the child could not make one. */
VS__PRIVATE bool vs_reg_child_file(void);
/* registry.c: in the child of fork(), async-signal-safe: sites test a private copy of
 * their control words until the child has its own file. */
VS__PRIVATE void vs_reg_atfork_child(void);
/* registry.c: a site's flag name, for the print backend. */
VS__PRIVATE const char *vs_reg_flag_name(const struct vs_provider *p, unsigned flag);

#endif
