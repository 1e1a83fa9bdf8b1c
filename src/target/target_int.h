/* SPDX-License-Identifier: MIT */
/* Private to src/target: the target, its queues, requests and worker threads. */
#ifndef VS_TARGET_INT_H
#define VS_TARGET_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <vioscope/target.h>
#include <vioscope/trace.h>

#include "backend/backend.h"
#include "proto/virtio_scsi_proto.h"
#include "scsi/scsi.h"
#include "target/qos.h"
#include "util/util.h"
#include "vhost/vhost_dev.h"
#include "virtio/virtio.h"

#define TQ_MAX (2 + VS_TARGET_MAX_QUEUES) /* control + event + request queues */
/* Chains popped per queue per pass, on every queue: completions and the vhost thread's
 * commands (a new call fd, a stop) run between passes, however busy the guest keeps a ring. */
#define TQ_POP_BUDGET	     64
#define TQ_IO_DEPTH	     1024  /* io_uring entries per worker (a command uses at most 2 bios) */
#define TQ_IO_DEPTH_MANUAL   64	   /* ... in manual mode (the fuzzer: set-up cost per input) */
#define TQ_WORKER_TIMEOUT_MS 30000 /* default: longest a worker may take over a command */

enum tq_kind { TQ_CTRL, TQ_EVENT, TQ_REQ };

/* A LUN id's state (luns.c, under luns_lock).  A change takes the LUN for itself (OPENING,
 * RESIZING, REMOVING) and waits outside the lock; another change of it is refused. */
enum tq_lun_state {
	TQ_LUN_FREE,	   /* no LUN */
	TQ_LUN_OPENING,	   /* an add opens its backend */
	TQ_LUN_PRESENT,	   /* published */
	TQ_LUN_RESIZING,   /* published; a resize waits for requests or cuts the storage */
	TQ_LUN_REMOVING,   /* unpublished; its removal waits for requests, then flushes */
	TQ_LUN_UNFINISHED, /* unpublished; a removal gave up waiting (detached[] holds it) */
};

/* Events waiting for the driver's event buffers (events.c): past this many, the oldest
 * stay and the driver is told some were missed (VIRTIO_SCSI_T_EVENTS_MISSED). */
#define TQ_EVENTS_MAX 64
struct tq_event {
	uint32_t event;	 /* VS_VIRTIO_SCSI_T_* */
	uint32_t reason; /* VS_VIRTIO_SCSI_EVT_RESET_* or ASC | ASCQ << 8 */
	unsigned lun;
};

struct tq;

/* ---- always-on statistics (stats.c) -------------------------------------------------------
 * Written only by the worker that owns the queue (relaxed stores of a value it alone
 * changes: no read-modify-write atomics), read by any thread with acquire loads and summed
 * over the workers.  Latency histograms are log-linear over clock ticks: values below
 * 2^TS_SUB_BITS ticks exactly, above that 2^TS_SUB_BITS sub-buckets per power of two, so a
 * bucket spans at most 1/32 of the values in it; from 2^(TS_MAX_EXP+1) ticks on (about
 * 48 minutes at 3 GHz) one last bucket, the overflow. */
#define TS_SUB_BITS 5
#define TS_SUB	    (1u << TS_SUB_BITS)
#define TS_MAX_EXP  42
#define TS_BUCKETS  ((TS_MAX_EXP - TS_SUB_BITS + 2) * TS_SUB + 1) /* + the overflow one */

#ifndef VS_STATS /* -DVIOSCOPE_STATS=OFF: compiled out, to measure what they cost */
#define VS_STATS 1
#endif

enum ts_kind { TS_READ, TS_WRITE, TS_FLUSH, TS_UNMAP, TS_OTHER, TS_KINDS };

/* One worker's counts for one LUN.  Only uint64_t words: the reader sums and subtracts
 * them as an array. */
struct ts_counts {
	uint64_t kind[TS_KINDS];	  /* completed, by enum ts_kind */
	uint64_t read_bytes, write_bytes; /* data moved by reads and writes */
	uint64_t sense[16];		  /* CHECK CONDITION, by sense key */
	uint64_t failures;		  /* virtio response other than OK */
	uint64_t popped;
};

/* Allocated by the worker the first time it serves the LUN, kept until the target is
 * destroyed.  A completion's counts change under a sequence count (odd while the worker
 * writes), so that a reader takes them whole, as of one moment: bytes against commands stay
 * exact however long the reader is preempted.  popped changes outside it, one word: the
 * reader loads it last in its sequence, and an unchanged sequence means no completion came
 * meanwhile, so popped - completed is what was in flight when popped was loaded.  The
 * histograms are read as they are. */
struct ts_lun {
	uint64_t seq;
	struct ts_counts c;
	uint64_t hist[2][TS_BUCKETS]; /* latency ticks of reads [0] and writes [1] */
};

static inline void ts_write_begin(struct ts_lun *ls)
{
	__atomic_store_n(&ls->seq, ls->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE); /* x86: a compiler barrier */
}

static inline void ts_write_end(struct ts_lun *ls)
{
	__atomic_store_n(&ls->seq, ls->seq + 1, __ATOMIC_RELEASE);
}

/* A request queue's counts (its owner writes them; the control queue counts notifies).
 * Its in flight is the queue's own count (tq_inflight_set). */
struct ts_queue {
	uint64_t requests; /* commands answered (also those to a missing target) */
	uint64_t bytes;	   /* data moved, either direction */
	uint64_t notifies; /* call eventfd writes */
};

/* Bucket of a latency of v ticks, and the highest value a bucket holds. */
static inline unsigned ts_bucket(uint64_t v)
{
	/* Values below 2^(TS_SUB_BITS+1) are their own bucket (shift 0); above, the top
	 * TS_SUB_BITS+1 bits pick it: its power of two (shift) and sub-bucket. */
	unsigned shift = 63u - (unsigned)__builtin_clzll(v | TS_SUB) - TS_SUB_BITS;

	if (__builtin_expect(shift > TS_MAX_EXP - TS_SUB_BITS, 0))
		return TS_BUCKETS - 1;
	return (shift << TS_SUB_BITS) + (unsigned)(v >> shift);
}
uint64_t ts_bucket_high(unsigned b);
/* The value (ticks) under which a fraction p (0 < p <= 1) of the counted values lie, as the
 * highest value of its bucket: at most 1/32 above the true one.  0 when nothing counted. */
uint64_t ts_percentile(const uint64_t hist[TS_BUCKETS], double p);

/* One memory word written by its one writer: a plain increment, published whole. */
static inline void ts_add(uint64_t *c, uint64_t n)
{
	__atomic_store_n(c, *c + n, __ATOMIC_RELAXED);
}

/* One command popped from a request queue, from pop to push.  Pooled per queue. */
struct treq {
	struct tq *q;
	struct treq *next_free;	  /* pool link (worker thread) */
	struct treq *prev, *next; /* in-flight list (under q->lock) */
	struct treq *all_next;	  /* every request of the pool, for freeing */
	struct treq *park_next;	  /* parked over a QoS limit (q->park_head, worker thread) */
	uint64_t t_park;	  /* when parked, monotonic ns */
	uint64_t qos_bytes;	  /* what QoS charges it: its data buffer's bytes */
	uint8_t qos_dir;	  /* enum qos_dir, QOS_DIRS: not limited (not a read or write) */
	uint8_t qos_held;	  /* parked while limits were set: LUN's (1), controller's (2) */
	uint64_t tag;		  /* le-decoded virtio tag: what TMFs match */
	uint64_t seq;		  /* the queue's track_seq when tracked (under q->lock) */
	unsigned lun;
	uint8_t abort_resp;    /* 0, or VS_VIRTIO_SCSI_S_ABORTED/RESET (under q->lock) */
	bool tmf_wait;	       /* a TMF waits for this one (under q->lock) */
	uint64_t t_start;      /* arrival time, ns (all flavour, no statistics) */
	uint64_t t_pop;	       /* arrival time, stats clock ticks */
	struct ts_lun *ls;     /* the worker's stats of this LUN, or NULL */
	uint8_t ts_kind;       /* enum ts_kind */
	size_t data_in_len;    /* writable bytes after the response header */
	int in_split;	       /* elem.in index cut for data-in, or -1 */
	struct iovec in_saved; /* that iovec before the cut: restored for the response */
	struct vs_virtio_scsi_cmd_req hdr; /* private copy of the request header */
	struct vs_scsi_cmd cmd;
	struct vs_vq_elem elem; /* large: last */
};

/* One virtqueue of the device.  Fields without a note belong to the owning worker while
 * the queue runs and to the vhost thread while it is stopped (the command handoff orders
 * the two). */
struct tq {
	struct vs_controller *c;
	struct worker *w; /* owner while running (chosen at start: request queues) */
	unsigned idx;
	enum tq_kind kind;
	struct vs_vq_dev vq;
	const struct vs_mem *mem;
	int kick_fd, call_fd, err_fd;
	bool running;	    /* started and not stopped */
	bool stopping;	    /* no more pops: waiting for in-flight requests */
	bool dead;	    /* the ring is broken: no more pops until a restart */
	bool kicked;	    /* look at the ring on the next pass */
	bool throttled;	    /* in-flight cap reached: look again after a completion */
	bool unsignalled;   /* used entries filled since the last notify decision */
	bool polled;	    /* no kick fd, or poll mode: notifications stay off */
	bool missed_signal; /* an interrupt was due while there was no call fd */
	unsigned inflight;  /* popped, not pushed (tq_inflight_set: stats read it) */
	struct ts_queue ts; /* beside inflight: one cache line for a request's counts */
	struct treq *free;  /* request pool */
	struct treq *all;
	pthread_mutex_t lock; /* the in-flight list and the TMF marks in it */
	struct treq active;   /* in-flight list head (a sentinel) */
	uint64_t track_seq;   /* requests tracked so far (under lock): luns.c's drains */
	/* Requests over their LUN's QoS limit, tracked and counted in flight, not yet run:
	 * FIFO per LUN (a LUN's later request parks behind its earlier ones, another LUN's
	 * does not).  Owner worker only. */
	struct treq *park_head, *park_tail;
	uint64_t park_until; /* the earliest a parked one may go (monotonic ns) */
	uint16_t parked_lun[VS_TARGET_MAX_LUNS];
};

enum wcmd { WCMD_NONE, WCMD_START, WCMD_STOP, WCMD_CALLFD, WCMD_EXIT };

/* Stats a worker counts (written by its thread only, read relaxed by anyone). */
struct wstats {
	uint64_t requests, bad_requests, tmfs, notifies;
	uint64_t polled_idle; /* idle spells the adaptive poll ended (work found, no sleep) */
	uint64_t sleeps;      /* times the worker slept in epoll_wait with kicks armed */
	uint64_t preempted;   /* adaptive polls cut short: another thread had the CPU */
};

/* Adaptive polling (adaptive.c): the look-before-sleeping window of an event-mode worker. */
#define AP_START_NS   2000ull	  /* the first window, once one is worth having */
#define AP_PREEMPT_NS 20000ull	  /* a gap this long between two looks: preempted */
#define AP_HOLDOFF_NS 20000000ull /* then no polling for this long */

struct adaptive_poll {
	uint64_t max_ns;	/* the bound; 0: never poll */
	uint64_t window_ns;	/* how long the next idle spell is polled, 0..max_ns */
	uint64_t holdoff_until; /* monotonic ns: no polling before (the CPU was wanted) */
};
void ap_init(struct adaptive_poll *ap, uint64_t max_ns);
/* How long to poll an idle spell starting now (0: sleep at once). */
uint64_t ap_window(const struct adaptive_poll *ap, uint64_t now);
/* An idle spell that began at idle_start ended at now (work was found, polling or not). */
void ap_idle_ended(struct adaptive_poll *ap, uint64_t idle_start, uint64_t now);
/* The poll saw the worker off the CPU between two looks: stop polling for a while. */
void ap_preempted(struct adaptive_poll *ap, uint64_t now);

struct worker {
	struct vs_target *t;
	struct vs_controller *c; /* the control thread's controller (NULL: a request worker) */
	unsigned id;
	bool ctl;  /* a controller's control thread (its control + event queues) */
	bool poll; /* busy-poll (request workers with --poll) */
	/* Event-mode request worker: its rings' kicks stay off while it is awake and are armed
	 * only when it goes to sleep (worker_idle); it polls adaptively in between. */
	bool arm_on_sleep;
	struct adaptive_poll ap;
	pthread_t thread;
	bool started;
	int epfd, cmd_fd;
	/* request workers: QoS.  The timer wakes a sleeping worker when a parked request may
	 * go; wake_fd and park_check make it look at its parked requests now (a TMF marked
	 * some, or limits changed). */
	int timer_fd, wake_fd;
	uint64_t timer_at;	    /* what timer_fd is armed for (0: disarmed) */
	int park_check;		    /* atomic */
	struct vs_io_ctx *io;	    /* NULL on the control thread */
	struct vs_vq_elem *scratch; /* control thread: one chain at a time */
	/* running queues (worker thread): any controller's request queues */
	struct tq *queues[VS_TARGET_MAX_CONTROLLERS * VS_TARGET_MAX_QUEUES];
	unsigned nq;
	unsigned nrunning;   /* queues given to it and not taken back (under t->ctrl_lock) */
	struct tq *stopping; /* a STOP waiting for in-flight requests */
	struct wstats st;
	uint64_t ts_pass; /* this pass's clock (ts_pass_now), 0: not read yet */

	/* one command at a time from the controllers' vhost threads (cmd_serial orders
	 * them): */
	pthread_mutex_t cmd_serial;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	enum wcmd cmd;
	struct tq *cmd_q;
	int cmd_arg;
	int cmd_rc; /* the command's result */
	bool cmd_done;
	int cmd_pending; /* atomic: a command waits (checked each pass) */
	bool lost;	 /* a command timed out: never waited for again (vhost thread) */
};

/* One vhost-user-scsi device (controller.c): its socket and frontend, its LUNs, queues,
 * events and control thread.  Its request queues are served by the target's shared
 * workers. */
struct vs_controller {
	struct vs_target *t;
	struct vs_controller *next; /* t->ctrls (under t->ctrl_lock) */
	char name[VS_TARGET_NAME_MAX + 1];
	char *socket_path;
	uint64_t serial;     /* unique in the process: statistics marks tell controllers apart */
	unsigned users;	     /* API calls using it (under t->ctrl_lock) */
	bool removing;	     /* being removed: no new user finds it */
	unsigned num_queues; /* request queues */
	/* The target's settings, copied: read without it. */
	bool manual;
	uint32_t block_size;
	unsigned worker_timeout_ms;
	bool testing;
	const char *lun_root;
	int failed; /* atomic: the session must end (manual mode reads it) */
	struct vs_scsi_dev *dev;
	/* LUNs (luns.c): their state and these entries under luns_lock (not the SCSI device's
	 * table, which commands read lock-free) */
	pthread_mutex_t luns_lock;
	pthread_cond_t luns_cond; /* CLOCK_MONOTONIC: flush_pins dropped */
	enum tq_lun_state lun_state[VS_TARGET_MAX_LUNS];
	struct vs_backend *be[VS_TARGET_MAX_LUNS];
	char *spec[VS_TARGET_MAX_LUNS]; /* as given */
	/* detached, but requests of it were still in flight when its removal gave up
	 * waiting (UNFINISHED): freed at destroy; the id cannot be reused before (-EBUSY) */
	struct vs_scsi_lun *detached[VS_TARGET_MAX_LUNS];
	unsigned flush_pins[VS_TARGET_MAX_LUNS]; /* flushes using be[] outside luns_lock */
	/* a flush of be[] missed its deadline and was abandoned: be[] is never closed (the
	 * flush may still complete into it) nor flushed again */
	bool flush_stuck[VS_TARGET_MAX_LUNS];
	/* A TMF holds it while it uses LUNs it looked up in the table (control.c); a removal
	 * takes it once after unpublishing: then no TMF holds the LUN it removes. */
	pthread_mutex_t tmf_lun_lock;
	/* events for the driver (events.c): posted by any thread, delivered by the control
	 * thread into the event queue's buffers */
	pthread_mutex_t ev_lock;
	struct tq_event ev[TQ_EVENTS_MAX]; /* a ring: ev_head, ev_count */
	unsigned ev_head, ev_count;	   /* ev_count also read relaxed by the control thread */
	bool ev_missed;			   /* overflowed: the next event delivered says so */
	bool ev_live;			   /* a frontend is connected: events are kept */
	int ev_fd;			   /* eventfd: wakes the control thread */
	uint64_t ev_sent, ev_dropped;	   /* under ev_lock */
	struct vs_vhost_server *vs;	   /* the vhost-user socket and device state */
	pthread_t thread;		   /* serves vs (vs_vhost_server_serve) */
	bool thread_started;
	volatile sig_atomic_t stop; /* the thread's serving ends */
	int serve_rc;		    /* what serving ended with */
	struct worker ctl;	    /* its control thread */
	struct tq q[TQ_MAX];
	uint64_t connections;
	int peer_pid; /* the frontend connected last (0: unknown), for the log */

	/* statistics (stats.c): each worker's blocks per LUN, made when it first serves the
	 * LUN: ts[worker * VS_TARGET_MAX_LUNS + lun]; what a LUN's counters read as zero */
	struct ts_lun **ts;
	pthread_mutex_t ts_lock; /* ts_base, and readers against clears */
	struct ts_lun *ts_base[VS_TARGET_MAX_LUNS];
	uint64_t ts_gen[VS_TARGET_MAX_LUNS]; /* times each LUN was cleared (added): marks */

	/* QoS limits per LUN (qos.c), checked by every worker that pops a request of it, and
	 * over all its LUNs together (qos_all): a request goes when both let it */
	struct qos_set qos[VS_TARGET_MAX_LUNS];
	struct qos_set qos_all;

	/* a TMF waiting for marked requests to complete */
	pthread_mutex_t tmf_lock;
	pthread_cond_t tmf_cond;
	unsigned tmf_pending;
};

/* The process: the shared request workers, the settings, the controllers. */
struct vs_target {
	unsigned nworkers; /* request workers */
	bool poll;
	uint64_t ap_ns; /* the request workers' adaptive poll bound (0: none) */
	/* No threads: worker_cmd() runs commands on the caller's thread and the caller runs
	 * the passes (vs_target__pump), so that a fuzzer drives the real device code
	 * deterministically.  There is no server: failures are only recorded (failed). */
	bool manual;
	uint32_t block_size;
	unsigned worker_timeout_ms;
	struct vs_log_sink log; /* the config's log and log_arg */
	bool testing;		/* LUN specs may use the test-only options */
	char *lun_root;		/* NULL, or where file LUNs and write logs must live */
	uint32_t manager_uids[VS_TARGET_MAX_MANAGERS]; /* a frontend under one is warned about */
	unsigned nmanager_uids;
	bool lost;		/* a worker stopped answering: the target can only fail cleanly */
	struct worker *workers; /* nworkers */
	/* statistics clock: ticks are TSC cycles (else CLOCK_MONOTONIC ns) */
	bool ts_tsc;
	double ts_ns_per_tick;
	/* the controllers, and which worker serves which queue */
	pthread_mutex_t ctrl_lock;
	pthread_cond_t ctrl_cond; /* CLOCK_MONOTONIC: a controller's users dropped to 0 */
	struct vs_controller *ctrls;
	unsigned nctrls;
	uint64_t ctrl_serial;
	int run_fd; /* eventfd: vs_target_run looks at its stop flag, a controller failed */
};

/* The owner changes q->inflight; statistics read it from any thread. */
static inline void tq_inflight_set(struct tq *q, unsigned n)
{
	__atomic_store_n(&q->inflight, n, __ATOMIC_RELAXED);
}

static inline void wstat_inc(uint64_t *c)
{
	__atomic_store_n(c, *c + 1, __ATOMIC_RELAXED);
}

/* A command answered, a call eventfd written: with statistics on, the queue's count is the
 * only one (vs_target_get_stats sums the queues), so the request path counts each once. */
static inline void tq_count_answered(struct tq *q)
{
	if (VS_STATS)
		ts_add(&q->ts.requests, 1);
	else
		wstat_inc(&q->w->st.requests);
}

static inline void tq_count_notify(struct tq *q)
{
	if (VS_STATS)
		ts_add(&q->ts.notifies, 1);
	else
		wstat_inc(&q->w->st.notifies);
}

/* worker.c */
/* adaptive_poll_ns: an event-mode request worker's adaptive poll bound (0: none). */
/* c: the controller of a control thread (ctl), NULL for a request worker. */
int worker_init(struct vs_target *t, struct vs_controller *c, struct worker *w, unsigned id,
		bool ctl, bool poll, uint64_t adaptive_poll_ns);
int worker_start(struct worker *w);
void worker_fini(struct worker *w);
/* Run a command on w's thread and wait until it is done (vhost thread only): its result,
 * or -ETIMEDOUT when the worker did not finish it within the worker timeout (then the
 * worker is lost for good: see worker.c). */
int worker_cmd(struct worker *w, enum wcmd cmd, struct tq *q, int arg);
/* Any thread: make every request worker look at its parked requests (a TMF marked some,
 * QoS limits changed). */
void worker_park_check(struct vs_target *t);
/* One pass of w (worker_main's body; manual mode calls it directly). */
void worker_pass(struct worker *w);
/* Manual mode: run the request workers until no TMF waits for their requests. */
void worker_manual_settle(struct vs_controller *c);
/* Publish q's filled used entries and signal the driver if it wants it (its trace names
 * the caller: a pass, a TMF-waited completion, a stop). */
#define tq_notify(q) tq__notify(q, __func__)
void tq__notify(struct tq *q, const char *caller);
/* Tell the driver the ring is broken (err fd) and stop using it. */
void tq_kill(struct tq *q, const char *why);
/* Pop the next chain of a control or event ring (vs_vq_dev_pop's result); a broken ring
 * (-EIO) is killed. */
static inline int tq_pop(struct tq *q, struct vs_vq_elem *e)
{
	int rc = vs_vq_dev_pop(&q->vq, q->mem, e);

	if (rc == -EIO)
		tq_kill(q, q->vq.broken_reason ? q->vq.broken_reason : "broken ring");
	return rc;
}

/* target.c: why (when not NULL) gets the formatted reason, traced too; returns rc. */
int tq_err(char *why, size_t whylen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Flush each of the n backends (NULL or nothing durable: skipped), waiting at most the
 * worker timeout: res[i] is 0, the flush's -errno, or -ETIMEDOUT when it did not finish in
 * time.  Such a flush is abandoned, with its I/O context, for the process's life (it may
 * still complete): be[i] must then never be closed.  0 or the first error. */
int tq_flush_backends(struct vs_controller *c, struct vs_backend *const *be, unsigned n, int *res);

/* luns.c: open l's backend, make it a SCSI LUN and attach it (during create).  0, or
 * -errno with why set and nothing left behind. */
int tq_lun_open(struct vs_controller *c, const struct vs_target_lun *l, char *why, size_t whylen);

/* qos_lun.c: a LUN's limits, given as the user does (NULL: unlimited) */
int tq_qos_check(const struct vs_target_qos *q, unsigned id, char *why, size_t whylen);
/* ... and the controller's over all its LUNs (set: c->qos_all, or c->qos[id]) */
int tq_ctrl_qos_check(const struct vs_target_qos *q, const char *name, char *why, size_t whylen);
void tq_qos_apply_set(struct vs_controller *c, struct qos_set *s, const struct vs_target_qos *q);
int tq_ctrl_qos_set(struct vs_controller *c, const struct vs_target_qos *q, char *why,
		    size_t whylen);
/* Any thread: from now on (parked requests are looked at again). */
void tq_qos_apply(struct vs_controller *c, unsigned id, const struct vs_target_qos *q);
/* Unlimited, counters 0: a LUN added or removed. */
void tq_qos_reset(struct vs_controller *c, unsigned id);
void tq_qos_info(struct vs_controller *c, unsigned id, struct vs_target_qos *q);
void tq_ctrl_qos_info(struct vs_controller *c, struct vs_target_qos *q);

/* events.c */
void tq_events_init(struct vs_controller *c);
void tq_events_fini(struct vs_controller *c);
/* A frontend connected (events are kept from now on) or went away (pending ones dropped). */
void tq_events_connected(struct vs_controller *c, bool connected);
/* Any thread: queue an event for the driver and wake the control thread. */
void tq_event_post(struct vs_controller *c, uint32_t event, unsigned lun, uint32_t reason);
/* Control thread: deliver what is pending into the event queue's buffers. */
void tq_event_process(struct tq *q);
/* Events wait for the driver's buffers (relaxed: the control thread's loop). */
static inline bool tq_events_waiting(struct vs_controller *c)
{
	return __atomic_load_n(&c->ev_count, __ATOMIC_RELAXED) != 0;
}

/* controller.c: end the frontend's session (any thread): the server drops it and logs why. */
void tq_fail(struct vs_controller *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), cold));
/* A line for the operator (the config's log hook), also traced as an ERROR. */
void tq_log(struct vs_controller *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), cold));
/* The same for news that is no failure (a frontend connected), traced as INFO. */
void tq_note(struct vs_controller *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3), cold));

/* target.c: manual mode (struct vs_target's `manual`) for the stateful fuzzer, which
 * drives a vs_vhost_dev with the controller's ops (vs_controller__ops) itself. */
int vs_target__create_manual(struct vs_target **t, const struct vs_target_config *cfg);
/* The manual target's controller (its only one). */
struct vs_controller *vs_target__controller(struct vs_target *t);
/* Run `passes` passes of the control thread's and every worker's work, in turn. */
void vs_target__pump(struct vs_target *t, unsigned passes);
/* A failure ended the session (tq_fail) since the last connected(). */
bool vs_target__failed(const struct vs_target *t);

/* stats.c */
void ts_clock_init(struct vs_target *t);
int ts_init(struct vs_controller *c);
void ts_fini(struct vs_controller *c);
/* Make LUN id's counters read as zero from now on (a LUN added at run time); any thread,
 * while workers count: they never see it. */
void tgt_stats_lun_clear(struct vs_controller *c, unsigned id);
struct ts_lun *ts_lun_make(struct vs_controller *c, struct worker *w, unsigned lun)
    __attribute__((cold));
/* Worker w's block of LUN lun of c (NULL until made). */
static inline struct ts_lun **ts_slot(struct vs_controller *c, const struct worker *w, unsigned lun)
{
	return &c->ts[(size_t)w->id * VS_TARGET_MAX_LUNS + lun];
}

static inline uint64_t ts_now(const struct vs_target *t)
{
	return t->ts_tsc ? vs_rdtsc() : vs_mono_ns();
}

/* Statistics clock ticks as nanoseconds (saturating). */
static inline uint64_t ts_ticks_ns(const struct vs_target *t, uint64_t ticks)
{
	double ns = (double)ticks * t->ts_ns_per_tick;

	return ns >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)ns;
}

/* The clock of the worker's current pass, read at its first use in the pass (worker_pass
 * clears it): one clock read per pass, however many requests it pops and completes.  A
 * latency (pop pass to push pass) is thus off by at most the length of one pass: the
 * worker found the request in the ring at the start of the pass that popped it, and its
 * completion at the start of the pass that pushed it.  A TSC read costs ~20 ns here: two
 * per request would be several percent of a poll-mode request. */
static inline uint64_t ts_pass_now(struct worker *w)
{
	if (!w->ts_pass)
		w->ts_pass = ts_now(w->t);
	return w->ts_pass;
}

/* A request's age in ns for its done event (read only when that event is on).  With
 * statistics, their pass clock (no clock read of its own on the request path: the all
 * flavour used to read CLOCK_MONOTONIC for every request, whether tracing was on or not);
 * off by at most a pass, the events' own timestamps being exact. */
static inline uint64_t tq_req_age_ns(struct tq *q, const struct treq *r)
{
	if (VS_STATS)
		return ts_ticks_ns(q->c->t, ts_pass_now(q->w) - r->t_pop);
	return vs_mono_ns() - r->t_start;
}

/* request.c */
void tq_req_process(struct tq *q);
void tq_req_pool_free(struct tq *q);
/* Run or complete the parked requests that may go at now (those a TMF marked are
 * completed with its response; all: every one runs, a queue stopping); updates
 * q->park_until. */
void tq_park_release(struct tq *q, uint64_t now, bool all);

/* luns.c, qos_lun.c, stats.c: what the public functions do once they have the controller
 * (controller.c finds it by name and holds it meanwhile). */
int tq_lun_add(struct vs_controller *c, const struct vs_target_lun *l, char *why, size_t whylen);
int tq_lun_remove(struct vs_controller *c, unsigned id, char *why, size_t whylen);
int tq_lun_resize(struct vs_controller *c, unsigned id, uint64_t new_bytes, char *why,
		  size_t whylen);
unsigned tq_lun_list(struct vs_controller *c, struct vs_target_lun_info *out, unsigned max);
int tq_qos_set(struct vs_controller *c, unsigned id, const struct vs_target_qos *q, char *why,
	       size_t whylen);
unsigned tq_lun_stats(struct vs_controller *c, struct vs_target_lun_stats *out, unsigned max);
unsigned tq_lun_stats_since(struct vs_controller *c, struct vs_target_stats_mark *m,
			    struct vs_target_lun_stats *out, bool *over_interval, unsigned max);
unsigned tq_queue_stats(struct vs_controller *c, struct vs_target_queue_stats *out, unsigned max);
/* Flush c's backends (vs_target_flush for one controller). */
int tq_ctrl_flush(struct vs_controller *c);

/* target.c: a line for the operator about the target itself (a worker lost). */
void tgt_log(struct vs_target *t, const char *fmt, ...) __attribute__((format(printf, 2, 3), cold));
/* Make vs_target_run look again (a controller's serving failed, a stop). */
void tgt_wake_run(struct vs_target *t);

/* controller.c */
/* Create controller cc of t (not yet listed, not served); 0 or -errno with why. */
int ctrl_create(struct vs_target *t, const struct vs_target_controller *cc,
		struct vs_controller **out, char *why, size_t whylen);
/* Listen on its socket and serve it on a thread of its own (not in manual mode). */
int ctrl_start(struct vs_controller *c, char *why, size_t whylen);
/* Stop serving (its frontend's queues stop, in-flight requests complete), flush, free.
 * The first flush error. */
int ctrl_destroy(struct vs_controller *c);
/* Before a removal at run time: every LUN removed as lun_remove removes one (its requests
 * in flight complete, flushed, the driver told), then the controller still served (a bounded
 * time) while the driver takes the events and removes its disks, so that the guest sees
 * them go as on a hot-unplug.  The first
 * LUN's removal error (logged, and the rest still removed), 0. */
int ctrl_unplug(struct vs_controller *c, char *why, size_t whylen);
/* The request worker that takes q now: the one with the fewest queues (under ctrl_lock). */
struct worker *ctrl_pick_worker(struct vs_target *t);
void ctrl_unpick_worker(struct vs_target *t, struct worker *w);
extern const struct vs_vhost_dev_ops vs_controller__ops;

/* control.c */
void tq_ctl_process(struct tq *q);
/* A marked request completed: release the TMF waiting for it. */
void tmf_release(struct vs_controller *c);

#endif /* VS_TARGET_INT_H */
