/* SPDX-License-Identifier: MIT */
/*
 * `vioscope trace latency` on a real run: `vioscope-all bench` drives the target
 * through the user-space initiator, both recorded (verbose:all), against a null LUN
 * whose test gate holds three reads (the 11th to the 13th, gate=read:11-13,
 * src/backend/gate.c) until this test lets each go, HOLD_MS after it was held: early in
 * the run, since a loaded machine may make few requests in the bench's second, but after
 * the first ones have set their threads up.  One request at a time (q1t1), so nothing
 * queues behind a held read.  The holds must show in the backend stage of the held
 * requests and in no other stage of theirs, and they must be the slowest requests.
 *
 * Every figure is compared with the holds as this test measured them (from the gate's
 * "held" to its "release"), never with a fixed time: each held request's backend stage
 * spans at least half its hold (the rest is the margin for the worker's trace record,
 * taken just after the gate held the bio), its other stages less than half its backend
 * stage.  (A delay held one bio in 4 for 50 ms before, and the test wanted every other
 * stage under 50 ms: on a loaded machine one was 118 ms.)
 */
#define _GNU_SOURCE
#include <glob.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "deadline.h"
#include "driver.h"
#include "gate.h"

#define HELD	3   /* reads held by the gate */
#define HOLD_MS 300 /* how long each is held: the latency the test plants */

static char dir[512], initiator_cap[700], target_cap[700], out[700], err[700];
static uint64_t hold_ns; /* the shortest of the holds, as measured */

/* The gate's other end, on a thread of its own while the bench runs: each time the gate
 * holds a read, keep it HOLD_MS and let it go.  Failures go to the test thread. */
struct holder {
	int lfd;
	pthread_t thread;
	uint64_t held_ns[HELD];
	unsigned holds;
	char failure[256];
};

static void *hold_main(void *arg)
{
	struct holder *h = arg;
	int fd = gate_accept(h->lfd, 60000);

	if (fd < 0) {
		snprintf(h->failure, sizeof h->failure, "the backend never connected to its gate");
		return NULL;
	}
	while (h->holds < HELD) {
		unsigned held, total;
		if (gate_next(fd, &held, &total, 60000)) {
			snprintf(h->failure, sizeof h->failure, "the gate held %u of %u reads",
				 h->holds, HELD);
			break;
		}
		if (!held)
			continue;
		uint64_t t0 = mono_ns();
		/* The stimulus, not a synchronization: what follows is measured. */
		nanosleep(&(struct timespec){.tv_nsec = HOLD_MS * 1000000L}, NULL);
		h->held_ns[h->holds++] = mono_ns() - t0;
		if (line_send(fd, "release 1\n")) {
			snprintf(h->failure, sizeof h->failure, "the gate went away");
			break;
		}
	}
	close(fd); /* the gate opens */
	return NULL;
}

/* One recorded run for every test (it takes a second or two). */
static int record_run(void **state)
{
	(void)state;
	if (tmpdir_make(dir, sizeof dir, NULL, "latency") < 0)
		return -1;
	snprintf(out, sizeof out, "%s/out.txt", dir);
	snprintf(err, sizeof err, "%s/err.txt", dir);
	char env_dir[600], gate_path[600], spec[700];
	snprintf(env_dir, sizeof env_dir, "VIOSCOPE_TRACE_DIR=%s", dir);
	snprintf(gate_path, sizeof gate_path, "%s/gate.sock", dir);
	snprintf(spec, sizeof spec, "null=64M,gate=read:11-%u,gate-sock=%s", 10 + HELD, gate_path);
	struct holder h = {.lfd = gate_listen(gate_path)};
	if (h.lfd < 0 || pthread_create(&h.thread, NULL, hold_main, &h))
		return -1;
	const char *env[] = {env_dir, "VIOSCOPE_TRACE=verbose:all", "VIOSCOPE_TRACE_RING=8M", NULL};
	const char *argv[] = {VIOSCOPE_ALL, "bench", "--target", spec, "--profile", "rnd4k-q1t1",
			      "--time",	    "1",     "--record", dir,  NULL};
	int rc = th_run(argv, env, out, err);
	pthread_join(h.thread, NULL);
	close(h.lfd);
	unlink(gate_path);
	if (rc != 0 || h.failure[0]) {
		fprintf(stderr, "bench: %s; its output is in %s\n",
			h.failure[0] ? h.failure : "failed", dir);
		return -1;
	}
	hold_ns = UINT64_MAX;
	for (unsigned i = 0; i < HELD; i++)
		hold_ns = h.held_ns[i] < hold_ns ? h.held_ns[i] : hold_ns;
	glob_t g;
	char pattern[600];
	snprintf(pattern, sizeof pattern, "%s/initiator-*.vst", dir);
	if (glob(pattern, 0, NULL, &g) || g.gl_pathc != 1)
		return -1;
	snprintf(initiator_cap, sizeof initiator_cap, "%s", g.gl_pathv[0]);
	globfree(&g);
	snprintf(pattern, sizeof pattern, "%s/target-*.vst", dir);
	if (glob(pattern, 0, NULL, &g) || g.gl_pathc != 1)
		return -1;
	snprintf(target_cap, sizeof target_cap, "%s", g.gl_pathv[0]);
	globfree(&g);
	return 0;
}

static int remove_run(void **state)
{
	(void)state;
	tmpdir_remove(dir);
	return 0;
}

/* `vioscope trace latency ARGS...` with stdout to `out`: must exit 0. */
static char *latency(const char *a1, const char *a2, const char *a3, const char *a4, const char *a5)
{
	const char *argv[] = {VIOSCOPE_CLI, "trace", "latency", a1, a2, a3, a4, a5, NULL};
	assert_int_equal(th_run(argv, NULL, out, err), 0);
	size_t len;
	char *text = th_read_file(out, &len);
	assert_non_null(text);
	return text;
}

/* A stage's figure from --json output, or -1 when the stage is not there. */
static long long figure(const char *json, const char *stage, const char *key)
{
	char needle[128];
	snprintf(needle, sizeof needle, "\"stage\":\"%s\",", stage);
	const char *p = strstr(json, needle);
	if (!p)
		return -1;
	const char *end = strchr(p, '}');
	snprintf(needle, sizeof needle, "\"%s\":", key);
	const char *k = strstr(p, needle);
	assert_true(k && k < end);
	return strtoll(k + strlen(needle), NULL, 10);
}

/* A request of `--slow N --json`: its stages (-1 where it has none) and whether the
 * gate's "held" line is among its threads' events (it is one of the held reads). */
static const char *const chain[] = {"submit>kick",  "kick>pop",	 "pop>backend", "backend",
				    "backend>push", "push>poll", "poll>done"};
#define NCHAIN (sizeof chain / sizeof chain[0])
struct slow_req {
	long long stage[NCHAIN], total;
	bool held;
};

static long long slow_figure(const char *from, const char *end, const char *stage)
{
	char needle[64];
	snprintf(needle, sizeof needle, "\"%s_ns\":", stage);
	const char *k = strstr(from, needle);
	return k && k < end ? strtoll(k + strlen(needle), NULL, 10) : -1;
}

static unsigned slow_list(const char *json, struct slow_req *r, unsigned max)
{
	const char *p = strstr(json, "\"slow\":[");
	unsigned n = 0;
	assert_non_null(p);
	for (p = strstr(p, "{\"tag\":"); p && n < max; n++) {
		const char *next = strstr(p + 1, "{\"tag\":");
		const char *end = next ? next : p + strlen(p);
		for (unsigned s = 0; s < NCHAIN; s++)
			r[n].stage[s] = slow_figure(p, end, chain[s]);
		r[n].total = slow_figure(p, end, "total");
		const char *g = strstr(p, "gate: read bio ");
		r[n].held = g && g < end && strstr(g, " held") && strstr(g, " held") < end;
		p = next;
	}
	return n;
}

/* A held request: its backend stage spans its hold, no other stage of it does. */
static void assert_hold_in_backend_only(const struct slow_req *r)
{
	long long backend = r->stage[3];
	if (backend < (long long)hold_ns / 2)
		fail_msg("a held request's backend stage is %lld ns, its hold %llu ns", backend,
			 (unsigned long long)hold_ns);
	for (unsigned s = 0; s < NCHAIN; s++)
		if (s != 3 && r->stage[s] >= backend / 2)
			fail_msg("stage %s of a held request is %lld ns (its backend stage %lld): "
				 "the hold leaked into it",
				 chain[s], r->stage[s], backend);
	assert_true(r->total >= (long long)hold_ns / 2);
}

/* Scenario: both sides joined.  The backend stage holds the holds (its max at least half
 * the shortest hold, its median far below); of the six slowest requests, the three held
 * ones (and only they) carry the gate's line, each with the hold in its backend stage and
 * in no other; the totals include it. */
static void test_delay_shows_in_backend_stage_only(void **state)
{
	(void)state;
	char *json = latency("--json", "--slow", "6", initiator_cap, target_cap);
	assert_non_null(strstr(json, "\"sides\":\"both\""));
	/* what every --json opens with: the build, the time, the command line */
	assert_non_null(strstr(json, "{\"vioscope\": {\"version\": "));
	assert_non_null(strstr(json, "\"argv\": ["));
	assert_true(figure(json, "backend", "count") >= 8);
	assert_true(figure(json, "backend", "max_ns") >= (long long)hold_ns / 2);
	assert_true(figure(json, "backend", "p50_ns") < (long long)hold_ns / 10);
	struct slow_req r[6];
	unsigned n = slow_list(json, r, 6), held = 0;
	assert_int_equal(n, 6);
	for (unsigned i = 0; i < n; i++)
		if (r[i].held) {
			held++;
			assert_hold_in_backend_only(&r[i]);
		}
	assert_int_equal(held, HELD);
	/* the totals include it */
	assert_true(figure(json, "total", "max_ns") >= (long long)hold_ns / 2);
	assert_int_equal(figure(json, "kick>poll", "count"), -1); /* split by the device's */
	/* Every driver request finds its device timeline, also one the polling device
	 * popped before the driver recorded its submit (tags are unique per run). */
	assert_int_equal(figure(json, "device", "count"), figure(json, "total", "count"));
	/* The device records its push before publishing it and both processes' clocks are
	 * calibrated tightly, so no driver poll appears to precede the device's push. */
	assert_int_equal(figure(json, "push>poll", "count"), figure(json, "total", "count"));
	free(json);
}

/* Scenario: --slow 3: the three slowest requests are the held ones (the gate's line among
 * their events), their backend stage spanning the hold, each with the events of its
 * threads meanwhile. */
static void test_slow_requests_are_the_delayed_ones(void **state)
{
	(void)state;
	char *json = latency("--json", "--slow", "3", initiator_cap, target_cap);
	struct slow_req r[3];
	unsigned n = slow_list(json, r, 3);
	if (n != 3)
		fail_msg("%u of the 3 slowest listed: %s", n, strstr(json, "\"slow\":["));
	for (unsigned i = 0; i < n; i++) {
		if (!r[i].held)
			fail_msg("the %u. slowest request was not held: %s", i + 1,
				 strstr(json, "\"slow\":["));
		assert_hold_in_backend_only(&r[i]);
	}
	/* what else the threads did: at least the request's own stage events */
	assert_non_null(strstr(strstr(json, "\"slow\":["), "bio done, res 0"));
	free(json);

	char *text = latency("--slow", "1", initiator_cap, target_cap, NULL);
	assert_non_null(strstr(text, "\n#1 tag "));
	const char *b = strstr(strstr(text, "\n#1 tag "), " backend ");
	assert_non_null(b);
	assert_true(strtod(b + 9, NULL) >= hold_ns / 2 / 1e3); /* µs */
	free(text);
}

/* Scenario: one side only shows that side's stages.  Every request has the driver's
 * view of the device, kicked or not (a request published while the device polls needs
 * no kick; its kick>poll runs from its submit), so the held ones show there. */
static void test_one_side_shows_its_stages(void **state)
{
	(void)state;
	char *drv = latency("--json", initiator_cap, NULL, NULL, NULL);
	assert_non_null(strstr(drv, "\"sides\":\"driver\""));
	assert_true(figure(drv, "kick>poll", "max_ns") >= (long long)hold_ns / 2);
	assert_int_equal(figure(drv, "kick>poll", "count"), figure(drv, "total", "count"));
	assert_int_equal(figure(drv, "backend", "count"), -1);
	assert_int_equal(figure(drv, "pop>backend", "count"), -1);
	free(drv);
	char *dev = latency("--json", target_cap, NULL, NULL, NULL);
	assert_non_null(strstr(dev, "\"sides\":\"device\""));
	assert_true(figure(dev, "backend", "max_ns") >= (long long)hold_ns / 2);
	assert_int_equal(figure(dev, "total", "count"), -1);
	assert_int_equal(figure(dev, "submit>kick", "count"), -1);
	free(dev);
}

/* Scenario: --by op: a table per opcode, READ(16) among them, named. */
static void test_by_op_names_the_groups(void **state)
{
	(void)state;
	char *text = latency("--by", "op", initiator_cap, target_cap, NULL);
	assert_non_null(strstr(text, "\nop READ(16) (µs):\n"));
	free(text);
}

/* Scenario: --svg draws the stage distributions: a well-formed standalone SVG
 * (xmllint), one row per stage with its name, and the tables still printed. */
static void test_svg_is_well_formed_with_a_row_per_stage(void **state)
{
	(void)state;
	char svg[700];
	snprintf(svg, sizeof svg, "%s/stages.svg", dir);
	char *text = latency("--svg", svg, initiator_cap, target_cap, NULL);
	assert_non_null(strstr(text, "\nbackend "));
	free(text);
	if (access("/usr/bin/xmllint", X_OK) == 0) {
		const char *argv[] = {"/usr/bin/xmllint", "--noout", svg, NULL};
		assert_int_equal(th_run(argv, NULL, out, err), 0);
	} else {
		fprintf(stderr,
			"xmllint not installed (scripts/deps.sh): well-formedness not checked\n");
	}
	size_t len;
	char *doc = th_read_file(svg, &len);
	assert_non_null(doc);
	assert_non_null(strstr(doc, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
	static const char *const rows[] = {">submit>kick<", ">kick>pop<",     ">pop>backend<",
					   ">backend<",	    ">backend>push<", ">push>poll<",
					   ">poll>done<",   ">device<",	      ">total<"};
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		if (!strstr(doc, rows[i]))
			fail_msg("no row %s in the SVG", rows[i]);
	free(doc);
}

/* Lines of `vioscope trace decode ARGS...` (stdout to `out`, must exit 0). */
static char *decode(const char *a1, const char *a2, const char *a3)
{
	const char *argv[] = {VIOSCOPE_CLI, "trace", "decode", a1, a2, a3, NULL};
	assert_int_equal(th_run(argv, NULL, out, err), 0);
	size_t len;
	char *text = th_read_file(out, &len);
	assert_non_null(text);
	return text;
}

/* How many lines of `text` contain `needle`.  Line by line with memmem: strstr from
 * each match on would scan the rest of the text every time under ASan (its strstr
 * measures the whole haystack first). */
static unsigned lines_with(const char *text, const char *needle)
{
	unsigned n = 0;
	size_t nlen = strlen(needle);
	for (const char *line = text; *line;) {
		const char *end = strchr(line, '\n');
		size_t len = end ? (size_t)(end - line) : strlen(line);
		if (memmem(line, len, needle, nlen))
			n++;
		line += len + (end != NULL);
	}
	return n;
}

/* The stage events of the verbose:all run, by what their lines say: each is a stage site
 * (VS_VERBOSE_HP_ALSO(..., STAGE, ...)), none of the others is. */
static const char *const stage_says[] = {" op READ(16) lba ", "q 2 kick",	  " used head ",
					 " done: response",   " bio 0 submitted", " bio done, res",
					 ": q 2 head "};
/* The target's other hot events: the CDB (scsi) and the notify pass (target). */
static const char *const other_says[] = {" cdb READ(16) ", " used idx "};

/* Scenario: `trace decode --flag stage` on the verbose:all captures keeps the stage
 * events (sites under two flags: IO and STAGE, SCSI and STAGE, ...) and leaves out the
 * other hot events of the same areas: the CDB, the used ring push, the notify pass. */
static void test_decode_flag_stage_keeps_stage_events_only(void **state)
{
	(void)state;
	for (int side = 0; side < 2; side++) {
		const char *cap = side ? target_cap : initiator_cap;
		char *all = decode(cap, NULL, NULL);
		char *stage = decode("--flag", "stage", cap);
		unsigned kept = 0;
		for (size_t i = 0; i < sizeof stage_says / sizeof stage_says[0]; i++) {
			unsigned n = lines_with(stage, stage_says[i]);
			if (n != lines_with(all, stage_says[i]))
				fail_msg("%s: '%s' on %u lines with --flag stage, %u without", cap,
					 stage_says[i], n, lines_with(all, stage_says[i]));
			kept += n;
		}
		assert_true(kept >= 8);
		for (size_t i = 0; i < sizeof other_says / sizeof other_says[0]; i++)
			if (lines_with(stage, other_says[i]))
				fail_msg("%s: '%s' kept by --flag stage", cap, other_says[i]);
		free(stage);
		free(all);
	}
	/* the target's other events are there without the filter: the test can tell */
	char *all = decode(target_cap, NULL, NULL);
	for (size_t i = 0; i < sizeof other_says / sizeof other_says[0]; i++)
		assert_true(lines_with(all, other_says[i]) >= 8);
	free(all);
}

/* Scenario: a run recorded with VIOSCOPE_TRACE=verbose:stage holds the stage events and
 * no other hot event (no CDB, no push, no notify pass), and `trace latency` joins both
 * sides from it as from a verbose:all run: every driver request has its device timeline. */
static void test_verbose_stage_run_is_enough_for_latency(void **state)
{
	(void)state;
	char sdir[600], env_dir[700], icap[700], tcap[700], pattern[700];
	snprintf(sdir, sizeof sdir, "%s/stage", dir);
	snprintf(env_dir, sizeof env_dir, "VIOSCOPE_TRACE_DIR=%s", dir);
	const char *env[] = {env_dir, "VIOSCOPE_TRACE=verbose:stage", "VIOSCOPE_TRACE_RING=8M",
			     NULL};
	const char *argv[] = {VIOSCOPE_ALL, "bench",	  "--target", "null=64M",
			      "--profile",  "rnd4k-q4t1", "--time",   "0.3",
			      "--record",   sdir,	  NULL};
	assert_int_equal(th_run(argv, env, out, err), 0);
	const char *side[] = {"initiator", "target"};
	char *cap[] = {icap, tcap};
	for (int i = 0; i < 2; i++) {
		glob_t g;
		snprintf(pattern, sizeof pattern, "%s/%s-*.vst", sdir, side[i]);
		assert_int_equal(glob(pattern, 0, NULL, &g), 0);
		assert_int_equal(g.gl_pathc, 1);
		snprintf(cap[i], 700, "%s", g.gl_pathv[0]);
		globfree(&g);
	}
	char *text = decode(tcap, NULL, NULL);
	assert_true(lines_with(text, " bio done, res") >= 8);
	for (size_t i = 0; i < sizeof other_says / sizeof other_says[0]; i++)
		if (lines_with(text, other_says[i]))
			fail_msg("'%s' recorded under verbose:stage", other_says[i]);
	free(text);
	char *json = latency("--json", icap, tcap, NULL, NULL);
	assert_non_null(strstr(json, "\"sides\":\"both\""));
	assert_true(figure(json, "total", "count") >= 8);
	assert_int_equal(figure(json, "device", "count"), figure(json, "total", "count"));
	/* every READ went to the backend (the initiator's discovery commands did not) */
	assert_true(figure(json, "backend", "count") + 16 >= figure(json, "total", "count"));
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_delay_shows_in_backend_stage_only),
	    cmocka_unit_test(test_slow_requests_are_the_delayed_ones),
	    cmocka_unit_test(test_one_side_shows_its_stages),
	    cmocka_unit_test(test_by_op_names_the_groups),
	    cmocka_unit_test(test_svg_is_well_formed_with_a_row_per_stage),
	    cmocka_unit_test(test_decode_flag_stage_keeps_stage_events_only),
	    cmocka_unit_test(test_verbose_stage_run_is_enough_for_latency),
	};
	return cmocka_run_group_tests(tests, record_run, remove_run);
}
