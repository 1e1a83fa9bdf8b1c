/* SPDX-License-Identifier: MIT */
/*
 * Bios on behalf of a command: submission, completion and the multi-step hook.
 *
 * A command owns at most two bios at a time (cmd->st.bio).  They are submitted in
 * order; when the context is full (-EAGAIN) we wait for one of ours to complete and
 * continue from its completion, or answer BUSY when none of ours is in flight (the
 * initiator retries).  Backends never complete a bio inside vs_backend_submit(), so
 * the counters below are never updated re-entrantly.
 */
#include <errno.h>
#include <stdlib.h>

#include "scsi/scsi_int.h"

static void io_issue(struct vs_scsi_cmd *cmd);

static void io_finish(struct vs_scsi_cmd *cmd)
{
	if (cmd->st.err)
		vs_scsi_sense_errno(cmd, cmd->st.err, (enum vs_scsi_io_kind)cmd->st.kind);
	vs_scsi_complete(cmd);
}

static void io_bio_done(struct vs_bio *bio, int res)
{
	struct vs_scsi_cmd *cmd = bio->priv;
	struct vs_scsi_cmd_state *st = &cmd->st;
	int rc;

	/* The backend stage's end (trace latency); the backend layer has no site of its own
	 * here: this one says what it would, with the tag.  The bio's operation and range
	 * are in its submit event (same tag and bio number): not repeated, so the record is
	 * small and the site, off, costs this function no saved register. */
	st->inflight--;
	if (res < 0 && !st->err)
		st->err = res;
	/* After the state is updated, so that res is not needed past the site. */
	VS_STAGE(SCSI, backend_done, "tag %#llx: bio done, res %d (bio %u)",
		 (tag, (unsigned long long)cmd->tag), (res, res), (bio, (unsigned)(bio - st->bio)));
	if (!st->err && st->next < st->nbio) {
		io_issue(cmd); /* we were waiting for a free slot */
		return;
	}
	if (st->inflight)
		return;
	if (!st->err && st->step) {
		rc = st->step(cmd);
		if (rc > 0 && st->nbio) {
			st->next = 0;
			io_issue(cmd);
			return;
		}
		if (rc < 0)
			st->err = rc;
	}
	io_finish(cmd);
}

static void io_issue(struct vs_scsi_cmd *cmd)
{
	struct vs_scsi_cmd_state *st = &cmd->st;
	int rc;

	while (st->next < st->nbio) {
		rc = vs_backend_submit(st->lun->be, st->ctx, &st->bio[st->next]);
		if (rc == -EAGAIN && st->inflight)
			return; /* io_bio_done() continues */
		if (rc < 0) {
			st->err = rc;
			break;
		}
		/* The backend stage's start (trace latency), once per bio; as for its end,
		 * the backend layer has no site of its own. */
		VS_STAGE_OOL(SCSI, backend_submit,
			     "tag %#llx: bio %u submitted: %s off %llu len %llu fua %d",
			     (tag, (unsigned long long)cmd->tag), (bio, st->next),
			     (bio_op, vs_bio_op_name(st->bio[st->next].op)),
			     (off, (unsigned long long)st->bio[st->next].offset),
			     (len, (unsigned long long)st->bio[st->next].len),
			     (fua, st->bio[st->next].fua));
		st->next++;
		st->inflight++;
	}
	if (st->err && !st->inflight)
		io_finish(cmd);
}

void vs_scsi_io_prep(struct vs_scsi_cmd *cmd, unsigned idx, enum vs_bio_op op, uint64_t offset,
		     uint64_t len, const struct iovec *iov, int iovcnt)
{
	struct vs_bio *bio = &cmd->st.bio[idx];

	memset(bio, 0, sizeof(*bio));
	bio->op = op;
	bio->offset = offset;
	bio->len = len;
	bio->iov = iov;
	bio->iovcnt = iovcnt;
	bio->fua = op == VS_BIO_WRITE && cmd->st.fua;
	bio->done = io_bio_done;
	bio->priv = cmd;
}

int vs_scsi_io_prep_prefix(struct vs_scsi_cmd *cmd, enum vs_bio_op op, uint64_t offset,
			   const struct iovec *iov, int iovcnt, size_t len)
{
	struct vs_scsi_cmd_state *st = &cmd->st;
	size_t cut = len; /* bytes of the iovec where the prefix ends */
	unsigned i = vs_iov_skip(iov, (unsigned)iovcnt, &cut), nbio = 0;
	size_t whole = len - cut;

	if (whole)
		vs_scsi_io_prep(cmd, nbio++, op, offset, whole, iov, (int)i);
	if (cut) {
		if (i >= (unsigned)iovcnt)
			return -EINVAL;
		st->split.iov_base = iov[i].iov_base;
		st->split.iov_len = cut;
		vs_scsi_io_prep(cmd, nbio++, op, offset + whole, cut, &st->split, 1);
	}
	st->nbio = (uint8_t)nbio;
	return 0;
}

int vs_scsi_io_start(struct vs_scsi_cmd *cmd)
{
	cmd->st.next = 0;
	cmd->st.inflight = 0;
	cmd->st.err = 0;
	if (!cmd->st.nbio)
		vs_scsi_complete(cmd);
	else
		io_issue(cmd);
	return VS_SCSI_ASYNC;
}
