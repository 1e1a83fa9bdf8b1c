/* SPDX-License-Identifier: MIT */
/*
 * keep_inflight against a real `vioscope target` process (issue 26 item 3): the target is
 * SIGKILLed with requests of ours held in flight by its test gate, a new target starts on
 * the same socket and image, the initiator hands it the in-flight region, and every request
 * completes exactly once, successfully, with its data: the READs return what was written
 * before, the WRITEs are on the image.  The restarted target says how many it resubmitted.
 * Also: killed with nothing in flight, nothing is resubmitted and I/O goes on; and the
 * resubmitted requests reach the backend in the order they were submitted.
 *
 * (tests/initiator/test_inflight.c is the same against a fake back-end in this process.)
 * One scenario per test; `test_initiator_restart NAME` runs one.  Every wait has a deadline.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gate.h"
#include "harness.h"

#define N	    8 /* READs, and as many WRITEs */
#define NREQ	    (2 * N)
#define BLOCKS	    8 /* per request: 4 KiB of 512-byte blocks */
#define REQ_BYTES   (BLOCKS * 512)
#define READ_LBA    0	 /* the READs' area, written before */
#define WRITE_LBA   4096 /* the WRITEs' area */
#define DEADLINE_MS 20000
#define SEED_OLD    7  /* what the WRITEs' area held before */
#define SEED_READ   11 /* what the READs' area holds */
#define SEED_WRITE  13 /* what the WRITEs write */
#define RESUB_LINE  "request(s) taken before a restart and never answered: resubmitted"

/* The requests in flight across the restart, and what their callbacks saw: callbacks run
 * on the initiator's completion threads in interrupt mode, so a failure there is kept for
 * the test thread to report. */
struct req {
	struct vs_ini_io io;
	struct iovec iov;
	unsigned tag;
	uint8_t *buf;
};

struct tally {
	pthread_mutex_t lock;
	struct vs_ini_queue *q;
	bool poll; /* the test thread polls q (else completion threads call back) */
	unsigned count[NREQ];
	int result[NREQ];
	unsigned order[NREQ]; /* tags in the order they completed */
	unsigned done;
	char failure[256];
};

static struct req reqs[NREQ];
static struct tally tally = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void req_done(struct vs_ini_io *io)
{
	struct req *r = io->opaque;

	pthread_mutex_lock(&tally.lock);
	if (r->tag >= NREQ || &reqs[r->tag] != r) {
		if (!tally.failure[0])
			snprintf(tally.failure, sizeof(tally.failure),
				 "a completion for an io that is not one of ours (%p)", (void *)io);
	} else {
		if (tally.count[r->tag]++ && !tally.failure[0])
			snprintf(tally.failure, sizeof(tally.failure),
				 "request %u (%s) completed %u times", r->tag,
				 r->io.op == VS_INI_READ ? "READ" : "WRITE", tally.count[r->tag]);
		tally.result[r->tag] = io->result;
		if (tally.done < NREQ)
			tally.order[tally.done] = r->tag;
		tally.done++;
	}
	pthread_mutex_unlock(&tally.lock);
}

static void tally_reset(struct vs_ini_queue *q, bool poll)
{
	pthread_mutex_lock(&tally.lock);
	memset(tally.count, 0, sizeof(tally.count));
	memset(tally.order, 0, sizeof(tally.order));
	tally.done = 0;
	tally.failure[0] = 0;
	tally.q = q;
	tally.poll = poll;
	pthread_mutex_unlock(&tally.lock);
}

static unsigned tally_done(void)
{
	unsigned n;

	pthread_mutex_lock(&tally.lock);
	n = tally.done;
	pthread_mutex_unlock(&tally.lock);
	return n;
}

/* A failure seen in a callback, reported on the test thread. */
static void tally_assert_ok(void)
{
	pthread_mutex_lock(&tally.lock);
	if (tally.failure[0]) {
		print_error("completion: %s\n", tally.failure);
		pthread_mutex_unlock(&tally.lock);
		fail();
	}
	pthread_mutex_unlock(&tally.lock);
}

struct enough {
	unsigned n;
};

/* wait_until's condition: at least n completions (polling the queue in poll mode). */
static bool done_at_least(void *arg)
{
	const struct enough *e = arg;

	if (tally.poll)
		vs_ini_poll(tally.q, 64);
	return tally_done() >= e->n;
}

/* Wait (deadline) until n requests of ours completed; say which are missing if not. */
static void wait_done(unsigned n, const char *what)
{
	struct enough e = {n};

	if (!wait_until(done_at_least, &e, DEADLINE_MS)) {
		pthread_mutex_lock(&tally.lock);
		print_error("%s: after %d ms %u of the %u completions; never completed:", what,
			    DEADLINE_MS, tally.done, n);
		for (unsigned i = 0; i < NREQ; i++)
			if (!tally.count[i])
				print_error(" %u", i);
		print_error("\n");
		pthread_mutex_unlock(&tally.lock);
		fail();
	}
	tally_assert_ok();
}

/* The requests: tag 2i a READ of the READs' area, 2i+1 a WRITE to the WRITEs' area, each
 * 4 KiB of its own; interleaved so that the order of submission mixes both. */
static void reqs_prep(struct vs_ini *ini)
{
	uint8_t *mem = vs_ini_alloc(ini, NREQ * REQ_BYTES, 4096);

	assert_non_null(mem);
	for (unsigned t = 0; t < NREQ; t++) {
		struct req *r = &reqs[t];
		unsigned i = t / 2;
		bool read = !(t & 1);

		memset(&r->io, 0, sizeof(r->io));
		r->tag = t;
		r->buf = mem + t * REQ_BYTES;
		r->iov = (struct iovec){r->buf, REQ_BYTES};
		r->io.op = read ? VS_INI_READ : VS_INI_WRITE;
		r->io.lba = (read ? READ_LBA : WRITE_LBA) + (uint64_t)i * BLOCKS;
		r->io.nblocks = BLOCKS;
		r->io.iov = &r->iov;
		r->io.iovcnt = 1;
		r->io.done = req_done;
		r->io.opaque = r;
		r->io.result = 1; /* must be overwritten */
		if (read)
			memset(r->buf, 0xee, REQ_BYTES);
		else
			pattern_fill(r->buf, REQ_BYTES, SEED_WRITE, r->io.lba * 512);
	}
}

static void reqs_submit(struct vs_ini_queue *q)
{
	for (unsigned t = 0; t < NREQ; t++)
		assert_int_equal(vs_ini_submit(q, &reqs[t].io), 0);
}

/* Every request completed once and successfully; the READs hold what the area held. */
static void reqs_check(void)
{
	pthread_mutex_lock(&tally.lock);
	for (unsigned t = 0; t < NREQ; t++) {
		if (tally.count[t] != 1 || tally.result[t] != 0) {
			print_error("request %u (%s): completed %u times, result %d\n", t,
				    t & 1 ? "WRITE" : "READ", tally.count[t], tally.result[t]);
			pthread_mutex_unlock(&tally.lock);
			fail();
		}
	}
	pthread_mutex_unlock(&tally.lock);
	for (unsigned t = 0; t < NREQ; t += 2)
		if (!pattern_check(reqs[t].buf, REQ_BYTES, SEED_READ, reqs[t].io.lba * 512))
			fail_msg("READ %u (lba %llu): not the data written before the restart", t,
				 (unsigned long long)reqs[t].io.lba);
}

/* The WRITEs' data on the image, read back through the initiator and from the file. */
static void writes_on_image(struct vs_ini *ini, struct vs_ini_queue *q, const char *file)
{
	size_t len = (size_t)N * REQ_BYTES;
	uint8_t *b = vs_ini_alloc(ini, len, 4096);
	uint8_t *f = malloc(len);
	int fd, rc;

	assert_non_null(b);
	assert_non_null(f);
	memset(b, 0, len);
	rc = io_sync(q, VS_INI_READ, 0, WRITE_LBA, N * BLOCKS, b, len, 1);
	assert_int_equal(rc, 0);
	if (!pattern_check(b, len, SEED_WRITE, WRITE_LBA * 512))
		fail_msg("the WRITEs' area read back through the initiator: not their data");
	fd = open(file, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, f, len, WRITE_LBA * 512), (ssize_t)len);
	close(fd);
	if (!pattern_check(f, len, SEED_WRITE, WRITE_LBA * 512))
		fail_msg("the WRITEs' area in the image file: not their data");
	free(f);
}

/* Whatever the gate says it holds goes (releasing more than it holds lets nothing else
 * through later: a release takes only bios held already).  Reads what has arrived, whole
 * lines (each is one write of the gate's), waiting 1 ms at most. */
static void gate_let_go(int gate)
{
	struct pollfd pf = {.fd = gate, .events = POLLIN};
	char buf[512], *p;
	unsigned held, total;
	bool any = false;
	ssize_t n;

	if (poll(&pf, 1, 1) != 1)
		return;
	n = read(gate, buf, sizeof(buf) - 1);
	if (n <= 0)
		fail_msg("the target's gate connection ended");
	buf[n] = 0;
	for (p = buf; (p = strstr(p, "held ")); p++)
		if (sscanf(p, "held %u %u", &held, &total) == 2 && held)
			any = true;
	if (any)
		assert_int_equal(line_send(gate, "release 1000\n"), 0);
}

/* A request on a target whose gate holds every bio: run it to its end, letting go what the
 * gate holds meanwhile. */
static void io_released(struct vs_ini_queue *q, int gate, enum vs_ini_op op, uint64_t lba,
			uint32_t nblocks, void *buf, size_t len)
{
	static struct waiter w;
	uint64_t end = now_ms() + DEADLINE_MS;

	waiter_prep(&w, op, 0, lba, nblocks, buf, len, 1);
	assert_int_equal(waiter_submit(q, &w), 0);
	while (!__atomic_load_n(&w.done, __ATOMIC_ACQUIRE)) {
		vs_ini_poll(q, 16);
		gate_let_go(gate); /* also paces the loop */
		if (now_ms() >= end)
			fail_msg("a request the test let through did not complete in %d ms",
				 DEADLINE_MS);
	}
	assert_int_equal(w.io.result, 0);
}

/* Start t with LUN spec lun (gate-sock=%G: the test's end of the gate is returned, else
 * -1). */
static int start_target(struct tgt *t, const char *lun, bool gated)
{
	int lfd = -1, fd = -1;

	t->o.luns[0] = lun;
	t->o.testing = true;
	if (gated) {
		unlink(t->tg.gate); /* a killed target's gate: its socket file is still there */
		assert_true((lfd = gate_listen(t->tg.gate)) >= 0);
	}
	assert_int_equal(tgt_start(t), 0);
	if (gated) {
		fd = gate_accept(lfd, DEADLINE_MS);
		close(lfd);
		assert_true(fd >= 0);
	}
	return fd;
}

/* VIOSCOPE_TEST_TARGET_LOG=1 sends the targets' stderr to the test's: their lines cannot be
 * checked then. */
static bool log_checked(void)
{
	static bool said;
	bool on = !getenv("VIOSCOPE_TEST_TARGET_LOG");

	if (!on && !said) {
		print_message("  VIOSCOPE_TEST_TARGET_LOG: the targets' lines are not checked\n");
		said = true;
	}
	return on;
}

/* How many lines of the target log (every target this test started) hold needle, and
 * the figure before the first one's "request(s)". */
static unsigned log_count(struct tgt *t, const char *needle, unsigned *figure)
{
	FILE *f = fopen(t->tg.log, "r");
	char line[1024];
	unsigned n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		char *p = strstr(line, needle);

		if (!p)
			continue;
		if (!n++ && figure) {
			/* "...: 16 request(s) taken ...": the number before the needle */
			while (p > line && p[-1] == ' ')
				p--;
			while (p > line && p[-1] >= '0' && p[-1] <= '9')
				p--;
			*figure = (unsigned)strtoul(p, NULL, 10);
		}
	}
	fclose(f);
	return n;
}

static bool reconnected(void *arg)
{
	return vs_ini_connections(arg) >= 2;
}

/* Open the initiator with reconnect and keep_inflight; write what the READs will read and
 * what the WRITEs will overwrite (letting the gate's holds go when gated). */
static struct vs_ini *open_and_fill(struct tgt *t, int gate, bool interrupt)
{
	struct vs_ini_opts o = ini_opts(t, 1);
	struct vs_ini *ini;
	struct vs_ini_queue *q;
	size_t len = (size_t)N * REQ_BYTES;
	uint8_t *b;

	o.reconnect = true;
	o.keep_inflight = true;
	o.interrupt = interrupt;
	assert_int_equal(vs_ini_open(&ini, &o), 0);
	assert_int_equal(vs_ini_lun_count(ini), 1);
	q = vs_ini_get_queue(ini, 0);
	b = vs_ini_alloc(ini, len, 4096);
	assert_non_null(b);
	pattern_fill(b, len, SEED_READ, READ_LBA * 512);
	if (gate >= 0)
		io_released(q, gate, VS_INI_WRITE, READ_LBA, N * BLOCKS, b, len);
	else
		assert_int_equal(io_sync(q, VS_INI_WRITE, 0, READ_LBA, N * BLOCKS, b, len, 1), 0);
	pattern_fill(b, len, SEED_OLD, WRITE_LBA * 512);
	if (gate >= 0)
		io_released(q, gate, VS_INI_WRITE, WRITE_LBA, N * BLOCKS, b, len);
	else
		assert_int_equal(io_sync(q, VS_INI_WRITE, 0, WRITE_LBA, N * BLOCKS, b, len, 1), 0);
	return ini;
}

/* The gate holds N READs and N WRITEs in the target; it is SIGKILLed; a new target on the
 * same socket and image, its gate open (or, in_order, holding every bio and letting them go
 * one at a time), is handed the in-flight region and resubmits them. */
static void restart_with_requests_held(bool interrupt, bool in_order)
{
	struct tgt t;
	struct vs_ini *ini;
	struct vs_ini_queue *q;
	unsigned figure = 0;
	int gate, gate2 = -1, sig = 0;

	tgt_init(&t);
	t.o.file_size = 16u << 20;
	gate = start_target(&t, "0:file=%F,gate=any,gate-sock=%G", true);
	ini = open_and_fill(&t, gate, interrupt);
	q = vs_ini_get_queue(ini, 0);
	tally_reset(q, !interrupt);
	reqs_prep(ini);
	reqs_submit(q);
	/* All of them taken from the ring and held before the backend: in the target's
	 * in-flight region, none answered. */
	assert_int_equal(gate_wait_held(gate, NREQ, DEADLINE_MS), 0);
	assert_int_equal(vs_ini_inflight(q), NREQ);
	if (!interrupt)
		vs_ini_poll(q, 64);
	assert_int_equal(tally_done(), 0);

	assert_int_equal(target_stop(&t.tg, SIGKILL, DEADLINE_MS, &sig), -1);
	assert_int_equal(sig, SIGKILL);
	close(gate);
	if (log_checked())
		assert_int_equal(log_count(&t, RESUB_LINE, NULL), 0);

	if (in_order)
		gate2 = start_target(&t, "0:file=%F,gate=any,gate-sock=%G", true);
	else
		start_target(&t, "0:file=%F", false);
	if (!wait_until(reconnected, ini, DEADLINE_MS))
		fail_msg("the initiator did not reconnect to the restarted target in %d ms",
			 DEADLINE_MS);
	if (in_order) {
		/* The restarted target hands them to its backend oldest first: let the gate's
		 * oldest go one at a time, and each is the next in the order of submission. */
		for (unsigned k = 0; k < NREQ; k++) {
			if (gate_wait_held(gate2, NREQ - k, DEADLINE_MS))
				fail_msg("the restarted target's gate never held the %u request(s) "
					 "left: not resubmitted",
					 NREQ - k);
			assert_int_equal(line_send(gate2, "release 1\n"), 0);
			wait_done(k + 1, "the oldest request the restarted target held, let go");
			pthread_mutex_lock(&tally.lock);
			unsigned tag = tally.order[k];
			pthread_mutex_unlock(&tally.lock);
			if (tag != k)
				fail_msg("resubmitted out of order: completion %u is request %u", k,
					 tag);
		}
		line_send(gate2, "open\n");
	} else {
		wait_done(NREQ, "requests held in the killed target, after the restart");
	}
	reqs_check();
	assert_int_equal(vs_ini_inflight(q), 0);

	/* The restarted target said what it resubmitted, once, and how many. */
	if (log_checked() && !target_log_wait(&t.tg, RESUB_LINE, DEADLINE_MS)) {
		target_log_dump(&t.tg);
		fail_msg("the restarted target never said '%s'", RESUB_LINE);
	}
	if (log_checked() && log_count(&t, RESUB_LINE, &figure) != 1) {
		target_log_dump(&t.tg);
		fail_msg("the restarted target said '%s' more than once", RESUB_LINE);
	}
	if (log_checked() && figure != NREQ) {
		target_log_dump(&t.tg);
		fail_msg("the restarted target resubmitted %u request(s), %u were held", figure,
			 NREQ);
	}

	writes_on_image(ini, q, t.tg.file);
	/* Nothing completed twice meanwhile (a late duplicate). */
	if (!interrupt)
		vs_ini_poll(q, 64);
	tally_assert_ok();
	assert_int_equal(tally_done(), NREQ);
	vs_ini_close(ini);
	if (gate2 >= 0)
		close(gate2);
	tgt_fini(&t);
}

static void test_restart_resubmitted_once(void **state)
{
	(void)state;
	restart_with_requests_held(false, false);
}

static void test_restart_resubmitted_once_interrupt(void **state)
{
	(void)state;
	restart_with_requests_held(true, false);
}

static void test_restart_resubmitted_in_order(void **state)
{
	(void)state;
	restart_with_requests_held(false, true);
}

/* Killed with nothing in flight: the restarted target resubmits nothing, and I/O goes on
 * (a WRITE and a READ of it after the restart; what was written before is still there). */
static void test_restart_nothing_in_flight(void **state)
{
	struct tgt t;
	struct vs_ini *ini;
	struct vs_ini_queue *q;
	size_t len = (size_t)N * REQ_BYTES;
	uint64_t end;
	uint8_t *b;
	int rc, sig = 0;

	(void)state;
	tgt_init(&t);
	t.o.file_size = 16u << 20;
	start_target(&t, "0:file=%F", false);
	ini = open_and_fill(&t, -1, false);
	q = vs_ini_get_queue(ini, 0);
	assert_int_equal(vs_ini_inflight(q), 0);
	assert_int_equal(target_stop(&t.tg, SIGKILL, DEADLINE_MS, &sig), -1);
	assert_int_equal(sig, SIGKILL);

	start_target(&t, "0:file=%F", false);
	if (!wait_until(reconnected, ini, DEADLINE_MS))
		fail_msg("the initiator did not reconnect to the restarted target in %d ms",
			 DEADLINE_MS);
	b = vs_ini_alloc(ini, len, 4096);
	assert_non_null(b);
	/* The reconnection counts once the rings run; a submit before the LUNs are scanned
	 * again may still be refused. */
	end = now_ms() + DEADLINE_MS;
	while ((rc = io_sync(q, VS_INI_READ, 0, READ_LBA, N * BLOCKS, b, len, 1)) == -ENOTCONN) {
		assert_true(now_ms() < end);
		usleep(1000);
	}
	assert_int_equal(rc, 0);
	assert_true(pattern_check(b, len, SEED_READ, READ_LBA * 512));
	pattern_fill(b, len, SEED_WRITE, WRITE_LBA * 512);
	assert_int_equal(io_sync(q, VS_INI_WRITE, 0, WRITE_LBA, N * BLOCKS, b, len, 1), 0);
	writes_on_image(ini, q, t.tg.file);
	assert_int_equal(vs_ini_inflight(q), 0);
	if (log_checked() && log_count(&t, RESUB_LINE, NULL)) {
		target_log_dump(&t.tg);
		fail_msg("a target killed with nothing in flight: its successor resubmitted");
	}
	vs_ini_close(ini);
	tgt_fini(&t);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_restart_resubmitted_once),
	    cmocka_unit_test(test_restart_resubmitted_once_interrupt),
	    cmocka_unit_test(test_restart_resubmitted_in_order),
	    cmocka_unit_test(test_restart_nothing_in_flight),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
