/* SPDX-License-Identifier: MIT */
/* The target with --poll: workers spin over rings and I/O instead of sleeping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend.h"

static int setup_poll(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));

	if (!x || tgt_start_poll(&x->g, 2, true) || fe_init(&x->fe) ||
	    fe_connect(&x->fe, x->g.sock))
		return -1;
	*state = x;
	return 0;
}

/* Writes and reads on both request queues and both LUNs round-trip, across a reconnect
 * (the workers go from spinning to sleeping and back). */
static void test_poll_rw_reconnect(void **state)
{
	struct fx *x = *state;
	static uint8_t out[2048], in[2048];
	uint8_t cdb[10];

	for (unsigned i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i ^ 0x5a);
	for (unsigned round = 0; round < 2; round++) {
		for (unsigned q = 0; q < 2; q++) {
			for (unsigned lun = 0; lun < 2; lun++) {
				struct fe_cmd w = {.lun = lun,
						   .cdb = cdb,
						   .cdb_len = 10,
						   .out = out,
						   .out_len = sizeof(out)};
				struct fe_cmd r = {.lun = lun,
						   .cdb = cdb,
						   .cdb_len = 10,
						   .in = in,
						   .in_len = sizeof(in)};

				cdb_rw10(cdb, 0x2a, 64 * q + 8 * lun, 4);
				assert_int_equal(fe_scsi(&x->fe, VS_VIRTIO_SCSI_VQ_REQ0 + q, &w), 0);
				assert_int_equal(w.resp.status, 0);
				cdb_rw10(cdb, 0x28, 64 * q + 8 * lun, 4);
				memset(in, 0, sizeof(in));
				assert_int_equal(fe_scsi(&x->fe, VS_VIRTIO_SCSI_VQ_REQ0 + q, &r), 0);
				assert_int_equal(r.resp.status, 0);
				assert_memory_equal(in, out, sizeof(out));
			}
		}
		fe_disconnect(&x->fe);
		assert_int_equal(fe_connect(&x->fe, x->g.sock), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_poll_rw_reconnect, setup_poll, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
