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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "frontend.h"

static const char *vioscope; /* the binary under test (argv[1]) */

struct proc {
	pid_t pid;
	int err_fd; /* read end of its stderr */
};

static struct proc spawn(char *const args[])
{
	struct proc p;
	int pfd[2];

	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	p.pid = fork();
	assert_true(p.pid >= 0);
	if (p.pid == 0) {
		dup2(pfd[1], 2);
		execv(vioscope, args);
		_exit(127);
	}
	close(pfd[1]);
	p.err_fd = pfd[0];
	return p;
}

/* Exit status of a finished process; its stderr into buf. */
static int finish(struct proc p, char *buf, size_t len)
{
	size_t n = 0;
	ssize_t r;
	int st;

	while (n + 1 < len && (r = read(p.err_fd, buf + n, len - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(p.err_fd);
	assert_int_equal(waitpid(p.pid, &st, 0), p.pid);
	assert_true(WIFEXITED(st));
	return WEXITSTATUS(st);
}

static int run(char *const args[], char *buf, size_t len)
{
	return finish(spawn(args), buf, len);
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
	char dir[] = "/tmp/vs-cli-root-XXXXXX", root[64], img[64], lun[96], err[1024];
	char *args[] = {"vioscope",   "target", "--socket", "/nonexistent/dir/sock",
			"--lun-root", root,	"--lun",    lun,
			NULL};
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
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
	unlink(img);
	rmdir(root);
	rmdir(dir);
}

/* SIGTERM with a frontend connected: exit status 0, the socket removed, and a write
 * that was never synchronised is in the file. */
static void test_sigterm_clean_exit(void **state)
{
	char dir[] = "/tmp/vs-cli-XXXXXX", sock[64], file[64], lun[96], err[4096];
	uint8_t data[1024], disk[1024], cdb[10];
	struct fe fe;
	struct fe_cmd c = {.cdb = cdb, .cdb_len = 10, .out = data, .out_len = sizeof(data)};
	struct stat st;
	struct proc p;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/sock", dir);
	snprintf(file, sizeof(file), "%s/disk.img", dir);
	snprintf(lun, sizeof(lun), "0:file=%s", file);
	fd = open(file, O_CREAT | O_RDWR, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);

	char *args[] = {"vioscope", "target",	"--socket", sock, "--lun",
			lun,	    "--queues", "2",	    NULL};
	p = spawn(args);
	/* Readiness, not timing: the socket appears once the target listens. */
	for (int i = 0; i < 200 && stat(sock, &st); i++)
		nanosleep(&(struct timespec){.tv_nsec = 50 * 1000 * 1000}, NULL);
	assert_int_equal(stat(sock, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	assert_int_equal(fe_init(&fe), 0);
	assert_int_equal(fe_connect(&fe, sock), 0);
	memset(data, 0x77, sizeof(data));
	cdb_rw10(cdb, 0x2a, 4, 2);
	assert_int_equal(fe_scsi(&fe, VS_VIRTIO_SCSI_VQ_REQ0, &c), 0);
	assert_int_equal(c.resp.status, 0);

	assert_int_equal(kill(p.pid, SIGTERM), 0);
	assert_int_equal(finish(p, err, sizeof(err)), 0);
	fe_fini(&fe);
	assert_int_not_equal(stat(sock, &st), 0);
	fd = open(file, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, disk, sizeof(disk), 4 * 512), sizeof(disk));
	close(fd);
	assert_memory_equal(disk, data, sizeof(data));
	unlink(file);
	rmdir(dir);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unknown_option),
	    cmocka_unit_test(test_duplicate_lun),
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
