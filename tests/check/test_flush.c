/* SPDX-License-Identifier: MIT */
/*
 * The crash-state checker must be able to fail.  A small journal (transaction i: its data,
 * a flush, a commit record naming i, a flush) runs through the initiator against a target
 * whose LUN logs its writes (log-writes=LOG); `vioscope check flush` then replays every
 * crash state with this program as the verifier (`--journal-verify IMG`: a commit record
 * whose data is not on the image is "commit without data").
 *   flush_kept:    a correct driver: every crash state passes.
 *   flush_dropped: the driver drops its flushes (test_drop_flushes): the checker finds a
 *                  state with a commit and without its data, and says so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../initiator/harness.h"
#include "run.h"

#define LUN_BYTES    (4u << 20)
#define TXNS	     8
#define DATA_LBA(i)  (64u + (i)*8u) /* 8 blocks (4 KiB) of transaction i */
#define COMMIT_MAGIC "VS-JOURNAL-COMMIT"

struct commit {
	char magic[24];
	uint32_t txn;
};

static const char *self_exe;

/* The verifier: exit 0 when the image is consistent, 1 with the reason otherwise. */
static int journal_verify(const char *img)
{
	struct commit c;
	uint8_t data[4096];
	int fd = open(img, O_RDONLY);

	if (fd < 0 || pread(fd, &c, sizeof(c), 0) != sizeof(c)) {
		printf("cannot read %s\n", img);
		return 2;
	}
	if (memcmp(c.magic, COMMIT_MAGIC, sizeof(COMMIT_MAGIC)))
		return 0; /* no commit yet: consistent */
	if (c.txn < 1 || c.txn > TXNS) {
		printf("commit record names transaction %u, not one of 1..%u\n", c.txn, TXNS);
		return 1;
	}
	if (pread(fd, data, sizeof(data), (off_t)DATA_LBA(c.txn) * 512) != sizeof(data) ||
	    !pattern_check(data, sizeof(data), 1000 + c.txn, 0)) {
		printf("commit without data: the commit record names transaction %u, its data "
		       "at sector %u is not on the image\n",
		       c.txn, DATA_LBA(c.txn));
		return 1;
	}
	return 0;
}

static void journal(struct vs_ini *ini)
{
	struct vs_ini_queue *q = vs_ini_get_queue(ini, 0);
	uint8_t *data = vs_ini_alloc(ini, 4096, 4096), *rec = vs_ini_alloc(ini, 512, 4096);
	struct commit c = {.magic = COMMIT_MAGIC};

	for (uint32_t i = 1; i <= TXNS; i++) {
		pattern_fill(data, 4096, 1000 + i, 0);
		assert_int_equal(io_sync(q, VS_INI_WRITE, 0, DATA_LBA(i), 8, data, 4096, 1), 0);
		assert_int_equal(io_sync(q, VS_INI_FLUSH, 0, 0, 0, NULL, 0, 0), 0);
		c.txn = i;
		memset(rec, 0, 512);
		memcpy(rec, &c, sizeof(c));
		assert_int_equal(io_sync(q, VS_INI_WRITE, 0, 0, 1, rec, 512, 1), 0);
		assert_int_equal(io_sync(q, VS_INI_FLUSH, 0, 0, 0, NULL, 0, 0), 0);
	}
}

/* Run the journal with or without flushes, then the checker; its exit status, output. */
static int journal_then_check(bool drop, char **out)
{
	struct tgt t;
	struct vs_ini *ini;
	struct vs_ini_opts o;
	char lun[200], log[128], base[128], verify[512];
	int fd, rc;

	tgt_init(&t);
	snprintf(log, sizeof(log), "%s/writes.log", t.tg.dir);
	snprintf(base, sizeof(base), "%s/base.img", t.tg.dir);
	snprintf(lun, sizeof(lun), "0:ram=%u,log-writes=%s", LUN_BYTES, log);
	t.o.luns[0] = lun;
	fd = open(base, O_CREAT | O_RDWR | O_TRUNC, 0600); /* a RAM LUN starts as zeros */
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, LUN_BYTES), 0);
	close(fd);
	assert_int_equal(tgt_start(&t), 0);
	o = ini_opts(&t, 1);
	o.test_drop_flushes = drop;
	assert_int_equal(vs_ini_open(&ini, &o), 0);
	journal(ini);
	vs_ini_close(ini);
	tgt_kill(&t, SIGTERM); /* the log is closed cleanly */
	snprintf(verify, sizeof(verify), "%s --journal-verify", self_exe);
	{
		char *argv[] = {VIOSCOPE_BIN, "check",	"flush",    "--log", log,
				"--base",     base,	"--verify", verify,  "--subsets",
				"64",	      "--seed", "1",	    NULL};

		rc = run_capture(argv, out, 120);
	}
	unlink(log);
	unlink(base);
	tgt_fini(&t);
	return rc;
}

static void test_flush_kept(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(journal_then_check(false, &out), 0);
	assert_non_null(strstr(out, "PASS: "));
	assert_null(strstr(out, "commit without data"));
	free(out);
}

static void test_flush_dropped(void **state)
{
	char *out;

	(void)state;
	assert_int_equal(journal_then_check(true, &out), 1);
	assert_non_null(strstr(out, "FAIL: crash state"));
	assert_non_null(strstr(out, "commit without data"));
	/* The write sequence that led there is shown, with the writes the crash kept. */
	assert_non_null(strstr(out, "unflushed, kept by the crash"));
	free(out);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_flush_kept),
	    cmocka_unit_test(test_flush_dropped),
	};

	if (argc == 3 && !strcmp(argv[1], "--journal-verify"))
		return journal_verify(argv[2]);
	self_exe = realpath("/proc/self/exe", NULL);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
