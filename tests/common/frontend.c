/* SPDX-License-Identifier: MIT */
/* The tests' vhost-user frontend: see frontend.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "deadline.h"
#include "frontend.h"
#include "thread_wait.h"

/* ---- guest memory ------------------------------------------------------------------------ */
int gmem_init(struct gmem *g)
{
	g->mem = NULL;
	g->fd = memfd_create("test-guest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (g->fd < 0 || ftruncate(g->fd, (off_t)FE_MEM) < 0)
		return -errno;
	g->mem = mmap(NULL, FE_MEM, PROT_READ | PROT_WRITE, MAP_SHARED, g->fd, 0);
	return g->mem == MAP_FAILED ? -errno : 0;
}

void gmem_fini(struct gmem *g)
{
	if (g->mem && g->mem != MAP_FAILED)
		munmap(g->mem, FE_MEM);
	if (g->fd >= 0)
		close(g->fd);
	g->mem = NULL;
	g->fd = -1;
}

void gmem_regions(struct gmem *g, struct vs_vhost_mem_region r[2])
{
	r[0] = (struct vs_vhost_mem_region){.guest_phys_addr = 0,
					    .memory_size = FE_GAP_START,
					    .userspace_addr = (uint64_t)(uintptr_t)g->mem,
					    .mmap_offset = 0};
	r[1] = (struct vs_vhost_mem_region){.guest_phys_addr = FE_GAP_END,
					    .memory_size = FE_MEM - FE_GAP_END,
					    .userspace_addr =
						(uint64_t)(uintptr_t)(g->mem + FE_GAP_END),
					    .mmap_offset = FE_GAP_END};
}

/* ---- the frontend ------------------------------------------------------------------------ */
void fe_clear(struct fe *fe)
{
	memset(fe, 0, sizeof(*fe));
	fe->drv.sock = -1;
	for (unsigned q = 0; q < FE_MAXQ; q++)
		fe->kick[q] = fe->call[q] = fe->err[q] = -1;
}

int fe_connect(struct fe *fe, const char *sock, struct gmem *g)
{
	struct timeval tv = {.tv_sec = FE_WAIT_MS / 1000};
	int rc;

	fe_clear(fe);
	fe->g = g;
	if ((rc = vs_vhost_drv_connect(&fe->drv, sock)))
		return rc;
	/* Every reply wait has a deadline: a target that never answers fails the call. */
	setsockopt(fe->drv.sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fe->drv.sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return 0;
}

static uint64_t uva(const void *host)
{
	return (uint64_t)(uintptr_t)host;
}

static int ring_setup(struct fe *fe, unsigned q, unsigned size, bool err_fd)
{
	struct vs_vq_drv *vq = &fe->vq[q];
	bool event_idx = fe->features & VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX);
	bool indirect = fe->features & VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC);
	int rc;

	if (vs_vq_drv_ring_bytes(size) > 0x100000)
		return -EINVAL;
	if ((rc = vs_vq_drv_init(vq, size, gmem_host(fe->g, FE_RING(q)), event_idx, indirect)))
		return rc;
	vq->qid = q;
	fe->qsize[q] = size;
	fe->nq = q + 1;
	fe->kick[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fe->call[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (err_fd)
		fe->err[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (fe->kick[q] < 0 || fe->call[q] < 0 || (err_fd && fe->err[q] < 0))
		return -errno;
	if ((rc = vs_vhost_drv_set_vring_num(&fe->drv, q, size)) ||
	    (rc = vs_vhost_drv_set_vring_base(&fe->drv, q, 0)) ||
	    (rc = vs_vhost_drv_set_vring_addr(&fe->drv, q, uva(vq->desc), uva(vq->avail),
					      uva(vq->used))) ||
	    (rc = vs_vhost_drv_set_vring_call(&fe->drv, q, fe->call[q])) ||
	    (err_fd && (rc = vs_vhost_drv_set_vring_err(&fe->drv, q, fe->err[q]))) ||
	    (rc = vs_vhost_drv_set_vring_kick(&fe->drv, q, fe->kick[q])))
		return rc;
	return 0;
}

int fe_setup(struct fe *fe, const struct fe_opts *o)
{
	uint64_t want = VS_VIRTIO_BIT(VS_VIRTIO_F_VERSION_1) |
			VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX) |
			(1ull << VS_VHOST_F_PROTOCOL_FEATURES);
	struct vs_vhost_mem_region r[2];
	int fds[2] = {fe->g->fd, fe->g->fd};
	uint64_t offered, proto, nq;
	int rc;

	if (!o->no_indirect)
		want |= VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC);
	if (o->hotplug)
		want |= VS_VIRTIO_BIT(VS_VIRTIO_SCSI_F_HOTPLUG);
	gmem_regions(fe->g, r);
	if ((rc = vs_vhost_drv_get_features(&fe->drv, &offered)) ||
	    (rc = vs_vhost_drv_get_protocol_features(&fe->drv, &proto)) ||
	    (rc = vs_vhost_drv_set_protocol_features(
		 &fe->drv, proto & ((1ull << VS_VHOST_PROTOCOL_F_MQ) |
				    (1ull << VS_VHOST_PROTOCOL_F_REPLY_ACK) |
				    (o->log_shmfd ? 1ull << VS_VHOST_PROTOCOL_F_LOG_SHMFD : 0)))) ||
	    (rc = vs_vhost_drv_get_queue_num(&fe->drv, &nq)))
		return rc;
	if (nq < o->nq || o->nq > FE_MAXQ)
		return -ENOTSUP;
	fe->features = offered & want;
	fe->indirect = (fe->features & VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC)) && !o->direct;
	if ((rc = vs_vhost_drv_set_owner(&fe->drv)) ||
	    (rc = vs_vhost_drv_set_features(&fe->drv, fe->features)) ||
	    (rc = vs_vhost_drv_set_mem_table(&fe->drv, r, 2, fds)))
		return rc;
	if (o->no_rings)
		return 0;
	for (unsigned q = 0; q < o->nq; q++)
		if ((rc = ring_setup(fe, q, o->qsize[q] ? o->qsize[q] : 128, o->err_fds)))
			return rc;
	for (unsigned q = 0; q < o->nq; q++)
		if ((rc = vs_vhost_drv_set_vring_enable(&fe->drv, q, true)))
			return rc;
	return 0;
}

int fe_open(struct fe *fe, const char *sock, struct gmem *g, const struct fe_opts *o)
{
	int rc = fe_connect(fe, sock, g);

	return rc ? rc : fe_setup(fe, o);
}

void fe_close(struct fe *fe)
{
	if (fe->drv.sock >= 0)
		vs_vhost_drv_close(&fe->drv);
	fe->drv.sock = -1;
	for (unsigned q = 0; q < FE_MAXQ; q++) {
		if (q < fe->nq)
			vs_vq_drv_destroy(&fe->vq[q]);
		if (fe->kick[q] >= 0)
			close(fe->kick[q]);
		if (fe->call[q] >= 0)
			close(fe->call[q]);
		if (fe->err[q] >= 0)
			close(fe->err[q]);
		fe->kick[q] = fe->call[q] = fe->err[q] = -1;
	}
	fe->nq = 0;
}

int fe_send(struct fe *fe, uint32_t request, uint32_t flags, const void *payload, uint32_t size,
	    const int *fds, unsigned nfds)
{
	uint8_t buf[VS_VHOST_HDR_SIZE + 512];
	union {
		char buf[CMSG_SPACE(sizeof(int) * 16)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = VS_VHOST_HDR_SIZE + size};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	uint32_t fl = VS_VHOST_VERSION | flags;

	if (size > 512 || nfds > 16)
		return -EINVAL;
	memcpy(buf, &request, 4);
	memcpy(buf + 4, &fl, 4);
	memcpy(buf + 8, &size, 4);
	if (size)
		memcpy(buf + VS_VHOST_HDR_SIZE, payload, size);
	if (nfds) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	return sendmsg(fe->drv.sock, &mh, MSG_NOSIGNAL) == (ssize_t)iov.iov_len ? 0 : -errno;
}

int fe_reply(struct fe *fe, struct vs_vhost_msg *reply)
{
	char why[VS_VHOST_WHY_LEN];

	return vs_vhost_msg_recv_reply(fe->drv.sock, reply, why, sizeof(why));
}

int64_t fe_ask(struct fe *fe, uint32_t request, const void *payload, uint32_t size, const int *fds,
	       unsigned nfds)
{
	struct vs_vhost_msg reply;
	int rc = fe_send(fe, request, VS_VHOST_FLAG_NEED_REPLY, payload, size, fds, nfds);

	if (rc || (rc = fe_reply(fe, &reply)))
		return rc;
	if (reply.request != request || reply.size != 8)
		return -EPROTO;
	return (int64_t)reply.payload.u64;
}

bool fe_dropped(struct fe *fe, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	uint8_t buf[4096];

	for (;;) {
		int left = ms_left(deadline);
		struct pollfd pf = {.fd = fe->drv.sock, .events = POLLIN};

		if (left <= 0 || poll(&pf, 1, left) <= 0)
			return false;
		ssize_t n = recv(fe->drv.sock, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return true;
		/* a reply still on its way: skip it */
	}
}

/* ---- chains -------------------------------------------------------------------------------- */
static int kick(struct fe *fe, unsigned q)
{
	uint64_t one = 1;

	if (fe->no_kick || !vs_vq_drv_should_kick(&fe->vq[q]))
		return 0;
	fe->kicks[q]++;
	return write(fe->kick[q], &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
}

/* bufs as a direct chain, or in the indirect table at table_gpa when indirect. */
static int add_chain(struct fe *fe, unsigned q, const struct vs_vq_buf *bufs, unsigned n,
		     bool indirect, uint64_t table_gpa, uint16_t *head)
{
	struct vs_vq_drv *vq = &fe->vq[q];
	int rc = indirect ? vs_vq_drv_add_indirect(vq, bufs, n, gmem_host(fe->g, table_gpa),
						   table_gpa, head)
			  : vs_vq_drv_add(vq, bufs, n, head);

	return rc ? rc : kick(fe, q);
}

int fe_post_chain(struct fe *fe, unsigned q, const struct vs_vq_buf *bufs, unsigned n,
		  uint16_t *head)
{
	return add_chain(fe, q, bufs, n, fe->indirect, FE_CHAIN_TABLE, head);
}

int fe_wait_used(struct fe *fe, unsigned q, uint16_t *head, uint32_t *len, int timeout_ms)
{
	struct vs_vq_drv *vq = &fe->vq[q];
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	int rc;

	for (;;) {
		struct pollfd p = {.fd = fe->call[q], .events = POLLIN};
		int left = ms_left(deadline);
		uint64_t v;

		rc = vs_vq_drv_get_used(vq, head, len);
		if (rc != -EAGAIN)
			return rc;
		vs_vq_drv_enable_cb(vq, true);
		if (vs_vq_drv_has_used(vq))
			continue;
		if (left <= 0)
			return -ETIMEDOUT;
		if (p.fd < 0) {
			poll(NULL, 0, left < 5 ? left : 5); /* no call fd: poll the ring */
			continue;
		}
		rc = poll(&p, 1, left);
		if (rc == 0)
			return -ETIMEDOUT; /* nothing completed, or no interrupt came */
		if (rc < 0)
			return -errno;
		if (read(fe->call[q], &v, sizeof(v)) < 0 && errno != EAGAIN)
			return -errno;
	}
}

int fe_run_chain(struct fe *fe, unsigned q, const struct vs_vq_buf *bufs, unsigned n,
		 uint32_t *used_len)
{
	uint16_t head, h;
	int rc;

	if ((rc = fe_post_chain(fe, q, bufs, n, &head)) ||
	    (rc = fe_wait_used(fe, q, &h, used_len, FE_WAIT_MS)))
		return rc;
	return h == head ? 0 : -EPROTO;
}

/* ---- SCSI commands ------------------------------------------------------------------------- */
int fe_post(struct fe *fe, unsigned q, unsigned s, const struct fe_cmd *c, uint16_t *head)
{
	const uint64_t base = FE_SLOT(s);
	struct vs_virtio_scsi_cmd_req req;
	struct vs_vq_buf bufs[4];
	unsigned n = 0;
	int rc;

	if (s >= FE_SLOTS || (!c->in_gpa && c->in_len > FE_DATA_MAX) ||
	    (!c->out_gpa && c->out_len > FE_DATA_MAX))
		return -EINVAL;
	memset(&req, 0, sizeof(req));
	if ((rc = vs_vscsi_lun_encode(req.lun, c->target, c->lun)))
		return rc;
	req.tag = vs_le64(c->tag);
	memcpy(req.cdb, c->cdb, sizeof(req.cdb));
	memcpy(gmem_host(fe->g, base), &req, sizeof(req));
	/* fields the device leaves unwritten show */
	memset(gmem_host(fe->g, base + FE_SLOT_RESP), 0xee, sizeof(struct vs_virtio_scsi_cmd_resp));
	bufs[n++] = (struct vs_vq_buf){base, sizeof(req), false};
	if (c->out_len) {
		uint64_t at = c->out_gpa ? c->out_gpa : base + FE_SLOT_DATA;
		if (!c->out_gpa && c->out)
			memcpy(gmem_host(fe->g, at), c->out, c->out_len);
		bufs[n++] = (struct vs_vq_buf){at, c->out_len, false};
	}
	bufs[n++] =
	    (struct vs_vq_buf){base + FE_SLOT_RESP, sizeof(struct vs_virtio_scsi_cmd_resp), true};
	if (c->in_len) {
		if (!c->in_gpa && c->in)
			memset(gmem_host(fe->g, base + FE_SLOT_DATA), 0, c->in_len);
		bufs[n++] = (struct vs_vq_buf){c->in_gpa ? c->in_gpa : base + FE_SLOT_DATA,
					       c->in_len, true};
	}
	return add_chain(fe, q, bufs, n, fe->indirect, base + FE_SLOT_TABLE, head);
}

void fe_result(struct fe *fe, unsigned s, struct fe_cmd *c)
{
	memcpy(&c->resp, gmem_host(fe->g, FE_SLOT(s) + FE_SLOT_RESP), sizeof(c->resp));
	if (c->in && c->in_len && !c->in_gpa)
		memcpy(c->in, fe_slot_in(fe, s), c->in_len);
}

void *fe_slot_in(struct fe *fe, unsigned s)
{
	return gmem_host(fe->g, FE_SLOT(s) + FE_SLOT_DATA);
}

int fe_scsi(struct fe *fe, unsigned q, struct fe_cmd *c)
{
	uint16_t head, h;
	int rc;

	if ((rc = fe_post(fe, q, 0, c, &head)) ||
	    (rc = fe_wait_used(fe, q, &h, &c->used_len, FE_WAIT_MS)))
		return rc;
	if (h != head)
		return -EPROTO;
	fe_result(fe, 0, c);
	return 0;
}

int fe_tmf(struct fe *fe, uint32_t subtype, unsigned target, unsigned lun, uint64_t tag,
	   uint8_t *response)
{
	const uint64_t base = FE_SLOT(FE_SLOTS - 1);
	struct vs_virtio_scsi_ctrl_tmf_req req = {.type = vs_le32(VS_VIRTIO_SCSI_T_TMF),
						  .subtype = vs_le32(subtype),
						  .tag = vs_le64(tag)};
	struct vs_vq_buf bufs[2] = {
	    {base, sizeof(req), false},
	    {base + FE_SLOT_RESP, sizeof(struct vs_virtio_scsi_ctrl_tmf_resp), true}};
	uint16_t head, h;
	uint32_t len;
	int rc;

	if ((rc = vs_vscsi_lun_encode(req.lun, target, lun)))
		return rc;
	memcpy(gmem_host(fe->g, base), &req, sizeof(req));
	*(uint8_t *)gmem_host(fe->g, base + FE_SLOT_RESP) = 0xee;
	if ((rc = add_chain(fe, VS_VIRTIO_SCSI_VQ_CTRL, bufs, 2, false, 0, &head)) ||
	    (rc = fe_wait_used(fe, VS_VIRTIO_SCSI_VQ_CTRL, &h, &len, FE_WAIT_MS)))
		return rc;
	if (h != head || len != 1)
		return -EPROTO;
	*response = *(uint8_t *)gmem_host(fe->g, base + FE_SLOT_RESP);
	return 0;
}

int fe_read_ok(struct fe *fe, unsigned q, uint32_t lba)
{
	struct fe_cmd c = {.in_len = 512};
	int rc;

	cdb10(c.cdb, 0x28, 0, lba, 1);
	if ((rc = fe_scsi(fe, q, &c)))
		return rc;
	return c.resp.response == VS_VIRTIO_SCSI_S_OK && c.resp.status == 0 ? 0 : -EIO;
}

/* ---- sense and CDBs ------------------------------------------------------------------------ */
/* Byte i of the fixed-format sense data, -1 when the target sent fewer. */
static int sense_byte(const struct vs_virtio_scsi_cmd_resp *r, unsigned i)
{
	return vs_le32(r->sense_len) > i ? r->sense[i] : -1;
}

int sense_key(const struct vs_virtio_scsi_cmd_resp *r)
{
	int b = sense_byte(r, 2);
	return b < 0 ? b : b & 0x0f;
}

int sense_asc(const struct vs_virtio_scsi_cmd_resp *r)
{
	return sense_byte(r, 12);
}

int sense_ascq(const struct vs_virtio_scsi_cmd_resp *r)
{
	return sense_byte(r, 13);
}

int sense_field(const struct vs_virtio_scsi_cmd_resp *r)
{
	if (vs_le32(r->sense_len) < 18 || !(r->sense[15] & 0x80))
		return -1;
	return r->sense[16] << 8 | r->sense[17];
}

static void put_be(uint8_t *p, uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
}

void cdb16(uint8_t *cdb, uint8_t op, uint8_t b1, uint64_t lba, uint32_t n)
{
	memset(cdb, 0, 16);
	cdb[0] = op;
	cdb[1] = b1;
	put_be(cdb + 2, lba, 8);
	put_be(cdb + 10, n, 4);
}

void cdb10(uint8_t *cdb, uint8_t op, uint8_t b1, uint32_t lba, uint16_t n)
{
	memset(cdb, 0, 10);
	cdb[0] = op;
	cdb[1] = b1;
	put_be(cdb + 2, lba, 4);
	put_be(cdb + 7, n, 2);
}

int fe_wait_workers_asleep(unsigned timeout_ms)
{
	static const char *const epoll[] = {"do_epoll_wait", "ep_poll", NULL};

	return threads_wait_asleep_in(0, "vs-worker-", epoll, timeout_ms) ? 0 : -ETIMEDOUT;
}
