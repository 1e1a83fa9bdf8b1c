/* SPDX-License-Identifier: MIT */
/* SCSI commands that do I/O: READ/WRITE of every size at both block sizes, buffers
 * larger and smaller than the transfer, SYNCHRONIZE CACHE, UNMAP, WRITE SAME, VERIFY,
 * and the errors each can end in. */
#include <fcntl.h>
#include <sys/stat.h>

#include "harness.h"
#include "scsi/scsi_int.h" /* white box: errno mapping, a LUN without discard */

struct fixture {
	struct harness h;
	uint32_t bs;
};

static int setup_512(void **state)
{
	struct fixture *f = malloc(sizeof(*f));

	f->bs = 512;
	h_open(&f->h, "ram=64M", 512, false);
	*state = f;
	return 0;
}

static int setup_4096(void **state)
{
	struct fixture *f = malloc(sizeof(*f));

	f->bs = 4096;
	h_open(&f->h, "ram=64M", 4096, false);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	h_close(&f->h);
	free(f);
	return 0;
}

static void dummy_done_count(struct vs_scsi_cmd *cmd)
{
	(*(int *)cmd->priv)++;
}

static void fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

static struct vs_scsi_cmd *write16(struct harness *h, uint64_t lba, uint32_t n, uint8_t flags,
				   const void *buf, size_t len)
{
	uint8_t cdb[16];

	cdb16(cdb, 0x8a, flags, lba, n);
	return h_cdb(h, cdb, buf, len, NULL, 0);
}

static struct vs_scsi_cmd *read16(struct harness *h, uint64_t lba, uint32_t n, void *buf,
				  size_t len)
{
	uint8_t cdb[16];

	cdb16(cdb, 0x88, 0, lba, n);
	return h_cdb(h, cdb, NULL, 0, buf, len);
}

/* ---- READ / WRITE ---- */

static void write_then_read_every_cdb_size(void **state)
{
	struct fixture *f = *state;
	struct harness *h = &f->h;
	size_t len = 256 * (size_t)f->bs;
	uint8_t *w = malloc(len), *r = malloc(len);
	uint8_t c6[6], c10[10], c12[12], c16[16];

	/* (6): 21-bit LBA, 0 blocks means 256 */
	fill(w, len, 1);
	c6[0] = 0x0a, c6[1] = 0xe0, c6[2] = 0x01, c6[3] = 0x10, c6[4] = 0, c6[5] = 0;
	assert_good(h_cdb(h, c6, w, len, NULL, 0));
	assert_int_equal(h->cmd.out_residual, 0);
	memset(r, 0, len);
	c6[0] = 0x08;
	assert_good(h_cdb(h, c6, NULL, 0, r, len));
	assert_int_equal(h->cmd.in_residual, 0);
	assert_memory_equal(w, r, len);

	/* (10) with FUA and DPO */
	fill(w, 8 * f->bs, 2);
	cdb10(c10, 0x2a, 0x18, 100, 8);
	assert_good(h_cdb(h, c10, w, 8 * f->bs, NULL, 0));
	cdb10(c10, 0x28, 0x08, 100, 8);
	assert_good(h_cdb(h, c10, NULL, 0, r, 8 * f->bs));
	assert_memory_equal(w, r, 8 * f->bs);

	/* (12) */
	fill(w, 3 * f->bs, 3);
	memset(c12, 0, sizeof(c12));
	c12[0] = 0xaa;
	set_be32(&c12[2], 5000);
	set_be32(&c12[6], 3);
	assert_good(h_cdb(h, c12, w, 3 * f->bs, NULL, 0));
	c12[0] = 0xa8;
	assert_good(h_cdb(h, c12, NULL, 0, r, 3 * f->bs));
	assert_memory_equal(w, r, 3 * f->bs);

	/* (16) at the last block */
	fill(w, f->bs, 4);
	cdb16(c16, 0x8a, 0x08, vs_scsi_lun_blocks(h->lun) - 1, 1);
	assert_good(h_cdb(h, c16, w, f->bs, NULL, 0));
	cdb16(c16, 0x88, 0, vs_scsi_lun_blocks(h->lun) - 1, 1);
	assert_good(h_cdb(h, c16, NULL, 0, r, f->bs));
	assert_memory_equal(w, r, f->bs);
	free(w);
	free(r);
}

static void scattered_buffers_round_trip(void **state)
{
	struct fixture *f = *state;
	struct harness *h = &f->h;
	size_t len = 4 * (size_t)f->bs;
	uint8_t *w = malloc(len), *r = calloc(1, len), cdb[10];
	/* Odd pieces, one of them empty, none block-aligned. */
	struct iovec wi[4] = {{w, 100}, {w + 100, 0}, {w + 100, len - 1000}, {w + len - 900, 900}};
	struct iovec ri[3] = {{r, 1}, {r + 1, len - 2}, {r + len - 1, 1}};

	fill(w, len, 5);
	cdb10(cdb, 0x2a, 0, 7, 4);
	assert_good(h_run_iov(h, 0, cdb, 10, wi, 4, NULL, 0));
	cdb10(cdb, 0x28, 0, 7, 4);
	assert_good(h_run_iov(h, 0, cdb, 10, NULL, 0, ri, 3));
	assert_memory_equal(w, r, len);
	free(w);
	free(r);
}

static void read_into_larger_buffer_reports_residual(void **state)
{
	struct fixture *f = *state;
	struct harness *h = &f->h;
	size_t len = 2 * (size_t)f->bs;
	uint8_t *w = malloc(len), *r = malloc(len + 300), cdb[10];
	/* The transfer ends inside the second iovec, which is cut into its own bio. */
	struct iovec ri[2] = {{r, f->bs / 2}, {r + f->bs / 2, len + 300 - f->bs / 2}};

	fill(w, len, 6);
	assert_good(write16(h, 40, 2, 0, w, len));
	memset(r, 0xee, len + 300);
	cdb10(cdb, 0x28, 0, 40, 2);
	assert_good(h_run_iov(h, 0, cdb, 10, NULL, 0, ri, 2));
	assert_int_equal(h->cmd.in_residual, 300);
	assert_false(h->cmd.overrun);
	assert_memory_equal(w, r, len);
	assert_int_equal(r[len], 0xee);
	free(w);
	free(r);
}

static void read_into_smaller_buffer_reads_whole_blocks_that_fit(void **state)
{
	struct fixture *f = *state;
	struct harness *h = &f->h;
	size_t len = 4 * (size_t)f->bs;
	uint8_t *w = malloc(len), *r = malloc(len);
	struct vs_scsi_cmd *c;

	fill(w, len, 7);
	assert_good(write16(h, 0, 4, 0, w, len));
	memset(r, 0, len);
	c = read16(h, 0, 4, r, 2 * f->bs + 10);
	assert_good(c);
	assert_true(c->overrun);
	assert_int_equal(c->in_residual, 10);
	assert_memory_equal(w, r, 2 * f->bs);
	c = read16(h, 0, 4, r, 10);
	assert_good(c);
	assert_true(c->overrun);
	assert_int_equal(c->in_residual, 10);
	free(w);
	free(r);
}

static void write_with_short_data_out_is_invalid_field(void **state)
{
	struct fixture *f = *state;
	uint8_t *w = calloc(1, 4 * f->bs);
	struct vs_scsi_cmd *c = write16(&f->h, 0, 4, 0, w, 3 * f->bs);

	assert_bad_cdb(c, 10, -1);
	assert_true(c->overrun);
	free(w);
}

static void write_with_larger_data_out_leaves_residual(void **state)
{
	struct fixture *f = *state;
	uint8_t *w = calloc(1, 2 * f->bs);
	struct vs_scsi_cmd *c = write16(&f->h, 0, 1, 0, w, 2 * f->bs);

	assert_good(c);
	assert_int_equal(c->out_residual, f->bs);
	free(w);
}

static void lba_out_of_range(void **state)
{
	struct fixture *f = *state;
	struct harness *h = &f->h;
	uint64_t blocks = vs_scsi_lun_blocks(h->lun);
	uint8_t b[4096], cdb[10];

	assert_sense(read16(h, blocks, 1, b, f->bs), VS_SENSE_ILLEGAL_REQUEST, 0x21, 0);
	assert_sense(read16(h, blocks - 1, 2, b, f->bs), VS_SENSE_ILLEGAL_REQUEST, 0x21, 0);
	assert_sense(read16(h, UINT64_MAX, 1, b, f->bs), VS_SENSE_ILLEGAL_REQUEST, 0x21, 0);
	assert_sense(write16(h, UINT64_MAX - 1, 2, 0, b, f->bs), VS_SENSE_ILLEGAL_REQUEST, 0x21, 0);
	cdb10(cdb, 0x28, 0, 0xffffffffu, 1);
	assert_sense(h_cdb(h, cdb, NULL, 0, b, f->bs), VS_SENSE_ILLEGAL_REQUEST, 0x21, 0);
	/* Zero blocks at the end is not an error. */
	assert_good(read16(h, blocks, 0, NULL, 0));
}

static void transfer_above_maximum_is_invalid_field(void **state)
{
	struct fixture *f = *state;
	uint32_t max = (32u << 20) / f->bs;
	uint8_t b[16];

	assert_bad_cdb(read16(&f->h, 0, max + 1, b, sizeof(b)), 10, -1);
}

static void transfer_of_zero_blocks_moves_nothing(void **state)
{
	struct fixture *f = *state;
	uint8_t b[16];
	struct vs_scsi_cmd *c = read16(&f->h, 10, 0, b, sizeof(b));

	assert_good(c);
	assert_int_equal(c->in_residual, sizeof(b));
}

static void protection_fields_are_invalid_field(void **state)
{
	struct fixture *f = *state;
	uint8_t cdb[10], b[4096];

	cdb10(cdb, 0x28, 0x20, 0, 1);
	assert_bad_cdb(h_cdb(&f->h, cdb, NULL, 0, b, f->bs), 1, 7);
}

static void write_to_read_only_lun_is_data_protect(void **state)
{
	struct harness h;
	uint8_t b[512] = {0}, cdb[16];

	(void)state;
	h_open(&h, "ram=1M", 512, true);
	assert_sense(write16(&h, 0, 1, 0, b, sizeof(b)), VS_SENSE_DATA_PROTECT, 0x27, 0);
	cdb16(cdb, 0x93, 0x08, 0, 1);
	assert_sense(h_run(&h, 0, cdb, 16, b, sizeof(b), NULL, 0), VS_SENSE_DATA_PROTECT, 0x27, 0);
	memset(cdb, 0, sizeof(cdb));
	cdb[0] = 0x42;
	cdb[8] = 24;
	assert_sense(h_cdb(&h, cdb, b, 24, NULL, 0), VS_SENSE_DATA_PROTECT, 0x27, 0);
	assert_good(read16(&h, 0, 1, b, sizeof(b)));
	h_close(&h);
}

static void read_error_of_backend_is_medium_error(void **state)
{
	char path[] = "/tmp/vs-scsi-test-XXXXXX", spec[64];
	struct harness h;
	uint8_t b[512];
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	snprintf(spec, sizeof(spec), "file=%s", path);
	h_open(&h, spec, 512, false);
	/* The file shrinks under the LUN: the read finds end of file. */
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_sense(read16(&h, 100, 1, b, sizeof(b)), VS_SENSE_MEDIUM_ERROR, 0x11, 0);
	h_close(&h);
	close(fd);
	unlink(path);
}

static void errno_maps_to_sense(void **state)
{
	struct vs_scsi_cmd c;

	(void)state;
	memset(&c, 0, sizeof(c));
	c.cdb = (const uint8_t *)"\x2a";
	c.cdb_len = 1;
	vs_scsi_sense_errno(&c, -EIO, VS_IO_KIND_WRITE);
	assert_int_equal(c.status, VS_SCSI_CHECK_CONDITION);
	assert_int_equal(c.sense[2], VS_SENSE_MEDIUM_ERROR);
	assert_int_equal(c.sense[12], 0x0c);
	vs_scsi_sense_errno(&c, -EIO, VS_IO_KIND_READ);
	assert_int_equal(c.sense[12], 0x11);
	vs_scsi_sense_errno(&c, -ENOSPC, VS_IO_KIND_WRITE);
	assert_int_equal(c.sense[2], VS_SENSE_DATA_PROTECT);
	assert_int_equal(c.sense[12] << 8 | c.sense[13], 0x2707);
	vs_scsi_sense_errno(&c, -ETIMEDOUT, VS_IO_KIND_READ); /* rbd timeout=S */
	assert_int_equal(c.sense[2], VS_SENSE_HARDWARE_ERROR);
	assert_int_equal(c.sense[12] << 8 | c.sense[13], 0x0801);
	vs_scsi_sense_errno(&c, -EAGAIN, VS_IO_KIND_WRITE);
	assert_int_equal(c.status, VS_SCSI_BUSY);
	assert_int_equal(c.sense_len, 0);
}

/* ---- context full ---- */

static void full_context_answers_busy(void **state)
{
	struct fixture *f = *state;
	struct harness *h = &f->h;
	struct vs_io_ctx *big = h->ctx, *one;
	uint8_t *b = malloc(2 * f->bs), cdb[16];
	struct iovec iov = {b, f->bs};
	struct vs_scsi_cmd first;
	int first_done = 0;

	assert_int_equal(vs_io_ctx_create(&one, 1), 0);
	h->ctx = one;
	/* The first read takes the only slot ... */
	cdb16(cdb, 0x88, 0, 0, 1);
	memset(&first, 0, sizeof(first));
	first.cdb = cdb;
	first.cdb_len = 16;
	first.in_iov = &iov;
	first.in_iovcnt = 1;
	first.in_len = f->bs;
	first.done = dummy_done_count;
	first.priv = &first_done;
	assert_int_equal(vs_scsi_exec(h->dev, 0, &first, one), 0);
	assert_int_equal(first_done, 0);
	/* ... so the second is answered BUSY at once. */
	h_start_iov(h, 0, cdb, 16, NULL, 0, &(struct iovec){b + f->bs, f->bs}, 1);
	assert_int_equal(h->done_calls, 1);
	assert_int_equal(h->cmd.status, VS_SCSI_BUSY);
	assert_int_equal(h->cmd.in_residual, f->bs);
	while (!first_done) {
		vs_io_ctx_submit(one);
		vs_io_ctx_reap(one, true);
	}
	assert_int_equal(first.status, VS_SCSI_GOOD);
	vs_io_ctx_destroy(one);
	h->ctx = big;
	free(b);
}

static void split_transfer_waits_for_a_free_slot(void **state)
{
	struct fixture *f = *state;
	struct harness *h = &f->h;
	struct vs_io_ctx *big = h->ctx, *one;
	size_t len = 2 * (size_t)f->bs;
	uint8_t *w = malloc(len), *r = malloc(len + 64), cdb[16];
	/* Two bios (whole first iovec, cut second) through a context of depth 1. */
	struct iovec ri[2] = {{r, f->bs}, {r + f->bs, f->bs + 64}};

	fill(w, len, 8);
	assert_good(write16(h, 9, 2, 0, w, len));
	assert_int_equal(vs_io_ctx_create(&one, 1), 0);
	h->ctx = one;
	cdb16(cdb, 0x88, 0, 9, 2);
	assert_good(h_run_iov(h, 0, cdb, 16, NULL, 0, ri, 2));
	assert_int_equal(h->cmd.in_residual, 64);
	assert_memory_equal(w, r, len);
	vs_io_ctx_destroy(one);
	h->ctx = big;
	free(w);
	free(r);
}

/* ---- SYNCHRONIZE CACHE ---- */

static void synchronize_cache_10_and_16(void **state)
{
	struct fixture *f = *state;
	uint8_t c10[10], c16[16];

	cdb10(c10, 0x35, 0x02, 0, 0);
	assert_good(h_cdb(&f->h, c10, NULL, 0, NULL, 0));
	cdb16(c16, 0x91, 0, 10, 20);
	assert_good(h_cdb(&f->h, c16, NULL, 0, NULL, 0));
	cdb16(c16, 0x91, 0, vs_scsi_lun_blocks(f->h.lun), 1);
	assert_sense(h_cdb(&f->h, c16, NULL, 0, NULL, 0), VS_SENSE_ILLEGAL_REQUEST, 0x21, 0);
}

/* ---- UNMAP ---- */

/* UNMAP parameter list with n descriptors (lba[i], count[i]); returns its length. */
static size_t unmap_list(uint8_t *p, unsigned n, const uint64_t *lba, const uint32_t *cnt)
{
	memset(p, 0, 8 + 16 * n);
	set_be16(&p[0], (uint16_t)(6 + 16 * n));
	set_be16(&p[2], (uint16_t)(16 * n));
	for (unsigned i = 0; i < n; i++) {
		set_be64(&p[8 + 16 * i], lba[i]);
		set_be32(&p[8 + 16 * i + 8], cnt[i]);
	}
	return 8 + 16 * n;
}

static struct vs_scsi_cmd *unmap(struct harness *h, const uint8_t *p, uint16_t plen, size_t outlen)
{
	uint8_t cdb[10] = {0x42};

	set_be16(&cdb[7], plen);
	return h_cdb(h, cdb, p, outlen, NULL, 0);
}

static void unmap_then_read_zeros(void **state)
{
	struct fixture *f = *state;
	struct harness *h = &f->h;
	size_t len = 64 * (size_t)f->bs;
	uint8_t *w = malloc(len), *r = malloc(len), *z = calloc(1, len), p[8 + 16 * 3];
	uint64_t lba[3] = {0, 20, 40};
	uint32_t cnt[3] = {8, 0, 16}; /* an empty descriptor is skipped */
	size_t plen = unmap_list(p, 3, lba, cnt);

	fill(w, len, 9);
	assert_good(write16(h, 0, 64, 0, w, len));
	assert_good(unmap(h, p, (uint16_t)plen, plen));
	assert_int_equal(h->cmd.out_residual, 0);
	assert_good(read16(h, 0, 64, r, len));
	assert_memory_equal(r, z, 8 * f->bs);
	assert_memory_equal(r + 8 * f->bs, w + 8 * f->bs, 32 * f->bs);
	assert_memory_equal(r + 40 * f->bs, z, 16 * f->bs);
	assert_memory_equal(r + 56 * f->bs, w + 56 * f->bs, 8 * f->bs);
	free(w);
	free(r);
	free(z);
}

static void unmap_parameter_list_errors(void **state)
{
	struct fixture *f = *state;
	struct harness *h = &f->h;
	uint8_t p[8 + 16 * 65] = {0};
	uint64_t lba[65] = {0};
	uint32_t cnt[65] = {0};
	size_t plen;

	/* No parameter data: nothing to do. */
	assert_good(unmap(h, p, 0, 0));
	/* Shorter than the header. */
	plen = unmap_list(p, 1, lba, cnt);
	assert_sense(unmap(h, p, 4, 4), VS_SENSE_ILLEGAL_REQUEST, 0x1a, 0);
	/* Parameter list length beyond the data-out buffer. */
	assert_sense(unmap(h, p, (uint16_t)plen, 8), VS_SENSE_ILLEGAL_REQUEST, 0x1a, 0);
	/* Block descriptor data length beyond the list. */
	set_be16(&p[2], 32);
	assert_sense(unmap(h, p, (uint16_t)plen, plen), VS_SENSE_ILLEGAL_REQUEST, 0x1a, 0);
	/* Block descriptor data length beyond the unmap data length. */
	plen = unmap_list(p, 1, lba, cnt);
	set_be16(&p[0], 6);
	assert_sense(unmap(h, p, (uint16_t)plen, plen), VS_SENSE_ILLEGAL_REQUEST, 0x26, 0);
	/* More descriptors than the block limits allow. */
	plen = unmap_list(p, 65, lba, cnt);
	assert_sense(unmap(h, p, (uint16_t)plen, plen), VS_SENSE_ILLEGAL_REQUEST, 0x26, 0);
	assert_int_equal(h->cmd.sense[16] << 8 | h->cmd.sense[17], 2);
	/* A range beyond the end. */
	lba[0] = vs_scsi_lun_blocks(h->lun) - 1;
	cnt[0] = 2;
	plen = unmap_list(p, 1, lba, cnt);
	assert_sense(unmap(h, p, (uint16_t)plen, plen), VS_SENSE_ILLEGAL_REQUEST, 0x21, 0);
	/* More blocks in all than the block limits allow (1 GiB): 17 times the 64 MiB. */
	for (int i = 0; i < 17; i++) {
		lba[i] = 0;
		cnt[i] = (uint32_t)vs_scsi_lun_blocks(h->lun);
	}
	plen = unmap_list(p, 17, lba, cnt);
	assert_sense(unmap(h, p, (uint16_t)plen, plen), VS_SENSE_ILLEGAL_REQUEST, 0x26, 0);
	assert_int_equal(h->cmd.sense[16] << 8 | h->cmd.sense[17], 8 + 16 * 16 + 8);
}

static void unmap_anchor_is_invalid_field(void **state)
{
	struct fixture *f = *state;
	uint8_t cdb[10] = {0x42, 0x01, 0, 0, 0, 0, 0, 0, 24, 0}, p[24];
	uint64_t lba = 0;
	uint32_t cnt = 1;

	unmap_list(p, 1, &lba, &cnt);
	assert_bad_cdb(h_cdb(&f->h, cdb, p, sizeof(p), NULL, 0), 1, 0);
}

static void unmap_without_discard_is_invalid_opcode(void **state)
{
	struct fixture *f = *state;
	uint8_t p[24];
	uint64_t lba = 0;
	uint32_t cnt = 1;

	f->h.lun->discard = false; /* as over a file system that cannot punch holes */
	unmap_list(p, 1, &lba, &cnt);
	assert_sense(unmap(&f->h, p, 24, 24), VS_SENSE_ILLEGAL_REQUEST, 0x20, 0);
}

/* ---- WRITE SAME ---- */

static struct vs_scsi_cmd *write_same16(struct harness *h, uint8_t flags, uint64_t lba, uint32_t n,
					const void *blk, size_t len)
{
	uint8_t cdb[16];

	cdb16(cdb, 0x93, flags, lba, n);
	return h_cdb(h, cdb, blk, len, NULL, 0);
}

static void check_blocks(struct harness *h, uint64_t lba, uint32_t n, const uint8_t *blk,
			 uint32_t bs)
{
	uint8_t *r = malloc((size_t)n * bs);

	assert_good(read16(h, lba, n, r, (size_t)n * bs));
	for (uint32_t i = 0; i < n; i++)
		assert_memory_equal(r + (size_t)i * bs, blk, bs);
	free(r);
}

static void write_same_repeats_a_pattern(void **state)
{
	struct fixture *f = *state;
	uint8_t *blk = malloc(f->bs), *z = calloc(1, f->bs);
	struct vs_scsi_cmd *c;
	uint8_t cdb10w[10];

	fill(blk, f->bs, 10);
	c = write_same16(&f->h, 0, 3, 100, blk, f->bs);
	assert_good(c);
	assert_int_equal(c->out_residual, 0);
	check_blocks(&f->h, 3, 100, blk, f->bs);
	check_blocks(&f->h, 103, 1, z, f->bs);
	/* WRITE SAME(10) */
	fill(blk, f->bs, 11);
	cdb10(cdb10w, 0x41, 0, 200, 5);
	assert_good(h_cdb(&f->h, cdb10w, blk, f->bs, NULL, 0));
	check_blocks(&f->h, 200, 5, blk, f->bs);
	free(blk);
	free(z);
}

static void write_same_longer_than_one_bio(void **state)
{
	struct fixture *f = *state;
	uint32_t n = (40u << 20) / f->bs; /* 40 MiB: three 16 MiB bios */
	uint8_t *blk = malloc(f->bs);

	fill(blk, f->bs, 12);
	assert_good(write_same16(&f->h, 0, 1, n, blk, f->bs));
	check_blocks(&f->h, 1, 64, blk, f->bs);
	check_blocks(&f->h, n - 63, 64, blk, f->bs);
	free(blk);
}

static void write_same_of_zeros_and_unmap_read_zeros(void **state)
{
	struct fixture *f = *state;
	uint8_t *blk = malloc(f->bs), *z = calloc(1, f->bs);

	fill(blk, f->bs, 13);
	assert_good(write_same16(&f->h, 0, 0, 30, blk, f->bs));
	assert_good(write_same16(&f->h, 0, 0, 10, z, f->bs));	  /* WRITE_ZEROES */
	assert_good(write_same16(&f->h, 0x08, 10, 10, z, f->bs)); /* UNMAP: DISCARD */
	assert_good(write_same16(&f->h, 0x01, 20, 5, NULL, 0));	  /* NDOB */
	check_blocks(&f->h, 0, 25, z, f->bs);
	check_blocks(&f->h, 25, 5, blk, f->bs);
	/* UNMAP with data that is not zeros writes the data. */
	assert_good(write_same16(&f->h, 0x08, 0, 2, blk, f->bs));
	check_blocks(&f->h, 0, 2, blk, f->bs);
	free(blk);
	free(z);
}

static void write_same_of_zeros_without_discard_writes_them(void **state)
{
	struct fixture *f = *state;
	uint8_t *blk = malloc(f->bs), *z = calloc(1, f->bs);

	f->h.lun->discard = false;
	fill(blk, f->bs, 14);
	assert_good(write_same16(&f->h, 0, 0, 8, blk, f->bs));
	assert_good(write_same16(&f->h, 0x08, 0, 8, z, f->bs));
	check_blocks(&f->h, 0, 8, z, f->bs);
	free(blk);
	free(z);
}

static void write_same_errors(void **state)
{
	struct fixture *f = *state;
	struct harness *h = &f->h;
	uint8_t *blk = calloc(1, f->bs);
	uint32_t max = (uint32_t)((1ull << 30) / f->bs);

	assert_bad_cdb(write_same16(h, 0, 0, 0, blk, f->bs), 10, -1); /* WSNZ */
	assert_bad_cdb(write_same16(h, 0, 0, max + 1, blk, f->bs), 10, -1);
	assert_bad_cdb(write_same16(h, 0x10, 0, 1, blk, f->bs), 1, 4);	  /* ANCHOR */
	assert_bad_cdb(write_same16(h, 0x02, 0, 1, blk, f->bs), 1, 2);	  /* LBDATA */
	assert_bad_cdb(write_same16(h, 0, 0, 1, blk, f->bs - 1), 10, -1); /* no full block */
	assert_sense(write_same16(h, 0, vs_scsi_lun_blocks(h->lun), 1, blk, f->bs),
		     VS_SENSE_ILLEGAL_REQUEST, 0x21, 0);
	free(blk);
}

/* ---- VERIFY ---- */

static struct vs_scsi_cmd *verify16(struct harness *h, uint8_t bytchk, uint64_t lba, uint32_t n,
				    const void *data, size_t len)
{
	uint8_t cdb[16];

	cdb16(cdb, 0x8f, (uint8_t)(bytchk << 1), lba, n);
	return h_cdb(h, cdb, data, len, NULL, 0);
}

static void verify_without_bytchk_checks_the_range(void **state)
{
	struct fixture *f = *state;
	uint8_t cdb[10];

	cdb10(cdb, 0x2f, 0, 0, 100);
	assert_good(h_cdb(&f->h, cdb, NULL, 0, NULL, 0));
	assert_sense(verify16(&f->h, 0, vs_scsi_lun_blocks(f->h.lun), 1, NULL, 0),
		     VS_SENSE_ILLEGAL_REQUEST, 0x21, 0);
	assert_bad_cdb(verify16(&f->h, 2, 0, 1, NULL, 0), 1, 2);
}

static void verify_compares_with_data_out(void **state)
{
	struct fixture *f = *state;
	struct harness *h = &f->h;
	uint32_t n = (3u << 20) / f->bs; /* several 1 MiB compare chunks */
	size_t len = (size_t)n * f->bs, at = len - 5 * f->bs + 3;
	uint8_t *w = malloc(len);
	struct vs_scsi_cmd *c;

	fill(w, len, 15);
	assert_good(write16(h, 50, n, 0, w, len));
	c = verify16(h, 1, 50, n, w, len);
	assert_good(c);
	assert_int_equal(c->out_residual, 0);
	w[at] ^= 0x40;
	c = verify16(h, 1, 50, n, w, len);
	assert_sense(c, VS_SENSE_MISCOMPARE, 0x1d, 0);
	assert_int_equal(c->sense[0], 0xf0); /* VALID: INFORMATION is the offset */
	assert_int_equal(get_be32(&c->sense[3]), at);
	assert_bad_cdb(verify16(h, 1, 50, 2, w, f->bs), 10, -1); /* data-out too short */
	free(w);
}

#define T(f)	cmocka_unit_test_setup_teardown(f, setup_512, teardown)
#define T4(f)	cmocka_unit_test_setup_teardown(f, setup_4096, teardown)
#define BOTH(f) T(f), T4(f)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    BOTH(write_then_read_every_cdb_size),
	    BOTH(scattered_buffers_round_trip),
	    BOTH(read_into_larger_buffer_reports_residual),
	    BOTH(read_into_smaller_buffer_reads_whole_blocks_that_fit),
	    BOTH(write_with_short_data_out_is_invalid_field),
	    BOTH(write_with_larger_data_out_leaves_residual),
	    BOTH(lba_out_of_range),
	    BOTH(transfer_above_maximum_is_invalid_field),
	    T(transfer_of_zero_blocks_moves_nothing),
	    T(protection_fields_are_invalid_field),
	    T(write_to_read_only_lun_is_data_protect),
	    T(read_error_of_backend_is_medium_error),
	    T(errno_maps_to_sense),
	    BOTH(full_context_answers_busy),
	    BOTH(split_transfer_waits_for_a_free_slot),
	    T(synchronize_cache_10_and_16),
	    BOTH(unmap_then_read_zeros),
	    BOTH(unmap_parameter_list_errors),
	    T(unmap_anchor_is_invalid_field),
	    T(unmap_without_discard_is_invalid_opcode),
	    BOTH(write_same_repeats_a_pattern),
	    BOTH(write_same_longer_than_one_bio),
	    BOTH(write_same_of_zeros_and_unmap_read_zeros),
	    T(write_same_of_zeros_without_discard_writes_them),
	    BOTH(write_same_errors),
	    T(verify_without_bytchk_checks_the_range),
	    BOTH(verify_compares_with_data_out),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
