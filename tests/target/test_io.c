/* SPDX-License-Identifier: MIT */
/* The target serving SCSI commands to a vhost-user frontend: the request path. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"

#define REQ0 VS_VIRTIO_SCSI_VQ_REQ0

static void fill(uint8_t *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(i * 7 + seed);
}

/* INQUIRY on LUN 0 answers GOOD with vendor VIOSCOPE, and the used length covers the
 * response header plus the data. */
static void test_inquiry_lun0(void **state)
{
	struct fx *x = *state;
	uint8_t data[96];
	struct fe_cmd c = {
	    .cdb = {0x12, 0, 0, 0, 96, 0}, .in = data, .in_len = sizeof(data), .tag = 1};

	assert_int_equal(fe_scsi(&x->fe, REQ0, &c), 0);
	assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
	assert_int_equal(c.resp.status, 0);
	assert_memory_equal(data + 8, "VIOSCOPE", 8);
	assert_int_equal(c.used_len, sizeof(c.resp) + 96 - vs_le32(c.resp.resid));
	assert_true(c.used_len > sizeof(c.resp) + 36);
}

/* WRITE(10) then READ(10) of 8 blocks on the ram LUN return the bytes written. */
static void test_rw_ram(void **state)
{
	struct fx *x = *state;
	static uint8_t out[4096], in[4096];
	struct fe_cmd w = {.lun = 1, .out = out, .out_len = 4096};
	struct fe_cmd r = {.lun = 1, .in = in, .in_len = 4096};

	fill(out, sizeof(out), 3);
	cdb10(w.cdb, 0x2a, 0, 100, 8);
	assert_int_equal(fe_scsi(&x->fe, REQ0, &w), 0);
	assert_int_equal(w.resp.response, VS_VIRTIO_SCSI_S_OK);
	assert_int_equal(w.resp.status, 0);
	assert_int_equal(w.used_len, sizeof(w.resp));
	cdb10(r.cdb, 0x28, 0, 100, 8);
	assert_int_equal(fe_scsi(&x->fe, REQ0, &r), 0);
	assert_int_equal(r.resp.status, 0);
	assert_int_equal(vs_le32(r.resp.resid), 0);
	assert_int_equal(r.used_len, sizeof(r.resp) + 4096);
	assert_memory_equal(in, out, sizeof(out));
}

/* WRITE(10) on the file LUN, SYNCHRONIZE CACHE, and the bytes are in the file on disk;
 * READ(10) returns them too. */
static void test_rw_file_sync(void **state)
{
	struct fx *x = *state;
	static uint8_t out[8192], in[8192], disk[8192];
	struct fe_cmd w = {.out = out, .out_len = sizeof(out)};
	struct fe_cmd s = {.cdb = {0x35}};
	struct fe_cmd r = {.in = in, .in_len = sizeof(in)};
	int fd;

	fill(out, sizeof(out), 11);
	cdb10(w.cdb, 0x2a, 0, 16, 16);
	assert_int_equal(fe_scsi(&x->fe, REQ0 + 1, &w), 0);
	assert_int_equal(w.resp.status, 0);
	assert_int_equal(fe_scsi(&x->fe, REQ0 + 1, &s), 0);
	assert_int_equal(s.resp.response, VS_VIRTIO_SCSI_S_OK);
	assert_int_equal(s.resp.status, 0);
	fd = open(x->g.file, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, disk, sizeof(disk), 16 * 512), sizeof(disk));
	close(fd);
	assert_memory_equal(disk, out, sizeof(out));
	cdb10(r.cdb, 0x28, 0, 16, 16);
	assert_int_equal(fe_scsi(&x->fe, REQ0, &r), 0);
	assert_int_equal(r.resp.status, 0);
	assert_memory_equal(in, out, sizeof(out));
}

/* A command to target 1 (only target 0 exists) gets BAD_TARGET. */
static void test_bad_target(void **state)
{
	struct fx *x = *state;
	uint8_t data[36];
	struct fe_cmd c = {.target = 1, .cdb = {0x12, 0, 0, 0, 36, 0}, .in = data, .in_len = 36};

	assert_int_equal(fe_scsi(&x->fe, REQ0, &c), 0);
	assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_BAD_TARGET);
	assert_int_equal(c.used_len, sizeof(c.resp));
}

/* A LUN nobody attached, on target 0: the SCSI layer answers (LOGICAL UNIT NOT SUPPORTED),
 * as a real target does, so a guest scanning sparse LUNs sees the target. */
static void test_unknown_lun(void **state)
{
	struct fx *x = *state;
	struct fe_cmd c = {.lun = 7}; /* TEST UNIT READY */

	assert_int_equal(fe_scsi(&x->fe, REQ0, &c), 0);
	assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
	assert_int_equal(c.resp.status, 2);
	assert_int_equal(sense_key(&c.resp), 5);
	assert_int_equal(sense_asc(&c.resp), 0x25);
}

/* Headers split over several descriptors (request 20+31 bytes, response 8+100) work. */
static void test_split_headers(void **state)
{
	struct fx *x = *state;
	struct vs_virtio_scsi_cmd_req req = {.cdb = {0x12, 0, 0, 0, 36, 0}};
	struct vs_virtio_scsi_cmd_resp resp;
	const uint64_t h = FE_SLOT(1), rs = h + FE_SLOT_RESP, d = h + FE_SLOT_DATA;
	struct vs_vq_buf bufs[5] = {
	    {h, 20, false}, {h + 20, 31, false}, {rs, 8, true}, {rs + 8, 100, true}, {d, 36, true},
	};
	uint32_t len;

	vs_vscsi_lun_encode(req.lun, 0, 1);
	memcpy(fe_host(&x->fe, h), &req, sizeof(req));
	assert_int_equal(fe_run_chain(&x->fe, REQ0, bufs, 5, &len), 0);
	memcpy(&resp, fe_host(&x->fe, rs), sizeof(resp));
	assert_int_equal(resp.response, VS_VIRTIO_SCSI_S_OK);
	assert_int_equal(resp.status, 0);
	assert_int_equal(len, sizeof(resp) + 36);
	assert_memory_equal((uint8_t *)fe_host(&x->fe, d) + 8, "VIOSCOPE", 8);
}

/* The same command through an indirect descriptor table. */
static void test_indirect(void **state)
{
	struct fx *x = *state;
	static uint8_t out[512], in[512];
	struct fe_cmd w = {.lun = 1, .out = out, .out_len = 512};
	struct fe_cmd r = {.lun = 1, .in = in, .in_len = 512};

	assert_true(x->fe.features & VS_VIRTIO_BIT(VS_VIRTIO_F_INDIRECT_DESC));
	x->fe.indirect = true;
	fill(out, sizeof(out), 5);
	cdb10(w.cdb, 0x2a, 0, 7, 1);
	assert_int_equal(fe_scsi(&x->fe, REQ0 + 1, &w), 0);
	assert_int_equal(w.resp.status, 0);
	cdb10(r.cdb, 0x28, 0, 7, 1);
	assert_int_equal(fe_scsi(&x->fe, REQ0 + 1, &r), 0);
	assert_int_equal(r.resp.status, 0);
	assert_memory_equal(in, out, sizeof(out));
}

/* A READ with a data-in buffer smaller than the transfer: response OVERRUN. */
static void test_overrun(void **state)
{
	struct fx *x = *state;
	uint8_t in[512];
	struct fe_cmd r = {.lun = 1, .in = in, .in_len = 512};

	cdb10(r.cdb, 0x28, 0, 0, 4);
	assert_int_equal(fe_scsi(&x->fe, REQ0, &r), 0);
	assert_int_equal(r.resp.response, VS_VIRTIO_SCSI_S_OVERRUN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_inquiry_lun0, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_rw_ram, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_rw_file_sync, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_target, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_unknown_lun, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_split_headers, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_indirect, fx_setup, fx_teardown),
	    cmocka_unit_test_setup_teardown(test_overrun, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
