/* SPDX-License-Identifier: MIT */
/* The test harness: see frontend.h. */
#define _GNU_SOURCE /* memfd_create */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "frontend.h"

#define RING_GPA(q) (FE_GAP_END + (uint64_t)(q)*0x2000)
#define WAIT_MS	    20000 /* a missing interrupt becomes a failure, not a hang */

/* ---- the target ---------------------------------------------------------------------------- */
static void *serve(void *arg)
{
	struct tgt *g = arg;
	vs_target_run(g->t, &g->stop);
	return NULL;
}

int tgt_start(struct tgt *g, unsigned queues)
{
	return tgt_start_poll(g, queues, false);
}

int tgt_start_poll(struct tgt *g, unsigned queues, bool poll)
{
	return tgt_start_opts(g, queues, poll, "");
}

int tgt_start_opts(struct tgt *g, unsigned queues, bool poll, const char *lun0_opts)
{
	char err[256], spec[256];
	struct vs_target_lun luns[2];
	/* testing: the TMF and LUN tests hold requests in flight with gate= */
	struct vs_target_config cfg = {
	    .num_queues = queues, .nluns = 2, .luns = luns, .poll = poll, .testing = true};
	int fd, rc;

	memset(g, 0, sizeof(*g));
	strcpy(g->dir, "/tmp/vs-target-XXXXXX");
	if (!mkdtemp(g->dir))
		return -errno;
	snprintf(g->sock, sizeof(g->sock), "%s/sock", g->dir);
	snprintf(g->file, sizeof(g->file), "%s/lun0.img", g->dir);
	fd = open(g->file, O_CREAT | O_RDWR | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, 1 << 20) < 0)
		return -errno;
	close(fd);
	snprintf(spec, sizeof(spec), "file=%s%s", g->file, lun0_opts);
	luns[0] = (struct vs_target_lun){0, spec};
	luns[1] = (struct vs_target_lun){1, "ram=1M"};
	cfg.socket_path = g->sock;
	rc = vs_target_create(&g->t, &cfg, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "target: %s\n", err);
		return rc;
	}
	return -pthread_create(&g->thr, NULL, serve, g);
}

void tgt_stop(struct tgt *g)
{
	__atomic_store_n(&g->stop, 1, __ATOMIC_RELAXED);
	vs_target_wake(g->t);
	pthread_join(g->thr, NULL);
	vs_target_destroy(g->t);
	unlink(g->file);
	rmdir(g->dir);
}

/* ---- the frontend -------------------------------------------------------------------------- */
int fe_init(struct fe *fe)
{
	memset(fe, 0, sizeof(*fe));
	for (unsigned q = 0; q < FE_NQ; q++)
		fe->kick[q] = fe->call[q] = fe->err[q] = -1;
	fe->memfd = memfd_create("guest", MFD_CLOEXEC);
	if (fe->memfd < 0 || ftruncate(fe->memfd, (off_t)FE_MEM_SIZE) < 0)
		return -errno;
	fe->mem = mmap(NULL, FE_MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fe->memfd, 0);
	return fe->mem == MAP_FAILED ? -errno : 0;
}

void fe_fini(struct fe *fe)
{
	fe_disconnect(fe);
	munmap(fe->mem, FE_MEM_SIZE);
	close(fe->memfd);
}

static uint64_t uva(struct fe *fe, const void *host)
{
	(void)fe;
	return (uint64_t)(uintptr_t)host;
}

static struct vs_vhost_mem_region region(struct fe *fe, uint64_t gpa, uint64_t size)
{
	return (struct vs_vhost_mem_region){.guest_phys_addr = gpa,
					    .memory_size = size,
					    .userspace_addr = uva(fe, fe->mem + gpa),
					    .mmap_offset = gpa};
}

static int ring_setup(struct fe *fe, unsigned q)
{
	struct vs_vq_drv *vq = &fe->vq[q];
	bool event_idx = fe->features & VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX);
	bool indirect = fe->features & VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC);
	int rc;

	if ((rc = vs_vq_drv_init(vq, FE_QSIZE, fe_host(fe, RING_GPA(q)), event_idx, indirect)))
		return rc;
	vq->qid = q;
	fe->kick[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fe->call[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fe->err[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fe->kick[q] < 0 || fe->call[q] < 0 || fe->err[q] < 0)
		return -errno;
	if ((rc = vs_vhost_drv_set_vring_num(&fe->f, q, FE_QSIZE)) ||
	    (rc = vs_vhost_drv_set_vring_base(&fe->f, q, 0)) ||
	    (rc = vs_vhost_drv_set_vring_addr(&fe->f, q, uva(fe, vq->desc), uva(fe, vq->avail),
					      uva(fe, vq->used))) ||
	    (rc = vs_vhost_drv_set_vring_call(&fe->f, q, fe->call[q])) ||
	    (rc = vs_vhost_drv_set_vring_err(&fe->f, q, fe->err[q])) ||
	    (rc = vs_vhost_drv_set_vring_kick(&fe->f, q, fe->kick[q])))
		return rc;
	return 0;
}

int fe_connect(struct fe *fe, const char *sock)
{
	const uint64_t want =
	    VS_VIRTIO_BIT(VS_VIRTIO_F_VERSION_1) | VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC) |
	    VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX) | VS_VIRTIO_BIT(VS_VIRTIO_SCSI_F_HOTPLUG) |
	    (1ull << VS_VHOST_F_PROTOCOL_FEATURES);
	struct vs_vhost_mem_region r[2] = {region(fe, 0, FE_GAP_START),
					   region(fe, FE_GAP_END, FE_MEM_SIZE - FE_GAP_END)};
	int fds[2] = {fe->memfd, fe->memfd};
	struct timeval tv = {WAIT_MS / 1000, 0};
	uint64_t offered, proto, nq;
	int rc;

	if ((rc = vs_vhost_drv_connect(&fe->f, sock)))
		return rc;
	fe->connected = true;
	/* A target that never answers fails the call, not the test run. */
	if (setsockopt(fe->f.sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	if ((rc = vs_vhost_drv_get_features(&fe->f, &offered)) ||
	    (rc = vs_vhost_drv_get_protocol_features(&fe->f, &proto)) ||
	    (rc = vs_vhost_drv_set_protocol_features(
		 &fe->f, proto & ((1ull << VS_VHOST_PROTOCOL_F_MQ) |
				  (1ull << VS_VHOST_PROTOCOL_F_REPLY_ACK)))) ||
	    (rc = vs_vhost_drv_get_queue_num(&fe->f, &nq)))
		return rc;
	if (nq < FE_NQ)
		return -ENOTSUP;
	fe->features = offered & want;
	if ((rc = vs_vhost_drv_set_owner(&fe->f)) ||
	    (rc = vs_vhost_drv_set_features(&fe->f, fe->features)) ||
	    (rc = vs_vhost_drv_set_mem_table(&fe->f, r, 2, fds)))
		return rc;
	for (unsigned q = 0; q < FE_NQ; q++)
		if ((rc = ring_setup(fe, q)))
			return rc;
	for (unsigned q = 0; q < FE_NQ; q++)
		if ((rc = vs_vhost_drv_set_vring_enable(&fe->f, q, true)))
			return rc;
	return 0;
}

void fe_disconnect(struct fe *fe)
{
	if (!fe->connected)
		return;
	vs_vhost_drv_close(&fe->f);
	for (unsigned q = 0; q < FE_NQ; q++) {
		vs_vq_drv_destroy(&fe->vq[q]);
		if (fe->kick[q] >= 0)
			close(fe->kick[q]);
		if (fe->call[q] >= 0)
			close(fe->call[q]);
		if (fe->err[q] >= 0)
			close(fe->err[q]);
		fe->kick[q] = fe->call[q] = fe->err[q] = -1;
	}
	fe->connected = false;
}

int fe_wait_used(struct fe *fe, unsigned q, uint16_t *head, uint32_t *len)
{
	struct vs_vq_drv *vq = &fe->vq[q];
	int rc;

	for (;;) {
		struct pollfd p = {.fd = fe->call[q], .events = POLLIN};
		uint64_t v;

		rc = vs_vq_drv_get_used(vq, head, len);
		if (rc != -EAGAIN)
			return rc;
		vs_vq_drv_enable_cb(vq, true);
		if (vs_vq_drv_has_used(vq))
			continue;
		rc = poll(&p, 1, WAIT_MS);
		if (rc == 0)
			return -ETIMEDOUT; /* the device completed nothing, or never signalled */
		if (rc < 0)
			return -errno;
		if (read(fe->call[q], &v, sizeof(v)) < 0)
			return -errno;
	}
}

int fe_post(struct fe *fe, unsigned q, const struct vs_vq_buf *bufs, unsigned n, uint16_t *head)
{
	struct vs_vq_drv *vq = &fe->vq[q];
	uint64_t one = 1;
	int rc;

	if (fe->indirect)
		rc = vs_vq_drv_add_indirect(vq, bufs, n, fe_host(fe, FE_TABLE), FE_TABLE, head);
	else
		rc = vs_vq_drv_add(vq, bufs, n, head);
	if (rc)
		return rc;
	if (fe->no_kick || !vs_vq_drv_should_kick(vq))
		return 0;
	fe->kicks[q]++;
	if (write(fe->kick[q], &one, sizeof(one)) != sizeof(one))
		return -errno;
	return 0;
}

int fe_run_chain(struct fe *fe, unsigned q, const struct vs_vq_buf *bufs, unsigned n,
		 uint32_t *used_len)
{
	uint16_t head, h;
	int rc;

	if ((rc = fe_post(fe, q, bufs, n, &head)) || (rc = fe_wait_used(fe, q, &h, used_len)))
		return rc;
	return h == head ? 0 : -EPROTO;
}

int fe_scsi(struct fe *fe, unsigned q, struct fe_cmd *c)
{
	const uint64_t hdr = FE_SLOT, resp = FE_SLOT + 0x100, out = FE_SLOT + 0x1000,
		       in = out + FE_DATA_MAX;
	struct vs_virtio_scsi_cmd_req req;
	struct vs_vq_buf bufs[4];
	unsigned n = 0;
	int rc;

	if (c->out_len > FE_DATA_MAX || c->in_len > FE_DATA_MAX || c->cdb_len > sizeof(req.cdb))
		return -EINVAL;
	memset(&req, 0, sizeof(req));
	if ((rc = vs_vscsi_lun_encode(req.lun, c->target, c->lun)))
		return rc;
	req.tag = vs_le64(c->tag);
	memcpy(req.cdb, c->cdb, c->cdb_len);
	memcpy(fe_host(fe, hdr), &req, sizeof(req));
	memset(fe_host(fe, resp), 0xee, sizeof(c->resp)); /* catch fields left unwritten */
	bufs[n++] = (struct vs_vq_buf){hdr, sizeof(req), false};
	if (c->out_len) {
		memcpy(fe_host(fe, out), c->out, c->out_len);
		bufs[n++] = (struct vs_vq_buf){out, c->out_len, false};
	}
	bufs[n++] = (struct vs_vq_buf){resp, sizeof(c->resp), true};
	if (c->in_len) {
		memset(fe_host(fe, in), 0, c->in_len);
		bufs[n++] = (struct vs_vq_buf){in, c->in_len, true};
	}
	if ((rc = fe_run_chain(fe, q, bufs, n, &c->used_len)))
		return rc;
	memcpy(&c->resp, fe_host(fe, resp), sizeof(c->resp));
	if (c->in_len)
		memcpy(c->in, fe_host(fe, in), c->in_len);
	return 0;
}

int fe_tmf(struct fe *fe, uint32_t subtype, unsigned target, unsigned lun, uint64_t tag,
	   uint8_t *response)
{
	const uint64_t reqa = FE_SLOT + 0x800, respa = FE_SLOT + 0x900;
	struct vs_virtio_scsi_ctrl_tmf_req req = {.type = vs_le32(VS_VIRTIO_SCSI_T_TMF),
						  .subtype = vs_le32(subtype),
						  .tag = vs_le64(tag)};
	struct vs_vq_buf bufs[2] = {{reqa, sizeof(req), false}, {respa, 1, true}};
	uint32_t len;
	int rc;

	if ((rc = vs_vscsi_lun_encode(req.lun, target, lun)))
		return rc;
	memcpy(fe_host(fe, reqa), &req, sizeof(req));
	*(uint8_t *)fe_host(fe, respa) = 0xee;
	if ((rc = fe_run_chain(fe, VS_VIRTIO_SCSI_VQ_CTRL, bufs, 2, &len)))
		return rc;
	if (len != 1)
		return -EPROTO;
	*response = *(uint8_t *)fe_host(fe, respa);
	return 0;
}

void cdb_rw10(uint8_t cdb[10], uint8_t op, uint32_t lba, uint16_t blocks)
{
	memset(cdb, 0, 10);
	cdb[0] = op;
	cdb[2] = (uint8_t)(lba >> 24);
	cdb[3] = (uint8_t)(lba >> 16);
	cdb[4] = (uint8_t)(lba >> 8);
	cdb[5] = (uint8_t)lba;
	cdb[7] = (uint8_t)(blocks >> 8);
	cdb[8] = (uint8_t)blocks;
}

int fx_setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));

	if (!x || tgt_start(&x->g, 2) || fe_init(&x->fe) || fe_connect(&x->fe, x->g.sock)) {
		fprintf(stderr, "fixture set-up failed\n");
		return -1;
	}
	*state = x;
	return 0;
}

int fx_setup_with(void **state, const char *lun0_opts)
{
	struct fx *x = calloc(1, sizeof(*x));

	if (!x || tgt_start_opts(&x->g, 2, false, lun0_opts) || fe_init(&x->fe) ||
	    fe_connect(&x->fe, x->g.sock)) {
		fprintf(stderr, "fixture set-up failed\n");
		return -1;
	}
	*state = x;
	return 0;
}

int fx_teardown(void **state)
{
	struct fx *x = *state;

	fe_fini(&x->fe);
	tgt_stop(&x->g);
	free(x);
	return 0;
}

/* True when thread tid is a request worker that is not blocked in epoll_wait. */
static bool worker_awake(const char *tid)
{
	char path[320], comm[32] = "", wchan[64] = "";
	snprintf(path, sizeof path, "/proc/self/task/%s/comm", tid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false; /* exited */
	if (!fgets(comm, sizeof comm, f))
		comm[0] = '\0';
	fclose(f);
	if (strncmp(comm, "vs-worker-", 10))
		return false;
	snprintf(path, sizeof path, "/proc/self/task/%s/wchan", tid);
	if (!(f = fopen(path, "r")))
		return false;
	if (!fgets(wchan, sizeof wchan, f))
		wchan[0] = '\0';
	fclose(f);
	return strcmp(wchan, "do_epoll_wait") && strcmp(wchan, "ep_poll");
}

int fe_wait_workers_asleep(unsigned timeout_ms)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	uint64_t deadline = (uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000 + timeout_ms;
	for (;;) {
		DIR *d = opendir("/proc/self/task");
		struct dirent *e;
		bool awake = false;
		if (!d)
			return -errno;
		while ((e = readdir(d)) && !awake)
			if (e->d_name[0] != '.')
				awake = worker_awake(e->d_name);
		closedir(d);
		if (!awake)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000 >= deadline)
			return -ETIMEDOUT;
		poll(NULL, 0, 1); /* polling a condition, with the deadline above */
	}
}

int resp_sense_key(const struct vs_virtio_scsi_cmd_resp *r)
{
	return vs_le32(r->sense_len) >= 3 ? r->sense[2] & 0x0f : -1;
}

int resp_asc(const struct vs_virtio_scsi_cmd_resp *r)
{
	return vs_le32(r->sense_len) >= 14 ? r->sense[12] : -1;
}
