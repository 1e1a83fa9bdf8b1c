/* SPDX-License-Identifier: MIT */
/*
 * vhost-user driver side (what QEMU is to a vhost-user device): one blocking call per
 * request.  Set-type requests carry NEED_REPLY once REPLY_ACK is negotiated, so an error
 * surfaces at the call that caused it.  Used by the initiator.
 */
#ifndef VS_VHOST_DRV_H
#define VS_VHOST_DRV_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/vhost_proto.h"
#include "virtio/virtio.h" /* VS_LOG_NONE */

struct vs_vhost_drv {
	int sock;
	uint64_t protocol_features; /* as set by vs_vhost_drv_set_protocol_features */
};

/* Connect to a device's socket.  0 or -errno. */
int vs_vhost_drv_connect(struct vs_vhost_drv *f, const char *path);
void vs_vhost_drv_close(struct vs_vhost_drv *f);

/* One call per request; set-type requests wait for a REPLY_ACK when it was negotiated
 * (-EIO if the device reports failure).  0 or -errno. */
int vs_vhost_drv_get_features(struct vs_vhost_drv *f, uint64_t *features);
int vs_vhost_drv_set_features(struct vs_vhost_drv *f, uint64_t features);
int vs_vhost_drv_get_protocol_features(struct vs_vhost_drv *f, uint64_t *features);
int vs_vhost_drv_set_protocol_features(struct vs_vhost_drv *f, uint64_t features);
int vs_vhost_drv_set_owner(struct vs_vhost_drv *f);
int vs_vhost_drv_get_queue_num(struct vs_vhost_drv *f, uint64_t *num);
/* fds[i] backs regions[i] (the same fd may repeat). */
int vs_vhost_drv_set_mem_table(struct vs_vhost_drv *f, const struct vs_vhost_mem_region *regions,
			       unsigned nregions, const int *fds);
int vs_vhost_drv_set_vring_num(struct vs_vhost_drv *f, unsigned idx, unsigned num);
int vs_vhost_drv_set_vring_addr(struct vs_vhost_drv *f, unsigned idx, uint64_t desc, uint64_t avail,
				uint64_t used);
/* The same, logging the used ring's writes at guest address used_gpa (VS_LOG_NONE: not). */
int vs_vhost_drv_set_vring_addr_log(struct vs_vhost_drv *f, unsigned idx, uint64_t desc,
				    uint64_t avail, uint64_t used, uint64_t used_gpa);
/* SET_LOG_BASE (LOG_SHMFD): the dirty log is size bytes of the memory file fd. */
int vs_vhost_drv_set_log_base(struct vs_vhost_drv *f, int fd, uint64_t size);
int vs_vhost_drv_set_vring_base(struct vs_vhost_drv *f, unsigned idx, uint16_t base);
int vs_vhost_drv_get_vring_base(struct vs_vhost_drv *f, unsigned idx, uint16_t *base);
/* fd < 0 sends the NOFD flag. */
int vs_vhost_drv_set_vring_kick(struct vs_vhost_drv *f, unsigned idx, int fd);
int vs_vhost_drv_set_vring_call(struct vs_vhost_drv *f, unsigned idx, int fd);
/* The eventfd the device signals when the ring breaks (QEMU logs "vhost vring error"). */
int vs_vhost_drv_set_vring_err(struct vs_vhost_drv *f, unsigned idx, int fd);
int vs_vhost_drv_set_vring_enable(struct vs_vhost_drv *f, unsigned idx, bool enable);
/* GET_CONFIG: len bytes of the device's config space into buf (needs PROTOCOL_F_CONFIG). */
int vs_vhost_drv_get_config(struct vs_vhost_drv *f, void *buf, uint32_t len);

/* In-flight I/O tracking (PROTOCOL_F_INFLIGHT_SHMFD).  GET_INFLIGHT_FD: the device's shared
 * region for num_queues rings of up to queue_size descriptors: *fd (ours to close) holds
 * *mmap_size bytes at *mmap_offset; -EPROTO when the reply has no fd or a region the file
 * does not hold.  SET_INFLIGHT_FD hands that region to a (restarted) device before its
 * rings are set up. */
#define VS_VHOST_INFLIGHT_MAX (1ull << 30) /* larger regions are refused as insane */
int vs_vhost_drv_get_inflight_fd(struct vs_vhost_drv *f, uint16_t num_queues, uint16_t queue_size,
				 int *fd, uint64_t *mmap_size, uint64_t *mmap_offset);
int vs_vhost_drv_set_inflight_fd(struct vs_vhost_drv *f, int fd, uint64_t mmap_size,
				 uint64_t mmap_offset, uint16_t num_queues, uint16_t queue_size);

#endif /* VS_VHOST_DRV_H */
