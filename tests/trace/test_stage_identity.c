/* SPDX-License-Identifier: MIT */
/*
 * Stage sites are known by what they declare (VS_STAGE: provider, stage, field names),
 * not by the wording of their formats.  `trace latency` and `trace decode --chrome`
 * must join a request's stages from sites whose messages were reworded and whose
 * arguments were reordered; captures made before stage sites (no stage list in their
 * metadata) are still read by format, and only they: a capture whose metadata lists its
 * stage sites and lists none is not read by format.  The captures are forged byte by
 * byte (forge.h); tests/trace/data holds a real run recorded before stage sites.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "driver.h"
#include "forge.h"

#define NREQ 16

/* Every stage of a request, reworded, arguments reordered, each field named. */
enum { SUBMIT, KICK, POLL, DONE, POP, BSUB, BDONE, PUSH, NSITES };
static const struct forge_site reworded[NSITES] = {
    [SUBMIT] = {.fmt = "request %#llx (lun %u, op %#x) queued on %u",
		.provider = "initiator",
		.nargs = 4,
		.types = {VS_ARG_U64, VS_ARG_U32, VS_ARG_U32, VS_ARG_U32},
		.stage = "submit",
		.fields = "tag lun op q "},
    [KICK] = {.fmt = "doorbell for %u",
	      .provider = "initiator",
	      .nargs = 1,
	      .types = {VS_ARG_U32},
	      .stage = "kick",
	      .fields = "q "},
    [POLL] = {.fmt = "took entry %u (%u bytes) of vq %u",
	      .provider = "virtio",
	      .nargs = 3,
	      .types = {VS_ARG_U32, VS_ARG_U32, VS_ARG_U32},
	      .stage = "poll",
	      .fields = "head len vq "},
    [DONE] = {.fmt = "completed %#llx, result %d, on %u",
	      .provider = "initiator",
	      .nargs = 3,
	      .types = {VS_ARG_U64, VS_ARG_I32, VS_ARG_U32},
	      .stage = "done",
	      .fields = "tag result q "},
    [POP] = {.fmt = "took %#llx op %#x off q %u (lun bytes %02x %02x)",
	     .provider = "target",
	     .nargs = 5,
	     .types = {VS_ARG_U64, VS_ARG_U32, VS_ARG_U32, VS_ARG_U32, VS_ARG_U32},
	     .stage = "pop",
	     .fields = "tag op q lun_hi lun_lo "},
    [BSUB] = {.fmt = "%#llx handed to the backend",
	      .provider = "scsi",
	      .nargs = 1,
	      .types = {VS_ARG_U64},
	      .stage = "backend_submit",
	      .fields = "tag "},
    [BDONE] = {.fmt = "%#llx back from the backend",
	       .provider = "scsi",
	       .nargs = 1,
	       .types = {VS_ARG_U64},
	       .stage = "backend_done",
	       .fields = "tag "},
    [PUSH] = {.fmt = "answered %#llx on %u",
	      .provider = "target",
	      .nargs = 2,
	      .types = {VS_ARG_U64, VS_ARG_U32},
	      .stage = "push",
	      .fields = "tag q "},
};

/* The same sites as they read before stage sites (the formats `trace latency` knew),
 * with no stage declared. */
static const struct forge_site original[NSITES] = {
    [SUBMIT] = {.fmt = "q %u tag %#llx lun %u op %#x",
		.provider = "initiator",
		.nargs = 4,
		.types = {VS_ARG_U32, VS_ARG_U64, VS_ARG_U32, VS_ARG_U32}},
    [KICK] = {.fmt = "q %u kick", .provider = "initiator", .nargs = 1, .types = {VS_ARG_U32}},
    [POLL] = {.fmt = "driver vq %u used head %u len %u",
	      .provider = "virtio",
	      .nargs = 3,
	      .types = {VS_ARG_U32, VS_ARG_U32, VS_ARG_U32}},
    [DONE] = {.fmt = "q %u tag %#llx done: result %d",
	      .provider = "initiator",
	      .nargs = 3,
	      .types = {VS_ARG_U32, VS_ARG_U64, VS_ARG_I32}},
    [POP] = {.fmt = "q %u head %u tag %#llx lun %02x%02x op %#x",
	     .provider = "target",
	     .nargs = 6,
	     .types = {VS_ARG_U32, VS_ARG_U32, VS_ARG_U64, VS_ARG_U32, VS_ARG_U32, VS_ARG_U32}},
    [BSUB] = {.fmt = "tag %#llx: bio %u submitted",
	      .provider = "scsi",
	      .nargs = 2,
	      .types = {VS_ARG_U64, VS_ARG_U32}},
    [BDONE] = {.fmt = "tag %#llx: bio done, res %d",
	       .provider = "scsi",
	       .nargs = 2,
	       .types = {VS_ARG_U64, VS_ARG_I32}},
    [PUSH] = {.fmt = "q %u tag %#llx lun %u op %#x done: status %u",
	      .provider = "target",
	      .nargs = 5,
	      .types = {VS_ARG_U32, VS_ARG_U64, VS_ARG_U32, VS_ARG_U32, VS_ARG_U32}},
};

/* Request i: its tag, queue, LUN and opcode, and when each stage happened (ns after
 * FORGE_REAL0): submit, kick, pop, backend submit and done, push, poll, done. */
static uint64_t tag_of(unsigned i)
{
	return 0x100000000ull * (i + 1) + 0x30000 + i;
}
static unsigned q_of(unsigned i)
{
	return 2 + i % 3;
}
static unsigned lun_of(unsigned i)
{
	return i % 2;
}
#define OP 0x88 /* READ(16) */
static uint64_t at(unsigned i, unsigned step)
{
	return 1000ull * i + 10ull * step;
}

/* An event of site s of set `sites`: its arguments by name, packed as its types say
 * (the original sites name none: their order is fixed here, as they recorded them). */
static void event(struct fbuf *rec, const struct forge_site *sites, unsigned s, uint64_t ts,
		  unsigned i)
{
	static const char *const order[NSITES] = {[SUBMIT] = "q tag lun op ",
						  [KICK] = "q ",
						  [POLL] = "vq head len ",
						  [DONE] = "q tag result ",
						  [POP] = "q head tag lun_hi lun_lo op ",
						  [BSUB] = "tag bio ",
						  [BDONE] = "tag res ",
						  [PUSH] = "q tag lun op status "};
	const char *fields = sites[s].fields ? sites[s].fields : order[s];
	uint8_t args[8 * VS_TRACE_MAX_ARGS];
	size_t len = 0;
	char name[32];
	for (unsigned a = 0; a < sites[s].nargs; a++) {
		size_t n = strcspn(fields, " ");
		snprintf(name, sizeof name, "%.*s", (int)n, fields);
		fields += n + 1;
		uint64_t v = 0;
		if (!strcmp(name, "tag"))
			v = tag_of(i);
		else if (!strcmp(name, "q") || !strcmp(name, "vq"))
			v = q_of(i);
		else if (!strcmp(name, "lun"))
			v = lun_of(i);
		else if (!strcmp(name, "lun_hi"))
			v = 0x40; /* SAM flat space, LUN < 256 */
		else if (!strcmp(name, "lun_lo"))
			v = lun_of(i);
		else if (!strcmp(name, "op"))
			v = OP;
		uint32_t narrow = (uint32_t)v;
		bool wide = sites[s].types[a] == VS_ARG_U64;
		memcpy(args + len, wide ? (const void *)&v : (const void *)&narrow, wide ? 8 : 4);
		len += wide ? 8 : 4;
	}
	forge_record(rec, ts, forge_site_id(s), args, len);
}

/* A capture of NREQ requests, one at a time, both sides (one process, two threads). */
static void forge_run(const char *path, const struct forge_site *sites, bool staged)
{
	struct fbuf meta = {0}, drv = {0}, dev = {0}, cap = {0};
	(staged ? forge_meta_staged : forge_meta)(&meta, sites, NSITES);
	forge_cap_begin(&cap, &meta, "/forged/exe", "all");
	for (unsigned i = 0; i < NREQ; i++) {
		event(&drv, sites, SUBMIT, at(i, 0), i);
		event(&drv, sites, KICK, at(i, 1), i);
		event(&dev, sites, POP, at(i, 2), i);
		event(&dev, sites, BSUB, at(i, 3), i);
		event(&dev, sites, BDONE, at(i, 4), i);
		event(&dev, sites, PUSH, at(i, 5), i);
		event(&drv, sites, POLL, at(i, 6), i);
		event(&drv, sites, DONE, at(i, 7), i);
	}
	forge_cap_events(&cap, 1, 0, 1, "driver", drv.p, drv.len);
	forge_cap_events(&cap, 2, 1, 1, "device", dev.p, dev.len);
	forge_cap_end(&cap);
	assert_int_equal(th_write_file(path, cap.p, cap.len), 0);
	fb_free(&meta);
	fb_free(&drv);
	fb_free(&dev);
	fb_free(&cap);
}

/* Every request joined, each of its instants where the capture put it, its queue, LUN
 * and opcode from the submit event (driver) and the pop event (device). */
static void assert_all_joined(const char *path)
{
	static const enum vs_lat_when when[] = {VS_LAT_SUBMIT, VS_LAT_KICK,  VS_LAT_POP,
						VS_LAT_BSUB,   VS_LAT_BDONE, VS_LAT_PUSH,
						VS_LAT_POLL,   VS_LAT_DONE};
	struct vs_lat_set set;
	char why[512];
	if (vs_latency_collect(&path, 1, &set, why, sizeof why) < 0)
		fail_msg("%s", why);
	assert_true(set.driver && set.device);
	assert_int_equal(set.n, NREQ);
	for (unsigned i = 0; i < NREQ; i++) {
		const struct vs_lat_req *r = &set.r[i];
		assert_int_equal(r->tag, tag_of(i));
		assert_int_equal(r->q, q_of(i));
		assert_int_equal(r->lun, lun_of(i));
		assert_int_equal(r->op, OP);
		for (unsigned w = 0; w < sizeof when / sizeof when[0]; w++)
			assert_int_equal(r->t[when[w]], FORGE_REAL0 + at(i, w));
	}
	free(set.r);
}

/* How many flows (driver -> device -> driver arrows) `trace decode --chrome` draws. */
static unsigned chrome_flows(const struct th_tmpdir *td, const char *path)
{
	const struct vs_decode_opts o = {.chrome = true, .to_s = -1};
	char why[512];
	FILE *out = fopen(td->out, "w");
	assert_non_null(out);
	if (vs_trace_decode_many(&path, 1, &o, out, why, sizeof why) < 0)
		fail_msg("%s", why);
	fclose(out);
	char *json = th_read_file(td->out, NULL);
	assert_non_null(json);
	unsigned starts = 0, finishes = 0;
	for (const char *p = json; (p = strstr(p, "\"ph\":\"s\"")); p++)
		starts++;
	for (const char *p = json; (p = strstr(p, "\"ph\":\"f\"")); p++)
		finishes++;
	free(json);
	assert_int_equal(starts, finishes);
	return starts;
}

static void test_reworded_stage_sites_still_join(void **state)
{
	struct th_tmpdir *td = *state;
	forge_run(td->cap, reworded, true);
	assert_all_joined(td->cap);
	assert_int_equal(chrome_flows(td, td->cap), NREQ);
}

static void test_capture_before_stage_sites_joins_by_format(void **state)
{
	struct th_tmpdir *td = *state;
	forge_run(td->cap, original, false);
	assert_all_joined(td->cap);
	assert_int_equal(chrome_flows(td, td->cap), NREQ);
}

/* The metadata lists the object's stage sites, and there are none: sites that read like
 * the old stage events are not taken for them. */
static void test_declared_capture_is_not_read_by_format(void **state)
{
	struct th_tmpdir *td = *state;
	struct vs_lat_set set;
	char why[512];
	forge_run(td->cap, original, true);
	const char *path = td->cap;
	int rc = vs_latency_collect(&path, 1, &set, why, sizeof why);
	if (rc == 0) {
		assert_int_equal(set.n, 0);
		free(set.r);
	}
	assert_int_equal(chrome_flows(td, td->cap), 0);
}

/* A real run recorded before stage sites (tests/trace/data/README.md): `trace latency`
 * still joins the driver's and the device's captures by format, to the figures the
 * tools of that time gave (v2-latency.json, byte for byte). */
static void test_recorded_capture_before_stage_sites_joins(void **state)
{
	struct th_tmpdir *td = *state;
	const char *paths[] = {STAGE_DATA_DIR "/v2-initiator.vst", STAGE_DATA_DIR "/v2-target.vst"};
	const struct vs_latency_opts o = {.json = true, .by = -1};
	char why[512];
	FILE *out = fopen(td->out, "w");
	assert_non_null(out);
	if (vs_trace_latency(paths, 2, &o, out, why, sizeof why) < 0)
		fail_msg("%s", why);
	fclose(out);
	char *got = th_read_file(td->out, NULL);
	char *want = th_read_file(STAGE_DATA_DIR "/v2-latency.json", NULL);
	assert_non_null(got);
	assert_non_null(want);
	assert_non_null(strstr(want, "\"requests\":29,"));
	assert_string_equal(got, want);
	free(got);
	free(want);
}

static int setup(void **state)
{
	return th_tmpdir_setup(state, "stage-identity");
}

static int teardown(void **state)
{
	return th_tmpdir_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_reworded_stage_sites_still_join, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_capture_before_stage_sites_joins_by_format, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_declared_capture_is_not_read_by_format, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_recorded_capture_before_stage_sites_joins, setup,
					    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
