/* SPDX-License-Identifier: MIT */
/*
 * Completions from a library's own threads (what librbd does for the rbd backend), without
 * Ceph: a test backend hands each request to a completer thread, which finishes it with
 * vs_io_req_remote_done() when the test tells it to.  Checked: done() runs on the
 * context's thread at a reap, never on the completer's; the context's eventfd wakes its
 * owner; a burst comes back in completion order; a second stage (remote_again) keeps the
 * bio until it is done too; a blocking reap waits for a remote completion.
 */
#include <poll.h>
#include <pthread.h>

#include "common.h"
#include "backend/backend_int.h"

#define NREQ 8

/* The completer: requests handed over, completed on command, from its own thread. */
static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct vs_io_req *held[NREQ];
	unsigned nheld, release; /* complete the first `release` held requests */
	bool stop;
	pthread_t thread;
	unsigned seconds; /* bios that went out a second time */
} cp = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static pthread_t test_thread;

static void *completer(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&cp.lock);
	for (;;) {
		while (!cp.stop && !(cp.release && cp.nheld))
			pthread_cond_wait(&cp.cond, &cp.lock);
		if (cp.stop)
			break;
		struct vs_io_req *req = cp.held[0];

		memmove(cp.held, cp.held + 1, --cp.nheld * sizeof(cp.held[0]));
		cp.release--;
		pthread_mutex_unlock(&cp.lock);
		vs_io_req_remote_done(req, (int64_t)req->bio->len);
		pthread_mutex_lock(&cp.lock);
	}
	pthread_mutex_unlock(&cp.lock);
	return NULL;
}

static void hold(struct vs_io_req *req)
{
	pthread_mutex_lock(&cp.lock);
	assert_true(cp.nheld < NREQ);
	cp.held[cp.nheld++] = req;
	pthread_mutex_unlock(&cp.lock);
}

static void release(unsigned n)
{
	pthread_mutex_lock(&cp.lock);
	cp.release += n;
	pthread_cond_signal(&cp.cond);
	pthread_mutex_unlock(&cp.lock);
}

static int remote_submit(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	struct vs_io_req *req = vs_io_req_get(ctx, be, bio);

	if (!req)
		return -EAGAIN;
	req->stage = 0;
	vs_io_req_remote_start(ctx, req);
	hold(req);
	return 0;
}

/* A FUA write goes out a second time (as the rbd backend's flush does). */
static bool remote_again(struct vs_io_ctx *ctx, struct vs_io_req *req, int64_t *res)
{
	(void)ctx;
	assert_true(pthread_equal(pthread_self(), test_thread));
	if (*res < 0)
		return false;
	*res = 0;
	if (!req->bio->fua || req->stage)
		return false;
	req->stage = 1;
	cp.seconds++;
	hold(req);
	return true;
}

static void remote_close(struct vs_backend *be)
{
	(void)be;
}

static const struct vs_be_ops remote_ops = {
    .kind = "remote-test",
    .submit = remote_submit,
    .close = remote_close,
    .remote_again = remote_again,
};

/* done(): records the order and the thread. */
static unsigned order[NREQ], norder;

static void order_done(struct vs_bio *bio, int res)
{
	assert_true(pthread_equal(pthread_self(), test_thread));
	assert_int_equal(res, 0);
	order[norder++] = (unsigned)(uintptr_t)bio->priv;
}

static bool efd_readable(struct vs_io_ctx *ctx, int ms)
{
	struct pollfd p = {.fd = vs_io_ctx_fd(ctx), .events = POLLIN};

	return poll(&p, 1, ms) == 1;
}

static int setup(void **state)
{
	static struct vs_backend be;

	memset(&be, 0, sizeof(be));
	be.ops = &remote_ops;
	be.size = 1 << 20;
	be.mem_align = be.off_align = 1;
	test_thread = pthread_self();
	memset(&cp.held, 0, sizeof(cp.held));
	cp.nheld = cp.release = cp.seconds = 0;
	cp.stop = false;
	norder = 0;
	assert_int_equal(pthread_create(&cp.thread, NULL, completer, NULL), 0);
	*state = &be;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	pthread_mutex_lock(&cp.lock);
	cp.stop = true;
	pthread_cond_signal(&cp.cond);
	pthread_mutex_unlock(&cp.lock);
	pthread_join(cp.thread, NULL);
	return 0;
}

static void prep(struct vs_bio *bio, struct iovec *iov, char *buf, unsigned i)
{
	memset(bio, 0, sizeof(*bio));
	iov->iov_base = buf;
	iov->iov_len = 512;
	bio->op = VS_BIO_WRITE;
	bio->offset = i * 512;
	bio->len = 512;
	bio->iov = iov;
	bio->iovcnt = 1;
	bio->done = order_done;
	bio->priv = (void *)(uintptr_t)i;
}

/* Four bios out, completed by the other thread: nothing runs until the owner reaps; the
 * eventfd wakes it; done() runs on the owner's thread, in completion order. */
static void test_burst_in_order_on_owner(void **state)
{
	struct vs_backend *be = *state;
	static char buf[512];
	struct vs_bio bio[4];
	struct iovec iov[4];
	struct vs_io_ctx *ctx;
	uint64_t end;

	assert_int_equal(vs_io_ctx_create(&ctx, NREQ), 0);
	for (unsigned i = 0; i < 4; i++) {
		prep(&bio[i], &iov[i], buf, i);
		assert_int_equal(vs_backend_submit(be, ctx, &bio[i]), 0);
	}
	assert_false(efd_readable(ctx, 0));
	release(4);
	assert_true(efd_readable(ctx, 5000)); /* the completer's push woke us */
	for (end = vs_mono_ns() + 5000000000ull; norder < 4;) {
		assert_true(vs_io_ctx_reap(ctx, false) >= 0);
		assert_true(vs_mono_ns() < end);
		if (norder < 4)
			assert_true(efd_readable(ctx, 5000));
	}
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(order[i], i);
	assert_int_equal(vs_io_ctx_inflight(ctx), 0);
	vs_io_ctx_destroy(ctx);
}

/* A FUA write goes out twice; its done() runs only after the second completion, and a
 * blocking reap waits for it. */
static void test_second_stage_and_blocking_reap(void **state)
{
	struct vs_backend *be = *state;
	static char buf[512];
	struct vs_bio bio;
	struct iovec iov;
	struct vs_io_ctx *ctx;

	assert_int_equal(vs_io_ctx_create(&ctx, NREQ), 0);
	prep(&bio, &iov, buf, 7);
	bio.fua = true;
	assert_int_equal(vs_backend_submit(be, ctx, &bio), 0);
	release(1);
	assert_true(efd_readable(ctx, 5000));
	assert_true(vs_io_ctx_reap(ctx, false) >= 0);
	assert_int_equal(cp.seconds, 1); /* sent out again ... */
	assert_int_equal(norder, 0);	 /* ... not done */
	release(1);
	while (!norder)
		assert_true(vs_io_ctx_reap(ctx, true) >= 0); /* blocks until the completer */
	assert_int_equal(order[0], 7);
	assert_int_equal(vs_io_ctx_inflight(ctx), 0);
	vs_io_ctx_destroy(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_burst_in_order_on_owner, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_second_stage_and_blocking_reap, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
