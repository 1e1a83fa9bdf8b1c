/* SPDX-License-Identifier: MIT */
/*
 * A traced program for the trace tests, built once per flavour
 * (trace_workload-off, -cold, -all, -cold-print, -all-print).
 *
 *   trace_workload MODE [-n N] [-t T] [-r FD] [-g FD] [-p] [-B] [-S] [-M] [-H] [-c FD -o FD]
 *
 *   seq       T threads (default 1) each emit N numbered events (WL_SEQ_FMT)
 *   tick      one verbose event per millisecond, counted, driven by -c/-o commands
 *   print     a fixed handful of events for the print backend test
 *   offcheck  the unique format strings the flavour checks look for
 *   kinds     one event of each kind, a string event first (corruption test, fuzz seeds)
 *   fork      sets verbose:test, emits from another thread (-M: from the forking
 *             thread), forks; the child emits N events (may be 0) and exits; the
 *             parent reaps it, prints its pid on stdout, emits again; with -M the
 *             child exits 1 when it has its parent's ring besides its own in use
 *
 *   -r FD  write 'r' when set up (the trace file exists), 'd' when done emitting
 *   -g FD  wait for one byte on FD before emitting
 *   -p     pace (seq): after every batch, wait until a recorder drained our ring
 *   -B     barrier (seq): every thread emits its first event before any goes on, and
 *          its last before any exits
 *   -S     sequential (seq): each thread runs to its end before the next starts
 *   -H     hold: after emitting, sleep until killed
 *   -c/-o  tick mode command and reply pipes (WL_CMD_*)
 *
 * Exit status: 0, or 1 with a message on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "workload.h"
#if VS_TRACE_TIER > 0
#include "tracetools/tracetools.h"
#endif

static unsigned opt_n = 1000, opt_threads = 1;
static int opt_ready = -1, opt_go = -1, opt_cmd = -1, opt_reply = -1;
static bool opt_pace, opt_hold, opt_barrier, opt_sequential, opt_fork_main;
static pthread_barrier_t barrier;

static void die(const char *what)
{
	fprintf(stderr, "trace_workload: %s\n", what);
	exit(1);
}

static void tell(char c)
{
	if (opt_ready >= 0 && write(opt_ready, &c, 1) != 1)
		die("cannot write to the ready pipe");
}

/* ---- pacing: wait until a recorder has taken everything out of our ring ---------- */
#if VS_TRACE_TIER > 0
static struct vs_shm self_shm;

static void pace_open(void)
{
	char pid[32], why[512];
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	if (vs_shm_open(&self_shm, pid, why, sizeof why) < 0) {
		fprintf(stderr, "trace_workload: %s\n", why);
		exit(1);
	}
}

static void pace_wait_drained(void)
{
	uint32_t tid = (uint32_t)syscall(SYS_gettid);
	struct vs_shm_ring *r = NULL;

	for (unsigned i = 0; i < self_shm.snap.ring_count && !r; i++) {
		struct vs_shm_ring *c = vs_shm_ring(&self_shm, i);
		if (__atomic_load_n(&c->state, __ATOMIC_ACQUIRE) == VS_RING_ACTIVE && c->tid == tid)
			r = c;
	}
	if (!r)
		die("pace: no ring for this thread");
	/* Bounded so a dead recorder fails the test instead of hanging it (60 s). */
	for (unsigned spin = 0; spin < 3000000; spin++) {
		if (__atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) ==
		    __atomic_load_n(&r->head, __ATOMIC_ACQUIRE))
			return;
		usleep(20);
	}
	die("pace: the recorder did not drain the ring");
}
#else
static void pace_open(void)
{
	die("pace needs a traced flavour");
}
static void pace_wait_drained(void) {}
#endif

/* ---- seq --------------------------------------------------------------------------- */
static void *seq_thread(void *arg)
{
	unsigned t = (unsigned)(uintptr_t)arg;
	char name[16];

	snprintf(name, sizeof name, "wl-%u", t);
	pthread_setname_np(pthread_self(), name);
	for (unsigned i = 0; i < opt_n; i++) {
		VS_INFO(TEST, WL_SEQ_FMT, t, i, wl_mix(t, i), wl_neg(i), wl_str(t, i));
		/* all threads hold a ring (or failed to get one) at the same time */
		if (opt_barrier && i == 0)
			pthread_barrier_wait(&barrier);
		/* A batch of 32 records (at most 80 bytes each) always fits a 4K ring. */
		if (opt_pace && i % 32 == 31)
			pace_wait_drained();
	}
	if (opt_barrier)
		pthread_barrier_wait(&barrier);
	return NULL;
}

static void run_seq(void)
{
	pthread_t th[64];

	if (opt_threads < 1 || opt_threads > 64)
		die("-t: 1..64 threads");
	if (opt_pace)
		pace_open();
	if (opt_barrier && pthread_barrier_init(&barrier, NULL, opt_threads) != 0)
		die("pthread_barrier_init failed");
	for (unsigned t = 0; t < opt_threads; t++) {
		if (pthread_create(&th[t], NULL, seq_thread, (void *)(uintptr_t)t) != 0)
			die("pthread_create failed");
		if (opt_sequential)
			pthread_join(th[t], NULL);
	}
	for (unsigned t = 0; t < opt_threads && !opt_sequential; t++)
		pthread_join(th[t], NULL);
}

/* ---- tick ------------------------------------------------------------------------ */
static void run_tick(void)
{
	uint32_t count = 0;

	if (opt_cmd < 0 || opt_reply < 0)
		die("tick needs -c and -o");
	for (;;) {
		VS_VERBOSE(TEST, WL_TICK_FMT, count);
		/* Counted after the site has finished: a count the test reads covers every
		 * event that could still have been on its way into the ring. */
		count++;
		struct pollfd p = {.fd = opt_cmd, .events = POLLIN};
		if (poll(&p, 1, 1) <= 0)
			continue;
		char c;
		if (read(opt_cmd, &c, 1) != 1)
			die("control pipe closed");
		if (write(opt_reply, &count, sizeof count) != sizeof count)
			die("cannot reply");
		if (c == WL_CMD_QUIT)
			return;
	}
}

/* ---- print, offcheck, kinds ----------------------------------------------------------- */
static inline int wl_helper(int v VS_CALLER_PARAM)
{
	VS_INFO(TEST, "helper v=%d", v);
	return v + 1;
}

static void wl_print_events(void)
{
	VS_INFO(TEST, "print %d %s", 42, "hello");
	VS_ERROR(INIT, "error path rc=%d why=%s", -5, "no such thing");
	VS_WARNING(QUEUE, "warn %u %.2f", 7u, 2.5);
	VS_VERBOSE_HP(IO, "hot %d", 1);
	wl_helper(9 VS_CALLER_ARG);
}

static void wl_offcheck(int argc)
{
	VS_INFO(TEST, WL_OFFCHECK_FMT, argc);
	VS_VERBOSE_HP(TEST, WL_HPCHECK_FMT, argc);
}

enum wl_colour { WL_RED = 1, WL_GREEN = 2 };

static void wl_kinds(void)
{
	char longstr[300];
	int local = 0;

	memset(longstr, 'x', sizeof longstr - 1);
	longstr[sizeof longstr - 1] = '\0';
	/* First record: a string argument (the corruption test edits its length). */
	VS_INFO(TEST, "str %s", "abc");
	VS_INFO(TEST, "ints %d %u %lld %llu %hhd %hu", -1, 4000000000u, -9000000000ll,
		18000000000000000000ull, (signed char)-7, (unsigned short)65535);
	VS_INFO(TEST, "floats %f %e %g", -1.5, 1e300, 1e-300);
	VS_INFO(TEST, "ptr %p", (void *)&local);
	VS_INFO(TEST, "long %s", longstr);
	VS_INFO(TEST, "enum %d bool %d char %c", WL_GREEN, (_Bool)1, 'z');
	VS_INFO(TEST, "no arguments");
	VS_WARNING(CONFIG, "empty %s|", "");
	VS_INFO(TEST, "bytes %s", VS_BYTES(longstr, 4));
	VS_VERBOSE(GENERAL, "--> enter");
	VS_VERBOSE(GENERAL, "<-- exit rc=%lld", -22ll);
	VS_INFO_HP(IO, "hot %u", 5u);
	wl_helper(1 VS_CALLER_ARG);
	VS_INFO(TEST, "ldbl %Lg", (long double)2.5);
}

/* ---- fork ---------------------------------------------------------------------------- */
/* Bytes glibc's allocator has handed out and not had back, in every arena.  A sanitizer's
 * allocator replaces it (this then stays near 0): its leak checker watches instead. */
static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();
	return mi.uordblks + mi.hblkhd;
}

/* A ring's scratch buffer is 64 KiB (src/trace/runtime.c SCRATCH_SIZE): a child that kept
 * its parent's ring besides its own has at least that much more in use. */
#define FORK_LEAK_BYTES (32u << 10)

static void *fork_before(void *arg)
{
	(void)arg;
	VS_INFO(TEST, "fork parent before");
	return NULL;
}

static void run_fork(void)
{
	vs_trace_set(VS_LEVEL_VERBOSE, 1u << VS_FLAG_TEST);
	if (opt_fork_main) {
		VS_INFO(TEST, "fork parent before"); /* the forking thread has a ring */
	} else {
		pthread_t th;
		if (pthread_create(&th, NULL, fork_before, NULL) != 0)
			die("pthread_create failed");
		pthread_join(th, NULL);
	}
	fflush(stdout);
	size_t parent_heap = heap_in_use();
	pid_t child = fork();
	if (child < 0)
		die("fork failed");
	if (child == 0) {
		for (unsigned i = 0; i < opt_n; i++) {
			VS_VERBOSE(TEST, "fork child %u", i); /* the inherited settings allow it */
			VS_INFO(INIT, "fork child init %u", i); /* ... and mask this one */
		}
		/* The forking thread had a ring (-M): the child's own ring now (when it
		 * emitted) in its place, not beside it. */
		size_t heap = heap_in_use();
		if (opt_fork_main && heap > parent_heap + FORK_LEAK_BYTES) {
			fprintf(
			    stderr,
			    "trace_workload: the fork child has %zu bytes more heap in use than "
			    "its parent had: the parent's ring was not freed\n",
			    heap - parent_heap);
			exit(1);
		}
		exit(0);
	}
	int st;
	if (waitpid(child, &st, 0) != child || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		die("the child failed");
	printf("%d\n", (int)child);
	fflush(stdout);
	VS_INFO(TEST, "fork parent after child %d", (int)child);
}

int main(int argc, char **argv)
{
	const char *mode;
	int c;

	if (argc < 2)
		die("usage: trace_workload MODE [-n N] [-t T] [-r FD] [-g FD] [-p] [-B] [-S] [-M] "
		    "[-H] [-c FD -o FD]");
	/* A test that fails half-way must not leave a workload behind. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	mode = argv[1];
	optind = 2;
	while ((c = getopt(argc, argv, "n:t:r:g:pBSMHc:o:")) != -1) {
		switch (c) {
		case 'n':
			opt_n = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 't':
			opt_threads = (unsigned)strtoul(optarg, NULL, 0);
			break;
		case 'r':
			opt_ready = atoi(optarg);
			break;
		case 'g':
			opt_go = atoi(optarg);
			break;
		case 'p':
			opt_pace = true;
			break;
		case 'B':
			opt_barrier = true;
			break;
		case 'S':
			opt_sequential = true;
			break;
		case 'M':
			opt_fork_main = true;
			break;
		case 'H':
			opt_hold = true;
			break;
		case 'c':
			opt_cmd = atoi(optarg);
			break;
		case 'o':
			opt_reply = atoi(optarg);
			break;
		default:
			die("bad option");
		}
	}
	tell('r');
	if (opt_go >= 0) {
		char b;
		if (read(opt_go, &b, 1) != 1)
			die("go pipe closed");
	}
	if (!strcmp(mode, "seq"))
		run_seq();
	else if (!strcmp(mode, "tick"))
		run_tick();
	else if (!strcmp(mode, "print"))
		wl_print_events();
	else if (!strcmp(mode, "offcheck"))
		wl_offcheck(argc);
	else if (!strcmp(mode, "kinds"))
		wl_kinds();
	else if (!strcmp(mode, "fork"))
		run_fork();
	else
		die("unknown mode");
	tell('d');
	while (opt_hold)
		pause();
	return 0;
}
