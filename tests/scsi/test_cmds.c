/* SPDX-License-Identifier: MIT */
/* SCSI commands without I/O: INQUIRY and its VPD pages, READ CAPACITY, MODE SENSE and
 * SELECT, REPORT LUNS, REQUEST SENSE, unit attentions, and the generic rejections. */
#include "harness.h"

static int setup_ram512(void **state)
{
	struct harness *h = malloc(sizeof(*h));

	h_open(h, "ram=1M", 512, false);
	*state = h;
	return 0;
}

static int teardown(void **state)
{
	h_close(*state);
	free(*state);
	return 0;
}

static struct vs_scsi_cmd *inquiry(struct harness *h, uint8_t evpd, uint8_t page, uint16_t alloc,
				   uint8_t *buf, size_t len)
{
	uint8_t cdb[6] = {0x12, evpd, page, (uint8_t)(alloc >> 8), (uint8_t)alloc, 0};

	return h_cdb(h, cdb, NULL, 0, buf, len);
}

/* ---- INQUIRY ---- */

static void inquiry_standard_identifies_a_disk(void **state)
{
	uint8_t b[255];
	struct vs_scsi_cmd *c = inquiry(*state, 0, 0, sizeof(b), b, sizeof(b));

	assert_good(c);
	assert_int_equal(c->in_residual, sizeof(b) - 96);
	assert_false(c->overrun);
	assert_int_equal(b[0], 0x00); /* connected direct-access block device */
	assert_int_equal(b[1], 0x00); /* not removable */
	assert_int_equal(b[2], 0x06); /* SPC-4 */
	assert_int_equal(b[3], 0x12); /* HISUP, response data format 2 */
	assert_int_equal(b[4], 91);   /* 96 bytes in all */
	assert_int_equal(b[7], 0x02); /* CMDQUE */
	assert_memory_equal(&b[8], "VIOSCOPE", 8);
	assert_memory_equal(&b[16], "vioscope disk   ", 16);
	assert_int_equal(b[60] << 8 | b[61], 0x0460); /* SPC-4 version descriptor */
}

static void inquiry_with_cmddt_is_invalid_field(void **state)
{
	uint8_t b[96];

	assert_bad_cdb(inquiry(*state, 0x02, 0, sizeof(b), b, sizeof(b)), 1, 1);
}

static void inquiry_page_without_evpd_is_invalid_field(void **state)
{
	uint8_t b[96];

	assert_bad_cdb(inquiry(*state, 0, 0x80, sizeof(b), b, sizeof(b)), 2, -1);
}

static void inquiry_allocation_length_cuts_the_data(void **state)
{
	uint8_t b[255];
	struct vs_scsi_cmd *c = inquiry(*state, 0, 0, 36, b, sizeof(b));

	assert_good(c);
	assert_int_equal(c->in_residual, sizeof(b) - 36);
	assert_false(c->overrun);
}

static void inquiry_into_small_buffer_transfers_what_fits(void **state)
{
	uint8_t b[20];
	struct vs_scsi_cmd *c = inquiry(*state, 0, 0, 96, b, sizeof(b));

	assert_good(c);
	assert_int_equal(c->in_residual, 0);
	assert_true(c->overrun);
	assert_memory_equal(&b[8], "VIOSCOPE", 8);
}

static void inquiry_allocation_length_zero_moves_nothing(void **state)
{
	uint8_t b[96];
	struct vs_scsi_cmd *c = inquiry(*state, 0, 0, 0, b, sizeof(b));

	assert_good(c);
	assert_int_equal(c->in_residual, sizeof(b));
}

static void vpd_supported_pages_lists_six(void **state)
{
	static const uint8_t want[] = {0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2};
	uint8_t b[64];
	struct vs_scsi_cmd *c = inquiry(*state, 1, 0x00, sizeof(b), b, sizeof(b));

	assert_good(c);
	assert_int_equal(b[1], 0x00);
	assert_int_equal(b[3], sizeof(want));
	assert_memory_equal(&b[4], want, sizeof(want));
	assert_int_equal(c->in_residual, sizeof(b) - 4 - sizeof(want));
}

static void vpd_serial_is_stable_per_name(void **state)
{
	struct harness *h = *state;
	struct vs_scsi_lun_params p = {.be = h->be, .name = "test-lun"};
	struct vs_scsi_lun *same, *other;
	uint8_t b[64];
	struct vs_scsi_cmd *c = inquiry(h, 1, 0x80, sizeof(b), b, sizeof(b));

	assert_good(c);
	assert_int_equal(b[1], 0x80);
	assert_int_equal(b[3], 16);
	assert_memory_equal(&b[4], vs_scsi_lun_serial(h->lun), 16);
	assert_int_equal(vs_scsi_lun_create(&same, &p), 0);
	p.name = "another";
	assert_int_equal(vs_scsi_lun_create(&other, &p), 0);
	assert_string_equal(vs_scsi_lun_serial(same), vs_scsi_lun_serial(h->lun));
	assert_string_not_equal(vs_scsi_lun_serial(other), vs_scsi_lun_serial(h->lun));
	vs_scsi_lun_destroy(same);
	vs_scsi_lun_destroy(other);
}

static void vpd_device_identification_has_naa6_and_t10(void **state)
{
	struct harness *h = *state;
	uint8_t b[128];
	struct vs_scsi_cmd *c = inquiry(h, 1, 0x83, sizeof(b), b, sizeof(b));

	assert_good(c);
	assert_int_equal(b[1], 0x83);
	assert_int_equal(b[2] << 8 | b[3], 20 + 28);
	assert_int_equal(c->in_residual, sizeof(b) - 52);
	/* NAA: binary, LU association, type 3, 16 bytes, NAA 6 */
	assert_int_equal(b[4], 0x01);
	assert_int_equal(b[5], 0x03);
	assert_int_equal(b[7], 16);
	assert_int_equal(b[8] >> 4, 6);
	/* T10 vendor ID: ASCII, type 1, "VIOSCOPE" then the serial */
	assert_int_equal(b[24], 0x02);
	assert_int_equal(b[25], 0x01);
	assert_int_equal(b[27], 24);
	assert_memory_equal(&b[28], "VIOSCOPE", 8);
	assert_memory_equal(&b[36], vs_scsi_lun_serial(h->lun), 16);
}

static void vpd_block_limits_with_discard(void **state)
{
	uint8_t b[64];
	struct vs_scsi_cmd *c = inquiry(*state, 1, 0xb0, sizeof(b), b, sizeof(b));

	assert_good(c);
	assert_int_equal(b[1], 0xb0);
	assert_int_equal(b[2] << 8 | b[3], 0x3c);
	assert_int_equal(b[4] & 1, 1);		      /* WSNZ */
	assert_int_equal(b[6] << 8 | b[7], 8);	      /* 4 KiB granularity */
	assert_int_equal(get_be32(&b[8]), 65536);     /* 32 MiB max transfer */
	assert_int_equal(get_be32(&b[12]), 2048);     /* 1 MiB optimal */
	assert_int_equal(get_be32(&b[20]), 2u << 20); /* 1 GiB max unmap */
	assert_int_equal(get_be32(&b[24]), 64);	      /* unmap descriptors */
	assert_int_equal(get_be32(&b[28]), 8);	      /* unmap granularity */
	assert_int_equal(get_be64(&b[36]), 2u << 20); /* 1 GiB write same */
}

static void vpd_block_characteristics_non_rotating(void **state)
{
	uint8_t b[64];
	struct vs_scsi_cmd *c = inquiry(*state, 1, 0xb1, sizeof(b), b, sizeof(b));

	assert_good(c);
	assert_int_equal(b[1], 0xb1);
	assert_int_equal(b[2] << 8 | b[3], 0x3c);
	assert_int_equal(b[4] << 8 | b[5], 1);
}

static void vpd_provisioning_with_discard(void **state)
{
	uint8_t b[64];
	struct vs_scsi_cmd *c = inquiry(*state, 1, 0xb2, sizeof(b), b, sizeof(b));

	assert_good(c);
	assert_int_equal(b[1], 0xb2);
	assert_int_equal(b[2] << 8 | b[3], 4);
	assert_int_equal(c->in_residual, sizeof(b) - 8);
	assert_int_equal(b[5], 0x80 | 0x40 | 0x20 | 0x04); /* LBPU LBPWS LBPWS10 LBPRZ */
	assert_int_equal(b[6] & 0x07, 2);		   /* thin */
}

static void vpd_pages_of_read_only_lun_hide_provisioning(void **state)
{
	struct harness h;
	uint8_t b[64];
	struct vs_scsi_cmd *c;

	(void)state;
	h_open(&h, "ram=1M", 4096, true);
	c = inquiry(&h, 1, 0xb2, sizeof(b), b, sizeof(b));
	assert_good(c);
	assert_int_equal(b[5], 0);
	c = inquiry(&h, 1, 0xb0, sizeof(b), b, sizeof(b));
	assert_good(c);
	assert_int_equal(get_be32(&b[8]), 8192); /* 32 MiB in 4 KiB blocks */
	assert_int_equal(get_be32(&b[20]), 0);	 /* no unmap */
	assert_int_equal(get_be32(&b[24]), 0);
	h_close(&h);
}

static void vpd_unsupported_page_is_invalid_field(void **state)
{
	uint8_t b[64];

	assert_bad_cdb(inquiry(*state, 1, 0x89, sizeof(b), b, sizeof(b)), 2, -1);
}

/* ---- missing LUNs ---- */

static void inquiry_of_missing_lun_says_not_capable(void **state)
{
	uint8_t cdb[6] = {0x12, 0, 0, 0, 96, 0}, b[96];
	struct vs_scsi_cmd *c = h_run(*state, 7, cdb, 6, NULL, 0, b, sizeof(b));

	assert_good(c);
	assert_int_equal(b[0], 0x7f);
}

static void tur_of_missing_lun_is_lun_not_supported(void **state)
{
	uint8_t cdb[6] = {0};

	assert_sense(h_run(*state, 5, cdb, 6, NULL, 0, NULL, 0), VS_SENSE_ILLEGAL_REQUEST, 0x25, 0);
	assert_sense(h_run(*state, 1000, cdb, 6, NULL, 0, NULL, 0), VS_SENSE_ILLEGAL_REQUEST, 0x25,
		     0);
}

static void request_sense_of_missing_lun_returns_its_sense(void **state)
{
	uint8_t cdb[6] = {0x03, 0, 0, 0, 18, 0}, b[18];
	struct vs_scsi_cmd *c = h_run(*state, 9, cdb, 6, NULL, 0, b, sizeof(b));

	assert_good(c);
	assert_int_equal(b[0], 0x70);
	assert_int_equal(b[2], VS_SENSE_ILLEGAL_REQUEST);
	assert_int_equal(b[12], 0x25);
}

/* ---- READ CAPACITY ---- */

static void read_capacity_10_of_512_and_4096_lun(void **state)
{
	uint8_t cdb[10] = {0x25}, b[8];
	struct harness h4;

	assert_good(h_cdb((struct harness *)*state, cdb, NULL, 0, b, sizeof(b)));
	assert_int_equal(get_be32(&b[0]), 2047);
	assert_int_equal(get_be32(&b[4]), 512);
	h_open(&h4, "ram=1M", 4096, false);
	assert_good(h_cdb(&h4, cdb, NULL, 0, b, sizeof(b)));
	assert_int_equal(get_be32(&b[0]), 255);
	assert_int_equal(get_be32(&b[4]), 4096);
	h_close(&h4);
}

static void read_capacity_of_huge_lun_needs_16(void **state)
{
	uint8_t cdb10[10] = {0x25}, cdb16[16] = {0x9e, 0x10}, b[32];
	struct harness h;

	(void)state;
	h_open(&h, "null=4T", 512, false);
	assert_good(h_cdb(&h, cdb10, NULL, 0, b, 8));
	assert_int_equal(get_be32(&b[0]), 0xffffffffu);
	set_be32(&cdb16[10], 32);
	assert_good(h_cdb(&h, cdb16, NULL, 0, b, sizeof(b)));
	assert_true(get_be64(&b[0]) == (4ull << 40) / 512 - 1);
	assert_int_equal(get_be32(&b[8]), 512);
	h_close(&h);
}

static void read_capacity_16_reports_provisioning(void **state)
{
	uint8_t cdb[16] = {0x9e, 0x10}, b[32];
	struct harness h;
	struct vs_scsi_cmd *c;

	set_be32(&cdb[10], sizeof(b));
	c = h_cdb((struct harness *)*state, cdb, NULL, 0, b, sizeof(b));
	assert_good(c);
	assert_true(get_be64(&b[0]) == 2047);
	assert_int_equal(b[14] & 0xc0, 0xc0); /* LBPME, LBPRZ */
	h_open(&h, "ram=1M", 4096, true);
	assert_good(h_cdb(&h, cdb, NULL, 0, b, sizeof(b)));
	assert_true(get_be64(&b[0]) == 255);
	assert_int_equal(get_be32(&b[8]), 4096);
	assert_int_equal(b[14] & 0xc0, 0);
	h_close(&h);
}

static void read_capacity_16_allocation_length_cuts(void **state)
{
	uint8_t cdb[16] = {0x9e, 0x10}, b[32];
	struct vs_scsi_cmd *c;

	set_be32(&cdb[10], 12);
	c = h_cdb((struct harness *)*state, cdb, NULL, 0, b, sizeof(b));
	assert_good(c);
	assert_int_equal(c->in_residual, 20);
}

static void read_capacity_lba_without_pmi_is_invalid_field(void **state)
{
	uint8_t cdb[10] = {0x25, 0, 0, 0, 0, 1}, b[8];

	assert_bad_cdb(h_cdb((struct harness *)*state, cdb, NULL, 0, b, sizeof(b)), 2, -1);
}

static void service_action_in_other_than_rc16_is_invalid_field(void **state)
{
	uint8_t cdb[16] = {0x9e, 0x12}, b[32];

	set_be32(&cdb[10], sizeof(b));
	assert_bad_cdb(h_cdb((struct harness *)*state, cdb, NULL, 0, b, sizeof(b)), 1, 4);
}

/* ---- MODE SENSE / SELECT ---- */

static struct vs_scsi_cmd *mode_sense6(struct harness *h, uint8_t dbd, uint8_t pcpage, uint8_t *b,
				       uint8_t alloc)
{
	uint8_t cdb[6] = {0x1a, dbd, pcpage, 0, alloc, 0};

	return h_cdb(h, cdb, NULL, 0, b, alloc);
}

static void mode_sense_6_all_pages(void **state)
{
	uint8_t b[255];
	struct vs_scsi_cmd *c = mode_sense6(*state, 0, 0x3f, b, 255);

	assert_good(c);
	assert_int_equal(b[0], 4 + 8 + 20 + 12 - 1);
	assert_int_equal(c->in_residual, 255 - 44);
	assert_int_equal(b[2], 0x10); /* DPOFUA, not write protected */
	assert_int_equal(b[3], 8);    /* block descriptor */
	assert_int_equal(get_be32(&b[4]), 2048);
	assert_int_equal(b[9] << 16 | b[10] << 8 | b[11], 512);
	assert_int_equal(b[12], 0x08); /* caching page */
	assert_int_equal(b[13], 0x12);
	assert_int_equal(b[14] & 0x04, 0x04); /* WCE */
	assert_int_equal(b[32], 0x0a);	      /* control page */
	assert_int_equal(b[33], 0x0a);
}

static void mode_sense_6_dbd_omits_block_descriptor(void **state)
{
	uint8_t b[255];
	struct vs_scsi_cmd *c = mode_sense6(*state, 0x08, 0x08, b, 255);

	assert_good(c);
	assert_int_equal(b[0], 4 + 20 - 1);
	assert_int_equal(b[3], 0);
	assert_int_equal(b[4], 0x08);
}

static void mode_sense_10_long_lba_descriptor(void **state)
{
	uint8_t cdb[10] = {0x5a, 0x10, 0x3f, 0, 0, 0, 0, 0, 255, 0}, b[255];
	struct vs_scsi_cmd *c = h_cdb((struct harness *)*state, cdb, NULL, 0, b, sizeof(b));

	assert_good(c);
	assert_int_equal(b[0] << 8 | b[1], 8 + 16 + 20 + 12 - 2);
	assert_int_equal(b[4] & 1, 1); /* LONGLBA */
	assert_int_equal(b[6] << 8 | b[7], 16);
	assert_true(get_be64(&b[8]) == 2048);
	assert_int_equal(get_be32(&b[20]), 512);
	assert_int_equal(b[24], 0x08);
}

static void mode_sense_of_read_only_lun_sets_wp(void **state)
{
	struct harness h;
	uint8_t b[255];

	(void)state;
	h_open(&h, "ram=1M", 512, true);
	assert_good(mode_sense6(&h, 0, 0x3f, b, 255));
	assert_int_equal(b[2] & 0x80, 0x80);
	h_close(&h);
}

static void mode_sense_changeable_caching_is_wce_only(void **state)
{
	uint8_t b[255];

	assert_good(mode_sense6(*state, 0x08, 0x40 | 0x08, b, 255));
	assert_int_equal(b[4 + 2], 0x04);
	for (int i = 3; i < 20; i++)
		assert_int_equal(b[4 + i], 0);
}

static void mode_sense_saved_values_not_supported(void **state)
{
	uint8_t b[255];

	assert_sense(mode_sense6(*state, 0, 0xc0 | 0x08, b, 255), VS_SENSE_ILLEGAL_REQUEST, 0x39,
		     0);
}

static void mode_sense_unknown_page_is_invalid_field(void **state)
{
	uint8_t b[255];

	assert_bad_cdb(mode_sense6(*state, 0, 0x1c, b, 255), 2, 5);
}

static void mode_sense_small_allocation_truncates(void **state)
{
	uint8_t b[255];
	uint8_t cdb[6] = {0x1a, 0, 0x3f, 0, 4, 0};
	struct vs_scsi_cmd *c = h_cdb((struct harness *)*state, cdb, NULL, 0, b, sizeof(b));

	assert_good(c);
	assert_int_equal(c->in_residual, sizeof(b) - 4);
	assert_int_equal(b[0], 43); /* the full length, even when cut */
}

/* A MODE SELECT(6) list: header, then the caching page with byte 2 = flags. */
static size_t caching_select(uint8_t *p, uint8_t flags)
{
	memset(p, 0, 24);
	p[4] = 0x08;
	p[5] = 0x12;
	p[6] = flags;
	return 24;
}

static struct vs_scsi_cmd *mode_select6(struct harness *h, uint8_t b1, const uint8_t *p,
					uint8_t len, size_t outlen)
{
	uint8_t cdb[6] = {0x15, b1, 0, 0, len, 0};

	return h_cdb(h, cdb, p, outlen, NULL, 0);
}

static void mode_select_clears_and_sets_wce(void **state)
{
	struct harness *h = *state;
	uint8_t p[24], b[255];

	assert_good(mode_select6(h, 0x10, p, (uint8_t)caching_select(p, 0), 24));
	assert_int_equal(h->cmd.out_residual, 0);
	assert_good(mode_sense6(h, 0x08, 0x08, b, 255));
	assert_int_equal(b[4 + 2] & 0x04, 0);
	assert_good(mode_select6(h, 0x10, p, (uint8_t)caching_select(p, 0x04), 24));
	assert_good(mode_sense6(h, 0x08, 0x08, b, 255));
	assert_int_equal(b[4 + 2] & 0x04, 0x04);
}

static void mode_select_of_unchangeable_bit_is_invalid_param(void **state)
{
	struct harness *h = *state;
	uint8_t p[24];
	struct vs_scsi_cmd *c = mode_select6(h, 0x10, p, (uint8_t)caching_select(p, 0x05), 24);

	assert_sense(c, VS_SENSE_ILLEGAL_REQUEST, 0x26, 0);
	assert_int_equal(c->sense[15] & 0xc0, 0x80); /* SKSV, in the parameter list */
	assert_int_equal(c->sense[16] << 8 | c->sense[17], 6);
}

static void mode_select_of_unknown_page_is_invalid_param(void **state)
{
	uint8_t p[24];

	caching_select(p, 0x04);
	p[4] = 0x1c;
	assert_sense(mode_select6(*state, 0x10, p, 24, 24), VS_SENSE_ILLEGAL_REQUEST, 0x26, 0);
}

static void mode_select_with_cut_page_is_length_error(void **state)
{
	uint8_t p[24];

	caching_select(p, 0x04);
	assert_sense(mode_select6(*state, 0x10, p, 12, 24), VS_SENSE_ILLEGAL_REQUEST, 0x1a, 0);
}

static void mode_select_with_short_buffer_is_length_error(void **state)
{
	uint8_t p[24];

	caching_select(p, 0x04);
	assert_sense(mode_select6(*state, 0x10, p, 24, 10), VS_SENSE_ILLEGAL_REQUEST, 0x1a, 0);
}

static void mode_select_save_pages_is_invalid_field(void **state)
{
	uint8_t p[24];

	caching_select(p, 0x04);
	assert_bad_cdb(mode_select6(*state, 0x11, p, 24, 24), 1, 0);
}

static void mode_select_10_with_block_descriptor(void **state)
{
	uint8_t cdb[10] = {0x55, 0x10, 0, 0, 0, 0, 0, 0, 36, 0}, p[36];
	struct harness *h = *state;

	memset(p, 0, sizeof(p));
	p[7] = 8;	 /* short block descriptor */
	p[8 + 6] = 0x02; /* block length 512 */
	p[16] = 0x08;
	p[17] = 0x12;
	p[18] = 0x04;
	assert_good(h_cdb(h, cdb, p, sizeof(p), NULL, 0));
	p[8 + 6] = 0x10; /* 4096: a geometry change */
	assert_sense(h_cdb(h, cdb, p, sizeof(p), NULL, 0), VS_SENSE_ILLEGAL_REQUEST, 0x26, 0);
}

/* ---- REPORT LUNS ---- */

static struct vs_scsi_cmd *report_luns(struct harness *h, unsigned lun, uint8_t sel, uint32_t alloc,
				       uint8_t *b, size_t len)
{
	uint8_t cdb[12] = {0xa0, 0, sel};

	set_be32(&cdb[6], alloc);
	return h_run(h, lun, cdb, sizeof(cdb), NULL, 0, b, len);
}

static void report_luns_lists_attached_luns(void **state)
{
	struct harness *h = *state;
	struct vs_scsi_lun_params p = {.be = h->be, .name = "x"};
	struct vs_scsi_lun *l3, *l200;
	uint8_t b[256];
	struct vs_scsi_cmd *c;

	assert_int_equal(vs_scsi_lun_create(&l3, &p), 0);
	assert_int_equal(vs_scsi_lun_create(&l200, &p), 0);
	assert_int_equal(vs_scsi_dev_attach(h->dev, 3, l3), 0);
	assert_int_equal(vs_scsi_dev_attach(h->dev, 200, l200), 0);
	assert_int_equal(vs_scsi_dev_attach(h->dev, 3, l3), -EEXIST);
	/* Asked through a missing LUN: REPORT LUNS is the device's. */
	c = report_luns(h, 42, 0, sizeof(b), b, sizeof(b));
	assert_good(c);
	assert_int_equal(get_be32(&b[0]), 24);
	assert_int_equal(c->in_residual, sizeof(b) - 32);
	assert_true(get_be64(&b[8]) == 0);
	assert_true(get_be64(&b[16]) == 0x0003000000000000ull);
	assert_true(get_be64(&b[24]) == 0x00c8000000000000ull);
	assert_good(report_luns(h, 0, 1, sizeof(b), b, sizeof(b)));
	assert_int_equal(get_be32(&b[0]), 0);
	assert_ptr_equal(vs_scsi_dev_detach(h->dev, 3), l3);
	assert_null(vs_scsi_dev_detach(h->dev, 3));
	vs_scsi_lun_destroy(l3);
	assert_good(report_luns(h, 0, 2, sizeof(b), b, sizeof(b)));
	assert_int_equal(get_be32(&b[0]), 16);
}

static void report_luns_bad_select_or_allocation(void **state)
{
	uint8_t b[64];

	assert_bad_cdb(report_luns(*state, 0, 3, sizeof(b), b, sizeof(b)), 2, -1);
	assert_bad_cdb(report_luns(*state, 0, 0, 8, b, sizeof(b)), 6, -1);
}

/* ---- unit attention, REQUEST SENSE, TUR ---- */

static void tur_is_good(void **state)
{
	uint8_t cdb[6] = {0};

	assert_good(h_cdb((struct harness *)*state, cdb, NULL, 0, NULL, 0));
}

static void unit_attention_after_reset_is_reported_once(void **state)
{
	struct harness *h = *state;
	uint8_t tur[6] = {0}, b[96];

	vs_scsi_lun_reset(h->lun);
	/* INQUIRY neither reports nor clears it. */
	assert_good(inquiry(h, 0, 0, sizeof(b), b, sizeof(b)));
	assert_sense(h_cdb(h, tur, NULL, 0, NULL, 0), VS_SENSE_UNIT_ATTENTION, 0x29, 0);
	assert_good(h_cdb(h, tur, NULL, 0, NULL, 0));
}

static void unit_attention_applies_to_unknown_opcodes_too(void **state)
{
	struct harness *h = *state;
	uint8_t bad[6] = {0x02}, tur[6] = {0};

	vs_scsi_dev_reset(h->dev);
	assert_sense(h_cdb(h, bad, NULL, 0, NULL, 0), VS_SENSE_UNIT_ATTENTION, 0x29, 0);
	assert_sense(h_cdb(h, bad, NULL, 0, NULL, 0), VS_SENSE_ILLEGAL_REQUEST, 0x20, 0);
	assert_good(h_cdb(h, tur, NULL, 0, NULL, 0));
}

static void request_sense_returns_and_clears_unit_attention(void **state)
{
	struct harness *h = *state;
	uint8_t rs[6] = {0x03, 0, 0, 0, 96, 0}, tur[6] = {0}, b[96];
	struct vs_scsi_cmd *c;

	vs_scsi_lun_reset(h->lun);
	c = h_cdb(h, rs, NULL, 0, b, sizeof(b));
	assert_good(c);
	assert_int_equal(c->in_residual, sizeof(b) - 18);
	assert_int_equal(b[0], 0x70);
	assert_int_equal(b[2], VS_SENSE_UNIT_ATTENTION);
	assert_int_equal(b[12], 0x29);
	assert_good(h_cdb(h, tur, NULL, 0, NULL, 0));
	assert_good(h_cdb(h, rs, NULL, 0, b, sizeof(b)));
	assert_int_equal(b[2], VS_SENSE_NO_SENSE);
	assert_int_equal(b[12], 0);
}

static void request_sense_descriptor_format_is_invalid_field(void **state)
{
	uint8_t rs[6] = {0x03, 0x01, 0, 0, 96, 0}, b[96];

	assert_bad_cdb(h_cdb((struct harness *)*state, rs, NULL, 0, b, sizeof(b)), 1, 0);
}

static void power_on_unit_attention_when_asked(void **state)
{
	struct harness *h = *state;
	struct vs_scsi_lun_params p = {.be = h->be, .name = "p", .power_on_ua = true};
	struct vs_scsi_lun *l;
	uint8_t tur[6] = {0};

	assert_int_equal(vs_scsi_lun_create(&l, &p), 0);
	assert_int_equal(vs_scsi_dev_attach(h->dev, 1, l), 0);
	assert_sense(h_run(h, 1, tur, 6, NULL, 0, NULL, 0), VS_SENSE_UNIT_ATTENTION, 0x29, 0);
	assert_good(h_run(h, 1, tur, 6, NULL, 0, NULL, 0));
}

static void start_stop_unit_is_accepted(void **state)
{
	uint8_t cdb[6] = {0x1b, 0, 0, 0, 0x01, 0};

	assert_good(h_cdb((struct harness *)*state, cdb, NULL, 0, NULL, 0));
}

/* ---- generic rejections ---- */

static void unsupported_opcodes_are_invalid_opcode(void **state)
{
	static const uint8_t ops[] = {0x02, 0xa3, 0x85, 0xa1, 0x5e, 0x89, 0xff, 0x7f};
	uint8_t cdb[16] = {0}, b[64];

	for (size_t i = 0; i < sizeof(ops); i++) {
		cdb[0] = ops[i];
		cdb[1] = 0x0c; /* REPORT SUPPORTED OPERATION CODES for 0xa3 */
		assert_sense(h_cdb((struct harness *)*state, cdb, NULL, 0, b, sizeof(b)),
			     VS_SENSE_ILLEGAL_REQUEST, 0x20, 0);
	}
}

static void naca_is_invalid_field(void **state)
{
	uint8_t cdb[6] = {0, 0, 0, 0, 0, 0x04};

	assert_bad_cdb(h_cdb((struct harness *)*state, cdb, NULL, 0, NULL, 0), 5, 2);
}

static void cdb_shorter_than_its_group_is_invalid_field(void **state)
{
	uint8_t cdb[6] = {0x28};

	assert_bad_cdb(h_run(*state, 0, cdb, 6, NULL, 0, NULL, 0), 0, -1);
}

static void dummy_done(struct vs_scsi_cmd *cmd)
{
	(*(int *)cmd->priv)++;
}

static void malformed_commands_are_refused_without_done(void **state)
{
	struct harness *h = *state;
	uint8_t cdb[6] = {0}, b[8];
	struct iovec iov = {b, sizeof(b)};
	int calls = 0;
	struct vs_scsi_cmd c = {.cdb = cdb, .cdb_len = 6, .done = dummy_done, .priv = &calls};

	c.cdb_len = 0;
	assert_int_equal(vs_scsi_exec(h->dev, 0, &c, h->ctx), -EINVAL);
	c.cdb_len = 33;
	assert_int_equal(vs_scsi_exec(h->dev, 0, &c, h->ctx), -EINVAL);
	c.cdb_len = 6;
	c.in_iov = &iov;
	c.in_iovcnt = 1;
	c.in_len = 4; /* not the iovec total */
	assert_int_equal(vs_scsi_exec(h->dev, 0, &c, h->ctx), -EINVAL);
	c.in_len = sizeof(b);
	assert_int_equal(vs_scsi_exec(h->dev, 0, &c, NULL), -EINVAL);
	assert_int_equal(calls, 0);
	assert_int_equal(vs_scsi_exec(h->dev, 0, &c, h->ctx), 0);
	assert_int_equal(calls, 1); /* TEST UNIT READY completes before exec returns */
}

static void lun_create_rejects_bad_geometry(void **state)
{
	struct harness *h = *state;
	struct vs_scsi_lun_params p = {.be = h->be, .block_size = 1024};
	struct vs_scsi_lun *l;
	struct vs_backend *tiny;

	assert_int_equal(vs_scsi_lun_create(&l, &p), -EINVAL);
	assert_int_equal(vs_backend_open(&tiny, "ram=2K", NULL, 0), 0);
	p.be = tiny;
	p.block_size = 4096;
	assert_int_equal(vs_scsi_lun_create(&l, &p), -EINVAL);
	p.block_size = 0; /* 512 */
	assert_int_equal(vs_scsi_lun_create(&l, &p), 0);
	assert_int_equal(vs_scsi_lun_block_size(l), 512);
	assert_true(vs_scsi_lun_blocks(l) == 4);
	vs_scsi_lun_destroy(l);
	vs_backend_close(tiny);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup_ram512, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(inquiry_standard_identifies_a_disk),
	    T(inquiry_with_cmddt_is_invalid_field),
	    T(inquiry_page_without_evpd_is_invalid_field),
	    T(inquiry_allocation_length_cuts_the_data),
	    T(inquiry_into_small_buffer_transfers_what_fits),
	    T(inquiry_allocation_length_zero_moves_nothing),
	    T(vpd_supported_pages_lists_six),
	    T(vpd_serial_is_stable_per_name),
	    T(vpd_device_identification_has_naa6_and_t10),
	    T(vpd_block_limits_with_discard),
	    T(vpd_block_characteristics_non_rotating),
	    T(vpd_provisioning_with_discard),
	    T(vpd_pages_of_read_only_lun_hide_provisioning),
	    T(vpd_unsupported_page_is_invalid_field),
	    T(inquiry_of_missing_lun_says_not_capable),
	    T(tur_of_missing_lun_is_lun_not_supported),
	    T(request_sense_of_missing_lun_returns_its_sense),
	    T(read_capacity_10_of_512_and_4096_lun),
	    T(read_capacity_of_huge_lun_needs_16),
	    T(read_capacity_16_reports_provisioning),
	    T(read_capacity_16_allocation_length_cuts),
	    T(read_capacity_lba_without_pmi_is_invalid_field),
	    T(service_action_in_other_than_rc16_is_invalid_field),
	    T(mode_sense_6_all_pages),
	    T(mode_sense_6_dbd_omits_block_descriptor),
	    T(mode_sense_10_long_lba_descriptor),
	    T(mode_sense_of_read_only_lun_sets_wp),
	    T(mode_sense_changeable_caching_is_wce_only),
	    T(mode_sense_saved_values_not_supported),
	    T(mode_sense_unknown_page_is_invalid_field),
	    T(mode_sense_small_allocation_truncates),
	    T(mode_select_clears_and_sets_wce),
	    T(mode_select_of_unchangeable_bit_is_invalid_param),
	    T(mode_select_of_unknown_page_is_invalid_param),
	    T(mode_select_with_cut_page_is_length_error),
	    T(mode_select_with_short_buffer_is_length_error),
	    T(mode_select_save_pages_is_invalid_field),
	    T(mode_select_10_with_block_descriptor),
	    T(report_luns_lists_attached_luns),
	    T(report_luns_bad_select_or_allocation),
	    T(tur_is_good),
	    T(unit_attention_after_reset_is_reported_once),
	    T(unit_attention_applies_to_unknown_opcodes_too),
	    T(request_sense_returns_and_clears_unit_attention),
	    T(request_sense_descriptor_format_is_invalid_field),
	    T(power_on_unit_attention_when_asked),
	    T(start_stop_unit_is_accepted),
	    T(unsupported_opcodes_are_invalid_opcode),
	    T(naca_is_invalid_field),
	    T(cdb_shorter_than_its_group_is_invalid_field),
	    T(malformed_commands_are_refused_without_done),
	    T(lun_create_rejects_bad_geometry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
