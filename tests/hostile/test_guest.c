/* SPDX-License-Identifier: MIT */
/*
 * Hostile guests, through the whole target (issue 8): commands whose ranges wrap at 2^64,
 * parameter lists that claim more than they hold or more than the limits allow.  Each is
 * answered with the exact sense a SCSI target owes (SPC-4, SBC-3) and touches nothing.
 * tests/scsi checks the same rules on the SCSI layer alone; here they come from a guest
 * over virtio, through descriptors, the request header copy and the data-out iovecs.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hostile.h"

#define REQ0 VS_VIRTIO_SCSI_VQ_REQ0

#define KEY_ILLEGAL	  0x05
#define ASC_PARAM_LEN	  0x1a /* PARAMETER LIST LENGTH ERROR */
#define ASC_LBA_RANGE	  0x21 /* LOGICAL BLOCK ADDRESS OUT OF RANGE */
#define ASC_INVALID_CDB	  0x24 /* INVALID FIELD IN CDB */
#define ASC_INVALID_PARAM 0x26 /* INVALID FIELD IN PARAMETER LIST */

static int setup(void **state)
{
	const char *const args[] = {"--lun", "0:ram=16M", NULL};
	int rc = sess_setup(state);

	return rc ? rc : sess_start(*state, args, &(struct fe_opts){.nq = 3});
}

static int teardown(void **state)
{
	struct sess *s = *state;
	int rc = target_alive(&s->p) ? sess_end(s) : -1;

	sess_teardown(state);
	return rc;
}

/* Run c; CHECK CONDITION with exactly this sense (field: the SKS field pointer, -1 none;
 * in_cdb: the pointer is into the CDB), and virtio response `response`. */
static void expect_sense_resp(struct sess *s, struct fe_cmd *c, int asc, int field, bool in_cdb,
			      uint8_t response)
{
	assert_int_equal(fe_scsi(&s->fe, REQ0, c), 0);
	assert_int_equal(c->resp.response, response);
	assert_int_equal(c->resp.status, 0x02);
	assert_int_equal(sense_key(&c->resp), KEY_ILLEGAL);
	assert_int_equal(sense_asc(&c->resp), asc);
	assert_int_equal(sense_ascq(&c->resp), 0x00);
	assert_int_equal(sense_field(&c->resp), field);
	if (field >= 0)
		assert_int_equal(!!(c->resp.sense[15] & 0x40), in_cdb);
}

static void expect_sense(struct sess *s, struct fe_cmd *c, int asc, int field, bool in_cdb)
{
	expect_sense_resp(s, c, asc, field, in_cdb, VS_VIRTIO_SCSI_S_OK);
}

/* READ/WRITE/VERIFY/WRITE SAME/SYNCHRONIZE CACHE (16) from LBA 2^64 - 1 for 2 blocks: the
 * end wraps to 1.  LOGICAL BLOCK ADDRESS OUT OF RANGE, and the first blocks of the LUN are
 * untouched. */
static void lba_plus_length_wrapping_at_2_64(void **state)
{
	struct sess *s = *state;
	static const uint8_t ops[] = {0x88, 0x8a, 0x8f, 0x93, 0x91};
	uint8_t block[1024];

	memset(block, 0x3c, sizeof(block));
	for (unsigned i = 0; i < sizeof(ops); i++) {
		struct fe_cmd c = {0};

		cdb16(c.cdb, ops[i], 0, UINT64_MAX, 2);
		if (ops[i] == 0x88) {
			c.in_len = 1024;
		} else if (ops[i] == 0x8a) {
			c.out = block;
			c.out_len = 1024;
		} else if (ops[i] == 0x93) {
			c.out = block;
			c.out_len = 512;
		}
		expect_sense(s, &c, ASC_LBA_RANGE, -1, false);
	}
	/* Nothing was written at the wrapped end (LBAs 0 and 1 still read as zeros). */
	struct fe_cmd rd = {.in_len = 1024};
	cdb10(rd.cdb, 0x28, 0, 0, 2);
	assert_int_equal(fe_scsi(&s->fe, REQ0, &rd), 0);
	assert_int_equal(rd.resp.status, 0);
	for (unsigned i = 0; i < 1024; i++)
		assert_int_equal(((uint8_t *)fe_slot_in(&s->fe, 0))[i], 0);
}

/* An UNMAP parameter list: header (data length, block descriptor data length), then
 * n descriptors (LBA, blocks). */
static uint32_t unmap_list(uint8_t *p, unsigned n, uint64_t lba, uint32_t blocks)
{
	uint32_t len = 8 + 16 * n;

	memset(p, 0, len);
	p[0] = (uint8_t)((len - 2) >> 8);
	p[1] = (uint8_t)(len - 2);
	p[2] = (uint8_t)((16 * n) >> 8);
	p[3] = (uint8_t)(16 * n);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *d = p + 8 + 16 * i;
		for (int k = 0; k < 8; k++)
			d[k] = (uint8_t)(lba >> (56 - 8 * k));
		d[8] = (uint8_t)(blocks >> 24);
		d[9] = (uint8_t)(blocks >> 16);
		d[10] = (uint8_t)(blocks >> 8);
		d[11] = (uint8_t)blocks;
	}
	return len;
}

static void unmap_cmd(struct fe_cmd *c, uint8_t *p, uint32_t plen, uint32_t out_len)
{
	memset(c, 0, sizeof(*c));
	c->cdb[0] = 0x42;
	c->cdb[7] = (uint8_t)(plen >> 8);
	c->cdb[8] = (uint8_t)plen;
	c->out = p;
	c->out_len = out_len;
}

/* 65 block descriptors, where the block limits VPD page says 64: INVALID FIELD IN
 * PARAMETER LIST, pointing at the block descriptor data length (byte 2). */
static void unmap_with_65_descriptors(void **state)
{
	struct sess *s = *state;
	uint8_t p[8 + 16 * 65];
	struct fe_cmd c;
	uint32_t plen = unmap_list(p, 65, 0, 1);

	unmap_cmd(&c, p, plen, plen);
	expect_sense(s, &c, ASC_INVALID_PARAM, 2, false);
}

/* A block descriptor data length that runs past the parameter list (and past the data
 * length): PARAMETER LIST LENGTH ERROR; INVALID FIELD IN PARAMETER LIST when only the
 * data length is exceeded. */
static void unmap_with_block_descriptors_past_the_list(void **state)
{
	struct sess *s = *state;
	uint8_t p[8 + 16 * 2];
	struct fe_cmd c;
	uint32_t plen = unmap_list(p, 2, 0, 1);

	p[2] = 0x01; /* 256 + 32 bytes of descriptors in a 40-byte list */
	unmap_cmd(&c, p, plen, plen);
	expect_sense(s, &c, ASC_PARAM_LEN, -1, false);

	plen = unmap_list(p, 2, 0, 1);
	p[1] = 16; /* data length: the header's rest and one descriptor, BDDL says two */
	unmap_cmd(&c, p, plen, plen);
	expect_sense(s, &c, ASC_INVALID_PARAM, 2, false);

	/* A parameter list length beyond the data-out buffer (the CDB wanted more than the
	 * buffers hold: virtio's OVERRUN, with the sense). */
	plen = unmap_list(p, 2, 0, 1);
	unmap_cmd(&c, p, plen, 24);
	expect_sense_resp(s, &c, ASC_PARAM_LEN, -1, false, VS_VIRTIO_SCSI_S_OVERRUN);
}

/* An UNMAP descriptor whose LBA + count wraps at 2^64. */
static void unmap_range_wrapping_at_2_64(void **state)
{
	struct sess *s = *state;
	uint8_t p[8 + 16];
	struct fe_cmd c;
	uint32_t plen = unmap_list(p, 1, UINT64_MAX - 1, 4);

	unmap_cmd(&c, p, plen, plen);
	expect_sense(s, &c, ASC_LBA_RANGE, -1, false);
}

/* WRITE SAME (16) of 2^32 - 1 blocks: above the block limits' maximum; INVALID FIELD IN
 * CDB pointing at the NUMBER OF LOGICAL BLOCKS (byte 10).  Nothing is written. */
static void write_same_of_2_32_minus_1_blocks(void **state)
{
	struct sess *s = *state;
	uint8_t block[512];
	struct fe_cmd c = {.out = block, .out_len = 512};

	memset(block, 0x77, sizeof(block));
	cdb16(c.cdb, 0x93, 0, 0, UINT32_MAX);
	expect_sense(s, &c, ASC_INVALID_CDB, 10, true);
	struct fe_cmd rd = {.in_len = 512};
	cdb10(rd.cdb, 0x28, 0, 0, 1);
	assert_int_equal(fe_scsi(&s->fe, REQ0, &rd), 0);
	assert_int_equal(((uint8_t *)fe_slot_in(&s->fe, 0))[0], 0);
}

/* A MODE SELECT (10) parameter list: 8-byte header, no block descriptor, the caching page
 * (20 bytes) as MODE SENSE would return it, with its page length byte set to len. */
static uint32_t mode_list(uint8_t *p, uint8_t page_len)
{
	memset(p, 0, 8 + 20);
	p[8] = 0x08;
	p[9] = page_len;
	p[10] = 0x04; /* WCE */
	return 8 + 20;
}

static void mode_select_cmd(struct fe_cmd *c, uint8_t *p, uint16_t plen, uint32_t out_len)
{
	memset(c, 0, sizeof(*c));
	c->cdb[0] = 0x55;
	c->cdb[1] = 0x10; /* PF */
	c->cdb[7] = (uint8_t)(plen >> 8);
	c->cdb[8] = (uint8_t)plen;
	c->out = p;
	c->out_len = out_len;
}

/* A mode page whose length runs past the parameter list, a list cut inside a page, a
 * block descriptor past the list, a list longer than the data-out: PARAMETER LIST LENGTH
 * ERROR each time, and the write cache setting is what it was. */
static void mode_select_pages_past_the_parameter_list(void **state)
{
	struct sess *s = *state;
	uint8_t p[64];
	struct fe_cmd c;
	uint32_t plen = mode_list(p, 0x12);

	p[9] = 0xfe; /* the page claims 256 bytes in a 28-byte list */
	mode_select_cmd(&c, p, (uint16_t)plen, plen);
	expect_sense(s, &c, ASC_PARAM_LEN, -1, false);

	mode_list(p, 0x12);
	mode_select_cmd(&c, p, 8 + 10, 8 + 10); /* the list ends inside the page */
	expect_sense(s, &c, ASC_PARAM_LEN, -1, false);

	mode_list(p, 0x12);
	p[7] = 8; /* an 8-byte block descriptor in a 12-byte list */
	mode_select_cmd(&c, p, 12, 12);
	expect_sense(s, &c, ASC_PARAM_LEN, -1, false);

	mode_list(p, 0x12);
	mode_select_cmd(&c, p, (uint16_t)plen, 12); /* list longer than the data-out */
	expect_sense_resp(s, &c, ASC_PARAM_LEN, -1, false, VS_VIRTIO_SCSI_S_OVERRUN);

	/* MODE SENSE: the caching page still says WCE (the default). */
	struct fe_cmd ms = {.in_len = 64};
	ms.cdb[0] = 0x1a;
	ms.cdb[1] = 0x08; /* DBD */
	ms.cdb[2] = 0x08; /* caching page, current values */
	ms.cdb[4] = 64;
	assert_int_equal(fe_scsi(&s->fe, REQ0, &ms), 0);
	assert_int_equal(ms.resp.status, 0);
	assert_int_equal(((uint8_t *)fe_slot_in(&s->fe, 0))[4 + 2] & 0x04, 0x04);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    T(lba_plus_length_wrapping_at_2_64),
	    T(unmap_with_65_descriptors),
	    T(unmap_with_block_descriptors_past_the_list),
	    T(unmap_range_wrapping_at_2_64),
	    T(write_same_of_2_32_minus_1_blocks),
	    T(mode_select_pages_past_the_parameter_list),
	};

	return hostile_init(argc, argv) ?: cmocka_run_group_tests(tests, NULL, NULL);
}
