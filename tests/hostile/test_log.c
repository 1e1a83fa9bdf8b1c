/* SPDX-License-Identifier: MIT */
/*
 * Dirty logging for live migration (issue 26), from the frontend's side: while it migrates
 * the guest, every page the target writes (READ data, the response, the used ring) must be
 * marked in the log it shares, and nothing else; and the log itself is the frontend's, so one
 * that is too small, not a memory file, or shrinks under the target is refused or ends the
 * session, never trusted.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostile.h"

#define REQ0 VS_VIRTIO_SCSI_VQ_REQ0
#define PAGE VS_LOG_PAGE
/* QEMU's log: one bit per page, in u64 words, rounded up (vhost_get_log_size). */
#define LOG_BYTES ((FE_MEM / PAGE / 64 + 1) * 8)

static const struct fe_opts logging_rings = {.nq = 3, .log_shmfd = true};
static const char *const ram_lun[] = {"--lun", "0:ram=16M", NULL};

struct log {
	int fd;
	uint8_t *bits;
	size_t bytes;
};

static void log_make(struct log *l, size_t bytes)
{
	l->fd = memfd_create("vhost-log", MFD_CLOEXEC);
	assert_true(l->fd >= 0);
	assert_int_equal(ftruncate(l->fd, (off_t)bytes), 0);
	l->bits = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, l->fd, 0);
	assert_true(l->bits != MAP_FAILED);
	l->bytes = bytes;
}

static void log_free(struct log *l)
{
	munmap(l->bits, l->bytes);
	close(l->fd);
}

static bool page_dirty(const struct log *l, uint64_t gpa)
{
	uint64_t p = gpa / PAGE;
	return __atomic_load_n(&l->bits[p / 8], __ATOMIC_ACQUIRE) & (1u << (p % 8));
}

static unsigned dirty_pages(const struct log *l)
{
	unsigned n = 0;
	for (size_t i = 0; i < l->bytes; i++)
		n += (unsigned)__builtin_popcount(l->bits[i]);
	return n;
}

/* SET_LOG_BASE as QEMU sends it: the fd attached, an empty reply awaited. */
static int set_log_base(struct sess *s, int fd, uint64_t size, uint64_t offset)
{
	struct vs_vhost_log lb = {.mmap_size = size, .mmap_offset = offset};
	struct vs_vhost_msg reply;
	int rc = fe_send(&s->fe, VS_VHOST_SET_LOG_BASE, 0, &lb, sizeof(lb), &fd, fd >= 0);

	if (rc)
		return rc;
	if ((rc = fe_reply(&s->fe, &reply)))
		return rc;
	return reply.request == VS_VHOST_SET_LOG_BASE && reply.size == 0 ? 0 : -EPROTO;
}

static uint64_t gpa_of(struct sess *s, const void *host)
{
	return (uint64_t)((const uint8_t *)host - s->g.mem);
}

/* Logging on or off, as QEMU's vhost_dev_set_log: features, then every ring's address with
 * VHOST_VRING_F_LOG and the used ring's guest address. */
static void set_logging(struct sess *s, bool on)
{
	uint64_t f = s->fe.features | (on ? 1ull << VS_VHOST_F_LOG_ALL : 0);

	assert_int_equal(fe_ask(&s->fe, VS_VHOST_SET_FEATURES, &f, sizeof(f), NULL, 0), 0);
	for (unsigned q = 0; q < s->fe.nq; q++) {
		struct vs_vq_drv *vq = &s->fe.vq[q];
		struct vs_vhost_vring_addr a = {
		    .index = q,
		    .flags = on ? VS_VHOST_VRING_F_LOG : 0,
		    .desc_user_addr = (uintptr_t)vq->desc,
		    .used_user_addr = (uintptr_t)vq->used,
		    .avail_user_addr = (uintptr_t)vq->avail,
		    .log_guest_addr = gpa_of(s, vq->used),
		};
		assert_int_equal(fe_ask(&s->fe, VS_VHOST_SET_VRING_ADDR, &a, sizeof(a), NULL, 0),
				 0);
	}
}

/* READ(10) of 16 KiB from LUN 0 into FE_BIG + off; GOOD. */
static void read_16k(struct sess *s, uint64_t off)
{
	struct fe_cmd c = {.in_len = 16 << 10, .in_gpa = FE_BIG + off};

	cdb10(c.cdb, 0x28, 0, 8, 32);
	assert_int_equal(fe_scsi(&s->fe, REQ0, &c), 0);
	assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
	assert_int_equal(c.resp.status, 0);
}

/* A session whose frontend shared a whole log (a bit for every page of guest memory). */
static void start_with_log(struct sess *s, struct log *l)
{
	log_make(l, LOG_BYTES);
	assert_int_equal(sess_start(s, ram_lun, &logging_rings), 0);
	assert_int_equal(set_log_base(s, l->fd, l->bytes, 0), 0);
}

/* Scenario: logging on, one READ of 16 KiB: its 4 data pages, its response's page and the
 * used ring's page are marked, and nothing else; logging off, another READ marks nothing. */
static void read_marks_its_data_response_and_used_ring(void **state)
{
	struct sess *s = *state;
	struct log l;

	start_with_log(s, &l);
	set_logging(s, true);
	read_16k(s, 0);
	for (unsigned i = 0; i < 4; i++)
		assert_true(page_dirty(&l, FE_BIG + i * PAGE));
	assert_false(page_dirty(&l, FE_BIG + 4 * PAGE));
	assert_true(page_dirty(&l, FE_SLOT(0) + FE_SLOT_RESP));
	assert_true(page_dirty(&l, gpa_of(s, s->fe.vq[REQ0].used)));
	/* Data, response (with the request header: one page), used ring: 4 + 1 + 1 or 2. */
	assert_in_range(dirty_pages(&l), 6, 7);

	/* Switching off stops the rings under logging: clear what that marked, then read. */
	set_logging(s, false);
	memset(l.bits, 0, l.bytes);
	read_16k(s, 64 << 10);
	assert_int_equal(dirty_pages(&l), 0);
	assert_int_equal(sess_end(s), 0);
	log_free(&l);
}

/* Scenario: the test-only switch VIOSCOPE_TEST_SKIP_DATA_IN_LOG (what guest.migrate's
 * must-fail run uses): the READ's data pages stay unmarked, its response is marked. */
static void test_switch_skips_data_in_only(void **state)
{
	struct sess *s = *state;
	struct log l;

	log_make(&l, LOG_BYTES);
	setenv("VIOSCOPE_TEST_SKIP_DATA_IN_LOG", "1", 1);
	assert_int_equal(sess_start(s, ram_lun, &logging_rings), 0);
	unsetenv("VIOSCOPE_TEST_SKIP_DATA_IN_LOG");
	assert_int_equal(set_log_base(s, l.fd, l.bytes, 0), 0);
	set_logging(s, true);
	read_16k(s, 0);
	for (unsigned i = 0; i < 4; i++)
		assert_false(page_dirty(&l, FE_BIG + i * PAGE));
	assert_true(page_dirty(&l, FE_SLOT(0) + FE_SLOT_RESP));
	assert_int_equal(sess_end(s), 0);
	log_free(&l);
}

/* The target dropped the session (why in its log) and serves the next frontend. */
static void assert_dropped_then_served(struct sess *s, const char *why)
{
	if (!fe_dropped(&s->fe, FE_WAIT_MS) || !target_log_wait(&s->p, why, FE_WAIT_MS)) {
		target_log_dump(&s->p);
		fail_msg("the session was not dropped for: %s", why);
	}
	assert_true(target_alive(&s->p));
	assert_int_equal(sess_reconnect(s, &logging_rings), 0);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 3), 0);
}

/* Scenario: logs the target must not take: smaller than guest memory (the pages beyond
 * would never reach the destination), no fd, a file on a disk, a size that wraps.  Each is
 * refused (the session ends, saying why); the target serves the next one. */
static void bad_logs_are_refused(void **state)
{
	struct sess *s = *state;
	struct log l;
	char path[] = "/var/tmp/vioscope-log-XXXXXX";
	int disk = mkstemp(path);

	assert_true(disk >= 0);
	unlink(path);
	assert_int_equal(ftruncate(disk, LOG_BYTES), 0);
	log_make(&l, LOG_BYTES);
	assert_int_equal(sess_start(s, ram_lun, &logging_rings), 0);

	assert_int_not_equal(set_log_base(s, l.fd, FE_MEM / PAGE / 8 - 8, 0), 0);
	assert_dropped_then_served(s, "is smaller than guest memory needs");
	assert_int_not_equal(set_log_base(s, -1, l.bytes, 0), 0);
	assert_dropped_then_served(s, "without the log's fd");
	assert_int_not_equal(set_log_base(s, disk, LOG_BYTES, 0), 0);
	assert_dropped_then_served(s, "not tmpfs or hugetlbfs");
	assert_int_not_equal(set_log_base(s, l.fd, l.bytes, UINT64_MAX - 4), 0);
	assert_dropped_then_served(s, "not a usable size");
	/* Its file must hold what it claims. */
	assert_int_not_equal(set_log_base(s, l.fd, l.bytes, 1 << 20), 0);
	assert_dropped_then_served(s, "bytes of its file");
	/* A used ring's log address beyond the log: that ring does not start logging. */
	assert_int_equal(set_log_base(s, l.fd, l.bytes, 0), 0);
	assert_int_equal(sess_end(s), 0);
	close(disk);
	log_free(&l);
}

/* Scenario: the frontend shrinks its log file while the target logs into it: the target
 * must not die of SIGBUS; the session ends saying why, and the next is served. */
static void log_shrunk_under_the_target_ends_the_session(void **state)
{
	struct sess *s = *state;
	struct log l;

	start_with_log(s, &l);
	set_logging(s, true);
	read_16k(s, 0);
	assert_int_equal(ftruncate(l.fd, 0), 0);
	/* The next completion marks the log: that faults. */
	{
		struct fe_cmd c = {.in_len = 512};
		uint16_t head;
		cdb10(c.cdb, 0x28, 0, 1, 1);
		assert_int_equal(fe_post(&s->fe, REQ0, 1, &c, &head), 0);
	}
	assert_dropped_then_served(s, "the dirty log vanished under the device");
	assert_int_equal(sess_end(s), 0);
	munmap(l.bits, l.bytes);
	close(l.fd);
}

/* Scenario: logging switched on and off again with requests in flight on a started ring
 * (as QEMU does at a migration's start and end): nothing is lost, every read comes back
 * GOOD, and the ring's addresses still cannot change while it runs. */
static void logging_toggled_on_a_running_ring(void **state)
{
	struct sess *s = *state;
	struct log l;

	start_with_log(s, &l);
	for (int i = 0; i < 20; i++) {
		set_logging(s, true);
		assert_int_equal(fe_read_ok(&s->fe, REQ0, (uint32_t)i), 0);
		set_logging(s, false);
		assert_int_equal(fe_read_ok(&s->fe, REQ0, (uint32_t)i + 1), 0);
	}
	{
		struct vs_vq_drv *vq = &s->fe.vq[REQ0];
		struct vs_vhost_vring_addr a = {
		    .index = REQ0,
		    .flags = VS_VHOST_VRING_F_LOG,
		    .desc_user_addr = (uintptr_t)vq->desc + 4096,
		    .used_user_addr = (uintptr_t)vq->used,
		    .avail_user_addr = (uintptr_t)vq->avail,
		    .log_guest_addr = gpa_of(s, vq->used),
		};
		assert_int_equal(fe_ask(&s->fe, VS_VHOST_SET_VRING_ADDR, &a, sizeof(a), NULL, 0),
				 1);
	}
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 7), 0);
	assert_int_equal(sess_end(s), 0);
	log_free(&l);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    SESS_TEST(read_marks_its_data_response_and_used_ring),
	    SESS_TEST(test_switch_skips_data_in_only),
	    SESS_TEST(bad_logs_are_refused),
	    SESS_TEST(log_shrunk_under_the_target_ends_the_session),
	    SESS_TEST(logging_toggled_on_a_running_ring),
	};
	return hostile_init(argc, argv) ?: cmocka_run_group_tests(tests, NULL, NULL);
}
