/* SPDX-License-Identifier: MIT */
/*
 * Hostile frontends, their memory (issue 8, defect 4 and the memory table cases): guest
 * memory shrunk under the target (the worker faults, io_uring gets -EFAULT), memory tables
 * that overlap, wrap, point past their file or hand over files that are no memory, and
 * memory table changes with 1,000 requests in flight on a slow backend.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostile.h"

#define REQ0 VS_VIRTIO_SCSI_VQ_REQ0

static const struct fe_opts three_rings = {.nq = 3};

/* The session was dropped because guest memory vanished; the target lives on and serves
 * the next frontend on memory restored to its size. */
static void assert_memory_fault_dropped(struct sess *s)
{
	if (!fe_dropped(&s->fe, FE_WAIT_MS) ||
	    !target_log_wait(&s->p, "guest memory vanished under the device", FE_WAIT_MS)) {
		target_log_dump(&s->p);
		fail_msg("the session was not dropped for the vanished memory");
	}
	assert_true(target_alive(&s->p));
	assert_int_equal(ftruncate(s->g.fd, (off_t)FE_MEM), 0);
	assert_int_equal(sess_reconnect(s, &three_rings), 0);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 3), 0);
	assert_int_equal(sess_end(s), 0);
}

/* The memfd shrinks below the rings after SET_MEM_TABLE: the worker's next look at the
 * ring faults.  The target must not die of SIGBUS: the session ends, saying why. */
static void memory_shrunk_under_the_rings_ends_the_session(void **state)
{
	const char *const args[] = {"--lun", "0:ram=16M", NULL};
	struct sess *s = *state;
	struct fe_cmd c = {.in_len = 512};
	uint64_t one = 1;
	uint16_t head;

	assert_int_equal(sess_start(s, args, &three_rings), 0);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 1), 0);
	/* Make a command available, then take the memory away, then kick. */
	cdb10(c.cdb, 0x28, 0, 2, 1);
	s->fe.no_kick = true;
	assert_int_equal(fe_post(&s->fe, REQ0, 1, &c, &head), 0);
	assert_int_equal(ftruncate(s->g.fd, (off_t)FE_GAP_END), 0); /* rings are above */
	assert_int_equal(write(s->fe.kick[REQ0], &one, sizeof(one)), sizeof(one));
	assert_memory_fault_dropped(s);
}

/* A RAM LUN copies into guest memory on the worker itself: a READ into memory that shrank
 * faults there.  Same outcome. */
static void ram_read_into_shrunk_memory_ends_the_session(void **state)
{
	const char *const args[] = {"--lun", "0:ram=16M", NULL};
	struct sess *s = *state;
	struct fe_cmd c = {.in_len = 64 << 10, .in_gpa = FE_BIG};
	uint16_t head;

	assert_int_equal(sess_start(s, args, &three_rings), 0);
	assert_int_equal(ftruncate(s->g.fd, (off_t)FE_BIG), 0); /* rings and slots stay */
	cdb10(c.cdb, 0x28, 0, 0, 128);
	assert_int_equal(fe_post(&s->fe, REQ0, 1, &c, &head), 0);
	assert_memory_fault_dropped(s);
}

/* A file LUN moves data with io_uring (or preadv/pwritev): the kernel meets the vanished
 * memory and returns -EFAULT.  That is a CHECK CONDITION for the command (MEDIUM ERROR,
 * UNRECOVERED READ ERROR / WRITE ERROR), and the session goes on. */
static void file_io_on_shrunk_memory_is_a_check_condition(void **state)
{
	const char *const args[] = {"--lun", "0:file=%F", NULL};
	struct sess *s = *state;
	struct fe_cmd rd = {.in_len = 64 << 10, .in_gpa = FE_BIG};
	struct fe_cmd wr = {.out_len = 64 << 10, .out_gpa = FE_BIG};

	assert_int_equal(sess_start(s, args, &three_rings), 0);
	assert_int_equal(ftruncate(s->g.fd, (off_t)FE_BIG), 0);
	cdb10(rd.cdb, 0x28, 0, 0, 128);
	assert_int_equal(fe_scsi(&s->fe, REQ0, &rd), 0);
	assert_int_equal(rd.resp.response, VS_VIRTIO_SCSI_S_OK);
	assert_int_equal(rd.resp.status, 0x02); /* CHECK CONDITION */
	assert_int_equal(sense_key(&rd.resp), 0x03);
	assert_int_equal(sense_asc(&rd.resp), 0x11);
	assert_int_equal(sense_ascq(&rd.resp), 0x00);
	cdb10(wr.cdb, 0x2a, 0, 0, 128);
	assert_int_equal(fe_scsi(&s->fe, REQ0, &wr), 0);
	assert_int_equal(wr.resp.status, 0x02);
	assert_int_equal(sense_key(&wr.resp), 0x03);
	assert_int_equal(sense_asc(&wr.resp), 0x0c);
	assert_int_equal(sense_ascq(&wr.resp), 0x00);
	/* The session is fine where the memory is. */
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 5), 0);
	assert_true(target_alive(&s->p));
	assert_int_equal(sess_end(s), 0);
}

/* ---- memory tables the target must refuse (and keep the one in force) -------------------- */
static int64_t send_table(struct sess *s, const struct vs_vhost_mem_region *r, unsigned n, int fd)
{
	struct vs_vhost_memory m = {.nregions = n};
	int fds[8];

	for (unsigned i = 0; i < n; i++) {
		m.regions[i] = r[i];
		fds[i] = fd;
	}
	return fe_ask(&s->fe, VS_VHOST_SET_MEM_TABLE, &m, 8 + 32 * n, fds, n);
}

/* Refused, with the old table still serving commands. */
static void assert_table_refused(struct sess *s, const struct vs_vhost_mem_region *r, unsigned n,
				 int fd, const char *what)
{
	int64_t st = send_table(s, r, n, fd);

	if (st != 1) {
		target_log_dump(&s->p);
		fail_msg("%s: answered %lld, not a refusal", what, (long long)st);
	}
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 9), 0);
}

static void bad_memory_tables_are_refused(void **state)
{
	const char *const args[] = {"--lun", "0:ram=16M", NULL};
	struct sess *s = *state;
	struct vs_vhost_mem_region r[2], b[2];
	char path[160];
	int fd;

	assert_int_equal(sess_start(s, args, &three_rings), 0);
	gmem_regions(&s->g, r);

	b[0] = r[0];
	b[1] = r[1];
	b[1].guest_phys_addr = 0x1000; /* inside region 0 */
	assert_table_refused(s, b, 2, s->g.fd, "overlapping guest ranges");
	b[1] = r[1];
	b[1].userspace_addr = r[0].userspace_addr + 0x1000;
	assert_table_refused(s, b, 2, s->g.fd, "overlapping user ranges");
	b[1] = r[1];
	b[1].guest_phys_addr = UINT64_MAX - 0xfff;
	assert_table_refused(s, b, 2, s->g.fd, "a guest range wrapping at 2^64");
	b[1] = r[1];
	b[1].userspace_addr = UINT64_MAX - 0xfff;
	assert_table_refused(s, b, 2, s->g.fd, "a user range wrapping at 2^64");
	b[1] = r[1];
	b[1].mmap_offset = FE_MEM - 0x1000;
	assert_table_refused(s, b, 2, s->g.fd, "an mmap offset past the end of the file");
	b[1] = r[1];
	b[1].mmap_offset = UINT64_MAX - 0xfff;
	assert_table_refused(s, b, 2, s->g.fd, "an mmap offset wrapping at 2^64");

	/* The same memory, opened read-only: it cannot be mapped for writing. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", s->g.fd);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_table_refused(s, r, 2, fd, "a read-only fd");
	close(fd);

	/* A FIFO is no memory. */
	snprintf(path, sizeof(path), "%s/fifo", s->p.dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_table_refused(s, r, 2, fd, "a FIFO");
	close(fd);
	unlink(path);

	/* Neither is a file on a disk file system (a page fault there can wait on I/O). */
	struct statfs sf;
	fd = open(s->p.file, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	if (fstatfs(fd, &sf) == 0 && sf.f_type != TMPFS_MAGIC)
		assert_table_refused(s, r, 2, fd, "a file on a disk");
	close(fd);

	/* ADD_MEM_REG over a region in force. */
	struct vs_vhost_mem_reg add = {.region = r[1]};
	int mfd = s->g.fd;
	assert_int_equal(fe_ask(&s->fe, VS_VHOST_ADD_MEM_REG, &add, sizeof(add), &mfd, 1), 1);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 9), 0);
	assert_int_equal(sess_end(s), 0);
}

/* ---- memory table changes under load ------------------------------------------------------- */
#define INFLIGHT 1000

static void pattern(uint8_t *p, unsigned i)
{
	for (unsigned k = 0; k < 4096; k++)
		p[k] = (uint8_t)(i * 131 + k * 7 + (k >> 8));
}

/* A new memory table (the same memory, split differently when `split`). */
static void change_table(struct sess *s, bool split)
{
	struct vs_vhost_mem_region r[3];

	gmem_regions(&s->g, r);
	if (split) {
		r[2] = r[1];
		r[1].memory_size = (32ull << 20) - FE_GAP_END;
		r[2].guest_phys_addr += r[1].memory_size;
		r[2].userspace_addr += r[1].memory_size;
		r[2].mmap_offset += r[1].memory_size;
		r[2].memory_size = FE_MEM - (32ull << 20);
	}
	assert_int_equal(send_table(s, r, split ? 3 : 2, s->g.fd), 0);
}

/* Post INFLIGHT commands of 4 KiB each on queue REQ0 (slot i, LBA 8 i), change the
 * memory table while they are in flight, then collect every one: all GOOD. */
static void run_batch(struct sess *s, uint8_t op, bool split)
{
	static bool seen[INFLIGHT];
	uint16_t head_slot[1024];

	for (unsigned i = 0; i < INFLIGHT; i++) {
		struct fe_cmd c = {.tag = i};
		uint16_t head;

		cdb10(c.cdb, op, 0, 8 * i, 8);
		if (op == 0x2a) {
			pattern(fe_slot_in(&s->fe, i), i);
			c.out_len = 4096;
		} else {
			memset(fe_slot_in(&s->fe, i), 0, 4096);
			c.in_len = 4096;
		}
		assert_int_equal(fe_post(&s->fe, REQ0, i, &c, &head), 0);
		head_slot[head] = (uint16_t)i;
		seen[i] = false;
	}
	change_table(s, split); /* waits for the in-flight requests to complete first */
	for (unsigned n = 0; n < INFLIGHT; n++) {
		struct fe_cmd c = {0}; /* fe_result reads its in/in_len: none here */
		uint16_t head;
		uint32_t len;

		assert_int_equal(fe_wait_used(&s->fe, REQ0, &head, &len, FE_WAIT_MS), 0);
		unsigned i = head_slot[head];
		assert_false(seen[i]);
		seen[i] = true;
		fe_result(&s->fe, i, &c);
		assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
		assert_int_equal(c.resp.status, 0);
		if (op == 0x28) {
			uint8_t want[4096];
			pattern(want, i);
			assert_memory_equal(fe_slot_in(&s->fe, i), want, 4096);
		}
	}
}

static void memory_table_changes_with_1000_requests_in_flight(void **state)
{
	/* Every bio completes 300 ms late: all 1,000 are in flight when the table changes. */
	const char *const args[] = {"--testing", "--lun", "0:ram=16M,delay=300000", NULL};
	const struct fe_opts opts = {.nq = 3, .qsize = {128, 128, 1024}};
	struct sess *s = *state;

	assert_int_equal(sess_start(s, args, &opts), 0);
	run_batch(s, 0x2a, true);
	run_batch(s, 0x28, false);
	run_batch(s, 0x28, true);
	assert_true(target_alive(&s->p));
	assert_int_equal(sess_end(s), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    SESS_TEST(memory_shrunk_under_the_rings_ends_the_session),
	    SESS_TEST(ram_read_into_shrunk_memory_ends_the_session),
	    SESS_TEST(file_io_on_shrunk_memory_is_a_check_condition),
	    SESS_TEST(bad_memory_tables_are_refused),
	    SESS_TEST(memory_table_changes_with_1000_requests_in_flight),
	};

	return hostile_init(argc, argv) ?: cmocka_run_group_tests(tests, NULL, NULL);
}
