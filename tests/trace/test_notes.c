/* SPDX-License-Identifier: MIT */
/*
 * Decoding that speaks SCSI, virtio-scsi and vhost-user: a site's "{note}" after a
 * conversion names the recorded value at decode time (tracetools.h, struct vs_note).
 * First our own sites in the SCSI layer (all flavour, verbose): a READ beyond the end
 * of a LUN is dumped from this process and decoded with vioscope's notes; then each
 * note on forged records; then the print backend's format without its notes.
 *
 * Runs under trace_isolate (a fresh VIOSCOPE_TRACE_DIR before the runtime starts).
 */
#include "../scsi/harness.h"

#include <vioscope/trace.h>

#include "proto/scsi_proto.h"
#include "proto/vhost_proto.h"
#include "proto/virtio_scsi_proto.h"
#include "tracetools/tracetools.h"

/* ---- our own sites --------------------------------------------------------------------- */
struct decoded {
	char text[64][1024];
	unsigned n;
};

static int collect(const struct vs_cap_event *ev, void *opaque)
{
	struct decoded *d = opaque;
	if (!ev->site || d->n == 64 || strcmp(ev->site->provider, "scsi") != 0)
		return 0;
	assert_int_equal(vs_format_message_noted(d->text[d->n], sizeof d->text[0], ev->site,
						 ev->args, ev->args_len, vs_proto_notes,
						 vs_proto_nnotes),
			 0);
	d->n++;
	return 0;
}

static bool seen(const struct decoded *d, const char *needle)
{
	for (unsigned i = 0; i < d->n; i++)
		if (strstr(d->text[i], needle))
			return true;
	for (unsigned i = 0; i < d->n; i++)
		fprintf(stderr, "  decoded: %s\n", d->text[i]);
	fprintf(stderr, "  (no message has \"%s\")\n", needle);
	return false;
}

/* Scenario: READ(10) of LBA 4096 on a 1 MiB LUN (2048 blocks) is refused with ILLEGAL
 * REQUEST / LBA OUT OF RANGE; the trace of the SCSI layer, decoded, names the command
 * from its recorded CDB and the sense from its recorded sense bytes. */
static void test_scsi_sites_decode_with_names(void **state)
{
	(void)state;
	struct harness h;
	uint8_t cdb[10] = {VS_SCSI_OP_READ_10, 0, 0, 0, 0x10, 0, 0, 0, 1, 0};
	uint8_t buf[512];
	char cap[600], pid[32], why[512];
	struct vs_dump_stats st;
	struct vs_capture *c;
	static struct decoded d;

	assert_int_equal(vs_trace_set_spec("verbose:all"), 0);
	h_open(&h, "ram=1M", 512, false);
	struct vs_scsi_cmd *cmd = h_run(&h, 0, cdb, sizeof cdb, NULL, 0, buf, sizeof buf);
	assert_sense(cmd, VS_SENSE_ILLEGAL_REQUEST, 0x21, 0x00);
	h_close(&h);

	snprintf(cap, sizeof cap, "%s/self-%d.vst", vs_shm_dir(), (int)getpid());
	snprintf(pid, sizeof pid, "%d", (int)getpid());
	if (vs_trace_dump(pid, cap, &st, why, sizeof why) < 0)
		fail_msg("dump: %s", why);
	if (vs_capture_open(&c, cap, why, sizeof why) < 0)
		fail_msg("open: %s", why);
	assert_int_equal(vs_capture_walk(c, collect, &d, why, sizeof why), 0);
	vs_capture_close(c);
	unlink(cap);

	/* dev.c's per-command site: the CDB, named */
	assert_true(seen(&d, "tag 0x1234 lun 0 cdb READ(10) 28000000100000000100 in 512 out 0"));
	/* sense.c's refusal: the opcode and the sense, named */
	assert_true(seen(&d, "tag 0x1234 op READ(10): lba 4096 + 1 blocks"));
	assert_true(seen(&d, ": ILLEGAL REQUEST: LOGICAL BLOCK ADDRESS OUT OF RANGE"));
}

/* ---- each note, on forged records ------------------------------------------------------- */
static void put(uint8_t *args, size_t *len, const void *v, size_t n)
{
	memcpy(args + *len, v, n);
	*len += n;
}

/* Decode FMT with one U32 argument V through vioscope's notes. */
static void note_u32(char *out, size_t outlen, const char *fmt, uint32_t v)
{
	struct vs_meta_site site = {.fmt = fmt, .nargs = 1, .types = {VS_ARG_U32}};
	uint8_t args[8];
	size_t len = 0;
	put(args, &len, &v, 4);
	assert_int_equal(
	    vs_format_message_noted(out, outlen, &site, args, len, vs_proto_notes, vs_proto_nnotes),
	    0);
}

/* Decode FMT with one byte-array argument through vioscope's notes. */
static void note_bytes(char *out, size_t outlen, const char *fmt, const uint8_t *p, uint16_t n)
{
	struct vs_meta_site site = {.fmt = fmt, .nargs = 1, .types = {VS_ARG_BYTES}};
	uint8_t args[2 + 256];
	size_t len = 0;
	put(args, &len, &n, 2);
	put(args, &len, p, n);
	assert_int_equal(
	    vs_format_message_noted(out, outlen, &site, args, len, vs_proto_notes, vs_proto_nnotes),
	    0);
}

/* Scenario: integer notes name what their protocol knows and leave the number where
 * it knows nothing. */
static void test_integer_notes(void **state)
{
	(void)state;
	char t[256];
	note_u32(t, sizeof t, "op %#x{scsi_op}", 0x2a);
	assert_string_equal(t, "op WRITE(10)");
	note_u32(t, sizeof t, "op %#x{scsi_op}", 0xc1); /* vendor specific */
	assert_string_equal(t, "op 0xc1");
	note_u32(t, sizeof t, "status %#x{scsi_status}", VS_SCSI_CHECK_CONDITION);
	assert_string_equal(t, "status CHECK CONDITION");
	note_u32(t, sizeof t, "key %u{sense_key}", VS_SENSE_UNIT_ATTENTION);
	assert_string_equal(t, "key UNIT ATTENTION");
	note_u32(t, sizeof t, "ua %#x{asc} then", VS_ASC_POWER_ON_RESET);
	assert_string_equal(t, "ua POWER ON, RESET, OR BUS DEVICE RESET OCCURRED then");
	note_u32(t, sizeof t, "%u{tmf}: done", VS_VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET);
	assert_string_equal(t, "LOGICAL_UNIT_RESET: done");
	note_u32(t, sizeof t, "response %u{vscsi_response}", VS_VIRTIO_SCSI_S_BAD_TARGET);
	assert_string_equal(t, "response BAD_TARGET");
	note_u32(t, sizeof t, "response %u{vscsi_response}", 200);
	assert_string_equal(t, "response 200");
	note_u32(t, sizeof t, "msg %u{vhost_msg} size 8", VS_VHOST_SET_VRING_KICK);
	assert_string_equal(t, "msg SET_VRING_KICK size 8");
	note_u32(t, sizeof t, "msg %u{vhost_msg}", 9999);
	assert_string_equal(t, "msg 9999");
}

/* Scenario: sense bytes (fixed and descriptor format) read as key and ASC/ASCQ; a CDB
 * as its command and bytes; bytes that are neither stay hex. */
static void test_byte_array_notes(void **state)
{
	(void)state;
	char t[512];
	uint8_t fixed[18] = {0x70, 0,	VS_SENSE_ILLEGAL_REQUEST, 0, 0, 0, 0, 10, 0, 0, 0, 0,
			     0x21, 0x00};
	uint8_t desc[8] = {0x72, VS_SENSE_MEDIUM_ERROR, 0x11, 0x00, 0, 0, 0, 0};
	uint8_t odd[14] = {0x70, 0,   VS_SENSE_ABORTED_COMMAND, 0, 0, 0, 0, 6, 0, 0, 0, 0,
			   0x7e, 0x7f};
	uint8_t cdb[6] = {VS_SCSI_OP_INQUIRY, 1, 0x80, 0, 0xff, 0};
	uint8_t junk[3] = {0x01, 0x02, 0x03};

	note_bytes(t, sizeof t, "sense %s{sense}", fixed, sizeof fixed);
	assert_string_equal(t, "sense ILLEGAL REQUEST: LOGICAL BLOCK ADDRESS OUT OF RANGE");
	note_bytes(t, sizeof t, "sense %s{sense}", desc, sizeof desc);
	assert_string_equal(t, "sense MEDIUM ERROR: UNRECOVERED READ ERROR");
	note_bytes(t, sizeof t, "sense %s{sense}", odd, sizeof odd);
	assert_string_equal(t, "sense ABORTED COMMAND: ASC 0x7e ASCQ 0x7f");
	note_bytes(t, sizeof t, "sense %s{sense}", junk, sizeof junk);
	assert_string_equal(t, "sense 010203");
	note_bytes(t, sizeof t, "cdb %s{cdb}", cdb, sizeof cdb);
	assert_string_equal(t, "cdb INQUIRY 12018000ff00");
}

/* Scenario: a note no decoder knows, or a note where a plain decoder (no notes)
 * reads the capture: the conversion is shown as if the note were not there; text
 * in braces that does not follow a conversion is text. */
static void test_unknown_notes_and_plain_decoders(void **state)
{
	(void)state;
	char t[256];
	note_u32(t, sizeof t, "x %u{no_such_note} {scsi_op} y", 7);
	assert_string_equal(t, "x 7 {scsi_op} y");

	struct vs_meta_site site = {.fmt = "op %#x{scsi_op}!", .nargs = 1, .types = {VS_ARG_U32}};
	uint32_t v = 0x28;
	assert_int_equal(vs_format_message(t, sizeof t, &site, (const uint8_t *)&v, 4), 0);
	assert_string_equal(t, "op 0x28!");
}

/* Scenario: the print backend's format loses its notes (printf would print them),
 * and only them. */
static void test_print_format_drops_notes(void **state)
{
	(void)state;
	char t[256];
	vs_format_drop_notes(t, sizeof t, "op %#x{scsi_op} %%{x} %-8s{sense} {asc} %llu{cdb}");
	assert_string_equal(t, "op %#x %%{x} %-8s {asc} %llu");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_scsi_sites_decode_with_names),
	    cmocka_unit_test(test_integer_notes),
	    cmocka_unit_test(test_byte_array_notes),
	    cmocka_unit_test(test_unknown_notes_and_plain_decoders),
	    cmocka_unit_test(test_print_format_drops_notes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
