/* SPDX-License-Identifier: MIT */
/*
 * vioscope tracing: how a site works.  <vioscope/trace.h> is the interface and includes
 * this; nothing else should.  What is here may change between releases: the structures
 * an object hands the runtime, the record layout, the macros a site expands to.
 *
 * A site, enabled, is a static description of itself (struct vs_site, in a section the
 * runtime reads when the object loads) and a record: a timestamp, the site's id and the
 * raw argument bytes, stored into this thread's ring without a call on the fast path
 * (VS__RECORD), or laid out by a call (vs__emit_args) where the site asks for that
 * (VS__OUT_OF_LINE explains when and why).
 */
/* Laid out by hand: clang-format (14) does not know _Generic and would scatter the
 * macros below. */
/* clang-format off */
#ifndef VIOSCOPE_TRACE_IMPL_H
#define VIOSCOPE_TRACE_IMPL_H
#ifndef VIOSCOPE_TRACE_H
#error "include <vioscope/trace.h>, not <vioscope/trace_impl.h>"
#endif

#include <string.h>
#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define VS__CAT_(a, b) a##b
#define VS__CAT(a, b)  VS__CAT_(a, b)
#define VS__STR_(x)    #x
#define VS__STR(x)     VS__STR_(x)
/* The runtime's entry points: exported from libvioscope_trace.so, whatever the
 * visibility a traced object is built with. */
#define VS__API __attribute__((visibility("default")))
/* One per object (executable, shared library): every translation unit of an object
 * refers to the same one, and each object has its own. */
#define VS__OBJECT_LOCAL __attribute__((visibility("hidden")))

/* ---- argument types recorded in site metadata (also the capture file format) ---- */
enum vs_arg_type {
	VS_ARG_NONE = 0,
	VS_ARG_I32 = 1,   /* char, short, int (promoted as in varargs) */
	VS_ARG_U32 = 2,   /* unsigned char/short/int, _Bool, most enums */
	VS_ARG_I64 = 3,   /* long, long long */
	VS_ARG_U64 = 4,   /* unsigned long, unsigned long long */
	VS_ARG_F64 = 5,   /* float, double */
	VS_ARG_PTR = 6,   /* any other pointer: the value only */
	VS_ARG_STR = 7,   /* char *: copied, up to VS_TRACE_STR_MAX bytes */
	VS_ARG_LDBL = 8,  /* long double: recorded as a double */
	VS_ARG_BYTES = 9, /* VS_BYTES(ptr, len): copied, up to VS_TRACE_BYTES_MAX bytes */
};

/* ---- what an object carries: sites, callers, translation units -------------------- */

/* Control words of one provider (they live in the process's shared-memory file, so
 * the tools change them live).  A site is on iff enabled[site.level] has the site's
 * flag bit (or its second flag's, VS_VERBOSE_HP_ALSO). */
struct vs_trace_control {
	uint32_t enabled[6]; /* [level]: flags enabled at that level (index 0 unused) */
	uint32_t clock;      /* 0: timestamps are TSC ticks, 1: CLOCK_MONOTONIC ns */
	uint32_t reserved;
};

/* A provider as one object sees it: defined (weak, object-local) by every translation
 * unit of that provider, so each object has exactly one per provider.  Until the
 * object is registered, ctl points at zeros: every site is off. */
struct vs_provider {
	const struct vs_trace_control *ctl; /* first: the word sites load */
	const char *name;
	uint32_t slot; /* runtime: its control words in the file */
	uint32_t state;
};

/* Static description of one call site, in the object's "vs_trace_sites" section.  The
 * runtime gives each site a process-wide id when its object is registered; events
 * carry that id. */
struct vs_site {
	uint32_t id; /* 0 until registered */
	uint32_t line;
	const char *file;
	const char *func;
	const char *fmt;
	struct vs_provider *provider;
	uint8_t level;
	uint8_t flag;
	uint8_t hot; /* 1 for _HP sites */
	uint8_t nargs;
	uint8_t print; /* 1 for print-flavour sites */
	uint8_t also;  /* a second flag's bit + 1 (VS_VERBOSE_HP_ALSO), 0: none */
	uint8_t pad[2];
	uint8_t types[VS_TRACE_MAX_ARGS];
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct vs_site) == 64, "site metadata is one cache line");

/* The caller of a static helper (VS_CALLER_ARG), in section "vs_trace_callers". */
struct vs_caller {
	const char *func;
	const char *file;
	uint32_t line;
	uint32_t pad;
} __attribute__((aligned(32)));
_Static_assert(sizeof(struct vs_caller) == 32, "caller entry is 32 bytes");

/* One per translation unit that can emit events, in section "vs_trace_units": its
 * provider, flag names and flavour, so the runtime knows every provider and flag of
 * an object (including flags with no sites) and notices two lists that disagree. */
struct vs_unit {
	struct vs_provider *provider;
	const char *file;  /* the translation unit */
	const char *flags; /* flag names in bit order, each followed by a space */
	uint8_t tier, print;
	uint16_t pad;
	uint32_t pad2;
} __attribute__((aligned(32)));
_Static_assert(sizeof(struct vs_unit) == 32, "unit entry is 32 bytes");

/* The identity of a stage site (VS_STAGE), in section "vs_trace_stages": which stage it
 * marks and the names of its arguments, so that tools find a unit of work's stages by
 * what the sites declare, never by the wording of their formats. */
struct vs_stage {
	const struct vs_site *site; /* in the same object */
	const char *name;	    /* the stage: "submit", "pop", ... */
	const char *fields;	    /* its arguments' names in order, each followed by a space */
	uint64_t pad;
} __attribute__((aligned(32)));
_Static_assert(sizeof(struct vs_stage) == 32, "stage entry is 32 bytes");

/* One per object: its sections, registered by the first of its translation units'
 * constructors and deregistered by the last destructor (at dlclose or exit). */
struct vs_object {
	struct vs_site *sites, *sites_end;
	const struct vs_caller *callers, *callers_end;
	const struct vs_unit *units, *units_end;
	const struct vs_stage *stages, *stages_end;
	uint32_t refs; /* runtime: constructors that registered it */
	uint32_t index; /* runtime: its record */
};

/* ---- runtime state the inline fast path touches ------------------------------------ */

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
	uint32_t site;   /* the site's id, or VS_EVENT_* */
	uint16_t size;   /* whole record in bytes, multiple of 8 */
	uint16_t caller; /* index + 1 in the site's object's callers, or 0 */
};
#define VS_EVENT_DROPS 0xffffffffu /* payload: u64 number of events dropped here */

/* One per thread for the whole process (initial-exec: one instruction to reach it). */
extern __thread struct vs_ring_writer *vs__tls_writer VS__API
	__attribute__((tls_model("initial-exec")));

/* Never NULL: when the event can't be kept (dropped, no ring) it returns scratch
 * space and switches the thread to a writer whose commit goes nowhere. */
VS__API uint8_t *vs__reserve_slow(struct vs_ring_writer *w, uint32_t len);
VS__API void vs__print(const struct vs_site *site, const struct vs_caller *caller, const char *fmt,
		       ...) __attribute__((format(printf, 3, 4)));
VS__API uint64_t vs__clock_ns(void);
/* A site's record made by a call.  vs__emit_args for the sites recorded out of line
 * (VS__OUT_OF_LINE): their arguments stored one by one, site->types saying which member of
 * each.  vs__emit_ool for the inline record's slow path: the arguments after caller, promoted
 * as varargs are. */
union vs__arg {
	int64_t i; /* signed integers */
	uint64_t u; /* unsigned integers */
	double d;
	const void *p; /* strings and pointers */
	struct vs_bytes b;
};
VS__API void vs__emit_args(const struct vs_site *site, uint32_t caller, const union vs__arg *args);
VS__API void vs__emit_ool(const struct vs_site *site, const struct vs_trace_control *c,
			  uint32_t caller, ...);
VS__API void vs__object_register(struct vs_object *obj);
VS__API void vs__object_unregister(struct vs_object *obj);

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

/* The clock word sits beside the enable bits the site has just tested: no extra load
 * of a global, in an executable or a shared library alike. */
static inline __attribute__((always_inline)) uint64_t vs__now(const struct vs_trace_control *c)
{
	return __builtin_expect(c->clock == 0, 1) ? vs__rdtsc() : vs__clock_ns();
}

/* ---- argument packing (binary backend) ---------------------------------------------- */
#define VS__ARG_TYPE(x)                                                                            \
	_Generic((x),                                                                              \
		_Bool: VS_ARG_U32, char: VS_ARG_I32, signed char: VS_ARG_I32,                      \
		unsigned char: VS_ARG_U32, short: VS_ARG_I32, unsigned short: VS_ARG_U32,          \
		int: VS_ARG_I32, unsigned int: VS_ARG_U32, long: VS_ARG_I64,                       \
		unsigned long: VS_ARG_U64, long long: VS_ARG_I64, unsigned long long: VS_ARG_U64,  \
		float: VS_ARG_F64, double: VS_ARG_F64, long double: VS_ARG_LDBL,                   \
		char *: VS_ARG_STR, const char *: VS_ARG_STR, struct vs_bytes: VS_ARG_BYTES,       \
		default: VS_ARG_PTR)

/* Bytes an argument takes in a record, without the bytes of a string or byte array
 * (those add their clipped length). */
#define VS__ARG_FIXED_SIZE(x)                                                                      \
	_Generic((x),                                                                              \
		_Bool: 4, char: 4, signed char: 4, unsigned char: 4, short: 4, unsigned short: 4,  \
		int: 4, unsigned int: 4, float: 8, double: 8, long double: 8, char *: 2,           \
		const char *: 2, struct vs_bytes: 2, default: 8)

#define VS__AS_STR(x)   _Generic((x), char *: (x), const char *: (x), default: (const char *)0)
#define VS__AS_BYTES(x) _Generic((x), struct vs_bytes: (x), default: (struct vs_bytes){ 0, 0 })

/* Hides where a pointer comes from: the compiler then neither warns that a bound is
 * larger than the object it knows (a short array, a literal) nor tries to prove the
 * copy below stays inside it.  Costs no instruction. */
static inline __attribute__((always_inline)) const void *vs__opaque(const void *p)
{
	__asm__("" : "+r"(p));
	return p;
}
/* How a string or byte array is recorded: the bytes kept, the u16 length word (the
 * length, with VS_TRACE_STR_CUT when cut; VS_TRACE_STR_NULL for NULL), and whether
 * it is short: not NULL, not cut, at most VS__SHORT_MAX bytes, so two overlapping
 * moves copy it.  Each way out of the scan below sets all three as constants or
 * known ranges, so the event (VS__EMIT) branches once on "every argument short" and
 * the compiler threads that branch into the scan's short exits: there the record
 * needs no test of the pointer, of the bound or of a long copy. */
#define VS__SHORT_MAX 32
struct vs__var { /* three words: clang keeps them apart then, and folds is_short */
	size_t keep;
	size_t word;
	size_t is_short;
};
static inline __attribute__((always_inline)) size_t vs__clip(size_t n, size_t max)
{
	return n > max ? max : n;
}
static inline __attribute__((always_inline)) struct vs__var vs__var_of(size_t n, size_t max)
{
	return (struct vs__var){ vs__clip(n, max), vs__clip(n, max) | (n > max ? VS_TRACE_STR_CUT : 0),
				 n <= VS__SHORT_MAX };
}
static const struct vs__var vs__var_null __attribute__((unused)) = { 0, VS_TRACE_STR_NULL, 0 };
/* A string the scan found within its two blocks: at most 31 bytes, so never cut. */
_Static_assert(VS_TRACE_STR_MAX >= 31 && VS__SHORT_MAX >= 31, "a scanned string is short");
static inline __attribute__((always_inline)) struct vs__var vs__var_scanned(unsigned n)
{
	return (struct vs__var){ n, n, 1 };
}

/* A string argument, its length up to VS_TRACE_STR_MAX + 1 (one more means "cut").
 * The first two aligned 16-byte blocks are scanned inline, as the C library's strnlen
 * scans: an aligned load never crosses into the next page, so it cannot fault past the
 * end of the string, and the bytes it reads there are never used; the second block is
 * read only when the string goes on into it.  The loads are asm so that
 * AddressSanitizer does not take them for overflows; Valgrind accepts them (aligned
 * partial loads).  A string found there is at most 31 bytes long, which the compiler
 * sees on those two ways out: no cut to check.  Longer strings go on with strnlen. */
#if defined(__x86_64__) && defined(__SSE2__)
static inline __attribute__((always_inline)) unsigned vs__zero_bytes(const char *block)
{
	__m128i v;
	__asm__("movdqa %1, %0" : "=x"(v) : "m"(*(const __m128i *)block));
	return (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_setzero_si128()));
}
/* measure_long (a constant): a string not found in the two blocks goes on with strnlen;
 * without it, that string is "not short" and measured by whoever handles those. */
static inline __attribute__((always_inline)) struct vs__var vs__var_str_scan(const char *s,
									 int measure_long)
{
	if (__builtin_expect(!s, 0))
		return vs__var_null;
	const char *a = (const char *)((uintptr_t)s & ~(uintptr_t)15);
	const unsigned off = (unsigned)(uintptr_t)s & 15;
	unsigned m = vs__zero_bytes(a) >> off;
	if (__builtin_expect(m != 0, 1))
		return vs__var_scanned((unsigned)__builtin_ctz(m));
	m = vs__zero_bytes(a + 16);
	if (__builtin_expect(m != 0, 1))
		return vs__var_scanned(16 - off + (unsigned)__builtin_ctz(m));
	if (!measure_long)
		return (struct vs__var){ 0, 0, 0 };
	return vs__var_of(32 - off + strnlen(a + 32, VS_TRACE_STR_MAX + 1 - (32 - off)),
			  VS_TRACE_STR_MAX);
}
static inline __attribute__((always_inline)) struct vs__var vs__var_str(const char *s)
{
	return vs__var_str_scan(s, 1);
}
/* For the inline record, which calls nothing: a longer string sends the event out of
 * line (VS__RECORD), where vs__var_str measures it. */
static inline __attribute__((always_inline)) struct vs__var vs__var_str_inline(const char *s)
{
	return vs__var_str_scan(s, 0);
}
#else
static inline __attribute__((always_inline)) struct vs__var vs__var_str(const char *s)
{
	return s ? vs__var_of(strnlen(s, VS_TRACE_STR_MAX + 1), VS_TRACE_STR_MAX) : vs__var_null;
}
#define vs__var_str_inline vs__var_str
#endif
static inline __attribute__((always_inline)) struct vs__var vs__var_bytes(struct vs_bytes b)
{
	return b.ptr ? vs__var_of(b.len, VS_TRACE_BYTES_MAX) : vs__var_null;
}
/* The recorded form of any argument: none for a fixed-size one. */
#define VS__VAR(x)                                                                                 \
	_Generic((x), char *: vs__var_str_inline(VS__AS_STR(x)),                                  \
		const char *: vs__var_str_inline(VS__AS_STR(x)),                                   \
		struct vs_bytes: vs__var_bytes(VS__AS_BYTES(x)), default: (struct vs__var){ 0, 0, 1 })

/* Copies a string's or byte array's kept bytes, reading no byte outside [s, s + n):
 * a short one (up to VS__SHORT_MAX bytes) with two overlapping moves of 16, 8, 4 or
 * 1 byte(s), shorter than a call to memcpy; a longer one with memcpy. */
static inline __attribute__((always_inline)) void vs__copy(uint8_t *d, const uint8_t *s,
							   struct vs__var v)
{
	const size_t n = v.keep;
	if (!v.is_short && n > VS__SHORT_MAX) {
		memcpy(d, s, n);
	} else if (n >= 16) {
		memcpy(d, s, 16);
		memcpy(d + n - 16, s + n - 16, 16);
	} else if (n >= 8) {
		memcpy(d, s, 8);
		memcpy(d + n - 8, s + n - 8, 8);
	} else if (n >= 4) {
		memcpy(d, s, 4);
		memcpy(d + n - 4, s + n - 4, 4);
	} else if (n) {
		d[0] = s[0];
		d[n / 2] = s[n / 2];
		d[n - 1] = s[n - 1];
	}
}

/* One store function per recorded type, all with the same shape so that _Generic can
 * pick a function designator and the call converts the argument implicitly. */
#define VS__PUT_FN(name, ctype, nbytes)                                                            \
	static inline __attribute__((always_inline)) void vs__put_##name(uint8_t **p, ctype v,     \
									   struct vs__var n)       \
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
static inline __attribute__((always_inline)) void vs__put_ptr(uint8_t **p, const volatile void *v,
							      struct vs__var n)
{
	uint64_t u = (uint64_t)(uintptr_t)v;
	(void)n;
	memcpy(*p, &u, 8);
	*p += 8;
}
/* Strings and byte arrays: u16 length word (struct vs__var) then the bytes, no NUL. */
static inline __attribute__((always_inline)) void vs__put_var(uint8_t **p, const void *s,
							      struct vs__var v)
{
	uint16_t word = (uint16_t)(v.is_short ? v.keep : v.word); /* the same then */
	memcpy(*p, &word, 2);
	vs__copy(*p + 2, (const uint8_t *)s, v);
	*p += 2 + v.keep;
}
static inline __attribute__((always_inline)) void vs__put_str(uint8_t **p, const char *s,
							      struct vs__var v)
{
	vs__put_var(p, s, v);
}
static inline __attribute__((always_inline)) void vs__put_bytes(uint8_t **p, struct vs_bytes b,
								struct vs__var v)
{
	vs__put_var(p, vs__opaque(b.ptr), v);
}

#define VS__PUT(p, x, n)                                                                           \
	_Generic((x),                                                                              \
		_Bool: vs__put_u32, char: vs__put_i32, signed char: vs__put_i32,                   \
		unsigned char: vs__put_u32, short: vs__put_i32, unsigned short: vs__put_u32,       \
		int: vs__put_i32, unsigned int: vs__put_u32, long: vs__put_i64,                    \
		unsigned long: vs__put_u64, long long: vs__put_i64, unsigned long long: vs__put_u64, \
		float: vs__put_f64, double: vs__put_f64, long double: vs__put_f64,                 \
		char *: vs__put_str, const char *: vs__put_str, struct vs_bytes: vs__put_bytes,    \
		default: vs__put_ptr)(p, x, n)

/* How printf's format check and the print backend see an argument: a byte array is a
 * string (its hex text). */
#define VS__CHECK_ARG(x) _Generic((x), struct vs_bytes: (const char *)0, default: (x))
/* Hex text of a byte array for the print backend, into a buffer on the caller's stack
 * (of size 1 for any other argument, where it is never used). */
#define VS__HEXBUF_SIZE(x) _Generic((x), struct vs_bytes: 2 * VS_TRACE_BYTES_MAX + 8, default: 1)
VS__API const char *vs__hex(char *out, struct vs_bytes b);

/* ---- preprocessor iteration over (fmt, args...) ---------------------------------------- */
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

/* Per-argument steps: evaluate once into a temporary, then type, size, store.  A
 * string's pointer is made opaque once, for its length and its copy (vs__opaque). */
#define VS__LAUNDER(x)                                                                             \
	_Generic((x), char *: (char *)vs__opaque(VS__AS_STR(x)),                                   \
		const char *: (const char *)vs__opaque(VS__AS_STR(x)), default: (x))
#define VS__TMP(a, i)  __auto_type VS__CAT(vs__a, i) = VS__LAUNDER(a);
/* The inline record evaluates a string or byte array first (its length sizes the
 * record) and every fixed-size argument where it stores it: few values live at once, so
 * the record needs no saved registers (see VS__RECORD).  _Generic evaluates only the
 * association it selects. */
#define VS__TMP_VAR(a, i)                                                                          \
	__auto_type VS__CAT(vs__a, i) = _Generic((a), char *: VS__LAUNDER(a),                      \
		const char *: VS__LAUNDER(a), struct vs_bytes: (a), default: 0);
#define VS__LATE(a, i)                                                                             \
	_Generic((a), char *: VS__CAT(vs__a, i), const char *: VS__CAT(vs__a, i),                  \
		struct vs_bytes: VS__CAT(vs__a, i), default: (a))
#define VS__TYPE(a, i) VS__ARG_TYPE(a),
#define VS__VLEN(a, i) struct vs__var VS__CAT(vs__n, i) = VS__VAR(VS__CAT(vs__a, i));
#define VS__SIZE(a, i) +VS__ARG_FIXED_SIZE(a) + VS__CAT(vs__n, i).keep
#define VS__SHORT(a, i) &&VS__CAT(vs__n, i).is_short
#define VS__STORE(a, i) VS__PUT(&vs__p, VS__LATE(a, i), VS__CAT(vs__n, i));
#define VS__CHECK(a, i) , VS__CHECK_ARG(a)
#define VS__HEXBUF(a, i) char VS__CAT(vs__hb, i)[VS__HEXBUF_SIZE(VS__CAT(vs__a, i))];
#define VS__PRINT_ARG(a, i)                                                                        \
	, _Generic((VS__CAT(vs__a, i)),                                                            \
		struct vs_bytes: vs__hex(VS__CAT(vs__hb, i), VS__AS_BYTES(VS__CAT(vs__a, i))),     \
		default: (VS__CAT(vs__a, i)))
/* printf's check of the format against the arguments (never called). */
#define VS__CHECK_FORMAT(...) vs__check_format(VS__FIRST(__VA_ARGS__) VS__EACH(VS__CHECK, __VA_ARGS__))

/* ---- the provider of this translation unit ----------------------------------------------- */
#define VS__PROVIDER      VS__CAT(vs__provider_, VS_TRACE_PROVIDER)
#define VS__PROVIDER_NAME VS__STR(VS_TRACE_PROVIDER)

/* ---- the site expansion ------------------------------------------------------------------ */
#define VS__SITE_DEF(lvl, flg, also_, is_hot, ...)                                                 \
	static struct vs_site vs__site __attribute__((section("vs_trace_sites"), used)) = {        \
		.id = 0,                                                                           \
		.line = __LINE__,                                                                  \
		.file = __FILE__,                                                                  \
		.func = __func__,                                                                  \
		.fmt = VS__FIRST(__VA_ARGS__),                                                     \
		.provider = &VS__PROVIDER,                                                         \
		.level = (lvl),                                                                    \
		.flag = (flg),                                                                     \
		.hot = (is_hot),                                                                   \
		.nargs = VS__NARGS(__VA_ARGS__),                                                   \
		.print = VS_TRACE_PRINT,                                                           \
		.also = (also_),                                                                   \
		.types = { VS__EACH(VS__TYPE, __VA_ARGS__) },                                      \
	}
#define VS__FIRST(...)     VS__FIRST_(__VA_ARGS__, _)
#define VS__FIRST_(f, ...) f
/* flg: a flag's bit; also: a second flag's bit + 1, or 0 (one constant mask either way). */
#define VS__FLAGS_MASK(flg, also) ((1u << (flg)) | ((also) ? 1u << ((also) - 1) : 0u))
#define VS__ENABLED(c, lvl, flg, also)                                                             \
	(__builtin_expect((c)->enabled[(lvl)] & VS__FLAGS_MASK(flg, also), 0))

/* The caller's index + 1 in this object's callers, or 0 (struct vs_event_header). */
#define VS__CALLER_INDEX                                                                           \
	((uint32_t)(vs__caller_id ? (uint16_t)(vs__caller_id - vs__callers_start + 1) : 0))

/* Where a site's record is made: inline (VS__RECORD) or by a call (vs__emit_args).
 *
 * An inline record is a TSC read, the ring writer's head and bound, the record's address
 * and the argument values: a dozen live values in the site's enabled branch.  The
 * compiler allocates registers for the whole function, so when those values and the
 * function's own exceed the registers it may clobber freely, it saves callee-saved
 * registers in the prologue, and every call of the function pays for them, the site on
 * or off.  A call needs the argument values only, as it passes them.
 *
 * So the record is made by a call for errors and warnings (rare, often in the error
 * branch of a hot function) and for the sites that ask for it (the _OOL forms), and
 * inline for the others, where an event costs less than the call.  The call's arguments
 * are the site's own expressions, in no set order, so the compiler evaluates a call
 * among them (strerror) before it loads the others and keeps none of them across it; the
 * site's address is taken where the call is (VS__SITE_ADDRESS), so a loop does not hoist
 * it into a saved register.  This is the whole mechanism, in one place: no helper
 * function per event, and the event names the function it describes.  In a large
 * function that already saves every register, an inline record costs less than the
 * call: measure a site before moving it (bench/callgrind-per-io.sh, the function's
 * prologue in objdump; docs/TRACING.md section 8). */
#define VS__OUT_OF_LINE(lvl, ool) ((lvl) <= VS_LEVEL_WARNING || (ool))
/* Errors and warnings pass their arguments as varargs (vs__emit_ool), the _OOL sites in an
 * array (vs__emit_args): measured, the array form in the error branches of poll_reap cost
 * it 14 instructions per request with the sites off (callgrind, all flavour). */
/* Each argument stored as it is evaluated: few values live at once, none across a call
 * that evaluates a later one. */
static inline __attribute__((always_inline)) void vs__arg_i(union vs__arg *s, int64_t v)
{
	s->i = v;
}
static inline __attribute__((always_inline)) void vs__arg_u(union vs__arg *s, uint64_t v)
{
	s->u = v;
}
static inline __attribute__((always_inline)) void vs__arg_d(union vs__arg *s, double v)
{
	s->d = v;
}
static inline __attribute__((always_inline)) void vs__arg_p(union vs__arg *s, const volatile void *v)
{
	s->p = (const void *)v;
}
static inline __attribute__((always_inline)) void vs__arg_b(union vs__arg *s, struct vs_bytes v)
{
	s->b = v;
}
#define VS__ARG_STORE(a, i)                                                                        \
	_Generic((a),                                                                              \
		_Bool: vs__arg_u, char: vs__arg_i, signed char: vs__arg_i, unsigned char: vs__arg_u, \
		short: vs__arg_i, unsigned short: vs__arg_u, int: vs__arg_i, unsigned int: vs__arg_u, \
		long: vs__arg_i, unsigned long: vs__arg_u, long long: vs__arg_i,                   \
		unsigned long long: vs__arg_u, float: vs__arg_d, double: vs__arg_d,                \
		long double: vs__arg_d, struct vs_bytes: vs__arg_b, default: vs__arg_p)(&vs__av[i], (a));
/* &site, computed where it is used: a constant address in a loop is otherwise hoisted
 * out of it, into a callee-saved register for the whole function. */
#if defined(__x86_64__)
#define VS__SITE_ADDRESS(site)                                                                     \
	({                                                                                         \
		const struct vs_site *vs__sp;                                                      \
		__asm__ volatile("lea %1, %0" : "=r"(vs__sp) : "m"(site));                         \
		vs__sp;                                                                            \
	})
#else
#define VS__SITE_ADDRESS(site) (&(site))
#endif

/* The inline record (after VS__VLEN, inside VS__EMIT): inline when every string and byte
 * array is short, the ring has room before its wrap and the clock is the TSC; otherwise
 * (a long or NULL string, a full ring, the first event of a thread, drops to report,
 * CLOCK_MONOTONIC) by vs__emit_ool, which lays the record out the same way.  It calls
 * nothing and stores each fixed-size argument as it evaluates it (VS__LATE), so few
 * values of the site are live at once. */
#define VS__OOL_ARG(a, i)  , VS__CAT(vs__a, i)
#define VS__OOL_LATE(a, i) , VS__LATE(a, i)
#define VS__RECORD(...)                                                                            \
	do {                                                                                       \
		uint64_t vs__ts = vs__rdtsc(); /* first: overlaps the TSC's latency */             \
		size_t vs__len = ((sizeof(struct vs_event_header)                                  \
			VS__EACH(VS__SIZE, __VA_ARGS__) + 7) & ~(size_t)7);                        \
		struct vs_ring_writer *vs__w = vs__tls_writer;                                     \
		uint64_t vs__head = vs__w->head;                                                   \
		if (__builtin_expect((1 VS__EACH(VS__SHORT, __VA_ARGS__)) &&                       \
					     vs__head + vs__len <= vs__w->fast_end &&              \
					     vs__cw->clock == 0,                                   \
				     1)) {                                                         \
			uint8_t *vs__rec = vs__w->data + (vs__head & vs__w->mask);                 \
			/* The header (struct vs_event_header) field by field: the size and        \
			 * caller form one word, a constant for most sites. */                     \
			uint32_t vs__site_id = vs__site.id;                                        \
			uint32_t vs__size_caller = (uint32_t)vs__len | VS__CALLER_INDEX << 16;    \
			memcpy(vs__rec, &vs__ts, 8);                                               \
			memcpy(vs__rec + 8, &vs__site_id, 4);                                      \
			memcpy(vs__rec + 12, &vs__size_caller, 4);                                 \
			uint8_t *vs__p __attribute__((unused)) =                                   \
				vs__rec + sizeof(struct vs_event_header);                          \
			/* Taken before the arguments are evaluated: an argument that records \
			 * an event of its own (a function that traces) records after this one. */ \
			vs__w->head = vs__head + vs__len;                                          \
			vs__w->count++;                                                            \
			VS__EACH(VS__STORE, __VA_ARGS__)                                           \
			/* What this thread has written, this record included. */                 \
			__atomic_store_n(vs__w->pub, vs__w->head, __ATOMIC_RELEASE);               \
		} else {                                                                           \
			vs__emit_ool(&vs__site, vs__cw, VS__CALLER_INDEX                            \
				     VS__EACH(VS__OOL_LATE, __VA_ARGS__));                          \
		}                                                                                  \
	} while (0)

/* A site: lvl, flg (a flag's bit), also (a second flag's bit + 1, or 0), is_hot, ool (1:
 * record by a call, VS__OUT_OF_LINE), decl (more static metadata of the site, after
 * vs__site: VS__STAGE_DEF, or nothing), then the format and the arguments. */
#if VS_TRACE_PRINT
#define VS__EMIT(lvl, flg, also, is_hot, ool, decl, ...)                                           \
	do {                                                                                       \
		const struct vs_trace_control *vs__cw = VS__PROVIDER.ctl;                           \
		if (VS__ENABLED(vs__cw, lvl, flg, also)) {                                          \
			if (0)                                                                     \
				VS__CHECK_FORMAT(__VA_ARGS__);                                     \
			VS__EACH(VS__TMP, __VA_ARGS__)                                             \
			VS__EACH(VS__HEXBUF, __VA_ARGS__)                                          \
			VS__SITE_DEF(lvl, flg, also, is_hot, __VA_ARGS__);                         \
			decl                                                                       \
			vs__print(&vs__site, vs__caller_id,                                        \
				  VS__FIRST(__VA_ARGS__) VS__EACH(VS__PRINT_ARG, __VA_ARGS__));    \
		}                                                                                  \
	} while (0)
#else
#define VS__EMIT(lvl, flg, also, is_hot, ool, decl, ...)                                           \
	do {                                                                                       \
		const struct vs_trace_control *vs__cw = VS__PROVIDER.ctl;                           \
		if (VS__ENABLED(vs__cw, lvl, flg, also)) {                                          \
			if (0)                                                                     \
				VS__CHECK_FORMAT(__VA_ARGS__);                                     \
			VS__SITE_DEF(lvl, flg, also, is_hot, __VA_ARGS__);                         \
			decl                                                                       \
			if (VS__OUT_OF_LINE(lvl, 0)) {                                             \
				VS__EACH(VS__TMP, __VA_ARGS__)                                     \
				vs__emit_ool(&vs__site, vs__cw, VS__CALLER_INDEX                    \
					     VS__EACH(VS__OOL_ARG, __VA_ARGS__));                   \
			} else if (ool) {                                                          \
				union vs__arg vs__av[VS__NARGS(__VA_ARGS__) + 1];                  \
				VS__EACH(VS__ARG_STORE, __VA_ARGS__)                               \
				vs__emit_args(VS__SITE_ADDRESS(vs__site), VS__CALLER_INDEX,         \
					      VS__NARGS(__VA_ARGS__) ? vs__av : NULL);              \
			} else {                                                                   \
				VS__EACH(VS__TMP_VAR, __VA_ARGS__)                                 \
				VS__EACH(VS__VLEN, __VA_ARGS__)                                    \
				VS__RECORD(__VA_ARGS__);                                           \
			}                                                                          \
		}                                                                                  \
	} while (0)
#endif

/* A site compiled out: the format is still checked, nothing is emitted. */
#define VS__NONE(...)                                                                              \
	do {                                                                                       \
		if (0)                                                                             \
			VS__CHECK_FORMAT(__VA_ARGS__);                                             \
	} while (0)

/* A stage site (VS_STAGE): its arguments come as (name, value) pairs; the names go into
 * the stage's metadata, the values to the site. */
#define VS__FIELD_NAME_(name, ...)  #name " "
#define VS__FIELD_VALUE_(name, ...) __VA_ARGS__
#define VS__FIELD_NAME(pair, i)     VS__FIELD_NAME_ pair
#define VS__FIELD_VALUE(pair, i)    , VS__FIELD_VALUE_ pair
#define VS__STAGE(ool, flag, stage, ...)                                                           \
	VS__STAGE_(ool, flag, #stage, "" VS__EACH(VS__FIELD_NAME, __VA_ARGS__),                    \
		   VS__FIRST(__VA_ARGS__) VS__EACH(VS__FIELD_VALUE, __VA_ARGS__))
#define VS__STAGE_(ool, flag, stage, fields, ...) VS__HOT_STAGE(ool, flag, stage, fields, __VA_ARGS__)
#define VS__STAGE_DEF(stage, fields)                                                               \
	static const struct vs_stage vs__stage __attribute__((section("vs_trace_stages"), used)) = \
		{ &vs__site, stage, fields, 0 };

#if VS_TRACE_TIER >= 1
#define VS__COLD(lvl, flg, ...) VS__EMIT(lvl, VS_FLAG_##flg, 0, 0, 0, , __VA_ARGS__)
#else
#define VS__COLD(lvl, flg, ...) VS__NONE(__VA_ARGS__)
#endif
#if VS_TRACE_TIER >= 2
#define VS__HOT(lvl, flg, also, ool, ...) VS__EMIT(lvl, VS_FLAG_##flg, also, 1, ool, , __VA_ARGS__)
#define VS__HOT_STAGE(ool, flg, stage, fields, ...)                                                \
	VS__EMIT(VS_LEVEL_VERBOSE, VS_FLAG_##flg, VS_FLAG_STAGE + 1, 1, ool,                       \
		 VS__STAGE_DEF(stage, fields), __VA_ARGS__)
#define VS__HP_ENABLED(lvl, flg, also) VS__ENABLED(VS__PROVIDER.ctl, lvl, flg, also)
#define VS_HP_COMPILED 1
#else
#define VS__HOT(lvl, flg, also, ool, ...) VS__NONE(__VA_ARGS__)
/* Its flags are still named: a provider without a STAGE flag fails to build in every
 * flavour, not in the all flavours only. */
#define VS__HOT_STAGE(ool, flg, stage, fields, ...)                                                \
	do {                                                                                       \
		(void)VS_FLAG_##flg;                                                               \
		(void)VS_FLAG_STAGE;                                                               \
		VS__NONE(__VA_ARGS__);                                                             \
	} while (0)
#define VS__HP_ENABLED(lvl, flg, also) 0
#define VS_HP_COMPILED 0
#endif

/* Caller naming for static helpers (VS_CALLER_PARAM): free unless hot-path sites are
 * compiled in. */
#if VS_TRACE_TIER >= 2
#define VS__CALLER_PARAM , const struct vs_caller *vs__caller_id
#define VS__CALLER_ARG                                                                             \
	, ({                                                                                       \
		static const struct vs_caller vs__caller_entry                                     \
			__attribute__((section("vs_trace_callers"), used)) = { __func__, __FILE__, \
									       __LINE__, 0 };      \
		&vs__caller_entry;                                                                 \
	})
#else
#define VS__CALLER_PARAM
#define VS__CALLER_ARG
#endif

/* ---- this object's registration ------------------------------------------------------------ */
#if VS_TRACE_TIER >= 1
/* The linker's bounds of this object's sections (object-local: an executable and each
 * shared library see their own; absent sections are NULL). */
extern struct vs_site __start_vs_trace_sites[] __attribute__((weak)) VS__OBJECT_LOCAL;
extern struct vs_site __stop_vs_trace_sites[] __attribute__((weak)) VS__OBJECT_LOCAL;
extern const struct vs_caller __start_vs_trace_callers[] __attribute__((weak)) VS__OBJECT_LOCAL;
extern const struct vs_caller __stop_vs_trace_callers[] __attribute__((weak)) VS__OBJECT_LOCAL;
extern const struct vs_unit __start_vs_trace_units[] __attribute__((weak)) VS__OBJECT_LOCAL;
extern const struct vs_unit __stop_vs_trace_units[] __attribute__((weak)) VS__OBJECT_LOCAL;
extern const struct vs_stage __start_vs_trace_stages[] __attribute__((weak)) VS__OBJECT_LOCAL;
extern const struct vs_stage __stop_vs_trace_stages[] __attribute__((weak)) VS__OBJECT_LOCAL;
#define vs__callers_start __start_vs_trace_callers

/* Sites of a provider that is not registered (yet) test these zeros. */
static const struct vs_trace_control vs__off_ctl __attribute__((unused)) = { { 0 }, 0, 0 };
__attribute__((weak)) VS__OBJECT_LOCAL struct vs_provider VS__PROVIDER = {
	&vs__off_ctl, VS__PROVIDER_NAME, 0, 0
};
__attribute__((weak)) VS__OBJECT_LOCAL struct vs_object vs__object = {
	__start_vs_trace_sites, __stop_vs_trace_sites, __start_vs_trace_callers,
	__stop_vs_trace_callers, __start_vs_trace_units, __stop_vs_trace_units,
	__start_vs_trace_stages, __stop_vs_trace_stages, 0, 0
};
#define VS__FLAG_WORD(name) #name " "
static const struct vs_unit vs__unit __attribute__((section("vs_trace_units"), used)) = {
	&VS__PROVIDER, __BASE_FILE__, VS_TRACE_FLAGS(VS__FLAG_WORD), VS_TRACE_TIER, VS_TRACE_PRINT,
	0, 0
};
#undef VS__FLAG_WORD
/* Before other constructors, so that their events are not lost; after other
 * destructors, so that theirs are not either. */
__attribute__((constructor(101), used)) static void vs__unit_register(void)
{
	vs__object_register(&vs__object);
}
__attribute__((destructor(101), used)) static void vs__unit_unregister(void)
{
	vs__object_unregister(&vs__object);
}
#endif

#ifdef __cplusplus
}
#endif
#endif /* VIOSCOPE_TRACE_IMPL_H */
/* clang-format on */
