/* SPDX-License-Identifier: MIT */
/*
 * vioscope tiered tracing: the only header a traced program needs.
 *
 * Call sites are plain macros and never need #if:
 *
 *     VS_INFO(INIT, "negotiated features %#llx", (unsigned long long)features);
 *     VS_VERBOSE_HP(IO, "req %u lba %llu", tag, (unsigned long long)lba);
 *     VS_ENTER_HP(IO); ... VS_EXIT_RC_HP(IO, rc);
 *
 * What a site compiles to is decided per build by two definitions (set by the
 * CMake target you link: vioscope::trace-off, -cold, -all, -cold-print, -all-print):
 *
 *     VS_TRACE_TIER   0 off: no code, no strings, no metadata
 *                     1 cold (default): plain sites compiled in, _HP sites compiled out
 *                     2 all: both compiled in
 *     VS_TRACE_PRINT  0 binary (default): events into per-thread rings, decoded offline
 *                     1 print: formatted synchronously to stderr or $VIOSCOPE_TRACE_FILE
 *
 * A compiled-in site that is disabled at run time costs one load and one
 * predictable branch.  Enabled, a binary site stores a timestamp, its static
 * site id and the raw argument bytes; the format string stays in the site's
 * metadata and is only used by the decoder.
 *
 * Flags are named bits, declared once in an X-macro list.  A program can
 * declare its own list before including this header:
 *
 *     #define VS_TRACE_FLAGS(X) X(PARSE) X(NET) X(DB)
 *     #include <vioscope/trace.h>
 *
 * Inline helpers can name their caller (decoded as "caller>callee"):
 *
 *     static inline void ring_push(struct ring *r, int v VS_CALLER_PARAM)
 *     { VS_VERBOSE_HP(QUEUE, "push %d", v); }
 *     ...  ring_push(r, 5 VS_CALLER_ARG);
 *
 * Both macros expand to nothing unless hot-path sites are compiled in.
 */
#ifndef VIOSCOPE_TRACE_H
#define VIOSCOPE_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifndef VS_TRACE_TIER
#define VS_TRACE_TIER 1
#endif
#ifndef VS_TRACE_PRINT
#define VS_TRACE_PRINT 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- levels (WPP's TRACE_LEVEL_* numbering) ------------------------------------- */
#define VS_LEVEL_CRITICAL 1
#define VS_LEVEL_ERROR    2
#define VS_LEVEL_WARNING  3
#define VS_LEVEL_INFO     4
#define VS_LEVEL_VERBOSE  5
#define VS_LEVEL_MAX      5

/* ---- flags ------------------------------------------------------------------------ */
#ifndef VS_TRACE_FLAGS
/* vioscope's own areas; a program may define its own list instead (at most 32). */
#define VS_TRACE_FLAGS(X)                                                                          \
	X(GENERAL) X(INIT) X(FEATURES) X(CONFIG) X(QUEUE) X(IO) X(TMF) X(EVENT) X(MEMORY)          \
	X(NOTIFY) X(VHOST) X(SCSI) X(BACKEND) X(ENTRY) X(BENCH) X(TEST)
#endif

#define VS__FLAG_ENUM(name) VS_FLAG_##name,
enum vs_trace_flag { VS_TRACE_FLAGS(VS__FLAG_ENUM) VS__FLAG_COUNT };
#undef VS__FLAG_ENUM
_Static_assert(VS__FLAG_COUNT <= 32, "at most 32 trace flags");

/* ---- argument types recorded in site metadata (also the capture file format) ---- */
enum vs_arg_type {
	VS_ARG_NONE = 0,
	VS_ARG_I32 = 1,  /* char, short, int (promoted as in varargs) */
	VS_ARG_U32 = 2,  /* unsigned char/short/int, _Bool, most enums */
	VS_ARG_I64 = 3,  /* long, long long */
	VS_ARG_U64 = 4,  /* unsigned long, unsigned long long */
	VS_ARG_F64 = 5,  /* float, double */
	VS_ARG_PTR = 6,  /* any other pointer: the value only */
	VS_ARG_STR = 7,  /* char *: copied, up to VS_TRACE_STR_MAX bytes */
	VS_ARG_LDBL = 8, /* long double: recorded as a double */
};

#define VS_TRACE_MAX_ARGS 16
#define VS_TRACE_STR_MAX  128 /* longer strings are cut and marked as cut */
#define VS_TRACE_STR_CUT  0x8000u
#define VS_TRACE_STR_NULL 0xffffu /* length field of a NULL char * */

/* Static description of one call site.  Lives in the "vs_trace_sites" section so
 * the runtime can enumerate every site without registration; its index in that
 * section is the site id recorded with each event. */
struct vs_site {
	const char *file;
	const char *func;
	const char *fmt;
	const char *flag_name;
	uint32_t line;
	uint8_t level;
	uint8_t flag;
	uint8_t hot; /* 1 for _HP sites */
	uint8_t nargs;
	uint8_t types[VS_TRACE_MAX_ARGS];
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct vs_site) == 64, "site metadata is one cache line");

/* The caller of an inline helper (VS_CALLER_ARG), in section "vs_trace_callers". */
struct vs_caller {
	const char *func;
	const char *file;
	uint32_t line;
	uint32_t pad;
} __attribute__((aligned(32)));
_Static_assert(sizeof(struct vs_caller) == 32, "caller entry is 32 bytes");

/* A flag name, emitted by every translation unit into "vs_trace_flagnames" so the
 * tools know all names, including those of flags with no sites. */
struct vs_flag_name {
	const char *name;
	uint32_t bit;
	uint32_t pad;
} __attribute__((aligned(16)));

/* ---- runtime state the inline fast path touches ------------------------------------ */

/* Control block (lives in the per-process shared-memory file).  enabled[level]
 * holds the flag mask enabled at that level: a site is on iff
 * enabled[site.level] has the site's flag bit.  The tool rewrites it live. */
struct vs_trace_control {
	uint32_t enabled[8];
};

/* Producer-private view of this thread's ring.  fast_end is the first stream
 * position the fast path may not reach: min(tail + size, next wrap), or 0 to force
 * the slow path (no ring yet, drops to report). */
struct vs_ring_writer {
	uint64_t head;          /* next write position (bytes, monotonic) */
	uint64_t fast_end;      /* fast path is allowed while head + len <= fast_end */
	uint8_t *data;          /* ring data */
	uint64_t mask;          /* ring size - 1 */
	volatile uint64_t *pub; /* shared head, read by recorders and dumpers */
	uint64_t count;         /* events committed: lets the flight recorder count losses */
};

/* Event record header; records are 8-byte aligned in the ring and the capture. */
struct vs_event_header {
	uint64_t ts;     /* TSC, or CLOCK_MONOTONIC ns where there is no usable TSC */
	uint32_t site;   /* low 32 bits of the site's address (64-aligned), or VS_EVENT_* */
	uint16_t size;   /* whole record in bytes, multiple of 8 */
	uint16_t caller; /* caller id + 1, or 0 */
};
#define VS_EVENT_DROPS 0xffffffffu /* payload: u64 number of events dropped here */

#define VS__HIDDEN __attribute__((visibility("hidden")))
extern struct vs_trace_control *vs__ctl VS__HIDDEN;
extern __thread struct vs_ring_writer *vs__tls_writer VS__HIDDEN
	__attribute__((tls_model("initial-exec")));
extern int vs__ts_is_tsc VS__HIDDEN;
extern const struct vs_caller __start_vs_trace_callers[] VS__HIDDEN;

/* Never NULL: when the event can't be kept (dropped, no ring) it returns scratch
 * space and switches the thread to a writer whose commit goes nowhere. */
uint8_t *vs__reserve_slow(struct vs_ring_writer *w, uint32_t len);
void vs__print(const struct vs_site *site, const struct vs_caller *caller, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* A never-called function with printf's format attribute, so -Wformat checks every
 * site in every flavour, including sites that are compiled out. */
static inline __attribute__((format(printf, 1, 2), unused)) void vs__check_format(const char *fmt, ...)
{
	(void)fmt;
}

/* Used when a function has no VS_CALLER_PARAM; a parameter of the same name shadows it. */
static const struct vs_caller *const vs__caller_id __attribute__((unused)) = NULL;

#if defined(__x86_64__) || defined(__i386__)
static inline uint64_t vs__rdtsc(void)
{
	uint32_t lo, hi;
	__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
	return ((uint64_t)hi << 32) | lo;
}
#else
static inline uint64_t vs__rdtsc(void) { return 0; }
#endif
uint64_t vs__clock_ns(void);

static inline uint64_t vs__now(void)
{
	return __builtin_expect(vs__ts_is_tsc, 1) ? vs__rdtsc() : vs__clock_ns();
}

/* ---- argument packing (binary backend) ---------------------------------------------- */
#define VS__ARG_TYPE(x)                                                                            \
	_Generic((x),                                                                              \
		_Bool: VS_ARG_U32, char: VS_ARG_I32, signed char: VS_ARG_I32,                      \
		unsigned char: VS_ARG_U32, short: VS_ARG_I32, unsigned short: VS_ARG_U32,          \
		int: VS_ARG_I32, unsigned int: VS_ARG_U32, long: VS_ARG_I64,                       \
		unsigned long: VS_ARG_U64, long long: VS_ARG_I64, unsigned long long: VS_ARG_U64,  \
		float: VS_ARG_F64, double: VS_ARG_F64, long double: VS_ARG_LDBL,                   \
		char *: VS_ARG_STR, const char *: VS_ARG_STR, default: VS_ARG_PTR)

/* Bytes an argument takes in a record, strings excluded (they add 2 + length). */
#define VS__ARG_FIXED_SIZE(x)                                                                      \
	_Generic((x),                                                                              \
		_Bool: 4, char: 4, signed char: 4, unsigned char: 4, short: 4, unsigned short: 4,  \
		int: 4, unsigned int: 4, float: 8, double: 8, long double: 8, char *: 2,           \
		const char *: 2, default: 8)

/* Length of a string argument, up to VS_TRACE_STR_MAX + 1 (one more means "cut"). */
static inline __attribute__((always_inline)) size_t vs__strlen(const char *s)
{
	/* A plain loop: strnlen with a bound larger than a literal makes gcc warn. */
	size_t n = 0;
	if (s)
		while (n <= VS_TRACE_STR_MAX && s[n])
			n++;
	return n;
}
static inline __attribute__((always_inline)) size_t vs__strclip(size_t n)
{
	return n > VS_TRACE_STR_MAX ? VS_TRACE_STR_MAX : n;
}
#define VS__AS_STR(x) _Generic((x), char *: (x), const char *: (x), default: (const char *)0)

/* One store function per recorded type, all with the same shape so that _Generic can
 * pick a function designator and the call converts the argument implicitly. */
#define VS__PUT_FN(name, ctype, nbytes)                                                            \
	static inline __attribute__((always_inline)) void vs__put_##name(uint8_t **p, ctype v,     \
									   size_t n)               \
	{                                                                                          \
		(void)n;                                                                           \
		memcpy(*p, &v, nbytes);                                                            \
		*p += nbytes;                                                                      \
	}
VS__PUT_FN(i32, int32_t, 4)
VS__PUT_FN(u32, uint32_t, 4)
VS__PUT_FN(i64, int64_t, 8)
VS__PUT_FN(u64, uint64_t, 8)
VS__PUT_FN(f64, double, 8)
#undef VS__PUT_FN
static inline __attribute__((always_inline)) void vs__put_ptr(uint8_t **p, const volatile void *v, size_t n)
{
	uint64_t u = (uint64_t)(uintptr_t)v;
	(void)n;
	memcpy(*p, &u, 8);
	*p += 8;
}
/* Strings: u16 length (VS_TRACE_STR_CUT set when cut) then the bytes, no NUL. */
static inline __attribute__((always_inline)) void vs__put_str(uint8_t **p, const char *s, size_t n)
{
	if (!s) {
		uint16_t null_len = VS_TRACE_STR_NULL;
		memcpy(*p, &null_len, 2);
		*p += 2;
		return;
	}
	uint16_t len = (uint16_t)vs__strclip(n);
	if (n > VS_TRACE_STR_MAX)
		len |= VS_TRACE_STR_CUT;
	n = vs__strclip(n);
	memcpy(*p, &len, 2);
	if (n)
		memcpy(*p + 2, s, n);
	*p += 2 + n;
}

#define VS__PUT(p, x, n)                                                                           \
	_Generic((x),                                                                              \
		_Bool: vs__put_u32, char: vs__put_i32, signed char: vs__put_i32,                   \
		unsigned char: vs__put_u32, short: vs__put_i32, unsigned short: vs__put_u32,       \
		int: vs__put_i32, unsigned int: vs__put_u32, long: vs__put_i64,                    \
		unsigned long: vs__put_u64, long long: vs__put_i64, unsigned long long: vs__put_u64, \
		float: vs__put_f64, double: vs__put_f64, long double: vs__put_f64,                 \
		char *: vs__put_str, const char *: vs__put_str, default: vs__put_ptr)(p, x, n)

/* ---- preprocessor iteration over (fmt, args...) ---------------------------------------- */
#define VS__CAT_(a, b) a##b
#define VS__CAT(a, b)  VS__CAT_(a, b)
#define VS__NARGS(...)                                                                             \
	VS__NARGS_(__VA_ARGS__, 16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, _)
#define VS__NARGS_(f, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, n, ...) n
/* VS__EACH_N(M, fmt, a1..aN) applies M(a, i) to each argument after the format. */
#define VS__EACH(M, ...) VS__CAT(VS__EACH_, VS__NARGS(__VA_ARGS__))(M, __VA_ARGS__)
#define VS__EACH_0(M, f)
#define VS__EACH_1(M, f, a)                      M(a, 0)
#define VS__EACH_2(M, f, a, b)                   M(a, 0) M(b, 1)
#define VS__EACH_3(M, f, a, b, c)                M(a, 0) M(b, 1) M(c, 2)
#define VS__EACH_4(M, f, a, b, c, d)             M(a, 0) M(b, 1) M(c, 2) M(d, 3)
#define VS__EACH_5(M, f, a, b, c, d, e)          VS__EACH_4(M, f, a, b, c, d) M(e, 4)
#define VS__EACH_6(M, f, a, b, c, d, e, g)       VS__EACH_5(M, f, a, b, c, d, e) M(g, 5)
#define VS__EACH_7(M, f, a, b, c, d, e, g, h)    VS__EACH_6(M, f, a, b, c, d, e, g) M(h, 6)
#define VS__EACH_8(M, f, a, b, c, d, e, g, h, i) VS__EACH_7(M, f, a, b, c, d, e, g, h) M(i, 7)
#define VS__EACH_9(M, f, a, b, c, d, e, g, h, i, j)                                                \
	VS__EACH_8(M, f, a, b, c, d, e, g, h, i) M(j, 8)
#define VS__EACH_10(M, f, a, b, c, d, e, g, h, i, j, k)                                            \
	VS__EACH_9(M, f, a, b, c, d, e, g, h, i, j) M(k, 9)
#define VS__EACH_11(M, f, a, b, c, d, e, g, h, i, j, k, l)                                         \
	VS__EACH_10(M, f, a, b, c, d, e, g, h, i, j, k) M(l, 10)
#define VS__EACH_12(M, f, a, b, c, d, e, g, h, i, j, k, l, m)                                      \
	VS__EACH_11(M, f, a, b, c, d, e, g, h, i, j, k, l) M(m, 11)
#define VS__EACH_13(M, f, a, b, c, d, e, g, h, i, j, k, l, m, n)                                   \
	VS__EACH_12(M, f, a, b, c, d, e, g, h, i, j, k, l, m) M(n, 12)
#define VS__EACH_14(M, f, a, b, c, d, e, g, h, i, j, k, l, m, n, o)                                \
	VS__EACH_13(M, f, a, b, c, d, e, g, h, i, j, k, l, m, n) M(o, 13)
#define VS__EACH_15(M, f, a, b, c, d, e, g, h, i, j, k, l, m, n, o, p)                             \
	VS__EACH_14(M, f, a, b, c, d, e, g, h, i, j, k, l, m, n, o) M(p, 14)
#define VS__EACH_16(M, f, a, b, c, d, e, g, h, i, j, k, l, m, n, o, p, q)                          \
	VS__EACH_15(M, f, a, b, c, d, e, g, h, i, j, k, l, m, n, o, p) M(q, 15)

/* Per-argument steps: evaluate once into a temporary, then type, size, store. */
#define VS__TMP(a, i)  __auto_type VS__CAT(vs__a, i) = (a);
#define VS__TYPE(a, i) VS__ARG_TYPE(a),
#define VS__SLEN(a, i) size_t VS__CAT(vs__n, i) = vs__strlen(VS__AS_STR(VS__CAT(vs__a, i)));
#define VS__SIZE(a, i) +VS__ARG_FIXED_SIZE(VS__CAT(vs__a, i)) + vs__strclip(VS__CAT(vs__n, i))
#define VS__STORE(a, i) VS__PUT(&vs__p, VS__CAT(vs__a, i), VS__CAT(vs__n, i));

/* ---- the site expansion ------------------------------------------------------------------ */
#define VS__SITE_DEF(lvl, flg, is_hot, ...)                                                        \
	static const struct vs_site vs__site                                                       \
		__attribute__((section("vs_trace_sites"), used)) = {                               \
			.file = __FILE__,                                                          \
			.func = __func__,                                                          \
			.fmt = VS__FIRST(__VA_ARGS__),                                             \
			.flag_name = #flg,                                                         \
			.line = __LINE__,                                                          \
			.level = (lvl),                                                            \
			.flag = VS_FLAG_##flg,                                                     \
			.hot = (is_hot),                                                           \
			.nargs = VS__NARGS(__VA_ARGS__),                                           \
			.types = { VS__EACH(VS__TYPE, __VA_ARGS__) },                              \
		}
#define VS__FIRST(...)       VS__FIRST_(__VA_ARGS__, _)
#define VS__FIRST_(f, ...)   f
#define VS__ENABLED(lvl, flg) (__builtin_expect(vs__ctl->enabled[(lvl)] & (1u << VS_FLAG_##flg), 0))

#if VS_TRACE_PRINT
#define VS__EMIT(lvl, flg, is_hot, ...)                                                            \
	do {                                                                                       \
		if (VS__ENABLED(lvl, flg)) {                                                       \
			VS__SITE_DEF(lvl, flg, is_hot, __VA_ARGS__);                               \
			vs__print(&vs__site, vs__caller_id, __VA_ARGS__);                          \
		}                                                                                  \
	} while (0)
#else
#define VS__EMIT(lvl, flg, is_hot, ...)                                                            \
	do {                                                                                       \
		if (VS__ENABLED(lvl, flg)) {                                                       \
			if (0)                                                                     \
				vs__check_format(__VA_ARGS__);                                     \
			VS__EACH(VS__TMP, __VA_ARGS__)                                             \
			VS__SITE_DEF(lvl, flg, is_hot, __VA_ARGS__);                               \
			VS__EACH(VS__SLEN, __VA_ARGS__)                                            \
			uint32_t vs__len = (uint32_t)((sizeof(struct vs_event_header)              \
				VS__EACH(VS__SIZE, __VA_ARGS__) + 7) & ~(size_t)7);                \
			uint64_t vs__ts = vs__now(); /* first: overlaps the TSC's latency */       \
			struct vs_ring_writer *vs__w = vs__tls_writer;                             \
			uint64_t vs__head = vs__w->head;                                           \
			uint8_t *vs__rec = __builtin_expect(vs__head + vs__len <= vs__w->fast_end, 1) \
				? vs__w->data + (vs__head & vs__w->mask)                           \
				: vs__reserve_slow(vs__w, vs__len);                                \
			struct vs_event_header vs__h = {                                           \
				.ts = vs__ts,                                                      \
				.site = (uint32_t)(uintptr_t)&vs__site,                            \
				.size = (uint16_t)vs__len,                                         \
				.caller = vs__caller_id                                            \
					? (uint16_t)(vs__caller_id - __start_vs_trace_callers + 1) \
					: 0,                                                       \
			};                                                                         \
			memcpy(vs__rec, &vs__h, sizeof vs__h);                                     \
			uint8_t *vs__p __attribute__((unused)) = vs__rec + sizeof vs__h;           \
			VS__EACH(VS__STORE, __VA_ARGS__)                                           \
			/* The slow path may have switched writers (first event, drop). */        \
			vs__w = vs__tls_writer;                                                    \
			vs__w->head += vs__len;                                                    \
			vs__w->count++;                                                            \
			__atomic_store_n(vs__w->pub, vs__w->head, __ATOMIC_RELEASE);               \
		}                                                                                  \
	} while (0)
#endif

/* A site compiled out: the format is still checked, nothing is emitted. */
#define VS__NONE(...)                                                                              \
	do {                                                                                       \
		if (0)                                                                             \
			vs__check_format(__VA_ARGS__);                                             \
	} while (0)

#if VS_TRACE_TIER >= 1
#define VS__COLD(lvl, flg, ...) VS__EMIT(lvl, flg, 0, __VA_ARGS__)
#else
#define VS__COLD(lvl, flg, ...) VS__NONE(__VA_ARGS__)
#endif
#if VS_TRACE_TIER >= 2
#define VS__HOT(lvl, flg, ...) VS__EMIT(lvl, flg, 1, __VA_ARGS__)
#define VS_HP_COMPILED 1
#else
#define VS__HOT(lvl, flg, ...) VS__NONE(__VA_ARGS__)
#define VS_HP_COMPILED 0
#endif

/* ---- the call-site API ------------------------------------------------------------------- */
#define VS_CRITICAL(flag, ...) VS__COLD(VS_LEVEL_CRITICAL, flag, __VA_ARGS__)
#define VS_ERROR(flag, ...)    VS__COLD(VS_LEVEL_ERROR, flag, __VA_ARGS__)
#define VS_WARNING(flag, ...)  VS__COLD(VS_LEVEL_WARNING, flag, __VA_ARGS__)
#define VS_INFO(flag, ...)     VS__COLD(VS_LEVEL_INFO, flag, __VA_ARGS__)
#define VS_VERBOSE(flag, ...)  VS__COLD(VS_LEVEL_VERBOSE, flag, __VA_ARGS__)

#define VS_CRITICAL_HP(flag, ...) VS__HOT(VS_LEVEL_CRITICAL, flag, __VA_ARGS__)
#define VS_ERROR_HP(flag, ...)    VS__HOT(VS_LEVEL_ERROR, flag, __VA_ARGS__)
#define VS_WARNING_HP(flag, ...)  VS__HOT(VS_LEVEL_WARNING, flag, __VA_ARGS__)
#define VS_INFO_HP(flag, ...)     VS__HOT(VS_LEVEL_INFO, flag, __VA_ARGS__)
#define VS_VERBOSE_HP(flag, ...)  VS__HOT(VS_LEVEL_VERBOSE, flag, __VA_ARGS__)

/* Function entry/exit, at verbose level; TAG is a request tag, RC a return code. */
#define VS_ENTER(flag)                 VS__COLD(VS_LEVEL_VERBOSE, flag, "--> enter")
#define VS_ENTER_TAG(flag, tag)        VS__COLD(VS_LEVEL_VERBOSE, flag, "--> enter tag=%#llx", (unsigned long long)(tag))
#define VS_EXIT(flag)                  VS__COLD(VS_LEVEL_VERBOSE, flag, "<-- exit")
#define VS_EXIT_RC(flag, rc)           VS__COLD(VS_LEVEL_VERBOSE, flag, "<-- exit rc=%lld", (long long)(rc))
#define VS_EXIT_TAG_RC(flag, tag, rc)  VS__COLD(VS_LEVEL_VERBOSE, flag, "<-- exit tag=%#llx rc=%lld", (unsigned long long)(tag), (long long)(rc))
#define VS_ENTER_HP(flag)              VS__HOT(VS_LEVEL_VERBOSE, flag, "--> enter")
#define VS_ENTER_TAG_HP(flag, tag)     VS__HOT(VS_LEVEL_VERBOSE, flag, "--> enter tag=%#llx", (unsigned long long)(tag))
#define VS_EXIT_HP(flag)               VS__HOT(VS_LEVEL_VERBOSE, flag, "<-- exit")
#define VS_EXIT_RC_HP(flag, rc)        VS__HOT(VS_LEVEL_VERBOSE, flag, "<-- exit rc=%lld", (long long)(rc))
#define VS_EXIT_TAG_RC_HP(flag, tag, rc) VS__HOT(VS_LEVEL_VERBOSE, flag, "<-- exit tag=%#llx rc=%lld", (unsigned long long)(tag), (long long)(rc))

/* Caller naming for inline helpers: free unless hot-path sites are compiled in. */
#if VS_TRACE_TIER >= 2
#define VS_CALLER_PARAM , const struct vs_caller *vs__caller_id
#define VS_CALLER_ARG                                                                              \
	, ({                                                                                       \
		static const struct vs_caller vs__c                                                \
			__attribute__((section("vs_trace_callers"), used)) = { __func__, __FILE__, \
									       __LINE__, 0 };      \
		&vs__c;                                                                            \
	})
#else
#define VS_CALLER_PARAM
#define VS_CALLER_ARG
#endif

/* Every translation unit that can emit events contributes the flag names. */
#if VS_TRACE_TIER >= 1
#define VS__FLAG_NAME(name)                                                                        \
	static const struct vs_flag_name VS__CAT(vs__flagname_, name)                              \
		__attribute__((section("vs_trace_flagnames"), used)) = { #name, VS_FLAG_##name, 0 };
VS_TRACE_FLAGS(VS__FLAG_NAME)
#undef VS__FLAG_NAME
#endif

/* ---- process-level API ------------------------------------------------------------------- */

/* The runtime initialises itself before main() from $VIOSCOPE_TRACE
 * ("LEVEL[:FLAG,FLAG...]", e.g. "verbose:io,queue"; default "info:all").  These
 * change it from inside the program; `vioscope trace enable` does it from outside. */
int vs_trace_set(int level, uint32_t flag_mask);
/* Parse a "LEVEL[:FLAG,...]" spec against this program's flags; 0 or -EINVAL. */
int vs_trace_set_spec(const char *spec);
/* Keep the shared-memory file (the flight record) when the process exits. */
void vs_trace_keep_on_exit(int keep);
/* Path of this process's shared-memory file, or NULL (off flavour, or none). */
const char *vs_trace_shm_path(void);
/* Flavour this runtime was built as: "off", "cold", "all", "cold-print", "all-print". */
const char *vs_trace_flavour(void);

#ifdef __cplusplus
}
#endif
#endif /* VIOSCOPE_TRACE_H */
