/* SPDX-License-Identifier: MIT */
/*
 * Hostile capture files, as `vioscope trace decode` meets them: shaped to make the
 * decoder's bookkeeping quadratic (a million tiny sections), rewritten or truncated
 * between the checks and the walk or while it runs, and carrying terminal escapes and
 * broken UTF-8 in its strings.  The captures are forged byte by byte (forge.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver.h"
#include "forge.h"

static const struct forge_site sites[] = {
    {.fmt = "n=%u", .func = "count", .nargs = 1, .types = {VS_ARG_U32}},
    {.fmt = "s=%s c=%c", .func = "f\x7fn", .nargs = 2, .types = {VS_ARG_STR, VS_ARG_I32}},
};

static void begin(struct fbuf *cap)
{
	struct fbuf meta = {0};
	forge_meta(&meta, sites, 2);
	forge_cap_begin(cap, &meta, "/forged/exe", "cold");
	fb_free(&meta);
}

static void write_capture(const char *path, struct fbuf *cap)
{
	assert_int_equal(th_write_file(path, cap->p, cap->len), 0);
}

struct counted {
	unsigned events;
	char msg[64][32];
	uint64_t ns[64];
};

static int count_event(const struct vs_cap_event *ev, void *opaque)
{
	struct counted *c = opaque;
	if (!ev->site)
		return 0;
	if (c->events < 64) {
		vs_format_message(c->msg[c->events], sizeof c->msg[0], ev->site, ev->args,
				  ev->args_len);
		c->ns[c->events] = ev->real_ns;
	}
	c->events++;
	return 0;
}

/* ---- a million tiny sections -------------------------------------------------------- */

/* N EVENTS sections of one "n=%u" event each: every one its own thread (DISTINCT), or
 * all of one thread.  Timestamps run backwards over the threads, so that the merge
 * cannot take them in file order. */
static void forge_sections(const char *path, unsigned n, bool distinct)
{
	struct fbuf cap = {0}, rec = {0};
	begin(&cap);
	for (unsigned i = 0; i < n; i++) {
		rec.len = 0;
		forge_record(&rec, distinct ? n - i : i, forge_site_id(0), &i, sizeof i);
		forge_cap_events(&cap, distinct ? i + 1 : 1, distinct ? i : 0, 1, "t", rec.p,
				 rec.len);
	}
	forge_cap_end(&cap);
	write_capture(path, &cap);
	fb_free(&cap);
	fb_free(&rec);
}

/* Open and walk: every event seen; returns the decoder's count of bookkeeping steps. */
static uint64_t decode_work(const char *path, unsigned n)
{
	struct vs_capture *c;
	struct counted seen = {0};
	char why[512];
	if (vs_capture_open(&c, path, why, sizeof why) < 0)
		fail_msg("%s", why);
	assert_int_equal(vs_capture_walk(c, count_event, &seen, why, sizeof why), 0);
	assert_int_equal(seen.events, n);
	uint64_t work = vs_capture_work(c);
	vs_capture_close(c);
	unlink(path);
	return work;
}

/* 100 000 and 1 000 000 sections: ten times the sections may cost ten times the work,
 * and a little more for the merge heap's extra level or so (log n), not a hundred
 * times (one realloc and one linear search per new thread made it quadratic). */
static void run_linear(struct th_tmpdir *td, bool distinct)
{
	const unsigned small = 100000, big = 1000000;
	forge_sections(td->cap, small, distinct);
	uint64_t w_small = decode_work(td->cap, small);
	forge_sections(td->cap, big, distinct);
	uint64_t w_big = decode_work(td->cap, big);
	print_message("work: %llu for %u sections, %llu for %u (x%.2f)\n",
		      (unsigned long long)w_small, small, (unsigned long long)w_big, big,
		      (double)w_big / (double)w_small);
	assert_true(w_big <= 14 * w_small);
	assert_true(w_big <= 64ull * big);
}

static void test_million_sections_each_a_thread_decode_in_linear_work(void **state)
{
	run_linear(*state, true);
}

static void test_million_sections_of_one_thread_decode_in_linear_work(void **state)
{
	run_linear(*state, false);
}

/* ---- rewritten under the decoder ------------------------------------------------------ */

/* Two threads of 20 events, interleaved in time. */
static void forge_small(const char *path)
{
	struct fbuf cap = {0}, r0 = {0}, r1 = {0};
	begin(&cap);
	for (unsigned i = 0; i < 20; i++) {
		unsigned v0 = i, v1 = 100 + i;
		forge_record(&r0, 2 * i, forge_site_id(0), &v0, sizeof v0);
		forge_record(&r1, 2 * i + 1, forge_site_id(0), &v1, sizeof v1);
	}
	forge_cap_events(&cap, 11, 0, 1, "a", r0.p, r0.len);
	forge_cap_events(&cap, 22, 1, 1, "b", r1.p, r1.len);
	forge_cap_end(&cap);
	write_capture(path, &cap);
	fb_free(&cap);
	fb_free(&r0);
	fb_free(&r1);
}

static void assert_small_events(const struct counted *seen)
{
	assert_int_equal(seen->events, 40);
	for (unsigned i = 0; i < 40; i++) {
		char want[32];
		snprintf(want, sizeof want, "n=%u", i % 2 ? 100 + i / 2 : i / 2);
		assert_string_equal(seen->msg[i], want);
		assert_int_equal(seen->ns[i], FORGE_REAL0 + i);
	}
}

enum rewrite { ZEROS, GARBAGE, TRUNCATED };

/* Opened (and checked), then the file changes, then walked: the walk shows what was
 * checked, all 40 events in order, however the file changed. */
static void run_rewrite_between_open_and_walk(struct th_tmpdir *td, enum rewrite how)
{
	struct vs_capture *c;
	struct counted seen = {0};
	char why[512];

	forge_small(td->cap);
	if (vs_capture_open(&c, td->cap, why, sizeof why) < 0)
		fail_msg("%s", why);
	size_t len;
	char *data = th_read_file(td->cap, &len);
	assert_non_null(data);
	if (how == TRUNCATED) {
		assert_int_equal(truncate(td->cap, 0), 0);
	} else {
		/* every byte after the file header: sizes 0, sites none, or random */
		uint64_t x = 88172645463325252ull;
		for (size_t i = 16; i < len; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			data[i] = how == ZEROS ? 0 : (char)x;
		}
		assert_int_equal(th_write_file(td->cap, data, len), 0);
	}
	free(data);
	assert_int_equal(vs_capture_walk(c, count_event, &seen, why, sizeof why), 0);
	vs_capture_close(c);
	assert_small_events(&seen);
}

static void test_capture_zeroed_after_open(void **state)
{
	run_rewrite_between_open_and_walk(*state, ZEROS);
}

static void test_capture_scrambled_after_open(void **state)
{
	run_rewrite_between_open_and_walk(*state, GARBAGE);
}

static void test_capture_truncated_after_open(void **state)
{
	run_rewrite_between_open_and_walk(*state, TRUNCATED);
}

struct rewriter {
	pthread_t th;
	const char *path;
	uint8_t *good;
	size_t len;
	int stop;
	unsigned long rounds;
};

/* Over and over: the good capture, then bytes of it scrambled in place, then cut. */
static void *rewrite_main(void *arg)
{
	struct rewriter *r = arg;
	uint64_t x = 0x2545f4914f6cdd1dull;
	int fd = open(r->path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		if (pwrite(fd, r->good, r->len, 0) != (ssize_t)r->len)
			break;
		uint8_t junk[64];
		memset(junk, (int)(x & 0xff), sizeof junk);
		if (pwrite(fd, junk, sizeof junk, (off_t)(x % r->len)) < 0 ||
		    ftruncate(fd, (off_t)(x >> 32) % (off_t)r->len) < 0)
			break;
		r->rounds++;
	}
	close(fd);
	return NULL;
}

/* A thread rewrites, scrambles and truncates the capture without pause while it is
 * decoded 300 times (text, JSON, Chrome in turn): every decode ends, with the events
 * or with an error naming an offset; never a read outside what was read (ASan). */
static void test_capture_rewritten_while_decoding(void **state)
{
	struct th_tmpdir *td = *state;
	struct rewriter r = {.path = td->cap};
	char why[512];
	unsigned ok = 0, refused = 0;

	forge_small(td->cap);
	r.good = (uint8_t *)th_read_file(td->cap, &r.len);
	assert_non_null(r.good);
	FILE *devnull = fopen("/dev/null", "we");
	assert_non_null(devnull);
	assert_int_equal(pthread_create(&r.th, NULL, rewrite_main, &r), 0);
	for (int i = 0; i < 300; i++) {
		struct vs_decode_opts o = {.to_s = -1, .json = i % 3 == 1, .chrome = i % 3 == 2};
		why[0] = '\0';
		int rc = vs_trace_decode(td->cap, &o, devnull, why, sizeof why);
		if (rc == 0) {
			ok++;
		} else {
			if (rc != -EINVAL || !strstr(why, td->cap))
				fail_msg("decode %d: %d (%s)", i, rc, why);
			refused++;
		}
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(r.th, NULL);
	fclose(devnull);
	free(r.good);
	print_message("%u decoded, %u refused, %lu rewrites\n", ok, refused, r.rounds);
}

/* ---- escapes in strings ---------------------------------------------------------------- */

/* One event of site 1 ("s=%s c=%c", function "f<DEL>n") from thread "t<ESC>[1m": the
 * string has an escape sequence, CR LF, BEL, DEL, a C1 control (U+009B, CSI), a byte
 * that is not UTF-8, an e-acute, a quote, a backslash and a NUL; %c is ESC. */
static void forge_escapes(const char *path)
{
	static const char s[] = "\x1b[31m\r\n\a\x7f\xc2\x9b\xff\xc3\xa9\"\\\0end";
	struct fbuf cap = {0}, args = {0}, rec = {0};
	int32_t c = 0x1b;
	begin(&cap);
	fb_put_str_arg(&args, s, sizeof s - 1);
	fb_put(&args, &c, 4);
	forge_record(&rec, 5, forge_site_id(1), args.p, args.len);
	forge_cap_events(&cap, 7, 0, 1, "t\x1b[1m", rec.p, rec.len);
	forge_cap_end(&cap);
	write_capture(path, &cap);
	fb_free(&cap);
	fb_free(&args);
	fb_free(&rec);
}

/* Decoded output: nothing a terminal would act on but the line ends, and valid UTF-8. */
static void assert_terminal_safe(const char *out, size_t len)
{
	for (size_t i = 0; i < len;) {
		unsigned char b = (unsigned char)out[i];
		if ((b < 0x20 && b != '\n') || b == 0x7f)
			fail_msg("control byte %#x at %zu in:\n%s", b, i, out);
		if (b == 0xc2 && i + 1 < len && (unsigned char)out[i + 1] < 0xa0)
			fail_msg("C1 control at %zu in:\n%s", i, out);
		size_t n = b < 0x80 ? 1 : (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 : 4;
		if (b >= 0x80 && (b < 0xc2 || b > 0xf4))
			fail_msg("byte %#x at %zu is not UTF-8 in:\n%s", b, i, out);
		for (size_t k = 1; k < n; k++)
			if (i + k >= len || ((unsigned char)out[i + k] & 0xc0) != 0x80)
				fail_msg("cut UTF-8 sequence at %zu in:\n%s", i, out);
		i += n;
	}
}

static char *decode_to_text(struct th_tmpdir *td, bool json, bool chrome)
{
	struct vs_decode_opts o = {.to_s = -1, .json = json, .chrome = chrome};
	char why[512];
	size_t len;
	FILE *f = fopen(td->out, "we");
	assert_non_null(f);
	if (vs_trace_decode(td->cap, &o, f, why, sizeof why) < 0)
		fail_msg("%s", why);
	fclose(f);
	char *out = th_read_file(td->out, &len);
	assert_non_null(out);
	assert_terminal_safe(out, len);
	return out;
}

static void test_text_output_escapes_control_characters(void **state)
{
	forge_escapes((*(struct th_tmpdir **)state)->cap);
	char *out = decode_to_text(*state, false, false);
	const char *want =
	    " INFO  forged.TEST    f\\x7fn: s=\\x1b[31m\\x0d\\x0a\\x07\\x7f\\xc2\\x9b\\xff"
	    "\xc3\xa9\"\\\\x00end c=\\x1b\n";
	if (!strstr(out, want))
		fail_msg("want ...%s\ngot %s", want, out);
	free(out);
}

/* The message of forge_escapes' event, JSON-escaped (one literal: clang warns about
 * concatenated literals in an array initialiser). */
static const char want_message[] = "\"message\":\"s=\\u001b[31m\\r\\n\\u0007\\u007f\\u009b"
				   "\\ufffd\xc3\xa9\\\"\\\\\\\\x00end c=\\u001b\"";

static void assert_all_in(const char *out, const char *const want[], size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!strstr(out, want[i]))
			fail_msg("want %s\ngot %s", want[i], out);
}

static void test_json_output_uses_json_escapes(void **state)
{
	forge_escapes((*(struct th_tmpdir **)state)->cap);
	char *out = decode_to_text(*state, true, false);
	const char *want[] = {
	    "\"thread\":\"t\\u001b[1m\"",
	    "\"function\":\"f\\u007fn\"",
	    want_message,
	};
	assert_all_in(out, want, sizeof want / sizeof want[0]);
	free(out);
}

static void test_chrome_output_uses_json_escapes(void **state)
{
	forge_escapes((*(struct th_tmpdir **)state)->cap);
	char *out = decode_to_text(*state, false, true);
	const char *want[] = {
	    "\"name\":\"f\\u007fn\"",
	    want_message,
	};
	assert_all_in(out, want, sizeof want / sizeof want[0]);
	free(out);
}

static int setup(void **state)
{
	return th_tmpdir_setup(state, "hostile-capture");
}

#define TMPDIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup, th_tmpdir_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TMPDIR_TEST(test_million_sections_each_a_thread_decode_in_linear_work),
	    TMPDIR_TEST(test_million_sections_of_one_thread_decode_in_linear_work),
	    TMPDIR_TEST(test_capture_zeroed_after_open),
	    TMPDIR_TEST(test_capture_scrambled_after_open),
	    TMPDIR_TEST(test_capture_truncated_after_open),
	    TMPDIR_TEST(test_capture_rewritten_while_decoding),
	    TMPDIR_TEST(test_text_output_escapes_control_characters),
	    TMPDIR_TEST(test_json_output_uses_json_escapes),
	    TMPDIR_TEST(test_chrome_output_uses_json_escapes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
