/* SPDX-License-Identifier: MIT */
/*
 * vhost-user device side: serves a frontend such as QEMU over a Unix socket.
 *
 * Threading: vs_vhost_server_serve() runs accept + dispatch on the calling thread and
 * calls the ops there.  The layer owns guest memory mappings and the kick/call/err fds;
 * the user (the target) owns the queue workers.  A queue runs only between a successful
 * queue_start() and the matching queue_stop(); memory is never remapped while a queue
 * runs (the layer stops, swaps, restarts).
 */
#ifndef VS_VHOST_DEV_H
#define VS_VHOST_DEV_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "vhost/vhost_msg.h"
#include "virtio/virtio.h" /* struct vs_mem */

/* What the device side offers: MQ, LOG_SHMFD, REPLY_ACK, INFLIGHT_SHMFD, RESET_DEVICE,
 * CONFIGURE_MEM_SLOTS. */
#define VS_VHOST_DEV_PROTOCOL_FEATURES                                                             \
	((1ull << VS_VHOST_PROTOCOL_F_MQ) | (1ull << VS_VHOST_PROTOCOL_F_LOG_SHMFD) |              \
	 (1ull << VS_VHOST_PROTOCOL_F_REPLY_ACK) | (1ull << VS_VHOST_PROTOCOL_F_INFLIGHT_SHMFD) |  \
	 (1ull << VS_VHOST_PROTOCOL_F_RESET_DEVICE) |                                              \
	 (1ull << VS_VHOST_PROTOCOL_F_CONFIGURE_MEM_SLOTS))

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
	bool event_idx;		  /* VS_VIRTIO_F_EVENT_IDX negotiated */
	uint64_t features;	  /* negotiated virtio features */
	const struct vs_mem *mem; /* guest memory map, stable while the queue runs */
	/* While the frontend migrates the guest: the log to mark every write to guest memory in
	 * (vs_vq_dev_set_log), else NULL; the used ring's guest address, or VS_LOG_NONE when
	 * its writes are not to be logged.  Stable while the queue runs. */
	struct vs_dirty_log *log;
	uint64_t log_used_gpa;
	/* The frontend keeps an in-flight region (INFLIGHT_SHMFD): this ring's part, and a copy
	 * of size entries for vs_vq_dev_set_inflight(); NULL when it keeps none.  Stable while
	 * the queue runs. */
	struct vs_vhost_inflight_split *inflight;
	struct vs_inflight_entry *inflight_scratch;
};

/* Callbacks from the back-end into its user; all run on the serve() thread and any may
 * be NULL.  fds in a vs_vhost_vring stay owned by the layer and stay open until the
 * matching queue_stop() (or call_fd_changed()) has returned.  Kick, call and err fds are
 * eventfds, non-blocking (the layer refuses anything else). */
struct vs_vhost_dev_ops {
	/* Start processing a ring.  0, or -errno (the ring stays stopped); -ETIMEDOUT: the
	 * user cannot tell whether it started, and the device is wedged (see queue_stop). */
	int (*queue_start)(void *opaque, unsigned idx, const struct vs_vhost_vring *vr);
	/* Quiesce a ring: on return nothing touches the ring, guest memory or its fds.
	 * Report where consumption stopped in *last_avail_idx (preset to the start value).
	 * -errno when the ring could not be stopped: the device is then wedged (its memory
	 * stays mapped and its fds open for good, every later request fails). */
	int (*queue_stop)(void *opaque, unsigned idx, uint16_t *last_avail_idx);
	/* The memory map changed (called with every queue stopped). */
	void (*mem_changed)(void *opaque, const struct vs_mem *mem);
	/* A running ring's call fd is being replaced: switch to call_fd (-1: none) before
	 * returning 0; the old fd is closed after.  -errno: not switched (wedged, as above).
	 * NULL: the layer stops and restarts the ring. */
	int (*call_fd_changed)(void *opaque, unsigned idx, int call_fd);
	/* Dirty logging (a live migration) started (log_bytes: the log's size) or ended. */
	void (*logging)(void *opaque, bool on, uint64_t log_bytes);
	void (*connected)(void *opaque);
	/* The frontend went away (why NULL) or was dropped (why says why); every queue has
	 * been stopped, memory unmapped. */
	void (*disconnected)(void *opaque, const char *why);
};

/* ---- the protocol state machine (dev.c, memtable.c): no I/O of its own ---- */
struct vs_vhost_dev;

/* A device without a socket: tests and the fuzzer drive it with vs_vhost_dev_handle(),
 * the server (below) with a frontend's messages.  device_features are offered with
 * VS_VHOST_F_PROTOCOL_FEATURES added.  max_queues in 1..VS_VHOST_MAX_QUEUES.  NULL with
 * errno set on failure. */
struct vs_vhost_dev *vs_vhost_dev_new(unsigned max_queues, uint64_t device_features,
				      const struct vs_vhost_dev_ops *ops, void *opaque);
/* Stops queues, unmaps memory, closes the session's fds. */
void vs_vhost_dev_free(struct vs_vhost_dev *d);

/* Handle one validated request (from vs_vhost_msg_parse/recv).  Consumes msg's fds:
 * each is kept by the device or closed.  Returns 1 with *reply to be sent, 0 when no
 * reply is due, or -errno when the connection must be dropped.  Failures with
 * NEED_REPLY set become an error reply instead of a drop. */
int vs_vhost_dev_handle(struct vs_vhost_dev *d, struct vs_vhost_msg *msg,
			struct vs_vhost_msg *reply);

/* Why the last request vs_vhost_dev_handle() failed did (for the drop's log line). */
const char *vs_vhost_dev_last_error(const struct vs_vhost_dev *d);

/* Answer a request that failed validation (-EBADMSG from parse/recv): 1 with an error
 * *reply when NEED_REPLY was set, else -EBADMSG (drop the connection). */
int vs_vhost_dev_reject(struct vs_vhost_dev *d, const struct vs_vhost_msg *msg,
			struct vs_vhost_msg *reply);

/* Tear down the session state (as on a disconnect, without calling disconnected()). */
void vs_vhost_dev_reset(struct vs_vhost_dev *d);

/* The current guest memory map (for inspection; stable only on the serving thread). */
const struct vs_mem *vs_vhost_dev_mem(const struct vs_vhost_dev *d);

/* Guest memory is guarded (util: vs_map_guard_add): a frontend that shrinks a memory file
 * under a mapping gets the rest of that mapping replaced by zeros instead of killing us
 * with SIGBUS.  True once that happened to this session's memory, with the reason in why: the
 * session must end (vs_vhost_dev_reset).  fd (-1: none) is written when it happens. */
bool vs_vhost_dev_fault(const struct vs_vhost_dev *d, char *why, size_t whylen);
void vs_vhost_dev_set_wake_fd(struct vs_vhost_dev *d, int fd);
/* A queue_stop() or call_fd_changed() failed: nothing more can be done with this device. */
bool vs_vhost_dev_wedged(const struct vs_vhost_dev *d);

/* ---- the server (server.c): a Unix socket, one frontend at a time ---- */
struct vs_vhost_server;

/* A device (vs_vhost_dev_new) behind a listening Unix socket at path (mode 0600; a stale
 * socket nobody listens on is replaced, anything else there is an error).  NULL with errno
 * set on failure. */
struct vs_vhost_server *vs_vhost_server_create(const char *path, unsigned max_queues,
					       uint64_t device_features,
					       const struct vs_vhost_dev_ops *ops, void *opaque);

/* Accept one frontend at a time and feed its messages to the device until *stop becomes
 * non-zero (checked at least every 200 ms, at once after vs_vhost_server_wake()).  The
 * server owns the connection's life: connected() on accept; on a disconnect the device's
 * session state is torn down, disconnected() is called and the next frontend is accepted.
 * 0 when stopped, -errno if the listening socket fails, -EIO when the device is wedged. */
int vs_vhost_server_serve(struct vs_vhost_server *s, volatile sig_atomic_t *stop);

/* The connected frontend's process as the kernel saw it connect (SO_PEERCRED): 0, or
 * -ENOTCONN when none is connected.  On the serving thread (connected() included). */
int vs_vhost_server_peer(const struct vs_vhost_server *s, pid_t *pid, uid_t *uid);

/* Make serve() re-check *stop now.  Async-signal-safe, any thread. */
void vs_vhost_server_wake(struct vs_vhost_server *s);

/* Drop the current frontend (from any thread, e.g. a worker that found one of its fds
 * misbehaving): serve() logs why, ends the session and accepts the next one.  The first
 * reason of a session is kept; a request made while no frontend is connected is dropped. */
void vs_vhost_server_drop(struct vs_vhost_server *s, const char *why);

/* Stops queues, unmaps memory, closes fds and the socket (unlinking its path). */
void vs_vhost_server_destroy(struct vs_vhost_server *s);

#endif /* VS_VHOST_DEV_H */
