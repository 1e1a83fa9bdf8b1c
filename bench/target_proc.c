/* SPDX-License-Identifier: MIT */
/* The benchmark's embedded target: a `vioscope target` child of the same flavour. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/storage.h"
#include "tracetools/tracetools.h"
#include "util/util.h"

#define DEFAULT_IMAGE_SIZE (1ull << 30)

int bench_target_start(const char *exe, const char *spec, unsigned queues,
		       const struct bench_opts *o, const char *sock, int *pid, char *why,
		       size_t whylen)
{
	char lun[1100], q[16], ap[16];
	/* --testing: a private target, whose spec may hold delay= (trace analysis) */
	char *argv[16] = {(char *)exe, "target",   "--socket", (char *)sock, "--lun",
			  lun,	       "--queues", q,	       "--testing"};
	int n = 9;

	snprintf(lun, sizeof lun, "0:%s", spec);
	snprintf(q, sizeof q, "%u", queues ? queues : 1);
	if (o->target_poll) {
		/* Polling, one worker: the other core is the initiator's. */
		argv[n++] = "--poll";
		argv[n++] = "--workers";
		argv[n++] = "1";
	} else if (o->adaptive_poll_us >= 0) {
		snprintf(ap, sizeof ap, "%d", o->adaptive_poll_us);
		argv[n++] = "--adaptive-poll";
		argv[n++] = ap;
	}
	argv[n] = NULL;
	return vs_spawn_server(argv, sock, 10000, getenv("VIOSCOPE_BENCH_TARGET_LOG") != NULL, pid,
			       why, whylen);
}

int bench_proc_cpu_ns(int pid, uint64_t *ns)
{
	char path[64];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof path, "/proc/%d/task", pid);
	if (!(d = opendir(path)))
		return -errno;
	*ns = 0;
	while ((e = readdir(d))) {
		char stat[300];
		unsigned long long run = 0;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(stat, sizeof stat, "/proc/%d/task/%s/schedstat", pid, e->d_name);
		if (!(f = fopen(stat, "r")))
			continue; /* the thread just exited */
		if (fscanf(f, "%llu", &run) == 1)
			*ns += run;
		fclose(f);
	}
	closedir(d);
	return 0;
}

/* The target's own bound on a shutdown is its worker timeout (each flush; 30 s by
 * default, docs/TARGET.md): an rbd image's close and librados's shutdown took over 5 s
 * under ASan on a loaded machine, so the bench waits as long as the target may take. */
#define TARGET_STOP_MS 30000

int bench_target_stop(int pid)
{
	int rc = vs_child_stop(pid, SIGTERM, TARGET_STOP_MS);

	/* Ended by a signal (SIGTERM before its handler was in place, or SIGKILL after the
	 * timeout): it could not remove its trace file. */
	if (rc != 0 && (rc >= 128 || rc == -ETIMEDOUT))
		vs_shm_remove_reaped(pid);
	return rc == 0 ? 0 : rc == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
}

/* The image of a run that names none.  VIOSCOPE_BENCH_IMAGE: the user's own, made (and
 * filled) when missing or not 1 GiB, and kept.  Else a 1 GiB file of this run's own in
 * /dev/shm (the figures then measure the stack, not a disk; /var/tmp without /dev/shm):
 * under a name nobody can predict (mkstemp: O_EXCL, 0600, never another user's file or
 * link), written once so that reads hit real data, and named in made[] for the caller to
 * remove when the run ends, however it ends. */
int bench_default_image(char *spec, size_t len, char *made, size_t madelen, char *why,
			size_t whylen)
{
	const char *env = getenv("VIOSCOPE_BENCH_IMAGE");
	char path[512];
	struct stat st;
	int fd;

	made[0] = '\0';
	if (env && *env) {
		snprintf(path, sizeof path, "%s", env);
		if (stat(path, &st) == 0 && (uint64_t)st.st_size == DEFAULT_IMAGE_SIZE)
			goto done;
		fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	} else {
		snprintf(path, sizeof path, "%s/vioscope-bench-%d-XXXXXX.img",
			 stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/var/tmp", (int)getpid());
		fd = mkostemps(path, 4, O_CLOEXEC);
		if (fd >= 0)
			snprintf(made, madelen, "%s", path);
	}
	if (fd < 0)
		return vs_fail(why, whylen, -errno, "%s: %s", path, strerror(errno));
	char *buf = malloc(1 << 20);
	if (!buf) {
		close(fd);
		return vs_fail(why, whylen, -ENOMEM, "out of memory");
	}
	for (uint64_t off = 0; off < DEFAULT_IMAGE_SIZE; off += 1 << 20) {
		int rc = 0;

		for (size_t i = 0; i < (1 << 20); i += 8) {
			uint64_t v = (off + i) * 0x9e3779b97f4a7c15ull;
			memcpy(buf + i, &v, 8);
		}
		if (vs_interrupted())
			rc = vs_fail(why, whylen, -EINTR, "interrupted while writing %s", path);
		else if (pwrite(fd, buf, 1 << 20, (off_t)off) != 1 << 20)
			rc = vs_fail(why, whylen, -EIO, "%s: writing the default image: %s", path,
				     errno ? strerror(errno) : "short write");
		if (rc < 0) {
			free(buf);
			close(fd);
			unlink(path);
			made[0] = '\0';
			return rc;
		}
	}
	free(buf);
	close(fd);
done:
	snprintf(spec, len, "file=%s", path);
	return 0;
}
