/* SPDX-License-Identifier: MIT */
/*
 * vhost-user message codec: framing over a stream socket with SCM_RIGHTS fds, and the
 * validation of every request a frontend may send.  Errors are returned with a reason;
 * callers trace them (the codec is also run by the fuzzer, where tracing is noise).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/virtio_proto.h" /* VS_VRING_MAX_SIZE */
#include "util/util.h"
#include "vhost/vhost_msg.h"

#define SIZE_VAR 0xffffu /* payload size depends on the payload */

enum check {
	CHK_NONE,
	CHK_U64,	  /* any value */
	CHK_STATE,	  /* ring index */
	CHK_VRING_NUM,	  /* ring index, power of two <= VS_VRING_MAX_SIZE */
	CHK_VRING_BASE,	  /* ring index, 16-bit value */
	CHK_VRING_ENABLE, /* ring index, 0 or 1 */
	CHK_ADDR,	  /* ring index */
	CHK_VRING_FD,	  /* u64 ring index + NOFD; one fd unless NOFD */
	CHK_MEMORY,	  /* region table, one fd per region */
	CHK_MEMREG,	  /* one region */
	CHK_CONFIG,	  /* config header, payload size from it */
};

struct req_info {
	bool supported; /* the device side decodes it (others are refused) */
	uint16_t size;	/* exact payload bytes, or SIZE_VAR */
	uint8_t min_fds, max_fds;
	uint8_t check;
};

#define REQ(id, sz, minf, maxf, chk) [VS_VHOST_##id] = {true, sz, minf, maxf, chk}

static const struct req_info reqs[] = {
    REQ(GET_FEATURES, 0, 0, 0, CHK_NONE),
    REQ(SET_FEATURES, 8, 0, 0, CHK_U64),
    REQ(SET_OWNER, 0, 0, 0, CHK_NONE),
    REQ(RESET_OWNER, 0, 0, 0, CHK_NONE),
    REQ(SET_MEM_TABLE, SIZE_VAR, 0, VS_VHOST_MAX_FDS, CHK_MEMORY),
    REQ(SET_LOG_BASE, sizeof(struct vs_vhost_log), 0, 1, CHK_NONE),
    REQ(SET_LOG_FD, 0, 1, 1, CHK_NONE),
    REQ(SET_VRING_NUM, 8, 0, 0, CHK_VRING_NUM),
    REQ(SET_VRING_ADDR, sizeof(struct vs_vhost_vring_addr), 0, 0, CHK_ADDR),
    REQ(SET_VRING_BASE, 8, 0, 0, CHK_VRING_BASE),
    REQ(GET_VRING_BASE, 8, 0, 0, CHK_STATE),
    REQ(SET_VRING_KICK, 8, 0, 1, CHK_VRING_FD),
    REQ(SET_VRING_CALL, 8, 0, 1, CHK_VRING_FD),
    REQ(SET_VRING_ERR, 8, 0, 1, CHK_VRING_FD),
    REQ(GET_PROTOCOL_FEATURES, 0, 0, 0, CHK_NONE),
    REQ(SET_PROTOCOL_FEATURES, 8, 0, 0, CHK_U64),
    REQ(GET_QUEUE_NUM, 0, 0, 0, CHK_NONE),
    REQ(SET_VRING_ENABLE, 8, 0, 0, CHK_VRING_ENABLE),
    REQ(SET_SLAVE_REQ_FD, 0, 1, 1, CHK_NONE),
    REQ(GET_CONFIG, SIZE_VAR, 0, 0, CHK_CONFIG),
    REQ(SET_CONFIG, SIZE_VAR, 0, 0, CHK_CONFIG),
    REQ(GET_INFLIGHT_FD, sizeof(struct vs_vhost_inflight), 0, 0, CHK_NONE),
    REQ(SET_INFLIGHT_FD, sizeof(struct vs_vhost_inflight), 1, 1, CHK_NONE),
    REQ(RESET_DEVICE, 0, 0, 0, CHK_NONE),
    REQ(GET_MAX_MEM_SLOTS, 0, 0, 0, CHK_NONE),
    REQ(ADD_MEM_REG, sizeof(struct vs_vhost_mem_reg), 1, 1, CHK_MEMREG),
    /* The spec lets a back-end accept (and must then close) one stray fd here. */
    REQ(REM_MEM_REG, sizeof(struct vs_vhost_mem_reg), 0, 1, CHK_MEMREG),
    REQ(SET_STATUS, 8, 0, 0, CHK_U64),
    REQ(GET_STATUS, 0, 0, 0, CHK_NONE),
};

_Static_assert(sizeof(struct vs_vhost_vring_addr) == 40, "vring addr is 40 bytes on the wire");
_Static_assert(sizeof(struct vs_vhost_mem_region) == 32, "region is 32 bytes on the wire");
_Static_assert(sizeof(struct vs_vhost_memory) == 8 + 8 * 32, "memory table layout");
_Static_assert(sizeof(struct vs_vhost_mem_reg) == 40, "single region is 40 bytes");
_Static_assert(sizeof(struct vs_vhost_inflight) == 24, "inflight is 24 bytes (QEMU)");
_Static_assert(VS_VHOST_MAX_PAYLOAD == 268, "largest payload is the config space");

/* The codec's table entry of a request the device side decodes, or NULL. */
static const struct req_info *req_info(uint32_t request)
{
	if (request >= sizeof(reqs) / sizeof(reqs[0]) || !reqs[request].supported)
		return NULL;
	return &reqs[request];
}

#define bad(...) vs_fail(why, whylen, -EBADMSG, __VA_ARGS__)

static int check_region(const struct vs_vhost_mem_region *r, unsigned i, char *why, size_t whylen)
{
	if (r->memory_size == 0)
		return bad("region %u has size 0", i);
	/* Every end is computed as start + size later on: none of them may wrap. */
	if (r->guest_phys_addr + r->memory_size < r->guest_phys_addr)
		return bad("region %u guest range wraps", i);
	if (r->userspace_addr + r->memory_size < r->userspace_addr)
		return bad("region %u user range wraps", i);
	if (r->mmap_offset + r->memory_size < r->mmap_offset)
		return bad("region %u mmap offset + size wraps", i);
	return 0;
}

static int check_index(uint32_t index, char *why, size_t whylen)
{
	if (index >= VS_VHOST_MAX_QUEUES)
		return bad("ring index %u >= %u", index, VS_VHOST_MAX_QUEUES);
	return 0;
}

/* Payload checks once the size is known to be right. */
static int check_payload(const struct vs_vhost_msg *msg, const struct req_info *ri, char *why,
			 size_t whylen)
{
	const struct vs_vhost_vring_state *st = &msg->payload.state;
	int rc;

	switch (ri->check) {
	case CHK_STATE:
		return check_index(st->index, why, whylen);
	case CHK_VRING_NUM:
		if ((rc = check_index(st->index, why, whylen)))
			return rc;
		if (st->num == 0 || st->num > VS_VRING_MAX_SIZE || (st->num & (st->num - 1)))
			return bad("ring size %u is not a power of two <= %u", st->num,
				   VS_VRING_MAX_SIZE);
		return 0;
	case CHK_VRING_BASE:
		if ((rc = check_index(st->index, why, whylen)))
			return rc;
		if (st->num > 0xffff)
			return bad("ring base %#x exceeds 16 bits", st->num);
		return 0;
	case CHK_VRING_ENABLE:
		if ((rc = check_index(st->index, why, whylen)))
			return rc;
		if (st->num > 1)
			return bad("ring enable value %u is not 0 or 1", st->num);
		return 0;
	case CHK_ADDR:
		return check_index(msg->payload.addr.index, why, whylen);
	case CHK_VRING_FD: {
		uint64_t v = msg->payload.u64;
		if (v & ~(VS_VHOST_VRING_IDX_MASK | VS_VHOST_VRING_NOFD))
			return bad("reserved bits set in %#llx", (unsigned long long)v);
		if ((v & VS_VHOST_VRING_NOFD) && msg->nfds != 0)
			return bad("NOFD flag set but %u fd(s) attached", msg->nfds);
		if (!(v & VS_VHOST_VRING_NOFD) && msg->nfds != 1)
			return bad("%u fd(s) attached, need 1 (or the NOFD flag)", msg->nfds);
		return check_index((uint32_t)(v & VS_VHOST_VRING_IDX_MASK), why, whylen);
	}
	case CHK_MEMORY: {
		const struct vs_vhost_memory *m = &msg->payload.memory;
		if (m->nregions != msg->nfds)
			return bad("%u regions but %u fds", m->nregions, msg->nfds);
		for (unsigned i = 0; i < m->nregions; i++)
			if ((rc = check_region(&m->regions[i], i, why, whylen)))
				return rc;
		return 0;
	}
	case CHK_MEMREG:
		return check_region(&msg->payload.mem_reg.region, 0, why, whylen);
	default:
		return 0;
	}
}

int vs_vhost_msg_validate(const struct vs_vhost_msg *msg, char *why, size_t whylen)
{
	const struct req_info *ri = req_info(msg->request);
	uint32_t want;

	if ((msg->flags & VS_VHOST_VERSION_MASK) != VS_VHOST_VERSION)
		return bad("bad version in flags %#x", msg->flags);
	if (msg->flags & VS_VHOST_FLAG_REPLY)
		return bad("reply flag set on a request");
	if (!ri && !strcmp(vs_vhost_request_name(msg->request), "UNKNOWN"))
		return bad("unknown request %u", msg->request);
	if (!ri)
		return bad("unsupported request %s (%u)", vs_vhost_request_name(msg->request),
			   msg->request);
	if (msg->size > VS_VHOST_MAX_PAYLOAD)
		return bad("payload of %u bytes is too large", msg->size);
	if (msg->nfds > VS_VHOST_MAX_FDS)
		return bad("%u fds attached", msg->nfds);

	want = ri->size;
	if (ri->check == CHK_MEMORY) {
		if (msg->size < 8)
			return bad("memory table of %u bytes has no header", msg->size);
		if (msg->payload.memory.nregions > VS_VHOST_MAX_REGIONS)
			return bad("%u regions, at most %u", msg->payload.memory.nregions,
				   VS_VHOST_MAX_REGIONS);
		want =
		    8 + msg->payload.memory.nregions * (uint32_t)sizeof(struct vs_vhost_mem_region);
	} else if (ri->check == CHK_CONFIG) {
		if (msg->size < 12)
			return bad("config of %u bytes has no header", msg->size);
		if (msg->payload.config.size > VS_VHOST_CONFIG_MAX)
			return bad("config size %u exceeds %u", msg->payload.config.size,
				   VS_VHOST_CONFIG_MAX);
		want = 12 + msg->payload.config.size;
	}
	if (msg->size != want)
		return bad("payload is %u bytes, %s needs %u", msg->size,
			   vs_vhost_request_name(msg->request), want);
	if (msg->nfds < ri->min_fds || msg->nfds > ri->max_fds)
		return bad("%u fd(s) attached, %s takes %u..%u", msg->nfds,
			   vs_vhost_request_name(msg->request), ri->min_fds, ri->max_fds);
	return check_payload(msg, ri, why, whylen);
}

/* Framing only: header fields, payload and fds copied in.  -EPROTO if unusable. */
static int decode(const void *buf, size_t len, const int *fds, unsigned nfds,
		  struct vs_vhost_msg *msg, char *why, size_t whylen)
{
	const uint8_t *p = buf;

	memset(msg, 0, offsetof(struct vs_vhost_msg, payload));
	msg->nfds = 0;
	if (len < VS_VHOST_HDR_SIZE)
		return vs_fail(why, whylen, -EPROTO, "truncated header (%zu bytes)", len);
	memcpy(&msg->request, p, 4);
	memcpy(&msg->flags, p + 4, 4);
	memcpy(&msg->size, p + 8, 4);
	if (msg->size > VS_VHOST_MAX_PAYLOAD)
		return vs_fail(why, whylen, -EPROTO, "payload of %u bytes is too large", msg->size);
	if (len - VS_VHOST_HDR_SIZE < msg->size)
		return vs_fail(why, whylen, -EPROTO, "truncated payload (%zu of %u bytes)",
			       len - VS_VHOST_HDR_SIZE, msg->size);
	if (len - VS_VHOST_HDR_SIZE > msg->size)
		return vs_fail(why, whylen, -EPROTO, "%zu bytes after the payload",
			       len - VS_VHOST_HDR_SIZE - msg->size);
	if (nfds > VS_VHOST_MAX_FDS)
		return vs_fail(why, whylen, -EPROTO, "%u fds attached", nfds);
	/* Zero the rest so a short payload never exposes stale bytes to a handler. */
	memset(&msg->payload, 0, sizeof(msg->payload));
	memcpy(&msg->payload, p + VS_VHOST_HDR_SIZE, msg->size);
	for (unsigned i = 0; i < VS_VHOST_MAX_FDS; i++)
		msg->fds[i] = i < nfds ? fds[i] : -1;
	msg->nfds = nfds;
	return 0;
}

int vs_vhost_msg_parse(const void *buf, size_t len, const int *fds, unsigned nfds,
		       struct vs_vhost_msg *msg, char *why, size_t whylen)
{
	int rc = decode(buf, len, fds, nfds, msg, why, whylen);
	if (rc)
		return rc;
	return vs_vhost_msg_validate(msg, why, whylen);
}

static void close_fds(int *fds, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

void vs_vhost_msg_close_fds(struct vs_vhost_msg *msg)
{
	close_fds(msg->fds, msg->nfds < VS_VHOST_MAX_FDS ? msg->nfds : VS_VHOST_MAX_FDS);
	for (unsigned i = 0; i < VS_VHOST_MAX_FDS; i++)
		msg->fds[i] = -1;
	msg->nfds = 0;
}

/* Read exactly len bytes.  0, -EPROTO on EOF (mid-message), -errno. */
static int read_full(int sock, uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = recv(sock, buf, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EPROTO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* One frame: header (with the fds riding on its first byte) and payload.  On failure
 * every received fd is closed. */
static int recv_frame(int sock, uint8_t *buf, size_t *len, int *fds, unsigned *nfds, char *why,
		      size_t whylen)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * VS_VHOST_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = buf, .iov_len = VS_VHOST_HDR_SIZE};
	struct msghdr mh = {
	    .msg_iov = &iov,
	    .msg_iovlen = 1,
	    .msg_control = ctl.buf,
	    .msg_controllen = sizeof(ctl.buf),
	};
	uint32_t size;
	ssize_t n;
	int rc;

	*nfds = 0;
	do {
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return vs_fail(why, whylen, -errno, "recvmsg: %s", strerror(errno));
	if (n == 0)
		return vs_fail(why, whylen, -ECONNRESET, "peer closed the connection");

	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		unsigned cnt = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (unsigned i = 0; i < cnt; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < VS_VHOST_MAX_FDS)
				fds[(*nfds)++] = fd;
			else
				close(fd); /* cannot happen with our buffer; never leak */
		}
	}
	if (mh.msg_flags & MSG_CTRUNC) {
		rc = vs_fail(why, whylen, -EPROTO, "more than %u fds (control data truncated)",
			     VS_VHOST_MAX_FDS);
		goto out;
	}
	if ((size_t)n < VS_VHOST_HDR_SIZE &&
	    (rc = read_full(sock, buf + n, VS_VHOST_HDR_SIZE - (size_t)n))) {
		vs_fail(why, whylen, rc, "truncated header");
		goto out;
	}
	memcpy(&size, buf + 8, 4);
	if (size > VS_VHOST_MAX_PAYLOAD) {
		rc = vs_fail(why, whylen, -EPROTO, "payload of %u bytes is too large", size);
		goto out;
	}
	if ((rc = read_full(sock, buf + VS_VHOST_HDR_SIZE, size))) {
		vs_fail(why, whylen, rc, "truncated payload");
		goto out;
	}
	*len = VS_VHOST_HDR_SIZE + size;
	return 0;
out:
	close_fds(fds, *nfds);
	*nfds = 0;
	return rc;
}

/* One message off the socket: a request (parsed and validated; its fds handed over in
 * msg) or a reply (decoded; fds closed: no reply we handle carries any). */
static int recv_msg(int sock, struct vs_vhost_msg *msg, bool reply, char *why, size_t whylen)
{
	uint8_t buf[VS_VHOST_HDR_SIZE + VS_VHOST_MAX_PAYLOAD];
	int fds[VS_VHOST_MAX_FDS];
	unsigned nfds = 0;
	size_t len = 0;
	int rc;

	rc = recv_frame(sock, buf, &len, fds, &nfds, why, whylen);
	if (rc)
		return rc;
	if (!reply) {
		rc = vs_vhost_msg_parse(buf, len, fds, nfds, msg, why, whylen);
		if (rc) {
			close_fds(fds, nfds);
			msg->nfds = 0;
		}
		return rc;
	}
	rc = decode(buf, len, fds, 0, msg, why, whylen);
	close_fds(fds, nfds);
	if (rc)
		return rc;
	if ((msg->flags & VS_VHOST_VERSION_MASK) != VS_VHOST_VERSION ||
	    !(msg->flags & VS_VHOST_FLAG_REPLY))
		return bad("reply flags %#x lack the version or reply bit", msg->flags);
	return 0;
}

int vs_vhost_msg_recv(int sock, struct vs_vhost_msg *msg, char *why, size_t whylen)
{
	return recv_msg(sock, msg, false, why, whylen);
}

int vs_vhost_msg_recv_reply(int sock, struct vs_vhost_msg *msg, char *why, size_t whylen)
{
	return recv_msg(sock, msg, true, why, whylen);
}

int vs_vhost_msg_send(int sock, const struct vs_vhost_msg *msg)
{
	uint8_t buf[VS_VHOST_HDR_SIZE + VS_VHOST_MAX_PAYLOAD];
	union {
		char buf[CMSG_SPACE(sizeof(int) * VS_VHOST_MAX_FDS)];
		struct cmsghdr align;
	} ctl;
	size_t len, done = 0;
	ssize_t n;

	if (msg->size > VS_VHOST_MAX_PAYLOAD || msg->nfds > VS_VHOST_MAX_FDS)
		return -EINVAL;
	memcpy(buf, &msg->request, 4);
	memcpy(buf + 4, &msg->flags, 4);
	memcpy(buf + 8, &msg->size, 4);
	memcpy(buf + VS_VHOST_HDR_SIZE, &msg->payload, msg->size);
	len = VS_VHOST_HDR_SIZE + msg->size;

	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	if (msg->nfds) {
		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * msg->nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * msg->nfds);
		memcpy(CMSG_DATA(c), msg->fds, sizeof(int) * msg->nfds);
	}
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* A stream socket may take part of it; the fds went with the first byte. */
	for (done = (size_t)n; done < len; done += (size_t)n) {
		do {
			n = send(sock, buf + done, len - done, MSG_NOSIGNAL);
		} while (n < 0 && errno == EINTR);
		if (n < 0)
			return -errno;
	}
	return 0;
}
