/* SPDX-License-Identifier: MIT */
/*
 * What the trace runtime shares with its tools (src/tracetools): the layout of the
 * shared-memory file a traced process makes, the metadata records in it, settings
 * (specs) and the control words they compute, the text of an event line (the print
 * backend's and the decoder's), and the runtime's own entry points for vioscope's tools.
 * Private to the two: traced programs include <vioscope/trace.h> only.
 */
#ifndef VS_TRACE_SHARED_H
#define VS_TRACE_SHARED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <vioscope/trace.h>

/* ---- shared-memory file: $VIOSCOPE_TRACE_DIR (default /dev/shm)/vioscope-trace-<pid> ----
 * header | provider control words | metadata (append-only records) | ring headers |
 * ring data.  Made once, at the first registration, with room for what may come: the
 * file is sparse, so the metadata area and the rings cost memory only where written. */
#define VS_SHM_MAGIC   "VSTRSHM2"
#define VS_SHM_VERSION 2
#define VS_SHM_PREFIX  "vioscope-trace-"
/* the file while it is made: PREFIX PID "-" and mkostemp's six characters */
#define VS_SHM_INIT_PREFIX ".vioscope-init-"

enum vs_ring_state { VS_RING_FREE = 0, VS_RING_ACTIVE = 1, VS_RING_RETIRED = 2 };
enum vs_trace_mode { VS_MODE_FLIGHT = 0, VS_MODE_STREAM = 1 };

/* Special site ids in event records. */
#define VS_EVENT_PAD 0xfffffffeu /* filler up to the end of the ring; skip to its start */
/* VS_EVENT_DROPS (trace.h): payload u64 count of events dropped just before this point */

/* One per thread slot.  Owner-written and reader-written fields sit on different
 * cache lines so a streaming recorder doesn't slow the producer. */
struct vs_shm_ring {
	uint64_t head;	      /* published write position, bytes, monotonic */
	uint64_t dropped;     /* events dropped: stream mode and ring full */
	uint64_t overwritten; /* events overwritten: flight mode */
	uint32_t state;	      /* enum vs_ring_state */
	uint32_t tid;
	uint32_t generation; /* bumped each time a thread takes the slot */
	uint32_t pad0;
	char thread_name[16];
	uint8_t pad1[64 - 56];
	uint64_t tail; /* oldest valid position: the recorder's (stream) or owner's (flight) */
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
	uint32_t mode;	      /* enum vs_trace_mode */
	int32_t recorder_pid; /* 0 when nobody streams */
	int32_t pid;
	uint32_t exited;     /* set by a normal exit */
	uint64_t start_time; /* /proc/PID/stat starttime: tells a reused pid apart */
	char exe[256];
	char flavour[16];	   /* the objects' flavour, or "mixed" (informative) */
	uint32_t clock_is_tsc;	   /* else timestamps are CLOCK_MONOTONIC ns */
	uint32_t keep;		   /* keep the file at exit */
	uint64_t clk_ts0;	   /* reference point taken at start: timestamp, */
	uint64_t clk_mono0;	   /* CLOCK_MONOTONIC ns */
	uint64_t clk_real0;	   /* CLOCK_REALTIME ns */
	uint64_t providers_offset; /* struct vs_shm_provider[provider_slots] */
	uint32_t provider_slots;
	uint32_t nproviders;  /* slots in use (live) */
	uint64_t meta_offset; /* metadata records (vs_meta_*), meta_capacity bytes */
	uint64_t meta_capacity;
	uint64_t meta_used;    /* bytes of whole records (live: grows as objects load) */
	uint64_t rings_offset; /* struct vs_shm_ring[ring_count] */
	uint32_t ring_count;
	uint32_t pad0;
	uint64_t ring_size;	/* data bytes per ring, power of two */
	uint64_t data_offset;	/* ring i's data at data_offset + i * ring_size */
	uint64_t no_ring_drops; /* events lost because every slot was taken */
	uint64_t owner_token;	/* a random value the runtime that made the file keeps */
	uint64_t owner_addr;	/* ... at this address: another copy of the runtime in the
				   same process image finds it there (registry.c) */
};

/* Where the files are: $VIOSCOPE_TRACE_DIR, else /dev/shm (runtime.c). */
const char *vs_shm_dir(void);

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
			const char *path, const char *flavour,
			const struct vs_meta_out_provider *provs, unsigned nprovs,
			const struct vs_site *sites, unsigned nsites,
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
	const char *provider; /* its provider's name ("" in version 1 captures) */
	const char *flag_name;
	uint32_t line;
	uint8_t level, flag, hot, nargs, print;
	uint8_t also; /* a second flag's bit + 1, 0: none */
	uint8_t types[VS_TRACE_MAX_ARGS];
	uint32_t prov;	 /* index in vs_meta.providers, or VS_META_NO_SLOT (refused) */
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
	bool v1; /* a version 1 blob: one object, sites named by address */
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
	/* Which flags have sites, when known (from metadata): a provider declares every
	 * flag of its list, vioscope's own 17 included, whether or not a site uses it. */
	bool sites_known;
	uint32_t sited[VS_LEVEL_MAX + 1]; /* [level]: flags with a site of that level */
};
/* Errors naming the flags that exist list those with sites when that is known, as many
 * whole names as fit in whylen, then how many more there are. */
int vs_spec_eval(const char *spec, const struct vs_spec_provider *provs, unsigned nprovs,
		 bool strict, uint32_t *level, uint32_t *masks, char *why, size_t whylen);
/* The providers of parsed metadata, as vs_spec_eval takes them, with the flags their
 * sites use (malloc'd array). */
struct vs_spec_provider *vs_meta_spec_providers(const struct vs_meta *m);
/* The flags of p with a site at or below level. */
uint32_t vs_spec_sited(const struct vs_spec_provider *p, unsigned level);
/* The terms of a (valid) spec that select no site of provs (sites_known): a flag that no
 * site uses, or whose sites all lie above the spec's level.  Each is named in warn
 * ("'scsi.io' selects no trace site (scsi's flags with sites: scsi, stage, tmf)"), cut to
 * whole names as errors are; returns how many.  Level off selects nothing on purpose. */
unsigned vs_spec_unsited(const char *spec, const struct vs_spec_provider *provs, unsigned nprovs,
			 char *warn, size_t warnlen);
/* Recompute control words from a threshold and mask (keeps the clock word). */
void vs_ctl_compute(struct vs_trace_control *ctl, uint32_t level, uint32_t mask);
/* Set one provider's threshold and mask, live (the process or a tool). */
void vs_ctl_store(struct vs_shm_provider *p, uint32_t level, uint32_t mask);
const char *vs_level_name(unsigned level);
/* "verbose" -> 5 ...; -1 if not a level */
int vs_level_parse(const char *s, size_t n);

/* ---- the text of an event line (text.c) ---------------------------------------------- */
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
/* Decode-time names ("notes", docs/TRACING.md section 5): a site's format may follow a
 * conversion with {name} ("op %#x{scsi_op}", "sense %s{sense}" of a VS_BYTES).  printf
 * sees it as text, so -Wformat checks the site as ever; the event stays as small as the
 * value.  A decoder that knows the note shows the value's name instead of the
 * conversion; one that does not (or a value the note has no name for) shows the
 * conversion and drops the note. */
#define VS_NOTE_NAME_MAX 32 /* "{" name "}" */
/* The format without its notes, for printf (the print backend); returns the length. */
size_t vs_format_drop_notes(char *out, size_t outlen, const char *fmt);
/* The length of a note "{name}" at f, or 0 when f does not start one. */
size_t vs_note_len(const char *f);

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

#endif /* VS_TRACE_SHARED_H */
