/* SPDX-License-Identifier: MIT */
/* The test gate (gate=, gate-sock=: src/backend/gate.c), the injected writeback error
 * (fail-flush=) and the flush error a backend keeps, and the bounded wait on a context
 * (vs_io_ctx_wait).  One scenario per test, each asserting what was held, let go, failed. */
#include <poll.h>
#include <pthread.h>

#include "common.h"
#include "gate.h"
#include "tmpdir.h"

#define WAIT_MS 10000

static bool holds(struct vs_backend *be, struct vs_io_ctx *ctx, uint64_t off, size_t len, int byte)
{
	char buf[4096];

	assert_true(len <= sizeof(buf));
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, off, buf, len, false), 0);
	for (size_t i = 0; i < len; i++)
		if (buf[i] != (char)byte)
			return false;
	return true;
}

/* Reap (without waiting) until nothing more completes now. */
static void reap_now(struct vs_io_ctx *ctx)
{
	assert_int_equal(vs_io_ctx_submit(ctx), 0);
	while (vs_io_ctx_reap(ctx, false) > 0)
		assert_int_equal(vs_io_ctx_submit(ctx), 0);
}

/* gate=write:2-3: of four writes, the 2nd and 3rd are held (in flight, not written); the
 * others complete.  Released one at a time, each then reaches the storage. */
static void test_gate_holds_the_chosen_writes(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	struct bio512 wr[4];

	(void)state;
	open_pair("ram=1M,gate=write:2-3", &be, &ctx, 16);
	for (unsigned i = 0; i < 4; i++)
		submit_512(be, ctx, &wr[i], VS_BIO_WRITE, 4096 * i, 'a' + (int)i);
	assert_int_equal(vs_backend_gate_held(be), 2);
	reap_now(ctx);
	assert_int_equal(wr[0].w.calls, 1);
	assert_int_equal(wr[1].w.calls, 0);
	assert_int_equal(wr[2].w.calls, 0);
	assert_int_equal(wr[3].w.calls, 1);
	assert_int_equal(vs_io_ctx_inflight(ctx), 2);
	assert_true(holds(be, ctx, 4096, 512, 0)); /* held before the backend saw it */
	assert_int_equal(vs_backend_gate_release(be, 1), 1);
	assert_int_equal(vs_backend_gate_held(be), 1);
	while (!wr[1].w.calls)
		assert_true(vs_io_ctx_reap(ctx, true) >= 0);
	assert_int_equal(wr[1].w.res, 0);
	assert_int_equal(wr[2].w.calls, 0);
	assert_true(holds(be, ctx, 4096, 512, 'b'));
	assert_int_equal(vs_backend_gate_open(be), 1);
	while (!wr[2].w.calls)
		assert_true(vs_io_ctx_reap(ctx, true) >= 0);
	assert_true(holds(be, ctx, 8192, 512, 'c'));
	close_pair(be, ctx);
}

struct releaser {
	struct vs_backend *be;
	int rc; /* reported to the test thread */
};

static void *release_when_held(void *arg)
{
	struct releaser *r = arg;

	r->rc = vs_backend_gate_wait(r->be, 1, WAIT_MS);
	if (!r->rc && vs_backend_gate_release(r->be, 1) != 1)
		r->rc = -EPROTO;
	return NULL;
}

/* A flush of a file held by gate=flush and let go by another thread while the owner
 * sleeps in vs_io_ctx_reap(wait): the hand-back wakes it, and the flush completes. */
static void test_gate_released_by_another_thread(void **state)
{
	char dir[64], path[96], spec[160];
	struct releaser r = {0};
	struct vs_io_ctx *ctx;
	struct vs_bio flush;
	struct waiter w = {0};
	pthread_t thr;

	(void)state;
	assert_int_equal(tmpdir_make(dir, sizeof(dir), NULL, "gate"), 0);
	make_file(dir, "img", 1 << 20, path, sizeof(path));
	snprintf(spec, sizeof(spec), "file=%s,gate=flush", path);
	open_pair(spec, &r.be, &ctx, 16);
	bio_init(&flush, VS_BIO_FLUSH, 0, NULL, 0, 0, &w);
	assert_int_equal(vs_backend_submit(r.be, ctx, &flush), 0);
	assert_int_equal(pthread_create(&thr, NULL, release_when_held, &r), 0);
	while (!w.calls)
		assert_true(vs_io_ctx_reap(ctx, true) >= 0);
	assert_int_equal(pthread_join(thr, NULL), 0);
	assert_int_equal(r.rc, 0);
	assert_int_equal(w.res, 0);
	close_pair(r.be, ctx);
	tmpdir_remove(dir);
}

/* vs_io_ctx_wait ends at its timeout while the gate holds the only bio, and at once when
 * the bio was let go. */
static void test_bounded_wait(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	struct vs_bio flush;
	struct waiter w = {0};

	(void)state;
	open_pair("ram=1M,gate=flush", &be, &ctx, 16);
	bio_init(&flush, VS_BIO_FLUSH, 0, NULL, 0, 0, &w);
	assert_int_equal(vs_backend_submit(be, ctx, &flush), 0);
	assert_int_equal(vs_io_ctx_wait(ctx, 20), -ETIMEDOUT);
	assert_int_equal(vs_io_ctx_reap(ctx, false), 0);
	assert_int_equal(w.calls, 0);
	vs_backend_gate_open(be);
	assert_int_equal(vs_io_ctx_wait(ctx, WAIT_MS), 0);
	while (!w.calls)
		assert_true(vs_io_ctx_reap(ctx, false) >= 0);
	assert_int_equal(w.res, 0);
	close_pair(be, ctx);
}

/* A backend closed while its gate holds a bio: the bio fails with -ECANCELED. */
static void test_gate_close_fails_what_it_holds(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	struct bio512 wr;

	(void)state;
	open_pair("ram=1M,gate=any", &be, &ctx, 16);
	submit_512(be, ctx, &wr, VS_BIO_WRITE, 0, 'x');
	assert_int_equal(vs_backend_gate_held(be), 1);
	vs_backend_close(be);
	while (!wr.w.calls)
		assert_true(vs_io_ctx_reap(ctx, true) >= 0);
	assert_int_equal(wr.w.res, -ECANCELED);
	vs_io_ctx_destroy(ctx);
}

/* fail-flush=2: the second flush fails with -EIO without reaching the storage; the first
 * succeeds. */
static void test_fail_flush(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;

	(void)state;
	open_pair("ram=1M,fail-flush=2", &be, &ctx, 16);
	assert_int_equal(run_op(be, ctx, VS_BIO_FLUSH, 0, 0), 0);
	assert_int_equal(run_op(be, ctx, VS_BIO_FLUSH, 0, 0), -EIO);
	close_pair(be, ctx);
}

/* fail-flush=1 on a file: the first flush fails with -EIO, and every flush after it too
 * (the backend keeps the error); a backend opened again on the file flushes cleanly. */
static void test_flush_error_is_kept(void **state)
{
	char dir[64], path[96], spec[160];
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char buf[512];

	(void)state;
	assert_int_equal(tmpdir_make(dir, sizeof(dir), NULL, "gate"), 0);
	make_file(dir, "img", 1 << 20, path, sizeof(path));
	snprintf(spec, sizeof(spec), "file=%s,fail-flush=1", path);
	open_pair(spec, &be, &ctx, 16);
	memset(buf, 'w', sizeof(buf));
	assert_int_equal(run_rw(be, ctx, VS_BIO_WRITE, 0, buf, sizeof(buf), false), 0);
	assert_int_equal(vs_backend_flush_error(be), 0);
	assert_int_equal(run_op(be, ctx, VS_BIO_FLUSH, 0, 0), -EIO);
	assert_int_equal(vs_backend_flush_error(be), -EIO);
	assert_int_equal(run_rw(be, ctx, VS_BIO_WRITE, 512, buf, sizeof(buf), false), 0);
	assert_int_equal(run_op(be, ctx, VS_BIO_FLUSH, 0, 0), -EIO);
	assert_int_equal(run_op(be, ctx, VS_BIO_FLUSH, 0, 0), -EIO);
	vs_backend_close(be);
	snprintf(spec, sizeof(spec), "file=%s", path);
	assert_int_equal(vs_backend_open(&be, spec, NULL, 0), 0);
	assert_int_equal(run_op(be, ctx, VS_BIO_FLUSH, 0, 0), 0);
	close_pair(be, ctx);
	tmpdir_remove(dir);
}

/* Bad gate options are refused naming what is wrong; the options are test-only ones. */
static void test_gate_bad_options(void **state)
{
	static const char *const bad[] = {"ram=1M,gate=bogus", "ram=1M,gate=write:0",
					  "ram=1M,gate=write:5-3", "ram=1M,gate=write:x",
					  "ram=1M,gate-sock="};
	struct vs_backend *be;
	char err[256];

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(vs_backend_open(&be, bad[i], err, sizeof(err)), -EINVAL);
		assert_non_null(strstr(err, "gate"));
	}
	assert_int_equal(
	    vs_backend_open(&be, "ram=1M,gate-sock=/nonexistent/sock", err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/sock"));
	assert_true(vs_backend_test_option("gate=write"));
	assert_true(vs_backend_test_option("gate-sock=/x"));
	assert_true(vs_backend_test_option("fail-flush=1"));
	assert_true(vs_backend_test_option("delay=5"));
	assert_false(vs_backend_test_option("log-writes=/x"));
}

/* gate-sock: the backend connects to the test's socket, says "held 1 1" when a write is
 * held, lets it go on "release 1" (the owner, asleep in reap, is woken), says "held 0 1". */
static void test_gate_socket(void **state)
{
	char dir[64], path[96], spec[160], line[64];
	int lfd, fd;
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	struct bio512 wr;

	(void)state;
	assert_int_equal(tmpdir_make(dir, sizeof(dir), NULL, "gate"), 0);
	snprintf(path, sizeof(path), "%s/gate", dir);
	lfd = gate_listen(path);
	assert_true(lfd >= 0);
	snprintf(spec, sizeof(spec), "ram=1M,gate=write,gate-sock=%s", path);
	open_pair(spec, &be, &ctx, 16);
	fd = gate_accept(lfd, WAIT_MS);
	assert_true(fd >= 0);
	submit_512(be, ctx, &wr, VS_BIO_WRITE, 0, 's');
	assert_int_equal(line_recv(fd, line, sizeof(line), WAIT_MS), 0);
	assert_string_equal(line, "held 1 1");
	assert_int_equal(write(fd, "release 1\n", 10), 10);
	while (!wr.w.calls)
		assert_true(vs_io_ctx_reap(ctx, true) >= 0);
	assert_int_equal(wr.w.res, 0);
	assert_int_equal(line_recv(fd, line, sizeof(line), WAIT_MS), 0);
	assert_string_equal(line, "held 0 1");
	assert_true(holds(be, ctx, 0, 512, 's'));
	close_pair(be, ctx);
	close(fd);
	close(lfd);
	tmpdir_remove(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gate_holds_the_chosen_writes),
	    cmocka_unit_test(test_gate_released_by_another_thread),
	    cmocka_unit_test(test_bounded_wait),
	    cmocka_unit_test(test_gate_close_fails_what_it_holds),
	    cmocka_unit_test(test_fail_flush),
	    cmocka_unit_test(test_flush_error_is_kept),
	    cmocka_unit_test(test_gate_bad_options),
	    cmocka_unit_test(test_gate_socket),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
