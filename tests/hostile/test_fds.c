/* SPDX-License-Identifier: MIT */
/*
 * Hostile frontends, their fds (issue 8, defect 3): kick, call and err fds that block or
 * spin a worker, fd-carrying messages sent malformed again and again, ring set-up on a
 * started ring.  Each case runs a real `vioscope target` and ends with SIGTERM: the target
 * must exit 0 (its shutdown flush ran) within the deadline.
 */
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
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostile.h"

#define REQ0 VS_VIRTIO_SCSI_VQ_REQ0

static const char *const two_queues[] = {"--lun", "0:ram=16M", "--queues", "2", NULL};
static const struct fe_opts four_rings = {.nq = 4};

/* Send SET_VRING_<which> for queue q with fd, and wait for the target's ack. */
static void set_ring_fd(struct sess *s, uint32_t which, unsigned q, int fd)
{
	uint64_t idx = q;

	assert_int_equal(fe_ask(&s->fe, which, &idx, sizeof(idx), &fd, 1), 0);
}

/* After a drop: the reason is logged, the next frontend is served, SIGTERM still works. */
static void assert_dropped_then_served(struct sess *s, const char *why)
{
	if (!fe_dropped(&s->fe, FE_WAIT_MS) || !target_log_wait(&s->p, why, FE_WAIT_MS)) {
		target_log_dump(&s->p);
		fail_msg("the connection was not dropped with \"%s\"", why);
	}
	assert_true(target_log_wait(&s->p, "dropped", 0));
	assert_int_equal(sess_reconnect(s, &four_rings), 0);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 1), 0);
	assert_int_equal(fe_read_ok(&s->fe, REQ0 + 1, 2), 0);
	assert_int_equal(sess_end(s), 0);
}

/* Post a READ on queue q without waiting for it (its interrupt goes to a hostile fd). */
static void post_read(struct sess *s, unsigned q, unsigned slot)
{
	struct fe_cmd c = {.in_len = 512};
	uint16_t head;

	cdb10(c.cdb, 0x28, 0, 7, 1);
	vs_vq_drv_enable_cb(&s->fe.vq[q], true);
	assert_int_equal(fe_post(&s->fe, q, slot, &c, &head), 0);
}

/* Wait until the target published a used entry on queue q (by reading the ring). */
static void wait_used_published(struct sess *s, unsigned q)
{
	uint64_t deadline = now_ms() + FE_WAIT_MS;

	while (!vs_vq_drv_has_used(&s->fe.vq[q])) {
		assert_true(now_ms() < deadline);
		usleep(1000);
	}
}

/* A call fd that is a blocking eventfd one short of its counter limit: the target's write
 * would block for ever.  It must fail instead, and end that session with a reason. */
static void call_fd_at_its_counter_limit_ends_the_session(void **state)
{
	uint64_t full = 0xfffffffffffffffeull;
	struct sess *s = *state;
	int efd;

	assert_int_equal(sess_start(s, two_queues, &four_rings), 0);
	efd = eventfd(0, EFD_CLOEXEC); /* blocking */
	assert_int_equal(write(efd, &full, sizeof(full)), sizeof(full));
	set_ring_fd(s, VS_VHOST_SET_VRING_CALL, REQ0, efd);
	post_read(s, REQ0, 1);
	assert_dropped_then_served(s, "counter is full");
	close(efd);
}

/* The frontend makes its call eventfd blocking again after the target made it
 * non-blocking (the flag is in the open file both share) and fills it: the worker's write
 * blocks.  The next command to that worker interrupts it; the session ends. */
static void call_fd_made_blocking_again_is_interrupted(void **state)
{
	uint64_t full = 0xfffffffffffffffeull, idx = REQ0;
	struct sess *s = *state;
	int efd;

	assert_int_equal(sess_start(s, two_queues, &four_rings), 0);
	efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t got = 0;
	set_ring_fd(s, VS_VHOST_SET_VRING_CALL, REQ0, efd);
	/* A call fd swapped on a running ring is signalled once (an interrupt sent on the old
	 * one just before would be lost), before the swap is acknowledged. */
	assert_int_equal(read(efd, &got, sizeof(got)), sizeof(got));
	assert_int_equal(got, 1);
	assert_int_equal(fcntl(efd, F_SETFL, 0), 0);
	assert_int_equal(write(efd, &full, sizeof(full)), sizeof(full));
	post_read(s, REQ0, 1);
	wait_used_published(s, REQ0); /* the worker is at its write to efd now */
	/* GET_VRING_BASE: the worker must stop the ring, so it must come back from the write. */
	struct vs_vhost_vring_state st = {.index = (uint32_t)idx};
	assert_int_equal(fe_send(&s->fe, VS_VHOST_GET_VRING_BASE, 0, &st, sizeof(st), NULL, 0), 0);
	assert_dropped_then_served(s, "the write blocked");
	close(efd);
}

/* One blocking eventfd as the kick of two queues of one worker: both queues see the kick
 * and run; nothing waits on the fd. */
static void one_blocking_kick_for_two_queues_of_one_worker(void **state)
{
	const char *const args[] = {"--lun", "0:ram=16M", "--queues", "2", "--workers", "1", NULL};
	struct sess *s = *state;
	uint16_t head;
	uint32_t len;
	int efd;

	assert_int_equal(sess_start(s, args, &four_rings), 0);
	efd = eventfd(0, EFD_CLOEXEC); /* blocking */
	set_ring_fd(s, VS_VHOST_SET_VRING_KICK, REQ0, efd);
	set_ring_fd(s, VS_VHOST_SET_VRING_KICK, REQ0 + 1, efd);
	close(s->fe.kick[REQ0]);
	close(s->fe.kick[REQ0 + 1]);
	s->fe.kick[REQ0] = efd;
	s->fe.kick[REQ0 + 1] = dup(efd);
	post_read(s, REQ0, 1);
	post_read(s, REQ0 + 1, 2);
	assert_int_equal(fe_wait_used(&s->fe, REQ0, &head, &len, FE_WAIT_MS), 0);
	assert_int_equal(fe_wait_used(&s->fe, REQ0 + 1, &head, &len, FE_WAIT_MS), 0);
	/* The worker still answers the vhost thread. */
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 3), 0);
	assert_int_equal(fe_read_ok(&s->fe, REQ0 + 1, 4), 0);
	assert_int_equal(sess_end(s), 0);
}

/* A socket at end of file as a kick fd (always readable: a worker would spin on it) is
 * refused: the session ends, saying what the fd is. */
static void socket_at_eof_as_kick_is_refused(void **state)
{
	uint64_t idx = REQ0;
	struct sess *s = *state;
	int sv[2];

	assert_int_equal(sess_start(s, two_queues, &four_rings), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(fe_send(&s->fe, VS_VHOST_SET_VRING_KICK, 0, &idx, 8, &sv[0], 1), 0);
	close(sv[0]);
	assert_dropped_then_served(s, "kick fd is a socket, not an eventfd");
}

/* A pipe nobody reads as a call fd (a worker would block once it is full): refused. */
static void pipe_as_call_is_refused(void **state)
{
	uint64_t idx = REQ0 + 1;
	struct sess *s = *state;
	int pfd[2];

	assert_int_equal(sess_start(s, two_queues, &four_rings), 0);
	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	assert_int_equal(fe_send(&s->fe, VS_VHOST_SET_VRING_CALL, 0, &idx, 8, &pfd[1], 1), 0);
	close(pfd[0]);
	close(pfd[1]);
	assert_dropped_then_served(s, "call fd is a pipe or FIFO, not an eventfd");
}

/* A character device as an err fd: refused. */
static void device_as_err_is_refused(void **state)
{
	uint64_t idx = REQ0;
	struct sess *s = *state;
	int fd;

	assert_int_equal(sess_start(s, two_queues, &four_rings), 0);
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	assert_int_equal(fe_send(&s->fe, VS_VHOST_SET_VRING_ERR, 0, &idx, 8, &fd, 1), 0);
	close(fd);
	assert_dropped_then_served(s, "err fd is a character device, not an eventfd");
}

/* ---- every fd-carrying message, malformed, 200 times: no fd stays behind ------------------- */
enum fdkind { FD_MEMFD, FD_PIPE, FD_EVENT, FD_NULL };

struct bad_msg {
	const char *what;
	uint32_t request;
	unsigned nfds;
	enum fdkind kind;
	void (*payload)(struct sess *s, uint8_t *buf, uint32_t *size);
};

static void mem_one_region(struct sess *s, uint8_t *buf, uint32_t *size)
{
	struct vs_vhost_memory m = {.nregions = 1};
	struct vs_vhost_mem_region r[2];

	gmem_regions(&s->g, r);
	m.regions[0] = r[1];
	*size = 8 + 32;
	memcpy(buf, &m, *size);
}

static void mem_past_eof(struct sess *s, uint8_t *buf, uint32_t *size)
{
	mem_one_region(s, buf, size);
	((struct vs_vhost_memory *)buf)->regions[0].mmap_offset = FE_MEM; /* past the end */
}

static void mem_overlapping(struct sess *s, uint8_t *buf, uint32_t *size)
{
	struct vs_vhost_memory m = {.nregions = 2};
	struct vs_vhost_mem_region r[2];

	gmem_regions(&s->g, r);
	m.regions[0] = m.regions[1] = r[1];
	*size = 8 + 2 * 32;
	memcpy(buf, &m, *size);
}

static void memreg(struct sess *s, uint8_t *buf, uint32_t *size)
{
	struct vs_vhost_mem_reg m = {0};
	struct vs_vhost_mem_region r[2];

	gmem_regions(&s->g, r);
	m.region = r[1];
	m.region.guest_phys_addr = 1ull << 40; /* a region nobody added */
	*size = sizeof(m);
	memcpy(buf, &m, *size);
}

static void ring_idx(uint64_t v, uint8_t *buf, uint32_t *size)
{
	*size = 8;
	memcpy(buf, &v, 8);
}

static void ring2(struct sess *s, uint8_t *buf, uint32_t *size)
{
	(void)s;
	ring_idx(REQ0, buf, size);
}

static void ring2_nofd(struct sess *s, uint8_t *buf, uint32_t *size)
{
	(void)s;
	ring_idx(REQ0 | VS_VHOST_VRING_NOFD, buf, size);
}

static void ring_300(struct sess *s, uint8_t *buf, uint32_t *size)
{
	(void)s;
	ring_idx(300, buf, size);
}

static void log_base(struct sess *s, uint8_t *buf, uint32_t *size)
{
	(void)s;
	*size = sizeof(struct vs_vhost_log);
	memset(buf, 0, *size);
}

static void inflight(struct sess *s, uint8_t *buf, uint32_t *size)
{
	(void)s;
	*size = sizeof(struct vs_vhost_inflight);
	memset(buf, 0, *size);
}

static void empty(struct sess *s, uint8_t *buf, uint32_t *size)
{
	(void)s;
	(void)buf;
	*size = 0;
}

static const struct bad_msg bad_msgs[] = {
    {"SET_MEM_TABLE: 1 region, 2 fds", VS_VHOST_SET_MEM_TABLE, 2, FD_MEMFD, mem_one_region},
    {"SET_MEM_TABLE: a pipe as memory", VS_VHOST_SET_MEM_TABLE, 1, FD_PIPE, mem_one_region},
    {"SET_MEM_TABLE: offset past the end", VS_VHOST_SET_MEM_TABLE, 1, FD_MEMFD, mem_past_eof},
    {"SET_MEM_TABLE: overlapping regions", VS_VHOST_SET_MEM_TABLE, 2, FD_MEMFD, mem_overlapping},
    {"ADD_MEM_REG: 2 fds", VS_VHOST_ADD_MEM_REG, 2, FD_MEMFD, memreg},
    {"ADD_MEM_REG: an eventfd as memory", VS_VHOST_ADD_MEM_REG, 1, FD_EVENT, memreg},
    {"REM_MEM_REG: no such region, an fd", VS_VHOST_REM_MEM_REG, 1, FD_MEMFD, memreg},
    {"SET_VRING_KICK: NOFD and an fd", VS_VHOST_SET_VRING_KICK, 1, FD_EVENT, ring2_nofd},
    {"SET_VRING_KICK: 2 fds", VS_VHOST_SET_VRING_KICK, 2, FD_EVENT, ring2},
    {"SET_VRING_CALL: ring 300", VS_VHOST_SET_VRING_CALL, 1, FD_EVENT, ring_300},
    {"SET_VRING_ERR: a pipe", VS_VHOST_SET_VRING_ERR, 1, FD_PIPE, ring2},
    {"SET_LOG_BASE: LOG_SHMFD not negotiated", VS_VHOST_SET_LOG_BASE, 1, FD_MEMFD, log_base},
    {"SET_LOG_FD (not offered)", VS_VHOST_SET_LOG_FD, 1, FD_EVENT, empty},
    {"SET_SLAVE_REQ_FD (not offered)", VS_VHOST_SET_SLAVE_REQ_FD, 1, FD_NULL, empty},
    {"SET_INFLIGHT_FD (not offered)", VS_VHOST_SET_INFLIGHT_FD, 1, FD_MEMFD, inflight},
    {"GET_FEATURES with 3 fds", VS_VHOST_GET_FEATURES, 3, FD_NULL, empty},
    {"unknown request 99 with an fd", 99, 1, FD_EVENT, empty},
};

/* Open n fds of a kind; pipes give their read end (the write end is closed at once). */
static void open_fds(struct sess *s, enum fdkind kind, int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		int p[2];

		switch (kind) {
		case FD_MEMFD:
			fds[i] = dup(s->g.fd);
			break;
		case FD_PIPE:
			assert_int_equal(pipe2(p, O_CLOEXEC), 0);
			close(p[1]);
			fds[i] = p[0];
			break;
		case FD_EVENT:
			fds[i] = eventfd(0, EFD_CLOEXEC);
			break;
		case FD_NULL:
			fds[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
			break;
		}
		assert_true(fds[i] >= 0);
	}
}

static void each_fd_message_malformed_200_times_leaks_no_fd(void **state)
{
	const struct fe_opts mem_only = {.nq = 4, .no_rings = true};
	struct sess *s = *state;
	int base, after;

	assert_int_equal(sess_start(s, two_queues, &mem_only), 0);
	base = target_fd_count(&s->p);
	assert_true(base > 0);
	for (unsigned m = 0; m < sizeof(bad_msgs) / sizeof(bad_msgs[0]); m++) {
		const struct bad_msg *b = &bad_msgs[m];

		for (int i = 0; i < 200; i++) {
			uint8_t buf[512];
			uint32_t size;
			int fds[8];
			int64_t st;

			b->payload(s, buf, &size);
			open_fds(s, b->kind, fds, b->nfds);
			st = fe_ask(&s->fe, b->request, buf, size, fds, b->nfds);
			for (unsigned k = 0; k < b->nfds; k++)
				close(fds[k]);
			if (st <= 0) {
				target_log_dump(&s->p);
				fail_msg("%s: answered %lld, not a failure", b->what,
					 (long long)st);
			}
		}
	}
	/* Nine fds: more than a message may carry; the stream is broken and dropped, 200 times. */
	for (int i = 0; i < 200; i++) {
		uint8_t buf[512];
		uint32_t size;
		int fds[9];

		mem_one_region(s, buf, &size);
		open_fds(s, FD_MEMFD, fds, 9);
		assert_int_equal(fe_send(&s->fe, VS_VHOST_SET_MEM_TABLE, VS_VHOST_FLAG_NEED_REPLY,
					 buf, size, fds, 9),
				 0);
		for (unsigned k = 0; k < 9; k++)
			close(fds[k]);
		assert_true(fe_dropped(&s->fe, FE_WAIT_MS));
		assert_int_equal(sess_reconnect(s, &mem_only), 0);
	}
	after = target_fd_count(&s->p);
	if (after != base) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd >&2", s->p.pid);
		if (system(cmd) < 0)
			perror("ls");
	}
	assert_int_equal(after, base);
	assert_int_equal(sess_end(s), 0);
}

/* SET_VRING_NUM, _ADDR and _BASE on a started ring are refused; the ring keeps working. */
static void ring_set_up_on_a_started_ring_is_refused(void **state)
{
	struct vs_vhost_vring_state num = {.index = REQ0, .num = 64},
				    base = {.index = REQ0, .num = 5};
	struct vs_vhost_vring_addr addr;
	struct sess *s = *state;

	assert_int_equal(sess_start(s, two_queues, &four_rings), 0);
	memset(&addr, 0, sizeof(addr));
	addr.index = REQ0;
	addr.desc_user_addr = (uint64_t)(uintptr_t)gmem_host(&s->g, FE_RING(REQ0 + 1));
	addr.avail_user_addr = addr.desc_user_addr + 0x4000;
	addr.used_user_addr = addr.desc_user_addr + 0x8000;
	assert_int_equal(fe_ask(&s->fe, VS_VHOST_SET_VRING_NUM, &num, sizeof(num), NULL, 0), 1);
	assert_int_equal(fe_ask(&s->fe, VS_VHOST_SET_VRING_ADDR, &addr, sizeof(addr), NULL, 0), 1);
	assert_int_equal(fe_ask(&s->fe, VS_VHOST_SET_VRING_BASE, &base, sizeof(base), NULL, 0), 1);
	for (uint32_t lba = 0; lba < 4; lba++)
		assert_int_equal(fe_read_ok(&s->fe, REQ0, lba), 0);
	assert_int_equal(sess_end(s), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    SESS_TEST(call_fd_at_its_counter_limit_ends_the_session),
	    SESS_TEST(call_fd_made_blocking_again_is_interrupted),
	    SESS_TEST(one_blocking_kick_for_two_queues_of_one_worker),
	    SESS_TEST(socket_at_eof_as_kick_is_refused),
	    SESS_TEST(pipe_as_call_is_refused),
	    SESS_TEST(device_as_err_is_refused),
	    SESS_TEST(each_fd_message_malformed_200_times_leaks_no_fd),
	    SESS_TEST(ring_set_up_on_a_started_ring_is_refused),
	};

	return hostile_init(argc, argv) ?: cmocka_run_group_tests(tests, NULL, NULL);
}
