/* SPDX-License-Identifier: MIT */
/*
 * virtio-scsi wire vocabulary (virtio 1.2, 5.6 "SCSI Host Device"), shared by the target
 * and the initiator: queue numbers, feature bits, request/response/TMF/event structures,
 * response codes, the LUN field codec and names.  Multi-byte fields hold little-endian
 * values: read them with vs_le32(x) etc.  Requests arrive in guest memory, maybe split over
 * descriptors: copy a header out with vs_iov_to_buf() first, then decode the private copy.
 * Sizes are the defaults (cdb_size 32, sense_size 96) that the target advertises and never
 * lets the driver change.
 */
#ifndef VS_VIRTIO_SCSI_PROTO_H
#define VS_VIRTIO_SCSI_PROTO_H

#include "proto/virtio_proto.h"

#define VS_VIRTIO_SCSI_CDB_SIZE	  32
#define VS_VIRTIO_SCSI_SENSE_SIZE 96

/* Feature bits */
#define VS_VIRTIO_SCSI_F_INOUT	 0 /* a request may have both data-out and data-in */
#define VS_VIRTIO_SCSI_F_HOTPLUG 1 /* events for added/removed LUNs */
#define VS_VIRTIO_SCSI_F_CHANGE	 2 /* events for parameter changes */
#define VS_VIRTIO_SCSI_F_T10_PI	 3 /* requests use virtio_scsi_cmd_req_pi */

/* Queues: 0 control, 1 event, 2.. request */
#define VS_VIRTIO_SCSI_VQ_CTRL	0
#define VS_VIRTIO_SCSI_VQ_EVENT 1
#define VS_VIRTIO_SCSI_VQ_REQ0	2

/* Command request (device-readable), followed by data-out */
struct vs_virtio_scsi_cmd_req {
	uint8_t lun[8];	   /* see vs_vscsi_lun_decode() */
	uint64_t tag;	   /* le: command id, for ABORT_TASK */
	uint8_t task_attr; /* VS_VIRTIO_SCSI_S_SIMPLE ... */
	uint8_t prio;
	uint8_t crn;
	uint8_t cdb[VS_VIRTIO_SCSI_CDB_SIZE];
} __attribute__((packed));

/* With VS_VIRTIO_SCSI_F_T10_PI: 8 bytes longer, PI byte counts before the CDB (data-out PI
 * comes first in the data-out, data-in PI first in the data-in). */
struct vs_virtio_scsi_cmd_req_pi {
	uint8_t lun[8];
	uint64_t tag;
	uint8_t task_attr;
	uint8_t prio;
	uint8_t crn;
	uint32_t pi_bytesout; /* le */
	uint32_t pi_bytesin;  /* le */
	uint8_t cdb[VS_VIRTIO_SCSI_CDB_SIZE];
} __attribute__((packed));

/* Command response (device-writable), followed by data-in */
struct vs_virtio_scsi_cmd_resp {
	uint32_t sense_len;	   /* le: bytes of sense[] that are valid */
	uint32_t resid;		   /* le: data bytes not transferred */
	uint16_t status_qualifier; /* le */
	uint8_t status;		   /* SCSI status (GOOD, CHECK CONDITION ...) */
	uint8_t response;	   /* VS_VIRTIO_SCSI_S_* */
	uint8_t sense[VS_VIRTIO_SCSI_SENSE_SIZE];
} __attribute__((packed));

/* Control queue: every request starts with a le32 type */
#define VS_VIRTIO_SCSI_T_TMF	      0
#define VS_VIRTIO_SCSI_T_AN_QUERY     1
#define VS_VIRTIO_SCSI_T_AN_SUBSCRIBE 2

#define VS_VIRTIO_SCSI_T_TMF_ABORT_TASK		0
#define VS_VIRTIO_SCSI_T_TMF_ABORT_TASK_SET	1
#define VS_VIRTIO_SCSI_T_TMF_CLEAR_ACA		2
#define VS_VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET	3
#define VS_VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET	4
#define VS_VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET 5
#define VS_VIRTIO_SCSI_T_TMF_QUERY_TASK		6
#define VS_VIRTIO_SCSI_T_TMF_QUERY_TASK_SET	7

struct vs_virtio_scsi_ctrl_tmf_req {
	uint32_t type;	  /* le: VS_VIRTIO_SCSI_T_TMF */
	uint32_t subtype; /* le: VS_VIRTIO_SCSI_T_TMF_* */
	uint8_t lun[8];
	uint64_t tag; /* le: the command to act on (ABORT_TASK, QUERY_TASK) */
} __attribute__((packed));

struct vs_virtio_scsi_ctrl_tmf_resp {
	uint8_t response; /* VS_VIRTIO_SCSI_S_FUNCTION_* and others */
} __attribute__((packed));

/* Asynchronous notification query / subscription */
#define VS_VIRTIO_SCSI_EVT_ASYNC_OPERATIONAL_CHANGE 2
#define VS_VIRTIO_SCSI_EVT_ASYNC_POWER_MGMT	    4
#define VS_VIRTIO_SCSI_EVT_ASYNC_EXTERNAL_REQUEST   8
#define VS_VIRTIO_SCSI_EVT_ASYNC_MEDIA_CHANGE	    16
#define VS_VIRTIO_SCSI_EVT_ASYNC_MULTI_HOST	    32
#define VS_VIRTIO_SCSI_EVT_ASYNC_DEVICE_BUSY	    64

struct vs_virtio_scsi_ctrl_an_req {
	uint32_t type; /* le: VS_VIRTIO_SCSI_T_AN_QUERY or _SUBSCRIBE */
	uint8_t lun[8];
	uint32_t event_requested; /* le: VS_VIRTIO_SCSI_EVT_ASYNC_* mask */
} __attribute__((packed));

struct vs_virtio_scsi_ctrl_an_resp {
	uint32_t event_actual; /* le */
	uint8_t response;
} __attribute__((packed));

/* Event queue */
#define VS_VIRTIO_SCSI_T_EVENTS_MISSED	 0x80000000u /* or-ed into event */
#define VS_VIRTIO_SCSI_T_NO_EVENT	 0
#define VS_VIRTIO_SCSI_T_TRANSPORT_RESET 1
#define VS_VIRTIO_SCSI_T_ASYNC_NOTIFY	 2
#define VS_VIRTIO_SCSI_T_PARAM_CHANGE	 3

#define VS_VIRTIO_SCSI_EVT_RESET_HARD	 0 /* reasons of TRANSPORT_RESET */
#define VS_VIRTIO_SCSI_EVT_RESET_RESCAN	 1
#define VS_VIRTIO_SCSI_EVT_RESET_REMOVED 2

struct vs_virtio_scsi_event {
	uint32_t event; /* le */
	uint8_t lun[8];
	uint32_t reason; /* le */
} __attribute__((packed));

/* Device configuration space (all le32 but max_channel/max_target le16) */
struct vs_virtio_scsi_config {
	uint32_t num_queues; /* request queues */
	uint32_t seg_max;    /* data segments per command */
	uint32_t max_sectors;
	uint32_t cmd_per_lun;
	uint32_t event_info_size;
	uint32_t sense_size; /* driver-writable */
	uint32_t cdb_size;   /* driver-writable */
	uint16_t max_channel;
	uint16_t max_target;
	uint32_t max_lun;
} __attribute__((packed));

/* Response codes (virtio_scsi_cmd_resp.response, TMF and AN responses) */
#define VS_VIRTIO_SCSI_S_OK		    0
#define VS_VIRTIO_SCSI_S_OVERRUN	    1
#define VS_VIRTIO_SCSI_S_ABORTED	    2
#define VS_VIRTIO_SCSI_S_BAD_TARGET	    3
#define VS_VIRTIO_SCSI_S_RESET		    4
#define VS_VIRTIO_SCSI_S_BUSY		    5
#define VS_VIRTIO_SCSI_S_TRANSPORT_FAILURE  6
#define VS_VIRTIO_SCSI_S_TARGET_FAILURE	    7
#define VS_VIRTIO_SCSI_S_NEXUS_FAILURE	    8
#define VS_VIRTIO_SCSI_S_FAILURE	    9
#define VS_VIRTIO_SCSI_S_FUNCTION_SUCCEEDED 10
#define VS_VIRTIO_SCSI_S_FUNCTION_REJECTED  11
#define VS_VIRTIO_SCSI_S_INCORRECT_LUN	    12
#define VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE  0 /* TMF: same value as OK */

/* Task attributes */
#define VS_VIRTIO_SCSI_S_SIMPLE	 0
#define VS_VIRTIO_SCSI_S_ORDERED 1
#define VS_VIRTIO_SCSI_S_HEAD	 2
#define VS_VIRTIO_SCSI_S_ACA	 3

_Static_assert(sizeof(struct vs_virtio_scsi_cmd_req) == 51, "cmd_req size");
_Static_assert(sizeof(struct vs_virtio_scsi_cmd_req_pi) == 59, "cmd_req_pi size");
_Static_assert(sizeof(struct vs_virtio_scsi_cmd_resp) == 108, "cmd_resp size");
_Static_assert(sizeof(struct vs_virtio_scsi_ctrl_tmf_req) == 24, "tmf_req size");
_Static_assert(sizeof(struct vs_virtio_scsi_ctrl_an_req) == 16, "an_req size");
_Static_assert(sizeof(struct vs_virtio_scsi_ctrl_an_resp) == 5, "an_resp size");
_Static_assert(sizeof(struct vs_virtio_scsi_event) == 16, "event size");
_Static_assert(sizeof(struct vs_virtio_scsi_config) == 36, "config size");

/* LUN field in the form Linux and Windows drivers use: byte 0 = 1, byte 1 = target,
 * bytes 2-3 = flat LUN (0x4000 | lun, or peripheral 0x00nn), bytes 4-7 = 0.  Decode returns
 * 0 or -EINVAL for anything else; encode -EINVAL for target > 255 or lun > 16383. */
int vs_vscsi_lun_decode(const uint8_t lun[8], unsigned *target, unsigned *lun_out);
int vs_vscsi_lun_encode(uint8_t lun[8], unsigned target, unsigned lun_in);
/* The LUN field of an event (VIRTIO_SCSI_T_TRANSPORT_RESET, PARAM_CHANGE): bytes 2-3 in
 * the form REPORT LUNS gives (vs_scsi_lun_sam: peripheral below 256), as QEMU sends it;
 * Linux's virtio_scsi takes them as the LUN number itself, so the flat 0x4001 of requests
 * would name LUN 16385.  -EINVAL as encode. */
int vs_vscsi_event_lun_encode(uint8_t lun[8], unsigned target, unsigned lun_in);

/* Names for traces and tools: "ABORTED", "LOGICAL_UNIT_RESET", "TRANSPORT_RESET". */
const char *vs_virtio_scsi_response_name(uint8_t response);
const char *vs_virtio_scsi_tmf_name(uint32_t subtype);
const char *vs_virtio_scsi_event_name(uint32_t event);

#endif /* VS_VIRTIO_SCSI_PROTO_H */
