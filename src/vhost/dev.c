/* SPDX-License-Identifier: MIT */
/*
 * vhost-user device state machine: one *_exec handler per request behind a switch,
 * no I/O of its own (server.c feeds it), so tests and the fuzzer drive it directly.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "vhost/vhost_int.h"

/* Record the reason and evaluate to code. */
#define FAIL(code, ...) vs_fail(why, whylen, code, __VA_ARGS__)

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Take ownership of msg's fd i (the caller closes whatever is left in msg). */
static int take_fd(struct vs_vhost_msg *msg, unsigned i)
{
	int fd = msg->fds[i];
	msg->fds[i] = -1;
	return fd;
}

static bool proto_negotiated(const struct vs_vhost_dev *d)
{
	return d->features & (1ull << VS_VHOST_F_PROTOCOL_FEATURES);
}

static struct vs_vhost_ring *ring_get(struct vs_vhost_dev *d, unsigned idx, char *why,
				      size_t whylen)
{
	if (idx >= d->max_queues) {
		vs_fail(why, whylen, 0, "ring %u out of range (%u queues)", idx, d->max_queues);
		return NULL;
	}
	return &d->rings[idx];
}

/* A ring the frontend may (re)configure: it exists and is not started (spec: "the
 * back-end must not accept" ring set-up while the ring runs). */
static struct vs_vhost_ring *ring_stopped(struct vs_vhost_dev *d, unsigned idx, char *why,
					  size_t whylen)
{
	struct vs_vhost_ring *v = ring_get(d, idx, why, whylen);

	if (v && v->started) {
		vs_fail(why, whylen, 0, "ring %u is started", idx);
		return NULL;
	}
	return v;
}

/* Host pointers for a ring of v->num entries: each part must lie inside one region, be
 * aligned as the split-ring layout requires, and cover its whole size. */
static int ring_translate(const struct vs_vhost_dev *d, const struct vs_vhost_ring *v,
			  struct vs_vhost_vring *out, char *why, size_t whylen)
{
	const struct vs_vhost_vring_addr *a = &v->addr;

	if (!v->num)
		return FAIL(-EINVAL, "ring size not set");
	if (!v->addr_set)
		return FAIL(-EINVAL, "ring addresses not set");

	const struct {
		const char *name;
		uint64_t uva, len;
		uintptr_t align;
		void **host;
	} part[] = {
	    {"descriptor table", a->desc_user_addr, vs_vring_desc_bytes(v->num), 16, &out->desc},
	    {"available ring", a->avail_user_addr, vs_vring_avail_bytes(v->num), 2, &out->avail},
	    {"used ring", a->used_user_addr, vs_vring_used_bytes(v->num), 4, &out->used},
	};
	for (unsigned i = 0; i < 3; i++) {
		void *host = vs_mem_uva(&d->mem, part[i].uva, part[i].len);
		if (!host)
			return FAIL(-EFAULT, "%s %#llx..+%#llx is not inside one memory region",
				    part[i].name, (unsigned long long)part[i].uva,
				    (unsigned long long)part[i].len);
		if ((uintptr_t)host & (part[i].align - 1))
			return FAIL(-EINVAL, "%s at %#llx is not %u-byte aligned", part[i].name,
				    (unsigned long long)part[i].uva, (unsigned)part[i].align);
		*part[i].host = host;
	}
	return 0;
}

static int ring_start(struct vs_vhost_dev *d, unsigned idx, char *why, size_t whylen)
{
	struct vs_vhost_ring *v = &d->rings[idx];
	struct vs_vhost_vring vr = {
	    .index = idx,
	    .size = v->num,
	    .last_avail_idx = v->last_avail_idx,
	    .kick_fd = v->kick_fd,
	    .call_fd = v->call_fd,
	    .err_fd = v->err_fd,
	    .event_idx = !!(d->features & VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX)),
	    .features = d->features,
	    .mem = &d->mem,
	    .log = vs_vhost_log_active(d) ? &d->log : NULL,
	    .log_used_gpa = VS_LOG_NONE,
	};
	int rc = ring_translate(d, v, &vr, why, whylen);

	if (rc || (rc = vs_vhost_inflight_ring(d, idx, v->num, &vr, why, whylen)))
		return rc;
	if (vr.log && (v->addr.flags & VS_VHOST_VRING_F_LOG)) {
		/* The used ring's pages must have their bits, as guest memory's must. */
		if (!vs_vhost_log_covers_range(&d->log, v->addr.log_guest_addr,
					       vs_vring_used_bytes(v->num)))
			return FAIL(-EINVAL,
				    "ring %u: its used ring's log address %#llx lies "
				    "beyond the dirty log",
				    idx, (unsigned long long)v->addr.log_guest_addr);
		vr.log_used_gpa = v->addr.log_guest_addr;
	}
	if (d->ops.queue_start && (rc = d->ops.queue_start(d->opaque, idx, &vr))) {
		/* Timed out: the user cannot tell whether the ring runs now. */
		if (rc == -ETIMEDOUT)
			d->wedged = true;
		return FAIL(rc, "queue_start refused ring %u: %s", idx, strerror(-rc));
	}
	v->running = true;
	VS_INFO(VHOST, "queue %u started: size %u desc %p avail %p used %p base %u kick %d call %d",
		idx, v->num, vr.desc, vr.avail, vr.used, v->last_avail_idx, v->kick_fd, v->call_fd);
	return 0;
}

/* 0, or -errno when the user could not stop the ring: then the device is wedged. */
static int ring_stop(struct vs_vhost_dev *d, unsigned idx)
{
	struct vs_vhost_ring *v = &d->rings[idx];
	uint16_t last = v->last_avail_idx;
	int rc;

	if (!v->running)
		return 0;
	if (d->ops.queue_stop && (rc = d->ops.queue_stop(d->opaque, idx, &last))) {
		d->wedged = true;
		VS_CRITICAL(VHOST,
			    "queue %u cannot be stopped (%s): guest memory and the ring's "
			    "fds stay as they are",
			    idx, strerror(-rc));
		return rc;
	}
	v->running = false;
	v->last_avail_idx = last;
	VS_INFO(VHOST, "queue %u stopped at avail index %u", idx, last);
	return 0;
}

/* Bring a ring's running state in line with the protocol state. */
static int ring_update(struct vs_vhost_dev *d, unsigned idx, char *why, size_t whylen)
{
	struct vs_vhost_ring *v = &d->rings[idx];
	bool want = v->started && (v->enabled || !proto_negotiated(d));

	if (want && !v->running)
		return ring_start(d, idx, why, whylen);
	if (!want && v->running && ring_stop(d, idx))
		return FAIL(-EIO, "ring %u could not be stopped", idx);
	return 0;
}

int vs_vhost_rings_stop(struct vs_vhost_dev *d)
{
	int first = 0;

	for (unsigned i = 0; i < d->max_queues; i++) {
		int rc = ring_stop(d, i);
		if (rc && !first)
			first = rc;
	}
	return first;
}

/* Update every ring; the first failure is reported, the others still get their turn. */
int vs_vhost_rings_update(struct vs_vhost_dev *d, char *why, size_t whylen)
{
	int first = 0;

	for (unsigned i = 0; i < d->max_queues; i++) {
		char w[VS_VHOST_WHY_LEN];
		int rc = ring_update(d, i, w, sizeof(w));
		if (rc) {
			VS_ERROR(VHOST, "queue %u cannot start: %s", i, w);
			if (!first) {
				first = rc;
				vs_fail(why, whylen, 0, "queue %u: %s", i, w);
			}
		}
	}
	return first;
}

/* Back to the initial ring state: stopped, disabled, no fds (memory is kept). */
static void rings_reset(struct vs_vhost_dev *d)
{
	if (vs_vhost_rings_stop(d) || d->wedged)
		return; /* the fds may still be in use */
	for (unsigned i = 0; i < d->max_queues; i++) {
		struct vs_vhost_ring *v = &d->rings[i];
		close_fd(&v->kick_fd);
		close_fd(&v->call_fd);
		close_fd(&v->err_fd);
		*v = (struct vs_vhost_ring){.kick_fd = -1, .call_fd = -1, .err_fd = -1};
	}
}

void vs_vhost_dev_reset(struct vs_vhost_dev *d)
{
	rings_reset(d);
	vs_vhost_log_unmap(d);
	vs_vhost_inflight_unmap(d);
	vs_vhost_mem_unmap_all(d);
	d->owner = false;
	d->features = 0;
	d->protocol_features = 0;
}

struct vs_vhost_dev *vs_vhost_dev_new(unsigned max_queues, uint64_t device_features,
				      const struct vs_vhost_dev_ops *ops, void *opaque)
{
	struct vs_vhost_dev *d;

	if (max_queues == 0 || max_queues > VS_VHOST_MAX_QUEUES) {
		VS_ERROR(VHOST, "bad queue count %u (1..%u)", max_queues, VS_VHOST_MAX_QUEUES);
		errno = EINVAL;
		return NULL;
	}
	d = calloc(1, sizeof(*d));
	if (!d || !(d->rings = calloc(max_queues, sizeof(*d->rings)))) {
		free(d);
		errno = ENOMEM;
		return NULL;
	}
	d->max_queues = max_queues;
	d->fault.wake_fd = -1;
	d->offered_features =
	    device_features | (1ull << VS_VHOST_F_PROTOCOL_FEATURES) | (1ull << VS_VHOST_F_LOG_ALL);
	d->log.mem = &d->mem;
	d->log_map.guard = -1;
	d->inflight_map.guard = -1;
	d->inflight_fd = -1;
	if (ops)
		d->ops = *ops;
	d->opaque = opaque;
	for (unsigned i = 0; i < max_queues; i++)
		d->rings[i].kick_fd = d->rings[i].call_fd = d->rings[i].err_fd = -1;
	return d;
}

void vs_vhost_dev_free(struct vs_vhost_dev *d)
{
	if (!d)
		return;
	vs_vhost_dev_reset(d);
	free(d->rings);
	free(d);
}

const struct vs_mem *vs_vhost_dev_mem(const struct vs_vhost_dev *d)
{
	return &d->mem;
}

void vs_vhost_dev_set_wake_fd(struct vs_vhost_dev *d, int fd)
{
	d->fault.wake_fd = fd;
}

bool vs_vhost_dev_fault(const struct vs_vhost_dev *d, char *why, size_t whylen)
{
	uintptr_t addr = __atomic_load_n(&d->fault.addr, __ATOMIC_ACQUIRE);

	if (!addr)
		return false;
	for (unsigned i = 0; i < d->mem.nregions; i++) {
		const struct vs_mem_region *r = &d->mem.regions[i];
		uintptr_t host = (uintptr_t)r->host;
		if (addr >= host && addr - host < r->size) {
			snprintf(why, whylen,
				 "guest memory vanished under the device: a fault at guest address "
				 "%#llx (region %u, %#llx bytes in): the frontend shrank its "
				 "memory file",
				 (unsigned long long)(r->gpa + (addr - host)), i,
				 (unsigned long long)(addr - host));
			return true;
		}
	}
	if (d->log_map.base && addr >= (uintptr_t)d->log_map.base &&
	    addr - (uintptr_t)d->log_map.base < d->log_map.len)
		snprintf(why, whylen,
			 "the dirty log vanished under the device (a fault %#llx bytes into "
			 "it): the frontend shrank its log file",
			 (unsigned long long)(addr - (uintptr_t)d->log_map.base));
	else if (d->inflight_map.base && addr >= (uintptr_t)d->inflight_map.base &&
		 addr - (uintptr_t)d->inflight_map.base < d->inflight_map.len)
		snprintf(why, whylen,
			 "the in-flight region vanished under the device (a fault %#llx bytes "
			 "into it): the frontend shrank its file",
			 (unsigned long long)(addr - (uintptr_t)d->inflight_map.base));
	else
		snprintf(why, whylen, "guest memory vanished under the device (a fault at %p)",
			 (void *)addr);
	return true;
}

bool vs_vhost_dev_wedged(const struct vs_vhost_dev *d)
{
	return d->wedged;
}

const char *vs_vhost_dev_last_error(const struct vs_vhost_dev *d)
{
	return d->last_error;
}

/* ---- handlers ----------------------------------------------------------------------------- */

static int set_features_exec(struct vs_vhost_dev *d, uint64_t f, char *why, size_t whylen)
{
	uint64_t log_all = 1ull << VS_VHOST_F_LOG_ALL;
	bool was;

	if (f & ~d->offered_features)
		return FAIL(-EINVAL, "features %#llx were not offered",
			    (unsigned long long)(f & ~d->offered_features));
	/* Logging turned on or off (a migration starts or ends): the running rings take the
	 * new setting by a restart. */
	if ((f ^ d->features) & log_all) {
		if (vs_vhost_rings_stop(d))
			return FAIL(-EIO, "a queue could not be stopped to switch dirty logging");
		VS_INFO(VHOST, "dirty logging %s%s", (f & log_all) ? "on" : "off",
			(f & log_all) && !d->log.bits ? " (no log yet: SET_LOG_BASE)" : "");
	}
	was = vs_vhost_log_active(d);
	d->features = f;
	vs_vhost_log_changed(d, was);
	VS_INFO(VHOST, "features acked %#llx (protocol features %s)", (unsigned long long)f,
		proto_negotiated(d) ? "on" : "off");
	/* Without PROTOCOL_FEATURES rings count as enabled: that may start some. */
	return vs_vhost_rings_update(d, why, whylen);
}

static int set_protocol_features_exec(struct vs_vhost_dev *d, uint64_t f, char *why, size_t whylen)
{
	if (f & ~VS_VHOST_DEV_PROTOCOL_FEATURES)
		return FAIL(-EINVAL, "protocol features %#llx were not offered",
			    (unsigned long long)(f & ~VS_VHOST_DEV_PROTOCOL_FEATURES));
	d->protocol_features = f;
	VS_INFO(VHOST, "protocol features acked %#llx", (unsigned long long)f);
	return 0;
}

static int set_vring_num_exec(struct vs_vhost_dev *d, const struct vs_vhost_vring_state *s,
			      char *why, size_t whylen)
{
	struct vs_vhost_ring *v = ring_stopped(d, s->index, why, whylen);

	if (!v)
		return s->index < d->max_queues ? -EBUSY : -EINVAL;
	v->num = s->num; /* validated: power of two, <= 32768 */
	VS_INFO(VHOST, "queue %u size %u", s->index, s->num);
	return 0;
}

/* A started ring's addresses stay; only its logging may change (vhost-user.rst: logging of
 * the used ring starts and stops by SET_VRING_ADDR with VHOST_VRING_F_LOG).  Restarts it. */
static int set_vring_log_exec(struct vs_vhost_dev *d, struct vs_vhost_ring *v,
			      const struct vs_vhost_vring_addr *a, char *why, size_t whylen)
{
	if (a->desc_user_addr != v->addr.desc_user_addr ||
	    a->avail_user_addr != v->addr.avail_user_addr ||
	    a->used_user_addr != v->addr.used_user_addr)
		return FAIL(-EBUSY, "ring %u is started: its addresses cannot change", a->index);
	if (v->running && ring_stop(d, a->index))
		return FAIL(-EIO, "ring %u could not be stopped", a->index);
	v->addr = *a;
	VS_INFO(VHOST, "queue %u: used ring logging %s (gpa %#llx)", a->index,
		(a->flags & VS_VHOST_VRING_F_LOG) ? "on" : "off",
		(unsigned long long)a->log_guest_addr);
	return ring_update(d, a->index, why, whylen);
}

static int set_vring_addr_exec(struct vs_vhost_dev *d, const struct vs_vhost_vring_addr *a,
			       char *why, size_t whylen)
{
	struct vs_vhost_ring *v = ring_get(d, a->index, why, whylen);
	struct vs_vhost_ring tmp;
	struct vs_vhost_vring vr;
	int rc;

	if (!v)
		return -EINVAL;
	if (a->flags & ~VS_VHOST_VRING_F_LOG)
		return FAIL(-EINVAL, "ring %u flags %#x: unknown flags", a->index, a->flags);
	if ((a->flags & VS_VHOST_VRING_F_LOG) &&
	    a->log_guest_addr > UINT64_MAX - vs_vring_used_bytes(VS_VRING_MAX_SIZE))
		return FAIL(-EINVAL, "ring %u log address %#llx wraps", a->index,
			    (unsigned long long)a->log_guest_addr);
	if (v->started && v->addr_set)
		return set_vring_log_exec(d, v, a, why, whylen);
	if (!(v = ring_stopped(d, a->index, why, whylen)))
		return -EBUSY;
	if (!d->mem.nregions)
		return FAIL(-EINVAL, "ring %u addresses before any memory table", a->index);
	tmp = *v;
	tmp.addr = *a;
	tmp.addr_set = true;
	/* Check now against the current size and map; start re-checks against later ones. */
	if (tmp.num && (rc = ring_translate(d, &tmp, &vr, why, whylen)))
		return rc;
	v->addr = *a;
	v->addr_set = true;
	VS_INFO(VHOST, "queue %u addresses: desc %#llx avail %#llx used %#llx", a->index,
		(unsigned long long)a->desc_user_addr, (unsigned long long)a->avail_user_addr,
		(unsigned long long)a->used_user_addr);
	return 0;
}

static int set_vring_base_exec(struct vs_vhost_dev *d, const struct vs_vhost_vring_state *s,
			       char *why, size_t whylen)
{
	struct vs_vhost_ring *v = ring_stopped(d, s->index, why, whylen);

	if (!v)
		return s->index < d->max_queues ? -EBUSY : -EINVAL;
	v->last_avail_idx = (uint16_t)s->num;
	VS_INFO(VHOST, "queue %u base %u", s->index, s->num);
	return 0;
}

/* Stops the ring (spec: "stop ring upon receiving GET_VRING_BASE") and reports where the
 * device stopped consuming. */
static int get_vring_base_exec(struct vs_vhost_dev *d, const struct vs_vhost_vring_state *s,
			       struct vs_vhost_msg *reply, char *why, size_t whylen)
{
	struct vs_vhost_ring *v = ring_get(d, s->index, why, whylen);

	if (!v)
		return -EINVAL;
	if (ring_stop(d, s->index))
		return FAIL(-EIO, "ring %u could not be stopped", s->index);
	v->started = false;
	close_fd(&v->kick_fd); /* a restart brings a new SET_VRING_KICK */
	reply->size = sizeof(reply->payload.state);
	reply->payload.state.index = s->index;
	reply->payload.state.num = v->last_avail_idx;
	VS_INFO(VHOST, "queue %u get base: %u", s->index, v->last_avail_idx);
	return 0;
}

enum vring_fd { FD_KICK, FD_CALL, FD_ERR };

/* What an fd that is not an eventfd is, for the refusal. */
static const char *fd_kind(const struct stat *st, const char *link)
{
	switch (st->st_mode & S_IFMT) {
	case S_IFIFO:
		return "a pipe or FIFO";
	case S_IFSOCK:
		return "a socket";
	case S_IFREG:
		return "a regular file";
	case S_IFCHR:
		return "a character device";
	case S_IFDIR:
		return "a directory";
	default:
		return *link ? link : "not an eventfd";
	}
}

/* Kick, call and err fds must be eventfds, as the kernel's vhost requires: a pipe nobody
 * reads, a socket at end of file or a file can block or spin a worker.  An eventfd is made
 * non-blocking here, so a full counter (a frontend that never reads its call fd) is an
 * error the worker sees, not a wait.  That flag lives in the open file the frontend shares
 * with us and it may clear it again: the target copes with that too (src/target/worker.c
 * interrupts a worker blocked in a write). */
static int ring_fd_check(int fd, unsigned idx, const char *name, char *why, size_t whylen)
{
	char path[64], link[64] = "";
	struct stat st;
	ssize_t n;
	int fl;

	if (fstat(fd, &st) < 0)
		return FAIL(-errno, "queue %u %s fd: fstat: %s", idx, name, strerror(errno));
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	/* /proc names it; without /proc, an anonymous inode (no file type) is the best we can
	 * tell. */
	if (n > 0 ? strcmp(link, "anon_inode:[eventfd]") != 0 : (st.st_mode & S_IFMT) != 0)
		return FAIL(-EINVAL, "queue %u %s fd is %s, not an eventfd", idx, name,
			    fd_kind(&st, link));
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0))
		return FAIL(-errno, "queue %u %s fd: cannot make it non-blocking: %s", idx, name,
			    strerror(errno));
	return 0;
}

static int set_vring_fd_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, enum vring_fd which,
			     char *why, size_t whylen)
{
	static const char *const names[] = {"kick", "call", "err"};
	unsigned idx = (unsigned)(msg->payload.u64 & VS_VHOST_VRING_IDX_MASK);
	struct vs_vhost_ring *v = ring_get(d, idx, why, whylen);
	int fd, old, *slot, rc;
	bool restart;

	if (!v)
		return -EINVAL;
	if (!(msg->payload.u64 & VS_VHOST_VRING_NOFD) &&
	    (rc = ring_fd_check(msg->fds[0], idx, names[which], why, whylen)))
		return rc; /* the caller closes it */
	fd = (msg->payload.u64 & VS_VHOST_VRING_NOFD) ? -1 : take_fd(msg, 0);
	slot = which == FD_KICK ? &v->kick_fd : which == FD_CALL ? &v->call_fd : &v->err_fd;
	old = *slot;
	VS_INFO(VHOST, "queue %u %s fd %d%s", idx, names[which], fd,
		fd < 0 ? " (none: polling)" : "");

	if (which == FD_CALL && v->running && d->ops.call_fd_changed) {
		/* Frequent at run time (guest masks/unmasks its interrupt): swap in place. */
		if ((rc = d->ops.call_fd_changed(d->opaque, idx, fd))) {
			/* The user may hold either fd now: keep both open, for good. */
			d->wedged = true;
			return FAIL(rc, "queue %u: the new call fd could not be handed over: %s",
				    idx, strerror(-rc));
		}
		*slot = fd;
		close_fd(&old);
		return 0;
	}
	/* The worker holds the old fd: never close it under a running ring. */
	restart = v->running;
	if (restart && ring_stop(d, idx)) {
		close_fd(&fd);
		return FAIL(-EIO, "ring %u could not be stopped", idx);
	}
	*slot = fd;
	close_fd(&old);
	if (which == FD_KICK)
		v->started = true; /* spec: a ring starts once it has its kick */
	if (restart || which == FD_KICK)
		return ring_update(d, idx, why, whylen);
	return 0;
}

static int set_vring_enable_exec(struct vs_vhost_dev *d, const struct vs_vhost_vring_state *s,
				 char *why, size_t whylen)
{
	struct vs_vhost_ring *v = ring_get(d, s->index, why, whylen);

	if (!v)
		return -EINVAL;
	v->enabled = s->num;
	VS_INFO(VHOST, "queue %u %s", s->index, s->num ? "enabled" : "disabled");
	return ring_update(d, s->index, why, whylen);
}

static void reply_u64(struct vs_vhost_msg *reply, uint64_t v)
{
	reply->size = sizeof(reply->payload.u64);
	reply->payload.u64 = v;
}

/* Requests whose sender waits for a reply even without NEED_REPLY. */
static bool has_reply(uint32_t request)
{
	switch (request) {
	case VS_VHOST_GET_FEATURES:
	case VS_VHOST_GET_PROTOCOL_FEATURES:
	case VS_VHOST_GET_VRING_BASE:
	case VS_VHOST_GET_QUEUE_NUM:
	case VS_VHOST_GET_CONFIG:
	case VS_VHOST_GET_INFLIGHT_FD:
	case VS_VHOST_GET_MAX_MEM_SLOTS:
	case VS_VHOST_GET_STATUS:
	case VS_VHOST_SET_LOG_BASE: /* QEMU waits for an empty reply once the log is mapped */
		return true;
	default:
		return false;
	}
}

static int dispatch(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, struct vs_vhost_msg *reply,
		    char *why, size_t whylen)
{
	switch (msg->request) {
	case VS_VHOST_GET_FEATURES:
		reply_u64(reply, d->offered_features);
		VS_INFO(VHOST, "features offered %#llx", (unsigned long long)d->offered_features);
		return 0;
	case VS_VHOST_SET_FEATURES:
		return set_features_exec(d, msg->payload.u64, why, whylen);
	case VS_VHOST_GET_PROTOCOL_FEATURES:
		reply_u64(reply, VS_VHOST_DEV_PROTOCOL_FEATURES);
		return 0;
	case VS_VHOST_SET_PROTOCOL_FEATURES:
		return set_protocol_features_exec(d, msg->payload.u64, why, whylen);
	case VS_VHOST_GET_QUEUE_NUM:
		reply_u64(reply, d->max_queues);
		return 0;
	case VS_VHOST_GET_MAX_MEM_SLOTS:
		reply_u64(reply, VS_MEM_MAX_REGIONS);
		return 0;
	case VS_VHOST_SET_OWNER:
		VS_INFO(VHOST, "frontend took ownership%s", d->owner ? " (again)" : "");
		d->owner = true;
		return 0;
	case VS_VHOST_RESET_OWNER: /* deprecated; the spec allows "disable all rings" */
	case VS_VHOST_RESET_DEVICE:
		VS_INFO(VHOST, "%u{vhost_msg}: all rings reset", msg->request);
		rings_reset(d);
		if (msg->request == VS_VHOST_RESET_DEVICE)
			d->features = 0;
		return 0;
	case VS_VHOST_SET_MEM_TABLE:
		return vs_vhost_set_mem_table_exec(d, msg, why, whylen);
	case VS_VHOST_ADD_MEM_REG:
		return vs_vhost_add_mem_reg_exec(d, msg, why, whylen);
	case VS_VHOST_REM_MEM_REG:
		return vs_vhost_rem_mem_reg_exec(d, msg, why, whylen);
	case VS_VHOST_SET_LOG_BASE:
		return vs_vhost_set_log_base_exec(d, msg, why, whylen);
	case VS_VHOST_GET_INFLIGHT_FD:
		return vs_vhost_get_inflight_fd_exec(d, msg, reply, why, whylen);
	case VS_VHOST_SET_INFLIGHT_FD:
		return vs_vhost_set_inflight_fd_exec(d, msg, why, whylen);
	case VS_VHOST_SET_VRING_NUM:
		return set_vring_num_exec(d, &msg->payload.state, why, whylen);
	case VS_VHOST_SET_VRING_ADDR:
		return set_vring_addr_exec(d, &msg->payload.addr, why, whylen);
	case VS_VHOST_SET_VRING_BASE:
		return set_vring_base_exec(d, &msg->payload.state, why, whylen);
	case VS_VHOST_GET_VRING_BASE:
		return get_vring_base_exec(d, &msg->payload.state, reply, why, whylen);
	case VS_VHOST_SET_VRING_KICK:
		return set_vring_fd_exec(d, msg, FD_KICK, why, whylen);
	case VS_VHOST_SET_VRING_CALL:
		return set_vring_fd_exec(d, msg, FD_CALL, why, whylen);
	case VS_VHOST_SET_VRING_ERR:
		return set_vring_fd_exec(d, msg, FD_ERR, why, whylen);
	case VS_VHOST_SET_VRING_ENABLE:
		return set_vring_enable_exec(d, &msg->payload.state, why, whylen);
	case VS_VHOST_GET_CONFIG:
		/* vhost-user-scsi keeps its config in QEMU; an empty payload means "error". */
		reply->size = 0;
		VS_WARNING(VHOST, "GET_CONFIG not supported: empty reply");
		return 0;
	default: /* SET_CONFIG, SET_LOG_FD, slave channel, status: not offered */
		return FAIL(-ENOTSUP, "%s is not supported", vs_vhost_request_name(msg->request));
	}
}

int vs_vhost_dev_handle(struct vs_vhost_dev *d, struct vs_vhost_msg *msg,
			struct vs_vhost_msg *reply)
{
	char why[VS_VHOST_WHY_LEN] = "";
	bool need_reply = msg->flags & VS_VHOST_FLAG_NEED_REPLY;
	int rc;

	memset(reply, 0, offsetof(struct vs_vhost_msg, payload) + sizeof(reply->payload.u64));
	reply->nfds = 0;
	reply->request = msg->request;
	reply->flags = VS_VHOST_VERSION | VS_VHOST_FLAG_REPLY;

	if (d->wedged) {
		VS_ERROR(VHOST, "%s refused: the device is wedged",
			 vs_vhost_request_name(msg->request));
		snprintf(d->last_error, sizeof(d->last_error), "the device is wedged");
		vs_vhost_msg_close_fds(msg);
		return -EIO;
	}
	/* Cheap, and makes this entry point safe on any input. */
	if ((rc = vs_vhost_msg_validate(msg, why, sizeof(why)))) {
		VS_ERROR(VHOST, "bad message %u{vhost_msg}: %s", msg->request, why);
		snprintf(d->last_error, sizeof(d->last_error), "%s", why);
		vs_vhost_msg_close_fds(msg);
		return vs_vhost_dev_reject(d, msg, reply);
	}
	VS_VERBOSE(VHOST, "msg %u{vhost_msg} size %u", msg->request, msg->size);
	rc = dispatch(d, msg, reply, why, sizeof(why));
	vs_vhost_msg_close_fds(msg); /* whatever a handler did not keep */
	if (rc == 0)
		goto ok;

	VS_ERROR(VHOST, "%u{vhost_msg} failed: %s (%d)", msg->request, why, rc);
	snprintf(d->last_error, sizeof(d->last_error), "%s", *why ? why : strerror(-rc));
	if (need_reply) {
		reply_u64(reply, 1);
		return 1;
	}
	if (rc == -ENOTSUP && !has_reply(msg->request))
		return 0; /* refused, but the session can go on */
	return rc;
ok:
	if (has_reply(msg->request))
		return 1;
	if (need_reply) {
		reply_u64(reply, 0);
		return 1;
	}
	return 0;
}

int vs_vhost_dev_reject(struct vs_vhost_dev *d, const struct vs_vhost_msg *msg,
			struct vs_vhost_msg *reply)
{
	(void)d;
	if (!(msg->flags & VS_VHOST_FLAG_NEED_REPLY) ||
	    (msg->flags & VS_VHOST_VERSION_MASK) != VS_VHOST_VERSION)
		return -EBADMSG;
	memset(reply, 0, sizeof(*reply));
	reply->request = msg->request;
	reply->flags = VS_VHOST_VERSION | VS_VHOST_FLAG_REPLY;
	reply_u64(reply, 1);
	return 1;
}
