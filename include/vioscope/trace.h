/* SPDX-License-Identifier: MIT */
/*
 * vioscope tiered tracing: the only header a traced program needs.
 *
 *     VS_INFO(INIT, "negotiated features %#llx", (unsigned long long)features);
 *     VS_VERBOSE_HP(IO, "req %u lba %llu", tag, (unsigned long long)lba);
 *     VS_INFO(NET, "key %s", VS_BYTES(key, 16));      (bytes: shown as hex)
 *
 * What a site compiles to is decided per translation unit (set by the CMake target you
 * link, vioscope::trace-off, -cold, -all, -cold-print, -all-print, or the pkg-config
 * file of that name), never by #if at the site:
 *
 *     VS_TRACE_TIER   0 off: no code, no strings, no metadata
 *                     1 cold (default): plain sites compiled in, _HP sites compiled out
 *                     2 all: both compiled in
 *     VS_TRACE_PRINT  0 binary (default): events into per-thread rings, decoded offline
 *                     1 print: formatted synchronously to stderr or $VIOSCOPE_TRACE_FILE
 *
 * The flavour belongs to the call sites only: every flavour links the same runtime and
 * no function signature or structure depends on it, so each object of a program (its
 * executable, shared libraries, dlopen()ed modules) may have its own.  A disabled site
 * costs one load, one test and one predictable branch; enabled, it records a timestamp,
 * its id and the raw argument bytes (the format is used by the decoder only).
 *
 * Every library or program is a provider with its own flags (at most 32), declared
 * before the first include; the tools address them as provider.flag:
 *
 *     #define VS_TRACE_PROVIDER myapp                  (default: app)
 *     #define VS_TRACE_FLAGS(X) X(PARSE) X(NET) X(DB)  (default: vioscope's own list)
 *     #include <vioscope/trace.h>
 *
 * How a site works is in <vioscope/trace_impl.h>, which this includes; docs/TRACING.md
 * is the guide.
 */
#ifndef VIOSCOPE_TRACE_H
#define VIOSCOPE_TRACE_H

#include <stddef.h>
#include <stdint.h>

#ifndef VS_TRACE_TIER
#define VS_TRACE_TIER 1
#endif
#ifndef VS_TRACE_PRINT
#define VS_TRACE_PRINT 0
#endif
#ifndef VS_TRACE_PROVIDER
#define VS_TRACE_PROVIDER app
#endif

/* ---- levels (WPP's TRACE_LEVEL_* numbering) -------------------------------------------- */
#define VS_LEVEL_CRITICAL 1
#define VS_LEVEL_ERROR	  2
#define VS_LEVEL_WARNING  3
#define VS_LEVEL_INFO	  4
#define VS_LEVEL_VERBOSE  5
#define VS_LEVEL_MAX	  5

/* ---- flags of this translation unit's provider: VS_FLAG_NAME is the bit ------------------ */
/* clang-format off */
#ifndef VS_TRACE_FLAGS
/* vioscope's own areas; a provider may declare its own list instead (at most 32). */
#define VS_TRACE_FLAGS(X)                                                                          \
	X(GENERAL) X(INIT) X(FEATURES) X(CONFIG) X(QUEUE) X(IO) X(TMF) X(EVENT) X(MEMORY)          \
	X(NOTIFY) X(VHOST) X(SCSI) X(BACKEND) X(ENTRY) X(BENCH) X(TEST) X(STAGE)
#endif
/* clang-format on */
#define VS__FLAG_ENUM(name) VS_FLAG_##name,
enum vs_trace_flag { VS_TRACE_FLAGS(VS__FLAG_ENUM) VS__FLAG_COUNT };
#undef VS__FLAG_ENUM
_Static_assert(VS__FLAG_COUNT >= 1 && VS__FLAG_COUNT <= 32, "1 to 32 trace flags");

/* ---- arguments: integers, floating point, pointers, strings, byte arrays ----------------- */
#define VS_TRACE_MAX_ARGS  16
#define VS_TRACE_STR_MAX   128 /* longer strings are cut and marked as cut */
#define VS_TRACE_BYTES_MAX 256 /* longer byte arrays too */
#define VS_TRACE_STR_CUT   0x8000u
#define VS_TRACE_STR_NULL  0xffffu /* length field of a NULL char * or VS_BYTES(NULL, n) */

/* A byte-array argument: VS_BYTES(ptr, len), printed with %s (as hex in text). */
struct vs_bytes {
	const void *ptr;
	size_t len;
};
#define VS_BYTES(ptr, len) ((struct vs_bytes){(ptr), (len)})

#include <vioscope/trace_impl.h>

/* ---- the call-site API: VS_LEVEL(FLAG, format, arguments...) ------------------------------ */
#define VS_CRITICAL(flag, ...) VS__COLD(VS_LEVEL_CRITICAL, flag, __VA_ARGS__)
#define VS_ERROR(flag, ...)    VS__COLD(VS_LEVEL_ERROR, flag, __VA_ARGS__)
#define VS_WARNING(flag, ...)  VS__COLD(VS_LEVEL_WARNING, flag, __VA_ARGS__)
#define VS_INFO(flag, ...)     VS__COLD(VS_LEVEL_INFO, flag, __VA_ARGS__)
#define VS_VERBOSE(flag, ...)  VS__COLD(VS_LEVEL_VERBOSE, flag, __VA_ARGS__)

/* Hot-path sites: compiled in the all flavours only. */
#define VS_CRITICAL_HP(flag, ...) VS__HOT(VS_LEVEL_CRITICAL, flag, 0, 0, __VA_ARGS__)
#define VS_ERROR_HP(flag, ...)	  VS__HOT(VS_LEVEL_ERROR, flag, 0, 0, __VA_ARGS__)
#define VS_WARNING_HP(flag, ...)  VS__HOT(VS_LEVEL_WARNING, flag, 0, 0, __VA_ARGS__)
#define VS_INFO_HP(flag, ...)	  VS__HOT(VS_LEVEL_INFO, flag, 0, 0, __VA_ARGS__)
#define VS_VERBOSE_HP(flag, ...)  VS__HOT(VS_LEVEL_VERBOSE, flag, 0, 0, __VA_ARGS__)

/* A verbose hot-path site under two flags, on when either is enabled: for an event of one
 * area that also belongs to a selection across areas.  The test is one AND with a
 * constant mask, as for one flag. */
#define VS_VERBOSE_HP_ALSO(flag, also, ...)                                                        \
	VS__HOT(VS_LEVEL_VERBOSE, flag, VS_FLAG_##also + 1, 0, __VA_ARGS__)

/* A stage of a unit of work (a request's submit, its pop by the device, its completion):
 * a verbose hot-path site under FLAG and the provider's STAGE flag, whose metadata says
 * which stage it marks and names each argument, as (name, value) pairs:
 *
 *     VS_STAGE(IO, submit, "q %u tag %#llx", (q, q->idx), (tag, (unsigned long long)tag));
 *
 * Tools that follow work through its stages (`trace latency`) match on the provider, the
 * stage and the field names, never on the format: its wording is free. */
#define VS_STAGE(flag, stage, ...) VS__STAGE(0, flag, stage, __VA_ARGS__)

/* The same hot-path sites with their record out of line: a test inline, and when the
 * site is on, a call that records its arguments.  For a small function on a hot path
 * where the inline record made the compiler save registers on every call, the site on
 * or off (VS__OUT_OF_LINE says why; measure first: in a large function the call costs
 * more).  Errors and warnings always record this way. */
#define VS_INFO_HP_OOL(flag, ...)      VS__HOT(VS_LEVEL_INFO, flag, 0, 1, __VA_ARGS__)
#define VS_VERBOSE_HP_OOL(flag, ...)   VS__HOT(VS_LEVEL_VERBOSE, flag, 0, 1, __VA_ARGS__)
#define VS_STAGE_OOL(flag, stage, ...) VS__STAGE(1, flag, stage, __VA_ARGS__)

/* Whether a hot-path site of this level and flag would record now (0 in flavours without
 * hot sites): for work done only to feed a site. */
#define VS_HP_ENABLED(level, flag) VS__HP_ENABLED(VS_LEVEL_##level, VS_FLAG_##flag, 0)
#define VS_HP_ENABLED_ALSO(level, flag, also)                                                      \
	VS__HP_ENABLED(VS_LEVEL_##level, VS_FLAG_##flag, VS_FLAG_##also + 1)

/* Static (inline) helpers can name their caller (decoded as "caller>callee"):
 *
 *     static inline void ring_push(struct ring *r, int v VS_CALLER_PARAM)
 *     { VS_VERBOSE_HP(QUEUE, "push %d", v); }
 *     ...  ring_push(r, 5 VS_CALLER_ARG);
 *
 * Both expand to nothing unless hot-path sites are compiled in: for static functions
 * only (on an extern function they would make its signature depend on the flavour). */
#define VS_CALLER_PARAM VS__CALLER_PARAM
#define VS_CALLER_ARG	VS__CALLER_ARG

/* ---- process-level API ------------------------------------------------------------------- */
#ifdef __cplusplus
extern "C" {
#endif
/* Settings at start come from $VIOSCOPE_TRACE ("LEVEL[:FLAG,...]", FLAG being
 * provider.flag, a flag name for every provider that has it, provider.all or all;
 * default "info:all").  These change them from inside the program; `vioscope trace
 * enable` does it from outside. */

/* One provider's threshold and flags; -ENOENT if no loaded object declares it. */
VS__API int vs_trace_set_provider(const char *provider, int level, uint32_t flag_mask);
/* Every provider, from a spec as in $VIOSCOPE_TRACE; also applies to providers loaded
 * later.  Checked as `vioscope trace enable` checks it: a provider or flag that no object
 * loaded now declares is refused.  0, or -EINVAL and nothing changed. */
VS__API int vs_trace_set_spec(const char *spec);
/* The same, with why it was refused (naming the unknown level, provider or flag and the
 * known ones) in why. */
VS__API int vs_trace_set_spec_why(const char *spec, char *why, size_t whylen);
/* Keep the shared-memory file (the flight record) when the process exits. */
VS__API void vs_trace_keep_on_exit(int keep);
/* Path of this process's shared-memory file, or NULL (nothing traced, or no file). */
VS__API const char *vs_trace_shm_path(void);

/* This translation unit's provider: level and flags by its own VS_FLAG_* bits. */
static inline __attribute__((unused)) int vs_trace_set(int level, uint32_t flag_mask)
{
	return vs_trace_set_provider(VS__PROVIDER_NAME, level, flag_mask);
}
/* The flavour this translation unit was compiled in: "off", "cold", "all",
 * "cold-print" or "all-print". */
static inline __attribute__((unused)) const char *vs_trace_flavour(void)
{
	return VS_TRACE_TIER == 0   ? "off"
	       : VS_TRACE_TIER >= 2 ? (VS_TRACE_PRINT ? "all-print" : "all")
				    : (VS_TRACE_PRINT ? "cold-print" : "cold");
}
#ifdef __cplusplus
}
#endif
#endif /* VIOSCOPE_TRACE_H */
