/* SPDX-License-Identifier: MIT */
/*
 * `vioscope check flush`: every crash state a write log allows, instead of a few pulled
 * plugs.  The log (dm-log-writes format, wlog_read.c) lists writes in the order they became
 * durable, with a FLUSH entry where everything before it is durable and FUA writes durable
 * by themselves.  So the states a crash may leave are:
 *   - the base image with the log replayed up to each FLUSH or FUA entry (and before the
 *     first entry): what a crash right after that point must keep;
 *   - each of those plus any subset of the writes logged after it, up to the next such
 *     entry: what a device with a volatile write cache may also have kept.  All subsets
 *     when there are few, else --subsets random ones.
 * Each state is copied (sparsely) to its own image and the user's commands run on it
 * (fsck first, then verify; the path is their last argument): both must exit 0.  The first
 * state that fails stops the run, with the writes that led to it.
 *
 * One work image is replayed forward once; a subset is applied on top of it with its
 * previous content saved in an undo file, and undone after.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check/check_int.h"
#include "proto/logwrites_proto.h"
#include "util/util.h"

#define CMD_TIMEOUT_S 600
#define EXHAUSTIVE    16 /* up to this many unflushed writes, every subset when N allows */

struct flush_run {
	const struct vs_check_flush_opts *o;
	FILE *out;
	struct lw_log log;
	uint64_t size; /* of the base image */
	char dir[512], work[600], state[600], undo[600], output[600];
	int work_fd, undo_fd;
	uint8_t *buf;
	size_t buflen;
	uint64_t *undo_at; /* undo records in the undo file, oldest first */
	uint64_t undo_n;
	uint64_t applied; /* entries replayed into the work image */
	uint64_t states, points, subsets;
	uint64_t rng;
	/* the state being checked, for the report */
	const uint64_t *subset;
	unsigned subset_n;
};

static int copy_data(int from, int to, uint64_t off, uint64_t len, uint8_t *buf, size_t buflen)
{
	while (len) {
		size_t n = len < buflen ? (size_t)len : buflen;
		ssize_t r = pread(from, buf, n, (off_t)off);

		if (r <= 0)
			return r < 0 ? -errno : -EIO;
		if (pwrite(to, buf, (size_t)r, (off_t)off) != r)
			return -errno ? -errno : -EIO;
		off += (uint64_t)r;
		len -= (uint64_t)r;
	}
	return 0;
}

/* dst becomes a sparse copy of src (size bytes): only the data ranges are copied. */
static int sparse_copy(int src, const char *dst_path, uint64_t size, uint8_t *buf, size_t buflen)
{
	int dst = open(dst_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600), rc = 0;
	off_t data = 0, hole;

	if (dst < 0)
		return -errno;
	if (ftruncate(dst, (off_t)size) < 0) {
		rc = -errno;
		goto out;
	}
	while ((data = lseek(src, data, SEEK_DATA)) >= 0 && (uint64_t)data < size) {
		hole = lseek(src, data, SEEK_HOLE);
		if (hole < 0)
			hole = (off_t)size;
		if ((rc =
			 copy_data(src, dst, (uint64_t)data, (uint64_t)(hole - data), buf, buflen)))
			break;
		data = hole;
	}
out:
	close(dst);
	return rc;
}

static int zero_range(int fd, uint64_t off, uint64_t len, uint8_t *buf, size_t buflen)
{
	if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off, (off_t)len) == 0)
		return 0;
	memset(buf, 0, buflen);
	while (len) {
		size_t n = len < buflen ? (size_t)len : buflen;

		if (pwrite(fd, buf, n, (off_t)off) != (ssize_t)n)
			return -EIO;
		off += n;
		len -= n;
	}
	return 0;
}

/* Replay entry i onto the work image; with undo, save what it replaces first (its offset,
 * length and old bytes appended to the undo file). */
static int apply(struct flush_run *f, uint64_t i, bool undo)
{
	const struct lw_entry *e = &f->log.e[i];
	uint64_t off = e->sector * f->log.sectorsize, len = e->nr_sectors * f->log.sectorsize;

	if ((e->flags & VS_LW_MARK) || !len)
		return 0;
	if (undo) {
		uint64_t hdr[2] = {off, len};
		off_t at = lseek(f->undo_fd, 0, SEEK_END);

		if (at < 0 || pwrite(f->undo_fd, hdr, sizeof(hdr), at) != sizeof(hdr))
			return -EIO;
		f->undo_at[f->undo_n++] = (uint64_t)at;
		for (uint64_t done = 0; done < len;) {
			size_t n = len - done < f->buflen ? (size_t)(len - done) : f->buflen;

			if (pread(f->work_fd, f->buf, n, (off_t)(off + done)) != (ssize_t)n ||
			    pwrite(f->undo_fd, f->buf, n, at + (off_t)sizeof(hdr) + (off_t)done) !=
				(ssize_t)n)
				return -EIO;
			done += n;
		}
	}
	if (e->flags & VS_LW_DISCARD)
		return zero_range(f->work_fd, off, len, f->buf, f->buflen);
	for (uint64_t done = 0; done < len;) {
		size_t n = len - done < f->buflen ? (size_t)(len - done) : f->buflen;

		if (pread(f->log.fd, f->buf, n, (off_t)(e->data_off + done)) != (ssize_t)n ||
		    pwrite(f->work_fd, f->buf, n, (off_t)(off + done)) != (ssize_t)n)
			return -EIO;
		done += n;
	}
	return 0;
}

/* Put back, newest first, what the undo file saved; empty it. */
static int undo_all(struct flush_run *f)
{
	while (f->undo_n) {
		uint64_t hdr[2], at = f->undo_at[--f->undo_n];

		if (pread(f->undo_fd, hdr, sizeof(hdr), (off_t)at) != sizeof(hdr))
			return -EIO;
		for (uint64_t done = 0; done < hdr[1];) {
			size_t k = hdr[1] - done < f->buflen ? (size_t)(hdr[1] - done) : f->buflen;

			if (pread(f->undo_fd, f->buf, k, (off_t)(at + sizeof(hdr) + done)) !=
				(ssize_t)k ||
			    pwrite(f->work_fd, f->buf, k, (off_t)(hdr[0] + done)) != (ssize_t)k)
				return -EIO;
			done += k;
		}
	}
	return ftruncate(f->undo_fd, 0) < 0 ? -errno : 0;
}

/* Run one command on the state image: its exit status (output kept in f->output). */
static int run_cmd(struct flush_run *f, const char *cmd)
{
	char script[4200];
	uint64_t end = vs_mono_ns() + CMD_TIMEOUT_S * 1000000000ull;
	int status, fd;
	pid_t p;

	snprintf(script, sizeof(script), "%s \"$1\"", cmd);
	fd = open(f->output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	p = fork();
	if (p == 0) {
		int devnull = open("/dev/null", O_RDONLY);

		setpgid(0, 0); /* a group of its own, that an interruption reaches whole */
		dup2(devnull, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		setenv("VIOSCOPE_CRASH_IMAGE", f->state, 1);
		execl("/bin/sh", "sh", "-c", script, "sh", f->state, (char *)NULL);
		_exit(127);
	}
	close(fd);
	if (p < 0)
		return -errno;
	setpgid(p, p);
	vs_interrupt_pass(-p);
	for (;;) {
		pid_t r = waitpid(p, &status, WNOHANG);

		if (r == p) {
			vs_interrupt_pass_end(-p);
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		if (vs_mono_ns() > end) {
			kill(-p, SIGKILL);
			waitpid(p, &status, 0);
			vs_interrupt_pass_end(-p);
			return 124;
		}
		usleep(r == 0 ? 1000 : 0);
	}
}

static void report(struct flush_run *f, uint64_t upto, const char *cmd, int status)
{
	char d[160], line[512];
	uint64_t first = upto > 20 ? upto - 20 : 0;
	FILE *o;

	fprintf(f->out, "FAIL: crash state %llu: `%s` exited %d\n", (unsigned long long)f->states,
		cmd, status);
	if (upto)
		fprintf(f->out, "  the state: the base image with the log replayed through %s",
			lw_describe(&f->log, upto - 1, d, sizeof(d)));
	else
		fprintf(f->out, "  the state: the base image");
	if (f->subset_n) {
		fprintf(f->out, ", then of the writes after it only");
		for (unsigned i = 0; i < f->subset_n; i++)
			fprintf(f->out, " #%llu", (unsigned long long)f->subset[i]);
	}
	fprintf(f->out, "\n  the write sequence that led there%s:\n",
		first ? " (the last 20 before it)" : "");
	for (uint64_t i = first; i < upto; i++)
		fprintf(f->out, "    %s\n", lw_describe(&f->log, i, d, sizeof(d)));
	for (unsigned i = 0; i < f->subset_n; i++)
		fprintf(f->out, "    %s   (unflushed, kept by the crash)\n",
			lw_describe(&f->log, f->subset[i], d, sizeof(d)));
	fprintf(f->out, "  what `%s` said (last lines):\n", cmd);
	if ((o = fopen(f->output, "re"))) {
		char *lines[20] = {0};
		unsigned n = 0;

		while (fgets(line, sizeof(line), o)) {
			free(lines[n % 20]);
			lines[n % 20] = strdup(line);
			n++;
		}
		for (unsigned i = n > 20 ? n - 20 : 0; i < n; i++) {
			fprintf(f->out, "    | %s", lines[i % 20] ? lines[i % 20] : "\n");
			free(lines[i % 20]);
		}
		fclose(o);
	}
}

/* Check the work image as it stands: copy it, run the commands.  0 passed, 1 failed. */
static int check_state(struct flush_run *f, uint64_t upto)
{
	const char *cmds[2] = {f->o->fsck, f->o->verify};
	int rc;

	if (vs_interrupted())
		return -EINTR;
	f->states++;
	if ((rc = sparse_copy(f->work_fd, f->state, f->size, f->buf, f->buflen)) < 0)
		return rc;
	for (unsigned i = 0; i < 2; i++) {
		if (!cmds[i])
			continue;
		if ((rc = run_cmd(f, cmds[i])) < 0)
			return rc;
		if (vs_interrupted()) { /* its verdict may be the signal's */
			f->states--;
			return -EINTR;
		}
		if (rc) {
			report(f, upto, cmds[i], rc);
			return 1;
		}
	}
	return 0;
}

/* The states of the writes after the point `upto` (entries cand[0..n)): subsets. */
static int check_subsets(struct flush_run *f, uint64_t upto, const uint64_t *cand, unsigned n)
{
	uint64_t *chosen = NULL, tries, all = 0;
	bool exhaustive = n <= EXHAUSTIVE && (1ull << n) - 2 <= f->o->subsets;
	int rc = 0;

	if (n < 2 || !f->o->subsets)
		return 0;
	chosen = malloc(sizeof(*chosen) * n);
	if (!chosen)
		return -ENOMEM;
	tries = exhaustive ? (1ull << n) - 2 : f->o->subsets;
	for (uint64_t t = 0; t < tries && !rc; t++) {
		unsigned k = 0;

		if (exhaustive) {
			all = t + 1; /* 1 .. 2^n - 2: neither none nor all */
			for (unsigned i = 0; i < n; i++)
				if (all & (1ull << i))
					chosen[k++] = cand[i];
		} else {
			while (k == 0 || k == n) {
				k = 0;
				for (unsigned i = 0; i < n; i++)
					if (vs_xorshift64(&f->rng) & 1)
						chosen[k++] = cand[i];
			}
		}
		for (unsigned i = 0; i < k && !rc; i++)
			rc = apply(f, chosen[i], true);
		if (!rc) {
			f->subset = chosen;
			f->subset_n = k;
			f->subsets++;
			rc = check_state(f, upto);
			f->subset_n = 0;
		}
		if (undo_all(f) < 0 && !rc)
			rc = -EIO;
	}
	free(chosen);
	return rc;
}

static bool is_point(const struct lw_entry *e)
{
	return e->flags & (VS_LW_FLUSH | VS_LW_FUA);
}

static int run(struct flush_run *f)
{
	uint64_t *cand = malloc(sizeof(*cand) * (f->log.n + 1));
	uint64_t upto = 0;
	int rc = 0;

	if (!cand)
		return -ENOMEM;
	for (;;) {
		uint64_t next = upto;
		unsigned n = 0;

		/* The point: the base image, or the log replayed through a FLUSH/FUA entry. */
		f->points++;
		if ((rc = check_state(f, upto)))
			break;
		/* What may have survived besides: the writes up to the next point (that one's
		 * own data included: a FUA write in flight may or may not be there). */
		while (next < f->log.n && !is_point(&f->log.e[next]))
			next++;
		for (uint64_t i = upto; i <= next && i < f->log.n; i++)
			if (!(f->log.e[i].flags & VS_LW_MARK) && f->log.e[i].nr_sectors)
				cand[n++] = i;
		if ((rc = check_subsets(f, upto, cand, n)))
			break;
		if (next >= f->log.n)
			break;
		for (; upto <= next; upto++)
			if ((rc = apply(f, upto, false)) < 0)
				goto out;
	}
out:
	free(cand);
	return rc;
}

int vs_check_flush(const struct vs_check_flush_opts *o, char *why, size_t whylen)
{
	struct flush_run f = {
	    .o = o, .out = o->out ? o->out : stdout, .work_fd = -1, .undo_fd = -1};
	const char *tmp = o->workdir ? o->workdir : getenv("TMPDIR");
	uint64_t seed = o->seed ? o->seed : vs_mono_ns();
	struct stat st;
	int base = -1, rc;

	f.rng = seed | 1;
	base = open(o->base, O_RDONLY | O_CLOEXEC);
	if (base < 0 || fstat(base, &st) < 0) {
		rc = vs_fail(why, whylen, -errno, "--base %s: %s", o->base, strerror(errno));
		goto out;
	}
	f.size = (uint64_t)st.st_size;
	if ((rc = lw_open(&f.log, o->log, f.size, why, whylen)) < 0)
		goto out;
	snprintf(f.dir, sizeof(f.dir), "%s/vs-flush-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(f.dir)) {
		rc = vs_fail(why, whylen, -errno, "mkdtemp %s: %s", f.dir, strerror(errno));
		f.dir[0] = 0;
		goto out;
	}
	snprintf(f.work, sizeof(f.work), "%s/work.img", f.dir);
	snprintf(f.state, sizeof(f.state), "%s/crash-state.img", f.dir);
	snprintf(f.undo, sizeof(f.undo), "%s/undo", f.dir);
	snprintf(f.output, sizeof(f.output), "%s/output", f.dir);
	f.buflen = 4u << 20;
	f.buf = malloc(f.buflen);
	f.undo_at = malloc(sizeof(*f.undo_at) * (f.log.n + 1));
	if (!f.buf || !f.undo_at) {
		rc = vs_fail(why, whylen, -ENOMEM, "out of memory");
		goto out;
	}
	if ((rc = sparse_copy(base, f.work, f.size, f.buf, f.buflen)) < 0 ||
	    (f.work_fd = open(f.work, O_RDWR | O_CLOEXEC)) < 0 ||
	    (f.undo_fd = open(f.undo, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		rc = vs_fail(why, whylen, rc < 0 ? rc : -errno, "scratch images in %s: %s", f.dir,
			     strerror(rc < 0 ? -rc : errno));
		goto out;
	}
	fprintf(f.out,
		"vioscope check flush: %s (%llu entries) over %s (%llu MiB), %u subsets "
		"per point, seed %llu\n",
		o->log, (unsigned long long)f.log.n, o->base, (unsigned long long)(f.size >> 20),
		o->subsets, (unsigned long long)seed);
	rc = run(&f);
	if (rc == -EINTR) {
		fprintf(f.out,
			"INTERRUPTED by %s: the %llu crash states checked before it passed; seed "
			"%llu (--seed to repeat)\n",
			vs_signal_name(vs_interrupted()), (unsigned long long)f.states,
			(unsigned long long)seed);
		rc = 0;
	} else if (rc < 0) {
		vs_fail(why, whylen, rc, "replaying %s: %s", o->log, strerror(-rc));
	} else if (rc == 0) {
		fprintf(f.out,
			"PASS: %llu crash states (%llu flush/FUA points, %llu subsets of "
			"unflushed writes) passed%s%s%s%s\n",
			(unsigned long long)f.states, (unsigned long long)f.points,
			(unsigned long long)f.subsets, o->fsck ? " `" : "", o->fsck ? o->fsck : "",
			o->fsck ? "`" : "", o->verify ? " and the verifier" : "");
	} else if (o->keep) {
		char kept[700];

		snprintf(kept, sizeof(kept), "%s.failed", f.dir);
		if (rename(f.state, kept) == 0)
			fprintf(f.out, "  the failing crash state is kept: %s\n", kept);
	} else {
		fprintf(f.out, "  (--keep keeps the failing crash state's image)\n");
	}
out:
	if (base >= 0)
		close(base);
	if (f.work_fd >= 0)
		close(f.work_fd);
	if (f.undo_fd >= 0)
		close(f.undo_fd);
	if (f.dir[0]) {
		unlink(f.work);
		unlink(f.state);
		unlink(f.undo);
		unlink(f.output);
		rmdir(f.dir);
	}
	lw_close(&f.log);
	free(f.buf);
	free(f.undo_at);
	return rc;
}
