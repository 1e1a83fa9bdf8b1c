/* SPDX-License-Identifier: MIT */
/*
 * Dirty logging for live migration (vhost-user.rst "Migration"): with
 * VHOST_USER_PROTOCOL_F_LOG_SHMFD the frontend shares its log as a memory file
 * (SET_LOG_BASE), asks for logging with VHOST_F_LOG_ALL in SET_FEATURES, and for the used
 * rings' writes with VHOST_VRING_F_LOG in SET_VRING_ADDR (log_guest_addr: the used ring's
 * guest address).  Every change reaches the rings by stopping and restarting the running ones
 * (the requests in flight complete under the old setting first): a worker never reads the
 * setting while it changes, and the request path pays one predictable branch.
 *
 * The log comes from the frontend: its file must be a memory file holding the whole log now
 * (the SIGBUS guard covers it shrinking later), and it must have a bit for every page of
 * guest memory (or the pages beyond would never be copied); a smaller one is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vioscope/trace.h>

#include "vhost/vhost_int.h"

#define FAIL(code, ...) vs_fail(why, whylen, code, __VA_ARGS__)

/* A log for 2^52 bytes of guest memory (4 PiB): anything larger is a frontend's mistake. */
#define LOG_MAX_BYTES (1ull << 37)

bool vs_vhost_log_active(const struct vs_vhost_dev *d)
{
	/* A log installed earlier that guest memory has outgrown since (it grew while logging
	 * was off) is not used: the rings log nothing until the frontend sends a log that
	 * covers it, rather than losing the pages beyond (found by fuzz target_session,
	 * corpus log_stale). */
	return (d->features & (1ull << VS_VHOST_F_LOG_ALL)) && d->log.bits &&
	       vs_vhost_log_covers(&d->log, &d->mem);
}

void vs_vhost_log_changed(struct vs_vhost_dev *d, bool was)
{
	bool now = vs_vhost_log_active(d);

	if (now != was && d->ops.logging)
		d->ops.logging(d->opaque, now, d->log.bytes);
}

/* The log's bytes needed for guest memory that ends at gpa_end. */
static uint64_t log_bytes_for(uint64_t gpa_end)
{
	uint64_t pages = gpa_end / VS_LOG_PAGE + !!(gpa_end % VS_LOG_PAGE);
	return pages / 8 + !!(pages % 8);
}

bool vs_vhost_log_covers_range(const struct vs_dirty_log *log, uint64_t gpa, uint64_t len)
{
	return gpa <= UINT64_MAX - len && log_bytes_for(gpa + len) <= log->bytes;
}

bool vs_vhost_log_covers(const struct vs_dirty_log *log, const struct vs_mem *m)
{
	for (unsigned i = 0; i < m->nregions; i++)
		if (!vs_vhost_log_covers_range(log, m->regions[i].gpa, m->regions[i].size))
			return false;
	return true;
}

void vs_vhost_log_unmap(struct vs_vhost_dev *d)
{
	if (d->wedged)
		return; /* a queue may still run on it */
	if (d->log.bits && d->log.outside)
		VS_WARNING(VHOST, "dirty log: %llu write(s) could not be logged",
			   (unsigned long long)d->log.outside);
	vs_vhost_unmap_file(&d->log_map);
	d->log = (struct vs_dirty_log){.mem = &d->mem};
}

int vs_vhost_set_log_base_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, char *why,
			       size_t whylen)
{
	const struct vs_vhost_log *l = &msg->payload.log;
	struct vs_vhost_mem_region r = {.memory_size = l->mmap_size, .mmap_offset = l->mmap_offset};
	struct vs_dirty_log nlog = {.mem = &d->mem};
	struct vs_vhost_map nmap = {.guard = -1};
	bool restart, was;
	uint8_t *host;
	int rc;

	if (!(d->protocol_features & (1ull << VS_VHOST_PROTOCOL_F_LOG_SHMFD)))
		return FAIL(-EINVAL, "SET_LOG_BASE before LOG_SHMFD was negotiated");
	if (msg->nfds != 1)
		return FAIL(-EINVAL, "SET_LOG_BASE without the log's fd (only a shared-memory log "
				     "is supported)");
	if (l->mmap_size == 0 || l->mmap_size > LOG_MAX_BYTES ||
	    l->mmap_offset > UINT64_MAX - l->mmap_size)
		return FAIL(-EINVAL, "log of %#llx bytes at offset %#llx: not a usable size",
			    (unsigned long long)l->mmap_size, (unsigned long long)l->mmap_offset);
	nlog.bytes = l->mmap_size;
	if (!vs_vhost_log_covers(&nlog, &d->mem))
		return FAIL(-EINVAL,
			    "log of %#llx bytes is smaller than guest memory needs (a bit per "
			    "%u-byte page)",
			    (unsigned long long)l->mmap_size, VS_LOG_PAGE);
	if ((rc = vs_vhost_map_file(d, &r, msg->fds[0], &nmap, &host, why, whylen)))
		return rc;
	nlog.bits = host;
	nlog.skip_data_in = getenv("VIOSCOPE_TEST_SKIP_DATA_IN_LOG") != NULL;
	if (nlog.skip_data_in)
		VS_WARNING(VHOST, "dirty log: data-in buffers NOT logged "
				  "(VIOSCOPE_TEST_SKIP_DATA_IN_LOG, a test's switch)");

	/* While logging was asked for, the running rings hold the old log (or none): stop them,
	 * swap, start them again. */
	restart = d->features & (1ull << VS_VHOST_F_LOG_ALL);
	if (restart && vs_vhost_rings_stop(d)) {
		vs_vhost_unmap_file(&nmap);
		return FAIL(-EIO, "a queue could not be stopped: the log stays");
	}
	was = vs_vhost_log_active(d);
	vs_vhost_log_unmap(d);
	d->log = nlog;
	d->log_map = nmap;
	VS_INFO(VHOST, "dirty log: %#llx bytes at offset %#llx (guest memory up to %#llx)",
		(unsigned long long)l->mmap_size, (unsigned long long)l->mmap_offset,
		(unsigned long long)(l->mmap_size * 8 * VS_LOG_PAGE));
	vs_vhost_log_changed(d, was);
	return restart ? vs_vhost_rings_update(d, why, whylen) : 0;
}
