/* SPDX-License-Identifier: MIT */
/*
 * keep_inflight against a fake back-end in the test's process (no `vioscope target`): a
 * vhost-user device small enough to read here.  It offers INFLIGHT_SHMFD (or not), answers
 * GET_INFLIGHT_FD with a memfd, records SET_INFLIGHT_FD, answers every command GOOD (REPORT
 * LUNS: no LUNs) except the TEST UNIT READYs it is told to hold, and "crashes" on demand
 * (closes the connection, forgets its rings, keeps the held heads as a real target keeps
 * them in the in-flight region).  A restarted fake that took the region resubmits the held
 * requests on ring start and resumes the ring at used idx + held, as the target does.
 *
 * Every wait has a deadline; the fake's poll timeout only paces its loop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <vioscope/initiator.h>

#include "proto/virtio_proto.h"
#include "proto/virtio_scsi_proto.h"
#include "util/util.h"
#include "vhost/vhost_drv.h"
#include "vhost/vhost_msg.h"

#define NRINGS	    3 /* control, event, one request queue */
#define REQQ	    2
#define DEADLINE_MS 10000
#define MAX_HELD    8

struct ring {
	unsigned size;
	uint64_t desc_uva, avail_uva, used_uva;
	uint16_t last_avail;
	int call_fd, kick_fd;
	bool started;
};

struct fake {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char path[108];
	int lfd, cfd;
	pthread_t thread;
	atomic_bool stop;
	/* set by the test */
	bool offer_inflight; /* for the next connection */
	bool hold_tur;
	bool crash;  /* close the connection at the next turn */
	int bad_get; /* GET_INFLIGHT_FD reply: 1 without its fd, 2 larger than its file */
	/* the device */
	uint8_t *mem;
	size_t mem_size;
	uint64_t mem_uva;
	struct ring r[NRINGS];
	bool inflight_set_now; /* this connection took the region: resubmit on start */
	uint16_t held[MAX_HELD];
	unsigned nheld;
	/* what it saw */
	unsigned connections, gets, sets;
	int inflight_fd; /* the region it handed out */
	uint64_t inflight_size;
	struct vs_vhost_inflight get_req, set_req;
	bool set_same_file;
	uint16_t base_seen[NRINGS];
	unsigned completed;
};

static uint64_t deadline_ns(void)
{
	return vs_mono_ns() + (uint64_t)DEADLINE_MS * 1000000ull;
}

static void *gpa(struct fake *f, uint64_t a, size_t len)
{
	assert_true(f->mem && a <= f->mem_size && len <= f->mem_size - a);
	return f->mem + a;
}

static void *uva(struct fake *f, uint64_t a)
{
	return gpa(f, a - f->mem_uva, 1);
}

static void complete(struct fake *f, struct ring *r, uint16_t head)
{
	struct vs_vring_desc *desc = uva(f, r->desc_uva);
	struct vs_vring_used *used = uva(f, r->used_uva);
	struct vs_virtio_scsi_cmd_resp resp = {0};
	uint32_t written = 0;
	uint16_t i = head;
	uint64_t one = 1;

	/* req (device-readable), then resp and any data-in (device-writable). */
	for (;;) {
		if (desc[i].flags & VS_VRING_DESC_F_WRITE) {
			if (!written)
				memcpy(gpa(f, desc[i].addr, sizeof(resp)), &resp, sizeof(resp));
			written += desc[i].len;
		}
		if (!(desc[i].flags & VS_VRING_DESC_F_NEXT))
			break;
		i = desc[i].next;
	}
	used->ring[used->idx % r->size] = (struct vs_vring_used_elem){head, written};
	__atomic_store_n(&used->idx, (uint16_t)(used->idx + 1), __ATOMIC_RELEASE);
	f->completed++;
	if (r->call_fd >= 0 && write(r->call_fd, &one, sizeof(one)) < 0)
		fail_msg("call eventfd: %s", strerror(errno));
}

/* Take what the request queue offers: hold TEST UNIT READYs when told to, complete the
 * rest.  Lock held. */
static void service(struct fake *f)
{
	struct ring *r = &f->r[REQQ];
	struct vs_vring_avail *avail;
	struct vs_vring_desc *desc;

	if (!r->started)
		return;
	avail = uva(f, r->avail_uva);
	desc = uva(f, r->desc_uva);
	while (r->last_avail != __atomic_load_n(&avail->idx, __ATOMIC_ACQUIRE)) {
		uint16_t head = avail->ring[r->last_avail % r->size];
		const struct vs_virtio_scsi_cmd_req *req =
		    gpa(f, desc[head].addr, sizeof(struct vs_virtio_scsi_cmd_req));

		r->last_avail++;
		if (f->hold_tur && req->cdb[0] == 0x00 && f->nheld < MAX_HELD) {
			f->held[f->nheld++] = head;
			pthread_cond_broadcast(&f->cond);
			continue;
		}
		complete(f, r, head);
	}
}

static void reply(struct fake *f, struct vs_vhost_msg *m, uint32_t size)
{
	m->flags = VS_VHOST_VERSION | VS_VHOST_FLAG_REPLY;
	m->size = size;
	assert_int_equal(vs_vhost_msg_send(f->cfd, m), 0);
}

static void forget_connection(struct fake *f)
{
	for (unsigned i = 0; i < NRINGS; i++) {
		if (f->r[i].call_fd >= 0)
			close(f->r[i].call_fd);
		if (f->r[i].kick_fd >= 0)
			close(f->r[i].kick_fd);
		f->r[i] = (struct ring){.call_fd = -1, .kick_fd = -1};
	}
	if (f->mem)
		munmap(f->mem, f->mem_size);
	f->mem = NULL;
	if (f->cfd >= 0)
		close(f->cfd);
	f->cfd = -1;
	f->inflight_set_now = false;
}

/* One message; lock held.  0, or -1 when the connection ended. */
static int handle(struct fake *f)
{
	struct vs_vhost_msg m;
	char why[VS_VHOST_WHY_LEN];
	struct ring *r;
	uint64_t proto = 1ull << VS_VHOST_PROTOCOL_F_INFLIGHT_SHMFD;
	struct stat a, b;

	if (vs_vhost_msg_recv(f->cfd, &m, why, sizeof(why)))
		return -1;
	r = m.payload.state.index < NRINGS ? &f->r[m.payload.state.index] : NULL;
	switch (m.request) {
	case VS_VHOST_GET_FEATURES:
		m.payload.u64 = VS_VIRTIO_BIT(VS_VIRTIO_F_VERSION_1) |
				VS_VIRTIO_BIT(VS_VHOST_F_PROTOCOL_FEATURES);
		reply(f, &m, 8);
		break;
	case VS_VHOST_GET_PROTOCOL_FEATURES:
		m.payload.u64 = f->offer_inflight ? proto : 0;
		reply(f, &m, 8);
		break;
	case VS_VHOST_GET_INFLIGHT_FD:
		f->gets++;
		f->get_req = m.payload.inflight;
		if (f->inflight_fd < 0) {
			f->inflight_size = 4096;
			f->inflight_fd = memfd_create("fake-inflight", MFD_CLOEXEC);
			assert_true(f->inflight_fd >= 0);
			assert_int_equal(ftruncate(f->inflight_fd, (off_t)f->inflight_size), 0);
		}
		m.payload.inflight.mmap_size = f->inflight_size;
		m.payload.inflight.mmap_offset = 0;
		m.fds[0] = f->inflight_fd;
		m.nfds = f->bad_get == 1 ? 0 : 1;
		if (f->bad_get == 2)
			m.payload.inflight.mmap_size = 2 * f->inflight_size;
		reply(f, &m, sizeof(m.payload.inflight));
		m.nfds = 0; /* ours: not closed below */
		break;
	case VS_VHOST_SET_INFLIGHT_FD:
		f->sets++;
		f->set_req = m.payload.inflight;
		f->set_same_file = !fstat(m.fds[0], &a) && !fstat(f->inflight_fd, &b) &&
				   a.st_ino == b.st_ino && a.st_dev == b.st_dev;
		f->inflight_set_now = true;
		break;
	case VS_VHOST_SET_MEM_TABLE:
		if (f->mem)
			munmap(f->mem, f->mem_size);
		f->mem_size = m.payload.memory.regions[0].memory_size;
		f->mem_uva = m.payload.memory.regions[0].userspace_addr;
		f->mem = mmap(NULL, f->mem_size, PROT_READ | PROT_WRITE, MAP_SHARED, m.fds[0],
			      (off_t)m.payload.memory.regions[0].mmap_offset);
		assert_true(f->mem != MAP_FAILED);
		break;
	case VS_VHOST_SET_VRING_NUM:
		r->size = m.payload.state.num;
		break;
	case VS_VHOST_SET_VRING_ADDR:
		r = &f->r[m.payload.addr.index];
		r->desc_uva = m.payload.addr.desc_user_addr;
		r->avail_uva = m.payload.addr.avail_user_addr;
		r->used_uva = m.payload.addr.used_user_addr;
		break;
	case VS_VHOST_SET_VRING_BASE:
		f->base_seen[m.payload.state.index] = (uint16_t)m.payload.state.num;
		r->last_avail = (uint16_t)m.payload.state.num;
		break;
	case VS_VHOST_GET_VRING_BASE:
		m.payload.state.num = r->last_avail;
		r->started = false;
		reply(f, &m, sizeof(m.payload.state));
		break;
	case VS_VHOST_SET_VRING_CALL:
	case VS_VHOST_SET_VRING_KICK:
		r = &f->r[m.payload.u64 & VS_VHOST_VRING_IDX_MASK];
		if (m.request == VS_VHOST_SET_VRING_CALL) {
			r->call_fd = m.nfds ? m.fds[0] : -1;
		} else {
			r->kick_fd = m.nfds ? m.fds[0] : -1;
			r->started = true;
			/* The ring starts: what this device holds from before, it resubmits (and
			 * answers), resuming the avail ring past it, regardless of the base. */
			if (r == &f->r[REQQ] && f->inflight_set_now) {
				r->last_avail = (uint16_t)(r->last_avail + f->nheld);
				for (unsigned i = 0; i < f->nheld; i++)
					complete(f, r, f->held[i]);
				f->nheld = 0;
			} else if (r == &f->r[REQQ]) {
				f->nheld = 0; /* no region: the requests are lost */
			}
		}
		m.nfds = 0; /* kept */
		break;
	default: /* SET_OWNER, SET_FEATURES, SET_PROTOCOL_FEATURES, ENABLE ... */
		break;
	}
	for (unsigned i = 0; i < m.nfds; i++)
		close(m.fds[i]);
	pthread_cond_broadcast(&f->cond);
	return 0;
}

static void *fake_thread(void *arg)
{
	struct fake *f = arg;

	while (!atomic_load(&f->stop)) {
		struct pollfd p[2] = {{.fd = f->cfd >= 0 ? f->cfd : f->lfd, .events = POLLIN},
				      {.fd = f->r[REQQ].kick_fd, .events = POLLIN}};
		uint64_t v;
		int n = poll(p, 2, 5);

		pthread_mutex_lock(&f->lock);
		if (f->crash && f->cfd >= 0) {
			forget_connection(f);
			f->crash = false;
			pthread_cond_broadcast(&f->cond);
		} else if (n > 0 && p[0].revents && f->cfd < 0) {
			f->cfd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (f->cfd >= 0)
				f->connections++;
		} else if (n > 0 && p[0].revents && handle(f)) {
			forget_connection(f);
		}
		if (n > 0 && p[1].revents && f->r[REQQ].kick_fd >= 0 &&
		    read(f->r[REQQ].kick_fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
			fail_msg("kick eventfd: %s", strerror(errno));
		if (f->cfd >= 0 && f->mem)
			service(f);
		pthread_mutex_unlock(&f->lock);
	}
	return NULL;
}

static struct fake *fake_start(bool offer_inflight)
{
	struct fake *f = calloc(1, sizeof(*f));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	assert_non_null(f);
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	f->cfd = f->inflight_fd = -1;
	for (unsigned i = 0; i < NRINGS; i++)
		f->r[i] = (struct ring){.call_fd = -1, .kick_fd = -1};
	f->offer_inflight = offer_inflight;
	snprintf(f->path, sizeof(f->path), "/tmp/vs-fake-inflight-%d.sock", getpid());
	unlink(f->path);
	strcpy(sa.sun_path, f->path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->lfd, 4), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, fake_thread, f), 0);
	return f;
}

static void fake_stop(struct fake *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->thread, NULL);
	forget_connection(f);
	close(f->lfd);
	if (f->inflight_fd >= 0)
		close(f->inflight_fd);
	unlink(f->path);
	free(f);
}

/* Wait (lock held) until cond_fn holds, up to the deadline. */
static bool fake_wait(struct fake *f, bool (*cond_fn)(struct fake *))
{
	uint64_t end = deadline_ns();

	while (!cond_fn(f)) {
		struct timespec ts;
		uint64_t now = vs_mono_ns();

		if (now >= end)
			return false;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&f->cond, &f->lock, &ts);
	}
	return true;
}

static bool one_held(struct fake *f)
{
	return f->nheld == 1;
}

static bool crashed(struct fake *f)
{
	return !f->crash;
}

struct io_state {
	struct vs_ini_io io;
	atomic_int calls;
	atomic_int result;
};

static void io_done(struct vs_ini_io *io)
{
	struct io_state *s = (struct io_state *)io;

	atomic_store(&s->result, io->result);
	atomic_fetch_add(&s->calls, 1);
}

static void submit_tur(struct vs_ini *ini, struct io_state *s)
{
	static const uint8_t tur[6] = {0};

	memset(s, 0, sizeof(*s));
	s->io.done = io_done;
	assert_int_equal(vs_ini_submit_cdb(vs_ini_get_queue(ini, 0), &s->io, 0, 0, tur, 6, false),
			 0);
}

/* Poll until the io's callback ran (or the deadline). */
static bool wait_done(struct vs_ini *ini, struct io_state *s)
{
	uint64_t end = deadline_ns();

	while (!atomic_load(&s->calls) && vs_mono_ns() < end)
		if (!vs_ini_poll(vs_ini_get_queue(ini, 0), ~0u))
			sched_yield();
	return atomic_load(&s->calls) == 1;
}

static bool wait_connections(struct vs_ini *ini, unsigned n)
{
	uint64_t end = deadline_ns();

	while (vs_ini_connections(ini) < n && vs_mono_ns() < end)
		sched_yield();
	return vs_ini_connections(ini) >= n;
}

static struct vs_ini *open_ini(struct fake *f, bool interrupt)
{
	struct vs_ini_opts o = {.socket = f->path,
				.queues = 1,
				.queue_size = 64,
				.data_mem = 1 << 20,
				.reconnect = true,
				.keep_inflight = true,
				.interrupt = interrupt,
				.timeout_ms = 5000};
	struct vs_ini *ini = NULL;

	assert_int_equal(vs_ini_open(&ini, &o), 0);
	return ini;
}

/* Hold one request at the fake, crash it, restart it with offer_second. */
static void hold_and_crash(struct fake *f, struct vs_ini *ini, struct io_state *s,
			   bool offer_second, uint16_t *used_at_crash)
{
	submit_tur(ini, s);
	pthread_mutex_lock(&f->lock);
	assert_true(fake_wait(f, one_held));
	*used_at_crash = ((struct vs_vring_used *)uva(f, f->r[REQQ].used_uva))->idx;
	f->hold_tur = false;
	f->offer_inflight = offer_second;
	f->crash = true;
	assert_true(fake_wait(f, crashed));
	pthread_mutex_unlock(&f->lock);
}

static void kept_across_restart(bool interrupt)
{
	struct fake *f = fake_start(true);
	struct vs_ini *ini = open_ini(f, interrupt);
	struct io_state s, s2;
	uint16_t used_at_crash;

	pthread_mutex_lock(&f->lock);
	assert_int_equal(f->gets, 1); /* first connection: the region asked for */
	assert_int_equal(f->sets, 0);
	assert_int_equal(f->get_req.num_queues, NRINGS);
	assert_int_equal(f->get_req.queue_size, 64);
	f->hold_tur = true;
	pthread_mutex_unlock(&f->lock);

	hold_and_crash(f, ini, &s, true, &used_at_crash);
	assert_true(wait_connections(ini, 2));
	assert_true(wait_done(ini, &s));
	/* Completed by the restarted fake's resubmission, not failed. */
	assert_int_equal(atomic_load(&s.result), 0);
	pthread_mutex_lock(&f->lock);
	assert_int_equal(f->connections, 2);
	assert_int_equal(f->gets, 1);
	assert_int_equal(f->sets, 1);
	assert_true(f->set_same_file);
	assert_int_equal(f->set_req.mmap_size, f->inflight_size);
	assert_int_equal(f->set_req.mmap_offset, 0);
	assert_int_equal(f->set_req.num_queues, NRINGS);
	assert_int_equal(f->set_req.queue_size, 64);
	/* The ring resumed at its used index, not at 0. */
	assert_int_equal(f->base_seen[REQQ], used_at_crash);
	assert_true(used_at_crash > 0);
	pthread_mutex_unlock(&f->lock);
	/* And it carries new requests. */
	submit_tur(ini, &s2);
	assert_true(wait_done(ini, &s2));
	assert_int_equal(atomic_load(&s2.result), 0);
	assert_int_equal(atomic_load(&s.calls), 1);
	vs_ini_close(ini);
	fake_stop(f);
}

static void test_kept_across_restart(void **state)
{
	(void)state;
	kept_across_restart(false);
}

/* The same with completion threads: the resubmitted request's callback from the thread. */
static void test_kept_across_restart_interrupt(void **state)
{
	(void)state;
	kept_across_restart(true);
}

static void test_fails_without_feature_on_restart(void **state)
{
	struct fake *f = fake_start(true);
	struct vs_ini *ini = open_ini(f, false);
	struct io_state s, s2;
	uint16_t used_at_crash;

	(void)state;
	pthread_mutex_lock(&f->lock);
	f->hold_tur = true;
	pthread_mutex_unlock(&f->lock);
	hold_and_crash(f, ini, &s, false, &used_at_crash);
	assert_true(wait_connections(ini, 2));
	assert_true(wait_done(ini, &s));
	assert_int_equal(atomic_load(&s.result), -ENOTCONN);
	pthread_mutex_lock(&f->lock);
	assert_int_equal(f->sets, 0);
	assert_int_equal(f->base_seen[REQQ], 0); /* rings started afresh */
	pthread_mutex_unlock(&f->lock);
	submit_tur(ini, &s2);
	assert_true(wait_done(ini, &s2));
	assert_int_equal(atomic_load(&s2.result), 0);
	vs_ini_close(ini);
	fake_stop(f);
}

/* A GET_INFLIGHT_FD reply without its fd, or with a region beyond its file: the connection
 * is refused (open fails with -EPROTO), no region is used. */
static void test_bad_get_reply_refused(void **state)
{
	struct vs_ini_opts o = {.socket = NULL,
				.queues = 1,
				.queue_size = 64,
				.data_mem = 1 << 20,
				.reconnect = true,
				.keep_inflight = true,
				.timeout_ms = 2000};

	(void)state;
	for (int mode = 1; mode <= 2; mode++) {
		struct fake *f = fake_start(true);
		struct vs_ini *ini = NULL;

		pthread_mutex_lock(&f->lock);
		f->bad_get = mode;
		pthread_mutex_unlock(&f->lock);
		o.socket = f->path;
		assert_int_equal(vs_ini_open(&ini, &o), -EPROTO);
		assert_null(ini);
		fake_stop(f);
	}
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_kept_across_restart),
	    cmocka_unit_test(test_kept_across_restart_interrupt),
	    cmocka_unit_test(test_fails_without_feature_on_restart),
	    cmocka_unit_test(test_bad_get_reply_refused),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
