/* SPDX-License-Identifier: MIT */
/*
 * Private to src/check: the verification engine verify and stress share (engine.c), the
 * ports it drives I/O through (port_ini.c: the initiator; port_uring.c: io_uring on a file
 * or block device), and the write-log reader of the flush check (wlog_read.c).
 *
 * The engine keeps, per 512-byte sector of the region under test, what a read may find
 * there: the generations between the last acknowledged write (lo) and the newest write
 * whose outcome is unknown (hi: failed, aborted, reset, cut off), whether zeros are
 * allowed (an unmap) and whether anything foreign is (never written in this run).  A
 * request reserves its sectors, so no two requests in flight overlap and what a read must
 * find is always defined.
 */
#ifndef VS_CHECK_INT_H
#define VS_CHECK_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "check/check.h"

#define ENG_MAX_SECT  2048u /* 1 MiB per request */
#define ENG_DEPTH_MAX 64u

enum eng_op { ENG_READ, ENG_WRITE, ENG_FLUSH, ENG_UNMAP, ENG_OPS };

/* Where a request is, for the watchdog. */
enum eng_stage { ST_FREE, ST_SUBMITTING, ST_IN_FLIGHT, ST_COMPLETED };

/* What went wrong, as reported. */
enum eng_err {
	E_LOST,	       /* a write acknowledged, then not on the medium */
	E_STALE,       /* a read returned older data once; read again, it was right */
	E_MISDIRECTED, /* a block written for one place found at another */
	E_TORN,	       /* a write only partly on the medium (or a sector half written) */
	E_PHANTOM,     /* data newer than any write acknowledged or in doubt */
	E_IO,	       /* a request failed where it must not */
	E_TWICE,       /* a request completed twice */
	E_HANG,	       /* a request never completed */
	E_LEAK,	       /* open files or memory grew */
	E_COUNT,
};

/* How requests ended (stress counts them all; verify allows only OK). */
enum eng_res { RES_OK, RES_ABORTED, RES_RESET, RES_NOTCONN, RES_TIMEDOUT, RES_OTHER, RES_COUNT };

struct eng;
struct eng_thread;

struct eng_req {
	struct eng_thread *t;
	enum eng_op op;
	uint64_t sector; /* first 512-byte sector */
	uint32_t nsect;
	uint64_t gen;	   /* a write's or unmap's generation */
	uint8_t *buf;	   /* ENG_MAX_SECT sectors, the port's */
	int result;	   /* 0 or -errno, set before eng_done() */
	bool reread;	   /* the second read of a range that looked wrong */
	bool readback;	   /* part of the final read-back pass */
	unsigned retries;  /* read-back reads retried while the target was away */
	bool refused;	   /* the port refused it: never submitted */
	uint64_t t_submit; /* ns */
	_Atomic int stage;
	atomic_bool armed;	       /* submitted, not yet completed */
	struct eng_req *next_done;     /* completed, for the owning thread */
	uint8_t bad[ENG_MAX_SECT / 8]; /* sectors wrong in the first read */
	void *port;		       /* the port's per-request state */
};

struct eng_port_ops {
	/* Set t->port and every request's buf (and port state).  0 or -errno. */
	int (*thread_init)(struct eng_thread *t, char *why, size_t whylen);
	void (*thread_fini)(struct eng_thread *t);
	/* 0 submitted; -EBUSY try later; other -errno: not submitted (counted as its result). */
	int (*submit)(struct eng_req *r);
	/* Reap completions (each calls eng_done()), waiting up to wait_us for one. */
	void (*poll)(struct eng_thread *t, unsigned wait_us);
};

struct eng_thread {
	struct eng *e;
	unsigned idx; /* writer id idx + 1 */
	pthread_t thread;
	bool started;
	void *port;
	struct eng_req reqs[ENG_DEPTH_MAX];
	unsigned inflight;
	uint64_t rng;
	pthread_mutex_t done_lock; /* completions may run on other threads (TMFs, reconnects) */
	struct eng_req *done_head;
	/* counters, this thread's */
	uint64_t ops[ENG_OPS], bytes[ENG_OPS], res[RES_COUNT], sectors_verified;
	uint64_t refused; /* requests the port refused (not connected) */
};

/* One sector's expectation. */
struct eng_sector {
	uint64_t lo, hi; /* acceptable generations (0, 0: none written) */
	uint32_t writer; /* of generation lo, 0 when unknown */
	uint8_t flags;	 /* SEC_* */
};
#define SEC_ANY	 1 /* never written in this run: old content is fine */
#define SEC_ZERO 2 /* zeros are fine (an unmap) */
#define SEC_BUSY 4 /* a request in flight holds it */

struct eng {
	const struct eng_port_ops *ops;
	void *port_ctx;
	uint64_t run;	   /* run id in every header */
	uint64_t nsect;	   /* sectors under test */
	uint32_t unit;	   /* sectors per device block */
	uint32_t max_sect; /* sectors per request at most */
	unsigned max_depth;
	bool stress; /* flushes and unmaps too; failed requests are allowed */
	bool can_unmap;
	unsigned nthreads;
	struct eng_thread *th;
	pthread_mutex_t lock; /* the model */
	struct eng_sector *m;
	atomic_ullong gen;
	atomic_bool stop;     /* the random phase ends */
	atomic_bool finished; /* the watchdog ends */
	bool readback_phase;
	double phase_s;		  /* how long each queue depth lasts */
	uint64_t max_writes;	  /* the random phase ends after this many (0: by time only) */
	uint64_t t0;		  /* ns */
	pthread_mutex_t err_lock; /* the error record (taken inside lock too) */
	uint64_t err[E_COUNT];
	char first[E_COUNT][400]; /* the first of each kind, in words */
	unsigned hang_after_s;	  /* the watchdog's limit */
	uint64_t seed;		  /* of the run (printed; --seed repeats it) */
	FILE *progress;		  /* a line every progress_s of the random phase, or NULL */
	double progress_s;
	pthread_t watchdog;
	bool watchdog_started;
};

int eng_init(struct eng *e, const struct eng_port_ops *ops, void *port_ctx, uint64_t bytes,
	     uint32_t block, unsigned nthreads, const struct vs_check_io_opts *o, bool stress,
	     char *why, size_t whylen);
/* The random phase, for seconds or max_writes writes, whichever first (or until e->stop, or
 * an interruption: vs_interrupted()). */
int eng_run(struct eng *e, double seconds, char *why, size_t whylen);
/* Every sector read back once and checked (interrupted: what was submitted before). */
int eng_readback(struct eng *e, char *why, size_t whylen);
void eng_fini(struct eng *e);
/* A port reports a completed request (any thread). */
void eng_done(struct eng_req *r);
/* Record an error of kind k (counted; the first of each kind kept in words). */
void eng_error(struct eng *e, enum eng_err k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
uint64_t eng_errors(const struct eng *e);
/* Totals over the threads. */
void eng_totals(const struct eng *e, uint64_t ops[ENG_OPS], uint64_t bytes[ENG_OPS],
		uint64_t res[RES_COUNT], uint64_t *sectors);
uint64_t eng_refused(const struct eng *e);
/* The errors, one line per kind seen, and their first occurrence. */
void eng_print_errors(const struct eng *e, FILE *out);
const char *eng_op_name(enum eng_op op);
const char *eng_err_name(enum eng_err k);
const char *eng_res_name(enum eng_res r);
double eng_elapsed(const struct eng *e);

/* ---- ports ---- */
struct vs_ini;
extern const struct eng_port_ops eng_port_ini;
/* The initiator port's context: an open initiator and the LUN under test. */
struct port_ini {
	struct vs_ini *ini;
	unsigned lun;
	uint32_t block;	 /* bytes */
	uint64_t blocks; /* of the LUN */
	bool thin;
};
/* ABORT TASK for the request r (in flight on its thread's queue): vs_ini_abort's result. */
int port_ini_abort(struct port_ini *p, struct eng_req *r);
int port_ini_open(struct port_ini *p, const char *socket, unsigned queues, unsigned lun,
		  unsigned max_depth, bool reconnect, char *why, size_t whylen);
void port_ini_close(struct port_ini *p);

extern const struct eng_port_ops eng_port_uring;
struct port_uring {
	int fd;
	bool direct;
	uint32_t block; /* bytes */
	uint64_t size;	/* bytes */
	unsigned depth;
};
int port_uring_open(struct port_uring *p, const char *path, unsigned max_depth, char *why,
		    size_t whylen);
void port_uring_close(struct port_uring *p);

/* ---- the write log (wlog_read.c) ---- */
struct lw_entry {
	uint64_t sector, nr_sectors; /* in the log's sectors */
	uint64_t flags;		     /* VS_LW_* */
	uint64_t data_off;	     /* byte offset of the data in the log */
	char mark[48];
};
struct lw_log {
	int fd;
	uint32_t sectorsize;
	uint64_t n, file_size;
	struct lw_entry *e;
};
/* Open and check every entry of the log at path against a device of dev_bytes. */
int lw_open(struct lw_log *l, const char *path, uint64_t dev_bytes, char *why, size_t whylen);
void lw_close(struct lw_log *l);
/* "#12 write sectors 2048+8 FUA", "#13 FLUSH" ... */
const char *lw_describe(const struct lw_log *l, uint64_t i, char *buf, size_t len);

/* ---- a target child (verify --target, stress) ---- */
struct child_target {
	int pid;
	char sock[256];
	char *argv[16];
	char argbuf[8][1100];
};
/* exe target --socket SOCK --lun 0:SPEC --queues N; started and listening, or -errno. */
int child_target_start(struct child_target *c, const char *exe, const char *sock, const char *spec,
		       unsigned queues, char *why, size_t whylen);
/* SIGTERM (0: clean exit) or SIGKILL (0 once reaped; its trace file is removed). */
int child_target_stop(struct child_target *c, int sig);

#endif /* VS_CHECK_INT_H */
