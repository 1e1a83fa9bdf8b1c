/* SPDX-License-Identifier: MIT */
/*
 * `vioscope check stress`: the Disk Stress of the seed driver, with both sides ours.  A
 * target child on a file LUN (a real file system, so its data outlives the process), the
 * initiator with reconnection, and the verification engine's traffic (reads, writes,
 * flushes, unmaps on every queue at changing depths) while a disruptor thread keeps doing,
 * at random: ABORT TASK storms on requests in flight, LUN RESET storms, memory-table
 * changes (the shared memory described again as 1-4 regions), and the target killed with
 * SIGKILL and restarted.  One request in eight is held 2 ms at the backend (its delay
 * option) so that aborts and resets find requests in flight.
 *
 * Invariants: every request completes exactly once, with success or one of the defined
 * errors (aborted, reset, not connected, timed out); no sector ever reads wrong (the
 * engine's self-describing blocks, and a full read-back at the end); no request hangs (the
 * engine's watchdog names it and its stage); our open files and anonymous memory, and the
 * target's open files across memory-table changes, stay where they were.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vioscope/initiator.h>

#include "check/check_int.h"
#include "util/util.h"

#define DEFAULT_SIZE	(256ull << 20)
#define RECONNECT_LIMIT 20 /* seconds for the initiator to come back after a restart */
#define FD_SLACK	2
#define ANON_SLACK_MIB	32

struct stress {
	struct eng e;
	struct port_ini pi;
	struct child_target child;
	const struct vs_check_io_opts *o;
	FILE *out;
	char dir[512], img[600], sock[600], spec[700];
	pthread_t disruptor;
	atomic_bool stop; /* no more disruptions */
	atomic_bool idle; /* the disruptor stopped disrupting */
	atomic_bool quit; /* the disruptor thread ends: it started the target child, and the
			     child is told to go when that thread ends (PDEATHSIG) */
	uint64_t rng;
	/* what the disruptor did */
	uint64_t abort_storms, aborts_sent, aborts_missed, reset_storms, resets, reset_failed;
	uint64_t remaps, remap_failed, restarts, kills;
	int target_fds[9]; /* per region count: the target's open files after a remap */
	bool failed_restart;
	char why[512];
};

static int count_fds(int pid)
{
	char path[64];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	if (!(dir = opendir(path)))
		return -1;
	while ((d = readdir(dir)))
		n += d->d_name[0] != '.';
	closedir(dir);
	return n - (pid == getpid()); /* opendir's own */
}

static long anon_kib(int pid)
{
	char path[64], line[256];
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "re")))
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "RssAnon: %ld", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

static void nap_ms(struct stress *s, unsigned ms)
{
	for (unsigned i = 0; i < ms / 10 && !atomic_load(&s->stop); i++)
		usleep(10000);
}

/* ABORT TASK on a burst of requests in flight (whatever they are when it arrives). */
static void abort_storm(struct stress *s)
{
	struct eng *e = &s->e;
	unsigned n = 8 + (unsigned)(vs_xorshift64(&s->rng) % 25);

	s->abort_storms++;
	for (unsigned i = 0; i < n; i++) {
		struct eng_thread *t = &e->th[vs_xorshift64(&s->rng) % e->nthreads];
		struct eng_req *r = &t->reqs[vs_xorshift64(&s->rng) % e->max_depth];
		int rc;

		if (atomic_load(&r->stage) != ST_IN_FLIGHT)
			continue;
		rc = port_ini_abort(&s->pi, r);
		if (rc == 0)
			s->aborts_sent++;
		else if (rc == -ENOENT)
			s->aborts_missed++;
	}
}

static void reset_storm(struct stress *s)
{
	unsigned n = 1 + (unsigned)(vs_xorshift64(&s->rng) % 4);

	s->reset_storms++;
	for (unsigned i = 0; i < n; i++) {
		int rc = vs_ini_lun_reset(s->pi.ini, s->pi.lun);

		s->resets++;
		if (rc && rc != -ENOTCONN)
			s->reset_failed++;
	}
}

static void remap(struct stress *s)
{
	unsigned regions = 1 + (unsigned)(vs_xorshift64(&s->rng) % 4);
	int rc = vs_ini_remap_memory(s->pi.ini, regions), fds;

	if (rc) {
		s->remap_failed += rc != -ENOTCONN;
		return;
	}
	s->remaps++;
	fds = count_fds(s->child.pid);
	if (fds < 0)
		return;
	if (!s->target_fds[regions])
		s->target_fds[regions] = fds;
	else if (fds > s->target_fds[regions] + FD_SLACK)
		eng_error(&s->e, E_LEAK,
			  "the target has %d open files after a memory table of %u regions, %d "
			  "the first time",
			  fds, regions, s->target_fds[regions]);
}

static bool reconnected(struct stress *s, unsigned before)
{
	uint64_t end = vs_mono_ns() + RECONNECT_LIMIT * 1000000000ull;

	while (vs_ini_connections(s->pi.ini) <= before) {
		if (vs_mono_ns() > end || vs_interrupted())
			return false;
		usleep(2000);
	}
	return true;
}

static void restart(struct stress *s)
{
	unsigned before = vs_ini_connections(s->pi.ini);

	child_target_stop(&s->child, SIGKILL);
	s->kills++;
	memset(s->target_fds, 0, sizeof(s->target_fds)); /* a new process */
	nap_ms(s, 20 + (unsigned)(vs_xorshift64(&s->rng) % 200));
	if (child_target_start(&s->child, s->o->exe, s->sock, s->spec,
			       s->o->queues ? s->o->queues : 2, s->why, sizeof(s->why)) < 0) {
		s->failed_restart = true;
		if (!vs_interrupted()) /* else it was told to stop as it started */
			eng_error(&s->e, E_IO, "the target did not start again: %s", s->why);
		atomic_store(&s->e.stop, true);
		return;
	}
	if (!reconnected(s, before)) {
		if (!vs_interrupted())
			eng_error(&s->e, E_HANG,
				  "the initiator did not reconnect within %u s of a restart",
				  RECONNECT_LIMIT);
		atomic_store(&s->e.stop, true);
		return;
	}
	s->restarts++;
}

static uint64_t requests(const uint64_t ops[ENG_OPS])
{
	return ops[ENG_READ] + ops[ENG_WRITE] + ops[ENG_FLUSH] + ops[ENG_UNMAP];
}

static void progress(struct stress *s)
{
	uint64_t ops[ENG_OPS], bytes[ENG_OPS], res[RES_COUNT], sect;

	eng_totals(&s->e, ops, bytes, res, &sect);
	fprintf(s->out,
		"  %5.0f s: %llu requests, %llu LUN resets, %llu aborts, %llu restarts, "
		"%llu remaps, %llu errors\n",
		eng_elapsed(&s->e), (unsigned long long)requests(ops),
		(unsigned long long)s->resets, (unsigned long long)s->aborts_sent,
		(unsigned long long)s->restarts, (unsigned long long)s->remaps,
		(unsigned long long)eng_errors(&s->e));
	fflush(s->out);
}

static void *disruptor_main(void *arg)
{
	struct stress *s = arg;
	uint64_t last_kill = 0, last_progress = vs_mono_ns();
	/* Every kind once first (a short run has them all), then at random. */
	static const unsigned first[] = {10, 50, 70, 90};
	unsigned round = 0;

	while (!atomic_load(&s->stop)) {
		unsigned dice = round < 4 ? first[round] : (unsigned)(vs_xorshift64(&s->rng) % 100);
		uint64_t now;

		round++;
		nap_ms(s, 30 + (unsigned)(vs_xorshift64(&s->rng) % 250));
		if (atomic_load(&s->stop))
			break;
		now = vs_mono_ns();
		if (dice < 40)
			abort_storm(s);
		else if (dice < 65)
			reset_storm(s);
		else if (dice < 85)
			remap(s);
		else if (!last_kill || now - last_kill > 2000000000ull) {
			restart(s);
			last_kill = vs_mono_ns();
		}
		if (now - last_progress > 30000000000ull) {
			progress(s);
			last_progress = now;
		}
	}
	atomic_store(&s->idle, true);
	while (!atomic_load(&s->quit))
		usleep(10000);
	return NULL;
}

static int setup(struct stress *s, char *why, size_t whylen)
{
	const struct vs_check_io_opts *o = s->o;
	uint64_t size = o->size ? o->size : DEFAULT_SIZE;
	unsigned queues = o->queues ? o->queues : 2;
	int fd, rc;

	snprintf(s->dir, sizeof(s->dir), "%s/vs-stress-XXXXXX", o->dir ? o->dir : "/var/tmp");
	if (!mkdtemp(s->dir)) {
		rc = vs_fail(why, whylen, -errno, "mkdtemp %s: %s", s->dir, strerror(errno));
		s->dir[0] = 0;
		return rc;
	}
	snprintf(s->img, sizeof(s->img), "%s/lun0.img", s->dir);
	snprintf(s->sock, sizeof(s->sock), "%s/target.sock", s->dir);
	snprintf(s->spec, sizeof(s->spec), "file=%s,delay=2000,delay-every=8", s->img);
	fd = open(s->img, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
		rc = vs_fail(why, whylen, -errno, "%s: %s", s->img, strerror(errno));
		if (fd >= 0)
			close(fd);
		return rc;
	}
	close(fd);
	if ((rc = child_target_start(&s->child, o->exe, s->sock, s->spec, queues, why, whylen)) < 0)
		return rc;
	if ((rc = port_ini_open(&s->pi, s->sock, queues, 0, o->max_depth ? o->max_depth : 32, true,
				why, whylen)) < 0)
		return rc;
	rc = eng_init(&s->e, &eng_port_ini, &s->pi, s->pi.blocks * s->pi.block, s->pi.block,
		      vs_ini_queue_count(s->pi.ini), o, true, why, whylen);
	s->e.can_unmap = s->pi.thin;
	return rc;
}

static void summary(struct stress *s, int fds0, int fds1, long anon0, long anon1)
{
	uint64_t ops[ENG_OPS], bytes[ENG_OPS], res[RES_COUNT], sect;

	eng_totals(&s->e, ops, bytes, res, &sect);
	fprintf(s->out,
		"  requests  %llu: %llu reads, %llu writes, %llu flushes, %llu unmaps "
		"(%.0f MiB moved)\n",
		(unsigned long long)requests(ops), (unsigned long long)ops[ENG_READ],
		(unsigned long long)ops[ENG_WRITE], (unsigned long long)ops[ENG_FLUSH],
		(unsigned long long)ops[ENG_UNMAP],
		(double)(bytes[ENG_READ] + bytes[ENG_WRITE]) / (1 << 20));
	fprintf(s->out, "  ended     ");
	for (unsigned k = 0; k < RES_COUNT; k++)
		fprintf(s->out, "%s%s %llu", k ? ", " : "", eng_res_name(k),
			(unsigned long long)res[k]);
	fprintf(s->out, "; %llu refused while the target was away",
		(unsigned long long)eng_refused(&s->e));
	fprintf(s->out,
		"\n  resets    %llu LUN resets in %llu storms (%llu failed), %llu ABORT "
		"TASK sent in %llu storms (%llu found nothing in flight)\n",
		(unsigned long long)s->resets, (unsigned long long)s->reset_storms,
		(unsigned long long)s->reset_failed, (unsigned long long)s->aborts_sent,
		(unsigned long long)s->abort_storms, (unsigned long long)s->aborts_missed);
	fprintf(s->out,
		"  restarts  target killed %llu times, restarted and reconnected %llu; "
		"%llu memory-table changes (%llu refused)\n",
		(unsigned long long)s->kills, (unsigned long long)s->restarts,
		(unsigned long long)s->remaps, (unsigned long long)s->remap_failed);
	fprintf(s->out, "  verified  %llu sectors (%.0f MiB), every one as expected%s\n",
		(unsigned long long)sect, (double)sect * VS_VB_SECTOR / (1 << 20),
		s->e.err[E_LOST] + s->e.err[E_STALE] + s->e.err[E_MISDIRECTED] + s->e.err[E_TORN] +
			s->e.err[E_PHANTOM]
		    ? " but the errors below"
		    : "");
	fprintf(s->out,
		"  resources our open files %d -> %d, our anonymous memory %ld -> %ld "
		"KiB\n",
		fds0, fds1, anon0, anon1);
}

int vs_check_stress(const struct vs_check_io_opts *o, char *why, size_t whylen)
{
	struct stress *s = calloc(1, sizeof(*s));
	int rc, fds0 = -1, fds1 = -1;
	long anon0 = -1, anon1 = -1;
	bool engine = false, disruptor = false;

	if (!s)
		return vs_fail(why, whylen, -ENOMEM, "out of memory");
	s->o = o;
	s->out = o->out ? o->out : stdout;
	s->child.pid = -1;
	rc = setup(s, why, whylen);
	engine = s->e.th != NULL;
	if (rc < 0)
		goto out;
	/* The disruptions from the run's seed too: --seed repeats them. */
	s->rng = s->e.seed * 0x9e3779b97f4a7c15ull | 1;
	fprintf(s->out,
		"vioscope check stress: %.0f s on a %llu MiB file LUN (%s), %u queues, "
		"depths 1..%u; aborts, LUN resets, target kills, memory-table changes\n",
		o->seconds, (unsigned long long)(s->e.nsect * VS_VB_SECTOR >> 20), s->img,
		s->e.nthreads, s->e.max_depth);
	fds0 = count_fds(getpid());
	anon0 = anon_kib(getpid());
	if ((rc = -pthread_create(&s->disruptor, NULL, disruptor_main, s)) < 0) {
		vs_fail(why, whylen, rc, "pthread_create: %s", strerror(-rc));
		goto out;
	}
	disruptor = true;
	rc = eng_run(&s->e, o->seconds, why, whylen);
	atomic_store(&s->stop, true);
	while (!atomic_load(&s->idle)) /* its last action done (a restart: reconnected) */
		usleep(1000);
	if (rc < 0)
		goto out;
	if (!s->failed_restart && !vs_interrupted() && (rc = eng_readback(&s->e, why, whylen)) < 0)
		goto out;
	fds1 = count_fds(getpid());
	anon1 = anon_kib(getpid());
	if (fds1 > fds0 + FD_SLACK && !vs_interrupted())
		eng_error(&s->e, E_LEAK, "our open files grew from %d to %d", fds0, fds1);
	if (anon1 > anon0 + ANON_SLACK_MIB * 1024 && !vs_interrupted())
		eng_error(&s->e, E_LEAK, "our anonymous memory grew from %ld to %ld KiB", anon0,
			  anon1);
	summary(s, fds0, fds1, anon0, anon1);
	rc = 0;
out:
	atomic_store(&s->stop, true);
	if (s->pi.ini)
		port_ini_close(&s->pi);
	if (s->child.pid > 0) {
		int st = child_target_stop(&s->child, SIGTERM);

		if (st != 0 && rc >= 0 && engine && !vs_interrupted())
			eng_error(&s->e, E_IO, "the target exited with status %d after SIGTERM",
				  st);
	}
	if (disruptor) {
		atomic_store(&s->quit, true);
		pthread_join(s->disruptor, NULL);
	}
	if (rc >= 0 && engine) {
		if (eng_errors(&s->e)) {
			fprintf(s->out, "  errors:\n");
			eng_print_errors(&s->e, s->out);
			rc = 1;
		}
		if (vs_interrupted()) {
			fprintf(s->out,
				"INTERRUPTED by %s at %.1f s: the read-back of every sector and "
				"the leak checks were not done; seed %llu (--seed to repeat)\n",
				vs_signal_name(vs_interrupted()), eng_elapsed(&s->e),
				(unsigned long long)s->e.seed);
		} else if (rc == 1) {
			fprintf(s->out, "FAIL: %llu errors\n",
				(unsigned long long)eng_errors(&s->e));
		} else {
			fprintf(s->out, "PASS: every request completed once, every sector as "
					"written, nothing leaked\n");
		}
	}
	if (engine)
		eng_fini(&s->e);
	if (s->dir[0]) {
		unlink(s->img);
		unlink(s->sock);
		rmdir(s->dir);
	}
	free(s);
	return rc;
}
