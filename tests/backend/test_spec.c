/* SPDX-License-Identifier: MIT */
/* Backend specs: each accepted form opens what it says, each bad form is refused
 * with -errno and a message naming the problem. */
#include "common.h"
#include "tmpdir.h"

#include <sys/stat.h>

static char tmpdir[200];

static int setup(void **state)
{
	(void)state;
	return tmpdir_make(tmpdir, sizeof(tmpdir), "/var/tmp", "backend-spec");
}

static int teardown(void **state)
{
	(void)state;
	return tmpdir_remove(tmpdir);
}

static void expect_open(const char *spec, const char *kind, uint64_t size, bool ro)
{
	struct vs_backend *be = NULL;
	char err[256];

	assert_int_equal(vs_backend_open(&be, spec, err, sizeof(err)), 0);
	assert_non_null(be);
	assert_string_equal(vs_backend_kind(be), kind);
	assert_true(vs_backend_size(be) == size);
	assert_int_equal(vs_backend_read_only(be), ro);
	vs_backend_close(be);
}

/* Returns the message so callers can look for the detail they care about. */
static const char *expect_fail(const char *spec, int rc)
{
	static char err[256];
	struct vs_backend *be = (struct vs_backend *)&be;

	memset(err, 0, sizeof(err));
	assert_int_equal(vs_backend_open(&be, spec, err, sizeof(err)), rc);
	assert_null(be);
	assert_true(strlen(err) > 0);
	return err;
}

static void test_ram_null_sizes(void **state)
{
	(void)state;
	expect_open("ram=64M", "ram", 64ull << 20, false);
	expect_open("ram=4096", "ram", 4096, false);
	expect_open("ram=2k", "ram", 2048, false);
	expect_open("null=1G", "null", 1ull << 30, false);
	expect_open("null=3T", "null", 3ull << 40, false);
	/* iB and B after the unit, either case: still powers of 1024 (issue 24). */
	expect_open("ram=1MiB", "ram", 1ull << 20, false);
	expect_open("ram=1MB", "ram", 1ull << 20, false);
	expect_open("null=2gib", "null", 2ull << 30, false);
	expect_open("ram=4096B", "ram", 4096, false);
}

static void test_bad_sizes(void **state)
{
	(void)state;
	assert_string_equal(expect_fail("ram=12Q", -EINVAL),
			    "ram=12Q: bad size '12Q' (use e.g. 64M, 1G)");
	expect_fail("ram=", -EINVAL);
	expect_fail("ram=0", -EINVAL);
	expect_fail("null=0K", -EINVAL);
	expect_fail("ram=1Mi", -EINVAL); /* iB or B after the unit, or nothing */
	expect_fail("ram=1.5G", -EINVAL);
	expect_fail("ram=-1", -EINVAL);
	expect_fail("ram= 1", -EINVAL);
	expect_fail("ram=M", -EINVAL);
	expect_fail("null=99999999999999999999", -EINVAL); /* > UINT64_MAX */
	expect_fail("null=16777216T", -EINVAL);		   /* 2^64 after the shift */
}

/* A size must fit off_t (signed 64-bit): a larger one is refused as too large, not
 * wrapped or clamped.  (On dcf1c4a null=18446744073709551104 opened, and the target listed
 * it as 9223372036854775807 bytes.) */
static void test_sizes_past_int64(void **state)
{
	(void)state;
	assert_non_null(strstr(expect_fail("null=18446744073709551104", -EINVAL), "is too large"));
	assert_non_null(strstr(expect_fail("null=9223372036854775808", -EINVAL), "is too large"));
	assert_non_null(strstr(expect_fail("ram=8388608T", -EINVAL), "is too large"));
	expect_open("null=8388607T", "null", 8388607ull << 40, false);
	expect_open("null=9223372036854775807", "null", INT64_MAX, false);
}

static void test_bad_kinds(void **state)
{
	(void)state;
	assert_non_null(strstr(expect_fail("disk=1G", -EINVAL), "unknown backend 'disk'"));
	assert_non_null(strstr(expect_fail("ram", -EINVAL), "bad backend spec"));
	expect_fail("", -EINVAL);
	expect_fail("rams=1M", -EINVAL);
	expect_fail("=1M", -EINVAL);
}

static void test_file_specs(void **state)
{
	char path[512], spec[600];

	(void)state;
	make_file(tmpdir, "f", 1 << 20, path, sizeof(path));
	snprintf(spec, sizeof(spec), "file=%s", path);
	expect_open(spec, "file", 1 << 20, false);
	snprintf(spec, sizeof(spec), "file=%s,ro", path);
	expect_open(spec, "file", 1 << 20, true);
	snprintf(spec, sizeof(spec), "file=%s,shared", path);
	expect_open(spec, "file", 1 << 20, false);

	snprintf(spec, sizeof(spec), "file=%s,rw", path);
	assert_non_null(
	    strstr(expect_fail(spec, -EINVAL), "unknown option 'rw' (use ro, direct, shared)"));
	snprintf(spec, sizeof(spec), "file=%s,ro,", path);
	expect_fail(spec, -EINVAL);
	assert_non_null(strstr(expect_fail("file=", -EINVAL), "missing path"));
	assert_non_null(strstr(expect_fail("file=,ro", -EINVAL), "missing path"));
	snprintf(spec, sizeof(spec), "file=%s/nonexistent", tmpdir);
	expect_fail(spec, -ENOENT);
	snprintf(spec, sizeof(spec), "file=%s,ro", tmpdir);
	assert_non_null(strstr(expect_fail(spec, -EINVAL), "neither a regular file"));

	make_file(tmpdir, "empty", 0, path, sizeof(path));
	snprintf(spec, sizeof(spec), "file=%s", path);
	assert_non_null(strstr(expect_fail(spec, -EINVAL), "is empty"));
}

/* A NULL err buffer is allowed: the error code alone still comes back. */
static void test_null_err_buffer(void **state)
{
	struct vs_backend *be;

	(void)state;
	assert_int_equal(vs_backend_open(&be, "ram=12Q", NULL, 0), -EINVAL);
	assert_int_equal(vs_backend_open(&be, "file=/nonexistent/x", NULL, 0), -ENOENT);
}

/* Where the file system refuses O_DIRECT (tmpfs before Linux 6.6), the message says so. */
static void test_direct_unsupported_message(void **state)
{
	char path[] = "/dev/shm/vs-backend-spec-XXXXXX", spec[128], want[160];
	int fd = mkstemp(path), dfd;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 4096), 0);
	close(fd);
	dfd = open(path, O_RDWR | O_DIRECT);
	if (dfd >= 0) {
		close(dfd);
		unlink(path);
		skip(); /* this kernel's tmpfs takes O_DIRECT */
	}
	snprintf(spec, sizeof(spec), "file=%s,direct", path);
	snprintf(want, sizeof(want), "O_DIRECT not supported by the file system of %s", path);
	assert_string_equal(expect_fail(spec, -EINVAL), want);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ram_null_sizes),
	    cmocka_unit_test(test_bad_sizes),
	    cmocka_unit_test(test_sizes_past_int64),
	    cmocka_unit_test(test_bad_kinds),
	    cmocka_unit_test(test_file_specs),
	    cmocka_unit_test(test_null_err_buffer),
	    cmocka_unit_test(test_direct_unsupported_message),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
