/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the SCSI layer: the input is a CDB (its first 32 bytes, or all
 * of it when shorter) followed by the data-out payload.  Each input runs through
 * vs_scsi_exec() on a 1 MiB RAM LUN of 512-byte blocks (LUN 0; a byte of the CDB area
 * sends a few to a missing LUN) with a 4 KiB data-in buffer, until done() ran.
 * Buffers are exact-size heap copies cut in two iovecs, so any access outside them
 * is caught by ASan.  Must never crash, leak, hang or hit UB; done() exactly once.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scsi/scsi.h"

#define IN_LEN 4096

static struct vs_backend *be;
static struct vs_io_ctx *ctx;
static struct vs_scsi_dev *dev;

static void setup(void)
{
	struct vs_scsi_lun_params p = {.block_size = 512, .name = "fuzz"};
	struct vs_scsi_lun *lun;

	if (vs_backend_open(&be, "ram=1M", NULL, 0) || vs_io_ctx_create(&ctx, 8) ||
	    vs_scsi_dev_create(&dev))
		abort();
	p.be = be;
	if (vs_scsi_lun_create(&lun, &p) || vs_scsi_dev_attach(dev, 0, lun))
		abort();
}

static void count_done(struct vs_scsi_cmd *cmd)
{
	(*(int *)cmd->priv)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t cdb_len = size < 32 ? size : 32;
	size_t out_len = size > 32 ? size - 32 : 0;
	uint8_t *cdb, *out, *in;
	struct iovec oiov[2], iiov[2];
	struct vs_scsi_cmd cmd;
	int calls = 0;

	if (!dev)
		setup();
	if (!cdb_len)
		return 0;
	cdb = malloc(cdb_len);
	out = malloc(out_len ? out_len : 1);
	in = malloc(IN_LEN);
	if (!cdb || !out || !in)
		abort();
	memcpy(cdb, data, cdb_len);
	memcpy(out, data + cdb_len, out_len);
	oiov[0] = (struct iovec){out, out_len / 3};
	oiov[1] = (struct iovec){out + out_len / 3, out_len - out_len / 3};
	iiov[0] = (struct iovec){in, 1000};
	iiov[1] = (struct iovec){in + 1000, IN_LEN - 1000};

	memset(&cmd, 0, sizeof(cmd));
	cmd.cdb = cdb;
	cmd.cdb_len = (uint32_t)cdb_len;
	cmd.out_iov = oiov;
	cmd.out_iovcnt = 2;
	cmd.out_len = out_len;
	cmd.in_iov = iiov;
	cmd.in_iovcnt = 2;
	cmd.in_len = IN_LEN;
	cmd.done = count_done;
	cmd.priv = &calls;
	/* Byte 31 of a full-size CDB area is never part of a command we implement. */
	if (vs_scsi_exec(dev, cdb_len == 32 && cdb[31] == 0xa5 ? 7 : 0, &cmd, ctx))
		abort();
	for (int spins = 0; __atomic_load_n(&calls, __ATOMIC_RELAXED) == 0; spins++) {
		if (spins > 1000000)
			abort(); /* a command that never completes */
		vs_io_ctx_submit(ctx);
		vs_io_ctx_reap(ctx, true);
	}
	if (calls != 1 || vs_io_ctx_inflight(ctx))
		abort();
	if (cmd.in_residual > cmd.in_len || cmd.out_residual > cmd.out_len ||
	    cmd.sense_len > sizeof(cmd.sense) || (cmd.status == 0 && cmd.sense_len))
		abort();
	free(cdb);
	free(out);
	free(in);
	return 0;
}
