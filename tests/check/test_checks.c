/* SPDX-License-Identifier: MIT */
/*
 * `vioscope check verify` and `stress` as a user runs them, and the sector format they rest
 * on.  Each fault the backend can inject (drop-write, misdirect-write, stale-read) must be
 * caught and named for what it is, and only that; a clean target and a clean file pass;
 * a short stress run passes with every disruption having happened.
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

#include "check/check.h"
#include "run.h"

/* The count after "NAME " in verify's "verified ..." line (-1 when absent). */
static long count_of(const char *out, const char *name)
{
	const char *p = strstr(out, "  verified  ");
	char key[64];

	if (!p)
		return -1;
	snprintf(key, sizeof(key), "%s ", name);
	p = strstr(p, key);
	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/* verify on a RAM LUN with one fault armed (NULL: none).  One queue at depth 1 and a fixed
 * seed make the request sequence the same every run (deeper, which ranges are free depends
 * on timing), so the Kth write and what later touches it are always the same; 100 writes,
 * not a time, so that a busy machine makes as many (a fault armed every 20th write fires
 * in any run). */
static int verify_with(const char *fault, char **out)
{
	char spec[128];
	char *argv[] = {VIOSCOPE_BIN, "check",	  "verify", "--target", spec, "--time",
			"600",	      "--writes", "100",    "--queues", "1",  "--depth",
			"1",	      "--seed",	  "7",	    NULL};

	snprintf(spec, sizeof(spec), "ram=16M%s%s", fault ? "," : "", fault ? fault : "");
	return run_capture(argv, out, 120);
}

static void expect_only(const char *out, const char *kind)
{
	static const char *const kinds[] = {"lost", "stale", "misdirected", "torn"};

	for (unsigned i = 0; i < 4; i++) {
		long n = count_of(out, kinds[i]);

		assert_true(n >= 0);
		if (kind && !strcmp(kinds[i], kind))
			assert_true(n > 0);
		else
			assert_int_equal(n, 0);
	}
}

static void test_verify_clean(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(verify_with(NULL, &out), 0);
	assert_non_null(strstr(out, "PASS"));
	expect_only(out, NULL);
	free(out);
}

static void test_verify_names_dropped_write(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(verify_with("drop-write=20", &out), 1);
	expect_only(out, "lost");
	assert_non_null(strstr(out, "lost write: "));
	assert_non_null(strstr(out, "never reached the medium"));
	free(out);
}

static void test_verify_names_misdirected_write(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(verify_with("misdirect-write=20", &out), 1);
	assert_true(count_of(out, "misdirected") > 0);
	assert_int_equal(count_of(out, "stale"), 0);
	assert_int_equal(count_of(out, "torn"), 0);
	assert_non_null(strstr(out, "holds the block written for sector"));
	free(out);
}

static void test_verify_names_stale_read(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(verify_with("stale-read=20", &out), 1);
	expect_only(out, "stale");
	assert_non_null(strstr(out, "the first read returned older data"));
	free(out);
}

/* --device: the same check on a file through io_uring. */
static void test_verify_device_file(void **state)
{
	char path[] = "/var/tmp/vs-verify-dev-XXXXXX";
	int fd = mkstemp(path);
	char *out;
	char *argv[] = {VIOSCOPE_BIN, "check", "verify",	 "--device", path,
			"--time",     "1",     "--destroy-data", NULL};

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 32 << 20), 0);
	close(fd);
	assert_int_equal(run_capture(argv, &out, 120), 0);
	assert_non_null(strstr(out, "io_uring"));
	expect_only(out, NULL);
	unlink(path);
	free(out);
}

/* A short stress run: every disruption happened, nothing wrong, every request accounted. */
static void test_stress_short(void **state)
{
	char *out;
	char *argv[] = {VIOSCOPE_BIN, "check", "stress", "--time", "8", "--size", "32M", NULL};

	(void)state;
	assert_int_equal(run_capture(argv, &out, 300), 0);
	assert_non_null(strstr(out, "PASS"));
	assert_non_null(strstr(out, "LUN resets in"));
	assert_null(strstr(out, " 0 LUN resets in"));
	assert_null(strstr(out, "target killed 0 times"));
	assert_null(strstr(out, "restarted and reconnected 0;"));
	assert_null(strstr(out, " 0 memory-table changes"));
	assert_null(strstr(out, " 0 ABORT TASK sent"));
	free(out);
}

/* The sector format: what it was written for is read back; a changed byte is torn; zeros
 * and another run's sectors are told apart. */
static void test_vblock_format(void **state)
{
	uint8_t s[VS_VB_SECTOR], z[VS_VB_SECTOR] = {0};
	struct vs_vb_hdr h;

	(void)state;
	vs_vb_fill(s, 77, 1234, 99, 3);
	assert_int_equal(vs_vb_parse(s, 77, &h), VS_VB_OURS);
	assert_int_equal(h.lba, 1234);
	assert_int_equal(h.gen, 99);
	assert_int_equal(h.writer, 3);
	assert_int_equal(vs_vb_parse(s, 78, &h), VS_VB_FOREIGN);
	assert_int_equal(vs_vb_parse(z, 77, &h), VS_VB_ZERO);
	s[300] ^= 1;
	assert_int_equal(vs_vb_parse(s, 77, &h), VS_VB_TORN);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_vblock_format),
	    cmocka_unit_test(test_verify_clean),
	    cmocka_unit_test(test_verify_names_dropped_write),
	    cmocka_unit_test(test_verify_names_misdirected_write),
	    cmocka_unit_test(test_verify_names_stale_read),
	    cmocka_unit_test(test_verify_device_file),
	    cmocka_unit_test(test_stress_short),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
