/* SPDX-License-Identifier: MIT */
/*
 * Round trip of argument types and formats through the binary backend (all
 * flavour): every event is emitted with VS_INFO and, at the same place, formatted
 * with snprintf; the process then dumps its own rings into a capture, and each
 * decoded message must equal the snprintf text, in order.
 *
 * Runs under trace_isolate (a fresh VIOSCOPE_TRACE_DIR before the runtime starts).
 *
 */
#define _GNU_SOURCE
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>
#include <cmocka.h>

#include <vioscope/trace.h>

#include "tracetools/tracetools.h"

/* ---- expected messages --------------------------------------------------------------- */
#define MAX_EXPECT 512
static char expected[MAX_EXPECT][1024];
static unsigned n_expected;

static void expect_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void expect_fmt(const char *fmt, ...)
{
	va_list ap;
	assert_true(n_expected < MAX_EXPECT);
	va_start(ap, fmt);
	vsnprintf(expected[n_expected++], sizeof expected[0], fmt, ap);
	va_end(ap);
}

static void expect_raw(const char *text)
{
	assert_true(n_expected < MAX_EXPECT);
	snprintf(expected[n_expected++], sizeof expected[0], "%s", text);
}

/* The form the emit_*() events take: an inline record (VS_INFO), or the out-of-line one
 * of every error or warning site (VS_ERROR: vs__emit_ool).  Both must decode the same. */
static bool emit_out_of_line;
#define EMIT(...)                                                                                  \
	do {                                                                                       \
		if (emit_out_of_line)                                                              \
			VS_ERROR(TEST, __VA_ARGS__);                                               \
		else                                                                               \
			VS_INFO(TEST, __VA_ARGS__);                                                \
	} while (0)

/* Emit one event and record what printf makes of the same format and arguments.
 * Arguments are evaluated twice: use side-effect-free expressions. */
#define CHECK(...)                                                                                 \
	do {                                                                                       \
		EMIT(__VA_ARGS__);                                                                 \
		expect_fmt(__VA_ARGS__);                                                           \
	} while (0)

/* Opaque to the optimiser, so printf sees NULL at run time without a warning. */
static const char *volatile null_str;

enum signed_enum { SE_NEG = -3, SE_POS = 4 };
enum plain_enum { PE_RED = 1, PE_BIG = 0x7fffffff };

/* ---- dump and walk this process ------------------------------------------------------- */
struct collected {
	char (*msg)[1024];
	unsigned n, cap;
	const char *func; /* only events of this function */
	int bad_fmt;	  /* vs_format_message failures */
	/* first matching event, for the prefix check */
	bool have_first;
	struct vs_meta_site first_site;
	char first_file[256], first_func[64], first_flag[32], first_caller[64], first_provider[32];
	uint32_t first_tid;
	uint64_t first_ns;
};

/* Only events of this level (0: every level): the out-of-line test emits from the same
 * functions as the tests before it, whose events are still in the ring. */
static unsigned collect_level;

static int collect(const struct vs_cap_event *ev, void *opaque)
{
	struct collected *c = opaque;
	if (!ev->site || strcmp(ev->site->func, c->func) != 0)
		return 0;
	if (collect_level && ev->site->level != collect_level)
		return 0;
	if (!c->have_first) {
		c->have_first = true;
		c->first_site = *ev->site;
		snprintf(c->first_file, sizeof c->first_file, "%s", ev->site->file);
		snprintf(c->first_func, sizeof c->first_func, "%s", ev->site->func);
		snprintf(c->first_flag, sizeof c->first_flag, "%s", ev->site->flag_name);
		snprintf(c->first_provider, sizeof c->first_provider, "%s", ev->site->provider);
		snprintf(c->first_caller, sizeof c->first_caller, "%s",
			 ev->caller ? ev->caller->func : "");
		c->first_tid = ev->tid;
		c->first_ns = ev->real_ns;
	}
	if (c->n < c->cap) {
		if (vs_format_message(c->msg[c->n], sizeof c->msg[0], ev->site, ev->args,
				      ev->args_len) < 0)
			c->bad_fmt++;
	}
	c->n++;
	return 0;
}

static void capture_path(char *out, size_t len)
{
	snprintf(out, len, "%s/self-%d.vstrace", vs_shm_dir(), (int)getpid());
}

/* Dump this process and collect the messages of FUNC's sites, in order. */
static void dump_and_collect(struct collected *c, const char *func)
{
	char cap[600], why[512], pid[32];
	struct vs_dump_stats st;
	struct vs_capture *cp;

	memset(c, 0, sizeof *c);
	c->func = func;
	c->cap = MAX_EXPECT;
	c->msg = calloc(c->cap, sizeof *c->msg);
	assert_non_null(c->msg);
	capture_path(cap, sizeof cap);
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	if (vs_trace_dump(pid, cap, &st, why, sizeof why) < 0)
		fail_msg("dump: %s", why);
	assert_true(st.alive);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(st.overwritten, 0);
	if (vs_capture_open(&cp, cap, why, sizeof why) < 0)
		fail_msg("open: %s", why);
	assert_int_equal(vs_capture_walk(cp, collect, c, why, sizeof why), 0);
	vs_capture_close(cp);
	unlink(cap);
}

static void compare_all(struct collected *c)
{
	unsigned bad = 0;
	for (unsigned i = 0; i < n_expected && i < c->n; i++) {
		if (strcmp(c->msg[i], expected[i]) != 0) {
			print_error("event %u:\n  decoded:  \"%s\"\n  expected: \"%s\"\n", i,
				    c->msg[i], expected[i]);
			bad++;
		}
	}
	assert_int_equal(c->bad_fmt, 0);
	assert_int_equal(c->n, n_expected);
	assert_int_equal(bad, 0);
}

/* Emit from EMIT (all of whose sites are in the function FUNC), then check that its
 * events decode exactly as printf printed them, no more and no fewer. */
static void round_trip(void (*emit)(void), const char *func)
{
	struct collected c;

	n_expected = 0;
	emit();
	dump_and_collect(&c, func);
	compare_all(&c);
	free(c.msg);
}
#define ROUND_TRIP(emit) round_trip(emit, #emit)

/* ---- the events ----------------------------------------------------------------------- */
static void emit_integers(void)
{
	CHECK("%d %u %lld %llu %zu", -42, 42u, -42ll, 42ull, (size_t)42);
	CHECK("%x %#x %X %#X %o %#o %i", 0xbeefu, 0xbeefu, 0xbeefu, 0xbeefu, 8u, 8u, -9);
	CHECK("zero %d %#x %u", 0, 0u, 0u);
	CHECK("%d %d %d", INT_MIN, INT_MAX, -1);
	CHECK("%u %x", UINT_MAX, UINT_MAX);
	CHECK("%lld %lld %llu %llx", LLONG_MIN, LLONG_MAX, ULLONG_MAX, ULLONG_MAX);
	CHECK("%ld %ld %lu %lx", LONG_MIN, LONG_MAX, ULONG_MAX, ULONG_MAX);
	CHECK("hh %hhd %hhu %hhx", (signed char)-128, (unsigned char)255, (unsigned char)0xab);
	CHECK("h %hd %hu %hx", (short)-300, (unsigned short)65535, (unsigned short)0xbeef);
	/* printf narrows an int to the modifier's type: so must the decoder (clang's
	 * -Wformat flags such arguments, which is the point here) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat"
	CHECK("hh %hhd %hhd %hhu %hhx %hhi", -128, 200, 300, 0x1ff, -1);
	CHECK("h %hd %hd %hu %hx", -300, 40000, 70000, -1);
#pragma GCC diagnostic pop
	CHECK("l %ld %lu %li", -5l, 5ul, -6l);
	CHECK("ll %lld %llu %llx", -7ll, 7ull, 0xfedcba9876543210ull);
	CHECK("z %zu %zd %zx", SIZE_MAX, (ssize_t)-1, (size_t)0xabc);
	CHECK("j %jd %ju %jx", INTMAX_MIN, UINTMAX_MAX, (uintmax_t)0x123);
	CHECK("t %td", (ptrdiff_t)-77);
	/* fixed-width types through their <inttypes.h> conversions */
	CHECK("i8 %" PRId8 " %" PRId8 " u8 %" PRIu8, (int8_t)INT8_MIN, (int8_t)INT8_MAX,
	      (uint8_t)UINT8_MAX);
	CHECK("i16 %" PRId16 " %" PRId16 " u16 %" PRIu16, (int16_t)INT16_MIN, (int16_t)INT16_MAX,
	      (uint16_t)UINT16_MAX);
	CHECK("i32 %" PRId32 " %" PRId32 " u32 %" PRIu32 " %" PRIx32, INT32_MIN, INT32_MAX,
	      UINT32_MAX, (uint32_t)0xdeadbeef);
	CHECK("i64 %" PRId64 " %" PRId64 " u64 %" PRIu64 " %" PRIx64, INT64_MIN, INT64_MAX,
	      UINT64_MAX, (uint64_t)0x0123456789abcdef);
	CHECK("hh-typed %hhd %hhu", (int8_t)-1, (uint8_t)255);
	/* signedness decided by the conversion, not the argument's type */
	CHECK("%u %d %x", -1, 0xffffffffu, -2);
	CHECK("%llu %lld", -1ll, ULLONG_MAX);
	/* flags */
	CHECK("%+d %+d % d % d %'d", 5, -5, 5, -5, 1234567);
}

static void emit_widths(void)
{
	CHECK("[%5d] [%-5d] [%05d] [%5u] [%-8x] [%08llx]", 42, 42, 42, 7u, 0xabu, 0xabcull);
	CHECK("[%05.2f] [%8.3f] [%-10.1f] [%.0f] [%+.3e]", 3.14159, -2.5, 1.25, 2.5, 12345.678);
	CHECK("[%.3s] [%10s] [%-10s] [%.0s] [%10.2s]", "abcdef", "right", "left", "gone", "xyz");
	CHECK("[%*d] [%-*d] [%*s]", 6, 42, 6, 42, 4, "ab");
	CHECK("[%.*s] [%.*s] [%.*s]", 2, "abcdef", 0, "abcdef", -1, "abcdef");
	CHECK("[%*.*f] [%.*d]", 10, 3, 3.14159, 5, 42);
	CHECK("[%5c] [%-3c] [%c%c]", 'a', 'b', 'c', 'd');
	CHECK("[%10p] [%-20p]", (void *)0x1234, (void *)0x5678);
}

static void emit_floats(void)
{
	CHECK("%f %f %f %f", 0.0, -0.0, 1.5, -1.5);
	CHECK("%e %E %g %G", 1e300, -1e-300, 1e-5, 123456789.0);
	CHECK("%g %g %g %e", DBL_MAX, DBL_MIN, DBL_TRUE_MIN, DBL_TRUE_MIN);
	CHECK("%f", 1e300);
	CHECK("%f %f %f", (double)INFINITY, -(double)INFINITY, (double)NAN);
	CHECK("%a %A", 1.0, -0.1);
	CHECK("float %f %g", 1.1f, -3.25f);
	CHECK("long double %Lf %Lg", 1.5L, -0.25L);
	CHECK("%.10f %.17g", 1.0 / 3.0, 0.1);
}

static void emit_strings_and_more(void)
{
	char arr[] = "array";
	const char *const cs = "const";
	char s128[VS_TRACE_STR_MAX + 1], s129[VS_TRACE_STR_MAX + 2], s300[301];
	char cut[VS_TRACE_STR_MAX + 16];
	int x = 0;

	CHECK("%s|%s|%s", "plain", arr, cs);
	CHECK("empty [%s] [%5s]", "", "");
	CHECK("specials %s %s", "100% done", "tab\there");
	CHECK("%s", "a string with spaces, punctuation: ;:'\"!?");
	/* exactly VS_TRACE_STR_MAX bytes: kept whole, not marked */
	memset(s128, 'm', sizeof s128 - 1);
	s128[sizeof s128 - 1] = '\0';
	CHECK("s128 %s", s128);
	/* one byte more: cut at VS_TRACE_STR_MAX and marked "[...]" */
	memset(s129, 'n', sizeof s129 - 1);
	s129[sizeof s129 - 1] = '\0';
	EMIT("s129 %s", s129);
	snprintf(cut, sizeof cut, "%.*s[...]", VS_TRACE_STR_MAX, s129);
	expect_fmt("s129 %s", cut);
	memset(s300, 'o', sizeof s300 - 1);
	s300[sizeof s300 - 1] = '\0';
	EMIT("s300 %s end", s300);
	snprintf(cut, sizeof cut, "%.*s[...]", VS_TRACE_STR_MAX, s300);
	expect_fmt("s300 %s end", cut);
	/* a precision shorter than the cut sees only the kept bytes */
	CHECK("prefix %.5s", s300);
	CHECK("%c %c %d %c", 'A', (char)'z', (char)'z', 65);
	CHECK("%d %d %u", (signed char)-5, (unsigned char)250, (unsigned char)250);
	CHECK("bool %d %d %u", (bool)true, (bool)false, (bool)1);
	CHECK("enum %d %d %d %d", SE_NEG, SE_POS, PE_RED, PE_BIG);
	CHECK("%p %p", (void *)&x, (const void *)0);
	CHECK("%p", (void *)UINTPTR_MAX);
	CHECK("percent %% and %%%d%%", 50);
	CHECK("no arguments at all");
	CHECK("%d %d %d %d %d %d %d %d %d %d %d %d %d %d %d %d", 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
	      12, 13, 14, 15, 16);
	CHECK("%s %s %s %s %s %s %s %s %s %s %s %s %s %s %s %s", "a", "b", "c", "d", "e", "f", "g",
	      "h", "i", "j", "k", "l", "m", "n", "o", "p");
	CHECK("mixed %d %s %f %p %llu %c", -1, "two", 3.0, (void *)4, 5ull, '6');
	expect_raw("raw check"); /* proves expect_raw and the text compare work */
	EMIT("raw check");
}

/* The string's length is scanned 16 aligned bytes at a time (include/vioscope/
 * trace.h vs__var_str): every length around the block and cut boundaries, at every
 * alignment, and strings that end right before an unmapped page.  An event whose
 * strings are all short takes one record path, any other event the other
 * (VS__SHORT_MAX): pairs of a short and a longer string, or NULL, take the second. */
static void emit_strings_every_length(void)
{
	char *buf = malloc(VS_TRACE_STR_MAX + 64);
	assert_non_null(buf);
	for (unsigned len = 0; len <= VS_TRACE_STR_MAX + 12; len++) {
		char *s = buf + len % 16; /* every alignment */
		memset(s, 'a' + (char)(len % 26), len);
		s[len] = '\0';
		EMIT("len %u [%s]", len, s);
		if (len <= VS_TRACE_STR_MAX)
			expect_fmt("len %u [%s]", len, s);
		else
			expect_fmt("len %u [%.*s[...]]", len, VS_TRACE_STR_MAX, s);
		EMIT("pair [%s] [%s] [%s]", "short", s, null_str);
		if (len <= VS_TRACE_STR_MAX)
			expect_fmt("pair [%s] [%s] [%s]", "short", s, "(null)");
		else
			expect_fmt("pair [%s] [%.*s[...]] [%s]", "short", VS_TRACE_STR_MAX, s,
				   "(null)");
	}
	free(buf);
	long page = sysconf(_SC_PAGESIZE);
	char *two = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(two != MAP_FAILED);
	assert_int_equal(munmap(two + page, (size_t)page), 0);
	for (unsigned len = 0; len < 40; len++) {
		char *s = two + page - len - 1; /* its NUL is the page's last byte */
		memset(s, 'z', len);
		s[len] = '\0';
		CHECK("edge %u [%s]", len, s);
	}
	munmap(two, (size_t)page);
}

/* VS_BYTES(ptr, len): shown as hex with %s (width and precision apply to the hex
 * text), cut at VS_TRACE_BYTES_MAX and marked, NULL as "(null)"; arguments after it
 * stay in place. */
static void emit_byte_arrays(void)
{
	static uint8_t b[300];
	char hex[2 * sizeof b + 16];
	for (unsigned i = 0; i < sizeof b; i++)
		b[i] = (uint8_t)(i * 7 + 1);
	const size_t lens[] = {
	    0, 1, 5, 15, 16, 17, 31, 32, 33, 64, VS_TRACE_BYTES_MAX, VS_TRACE_BYTES_MAX + 1, 300};
	for (unsigned k = 0; k < sizeof lens / sizeof lens[0]; k++) {
		size_t n = lens[k], kept = n > VS_TRACE_BYTES_MAX ? VS_TRACE_BYTES_MAX : n;
		EMIT("bytes %zu [%s] after %d", n, VS_BYTES(b + k, n), -3);
		for (size_t i = 0; i < kept; i++)
			snprintf(hex + 2 * i, 3, "%02x", b[k + i]);
		hex[2 * kept] = '\0';
		expect_fmt("bytes %zu [%s%s] after %d", n, hex, n > kept ? "[...]" : "", -3);
	}
	EMIT("null [%s] [%.4s] [%8s]", VS_BYTES(NULL, 5), VS_BYTES(b, 4), VS_BYTES(b + 1, 2));
	expect_raw("null [(null)] [0108] [    080f]");
	char text[] = "key";
	EMIT("text as bytes %s and %s", VS_BYTES(text, 3), text);
	expect_raw("text as bytes 6b6579 and key");
}

static void emit_all(void)
{
	emit_integers();
	emit_widths();
	emit_floats();
	emit_strings_and_more();
}

/* ---- tests ------------------------------------------------------------------------------- */

/* Scenario: strings of every length from 0 to past the cut, at every alignment, and
 * strings whose NUL is the last byte before an unmapped page: each decodes exactly
 * (and scanning them does not fault). */
static void test_strings_of_every_length(void **state)
{
	(void)state;
	ROUND_TRIP(emit_strings_every_length);
}

/* Scenario: byte arrays of 0 to 300 bytes, NULL, with width and precision, and
 * followed by another argument: hex text as expected, cut at 256 and marked. */
static void test_byte_arrays_decode_as_hex(void **state)
{
	struct collected c;
	(void)state;
	ROUND_TRIP(emit_byte_arrays);
	n_expected = 0;
	dump_and_collect(&c, "emit_byte_arrays");
	assert_int_equal(c.first_site.types[1], VS_ARG_BYTES);
	free(c.msg);
}

/* Scenario: ~80 events covering every argument type and the common conversions,
 * emitted from emit_*(): each decodes to exactly printf's text, in order. */
static void test_round_trip_matches_printf(void **state)
{
	struct collected c[4];
	const char *funcs[] = {"emit_integers", "emit_widths", "emit_floats",
			       "emit_strings_and_more"};
	(void)state;

	n_expected = 0;
	emit_all();
	/* Events are walked per function; the expected list is in emission order,
	 * which is function order. */
	unsigned base = 0, bad = 0;
	for (int f = 0; f < 4; f++) {
		dump_and_collect(&c[f], funcs[f]);
		assert_int_equal(c[f].bad_fmt, 0);
		for (unsigned i = 0; i < c[f].n && base + i < n_expected; i++) {
			if (strcmp(c[f].msg[i], expected[base + i]) != 0) {
				print_error("%s event %u:\n  decoded:  \"%s\"\n"
					    "  expected: \"%s\"\n",
					    funcs[f], i, c[f].msg[i], expected[base + i]);
				bad++;
			}
		}
		base += c[f].n;
		free(c[f].msg);
	}
	assert_int_equal(base, n_expected);
	assert_int_equal(bad, 0);
}

/* Scenario: the same events through error sites, which record out of line
 * (vs__emit_ool): every argument type, strings of every length and byte arrays decode
 * exactly as the inline records do. */
static void test_out_of_line_records_decode_the_same(void **state)
{
	struct collected c;

	emit_out_of_line = true;
	collect_level = VS_LEVEL_ERROR;
	test_round_trip_matches_printf(state);
	test_strings_of_every_length(state);
	test_byte_arrays_decode_as_hex(state);
	n_expected = 0;
	emit_floats();
	dump_and_collect(&c, "emit_floats");
	assert_int_equal(c.first_site.level, VS_LEVEL_ERROR); /* the out-of-line form */
	free(c.msg);
	emit_out_of_line = false;
	collect_level = 0;
}

static void prefix_site(int v)
{
	VS_ERROR(INIT, "prefix check %d", v);
}

/* Scenario: one VS_ERROR(INIT, ...) event: its site says level error, flag INIT,
 * this file and function, and the decoder's prefix reads "ERROR INIT prefix_site: ". */
static void test_prefix_names_level_flag_function(void **state)
{
	struct collected c;
	char prefix[512], want[256], *tail;
	(void)state;

	prefix_site(7);
	dump_and_collect(&c, "prefix_site");
	assert_int_equal(c.n, 1);
	assert_string_equal(c.msg[0], "prefix check 7");
	assert_int_equal(c.first_site.level, VS_LEVEL_ERROR);
	assert_string_equal(c.first_flag, "INIT");
	assert_string_equal(c.first_func, "prefix_site");
	assert_non_null(strstr(c.first_file, "test_format.c"));
	assert_int_equal(c.first_site.hot, 0);
	assert_int_equal(c.first_site.nargs, 1);
	assert_int_equal(c.first_site.types[0], VS_ARG_I32);
	assert_int_equal(c.first_tid, (uint32_t)getpid()); /* emitted by the main thread */
	assert_string_equal(c.first_provider, "app");
	vs_format_prefix(prefix, sizeof prefix, c.first_ns, c.first_tid, c.first_site.level,
			 c.first_provider, c.first_flag, NULL, c.first_func);
	/* "YYYY-MM-DD HH:MM:SS.nnnnnnnnn " then the fixed-width fields */
	assert_true(strlen(prefix) > 30);
	tail = prefix + 30;
	snprintf(want, sizeof want, "%-6u ERROR app.INIT       prefix_site: ", (unsigned)getpid());
	assert_string_equal(tail, want);
	free(c.msg);
}

static inline int helper_with_caller(int v VS_CALLER_PARAM)
{
	VS_INFO_HP(TEST, "helper got %d", v);
	return v * 2;
}

static void calls_helper(void)
{
	assert_int_equal(helper_with_caller(21 VS_CALLER_ARG), 42);
}

/* Scenario: an inline helper declared with VS_CALLER_PARAM, called with
 * VS_CALLER_ARG: the event names the caller, and decodes as "caller>callee". */
static void test_inline_helper_names_its_caller(void **state)
{
	struct collected c;
	char prefix[512];
	(void)state;

	calls_helper();
	dump_and_collect(&c, "helper_with_caller");
	assert_int_equal(c.n, 1);
	assert_string_equal(c.msg[0], "helper got 21");
	assert_string_equal(c.first_caller, "calls_helper");
	assert_int_equal(c.first_site.hot, 1);
	vs_format_prefix(prefix, sizeof prefix, c.first_ns, c.first_tid, c.first_site.level,
			 c.first_provider, c.first_flag, c.first_caller, c.first_func);
	assert_non_null(strstr(prefix, " calls_helper>helper_with_caller: "));
	free(c.msg);
}

static int side_effects;

static int bump(void)
{
	return ++side_effects;
}

/* Scenario: a site's arguments are evaluated exactly once when it is enabled, and
 * not at all when its level or its flag is disabled. */
static void test_arguments_evaluated_once_or_not_at_all(void **state)
{
	(void)state;
	side_effects = 0;
	VS_INFO(TEST, "bump %d %d", bump(), bump());
	VS_INFO_HP(TEST, "bump %d", bump());
	assert_int_equal(side_effects, 3);

	assert_int_equal(vs_trace_set(VS_LEVEL_WARNING, 0xffffffffu), 0); /* info is off */
	VS_INFO(TEST, "bump %d", bump());
	VS_WARNING(TEST, "bump %d", bump()); /* warning is on */
	assert_int_equal(side_effects, 4);

	assert_int_equal(vs_trace_set(VS_LEVEL_VERBOSE, ~(1u << VS_FLAG_TEST)), 0);
	VS_ERROR(TEST, "bump %d", bump()); /* flag TEST is off */
	VS_ERROR(INIT, "bump %d", bump());
	assert_int_equal(side_effects, 5);
	assert_int_equal(vs_trace_set(VS_LEVEL_INFO, 0xffffffffu), 0);
}

static void emit_unsupported(void)
{
	int n = 12345;
	VS_INFO(TEST, "count%n here %m %d", &n, 7);
	assert_int_equal(n, 12345);
}

/* Scenario: %n (and %m) are shown, never interpreted: the decoded text marks
 * them, and nothing was written through the %n pointer. */
static void test_percent_n_is_never_interpreted(void **state)
{
	struct collected c;
	(void)state;

	emit_unsupported();
	dump_and_collect(&c, "emit_unsupported");
	assert_int_equal(c.n, 1);
	assert_true(!strncmp(c.msg[0], "count<%n?> here <%m?> ", 22));
	free(c.msg);
}

/* An argument that records an event of its own while the outer event is being written
 * (the inline record evaluates fixed-size arguments as it stores them). */
static __attribute__((noinline)) unsigned traced_argument(unsigned v)
{
	VS_INFO(TEST, "inner %u", v);
	return v + 1;
}

static void emit_nested(void)
{
	VS_INFO(TEST, "outer %u %u %s", 1u, traced_argument(7), "tail");
	VS_INFO_HP(TEST, "outer hp %llu %u", 2ull, traced_argument(9));
	VS_INFO(TEST, "after %d", 3);
}

/* Scenario: an event whose argument is a function that traces.  Both events are
 * recorded whole and decode with their own arguments, and the ring goes on intact:
 * the event after them decodes too (the outer record is taken before its arguments are
 * evaluated, so the inner one lands after it instead of on top of it). */
static void test_argument_that_traces_records_both(void **state)
{
	struct collected c;
	(void)state;

	emit_nested();
	dump_and_collect(&c, "emit_nested");
	assert_int_equal(c.bad_fmt, 0);
	assert_int_equal(c.n, 3);
	assert_string_equal(c.msg[0], "outer 1 8 tail");
	assert_string_equal(c.msg[1], "outer hp 2 10");
	assert_string_equal(c.msg[2], "after 3");
	free(c.msg);
	dump_and_collect(&c, "traced_argument");
	assert_int_equal(c.bad_fmt, 0);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.msg[0], "inner 7");
	assert_string_equal(c.msg[1], "inner 9");
	free(c.msg);
}

/* ---- known bugs (run with --known-bugs; registered in ctest as disabled) ------------ */

static void emit_negative_star_width(void)
{
	CHECK("[%*d] [%*s] [%-*d]", -6, 42, -4, "ab", -3, 7);
}

/* Was a bug: a negative width taken from a '*' argument means "left-justify" in
 * printf ("[42    ]"); the decoder drops it ("[42]"), because -1 doubles as
 * "no width" (src/tracetools/format.c: width = -1 sentinel, `if (width >= 0)` when the
 * conversion spec is rebuilt; also `width < -4096` turns into +4096). */
static void test_negative_star_width_left_justifies(void **state)
{
	(void)state;
	ROUND_TRIP(emit_negative_star_width);
}

/* Was a bug: %n takes an argument (an int *) in printf, but the decoder shows it
 * without consuming it, so every later conversion reads the wrong argument: here
 * "%d" meets the pointer and prints "<bad arg>" instead of 7 (src/tracetools/format.c,
 * the default case of the conversion switch). */
static void test_percent_n_consumes_its_argument(void **state)
{
	struct collected c;
	(void)state;

	emit_unsupported();
	dump_and_collect(&c, "emit_unsupported");
	assert_true(c.n >= 1); /* the newest: an earlier test emits from here too */
	assert_string_equal(c.msg[c.n - 1], "count<%n?> here <%m?> 7");
	free(c.msg);
}

static void emit_null_string(void)
{
	CHECK("null [%s]", null_str);
}

/* Was a bug: a NULL char * is recorded as an empty string and decodes as "",
 * where printf (glibc) prints "(null)": NULL and "" can't be told apart in a trace.
 * (include/vioscope/trace.h vs__strlen/vs__put_str; src/tracetools/format.c). */
static void test_null_string_decodes_as_null(void **state)
{
	(void)state;
	ROUND_TRIP(emit_null_string);
}

static char char_buffer[16] = "not-a-string";

static void emit_char_pointer_as_p(void)
{
	VS_INFO(TEST, "buffer at %p", char_buffer);
}

/* Scenario: a char * printed with %p.  The argument's C type decides what is
 * recorded, so the text is kept, not the address (docs/TRACING.md: cast to
 * (void *) to trace an address); the decoder says so instead of printing "(nil)". */
static void test_char_pointer_with_p_shows_the_text(void **state)
{
	struct collected c;
	(void)state;

	n_expected = 0;
	emit_char_pointer_as_p();
	dump_and_collect(&c, "emit_char_pointer_as_p");
	assert_int_equal(c.n, 1);
	assert_string_equal(c.msg[0], "buffer at <char* \"not-a-string\">");
	free(c.msg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip_matches_printf),
	    cmocka_unit_test(test_strings_of_every_length),
	    cmocka_unit_test(test_byte_arrays_decode_as_hex),
	    cmocka_unit_test(test_out_of_line_records_decode_the_same),
	    cmocka_unit_test(test_prefix_names_level_flag_function),
	    cmocka_unit_test(test_inline_helper_names_its_caller),
	    cmocka_unit_test(test_arguments_evaluated_once_or_not_at_all),
	    cmocka_unit_test(test_percent_n_is_never_interpreted),
	    cmocka_unit_test(test_char_pointer_with_p_shows_the_text),
	    cmocka_unit_test(test_negative_star_width_left_justifies),
	    cmocka_unit_test(test_percent_n_consumes_its_argument),
	    cmocka_unit_test(test_null_string_decodes_as_null),
	    cmocka_unit_test(test_argument_that_traces_records_both),
	};

	if (!vs_trace_shm_path()) {
		fprintf(stderr, "test_trace_format: no trace file (run it under trace_isolate)\n");
		return 1;
	}
	return cmocka_run_group_tests_name("trace.format", tests, NULL, NULL);
}
