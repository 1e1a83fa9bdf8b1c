/* SPDX-License-Identifier: MIT */
/*
 * Stateful fuzzing of a whole target: one input is a guest memory image and a sequence of
 * vhost-user messages, kicks, guest memory writes and shrinks, run against the real
 * device code: vs_vhost_dev (the protocol state machine) with the target's own ops, its
 * queues, workers, SCSI device and RAM/null LUNs, in the target's manual mode (no threads:
 * worker commands and passes run here, in order, so an input always does the same).
 * One-message fuzzing misses what only a sequence reaches: a memory table changed under
 * running rings, a ring restarted at a new base, a TMF for requests still in flight, memory
 * that shrinks between two passes, dirty logging switched on and off under running rings
 * (live migration: SET_LOG_BASE, VHOST_F_LOG_ALL, VHOST_VRING_F_LOG) and a log file that
 * shrinks under them, in-flight regions (INFLIGHT_SHMFD: GET_INFLIGHT_FD, SET_INFLIGHT_FD
 * of a region whose contents the input writes, rings started on it, the region shrunk under
 * them; inflight_check.c checks what a ring started on a region resubmits and pops).
 *
 * Input:
 *   [u16 le n][n bytes]   guest memory from offset 0 (FZ_MEM_SIZE bytes, the rest zeros)
 *   then operations, each one byte op and its operands:
 *     0x00-0x3f  a vhost-user message: [fd byte][12-byte header][payload of header.size];
 *                fd byte: low 4 bits how many fds, bit 6 eventfds, else bit 7 dups of the
 *                guest memfd, else bit 5 dups of the dirty log file (a second memfd,
 *                FZ_LOG_SIZE bytes at each input's start), else bit 4 dups of the in-flight
 *                file in use (a third memfd, FZ_INFL_SIZE bytes of zeroes at each input's
 *                start, or the region the last GET_INFLIGHT_FD made), else /dev/null (bits
 *                6-7 as in fuzz/vhost/fuzz_vhost_msg.c)
 *     0x40-0x77  kick queue op & 7 and run passes until the target is quiet (also 0x7d-0x7f)
 *     0x78-0x7c  the in-flight file in use: raw bytes, a ring's header (version, desc_num,
 *                last_batch_head, used_idx), one descriptor's entry (mark, next, counter),
 *                its size (shrinking it under the target), or the other file (session.h)
 *     0x80-0xbf  write guest memory: [u16 le offset][u8 len][len bytes]
 *     0xc0-0xdf  shrink the guest memory file to ((op & 0x1f) << 12) bytes (the target's
 *                guard must turn its next access there into a dropped session)
 *     0xe0-0xef  run passes (completions)
 *     0xf0-0xff  set the dirty log file's size to fz_log_sizes[op & 0xf] (session.c: 0 to
 *                1 MiB; smaller than a log in force, the target's guard must turn its next
 *                mark there into a dropped session)
 * What ends a session, what must hold when the input ends, and what the target must have
 * marked in a dirty log: session.c (the harness shared with fuzz_target_rpc.c, which adds
 * the management socket's methods to these).
 */
#include <stddef.h>
#include <stdint.h>

#include "session.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fz_session_init();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vs_target_lun luns[2] = {{.id = 0, .spec = "ram=1M"}, {.id = 1, .spec = "null=1M"}};
	struct vs_target_config cfg = {.num_queues = 2, .workers = 2, .nluns = 2, .luns = luns};
	struct fz_session s;
	size_t used;

	if (size < 2)
		return 0;
	used = fz_session_begin(&s, &cfg, data, size);
	data += used;
	size -= used;
	while (size) {
		used = fz_session_op(&s, data, size);
		data += used;
		size -= used;
	}
	fz_session_end(&s);
	return 0;
}
