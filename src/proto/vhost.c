/* SPDX-License-Identifier: MIT */
/* vhost-user request names, for traces, errors and tools. */
#include <stddef.h>

#include "proto/vhost_proto.h"

#define NAME(id) [VS_VHOST_##id] = #id

const char *vs_vhost_request_name(uint32_t request)
{
	static const char *const names[] = {
	    NAME(GET_FEATURES),
	    NAME(SET_FEATURES),
	    NAME(SET_OWNER),
	    NAME(RESET_OWNER),
	    NAME(SET_MEM_TABLE),
	    NAME(SET_LOG_BASE),
	    NAME(SET_LOG_FD),
	    NAME(SET_VRING_NUM),
	    NAME(SET_VRING_ADDR),
	    NAME(SET_VRING_BASE),
	    NAME(GET_VRING_BASE),
	    NAME(SET_VRING_KICK),
	    NAME(SET_VRING_CALL),
	    NAME(SET_VRING_ERR),
	    NAME(GET_PROTOCOL_FEATURES),
	    NAME(SET_PROTOCOL_FEATURES),
	    NAME(GET_QUEUE_NUM),
	    NAME(SET_VRING_ENABLE),
	    NAME(SEND_RARP),
	    NAME(NET_SET_MTU),
	    NAME(SET_SLAVE_REQ_FD),
	    NAME(IOTLB_MSG),
	    NAME(SET_VRING_ENDIAN),
	    NAME(GET_CONFIG),
	    NAME(SET_CONFIG),
	    NAME(CREATE_CRYPTO_SESSION),
	    NAME(CLOSE_CRYPTO_SESSION),
	    NAME(POSTCOPY_ADVISE),
	    NAME(POSTCOPY_LISTEN),
	    NAME(POSTCOPY_END),
	    NAME(GET_INFLIGHT_FD),
	    NAME(SET_INFLIGHT_FD),
	    NAME(GPU_SET_SOCKET),
	    NAME(RESET_DEVICE),
	    NAME(VRING_KICK),
	    NAME(GET_MAX_MEM_SLOTS),
	    NAME(ADD_MEM_REG),
	    NAME(REM_MEM_REG),
	    NAME(SET_STATUS),
	    NAME(GET_STATUS),
	};

	if (request >= sizeof(names) / sizeof(names[0]) || !names[request])
		return "UNKNOWN";
	return names[request];
}
