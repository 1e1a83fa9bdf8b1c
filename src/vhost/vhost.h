/* SPDX-License-Identifier: MIT */
/*
 * vhost-user protocol layer: message codec, back-end (device side, serves a frontend such
 * as QEMU over a Unix socket) and small front-end helpers (driver side).
 *
 * Wire format: docs/interop/vhost-user.rst in QEMU.  All numbers are in the machine's
 * native byte order (the protocol says so: both peers share one host), so the wire
 * structures below are used as-is, with no byte-order accessors.
 *
 * Back-end threading: vs_vhost_backend_serve() runs accept + dispatch on the calling
 * thread and calls the ops there.  The layer owns guest memory mappings and the
 * kick/call/err fds; the user (target) owns the queue workers.  A queue runs only
 * between a successful queue_start() and the matching queue_stop(); memory is never
 * remapped while a queue runs (the layer stops, swaps, restarts).
 */
#ifndef VS_VHOST_H
#define VS_VHOST_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "virtio/virtio.h" /* struct vs_mem, VS_MEM_MAX_REGIONS */

/* ---- protocol constants -------------------------------------------------------------- */
#define VS_VHOST_HDR_SIZE      12u    /* request, flags, size */
#define VS_VHOST_MAX_FDS       8u     /* fds per message (SCM_RIGHTS) */
#define VS_VHOST_MAX_REGIONS   8u     /* regions in one SET_MEM_TABLE */
#define VS_VHOST_MAX_QUEUES    256u   /* KICK/CALL/ERR carry the ring index in 8 bits */
#define VS_VHOST_MAX_RING_SIZE 32768u /* virtio split-ring maximum */
#define VS_VHOST_CONFIG_MAX    256u   /* device config space bytes (QEMU's limit) */

enum vs_vhost_request {
	VS_VHOST_GET_FEATURES = 1,
	VS_VHOST_SET_FEATURES = 2,
	VS_VHOST_SET_OWNER = 3,
	VS_VHOST_RESET_OWNER = 4,
	VS_VHOST_SET_MEM_TABLE = 5,
	VS_VHOST_SET_LOG_BASE = 6,
	VS_VHOST_SET_LOG_FD = 7,
	VS_VHOST_SET_VRING_NUM = 8,
	VS_VHOST_SET_VRING_ADDR = 9,
	VS_VHOST_SET_VRING_BASE = 10,
	VS_VHOST_GET_VRING_BASE = 11,
	VS_VHOST_SET_VRING_KICK = 12,
	VS_VHOST_SET_VRING_CALL = 13,
	VS_VHOST_SET_VRING_ERR = 14,
	VS_VHOST_GET_PROTOCOL_FEATURES = 15,
	VS_VHOST_SET_PROTOCOL_FEATURES = 16,
	VS_VHOST_GET_QUEUE_NUM = 17,
	VS_VHOST_SET_VRING_ENABLE = 18,
	VS_VHOST_SET_SLAVE_REQ_FD = 21,
	VS_VHOST_GET_CONFIG = 24,
	VS_VHOST_SET_CONFIG = 25,
	VS_VHOST_GET_INFLIGHT_FD = 31,
	VS_VHOST_SET_INFLIGHT_FD = 32,
	VS_VHOST_RESET_DEVICE = 34,
	VS_VHOST_GET_MAX_MEM_SLOTS = 36,
	VS_VHOST_ADD_MEM_REG = 37,
	VS_VHOST_REM_MEM_REG = 38,
	VS_VHOST_SET_STATUS = 39,
	VS_VHOST_GET_STATUS = 40,
};

/* Header flags. */
#define VS_VHOST_VERSION	 0x1u
#define VS_VHOST_VERSION_MASK	 0x3u
#define VS_VHOST_FLAG_REPLY	 0x4u /* set on every back-end reply */
#define VS_VHOST_FLAG_NEED_REPLY 0x8u /* REPLY_ACK: frontend wants a u64 status */

/* u64 payload of SET_VRING_KICK/CALL/ERR. */
#define VS_VHOST_VRING_IDX_MASK 0xffull
#define VS_VHOST_VRING_NOFD	0x100ull /* no fd attached: poll instead */

/* Feature bits (virtio feature word) the layer itself cares about. */
#define VS_VHOST_F_PROTOCOL_FEATURES 30 /* vhost-user reuse of the reserved bit 30 */
#define VS_VHOST_F_LOG_ALL	     26 /* dirty logging: not offered */

/* Protocol feature bits. */
#define VS_VHOST_PROTOCOL_F_MQ			0
#define VS_VHOST_PROTOCOL_F_REPLY_ACK		3
#define VS_VHOST_PROTOCOL_F_CONFIG		9
#define VS_VHOST_PROTOCOL_F_RESET_DEVICE	13
#define VS_VHOST_PROTOCOL_F_CONFIGURE_MEM_SLOTS 15
/* What the back-end offers: MQ, REPLY_ACK, RESET_DEVICE, CONFIGURE_MEM_SLOTS. */
#define VS_VHOST_BACKEND_PROTOCOL_FEATURES                                                         \
	((1ull << VS_VHOST_PROTOCOL_F_MQ) | (1ull << VS_VHOST_PROTOCOL_F_REPLY_ACK) |              \
	 (1ull << VS_VHOST_PROTOCOL_F_RESET_DEVICE) |                                              \
	 (1ull << VS_VHOST_PROTOCOL_F_CONFIGURE_MEM_SLOTS))

/* ---- wire payloads ---------------------------------------------------------------------- */
struct vs_vhost_vring_state {
	uint32_t index;
	uint32_t num;
};

struct vs_vhost_vring_addr {
	uint32_t index;
	uint32_t flags;		 /* bit 0: log used ring writes (not supported) */
	uint64_t desc_user_addr; /* frontend user addresses, translated via the region uva */
	uint64_t used_user_addr;
	uint64_t avail_user_addr;
	uint64_t log_guest_addr;
};

struct vs_vhost_mem_region {
	uint64_t guest_phys_addr;
	uint64_t memory_size;
	uint64_t userspace_addr;
	uint64_t mmap_offset; /* where the region starts in its fd */
};

struct vs_vhost_memory {
	uint32_t nregions;
	uint32_t padding;
	struct vs_vhost_mem_region regions[VS_VHOST_MAX_REGIONS];
};

struct vs_vhost_mem_reg { /* ADD_MEM_REG / REM_MEM_REG */
	uint64_t padding;
	struct vs_vhost_mem_region region;
};

struct vs_vhost_log {
	uint64_t mmap_size;
	uint64_t mmap_offset;
};

struct vs_vhost_inflight {
	uint64_t mmap_size;
	uint64_t mmap_offset;
	uint16_t num_queues;
	uint16_t queue_size;
	uint32_t padding; /* QEMU's struct is 24 bytes with its tail padding */
};

struct vs_vhost_config {
	uint32_t offset;
	uint32_t size; /* bytes of region[] that follow, <= VS_VHOST_CONFIG_MAX */
	uint32_t flags;
	uint8_t region[VS_VHOST_CONFIG_MAX];
};

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

/* ---- codec (msg.c) ----------------------------------------------------------------------- */
/* Name of a request ("SET_MEM_TABLE"), or "UNKNOWN". */
const char *vs_vhost_request_name(uint32_t request);

/* Check a frontend request: header flags, exact payload size for its type, region
 * counts and ranges, ring indexes (< VS_VHOST_MAX_QUEUES) and values, fd count.
 * Pure.  0, or -EBADMSG with the reason in why. */
int vs_vhost_msg_validate(const struct vs_vhost_msg *msg, char *why, size_t whylen);

/* Decode one request from buf (exactly header + payload) plus nfds received fds, then
 * validate it.  Never closes fds: on success msg->fds holds them (see
 * vs_vhost_backend_handle), on failure the caller still owns them.
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

/* ---- back-end (backend.c, server.c) ---------------------------------------------------- */

/* What a queue_start() gets: everything a worker needs to run one split ring. */
struct vs_vhost_vring {
	unsigned index;
	uint32_t size;		  /* entries, power of two */
	void *desc;		  /* descriptor table, size * 16 bytes, in guest memory */
	void *avail;		  /* available ring */
	void *used;		  /* used ring */
	uint16_t last_avail_idx;  /* where to resume consuming the available ring */
	int kick_fd;		  /* -1: none, poll the ring */
	int call_fd;		  /* -1: none */
	int err_fd;		  /* -1: none */
	bool event_idx;		  /* VIRTIO_F_EVENT_IDX negotiated */
	uint64_t features;	  /* negotiated virtio features */
	const struct vs_mem *mem; /* guest memory map, stable while the queue runs */
};

/* Callbacks from the back-end into its user; all run on the serve() thread and any may
 * be NULL.  fds in a vs_vhost_vring stay owned by the layer and stay open until the
 * matching queue_stop() (or call_fd_changed()) has returned. */
struct vs_vhost_backend_ops {
	/* Start processing a ring.  0, or -errno (the ring stays stopped). */
	int (*queue_start)(void *opaque, unsigned idx, const struct vs_vhost_vring *vr);
	/* Quiesce a ring: on return nothing touches the ring, guest memory or its fds.
	 * Report where consumption stopped in *last_avail_idx (preset to the start value). */
	void (*queue_stop)(void *opaque, unsigned idx, uint16_t *last_avail_idx);
	/* The memory map changed (called with every queue stopped). */
	void (*mem_changed)(void *opaque, const struct vs_mem *mem);
	/* A running ring's call fd is being replaced: switch to call_fd (-1: none) before
	 * returning; the old fd is closed after.  NULL: the layer stops and restarts. */
	void (*call_fd_changed)(void *opaque, unsigned idx, int call_fd);
	void (*connected)(void *opaque);
	/* The frontend went away; every queue has been stopped, memory unmapped. */
	void (*disconnected)(void *opaque);
};

struct vs_vhost_backend;

/* A back-end state machine without a socket (for vs_vhost_backend_handle; tests,
 * fuzzing).  device_features are offered with VS_VHOST_F_PROTOCOL_FEATURES added.
 * max_queues in 1..VS_VHOST_MAX_QUEUES.  NULL with errno set on failure. */
struct vs_vhost_backend *vs_vhost_backend_new(unsigned max_queues, uint64_t device_features,
					      const struct vs_vhost_backend_ops *ops, void *opaque);

/* vs_vhost_backend_new + a listening Unix socket at path (mode 0600; a stale socket
 * nobody listens on is replaced, anything else there is an error). */
struct vs_vhost_backend *vs_vhost_backend_create(const char *path, unsigned max_queues,
						 uint64_t device_features,
						 const struct vs_vhost_backend_ops *ops,
						 void *opaque);

/* Stops queues, unmaps memory, closes fds and the socket (unlinking its path). */
void vs_vhost_backend_destroy(struct vs_vhost_backend *b);

/* Accept one frontend at a time and dispatch its messages until *stop becomes non-zero
 * (checked at least every 200 ms, at once after vs_vhost_backend_wake()).  After a
 * disconnect the connection state is torn down and the next frontend is accepted.
 * 0 when stopped, -errno if the listening socket fails. */
int vs_vhost_backend_serve(struct vs_vhost_backend *b, volatile sig_atomic_t *stop);

/* Make serve() re-check *stop now.  Async-signal-safe, any thread. */
void vs_vhost_backend_wake(struct vs_vhost_backend *b);

/* Handle one validated request (from vs_vhost_msg_parse/recv).  Consumes msg's fds:
 * each is kept by the layer or closed.  Returns 1 with *reply to be sent, 0 when no
 * reply is due, or -errno when the connection must be dropped.  Failures with
 * NEED_REPLY set become an error reply instead of a drop. */
int vs_vhost_backend_handle(struct vs_vhost_backend *b, struct vs_vhost_msg *msg,
			    struct vs_vhost_msg *reply);

/* Answer a request that failed validation (-EBADMSG from parse/recv): 1 with an error
 * *reply when NEED_REPLY was set, else -EBADMSG (drop the connection). */
int vs_vhost_backend_reject(struct vs_vhost_backend *b, const struct vs_vhost_msg *msg,
			    struct vs_vhost_msg *reply);

/* Tear down the session state (as on a disconnect, without calling disconnected()). */
void vs_vhost_backend_reset(struct vs_vhost_backend *b);

/* The current guest memory map (for inspection; stable only on the serve() thread). */
const struct vs_mem *vs_vhost_backend_mem(const struct vs_vhost_backend *b);

/* ---- front-end helpers (front.c) --------------------------------------------------------- */
struct vs_vhost_front {
	int sock;
	uint64_t protocol_features; /* as set by vs_vhost_front_set_protocol_features */
};

/* Connect to a back-end's socket.  0 or -errno. */
int vs_vhost_front_connect(struct vs_vhost_front *f, const char *path);
void vs_vhost_front_close(struct vs_vhost_front *f);

/* One call per request; set-type requests wait for a REPLY_ACK when it was negotiated
 * (-EIO if the back-end reports failure).  0 or -errno. */
int vs_vhost_front_get_features(struct vs_vhost_front *f, uint64_t *features);
int vs_vhost_front_set_features(struct vs_vhost_front *f, uint64_t features);
int vs_vhost_front_get_protocol_features(struct vs_vhost_front *f, uint64_t *features);
int vs_vhost_front_set_protocol_features(struct vs_vhost_front *f, uint64_t features);
int vs_vhost_front_set_owner(struct vs_vhost_front *f);
int vs_vhost_front_get_queue_num(struct vs_vhost_front *f, uint64_t *num);
/* fds[i] backs regions[i] (the same fd may repeat). */
int vs_vhost_front_set_mem_table(struct vs_vhost_front *f,
				 const struct vs_vhost_mem_region *regions, unsigned nregions,
				 const int *fds);
int vs_vhost_front_set_vring_num(struct vs_vhost_front *f, unsigned idx, unsigned num);
int vs_vhost_front_set_vring_addr(struct vs_vhost_front *f, unsigned idx, uint64_t desc,
				  uint64_t avail, uint64_t used);
int vs_vhost_front_set_vring_base(struct vs_vhost_front *f, unsigned idx, uint16_t base);
int vs_vhost_front_get_vring_base(struct vs_vhost_front *f, unsigned idx, uint16_t *base);
/* fd < 0 sends the NOFD flag. */
int vs_vhost_front_set_vring_kick(struct vs_vhost_front *f, unsigned idx, int fd);
int vs_vhost_front_set_vring_call(struct vs_vhost_front *f, unsigned idx, int fd);
int vs_vhost_front_set_vring_enable(struct vs_vhost_front *f, unsigned idx, bool enable);

#endif /* VS_VHOST_H */
