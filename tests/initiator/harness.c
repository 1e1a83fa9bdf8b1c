/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"
#include "tracetools/tracetools.h"

uint64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Targets and directories still around: a failed assertion leaves its test function
 * without cleaning up, so the process does it at exit. */
static struct {
	pid_t pid;
	char dir[64];
} live[8];

static void cleanup_dir(const char *dir)
{
	char p[128];

	snprintf(p, sizeof(p), "%s/target.sock", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/disk.img", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/rpc.sock", dir); /* a killed target's management socket */
	unlink(p);
	rmdir(dir);
}

/* A killed process cannot remove its trace file (tracetools.h names it): do it for it. */
static void forget_trace_file(pid_t pid)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s%d", vs_shm_dir(), VS_SHM_PREFIX, (int)pid);
	unlink(p);
	snprintf(p, sizeof(p), "%s/.vioscope-init-%d", vs_shm_dir(), (int)pid);
	unlink(p);
}

static void cleanup_all(void)
{
	for (unsigned i = 0; i < 8; i++) {
		if (!live[i].dir[0])
			continue;
		if (live[i].pid > 0) {
			kill(live[i].pid, SIGKILL);
			waitpid(live[i].pid, NULL, 0);
			forget_trace_file(live[i].pid);
		}
		cleanup_dir(live[i].dir);
		live[i].dir[0] = 0;
	}
}

static unsigned live_slot(const char *dir)
{
	for (unsigned i = 0; i < 8; i++)
		if (!strcmp(live[i].dir, dir))
			return i;
	return 8;
}

void tgt_init(struct tgt *t)
{
	static bool registered;
	unsigned i = live_slot("");

	if (!registered) {
		atexit(cleanup_all);
		registered = true;
	}
	memset(t, 0, sizeof(*t));
	snprintf(t->dir, sizeof(t->dir), "/tmp/vs-ini-test-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->sock, sizeof(t->sock), "%s/target.sock", t->dir);
	snprintf(t->file, sizeof(t->file), "%s/disk.img", t->dir);
	t->queues = 1;
	t->pid = -1;
	if (i < 8) {
		snprintf(live[i].dir, sizeof(live[i].dir), "%s", t->dir);
		live[i].pid = -1;
	}
}

static void live_pid(const struct tgt *t)
{
	unsigned i = live_slot(t->dir);

	if (i < 8)
		live[i].pid = t->pid;
}

int tgt_start(struct tgt *t)
{
	char *argv[32], q[16], bs[16];
	unsigned n = 0;
	pid_t p;

	unlink(t->sock); /* a killed target leaves its socket behind */
	snprintf(q, sizeof(q), "%u", t->queues);
	snprintf(bs, sizeof(bs), "%u", t->block_size ? t->block_size : 512);
	argv[n++] = VIOSCOPE_BIN;
	argv[n++] = "target";
	argv[n++] = "--socket";
	argv[n++] = t->sock;
	argv[n++] = "--queues";
	argv[n++] = q;
	argv[n++] = "--block-size";
	argv[n++] = bs;
	for (unsigned i = 0; i < 4 && t->luns[i]; i++) {
		argv[n++] = "--lun";
		argv[n++] = (char *)t->luns[i];
	}
	for (unsigned i = 0; i < 8 && t->args[i]; i++)
		argv[n++] = (char *)t->args[i];
	argv[n] = NULL;
	p = fork();
	if (p < 0)
		return -errno;
	if (p == 0) {
		int fd = open("/dev/null", O_WRONLY);
		int log =
		    t->log ? open(t->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		if (fd >= 0) {
			dup2(fd, 1);
			if (log >= 0)
				dup2(log, 2);
			else if (!getenv("VIOSCOPE_TEST_TARGET_LOG"))
				dup2(fd, 2);
		}
		execv(VIOSCOPE_BIN, argv);
		_exit(127);
	}
	for (int i = 0; i < 1000; i++) {
		struct stat st;
		int status;

		if (stat(t->sock, &st) == 0 && S_ISSOCK(st.st_mode)) {
			t->pid = p;
			live_pid(t);
			return 0;
		}
		if (waitpid(p, &status, WNOHANG) == p)
			return -EIO;
		usleep(10000);
	}
	kill(p, SIGKILL);
	waitpid(p, NULL, 0);
	return -ETIMEDOUT;
}

void tgt_kill(struct tgt *t, int sig)
{
	int status = 0;

	if (t->pid <= 0)
		return;
	kill(t->pid, sig);
	waitpid(t->pid, &status, 0);
	if (WIFSIGNALED(status))
		forget_trace_file(t->pid);
	t->pid = -1;
	live_pid(t);
}

void tgt_fini(struct tgt *t)
{
	unsigned i = live_slot(t->dir);

	tgt_kill(t, SIGTERM);
	cleanup_dir(t->dir);
	if (i < 8)
		live[i].dir[0] = 0;
}

struct vs_ini_opts ini_opts(const struct tgt *t, unsigned queues)
{
	return (struct vs_ini_opts){.socket = t->sock, .queues = queues, .data_mem = 32u << 20};
}

static void waiter_done(struct vs_ini_io *io)
{
	struct waiter *w = io->opaque;
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
}

void waiter_prep(struct waiter *w, enum vs_ini_op op, unsigned lun, uint64_t lba, uint32_t nblocks,
		 void *buf, size_t len, unsigned nseg)
{
	memset(w, 0, sizeof(*w));
	assert_true(nseg <= 256);
	for (unsigned i = 0; i < nseg; i++) {
		size_t a = len * i / nseg, b = len * (i + 1) / nseg;
		w->iov[i] = (struct iovec){(uint8_t *)buf + a, b - a};
	}
	w->io.op = op;
	w->io.lun = lun;
	w->io.lba = lba;
	w->io.nblocks = nblocks;
	w->io.iov = w->iov;
	w->io.iovcnt = (int)nseg;
	w->io.done = waiter_done;
	w->io.opaque = w;
	w->io.result = 1; /* must be overwritten */
}

int waiter_submit(struct vs_ini_queue *q, struct waiter *w)
{
	int rc;

	while ((rc = vs_ini_submit(q, &w->io)) == -EBUSY)
		vs_ini_poll(q, 16);
	return rc;
}

void waiter_wait(struct vs_ini_queue *q, struct waiter *w)
{
	uint64_t end = now_ms() + 20000;

	while (!__atomic_load_n(&w->done, __ATOMIC_ACQUIRE)) {
		if (!vs_ini_poll(q, 16))
			usleep(10);
		assert_true(now_ms() < end);
	}
}

int io_sync(struct vs_ini_queue *q, enum vs_ini_op op, unsigned lun, uint64_t lba, uint32_t nblocks,
	    void *buf, size_t len, unsigned nseg)
{
	static struct waiter w; /* big: keep it off the stack */
	int rc;

	waiter_prep(&w, op, lun, lba, nblocks, buf, len, nseg);
	if ((rc = waiter_submit(q, &w)))
		return rc;
	waiter_wait(q, &w);
	return w.io.result;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

void pattern_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(mix(seed * 0x9e3779b97f4a7c15ull + ((off + i) >> 3)) >>
				   (((off + i) & 7) * 8));
}

bool pattern_check(const uint8_t *buf, size_t len, uint64_t seed, uint64_t off)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != (uint8_t)(mix(seed * 0x9e3779b97f4a7c15ull + ((off + i) >> 3)) >>
					(((off + i) & 7) * 8)))
			return false;
	return true;
}
