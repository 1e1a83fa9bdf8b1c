/* SPDX-License-Identifier: MIT */
/*
 * One profile through the user-space initiator: T threads, each keeping Q requests
 * in flight on its queue (threads share queues round-robin when there are more
 * threads than queues), for a fixed time.  Latency is measured per request from
 * submit to completion callback.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vioscope/initiator.h>

#include "bench/storage.h"
#include "proto/scsi_proto.h"
#include "util/util.h"

/* The end of a run: pollers and completions read stopped; in interrupt mode a worker has
 * nothing to do between its first submissions and the end (completions resubmit from
 * the completion thread), so it sleeps on cond. */
struct run_stop {
	_Atomic bool stopped;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

static void run_stop_set(struct run_stop *rs)
{
	pthread_mutex_lock(&rs->lock);
	atomic_store(&rs->stopped, true);
	pthread_cond_broadcast(&rs->cond);
	pthread_mutex_unlock(&rs->lock);
}

struct worker;
struct slot {
	struct vs_ini_io io;
	struct iovec iov;
	struct worker *w;
};

struct worker {
	pthread_t thread;
	unsigned idx;
	struct vs_ini_queue *q;
	const struct bench_profile *p;
	bool write;
	bool interrupt;
	struct vs_ini_lun lun;
	uint64_t stretch_start, stretch_blocks, next; /* sequential position, in LUN blocks */
	uint64_t rng;
	struct slot *slots;
	struct bench_hist hist;
	uint64_t bytes, ios, errors;
	atomic_uint inflight;
	struct run_stop *stop;
	uint64_t t_end; /* completions after this don't count */
	/* Completions of a shared queue run on whichever thread polls it (or on the
	 * initiator's completion thread): the worker's state is locked. */
	pthread_mutex_t lock;
	int err;
	/* The first request that failed, for the message: its result, status and sense. */
	bool failed;
	int fail_result;
	uint8_t fail_status, fail_sense_len, fail_sense[96];
	/* Polling: this thread's CPU time and time spent waiting for a CPU (runnable, not
	 * running) over the run, from its schedstat (ns). */
	uint64_t run_ns, wait_ns;
};

/* Now: stop counting (the run's end, or the moment it was interrupted). */
static bool counts(const struct worker *w, uint64_t now)
{
	return now <= w->t_end && now <= vs_interrupted_ns();
}

static void pick(struct worker *w, struct vs_ini_io *io)
{
	uint32_t per = w->p->block / w->lun.block_size;
	if (w->p->random) {
		uint64_t slots = w->lun.num_blocks / per;
		io->lba = (vs_xorshift64(&w->rng) % slots) * per;
	} else {
		if (w->next + per > w->stretch_start + w->stretch_blocks)
			w->next = w->stretch_start;
		io->lba = w->next;
		w->next += per;
	}
	io->nblocks = per;
}

static int submit_one(struct slot *s);

static void on_done(struct vs_ini_io *io)
{
	struct slot *s = io->opaque;
	struct worker *w = s->w;
	uint64_t now = vs_mono_ns();
	pthread_mutex_lock(&w->lock);
	if (counts(w, now)) {
		if (io->result == 0) {
			bench_hist_add(&w->hist, now - io->submit_ns);
			w->bytes += w->p->block;
			w->ios++;
		} else {
			if (!w->failed) {
				w->failed = true;
				w->fail_result = io->result;
				w->fail_status = io->scsi_status;
				w->fail_sense_len = io->sense_len < sizeof w->fail_sense
							? io->sense_len
							: (uint8_t)sizeof w->fail_sense;
				memcpy(w->fail_sense, io->sense, w->fail_sense_len);
			}
			w->errors++;
		}
	}
	pthread_mutex_unlock(&w->lock);
	atomic_fetch_sub(&w->inflight, 1);
	if (!atomic_load(&w->stop->stopped))
		submit_one(s);
}

static int submit_one(struct slot *s)
{
	struct worker *w = s->w;
	struct vs_ini_io *io = &s->io;
	memset(io, 0, offsetof(struct vs_ini_io, result));
	io->op = w->write ? VS_INI_WRITE : VS_INI_READ;
	io->lun = 0;
	pthread_mutex_lock(&w->lock);
	pick(w, io);
	pthread_mutex_unlock(&w->lock);
	io->iov = &s->iov;
	io->iovcnt = 1;
	io->done = on_done;
	io->opaque = s;
	io->submit_ns = vs_mono_ns();
	atomic_fetch_add(&w->inflight, 1);
	for (;;) {
		int rc = vs_ini_submit(w->q, io);
		if (rc == 0)
			return 0;
		if (rc != -EBUSY) {
			atomic_fetch_sub(&w->inflight, 1);
			pthread_mutex_lock(&w->lock);
			w->err = rc;
			w->errors++;
			pthread_mutex_unlock(&w->lock);
			return rc;
		}
		/* Queue full (shared with other threads): reap and retry. */
		if (!w->interrupt)
			vs_ini_poll(w->q, 64);
		else
			sched_yield();
	}
}

/* This thread's CPU time and run-queue wait so far (ns): 0 when it cannot be read. */
static void thread_sched(uint64_t *run, uint64_t *wait)
{
	unsigned long long r = 0, q = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "re");

	if (f && fscanf(f, "%llu %llu", &r, &q) != 2)
		r = q = 0;
	if (f)
		fclose(f);
	*run = r;
	*wait = q;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t run0, wait0, run1, wait1;

	thread_sched(&run0, &wait0);
	for (unsigned i = 0; i < w->p->depth; i++)
		if (submit_one(&w->slots[i]) < 0 && w->err != -EBUSY)
			break;
	if (w->interrupt) {
		pthread_mutex_lock(&w->stop->lock);
		while (!atomic_load(&w->stop->stopped))
			pthread_cond_wait(&w->stop->cond, &w->stop->lock);
		pthread_mutex_unlock(&w->stop->lock);
	}
	while (!atomic_load(&w->stop->stopped))
		vs_ini_poll(w->q, 64);
	thread_sched(&run1, &wait1);
	w->run_ns = run1 - run0;
	w->wait_ns = wait1 - wait0;
	/* Drain what is still in flight: requests must finish before buffers go. */
	uint64_t give_up = vs_mono_ns() + 10ull * 1000000000ull;
	while (atomic_load(&w->inflight) && vs_mono_ns() < give_up) {
		if (w->interrupt)
			usleep(100);
		else
			vs_ini_poll(w->q, 64);
	}
	return NULL;
}

/* Connected, nothing in flight, for o->idle_seconds: the share of a CPU the target used. */
static double target_idle_cpu(const struct bench_opts *o)
{
	uint64_t c0, c1, t0 = vs_mono_ns(), t1;

	if (bench_proc_cpu_ns(o->target_pid, &c0) < 0)
		return -1;
	usleep((useconds_t)(o->idle_seconds * 1e6));
	if (bench_proc_cpu_ns(o->target_pid, &c1) < 0)
		return -1;
	t1 = vs_mono_ns();
	return (double)(c1 - c0) / (double)(t1 - t0);
}

bool bench_initiator_interrupt(const struct bench_opts *o, const struct bench_profile *p,
			       const char **why)
{
	(void)p;
	if (o->interrupt) {
		*why = "--interrupt";
		return true;
	}
	if (o->initiator_poll) {
		*why = "--initiator-poll";
		return false;
	}
	/* A backend that answers in hundreds of microseconds (librbd, a network and an OSD):
	 * a polling driver would spin a CPU between completions, a CPU that the backend's
	 * own threads (and, on one host, the OSD) need; fio's rbd engine sleeps too. */
	if (o->target_spec && !strncmp(o->target_spec, "rbd=", 4)) {
		*why = "rbd target: completions are 100s of us apart, polling would spin a CPU";
		return true;
	}
	/* A poller needs a CPU of its own: where other processes want the CPUs (a shared
	 * machine, a build) it spins on the CPU the target needs and the run measures the
	 * load, 3x fewer IOPS and 4x the p99.9 here (docs/PERFORMANCE.md, "The initiator's
	 * completion mode").  Polling is asked for (--initiator-poll), and then a starved
	 * poller is said in the result. */
	*why = "the default; --initiator-poll polls, for a machine with a CPU free for it";
	return true;
}

/* The first failed request in words: "CHECK CONDITION, DATA PROTECT: WRITE PROTECTED
 * (sense 7/27h/00h)", or its errno's name. */
static void describe_failure(char *buf, size_t len, const struct worker *w)
{
	uint8_t key, asc, ascq;

	if (w->fail_result == -EIO && w->fail_status &&
	    vs_scsi_sense_parse(w->fail_sense, w->fail_sense_len, &key, &asc, &ascq)) {
		const char *an = vs_scsi_asc_name(asc, ascq);
		snprintf(buf, len, "%s, %s: %s (sense %x/%02xh/%02xh)",
			 vs_scsi_status_name(w->fail_status), vs_scsi_sense_key_name(key),
			 an ? an : "an additional sense code not in our table", key, asc, ascq);
	} else if (w->fail_result == -EIO && w->fail_status) {
		snprintf(buf, len, "%s, no sense data", vs_scsi_status_name(w->fail_status));
	} else {
		snprintf(buf, len, "%s", strerror(-w->fail_result));
	}
}

/* CPU time so far (ns) of this process (every thread) and of the embedded target (or
 * UINT64_MAX when there is none or it cannot be read). */
static void cpu_sample(const struct bench_opts *o, uint64_t *self, uint64_t *target)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	*self = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (o->target_pid <= 0 || bench_proc_cpu_ns(o->target_pid, target) < 0)
		*target = UINT64_MAX;
}

int bench_run_initiator(const struct bench_opts *o, const struct bench_profile *p,
			struct bench_result *r, char *why, size_t whylen)
{
	const char *mode_why;
	bool interrupt = bench_initiator_interrupt(o, p, &mode_why);
	struct vs_ini_opts io = {
	    .socket = o->socket,
	    .queues = o->queues ? o->queues : (p->threads < 16 ? p->threads : 16),
	    .queue_size = 256,
	    .data_mem = (size_t)p->threads * p->depth * p->block + (16u << 20),
	    .interrupt = interrupt,
	    .dirty_log = o->dirty_log,
	    /* its requests kept across a target restart: reconnecting is part of it */
	    .reconnect = o->keep_inflight,
	    .keep_inflight = o->keep_inflight,
	};
	struct vs_ini *ini;
	if (vs_interrupted())
		return -EINTR;
	int rc = vs_ini_open(&ini, &io);
	if (rc < 0) {
		snprintf(why, whylen, "cannot connect to %s: %s", o->socket, strerror(-rc));
		return rc;
	}
	struct vs_ini_lun lun;
	if (vs_ini_lun_count(ini) == 0 || vs_ini_lun_info(ini, 0, &lun) < 0) {
		snprintf(why, whylen, "the target at %s has no LUN", o->socket);
		vs_ini_close(ini);
		return -ENODEV;
	}
	if (p->block % lun.block_size || (uint64_t)p->block > lun.num_blocks * lun.block_size) {
		snprintf(why, whylen,
			 "block size %u does not fit LUN 0 (%u-byte blocks, %llu blocks)", p->block,
			 lun.block_size, (unsigned long long)lun.num_blocks);
		vs_ini_close(ini);
		return -EINVAL;
	}
	struct run_stop stop = {.lock = PTHREAD_MUTEX_INITIALIZER,
				.cond = PTHREAD_COND_INITIALIZER};
	struct worker *ws = calloc(p->threads, sizeof *ws);
	unsigned nq = vs_ini_queue_count(ini);
	uint64_t per_thread = lun.num_blocks / p->threads;
	for (unsigned t = 0; t < p->threads && ws; t++) {
		struct worker *w = &ws[t];
		w->idx = t;
		w->q = vs_ini_get_queue(ini, t % nq);
		w->p = p;
		w->write = o->write;
		w->interrupt = interrupt;
		w->lun = lun;
		w->stretch_start = per_thread * t;
		w->stretch_blocks = per_thread;
		w->next = w->stretch_start;
		w->rng = 0x9e3779b97f4a7c15ull * (o->seed + t) | 1; /* never 0 */
		w->stop = &stop;
		w->t_end = UINT64_MAX;
		pthread_mutex_init(&w->lock, NULL);
		w->slots = calloc(p->depth, sizeof *w->slots);
		if (!w->slots) {
			rc = -ENOMEM;
			break;
		}
		for (unsigned i = 0; i < p->depth; i++) {
			void *buf = vs_ini_alloc(ini, p->block, 4096);
			if (!buf) {
				snprintf(why, whylen, "out of initiator shared memory");
				rc = -ENOMEM;
				break;
			}
			if (o->write)
				memset(buf, (int)(i + t), p->block);
			w->slots[i].iov = (struct iovec){buf, p->block};
			w->slots[i].w = w;
		}
	}
	if (!ws)
		rc = -ENOMEM;
	if (rc < 0) {
		if (ws)
			for (unsigned t = 0; t < p->threads; t++)
				free(ws[t].slots);
		free(ws);
		vs_ini_close(ini);
		if (rc == -ENOMEM && !why[0])
			snprintf(why, whylen, "out of memory");
		return rc;
	}
	uint64_t cpu0, tcpu0, cpu1, tcpu1;
	/* With --json too (stdout holds the document): whoever waits for the measurement to
	 * begin, to stop it or to load the machine meanwhile, sees it begin. */
	if (!o->json || !o->quiet)
		fprintf(stderr, "%s: the initiator %s (%s); measuring %.1f s, seed %llu\n", p->name,
			interrupt ? "takes completions by interrupt" : "polls", mode_why,
			o->seconds, (unsigned long long)o->seed);
	cpu_sample(o, &cpu0, &tcpu0);
	uint64_t t0 = vs_mono_ns(), t_end = t0 + (uint64_t)(o->seconds * 1e9);
	for (unsigned t = 0; t < p->threads; t++) {
		ws[t].t_end = t_end;
		pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]);
	}
	while (vs_mono_ns() < t_end && !vs_interrupted()) {
		usleep(100000); /* a signal cuts it short */
		if (o->progress) {
			uint64_t bytes = 0;
			for (unsigned t = 0; t < p->threads; t++)
				bytes += ws[t].bytes;
			double el = (double)(vs_mono_ns() - t0) / 1e9;
			fprintf(stderr, "\r  %-14s %-5s %4.1f/%.1f s %10.1f MiB/s   ", p->name,
				o->write ? "write" : "read", el, o->seconds,
				(double)bytes / (1024.0 * 1024.0) / el);
		}
	}
	cpu_sample(o, &cpu1, &tcpu1);
	run_stop_set(&stop);
	memset(r, 0, sizeof *r);
	/* Interrupted: what completed before the signal, over the time until it came. */
	uint64_t t_stop = vs_interrupted_ns() < t_end ? vs_interrupted_ns() : t_end;
	r->interrupted = t_stop < t_end;
	struct bench_hist *h = calloc(1, sizeof *h);
	const struct worker *first_fail = NULL;
	uint64_t run_ns = 0, wait_ns = 0;
	for (unsigned t = 0; t < p->threads; t++) {
		pthread_join(ws[t].thread, NULL);
		if (h)
			bench_hist_merge(h, &ws[t].hist);
		r->errors += ws[t].errors;
		r->mib_s += (double)ws[t].bytes;
		r->iops += (double)ws[t].ios;
		run_ns += ws[t].run_ns;
		wait_ns += ws[t].wait_ns;
		if (ws[t].failed && !first_fail)
			first_fail = &ws[t];
		if (ws[t].err && ws[t].err != -EBUSY && !why[0])
			snprintf(why, whylen, "submit failed: %s", strerror(-ws[t].err));
	}
	if (o->progress)
		fprintf(stderr, "\r%70s\r", "");
	double secs = t_stop > t0 ? (double)(t_stop - t0) / 1e9 : 1e-9;
	snprintf(r->profile, sizeof r->profile, "%s", p->name);
	snprintf(r->rw, sizeof r->rw, "%s", o->write ? "write" : "read");
	r->mib_s = r->mib_s / (1024.0 * 1024.0) / secs;
	r->cpu_us = r->target_cpu_us = -1;
	if (r->iops > 0) {
		r->cpu_us = (double)(cpu1 - cpu0) / 1000.0 / r->iops;
		if (tcpu0 != UINT64_MAX && tcpu1 != UINT64_MAX)
			r->target_cpu_us = (double)(tcpu1 - tcpu0) / 1000.0 / r->iops;
	}
	r->interrupt = interrupt;
	r->cpu_wait =
	    !interrupt && run_ns + wait_ns ? (double)wait_ns / (double)(run_ns + wait_ns) : -1;
	r->starved = r->cpu_wait >= BENCH_STARVED;
	r->iops /= secs;
	r->seconds = secs;
	if (h) {
		r->mean_us = bench_hist_mean_us(h);
		r->p50_us = bench_hist_percentile_us(h, 50);
		r->p99_us = bench_hist_percentile_us(h, 99);
		r->p999_us = bench_hist_percentile_us(h, 99.9);
		free(h);
	}
	if (first_fail) {
		char what[200];
		describe_failure(what, sizeof what, first_fail);
		snprintf(r->failure, sizeof r->failure, "%s", what);
	} else if (why[0]) {
		snprintf(r->failure, sizeof r->failure, "%s", why);
	}
	for (unsigned t = 0; t < p->threads; t++)
		free(ws[t].slots);
	free(ws);
	r->idle_cpu = -1;
	if (o->idle_seconds > 0 && o->target_pid > 0) {
		r->idle_cpu = target_idle_cpu(o);
		r->seconds_idle = o->idle_seconds;
	}
	vs_ini_close(ini);
	why[0] = '\0'; /* it ran: what failed is in r->errors and r->failure */
	return 0;
}
