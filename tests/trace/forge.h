/* SPDX-License-Identifier: MIT */
/*
 * Hand-made trace files and captures for the hostile-input tests: valid layouts, built
 * byte by byte as docs/CAPTURE-FORMAT.md and src/tracetools/tracetools.h describe them, that
 * a test then damages, rewrites or races.  Nothing here goes through the tools, so a
 * test controls every byte the tools are given.
 */
#ifndef VS_TEST_TRACE_FORGE_H
#define VS_TEST_TRACE_FORGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tracetools/tracetools.h"

/* A growing byte buffer (aborts when out of memory: these are tests). */
struct fbuf {
	uint8_t *p;
	size_t len, cap;
};
void fb_put(struct fbuf *b, const void *p, size_t n);
void fb_put16(struct fbuf *b, uint16_t v);
void fb_put32(struct fbuf *b, uint32_t v);
void fb_put64(struct fbuf *b, uint64_t v);
/* A string argument as records carry it: u16 length, the bytes. */
void fb_put_str_arg(struct fbuf *b, const char *s, size_t n);
void fb_free(struct fbuf *b);

/* A site of the forged metadata: one object whose providers (each in its own slot, in
 * the order the sites first name them) have one flag each (bit 0), TEST. */
struct forge_site {
	const char *fmt;
	const char *func;
	const char *provider; /* NULL: "forged" */
	uint8_t level;
	uint8_t nargs;
	uint8_t types[VS_TRACE_MAX_ARGS];
	const char *stage;  /* forge_meta_staged: the stage it declares (VS_STAGE), or NULL */
	const char *fields; /* ... and its arguments' names, each followed by a space */
};
/* The id events carry for site i. */
static inline uint32_t forge_site_id(unsigned i)
{
	return 1 + i;
}
void forge_meta(struct fbuf *b, const struct forge_site *sites, unsigned n);
/* The same record as the runtime writes it since stage sites: it lists the sites that
 * declare a stage (none, when no site has .stage). */
void forge_meta_staged(struct fbuf *b, const struct forge_site *sites, unsigned n);
/* The same sites as the metadata blob of version 1 captures, where an event names its
 * site by address: FORGE_V1_SITE_BASE + 64 i. */
#define FORGE_V1_SITE_BASE 0x10000000u
void forge_meta_v1(struct fbuf *b, const struct forge_site *sites, unsigned n);

/* One event record: header, the packed arguments, zero padding to 8. */
void forge_record(struct fbuf *b, uint64_t ts, uint32_t site, const void *args, size_t len);

/* A capture: file header, PROCESS and META sections (version: 2, or 1 with a version
 * 1 blob) ... */
void forge_cap_begin(struct fbuf *b, const struct fbuf *meta, const char *exe, const char *flavour);
void forge_cap_begin_v(struct fbuf *b, uint16_t version, const struct fbuf *meta, const char *exe,
		       const char *flavour);
/* ... EVENTS sections (records as forge_record makes them) ... */
void forge_cap_events(struct fbuf *b, uint32_t tid, uint32_t slot, uint32_t gen, const char *name,
		      const void *records, size_t len);
/* ... and CLOCK (CLOCK_MONOTONIC timestamps: ts is ns after FORGE_REAL0, the clock
 * forge_mono_clock gives) and END. */
#define FORGE_REAL0 1700000000000000000ull
struct vs_cap_clock forge_mono_clock(void);
void forge_cap_end(struct fbuf *b);
/* ... or with the CLOCK section given. */
void forge_cap_end_clock(struct fbuf *b, const struct vs_cap_clock *c);

/* A trace file as the runtime lays it out: header, provider slots (slot 0 set to
 * info:all), metadata, RINGS ring headers (all free) and their data.  Where things
 * are: */
#define FORGE_PROVIDER_SLOTS 4
struct forge_shm {
	size_t provs_off, meta_off, rings_off, data_off, size;
	unsigned rings;
	uint64_t ring_size;
};
void forge_shm(struct fbuf *b, struct forge_shm *g, const struct fbuf *meta, unsigned rings,
	       uint64_t ring_size, int pid, uint64_t start_time);
/* Ring i of the image: active, thread TID, holding RECORDS from stream position 0
 * (tail 0, head len; len at most the ring size). */
void forge_shm_ring(struct fbuf *b, const struct forge_shm *g, unsigned i, uint32_t tid,
		    const void *records, size_t len);
static inline struct vs_shm_header *forge_shm_header(struct fbuf *b)
{
	return (struct vs_shm_header *)b->p;
}

/* ---- shapes of hostile captures: the tools' linear-time tests and their measurements ---- */
/* n threads of k "n=%u" events each, interleaved in time (thread i's event j at
 * j * n + i): every event is of another thread than the one before. */
void forge_shape_threads(struct fbuf *cap, unsigned n, unsigned k);
/* n threads of one "n=%u" event each (thread i's at i), and m more events of one of them
 * after all of those: of the first thread, whose stream a decoder makes first, or of the
 * LAST, made last.  Either has the same events and threads; a decoder that finds a
 * thread's stream by a search through the streams made before it pays n per event for
 * the last one. */
void forge_shape_busy_thread(struct fbuf *cap, unsigned n, unsigned m, bool last);
/* Stage events (the sites `trace latency` reads) of a driver (thread 1) and its device
 * (thread 2) in one process, 2n requests:
 * - n submitted, each on a queue of its own (i + 1, tag i) and kicked, never completed:
 *   every kick, and every lookup of an open request, meets all of them; `--by queue`
 *   has a group for each;
 * - then n submitted on queue 0 with one tag (FORGE_REUSED_TAG), each popped, pushed and
 *   completed before the next: the join meets every earlier request of the tag.
 * Timestamps (ns after FORGE_REAL0): 2i (submit) and 2i + 1 (kick); then B + 10j
 * (submit), + 2 (pop), + 4 (push), + 6 (done), B = 2n. */
#define FORGE_REUSED_TAG (1ull << 40) /* above every tag of the first part */
void forge_shape_requests(struct fbuf *cap, unsigned n);

#endif
