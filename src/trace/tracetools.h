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

/* ---- shared-memory file: $VIOSCOPE_TRACE_DIR (default /dev/shm)/vioscope-trace-<pid> ----
 * header | provider control words | metadata (append-only records) | ring headers |
 * ring data.  Made once, at the first registration, with room for what may come: the
 * file is sparse, so the metadata area and the rings cost memory only where written. */
#define VS_SHM_MAGIC   "VSTRSHM2"
#define VS_SHM_VERSION 2
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

/* One provider's control words: what its sites test, rewritten live by `trace
 * enable`.  Which provider a slot is, and its flag names, is in the metadata. */
struct vs_shm_provider {
	struct vs_trace_control ctl;
	uint32_t level; /* threshold and mask that ctl was computed from */
	uint32_t mask;
	uint8_t pad[24];
};
_Static_assert(sizeof(struct vs_shm_provider) == 64, "provider slot is one cache line");

struct vs_shm_header {
	char magic[8];
	uint32_t version;
	uint32_t header_size;
	uint64_t total_size;
	uint32_t mode;               /* enum vs_trace_mode */
	int32_t recorder_pid;        /* 0 when nobody streams */
	int32_t pid;
	uint32_t exited;             /* set by a normal exit */
	uint64_t start_time;         /* /proc/PID/stat starttime: tells a reused pid apart */
	char exe[256];
	char flavour[16];            /* the objects' flavour, or "mixed" (informative) */
	uint32_t clock_is_tsc;       /* else timestamps are CLOCK_MONOTONIC ns */
	uint32_t keep;               /* keep the file at exit */
	uint64_t clk_ts0;            /* reference point taken at start: timestamp, */
	uint64_t clk_mono0;          /* CLOCK_MONOTONIC ns */
	uint64_t clk_real0;          /* CLOCK_REALTIME ns */
	uint64_t providers_offset;   /* struct vs_shm_provider[provider_slots] */
	uint32_t provider_slots;
	uint32_t nproviders;         /* slots in use (live) */
	uint64_t meta_offset;        /* metadata records (vs_meta_*), meta_capacity bytes */
	uint64_t meta_capacity;
	uint64_t meta_used;          /* bytes of whole records (live: grows as objects load) */
	uint64_t rings_offset;       /* struct vs_shm_ring[ring_count] */
	uint32_t ring_count;
	uint32_t pad0;
	uint64_t ring_size;          /* data bytes per ring, power of two */
	uint64_t data_offset;        /* ring i's data at data_offset + i * ring_size */
	uint64_t no_ring_drops;      /* events lost because every slot was taken */
	uint64_t owner_token;        /* a random value the runtime that made the file keeps */
	uint64_t owner_addr;         /* ... at this address: another copy of the runtime in the
					same process image finds it there (registry.c) */
};

/* ---- metadata: what the loaded objects declared (docs/CAPTURE-FORMAT.md) ---------------
 * A stream of records, in the trace file and in captures: one OBJECT record per object
 * (executable, shared library, module) as it registers (its providers, sites and
 * callers), an UNLOAD record when it goes.  Site ids are dense: an object's sites are
 * first_site .. first_site + nsites - 1, following the previous object's. */
enum vs_meta_kind { VS_META_OBJECT = 1, VS_META_UNLOAD = 2 };
#define VS_META_NO_SLOT 0xffffffffu /* a provider refused at registration (a clash) */
/* OBJECT record flags: its stage sites (VS_STAGE) are listed after its callers. */
#define VS_META_OBJECT_STAGES 1u

/* A growing byte buffer with sticky errors. */
struct vs_buf {
	uint8_t *p;
	size_t len, cap;
	int err;
};
void vs_buf_put(struct vs_buf *b, const void *v, size_t n);
void vs_buf_free(struct vs_buf *b);

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

/* An object's provider as its record lists it. */
struct vs_meta_out_provider {
	const struct vs_provider *p; /* its sites point here */
	const char *name;
	uint32_t slot; /* or VS_META_NO_SLOT */
	uint32_t nflags;
	const char *const *flags;
};
/* Append an OBJECT record; sites[i] gets id first_site + i. */
void vs_meta_put_object(struct vs_buf *b, uint32_t index, uint32_t first_site, uint64_t base,
			const char *path, const char *flavour, const struct vs_meta_out_provider *provs,
			unsigned nprovs, const struct vs_site *sites, unsigned nsites,
			const struct vs_caller *callers, unsigned ncallers,
			const struct vs_stage *stages, unsigned nstages);
void vs_meta_put_unload(struct vs_buf *b, uint32_t index, uint64_t ts);

struct vs_meta_provider {
	const char *name;
	uint32_t slot; /* its control words in the trace file */
	uint32_t nflags;
	const char *flags[32]; /* NULL where no flag has that bit (version 1 captures) */
};
struct vs_meta_caller {
	const char *func, *file;
	uint32_t line;
};
struct vs_meta_object {
	uint32_t first_site, nsites, ncallers;
	uint64_t base;
	const char *path, *flavour;
	bool unloaded;
	struct vs_meta_caller *callers;
};
struct vs_meta_site {
	const char *file, *func, *fmt;
	const char *provider;  /* its provider's name ("" in version 1 captures) */
	const char *flag_name;
	uint32_t line;
	uint8_t level, flag, hot, nargs, print;
	uint8_t also; /* a second flag's bit + 1, 0: none */
	uint8_t types[VS_TRACE_MAX_ARGS];
	uint32_t prov;   /* index in vs_meta.providers, or VS_META_NO_SLOT (refused) */
	uint32_t object; /* index in vs_meta.objects */
	/* Stage sites (VS_STAGE): when stages_known, stage is the stage this site marks (NULL:
	 * none) and fields[nargs] its arguments' names.  stages_known is false for sites of
	 * captures made before stage sites, which tools may still recognise by format. */
	bool stages_known;
	const char *stage;
	const char *const *fields;
};
struct vs_meta {
	uint32_t nsites, nobjects, nproviders;
	struct vs_meta_site *sites; /* by id: sites[id - 1] */
	struct vs_meta_object *objects;
	struct vs_meta_provider *providers; /* one per slot in use */
	bool v1;		   /* a version 1 blob: one object, sites named by address */
	uint32_t v1_site_base;
	void *arena; /* owns every string and array above */
};

/* Parse records (a trace file's metadata area, or the concatenated META sections of a
 * capture); on error -EINVAL and `why` says at which byte and what. */
int vs_meta_parse(struct vs_meta *m, const void *blob, size_t len, char *why, size_t whylen);
/* The version 1 blob of captures made before providers (one object, one provider). */
int vs_meta_parse_v1(struct vs_meta *m, const void *blob, size_t len, char *why, size_t whylen);
void vs_meta_free(struct vs_meta *m);
/* Index in m->sites of an event's site field, or -1 if it names no site. */
static inline int64_t vs_meta_site_index(const struct vs_meta *m, uint32_t site)
{
	if (m->v1) {
		uint32_t off = site - m->v1_site_base; /* 32-bit wrap-around is intended */
		if (off % sizeof(struct vs_site) || off / sizeof(struct vs_site) >= m->nsites)
			return -1;
		return off / sizeof(struct vs_site);
	}
	return site >= 1 && site - 1 < m->nsites ? (int64_t)site - 1 : -1;
}
/* The index of a stage site's argument called name, or -1 (also for other sites). */
int vs_meta_site_field(const struct vs_meta_site *s, const char *name);
/* Provider index by name (case-insensitive), or -1. */
int vs_meta_provider(const struct vs_meta *m, const char *name);

/* ---- specs: "LEVEL[:TERM,...]" ------------------------------------------------------
 * TERM: all | 0xMASK (every provider) | FLAG (that flag of every provider that has it)
 * | PROVIDER.FLAG | PROVIDER.all | PROVIDER.0xMASK.  Names are case-insensitive.
 * Without ':' every flag of every provider.  Strict: a term that matches no provider
 * or flag is an error naming it; lenient: such terms are skipped (the runtime applies
 * a spec to each provider as it is loaded). */
struct vs_spec_provider {
	const char *name;
	uint32_t nflags;
	const char *const *flags; /* [nflags], NULL entries allowed */
};
int vs_spec_eval(const char *spec, const struct vs_spec_provider *provs, unsigned nprovs,
		 bool strict, uint32_t *level, uint32_t *masks, char *why, size_t whylen);
/* The providers of parsed metadata, as vs_spec_eval takes them (malloc'd array). */
struct vs_spec_provider *vs_meta_spec_providers(const struct vs_meta *m);
/* Recompute control words from a threshold and mask (keeps the clock word). */
void vs_ctl_compute(struct vs_trace_control *ctl, uint32_t level, uint32_t mask);
/* Set one provider's threshold and mask, live (the process or a tool). */
void vs_ctl_store(struct vs_shm_provider *p, uint32_t level, uint32_t mask);
const char *vs_level_name(unsigned level);
/* "verbose" -> 5 ...; -1 if not a level */
int vs_level_parse(const char *s, size_t n);

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
	struct vs_meta meta; /* ... and what they say */
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
/* A provider's control words (slot from the metadata), NULL if the slot is not below
 * the snapshot's provider_slots. */
struct vs_shm_provider *vs_shm_provider(const struct vs_shm *s, uint32_t slot);
/* The metadata records as they are now (objects loaded since open included): a fresh
 * private copy, malloc'd; -EINVAL with `why` if the file's bounds are not sane. */
int vs_shm_meta_now(const struct vs_shm *s, void **blob, size_t *len, char *why, size_t whylen);
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
#define VS_CAP_VERSION 2 /* the decoder also reads version 1 */
enum vs_cap_section {
	VS_SEC_PROCESS = 1, /* u32 pid, u32 flavour_len... see docs/CAPTURE-FORMAT.md */
	VS_SEC_CLOCK = 2,   /* u32 is_tsc, u32 0, u64 ts0, mono0, real0, ts1, mono1, real1 */
	VS_SEC_META = 3,    /* metadata records (version 1: the one metadata blob) */
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
int vs_format_message(char *out, size_t outlen, const struct vs_meta_site *site, const uint8_t *args,
		      size_t len);
/* Decode-time names ("notes", docs/TRACING.md section 5): a site's format may follow a
 * conversion with {name} ("op %#x{scsi_op}", "sense %s{sense}" of a VS_BYTES).  printf
 * sees it as text, so -Wformat checks the site as ever; the event stays as small as the
 * value.  A decoder that knows the note shows the value's name instead of the
 * conversion; one that does not (or a value the note has no name for) shows the
 * conversion and drops the note. */
#define VS_NOTE_NAME_MAX 32  /* "{" name "}" */
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
/* The format without its notes, for printf (the print backend); returns the length. */
size_t vs_format_drop_notes(char *out, size_t outlen, const char *fmt);
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
/* "2026-11-29 20:31:05.123456789" */
void vs_format_walltime(char *out, size_t outlen, uint64_t real_ns);
/* The prefix shared by the decoder and the print backend:
 * "TIME TID LEVEL PROVIDER.FLAG FUNC: " (FUNC is caller>callee for inline helpers;
 * PROVIDER. is left out when the provider has no name, as in version 1 captures). */
int vs_format_prefix(char *out, size_t outlen, uint64_t real_ns, uint32_t tid, unsigned level,
		     const char *provider, const char *flag, const char *caller, const char *func);
/* A byte array as hex text ("00ff1a"), "[...]" after it when it was cut; at most
 * outlen - 1 characters and a NUL.  Returns out. */
char *vs_format_hex(char *out, size_t outlen, const uint8_t *p, size_t n, bool cut);

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
/* A spec (strict: every name must match) onto the providers of an opened file. */
int vs_shm_apply_spec(struct vs_shm *s, const char *spec, char *why, size_t whylen);

struct vs_decode_opts {
	bool json;
	bool chrome;            /* Chrome/Perfetto trace-event JSON (chrome://tracing, ui.perfetto.dev) */
	unsigned max_level;     /* 0: all */
	uint32_t tid;           /* 0: all */
	double from_s, to_s;    /* window relative to the first event; to_s < 0: open */
	const char *flag_spec;  /* FLAG,... as in a spec, resolved against the capture's
				   providers (NULL: all) */
};
/* Decode a capture to `out`.  Returns 0, or -errno with `why` (bad file, bad filter). */
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
	VS_LAT_SUBMIT, VS_LAT_KICK, VS_LAT_POP, VS_LAT_BSUB, VS_LAT_BDONE, VS_LAT_PUSH,
	VS_LAT_POLL, VS_LAT_DONE, VS_LAT_COUNT
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
int vs_latency_collect(const char *const *paths, unsigned npaths, struct vs_lat_set *set,
		       char *why, size_t whylen);

/* `trace latency`: join driver and device captures by request tag into per-request
 * timelines and print per-stage count/p50/p90/p99/p99.9/max (latency.c). */
struct vs_latency_opts {
	bool json;
	int by;        /* -1: all together, 0: per LUN, 1: per queue, 2: per opcode */
	unsigned slow; /* show the N slowest requests and their threads' events */
	const char *svg; /* also draw the stage distributions into this SVG file */
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
struct vs_live_opts {
	const char *enable_spec;     /* set on the process first (LEVEL:FLAG,...), or NULL */
	unsigned max_level;          /* 0: all */
	volatile sig_atomic_t *stop; /* set (Ctrl-C) to end; it also ends when the process does */
};
int vs_trace_live(const char *target, const struct vs_live_opts *o, FILE *out, char *why,
		  size_t whylen);

/* ---- the runtime's own entry points, for tools and benchmarks in this repository ---- */
/* Send the print backend's output to a file (benchmarks). */
VS__API int vs__print_to(const char *path);
/* A program that defines this as non-zero gets its trace file only when it calls
 * vs__file_start(): its objects register at load as usual (their sites, the settings
 * of $VIOSCOPE_TRACE), but no file is made and events go nowhere until then.  The
 * vioscope tool does, so that its commands that only read other processes' traces
 * neither make a file nor list themselves as traced processes.  Weak: most programs
 * leave it undefined. */
extern VS__API const int vs__file_on_demand __attribute__((weak));
/* Make the trace file now (a no-op if it exists): 0, or -errno (no tracing then). */
VS__API int vs__file_start(void);

#endif /* VS_TRACETOOLS_H */
