/* SPDX-License-Identifier: MIT */
/*
 * vhost-user device side over a real Unix socket, driven by the driver side the way
 * QEMU 7.2 drives vhost-user-scsi: negotiation, a two-region memory table of one memfd,
 * three rings, stop/restart, a second memory table, disconnects and bad messages.
 */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tmpdir.h"

#include "vhost/vhost_dev.h"
#include "vhost/vhost_drv.h"

#define NQ	     3	      /* rings the test drives (control, event, one request queue) */
#define MAXQ	     8	      /* rings the back-end offers */
#define MEM_SIZE     0x100000 /* the "guest": region 0 = [0, 0xa0000), region 1 = [0xc0000, end) */
#define RING(q)	     (0xc0000 + (q)*0x4000) /* desc, avail at +0x1000, used at +0x2000 */
#define DEV_FEATURES (VS_VIRTIO_BIT(VS_VIRTIO_F_VERSION_1) | VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX))
#define PROTO_BIT    (1ull << VS_VHOST_F_PROTOCOL_FEATURES)
#define LOG_ALL_BIT  (1ull << VS_VHOST_F_LOG_ALL) /* the layer offers dirty logging */

struct rec {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int connects, disconnects, mem_changes, call_changes;
	int starts[MAXQ], stops[MAXQ];
	struct vs_vhost_vring vr[MAXQ]; /* at the last start */
	uint32_t marks[MAXQ][3];	/* first word of desc/avail/used, read at start */
	unsigned mem_nregions;		/* at the last mem_changed */
	unsigned start_nregions[MAXQ];	/* vr->mem->nregions at the last start */
	uint16_t stop_at[MAXQ];		/* what queue_stop reports */
	ino_t new_call_ino[MAXQ];	/* inode of the fd call_fd_changed got */
};

struct fixture {
	char dir[64], path[128];
	struct vs_vhost_server *srv;
	pthread_t thr;
	volatile sig_atomic_t stop;
	int memfd;
	uint8_t *mem; /* the frontend's mapping: its addresses are the "user addresses" */
	struct vs_vhost_drv f;
	struct rec rec;
};

/* ---- ops: record everything, under the lock (they run on the serve thread) ---------------- */
static void bump(struct rec *r, int *counter)
{
	(*counter)++;
	pthread_cond_broadcast(&r->cond);
}

static int op_start(void *opaque, unsigned idx, const struct vs_vhost_vring *vr)
{
	struct rec *r = opaque;
	pthread_mutex_lock(&r->lock);
	r->vr[idx] = *vr;
	memcpy(&r->marks[idx][0], vr->desc, 4);
	memcpy(&r->marks[idx][1], vr->avail, 4);
	memcpy(&r->marks[idx][2], vr->used, 4);
	r->start_nregions[idx] = vr->mem->nregions;
	bump(r, &r->starts[idx]);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static int op_stop(void *opaque, unsigned idx, uint16_t *last_avail_idx)
{
	struct rec *r = opaque;
	pthread_mutex_lock(&r->lock);
	if (r->stop_at[idx])
		*last_avail_idx = r->stop_at[idx];
	bump(r, &r->stops[idx]);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static void op_mem(void *opaque, const struct vs_mem *mem)
{
	struct rec *r = opaque;
	pthread_mutex_lock(&r->lock);
	r->mem_nregions = mem->nregions;
	bump(r, &r->mem_changes);
	pthread_mutex_unlock(&r->lock);
}

static int op_call(void *opaque, unsigned idx, int fd)
{
	struct rec *r = opaque;
	pthread_mutex_lock(&r->lock);
	struct stat st;
	r->new_call_ino[idx] = fstat(fd, &st) == 0 ? st.st_ino : 0;
	bump(r, &r->call_changes);
	pthread_mutex_unlock(&r->lock);
	return 0;
}

static void op_conn(void *opaque)
{
	struct rec *r = opaque;
	pthread_mutex_lock(&r->lock);
	bump(r, &r->connects);
	pthread_mutex_unlock(&r->lock);
}

static void op_disc(void *opaque, const char *why)
{
	(void)why;
	struct rec *r = opaque;
	pthread_mutex_lock(&r->lock);
	bump(r, &r->disconnects);
	pthread_mutex_unlock(&r->lock);
}

static const struct vs_vhost_dev_ops ops = {
    .queue_start = op_start,
    .queue_stop = op_stop,
    .mem_changed = op_mem,
    .call_fd_changed = op_call,
    .connected = op_conn,
    .disconnected = op_disc,
};

static void set_stop_at(struct fixture *fx, unsigned q, uint16_t v)
{
	pthread_mutex_lock(&fx->rec.lock);
	fx->rec.stop_at[q] = v;
	pthread_mutex_unlock(&fx->rec.lock);
}

/* Read a counter under the lock. */
static int get(struct fixture *fx, const int *counter)
{
	pthread_mutex_lock(&fx->rec.lock);
	int v = *counter;
	pthread_mutex_unlock(&fx->rec.lock);
	return v;
}

/* Wait for an asynchronous event (a disconnect seen by the serve thread); the deadline
 * only turns a hang into a failure. */
static void wait_for(struct fixture *fx, const int *counter, int value)
{
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 20;
	pthread_mutex_lock(&fx->rec.lock);
	while (*counter < value &&
	       pthread_cond_timedwait(&fx->rec.cond, &fx->rec.lock, &dl) != ETIMEDOUT)
		;
	int v = *counter;
	pthread_mutex_unlock(&fx->rec.lock);
	assert_int_equal(v, value);
}

static void *serve_thread(void *arg)
{
	struct fixture *fx = arg;
	vs_vhost_server_serve(fx->srv, &fx->stop);
	return NULL;
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	pthread_mutex_init(&fx->rec.lock, NULL);
	pthread_cond_init(&fx->rec.cond, NULL);
	assert_int_equal(tmpdir_make(fx->dir, sizeof(fx->dir), NULL, "vhost"), 0);
	snprintf(fx->path, sizeof(fx->path), "%s/sock", fx->dir);

	fx->memfd = memfd_create("guest", MFD_CLOEXEC);
	assert_true(fx->memfd >= 0);
	assert_int_equal(ftruncate(fx->memfd, MEM_SIZE), 0);
	fx->mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fx->memfd, 0);
	assert_true(fx->mem != MAP_FAILED);
	for (uint32_t q = 0; q < NQ; q++) {
		uint32_t m[3] = {0xd0000000 | q, 0xa0000000 | q, 0xb0000000 | q};
		for (int i = 0; i < 3; i++)
			memcpy(fx->mem + RING(q) + i * 0x1000, &m[i], 4);
	}

	fx->srv = vs_vhost_server_create(fx->path, MAXQ, DEV_FEATURES, &ops, &fx->rec);
	assert_non_null(fx->srv);
	assert_int_equal(pthread_create(&fx->thr, NULL, serve_thread, fx), 0);
	assert_int_equal(vs_vhost_drv_connect(&fx->f, fx->path), 0);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;

	vs_vhost_drv_close(&fx->f);
	__atomic_store_n(&fx->stop, 1, __ATOMIC_RELAXED);
	vs_vhost_server_wake(fx->srv);
	pthread_join(fx->thr, NULL);
	vs_vhost_server_destroy(fx->srv);
	munmap(fx->mem, MEM_SIZE);
	close(fx->memfd);
	tmpdir_remove(fx->dir);
	free(fx);
	return 0;
}

/* ---- the QEMU-like sequence, in steps ------------------------------------------------------ */
static void negotiate(struct fixture *fx, uint64_t protocol, bool ack_proto_bit)
{
	uint64_t v;

	assert_int_equal(vs_vhost_drv_get_features(&fx->f, &v), 0);
	assert_int_equal(v, DEV_FEATURES | PROTO_BIT | LOG_ALL_BIT);
	assert_int_equal(vs_vhost_drv_get_protocol_features(&fx->f, &v), 0);
	assert_int_equal(v, VS_VHOST_DEV_PROTOCOL_FEATURES);
	assert_int_equal(vs_vhost_drv_set_protocol_features(&fx->f, protocol), 0);
	assert_int_equal(vs_vhost_drv_get_queue_num(&fx->f, &v), 0);
	assert_int_equal(v, MAXQ);
	assert_int_equal(vs_vhost_drv_set_owner(&fx->f), 0);
	assert_int_equal(
	    vs_vhost_drv_set_features(&fx->f, DEV_FEATURES | (ack_proto_bit ? PROTO_BIT : 0)), 0);
}

#define REPLY_ACK (1ull << VS_VHOST_PROTOCOL_F_REPLY_ACK)
#define MQ	  (1ull << VS_VHOST_PROTOCOL_F_MQ)

static struct vs_vhost_mem_region mk_region(struct fixture *fx, uint64_t gpa, uint64_t size)
{
	return (struct vs_vhost_mem_region){
	    .guest_phys_addr = gpa,
	    .memory_size = size,
	    .userspace_addr = (uint64_t)(uintptr_t)(fx->mem + gpa),
	    .mmap_offset = gpa,
	};
}

static void mem_two_regions(struct fixture *fx)
{
	struct vs_vhost_mem_region r[2] = {mk_region(fx, 0, 0xa0000),
					   mk_region(fx, 0xc0000, MEM_SIZE - 0xc0000)};
	int fds[2] = {fx->memfd, fx->memfd};
	assert_int_equal(vs_vhost_drv_set_mem_table(&fx->f, r, 2, fds), 0);
}

static uint64_t uva(struct fixture *fx, uint64_t gpa)
{
	return (uint64_t)(uintptr_t)(fx->mem + gpa);
}

static void ring_setup(struct fixture *fx, unsigned q)
{
	int kick = eventfd(0, EFD_CLOEXEC), call = eventfd(0, EFD_CLOEXEC);

	assert_int_equal(vs_vhost_drv_set_vring_num(&fx->f, q, 128), 0);
	assert_int_equal(vs_vhost_drv_set_vring_base(&fx->f, q, (uint16_t)(7 + q)), 0);
	assert_int_equal(vs_vhost_drv_set_vring_addr(&fx->f, q, uva(fx, RING(q)),
						     uva(fx, RING(q) + 0x1000),
						     uva(fx, RING(q) + 0x2000)),
			 0);
	assert_int_equal(vs_vhost_drv_set_vring_kick(&fx->f, q, kick), 0);
	assert_int_equal(vs_vhost_drv_set_vring_call(&fx->f, q, call), 0);
	close(kick); /* the back-end holds its own copies */
	close(call);
}

static void start_all(struct fixture *fx)
{
	negotiate(fx, MQ | REPLY_ACK, true);
	mem_two_regions(fx);
	for (unsigned q = 0; q < NQ; q++)
		ring_setup(fx, q);
	for (unsigned q = 0; q < NQ; q++)
		assert_int_equal(vs_vhost_drv_set_vring_enable(&fx->f, q, true), 0);
}

/* The recorder's state, copied under the lock (cmocka asserts must not fire while the
 * lock is held: they long-jump out of the test). */
static struct rec snap(struct fixture *fx)
{
	struct rec r;
	pthread_mutex_lock(&fx->rec.lock);
	r = fx->rec;
	pthread_mutex_unlock(&fx->rec.lock);
	return r;
}

static void assert_ring_ok(struct fixture *fx, unsigned q)
{
	struct rec r = snap(fx);

	assert_int_equal(r.vr[q].index, q);
	assert_int_equal(r.vr[q].size, 128);
	assert_int_equal(r.marks[q][0], 0xd0000000 | q);
	assert_int_equal(r.marks[q][1], 0xa0000000 | q);
	assert_int_equal(r.marks[q][2], 0xb0000000 | q);
	assert_true(r.vr[q].kick_fd >= 0);
	assert_true(r.vr[q].event_idx);
}

/* Scenario: the QEMU sequence with PROTOCOL_FEATURES negotiated: kick does not start a
 * ring (it starts disabled), SET_VRING_ENABLE 1 does, with pointers into guest memory,
 * the base that was set and its fds. */
static void test_qemu_sequence_starts_rings(void **state)
{
	struct fixture *fx = *state;

	negotiate(fx, MQ | REPLY_ACK, true);
	mem_two_regions(fx);
	assert_int_equal(get(fx, &fx->rec.mem_changes), 1);
	for (unsigned q = 0; q < NQ; q++)
		ring_setup(fx, q);
	for (unsigned q = 0; q < NQ; q++)
		assert_int_equal(get(fx, &fx->rec.starts[q]), 0);
	for (unsigned q = 0; q < NQ; q++) {
		assert_int_equal(vs_vhost_drv_set_vring_enable(&fx->f, q, true), 0);
		assert_int_equal(get(fx, &fx->rec.starts[q]), 1);
		assert_ring_ok(fx, q);
		assert_true(snap(fx).vr[q].call_fd >= 0); /* call arrived before enable */
		assert_int_equal(snap(fx).vr[q].last_avail_idx, 7 + q);
		assert_int_equal(snap(fx).start_nregions[q], 2);
	}
}

/* Scenario: without PROTOCOL_FEATURES acked, a ring starts on its kick alone (before
 * its call fd, which QEMU sends next: that one is handed over in place). */
static void test_kick_starts_ring_without_protocol_features(void **state)
{
	struct fixture *fx = *state;

	negotiate(fx, MQ | REPLY_ACK, false);
	mem_two_regions(fx);
	ring_setup(fx, 0);
	assert_int_equal(get(fx, &fx->rec.starts[0]), 1);
	assert_ring_ok(fx, 0);
	assert_int_equal(snap(fx).vr[0].call_fd, -1);
	assert_int_equal(get(fx, &fx->rec.call_changes), 1);
	assert_int_equal(get(fx, &fx->rec.stops[0]), 0);
}

/* Scenario: GET_VRING_BASE stops a running ring (queue_stop) and returns where it
 * stopped; a new kick restarts it from there. */
static void test_get_vring_base_stops_ring(void **state)
{
	struct fixture *fx = *state;
	uint16_t base = 0;

	start_all(fx);
	set_stop_at(fx, 1, 42);
	assert_int_equal(vs_vhost_drv_get_vring_base(&fx->f, 1, &base), 0);
	assert_int_equal(base, 42);
	assert_int_equal(get(fx, &fx->rec.stops[1]), 1);
	assert_int_equal(get(fx, &fx->rec.stops[0]), 0);

	int kick = eventfd(0, EFD_CLOEXEC);
	assert_int_equal(vs_vhost_drv_set_vring_kick(&fx->f, 1, kick), 0);
	close(kick);
	assert_int_equal(get(fx, &fx->rec.starts[1]), 2);
	assert_int_equal(snap(fx).vr[1].last_avail_idx, 42);
}

/* Scenario: QEMU 7.2's stop path: SET_VRING_ENABLE 0 quiesces the ring (queue_stop),
 * the following GET_VRING_BASE reports where it stopped without a second stop. */
static void test_disable_then_get_vring_base(void **state)
{
	struct fixture *fx = *state;
	uint16_t base = 0;

	start_all(fx);
	set_stop_at(fx, 0, 77);
	assert_int_equal(vs_vhost_drv_set_vring_enable(&fx->f, 0, false), 0);
	assert_int_equal(get(fx, &fx->rec.stops[0]), 1);
	assert_int_equal(vs_vhost_drv_get_vring_base(&fx->f, 0, &base), 0);
	assert_int_equal(base, 77);
	assert_int_equal(get(fx, &fx->rec.stops[0]), 1);
	assert_int_equal(get(fx, &fx->rec.stops[1]), 0);
}

/* Scenario: ring size, base and addresses cannot change under a started ring. */
static void test_ring_config_refused_while_started(void **state)
{
	struct fixture *fx = *state;

	start_all(fx);
	assert_int_equal(vs_vhost_drv_set_vring_num(&fx->f, 0, 256), -EIO);
	assert_int_equal(vs_vhost_drv_set_vring_base(&fx->f, 0, 3), -EIO);
	assert_int_equal(vs_vhost_drv_set_vring_addr(&fx->f, 0, uva(fx, RING(2)),
						     uva(fx, RING(2) + 0x1000),
						     uva(fx, RING(2) + 0x2000)),
			 -EIO);
	assert_int_equal(get(fx, &fx->rec.stops[0]), 0);
}

/* Scenario: a second SET_MEM_TABLE while rings run stops them, swaps the map, tells the
 * user, and restarts them where they stopped, on the new mappings. */
static void test_second_mem_table_restarts_rings(void **state)
{
	struct fixture *fx = *state;
	struct vs_vhost_mem_region r = mk_region(fx, 0, MEM_SIZE);

	start_all(fx);
	for (unsigned q = 0; q < NQ; q++)
		set_stop_at(fx, q, (uint16_t)(100 + q));
	assert_int_equal(vs_vhost_drv_set_mem_table(&fx->f, &r, 1, &fx->memfd), 0);
	assert_int_equal(get(fx, &fx->rec.mem_changes), 2);
	assert_int_equal(snap(fx).mem_nregions, 1);
	for (unsigned q = 0; q < NQ; q++) {
		assert_int_equal(get(fx, &fx->rec.stops[q]), 1);
		assert_int_equal(get(fx, &fx->rec.starts[q]), 2);
		assert_ring_ok(fx, q);
		assert_int_equal(snap(fx).vr[q].last_avail_idx, 100 + q);
	}
}

/* Scenario: ring addresses outside guest memory (in the hole, or straddling a region's
 * end) are refused. */
static void test_ring_outside_memory_refused(void **state)
{
	struct fixture *fx = *state;

	negotiate(fx, MQ | REPLY_ACK, true);
	mem_two_regions(fx);
	assert_int_equal(vs_vhost_drv_set_vring_num(&fx->f, 0, 128), 0);
	assert_int_equal(vs_vhost_drv_set_vring_addr(&fx->f, 0, uva(fx, 0xa0000),
						     uva(fx, RING(0) + 0x1000),
						     uva(fx, RING(0) + 0x2000)),
			 -EIO);
	assert_int_equal(vs_vhost_drv_set_vring_addr(&fx->f, 0, uva(fx, 0xa0000 - 0x400),
						     uva(fx, RING(0) + 0x1000),
						     uva(fx, RING(0) + 0x2000)),
			 -EIO);
	assert_int_equal(vs_vhost_drv_set_vring_addr(&fx->f, 0, uva(fx, RING(0) + 8),
						     uva(fx, RING(0) + 0x1000),
						     uva(fx, RING(0) + 0x2000)),
			 -EIO); /* descriptor table not 16-byte aligned */
}

/* Scenario: a new call fd on a running ring is handed over in place, no stop. */
static void test_call_fd_swapped_in_place(void **state)
{
	struct fixture *fx = *state;
	int call = eventfd(0, EFD_CLOEXEC);
	struct stat a;

	start_all(fx);
	assert_int_equal(vs_vhost_drv_set_vring_call(&fx->f, 2, call), 0);
	assert_int_equal(get(fx, &fx->rec.call_changes), 1);
	assert_int_equal(get(fx, &fx->rec.stops[2]), 0);
	assert_int_equal(fstat(call, &a), 0);
	assert_int_equal(snap(fx).new_call_ino[2], a.st_ino);
	close(call);
}

/* Scenario: the frontend goes away: every ring is stopped, disconnected() is called,
 * and the next frontend is served. */
static void test_disconnect_then_next_connection(void **state)
{
	struct fixture *fx = *state;
	uint64_t v;

	start_all(fx);
	vs_vhost_drv_close(&fx->f);
	wait_for(fx, &fx->rec.disconnects, 1);
	for (unsigned q = 0; q < NQ; q++)
		assert_int_equal(get(fx, &fx->rec.stops[q]), 1);
	assert_int_equal(vs_vhost_drv_connect(&fx->f, fx->path), 0);
	assert_int_equal(vs_vhost_drv_get_features(&fx->f, &v), 0);
	assert_int_equal(get(fx, &fx->rec.connects), 2);
}

static void send_raw(struct fixture *fx, uint32_t req, uint32_t flags, const void *payload,
		     uint32_t size)
{
	uint8_t buf[64];
	memcpy(buf, &req, 4);
	memcpy(buf + 4, &flags, 4);
	memcpy(buf + 8, &size, 4);
	memcpy(buf + 12, payload, size);
	assert_int_equal(write(fx->f.sock, buf, 12 + size), 12 + size);
}

/* Scenario: a malformed message (SET_FEATURES with a 4-byte payload) closes the
 * connection; the server then serves the next one. */
static void test_malformed_message_closes_connection(void **state)
{
	struct fixture *fx = *state;
	uint64_t v;
	char c;

	negotiate(fx, MQ, true);
	send_raw(fx, VS_VHOST_SET_FEATURES, VS_VHOST_VERSION, "abcd", 4);
	assert_int_equal(read(fx->f.sock, &c, 1), 0); /* EOF: the back-end hung up */
	wait_for(fx, &fx->rec.disconnects, 1);
	vs_vhost_drv_close(&fx->f);
	assert_int_equal(vs_vhost_drv_connect(&fx->f, fx->path), 0);
	assert_int_equal(vs_vhost_drv_get_features(&fx->f, &v), 0);
	assert_int_equal(v, DEV_FEATURES | PROTO_BIT | LOG_ALL_BIT);
}

/* Scenario: the same malformed message with NEED_REPLY gets an error status and the
 * session goes on. */
static void test_malformed_with_need_reply_gets_error(void **state)
{
	struct fixture *fx = *state;
	struct vs_vhost_msg reply;
	char why[192];
	uint64_t v;

	send_raw(fx, VS_VHOST_SET_FEATURES, VS_VHOST_VERSION | VS_VHOST_FLAG_NEED_REPLY, "abcd", 4);
	assert_int_equal(vs_vhost_msg_recv_reply(fx->f.sock, &reply, why, sizeof(why)), 0);
	assert_int_equal(reply.request, VS_VHOST_SET_FEATURES);
	assert_int_equal(reply.size, 8);
	assert_int_not_equal(reply.payload.u64, 0);
	assert_int_equal(vs_vhost_drv_get_features(&fx->f, &v), 0);
	assert_int_equal(get(fx, &fx->rec.disconnects), 0);
}

/* Scenario: SET_CONFIG (not offered) is refused politely: an error status with
 * NEED_REPLY, silently otherwise, and the session goes on either way. */
static void test_set_config_refused_politely(void **state)
{
	struct fixture *fx = *state;
	uint8_t cfg[16] = {0, 0, 0, 0, 4, 0, 0, 0}; /* offset 0, size 4, flags 0 */
	struct vs_vhost_msg reply;
	char why[192];
	uint64_t v;

	send_raw(fx, VS_VHOST_SET_CONFIG, VS_VHOST_VERSION | VS_VHOST_FLAG_NEED_REPLY, cfg, 16);
	assert_int_equal(vs_vhost_msg_recv_reply(fx->f.sock, &reply, why, sizeof(why)), 0);
	assert_int_not_equal(reply.payload.u64, 0);
	send_raw(fx, VS_VHOST_SET_CONFIG, VS_VHOST_VERSION, cfg, 16);
	assert_int_equal(vs_vhost_drv_get_features(&fx->f, &v), 0);
	assert_int_equal(get(fx, &fx->rec.disconnects), 0);
}

/* ADD/REM_MEM_REG have no front helper (the initiator uses SET_MEM_TABLE): raw + ack. */
static int mem_reg(struct fixture *fx, uint32_t req, struct vs_vhost_mem_region r)
{
	struct vs_vhost_msg m = {.request = req, .size = 40};
	struct vs_vhost_msg reply;
	char why[192];

	m.flags = VS_VHOST_VERSION | VS_VHOST_FLAG_NEED_REPLY;
	m.payload.mem_reg.region = r;
	if (req == VS_VHOST_ADD_MEM_REG) {
		m.fds[0] = fx->memfd;
		m.nfds = 1;
	}
	assert_int_equal(vs_vhost_msg_send(fx->f.sock, &m), 0);
	assert_int_equal(vs_vhost_msg_recv_reply(fx->f.sock, &reply, why, sizeof(why)), 0);
	return reply.payload.u64 ? -EIO : 0;
}

/* Scenario: with CONFIGURE_MEM_SLOTS, memory arrives region by region; removing a region a
 * running ring does not use restarts it, removing the one it lives in leaves it stopped
 * with an error. */
static void test_add_rem_mem_reg(void **state)
{
	struct fixture *fx = *state;
	struct vs_vhost_msg m = {.request = VS_VHOST_GET_MAX_MEM_SLOTS, .flags = 1}, reply;
	char why[192];

	negotiate(fx, MQ | REPLY_ACK | (1ull << VS_VHOST_PROTOCOL_F_CONFIGURE_MEM_SLOTS), true);
	assert_int_equal(vs_vhost_msg_send(fx->f.sock, &m), 0);
	assert_int_equal(vs_vhost_msg_recv_reply(fx->f.sock, &reply, why, sizeof(why)), 0);
	assert_int_equal(reply.payload.u64, VS_MEM_MAX_REGIONS);

	assert_int_equal(mem_reg(fx, VS_VHOST_ADD_MEM_REG, mk_region(fx, 0, 0xa0000)), 0);
	assert_int_equal(
	    mem_reg(fx, VS_VHOST_ADD_MEM_REG, mk_region(fx, 0xc0000, MEM_SIZE - 0xc0000)), 0);
	/* overlapping the first: refused, map unchanged */
	assert_int_equal(mem_reg(fx, VS_VHOST_ADD_MEM_REG, mk_region(fx, 0x1000, 0x1000)), -EIO);
	assert_int_equal(get(fx, &fx->rec.mem_changes), 2);
	ring_setup(fx, 0);
	assert_int_equal(vs_vhost_drv_set_vring_enable(&fx->f, 0, true), 0);
	assert_int_equal(get(fx, &fx->rec.starts[0]), 1);

	assert_int_equal(mem_reg(fx, VS_VHOST_REM_MEM_REG, mk_region(fx, 0, 0xa0000)), 0);
	assert_int_equal(get(fx, &fx->rec.stops[0]), 1);
	assert_int_equal(get(fx, &fx->rec.starts[0]), 2);
	assert_ring_ok(fx, 0);
	assert_int_equal(snap(fx).mem_nregions, 1);

	assert_int_equal(
	    mem_reg(fx, VS_VHOST_REM_MEM_REG, mk_region(fx, 0xc0000, MEM_SIZE - 0xc0000)), -EIO);
	assert_int_equal(get(fx, &fx->rec.stops[0]), 2);
	assert_int_equal(get(fx, &fx->rec.starts[0]), 2);
	assert_int_equal(snap(fx).mem_nregions, 0);
}

/* Scenario: handle() works without any socket: a GET_FEATURES gets its reply, a bad
 * message without NEED_REPLY asks for the connection to be dropped. */
static void test_handle_without_socket(void **state)
{
	struct vs_vhost_dev *d = vs_vhost_dev_new(2, 1, NULL, NULL);
	struct vs_vhost_msg m = {.request = VS_VHOST_GET_FEATURES, .flags = 1}, reply;
	(void)state;

	for (unsigned i = 0; i < VS_VHOST_MAX_FDS; i++)
		m.fds[i] = -1;
	assert_non_null(d);
	assert_int_equal(vs_vhost_dev_handle(d, &m, &reply), 1);
	assert_int_equal(reply.flags, VS_VHOST_VERSION | VS_VHOST_FLAG_REPLY);
	assert_int_equal(reply.payload.u64, 1 | PROTO_BIT | LOG_ALL_BIT);
	m.size = 8; /* GET_FEATURES takes no payload */
	assert_int_equal(vs_vhost_dev_handle(d, &m, &reply), -EBADMSG);
	m = (struct vs_vhost_msg){.request = VS_VHOST_SET_VRING_NUM, .flags = 1, .size = 8};
	m.payload.state.index = 2; /* only 2 queues */
	m.payload.state.num = 64;
	assert_true(vs_vhost_dev_handle(d, &m, &reply) < 0);
	vs_vhost_dev_free(d);
}

/* Scenario: the socket path: mode 0600; a regular file there is not replaced; a stale
 * socket is; a live one is not. */
static void test_socket_path_rules(void **state)
{
	char dir[64], path[96];
	struct vs_vhost_server *srv, *srv2;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	(void)state;

	assert_int_equal(tmpdir_make(dir, sizeof(dir), NULL, "vhost"), 0);
	snprintf(path, sizeof(path), "%s/sock", dir);

	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	close(fd);
	assert_null(vs_vhost_server_create(path, 1, 0, NULL, NULL));
	assert_int_equal(errno, EEXIST);
	unlink(path);

	strcpy(sa.sun_path, path); /* a socket file left by a dead process */
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
	srv = vs_vhost_server_create(path, 1, 0, NULL, NULL);
	assert_non_null(srv);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	srv2 = vs_vhost_server_create(path, 1, 0, NULL, NULL);
	assert_null(srv2);
	assert_int_equal(errno, EADDRINUSE);

	vs_vhost_server_destroy(srv);
	assert_int_equal(stat(path, &st), -1); /* removed on destroy */
	tmpdir_remove(dir);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_qemu_sequence_starts_rings),
	    T(test_kick_starts_ring_without_protocol_features),
	    T(test_get_vring_base_stops_ring),
	    T(test_disable_then_get_vring_base),
	    T(test_ring_config_refused_while_started),
	    T(test_second_mem_table_restarts_rings),
	    T(test_ring_outside_memory_refused),
	    T(test_call_fd_swapped_in_place),
	    T(test_disconnect_then_next_connection),
	    T(test_malformed_message_closes_connection),
	    T(test_malformed_with_need_reply_gets_error),
	    T(test_set_config_refused_politely),
	    T(test_add_rem_mem_reg),
	    cmocka_unit_test(test_handle_without_socket),
	    cmocka_unit_test(test_socket_path_rules),
	};
	return cmocka_run_group_tests_name("vhost.dev", tests, NULL, NULL);
}
