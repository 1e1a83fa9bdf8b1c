/* SPDX-License-Identifier: MIT */
/* ram and null backends, and the I/O context behaviour they expose: deferred
 * completions, the eventfd, the depth limit, and the checks every bio passes. */
#include "common.h"

#include <poll.h>

#define SZ (1u << 20)

static bool fd_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* Written through one irregular split, read back through another: same bytes. */
static void test_ram_round_trip_scattered(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	size_t len = 40000;
	char *src = malloc(len), *dst = calloc(1, len);
	struct iovec wiov[16], riov[5];
	struct waiter w;
	struct vs_bio bio;
	int n;

	(void)state;
	open_pair("ram=1M", &be, &ctx, 8);
	fill_pattern(src, len, 1);
	n = scatter(wiov, 16, src, len);
	bio_init(&bio, VS_BIO_WRITE, 12345, wiov, n, len, &w);
	assert_int_equal(run_bio(be, ctx, &bio), 0);
	for (int i = 0; i < 5; i++)
		riov[i] = (struct iovec){dst + i * (len / 5), len / 5};
	bio_init(&bio, VS_BIO_READ, 12345, riov, 5, len, &w);
	assert_int_equal(run_bio(be, ctx, &bio), 0);
	assert_memory_equal(src, dst, len);
	close_pair(be, ctx);
	free(src);
	free(dst);
}

/* A completed ram bio makes the ctx fd readable once submitted; reaping drains it. */
static void test_deferred_completion_signals_fd(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	struct bio512 rd;

	(void)state;
	open_pair("ram=64K", &be, &ctx, 4);
	submit_512(be, ctx, &rd, VS_BIO_READ, 0, 0);
	assert_int_equal(rd.w.calls, 0);
	assert_int_equal(vs_io_ctx_inflight(ctx), 1);
	assert_int_equal(vs_io_ctx_submit(ctx), 0);
	assert_true(fd_readable(vs_io_ctx_fd(ctx)));
	assert_int_equal(vs_io_ctx_reap(ctx, false), 1);
	assert_int_equal(rd.w.calls, 1);
	assert_int_equal(rd.w.res, 0);
	assert_int_equal(vs_io_ctx_inflight(ctx), 0);
	assert_false(fd_readable(vs_io_ctx_fd(ctx)));
	assert_int_equal(vs_io_ctx_reap(ctx, true), 0); /* nothing in flight: no block */
	close_pair(be, ctx);
}

/* Test-only delay=USEC,delay-every=N: of six bios, exactly two (the 3rd and the 6th) are
 * held back; the others complete at the first reap; the held ones only after USEC, with
 * their data already moved. */
static void test_delay_holds_every_nth_completion(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char buf[6][512];
	struct iovec iov[6];
	struct waiter w[6] = {{0}};
	struct vs_bio bio[6];
	uint64_t t0, waited;
	int done = 0;

	(void)state;
	open_pair("ram=64K,delay=300000,delay-every=3", &be, &ctx, 8);
	t0 = vs_mono_ns();
	for (int i = 0; i < 6; i++) {
		memset(buf[i], 0x5a, sizeof(buf[i]));
		iov[i] = (struct iovec){buf[i], sizeof(buf[i])};
		bio_init(&bio[i], VS_BIO_READ, 0, &iov[i], 1, sizeof(buf[i]), &w[i]);
		assert_int_equal(vs_backend_submit(be, ctx, &bio[i]), 0);
	}
	assert_int_equal(vs_io_ctx_submit(ctx), 0);
	assert_int_equal(vs_io_ctx_reap(ctx, false), 4);
	assert_int_equal(vs_io_ctx_submit(ctx), 0); /* the delays' timeouts */
	for (int i = 0; i < 6; i++)
		assert_int_equal(w[i].calls, i % 3 == 2 ? 0 : 1);
	assert_int_equal(vs_io_ctx_inflight(ctx), 2);
	assert_int_equal(buf[2][0], 0); /* the data moved at submit: only done() waits */
	while (vs_io_ctx_inflight(ctx)) {
		int n = vs_io_ctx_reap(ctx, true);

		assert_true(n >= 0);
		done += n;
		assert_true(vs_mono_ns() - t0 < 20000000000ull); /* a deadline, not a measure */
	}
	waited = vs_mono_ns() - t0;
	assert_int_equal(done, 2);
	assert_int_equal(w[2].calls, 1);
	assert_int_equal(w[5].calls, 1);
	assert_int_equal(w[2].res, 0);
	assert_true(waited >= 300000000ull); /* never earlier than asked */
	close_pair(be, ctx);
}

/* Bad delay options are refused with a message naming them. */
static void test_delay_options_refused(void **state)
{
	struct vs_backend *be;
	char err[256];

	(void)state;
	assert_int_equal(vs_backend_open(&be, "ram=64K,delay=0", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "delay=0"));
	assert_int_equal(vs_backend_open(&be, "ram=64K,delay-every=x", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "delay-every=x"));
	assert_int_equal(vs_backend_open(&be, "ram=64K,slow", err, sizeof(err)), -EINVAL);
}

static void test_null_reads_zeros(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char buf[8192];
	struct iovec iov[3];
	struct waiter w;
	struct vs_bio bio;
	int n;

	(void)state;
	open_pair("null=1G", &be, &ctx, 4);
	memset(buf, 0xaa, sizeof(buf));
	assert_int_equal(run_rw(be, ctx, VS_BIO_WRITE, 4096, buf, sizeof(buf), false), 0);
	n = scatter(iov, 3, buf, sizeof(buf));
	bio_init(&bio, VS_BIO_READ, 4096, iov, n, sizeof(buf), &w);
	assert_int_equal(run_bio(be, ctx, &bio), 0);
	assert_true(all_zero(buf, sizeof(buf)));
	assert_int_equal(run_op(be, ctx, VS_BIO_FLUSH, 0, 0), 0);
	assert_int_equal(run_op(be, ctx, VS_BIO_DISCARD, 0, 1 << 20), 0);
	close_pair(be, ctx);
}

/* DISCARD and WRITE_ZEROES over unaligned ranges spanning whole pages: zeros inside,
 * data untouched outside. */
static void test_ram_discard_reads_zeros(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;

	(void)state;
	open_pair("ram=1M", &be, &ctx, 4);
	zeroing_reads_zeros(be, ctx, 5 * 4096, 1000, 3 * 4096 + 500);
	close_pair(be, ctx);
}

/* Out of range and malformed bios come back from submit; done() never runs. */
static void test_rejected_bios(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char buf[1024];
	struct iovec iov = {buf, sizeof(buf)};
	struct waiter w;
	struct vs_bio bio;

	(void)state;
	open_pair("ram=64K", &be, &ctx, 4);
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, SZ, buf, 1, false), -ERANGE);
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, 65536 - 512, buf, 1024, false), -ERANGE);
	assert_int_equal(run_op(be, ctx, VS_BIO_DISCARD, UINT64_MAX - 10, 20), -ERANGE);
	assert_int_equal(run_op(be, ctx, VS_BIO_WRITE_ZEROES, 65536, 1), -ERANGE);
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, 65536 - 1024, buf, 1024, false), 0);

	bio_init(&bio, VS_BIO_READ, 0, &iov, 1, 1000, &w); /* len != iovec total */
	assert_int_equal(run_bio(be, ctx, &bio), -EINVAL);
	bio_init(&bio, VS_BIO_READ, 0, NULL, 1, 0, &w);
	assert_int_equal(run_bio(be, ctx, &bio), -EINVAL);
	bio_init(&bio, (enum vs_bio_op)42, 0, NULL, 0, 0, &w);
	assert_int_equal(run_bio(be, ctx, &bio), -EINVAL);
	bio_init(&bio, VS_BIO_READ, 0, &iov, 1, sizeof(buf), &w);
	bio.done = NULL;
	assert_int_equal(vs_backend_submit(be, ctx, &bio), -EINVAL);
	assert_int_equal(vs_io_ctx_inflight(ctx), 0);
	close_pair(be, ctx);
}

/* A zero-length read still completes (with 0) through the reap. */
static void test_zero_length_completes(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	struct waiter w;
	struct vs_bio bio;

	(void)state;
	open_pair("ram=64K", &be, &ctx, 4);
	bio_init(&bio, VS_BIO_READ, 65536, NULL, 0, 0, &w);
	assert_int_equal(run_bio(be, ctx, &bio), 0);
	close_pair(be, ctx);
}

/* depth bios in flight fill the context: the next gets -EAGAIN until a reap. */
static void test_ctx_full_eagain(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char buf[4][512];
	struct iovec iov[5];
	struct waiter w[5] = {0};
	struct vs_bio bio[5];

	(void)state;
	open_pair("ram=64K", &be, &ctx, 4);
	for (int i = 0; i < 5; i++) {
		iov[i] = (struct iovec){buf[i % 4], 512};
		bio_init(&bio[i], VS_BIO_READ, (uint64_t)i * 512, &iov[i], 1, 512, &w[i]);
	}
	for (int i = 0; i < 4; i++)
		assert_int_equal(vs_backend_submit(be, ctx, &bio[i]), 0);
	assert_int_equal(vs_backend_submit(be, ctx, &bio[4]), -EAGAIN);
	assert_int_equal(vs_io_ctx_inflight(ctx), 4);
	assert_int_equal(vs_io_ctx_submit(ctx), 0);
	assert_int_equal(vs_io_ctx_reap(ctx, false), 4);
	assert_int_equal(vs_backend_submit(be, ctx, &bio[4]), 0);
	assert_int_equal(vs_io_ctx_reap(ctx, true), 1);
	for (int i = 0; i < 5; i++)
		assert_int_equal(w[i].calls, 1);
	close_pair(be, ctx);
}

/* Destroying a context with bios still in flight completes them first. */
static void test_destroy_drains(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	struct bio512 wr;

	(void)state;
	open_pair("ram=64K", &be, &ctx, 4);
	submit_512(be, ctx, &wr, VS_BIO_WRITE, 0, 'w');
	vs_io_ctx_destroy(ctx);
	assert_int_equal(wr.w.calls, 1);
	assert_int_equal(wr.w.res, 0);
	vs_backend_close(be);
}

static void test_ctx_bad_depth(void **state)
{
	struct vs_io_ctx *ctx;

	(void)state;
	assert_int_equal(vs_io_ctx_create(&ctx, 0), -EINVAL);
	assert_null(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ram_round_trip_scattered),
	    cmocka_unit_test(test_deferred_completion_signals_fd),
	    cmocka_unit_test(test_delay_holds_every_nth_completion),
	    cmocka_unit_test(test_delay_options_refused),
	    cmocka_unit_test(test_null_reads_zeros),
	    cmocka_unit_test(test_ram_discard_reads_zeros),
	    cmocka_unit_test(test_rejected_bios),
	    cmocka_unit_test(test_zero_length_completes),
	    cmocka_unit_test(test_ctx_full_eagain),
	    cmocka_unit_test(test_destroy_drains),
	    cmocka_unit_test(test_ctx_bad_depth),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
