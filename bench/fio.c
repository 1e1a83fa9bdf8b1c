/* SPDX-License-Identifier: MIT */
/* The raw limit: the same profile with fio (io_uring) on the same backing file. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/storage.h"

int bench_run_fio(const char *file, const struct bench_profile *p, bool write, double seconds,
		  struct bench_result *r, char *why, size_t whylen)
{
	char cmd[2048];
	const char *rw = p->random ? (write ? "randwrite" : "randread") : (write ? "write" : "read");
	/* Sequential threads each take their own stretch of the file, as the initiator's do. */
	snprintf(cmd, sizeof cmd,
		 "fio --name=vioscope --filename='%s' --ioengine=io_uring --rw=%s --bs=%u "
		 "--iodepth=%u --numjobs=%u --time_based --runtime=%.0f --ramp_time=0 "
		 "--group_reporting --output-format=json --norandommap --randrepeat=0 %s 2>&1",
		 file, rw, p->block, p->depth, p->threads, seconds < 1 ? 1 : seconds,
		 p->random ? "" : "--offset_increment=12%");
	FILE *f = popen(cmd, "r");
	if (!f) {
		snprintf(why, whylen, "fio: %s", strerror(errno));
		return -errno;
	}
	size_t cap = 1 << 16, len = 0;
	char *out = malloc(cap);
	size_t n;
	while (out && (n = fread(out + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (len + 1 == cap) {
			char *o = realloc(out, cap *= 2);
			if (!o)
				break;
			out = o;
		}
	}
	int st = pclose(f);
	if (!out)
		return -ENOMEM;
	out[len] = '\0';
	const char *sec = strstr(out, write ? "\"write\" :" : "\"read\" :");
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !sec) {
		snprintf(why, whylen, "fio failed (is it installed? scripts/deps.sh): %.200s", out);
		free(out);
		return -EIO;
	}
	memset(r, 0, sizeof *r);
	r->idle_cpu = -1;
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
	free(out);
	return 0;
}
