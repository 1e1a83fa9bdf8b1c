/* SPDX-License-Identifier: MIT */
/*
 * vhost-user wire vocabulary (QEMU docs/interop/vhost-user.rst): request codes, header
 * flags, feature bits and the payload structures, shared by the device side (the target
 * serving QEMU) and the driver side (our initiator).
 *
 * All numbers are in the machine's native byte order (the protocol says so: both peers
 * share one host), so the structures are used as they are, with no byte-order accessors.
 */
#ifndef VS_VHOST_PROTO_H
#define VS_VHOST_PROTO_H

#include <stdint.h>

/* ---- protocol constants -------------------------------------------------------------- */
#define VS_VHOST_HDR_SIZE    12u  /* request, flags, size */
#define VS_VHOST_MAX_FDS     8u	  /* fds per message (SCM_RIGHTS) */
#define VS_VHOST_MAX_REGIONS 8u	  /* regions in one SET_MEM_TABLE */
#define VS_VHOST_MAX_QUEUES  256u /* KICK/CALL/ERR carry the ring index in 8 bits */
#define VS_VHOST_CONFIG_MAX  256u /* device config space bytes (QEMU's limit) */

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
	VS_VHOST_SEND_RARP = 19,
	VS_VHOST_NET_SET_MTU = 20,
	VS_VHOST_SET_SLAVE_REQ_FD = 21,
	VS_VHOST_IOTLB_MSG = 22,
	VS_VHOST_SET_VRING_ENDIAN = 23,
	VS_VHOST_GET_CONFIG = 24,
	VS_VHOST_SET_CONFIG = 25,
	VS_VHOST_CREATE_CRYPTO_SESSION = 26,
	VS_VHOST_CLOSE_CRYPTO_SESSION = 27,
	VS_VHOST_POSTCOPY_ADVISE = 28,
	VS_VHOST_POSTCOPY_LISTEN = 29,
	VS_VHOST_POSTCOPY_END = 30,
	VS_VHOST_GET_INFLIGHT_FD = 31,
	VS_VHOST_SET_INFLIGHT_FD = 32,
	VS_VHOST_GPU_SET_SOCKET = 33,
	VS_VHOST_RESET_DEVICE = 34,
	VS_VHOST_VRING_KICK = 35,
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
#define VS_VHOST_F_LOG_ALL	     26 /* log writes to guest memory (live migration) */

/* Protocol feature bits. */
#define VS_VHOST_PROTOCOL_F_MQ			0
#define VS_VHOST_PROTOCOL_F_LOG_SHMFD		1
#define VS_VHOST_PROTOCOL_F_REPLY_ACK		3
#define VS_VHOST_PROTOCOL_F_CONFIG		9
#define VS_VHOST_PROTOCOL_F_INFLIGHT_SHMFD	12
#define VS_VHOST_PROTOCOL_F_RESET_DEVICE	13
#define VS_VHOST_PROTOCOL_F_CONFIGURE_MEM_SLOTS 15
/* ---- wire payloads ---------------------------------------------------------------------- */
struct vs_vhost_vring_state {
	uint32_t index;
	uint32_t num;
};

struct vs_vhost_vring_addr {
	uint32_t index;
	uint32_t flags;		 /* VS_VHOST_VRING_F_LOG: log the used ring's writes */
	uint64_t desc_user_addr; /* frontend user addresses, translated via the region uva */
	uint64_t used_user_addr;
	uint64_t avail_user_addr;
	uint64_t log_guest_addr;
};

#define VS_VHOST_VRING_F_LOG 0x1u /* vring addr flags: log_guest_addr is the used ring's gpa */

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

/* The in-flight region of one split ring (vhost-user.rst, "Inflight I/O tracking"): the
 * back-end records, in memory the frontend keeps (GET_INFLIGHT_FD), which heads it took from the
 * avail ring and has not yet put in the used ring, so that a back-end restarted after a crash
 * can finish them (the frontend hands the region back with SET_INFLIGHT_FD).  One region per
 * ring, VS_VHOST_INFLIGHT_RING_BYTES(queue_size) apart. */
struct vs_vhost_inflight_desc {
	uint8_t inflight; /* 1: taken, not yet used (head descriptors only) */
	uint8_t padding[5];
	uint16_t next;	  /* the last batch of used heads, as a list from last_batch_head */
	uint64_t counter; /* the order heads were taken in */
};

struct vs_vhost_inflight_split {
	uint64_t features; /* 0 */
	uint16_t version;  /* VS_VHOST_INFLIGHT_VERSION; 0: a fresh region */
	uint16_t desc_num; /* the ring's size */
	uint16_t last_batch_head;
	uint16_t used_idx; /* used->idx once the last batch's flags were cleared */
	struct vs_vhost_inflight_desc desc[];
};

#define VS_VHOST_INFLIGHT_VERSION 1
/* One ring's region, 64-byte aligned (the cache line libvhost-user aligns them to). */
#define VS_VHOST_INFLIGHT_RING_BYTES(qsize)                                                        \
	((sizeof(struct vs_vhost_inflight_split) +                                                 \
	  (uint64_t)(qsize) * sizeof(struct vs_vhost_inflight_desc) + 63) &                        \
	 ~(uint64_t)63)

struct vs_vhost_config {
	uint32_t offset;
	uint32_t size; /* bytes of region[] that follow, <= VS_VHOST_CONFIG_MAX */
	uint32_t flags;
	uint8_t region[VS_VHOST_CONFIG_MAX];
};

/* Name of a request ("SET_MEM_TABLE"), or "UNKNOWN". */
const char *vs_vhost_request_name(uint32_t request);

#endif /* VS_VHOST_PROTO_H */
