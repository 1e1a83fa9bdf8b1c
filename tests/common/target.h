/* SPDX-License-Identifier: MIT */
/*
 * The target under test, described once and run either in this process (its library on a
 * thread of the test's: white-box tests reach into it, ThreadSanitizer sees both sides) or
 * as a `vioscope target` process (what users run: signals, exit status, its stderr).  Each
 * lives on a socket in a scratch directory of its own; a process the test did not stop is
 * killed at exit, and its directory removed, also after a failed assertion.
 */
#ifndef TESTS_COMMON_TARGET_H
#define TESTS_COMMON_TARGET_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <vioscope/target.h>

struct target_opts {
	bool in_process;
	/* "ID:SPEC", NULL-terminated; in a spec "%F" is the image file, "%G" the test gate's
	 * socket (gate-sock=%G: the test listens there first, gate.h), "%D" the directory */
	const char *luns[8];
	unsigned queues;     /* request queues (0: 1) */
	unsigned workers;    /* worker threads (0: the target's default) */
	unsigned block_size; /* 0: 512 */
	bool poll;	     /* workers busy-poll */
	bool testing;	     /* the test-only spec options (gate=, delay=, ...) */
	uint64_t file_size;  /* the image file (%F) is made this big first (0: not made) */
	/* as a process only: more `vioscope target` options, NULL-terminated ("%F", "%R" the
	 * management socket, "%G", "%D" expanded) */
	const char *args[16];
};

struct target {
	char dir[64];  /* its scratch directory */
	char sock[96]; /* where it listens */
	char file[96]; /* the image file, for "%F" */
	char log[96];  /* a process's stdout and stderr */
	char rpc[96];  /* the management socket, for "%R" */
	char gate[96]; /* a test gate's socket, for "%G" */
	bool in_process;
	/* in this process */
	struct vs_target *t;
	pthread_t thread;
	volatile sig_atomic_t stop;
	/* as a process */
	const char *bin; /* the vioscope binary to run */
	pid_t pid;
	int pidfd;
};

/* The scratch directory and the paths in it (tag names it); bin: the binary a process
 * target runs (NULL: in this process only).  0 or -errno. */
int target_init(struct target *tg, const char *tag, const char *bin);
/* Start it as o says and wait until its socket accepts connections; again after a stop:
 * the same socket.  0 or -errno (a process's stderr printed). */
int target_start(struct target *tg, const struct target_opts *o);
/* Stop it: a process gets signo (0: none, it is expected to end by itself) and its exit
 * status is returned (-1: it did not exit within timeout_ms and was killed, or died of a
 * signal: *sig); in this process the target is stopped and destroyed, and
 * vs_target_destroy's result returned. */
int target_stop(struct target *tg, int signo, int timeout_ms, int *sig);
/* Stop what still runs (SIGKILL) and remove the directory with everything in it. */
void target_fini(struct target *tg);

/* A process target: still running; its open file descriptors; its log. */
bool target_alive(struct target *tg);
int target_fd_count(struct target *tg);
/* Wait until the log holds needle (false at the deadline); print the log. */
bool target_log_wait(struct target *tg, const char *needle, int timeout_ms);
void target_log_dump(struct target *tg);
/* One JSON-RPC request line on the management socket ("--rpc", "%R"): the reply line
 * (without its newline) in reply; 0 or -errno (-ETIMEDOUT: no whole line in time). */
int target_rpc(struct target *tg, const char *request, char *reply, size_t len, int timeout_ms);

/* ---- a target in this process ------------------------------------------------------------- */
/* Adds and removes of one LUN (lun) on a thread of its own, at least min_cycles times and on
 * until the test's I/O has done min_rounds rounds (each told with lun_churn_round), so that
 * the two overlap however the threads are scheduled; 60 s at most.  The first failure is
 * kept for the test thread. */
struct lun_churn {
	struct vs_target *t;
	struct vs_target_lun lun;
	unsigned min_cycles, min_rounds;
	/* set by it */
	pthread_t thread;
	unsigned cycles;    /* adds and removes done */
	unsigned io_rounds; /* atomic: the test's rounds so far */
	int done;	    /* atomic */
	int rc;		    /* the first failure (-errno), with err */
	char err[256];
};
int lun_churn_start(struct lun_churn *c);
/* It still adds and removes. */
bool lun_churn_running(struct lun_churn *c);
/* The test did one more round of I/O. */
void lun_churn_round(struct lun_churn *c);
/* Wait for its end: its rc. */
int lun_churn_join(struct lun_churn *c);

#endif /* TESTS_COMMON_TARGET_H */
