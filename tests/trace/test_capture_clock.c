/* SPDX-License-Identifier: MIT */
/*
 * One clock for several captures (vs_capture_share_clock, what `trace latency` does):
 * two processes of one host record the same TSC, but each capture calibrates it on its
 * own (anchored at its process's start, its rate averaged over its own span), and two
 * calibrations can disagree by more than a fast request lasts.  Forged captures
 * (forge.h) with calibrations set apart on purpose.
 */
#define _GNU_SOURCE
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
    {.fmt = "n=%u", .func = "tick", .nargs = 1, .types = {VS_ARG_U32}},
};

/* TSC ticks of the event every capture holds: 2 s after both anchors. */
#define EVENT_TS 6000000000ull

/* A calibration of a 3 GHz TSC anchored at ts 0: real0 (ns) and the rate error (ppm)
 * its averaging picked up. */
static struct vs_cap_clock tsc_clock(uint64_t real0, int ppm)
{
	uint64_t span_ts = 30000000000ull; /* 10 s of ticks */
	uint64_t span_ns = 10000000000ull + (uint64_t)((int64_t)ppm * 10000);
	return (struct vs_cap_clock){.is_tsc = 1,
				     .ts0 = 0,
				     .mono0 = 1000,
				     .real0 = real0,
				     .ts1 = span_ts,
				     .mono1 = 1000 + span_ns,
				     .real1 = real0 + span_ns};
}

/* A capture at `path` of one event at EVENT_TS, its CLOCK section `k`. */
static void forge_one(const char *path, const struct vs_cap_clock *k)
{
	struct fbuf meta = {0}, cap = {0}, rec = {0};
	uint32_t n = 7;
	forge_meta(&meta, sites, 1);
	forge_cap_begin(&cap, &meta, "/forged/exe", "all");
	forge_record(&rec, EVENT_TS, forge_site_id(0), &n, sizeof n);
	forge_cap_events(&cap, 1, 0, 1, "t", rec.p, rec.len);
	forge_cap_end_clock(&cap, k);
	assert_int_equal(th_write_file(path, cap.p, cap.len), 0);
	fb_free(&meta);
	fb_free(&cap);
	fb_free(&rec);
}

static int first_ns(const struct vs_cap_event *ev, void *opaque)
{
	if (ev->site)
		*(uint64_t *)opaque = ev->real_ns;
	return ev->site != NULL;
}

/* Wall-clock ns of the capture's event, read with `shared` if given (and whether the
 * capture took it). */
static uint64_t event_ns(const char *path, const struct vs_cap_clock *shared, bool *took)
{
	struct vs_capture *c;
	char why[256];
	uint64_t ns = 0;
	if (vs_capture_open(&c, path, why, sizeof why) < 0)
		fail_msg("%s", why);
	if (shared)
		*took = vs_capture_share_clock(c, shared);
	assert_int_equal(vs_capture_walk(c, first_ns, &ns, why, sizeof why), 1);
	vs_capture_close(c);
	return ns;
}

/* Scenario: the same TSC instant in two captures whose calibrations differ (the second
 * anchored 3 µs later and its rate 20 ppm off): each on its own puts the instant
 * microseconds apart; read with the first's calibration, the second puts it exactly
 * where the first does. */
static void test_shared_clock_puts_one_instant_at_one_time(void **state)
{
	const struct th_tmpdir *td = *state;
	char a[700], b[700];
	snprintf(a, sizeof a, "%s/a.vst", td->dir);
	snprintf(b, sizeof b, "%s/b.vst", td->dir);
	struct vs_cap_clock ka = tsc_clock(FORGE_REAL0, 0), kb = tsc_clock(FORGE_REAL0 + 3000, 20);
	forge_one(a, &ka);
	forge_one(b, &kb);

	uint64_t in_a = event_ns(a, NULL, NULL), in_b = event_ns(b, NULL, NULL);
	assert_int_equal(in_a, FORGE_REAL0 + 2000000000ull);
	/* 3 µs of anchor and 20 ppm of 2 s (40 µs) apart: the test can tell */
	assert_true(in_b > in_a + 40000);

	bool took = false;
	assert_int_equal(event_ns(b, &ka, &took), in_a);
	assert_true(took);
}

/* Scenario: a capture timed by CLOCK_MONOTONIC keeps its own calibration (its
 * timestamps are not TSC ticks), and so does a TSC capture offered a monotonic one. */
static void test_monotonic_captures_keep_their_own_clock(void **state)
{
	const struct th_tmpdir *td = *state;
	char a[700], m[700];
	snprintf(a, sizeof a, "%s/a.vst", td->dir);
	snprintf(m, sizeof m, "%s/m.vst", td->dir);
	struct vs_cap_clock ka = tsc_clock(FORGE_REAL0 + 5000, 0), km = forge_mono_clock();
	forge_one(a, &ka);
	forge_one(m, &km);
	uint64_t own_m = event_ns(m, NULL, NULL), own_a = event_ns(a, NULL, NULL);
	bool took = true;
	assert_int_equal(event_ns(m, &ka, &took), own_m);
	assert_false(took);
	took = true;
	assert_int_equal(event_ns(a, &km, &took), own_a);
	assert_false(took);
}

static int setup(void **state)
{
	return th_tmpdir_setup(state, "capture-clock");
}

static int teardown(void **state)
{
	return th_tmpdir_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_shared_clock_puts_one_instant_at_one_time, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_monotonic_captures_keep_their_own_clock, setup,
					    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
