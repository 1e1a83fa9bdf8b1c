/* SPDX-License-Identifier: MIT */
/* virtio-scsi wire layout, LUN field and little-endian helpers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "proto/virtio_scsi_proto.h"

/* Field offsets match the spec's layouts (a packed struct gone wrong shows up here). */
static void test_wire_offsets(void **state)
{
	(void)state;
	assert_int_equal(offsetof(struct vs_virtio_scsi_cmd_req, tag), 8);
	assert_int_equal(offsetof(struct vs_virtio_scsi_cmd_req, cdb), 19);
	assert_int_equal(offsetof(struct vs_virtio_scsi_cmd_req_pi, pi_bytesin), 23);
	assert_int_equal(offsetof(struct vs_virtio_scsi_cmd_req_pi, cdb), 27);
	assert_int_equal(offsetof(struct vs_virtio_scsi_cmd_resp, status), 10);
	assert_int_equal(offsetof(struct vs_virtio_scsi_cmd_resp, response), 11);
	assert_int_equal(offsetof(struct vs_virtio_scsi_cmd_resp, sense), 12);
	assert_int_equal(offsetof(struct vs_virtio_scsi_ctrl_tmf_req, tag), 16);
	assert_int_equal(offsetof(struct vs_virtio_scsi_ctrl_an_req, event_requested), 12);
	assert_int_equal(offsetof(struct vs_virtio_scsi_event, reason), 12);
	assert_int_equal(offsetof(struct vs_virtio_scsi_config, max_channel), 28);
	assert_int_equal(offsetof(struct vs_virtio_scsi_config, max_lun), 32);
}

/* The bytes Linux's virtio_scsi sends for target 3, LUN 5 decode to (3, 5). */
static void test_lun_decode_linux_form(void **state)
{
	(void)state;
	const uint8_t lun[8] = {1, 3, 0x40, 5, 0, 0, 0, 0};
	unsigned t = 99, l = 99;
	assert_int_equal(vs_vscsi_lun_decode(lun, &t, &l), 0);
	assert_int_equal(t, 3);
	assert_int_equal(l, 5);
}

/* Encode then decode round-trips across the whole range, flat addressing. */
static void test_lun_round_trip(void **state)
{
	(void)state;
	uint8_t lun[8];
	unsigned t, l;
	assert_int_equal(vs_vscsi_lun_encode(lun, 255, 16383), 0);
	assert_memory_equal(lun, ((uint8_t[]){1, 255, 0x7f, 0xff, 0, 0, 0, 0}), 8);
	assert_int_equal(vs_vscsi_lun_decode(lun, &t, &l), 0);
	assert_int_equal(t, 255);
	assert_int_equal(l, 16383);
	assert_int_equal(vs_vscsi_lun_encode(lun, 256, 0), -EINVAL);
	assert_int_equal(vs_vscsi_lun_encode(lun, 0, 16384), -EINVAL);
}

/* An event's LUN field: peripheral addressing below 256 (Linux reads bytes 2-3 as the LUN
 * number: 1, not 0x4001), flat above; both decode back. */
static void test_event_lun_form(void **state)
{
	(void)state;
	uint8_t lun[8];
	unsigned t, l;
	assert_int_equal(vs_vscsi_event_lun_encode(lun, 0, 1), 0);
	assert_memory_equal(lun, ((uint8_t[]){1, 0, 0, 1, 0, 0, 0, 0}), 8);
	assert_int_equal(vs_vscsi_lun_decode(lun, &t, &l), 0);
	assert_int_equal(l, 1);
	assert_int_equal(vs_vscsi_event_lun_encode(lun, 2, 300), 0);
	assert_memory_equal(lun, ((uint8_t[]){1, 2, 0x41, 44, 0, 0, 0, 0}), 8);
	assert_int_equal(vs_vscsi_lun_decode(lun, &t, &l), 0);
	assert_int_equal(l, 300);
	assert_int_equal(vs_vscsi_event_lun_encode(lun, 0, 16384), -EINVAL);
}

/* Other forms are refused: byte 0 != 1, other address methods, hierarchical LUNs.
 * Peripheral addressing with bus 0 (byte 2 == 0) is accepted. */
static void test_lun_decode_rejects(void **state)
{
	(void)state;
	unsigned t, l;
	assert_int_equal(vs_vscsi_lun_decode((uint8_t[]){0, 1, 0x40, 0, 0, 0, 0, 0}, &t, &l),
			 -EINVAL);
	assert_int_equal(vs_vscsi_lun_decode((uint8_t[]){1, 1, 0x80, 0, 0, 0, 0, 0}, &t, &l),
			 -EINVAL);
	assert_int_equal(vs_vscsi_lun_decode((uint8_t[]){1, 1, 0xc1, 0, 0, 0, 0, 0}, &t, &l),
			 -EINVAL);
	assert_int_equal(vs_vscsi_lun_decode((uint8_t[]){1, 1, 0x01, 0, 0, 0, 0, 0}, &t, &l),
			 -EINVAL);
	assert_int_equal(vs_vscsi_lun_decode((uint8_t[]){1, 1, 0x40, 0, 0, 0, 1, 0}, &t, &l),
			 -EINVAL);
	assert_int_equal(vs_vscsi_lun_decode((uint8_t[]){1, 2, 0x00, 7, 0, 0, 0, 0}, &t, &l), 0);
	assert_int_equal(t, 2);
	assert_int_equal(l, 7);
}

/* Unaligned little-endian loads and stores use the wire byte order. */
static void test_le_helpers(void **state)
{
	(void)state;
	uint8_t b[11] = {0};
	vs_st_le32(b + 1, 0x11223344);
	assert_memory_equal(b + 1, ((uint8_t[]){0x44, 0x33, 0x22, 0x11}), 4);
	vs_st_le64(b + 3, 0x0102030405060708ull);
	assert_int_equal(b[3], 0x08);
	assert_int_equal(vs_ld_le64(b + 3), 0x0102030405060708ull);
	vs_st_le16(b, 0xabcd);
	assert_int_equal(vs_ld_le16(b), 0xabcd);
	assert_int_equal(b[0], 0xcd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wire_offsets),   cmocka_unit_test(test_lun_decode_linux_form),
	    cmocka_unit_test(test_lun_round_trip), cmocka_unit_test(test_lun_decode_rejects),
	    cmocka_unit_test(test_event_lun_form), cmocka_unit_test(test_le_helpers),
	};
	return cmocka_run_group_tests_name("virtio.vscsi", tests, NULL, NULL);
}
