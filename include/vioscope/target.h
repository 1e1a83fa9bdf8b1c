/* SPDX-License-Identifier: MIT */
/*
 * vhost-user-scsi target: a vhost-user back-end (src/vhost) serving a virtio-scsi device
 * whose request queues run on worker threads (src/virtio device-side rings), executing
 * SCSI commands (src/scsi) on block backends (src/backend).
 *
 * Queues: 0 control, 1 event, 2.. request.  Each request queue is owned by one worker
 * thread (its own io_uring context); the control and event queues by a separate control
 * thread, so a task management function may wait for requests of other queues to finish.
 *
 * Threads: vs_target_run() serves the socket on the calling thread; the workers are
 * started by vs_target_create() and stopped by vs_target_destroy().
 */
#ifndef VS_TARGET_H
#define VS_TARGET_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VS_TARGET_MAX_QUEUES	    16	/* request queues */
#define VS_TARGET_MAX_LUNS	    256 /* LUN numbers 0..255 */
#define VS_TARGET_MAX_WORKERS	    64
#define VS_TARGET_MAX_CONTROLLERS   64 /* vhost-user-scsi devices in one target */
#define VS_TARGET_NAME_MAX	    63 /* a controller's name: letters, digits, - _ . */
#define VS_TARGET_ADAPTIVE_POLL_US  32 /* default bound of the adaptive poll (event mode) */
#define VS_TARGET_ADAPTIVE_POLL_OFF (~0u)
#define VS_TARGET_ADAPTIVE_POLL_MAX 1000000 /* microseconds */

/* QoS limits of a LUN: reads and writes (other commands are never held), per second, by
 * direction and in total; 0: unlimited.  Each limit is a token bucket of `burst` requests
 * or bytes (0: a tenth of a second's worth, at least 1); a request over a limit waits in
 * the target, in order, until it may go.  See docs/TARGET.md. */
enum vs_qos_dir { VS_QOS_READ, VS_QOS_WRITE, VS_QOS_TOTAL, VS_QOS_DIRS };
#define VS_TARGET_QOS_MAX (1ull << 40) /* highest limit or burst */
struct vs_target_qos {
	uint64_t iops[VS_QOS_DIRS], bps[VS_QOS_DIRS];		  /* by enum vs_qos_dir */
	uint64_t burst_iops[VS_QOS_DIRS], burst_bps[VS_QOS_DIRS]; /* 0: the default */
};
/* Parse "iops=N,bps=SIZE,read_iops=..,write_bps=..,burst_iops=..,read_burst_bps=.." (every
 * limit: [read_|write_]iops, [read_|write_]bps, [read_|write_]burst_iops,
 * [read_|write_]burst_bps; sizes take K/M/G/T; "none": all unlimited) into *q, zeroed
 * first.  0, or -EINVAL with why naming the item. */
int vs_target_qos_parse(const char *spec, struct vs_target_qos *q, char *why, size_t whylen);
/* Format q as vs_target_qos_parse() reads it ("none" when unlimited). */
void vs_target_qos_format(const struct vs_target_qos *q, char *buf, size_t len);

struct vs_target_lun {
	unsigned id; /* 0..VS_TARGET_MAX_LUNS-1 */
	/* backend spec: "file=PATH[,ro][,direct][,shared]", "ram=SIZE", "null=SIZE",
	 * "rbd=POOL/IMAGE[,conf=PATH][,id=USER][,ro][,timeout=SECONDS]" */
	const char *spec;
	const struct vs_target_qos *qos; /* NULL: unlimited */
};

/* A controller: one vhost-user-scsi device, with its socket (one frontend at a time: one
 * VM), its request queues and its LUNs.  The target's workers serve every controller's
 * queues. */
struct vs_target_controller {
	const char *name;	 /* 1..VS_TARGET_NAME_MAX of [A-Za-z0-9_.-], unique */
	const char *socket_path; /* where to listen (created 0600) */
	unsigned num_queues;	 /* request queues, 1..VS_TARGET_MAX_QUEUES (0: 1) */
	unsigned nluns;		 /* >= 1 */
	const struct vs_target_lun *luns;
	/* Limits over all its LUNs together (NULL: none), on top of each LUN's own: a request
	 * goes when both let it. */
	const struct vs_target_qos *qos;
};
#define VS_TARGET_DEFAULT_CONTROLLER "default" /* the name of the config's own controller */

struct vs_target_config {
	/* The first controller, named VS_TARGET_DEFAULT_CONTROLLER (socket_path NULL: none,
	 * then controllers[] holds them all): */
	const char *socket_path; /* where to listen (created 0600) */
	unsigned num_queues;	 /* request queues, 1..VS_TARGET_MAX_QUEUES (0: 1) */
	unsigned workers;	 /* request worker threads (0: min(queues, CPUs)) */
	uint32_t block_size;	 /* 512 or 4096 (0: 512) */
	bool poll;		 /* workers busy-poll rings and I/O instead of sleeping */
	/* Event mode (!poll): how long a worker that ran out of work may keep looking at its
	 * rings before it sleeps, in microseconds: the bound of a window that adapts to the
	 * gaps between requests (QEMU's poll-max-ns) and closes while other threads want the
	 * CPU.  While it looks, the driver need not kick.  0: VS_TARGET_ADAPTIVE_POLL_US;
	 * VS_TARGET_ADAPTIVE_POLL_OFF: sleep at once. */
	unsigned adaptive_poll_us;
	unsigned nluns;			  /* >= 1 */
	const struct vs_target_lun *luns; /* nluns entries, distinct ids */
	const struct vs_target_qos *qos;  /* its limits over all its LUNs (NULL: none) */
	/* More controllers, each with its own socket and LUNs. */
	const struct vs_target_controller *controllers;
	unsigned ncontrollers;
	/* Longest a worker may take to hand a queue back (a stop waits for the queue's
	 * in-flight I/O) or take one over; past it the target gives up: vs_target_run()
	 * returns -ETIMEDOUT and vs_target_destroy() only flushes.  0: 30 s. */
	unsigned worker_timeout_ms;
	/* Lines for the operator: why a frontend's connection was dropped, a worker given up
	 * on.  Called on the target's threads; NULL: traced only. */
	void (*log)(void *arg, const char *line);
	void *log_arg;
	/* LUN specs (at create and vs_target_lun_add) may use the test-only options (delay=,
	 * delay-every=, drop-write=, misdirect-write=, stale-read=); else they are refused. */
	bool testing;
	/* NULL, or every file= and log-writes= path must resolve beneath this directory
	 * (relative to it, or absolute under it; symlinks out and ".." refused by the kernel:
	 * openat2 RESOLVE_BENEATH). */
	const char *lun_root;
	/* Uids that may manage the target (the management socket's allow list): a frontend
	 * that connects under one of them is warned about in a log line, since it could
	 * reconfigure the target (export any file it may open).  At most
	 * VS_TARGET_MAX_MANAGERS; none: no warning. */
	const uint32_t *manager_uids;
	unsigned nmanager_uids;
};
#define VS_TARGET_MAX_MANAGERS 16

/* Counters, for tests and tools (approximate while running). */
struct vs_target_stats {
	uint64_t connections;  /* frontends accepted */
	uint64_t requests;     /* SCSI commands completed (any response) */
	uint64_t bad_requests; /* chains refused: bad descriptors, short headers, bad LUN field */
	uint64_t tmfs;	       /* task management functions answered */
	uint64_t notifies;     /* call eventfd signals */
	uint64_t polled_idle;  /* event mode: idle spells the adaptive poll ended (no sleep) */
	uint64_t sleeps;       /* event mode: times a worker slept with kicks armed */
	uint64_t preempted;    /* event mode: adaptive polls cut short (the CPU was wanted) */
};

struct vs_target;

/* Start the workers; for each controller open the backends, build the SCSI device and
 * listen on its socket (served from then on, each controller by a thread of its own).
 * 0 or -errno; on failure, err (when not NULL) says what was wrong, naming the LUN. */
int vs_target_create(struct vs_target **t, const struct vs_target_config *cfg, char *why,
		     size_t whylen);

/* Whether lun would be refused by vs_target_create() or vs_target_lun_add() for what it
 * says alone, without opening anything: its id, its backend's kind, options and values,
 * test-only options without cfg->testing, a ram= or null= size that is not whole blocks of
 * cfg->block_size.  What needs the world (a file, the memory, a Ceph cluster) is not
 * checked.  0, or -EINVAL / -EPERM with err naming the LUN, as vs_target_create says it.
 * For a command line: these are the user's mistakes, the rest is the machine's. */
int vs_target_lun_check(const struct vs_target_config *cfg, const struct vs_target_lun *lun,
			char *why, size_t whylen);

/* Serve frontends (on each controller one at a time, the next after a disconnect) until
 * *stop becomes non-zero; checked at once after vs_target_wake().  A frontend that
 * misbehaves (bad messages, fds that block, memory that vanishes) is dropped, with a log
 * line saying why, and the next one is served; the other controllers never notice.  0, or
 * -errno if a socket fails, -ETIMEDOUT or -EIO when a worker stopped answering (see
 * worker_timeout_ms): then only destroy is left. */
int vs_target_run(struct vs_target *t, volatile sig_atomic_t *stop);

/* Make vs_target_run() re-check *stop now.  Async-signal-safe. */
void vs_target_wake(struct vs_target *t);

/* Stop every queue (in-flight requests complete first), flush the backends (fdatasync for
 * files), stop the workers, close everything.  0, or the first flush error (-errno);
 * -ETIMEDOUT when a flush did not finish within worker_timeout_ms (the LUN is named in the
 * log; its backend is left open).  After a worker was lost: the flush only (-ETIMEDOUT, or
 * its error); the rest is left to the process's exit. */
int vs_target_destroy(struct vs_target *t);

/* Make every completed write durable: 0 or the first error (-ETIMEDOUT: a flush did not
 * finish within worker_timeout_ms; each such LUN is named in the log and not flushed again).
 * A writeback error stays with its LUN: every later SYNCHRONIZE CACHE of it answers MEDIUM
 * ERROR, WRITE ERROR until the LUN is added again.  Call only while no frontend is
 * connected, or from the serving thread. */
int vs_target_flush(struct vs_target *t);

/* Summed over the controllers (connections: of all of them). */
void vs_target_get_stats(const struct vs_target *t, struct vs_target_stats *s);

/* Run-time controller management, any thread.  Add: as at create, listening and served
 * when it returns; -EEXIST (the name), -EINVAL, -ENOSPC (VS_TARGET_MAX_CONTROLLERS), a
 * LUN's or the socket's -errno.  Remove: its socket closes first (no new frontend), its
 * frontend's queues are stopped (requests in flight complete first, bounded by
 * worker_timeout_ms), its backends flushed and closed: to the guest, the device went away
 * as on a hot-unplug; the other controllers are served throughout.  -ENOENT; -EBUSY (being
 * removed already); the flush's error (removed anyway). */
int vs_target_controller_add(struct vs_target *t, const struct vs_target_controller *c, char *why,
			     size_t whylen);
int vs_target_controller_remove(struct vs_target *t, const char *name, char *why, size_t whylen);
struct vs_target_controller_info {
	char name[VS_TARGET_NAME_MAX + 1];
	char socket_path[108];
	unsigned num_queues;
	unsigned nluns;
	bool connected;			  /* a frontend is connected now */
	int peer_pid;			  /* the frontend connected last (0: unknown) */
	uint64_t connections;		  /* frontends accepted */
	struct vs_target_qos qos;	  /* its limits over all its LUNs */
	uint64_t throttled, throttled_ns; /* requests its limits held, and for how long in all */
};
/* The controllers, in the order they were added, at most max: how many there are. */
unsigned vs_target_controller_list(struct vs_target *t, struct vs_target_controller_info *out,
				   unsigned max);

/* Every function below takes the controller by name: ctrl NULL is the target's only
 * controller (-EINVAL when it has several); a name it does not have: -ENOENT (0 for the
 * functions returning counts). */

/* Run-time LUN management.  Any thread, while the target runs (a frontend connected or
 * not).  A change takes its LUN for itself while it opens a backend, waits for requests or
 * flushes, without holding up other LUNs, the frontend or a disconnect; another change of
 * that LUN meanwhile gets -EBUSY.  Every wait is bounded by worker_timeout_ms.  err (when
 * not NULL) says what was wrong.
 * The guest is told through the event queue (virtio-scsi 5.6.6.3): add and remove send
 * VIRTIO_SCSI_T_TRANSPORT_RESET (reason RESCAN / REMOVED) for that LUN; resize sends
 * VIRTIO_SCSI_T_PARAM_CHANGE (ASC 0x2a ASCQ 0x09) and raises CAPACITY DATA HAS CHANGED
 * on the LUN.  Events find the driver's buffers later if it has none posted (the next one
 * carries EVENTS_MISSED when more than 64 waited); with no frontend connected they are
 * dropped (a driver that connects scans anyway).  See docs/TARGET.md. */
int vs_target_lun_add(struct vs_target *t, const char *ctrl, const struct vs_target_lun *lun,
		      char *why,
		      size_t whylen); /* -EEXIST, -EINVAL, or the backend open's -errno (a file
					 that is neither a regular file nor a block device:
					 -EINVAL); -EBUSY: the id is being added, or removed */
/* New commands to the LUN get LOGICAL UNIT NOT SUPPORTED at once; requests in flight
 * complete normally first (waited for up to worker_timeout_ms: else -ETIMEDOUT, the LUN
 * stays gone for the driver and its backend open until a later remove succeeds); then
 * the backend is flushed (up to worker_timeout_ms: else -ETIMEDOUT, the LUN is removed and
 * its backend left open) and closed.  -ENOENT; -EBUSY (being added, resized or removed);
 * the flush's error (the LUN is removed). */
int vs_target_lun_remove(struct vs_target *t, const char *ctrl, unsigned id, char *why,
			 size_t whylen);
/* file: grows or shrinks (ftruncate); ram: grows.  A shrink lowers the capacity first (new
 * commands past the new end get LBA OUT OF RANGE), waits for the LUN's requests in flight
 * (up to worker_timeout_ms: else -ETIMEDOUT and the old size is back), then cuts the file.
 * -ENOENT, -EBUSY, -EINVAL (not a whole number of blocks, 0), -ENOTSUP (null, rbd, a block
 * device, read-only, ram shrink), -ENOSPC (ram beyond its reservation), the system call's
 * -errno.  The same size: 0, no event. */
int vs_target_lun_resize(struct vs_target *t, const char *ctrl, unsigned id, uint64_t new_bytes,
			 char *why, size_t whylen);
/* Set LUN id's QoS limits (all of them: what q leaves 0 is unlimited), from now on, for
 * requests waiting already too.  Any thread.  0; -ENOENT (no such LUN), -EINVAL (a limit
 * out of range, a burst without its limit: nothing changed). */
int vs_target_qos_set(struct vs_target *t, const char *ctrl, unsigned id,
		      const struct vs_target_qos *q, char *why, size_t whylen);
/* The same for the controller's limits over all its LUNs together (a LUN's own limits
 * still apply: a request goes when both let it).  0; -EINVAL. */
int vs_target_controller_qos_set(struct vs_target *t, const char *ctrl,
				 const struct vs_target_qos *q, char *why, size_t whylen);

struct vs_target_lun_info {
	struct vs_target_qos qos;
	unsigned id;
	char spec[256]; /* as given (truncated if longer) */
	char kind[8];	/* "file", "ram", "null", "rbd" */
	uint64_t bytes;
	uint32_t block_size;
	bool read_only;
};
/* The LUNs present, ascending id, at most max of them: how many there are. */
unsigned vs_target_lun_list(struct vs_target *t, const char *ctrl, struct vs_target_lun_info *out,
			    unsigned max);

/* Always-on statistics (kept without tracing).  Counters of a LUN start at 0 when the LUN
 * is added (or at start).  Latency is from pop to push, per direction. */
struct vs_target_lun_stats {
	unsigned id;
	uint64_t reads, writes, flushes, unmaps, others; /* commands completed, by kind */
	uint64_t read_bytes, write_bytes;		 /* data moved */
	uint64_t sense_keys[16]; /* CHECK CONDITION responses, by sense key */
	uint64_t failures;	 /* virtio responses other than OK (aborted, reset, ...) */
	uint64_t in_flight;	 /* popped, not yet pushed */
	uint64_t read_p50_ns, read_p99_ns, read_p999_ns; /* 0 when no reads yet */
	uint64_t write_p50_ns, write_p99_ns, write_p999_ns;
	uint64_t throttled;    /* requests that waited for the LUN's QoS limits */
	uint64_t throttled_ns; /* the time they waited, summed */
};
struct vs_target_queue_stats {
	unsigned queue;	   /* request queue 0.. (virtqueue index - 2) */
	uint64_t requests; /* commands completed */
	uint64_t bytes;	   /* data moved */
	uint64_t in_flight;
	uint64_t notifies; /* interrupts sent (call eventfd writes) */
};
/* Each LUN present, ascending id, at most max: how many LUNs there are. */
unsigned vs_target_lun_stats(struct vs_target *t, const char *ctrl, struct vs_target_lun_stats *out,
			     unsigned max);
/* Latency over intervals (as iostat reports rates): a mark remembers where each LUN's
 * latency histograms stood when it was last used, so that the percentiles
 * vs_target_lun_stats_since() reports are those of the requests completed since then.
 * One per reader (a management socket client watching); about 20 KiB per LUN it has seen.
 * NULL when out of memory. */
struct vs_target_stats_mark;
struct vs_target_stats_mark *vs_target_stats_mark_new(void);
void vs_target_stats_mark_free(struct vs_target_stats_mark *m);
/* As vs_target_lun_stats(), but each LUN's latency percentiles are of the requests
 * completed since this mark last saw that LUN (since the LUN was added, the first time and
 * after it was added again: then over_interval[i] is false, else true; over_interval may
 * be NULL); the mark moves to now.  The counters stay since the LUN was added. */
unsigned vs_target_lun_stats_since(struct vs_target *t, const char *ctrl,
				   struct vs_target_stats_mark *m, struct vs_target_lun_stats *out,
				   bool *over_interval, unsigned max);
/* Each request queue, at most max: how many there are. */
unsigned vs_target_queue_stats(struct vs_target *t, const char *ctrl,
			       struct vs_target_queue_stats *out, unsigned max);

/* The virtio feature bits the device offers (vhost adds PROTOCOL_FEATURES). */
uint64_t vs_target_device_features(void);

/* This build serves rbd= LUNs (librbd was found when it was built). */
bool vs_target_have_rbd(void);

#endif /* VS_TARGET_H */
