/* SPDX-License-Identifier: MIT */
/*
 * The engine's requests through the user-space initiator: one engine thread per request
 * queue, each polling its own queue (completions that a LUN reset or a lost connection
 * reports on another thread go through eng_done() all the same).  Buffers live in the
 * initiator's shared memory, one 1 MiB buffer per request slot.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vioscope/initiator.h>

#include "check/check_int.h"
#include "util/util.h"

struct ini_req {
	struct vs_ini_io io;
	struct iovec iov;
};

static void ini_done(struct vs_ini_io *io)
{
	struct eng_req *r = io->opaque;

	r->result = io->result;
	eng_done(r);
}

static int ini_thread_init(struct eng_thread *t, char *why, size_t whylen)
{
	struct port_ini *p = t->e->port_ctx;
	struct ini_req *ir = calloc(t->e->max_depth, sizeof(*ir));
	uint8_t *buf =
	    vs_ini_alloc(p->ini, (size_t)t->e->max_depth * ENG_MAX_SECT * VS_VB_SECTOR, 4096);

	if (!ir || !buf) {
		free(ir);
		return vs_fail(why, whylen, -ENOMEM,
			       "no buffers for queue %u (the initiator's shared memory is full)",
			       t->idx);
	}
	t->port = vs_ini_get_queue(p->ini, t->idx % vs_ini_queue_count(p->ini));
	for (unsigned k = 0; k < t->e->max_depth; k++) {
		t->reqs[k].port = &ir[k];
		t->reqs[k].buf = buf + (size_t)k * ENG_MAX_SECT * VS_VB_SECTOR;
	}
	return 0;
}

static void ini_thread_fini(struct eng_thread *t)
{
	free(t->reqs[0].port); /* the array; buffers go with the initiator */
}

static int ini_submit(struct eng_req *r)
{
	struct port_ini *p = r->t->e->port_ctx;
	struct ini_req *ir = r->port;
	uint32_t per = p->block / VS_VB_SECTOR;
	static const enum vs_ini_op ops[] = {VS_INI_READ, VS_INI_WRITE, VS_INI_FLUSH, VS_INI_UNMAP};

	memset(&ir->io, 0, sizeof(ir->io));
	ir->io.op = ops[r->op];
	ir->io.lun = p->lun;
	ir->io.lba = r->sector / per;
	ir->io.nblocks = r->nsect / per;
	if (r->op == ENG_READ || r->op == ENG_WRITE) {
		ir->iov = (struct iovec){r->buf, (size_t)r->nsect * VS_VB_SECTOR};
		ir->io.iov = &ir->iov;
		ir->io.iovcnt = 1;
	}
	ir->io.done = ini_done;
	ir->io.opaque = r;
	return vs_ini_submit(r->t->port, &ir->io);
}

static void ini_poll(struct eng_thread *t, unsigned wait_us)
{
	if (vs_ini_poll(t->port, 64) == 0 && wait_us)
		usleep(wait_us < 50 ? wait_us : 50);
}

int port_ini_abort(struct port_ini *p, struct eng_req *r)
{
	struct ini_req *ir = r->port;

	return vs_ini_abort(p->ini, r->t->port, &ir->io);
}

const struct eng_port_ops eng_port_ini = {
    .thread_init = ini_thread_init,
    .thread_fini = ini_thread_fini,
    .submit = ini_submit,
    .poll = ini_poll,
};

int port_ini_open(struct port_ini *p, const char *socket, unsigned queues, unsigned lun,
		  unsigned max_depth, bool reconnect, char *why, size_t whylen)
{
	struct vs_ini_opts o = {
	    .socket = socket,
	    .queues = queues,
	    .data_mem = ((size_t)queues * max_depth + 2) * ENG_MAX_SECT * VS_VB_SECTOR,
	    .reconnect = reconnect,
	};
	struct vs_ini_lun info;
	int rc;

	memset(p, 0, sizeof(*p));
	if ((rc = vs_ini_open(&p->ini, &o)) < 0)
		return vs_fail(why, whylen, rc, "cannot open the target at %s: %s", socket,
			       strerror(-rc));
	if (lun >= vs_ini_lun_count(p->ini) || vs_ini_lun_info(p->ini, lun, &info)) {
		rc = vs_fail(why, whylen, -ENODEV, "the target at %s has %u LUNs, no LUN index %u",
			     socket, vs_ini_lun_count(p->ini), lun);
		port_ini_close(p);
		return rc;
	}
	if (info.read_only) {
		port_ini_close(p);
		return vs_fail(why, whylen, -EROFS, "LUN %u is read-only", info.lun);
	}
	p->lun = lun;
	p->block = info.block_size;
	p->blocks = info.num_blocks;
	p->thin = info.thin;
	return 0;
}

void port_ini_close(struct port_ini *p)
{
	vs_ini_close(p->ini);
	p->ini = NULL;
}
