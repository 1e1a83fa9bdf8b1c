/* SPDX-License-Identifier: MIT */
/*
 * Tool side of the shared-memory file: open and validate another process's
 * control block and rings, and copy records out of a ring that may still be
 * written to.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/tracetools.h"

const char *vs_shm_dir(void)
{
	const char *d = getenv("VIOSCOPE_TRACE_DIR");
	return d && *d ? d : "/dev/shm";
}

uint64_t vs_proc_start_time(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* comm may contain spaces and parentheses: fields restart after the last ')' */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p + 1, ' ');
	}
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

bool vs_shm_owner_alive(const struct vs_shm_header *h)
{
	if (h->pid <= 0 || (kill(h->pid, 0) < 0 && errno == ESRCH))
		return false;
	uint64_t st = vs_proc_start_time(h->pid);
	return st == 0 || st == h->start_time;
}

static int invalid(char *why, size_t whylen, const char *path, const char *what)
{
	snprintf(why, whylen, "%s: not a valid vioscope trace file: %s", path, what);
	return -EINVAL;
}

int vs_shm_open(struct vs_shm *s, const char *target, char *why, size_t whylen)
{
	struct stat st;
	char *end;
	long pid = strtol(target, &end, 10);

	memset(s, 0, sizeof *s);
	s->fd = -1;
	if (*target && !*end && pid > 0)
		snprintf(s->path, sizeof s->path, "%s/%s%ld", vs_shm_dir(), VS_SHM_PREFIX, pid);
	else
		snprintf(s->path, sizeof s->path, "%s", target);
	s->fd = open(s->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (s->fd < 0) {
		int e = errno;
		snprintf(why, whylen, "%s: %s%s", s->path, strerror(e),
			 e == ENOENT ? " (no traced process with that pid: see `vioscope trace "
				       "list`)" : "");
		return -e;
	}
	if (fstat(s->fd, &st) < 0 || st.st_size < (off_t)sizeof(struct vs_shm_header)) {
		close(s->fd);
		return invalid(why, whylen, s->path, "too small");
	}
	s->size = (size_t)st.st_size;
	s->hdr = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->hdr == MAP_FAILED) {
		int e = errno;
		s->hdr = NULL;
		close(s->fd);
		snprintf(why, whylen, "%s: mmap: %s", s->path, strerror(e));
		return -e;
	}
	const struct vs_shm_header *h = s->hdr;
	const char *bad = NULL;
	if (memcmp(h->magic, VS_SHM_MAGIC, 8) != 0)
		bad = "bad magic (not initialised yet, or not ours)";
	else if (h->version != VS_SHM_VERSION)
		bad = "unsupported version";
	else if (h->total_size != s->size || h->header_size != sizeof *h)
		bad = "size mismatch";
	else if (h->meta_offset < sizeof *h || h->meta_size > s->size ||
		 h->meta_offset > s->size - h->meta_size)
		bad = "metadata outside the file";
	else if (h->ring_count == 0 || h->ring_count > 4096 || h->ring_size < 4096 ||
		 (h->ring_size & (h->ring_size - 1)) || h->ring_size > (1ull << 30))
		bad = "bad ring geometry";
	else if (h->rings_offset > s->size ||
		 (uint64_t)h->ring_count * sizeof(struct vs_shm_ring) > s->size - h->rings_offset)
		bad = "ring headers outside the file";
	else if (h->data_offset > s->size ||
		 (uint64_t)h->ring_count * h->ring_size > s->size - h->data_offset)
		bad = "ring data outside the file";
	if (bad) {
		vs_shm_close(s);
		return invalid(why, whylen, target, bad);
	}
	int rc = vs_meta_parse(&s->meta, (const uint8_t *)h + h->meta_offset, h->meta_size, why,
			       whylen);
	if (rc < 0) {
		vs_shm_close(s);
		return rc;
	}
	return 0;
}

void vs_shm_close(struct vs_shm *s)
{
	if (s->hdr)
		munmap(s->hdr, s->size);
	if (s->fd >= 0)
		close(s->fd);
	vs_meta_free(&s->meta);
	s->hdr = NULL;
	s->fd = -1;
}

struct vs_shm_ring *vs_shm_ring(const struct vs_shm *s, unsigned i)
{
	return (struct vs_shm_ring *)((uint8_t *)s->hdr + s->hdr->rings_offset) + i;
}

const uint8_t *vs_shm_ring_data(const struct vs_shm *s, unsigned i)
{
	return (const uint8_t *)s->hdr + s->hdr->data_offset + (size_t)i * s->hdr->ring_size;
}

size_t vs_ring_copy(const struct vs_shm *s, unsigned i, uint64_t *from, uint64_t head, uint8_t *buf,
		    size_t buflen)
{
	const uint8_t *data = vs_shm_ring_data(s, i);
	struct vs_shm_ring *r = vs_shm_ring(s, i);
	uint64_t size = s->hdr->ring_size, mask = size - 1;
	uint64_t pos = *from;
	size_t out = 0;

	if (head - pos > size) /* the writer lapped us: start at its tail */
		pos = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	/* Copy first, then check the tail: what the writer may have overwritten while
	 * we copied (everything before the new tail) is thrown away.  We copy at most
	 * one ring's worth, so there is at most one skip at the wrap; remember it to map
	 * buffer offsets back to stream positions. */
	uint64_t start = pos;
	size_t wrap_at = SIZE_MAX;
	uint64_t wrap_skip = 0;
	while (pos < head) {
		uint64_t off = pos & mask, room = size - off;
		struct vs_event_header e;
		if (room >= sizeof e)
			memcpy(&e, data + off, sizeof e);
		if (room < sizeof e || e.site == VS_EVENT_PAD) {
			if (wrap_at != SIZE_MAX)
				break;
			wrap_at = out;
			wrap_skip = room;
			pos += room;
			continue;
		}
		if (e.size < sizeof e || (e.size & 7) || e.size > room || pos + e.size > head)
			break; /* torn by a concurrent overwrite; the tail check below decides */
		/* Extend over the records that follow contiguously: one copy per run. */
		uint64_t run = e.size;
		while (pos + run < head && room - run >= sizeof e) {
			struct vs_event_header n;
			memcpy(&n, data + off + run, sizeof n);
			if (n.site == VS_EVENT_PAD || n.size < sizeof n || (n.size & 7) ||
			    n.size > room - run || pos + run + n.size > head)
				break;
			if (out + run + n.size > buflen)
				break;
			run += n.size;
		}
		if (out + run > buflen)
			break;
		memcpy(buf + out, data + off, run);
		out += run;
		pos += run;
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	if (tail > start) {
		if (tail >= pos) {
			/* The writer went past everything we copied: all of it is stale. */
			*from = tail > head ? head : tail;
			return 0;
		}
		size_t o = 0;
		while (o < out) {
			uint64_t at = start + o + (o >= wrap_at ? wrap_skip : 0);
			if (at >= tail)
				break;
			uint16_t sz;
			memcpy(&sz, buf + o + 12, 2);
			o += sz;
		}
		memmove(buf, buf + o, out - o);
		out -= o;
	}
	*from = pos;
	return out;
}
