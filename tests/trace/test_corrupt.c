/* SPDX-License-Identifier: MIT */
/*
 * Damaged capture files: `vioscope trace decode` must refuse each one with exit
 * status 1 and an error that names the file offset, print no events, and never
 * crash (the sanitizer build runs the same binary under ASan and UBSan).
 *
 * The good capture comes from the workload's "kinds" mode (its first event has a
 * string argument), dumped by `vioscope trace dump`.  `test_trace_corrupt
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "helpers.h"

struct layout {
	size_t meta_body;   /* metadata blob */
	uint64_t meta_size;
	size_t events;      /* header of the first EVENTS section */
	size_t record;      /* its first record */
	size_t loss;        /* first LOSS section */
	size_t clock;       /* CLOCK section */
	size_t end;         /* END section */
};

struct ctx {
	struct th_tmpdir t; /* the test's own VIOSCOPE_TRACE_DIR; decode's stdout and stderr */
	char good[600], bad[600];
	uint8_t *data; /* the good capture */
	size_t len;
	struct layout l;
};

static uint16_t rd16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}
static void wr16(uint8_t *p, uint16_t v)
{
	memcpy(p, &v, 2);
}
static void wr32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}
static void wr64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

/* Find the sections of the good capture (it is ours, so trust its sizes). */
static int map_layout(struct ctx *c)
{
	size_t off = sizeof(struct vs_cap_file_header);
	memset(&c->l, 0, sizeof c->l);
	while (off + 16 <= c->len) {
		struct vs_cap_section_header sh;
		memcpy(&sh, c->data + off, sizeof sh);
		switch (sh.type) {
		case VS_SEC_META:
			c->l.meta_body = off + 16;
			c->l.meta_size = sh.size;
			break;
		case VS_SEC_EVENTS:
			if (!c->l.events) {
				c->l.events = off;
				c->l.record = off + 16 + 32;
			}
			break;
		case VS_SEC_LOSS:
			if (!c->l.loss)
				c->l.loss = off;
			break;
		case VS_SEC_CLOCK:
			c->l.clock = off;
			break;
		case VS_SEC_END:
			c->l.end = off;
			break;
		}
		off += 16 + ((sh.size + 7) & ~7ull);
	}
	return c->l.meta_body && c->l.record && c->l.loss && c->l.clock && c->l.end ? 0 : -1;
}

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof *c);
	char pidstr[32];
	if (!c || th_tmpdir_init(&c->t, "corrupt") < 0) {
		free(c);
		return -1;
	}
	*state = c;
	snprintf(c->good, sizeof c->good, "%s/good.vstrace", c->t.dir);
	snprintf(c->bad, sizeof c->bad, "%s/bad.vstrace", c->t.dir);

	const char *wargv[] = { WORKLOAD_COLD, "kinds", NULL };
	const char *wenv[] = { c->t.env_dir, "VIOSCOPE_TRACE=verbose:all", "VIOSCOPE_TRACE_KEEP=1",
			       NULL };
	pid_t pid = th_spawn(wargv, wenv, NULL, NULL, NULL);
	if (pid < 0 || th_wait(pid) != 0)
		return -1;
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	const char *dargv[] = { VIOSCOPE_CLI, "trace", "dump", pidstr, "-o", c->good, NULL };
	const char *denv[] = { c->t.env_dir, NULL };
	if (th_run(dargv, denv, NULL, "/dev/null") != 0)
		return -1;
	c->data = (uint8_t *)th_read_file(c->good, &c->len);
	if (!c->data || map_layout(c) < 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;
	if (!c)
		return 0;
	free(c->data);
	th_tmpdir_fini(&c->t);
	free(c);
	return 0;
}

/* Decode PATH with the CLI; returns the exit status (128 + signal if it died). */
static int decode(struct ctx *c, const char *path)
{
	const char *argv[] = { VIOSCOPE_CLI, "trace", "decode", path, NULL };
	/* A sanitizer report must not pass for the expected exit status 1. */
	const char *env[] = { c->t.env_dir, "ASAN_OPTIONS=exitcode=86", "UBSAN_OPTIONS=exitcode=86",
			      NULL };
	return th_run(argv, env, c->t.out, c->t.err);
}

/* A copy of the good capture, for the caller to damage. */
static uint8_t *copy(struct ctx *c)
{
	uint8_t *b = malloc(c->len);
	assert_non_null(b);
	memcpy(b, c->data, c->len);
	return b;
}

/* Write the damaged bytes, decode them, and check the refusal: exit 1, an error
 * on stderr naming "offset WANT_OFF" (any offset if WANT_OFF is SIZE_MAX) and
 * containing WHAT, no sanitizer report, nothing on stdout. */
static void expect_refused(struct ctx *c, const char *name, const uint8_t *b, size_t len,
			   size_t want_off, const char *what)
{
	char needle[64];
	assert_int_equal(th_write_file(c->bad, b, len), 0);
	int rc = decode(c, c->bad);
	char *err = th_read_file(c->t.err, NULL);
	char *out = th_read_file(c->t.out, NULL);
	assert_non_null(err);
	assert_non_null(out);
	if (rc != 1 || !strstr(err, "offset") || strstr(err, "Sanitizer") ||
	    strstr(err, "runtime error") || out[0] || (what && !strstr(err, what)))
		fail_msg("%s: exit %d, stderr \"%s\", %zu bytes on stdout", name, rc, err,
			 strlen(out));
	if (want_off != SIZE_MAX) {
		snprintf(needle, sizeof needle, "offset %zu ", want_off);
		if (!strstr(err, needle))
			fail_msg("%s: error does not name %s: \"%s\"", name, needle, err);
	}
	free(err);
	free(out);
}

/* Scenario: the good capture decodes (exit 0, its first event shown): the
 * damaged copies below differ from it only by the damage. */
static void test_good_capture_decodes(void **state)
{
	struct ctx *c = *state;
	assert_int_equal(decode(c, c->good), 0);
	char *out = th_read_file(c->t.out, NULL);
	assert_non_null(out);
	assert_non_null(strstr(out, " wl_kinds: str abc\n"));
	assert_non_null(strstr(out, "long xxxx"));
	free(out);
	/* its first record is the string event the edits below rely on */
	assert_int_equal(rd16(c->data + c->l.record + 12), 24);
	assert_int_equal(rd16(c->data + c->l.record + 16), 3);
}

/* Scenario: files cut short at several points: inside the file header, inside a
 * section header, in the middle of the metadata and of an events section, and
 * just before the END section. */
static void test_truncated_files_are_refused(void **state)
{
	struct ctx *c = *state;
	const struct {
		const char *name;
		size_t len, off;
	} cuts[] = {
		{ "empty", 0, 0 },
		{ "inside the file header", 8, 0 },
		{ "inside the first section header", 16 + 4, 16 },
		{ "middle of the metadata", c->l.meta_body + c->l.meta_size / 2,
		  c->l.meta_body - 16 },
		{ "middle of an events section", c->l.record + 10, c->l.events },
		{ "before END", c->l.end, c->l.end },
		{ "inside END", c->l.end + 20, c->l.end },
		{ "before CLOCK", c->l.clock, c->l.clock },
	};
	for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
		expect_refused(c, cuts[i].name, c->data, cuts[i].len, cuts[i].off, NULL);
}

/* Scenario: damaged headers: bad magic, an unknown version, a section that claims
 * more bytes than the file has, an unknown section type, data after END. */
static void test_bad_headers_are_refused(void **state)
{
	struct ctx *c = *state;
	uint8_t *b = copy(c);

	b[0] ^= 0xff;
	expect_refused(c, "bad magic", b, c->len, 0, "bad magic");
	memcpy(b, c->data, c->len);
	wr16(b + 8, 99);
	expect_refused(c, "bad version", b, c->len, 8, "version 99");
	memcpy(b, c->data, c->len);
	wr64(b + 16 + 8, (uint64_t)c->len * 2);
	expect_refused(c, "section past EOF", b, c->len, 16, "claims");
	memcpy(b, c->data, c->len);
	wr64(b + c->l.events + 8, UINT64_MAX - 3); /* wraps if added carelessly */
	expect_refused(c, "huge section size", b, c->len, c->l.events, NULL);
	memcpy(b, c->data, c->len);
	wr32(b + c->l.loss, 77);
	expect_refused(c, "unknown section type", b, c->len, c->l.loss, "unknown section type 77");
	free(b);

	b = malloc(c->len + 48);
	assert_non_null(b);
	memcpy(b, c->data, c->len);
	memcpy(b + c->len, c->data + c->l.loss, 48); /* a whole LOSS section after END */
	expect_refused(c, "data after END", b, c->len + 48, c->len, "after the END");
	free(b);
}

/* Scenario: damaged event records: a size that is not a multiple of 8, a site id
 * past the site table, a string length past the record, a caller id past the
 * caller table. */
static void test_bad_records_are_refused(void **state)
{
	struct ctx *c = *state;
	size_t r = c->l.record;
	uint8_t *b = copy(c);

	wr16(b + r + 12, 28);
	expect_refused(c, "record size not a multiple of 8", b, c->len, r, "size 28");
	memcpy(b, c->data, c->len);
	wr16(b + r + 12, 8);
	expect_refused(c, "record smaller than its header", b, c->len, r, "size 8");
	memcpy(b, c->data, c->len);
	wr32(b + r + 8, 0x00fffff0);
	expect_refused(c, "site id out of range", b, c->len, r, "site");
	memcpy(b, c->data, c->len);
	wr16(b + r + 16, 100);
	expect_refused(c, "string length past the record", b, c->len, r, "string");
	memcpy(b, c->data, c->len);
	wr16(b + r + 16, 3 | VS_TRACE_STR_CUT | 0x4000);
	expect_refused(c, "string length with stray bits", b, c->len, r, "string");
	memcpy(b, c->data, c->len);
	wr16(b + r + 14, 999);
	expect_refused(c, "caller out of range", b, c->len, r, "caller 999");
	memcpy(b, c->data, c->len);
	wr32(b + r + 8, VS_EVENT_DROPS);
	wr16(b + r + 12, 16);
	expect_refused(c, "short drop marker", b, c->len, r, "drop marker");
	free(b);
}

/* Scenario: damaged metadata: a site count far beyond what the blob can hold, a
 * flag count over 32, a bad magic, a string running past the blob. */
static void test_bad_metadata_is_refused(void **state)
{
	struct ctx *c = *state;
	size_t m = c->l.meta_body;
	uint8_t *b = copy(c);

	wr32(b + m + 8, 0x7fffffff);
	expect_refused(c, "site count", b, c->len, m, "counts");
	memcpy(b, c->data, c->len);
	wr32(b + m + 12, 40);
	expect_refused(c, "flag count", b, c->len, m, "counts");
	memcpy(b, c->data, c->len);
	wr32(b + m + 16, 0x10000000);
	expect_refused(c, "caller count", b, c->len, m, "counts");
	memcpy(b, c->data, c->len);
	b[m] ^= 0xff;
	expect_refused(c, "metadata magic", b, c->len, m, "bad magic");
	memcpy(b, c->data, c->len);
	/* first site's file name: u32 line, 4 bytes, 16 types, then u16 length */
	wr16(b + m + 24 + 24, 0xffff);
	expect_refused(c, "site string past the blob", b, c->len, m, "truncated");
	memcpy(b, c->data, c->len);
	b[m + 24 + 4] = 9; /* level 9 */
	expect_refused(c, "site level", b, c->len, m, "level 9");
	free(b);
}

/* Was a bug: the CLOCK section is trusted for the TSC-to-wall-time conversion
 * (src/trace/capture.c to_real): ts1 = ts0 + 1 with a 10^18 ns span makes the rate
 * 10^18 and the result an out-of-range long double cast to uint64_t (undefined
 * behaviour: UBSan stops the sanitizer build; elsewhere the times come out as
 * 1970).  Expected: the capture is refused with the offset, or its times are sane
 * (not before the recorded start).  The fuzzer finds this in seconds
 * (fuzz/trace/ubsan.supp). */
static void test_absurd_clock_rate_is_refused(void **state)
{
	struct ctx *c = *state;
	const uint64_t real0 = 1700000000ull * 1000000000ull;
	struct vs_cap_clock k = { .is_tsc = 1, .ts0 = 0, .mono0 = 0, .real0 = real0,
				  .ts1 = 1, .mono1 = 1000000000000000000ull, .real1 = real0 };
	char start[64];
	uint8_t *b = copy(c);

	memcpy(b + c->l.clock + 16, &k, sizeof k);
	assert_int_equal(th_write_file(c->bad, b, c->len), 0);
	free(b);
	int rc = decode(c, c->bad);
	char *err = th_read_file(c->t.err, NULL);
	char *out = th_read_file(c->t.out, NULL);
	assert_non_null(err);
	assert_non_null(out);
	assert_null(strstr(err, "runtime error"));
	assert_null(strstr(err, "Sanitizer"));
	if (rc == 1) {
		assert_non_null(strstr(err, "offset"));
	} else {
		assert_int_equal(rc, 0);
		vs_format_walltime(start, sizeof start, real0);
		for (char *l = out; *l; l = strchr(l, '\n') + 1) {
			if (strncmp(l, start, 10) < 0) /* the date part */
				fail_msg("time before the start (%.10s): %.80s", start, l);
			if (!strchr(l, '\n'))
				break;
		}
	}
	free(err);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_good_capture_decodes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated_files_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_headers_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_records_are_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_metadata_is_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_absurd_clock_rate_is_refused, setup, teardown),
	};
	return cmocka_run_group_tests_name("trace.corrupt", tests, NULL, NULL);
}
