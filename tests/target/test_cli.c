/* SPDX-License-Identifier: MIT */
/* `vioscope target` as a process: command-line errors, and a clean SIGTERM. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "proc.h"
#include "tmpdir.h"

static const char *vioscope; /* the binary under test (argv[1]) */

/* Run `vioscope args[1]...` (args[0] becomes the binary's path) to its end: its exit
 * status, its stderr into buf. */
static int run(char *args[], char *buf, size_t len)
{
	args[0] = (char *)vioscope;
	return proc_run((const char *const *)args, buf, len, FE_WAIT_MS);
}

/* An unknown option: exit status 2, and the message names it. */
static void test_unknown_option(void **state)
{
	char *args[] = {"vioscope", "target",	"--socket",	"/tmp/x",
			"--lun",    "0:ram=1M", "--frobnicate", NULL};
	char err[1024];

	(void)state;
	assert_int_equal(run(args, err, sizeof(err)), 2);
	assert_non_null(strstr(err, "--frobnicate"));
}

/* The same LUN number twice: exit status 2. */
static void test_duplicate_lun(void **state)
{
	char *args[] = {"vioscope", "target", "--socket",  "/tmp/x", "--lun",
			"3:ram=1M", "--lun",  "3:null=1M", NULL};
	char err[1024];

	(void)state;
	assert_int_equal(run(args, err, sizeof(err)), 2);
	assert_non_null(strstr(err, "LUN 3 given twice"));
}

/* --qos mistakes are the command line's (exit status 2), each named: a burst without its
 * limit, a LUN no --lun gives, a limit that does not exist, a size that is none. */
static void test_qos_mistakes(void **state)
{
	static const char *const cases[][2] = {
	    {"0:burst_iops=5", "total iops burst without a total iops limit"},
	    {"1:iops=5", "--qos for LUN 1, which no --lun gives"},
	    {"0:iopz=5", "'iopz=5': expected"},
	    {"0:bps=5Q", "'5Q' is not a size"},
	    {"0:write_iops=1099511627777", "write iops limit or burst above"},
	    {"some:iops=5", "'some' is not a LUN number 0..255 or all"},
	    {"all:burst_bps=5", "total bps burst without a total bps limit"},
	};
	char err[1024];

	(void)state;
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *args[] = {"vioscope", "target", "--socket",	   "/tmp/x", "--lun",
				"0:ram=1M", "--qos",  (char *)cases[i][0], NULL};

		assert_int_equal(run(args, err, sizeof(err)), 2);
		if (!strstr(err, cases[i][1]))
			fail_msg("--qos %s: wanted '%s', got: %s", cases[i][0], cases[i][1], err);
	}
}

/* A controller's limits over its LUNs given twice: exit status 2. */
static void test_qos_all_twice(void **state)
{
	char *args[] = {"vioscope", "target",	  "--socket", "/tmp/x",	    "--lun", "0:ram=1M",
			"--qos",    "all:iops=5", "--qos",    "all:iops=6", NULL};
	char err[1024];

	(void)state;
	assert_int_equal(run(args, err, sizeof(err)), 2);
	assert_non_null(strstr(err, "--qos: all given twice for a controller"));
}

/* A missing image file: exit status 3 (could not run), and the message names the file. */
static void test_missing_file(void **state)
{
	char *args[] = {"vioscope", "target",
			"--socket", "/tmp/vs-cli-missing.sock",
			"--lun",    "0:file=/nonexistent/disk.img",
			NULL};
	char err[1024];

	(void)state;
	assert_int_equal(run(args, err, sizeof(err)), 3);
	assert_non_null(strstr(err, "/nonexistent/disk.img"));
}

/* A 6 KiB LUN with 4096-byte blocks: exit status 2 (the command line's), naming both
 * sizes. */
static void test_size_not_block_multiple(void **state)
{
	char *args[] = {"vioscope", "target",	"--socket",	"/tmp/vs-cli-bs.sock",
			"--lun",    "0:ram=6K", "--block-size", "4096",
			NULL};
	char err[1024];

	(void)state;
	assert_int_equal(run(args, err, sizeof(err)), 2);
	assert_non_null(strstr(err, "6144"));
	assert_non_null(strstr(err, "4096"));
}

/* A test-only option on the command line without --testing: exit status 2, naming the
 * switch, before anything listens (the socket path cannot be used either: on dcf1c4a
 * the LUN opened with its fault armed and the target failed later, at the socket). */
static void test_test_option_needs_testing(void **state)
{
	char *args[] = {"vioscope", "target",
			"--socket", "/nonexistent/dir/sock",
			"--lun",    "0:ram=1M,drop-write=3",
			NULL};
	char err[1024];

	(void)state;
	assert_int_equal(run(args, err, sizeof(err)), 2);
	if (!strstr(err, "LUN 0 (ram=1M,drop-write=3): 'drop-write=3' is a test-only option "
			 "(the target must be started with --testing)"))
		fail_msg("%s", err);
}

/* --lun-root: a file LUN outside it is refused at start, exit status 3, naming the root.
 * (On dcf1c4a the option did not exist: exit status 2.) */
static void test_lun_root_refuses_outside(void **state)
{
	char dir[64], root[96], img[96], lun[128], err[1024];
	char *args[] = {"vioscope",   "target", "--socket", "/nonexistent/dir/sock",
			"--lun-root", root,	"--lun",    lun,
			NULL};
	int fd;

	(void)state;
	assert_int_equal(tmpdir_make(dir, sizeof(dir), NULL, "cli-root"), 0);
	snprintf(root, sizeof(root), "%s/luns", dir);
	snprintf(img, sizeof(img), "%s/outside.img", dir);
	assert_int_equal(mkdir(root, 0700), 0);
	fd = open(img, O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);
	snprintf(lun, sizeof(lun), "0:file=%s", img);
	assert_int_equal(run(args, err, sizeof(err)), 3);
	if (!strstr(err, "not beneath the LUN root"))
		fail_msg("%s", err);
	tmpdir_remove(dir);
}

/* SIGTERM with a frontend connected: exit status 0, the socket removed, and a write
 * that was never synchronised is in the file. */
static void test_sigterm_clean_exit(void **state)
{
	const struct target_opts o = {.luns = {"0:file=%F"}, .queues = 2, .file_size = 1 << 20};
	uint8_t data[1024], disk[1024];
	struct fe_cmd c = {.out = data, .out_len = sizeof(data)};
	struct target tg;
	struct gmem mem;
	struct stat st;
	struct fe fe;
	int fd, sig, status;

	(void)state;
	assert_int_equal(target_init(&tg, "cli", vioscope), 0);
	assert_int_equal(target_start(&tg, &o), 0); /* its socket accepts connections */
	assert_int_equal(stat(tg.sock, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	assert_int_equal(gmem_init(&mem), 0);
	assert_int_equal(fe_open(&fe, tg.sock, &mem, &fx_fe_opts), 0);
	memset(data, 0x77, sizeof(data));
	cdb10(c.cdb, 0x2a, 0, 4, 2);
	assert_int_equal(fe_scsi(&fe, VS_VIRTIO_SCSI_VQ_REQ0, &c), 0);
	assert_int_equal(c.resp.status, 0);

	status = target_stop(&tg, SIGTERM, FE_WAIT_MS, &sig);
	if (status != 0)
		target_log_dump(&tg);
	assert_int_equal(status, 0);
	assert_int_equal(sig, 0);
	fe_close(&fe);
	gmem_fini(&mem);
	assert_int_not_equal(stat(tg.sock, &st), 0);
	fd = open(tg.file, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, disk, sizeof(disk), 4 * 512), sizeof(disk));
	close(fd);
	assert_memory_equal(disk, data, sizeof(data));
	target_fini(&tg);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unknown_option),
	    cmocka_unit_test(test_duplicate_lun),
	    cmocka_unit_test(test_qos_mistakes),
	    cmocka_unit_test(test_qos_all_twice),
	    cmocka_unit_test(test_missing_file),
	    cmocka_unit_test(test_size_not_block_multiple),
	    cmocka_unit_test(test_test_option_needs_testing),
	    cmocka_unit_test(test_lun_root_refuses_outside),
	    cmocka_unit_test(test_sigterm_clean_exit),
	};

	if (argc != 2) {
		fprintf(stderr, "usage: %s PATH-TO-VIOSCOPE\n", argv[0]);
		return 2;
	}
	vioscope = argv[1];
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
