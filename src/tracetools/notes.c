/* SPDX-License-Identifier: MIT */
/*
 * vioscope's decode-time names (tracetools.h, struct vs_note): a site writes
 * "op %#x{scsi_op}" or "sense %s{sense}" and records the raw value; the decoder names
 * it here, from the one vocabulary of each protocol in src/proto.  Only the tools
 * link this: the runtime never names anything.
 */
#include <stdio.h>
#include <string.h>

#include "proto/scsi_proto.h"
#include "proto/vhost_proto.h"
#include "proto/virtio_scsi_proto.h"
#include "tracetools/tracetools.h"

/* proto's names for values it does not know ("unsupported", "UNKNOWN", "?") mean
 * "no name": the decoder then shows the number. */
static const char *known(const char *name)
{
	return strcmp(name, "unsupported") && strcmp(name, "UNKNOWN") && strcmp(name, "?") ? name
											   : NULL;
}

static const char *scsi_op(uint64_t v)
{
	return v <= 0xff ? known(vs_scsi_op_name((uint8_t)v)) : NULL;
}

static const char *scsi_status(uint64_t v)
{
	return v <= 0xff ? known(vs_scsi_status_name((uint8_t)v)) : NULL;
}

static const char *sense_key(uint64_t v)
{
	return v <= 0xf ? vs_scsi_sense_key_name((uint8_t)v) : NULL;
}

static const char *asc(uint64_t v)
{
	return v <= 0xffff ? vs_scsi_asc_name((uint8_t)(v >> 8), (uint8_t)v) : NULL;
}

static const char *tmf(uint64_t v)
{
	return v <= UINT32_MAX ? known(vs_virtio_scsi_tmf_name((uint32_t)v)) : NULL;
}

static const char *vscsi_response(uint64_t v)
{
	return v <= 0xff ? known(vs_virtio_scsi_response_name((uint8_t)v)) : NULL;
}

static const char *vhost_msg(uint64_t v)
{
	return v <= UINT32_MAX ? known(vs_vhost_request_name((uint32_t)v)) : NULL;
}

static size_t clipped(int n, size_t outlen)
{
	return n < 0 ? 0 : (size_t)n < outlen ? (size_t)n : outlen - 1;
}

/* Fixed or descriptor sense: "ILLEGAL REQUEST: LOGICAL BLOCK ADDRESS OUT OF RANGE". */
static size_t sense_text(char *out, size_t outlen, const uint8_t *p, size_t n)
{
	uint8_t key, a, q;
	if (!vs_scsi_sense_parse(p, n, &key, &a, &q))
		return 0;
	const char *name = vs_scsi_asc_name(a, q);
	if (name)
		return clipped(snprintf(out, outlen, "%s: %s", vs_scsi_sense_key_name(key), name),
			       outlen);
	return clipped(
	    snprintf(out, outlen, "%s: ASC %#04x ASCQ %#04x", vs_scsi_sense_key_name(key), a, q),
	    outlen);
}

/* A CDB: its command's name, then its bytes ("READ(10) 280000000400000008 00"). */
static size_t cdb_text(char *out, size_t outlen, const uint8_t *p, size_t n)
{
	char hex[2 * VS_SCSI_CDB_MAX + 8];
	const char *name = n ? known(vs_scsi_op_name(p[0])) : NULL;
	if (!name)
		return 0;
	vs_format_hex(hex, sizeof hex, p, n < VS_SCSI_CDB_MAX ? n : VS_SCSI_CDB_MAX,
		      n > VS_SCSI_CDB_MAX);
	return clipped(snprintf(out, outlen, "%s %s", name, hex), outlen);
}

const struct vs_note vs_proto_notes[] = {
    {"scsi_op", scsi_op, NULL},
    {"scsi_status", scsi_status, NULL},
    {"sense_key", sense_key, NULL},
    {"asc", asc, NULL},
    {"sense", NULL, sense_text},
    {"cdb", NULL, cdb_text},
    {"tmf", tmf, NULL},
    {"vscsi_response", vscsi_response, NULL},
    {"vhost_msg", vhost_msg, NULL},
};
const size_t vs_proto_nnotes = sizeof vs_proto_notes / sizeof vs_proto_notes[0];
