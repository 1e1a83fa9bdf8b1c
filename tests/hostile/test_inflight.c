/* SPDX-License-Identifier: MIT */
/*
 * In-flight I/O tracking (issue 26, VHOST_USER_PROTOCOL_F_INFLIGHT_SHMFD), from the
 * frontend's side: the region the target makes (GET_INFLIGHT_FD) is a sealed memory file
 * that shows what each ring took and has not answered; a region the frontend hands over
 * (SET_INFLIGHT_FD) is its memory, so one that is not a memory file, too small, lies about
 * its rings, or shrinks under the target is refused or ends the session, never trusted; and
 * a target killed with requests in flight answers them, each exactly once, when a new one
 * gets the region back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
#include <sys/time.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostile.h"

#define REQ0	 VS_VIRTIO_SCSI_VQ_REQ0
#define NQ	 3   /* control, event, one request queue */
#define QSIZE	 128 /* every ring */
#define RING	 VS_VHOST_INFLIGHT_RING_BYTES(QSIZE)
#define REGION	 (NQ * RING)
#define QUIET_MS 300 /* a ring that does not run answers nothing in this long */

static const char *const ram_lun[] = {"--lun", "0:ram=16M", NULL};
static const char *const rpc_args[] = {"--testing", "--rpc", "%R", "--lun", "0:file=%F", NULL};
static const struct fe_opts plain = {.nq = NQ};

/* ---- the frontend, with INFLIGHT_SHMFD (fe_setup does not offer it) ------------------------ */
static uint64_t uva(const void *host)
{
	return (uint64_t)(uintptr_t)host;
}

/* Connect to the target's socket and negotiate as QEMU does, INFLIGHT_SHMFD acked when
 * inflight; then SET_OWNER.  The frontend's rings are not touched (a reconnect keeps them). */
static void negotiate(struct sess *s, bool inflight)
{
	struct timeval tv = {.tv_sec = FE_WAIT_MS / 1000};
	uint64_t offered, proto, nq;

	assert_int_equal(vs_vhost_drv_connect(&s->fe.drv, s->p.sock), 0);
	setsockopt(s->fe.drv.sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(s->fe.drv.sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	s->fe.g = &s->g;
	assert_int_equal(vs_vhost_drv_get_features(&s->fe.drv, &offered), 0);
	assert_int_equal(vs_vhost_drv_get_protocol_features(&s->fe.drv, &proto), 0);
	assert_true(proto & (1ull << VS_VHOST_PROTOCOL_F_INFLIGHT_SHMFD));
	assert_int_equal(
	    vs_vhost_drv_set_protocol_features(
		&s->fe.drv, proto & ((1ull << VS_VHOST_PROTOCOL_F_MQ) |
				     (1ull << VS_VHOST_PROTOCOL_F_REPLY_ACK) |
				     (inflight ? 1ull << VS_VHOST_PROTOCOL_F_INFLIGHT_SHMFD : 0))),
	    0);
	assert_int_equal(vs_vhost_drv_get_queue_num(&s->fe.drv, &nq), 0);
	assert_true(nq >= NQ);
	s->fe.features =
	    offered &
	    (VS_VIRTIO_BIT(VS_VIRTIO_F_VERSION_1) | VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX) |
	     VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC) | (1ull << VS_VHOST_F_PROTOCOL_FEATURES));
	s->fe.indirect = s->fe.features & VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC);
	assert_int_equal(vs_vhost_drv_set_owner(&s->fe.drv), 0);
}

/* SET_FEATURES and the memory table. */
static void memory(struct sess *s)
{
	struct vs_vhost_mem_region r[2];
	int fds[2] = {s->g.fd, s->g.fd};

	gmem_regions(&s->g, r);
	assert_int_equal(vs_vhost_drv_set_features(&s->fe.drv, s->fe.features), 0);
	assert_int_equal(vs_vhost_drv_set_mem_table(&s->fe.drv, r, 2, fds), 0);
}

/* Ring q's messages, its base the next avail entry the target is to take; laid out afresh
 * when fresh, else the frontend's ring as it is (a reconnect).  Not yet enabled. */
static void ring(struct sess *s, unsigned q, bool fresh, uint16_t base)
{
	struct fe *fe = &s->fe;
	struct vs_vq_drv *vq = &fe->vq[q];

	if (fresh) {
		assert_int_equal(vs_vq_drv_init(vq, QSIZE, gmem_host(&s->g, FE_RING(q)),
						fe->features & VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX),
						fe->indirect),
				 0);
		vq->qid = q;
		fe->qsize[q] = QSIZE;
		if (fe->nq < q + 1)
			fe->nq = q + 1;
	}
	fe->kick[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fe->call[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	assert_true(fe->kick[q] >= 0 && fe->call[q] >= 0);
	assert_int_equal(vs_vhost_drv_set_vring_num(&fe->drv, q, QSIZE), 0);
	assert_int_equal(vs_vhost_drv_set_vring_base(&fe->drv, q, base), 0);
	assert_int_equal(
	    vs_vhost_drv_set_vring_addr(&fe->drv, q, uva(vq->desc), uva(vq->avail), uva(vq->used)),
	    0);
	assert_int_equal(vs_vhost_drv_set_vring_call(&fe->drv, q, fe->call[q]), 0);
	assert_int_equal(vs_vhost_drv_set_vring_kick(&fe->drv, q, fe->kick[q]), 0);
}

/* Every ring fresh and enabled (the target starts them). */
static void rings(struct sess *s)
{
	for (unsigned q = 0; q < NQ; q++)
		ring(s, q, true, 0);
	for (unsigned q = 0; q < NQ; q++)
		assert_int_equal(vs_vhost_drv_set_vring_enable(&s->fe.drv, q, true), 0);
}

/* A frontend that acked INFLIGHT_SHMFD and sent no region yet; memory table sent. */
static void open_inflight(struct sess *s)
{
	fe_close(&s->fe);
	fe_clear(&s->fe);
	negotiate(s, true);
	memory(s);
}

/* ---- regions -------------------------------------------------------------------------------- */
struct region {
	int fd;
	uint8_t *p;
	size_t bytes;
};

static struct vs_vhost_inflight_split *part(const struct region *r, unsigned q)
{
	return (struct vs_vhost_inflight_split *)(r->p + (size_t)q * RING);
}

/* A region of the frontend's own: a memfd of bytes, zeroes, mapped. */
static void region_make(struct region *r, size_t bytes)
{
	r->fd = memfd_create("test-inflight", MFD_CLOEXEC);
	assert_true(r->fd >= 0);
	assert_int_equal(ftruncate(r->fd, (off_t)bytes), 0);
	r->p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	assert_true(r->p != MAP_FAILED);
	r->bytes = bytes;
}

static void region_free(struct region *r)
{
	munmap(r->p, r->bytes);
	close(r->fd);
}

/* GET_INFLIGHT_FD for NQ rings of QSIZE: the target's region, mapped. */
static void region_get(struct sess *s, struct region *r)
{
	uint64_t size, off;

	assert_int_equal(vs_vhost_drv_get_inflight_fd(&s->fe.drv, NQ, QSIZE, &r->fd, &size, &off),
			 0);
	assert_int_equal(size, REGION);
	assert_int_equal(off, 0);
	r->p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	assert_true(r->p != MAP_FAILED);
	r->bytes = size;
}

/* SET_INFLIGHT_FD of fd (nfds 0 or 1) as QEMU sends it, NEED_REPLY: the target's status. */
static int64_t set_inflight(struct sess *s, int fd, uint64_t size, uint64_t offset, uint16_t nq,
			    uint16_t qsize)
{
	struct vs_vhost_inflight in = {
	    .mmap_size = size, .mmap_offset = offset, .num_queues = nq, .queue_size = qsize};

	return fe_ask(&s->fe, VS_VHOST_SET_INFLIGHT_FD, &in, sizeof(in), &fd, fd >= 0);
}

/* GET_INFLIGHT_FD with NEED_REPLY, as a frontend that expects a refusal asks. */
static int64_t get_inflight(struct sess *s, uint16_t nq, uint16_t qsize)
{
	struct vs_vhost_inflight in = {.num_queues = nq, .queue_size = qsize};

	return fe_ask(&s->fe, VS_VHOST_GET_INFLIGHT_FD, &in, sizeof(in), NULL, 0);
}

static void assert_logged(struct sess *s, const char *needle)
{
	if (!target_log_wait(&s->p, needle, FE_WAIT_MS)) {
		target_log_dump(&s->p);
		fail_msg("not in the target's log: %s", needle);
	}
}

/* The same message without NEED_REPLY: refused, the target cannot answer it with a status,
 * so the session ends, saying why in its log (the refusal's reason, which a status of 1 does
 * not carry); then a new frontend with INFLIGHT_SHMFD (memory table sent). */
static void assert_dropped_for(struct sess *s, uint32_t request, const void *payload, uint32_t size,
			       int fd, const char *why)
{
	assert_int_equal(fe_send(&s->fe, request, 0, payload, size, &fd, fd >= 0), 0);
	if (!fe_dropped(&s->fe, FE_WAIT_MS) || !target_log_wait(&s->p, why, FE_WAIT_MS)) {
		target_log_dump(&s->p);
		fail_msg("the session was not dropped for: %s", why);
	}
	assert_true(target_alive(&s->p));
}

struct fds {
	struct target *p;
	int base;
};

static bool fds_back(void *arg)
{
	struct fds *f = arg;
	return target_fd_count(f->p) == f->base;
}

/* The target's open fds are back to base (its disconnects are handled asynchronously). */
static void assert_fds(struct sess *s, int base)
{
	struct fds f = {&s->p, base};

	if (!wait_until(fds_back, &f, FE_WAIT_MS)) {
		char cmd[64];
		snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd >&2", s->p.pid);
		if (system(cmd) < 0)
			perror("ls");
	}
	assert_int_equal(target_fd_count(&s->p), base);
}

/* ---- GET_INFLIGHT_FD refused ---------------------------------------------------------------- */

/* Scenario: GET_INFLIGHT_FD from a frontend that did not ack INFLIGHT_SHMFD: refused (status
 * 1), the session goes on; without NEED_REPLY it ends, the reason in the target's log.  No
 * fd is left behind. */
static void get_without_the_feature_is_refused(void **state)
{
	struct sess *s = *state;
	struct vs_vhost_inflight in = {.num_queues = NQ, .queue_size = QSIZE};
	int base;

	assert_int_equal(sess_start(s, ram_lun, &plain), 0);
	base = target_fd_count(&s->p);
	assert_int_equal(get_inflight(s, NQ, QSIZE), 1);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 1), 0);
	assert_dropped_for(s, VS_VHOST_GET_INFLIGHT_FD, &in, sizeof(in), -1,
			   "GET_INFLIGHT_FD failed: GET_INFLIGHT_FD before INFLIGHT_SHMFD was "
			   "negotiated");
	assert_int_equal(sess_reconnect(s, &plain), 0);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 2), 0);
	assert_fds(s, base);
	assert_int_equal(sess_end(s), 0);
}

/* Scenario: GET_INFLIGHT_FD for shapes the device cannot have: no queues, more queues than
 * it has, rings of 0 or 3 entries or 65535 (not a power of two; 65536 does not fit the
 * message's 16 bits: it arrives as 0).  Each refused: with NEED_REPLY a status of 1, without
 * it the session ends with the reason in the log; no memfd is made (no fd left behind). */
static void get_of_impossible_shapes_is_refused(void **state)
{
	struct sess *s = *state;
	static const struct {
		uint16_t nq, qsize;
		const char *why;
	} bad[] = {
	    {0, QSIZE, "GET_INFLIGHT_FD for 0 queues: the device has 1..3"},
	    {1000, QSIZE, "GET_INFLIGHT_FD for 1000 queues: the device has 1..3"},
	    {NQ, 0, "GET_INFLIGHT_FD for rings of 0 entries: not a power of two up to 32768"},
	    {NQ, 3, "GET_INFLIGHT_FD for rings of 3 entries: not a power of two up to 32768"},
	    {NQ, 65535, "GET_INFLIGHT_FD for rings of 65535 entries: not a power of two"},
	    {NQ, (uint16_t)65536, "GET_INFLIGHT_FD for rings of 0 entries"},
	};
	int base;

	assert_int_equal(sess_start(s, ram_lun, NULL), 0);
	base = target_fd_count(&s->p);
	open_inflight(s);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct vs_vhost_inflight in = {.num_queues = bad[i].nq, .queue_size = bad[i].qsize};

		assert_int_equal(get_inflight(s, bad[i].nq, bad[i].qsize), 1);
		assert_dropped_for(s, VS_VHOST_GET_INFLIGHT_FD, &in, sizeof(in), -1, bad[i].why);
		open_inflight(s);
	}
	/* The session goes on: a region of the right shape, then rings on it. */
	{
		struct region r;
		region_get(s, &r);
		rings(s);
		assert_int_equal(fe_read_ok(&s->fe, REQ0, 1), 0);
		region_free(&r);
	}
	/* The region's memfd goes with the session. */
	fe_close(&s->fe);
	assert_fds(s, base);
	assert_int_equal(sess_end(s), 0);
}

/* ---- GET_INFLIGHT_FD: the region and what it shows ------------------------------------------ */
struct gated {
	int rpc, gate;
};

/* The target with LUN 1 added over the management socket: lun1.img (1 MiB, each block
 * filled with its number), its reads held by the test gate when gate. */
static void add_lun1(struct sess *s, struct gated *g, bool gate)
{
	char img[128], line[768], spec[400];
	int lfd = -1, fd;

	g->rpc = unix_connect_wait(s->p.rpc, FE_WAIT_MS);
	assert_true(g->rpc >= 0);
	g->gate = -1;
	snprintf(img, sizeof(img), "%s/lun1.img", s->p.dir);
	fd = open(img, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	if (gate) {
		/* The data, once: a restarted target reads the same file. */
		static uint8_t blk[512];
		for (unsigned lba = 0; lba < 64; lba++) {
			memset(blk, (int)(0x40 + lba), sizeof(blk));
			assert_int_equal(pwrite(fd, blk, sizeof(blk), (off_t)lba * 512), 512);
		}
		assert_int_equal(ftruncate(fd, 1 << 20), 0);
		lfd = gate_listen(s->p.gate);
		assert_true(lfd >= 0);
		snprintf(spec, sizeof(spec), "file=%s,gate=read,gate-sock=%s", img, s->p.gate);
	} else {
		snprintf(spec, sizeof(spec), "file=%s", img);
	}
	close(fd);
	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_add\",\"params\":{"
		 "\"controller\":\"default\",\"id\":1,\"spec\":\"%s\"}}\n",
		 spec);
	assert_int_equal(line_send(g->rpc, line), 0);
	if (gate) {
		g->gate = gate_accept(lfd, FE_WAIT_MS);
		assert_true(g->gate >= 0);
		close(lfd);
	}
	assert_int_equal(line_recv(g->rpc, line, sizeof(line), FE_WAIT_MS), 0);
	if (!strstr(line, "\"result\""))
		fail_msg("lun_add: %s", line);
}

static void gated_close(struct gated *g)
{
	if (g->rpc >= 0)
		close(g->rpc);
	if (g->gate >= 0)
		close(g->gate);
	g->rpc = g->gate = -1;
}

/* A READ(10) of one block of LUN 1 at lba into slot: its head. */
static uint16_t post_read1(struct sess *s, unsigned slot, uint32_t lba)
{
	struct fe_cmd c = {.lun = 1, .in_len = 512, .tag = slot};
	uint16_t head;

	cdb10(c.cdb, 0x28, 0, lba, 1);
	assert_int_equal(fe_post(&s->fe, REQ0, slot, &c, &head), 0);
	return head;
}

struct mark {
	const struct vs_vhost_inflight_split *r;
	uint16_t head;
};

static bool mark_cleared(void *arg)
{
	const struct mark *m = arg;
	return __atomic_load_n(&m->r->desc[m->head].inflight, __ATOMIC_ACQUIRE) == 0;
}

static uint16_t used_idx(struct sess *s, unsigned q)
{
	return vs_le16(__atomic_load_n(&s->fe.vq[q].used->idx, __ATOMIC_ACQUIRE));
}

/* Scenario: GET_INFLIGHT_FD as QEMU asks it.  The reply carries one fd: a memfd of exactly
 * the region's size, sealed against shrinking and growing (the frontend cannot make the
 * target's mapping fault), zeroes until each ring starts and lays its part out (version 1,
 * desc_num its size).  A READ the gate holds is marked in flight in its ring's part; once
 * the gate lets it go and it is answered, the mark is cleared and the part's used index
 * follows the used ring's. */
static void get_makes_a_sealed_region_that_tracks_requests(void **state)
{
	struct sess *s = *state;
	struct gated g;
	struct region r;
	struct stat st;
	int seals;
	uint16_t head, h;
	uint32_t len;

	assert_int_equal(sess_start(s, rpc_args, NULL), 0);
	add_lun1(s, &g, true);
	open_inflight(s);
	region_get(s, &r);
	assert_int_equal(fstat(r.fd, &st), 0);
	assert_int_equal(st.st_size, REGION);
	seals = fcntl(r.fd, F_GET_SEALS);
	assert_true(seals >= 0);
	assert_int_equal(seals & (F_SEAL_SHRINK | F_SEAL_GROW), F_SEAL_SHRINK | F_SEAL_GROW);
	assert_int_equal(ftruncate(r.fd, REGION / 2), -1);
	assert_int_equal(ftruncate(r.fd, REGION * 2), -1);
	for (unsigned q = 0; q < NQ; q++)
		assert_int_equal(part(&r, q)->version, 0);

	rings(s);
	for (unsigned q = 0; q < NQ; q++) {
		assert_int_equal(part(&r, q)->version, VS_VHOST_INFLIGHT_VERSION);
		assert_int_equal(part(&r, q)->desc_num, QSIZE);
	}
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 1), 0);

	head = post_read1(s, 1, 5);
	assert_int_equal(gate_wait_held(g.gate, 1, FE_WAIT_MS), 0);
	assert_int_equal(part(&r, REQ0)->desc[head].inflight, 1);
	for (unsigned i = 0; i < QSIZE; i++)
		assert_int_equal(part(&r, REQ0)->desc[i].inflight, i == head);

	assert_int_equal(line_send(g.gate, "release 1\n"), 0);
	assert_int_equal(fe_wait_used(&s->fe, REQ0, &h, &len, FE_WAIT_MS), 0);
	assert_int_equal(h, head);
	assert_int_equal(((uint8_t *)fe_slot_in(&s->fe, 1))[0], 0x45);
	assert_true(wait_until(mark_cleared, &(struct mark){part(&r, REQ0), head}, FE_WAIT_MS));
	assert_int_equal(__atomic_load_n(&part(&r, REQ0)->used_idx, __ATOMIC_ACQUIRE),
			 used_idx(s, REQ0));
	assert_int_equal(used_idx(s, REQ0), 2);

	assert_int_equal(sess_end(s), 0);
	gated_close(&g);
	region_free(&r);
}

/* ---- SET_INFLIGHT_FD refused ---------------------------------------------------------------- */

/* Scenario: regions the target must not map: none attached, a pipe, a file on a disk, a
 * memfd smaller than NQ rings need (by its size and by its file), an offset that wraps or
 * misaligns the region's u64 counters, no queues, rings of 3.  Each refused: with
 * NEED_REPLY a status of 1 (the session goes on), without it the session ends with the
 * reason in the log; no fd is kept. */
static void set_of_unusable_regions_is_refused(void **state)
{
	struct sess *s = *state;
	char path[] = "/var/tmp/vioscope-inflight-XXXXXX";
	int disk = mkstemp(path), pipefd[2], base;
	struct region small, r;

	assert_true(disk >= 0);
	unlink(path);
	assert_int_equal(ftruncate(disk, REGION), 0);
	assert_int_equal(pipe2(pipefd, O_CLOEXEC), 0);
	region_make(&small, REGION - 64);
	region_make(&r, REGION);
	assert_int_equal(sess_start(s, ram_lun, NULL), 0);
	base = target_fd_count(&s->p);
	open_inflight(s);

	{
		static const struct {
			int which; /* 0 none, 1 pipe, 2 disk, 3 r, 4 small */
			uint64_t size, offset;
			uint16_t nq, qsize;
			const char *why;
		} bad[] = {
		    {0, REGION, 0, NQ, QSIZE, "bad message SET_INFLIGHT_FD"},
		    {1, REGION, 0, NQ, QSIZE, "SET_INFLIGHT_FD failed: "},
		    {2, REGION, 0, NQ, QSIZE, "not tmpfs or hugetlbfs"},
		    {3, REGION - 64, 0, NQ, QSIZE, "3 queues of 128 entries need"},
		    {4, REGION, 0, NQ, QSIZE, "SET_INFLIGHT_FD failed: "},
		    {3, REGION, UINT64_MAX - 64, NQ, QSIZE, "3 queues of 128 entries need"},
		    {3, REGION, 4, NQ, QSIZE, "at offset 0x4: not 8-byte aligned"},
		    {3, REGION, 0, 0, QSIZE, "SET_INFLIGHT_FD for 0 queues"},
		    {3, REGION, 0, NQ, 3, "SET_INFLIGHT_FD for rings of 3 entries"},
		};
		const int fds[] = {-1, pipefd[0], disk, r.fd, small.fd};

		for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			struct vs_vhost_inflight in = {.mmap_size = bad[i].size,
						       .mmap_offset = bad[i].offset,
						       .num_queues = bad[i].nq,
						       .queue_size = bad[i].qsize};
			int fd = fds[bad[i].which];

			assert_int_equal(set_inflight(s, fd, in.mmap_size, in.mmap_offset,
						      in.num_queues, in.queue_size),
					 1);
			assert_dropped_for(s, VS_VHOST_SET_INFLIGHT_FD, &in, sizeof(in), fd,
					   bad[i].why);
			open_inflight(s);
		}
	}

	/* None of them was taken: the rings start untracked and serve. */
	rings(s);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 1), 0);
	for (size_t i = 0; i < r.bytes; i++)
		assert_int_equal(r.p[i], 0);
	fe_close(&s->fe);
	assert_fds(s, base);
	assert_int_equal(sess_end(s), 0);
	region_free(&r);
	region_free(&small);
	close(pipefd[0]);
	close(pipefd[1]);
	close(disk);
}

/* Scenario: SET_INFLIGHT_FD while a ring runs: the workers write into the region in force,
 * so it is not replaced under them: refused (status 1), the ring goes on; without NEED_REPLY
 * the session ends, saying why. */
static void set_while_a_ring_runs_is_refused(void **state)
{
	struct sess *s = *state;
	struct region r;

	region_make(&r, REGION);
	assert_int_equal(sess_start(s, ram_lun, NULL), 0);
	open_inflight(s);
	rings(s);
	assert_int_equal(set_inflight(s, r.fd, REGION, 0, NQ, QSIZE), 1);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 1), 0);
	assert_int_equal(part(&r, REQ0)->version, 0); /* never mapped */
	{
		struct vs_vhost_inflight in = {
		    .mmap_size = REGION, .num_queues = NQ, .queue_size = QSIZE};
		assert_dropped_for(s, VS_VHOST_SET_INFLIGHT_FD, &in, sizeof(in), r.fd,
				   "SET_INFLIGHT_FD while ring 0 runs");
	}
	assert_int_equal(part(&r, REQ0)->version, 0);
	assert_int_equal(sess_reconnect(s, &plain), 0);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 2), 0);
	assert_int_equal(sess_end(s), 0);
	region_free(&r);
}

/* A region of the frontend's own whose request ring's part says version, desc_num, and
 * marks heads (in flight, counter i). */
static void region_lie(struct region *r, uint16_t version, uint16_t desc_num, const uint8_t *marks,
		       unsigned n)
{
	struct vs_vhost_inflight_split *p;

	region_make(r, REGION);
	p = part(r, REQ0);
	p->version = version;
	p->desc_num = desc_num;
	for (unsigned i = 0; i < n; i++) {
		p->desc[i].inflight = marks[i];
		p->desc[i].counter = i;
	}
}

/* Scenario: regions that lie about the request ring (another version, another ring size, a
 * mark of 7, more heads in flight than the driver made available): the region is taken
 * (only a ring can check its part), but the request ring does not start: its enable is
 * refused (-EPROTO; without NEED_REPLY the session ends saying so; the part's own reason,
 * `why` below, is the target's log line "queue 2 not started: ..."); the region is left as it was,
 * nothing is resubmitted or answered on that ring, the control ring (its part fresh) runs, and the
 * next session (and the bystander) is served. */
static void set_of_lying_regions_keeps_the_ring_stopped(void **state)
{
	struct sess *s = *state;
	static const uint8_t seven[] = {0, 7}, two[] = {1, 0, 1};
	static const struct {
		uint16_t version, desc_num;
		const uint8_t *marks;
		unsigned n;
		const char *why; /* the reason in the target's log */
	} lies[] = {
	    {2, QSIZE, NULL, 0, "in-flight region of vq 2: version 2 for 128 entries"},
	    {1, 64, NULL, 0,
	     "in-flight region of vq 2: version 1 for 64 entries, the ring has 128"},
	    {1, QSIZE, seven, 2, "in-flight region of vq 2: head 1 is marked 7"},
	    {1, QSIZE, two, 3, "in-flight region of vq 2: 2 requests in flight, but the driver"},
	};

	assert_int_equal(sess_start(s, ram_lun, NULL), 0);
	for (unsigned i = 0; i < sizeof(lies) / sizeof(lies[0]); i++) {
		struct region r;
		struct fe_cmd c = {.in_len = 512};
		uint16_t head, h;
		uint32_t len;

		region_lie(&r, lies[i].version, lies[i].desc_num, lies[i].marks, lies[i].n);
		open_inflight(s);
		assert_int_equal(set_inflight(s, r.fd, REGION, 0, NQ, QSIZE), 0);
		for (unsigned q = 0; q < NQ; q++)
			ring(s, q, true, 0);
		assert_int_equal(vs_vhost_drv_set_vring_enable(&s->fe.drv, 0, true), 0);
		assert_int_equal(vs_vhost_drv_set_vring_enable(&s->fe.drv, 1, true), 0);
		assert_int_equal(vs_vhost_drv_set_vring_enable(&s->fe.drv, REQ0, true), -EIO);
		/* The ring does not run: a READ posted on it stays unanswered. */
		cdb10(c.cdb, 0x28, 0, 1, 1);
		assert_int_equal(fe_post(&s->fe, REQ0, 0, &c, &head), 0);
		assert_int_equal(fe_wait_used(&s->fe, REQ0, &h, &len, QUIET_MS), -ETIMEDOUT);
		/* The operator reads why (the region's lie), not only the refusal. */
		assert_true(target_log_wait(&s->p, lies[i].why, FE_WAIT_MS));
		/* The control ring runs (an ABORT TASK of no task: complete, no unit attention). */
		{
			uint8_t resp = 0xee;
			assert_int_equal(
			    fe_tmf(&s->fe, VS_VIRTIO_SCSI_T_TMF_ABORT_TASK, 0, 0, 0x1234, &resp),
			    0);
			assert_int_equal(resp, VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
		}
		/* Enabled again without NEED_REPLY: refused again (the part is checked each time
		 * the ring starts), the session ends with the refusal in the log. */
		{
			struct vs_vhost_vring_state st = {.index = REQ0, .num = 1};
			assert_dropped_for(s, VS_VHOST_SET_VRING_ENABLE, &st, sizeof(st), -1,
					   "SET_VRING_ENABLE failed: queue_start refused ring 2: "
					   "Protocol error");
		}
		assert_int_equal(part(&r, REQ0)->version, lies[i].version);
		fe_close(&s->fe);
		region_free(&r);
	}
	assert_false(target_log_wait(&s->p, "resubmitted", 0));
	assert_int_equal(sess_reconnect(s, &plain), 0);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 2), 0);
	assert_int_equal(sess_end(s), 0);
}

/* Scenario: the frontend's own region (not sealed) shrunk to nothing under running I/O: the
 * target's next mark faults; it must not die of SIGBUS but end that session saying why, and
 * serve the next (and the bystander). */
static void region_shrunk_under_the_target_ends_the_session(void **state)
{
	struct sess *s = *state;
	struct region r;
	struct fe_cmd c = {.in_len = 512};
	uint16_t head;

	region_make(&r, REGION);
	assert_int_equal(sess_start(s, ram_lun, NULL), 0);
	open_inflight(s);
	assert_int_equal(set_inflight(s, r.fd, REGION, 0, NQ, QSIZE), 0);
	rings(s);
	assert_int_equal(part(&r, REQ0)->version, VS_VHOST_INFLIGHT_VERSION);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 1), 0);
	munmap(r.p, r.bytes);
	assert_int_equal(ftruncate(r.fd, 0), 0);
	cdb10(c.cdb, 0x28, 0, 2, 1);
	assert_int_equal(fe_post(&s->fe, REQ0, 1, &c, &head), 0);
	/* The reason names the region, not guest memory. */
	if (!fe_dropped(&s->fe, FE_WAIT_MS) ||
	    !target_log_wait(&s->p, "the in-flight region vanished under the device", FE_WAIT_MS)) {
		target_log_dump(&s->p);
		fail_msg("the session was not dropped for the shrunk in-flight region");
	}
	assert_true(target_alive(&s->p));
	assert_int_equal(sess_reconnect(s, &plain), 0);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 3), 0);
	assert_int_equal(sess_end(s), 0);
	close(r.fd);
}

/* ---- a target killed with requests in flight ------------------------------------------------ */
static bool path_exists(void *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

/* The session's target again, as sess_start made it, on the same sockets and files. */
static void target_restart(struct sess *s)
{
	struct target_opts to = {.file_size = 64 << 20};
	static const char *const args[] = {"--testing",
					   "--rpc",
					   "%R",
					   "--lun",
					   "0:file=%F",
					   "--controller",
					   "bystander:socket=%D/bystander.sock",
					   "--lun",
					   "0:ram=16M",
					   NULL};
	char by_sock[160];

	for (unsigned i = 0; args[i]; i++)
		to.args[i] = args[i];
	snprintf(by_sock, sizeof(by_sock), "%s/bystander.sock", s->p.dir);
	/* A killed target leaves its sockets behind. */
	unlink(s->p.sock);
	unlink(s->p.rpc);
	unlink(by_sock);
	assert_int_equal(target_start(&s->p, &to), 0);
	assert_true(wait_until(path_exists, by_sock, FE_WAIT_MS));
}

/* Scenario: a crash with requests in flight.  The frontend keeps the target's region (GET),
 * 3 READs are taken and held by the gate, and the target is killed (SIGKILL: no drain).  A
 * new target on the same socket and files gets the region back (SET_INFLIGHT_FD) and the
 * rings at their used indexes (as QEMU reconnects): it says it resubmits 3 requests, and the
 * used ring shows each of the 3 heads exactly once, with its data, and nothing else. */
static void killed_target_answers_what_it_took_exactly_once(void **state)
{
	struct sess *s = *state;
	struct gated g;
	struct region r;
	uint16_t heads[3], base[NQ];
	unsigned seen[3] = {0, 0, 0};
	int sig;

	assert_int_equal(sess_start(s, rpc_args, NULL), 0);
	add_lun1(s, &g, true);
	open_inflight(s);
	region_get(s, &r);
	rings(s);
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 1), 0);
	for (unsigned i = 0; i < 3; i++)
		heads[i] = post_read1(s, 1 + i, 10 + i);
	assert_int_equal(gate_wait_held(g.gate, 3, FE_WAIT_MS), 0);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(part(&r, REQ0)->desc[heads[i]].inflight, 1);

	assert_int_equal(target_stop(&s->p, SIGKILL, FE_WAIT_MS, &sig), -1);
	assert_int_equal(sig, SIGKILL);
	gated_close(&g);
	/* The connection is gone; the guest's rings stay as they are. */
	vs_vhost_drv_close(&s->fe.drv);
	s->fe.drv.sock = -1;
	for (unsigned q = 0; q < NQ; q++) {
		close(s->fe.kick[q]);
		close(s->fe.call[q]);
		s->fe.kick[q] = s->fe.call[q] = -1;
		base[q] = used_idx(s, q);
	}
	assert_int_equal(base[REQ0], 1);

	target_restart(s);
	add_lun1(s, &g, false);
	negotiate(s, true);
	assert_int_equal(vs_vhost_drv_set_inflight_fd(&s->fe.drv, r.fd, REGION, 0, NQ, QSIZE), 0);
	memory(s);
	for (unsigned q = 0; q < NQ; q++)
		ring(s, q, false, base[q]);
	for (unsigned q = 0; q < NQ; q++)
		assert_int_equal(vs_vhost_drv_set_vring_enable(&s->fe.drv, q, true), 0);
	assert_logged(s, "queue 2: 3 request(s) taken before a restart");

	for (unsigned n = 0; n < 3; n++) {
		uint16_t h;
		uint32_t len;
		unsigned i;

		assert_int_equal(fe_wait_used(&s->fe, REQ0, &h, &len, FE_WAIT_MS), 0);
		for (i = 0; i < 3 && heads[i] != h; i++)
			;
		assert_true(i < 3);
		seen[i]++;
	}
	for (unsigned i = 0; i < 3; i++) {
		struct fe_cmd c = {.in_len = 512};
		const uint8_t *in = fe_slot_in(&s->fe, 1 + i);

		assert_int_equal(seen[i], 1);
		fe_result(&s->fe, 1 + i, &c);
		assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
		assert_int_equal(c.resp.status, 0);
		for (unsigned b = 0; b < 512; b++)
			assert_int_equal(in[b], 0x40 + 10 + i);
	}
	/* Nothing more: none of them twice. */
	{
		uint16_t h;
		uint32_t len;
		assert_int_equal(fe_wait_used(&s->fe, REQ0, &h, &len, QUIET_MS), -ETIMEDOUT);
	}
	assert_int_equal(used_idx(s, REQ0), 4);
	for (unsigned i = 0; i < QSIZE; i++)
		assert_int_equal(part(&r, REQ0)->desc[i].inflight, 0);
	assert_int_equal(part(&r, REQ0)->used_idx, 4);
	/* And the ring goes on. */
	assert_int_equal(fe_read_ok(&s->fe, REQ0, 7), 0);

	assert_int_equal(sess_end(s), 0);
	gated_close(&g);
	region_free(&r);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    SESS_TEST(get_without_the_feature_is_refused),
	    SESS_TEST(get_of_impossible_shapes_is_refused),
	    SESS_TEST(get_makes_a_sealed_region_that_tracks_requests),
	    SESS_TEST(set_of_unusable_regions_is_refused),
	    SESS_TEST(set_while_a_ring_runs_is_refused),
	    SESS_TEST(set_of_lying_regions_keeps_the_ring_stopped),
	    SESS_TEST(region_shrunk_under_the_target_ends_the_session),
	    SESS_TEST(killed_target_answers_what_it_took_exactly_once),
	};
	return hostile_init(argc, argv) ?: cmocka_run_group_tests(tests, NULL, NULL);
}
