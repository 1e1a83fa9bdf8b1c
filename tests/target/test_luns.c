/* SPDX-License-Identifier: MIT */
/*
 * LUNs at run time (src/target/luns.c, events.c), driven through the raw frontend: add,
 * remove and resize while the frontend is connected; what the driver sees on its request
 * queues (REPORT LUNS, LOGICAL UNIT NOT SUPPORTED, CAPACITY DATA HAS CHANGED) and on its
 * event queue (TRANSPORT_RESET, PARAM_CHANGE, EVENTS_MISSED); removal with requests in
 * flight (a backend whose completions are held back on purpose).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "target/target_int.h" /* the in-flight count of a queue, to know requests wait */
#include "util/util.h"

#define REQ0	    VS_VIRTIO_SCSI_VQ_REQ0
#define EVQ	    VS_VIRTIO_SCSI_VQ_EVENT
#define EV_BUFS	    FE_SLOT(FE_SLOTS - 3) /* event buffers: 16 bytes each */
#define PAR_SLOT(s) FE_SLOT(1 + (s))	  /* concurrent commands (fe_scsi's is slot 0) */
#define PAR_N	    8
#define CAP_REASON  (0x2a | 0x09 << 8) /* ASC | ASCQ << 8: CAPACITY DATA HAS CHANGED */

/* Post n event buffers (slots first..first+n-1) on the event queue. */
static void post_event_bufs(struct fx *x, unsigned first, unsigned n)
{
	for (unsigned i = first; i < first + n; i++) {
		struct vs_vq_buf b = {EV_BUFS + 16 * i, 16, true};
		uint16_t head;

		memset(fe_host(&x->fe, b.addr), 0xee, 16);
		assert_int_equal(fe_post_chain(&x->fe, EVQ, &b, 1, &head), 0);
	}
}

/* The next event the device delivers (a deadline in fe_wait_used). */
static struct vs_virtio_scsi_event next_event(struct fx *x)
{
	struct vs_virtio_scsi_event ev;
	uint32_t len = 0;
	uint16_t head;

	assert_int_equal(fe_wait_used(&x->fe, EVQ, &head, &len, FE_WAIT_MS), 0);
	assert_int_equal(len, sizeof(ev));
	/* Buffers are posted in slot order and used in ring order: head n is slot n. */
	memcpy(&ev, fe_host(&x->fe, EV_BUFS + 16 * head), sizeof(ev));
	return ev;
}

static void assert_event(const struct vs_virtio_scsi_event *ev, uint32_t event, unsigned lun,
			 uint32_t reason)
{
	unsigned target = 9, l = 999;

	assert_int_equal(vs_le32(ev->event), event);
	assert_int_equal(vs_vscsi_lun_decode(ev->lun, &target, &l), 0);
	assert_int_equal(target, 0);
	assert_int_equal(l, lun);
	assert_int_equal(vs_le32(ev->reason), reason);
}

/* One command on request queue q; returns the sense key (0: GOOD). */
static int cmd_on(struct fx *x, unsigned q, unsigned lun, const uint8_t *cdb, unsigned cdb_len,
		  void *in, uint32_t in_len, const void *out, uint32_t out_len, int *asc)
{
	struct fe_cmd c = {.lun = lun, .in = in, .in_len = in_len, .out = out, .out_len = out_len};

	memcpy(c.cdb, cdb, cdb_len);
	assert_int_equal(fe_scsi(&x->fe, q, &c), 0);
	assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
	if (asc)
		*asc = c.resp.status ? sense_asc(&c.resp) << 8 | c.resp.sense[13] : 0;
	return c.resp.status ? sense_key(&c.resp) : 0;
}

/* ... on the first request queue. */
static int cmd(struct fx *x, unsigned lun, const uint8_t *cdb, unsigned cdb_len, void *in,
	       uint32_t in_len, const void *out, uint32_t out_len, int *asc)
{
	return cmd_on(x, REQ0, lun, cdb, cdb_len, in, in_len, out, out_len, asc);
}

static int tur(struct fx *x, unsigned lun, int *asc)
{
	uint8_t cdb[6] = {0};
	return cmd(x, lun, cdb, 6, NULL, 0, NULL, 0, asc);
}

/* READ CAPACITY(10): the number of blocks. */
static uint64_t capacity(struct fx *x, unsigned lun)
{
	uint8_t cdb[10] = {0x25}, buf[8];

	assert_int_equal(cmd(x, lun, cdb, 10, buf, 8, NULL, 0, NULL), 0);
	return (uint64_t)vs_be32(buf) + 1;
}

/* Is lun in REPORT LUNS? */
static bool reported(struct fx *x, unsigned lun)
{
	uint8_t cdb[12] = {VS_SCSI_OP_REPORT_LUNS}, buf[8 + 8 * 16];
	uint32_t n;

	vs_put_be32(cdb + 6, sizeof(buf));
	assert_int_equal(cmd(x, 0, cdb, 12, buf, sizeof(buf), NULL, 0, NULL), 0);
	n = vs_be32(buf) / 8;
	for (uint32_t i = 0; i < n && i < 16; i++)
		if (buf[8 + 8 * i + 1] == lun)
			return true;
	return false;
}

static void write_read(struct fx *x, unsigned lun, uint32_t lba, uint8_t seed)
{
	uint8_t cdb[10], out[4096], in[4096];

	for (unsigned i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(seed + i * 7);
	cdb10(cdb, 0x2a, 0, lba, 8);
	assert_int_equal(cmd(x, lun, cdb, 10, NULL, 0, out, sizeof(out), NULL), 0);
	cdb10(cdb, 0x28, 0, lba, 8);
	assert_int_equal(cmd(x, lun, cdb, 10, in, sizeof(in), NULL, 0, NULL), 0);
	assert_memory_equal(in, out, sizeof(out));
}

static int add(struct fx *x, unsigned id, const char *spec, char *why, size_t whylen)
{
	struct vs_target_lun l = {.id = id, .spec = spec};
	return vs_target_lun_add(x->g.t, NULL, &l, why, whylen);
}

/* The errors the management calls give, each with its message, and the list. */
static void test_errors(void **state)
{
	struct fx *x = *state;
	struct vs_target_lun_info info[4];
	char err[256];

	assert_int_equal(add(x, 0, "ram=1M", err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "LUN 0 exists"));
	assert_int_equal(add(x, 256, "ram=1M", err, sizeof(err)), -EINVAL);
	assert_int_equal(add(x, 3, "bogus=1", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown backend"));
	assert_int_equal(add(x, 3, "file=/nonexistent/x", err, sizeof(err)), -ENOENT);
	assert_int_equal(vs_target_lun_remove(x->g.t, NULL, 7, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "no LUN 7"));
	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 7, 1 << 20, err, sizeof(err)), -ENOENT);
	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 0, 1000, err, sizeof(err)), -EINVAL);
	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 0, 0, err, sizeof(err)), -EINVAL);
	assert_int_equal(add(x, 5, "null=1M", err, sizeof(err)), 0);
	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 5, 2 << 20, err, sizeof(err)),
			 -ENOTSUP);
	assert_non_null(strstr(err, "null"));
	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 1, 512 << 10, err, sizeof(err)),
			 -ENOTSUP);
	assert_non_null(strstr(err, "only grows"));

	assert_int_equal(vs_target_lun_list(x->g.t, NULL, info, 4), 3);
	assert_int_equal(info[0].id, 0);
	assert_string_equal(info[0].kind, "file");
	assert_int_equal(info[0].bytes, 1 << 20);
	assert_int_equal(info[1].id, 1);
	assert_string_equal(info[1].spec, "ram=1M");
	assert_int_equal(info[2].id, 5);
	assert_string_equal(info[2].kind, "null");
	assert_int_equal(info[2].block_size, 512);
	assert_false(info[2].read_only);
	assert_int_equal(vs_target_lun_list(x->g.t, NULL, info, 1),
			 3); /* how many, not how many fit */
	/* Nothing changed by the failures: the old LUNs still answer. */
	assert_int_equal(capacity(x, 0), 2048);
}

/* An added LUN: a TRANSPORT_RESET / RESCAN event for it, in REPORT LUNS, data moves. */
static void test_add(void **state)
{
	struct fx *x = *state;
	struct vs_virtio_scsi_event ev;
	char err[256];

	post_event_bufs(x, 0, 4);
	assert_false(reported(x, 2));
	assert_int_equal(add(x, 2, "ram=2M", err, sizeof(err)), 0);
	ev = next_event(x);
	assert_event(&ev, VS_VIRTIO_SCSI_T_TRANSPORT_RESET, 2, VS_VIRTIO_SCSI_EVT_RESET_RESCAN);
	assert_true(reported(x, 2));
	assert_int_equal(capacity(x, 2), 4096);
	write_read(x, 2, 4000, 3);
}

/* A removed LUN: a TRANSPORT_RESET / REMOVED event, gone from REPORT LUNS, commands get
 * LOGICAL UNIT NOT SUPPORTED; the id can be added again. */
static void test_remove(void **state)
{
	struct fx *x = *state;
	struct vs_virtio_scsi_event ev;
	char err[256];
	int asc;

	post_event_bufs(x, 0, 4);
	assert_int_equal(vs_target_lun_remove(x->g.t, NULL, 1, err, sizeof(err)), 0);
	ev = next_event(x);
	assert_event(&ev, VS_VIRTIO_SCSI_T_TRANSPORT_RESET, 1, VS_VIRTIO_SCSI_EVT_RESET_REMOVED);
	assert_false(reported(x, 1));
	assert_int_equal(tur(x, 1, &asc), 5); /* ILLEGAL REQUEST */
	assert_int_equal(asc, VS_ASC_LUN_NOT_SUPPORTED);
	assert_int_equal(vs_target_lun_list(x->g.t, NULL, NULL, 0), 1);
	assert_int_equal(add(x, 1, "ram=1M", err, sizeof(err)), 0);
	ev = next_event(x);
	assert_event(&ev, VS_VIRTIO_SCSI_T_TRANSPORT_RESET, 1, VS_VIRTIO_SCSI_EVT_RESET_RESCAN);
	write_read(x, 1, 0, 9);
}

static uint64_t file_size(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (uint64_t)st.st_size;
}

/* Resizing the file LUN: the file grows and shrinks, a PARAM_CHANGE event with CAPACITY
 * DATA HAS CHANGED each time, the unit attention once, then the new capacity.  The ram
 * LUN grows and its new blocks hold data. */
static void test_resize(void **state)
{
	struct fx *x = *state;
	struct vs_virtio_scsi_event ev;
	char err[256];
	int asc;

	post_event_bufs(x, 0, 8);
	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 0, 2 << 20, err, sizeof(err)), 0);
	assert_int_equal(file_size(x->g.file), 2 << 20);
	ev = next_event(x);
	assert_event(&ev, VS_VIRTIO_SCSI_T_PARAM_CHANGE, 0, CAP_REASON);
	assert_int_equal(tur(x, 0, &asc), 6); /* UNIT ATTENTION */
	assert_int_equal(asc, VS_ASC_CAPACITY_DATA_CHANGED);
	assert_int_equal(tur(x, 0, &asc), 0); /* once */
	assert_int_equal(capacity(x, 0), 4096);
	write_read(x, 0, 4000, 5); /* beyond the old end */

	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 0, 512 << 10, err, sizeof(err)), 0);
	assert_int_equal(file_size(x->g.file), 512 << 10);
	ev = next_event(x);
	assert_event(&ev, VS_VIRTIO_SCSI_T_PARAM_CHANGE, 0, CAP_REASON);
	assert_int_equal(tur(x, 0, &asc), 6);
	assert_int_equal(capacity(x, 0), 1024);

	/* The same size: nothing happens (no event, no unit attention). */
	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 0, 512 << 10, err, sizeof(err)), 0);
	assert_int_equal(tur(x, 0, &asc), 0);

	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 1, 3 << 20, err, sizeof(err)), 0);
	ev = next_event(x);
	assert_event(&ev, VS_VIRTIO_SCSI_T_PARAM_CHANGE, 1, CAP_REASON);
	assert_int_equal(tur(x, 1, &asc), 6);
	assert_int_equal(capacity(x, 1), 6144);
	write_read(x, 1, 6136, 11); /* the last 4 KiB */
}

/* Events with no buffer wait; more than the target keeps are dropped, and the next one
 * delivered carries EVENTS_MISSED; those after it do not. */
static void test_events_missed(void **state)
{
	struct fx *x = *state;
	struct vs_virtio_scsi_event ev;
	char err[256];

	/* 2 x 40 events > TQ_EVENTS_MAX (64) with no buffer posted. */
	for (unsigned i = 0; i < 40; i++) {
		assert_int_equal(add(x, 2, "ram=1M", err, sizeof(err)), 0);
		assert_int_equal(vs_target_lun_remove(x->g.t, NULL, 2, err, sizeof(err)), 0);
	}
	post_event_bufs(x, 0, 2);
	ev = next_event(x);
	/* The oldest kept: the first add, with the flag. */
	assert_event(&ev, VS_VIRTIO_SCSI_T_TRANSPORT_RESET | VS_VIRTIO_SCSI_T_EVENTS_MISSED, 2,
		     VS_VIRTIO_SCSI_EVT_RESET_RESCAN);
	ev = next_event(x);
	assert_event(&ev, VS_VIRTIO_SCSI_T_TRANSPORT_RESET, 2, VS_VIRTIO_SCSI_EVT_RESET_REMOVED);
}

/* ---- changes that wait, outside the lock --------------------------------------------------- */
struct change {
	struct vs_target *t;
	unsigned id;
	uint64_t bytes; /* a resize to bytes; 0: a removal */
	int rc;		/* reported to the test thread */
	char err[256];
	unsigned inflight_after; /* requests in flight on REQ0 when it returned */
	int done;		 /* atomic */
};

static void *change_main(void *arg)
{
	struct change *c = arg;

	c->rc = c->bytes ? vs_target_lun_resize(c->t, NULL, c->id, c->bytes, c->err, sizeof(c->err))
			 : vs_target_lun_remove(c->t, NULL, c->id, c->err, sizeof(c->err));
	c->inflight_after = __atomic_load_n(&c->t->ctrls->q[REQ0].inflight, __ATOMIC_RELAXED);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* ---- removal with requests in flight ---------------------------------------------------- */
/* Make a WRITE(10) of 8 blocks at lba (pattern seed) available in slot s, without waiting. */
static void post_write(struct fx *x, unsigned s, unsigned lun, uint32_t lba, uint8_t seed)
{
	uint64_t base = PAR_SLOT(s);
	struct vs_virtio_scsi_cmd_req req;
	struct vs_vq_buf b[3] = {
	    {base, sizeof(req), false},
	    {base + FE_SLOT_DATA, 4096, false},
	    {base + FE_SLOT_RESP, sizeof(struct vs_virtio_scsi_cmd_resp), true}};
	uint8_t *data = fe_host(&x->fe, base + FE_SLOT_DATA);
	uint16_t head;

	memset(&req, 0, sizeof(req));
	assert_int_equal(vs_vscsi_lun_encode(req.lun, 0, lun), 0);
	req.tag = vs_le64(100 + s);
	cdb10(req.cdb, 0x2a, 0, lba, 8);
	memcpy(fe_host(&x->fe, base), &req, sizeof(req));
	memset(fe_host(&x->fe, base + FE_SLOT_RESP), 0xee, sizeof(struct vs_virtio_scsi_cmd_resp));
	for (unsigned i = 0; i < 4096; i++)
		data[i] = (uint8_t)(seed + i * 13);
	assert_int_equal(fe_post_chain(&x->fe, REQ0, b, 3, &head), 0);
}

/* Requests in flight on queue REQ0 as the worker counts them (read relaxed: a test). */
static unsigned queue_inflight(struct fx *x)
{
	return __atomic_load_n(&x->g.t->ctrls->q[REQ0].inflight, __ATOMIC_RELAXED);
}

/* Removing a LUN while the test gate holds its writes in flight: the removal unpublishes
 * the LUN and waits; let go, the writes complete, and the remove returns only after they
 * did (none in flight when it returned; GOOD, used entries given back), the file holds
 * every acknowledged write after the backend closed, and commands after it get LOGICAL
 * UNIT NOT SUPPORTED.  (A delay of 200 ms held them before, and the test asserted the
 * removal took 100 ms: a loaded machine could take longer to come to the removal.) */
static void test_remove_in_flight(void **state)
{
	struct fx *x = *state;
	struct change c = {.t = x->g.t, .id = 3};
	struct vs_backend *be;
	char err[256], spec[160], path[128];
	pthread_t thr;
	uint32_t len;
	uint16_t head;
	int fd, asc;

	snprintf(path, sizeof(path), "%s/slow.img", x->g.dir);
	fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	snprintf(spec, sizeof(spec), "file=%s,gate=write", path);
	assert_int_equal(add(x, 3, spec, err, sizeof(err)), 0);
	be = x->g.t->ctrls->be[3]; /* white-box: the test's handle on its gate */

	for (unsigned s = 0; s < PAR_N; s++)
		post_write(x, s, 3, 8 * s, (uint8_t)(s + 1));
	assert_int_equal(vs_backend_gate_wait(be, PAR_N, 10000), 0);
	assert_int_equal(queue_inflight(x), PAR_N);

	assert_int_equal(pthread_create(&thr, NULL, change_main, &c), 0);
	for (uint64_t end = vs_mono_ns() + 10000000000ull;
	     vs_target_lun_list(x->g.t, NULL, NULL, 0) != 2; sched_yield())
		assert_true(vs_mono_ns() < end); /* unpublished: the removal is under way */
	assert_false(__atomic_load_n(&c.done, __ATOMIC_ACQUIRE));
	assert_int_equal(queue_inflight(x), PAR_N);
	assert_int_equal(vs_backend_gate_open(be), PAR_N);
	assert_int_equal(pthread_join(thr, NULL), 0);
	if (c.rc)
		fail_msg("remove: %s", c.err);
	assert_int_equal(c.inflight_after, 0); /* waited for, not abandoned */

	for (unsigned i = 0; i < PAR_N; i++) {
		struct vs_virtio_scsi_cmd_resp resp;

		assert_int_equal(fe_wait_used(&x->fe, REQ0, &head, &len, FE_WAIT_MS), 0);
		memcpy(&resp, fe_host(&x->fe, PAR_SLOT(head) + FE_SLOT_RESP), sizeof(resp));
		/* heads are slots here: every one was answered GOOD */
		assert_int_equal(resp.response, VS_VIRTIO_SCSI_S_OK);
		assert_int_equal(resp.status, 0);
	}
	for (unsigned s = 0; s < PAR_N; s++) {
		uint8_t buf[4096], want[4096];

		for (unsigned i = 0; i < 4096; i++)
			want[i] = (uint8_t)(s + 1 + i * 13);
		assert_int_equal(pread(fd, buf, sizeof(buf), (off_t)s * 4096), 4096);
		assert_memory_equal(buf, want, sizeof(buf));
	}
	close(fd);
	unlink(path);
	assert_int_equal(tur(x, 3, &asc), 5);
	assert_int_equal(asc, VS_ASC_LUN_NOT_SUPPORTED);
}

/* ---- add and remove while I/O runs on another LUN ----------------------------------------- */
/* Adds and removes of LUN 2 on another thread while this one writes and reads back LUN 1:
 * every command GOOD, every byte as written; every change succeeded. */
static void test_churn_under_io(void **state)
{
	struct fx *x = *state;
	/* at least 100 adds and removes of LUN 2, and on until this thread has done 30 rounds */
	struct lun_churn c = {
	    .t = x->g.t, .lun = {.id = 2, .spec = "ram=4M"}, .min_cycles = 100, .min_rounds = 30};
	uint64_t deadline = vs_mono_ns() + 60000000000ull;
	unsigned rounds = 0;

	assert_int_equal(lun_churn_start(&c), 0);
	while (lun_churn_running(&c) && vs_mono_ns() < deadline) {
		write_read(x, 1, (rounds % 256) * 8, (uint8_t)rounds);
		rounds++;
		lun_churn_round(&c);
	}
	if (lun_churn_join(&c))
		fail_msg("add/remove failed: %d %s", c.rc, c.err);
	assert_true(c.cycles >= 100);
	assert_true(rounds >= 30);
}

/* With no frontend connected, changes still work; their events are dropped (counted), and
 * a driver that connects finds the LUN by scanning; the unit attention is the LUN's and
 * stays. */
static void test_no_frontend(void **state)
{
	struct fx *x = *state;
	uint64_t dropped, after;
	unsigned waiting;
	char err[256];
	int asc;

	fe_close(&x->fe);
	/* The target sees the socket close on its own thread: wait for that. */
	for (uint64_t end = vs_mono_ns() + 10000000000ull;; sched_yield()) {
		bool live;

		pthread_mutex_lock(&x->g.t->ctrls->ev_lock);
		live = x->g.t->ctrls->ev_live;
		dropped = x->g.t->ctrls->ev_dropped;
		pthread_mutex_unlock(&x->g.t->ctrls->ev_lock);
		if (!live)
			break;
		assert_true(vs_mono_ns() < end);
	}
	assert_int_equal(add(x, 4, "ram=1M", err, sizeof(err)), 0);
	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 4, 2 << 20, err, sizeof(err)), 0);
	pthread_mutex_lock(&x->g.t->ctrls->ev_lock); /* read under the lock, asserted outside it */
	after = x->g.t->ctrls->ev_dropped;
	waiting = x->g.t->ctrls->ev_count;
	pthread_mutex_unlock(&x->g.t->ctrls->ev_lock);
	assert_int_equal(after, dropped + 2);
	assert_int_equal(waiting, 0);
	assert_int_equal(fx_connect(x), 0);
	assert_true(reported(x, 4));
	assert_int_equal(tur(x, 4, &asc), 6);
	assert_int_equal(asc, VS_ASC_CAPACITY_DATA_CHANGED);
	assert_int_equal(capacity(x, 4), 4096);
}

/* A file of size bytes in the fixture's directory, added as LUN id with spec options opts;
 * path gets its name. */
static struct vs_backend *add_file(struct fx *x, unsigned id, uint64_t size, const char *opts,
				   char *path, size_t len)
{
	char err[256], spec[256];
	int fd;

	snprintf(path, len, "%s/lun%u.img", x->g.dir, id);
	fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	close(fd);
	snprintf(spec, sizeof(spec), "file=%s%s", path, opts);
	if (add(x, id, spec, err, sizeof(err)))
		fail_msg("add: %s", err);
	return x->g.t->ctrls->be[id]; /* white-box: the test's handle on its gate */
}

/* READ CAPACITY(10) on the second queue (the first holds the writes in flight), past the
 * unit attention a resize raises. */
static uint64_t capacity_q1(struct fx *x, unsigned lun)
{
	uint8_t cdb[10] = {0x25}, buf[8];
	int key;

	for (int i = 0;
	     (key = cmd_on(x, REQ0 + 1, lun, cdb, 10, buf, 8, NULL, 0, NULL)) == 6 && i < 4; i++)
		; /* UNIT ATTENTION: CAPACITY DATA HAS CHANGED, reported once */
	assert_int_equal(key, 0);
	return (uint64_t)vs_be32(buf) + 1;
}

#define SHRINK_FROM (64u << 20)
#define SHRINK_TO   (32u << 20)
#define SHRINK_N    16

/* Shrinking a file LUN from 64 to 32 MiB while 16 writes near its end are held in flight
 * (the gate): the capacity drops first (a new write past the new end gets LBA OUT OF
 * RANGE at once), the shrink waits for the held writes, and only then cuts the file: the
 * file ends at 32 MiB, as the capacity says, and grown back the range reads zeros. */
static void test_shrink_waits_for_writes_in_flight(void **state)
{
	struct fx *x = *state;
	struct change c = {.t = x->g.t, .id = 3, .bytes = SHRINK_TO};
	uint8_t cdb[10], buf[4096];
	struct vs_backend *be;
	char path[128], err[256];
	pthread_t thr;
	struct stat st;
	uint32_t len;
	uint16_t head;
	int asc;

	be = add_file(x, 3, SHRINK_FROM, ",gate=write", path, sizeof(path));
	for (unsigned s = 0; s < SHRINK_N; s++)
		post_write(x, s, 3, SHRINK_FROM / 512 - 8 * (s + 1), (uint8_t)(s + 1));
	assert_int_equal(vs_backend_gate_wait(be, SHRINK_N, 10000), 0);

	assert_int_equal(pthread_create(&thr, NULL, change_main, &c), 0);
	for (uint64_t end = vs_mono_ns() + 10000000000ull; capacity_q1(x, 3) != SHRINK_TO / 512;)
		assert_true(vs_mono_ns() < end);
	memset(buf, 0x5a, sizeof(buf));
	cdb10(cdb, 0x2a, 0, SHRINK_FROM / 512 - 8, 8);
	assert_int_equal(cmd_on(x, REQ0 + 1, 3, cdb, 10, NULL, 0, buf, sizeof(buf), &asc), 5);
	assert_int_equal(asc, VS_ASC_LBA_OUT_OF_RANGE);

	assert_int_equal(vs_backend_gate_open(be), SHRINK_N);
	assert_int_equal(pthread_join(thr, NULL), 0);
	if (c.rc)
		fail_msg("resize: %s", c.err);
	for (unsigned i = 0; i < SHRINK_N; i++) {
		struct vs_virtio_scsi_cmd_resp resp;

		assert_int_equal(fe_wait_used(&x->fe, REQ0, &head, &len, FE_WAIT_MS), 0);
		memcpy(&resp, fe_host(&x->fe, PAR_SLOT(head) + FE_SLOT_RESP), sizeof(resp));
		assert_int_equal(resp.response, VS_VIRTIO_SCSI_S_OK); /* taken before the shrink */
		assert_int_equal(resp.status, 0);
	}
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, SHRINK_TO);
	assert_int_equal(capacity_q1(x, 3), SHRINK_TO / 512);

	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 3, SHRINK_FROM, err, sizeof(err)), 0);
	assert_int_equal(capacity_q1(x, 3), SHRINK_FROM / 512);
	for (unsigned s = 0; s < SHRINK_N; s++) {
		uint8_t zero[4096] = {0};

		cdb10(cdb, 0x28, 0, SHRINK_FROM / 512 - 8 * (s + 1), 8);
		assert_int_equal(cmd_on(x, REQ0 + 1, 3, cdb, 10, buf, sizeof(buf), NULL, 0, NULL),
				 0);
		assert_memory_equal(buf, zero, sizeof(buf));
	}
	unlink(path);
}

/* A removal whose final flush the gate holds: the frontend can disconnect (the vhost
 * thread's flush does not wait for the removal), a new one connect and move data; the LUN
 * cannot be added, resized or removed again meanwhile (-EBUSY); the removal then finishes.
 * On dcf1c4a (with the gate) the disconnect's flush waited for luns_lock, which the removal
 * held while it flushed: the new frontend got no answer. */
static void test_removal_flush_held_across_a_reconnect(void **state)
{
	struct fx *x = *state;
	struct change c = {.t = x->g.t, .id = 3};
	struct vs_backend *be;
	char path[128], err[256];
	pthread_t thr;
	int rc;

	be = add_file(x, 3, 1 << 20, ",gate=flush", path, sizeof(path));
	write_read(x, 3, 0, 1);
	assert_int_equal(pthread_create(&thr, NULL, change_main, &c), 0);
	assert_int_equal(vs_backend_gate_wait(be, 1, 10000), 0);

	fe_close(&x->fe);
	if ((rc = fx_connect(x))) {
		vs_backend_gate_open(be); /* let the target unwind before the failure */
		pthread_join(thr, NULL);
		fail_msg("a new frontend could not connect while a removal flushed: %s",
			 strerror(-rc));
	}
	write_read(x, 0, 16, 2);
	assert_int_equal(add(x, 3, "ram=1M", err, sizeof(err)), -EBUSY);
	assert_non_null(strstr(err, "being removed"));
	assert_int_equal(vs_target_lun_remove(x->g.t, NULL, 3, err, sizeof(err)), -EBUSY);
	assert_int_equal(vs_target_lun_resize(x->g.t, NULL, 3, 2 << 20, err, sizeof(err)), -EBUSY);
	assert_int_equal(vs_target_lun_list(x->g.t, NULL, NULL, 0), 2); /* 0 and 1 */
	assert_false(__atomic_load_n(&c.done, __ATOMIC_ACQUIRE));

	assert_int_equal(vs_backend_gate_open(be), 1);
	assert_int_equal(pthread_join(thr, NULL), 0);
	if (c.rc)
		fail_msg("remove: %s", c.err);
	assert_false(reported(x, 3));
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    FX_TEST(test_errors),
	    FX_TEST(test_add),
	    FX_TEST(test_remove),
	    FX_TEST(test_resize),
	    FX_TEST(test_events_missed),
	    FX_TEST(test_remove_in_flight),
	    FX_TEST(test_churn_under_io),
	    FX_TEST(test_no_frontend),
	    FX_TEST(test_shrink_waits_for_writes_in_flight),
	    FX_TEST(test_removal_flush_held_across_a_reconnect),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
