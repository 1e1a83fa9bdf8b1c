/* SPDX-License-Identifier: MIT */
/*
 * The submit path (HwStartIo + BuildIo): check a request against the settled limits,
 * take a slot, write the request header (LUN, tag, CDB) into the slot's shared part and
 * chain [request header][data-out][response header][data-in] into the ring, direct for
 * short chains and through the slot's indirect table for long scatter lists.  Kicks only
 * when the device asked for one (EVENT_IDX), and while a poller on the queue runs
 * callbacks only once INI_KICK_BATCH resubmissions wait (the poller kicks for the rest).
 *
 * All checks and address translation happen before the queue lock; under it: one slot
 * pop, a 51-byte header write, the ring add and the kick decision.
 */
#include <errno.h>

#include "initiator/initiator_int.h"

#define CHAIN_MAX (INI_SEG_MAX_CAP + 3)

/* Translate the caller's iovecs into ring buffers: each must lie in the data area. */
static inline int iov_to_bufs(const struct vs_ini *ini, const struct vs_ini_io *io,
			      struct vs_vq_buf *b, bool write, uint64_t *total VS_CALLER_PARAM)
{
	uintptr_t lo = (uintptr_t)ini->base + ini->data_off, hi = (uintptr_t)ini->base + ini->size;
	uint64_t sum = 0;

	for (int i = 0; i < io->iovcnt; i++) {
		uintptr_t p = (uintptr_t)io->iov[i].iov_base;
		size_t len = io->iov[i].iov_len;

		if (p < lo || p >= hi || len > hi - p || !len || len > UINT32_MAX) {
			VS_ERROR_HP(IO, "iovec %d (%p, %zu bytes): %s", i, io->iov[i].iov_base, len,
				    !len ? "empty" : "not inside the initiator's shared data area");
			return !len ? -EINVAL : -EFAULT;
		}
		b[i] = (struct vs_vq_buf){
		    .addr = p - (uintptr_t)ini->base, .len = (uint32_t)len, .write = write};
		sum += len;
	}
	*total = sum;
	return io->iovcnt;
}

/* Request header into shared memory: one private build, one copy.  cdb is always
 * VS_VIRTIO_SCSI_CDB_SIZE bytes (zero padded by the caller): fixed-size copies only. */
static inline void slot_write_req(struct ini_slot *sl, const uint8_t lun[8], const uint8_t *cdb)
{
	struct vs_virtio_scsi_cmd_req r;

	memcpy(r.lun, lun, 8);
	r.tag = vs_le64(sl->tag);
	r.task_attr = VS_VIRTIO_SCSI_S_SIMPLE;
	r.prio = 0;
	r.crn = 0;
	memcpy(r.cdb, cdb, VS_VIRTIO_SCSI_CDB_SIZE);
	memcpy(sl->req, &r, sizeof(r));
}

/* A request's chain, [request header][UNMAP parameters | data-out][response header]
 * [data-in], laid out in b[] with placeholders for the slot's parts (slot_add fills them
 * in): *nbufs the number of buffers, *resp_at the response header's, *total the data
 * bytes; 0, or -errno when an iovec is not in the data area.  iovcnt is io's data buffers,
 * 0 under SLOT_NODATA: the submission has it at hand, checked against seg_max, and a
 * requeue repeats the layout it had.  Always inline: called twice, gcc calls it out of
 * line, and the submit path pays for the call and the out-parameters.  The count in
 * *nbufs and the caller's iovcnt: a count returned as an int, tested for < 0 again, and
 * the data test made from the flags again cost ini_submit 10 instructions a request
 * (bench/callgrind-per-io.sh). */
static inline __attribute__((always_inline)) int
chain_layout(const struct vs_ini *ini, const struct vs_ini_io *io, int iovcnt, uint8_t flags,
	     struct vs_vq_buf *b, unsigned *nbufs, unsigned *resp_at, uint64_t *total)
{
	unsigned n = 1;
	int rc;

	*total = 0;
	if (flags & SLOT_UNMAP)
		n++;
	else if (iovcnt && !(flags & SLOT_DATA_IN)) {
		if ((rc = iov_to_bufs(ini, io, b + n, false, total VS_CALLER_ARG)) < 0)
			return rc;
		n += (unsigned)rc;
	}
	*resp_at = n++;
	if (iovcnt && (flags & SLOT_DATA_IN)) {
		if ((rc = iov_to_bufs(ini, io, b + n, true, total VS_CALLER_ARG)) < 0)
			return rc;
		n += (unsigned)rc;
	}
	*nbufs = n;
	return 0;
}

/* Lay the chain of one slot: b[] has placeholders at 0 (request), at 1 for UNMAP, and at
 * resp_at (response); the slot fills them in.  Queue lock held. */
static inline int slot_add(struct vs_ini_queue *q, uint16_t s, struct vs_vq_buf *b, unsigned n,
			   unsigned resp_at)
{
	struct ini_slot *sl = &q->slots[s];
	struct vs_vq_drv *vq = &q->v.vq;
	uint16_t head;
	int rc;

	b[0] = (struct vs_vq_buf){sl->gpa + SLOT_REQ_OFF, sizeof(struct vs_virtio_scsi_cmd_req),
				  false};
	if (sl->flags & SLOT_UNMAP)
		b[1] = (struct vs_vq_buf){sl->gpa + SLOT_PARAM_OFF, VS_SCSI_UNMAP_PARAM_LEN, false};
	b[resp_at] = (struct vs_vq_buf){sl->gpa + SLOT_RESP_OFF,
					sizeof(struct vs_virtio_scsi_cmd_resp), true};
	/* Short chains go direct while half the ring is free; past that, indirect (one
	 * descriptor each), so the ring holds as many requests as it has descriptors:
	 * direct only, 3-descriptor requests filled a 256-entry ring at 85, and a deeper
	 * queue spun on -EBUSY. */
	if ((n <= INI_DIRECT_MAX && vq->num_free >= n + vq->size / 2) || !vq->indirect)
		rc = vs_vq_drv_add(vq, b, n, &head);
	else
		rc = vs_vq_drv_add_indirect(vq, b, n, sl->table, sl->gpa + SLOT_TABLE_OFF, &head);
	if (rc)
		return rc;
	q->head_slot[head] = s;
	return 0;
}

static inline int submit_locked_err(struct vs_ini_queue *q, int rc VS_CALLER_PARAM)
{
	if (rc == -ENOSPC)
		return -EBUSY;
	if (rc == -EIO) {
		VS_ERROR_HP(QUEUE, "q %u: ring broken: %s", q->v.idx,
			    q->v.vq.broken_reason ? q->v.vq.broken_reason : "?");
		ini_schedule_reset(q->ini, "request ring broken");
		return -ENOTCONN;
	}
	return rc;
}

int ini_submit(struct vs_ini_queue *q, struct vs_ini_io *io, const uint8_t lun[8], uint16_t lun_idx,
	       const uint8_t *cdb, uint8_t flags, uint64_t expect)
{
	struct vs_ini *ini = q->ini;
	struct vs_vq_buf b[CHAIN_MAX];
	int iovcnt = (flags & SLOT_NODATA) ? 0 : io->iovcnt;
	unsigned n, resp_at, ndata = 0;
	uint64_t total, tag = 0, lba;
	uint32_t nblocks;
	struct ini_slot *sl;
	bool kick = false;
	uint16_t s;
	int rc;

	if (iovcnt < 0 || (unsigned)iovcnt > ini->seg_max) {
		VS_ERROR(IO, "q %u op %#x: %d data segments, seg_max is %u: refused", q->v.idx,
			 cdb[0], iovcnt, ini->seg_max);
		return -EINVAL;
	}
	if ((rc = chain_layout(ini, io, iovcnt, flags, b, &n, &resp_at, &total)))
		return rc;
	if (expect != INI_ANY_LEN && total != expect) {
		VS_ERROR(IO,
			 "q %u op %#x: buffers hold %llu bytes, the command moves %llu: refused",
			 q->v.idx, cdb[0], (unsigned long long)total, (unsigned long long)expect);
		return -EINVAL;
	}
	if (total > (uint64_t)ini->max_sectors * 512) {
		VS_ERROR(IO, "q %u op %#x: %llu bytes, max_sectors %u (%u bytes): refused",
			 q->v.idx, cdb[0], (unsigned long long)total, ini->max_sectors,
			 ini->max_sectors * 512);
		return -EINVAL;
	}
	ndata = n - 2 - !!(flags & SLOT_UNMAP);
	lba = io->lba;
	nblocks = io->nblocks;
	if (!io->submit_ns)
		io->submit_ns = vs_mono_ns();

	pthread_mutex_lock(&q->lock);
	if (__builtin_expect(!q->ready, 0)) {
		rc = -ENOTCONN;
		goto unlock;
	}
	if (!q->nfree ||
	    (lun_idx != INI_LUN_NONE && q->lun_inflight[lun_idx] >= ini->cmd_per_lun)) {
		rc = -EBUSY;
		goto unlock;
	}
	s = q->free_slots[--q->nfree];
	sl = &q->slots[s];
	sl->gen++;
	sl->tag = tag = ((uint64_t)sl->gen << 32) | ((uint64_t)q->v.idx << 16) | s;
	sl->flags = flags;
	slot_write_req(sl, lun, cdb);
	if (flags & SLOT_UNMAP) {
		uint8_t *p = sl->param;

		vs_put_be16(p, VS_SCSI_UNMAP_PARAM_LEN - 2); /* UNMAP data length */
		vs_put_be16(p + 2, 16);			     /* block descriptor data length */
		memset(p + 4, 0, 4);
		vs_put_be64(p + 8, io->lba);
		vs_put_be32(p + 16, io->nblocks);
		memset(p + 20, 0, 4);
	}
	/* Recorded before slot_add publishes the request: a polling device may pop it at
	 * once, and `trace latency` wants the driver's submit before the device's pop. */
	VS_STAGE(IO, submit,
		 "q %u tag %#llx lun %u op %#x{scsi_op} lba %llu blocks %u bytes %llu segs %u",
		 (q, q->v.idx), (tag, (unsigned long long)tag), (lun, lun_idx), (op, cdb[0]),
		 (lba, (unsigned long long)lba), (blocks, nblocks),
		 (bytes, (unsigned long long)total), (segs, ndata));
	if ((rc = slot_add(q, s, b, n, resp_at))) {
		q->free_slots[q->nfree++] = s;
		VS_STAGE(IO, withdrawn, "q %u tag %#llx: withdrawn, not published: %d",
			 (q, q->v.idx), (tag, (unsigned long long)tag), (err, rc));
		rc = submit_locked_err(q, rc VS_CALLER_ARG);
		goto unlock;
	}
	sl->io = io;
	sl->lun_key = ini_lun_key(lun);
	sl->lun_idx = lun_idx;
	sl->data_len = (uint32_t)total;
	sl->retries = INI_UA_RETRIES;
	__atomic_store_n(&q->inflight, q->inflight + 1, __ATOMIC_RELAXED);
	if (lun_idx != INI_LUN_NONE)
		q->lun_inflight[lun_idx]++;
	q->submitted++;
	/* Inside a poll's callbacks the poller kicks at the end; but once a few requests wait,
	 * waking the device now lets it start while the rest are built.  EVENT_IDX still
	 * allows one kick per device sleep. */
	if ((!q->in_poll ||
	     (uint16_t)(q->v.vq.avail_idx - q->v.vq.kicked_avail_idx) >= INI_KICK_BATCH) &&
	    (kick = vs_vq_drv_should_kick(&q->v.vq)))
		q->kicks++;
unlock:
	pthread_mutex_unlock(&q->lock);
	if (rc) {
		VS_VERBOSE_HP(IO, "q %u op %#x lun %u: not submitted: %d", q->v.idx, cdb[0],
			      lun_idx, rc);
		return rc;
	}
	if (kick) {
		VS_STAGE(NOTIFY, kick, "q %u kick", (q, q->v.idx));
		ini_kick(q);
	}
	return 0;
}

int ini_slot_requeue(struct vs_ini_queue *q, uint16_t s)
{
	struct ini_slot *sl = &q->slots[s];
	struct vs_ini_io *io = sl->io;
	struct vs_vq_buf b[CHAIN_MAX];
	unsigned n, resp_at;
	uint64_t total;
	int rc;

	/* The request header and parameters are still in the slot: new tag only. */
	sl->gen++;
	sl->tag = ((uint64_t)sl->gen << 32) | ((uint64_t)q->v.idx << 16) | s;
	sl->req->tag = vs_le64(sl->tag);
	/* The iovecs passed these checks at submission; the caller may not touch them. */
	rc = chain_layout(q->ini, io, (sl->flags & SLOT_NODATA) ? 0 : io->iovcnt, sl->flags, b, &n,
			  &resp_at, &total);
	rc = rc ? rc : slot_add(q, s, b, n, resp_at);
	VS_VERBOSE_HP(IO, "q %u tag %#llx: requeued after UNIT ATTENTION (%d left): %d", q->v.idx,
		      (unsigned long long)sl->tag, sl->retries, rc);
	return rc;
}

bool ini_detach(struct vs_ini_queue *q, struct vs_ini_io *io)
{
	bool found = false;

	pthread_mutex_lock(&q->lock);
	for (unsigned s = 0; s < q->ini->nslots; s++) {
		if (q->slots[s].io == io) {
			q->slots[s].io = NULL;
			q->slots[s].flags |= SLOT_ORPHAN;
			found = true;
			VS_WARNING(IO, "q %u tag %#llx: given up on; the slot waits for the device",
				   q->v.idx, (unsigned long long)q->slots[s].tag);
			break;
		}
	}
	pthread_mutex_unlock(&q->lock);
	return found;
}

/* Why a request is refused, reported out of line so that the submit path does not
 * pay for the error sites' set-up (measured: ~20 instructions per request). */
enum refusal { REF_LUN_INDEX, REF_RANGE, REF_EMPTY_RW, REF_MAX_SECTORS, REF_EMPTY_UNMAP, REF_OP };

static __attribute__((noinline, cold)) int refuse(const struct vs_ini_queue *q,
						  const struct vs_ini_io *io, enum refusal why,
						  uint64_t a, uint64_t b)
{
	switch (why) {
	case REF_LUN_INDEX:
		VS_ERROR(IO, "q %u: LUN index %u, the table has %llu: refused", q->v.idx, io->lun,
			 (unsigned long long)a);
		break;
	case REF_RANGE:
		VS_ERROR(IO, "q %u lun %u: blocks %llu+%u beyond the LUN's %llu: refused", q->v.idx,
			 io->lun, (unsigned long long)io->lba, io->nblocks, (unsigned long long)a);
		break;
	case REF_EMPTY_RW:
		VS_ERROR(IO, "q %u lun %u: %s of %u blocks in %d segments: refused", q->v.idx,
			 io->lun, io->op == VS_INI_READ ? "read" : "write", io->nblocks,
			 io->iovcnt);
		break;
	case REF_MAX_SECTORS:
		VS_ERROR(
		    IO, "q %u lun %u: %u blocks of %llu bytes exceed max_sectors %llu: refused",
		    q->v.idx, io->lun, io->nblocks, (unsigned long long)a, (unsigned long long)b);
		break;
	case REF_EMPTY_UNMAP:
		VS_ERROR(IO, "q %u lun %u: unmap of 0 blocks: refused", q->v.idx, io->lun);
		break;
	case REF_OP:
		VS_ERROR(IO, "q %u: unknown op %d: refused", q->v.idx, (int)io->op);
		break;
	}
	return -EINVAL;
}

int vs_ini_submit(struct vs_ini_queue *q, struct vs_ini_io *io)
{
	struct vs_ini *ini = q->ini;
	const struct ini_lun_hot *h;
	uint8_t cdb[VS_VIRTIO_SCSI_CDB_SIZE] = {0}, lun[8], flags = 0;
	uint64_t nb, lun_key;
	uint32_t bs;

	if (io->lun >= atomic_load_explicit(&ini->nluns, memory_order_acquire))
		return refuse(q, io, REF_LUN_INDEX, atomic_load(&ini->nluns), 0);
	h = &ini->hot[io->lun];
	nb = __atomic_load_n(&h->num_blocks, __ATOMIC_RELAXED);
	bs = __atomic_load_n(&h->block_size, __ATOMIC_RELAXED);
	lun_key = __atomic_load_n(&h->lun_key, __ATOMIC_RELAXED);
	memcpy(lun, &lun_key, 8);
	if (io->lba > nb || io->nblocks > nb - io->lba)
		return refuse(q, io, REF_RANGE, nb, 0);
	switch (io->op) {
	case VS_INI_READ:
	case VS_INI_WRITE:
		if (!io->nblocks || !io->iovcnt)
			return refuse(q, io, REF_EMPTY_RW, 0, 0);
		if ((uint64_t)io->nblocks * bs > (uint64_t)ini->max_sectors * 512)
			return refuse(q, io, REF_MAX_SECTORS, bs, ini->max_sectors);
		cdb[0] = io->op == VS_INI_READ ? VS_SCSI_OP_READ_16 : VS_SCSI_OP_WRITE_16;
		cdb[1] = io->fua ? VS_SCSI_RW16_FUA : 0;
		vs_put_be64(cdb + 2, io->lba);
		vs_put_be32(cdb + 10, io->nblocks);
		if (io->op == VS_INI_READ)
			flags = SLOT_DATA_IN;
		return ini_submit(q, io, lun, (uint16_t)io->lun, cdb, flags,
				  (uint64_t)io->nblocks * bs);
	case VS_INI_FLUSH:
		if (__builtin_expect(ini->opts.test_drop_flushes, 0))
			break; /* TEST UNIT READY: the flush is lost on purpose */
		cdb[0] = VS_SCSI_OP_SYNCHRONIZE_CACHE_16;
		vs_put_be64(cdb + 2, io->lba);
		vs_put_be32(cdb + 10, io->nblocks);
		break;
	case VS_INI_UNMAP:
		if (!io->nblocks)
			return refuse(q, io, REF_EMPTY_UNMAP, 0, 0);
		cdb[0] = VS_SCSI_OP_UNMAP;
		vs_put_be16(cdb + 7, VS_SCSI_UNMAP_PARAM_LEN);
		return ini_submit(q, io, lun, (uint16_t)io->lun, cdb, SLOT_UNMAP | SLOT_NODATA, 0);
	default:
		return refuse(q, io, REF_OP, 0, 0);
	}
	return ini_submit(q, io, lun, (uint16_t)io->lun, cdb, SLOT_NODATA, 0);
}

int vs_ini_submit_cdb(struct vs_ini_queue *q, struct vs_ini_io *io, unsigned target, unsigned lun,
		      const uint8_t *cdb, unsigned cdb_len, bool data_in)
{
	uint8_t l[8], c[VS_VIRTIO_SCSI_CDB_SIZE] = {0};

	if (!cdb || !cdb_len || cdb_len > VS_VIRTIO_SCSI_CDB_SIZE ||
	    vs_vscsi_lun_encode(l, target, lun)) {
		VS_ERROR(IO, "q %u: pass-through to %u:%u with a %u-byte CDB: refused", q->v.idx,
			 target, lun, cdb_len);
		return -EINVAL;
	}
	memcpy(c, cdb, cdb_len);
	return ini_submit(q, io, l, INI_LUN_NONE, c, SLOT_PASSTHRU | (data_in ? SLOT_DATA_IN : 0),
			  INI_ANY_LEN);
}
