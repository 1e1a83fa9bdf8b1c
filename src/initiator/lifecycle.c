/* SPDX-License-Identifier: MIT */
/*
 * The driver's life, in the vioscsi miniport's order (FindAdapter, HwInitialize,
 * HwStartIo ...), each step a named function traced on the cold path:
 *
 *   initialise      connect to the socket, SET_OWNER
 *   negotiate       device features & ours, protocol features, SET_FEATURES
 *   settle_config   queue count (GET_QUEUE_NUM), limits (GET_CONFIG when offered)
 *   setup_inflight  keep_inflight: GET_INFLIGHT_FD once, SET_INFLIGHT_FD on reconnections
 *   setup_queues    SET_MEM_TABLE (one region), per ring NUM/ADDR/BASE/CALL/KICK
 *   mark_ready      enable the rings (DRIVER_OK), post the event buffers
 *   scan_luns       REPORT LUNS, INQUIRY, READ CAPACITY(16), VPD B2 (scan.c)
 *
 * A reconnection runs them all again over the same memory region.  With keep_inflight and a
 * target that takes the in-flight region (INFLIGHT_SHMFD), a reconnection after the target
 * went away resumes the rings as they are (base: the used index; what the old target took
 * and did not complete, the new one resubmits from the region) instead of failing the
 * requests in flight and starting the rings afresh.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "initiator/initiator_int.h"

#define WANT_FEATURES                                                                              \
	(VS_VIRTIO_BIT(VS_VIRTIO_F_VERSION_1) | VS_VIRTIO_BIT(VS_VIRTIO_F_EVENT_IDX) |             \
	 VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC) | VS_VIRTIO_BIT(VS_VIRTIO_SCSI_F_HOTPLUG) |      \
	 VS_VIRTIO_BIT(VS_VIRTIO_SCSI_F_CHANGE) | VS_VIRTIO_BIT(VS_VHOST_F_PROTOCOL_FEATURES))
#define WANT_PROTOCOL                                                                              \
	((1ull << VS_VHOST_PROTOCOL_F_MQ) | (1ull << VS_VHOST_PROTOCOL_F_REPLY_ACK) |              \
	 (1ull << VS_VHOST_PROTOCOL_F_CONFIG))

static unsigned umin(unsigned a, unsigned b)
{
	return a < b ? a : b;
}

static bool has(uint64_t features, unsigned bit)
{
	return features & (1ull << bit);
}

int ini_initialize(struct vs_ini *ini)
{
	struct timeval tv = {ini->opts.timeout_ms / 1000, (ini->opts.timeout_ms % 1000) * 1000};
	int rc;

	VS_INFO(INIT, "initialise: connecting to %s", ini->socket_path);
	if ((rc = vs_vhost_drv_connect(&ini->vhost, ini->socket_path))) {
		VS_ERROR(INIT, "initialise: cannot connect to %s: %s", ini->socket_path,
			 strerror(-rc));
		return rc;
	}
	/* A target that accepts and then hangs must not wedge the driver (or close()). */
	if (setsockopt(ini->vhost.sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(ini->vhost.sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)))
		VS_WARNING(INIT, "initialise: socket timeouts not set: %s", strerror(errno));
	if ((rc = vs_vhost_drv_set_owner(&ini->vhost))) {
		VS_ERROR(INIT, "initialise: SET_OWNER refused: %s", strerror(-rc));
		return rc;
	}
	return 0;
}

int ini_negotiate(struct vs_ini *ini)
{
	uint64_t proto = 0;
	int rc;

	if ((rc = vs_vhost_drv_get_features(&ini->vhost, &ini->dev_features))) {
		VS_ERROR(FEATURES, "negotiate: GET_FEATURES failed: %s", strerror(-rc));
		return rc;
	}
	if (!(ini->dev_features & VS_VIRTIO_BIT(VS_VIRTIO_F_VERSION_1))) {
		VS_ERROR(FEATURES,
			 "negotiate: device features %#llx lack VERSION_1 (legacy device)",
			 (unsigned long long)ini->dev_features);
		return -EOPNOTSUPP;
	}
	ini->features = ini->dev_features & WANT_FEATURES;
	if (has(ini->features, VS_VHOST_F_PROTOCOL_FEATURES)) {
		if ((rc = vs_vhost_drv_get_protocol_features(&ini->vhost, &proto))) {
			VS_ERROR(FEATURES, "negotiate: GET_PROTOCOL_FEATURES failed: %s",
				 strerror(-rc));
			return rc;
		}
		ini->proto_features = proto & WANT_PROTOCOL;
		if (ini->opts.keep_inflight)
			ini->proto_features |= proto & (1ull << VS_VHOST_PROTOCOL_F_INFLIGHT_SHMFD);
		if (ini->opts.dirty_log) {
			if (!has(proto, VS_VHOST_PROTOCOL_F_LOG_SHMFD) ||
			    !has(ini->dev_features, VS_VHOST_F_LOG_ALL)) {
				VS_ERROR(FEATURES, "negotiate: the target offers no dirty logging "
						   "(LOG_SHMFD and LOG_ALL)");
				return -EOPNOTSUPP;
			}
			ini->proto_features |= 1ull << VS_VHOST_PROTOCOL_F_LOG_SHMFD;
			ini->features |= 1ull << VS_VHOST_F_LOG_ALL;
		}
		if ((rc = vs_vhost_drv_set_protocol_features(&ini->vhost, ini->proto_features))) {
			VS_ERROR(FEATURES, "negotiate: SET_PROTOCOL_FEATURES %#llx failed: %s",
				 (unsigned long long)ini->proto_features, strerror(-rc));
			return rc;
		}
	} else {
		ini->proto_features = 0;
		VS_WARNING(FEATURES, "negotiate: no protocol features: one queue, no acks");
	}
	if ((rc = vs_vhost_drv_set_features(&ini->vhost, ini->features))) {
		VS_ERROR(FEATURES, "negotiate: SET_FEATURES %#llx failed: %s",
			 (unsigned long long)ini->features, strerror(-rc));
		return rc;
	}
	VS_INFO(FEATURES,
		"negotiate: device %#llx, driver %#llx, negotiated %#llx; protocol "
		"offered %#llx, acked %#llx (event_idx %d indirect %d hotplug %d change %d "
		"inflight %d)",
		(unsigned long long)ini->dev_features, (unsigned long long)WANT_FEATURES,
		(unsigned long long)ini->features, (unsigned long long)proto,
		(unsigned long long)ini->proto_features, has(ini->features, VS_VIRTIO_F_EVENT_IDX),
		has(ini->features, VS_VIRTIO_F_INDIRECT_DESC),
		has(ini->features, VS_VIRTIO_SCSI_F_HOTPLUG),
		has(ini->features, VS_VIRTIO_SCSI_F_CHANGE),
		has(ini->proto_features, VS_VHOST_PROTOCOL_F_INFLIGHT_SHMFD));
	return 0;
}

int ini_settle_config(struct vs_ini *ini, bool first)
{
	struct vs_virtio_scsi_config cfg;
	unsigned avail = 1, seg_max, max_sectors, cmd_per_lun;
	uint64_t num;
	int rc;

	if (has(ini->proto_features, VS_VHOST_PROTOCOL_F_MQ)) {
		if ((rc = vs_vhost_drv_get_queue_num(&ini->vhost, &num))) {
			VS_ERROR(CONFIG, "settle: GET_QUEUE_NUM failed: %s", strerror(-rc));
			return rc;
		}
		if (num < VS_VIRTIO_SCSI_VQ_REQ0 + 1 || num > VS_VHOST_MAX_QUEUES) {
			VS_ERROR(CONFIG, "settle: the target has %llu queues: %s",
				 (unsigned long long)num,
				 "needs control, event and >= 1 request queue");
			return -EPROTO;
		}
		avail = (unsigned)num - VS_VIRTIO_SCSI_VQ_REQ0;
	}
	seg_max = umin(ini->opts.seg_max, INI_SEG_MAX_CAP);
	if (!has(ini->features, VS_VIRTIO_F_INDIRECT_DESC))
		seg_max = umin(seg_max, ini->opts.queue_size - 2);
	max_sectors = umin(ini->opts.max_sectors, INI_SECTORS_CAP);
	cmd_per_lun = umin(ini->opts.cmd_per_lun, ini->opts.queue_size);
	if (has(ini->proto_features, VS_VHOST_PROTOCOL_F_CONFIG)) {
		if ((rc = vs_vhost_drv_get_config(&ini->vhost, &cfg, sizeof(cfg)))) {
			VS_ERROR(CONFIG, "settle: GET_CONFIG failed: %s", strerror(-rc));
			return rc;
		}
		VS_INFO(CONFIG,
			"settle: device config queues %u seg_max %u max_sectors %u "
			"cmd_per_lun %u sense %u cdb %u",
			vs_le32(cfg.num_queues), vs_le32(cfg.seg_max), vs_le32(cfg.max_sectors),
			vs_le32(cfg.cmd_per_lun), vs_le32(cfg.sense_size), vs_le32(cfg.cdb_size));
		if (vs_le32(cfg.num_queues))
			avail = umin(avail, vs_le32(cfg.num_queues));
		if (vs_le32(cfg.seg_max))
			seg_max = umin(seg_max, vs_le32(cfg.seg_max));
		if (vs_le32(cfg.max_sectors))
			max_sectors = umin(max_sectors, vs_le32(cfg.max_sectors));
		if (vs_le32(cfg.cmd_per_lun))
			cmd_per_lun = umin(cmd_per_lun, vs_le32(cfg.cmd_per_lun));
	}
	if (first) {
		ini->nqueues = umin(umin(ini->opts.queues, avail), VS_INI_MAX_QUEUES);
		ini->queue_size = ini->opts.queue_size;
		ini->nslots = ini->queue_size;
	} else if (avail < ini->nqueues) {
		VS_ERROR(CONFIG, "settle: the target now has %u request queues, we run %u", avail,
			 ini->nqueues);
		return -EPROTO;
	} else {
		/* Slots and tables were sized by the first connection. */
		seg_max = umin(seg_max, ini->seg_max);
	}
	ini->seg_max = seg_max;
	ini->max_sectors = max_sectors;
	ini->cmd_per_lun = cmd_per_lun;
	if (ini->nqueues < ini->opts.queues)
		VS_WARNING(CONFIG, "settle: %u request queues wanted, the target has %u",
			   ini->opts.queues, avail);
	VS_INFO(CONFIG,
		"settle: %u request queues of %u, queue size %u, seg_max %u, max_sectors "
		"%u, cmd_per_lun %u, %s mode",
		ini->nqueues, avail, ini->queue_size, ini->seg_max, ini->max_sectors,
		ini->cmd_per_lun, ini->opts.interrupt ? "interrupt" : "poll");
	return 0;
}

static int new_eventfd(int *fd, bool nonblock)
{
	if (*fd >= 0)
		return 0; /* kept across reconnections */
	*fd = eventfd(0, EFD_CLOEXEC | (nonblock ? EFD_NONBLOCK : 0));
	return *fd < 0 ? -errno : 0;
}

/* One ring: private state fresh (or, resuming, kept as it is), then NUM, ADDR, BASE, CALL,
 * KICK (the kick starts it).  A resumed ring starts at its used index, as QEMU restarts a
 * ring after a back-end crash: what the old back-end took and never used, the new one
 * resubmits from the in-flight region. */
static int ring_setup(struct vs_ini *ini, struct ini_vq *v, bool want_call, bool nonblock)
{
	struct vs_vhost_drv *f = &ini->vhost;
	uint16_t base = 0;
	int rc;

	if (ini->resume) {
		base = vs_vq_drv_used_idx(v->vq.used);
	} else {
		vs_vq_drv_destroy(&v->vq);
		rc = vs_vq_drv_init(&v->vq, v->size, v->ring,
				    has(ini->features, VS_VIRTIO_F_EVENT_IDX),
				    has(ini->features, VS_VIRTIO_F_INDIRECT_DESC));
		if (rc)
			return rc;
	}
	v->vq.qid = v->idx;
	if ((rc = new_eventfd(&v->kick_fd, true)) ||
	    (want_call && (rc = new_eventfd(&v->call_fd, nonblock)))) {
		VS_ERROR(QUEUE, "queue %u: eventfd: %s", v->idx, strerror(-rc));
		return rc;
	}
	if ((rc = vs_vhost_drv_set_vring_num(f, v->idx, v->size)) ||
	    (rc = vs_vhost_drv_set_vring_addr_log(
		 f, v->idx, (uint64_t)(uintptr_t)v->vq.desc, (uint64_t)(uintptr_t)v->vq.avail,
		 (uint64_t)(uintptr_t)v->vq.used,
		 ini->log_fd >= 0 ? (uint64_t)((uint8_t *)v->vq.used - ini->base) : VS_LOG_NONE)) ||
	    (rc = vs_vhost_drv_set_vring_base(f, v->idx, base)) ||
	    (rc = vs_vhost_drv_set_vring_call(f, v->idx, v->call_fd)) ||
	    (rc = vs_vhost_drv_set_vring_kick(f, v->idx, v->kick_fd))) {
		VS_ERROR(QUEUE, "queue %u: ring set-up refused: %s", v->idx, strerror(-rc));
		return rc;
	}
	VS_INFO(QUEUE, "queue %u: size %u desc %p avail %p used %p kick %d call %d%s %u", v->idx,
		v->size, v->vq.desc, v->vq.avail, v->vq.used, v->kick_fd, v->call_fd,
		ini->resume ? ", resumed at used idx" : ", base", base);
	return 0;
}

/* The dirty log, made once (kept across reconnections): a bit per page of the shared
 * region, in 8-byte words as QEMU sizes it. */
static int setup_dirty_log(struct vs_ini *ini)
{
	int rc;

	if (ini->log_fd < 0) {
		ini->log_bytes = (ini->size / VS_LOG_PAGE / 64 + 1) * 8;
		ini->log_fd = memfd_create("vioscope-dirty-log", MFD_CLOEXEC);
		if (ini->log_fd < 0 || ftruncate(ini->log_fd, (off_t)ini->log_bytes) < 0) {
			rc = -errno;
			VS_ERROR(MEMORY, "setup: dirty log: %s", strerror(errno));
			return rc;
		}
	}
	if ((rc = vs_vhost_drv_set_log_base(&ini->vhost, ini->log_fd, ini->log_bytes))) {
		VS_ERROR(MEMORY, "setup: SET_LOG_BASE refused: %s", strerror(-rc));
		return rc;
	}
	VS_INFO(MEMORY, "setup: dirty log of %llu bytes shared: the target logs its writes",
		(unsigned long long)ini->log_bytes);
	return 0;
}

int ini_setup_queues(struct vs_ini *ini)
{
	struct vs_vhost_mem_region reg = {
	    .guest_phys_addr = 0,
	    .memory_size = ini->size,
	    .userspace_addr = (uint64_t)(uintptr_t)ini->base,
	    .mmap_offset = 0,
	};
	int rc;

	if ((rc = vs_vhost_drv_set_mem_table(&ini->vhost, &reg, 1, &ini->memfd))) {
		VS_ERROR(MEMORY, "setup: SET_MEM_TABLE (%zu bytes) refused: %s", ini->size,
			 strerror(-rc));
		return rc;
	}
	VS_INFO(MEMORY, "setup: memory table sent: gpa 0, %zu bytes, uva %p", ini->size, ini->base);
	if (ini->opts.dirty_log && (rc = setup_dirty_log(ini)))
		return rc;
	pthread_mutex_lock(&ini->ctl_lock);
	rc = ring_setup(ini, &ini->ctl, true, true);
	pthread_mutex_unlock(&ini->ctl_lock);
	if (rc)
		return rc;
	pthread_mutex_lock(&ini->evt_lock);
	rc = ring_setup(ini, &ini->evt, true, true);
	if (!rc && !ini->resume) /* resumed: the buffers posted are still posted */
		rc = ini_post_events(ini);
	pthread_mutex_unlock(&ini->evt_lock);
	if (rc)
		return rc;
	for (unsigned i = 0; i < ini->nqueues; i++) {
		struct vs_ini_queue *q = &ini->q[i];

		pthread_mutex_lock(&q->lock);
		__atomic_store_n(&q->ready, false, __ATOMIC_RELAXED);
		if (!ini->resume)
			ini_queue_reset_slots(q);
		rc = ring_setup(ini, &q->v, ini->opts.interrupt, false);
		if (!rc && !ini->opts.interrupt && !ini->resume)
			vs_vq_drv_enable_cb(&q->v.vq, false); /* polled: no interrupts */
		if (!rc)
			__atomic_store_n(&q->used, q->v.vq.used, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&q->lock);
		if (rc)
			return rc;
	}
	VS_INFO(QUEUE, "setup: %u rings ready to start", VS_VIRTIO_SCSI_VQ_REQ0 + ini->nqueues);
	return 0;
}

int ini_mark_ready(struct vs_ini *ini)
{
	unsigned n = VS_VIRTIO_SCSI_VQ_REQ0 + ini->nqueues;
	uint64_t one = 1;
	int rc;

	if (has(ini->features, VS_VHOST_F_PROTOCOL_FEATURES)) {
		for (unsigned i = 0; i < n; i++) {
			if ((rc = vs_vhost_drv_set_vring_enable(&ini->vhost, i, true))) {
				VS_ERROR(INIT, "ready: enabling ring %u failed: %s", i,
					 strerror(-rc));
				return rc;
			}
		}
	}
	/* The event buffers were posted before the ring started: tell the device. */
	if (write(ini->evt.kick_fd, &one, sizeof(one)) != sizeof(one))
		VS_WARNING(EVENT, "ready: event queue kick failed");
	for (unsigned i = 0; i < ini->nqueues; i++) {
		pthread_mutex_lock(&ini->q[i].lock);
		__atomic_store_n(&ini->q[i].ready, true, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&ini->q[i].lock);
		/* Resumed: requests the old target never took are in the ring, unannounced. */
		if (ini->resume)
			ini_kick(&ini->q[i]);
	}
	if (ini->resume) {
		ini->resume = ini->keep_rings = false;
		VS_INFO(INIT, "ready: %u rings resumed with their requests in flight", n);
		return 0;
	}
	VS_INFO(INIT, "ready: %u rings enabled (driver OK)", n);
	return 0;
}

bool ini_may_keep_inflight(const struct vs_ini *ini)
{
	return ini->opts.keep_inflight && ini->opts.reconnect && ini->inflight_fd >= 0 &&
	       has(ini->proto_features, VS_VHOST_PROTOCOL_F_INFLIGHT_SHMFD);
}

void ini_hold_queues(struct vs_ini *ini)
{
	for (unsigned i = 0; ini->q && i < ini->nqueues; i++) {
		struct vs_ini_queue *q = &ini->q[i];

		if (!q->ini)
			continue;
		pthread_mutex_lock(&q->lock);
		__atomic_store_n(&q->ready, false, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&q->lock);
	}
}

void ini_drop_connection(struct vs_ini *ini, bool may_keep)
{
	atomic_store(&ini->connected, false);
	ini->resume = false;
	/* Kept already (a reconnection attempt failed), or kept now: the target went away
	 * from rings that are whole, and the next one can take the region. */
	if (may_keep && (ini->keep_rings || ini_may_keep_inflight(ini))) {
		if (!ini->keep_rings)
			VS_INFO(INIT, "requests in flight kept for the next target to resume");
		ini->keep_rings = true;
		ini_hold_queues(ini);
	} else {
		ini->keep_rings = false;
		ini_fail_all(ini, -ENOTCONN, "connection dropped");
	}
	if (ini->vhost.sock >= 0)
		VS_INFO(INIT, "closing the connection to %s", ini->socket_path);
	vs_vhost_drv_close(&ini->vhost);
}

/* keep_inflight: the in-flight region.  The first connection that negotiates the feature
 * asks for it (GET_INFLIGHT_FD: every ring, as many descriptors as the largest); later ones
 * are handed it (SET_INFLIGHT_FD) before any ring is set up.  Decides whether this
 * connection resumes the rings kept from the last one. */
int ini_setup_inflight(struct vs_ini *ini)
{
	uint16_t nq = (uint16_t)(VS_VIRTIO_SCSI_VQ_REQ0 + ini->nqueues);
	uint16_t qs = (uint16_t)(ini->queue_size > INI_AUX_QSIZE ? ini->queue_size : INI_AUX_QSIZE);
	bool on = has(ini->proto_features, VS_VHOST_PROTOCOL_F_INFLIGHT_SHMFD);
	int rc = 0;

	if (on && ini->inflight_fd >= 0) {
		rc = vs_vhost_drv_set_inflight_fd(&ini->vhost, ini->inflight_fd, ini->inflight_size,
						  ini->inflight_offset, ini->inflight_queues,
						  ini->inflight_qsize);
		if (!rc) {
			VS_INFO(INIT,
				"inflight: region handed over again (%llu bytes, %u queues of %u)",
				(unsigned long long)ini->inflight_size, ini->inflight_queues,
				ini->inflight_qsize);
		} else if (rc == -EIO) {
			/* Refused: what it held is lost to this target; start over with a new one.
			 */
			VS_WARNING(INIT,
				   "inflight: SET_INFLIGHT_FD refused: asking for a new region");
			close(ini->inflight_fd);
			ini->inflight_fd = -1;
			on = false;
			rc = 0;
		} else {
			VS_ERROR(INIT, "inflight: SET_INFLIGHT_FD failed: %s", strerror(-rc));
			return rc;
		}
	}
	if (has(ini->proto_features, VS_VHOST_PROTOCOL_F_INFLIGHT_SHMFD) && ini->inflight_fd < 0) {
		rc = vs_vhost_drv_get_inflight_fd(&ini->vhost, nq, qs, &ini->inflight_fd,
						  &ini->inflight_size, &ini->inflight_offset);
		if (rc) {
			VS_ERROR(INIT, "inflight: GET_INFLIGHT_FD failed: %s", strerror(-rc));
			return rc;
		}
		ini->inflight_queues = nq;
		ini->inflight_qsize = qs;
	}
	ini->resume = on && ini->keep_rings;
	if (ini->keep_rings && !ini->resume) {
		ini->keep_rings = false;
		ini_fail_all(ini, -ENOTCONN,
			     "the new target resumes no requests (no INFLIGHT_SHMFD)");
	}
	return 0;
}

static int connect_steps(struct vs_ini *ini, bool first)
{
	int rc;

	if ((rc = ini_initialize(ini)) || (rc = ini_negotiate(ini)) ||
	    (rc = ini_settle_config(ini, first)))
		return rc;
	if (first && (rc = ini_shm_create(ini)))
		return rc;
	if ((rc = ini_setup_inflight(ini)))
		return rc;
	if ((rc = ini_setup_queues(ini)) || (rc = ini_mark_ready(ini)))
		return rc;
	if (first && (rc = ini_start_cq_threads(ini)))
		return rc;
	return ini_scan_luns(ini);
}

int ini_reconnect(struct vs_ini *ini)
{
	int rc;

	if (!ini->keep_rings)
		ini_fail_all(ini, -ENOTCONN, "reconnecting");
	if ((rc = connect_steps(ini, false))) {
		ini_drop_connection(ini, true);
		return rc;
	}
	atomic_fetch_add(&ini->connections, 1);
	atomic_store(&ini->connected, true);
	VS_INFO(INIT, "reconnected to %s (connection %u): %u LUNs", ini->socket_path,
		atomic_load(&ini->connections), atomic_load(&ini->nluns));
	return 0;
}

static int opts_settle(struct vs_ini_opts *o, const struct vs_ini_opts *in)
{
	*o = *in;
	if (!o->socket || !*o->socket)
		return -EINVAL;
	if (!o->queues)
		o->queues = 1;
	if (!o->queue_size)
		o->queue_size = 256;
	if (!o->seg_max)
		o->seg_max = 128;
	if (!o->max_sectors)
		o->max_sectors = 2048;
	if (!o->cmd_per_lun)
		o->cmd_per_lun = o->queue_size;
	if (!o->data_mem)
		o->data_mem = 64u << 20;
	if (!o->timeout_ms)
		o->timeout_ms = 10000;
	if (o->queue_size < 4 || o->queue_size > VS_VRING_MAX_SIZE ||
	    (o->queue_size & (o->queue_size - 1)))
		return -EINVAL;
	return 0;
}

int vs_ini_open(struct vs_ini **out, const struct vs_ini_opts *opts)
{
	struct vs_ini *ini;
	int rc;

	*out = NULL;
	ini = calloc(1, sizeof(*ini));
	if (!ini)
		return -ENOMEM;
	ini->memfd = ini->wake_fd = ini->sync_fd = ini->vhost.sock = ini->log_fd = -1;
	ini->inflight_fd = -1;
	pthread_mutex_init(&ini->conn_lock, NULL);
	pthread_mutex_init(&ini->alloc_lock, NULL);
	pthread_mutex_init(&ini->ctl_lock, NULL);
	pthread_mutex_init(&ini->evt_lock, NULL);
	pthread_mutex_init(&ini->lun_lock, NULL);
	if ((rc = opts_settle(&ini->opts, opts))) {
		VS_ERROR(INIT, "open: bad options (socket %s, queue size %u): %s",
			 opts->socket ? opts->socket : "(none)", opts->queue_size,
			 "need a socket and a power-of-two queue size in 4..32768");
		free(ini);
		return rc;
	}
	ini->socket_path = strdup(opts->socket);
	ini->opts.socket = ini->socket_path;
	ini->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	ini->sync_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!ini->socket_path || ini->wake_fd < 0 || ini->sync_fd < 0) {
		rc = -ENOMEM;
		goto fail;
	}
	VS_INFO(INIT,
		"open %s: queues %u size %u seg_max %u max_sectors %u data %zu bytes, %s, "
		"reconnect %d keep_inflight %d",
		ini->socket_path, ini->opts.queues, ini->opts.queue_size, ini->opts.seg_max,
		ini->opts.max_sectors, ini->opts.data_mem,
		ini->opts.interrupt ? "interrupt" : "poll", ini->opts.reconnect,
		ini->opts.keep_inflight);
	pthread_mutex_lock(&ini->conn_lock);
	rc = connect_steps(ini, true);
	if (!rc) {
		atomic_store(&ini->connections, 1);
		atomic_store(&ini->connected, true);
	}
	pthread_mutex_unlock(&ini->conn_lock);
	if (rc || (rc = ini_start_ctl_thread(ini)))
		goto fail;
	VS_INFO(INIT, "open %s: %u queues, %u LUNs", ini->socket_path, ini->nqueues,
		atomic_load(&ini->nluns));
	*out = ini;
	return 0;
fail:
	VS_ERROR(INIT, "open %s failed: %s", opts->socket, strerror(-rc));
	vs_ini_close(ini);
	return rc;
}

void vs_ini_close(struct vs_ini *ini)
{
	uint16_t base;

	if (!ini)
		return;
	VS_INFO(INIT, "close %s", ini->socket_path ? ini->socket_path : "");
	ini_stop_ctl_thread(ini);
	ini_stop_cq_threads(ini);
	pthread_mutex_lock(&ini->conn_lock);
	if (atomic_load(&ini->connected) && ini->vhost.sock >= 0) {
		/* Stop every ring: the target finishes what it holds and lets go. */
		for (unsigned i = 0; i < VS_VIRTIO_SCSI_VQ_REQ0 + ini->nqueues; i++)
			if (vs_vhost_drv_get_vring_base(&ini->vhost, i, &base))
				break;
		for (unsigned i = 0; i < ini->nqueues; i++)
			vs_ini_poll(&ini->q[i], ~0u);
	}
	ini_drop_connection(ini, false); /* closing: nothing stays in flight */
	pthread_mutex_unlock(&ini->conn_lock);
	for (unsigned i = 0; ini->q && i < ini->nqueues; i++)
		if (ini->q[i].submitted)
			VS_INFO(QUEUE, "q %u: %llu requests, %llu kicks", ini->q[i].v.idx,
				(unsigned long long)ini->q[i].submitted,
				(unsigned long long)ini->q[i].kicks);
	ini_shm_destroy(ini);
	for (unsigned i = 0; i < 2; i++) {
		struct ini_vq *v = i ? &ini->evt : &ini->ctl;
		if (v->kick_fd >= 0)
			close(v->kick_fd);
		if (v->call_fd >= 0)
			close(v->call_fd);
	}
	if (ini->inflight_fd >= 0)
		close(ini->inflight_fd);
	if (ini->wake_fd >= 0)
		close(ini->wake_fd);
	if (ini->sync_fd >= 0)
		close(ini->sync_fd);
	pthread_mutex_destroy(&ini->conn_lock);
	pthread_mutex_destroy(&ini->alloc_lock);
	pthread_mutex_destroy(&ini->ctl_lock);
	pthread_mutex_destroy(&ini->evt_lock);
	pthread_mutex_destroy(&ini->lun_lock);
	free(ini->socket_path);
	free(ini);
}

unsigned vs_ini_lun_count(const struct vs_ini *ini)
{
	return atomic_load(&((struct vs_ini *)ini)->nluns);
}

int vs_ini_lun_info(const struct vs_ini *ini, unsigned idx, struct vs_ini_lun *out)
{
	struct vs_ini *w = (struct vs_ini *)ini;
	int rc = -EINVAL;

	pthread_mutex_lock(&w->lun_lock);
	if (idx < atomic_load(&w->nluns)) {
		*out = w->luns[idx];
		rc = 0;
	}
	pthread_mutex_unlock(&w->lun_lock);
	return rc;
}

unsigned vs_ini_queue_count(const struct vs_ini *ini)
{
	return ini->nqueues;
}

struct vs_ini_queue *vs_ini_get_queue(struct vs_ini *ini, unsigned idx)
{
	return idx < ini->nqueues ? &ini->q[idx] : NULL;
}

int vs_ini_remap_memory(struct vs_ini *ini, unsigned nregions)
{
	struct vs_vhost_mem_region reg[8];
	int fds[8], rc;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), start = 0, step;

	if (!nregions || nregions > 8)
		return -EINVAL;
	/* Rings and slots stay in region 0; the data area is cut in page-aligned parts, so
	 * buffers may straddle regions (the device must split them). */
	step = (ini->size - ini->data_off) / nregions / page * page;
	if (!step)
		return -EINVAL; /* a data area too small to cut */
	for (unsigned i = 0; i < nregions; i++) {
		size_t end = i + 1 == nregions ? ini->size : ini->data_off + (i + 1) * step;

		reg[i] = (struct vs_vhost_mem_region){.guest_phys_addr = start,
						      .memory_size = end - start,
						      .userspace_addr =
							  (uint64_t)(uintptr_t)(ini->base + start),
						      .mmap_offset = start};
		fds[i] = ini->memfd;
		start = end;
	}
	pthread_mutex_lock(&ini->conn_lock);
	if (!atomic_load(&ini->connected)) {
		rc = -ENOTCONN;
	} else if ((rc = vs_vhost_drv_set_mem_table(&ini->vhost, reg, nregions, fds))) {
		VS_ERROR(MEMORY, "remap: SET_MEM_TABLE with %u regions refused: %s", nregions,
			 strerror(-rc));
		ini_schedule_reset(ini, "memory table refused");
	} else {
		VS_INFO(MEMORY, "remap: memory table sent again as %u regions", nregions);
	}
	pthread_mutex_unlock(&ini->conn_lock);
	return rc;
}

void vs_ini_get_limits(const struct vs_ini *ini, struct vs_ini_limits *out)
{
	out->queues = ini->nqueues;
	out->queue_size = ini->queue_size;
	out->seg_max = ini->seg_max;
	out->max_sectors = ini->max_sectors;
	out->cmd_per_lun = ini->cmd_per_lun;
	out->features = ini->features;
}

unsigned vs_ini_connections(const struct vs_ini *ini)
{
	return atomic_load(&((struct vs_ini *)ini)->connections);
}
