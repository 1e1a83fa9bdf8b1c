/* SPDX-License-Identifier: MIT */
/* The raw limit: the same profile with fio on the same storage: io_uring on the backing
 * file of a file= LUN, fio's rbd engine (librbd) on the image of an rbd= LUN. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench/storage.h"
#include "util/util.h"

/* One option's value out of a backend spec's ",key=value" list into buf ("" if absent). */
static void spec_option(const char *opts, const char *key, char *buf, size_t len)
{
	size_t klen = strlen(key);

	buf[0] = '\0';
	for (const char *o = opts; o && *o; o = strchr(o, ',')) {
		o += *o == ',';
		if (!strncmp(o, key, klen) && o[klen] == '=') {
			snprintf(buf, len, "%.*s", (int)strcspn(o + klen + 1, ","), o + klen + 1);
			return;
		}
	}
}

/* fio's options naming where spec's data is, and what its environment needs: 0, or
 * -ENOTSUP (no fio engine for it). */
static int fio_target(const char *spec, char *buf, size_t len, char *env, size_t envlen)
{
	char what[1024], conf[1024], id[128];
	const char *opts;

	if (strncmp(spec, "file=", 5) && strncmp(spec, "rbd=", 4))
		return -ENOTSUP;
	opts = strchr(spec, ',');
	snprintf(what, sizeof what, "%.*s", (int)strcspn(strchr(spec, '=') + 1, ","),
		 strchr(spec, '=') + 1);
	env[0] = '\0';
	if (spec[0] == 'f') {
		snprintf(buf, len, "--filename='%s' --ioengine=io_uring", what);
		return 0;
	}
	/* rbd=POOL/IMAGE[,conf=PATH][,id=USER]: the engine finds the cluster through $CEPH_CONF. */
	spec_option(opts, "conf", conf, sizeof conf);
	spec_option(opts, "id", id, sizeof id);
	if (conf[0])
		snprintf(env, envlen, "CEPH_CONF='%s' ", conf);
	snprintf(buf, len, "--ioengine=rbd --pool='%.*s' --rbdname='%s' --clientname='%s'",
		 (int)strcspn(what, "/"), what, strchr(what, '/') ? strchr(what, '/') + 1 : "",
		 id[0] ? id : "admin");
	return 0;
}

static uint64_t rusage_ns(const struct rusage *ru)
{
	return ((uint64_t)ru->ru_utime.tv_sec + (uint64_t)ru->ru_stime.tv_sec) * 1000000000ull +
	       ((uint64_t)ru->ru_utime.tv_usec + (uint64_t)ru->ru_stime.tv_usec) * 1000ull;
}

int bench_run_fio(const char *spec, const struct bench_profile *p, bool write, double seconds,
		  struct bench_result *r, char *why, size_t whylen)
{
	char cmd[4096], target[2400], env[1100];
	const char *rw =
	    p->random ? (write ? "randwrite" : "randread") : (write ? "write" : "read");

	if (fio_target(spec, target, sizeof target, env, sizeof env) < 0) {
		snprintf(why, whylen, "fio: no raw limit for '%s' (file= and rbd= only)", spec);
		return -ENOTSUP;
	}
	/* Sequential threads each take their own stretch of the file, as the initiator's do. */
	snprintf(cmd, sizeof cmd,
		 "%sfio --name=vioscope %s --rw=%s --bs=%u "
		 "--iodepth=%u --numjobs=%u --time_based --runtime=%.0f --ramp_time=0 "
		 "--group_reporting --output-format=json --norandommap --randrepeat=0 %s 2>&1",
		 env, target, rw, p->block, p->depth, p->threads, seconds < 1 ? 1 : seconds,
		 p->random ? "" : "--offset_increment=12%");
	/* fio's CPU: what its processes (every thread: librbd's too) used, start-up included. */
	struct rusage ru0, ru1;
	getrusage(RUSAGE_CHILDREN, &ru0);
	/* A job: an interruption reaches fio at once. */
	int fd, pid, rc = vs_job_start(cmd, &fd, &pid);
	if (rc < 0) {
		snprintf(why, whylen, "fio: %s", strerror(-rc));
		return rc;
	}
	size_t cap = 1 << 16, len = 0;
	char *out = malloc(cap);
	ssize_t n;
	while (out && (n = read(fd, out + len, cap - len - 1)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		len += (size_t)n;
		if (len + 1 == cap) {
			char *o = realloc(out, cap *= 2);
			if (!o)
				break;
			out = o;
		}
	}
	close(fd);
	int st = vs_job_wait(pid);
	getrusage(RUSAGE_CHILDREN, &ru1);
	if (!out)
		return -ENOMEM;
	out[len] = '\0';
	const char *sec = strstr(out, write ? "\"write\" :" : "\"read\" :");
	if (st != 0 || !sec) {
		snprintf(why, whylen, "fio failed (is it installed? scripts/deps.sh): %.200s", out);
		free(out);
		return -EIO;
	}
	memset(r, 0, sizeof *r);
	r->idle_cpu = r->cpu_wait = -1;
	snprintf(r->profile, sizeof r->profile, "%s", p->name);
	snprintf(r->rw, sizeof r->rw, "%s", write ? "write" : "read");
	r->mib_s = bench_json_number(sec, "bw_bytes", 0) / (1024.0 * 1024.0);
	r->iops = bench_json_number(sec, "iops", 0);
	const char *lat = strstr(sec, "\"lat_ns\"");
	r->mean_us = lat ? bench_json_number(lat, "mean", 0) / 1000.0 : 0;
	const char *clat = strstr(sec, "\"clat_ns\"");
	if (clat) {
		r->p50_us = bench_json_number(clat, "50.000000", 0) / 1000.0;
		r->p99_us = bench_json_number(clat, "99.000000", 0) / 1000.0;
		r->p999_us = bench_json_number(clat, "99.900000", 0) / 1000.0;
	}
	r->seconds = seconds;
	r->cpu_us = r->target_cpu_us = -1;
	double ios = bench_json_number(sec, "total_ios", 0);
	if (ios > 0)
		r->cpu_us = (double)(rusage_ns(&ru1) - rusage_ns(&ru0)) / 1000.0 / ios;
	free(out);
	return 0;
}
