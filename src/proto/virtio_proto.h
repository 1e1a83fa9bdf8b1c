/* SPDX-License-Identifier: MIT */
/*
 * virtio wire vocabulary (virtio 1.2): little-endian accessors, feature bits, device
 * status and the split virtqueue layout, shared by the device-side and driver-side rings
 * (src/virtio) and everything above them.  Prefixed VS_ so that it never collides with the
 * system's <linux/virtio_*.h>.
 */
#ifndef VS_VIRTIO_PROTO_H
#define VS_VIRTIO_PROTO_H

#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* ---- little-endian helpers: values (vs_le16(x)) and unaligned memory (vs_ld_le16(p)) ---- */
/* clang-format off */
static inline uint16_t vs_le16(uint16_t v) { return le16toh(v); } /* to or from LE: symmetric */
static inline uint32_t vs_le32(uint32_t v) { return le32toh(v); }
static inline uint64_t vs_le64(uint64_t v) { return le64toh(v); }
static inline uint16_t vs_ld_le16(const void *p)
{ uint16_t v; memcpy(&v, p, sizeof(v)); return le16toh(v); }
static inline uint32_t vs_ld_le32(const void *p)
{ uint32_t v; memcpy(&v, p, sizeof(v)); return le32toh(v); }
static inline uint64_t vs_ld_le64(const void *p)
{ uint64_t v; memcpy(&v, p, sizeof(v)); return le64toh(v); }
static inline void vs_st_le16(void *p, uint16_t v) { v = htole16(v); memcpy(p, &v, 2); }
static inline void vs_st_le32(void *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static inline void vs_st_le64(void *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }
/* clang-format on */

/* ---- feature bits (bit numbers) and device status -------------------------------------- */
#define VS_VIRTIO_F_NOTIFY_ON_EMPTY   24 /* legacy */
#define VS_VIRTIO_F_ANY_LAYOUT	      27 /* legacy */
#define VS_VIRTIO_F_INDIRECT_DESC     28
#define VS_VIRTIO_F_EVENT_IDX	      29
#define VS_VIRTIO_F_VERSION_1	      32
#define VS_VIRTIO_F_ACCESS_PLATFORM   33
#define VS_VIRTIO_F_RING_PACKED	      34
#define VS_VIRTIO_F_IN_ORDER	      35
#define VS_VIRTIO_F_ORDER_PLATFORM    36
#define VS_VIRTIO_F_SR_IOV	      37
#define VS_VIRTIO_F_NOTIFICATION_DATA 38
#define VS_VIRTIO_F_NOTIF_CONFIG_DATA 39
#define VS_VIRTIO_F_RING_RESET	      40
#define VS_VIRTIO_BIT(f)	      (1ull << (f))

#define VS_VIRTIO_CONFIG_S_ACKNOWLEDGE 1
#define VS_VIRTIO_CONFIG_S_DRIVER      2
#define VS_VIRTIO_CONFIG_S_DRIVER_OK   4
#define VS_VIRTIO_CONFIG_S_FEATURES_OK 8
#define VS_VIRTIO_CONFIG_S_NEEDS_RESET 0x40
#define VS_VIRTIO_CONFIG_S_FAILED      0x80
#define VS_VIRTIO_ID_SCSI	       8

/* ---- split ring layout (all fields little-endian) --------------------------------------- */
#define VS_VRING_DESC_F_NEXT	      1
#define VS_VRING_DESC_F_WRITE	      2 /* device-writable (else device-readable) */
#define VS_VRING_DESC_F_INDIRECT      4
#define VS_VRING_AVAIL_F_NO_INTERRUPT 1
#define VS_VRING_USED_F_NO_NOTIFY     1
#define VS_VRING_MAX_SIZE	      32768

struct vs_vring_desc {
	uint64_t addr; /* guest-physical */
	uint32_t len;
	uint16_t flags; /* VS_VRING_DESC_F_* */
	uint16_t next;	/* with F_NEXT */
};
/* written by the driver */
struct vs_vring_avail {
	uint16_t flags; /* VS_VRING_AVAIL_F_NO_INTERRUPT */
	uint16_t idx;
	uint16_t ring[]; /* [size] heads, then used_event (EVENT_IDX) */
};
struct vs_vring_used_elem {
	uint32_t id;  /* head of the chain */
	uint32_t len; /* bytes the device wrote */
};
/* written by the device */
struct vs_vring_used {
	uint16_t flags; /* VS_VRING_USED_F_NO_NOTIFY */
	uint16_t idx;
	struct vs_vring_used_elem ring[]; /* [size], then avail_event (EVENT_IDX) */
};

/* Bytes each part takes for a queue of `size` (event-idx fields included). */
/* clang-format off */
static inline uint64_t vs_vring_desc_bytes(unsigned size) { return 16ull * size; }
static inline uint64_t vs_vring_avail_bytes(unsigned size) { return 6 + 2ull * size; }
static inline uint64_t vs_vring_used_bytes(unsigned size) { return 6 + 8ull * size; }
/* clang-format on */

/* EVENT_IDX fields at the ends of the rings: the driver's used_event after avail->ring,
 * the device's avail_event after used->ring. */
static inline uint16_t *vs_vring_used_event(struct vs_vring_avail *avail, unsigned size)
{
	return &avail->ring[size];
}
static inline uint16_t *vs_vring_avail_event(struct vs_vring_used *used, unsigned size)
{
	return (uint16_t *)&used->ring[size];
}

/* EVENT_IDX: should the other side be told, after moving its index from old to new_idx,
 * given the event index it published?  True iff event_idx is in [old, new_idx), mod 2^16. */
static inline bool vs_vring_need_event(uint16_t event_idx, uint16_t new_idx, uint16_t old)
{
	return (uint16_t)(new_idx - event_idx - 1) < (uint16_t)(new_idx - old);
}

#endif /* VS_VIRTIO_PROTO_H */
