/* SPDX-License-Identifier: MIT */
/*
 * vhost-user message codec: framing over a stream socket with SCM_RIGHTS fds, and the
 * validation of every request a frontend may send.  Used by both roles: the device side
 * (vhost_dev.h) decodes requests, the driver side (vhost_drv.h) encodes them.
 */
#ifndef VS_VHOST_MSG_H
#define VS_VHOST_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/vhost_proto.h"

/* One message: the 12-byte wire header, the payload (on the wire right after the header;
 * here aligned, so the codec copies the two parts separately), then the ancillary fds. */
struct vs_vhost_msg {
	uint32_t request; /* enum vs_vhost_request */
	uint32_t flags;
	uint32_t size; /* payload bytes */
	union {
		uint64_t u64;
		struct vs_vhost_vring_state state;
		struct vs_vhost_vring_addr addr;
		struct vs_vhost_memory memory;
		struct vs_vhost_mem_reg mem_reg;
		struct vs_vhost_log log;
		struct vs_vhost_inflight inflight;
		struct vs_vhost_config config;
		uint8_t bytes[sizeof(struct vs_vhost_config)];
	} payload;
	int fds[VS_VHOST_MAX_FDS];
	unsigned nfds;
};
#define VS_VHOST_MAX_PAYLOAD sizeof(struct vs_vhost_config) /* largest payload: 268 */

/* Room for a reason string from the codec and the device (why, whylen). */
#define VS_VHOST_WHY_LEN 192

/* ---- codec ---------------------------------------------------------------------------- */
/* Check a frontend request: header flags, exact payload size for its type, region
 * counts and ranges, ring indexes (< VS_VHOST_MAX_QUEUES) and values, fd count.
 * Pure.  0, or -EBADMSG with the reason in why. */
int vs_vhost_msg_validate(const struct vs_vhost_msg *msg, char *why, size_t whylen);

/* Decode one request from buf (exactly header + payload) plus nfds received fds, then
 * validate it.  Never closes fds: on success msg->fds holds them (see
 * vs_vhost_dev_handle), on failure the caller still owns them.
 * 0; -EPROTO if the framing is broken (stream unusable); -EBADMSG if the message is
 * framed but invalid (msg's header fields are filled, so a NEED_REPLY can be answered). */
int vs_vhost_msg_parse(const void *buf, size_t len, const int *fds, unsigned nfds,
		       struct vs_vhost_msg *msg, char *why, size_t whylen);

/* Receive one request from a connected stream socket (blocking) and parse it.
 * Returns as vs_vhost_msg_parse, plus -ECONNRESET when the peer closed at a message
 * boundary and -errno on socket errors.  On any failure received fds are closed. */
int vs_vhost_msg_recv(int sock, struct vs_vhost_msg *msg, char *why, size_t whylen);

/* Receive one reply (no validation against a request type; fds are closed). */
int vs_vhost_msg_recv_reply(int sock, struct vs_vhost_msg *msg, char *why, size_t whylen);

/* Send header + msg->size payload bytes and msg->fds.  0 or -errno. */
int vs_vhost_msg_send(int sock, const struct vs_vhost_msg *msg);

/* Close every fd in msg and set nfds to 0. */
void vs_vhost_msg_close_fds(struct vs_vhost_msg *msg);

#endif /* VS_VHOST_MSG_H */
