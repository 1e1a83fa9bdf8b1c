/* SPDX-License-Identifier: MIT */
/*
 * The trace tools' interface: a tool's view of a traced process's shared-memory file,
 * the capture file, the decoder, and the operations of `vioscope trace` on a traced
 * process (dump, record, enable, decode, latency, live).  What the runtime shares with
 * them (the file's layout, the metadata, specs, the text of an event line) is
 * trace/trace_shared.h.  Traced programs never include this; they include
 * <vioscope/trace.h> only.
 */
#ifndef VS_TRACETOOLS_H
#define VS_TRACETOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>

#include <vioscope/trace.h>

#include "trace/trace_shared.h"
#include "util/util.h"

/* A map from 64-bit keys to indices, for lookups per event whose count a capture decides
 * (u64map.c): zero-initialised is empty. */
#define VS_U64MAP_NONE SIZE_MAX
struct vs_u64map {
	struct vs_u64map_slot *slots;
	size_t cap, n;
};
/* key's value, or VS_U64MAP_NONE when it has none. */
size_t vs_u64map_get(const struct vs_u64map *m, uint64_t key);
/* Set key's value (VS_U64MAP_NONE: none): 0, or -ENOMEM when a new key finds no room (a
 * key that has a value, even VS_U64MAP_NONE, is always set). */
int vs_u64map_put(struct vs_u64map *m, uint64_t key, size_t val);
void vs_u64map_free(struct vs_u64map *m);

/* ---- tool side: attach to a process's shared memory ------------------------------------ */
/* The file is untrusted (docs/SECURITY.md): another local user may have planted it,
 * and whoever owns it can rewrite any byte at any time.  vs_shm_open refuses a file
 * that is not a regular file of ours with a single link, reads the header ONCE into
 * `snap` and validates that copy; every offset and length the tools use comes from
 * `snap`, never from `hdr`.  `hdr` is only for the live fields (mode, recorder_pid,
 * exited, no_ring_drops, meta_used, the providers' control words), each read or written
 * once per use with an atomic access.  The metadata is copied out once at open (and
 * again by vs_shm_meta_now) and parsed from the copy. */
struct vs_shm {
	char path[512];
	int fd;
	struct vs_shm_header *hdr; /* the live mapping */
	size_t size;		   /* bytes mapped: the file's size at open */
	struct vs_shm_header snap; /* the header as read at open, validated; exe and
				      flavour NUL-terminated */
	void *meta_blob;	   /* private copy of the metadata records ... */
	size_t meta_len;
	struct vs_meta meta;	   /* ... and what they say */
	int guard;		   /* the mapping's SIGBUS guard (util: vs_map_guard_add) ... */
	struct vs_map_fault fault; /* ... which records here that the file shrank: the struct
				      must not move while open */
};
/* target: a pid or a path to a shm file.  Refuses files of another owner, of another
 * type or with other links (the message names the owner); validates the layout. */
int vs_shm_open(struct vs_shm *s, const char *target, char *why, size_t whylen);
void vs_shm_close(struct vs_shm *s);
/* Ring i's header and data, placed by the snapshot; NULL if i is not below its
 * ring_count. */
struct vs_shm_ring *vs_shm_ring(const struct vs_shm *s, unsigned i);
const uint8_t *vs_shm_ring_data(const struct vs_shm *s, unsigned i);
/* A provider's control words (slot from the metadata), NULL if the slot is not below
 * the snapshot's provider_slots. */
struct vs_shm_provider *vs_shm_provider(const struct vs_shm *s, uint32_t slot);
/* The metadata records as they are now (objects loaded since open included): a fresh
 * private copy, malloc'd; -EINVAL with `why` if the file's bounds are not sane. */
int vs_shm_meta_now(const struct vs_shm *s, void **blob, size_t *len, char *why, size_t whylen);
/* Is the process that wrote this file alive (same pid and start time, from the
 * snapshot)? */
bool vs_shm_owner_alive(const struct vs_shm *s);
/* Remove what a child we started and reaped left in the trace directory because a
 * signal ended it: its trace file and the temporary one of its start (SIGKILL there).
 * Only for a pid of our own that we have waited for: another process's file of a dead
 * pid is its flight record, kept for `trace dump`. */
void vs_shm_remove_reaped(int pid);
/* A recorder holds an OFD write lock on one byte of the trace file, at
 * VS_SHM_RECORDER_LOCK + its pid (past any file's end: a lock may lie beyond it).  The
 * kernel drops it when the recorder exits, however it exits, so whether the recorder_pid
 * of a file still records is asked of its lock, never of a pid that may be reused. */
#define VS_SHM_RECORDER_LOCK ((int64_t)1 << 40)
/* Does pid hold its recorder lock on s's file (through another open of it than s)? */
bool vs_shm_recorder_alive(const struct vs_shm *s, int32_t pid);
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
#define VS_CAP_VERSION 2 /* the decoder also reads version 1 */
enum vs_cap_section {
	VS_SEC_PROCESS = 1, /* u32 pid, u32 flavour_len... see docs/CAPTURE-FORMAT.md */
	VS_SEC_CLOCK = 2,   /* u32 is_tsc, u32 0, u64 ts0, mono0, real0, ts1, mono1, real1 */
	VS_SEC_META = 3,    /* metadata records (version 1: the one metadata blob) */
	VS_SEC_EVENTS = 4,  /* u32 tid, u32 slot, u32 generation, u32 0, char name[16], records */
	VS_SEC_LOSS = 5,    /* u32 tid, u32 slot, u64 dropped, u64 overwritten */
	VS_SEC_END = 6,	    /* u64 events, u64 no_ring_drops */
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
/* A new capture file at path: never an existing file, never through a symbolic link
 * (-EEXIST for both). */
int vs_capw_open(struct vs_capw *w, const char *path, const struct vs_shm *s);
/* Close a capture just opened and remove it (if path still names it): nothing was made. */
void vs_capw_discard(struct vs_capw *w, const char *path);
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
	uint64_t lost;	       /* for markers: events lost here */
	const char *lost_what; /* "dropped" or "overwritten" */
	const uint8_t *args;
	size_t args_len;
};
struct vs_capture; /* an opened capture: read into memory once, then validated */
int vs_capture_open(struct vs_capture **c, const char *path, char *why, size_t whylen);
void vs_capture_close(struct vs_capture *c);
const struct vs_meta *vs_capture_meta(const struct vs_capture *c);
uint32_t vs_capture_pid(const struct vs_capture *c);
/* The traced program's path, from its PROCESS section ("" if none; untrusted text). */
const char *vs_capture_exe(const struct vs_capture *c);
/* Its CLOCK section (checked at open). */
const struct vs_cap_clock *vs_capture_clock(const struct vs_capture *c);
/* Read c's timestamps with another capture's calibration k (both TSC: one host's TSC is
 * one clock for all its processes); false, and c unchanged, otherwise.  Each capture's
 * own calibration is anchored at its process's start and averages the TSC's rate over
 * its own span: two of them can disagree by microseconds within a second (a rate apart
 * by 10 ppm is 10 µs), more than a fast request lasts, when events of two processes
 * are compared one by one (`trace latency` joining driver and device). */
bool vs_capture_share_clock(struct vs_capture *c, const struct vs_cap_clock *k);
/* Visit every event in time order (threads merged).  A callback returning non-zero
 * stops the walk and is returned.  Malformed records: -EINVAL with `why`. */
typedef int (*vs_event_fn)(const struct vs_cap_event *ev, void *opaque);
int vs_capture_walk(struct vs_capture *c, vs_event_fn fn, void *opaque, char *why, size_t whylen);
/* Steps of bookkeeping done so far (stream lookups, elements moved by growth, merge
 * heap levels): linear in the capture's size whatever its shape; for tests. */
uint64_t vs_capture_work(const struct vs_capture *c);

/* Format a site's message from recorded argument bytes.  Returns 0, or -EINVAL when
 * the bytes don't match the site's argument types (text then shows where). */
int vs_format_message(char *out, size_t outlen, const struct vs_meta_site *site,
		      const uint8_t *args, size_t len);
/* A decoder's notes (their syntax: trace/trace_shared.h). */
#define VS_NOTE_TEXT_MAX 640 /* a note's text, at most */
struct vs_note {
	const char *name; /* "scsi_op" */
	/* An integer's name, or NULL when it has none (then the number is shown). */
	const char *(*int_name)(uint64_t v);
	/* A byte array's text into out (NUL-terminated, outlen bytes at most); its length,
	 * or 0 when the bytes say nothing (then the hex is shown). */
	size_t (*bytes_text)(char *out, size_t outlen, const uint8_t *p, size_t n);
};
/* vs_format_message with the notes a decoder knows (NULL, 0: none). */
int vs_format_message_noted(char *out, size_t outlen, const struct vs_meta_site *site,
			    const uint8_t *args, size_t len, const struct vs_note *notes,
			    size_t nnotes);
/* vioscope's own notes: SCSI, virtio-scsi and vhost-user names from src/proto
 * (notes.c): scsi_op, scsi_status, sense_key, asc (ASC << 8 | ASCQ), sense and cdb
 * (byte arrays), tmf, vscsi_response, vhost_msg. */
extern const struct vs_note vs_proto_notes[];
extern const size_t vs_proto_nnotes;

/* Text for a terminal: control characters (C0, DEL, C1) and bytes that are not UTF-8
 * become \xNN (one per byte); everything else, well-formed UTF-8 included, is kept.
 * vs_escape_text writes at most outlen - 1 bytes and a NUL, cut before a character;
 * returns the length. */
size_t vs_escape_text(char *out, size_t outlen, const char *s);
void vs_fputs_text(const char *s, FILE *f);
/* A JSON string, quotes included: \" \\ \n \r \t, \u00XX for the other control
 * characters (C0, DEL, C1), U+FFFD for each byte that is not UTF-8. */
void vs_fputs_json(const char *s, FILE *f);

/* ---- operations on a traced process (record.c, decode.c) ------------------------------- */
struct vs_dump_stats {
	unsigned threads;
	uint64_t bytes;
	uint64_t dropped;
	uint64_t overwritten;
	bool alive;
	/* record: the recorder it took over from (0: none), and whether that one was still
	 * recording (--force) or had gone without detaching */
	int32_t displaced;
	bool displaced_alive;
};

/* target: pid or shm path.  Errors: -errno and `why`. */
int vs_trace_dump(const char *target, const char *out, struct vs_dump_stats *st, char *why,
		  size_t whylen);

struct vs_record_opts {
	double duration_s;	       /* 0: until the process exits or *stop */
	volatile sig_atomic_t *stop;   /* may be NULL */
	const char *enable_spec;       /* set level/flags when recording starts */
	bool force;		       /* take the recording over from a live recorder */
	void (*started)(void *opaque); /* called once streaming has begun */
	void *opaque;
};
/* One recorder per process: a second is refused (-EBUSY, naming the first) unless
 * o->force, and then the first stops with -ECANCELED, its capture whole up to the
 * takeover.  A recorder that has gone without detaching is taken over in any case. */
int vs_trace_record(const char *target, const char *out, const struct vs_record_opts *o,
		    struct vs_dump_stats *st, char *why, size_t whylen);

/* A spec (strict: every name must match) against the providers of an opened file,
 * nothing changed: 0, or -EINVAL with why.  warn (warnlen 0: not wanted) gets the terms
 * that select no site of the process (vs_spec_unsited), "" when each selects some. */
int vs_shm_check_spec(const struct vs_shm *s, const char *spec, char *warn, size_t warnlen,
		      char *why, size_t whylen);
/* The same, then the level and flags stored in the process's control words (live). */
int vs_shm_apply_spec(struct vs_shm *s, const char *spec, char *warn, size_t warnlen, char *why,
		      size_t whylen);

struct vs_decode_opts {
	bool json;
	bool chrome; /* Chrome/Perfetto trace-event JSON (chrome://tracing, ui.perfetto.dev) */
	unsigned max_level;    /* 0: all */
	uint32_t tid;	       /* 0: all */
	double from_s, to_s;   /* window relative to the first event; to_s < 0: open */
	const char *flag_spec; /* FLAG,... as in a spec, resolved against the capture's
				  providers (NULL: all) */
};
/* Decode a capture to `out`.  Returns 0, or -errno with `why`: -EDOM for a --flag filter
 * naming no provider or flag of the capture, -EINVAL for a capture that is not valid. */
int vs_trace_decode(const char *path, const struct vs_decode_opts *o, FILE *out, char *why,
		    size_t whylen);
/* Several captures in one output (text and JSON: one after the other).  Chrome output
 * puts them on one time line, each capture a process, and draws each request's stages
 * as slices, joined by flow arrows driver -> device -> driver where both sides are there
 * (the stage events of `trace latency`). */
int vs_trace_decode_many(const char *const *paths, unsigned n, const struct vs_decode_opts *o,
			 FILE *out, char *why, size_t whylen);

/* Export a capture as a CTF 1.8 trace into DIR (made if absent; files in it are never
 * replaced): `metadata` and one stream file per thread (ctf.c, docs/CAPTURE-FORMAT.md).
 * Returns 0, or -errno with `why`. */
int vs_trace_export_ctf(const char *path, const char *dir, char *why, size_t whylen);

/* One request's instants (wall-clock ns, 0: not seen), as `trace latency` joins them
 * from the driver's and the device's captures by tag (latency.c). */
enum vs_lat_when {
	VS_LAT_SUBMIT,
	VS_LAT_KICK,
	VS_LAT_POP,
	VS_LAT_BSUB,
	VS_LAT_BDONE,
	VS_LAT_PUSH,
	VS_LAT_POLL,
	VS_LAT_DONE,
	VS_LAT_COUNT
};
struct vs_lat_req {
	uint64_t tag;
	uint32_t q, lun, op;
	uint64_t t[VS_LAT_COUNT];
	uint32_t pid_driver, tid_driver, pid_device, tid_device;
	bool closed;
	bool withdrawn; /* the driver recorded it, then failed to publish it */
};
struct vs_lat_set {
	struct vs_lat_req *r; /* malloc'd: the driver's requests (joined), else the device's */
	size_t n;
	bool driver, device; /* which sides the captures held */
};
int vs_latency_collect(const char *const *paths, unsigned npaths, struct vs_lat_set *set, char *why,
		       size_t whylen);

/* `trace latency`: join driver and device captures by request tag into per-request
 * timelines and print per-stage count/p50/p90/p99/p99.9/max (latency.c). */
struct vs_latency_opts {
	bool json;
	int by;		 /* -1: all together, 0: per LUN, 1: per queue, 2: per opcode */
	unsigned slow;	 /* show the N slowest requests and their threads' events */
	const char *svg; /* also draw the stage distributions into this SVG file */
	/* json: the caller's first members of the object, e.g. the build and command line
	 * (followed by a comma); NULL: none */
	void (*json_head)(FILE *out);
};
/* Stage s's name ("backend"), NULL past the last; a stage's values (ns) of the
 * requests that have it, into out (room for set->n); returns how many. */
const char *vs_latency_stage(unsigned s);
size_t vs_latency_values(const struct vs_lat_set *set, unsigned s, uint64_t *out);
/* The stage distributions as a standalone SVG (latency_svg.c): one row per stage, a
 * log-scale time axis, a histogram and the p50/p90/p99/p99.9/max marks. */
int vs_latency_svg(const struct vs_lat_set *set, const char *path, char *why, size_t whylen);
int vs_trace_latency(const char *const *paths, unsigned npaths, const struct vs_latency_opts *o,
		     FILE *out, char *why, size_t whylen);

/* `trace live`: a process's events printed as they happen (live.c). */
/* It reads and never writes the process's settings: the level and flags filter what it
 * shows, as decode's do (changing what the process records is `trace enable`'s). */
struct vs_live_opts {
	const char *flag_spec;	     /* FLAG,... as in a spec: shown only (NULL: all) */
	unsigned max_level;	     /* 0: all */
	volatile sig_atomic_t *stop; /* set (Ctrl-C) to end; it also ends when the process does */
};
int vs_trace_live(const char *target, const struct vs_live_opts *o, FILE *out, char *why,
		  size_t whylen);

#endif /* VS_TRACETOOLS_H */
