/* SPDX-License-Identifier: MIT */
/*
 * Tool side of the shared-memory file: open another process's control block and
 * rings, and copy records out of a ring that may still be written to.
 *
 * The file is untrusted (docs/SECURITY.md, "Trace files and capture files"): another
 * local user may have planted it under the name a tool opens, and whoever owns it can
 * rewrite or truncate it while a tool reads it.  So a tool opens only a regular file
 * of its own uid with a single link; reads the header once, into a private snapshot
 * that it validates and then uses for every offset and length; copies ring bytes out
 * before it parses them; and survives the file shrinking under its mapping.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracetools/tracetools.h"
#include "util/util.h"

void vs_shm_remove_reaped(int pid)
{
	char path[1024], init_prefix[64];
	if (pid <= 0)
		return;
	snprintf(path, sizeof path, "%s/%s%d", vs_shm_dir(), VS_SHM_PREFIX, pid);
	unlink(path);
	int n = snprintf(init_prefix, sizeof init_prefix, VS_SHM_INIT_PREFIX "%d-", pid);
	DIR *d = opendir(vs_shm_dir());
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, init_prefix, (size_t)n) != 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", vs_shm_dir(), e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
}

bool vs_shm_owner_alive(const struct vs_shm *s)
{
	int pid = s->snap.pid;
	if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH))
		return false;
	uint64_t st = vs_proc_start_time(pid);
	return st == 0 || st == s->snap.start_time;
}

bool vs_shm_recorder_alive(const struct vs_shm *s, int32_t pid)
{
	struct flock lk = {.l_type = F_WRLCK,
			   .l_whence = SEEK_SET,
			   .l_start = VS_SHM_RECORDER_LOCK + pid,
			   .l_len = 1};
	if (pid <= 0 || s->fd < 0)
		return false;
	/* Unknown (no OFD locks here): say alive, so a recorder is never taken over by
	 * mistake; --force still can. */
	if (fcntl(s->fd, F_OFD_GETLK, &lk) < 0)
		return true;
	return lk.l_type != F_UNLCK;
}

/* The file's owner can truncate it at any time: the mapping is guarded against SIGBUS
 * (util: vs_map_guard_add), reads as zeros from the faulting page on, and the tools check
 * vs_shm_shrunk() and stop with an error, their capture whole. */
bool vs_shm_shrunk(const struct vs_shm *s)
{
	return __atomic_load_n(&s->fault.addr, __ATOMIC_ACQUIRE) != 0;
}

/* ---- open -------------------------------------------------------------------------- */
static int invalid(char *why, size_t whylen, const char *path, const char *what)
{
	snprintf(why, whylen, "%s: not a valid vioscope trace file: %s", path, what);
	return -EINVAL;
}

static const char *user_name(uid_t uid, char *buf, size_t len)
{
	struct passwd pw, *res = NULL;
	char tmp[1024];
	if (getpwuid_r(uid, &pw, tmp, sizeof tmp, &res) == 0 && res)
		snprintf(buf, len, "%s", res->pw_name);
	else
		snprintf(buf, len, "no user name");
	return buf;
}

/* Only a file we could have made ourselves: a regular file, our uid, one link, not
 * writable by anyone else.  Anything else may have been planted by another user (a
 * file of theirs under the name we open, a hard link to a file they can write). */
static int check_file(const struct stat *st, const char *path, char *why, size_t whylen)
{
	char owner[64], me[64];
	uid_t euid = geteuid();
	if (!S_ISREG(st->st_mode)) {
		snprintf(why, whylen, "%s: not a regular file: refusing it", path);
		return -EPERM;
	}
	if (st->st_uid != euid) {
		snprintf(why, whylen,
			 "%s: owned by uid %u (%s), not by you (uid %u, %s): refusing "
			 "a trace file another user may have planted; run the tool as that user",
			 path, (unsigned)st->st_uid, user_name(st->st_uid, owner, sizeof owner),
			 (unsigned)euid, user_name(euid, me, sizeof me));
		return -EPERM;
	}
	if (st->st_nlink != 1) {
		snprintf(why, whylen,
			 "%s: has %lu links (a trace file has one): refusing a file "
			 "that may be linked to another",
			 path, (unsigned long)st->st_nlink);
		return -EPERM;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(why, whylen, "%s: writable by other users (mode %04o): refusing it", path,
			 (unsigned)(st->st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* The geometry of the snapshot, checked before anything is placed by it. */
static const char *check_layout(const struct vs_shm_header *h, size_t size)
{
	const uint64_t rings_bytes = (uint64_t)h->ring_count * sizeof(struct vs_shm_ring);
	const uint64_t prov_bytes = (uint64_t)h->provider_slots * sizeof(struct vs_shm_provider);
	if (memcmp(h->magic, VS_SHM_MAGIC, 8) != 0)
		return memcmp(h->magic, "VSTRSHM1", 8) == 0
			   ? "version 1 (made by an older vioscope; use that version's tools)"
			   : "bad magic (not initialised yet, or not ours)";
	if (h->version != VS_SHM_VERSION)
		return "unsupported version";
	if (h->total_size != size || h->header_size != sizeof *h)
		return "size mismatch";
	if (h->provider_slots == 0 || h->provider_slots > 65536 ||
	    h->providers_offset < sizeof *h ||
	    h->providers_offset % sizeof(struct vs_shm_provider) || h->providers_offset > size ||
	    prov_bytes > size - h->providers_offset)
		return "provider slots outside the file";
	if (h->meta_offset < sizeof *h || h->meta_capacity > size ||
	    h->meta_offset > size - h->meta_capacity)
		return "metadata outside the file";
	if (h->ring_count == 0 || h->ring_count > 4096 || h->ring_size < 4096 ||
	    (h->ring_size & (h->ring_size - 1)) || h->ring_size > (1ull << 30))
		return "bad ring geometry";
	/* aligned, since the tools use atomics on the ring headers */
	if (h->rings_offset < sizeof *h || h->rings_offset % sizeof(struct vs_shm_ring) ||
	    h->rings_offset > size || rings_bytes > size - h->rings_offset)
		return "ring headers outside the file";
	if (h->data_offset < h->rings_offset + rings_bytes || h->data_offset % 8 ||
	    h->data_offset > size || (uint64_t)h->ring_count * h->ring_size > size - h->data_offset)
		return "ring data outside the file";
	return NULL;
}

int vs_shm_open(struct vs_shm *s, const char *target, char *why, size_t whylen)
{
	struct stat st;
	char *end;
	long pid = strtol(target, &end, 10);
	const char *bad;
	int rc;

	memset(s, 0, sizeof *s);
	s->fd = -1;
	s->guard = -1;
	if (*target && !*end && pid > 0)
		snprintf(s->path, sizeof s->path, "%s/%s%ld", vs_shm_dir(), VS_SHM_PREFIX, pid);
	else
		snprintf(s->path, sizeof s->path, "%s", target);
	/* O_NONBLOCK: a FIFO planted under the name must not hang us before fstat. */
	s->fd = open(s->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (s->fd < 0) {
		int e = errno;
		snprintf(why, whylen, "%s: %s%s", s->path, strerror(e),
			 e == ENOENT ? " (no traced process with that pid: see `vioscope trace "
				       "list`)"
				     : "");
		return -e;
	}
	if (fstat(s->fd, &st) < 0) {
		rc = -errno;
		snprintf(why, whylen, "%s: %s", s->path, strerror(errno));
		goto fail;
	}
	rc = check_file(&st, s->path, why, whylen);
	if (rc < 0)
		goto fail;
	if (st.st_size < (off_t)sizeof(struct vs_shm_header)) {
		rc = invalid(why, whylen, s->path, "too small");
		goto fail;
	}
	s->size = (size_t)st.st_size;
	s->hdr = mmap(NULL, s->size, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0);
	if (s->hdr == MAP_FAILED) {
		rc = -errno;
		s->hdr = NULL;
		snprintf(why, whylen, "%s: mmap: %s", s->path, strerror(-rc));
		goto fail;
	}
	s->fault.wake_fd = -1;
	s->guard = vs_map_guard_add(s->hdr, s->size, (size_t)sysconf(_SC_PAGESIZE), &s->fault);
	if (s->guard < 0) {
		rc = s->guard;
		snprintf(why, whylen, "%s: cannot guard its mapping against the file shrinking: %s",
			 s->path, strerror(-rc));
		goto fail;
	}
	/* The one read of the header: everything below uses the copy. */
	memcpy(&s->snap, s->hdr, sizeof s->snap);
	s->snap.exe[sizeof s->snap.exe - 1] = '\0';
	s->snap.flavour[sizeof s->snap.flavour - 1] = '\0';
	bad = vs_shm_shrunk(s) ? "it shrank while being opened" : check_layout(&s->snap, s->size);
	if (bad) {
		rc = invalid(why, whylen, s->path, bad);
		goto fail;
	}
	rc = vs_shm_meta_now(s, &s->meta_blob, &s->meta_len, why, whylen);
	if (rc < 0)
		goto fail;
	rc = vs_meta_parse(&s->meta, s->meta_blob, s->meta_len, why, whylen);
	if (rc < 0)
		goto fail;
	return 0;
fail:
	vs_shm_close(s);
	return rc;
}

void vs_shm_close(struct vs_shm *s)
{
	vs_map_guard_remove(s->guard);
	s->guard = -1;
	if (s->hdr)
		munmap(s->hdr, s->size);
	if (s->fd >= 0)
		close(s->fd);
	vs_meta_free(&s->meta);
	free(s->meta_blob);
	s->meta_blob = NULL;
	s->hdr = NULL;
	s->fd = -1;
}

/* meta_used is the one live length: read once, bounded by the snapshot's capacity,
 * then the records are copied before anything parses them. */
int vs_shm_meta_now(const struct vs_shm *s, void **blob, size_t *len, char *why, size_t whylen)
{
	uint64_t used = __atomic_load_n(&s->hdr->meta_used, __ATOMIC_ACQUIRE);
	if (used > s->snap.meta_capacity) {
		snprintf(why, whylen,
			 "%s: not a valid vioscope trace file: metadata length %llu "
			 "beyond its area (%llu)",
			 s->path, (unsigned long long)used,
			 (unsigned long long)s->snap.meta_capacity);
		return -EINVAL;
	}
	uint8_t *p = malloc(used ? used : 1);
	if (!p) {
		snprintf(why, whylen, "%s: out of memory", s->path);
		return -ENOMEM;
	}
	memcpy(p, (const uint8_t *)s->hdr + s->snap.meta_offset, used);
	*blob = p;
	*len = used;
	return 0;
}

struct vs_shm_provider *vs_shm_provider(const struct vs_shm *s, uint32_t slot)
{
	if (!s->hdr || slot >= s->snap.provider_slots)
		return NULL;
	return (struct vs_shm_provider *)((uint8_t *)s->hdr + s->snap.providers_offset) + slot;
}

struct vs_shm_ring *vs_shm_ring(const struct vs_shm *s, unsigned i)
{
	if (!s->hdr || i >= s->snap.ring_count)
		return NULL;
	return (struct vs_shm_ring *)((uint8_t *)s->hdr + s->snap.rings_offset) + i;
}

const uint8_t *vs_shm_ring_data(const struct vs_shm *s, unsigned i)
{
	if (!s->hdr || i >= s->snap.ring_count)
		return NULL;
	return (const uint8_t *)s->hdr + s->snap.data_offset + (size_t)i * s->snap.ring_size;
}

/* ---- copying records out of a live ring --------------------------------------------- */

/* Moves the records in buf[from, to) down to buf[*w, ...): the pieces between the
 * ring's padding, so that what is left is records only. */
static void keep_run(uint8_t *buf, size_t *w, size_t from, size_t to)
{
	if (to <= from)
		return;
	if (*w != from)
		memmove(buf + *w, buf + from, to - from);
	*w += to - from;
}

size_t vs_ring_copy(const struct vs_shm *s, unsigned i, uint64_t *from, uint64_t head, uint8_t *buf,
		    size_t buflen)
{
	const uint8_t *data = vs_shm_ring_data(s, i);
	struct vs_shm_ring *r = vs_shm_ring(s, i);
	const uint64_t size = s->snap.ring_size, mask = size - 1;
	uint64_t pos = *from;

	if (!data || !r)
		return 0;
	if (head - pos > size) /* the writer lapped us: start at its tail */
		pos = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	if (head - pos > size) {
		/* A tail more than a ring behind the head, or past it: nothing here can be
		 * placed.  Skip to the head; a sane writer's next records follow it. */
		*from = head;
		return 0;
	}
	/* 1. Copy [pos, pos + n) as it is, in at most two pieces (the ring wraps once in a
	 * ring's worth); buf[k] is stream position pos + k from here on. */
	size_t n = head - pos < buflen ? (size_t)(head - pos) : buflen;
	size_t first = n < size - (pos & mask) ? n : (size_t)(size - (pos & mask));
	memcpy(buf, data + (pos & mask), first);
	memcpy(buf + first, data, n - first);

	/* 2. Whatever the writer overwrote while we copied is before the tail it has
	 * published since: leave it out.  Its tail is a record boundary, so the records
	 * are parsed from there, never through the torn bytes before it. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	size_t k = 0;
	if (tail > pos) {
		if (tail - pos >= n) {
			*from = tail < head ? tail : head;
			return 0;
		}
		k = (size_t)(tail - pos);
	}

	/* 3. Parse the private copy: records, a pad record or a filler too small for one
	 * up to the end of the ring (skipped by position), nothing else. */
	size_t w = 0, run = k;
	while (k < n) {
		uint64_t at = pos + k, room = size - (at & mask);
		struct vs_event_header e;
		bool pad = room < sizeof e;
		if (!pad) {
			if (n - k < sizeof e)
				break; /* cut by buflen: the rest next time */
			memcpy(&e, buf + k, sizeof e);
			pad = e.site == VS_EVENT_PAD;
		}
		if (pad) {
			if (room > head - at)
				break; /* padding past the head: not written like that by us */
			/* skipped whole, even where buflen cut the copy inside it */
			keep_run(buf, &w, run, k);
			k += (size_t)room;
			run = k;
			continue;
		}
		if (e.size < sizeof e || (e.size & 7) || e.size > room || e.size > n - k)
			break; /* torn, hostile, or cut by buflen: stop before it */
		k += e.size;
	}
	keep_run(buf, &w, run, k < n ? k : n);
	*from = pos + k;
	return w;
}
