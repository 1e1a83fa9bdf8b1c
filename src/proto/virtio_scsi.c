/* SPDX-License-Identifier: MIT */
/* virtio-scsi LUN field (the single-level form Linux and Windows virtio-scsi drivers send)
 * and names. */
#include <errno.h>

#include "proto/scsi_proto.h"
#include "proto/virtio_scsi_proto.h"

int vs_vscsi_lun_decode(const uint8_t lun[8], unsigned *target, unsigned *lun_out)
{
	/* Byte 0 is 1 (the spec's fixed first byte); bytes 2-3 are a SAM single-level LUN:
	 * flat space (0x40 in the top two bits) or peripheral (0x00, LUN < 256). */
	if (lun[0] != 1 || ((lun[2] & 0xc0) != 0x40 && lun[2] != 0))
		return -EINVAL;
	for (int i = 4; i < 8; i++)
		if (lun[i])
			return -EINVAL; /* hierarchical LUNs are not supported */
	*target = lun[1];
	*lun_out = ((unsigned)(lun[2] & 0x3f) << 8) | lun[3];
	return 0;
}

int vs_vscsi_lun_encode(uint8_t lun[8], unsigned target, unsigned lun_in)
{
	if (target > 255 || lun_in > 0x3fff)
		return -EINVAL;
	memset(lun, 0, 8);
	lun[0] = 1;
	lun[1] = (uint8_t)target;
	lun[2] = (uint8_t)(0x40 | (lun_in >> 8));
	lun[3] = (uint8_t)lun_in;
	return 0;
}

int vs_vscsi_event_lun_encode(uint8_t lun[8], unsigned target, unsigned lun_in)
{
	uint8_t sam[8];

	if (target > 255 || lun_in > 0x3fff)
		return -EINVAL;
	vs_scsi_lun_sam(sam, lun_in);
	memset(lun, 0, 8);
	lun[0] = 1;
	lun[1] = (uint8_t)target;
	lun[2] = sam[0];
	lun[3] = sam[1];
	return 0;
}

const char *vs_virtio_scsi_response_name(uint8_t response)
{
	static const char *const names[] = {
	    "OK",
	    "OVERRUN",
	    "ABORTED",
	    "BAD_TARGET",
	    "RESET",
	    "BUSY",
	    "TRANSPORT_FAILURE",
	    "TARGET_FAILURE",
	    "NEXUS_FAILURE",
	    "FAILURE",
	    "FUNCTION_SUCCEEDED",
	    "FUNCTION_REJECTED",
	    "INCORRECT_LUN",
	};

	return response < sizeof(names) / sizeof(names[0]) ? names[response] : "UNKNOWN";
}

const char *vs_virtio_scsi_tmf_name(uint32_t subtype)
{
	static const char *const names[] = {
	    "ABORT_TASK",      "ABORT_TASK_SET",     "CLEAR_ACA",  "CLEAR_TASK_SET",
	    "I_T_NEXUS_RESET", "LOGICAL_UNIT_RESET", "QUERY_TASK", "QUERY_TASK_SET",
	};

	return subtype < sizeof(names) / sizeof(names[0]) ? names[subtype] : "UNKNOWN";
}

const char *vs_virtio_scsi_event_name(uint32_t event)
{
	switch (event & ~VS_VIRTIO_SCSI_T_EVENTS_MISSED) {
	case VS_VIRTIO_SCSI_T_NO_EVENT:
		return "NO_EVENT";
	case VS_VIRTIO_SCSI_T_TRANSPORT_RESET:
		return "TRANSPORT_RESET";
	case VS_VIRTIO_SCSI_T_ASYNC_NOTIFY:
		return "ASYNC_NOTIFY";
	case VS_VIRTIO_SCSI_T_PARAM_CHANGE:
		return "PARAM_CHANGE";
	default:
		return "UNKNOWN";
	}
}
