/* SPDX-License-Identifier: MIT */
/*
 * The trace layer's interface for tools: the shared-memory layout a traced process
 * exposes, the metadata blob, the capture file, the decoder, and the operations of
 * `vioscope trace` on a traced process (dump, record, enable, decode).  Traced programs
 * never include this; they include <vioscope/trace.h> only.
 */
#ifndef VS_TRACETOOLS_H
#define VS_TRACETOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>

#include <vioscope/trace.h>

/* ---- shared-memory file: $VIOSCOPE_TRACE_DIR (default /dev/shm)/vioscope-trace-<pid> ---- */
#define VS_SHM_MAGIC   "VSTRSHM1"
#define VS_SHM_VERSION 1
#define VS_SHM_PREFIX  "vioscope-trace-"

enum vs_ring_state { VS_RING_FREE = 0, VS_RING_ACTIVE = 1, VS_RING_RETIRED = 2 };
enum vs_trace_mode { VS_MODE_FLIGHT = 0, VS_MODE_STREAM = 1 };

/* Special site ids in event records. */
#define VS_EVENT_PAD 0xfffffffeu /* filler up to the end of the ring; skip to its start */
/* VS_EVENT_DROPS (trace.h): payload u64 count of events dropped just before this point */

/* One per thread slot.  Owner-written and reader-written fields sit on different
 * cache lines so a streaming recorder doesn't slow the producer. */
struct vs_shm_ring {
	uint64_t head;        /* published write position, bytes, monotonic */
	uint64_t dropped;     /* events dropped: stream mode and ring full */
	uint64_t overwritten; /* events overwritten: flight mode */
	uint32_t state;       /* enum vs_ring_state */
	uint32_t tid;
	uint32_t generation;  /* bumped each time a thread takes the slot */
	uint32_t pad0;
	char thread_name[16];
	uint8_t pad1[64 - 56];
	uint64_t tail;        /* oldest valid position: the recorder's (stream) or owner's (flight) */
	uint8_t pad2[56];
};
_Static_assert(sizeof(struct vs_shm_ring) == 128, "ring header is two cache lines");

struct vs_shm_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;
	uint64_t total_size;
	struct vs_trace_control ctl; /* what sites test; rewritten live by `trace enable` */
	uint32_t level;              /* threshold and mask that ctl was computed from */
	uint32_t flags;
	uint32_t mode;               /* enum vs_trace_mode */
	int32_t recorder_pid;        /* 0 when nobody streams */
	int32_t pid;
	uint32_t exited;             /* set by a normal exit */
	uint64_t start_time;         /* /proc/PID/stat starttime: tells a reused pid apart */
	char exe[256];
	char flavour[16];
	uint32_t clock_is_tsc;       /* else timestamps are CLOCK_MONOTONIC ns */
	uint32_t keep;               /* keep the file at exit */
	uint64_t clk_ts0;            /* reference point taken at start: timestamp, */
	uint64_t clk_mono0;          /* CLOCK_MONOTONIC ns */
	uint64_t clk_real0;          /* CLOCK_REALTIME ns */
	uint64_t meta_offset;        /* metadata blob (vs_meta_*) */
	uint64_t meta_size;
	uint64_t rings_offset;       /* struct vs_shm_ring[ring_count] */
	uint32_t ring_count;
	uint32_t pad0;
	uint64_t ring_size;          /* data bytes per ring, power of two */
	uint64_t data_offset;        /* ring i's data at data_offset + i * ring_size */
	uint64_t no_ring_drops;      /* events lost because every slot was taken */
};

/* ---- metadata blob: site table, flag names, callers (also a capture section) ---------- */
struct vs_meta_site {
	const char *file, *func, *fmt, *flag_name;
	uint32_t line;
	uint8_t level, flag, hot, nargs;
	uint8_t types[VS_TRACE_MAX_ARGS];
};
struct vs_meta_caller {
	const char *func, *file;
	uint32_t line;
};
struct vs_meta {
	uint32_t nsites, nflags, ncallers;
	uint32_t site_base; /* low 32 bits of the first site's address in the process */
	struct vs_meta_site *sites;
	struct vs_meta_caller *callers;
	const char *flag_names[32]; /* NULL where no flag has that bit */
	char *strings;              /* owns every string above */
};

/* Serialise this process's own sections (runtime use); malloc'd blob. */
int vs_meta_build_self(void **blob, size_t *len);
/* Parse a blob; on error -EINVAL and `why` says at which byte and what. */
int vs_meta_parse(struct vs_meta *m, const void *blob, size_t len, char *why, size_t whylen);
void vs_meta_free(struct vs_meta *m);
/* Site index of an event's site field, or -1 if it names no site. */
static inline int64_t vs_meta_site_index(const struct vs_meta *m, uint32_t site)
{
	uint32_t off = site - m->site_base; /* 32-bit wrap-around is intended */
	if (off % sizeof(struct vs_site) || off / sizeof(struct vs_site) >= m->nsites)
		return -1;
	return off / sizeof(struct vs_site);
}
/* Flag name lookup (case-insensitive); -1 if unknown. */
int vs_meta_flag_bit(const struct vs_meta *m, const char *name);

/* Parse "LEVEL[:FLAG,FLAG...]" (flags also "all" or 0xMASK).  Unknown names are an
 * error that names the culprit. */
int vs_spec_parse(const char *spec, const char *const flag_names[32], uint32_t *level,
		  uint32_t *mask, char *why, size_t whylen);
/* Recompute control words from a threshold and mask. */
void vs_ctl_compute(struct vs_trace_control *ctl, uint32_t level, uint32_t mask);
/* Set a process's threshold and mask, live (the process or a tool). */
struct vs_shm_header;
void vs_ctl_store(struct vs_shm_header *h, uint32_t level, uint32_t mask);
const char *vs_level_name(unsigned level);

/* ---- tool side: attach to a process's shared memory ------------------------------------ */
/* The file is untrusted (docs/SECURITY.md): another local user may have planted it,
 * and whoever owns it can rewrite any byte at any time.  vs_shm_open refuses a file
 * that is not a regular file of ours with a single link, reads the header ONCE into
 * `snap` and validates that copy; every offset and length the tools use comes from
 * `snap`, never from `hdr`.  `hdr` is only for the live control fields (ctl, level,
 * flags, mode, recorder_pid, exited, no_ring_drops), each read or written once per
 * use with an atomic access. */
struct vs_shm {
	char path[512];
	int fd;
	struct vs_shm_header *hdr; /* the live mapping */
	size_t size;		   /* bytes mapped: the file's size at open */
	struct vs_shm_header snap; /* the header as read at open, validated; exe and
				      flavour NUL-terminated */
	void *meta_blob;	   /* private copy of the metadata blob ... */
	size_t meta_len;
	struct vs_meta meta; /* ... and what it says */
	void *guard;	     /* shm.c: notices the file shrinking under the mapping */
};
const char *vs_shm_dir(void);
/* target: a pid or a path to a shm file.  Refuses files of another owner, of another
 * type or with other links (the message names the owner); validates the layout. */
int vs_shm_open(struct vs_shm *s, const char *target, char *why, size_t whylen);
void vs_shm_close(struct vs_shm *s);
/* Ring i's header and data, placed by the snapshot; NULL if i is not below its
 * ring_count. */
struct vs_shm_ring *vs_shm_ring(const struct vs_shm *s, unsigned i);
const uint8_t *vs_shm_ring_data(const struct vs_shm *s, unsigned i);
/* Is the process that wrote this file alive (same pid and start time, from the
 * snapshot)? */
bool vs_shm_owner_alive(const struct vs_shm *s);
uint64_t vs_proc_start_time(int pid);
/* Did the file shrink under a mapping of it (its owner truncated it)?  The mapping
 * then reads as zeros from the first fault on, and the tools stop with an error. */
bool vs_shm_shrunk(const struct vs_shm *s);

/* Copy the valid records in [*from, head) of ring i into buf (unwrapped, pads
 * removed); returns bytes copied and sets *from to the position after the last
 * record copied.  Safe against a live producer and against a hostile one: the ring
 * is read once, into buf, and only that copy is parsed; records the writer may have
 * overwritten during the copy (before the tail read after it) are left out; a record
 * that does not parse ends the copy. */
size_t vs_ring_copy(const struct vs_shm *s, unsigned i, uint64_t *from, uint64_t head, uint8_t *buf,
		    size_t buflen);

/* ---- capture file -------------------------------------------------------------------- */
#define VS_CAP_MAGIC   "VIOSCOPE"
#define VS_CAP_VERSION 1
enum vs_cap_section {
	VS_SEC_PROCESS = 1, /* u32 pid, u32 flavour_len... see docs/CAPTURE-FORMAT.md */
	VS_SEC_CLOCK = 2,   /* u32 is_tsc, u32 0, u64 ts0, mono0, real0, ts1, mono1, real1 */
	VS_SEC_META = 3,    /* metadata blob */
	VS_SEC_EVENTS = 4,  /* u32 tid, u32 slot, u32 generation, u32 0, char name[16], records */
	VS_SEC_LOSS = 5,    /* u32 tid, u32 slot, u64 dropped, u64 overwritten */
	VS_SEC_END = 6,     /* u64 events, u64 no_ring_drops */
};
struct vs_cap_file_header {
	char magic[8];
	uint16_t version;
	uint16_t header_size;
	uint32_t flags;
};
struct vs_cap_section_header {
	uint32_t type;
	uint32_t reserved;
	uint64_t size; /* payload bytes, payload padded to 8 */
};
struct vs_cap_clock {
	uint32_t is_tsc, pad;
	uint64_t ts0, mono0, real0, ts1, mono1, real1;
};

struct vs_capw {
	FILE *f;
	uint64_t events;
	int err;
};
int vs_capw_open(struct vs_capw *w, const char *path, const struct vs_shm *s);
int vs_capw_events(struct vs_capw *w, const struct vs_shm_ring *r, unsigned slot, const void *data,
		   size_t len);
int vs_capw_loss(struct vs_capw *w, const struct vs_shm_ring *r, unsigned slot, uint64_t dropped,
		 uint64_t overwritten);
int vs_capw_close(struct vs_capw *w, const struct vs_shm *s);
int64_t vs_capw_tell(struct vs_capw *w);
int vs_capw_rewind(struct vs_capw *w, int64_t pos);
void vs_clock_now(const struct vs_shm_header *h, uint64_t *ts, uint64_t *mono, uint64_t *real);

/* ---- decoding ---------------------------------------------------------------------- */
struct vs_cap_event {
	uint64_t real_ns; /* wall clock */
	uint32_t tid;
	const char *thread_name;
	const struct vs_meta_site *site; /* NULL for a drop/loss marker */
	const struct vs_meta_caller *caller;
	uint64_t lost;                   /* for markers: events lost here */
	const char *lost_what;           /* "dropped" or "overwritten" */
	const uint8_t *args;
	size_t args_len;
};
struct vs_capture; /* an opened capture: read into memory once, then validated */
int vs_capture_open(struct vs_capture **c, const char *path, char *why, size_t whylen);
void vs_capture_close(struct vs_capture *c);
const struct vs_meta *vs_capture_meta(const struct vs_capture *c);
uint32_t vs_capture_pid(const struct vs_capture *c);
/* Visit every event in time order (threads merged).  A callback returning non-zero
 * stops the walk and is returned.  Malformed records: -EINVAL with `why`. */
typedef int (*vs_event_fn)(const struct vs_cap_event *ev, void *opaque);
int vs_capture_walk(struct vs_capture *c, vs_event_fn fn, void *opaque, char *why, size_t whylen);
/* Steps of bookkeeping done so far (stream lookups, elements moved by growth, merge
 * heap levels): linear in the capture's size whatever its shape; for tests. */
uint64_t vs_capture_work(const struct vs_capture *c);

/* Format a site's message from recorded argument bytes.  Returns 0, or -EINVAL when
 * the bytes don't match the site's argument types (text then shows where). */
int vs_format_message(char *out, size_t outlen, const struct vs_meta_site *site, const uint8_t *args,
		      size_t len);
/* Text for a terminal: control characters (C0, DEL, C1) and bytes that are not UTF-8
 * become \xNN (one per byte); everything else, well-formed UTF-8 included, is kept.
 * vs_escape_text writes at most outlen - 1 bytes and a NUL, cut before a character;
 * returns the length. */
size_t vs_escape_text(char *out, size_t outlen, const char *s);
void vs_fputs_text(const char *s, FILE *f);
/* A JSON string, quotes included: \" \\ \n \r \t, \u00XX for the other control
 * characters (C0, DEL, C1), U+FFFD for each byte that is not UTF-8. */
void vs_fputs_json(const char *s, FILE *f);
/* "2026-11-29 20:31:05.123456789" */
void vs_format_walltime(char *out, size_t outlen, uint64_t real_ns);
/* The prefix shared by the decoder and the print backend:
 * "TIME TID LEVEL FLAG FUNC: " (FUNC is caller>callee for inline helpers). */
int vs_format_prefix(char *out, size_t outlen, uint64_t real_ns, uint32_t tid, unsigned level,
		     const char *flag, const char *caller, const char *func);

/* ---- operations on a traced process (record.c, decode.c) ------------------------------- */
struct vs_dump_stats {
	unsigned threads;
	uint64_t bytes;
	uint64_t dropped;
	uint64_t overwritten;
	bool alive;
};

/* target: pid or shm path.  Errors: -errno and `why`. */
int vs_trace_dump(const char *target, const char *out, struct vs_dump_stats *st, char *why,
		  size_t whylen);

struct vs_record_opts {
	double duration_s;                 /* 0: until the process exits or *stop */
	volatile sig_atomic_t *stop;       /* may be NULL */
	const char *enable_spec;           /* set level/flags when recording starts */
	void (*started)(void *opaque);     /* called once streaming has begun */
	void *opaque;
};
int vs_trace_record(const char *target, const char *out, const struct vs_record_opts *o,
		    struct vs_dump_stats *st, char *why, size_t whylen);

int vs_trace_enable(const char *target, const char *spec, char *why, size_t whylen);

struct vs_decode_opts {
	bool json;
	bool chrome;            /* Chrome/Perfetto trace-event JSON (chrome://tracing, ui.perfetto.dev) */
	unsigned max_level;     /* 0: all */
	uint32_t flag_mask;     /* 0: all */
	uint32_t tid;           /* 0: all */
	double from_s, to_s;    /* window relative to the first event; to_s < 0: open */
	const char *flag_spec;  /* names, resolved against the capture's flags */
};
/* Decode a capture to `out`.  Returns 0, or -errno with `why` (bad file, bad filter). */
int vs_trace_decode(const char *path, const struct vs_decode_opts *o, FILE *out, char *why,
		    size_t whylen);

/* ---- the runtime's own entry points, for tools and benchmarks in this repository ---- */
/* Set up the control block and rings (runs before main(); idempotent). */
int vs__runtime_init(void);
/* Send the print backend's output to a file (benchmarks). */
int vs__print_to(const char *path);

#endif /* VS_TRACETOOLS_H */
