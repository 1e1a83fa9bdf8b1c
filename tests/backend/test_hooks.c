/* SPDX-License-Identifier: MIT */
/* The options every backend kind takes (hooks.c): the write log in dm-log-writes' format,
 * and the test-only faults a verifier must catch (a dropped, a misdirected write, a stale
 * read).  One scenario per test, each asserting what the option did to the data. */
#include "common.h"
#include "tmpdir.h"

#include "../lwlog.h"

static void write_fill(struct vs_backend *be, struct vs_io_ctx *ctx, uint64_t off, size_t len,
		       int byte, bool fua)
{
	char *buf = malloc(len);

	assert_non_null(buf);
	memset(buf, byte, len);
	assert_int_equal(run_rw(be, ctx, VS_BIO_WRITE, off, buf, len, fua), 0);
	free(buf);
}

/* len bytes at off all equal byte. */
static bool holds(struct vs_backend *be, struct vs_io_ctx *ctx, uint64_t off, size_t len, int byte)
{
	char *buf = malloc(len);
	bool ok = true;

	assert_non_null(buf);
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, off, buf, len, false), 0);
	for (size_t i = 0; i < len && ok; i++)
		ok = buf[i] == (char)byte;
	free(buf);
	return ok;
}

/* drop-write=2: the second write is acknowledged and never lands; the others do. */
static void test_drop_write(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;

	(void)state;
	open_pair("ram=1M,drop-write=2", &be, &ctx, 16);
	write_fill(be, ctx, 0, 4096, 'a', false);
	write_fill(be, ctx, 8192, 4096, 'b', false); /* dropped */
	write_fill(be, ctx, 16384, 4096, 'c', false);
	assert_true(holds(be, ctx, 0, 4096, 'a'));
	assert_true(holds(be, ctx, 8192, 4096, 0));
	assert_true(holds(be, ctx, 16384, 4096, 'c'));
	close_pair(be, ctx);
}

/* misdirect-write=1: the write lands one sector further on; its own first sector keeps
 * the old data. */
static void test_misdirect_write(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;

	(void)state;
	open_pair("ram=1M,misdirect-write=1", &be, &ctx, 16);
	write_fill(be, ctx, 4096, 2048, 'm', false);
	assert_true(holds(be, ctx, 4096, 512, 0));
	assert_true(holds(be, ctx, 4608, 2048, 'm'));
	write_fill(be, ctx, 4096, 512, 'n', false); /* only once */
	assert_true(holds(be, ctx, 4096, 512, 'n'));
	close_pair(be, ctx);
}

/* stale-read=2: the first read over the second write returns what that write replaced,
 * where they overlap; the read after it sees the new data. */
static void test_stale_read(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;

	(void)state;
	open_pair("ram=1M,stale-read=2", &be, &ctx, 16);
	write_fill(be, ctx, 0, 8192, 'o', false);
	write_fill(be, ctx, 4096, 8192, 'n', false);
	assert_true(holds(be, ctx, 0, 4096, 'o'));    /* no overlap: still armed */
	assert_true(holds(be, ctx, 4096, 4096, 'o')); /* the stale read */
	assert_true(holds(be, ctx, 8192, 4096, 'n')); /* was zero before: now new */
	assert_true(holds(be, ctx, 4096, 8192, 'n')); /* once only */
	close_pair(be, ctx);
}

/* Bad option values are refused naming the field. */
static void test_bad_options(void **state)
{
	struct vs_backend *be;
	char err[256];

	(void)state;
	assert_int_equal(vs_backend_open(&be, "ram=1M,drop-write=0", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "drop-write=0"));
	assert_int_equal(vs_backend_open(&be, "ram=1M,log-writes=", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "log-writes"));
	assert_int_equal(
	    vs_backend_open(&be, "ram=1M,log-writes=/nonexistent/dir/log", err, sizeof(err)),
	    -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/dir/log"));
}

/* log-writes= creates its file: one that exists, or a symlink planted where the log goes
 * (a shared directory), is refused with -EEXIST, and what it names keeps its content.  (On
 * dcf1c4a both were truncated into a new log.) */
static void test_log_is_never_overwritten(void **state)
{
	char dir[64], victim[96], planted[96], spec[200], buf[16] = "";
	struct vs_backend *be;
	char err[256];
	int fd;

	(void)state;
	assert_int_equal(tmpdir_make(dir, sizeof(dir), NULL, "hooks"), 0);
	snprintf(victim, sizeof(victim), "%s/victim", dir);
	snprintf(planted, sizeof(planted), "%s/planted", dir);
	fd = open(victim, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_int_equal(write(fd, "keep me", 7), 7);
	close(fd);
	assert_int_equal(symlink(victim, planted), 0);
	snprintf(spec, sizeof(spec), "ram=1M,log-writes=%s", victim);
	assert_int_equal(vs_backend_open(&be, spec, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "never overwritten"));
	snprintf(spec, sizeof(spec), "ram=1M,log-writes=%s", planted);
	assert_int_equal(vs_backend_open(&be, spec, err, sizeof(err)), -EEXIST);
	fd = open(victim, O_RDONLY);
	assert_int_equal(read(fd, buf, sizeof(buf)), 7);
	close(fd);
	assert_string_equal(buf, "keep me");
	tmpdir_remove(dir);
}

static unsigned read_log(const char *path, struct lw_test_entry *e, unsigned max)
{
	int n = lw_test_read(path, e, max);

	assert_true(n >= 0 && (unsigned)n <= max);
	return (unsigned)n;
}

/* log-writes: a FUA write is logged when it completes; plain writes and discards wait for
 * the flush submitted after they completed and come just before its FLUSH entry; a write
 * completing after the flush was submitted waits for the next one (here: close, which logs
 * it after the last flush and ends with the end mark). */
static void test_log_order(void **state)
{
	char dir[64], log[96], spec[160];
	struct lw_test_entry e[16];
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	struct waiter wf, ww;
	struct vs_bio flush, late;
	struct iovec iov;
	char buf[1024];

	(void)state;
	assert_int_equal(tmpdir_make(dir, sizeof(dir), NULL, "hooks"), 0);
	snprintf(log, sizeof(log), "%s/log", dir);
	snprintf(spec, sizeof(spec), "ram=1M,log-writes=%s", log);
	open_pair(spec, &be, &ctx, 16);
	write_fill(be, ctx, 0, 1024, 'p', false);  /* waits for the flush */
	write_fill(be, ctx, 4096, 512, 'f', true); /* FUA: logged at once */
	/* The flush, then a write that completes after the flush was submitted. */
	bio_init(&flush, VS_BIO_FLUSH, 0, NULL, 0, 0, &wf);
	memset(buf, 'l', sizeof(buf));
	iov = (struct iovec){buf, sizeof(buf)};
	bio_init(&late, VS_BIO_WRITE, 8192, &iov, 1, sizeof(buf), &ww);
	wf.calls = ww.calls = 0;
	assert_int_equal(vs_backend_submit(be, ctx, &flush), 0);
	assert_int_equal(vs_backend_submit(be, ctx, &late), 0);
	assert_int_equal(vs_io_ctx_submit(ctx), 0);
	while (!wf.calls || !ww.calls)
		assert_true(vs_io_ctx_reap(ctx, true) >= 0);
	assert_int_equal(wf.res, 0);
	assert_int_equal(run_op(be, ctx, VS_BIO_DISCARD, 65536, 4096), 0);
	close_pair(be, ctx);

	assert_int_equal(read_log(log, e, 16), 6);
	assert_true(e[0].flags == VS_LW_FUA && e[0].sector == 8 && e[0].nr_sectors == 1 &&
		    e[0].first_byte == 'f');
	assert_true(e[1].flags == 0 && e[1].sector == 0 && e[1].nr_sectors == 2 &&
		    e[1].first_byte == 'p');
	assert_true(e[2].flags == VS_LW_FLUSH && e[2].nr_sectors == 0);
	assert_true(e[3].flags == 0 && e[3].sector == 16 && e[3].nr_sectors == 2 &&
		    e[3].first_byte == 'l');
	assert_true(e[4].flags == VS_LW_DISCARD && e[4].sector == 128 && e[4].nr_sectors == 8);
	assert_true(e[5].flags == VS_LW_MARK);
	assert_string_equal(e[5].mark, VS_LW_END_MARK);
	tmpdir_remove(dir);
}

/* A bio the log cannot express (not whole sectors) stops the log: the super block keeps
 * the count of what was logged before, nothing after. */
static void test_log_stops_on_partial_sector(void **state)
{
	char dir[64], log[96], spec[160];
	struct lw_test_entry e[4];
	struct vs_backend *be;
	struct vs_io_ctx *ctx;

	(void)state;
	assert_int_equal(tmpdir_make(dir, sizeof(dir), NULL, "hooks"), 0);
	snprintf(log, sizeof(log), "%s/log", dir);
	snprintf(spec, sizeof(spec), "ram=1M,log-writes=%s", log);
	open_pair(spec, &be, &ctx, 16);
	write_fill(be, ctx, 0, 512, 'a', true);
	write_fill(be, ctx, 100, 512, 'b', true);
	write_fill(be, ctx, 1024, 512, 'c', true);
	close_pair(be, ctx);
	assert_int_equal(read_log(log, e, 4), 1);
	assert_int_equal(e[0].first_byte, 'a');
	tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_drop_write),
	    cmocka_unit_test(test_misdirect_write),
	    cmocka_unit_test(test_stale_read),
	    cmocka_unit_test(test_bad_options),
	    cmocka_unit_test(test_log_is_never_overwritten),
	    cmocka_unit_test(test_log_order),
	    cmocka_unit_test(test_log_stops_on_partial_sector),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
