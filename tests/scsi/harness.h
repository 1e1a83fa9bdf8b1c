/* SPDX-License-Identifier: MIT */
/* Shared by the SCSI tests (cmocka): a device over a real backend, and a way to run one
 * command to completion and look at its result. */
#ifndef VS_TEST_SCSI_HARNESS_H
#define VS_TEST_SCSI_HARNESS_H

#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "scsi/scsi.h"

struct harness {
	struct vs_backend *be;
	struct vs_io_ctx *ctx;
	struct vs_scsi_dev *dev;
	struct vs_scsi_lun *lun; /* attached as LUN 0 */
	struct vs_scsi_cmd cmd;	 /* the last command run */
	int done_calls;
};

/* LUN 0 over backend spec, e.g. "ram=1M"; ctx of depth 64. */
static inline void h_open(struct harness *h, const char *spec, uint32_t bs, bool ro)
{
	struct vs_scsi_lun_params p = {.block_size = bs, .read_only = ro, .name = "test-lun"};
	char err[256];

	memset(h, 0, sizeof(*h));
	assert_int_equal(vs_backend_open(&h->be, spec, err, sizeof(err)), 0);
	assert_int_equal(vs_io_ctx_create(&h->ctx, 64), 0);
	assert_int_equal(vs_scsi_dev_create(&h->dev), 0);
	p.be = h->be;
	assert_int_equal(vs_scsi_lun_create(&h->lun, &p), 0);
	assert_int_equal(vs_scsi_dev_attach(h->dev, 0, h->lun), 0);
}

static inline void h_close(struct harness *h)
{
	assert_int_equal(vs_io_ctx_inflight(h->ctx), 0);
	vs_scsi_dev_destroy(h->dev);
	vs_io_ctx_destroy(h->ctx);
	vs_backend_close(h->be);
}

static inline void h_done(struct vs_scsi_cmd *cmd)
{
	struct harness *h = cmd->priv;

	h->done_calls++;
}

/* Start a command without waiting for it (h->cmd). */
static inline void h_start_iov(struct harness *h, unsigned lun, const uint8_t *cdb,
			       uint32_t cdb_len, const struct iovec *out, int outcnt,
			       const struct iovec *in, int incnt)
{
	struct vs_scsi_cmd *c = &h->cmd;

	memset(c, 0, sizeof(*c));
	c->cdb = cdb;
	c->cdb_len = cdb_len;
	c->out_iov = out;
	c->out_iovcnt = outcnt;
	for (int i = 0; i < outcnt; i++)
		c->out_len += out[i].iov_len;
	c->in_iov = in;
	c->in_iovcnt = incnt;
	for (int i = 0; i < incnt; i++)
		c->in_len += in[i].iov_len;
	c->tag = 0x1234;
	c->done = h_done;
	c->priv = h;
	h->done_calls = 0;
	assert_int_equal(vs_scsi_exec(h->dev, lun, c, h->ctx), 0);
}

/* Reap until the command completed; exactly one done() and nothing left in flight. */
static inline void h_wait(struct harness *h)
{
	for (int spins = 0; !h->done_calls; spins++) {
		assert_true(spins < 100000);
		assert_int_equal(vs_io_ctx_submit(h->ctx), 0);
		assert_true(vs_io_ctx_reap(h->ctx, true) >= 0);
	}
	assert_int_equal(vs_io_ctx_submit(h->ctx), 0);
	assert_true(vs_io_ctx_reap(h->ctx, false) >= 0);
	assert_int_equal(h->done_calls, 1);
	assert_int_equal(vs_io_ctx_inflight(h->ctx), 0);
}

static inline struct vs_scsi_cmd *h_run_iov(struct harness *h, unsigned lun, const uint8_t *cdb,
					    uint32_t cdb_len, const struct iovec *out, int outcnt,
					    const struct iovec *in, int incnt)
{
	h_start_iov(h, lun, cdb, cdb_len, out, outcnt, in, incnt);
	h_wait(h);
	return &h->cmd;
}

/* One command with at most one data-out and one data-in buffer (NULL/0: none). */
static inline struct vs_scsi_cmd *h_run(struct harness *h, unsigned lun, const uint8_t *cdb,
					uint32_t cdb_len, const void *out, size_t outlen, void *in,
					size_t inlen)
{
	struct iovec o = {(void *)out, outlen}, i = {in, inlen};

	return h_run_iov(h, lun, cdb, cdb_len, &o, out ? 1 : 0, &i, in ? 1 : 0);
}

#define h_cdb(h, cdb, out, outlen, in, inlen) h_run(h, 0, cdb, sizeof(cdb), out, outlen, in, inlen)

static inline void assert_good(const struct vs_scsi_cmd *c)
{
	if (c->status != VS_SCSI_GOOD)
		print_error("status %#x sense %x/%02x/%02x\n", c->status, c->sense[2] & 0xf,
			    c->sense[12], c->sense[13]);
	assert_int_equal(c->status, VS_SCSI_GOOD);
	assert_int_equal(c->sense_len, 0);
}

static inline void assert_sense(const struct vs_scsi_cmd *c, uint8_t key, uint8_t asc, uint8_t ascq)
{
	uint8_t k, a, q;

	assert_int_equal(c->status, VS_SCSI_CHECK_CONDITION);
	assert_int_equal(c->sense_len, 18);
	assert_true(vs_scsi_sense_parse(c->sense, c->sense_len, &k, &a, &q));
	assert_int_equal(c->sense[0] & 0x7f, 0x70);
	assert_int_equal(k, key);
	assert_int_equal(a, asc);
	assert_int_equal(q, ascq);
	/* A failed command moves no data. */
	assert_int_equal(c->in_residual, c->in_len);
	assert_int_equal(c->out_residual, c->out_len);
}

/* INVALID FIELD IN CDB pointing at byte (and bit, or -1). */
static inline void assert_bad_cdb(const struct vs_scsi_cmd *c, uint16_t byte, int bit)
{
	assert_sense(c, VS_SENSE_ILLEGAL_REQUEST, 0x24, 0x00);
	assert_int_equal(c->sense[15] & 0xc0, 0xc0); /* SKSV, C/D = CDB */
	if (bit >= 0)
		assert_int_equal(c->sense[15] & 0x0f, 0x08 | bit);
	else
		assert_int_equal(c->sense[15] & 0x08, 0);
	assert_int_equal(c->sense[16] << 8 | c->sense[17], byte);
}

static inline uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}
static inline void set_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}
static inline void set_be32(uint8_t *p, uint32_t v)
{
	set_be16(p, (uint16_t)(v >> 16));
	set_be16(p + 2, (uint16_t)v);
}
static inline void set_be64(uint8_t *p, uint64_t v)
{
	set_be32(p, (uint32_t)(v >> 32));
	set_be32(p + 4, (uint32_t)v);
}

/* CDB builders for the block commands. */
static inline void cdb10(uint8_t *c, uint8_t op, uint8_t flags, uint32_t lba, uint16_t n)
{
	memset(c, 0, 10);
	c[0] = op;
	c[1] = flags;
	set_be32(&c[2], lba);
	set_be16(&c[7], n);
}
static inline void cdb16(uint8_t *c, uint8_t op, uint8_t flags, uint64_t lba, uint32_t n)
{
	memset(c, 0, 16);
	c[0] = op;
	c[1] = flags;
	set_be64(&c[2], lba);
	set_be32(&c[10], n);
}

#endif /* VS_TEST_SCSI_HARNESS_H */
