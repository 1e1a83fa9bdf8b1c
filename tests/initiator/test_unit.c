/* SPDX-License-Identifier: MIT */
/* Pure decisions of the initiator: response mapping and event handling. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "initiator/initiator_int.h"

/* Every virtio-scsi response code maps to its own errno; SCSI status refines OK. */
static void test_result_errno(void **state)
{
	static const struct {
		uint8_t response, status;
		int err;
	} map[] = {
	    {VS_VIRTIO_SCSI_S_OK, 0x00, 0},
	    {VS_VIRTIO_SCSI_S_OK, 0x04, 0},	  /* CONDITION MET */
	    {VS_VIRTIO_SCSI_S_OK, 0x02, -EIO},	  /* CHECK CONDITION */
	    {VS_VIRTIO_SCSI_S_OK, 0x08, -EAGAIN}, /* BUSY */
	    {VS_VIRTIO_SCSI_S_OK, 0x28, -EAGAIN}, /* TASK SET FULL */
	    {VS_VIRTIO_SCSI_S_OK, 0x18, -EIO},	  /* RESERVATION CONFLICT */
	    {VS_VIRTIO_SCSI_S_OVERRUN, 0, -EOVERFLOW},
	    {VS_VIRTIO_SCSI_S_ABORTED, 0, -ECANCELED},
	    {VS_VIRTIO_SCSI_S_BAD_TARGET, 0, -ENODEV},
	    {VS_VIRTIO_SCSI_S_RESET, 0, -ECONNRESET},
	    {VS_VIRTIO_SCSI_S_BUSY, 0, -EBUSY},
	    {VS_VIRTIO_SCSI_S_TRANSPORT_FAILURE, 0, -ENOLINK},
	    {VS_VIRTIO_SCSI_S_TARGET_FAILURE, 0, -EREMOTEIO},
	    {VS_VIRTIO_SCSI_S_NEXUS_FAILURE, 0, -EBADE},
	    {VS_VIRTIO_SCSI_S_FAILURE, 0, -EIO},
	    {VS_VIRTIO_SCSI_S_INCORRECT_LUN, 0, -ENXIO},
	    {VS_VIRTIO_SCSI_S_FUNCTION_SUCCEEDED, 0, -EPROTO},
	    {VS_VIRTIO_SCSI_S_FUNCTION_REJECTED, 0, -EPROTO},
	    {200, 0, -EPROTO},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		assert_int_equal(vs_ini_result_errno(map[i].response, map[i].status), map[i].err);
}

/* A response header: sense is copied up to its length (at most 96, at most what the used
 * length covers), the residual is clamped to the data, a short header is -EPROTO. */
static void test_map_response(void **state)
{
	struct vs_virtio_scsi_cmd_resp r;
	struct vs_ini_io io;

	(void)state;
	memset(&r, 0, sizeof(r));
	r.status = 2;
	r.sense_len = vs_le32(200);
	r.resid = vs_le32(5000);
	memset(r.sense, 0xab, sizeof(r.sense));
	memset(&io, 0, sizeof(io));
	assert_int_equal(ini_map_response(&io, &r, sizeof(r), 4096), -EIO);
	assert_int_equal(io.scsi_status, 2);
	assert_int_equal(io.sense_len, 96);
	assert_int_equal(io.sense[95], 0xab);
	assert_int_equal(io.resid, 4096);
	memset(&io, 0, sizeof(io));
	assert_int_equal(
	    ini_map_response(&io, &r, offsetof(struct vs_virtio_scsi_cmd_resp, sense) + 18, 4096),
	    -EIO);
	assert_int_equal(io.sense_len, 18);
	assert_int_equal(ini_map_response(&io, &r, 11, 4096), -EPROTO);
}

static struct vs_virtio_scsi_event ev(uint32_t event, uint32_t reason)
{
	struct vs_virtio_scsi_event e = {.event = vs_le32(event), .reason = vs_le32(reason)};
	vs_vscsi_lun_encode(e.lun, 0, 2);
	return e;
}

/* Transport reset (rescan, removed) and parameter change trigger a rescan, events missed a
 * full one; no event and asynchronous notifications do nothing. */
static void test_event_actions(void **state)
{
	struct vs_virtio_scsi_event e;

	(void)state;
	e = ev(VS_VIRTIO_SCSI_T_TRANSPORT_RESET, VS_VIRTIO_SCSI_EVT_RESET_RESCAN);
	assert_int_equal(ini_event_action(&e), INI_EV_RESCAN);
	e = ev(VS_VIRTIO_SCSI_T_TRANSPORT_RESET, VS_VIRTIO_SCSI_EVT_RESET_REMOVED);
	assert_int_equal(ini_event_action(&e), INI_EV_RESCAN);
	e = ev(VS_VIRTIO_SCSI_T_PARAM_CHANGE, 0x2a | (0x09 << 8));
	assert_int_equal(ini_event_action(&e), INI_EV_RESCAN);
	e = ev(VS_VIRTIO_SCSI_T_EVENTS_MISSED, 0);
	assert_int_equal(ini_event_action(&e), INI_EV_FULL_RESCAN);
	e = ev(VS_VIRTIO_SCSI_T_EVENTS_MISSED | VS_VIRTIO_SCSI_T_TRANSPORT_RESET, 1);
	assert_int_equal(ini_event_action(&e), INI_EV_FULL_RESCAN);
	e = ev(VS_VIRTIO_SCSI_T_NO_EVENT, 0);
	assert_int_equal(ini_event_action(&e), INI_EV_NONE);
	e = ev(VS_VIRTIO_SCSI_T_ASYNC_NOTIFY, 16);
	assert_int_equal(ini_event_action(&e), INI_EV_NONE);
}

/* Opening with no target behind the socket fails cleanly with the connect error. */
static void test_open_no_target(void **state)
{
	struct vs_ini_opts o = {.socket = "/nonexistent/vioscope.sock"};
	struct vs_ini *ini = (void *)1;

	(void)state;
	assert_int_equal(vs_ini_open(&ini, &o), -ENOENT);
	assert_null(ini);
	o.socket = NULL;
	assert_int_equal(vs_ini_open(&ini, &o), -EINVAL);
	o.socket = "/x";
	o.queue_size = 100;
	assert_int_equal(vs_ini_open(&ini, &o), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_result_errno),
	    cmocka_unit_test(test_map_response),
	    cmocka_unit_test(test_event_actions),
	    cmocka_unit_test(test_open_no_target),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
