/* SPDX-License-Identifier: MIT */
/*
 * The stateful fuzzers' common harness: see session.h.  A message the device refuses as
 * the server would (a negative return), a worker failure (tq_fail) or a memory fault ends
 * the "connection": the session is reset, as the server does, and the next operations
 * start a new one.  Every fd handed over must be closed or kept, every queue stopped and
 * every request finished when the input ends.
 *
 * Dirty logging (live migration): a message's fds may be dups of a second memory file, the
 * dirty log file, whose size an operation sets (from nothing to 1 MiB, shrinking it under
 * a log in force).  While the log in force is that file's and logging is on, what the
 * target writes is checked against what it marks, over a window of kicks and passes (and
 * fuzz_target_rpc's requests) that ends with no request in flight: the window opens with
 * a copy of guest memory and the log cleared (as the frontend's fetch-and-clear would);
 * when it closes, every guest page that changed must be marked (but the bytes of a used
 * ring whose writes are not to be logged, or are logged at another address the frontend
 * named), no page may be marked that is neither guest memory nor a used ring's log
 * address, and no byte of the log file outside the log may change.  When the log in force
 * does not cover guest memory (memory grew while logging was off), a changed page left
 * unmarked must at least be counted by the device (log.outside).  The check runs only
 * where the harness can see all of it: one region of guest memory, from the guest memory
 * file, never shrunk in this input, and a log file not handed over as anything else.
 */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session.h"
#include "vhost/vhost_int.h" /* white box: the device's log and features */

#define MAX_PUMPS 16

static int memfd = -1, logfd = -1, inflfd = -1;
static uint64_t logfd_size; /* the log file's size now */
struct vs_vhost_dev *fz_current_dev;

/* The log file sizes op 0xf0-0xff picks (the log for 256 KiB of guest memory at gpa 0 is 8
 * bytes; a page more or less; beyond 64 KiB the stray-write check reads the log only). */
/* clang-format off */
const uint64_t fz_log_sizes[16] = {
	0, 1, 4, 8, 64, 4095, 4096, 4097,			/* 0-7 */
	8192, 12288, 16384, 32768, 65536, 65544, 262144, 1u << 20,	/* 8-15 */
};
/* clang-format on */
/* The in-flight file's sizes op 0x7b picks: none, a header, one and FZ_NQ rings of 16 (the
 * seeds' rings), a page or more. */
/* clang-format off */
const uint64_t fz_infl_sizes[8] = {
	0, 64, VS_VHOST_INFLIGHT_RING_BYTES(16), FZ_NQ * VS_VHOST_INFLIGHT_RING_BYTES(16),
	4096, 8192, FZ_INFL_SIZE, 65536,
};
/* clang-format on */
#define LOG_FILE_MAX (1u << 20)
#define LOG_SNAP_MAX (64u << 10)

static uint8_t mem_snap[FZ_MEM_SIZE];
static uint8_t log_now[LOG_FILE_MAX], log_snap[LOG_SNAP_MAX];
static const uint8_t zeros[LOG_FILE_MAX];

void fz_session_init(void)
{
	memfd = memfd_create("fuzz-guest", MFD_CLOEXEC);
	logfd = memfd_create("fuzz-dirty-log", MFD_CLOEXEC);
	inflfd = memfd_create("fuzz-inflight", MFD_CLOEXEC);
	if (memfd < 0 || logfd < 0 || inflfd < 0)
		__builtin_trap();
}

/* ---- In-flight regions (op 0x78-0x7c, fd kind 0x10, GET_INFLIGHT_FD's reply) ----------- */

/* The in-flight file ops act on: the frontend's own, or the region GET_INFLIGHT_FD made. */
static int infl_cur(const struct fz_session *s)
{
	return s->infl.use_get && s->infl.get_fd >= 0 ? s->infl.get_fd : inflfd;
}

/* A GET_INFLIGHT_FD the device answered: the reply carries the device's own memfd (the
 * server sends it and keeps it), exactly the region's size, sealed against shrinking and
 * growing; from now on the input's in-flight ops use it. */
static void infl_got(struct fz_session *s, const struct vs_vhost_msg *msg,
		     const struct vs_vhost_msg *reply)
{
	const struct vs_vhost_inflight *in = &reply->payload.inflight;
	struct stat st;
	int seals;

	if (reply->nfds != 1 || reply->fds[0] != s->d->inflight_fd || reply->size != sizeof(*in) ||
	    in->mmap_offset != 0 || in->num_queues != msg->payload.inflight.num_queues ||
	    in->queue_size != msg->payload.inflight.queue_size ||
	    in->mmap_size !=
		(uint64_t)in->num_queues * VS_VHOST_INFLIGHT_RING_BYTES(in->queue_size) ||
	    fstat(reply->fds[0], &st) < 0 || (uint64_t)st.st_size != in->mmap_size)
		__builtin_trap();
	seals = fcntl(reply->fds[0], F_GET_SEALS);
	if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW))
		__builtin_trap();
	if (s->infl.get_fd >= 0)
		close(s->infl.get_fd);
	s->infl.get_fd = dup(reply->fds[0]);
	if (s->infl.get_fd < 0)
		__builtin_trap();
	s->infl.use_get = true;
}

/* Where ring q's part of a region of rings of 2^qlog entries starts, and its entry head. */
static uint64_t infl_part(uint8_t q, uint8_t qlog)
{
	return (uint64_t)(q & 7) * VS_VHOST_INFLIGHT_RING_BYTES(1u << (qlog % 16));
}

static size_t infl_op(struct fz_session *s, const uint8_t *data, size_t size)
{
	int fd = infl_cur(s);
	uint8_t buf[16];

	switch (data[0]) {
	case 0x78: {
		if (size < 4)
			return size;
		uint16_t off = (uint16_t)(data[1] | data[2] << 8);
		uint8_t len = data[3];
		if (size - 4 < len)
			len = (uint8_t)(size - 4);
		/* A sealed region cannot grow: a write beyond its end fails, as it may. */
		(void)!pwrite(fd, data + 4, len, off);
		return 4 + (size_t)len;
	}
	case 0x79: {
		struct vs_vhost_inflight_split h = {0};
		if (size < 11)
			return size;
		memcpy(&h.version, data + 3, 2);
		memcpy(&h.desc_num, data + 5, 2);
		memcpy(&h.last_batch_head, data + 7, 2);
		memcpy(&h.used_idx, data + 9, 2);
		memcpy(buf, &h, sizeof(h));
		(void)!pwrite(fd, buf, sizeof(h), (off_t)infl_part(data[1], data[2]));
		return 11;
	}
	case 0x7a: {
		struct vs_vhost_inflight_desc e = {0};
		uint16_t head, counter;
		uint32_t qs;
		if (size < 10)
			return size;
		qs = 1u << (data[2] % 16);
		memcpy(&head, data + 3, 2);
		e.inflight = data[5];
		memcpy(&e.next, data + 6, 2);
		memcpy(&counter, data + 8, 2);
		e.counter = counter;
		(void)!pwrite(fd, &e, sizeof(e),
			      (off_t)(infl_part(data[1], data[2]) +
				      sizeof(struct vs_vhost_inflight_split) +
				      (uint64_t)(head % qs) * sizeof(e)));
		return 10;
	}
	case 0x7b:
		if (size < 2)
			return size;
		/* Shrinking a mapped region: the target's guard must end the session. */
		(void)!ftruncate(fd, (off_t)fz_infl_sizes[data[1] & 7]);
		return 2;
	default:
		s->infl.use_get = !s->infl.use_get;
		return 1;
	}
}

static void log_file_size(uint64_t size)
{
	if (ftruncate(logfd, (off_t)size) < 0)
		__builtin_trap();
	logfd_size = size;
}

static void guest_reset(const uint8_t *image, size_t n)
{
	if (ftruncate(memfd, 0) < 0 || ftruncate(memfd, FZ_MEM_SIZE) < 0 ||
	    (n && pwrite(memfd, image, n, 0) != (ssize_t)n))
		__builtin_trap();
}

/* What the server does when a session ends. */
static void session_end(struct fz_session *s)
{
	s->log.open = false;
	vs_vhost_dev_reset(s->d);
	vs_controller__ops.disconnected(vs_target__controller(s->t), "fuzz");
	vs_controller__ops.connected(vs_target__controller(s->t));
}

/* ---- Dirty logging: what the target wrote against what it marked (see the top) ---------- */

static bool log_verbose; /* FUZZ_LOG_VERBOSE=1: a line per check */

#define LOG_FAIL(...)                                                                              \
	do {                                                                                       \
		fprintf(stderr, "fuzz: dirty log: " __VA_ARGS__);                                  \
		__builtin_trap();                                                                  \
	} while (0)

/* The log in force is the log file's, logging is on, and all of it can be seen. */
static bool log_checkable(const struct fz_session *s)
{
	const struct vs_vhost_dev *d = s->d;
	const struct fz_log *l = &s->log;

	return vs_vhost_log_active(d) && !d->wedged && l->mine && !l->aliased && !l->mem_shrunk &&
	       d->mem.nregions == 1 && d->mem.regions[0].size <= FZ_MEM_SIZE &&
	       l->size <= logfd_size && l->off <= logfd_size - l->size;
}

/* The running queues' used rings and where their writes are marked. */
static void log_rings(const struct fz_session *s, struct fz_log_ring *rings)
{
	memset(rings, 0, sizeof(s->log.rings));
	for (unsigned i = 0; i < TQ_MAX; i++) {
		const struct tq *q = &s->t->ctrls->q[i];
		if (!q->running)
			continue;
		if (q->vq.log && q->vq.log != &s->d->log)
			LOG_FAIL("queue %u logs into %p, not the log in force\n", i,
				 (void *)q->vq.log);
		rings[i].used = q->vq.used;
		rings[i].size = q->vq.size;
		rings[i].log_gpa = q->vq.log ? q->vq.log_used_gpa : VS_LOG_NONE;
	}
}

/* A window opens (before a kick or passes): guest memory copied, the log cleared. */
static void log_open(struct fz_session *s)
{
	struct fz_log *l = &s->log;
	const struct vs_mem_region *r = &s->d->mem.regions[0];

	if (l->open || !log_checkable(s))
		return;
	l->region = *r;
	memcpy(mem_snap, r->host, r->size);
	if (pwrite(logfd, zeros, l->size, (off_t)l->off) != (ssize_t)l->size)
		__builtin_trap();
	if (logfd_size <= LOG_SNAP_MAX &&
	    pread(logfd, log_snap, logfd_size, 0) != (ssize_t)logfd_size)
		__builtin_trap();
	l->bits = s->d->log.bits;
	l->outside = s->d->log.outside;
	log_rings(s, l->rings);
	l->open = true;
}

static bool quiet(const struct fz_session *s)
{
	for (unsigned i = 0; i < TQ_MAX; i++)
		if (s->t->ctrls->q[i].inflight)
			return false;
	return true;
}

/* Region bytes [o, end) changed, but for used rings whose writes are not marked at their
 * own guest address (not logged, or logged where the frontend said they are). */
static bool changed(const struct fz_log *l, uint64_t o, uint64_t end)
{
	const struct vs_mem_region *r = &l->region;

	for (; o < end; o++) {
		bool skip = false;
		if (r->host[o] == mem_snap[o])
			continue;
		for (unsigned i = 0; i < TQ_MAX && !skip; i++) {
			const struct fz_log_ring *q = &l->rings[i];
			uint64_t u = (uint64_t)((uintptr_t)q->used - (uintptr_t)r->host);
			skip = q->used && o - u < vs_vring_used_bytes(q->size) &&
			       q->log_gpa != r->gpa + u;
		}
		if (!skip)
			return true;
	}
	return false;
}

static bool used_log_page(const struct fz_log *l, uint64_t page)
{
	for (unsigned i = 0; i < TQ_MAX; i++) {
		const struct fz_log_ring *q = &l->rings[i];
		if (q->used && q->log_gpa != VS_LOG_NONE && page >= q->log_gpa / VS_LOG_PAGE &&
		    page <= (q->log_gpa + vs_vring_used_bytes(q->size) - 1) / VS_LOG_PAGE)
			return true;
	}
	return false;
}

/* After an operation: once nothing is in flight, the window closes with the check. */
static void log_check(struct fz_session *s)
{
	struct fz_log *l = &s->log;
	const struct vs_mem_region *r = &l->region;
	struct fz_log_ring rings[TQ_MAX];
	uint64_t first = r->gpa / VS_LOG_PAGE, last = (r->gpa + r->size - 1) / VS_LOG_PAGE;
	uint64_t pages = (r->gpa + r->size + VS_LOG_PAGE - 1) / VS_LOG_PAGE;
	bool whole = logfd_size <= LOG_SNAP_MAX, covers = (pages + 7) / 8 <= l->size;
	unsigned marked = 0, unmarked = 0;
	const uint8_t *bits;

	if (!l->open)
		return;
	if (!log_checkable(s) || s->d->log.bits != l->bits ||
	    memcmp(&s->d->mem.regions[0], r, sizeof(*r))) {
		l->open = false; /* the log or guest memory changed: nothing to compare */
		return;
	}
	log_rings(s, rings);
	if (memcmp(rings, l->rings, sizeof(rings))) {
		l->open = false;
		return;
	}
	if (!quiet(s))
		return; /* a request in flight may have written what it marks when it completes */
	l->open = false;

	/* The target writes the log only: nothing else of its file. */
	if (whole) {
		if (pread(logfd, log_now, logfd_size, 0) != (ssize_t)logfd_size)
			__builtin_trap();
		for (uint64_t i = 0; i < logfd_size; i++)
			if ((i < l->off || i >= l->off + l->size) && log_now[i] != log_snap[i])
				LOG_FAIL("byte %#llx of the log file changed, outside the log "
					 "[%#llx, +%#llx)\n",
					 (unsigned long long)i, (unsigned long long)l->off,
					 (unsigned long long)l->size);
		bits = log_now + l->off;
	} else {
		if (pread(logfd, log_now, l->size, (off_t)l->off) != (ssize_t)l->size)
			__builtin_trap();
		bits = log_now;
	}
	/* A mark is for a page of guest memory or of a used ring's log address. */
	for (uint64_t i = 0; i < l->size; i++) {
		if (!bits[i])
			continue;
		for (unsigned b = 0; b < 8; b++) {
			uint64_t p = i * 8 + b;
			if ((bits[i] & (1u << b)) && (p < first || p > last) &&
			    !used_log_page(l, p))
				LOG_FAIL("page %#llx marked: neither guest memory (gpa %#llx, "
					 "%#llx bytes) nor a used ring's log address\n",
					 (unsigned long long)p, (unsigned long long)r->gpa,
					 (unsigned long long)r->size);
		}
	}
	/* Every page written is marked. */
	for (uint64_t o = 0; o < r->size;) {
		uint64_t p = (r->gpa + o) / VS_LOG_PAGE;
		uint64_t end = (p + 1) * VS_LOG_PAGE - r->gpa;

		if (end > r->size)
			end = r->size;
		if (memcmp(r->host + o, mem_snap + o, end - o) && changed(l, o, end)) {
			if (p / 8 < l->size && (bits[p / 8] & (1u << (p % 8))))
				marked++;
			else if (covers)
				LOG_FAIL("guest page %#llx (region bytes %#llx-%#llx) was written "
					 "while logging but is not marked\n",
					 (unsigned long long)p, (unsigned long long)o,
					 (unsigned long long)end);
			else
				unmarked++;
		}
		o = end;
	}
	/* A log smaller than guest memory (it grew while logging was off): what could not be
	 * marked is at least counted. */
	if (unmarked && s->d->log.outside == l->outside)
		LOG_FAIL("%u written page(s) beyond the log (%#llx bytes) neither marked nor "
			 "counted\n",
			 unmarked, (unsigned long long)l->size);
	if (log_verbose)
		fprintf(stderr,
			"fuzz: dirty log: checked: %u page(s) written and marked, %u beyond the "
			"log (%s)\n",
			marked, unmarked,
			covers ? "it covers guest memory" : "smaller than guest memory");
}

void fz_session_check(struct fz_session *s)
{
	char why[256];

	if (vs_target__failed(s->t) || vs_vhost_dev_fault(s->d, why, sizeof(why)))
		session_end(s);
	log_check(s);
}

/* Passes until nothing is left to look at (bounded: a guest can keep rings busy). */
static void settle(struct fz_session *s)
{
	log_open(s);
	vs_target__pump(s->t, MAX_PUMPS);
}

void fz_session_kick(struct fz_session *s, unsigned q, unsigned passes)
{
	log_open(s);
	if (q < FZ_NQ && s->t->ctrls->q[q].running)
		s->t->ctrls->q[q].kicked = true;
	vs_target__pump(s->t, passes);
}

/* One vhost-user message chunk; returns the bytes it took (0: not enough input). */
static size_t message(struct fz_session *s, const uint8_t *p, size_t left)
{
	struct vs_vhost_msg msg, reply;
	unsigned nfds;
	uint32_t psize, request;
	bool log_kind, infl_kind;
	char why[VS_VHOST_WHY_LEN];
	int fds[16], rc;
	size_t len;

	if (left < 1 + VS_VHOST_HDR_SIZE)
		return 0;
	nfds = p[0] & 0x0f;
	log_kind = !(p[0] & 0xc0) && (p[0] & 0x20);
	infl_kind = !(p[0] & 0xe0) && (p[0] & 0x10);
	memcpy(&request, p + 1, 4);
	memcpy(&psize, p + 1 + 8, 4);
	len = left - 1 - VS_VHOST_HDR_SIZE < psize ? left - 1 : VS_VHOST_HDR_SIZE + psize;
	for (unsigned i = 0; i < nfds; i++) {
		fds[i] = (p[0] & 0x40)	 ? eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)
			 : (p[0] & 0x80) ? dup(memfd)
			 : (p[0] & 0x20) ? dup(logfd)
			 : (p[0] & 0x10) ? dup(infl_cur(s))
					 : open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fds[i] < 0)
			__builtin_trap();
	}
	/* The log file as guest memory (or anything else): its bytes are no longer the log's
	 * alone, and the check gives up on this input. */
	if (nfds && log_kind && request != VS_VHOST_SET_LOG_BASE)
		s->log.aliased = true;
	/* Likewise an in-flight file as anything but a region, and guest memory as a region (the
	 * target's marks would be writes to guest memory no log shows). */
	if (nfds && ((infl_kind && request != VS_VHOST_SET_INFLIGHT_FD) ||
		     (!(p[0] & 0x40) && (p[0] & 0x80) && request == VS_VHOST_SET_INFLIGHT_FD)))
		s->log.aliased = true;
	rc = vs_vhost_msg_parse(p + 1, len, fds, nfds, &msg, why, sizeof(why));
	if (rc) {
		for (unsigned i = 0; i < nfds; i++)
			close(fds[i]); /* parse never takes them on failure */
		if (rc == -EBADMSG)
			rc = vs_vhost_dev_reject(s->d, &msg, &reply);
	} else if (msg.request == VS_VHOST_SET_LOG_BASE) {
		const uint8_t *before = s->d->log.bits;
		struct vs_vhost_log lb = msg.payload.log;

		rc = vs_vhost_dev_handle(s->d, &msg, &reply);
		if (s->d->log.bits && s->d->log.bits != before) { /* a new log is in force */
			s->log.mine = log_kind && nfds == 1;
			s->log.off = lb.mmap_offset;
			s->log.size = lb.mmap_size;
		}
	} else {
		rc = vs_vhost_dev_handle(s->d, &msg, &reply); /* consumes the fds */
		/* The one reply with an fd: the device's region, kept by it (the server sends it
		 * without closing it). */
		if (rc == 1 && msg.request == VS_VHOST_GET_INFLIGHT_FD && reply.nfds)
			infl_got(s, &msg, &reply), reply.nfds = 0;
	}
	if (rc == 1 && (reply.size > VS_VHOST_MAX_PAYLOAD || reply.nfds))
		__builtin_trap();
	if (vs_vhost_dev_wedged(s->d))
		__builtin_trap(); /* manual mode never times out a worker */
	if (rc < 0)
		session_end(s);
	return 1 + len;
}

size_t fz_session_begin(struct fz_session *s, const struct vs_target_config *cfg,
			const uint8_t *data, size_t size)
{
	size_t n = data[0] | (size_t)data[1] << 8;

	s->first_free_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	close(s->first_free_fd);
	if (n > size - 2)
		n = size - 2;
	if (n > FZ_MEM_SIZE)
		n = FZ_MEM_SIZE;
	guest_reset(data + 2, n);
	log_file_size(0); /* an earlier input's marks are gone */
	log_file_size(FZ_LOG_SIZE);
	memset(&s->log, 0, sizeof(s->log));
	/* The in-flight file: zeroes (a fresh region) of FZ_INFL_SIZE bytes. */
	if (ftruncate(inflfd, 0) < 0 || ftruncate(inflfd, FZ_INFL_SIZE) < 0)
		__builtin_trap();
	s->infl.get_fd = -1;
	s->infl.use_get = false;
	log_verbose = getenv("FUZZ_LOG_VERBOSE") != NULL;

	if (vs_target__create_manual(&s->t, cfg))
		__builtin_trap();
	s->d = vs_vhost_dev_new(FZ_NQ, vs_target_device_features(), &vs_controller__ops,
				vs_target__controller(s->t));
	if (!s->d)
		__builtin_trap();
	vs_controller__ops.connected(vs_target__controller(s->t));
	fz_current_dev = s->d;
	return 2 + n;
}

size_t fz_session_op(struct fz_session *s, const uint8_t *data, size_t size)
{
	uint8_t op = data[0];
	size_t used = 1;

	/* What the guest writes, and the device's settings, are outside the log's check. */
	if (op < 0x40 || (op >= 0x78 && op <= 0x7c) || (op >= 0x80 && op < 0xe0) || op >= 0xf0)
		s->log.open = false;
	if (op < 0x40) {
		used += message(s, data + 1, size - 1);
	} else if (op >= 0x78 && op <= 0x7c) {
		used = infl_op(s, data, size);
	} else if (op < 0x80) {
		fz_session_kick(s, op & 7, MAX_PUMPS);
	} else if (op < 0xc0) {
		if (size < 4)
			return size; /* the input ends here */
		uint16_t off = (uint16_t)(data[1] | data[2] << 8);
		uint8_t len = data[3];
		if (size - 4 < len)
			len = (uint8_t)(size - 4);
		if (pwrite(memfd, data + 4, len, off) != len)
			__builtin_trap();
		used = 4 + (size_t)len;
	} else if (op < 0xe0) {
		if (ftruncate(memfd, (off_t)(op & 0x1f) << 12) < 0)
			__builtin_trap();
		s->log.mem_shrunk = true;
	} else if (op < 0xf0) {
		settle(s);
	} else {
		log_file_size(fz_log_sizes[op & 0xf]);
	}
	fz_session_check(s);
	return used;
}

void fz_session_end(struct fz_session *s)
{
	int fd;

	vs_vhost_dev_free(s->d);
	fz_current_dev = NULL;
	if (s->infl.get_fd >= 0)
		close(s->infl.get_fd);
	for (unsigned i = 0; i < TQ_MAX; i++)
		if (s->t->ctrls->q[i].running || s->t->ctrls->q[i].inflight)
			__builtin_trap();
	vs_target_destroy(s->t);

	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd != s->first_free_fd)
		__builtin_trap(); /* an fd handed to the target was neither kept nor closed */
	close(fd);
}
