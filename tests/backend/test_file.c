/* SPDX-License-Identifier: MIT */
/* The file backend through io_uring: buffered and O_DIRECT, on a scratch directory
 * under /var/tmp (a disk file system, unlike /dev/shm). */
#include "common.h"
#include "tmpdir.h"

#include <sys/stat.h>

#define FSZ (1u << 20)

/* A disk file system by default; VS_BACKEND_TEST_DIR=/dev/shm runs the same
 * scenarios on tmpfs, where the backend copies synchronously instead of io_uring. */
static char tmpdir[200];

static int setup(void **state)
{
	const char *base = getenv("VS_BACKEND_TEST_DIR");
	(void)state;
	return tmpdir_make(tmpdir, sizeof(tmpdir), base ? base : "/var/tmp", "backend-file");
}

static int teardown(void **state)
{
	(void)state;
	return tmpdir_remove(tmpdir);
}

/* Fresh pattern-filled file NAME of FSZ bytes, opened with OPTS (e.g. ",direct"). */
static int open_file(const char *name, const char *opts, struct vs_backend **be, char *path,
		     size_t pathlen)
{
	char spec[600], err[256];

	make_file(tmpdir, name, FSZ, path, pathlen);
	snprintf(spec, sizeof(spec), "file=%s%s", path, opts);
	return vs_backend_open(be, spec, err, sizeof(err));
}

static void read_file(const char *path, char *buf, size_t len, off_t off)
{
	int fd = open(path, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

/* 64 writes in flight at once, then 64 scattered reads in flight: file and reads
 * both match the reference. */
static void test_round_trip_many_inflight(void **state)
{
	enum { N = 64, BS = 12288 };
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char path[512];
	char *ref = malloc(FSZ), *back = malloc(FSZ), *rbuf = calloc(N, BS);
	struct iovec iov[N][8];
	struct waiter w[N];
	struct vs_bio bio[N];
	int done = 0;

	(void)state;
	assert_int_equal(open_file("many", "", &be, path, sizeof(path)), 0);
	assert_int_equal(vs_backend_alignment(be), 1);
	assert_int_equal(vs_io_ctx_create(&ctx, N), 0);
	read_file(path, ref, FSZ, 0);
	for (int i = 0; i < N; i++) {
		uint64_t off = (uint64_t)(i * 7 % N) * BS + (unsigned)i * 3; /* disjoint */
		char *p = ref + off;

		fill_pattern(p, BS, (unsigned)i + 10);
		int n = scatter(iov[i], 8, p, BS);
		bio_init(&bio[i], VS_BIO_WRITE, off, iov[i], n, BS, &w[i]);
		w[i].calls = 0;
		assert_int_equal(vs_backend_submit(be, ctx, &bio[i]), 0);
	}
	assert_int_equal(vs_io_ctx_inflight(ctx), N);
	assert_int_equal(vs_io_ctx_submit(ctx), 0);
	while (done < N) {
		int n = vs_io_ctx_reap(ctx, true);

		assert_true(n >= 0);
		done += n;
	}
	for (int i = 0; i < N; i++) {
		assert_int_equal(w[i].calls, 1);
		assert_int_equal(w[i].res, 0);
	}
	read_file(path, back, FSZ, 0);
	assert_memory_equal(ref, back, FSZ);

	for (int i = 0; i < N; i++) {
		int n = scatter(iov[i], 8, rbuf + (size_t)i * BS, BS);

		bio_init(&bio[i], VS_BIO_READ, (uint64_t)i * BS + 5, iov[i], n, BS, &w[i]);
		w[i].calls = 0;
		assert_int_equal(vs_backend_submit(be, ctx, &bio[i]), 0);
	}
	assert_int_equal(vs_io_ctx_submit(ctx), 0);
	for (done = 0; done < N;)
		done += vs_io_ctx_reap(ctx, true);
	for (int i = 0; i < N; i++) {
		assert_int_equal(w[i].res, 0);
		assert_memory_equal(rbuf + (size_t)i * BS, ref + (size_t)i * BS + 5, BS);
	}
	close_pair(be, ctx);
	free(ref);
	free(back);
	free(rbuf);
}

/* The file shrinks after open: a read that meets the new end of file fails with -EIO
 * (after taking the short part), one before it still succeeds. */
static void test_read_past_eof_is_eio(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char path[512], buf[8192], ref[8192];

	(void)state;
	assert_int_equal(open_file("shrink", "", &be, path, sizeof(path)), 0);
	assert_int_equal(vs_io_ctx_create(&ctx, 4), 0);
	assert_int_equal(truncate(path, FSZ / 2 + 1000), 0);
	assert_true(vs_backend_size(be) == FSZ);
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, FSZ / 2, buf, sizeof(buf), false), -EIO);
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, FSZ - 4096, buf, 4096, false), -EIO);
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, FSZ / 2 - 8192, buf, 8192, false), 0);
	read_file(path, ref, 8192, FSZ / 2 - 8192);
	assert_memory_equal(buf, ref, 8192);
	close_pair(be, ctx);
}

/* A FUA write completes with 0, a FLUSH after it too, and the data is in the file. */
static void test_fua_then_flush(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char path[512], buf[4096], back[4096];

	(void)state;
	assert_int_equal(open_file("fua", "", &be, path, sizeof(path)), 0);
	assert_int_equal(vs_io_ctx_create(&ctx, 4), 0);
	fill_pattern(buf, sizeof(buf), 5);
	assert_int_equal(run_rw(be, ctx, VS_BIO_WRITE, 8192, buf, sizeof(buf), true), 0);
	assert_int_equal(run_op(be, ctx, VS_BIO_FLUSH, 0, 0), 0);
	read_file(path, back, sizeof(back), 8192);
	assert_memory_equal(buf, back, sizeof(buf));
	close_pair(be, ctx);
}

/* DISCARD and WRITE_ZEROES of unaligned ranges read back as zeros, leave the rest and
 * keep the file size. */
static void test_discard_reads_zeros(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char path[512];
	struct stat st;

	(void)state;
	assert_int_equal(open_file("discard", "", &be, path, sizeof(path)), 0);
	if (!vs_backend_supports_discard(be)) {
		vs_backend_close(be);
		skip();
	}
	assert_int_equal(vs_io_ctx_create(&ctx, 4), 0);
	zeroing_reads_zeros(be, ctx, 65536, 4096 + 100, 40000);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, FSZ);
	close_pair(be, ctx);
}

/* Read-only: reads work; writes, discards and write-zeroes get -EROFS at submit. */
static void test_read_only_rejects_writes(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char path[512], buf[4096];

	(void)state;
	assert_int_equal(open_file("ro", ",ro", &be, path, sizeof(path)), 0);
	assert_true(vs_backend_read_only(be));
	assert_int_equal(vs_io_ctx_create(&ctx, 4), 0);
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, 0, buf, sizeof(buf), false), 0);
	assert_int_equal(run_rw(be, ctx, VS_BIO_WRITE, 0, buf, sizeof(buf), false), -EROFS);
	assert_int_equal(run_op(be, ctx, VS_BIO_DISCARD, 0, 4096), -EROFS);
	assert_int_equal(run_op(be, ctx, VS_BIO_WRITE_ZEROES, 0, 4096), -EROFS);
	assert_int_equal(run_op(be, ctx, VS_BIO_FLUSH, 0, 0), 0);
	close_pair(be, ctx);
}

static void test_out_of_range(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char path[512], buf[4096];

	(void)state;
	assert_int_equal(open_file("range", "", &be, path, sizeof(path)), 0);
	assert_int_equal(vs_io_ctx_create(&ctx, 4), 0);
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, FSZ - 4095, buf, 4096, false), -ERANGE);
	assert_int_equal(run_rw(be, ctx, VS_BIO_WRITE, UINT64_MAX - 100, buf, 4096, false),
			 -ERANGE);
	assert_int_equal(run_op(be, ctx, VS_BIO_DISCARD, FSZ, 1), -ERANGE);
	assert_int_equal(vs_io_ctx_inflight(ctx), 0);
	close_pair(be, ctx);
}

/* O_DIRECT: aligned bios go straight through; misaligned buffers and unaligned
 * offsets are still served correctly, and counted. */
static void test_direct_aligned_and_misaligned(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char path[512], spec[600], err[256];
	char *abuf = aligned_alloc(4096, 4 * 65536), *ref = malloc(65536);
	char *mis = abuf + 65536 + 1, *back = abuf + 3 * 65536;
	unsigned align;
	uint64_t bounces;
	struct iovec iov[3];
	struct waiter w;
	struct vs_bio bio;
	int rc;

	(void)state;
	make_file(tmpdir, "direct", FSZ, path, sizeof(path));
	snprintf(spec, sizeof(spec), "file=%s,direct", path);
	rc = vs_backend_open(&be, spec, err, sizeof(err));
	if (rc == -EINVAL && strstr(err, "O_DIRECT not supported")) {
		free(abuf);
		free(ref);
		skip();
	}
	assert_int_equal(rc, 0);
	align = vs_backend_alignment(be);
	assert_true(align >= 512 && align <= 65536 && !(align & (align - 1)));
	assert_int_equal(vs_io_ctx_create(&ctx, 8), 0);

	/* Aligned: no fallback. */
	fill_pattern(abuf, 65536, 21);
	memcpy(ref, abuf, 65536);
	assert_int_equal(run_rw(be, ctx, VS_BIO_WRITE, 65536, abuf, 65536, false), 0);
	memset(back, 0, 65536);
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, 65536, back, 65536, false), 0);
	assert_memory_equal(back, ref, 65536);
	assert_true(vs_backend_bounce_count(be) == 0);

	/* Misaligned buffers (odd address, odd iovec split), aligned offset: bounced. */
	fill_pattern(mis, 65535, 22);
	memcpy(ref, mis, 65535);
	ref[65535] = 0x5a;
	mis[65535] = 0x5a;
	scatter(iov, 3, mis, 65536);
	bio_init(&bio, VS_BIO_WRITE, 2 * 65536, iov, 3, 65536, &w);
	assert_int_equal(run_bio(be, ctx, &bio), 0);
	memset(mis, 0, 65536);
	bio_init(&bio, VS_BIO_READ, 2 * 65536, iov, 3, 65536, &w);
	assert_int_equal(run_bio(be, ctx, &bio), 0);
	assert_memory_equal(mis, ref, 65536);
	bounces = vs_backend_bounce_count(be);
	assert_true(bounces == 2);

	/* Unaligned offset and length: served through the page cache, same bytes. */
	fill_pattern(ref, 1000, 23);
	assert_int_equal(run_rw(be, ctx, VS_BIO_WRITE, 3 * 65536 + 100, ref, 1000, true), 0);
	memset(back, 0, 1000);
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, 3 * 65536 + 100, back, 1000, false), 0);
	assert_memory_equal(back, ref, 1000);
	assert_true(vs_backend_bounce_count(be) == bounces + 2);

	/* And an aligned direct read sees what the buffered write put there. */
	assert_int_equal(run_rw(be, ctx, VS_BIO_READ, 3 * 65536, back, 4096, false), 0);
	assert_memory_equal(back + 100, ref, 1000);

	read_file(path, back, 65536, 2 * 65536);
	assert_memory_equal(back, mis, 65536);
	assert_int_equal(run_op(be, ctx, VS_BIO_FLUSH, 0, 0), 0);
	close_pair(be, ctx);
	free(abuf);
	free(ref);
}

/* The ring-backed context is bounded by depth just like the deferred one. */
static void test_file_ctx_full_eagain(void **state)
{
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	char path[512], buf[3][4096];
	struct iovec iov[3];
	struct waiter w[3] = {0};
	struct vs_bio bio[3];

	(void)state;
	assert_int_equal(open_file("full", "", &be, path, sizeof(path)), 0);
	assert_int_equal(vs_io_ctx_create(&ctx, 2), 0);
	for (int i = 0; i < 3; i++) {
		iov[i] = (struct iovec){buf[i], 4096};
		bio_init(&bio[i], VS_BIO_READ, (uint64_t)i * 4096, &iov[i], 1, 4096, &w[i]);
	}
	assert_int_equal(vs_backend_submit(be, ctx, &bio[0]), 0);
	assert_int_equal(vs_backend_submit(be, ctx, &bio[1]), 0);
	assert_int_equal(vs_backend_submit(be, ctx, &bio[2]), -EAGAIN);
	assert_int_equal(vs_io_ctx_submit(ctx), 0);
	while (vs_io_ctx_inflight(ctx))
		assert_true(vs_io_ctx_reap(ctx, true) >= 0);
	assert_int_equal(w[0].res + w[1].res, 0);
	assert_int_equal(run_bio(be, ctx, &bio[2]), 0);
	close_pair(be, ctx);
}

/* `shared` (read-write under a shared lock, for a migration's source and destination on one
 * image): shared openers coexist and both write; an exclusive writer next to them is refused,
 * and so is a shared opener next to an exclusive one (-EBUSY, after the 2 s retry). */
static void test_shared_lock(void **state)
{
	struct vs_backend *a, *b, *x;
	struct vs_io_ctx *ctx;
	char path[512], spec[600], shared[600], err[256], buf[4096], back[4096];

	(void)state;
	make_file(tmpdir, "shared", FSZ, path, sizeof(path));
	snprintf(spec, sizeof(spec), "file=%s", path);
	snprintf(shared, sizeof(shared), "file=%s,shared", path);

	/* Two shared openers succeed, both read-write; what one writes the other reads. */
	assert_int_equal(vs_backend_open(&a, shared, err, sizeof(err)), 0);
	assert_int_equal(vs_backend_open(&b, shared, err, sizeof(err)), 0);
	assert_false(vs_backend_read_only(a));
	assert_false(vs_backend_read_only(b));
	assert_int_equal(vs_io_ctx_create(&ctx, 4), 0);
	fill_pattern(buf, sizeof(buf), 77);
	assert_int_equal(run_rw(a, ctx, VS_BIO_WRITE, 8192, buf, sizeof(buf), true), 0);
	assert_int_equal(run_rw(b, ctx, VS_BIO_READ, 8192, back, sizeof(back), false), 0);
	assert_memory_equal(buf, back, sizeof(buf));
	/* An exclusive writer is refused while shared openers hold the image. */
	err[0] = '\0';
	assert_int_equal(vs_backend_open(&x, spec, err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, "failed to get the write lock"));
	vs_backend_close(b);
	assert_int_equal(vs_backend_open(&x, spec, err, sizeof(err)), -EBUSY);
	vs_io_ctx_destroy(ctx);
	vs_backend_close(a);

	/* Exclusive first: a shared opener is refused, and says why. */
	assert_int_equal(vs_backend_open(&x, spec, err, sizeof(err)), 0);
	err[0] = '\0';
	assert_int_equal(vs_backend_open(&a, shared, err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, "is writing it without `shared`"));
	assert_non_null(strstr(err, "failed to get the shared lock"));
	vs_backend_close(x);

	/* Once the exclusive one is gone, shared openers get in again. */
	assert_int_equal(vs_backend_open(&a, shared, err, sizeof(err)), 0);
	vs_backend_close(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_round_trip_many_inflight),
	    cmocka_unit_test(test_read_past_eof_is_eio),
	    cmocka_unit_test(test_fua_then_flush),
	    cmocka_unit_test(test_discard_reads_zeros),
	    cmocka_unit_test(test_read_only_rejects_writes),
	    cmocka_unit_test(test_out_of_range),
	    cmocka_unit_test(test_direct_aligned_and_misaligned),
	    cmocka_unit_test(test_file_ctx_full_eagain),
	    cmocka_unit_test(test_shared_lock),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
