/* SPDX-License-Identifier: MIT */
/*
 * vhost-user driver side: one blocking call per request.  Set-type requests carry
 * NEED_REPLY once REPLY_ACK is negotiated, so an error surfaces at the call that caused it.
 */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "util/util.h"
#include "vhost/vhost_drv.h"
#include "vhost/vhost_msg.h"

static void msg_init(struct vs_vhost_msg *m, uint32_t request, uint32_t size)
{
	memset(m, 0, sizeof(*m));
	m->request = request;
	m->flags = VS_VHOST_VERSION;
	m->size = size;
	for (unsigned i = 0; i < VS_VHOST_MAX_FDS; i++)
		m->fds[i] = -1;
}

static bool reply_ack(const struct vs_vhost_drv *f)
{
	return f->protocol_features & (1ull << VS_VHOST_PROTOCOL_F_REPLY_ACK);
}

static int recv_reply(struct vs_vhost_drv *f, uint32_t request, uint32_t size,
		      struct vs_vhost_msg *reply)
{
	char why[VS_VHOST_WHY_LEN] = "";
	int rc = vs_vhost_msg_recv_reply(f->sock, reply, why, sizeof(why));

	if (rc) {
		VS_ERROR(VHOST, "driver: no reply to %u{vhost_msg}: %s (%d)", request, why, rc);
		return rc;
	}
	if (reply->request != request || reply->size != size) {
		VS_ERROR(VHOST,
			 "driver: reply %u{vhost_msg} size %u to %u{vhost_msg}, expected size %u",
			 reply->request, reply->size, request, size);
		return -EPROTO;
	}
	return 0;
}

static int send_msg(struct vs_vhost_drv *f, const struct vs_vhost_msg *m)
{
	int rc;

	VS_VERBOSE(VHOST, "driver: msg %u{vhost_msg} size %u", m->request, m->size);
	if ((rc = vs_vhost_msg_send(f->sock, m)))
		VS_ERROR(VHOST, "driver: sending %u{vhost_msg} failed: %s", m->request,
			 strerror(-rc));
	return rc;
}

/* Send a request without a reply body; wait for the ack if REPLY_ACK is on. */
static int request(struct vs_vhost_drv *f, struct vs_vhost_msg *m)
{
	struct vs_vhost_msg reply;
	bool ack = reply_ack(f);
	int rc;

	if (ack)
		m->flags |= VS_VHOST_FLAG_NEED_REPLY;
	if ((rc = send_msg(f, m)))
		return rc;
	if (!ack)
		return 0;
	if ((rc = recv_reply(f, m->request, sizeof(uint64_t), &reply)))
		return rc;
	if (reply.payload.u64) {
		VS_ERROR(VHOST, "driver: device failed %u{vhost_msg} (status %llu)", m->request,
			 (unsigned long long)reply.payload.u64);
		return -EIO;
	}
	return 0;
}

/* Send a request that always has a reply body of `size` bytes. */
static int query(struct vs_vhost_drv *f, struct vs_vhost_msg *m, uint32_t size,
		 struct vs_vhost_msg *reply)
{
	int rc = send_msg(f, m);

	return rc ? rc : recv_reply(f, m->request, size, reply);
}

static int get_u64(struct vs_vhost_drv *f, uint32_t req, uint64_t *v)
{
	struct vs_vhost_msg m, reply;
	int rc;

	msg_init(&m, req, 0);
	if ((rc = query(f, &m, sizeof(uint64_t), &reply)))
		return rc;
	*v = reply.payload.u64;
	return 0;
}

static int set_u64(struct vs_vhost_drv *f, uint32_t req, uint64_t v)
{
	struct vs_vhost_msg m;

	msg_init(&m, req, sizeof(uint64_t));
	m.payload.u64 = v;
	return request(f, &m);
}

static int set_state(struct vs_vhost_drv *f, uint32_t req, unsigned idx, unsigned num)
{
	struct vs_vhost_msg m;

	msg_init(&m, req, sizeof(m.payload.state));
	m.payload.state.index = idx;
	m.payload.state.num = num;
	return request(f, &m);
}

int vs_vhost_drv_connect(struct vs_vhost_drv *f, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int rc;

	f->sock = -1;
	f->protocol_features = 0;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	f->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (f->sock < 0)
		return -errno;
	if (connect(f->sock, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		VS_ERROR(VHOST, "driver: connect %s: %s", path, strerror(errno));
		close(f->sock);
		f->sock = -1;
		return rc;
	}
	VS_INFO(VHOST, "driver: connected to %s", path);
	return 0;
}

void vs_vhost_drv_close(struct vs_vhost_drv *f)
{
	if (f->sock >= 0)
		close(f->sock);
	f->sock = -1;
}

int vs_vhost_drv_get_features(struct vs_vhost_drv *f, uint64_t *features)
{
	return get_u64(f, VS_VHOST_GET_FEATURES, features);
}

int vs_vhost_drv_set_features(struct vs_vhost_drv *f, uint64_t features)
{
	return set_u64(f, VS_VHOST_SET_FEATURES, features);
}

int vs_vhost_drv_get_protocol_features(struct vs_vhost_drv *f, uint64_t *features)
{
	return get_u64(f, VS_VHOST_GET_PROTOCOL_FEATURES, features);
}

int vs_vhost_drv_set_protocol_features(struct vs_vhost_drv *f, uint64_t features)
{
	/* The ack for this very message is not yet due: record after sending. */
	int rc = set_u64(f, VS_VHOST_SET_PROTOCOL_FEATURES, features);
	if (!rc)
		f->protocol_features = features;
	return rc;
}

int vs_vhost_drv_set_owner(struct vs_vhost_drv *f)
{
	struct vs_vhost_msg m;

	msg_init(&m, VS_VHOST_SET_OWNER, 0);
	return request(f, &m);
}

int vs_vhost_drv_get_queue_num(struct vs_vhost_drv *f, uint64_t *num)
{
	return get_u64(f, VS_VHOST_GET_QUEUE_NUM, num);
}

int vs_vhost_drv_set_mem_table(struct vs_vhost_drv *f, const struct vs_vhost_mem_region *regions,
			       unsigned nregions, const int *fds)
{
	struct vs_vhost_msg m;

	if (nregions > VS_VHOST_MAX_REGIONS)
		return -EINVAL;
	msg_init(&m, VS_VHOST_SET_MEM_TABLE,
		 8 + nregions * (uint32_t)sizeof(struct vs_vhost_mem_region));
	m.payload.memory.nregions = nregions;
	memcpy(m.payload.memory.regions, regions, nregions * sizeof(*regions));
	memcpy(m.fds, fds, nregions * sizeof(int));
	m.nfds = nregions;
	return request(f, &m);
}

int vs_vhost_drv_set_vring_num(struct vs_vhost_drv *f, unsigned idx, unsigned num)
{
	return set_state(f, VS_VHOST_SET_VRING_NUM, idx, num);
}

int vs_vhost_drv_set_vring_addr(struct vs_vhost_drv *f, unsigned idx, uint64_t desc, uint64_t avail,
				uint64_t used)
{
	return vs_vhost_drv_set_vring_addr_log(f, idx, desc, avail, used, VS_LOG_NONE);
}

int vs_vhost_drv_set_vring_addr_log(struct vs_vhost_drv *f, unsigned idx, uint64_t desc,
				    uint64_t avail, uint64_t used, uint64_t used_gpa)
{
	struct vs_vhost_msg m;

	msg_init(&m, VS_VHOST_SET_VRING_ADDR, sizeof(m.payload.addr));
	m.payload.addr.index = idx;
	m.payload.addr.desc_user_addr = desc;
	m.payload.addr.avail_user_addr = avail;
	m.payload.addr.used_user_addr = used;
	if (used_gpa != VS_LOG_NONE) {
		m.payload.addr.flags = VS_VHOST_VRING_F_LOG;
		m.payload.addr.log_guest_addr = used_gpa;
	}
	return request(f, &m);
}

int vs_vhost_drv_set_log_base(struct vs_vhost_drv *f, int fd, uint64_t size)
{
	struct vs_vhost_msg m, reply;
	int rc;

	msg_init(&m, VS_VHOST_SET_LOG_BASE, sizeof(m.payload.log));
	m.payload.log.mmap_size = size;
	m.fds[0] = fd;
	m.nfds = 1;
	if ((rc = send_msg(f, &m)))
		return rc;
	/* Always answered, empty, once the log is mapped (as QEMU expects). */
	return recv_reply(f, VS_VHOST_SET_LOG_BASE, 0, &reply);
}

int vs_vhost_drv_set_vring_base(struct vs_vhost_drv *f, unsigned idx, uint16_t base)
{
	return set_state(f, VS_VHOST_SET_VRING_BASE, idx, base);
}

int vs_vhost_drv_get_vring_base(struct vs_vhost_drv *f, unsigned idx, uint16_t *base)
{
	struct vs_vhost_msg m, reply;
	int rc;

	msg_init(&m, VS_VHOST_GET_VRING_BASE, sizeof(m.payload.state));
	m.payload.state.index = idx;
	if ((rc = query(f, &m, sizeof(m.payload.state), &reply)))
		return rc;
	if (reply.payload.state.index != idx || reply.payload.state.num > 0xffff)
		return -EPROTO;
	*base = (uint16_t)reply.payload.state.num;
	return 0;
}

static int set_vring_fd(struct vs_vhost_drv *f, uint32_t req, unsigned idx, int fd)
{
	struct vs_vhost_msg m;

	msg_init(&m, req, sizeof(uint64_t));
	m.payload.u64 = idx & VS_VHOST_VRING_IDX_MASK;
	if (fd < 0) {
		m.payload.u64 |= VS_VHOST_VRING_NOFD;
	} else {
		m.fds[0] = fd;
		m.nfds = 1;
	}
	return request(f, &m);
}

int vs_vhost_drv_set_vring_kick(struct vs_vhost_drv *f, unsigned idx, int fd)
{
	return set_vring_fd(f, VS_VHOST_SET_VRING_KICK, idx, fd);
}

int vs_vhost_drv_set_vring_call(struct vs_vhost_drv *f, unsigned idx, int fd)
{
	return set_vring_fd(f, VS_VHOST_SET_VRING_CALL, idx, fd);
}

int vs_vhost_drv_set_vring_err(struct vs_vhost_drv *f, unsigned idx, int fd)
{
	return set_vring_fd(f, VS_VHOST_SET_VRING_ERR, idx, fd);
}

int vs_vhost_drv_set_vring_enable(struct vs_vhost_drv *f, unsigned idx, bool enable)
{
	return set_state(f, VS_VHOST_SET_VRING_ENABLE, idx, enable);
}

int vs_vhost_drv_get_config(struct vs_vhost_drv *f, void *buf, uint32_t len)
{
	struct vs_vhost_msg m, reply;
	int rc;

	if (len > VS_VHOST_CONFIG_MAX)
		return -EINVAL;
	msg_init(&m, VS_VHOST_GET_CONFIG, 12 + len);
	m.payload.config.size = len;
	if ((rc = query(f, &m, m.size, &reply)))
		return rc;
	if (reply.payload.config.size != len) {
		VS_ERROR(VHOST, "driver: GET_CONFIG reply of %u bytes, asked for %u",
			 reply.payload.config.size, len);
		return -EPROTO;
	}
	memcpy(buf, reply.payload.config.region, len);
	return 0;
}

/* The reply to GET_INFLIGHT_FD carries an fd, which the codec's reply path closes: read this
 * one frame here, keeping its single fd.  0 (*fd >= 0) or -errno (no fd left open). */
static int recv_reply_fd(struct vs_vhost_drv *f, uint32_t request, uint32_t size,
			 struct vs_vhost_msg *reply, int *fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * VS_VHOST_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	uint8_t hdr[VS_VHOST_HDR_SIZE];
	struct iovec iov = {.iov_base = hdr, .iov_len = sizeof(hdr)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	size_t got = 0, want;
	ssize_t n;
	int rc = -EPROTO;

	*fd = -1;
	do {
		n = recvmsg(f->sock, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n <= 0) {
		rc = n < 0 ? -errno : -ECONNRESET;
		VS_ERROR(VHOST, "driver: no reply to %u{vhost_msg}: %s", request, strerror(-rc));
		return rc;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		unsigned cnt;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		cnt = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (unsigned i = 0; i < cnt; i++) {
			int x;

			memcpy(&x, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*fd < 0)
				*fd = x;
			else
				close(x); /* one fd expected: never leak the rest */
		}
	}
	got = (size_t)n;
	while (got < sizeof(hdr)) {
		n = read(f->sock, hdr + got, sizeof(hdr) - got);
		if (n <= 0)
			goto fail;
		got += (size_t)n;
	}
	memcpy(&reply->request, hdr, 4);
	memcpy(&reply->flags, hdr + 4, 4);
	memcpy(&reply->size, hdr + 8, 4);
	reply->nfds = 0;
	if (reply->size > VS_VHOST_MAX_PAYLOAD)
		goto fail;
	for (got = 0, want = reply->size; got < want; got += (size_t)n) {
		n = read(f->sock, reply->payload.bytes + got, want - got);
		if (n <= 0)
			goto fail;
	}
	if ((reply->flags & VS_VHOST_VERSION_MASK) != VS_VHOST_VERSION ||
	    !(reply->flags & VS_VHOST_FLAG_REPLY) || reply->request != request ||
	    reply->size != size) {
		VS_ERROR(VHOST,
			 "driver: reply %u{vhost_msg} flags %#x size %u to %u{vhost_msg}, expected "
			 "size %u",
			 reply->request, reply->flags, reply->size, request, size);
		goto fail;
	}
	return 0;
fail:
	if (rc == -EPROTO && n < 0)
		rc = -errno;
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
	VS_ERROR(VHOST, "driver: bad reply to %u{vhost_msg} (%d)", request, rc);
	return rc;
}

int vs_vhost_drv_get_inflight_fd(struct vs_vhost_drv *f, uint16_t num_queues, uint16_t queue_size,
				 int *fd, uint64_t *mmap_size, uint64_t *mmap_offset)
{
	struct vs_vhost_msg m, reply;
	struct stat st = {0};
	const struct vs_vhost_inflight *in = &reply.payload.inflight;
	int rc;

	*fd = -1;
	if (!num_queues || !queue_size)
		return -EINVAL;
	msg_init(&m, VS_VHOST_GET_INFLIGHT_FD, sizeof(m.payload.inflight));
	m.payload.inflight.num_queues = num_queues;
	m.payload.inflight.queue_size = queue_size;
	if ((rc = send_msg(f, &m)) || (rc = recv_reply_fd(f, VS_VHOST_GET_INFLIGHT_FD,
							  sizeof(m.payload.inflight), &reply, fd)))
		return rc;
	/* The region must be there, non-empty, and inside the file we were given. */
	if (*fd < 0) {
		VS_ERROR(VHOST, "driver: GET_INFLIGHT_FD reply without an fd");
		return -EPROTO;
	}
	if (!in->mmap_size || in->mmap_size > VS_VHOST_INFLIGHT_MAX ||
	    in->mmap_offset > VS_VHOST_INFLIGHT_MAX || fstat(*fd, &st) < 0 ||
	    (uint64_t)st.st_size < in->mmap_offset + in->mmap_size) {
		VS_ERROR(VHOST,
			 "driver: GET_INFLIGHT_FD: region of %llu bytes at offset %llu (file of "
			 "%lld bytes): not usable",
			 (unsigned long long)in->mmap_size, (unsigned long long)in->mmap_offset,
			 (long long)st.st_size);
		close(*fd);
		*fd = -1;
		return -EPROTO;
	}
	*mmap_size = in->mmap_size;
	*mmap_offset = in->mmap_offset;
	VS_INFO(VHOST,
		"driver: in-flight region: fd %d, %llu bytes at offset %llu (%u queues of %u)", *fd,
		(unsigned long long)*mmap_size, (unsigned long long)*mmap_offset, num_queues,
		queue_size);
	return 0;
}

int vs_vhost_drv_set_inflight_fd(struct vs_vhost_drv *f, int fd, uint64_t mmap_size,
				 uint64_t mmap_offset, uint16_t num_queues, uint16_t queue_size)
{
	struct vs_vhost_msg m;

	if (fd < 0 || !mmap_size || !num_queues || !queue_size)
		return -EINVAL;
	msg_init(&m, VS_VHOST_SET_INFLIGHT_FD, sizeof(m.payload.inflight));
	m.payload.inflight.mmap_size = mmap_size;
	m.payload.inflight.mmap_offset = mmap_offset;
	m.payload.inflight.num_queues = num_queues;
	m.payload.inflight.queue_size = queue_size;
	m.fds[0] = fd;
	m.nfds = 1;
	return request(f, &m);
}
