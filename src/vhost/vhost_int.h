/* SPDX-License-Identifier: MIT */
/* Private to src/vhost: the device side's state, shared by dev.c and memtable.c. */
#ifndef VS_VHOST_INT_H
#define VS_VHOST_INT_H

#include "util/util.h"
#include "vhost/vhost_dev.h"

/* One ring's session state.  Spec states: stopped until a kick fd arrives ("started"),
 * then stopped again by GET_VRING_BASE; enabled/disabled by SET_VRING_ENABLE, or always
 * enabled when VHOST_USER_F_PROTOCOL_FEATURES was not negotiated.  A storage device has
 * no side-effect-free way to process a disabled ring, so it runs (queue_start) only while
 * started AND enabled. */
struct vs_vhost_ring {
	uint32_t num; /* 0 until SET_VRING_NUM */
	struct vs_vhost_vring_addr addr;
	bool addr_set;
	uint16_t last_avail_idx;
	int kick_fd, call_fd, err_fd; /* -1: none */
	bool started;		      /* kick set, no GET_VRING_BASE since */
	bool enabled;		      /* SET_VRING_ENABLE */
	bool running;		      /* between queue_start() and queue_stop() */
};

/* Our mapping behind one region of b->mem (same index). */
struct vs_vhost_map {
	void *base;
	size_t len;
	int guard; /* its slot in the SIGBUS guard (util: vs_map_guard_add), or -1 */
};

struct vs_vhost_dev {
	unsigned max_queues;
	uint64_t offered_features; /* device features | VS_VHOST_F_PROTOCOL_FEATURES */
	struct vs_vhost_dev_ops ops;
	void *opaque;

	/* session state, reset on disconnect */
	bool owner;
	uint64_t features;	    /* acked by SET_FEATURES */
	uint64_t protocol_features; /* acked by SET_PROTOCOL_FEATURES */
	struct vs_mem mem;
	struct vs_vhost_map maps[VS_MEM_MAX_REGIONS];
	struct vs_vhost_ring *rings; /* max_queues */
	struct vs_map_fault fault;   /* on guest memory (wake_fd: the server's wake-up eventfd) */
	char last_error[VS_VHOST_WHY_LEN]; /* why the last request failed */
	struct vs_dirty_log log;	   /* log.bits NULL: no SET_LOG_BASE yet */
	struct vs_vhost_map log_map;	   /* our mapping behind log.bits */
	/* In-flight tracking (inflight.c): the region, a part per ring; NULL: none. */
	uint8_t *inflight;
	struct vs_vhost_map inflight_map;
	int inflight_fd;			    /* the memfd we made (GET_INFLIGHT_FD), or -1 */
	struct vs_inflight_entry *inflight_scratch; /* queues * qsize: each ring's copy */
	uint16_t inflight_queues, inflight_qsize;

	/* A queue_stop() or call_fd_changed() failed: a user thread may still touch guest
	 * memory and the rings' fds, so they are never unmapped or closed again. */
	bool wedged;
};

/* dev.c */
int vs_vhost_rings_stop(struct vs_vhost_dev *d); /* 0, or the first queue_stop() failure */
int vs_vhost_rings_update(struct vs_vhost_dev *d, char *why, size_t whylen);

/* memtable.c: one handler per memory message; msg fds are closed by the caller. */
int vs_vhost_set_mem_table_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, char *why,
				size_t whylen);
int vs_vhost_add_mem_reg_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, char *why,
			      size_t whylen);
int vs_vhost_rem_mem_reg_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, char *why,
			      size_t whylen);
void vs_vhost_mem_unmap_all(struct vs_vhost_dev *d);
/* Map [mmap_offset, mmap_offset + memory_size) of fd, a memory file (tmpfs, hugetlbfs) that
 * holds it now, into *map (*host: the start), guarded against the file shrinking later. */
int vs_vhost_map_file(struct vs_vhost_dev *d, const struct vs_vhost_mem_region *r, int fd,
		      struct vs_vhost_map *map, uint8_t **host, char *why, size_t whylen);
void vs_vhost_unmap_file(struct vs_vhost_map *m);

/* log.c: dirty logging for live migration. */
int vs_vhost_set_log_base_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, char *why,
			       size_t whylen);
/* The frontend asked for logging (VHOST_F_LOG_ALL) and gave a log: rings log their writes. */
bool vs_vhost_log_active(const struct vs_vhost_dev *d);
/* Tell the user when logging started or ended (was: active before the change). */
void vs_vhost_log_changed(struct vs_vhost_dev *d, bool was);
/* The log has a bit for every page of m, of [gpa, gpa + len). */
bool vs_vhost_log_covers(const struct vs_dirty_log *log, const struct vs_mem *m);
bool vs_vhost_log_covers_range(const struct vs_dirty_log *log, uint64_t gpa, uint64_t len);
void vs_vhost_log_unmap(struct vs_vhost_dev *d);

/* inflight.c: in-flight tracking for a restart after a crash. */
int vs_vhost_get_inflight_fd_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg,
				  struct vs_vhost_msg *reply, char *why, size_t whylen);
int vs_vhost_set_inflight_fd_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, char *why,
				  size_t whylen);
/* Ring idx's part of the region into vr (left NULL when the ring is not tracked); refused
 * when the ring is larger than the region's parts. */
int vs_vhost_inflight_ring(struct vs_vhost_dev *d, unsigned idx, uint32_t num,
			   struct vs_vhost_vring *vr, char *why, size_t whylen);
void vs_vhost_inflight_unmap(struct vs_vhost_dev *d);

#endif /* VS_VHOST_INT_H */
