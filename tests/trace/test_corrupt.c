/* SPDX-License-Identifier: MIT */
/*
 * Damaged capture files: `vioscope trace decode` must refuse each one with exit
 * status 1 and an error that names the file offset, print no events, and never
 * crash (the sanitizer build runs the same binary under ASan and UBSan).
 *
 * The good capture comes from the workload's "kinds" mode (its first event has a
 * string argument), dumped by `vioscope trace dump`.  Each damage is one row of
 * `scenarios` below, run as a cmocka test of its own named after the row, on a
 * fresh good capture.
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

#include "driver.h"

/* Where the sections of the good capture are. */
struct layout {
	size_t meta_body; /* metadata records: the workload's one OBJECT record */
	uint64_t meta_size;
	size_t meta_site; /* its first site */
	size_t events;	  /* header of the first EVENTS section */
	size_t record;	  /* its first record */
	size_t loss;	  /* first LOSS section */
	size_t clock;	  /* CLOCK section */
	size_t end;	  /* END section */
};

/* ---- the damages ---------------------------------------------------------------------- */

/* A place in the good capture: a point the layout finds, plus a byte count. */
enum anchor {
	FILE_START,
	META_HEADER, /* the META section's header */
	META_BODY,
	META_MIDDLE, /* halfway through the metadata */
	META_SITE,   /* the first site of the object record */
	EVENTS,	     /* the first EVENTS section's header */
	RECORD,	     /* its first record: the string event (test_good_capture_decodes) */
	LOSS,	     /* the first LOSS section's header */
	CLOCK,	     /* the CLOCK section's header */
	END,	     /* the END section's header */
	FILE_END,    /* the good capture's length */
};
struct place {
	enum anchor at;
	size_t plus;
};

/* How a field is overwritten. */
enum field_op {
	NO_EDIT,
	XOR8, /* flip the byte's bits with VALUE */
	PUT8, /* store VALUE in 1, 2, 4 or 8 bytes (host order, as the file is) */
	PUT16,
	PUT32,
	PUT64,
	PUT64_TWICE_FILE_LEN, /* store twice the good capture's length: past its end */
};
struct field_edit {
	enum field_op op;
	struct place where;
	uint64_t value;
};

struct scenario {
	const char *name; /* the cmocka test name: "what: how" */
	enum {
		OVERWRITE,	     /* EDIT, in order, on a copy of the good capture */
		CUT,		     /* the good capture up to CUT_AT only */
		APPEND_LOSS_SECTION, /* a copy of the first LOSS section after END */
	} damage;
	struct place cut_at;
	struct field_edit edit[2];
	struct place want_off; /* the offset the error must name */
	const char *want_text; /* what else the error must say (NULL: nothing more) */
};

#define AT(anchor, plus)                                                                           \
	{                                                                                          \
		(anchor), (plus)                                                                   \
	}
#define EDIT(op, anchor, plus, value)                                                              \
	{                                                                                          \
		(op), AT(anchor, plus), (value)                                                    \
	}

static const struct scenario scenarios[] = {
    /* files cut short: inside the file header, inside a section header, in the
     * middle of the metadata and of an events section, and before END */
    {.name = "cut: empty",
     .damage = CUT,
     .cut_at = AT(FILE_START, 0),
     .want_off = AT(FILE_START, 0)},
    {.name = "cut: inside the file header",
     .damage = CUT,
     .cut_at = AT(FILE_START, 8),
     .want_off = AT(FILE_START, 0)},
    {.name = "cut: inside the first section header",
     .damage = CUT,
     .cut_at = AT(FILE_START, 16 + 4),
     .want_off = AT(FILE_START, 16)},
    {.name = "cut: middle of the metadata",
     .damage = CUT,
     .cut_at = AT(META_MIDDLE, 0),
     .want_off = AT(META_HEADER, 0)},
    {.name = "cut: middle of an events section",
     .damage = CUT,
     .cut_at = AT(RECORD, 10),
     .want_off = AT(EVENTS, 0)},
    {.name = "cut: before END", .damage = CUT, .cut_at = AT(END, 0), .want_off = AT(END, 0)},
    {.name = "cut: inside END", .damage = CUT, .cut_at = AT(END, 20), .want_off = AT(END, 0)},
    {.name = "cut: before CLOCK", .damage = CUT, .cut_at = AT(CLOCK, 0), .want_off = AT(CLOCK, 0)},

    /* damaged headers: bad magic, an unknown version, a section that claims more
     * bytes than the file has, an unknown section type, data after END */
    {.name = "header: bad magic",
     .edit = {EDIT(XOR8, FILE_START, 0, 0xff)},
     .want_off = AT(FILE_START, 0),
     .want_text = "bad magic"},
    {.name = "header: bad version",
     .edit = {EDIT(PUT16, FILE_START, 8, 99)},
     .want_off = AT(FILE_START, 8),
     .want_text = "version 99"},
    {.name = "header: section past EOF",
     .edit = {EDIT(PUT64_TWICE_FILE_LEN, FILE_START, 16 + 8, 0)},
     .want_off = AT(FILE_START, 16),
     .want_text = "claims"},
    {.name = "header: huge section size", /* wraps if added carelessly */
     .edit = {EDIT(PUT64, EVENTS, 8, UINT64_MAX - 3)},
     .want_off = AT(EVENTS, 0)},
    {.name = "header: unknown section type",
     .edit = {EDIT(PUT32, LOSS, 0, 77)},
     .want_off = AT(LOSS, 0),
     .want_text = "unknown section type 77"},
    {.name = "header: data after END",
     .damage = APPEND_LOSS_SECTION,
     .want_off = AT(FILE_END, 0),
     .want_text = "after the END"},

    /* damaged event records: a size that is not a multiple of 8 or below the
     * header's, a site id past the site table, a string length past the record
     * or with stray bits, a caller id past the caller table, a short drop marker */
    {.name = "record: size not a multiple of 8",
     .edit = {EDIT(PUT16, RECORD, 12, 28)},
     .want_off = AT(RECORD, 0),
     .want_text = "size 28"},
    {.name = "record: smaller than its header",
     .edit = {EDIT(PUT16, RECORD, 12, 8)},
     .want_off = AT(RECORD, 0),
     .want_text = "size 8"},
    {.name = "record: site id out of range",
     .edit = {EDIT(PUT32, RECORD, 8, 0x00fffff0)},
     .want_off = AT(RECORD, 0),
     .want_text = "site"},
    {.name = "record: string length past the record",
     .edit = {EDIT(PUT16, RECORD, 16, 100)},
     .want_off = AT(RECORD, 0),
     .want_text = "string"},
    {.name = "record: string length with stray bits",
     .edit = {EDIT(PUT16, RECORD, 16, 3 | VS_TRACE_STR_CUT | 0x4000)},
     .want_off = AT(RECORD, 0),
     .want_text = "string"},
    {.name = "record: caller out of range",
     .edit = {EDIT(PUT16, RECORD, 14, 999)},
     .want_off = AT(RECORD, 0),
     .want_text = "caller 999"},
    {.name = "record: short drop marker",
     .edit = {EDIT(PUT32, RECORD, 8, VS_EVENT_DROPS), EDIT(PUT16, RECORD, 12, 16)},
     .want_off = AT(RECORD, 0),
     .want_text = "drop marker"},

    /* damaged metadata (the OBJECT record: u32 kind, size, index, first_site, nsites,
     * ncallers, nproviders, 0, u64 base, str path ...): site, caller and provider
     * counts far beyond what the record can hold, a record size that is not a multiple
     * of 8, an object out of order, site ids that are not dense, a string running past
     * the record, a bad level, a flag bit the provider does not have; a record of a
     * kind this decoder does not know is skipped, so its sites are unknown */
    {.name = "metadata: site count",
     .edit = {EDIT(PUT32, META_BODY, 16, 0x7fffffff)},
     .want_off = AT(META_BODY, 0),
     .want_text = "counts"},
    {.name = "metadata: caller count",
     .edit = {EDIT(PUT32, META_BODY, 20, 0x10000000)},
     .want_off = AT(META_BODY, 0),
     .want_text = "counts"},
    {.name = "metadata: provider count",
     .edit = {EDIT(PUT32, META_BODY, 24, 40000)},
     .want_off = AT(META_BODY, 0),
     .want_text = "counts"},
    {.name = "metadata: record size",
     .edit = {EDIT(PUT32, META_BODY, 4, 12)},
     .want_off = AT(META_BODY, 0),
     .want_text = "record of size 12"},
    {.name = "metadata: object index",
     .edit = {EDIT(PUT32, META_BODY, 8, 5)},
     .want_off = AT(META_BODY, 0),
     .want_text = "object 5 where object 0"},
    {.name = "metadata: site ids not dense",
     .edit = {EDIT(PUT32, META_BODY, 12, 40)},
     .want_off = AT(META_BODY, 0),
     .want_text = "dense"},
    {.name = "metadata: path string past the record",
     .edit = {EDIT(PUT16, META_BODY, 40, 0xffff)},
     .want_off = AT(META_BODY, 0),
     .want_text = "truncated"},
    /* a site: u32 line, u8 level, flag, hot, nargs, provider, print, also, 0, ... */
    {.name = "metadata: site level",
     .edit = {EDIT(PUT8, META_SITE, 4, 9)},
     .want_off = AT(META_BODY, 0),
     .want_text = "level 9"},
    {.name = "metadata: site flag bit",
     .edit = {EDIT(PUT8, META_SITE, 5, 31)},
     .want_off = AT(META_BODY, 0),
     .want_text = "flag bit 31"},
    {.name = "metadata: site second flag bit",
     .edit = {EDIT(PUT8, META_SITE, 10, 32)},
     .want_off = AT(META_BODY, 0),
     .want_text = "second flag bit 31"},
    {.name = "metadata: site provider",
     .edit = {EDIT(PUT8, META_SITE, 8, 3)},
     .want_off = AT(META_BODY, 0),
     .want_text = "provider 3 of 1"},
    {.name = "metadata: unknown record kind",
     .edit = {EDIT(PUT32, META_BODY, 0, 77)},
     .want_off = AT(RECORD, 0),
     .want_text = "none of the capture's 0 sites"},
};

/* ---- the fixture ---------------------------------------------------------------------- */
struct ctx {
	struct th_tmpdir t; /* the test's own VIOSCOPE_TRACE_DIR; the good capture is t.cap */
	char bad[600];	    /* where the damaged copy is written */
	uint8_t *data;	    /* the good capture */
	size_t len;
	struct layout l;
	const struct scenario *scenario; /* the row this test runs, if it runs one */
};

static uint16_t rd16(const uint8_t *p)
{
	uint16_t v;
	memcpy(&v, p, 2);
	return v;
}

/* The first site of the OBJECT record at META: after the fixed fields, the path and
 * flavour strings, and the providers (u32 slot, u32 nflags, name, flag names). */
static size_t first_site(const uint8_t *meta)
{
	uint32_t nprov;
	memcpy(&nprov, meta + 24, 4);
	size_t off = 40;
	off += 2 + rd16(meta + off); /* path */
	off += 2 + rd16(meta + off); /* flavour */
	for (uint32_t p = 0; p < nprov; p++) {
		uint32_t nflags;
		memcpy(&nflags, meta + off + 4, 4);
		off += 8;
		off += 2 + rd16(meta + off); /* name */
		for (uint32_t f = 0; f < nflags; f++)
			off += 2 + rd16(meta + off);
	}
	return off;
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
			c->l.meta_site = c->l.meta_body + first_site(c->data + c->l.meta_body);
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

/* A fresh good capture in a fresh directory.  *STATE comes in as the test's row
 * (cmocka's initial state; NULL for the tests that are not rows) and goes out as
 * the struct ctx. */
static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof *c);
	if (!c)
		return -1;
	c->scenario = *state;
	*state = c;
	if (th_tmpdir_init(&c->t, "corrupt") < 0) {
		free(c);
		*state = NULL;
		return -1;
	}
	snprintf(c->bad, sizeof c->bad, "%s/bad.vstrace", c->t.dir);

	const char *argv[] = {WORKLOAD_COLD, "kinds", NULL};
	const char *env[] = {"VIOSCOPE_TRACE=verbose:all", "VIOSCOPE_TRACE_KEEP=1", NULL};
	th_dump(&c->t, th_run_workload(&c->t, argv, env, NULL));
	c->data = (uint8_t *)th_read_file(c->t.cap, &c->len);
	if (!c->data || map_layout(c) < 0) {
		teardown(state);
		return -1;
	}
	return 0;
}

/* ---- decoding ------------------------------------------------------------------------- */

/* Decode PATH with the CLI; returns the exit status (128 + signal if it died). */
static int decode(struct ctx *c, const char *path)
{
	const char *argv[] = {VIOSCOPE_CLI, "trace", "decode", path, NULL};
	/* A sanitizer report must not pass for the expected exit status 1. */
	const char *env[] = {c->t.env_dir, "ASAN_OPTIONS=exitcode=86", "UBSAN_OPTIONS=exitcode=86",
			     NULL};
	return th_run(argv, env, c->t.out, c->t.err);
}

/* What decoding some bytes did: its exit status, stderr and stdout (free them). */
struct decoded {
	int rc;
	char *err, *out;
};

/* Write LEN bytes of B as the damaged capture and decode it. */
static struct decoded decode_bytes(struct ctx *c, const uint8_t *b, size_t len)
{
	struct decoded d;
	assert_int_equal(th_write_file(c->bad, b, len), 0);
	d.rc = decode(c, c->bad);
	d.err = th_read_file(c->t.err, NULL);
	d.out = th_read_file(c->t.out, NULL);
	assert_non_null(d.err);
	assert_non_null(d.out);
	return d;
}

static void decoded_free(struct decoded *d)
{
	free(d->err);
	free(d->out);
}

/* Decode the damaged bytes and check the refusal: exit 1, an error on stderr
 * naming "offset WANT_OFF" and containing WHAT (unless NULL), no sanitizer
 * report, nothing on stdout. */
static void expect_refused(struct ctx *c, const char *name, const uint8_t *b, size_t len,
			   size_t want_off, const char *what)
{
	char needle[64];
	struct decoded d = decode_bytes(c, b, len);
	if (d.rc != 1 || !strstr(d.err, "offset") || strstr(d.err, "Sanitizer") ||
	    strstr(d.err, "runtime error") || d.out[0] || (what && !strstr(d.err, what)))
		fail_msg("%s: exit %d, stderr \"%s\", %zu bytes on stdout", name, d.rc, d.err,
			 strlen(d.out));
	snprintf(needle, sizeof needle, "offset %zu ", want_off);
	if (!strstr(d.err, needle))
		fail_msg("%s: error does not name %s: \"%s\"", name, needle, d.err);
	decoded_free(&d);
}

/* A copy of the good capture, for the caller to damage. */
static uint8_t *copy(struct ctx *c)
{
	uint8_t *b = malloc(c->len);
	assert_non_null(b);
	memcpy(b, c->data, c->len);
	return b;
}

/* ---- applying a row ------------------------------------------------------------------- */

static size_t offset_of(const struct ctx *c, struct place p)
{
	size_t base = 0;
	switch (p.at) {
	case FILE_START:
		base = 0;
		break;
	case META_HEADER:
		base = c->l.meta_body - 16;
		break;
	case META_BODY:
		base = c->l.meta_body;
		break;
	case META_MIDDLE:
		base = c->l.meta_body + c->l.meta_size / 2;
		break;
	case META_SITE:
		base = c->l.meta_site;
		break;
	case EVENTS:
		base = c->l.events;
		break;
	case RECORD:
		base = c->l.record;
		break;
	case LOSS:
		base = c->l.loss;
		break;
	case CLOCK:
		base = c->l.clock;
		break;
	case END:
		base = c->l.end;
		break;
	case FILE_END:
		base = c->len;
		break;
	}
	return base + p.plus;
}

static void apply_edit(const struct ctx *c, uint8_t *b, const struct field_edit *e)
{
	static const size_t width[] = {[XOR8] = 1,  [PUT8] = 1,	 [PUT16] = 2,
				       [PUT32] = 4, [PUT64] = 8, [PUT64_TWICE_FILE_LEN] = 8};
	size_t off = offset_of(c, e->where);
	uint16_t v16 = (uint16_t)e->value;
	uint32_t v32 = (uint32_t)e->value;
	uint64_t v64 = e->op == PUT64_TWICE_FILE_LEN ? (uint64_t)c->len * 2 : e->value;

	if (e->op == NO_EDIT)
		return;
	assert_true(off + width[e->op] <= c->len); /* a row that missed the file is a bug */
	switch (e->op) {
	case NO_EDIT:
		break;
	case XOR8:
		b[off] ^= (uint8_t)e->value;
		break;
	case PUT8:
		b[off] = (uint8_t)e->value;
		break;
	case PUT16:
		memcpy(b + off, &v16, 2);
		break;
	case PUT32:
		memcpy(b + off, &v32, 4);
		break;
	case PUT64:
	case PUT64_TWICE_FILE_LEN:
		memcpy(b + off, &v64, 8);
		break;
	}
}

/* The good capture with S's damage (malloc'd); its length in *LEN. */
static uint8_t *damaged_copy(const struct ctx *c, const struct scenario *s, size_t *len)
{
	enum { LOSS_SECTION = 48 }; /* a whole LOSS section: header and payload */
	uint8_t *b = malloc(c->len + LOSS_SECTION);
	assert_non_null(b);
	memcpy(b, c->data, c->len);
	*len = c->len;
	switch (s->damage) {
	case OVERWRITE:
		for (size_t i = 0; i < sizeof s->edit / sizeof s->edit[0]; i++)
			apply_edit(c, b, &s->edit[i]);
		break;
	case CUT:
		*len = offset_of(c, s->cut_at);
		assert_true(*len <= c->len);
		break;
	case APPEND_LOSS_SECTION:
		memcpy(b + c->len, c->data + c->l.loss, LOSS_SECTION);
		*len = c->len + LOSS_SECTION;
		break;
	}
	return b;
}

/* ---- tests ---------------------------------------------------------------------------- */

/* Scenario: the good capture decodes (exit 0, its first event shown): the
 * damaged copies differ from it only by the damage. */
static void test_good_capture_decodes(void **state)
{
	struct ctx *c = *state;
	assert_int_equal(decode(c, c->t.cap), 0);
	char *out = th_read_file(c->t.out, NULL);
	assert_non_null(out);
	assert_non_null(strstr(out, " wl_kinds: str abc\n"));
	assert_non_null(strstr(out, "long xxxx"));
	free(out);
	/* its first record is the string event the edits below rely on */
	assert_int_equal(rd16(c->data + c->l.record + 12), 24);
	assert_int_equal(rd16(c->data + c->l.record + 16), 3);
}

/* Scenario (one test per row of `scenarios`): the damaged capture is refused with
 * the row's offset and text. */
static void test_damaged_capture_is_refused(void **state)
{
	struct ctx *c = *state;
	const struct scenario *s = c->scenario;
	size_t len;
	uint8_t *b = damaged_copy(c, s, &len);
	expect_refused(c, s->name, b, len, offset_of(c, s->want_off), s->want_text);
	free(b);
}

/* Was a bug: the CLOCK section is trusted for the TSC-to-wall-time conversion
 * (src/tracetools/capture.c to_real): ts1 = ts0 + 1 with a 10^18 ns span makes the rate
 * 10^18 and the result an out-of-range long double cast to uint64_t (undefined
 * behaviour: UBSan stops the sanitizer build; elsewhere the times come out as
 * 1970).  Expected: the capture is refused with the offset, or its times are sane
 * (not before the recorded start).  The fuzzer finds this in seconds
 * (fuzz/trace/ubsan.supp). */
static void test_absurd_clock_rate_is_refused(void **state)
{
	struct ctx *c = *state;
	const uint64_t real0 = 1700000000ull * 1000000000ull;
	struct vs_cap_clock k = {.is_tsc = 1,
				 .ts0 = 0,
				 .mono0 = 0,
				 .real0 = real0,
				 .ts1 = 1,
				 .mono1 = 1000000000000000000ull,
				 .real1 = real0};
	char start[64];
	uint8_t *b = copy(c);

	memcpy(b + c->l.clock + 16, &k, sizeof k);
	struct decoded d = decode_bytes(c, b, c->len);
	free(b);
	assert_null(strstr(d.err, "runtime error"));
	assert_null(strstr(d.err, "Sanitizer"));
	if (d.rc == 1) {
		assert_non_null(strstr(d.err, "offset"));
	} else {
		assert_int_equal(d.rc, 0);
		vs_format_walltime(start, sizeof start, real0);
		for (char *l = d.out; *l; l = strchr(l, '\n') + 1) {
			if (strncmp(l, start, 10) < 0) /* the date part */
				fail_msg("time before the start (%.10s): %.80s", start, l);
			if (!strchr(l, '\n'))
				break;
		}
	}
	decoded_free(&d);
}

int main(void)
{
	enum { ROWS = sizeof scenarios / sizeof scenarios[0] };
	struct CMUnitTest tests[1 + ROWS + 1] = {
	    cmocka_unit_test_setup_teardown(test_good_capture_decodes, setup, teardown),
	};
	size_t n = 1;

	/* one test per row, named after it, so a failure names the damage */
	for (size_t i = 0; i < ROWS; i++)
		tests[n++] = (struct CMUnitTest){.name = scenarios[i].name,
						 .test_func = test_damaged_capture_is_refused,
						 .setup_func = setup,
						 .teardown_func = teardown,
						 .initial_state = (void *)&scenarios[i]};
	tests[n++] = (struct CMUnitTest)cmocka_unit_test_setup_teardown(
	    test_absurd_clock_rate_is_refused, setup, teardown);
	return cmocka_run_group_tests_name("trace.corrupt", tests, NULL, NULL);
}
