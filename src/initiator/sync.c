/* SPDX-License-Identifier: MIT */
/*
 * Waiting for the target: one command run synchronously through the pass-through path
 * on request queue 0 (scans), and the bounded wait on an eventfd or the socket's hang-up
 * that scans, task management and LUN resets all use.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "initiator/initiator_int.h"

#define SYNC_TRIES 5 /* a command's retries on UNIT ATTENTION or busy */

struct ini_sync {
	struct vs_ini_io io;
	atomic_bool done;
	struct vs_ini *ini;
};

static void sync_done(struct vs_ini_io *io)
{
	struct ini_sync *s = (struct ini_sync *)io; /* io is the first member */
	uint64_t one = 1;

	atomic_store(&s->done, true);
	if (write(s->ini->sync_fd, &one, sizeof(one)) != sizeof(one))
		VS_ERROR(SCSI, "sync completion: eventfd write failed");
}

int ini_wait_fd(struct vs_ini *ini, int fd, unsigned timeout_us)
{
	struct pollfd p[2] = {
	    {.fd = ini->vhost.sock, .events = POLLRDHUP},
	    {.fd = fd, .events = POLLIN},
	};
	struct timespec ts = {timeout_us / 1000000, (long)(timeout_us % 1000000) * 1000};
	uint64_t v;

	if (ini->vhost.sock < 0)
		return -ENOTCONN;
	if (ppoll(p, fd >= 0 ? 2 : 1, &ts, NULL) <= 0)
		return 0;
	/* The back-end never speaks unasked: anything readable is the end of the stream. */
	if (p[0].revents)
		return -ENOTCONN;
	if (p[1].revents && read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return -errno;
	return 1;
}

static int exec_once(struct vs_ini *ini, unsigned target, unsigned lun, const uint8_t *cdb,
		     unsigned cdb_len, uint32_t len, bool data_in, struct vs_ini_io *res)
{
	struct vs_ini_queue *q = &ini->q[0];
	struct iovec iov = {ini->scan_buf, len};
	struct ini_sync s = {.ini = ini};
	uint64_t deadline = vs_mono_ns() + (uint64_t)ini->opts.timeout_ms * 1000000ull;
	unsigned spins = 0;
	int rc;

	s.io.iov = &iov;
	s.io.iovcnt = len ? 1 : 0;
	s.io.done = sync_done;
	if (data_in && len)
		memset(ini->scan_buf, 0, len);
	while ((rc = vs_ini_submit_cdb(q, &s.io, target, lun, cdb, cdb_len, data_in)) == -EBUSY) {
		if (!ini->opts.interrupt)
			vs_ini_poll(q, 64);
		if ((rc = ini_wait_fd(ini, -1, 100)) < 0 || vs_mono_ns() > deadline)
			return rc < 0 ? rc : -ETIMEDOUT;
	}
	if (rc)
		return rc;
	while (!atomic_load(&s.done)) {
		if (!ini->opts.interrupt)
			vs_ini_poll(q, 64);
		if (atomic_load(&s.done))
			break;
		/* Polled: look again soon (the target may be waking up), then less often. */
		rc = ini_wait_fd(ini, ini->sync_fd,
				 ini->opts.interrupt ? 100000
				 : spins++ < 1000    ? 0
						     : 200);
		if (rc >= 0 && vs_mono_ns() <= deadline)
			continue;
		/* Give up, unless a poller already took it: then its callback is imminent. */
		if (ini_detach(q, &s.io)) {
			VS_ERROR(SCSI, "command %s{cdb} to %u:%u: %s", VS_BYTES(cdb, cdb_len),
				 target, lun, rc < 0 ? "the target went away" : "timed out");
			return rc < 0 ? rc : -ETIMEDOUT;
		}
		deadline = UINT64_MAX;
	}
	*res = s.io;
	return 0;
}

/* One command with the retries a midlayer would do (UNIT ATTENTION, busy).  0 with the
 * outcome in *res (res->result may be an error), or -errno when it could not run. */
int ini_exec_sync(struct vs_ini *ini, unsigned target, unsigned lun, const uint8_t *cdb,
		  unsigned cdb_len, uint32_t len, bool data_in, struct vs_ini_io *res)
{
	int rc = 0;

	for (unsigned t = 0; t < SYNC_TRIES; t++) {
		if ((rc = exec_once(ini, target, lun, cdb, cdb_len, len, data_in, res)))
			return rc;
		if (res->result == -EAGAIN || res->result == -EBUSY) {
			usleep(1000);
			continue;
		}
		if (res->result != -EIO ||
		    vs_scsi_sense_key(res->sense, res->sense_len) != VS_SENSE_UNIT_ATTENTION)
			return 0;
		VS_INFO(SCSI, "command %#x{scsi_op} to %u:%u: %s{sense}, retrying", cdb[0], target,
			lun, VS_BYTES(res->sense, res->sense_len));
	}
	return 0;
}
