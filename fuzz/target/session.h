/* SPDX-License-Identifier: MIT */
/*
 * The stateful fuzzers' common harness (fuzz_target_session.c, fuzz_target_rpc.c): a whole
 * target in manual mode (no threads), its vhost-user device, a guest memory file, and the
 * guest-side operations of one input.  Each fuzzer decodes its own input around these.
 */
#ifndef FUZZ_TARGET_SESSION_H
#define FUZZ_TARGET_SESSION_H

#include <stddef.h>
#include <stdint.h>

#include "target/target_int.h"

#define FZ_MEM_SIZE (256u << 10) /* guest memory: one region at guest address 0 */
#define FZ_NQ	    (VS_VIRTIO_SCSI_VQ_REQ0 + 2)
#define FZ_LOG_SIZE  4096u  /* the dirty log file's size at the start of each input */
#define FZ_INFL_SIZE 16384u /* the in-flight file's size at the start of each input */

/* What the harness knows of the dirty log in force, and the check of what logging promises
 * (session.c, "Dirty logging"): while a log of the fuzzer's log file is on, every guest page
 * the target changes is marked in it. */
struct fz_log {
	bool mine;	    /* the log in force is the log file's [off, off + size) */
	uint64_t off, size; /* as SET_LOG_BASE gave them */
	bool aliased;	    /* the log file was handed over in another message (guest memory?) */
	bool mem_shrunk;    /* the guest memory file was shrunk: regions may fault when read */
	/* An open check: guest memory as it was, the log cleared, since the window opened. */
	bool open;
	struct vs_mem_region region; /* the one region of guest memory */
	uint64_t outside;	     /* the log's count of writes it could not mark, then */
	const uint8_t *bits;	     /* the device's mapping of the log, then */
	struct fz_log_ring {
		const void *used; /* a running queue's used ring (NULL: not running) */
		unsigned size;
		uint64_t log_gpa; /* where its writes are marked (VS_LOG_NONE: nowhere) */
	} rings[TQ_MAX];
};

/* The in-flight regions the input hands over (SET_INFLIGHT_FD) or gets (GET_INFLIGHT_FD):
 * the frontend's own in-flight file (a memfd, not sealed: it can shrink under the target),
 * or the region the device's last GET_INFLIGHT_FD made. */
struct fz_infl {
	int get_fd;   /* our dup of the last GET_INFLIGHT_FD reply's fd, or -1 */
	bool use_get; /* ops 0x78-0x7b and fd kind 0x10 act on it, not the own file */
};

struct fz_session {
	struct vs_target *t;
	struct vs_vhost_dev *d;
	int first_free_fd; /* the lowest free fd before the input: free again after it */
	struct fz_log log;
	struct fz_infl infl;
};

/* The device of the input being run (inflight_check.c reads its fault record). */
extern struct vs_vhost_dev *fz_current_dev;

/* The dirty log file's sizes of op 0xf0-0xff; the in-flight file's of op 0x7b. */
extern const uint64_t fz_log_sizes[16];
extern const uint64_t fz_infl_sizes[8];

/* Once per process (LLVMFuzzerInitialize): the guest memory file, the dirty log file and
 * the in-flight file. */
void fz_session_init(void);

/* The input's leading guest memory image ([u16 le n][n bytes], the rest zeros); returns the
 * bytes it took.  Then the target is made from cfg (traps if it cannot be) and connected.
 * Call only with size >= 2. */
size_t fz_session_begin(struct fz_session *s, const struct vs_target_config *cfg,
			const uint8_t *data, size_t size);

/* One guest-side operation at data[0] (size >= 1), in fuzz_target_session.c's encoding:
 *   0x00-0x3f  a vhost-user message: [fd byte][12-byte header][payload of header.size]
 *              (fd byte: low 4 bits the fd count; bit 6 eventfds, else bit 7 dups of the
 *              guest memory file, else bit 5 dups of the dirty log file, else bit 4 dups
 *              of the in-flight file in use (struct fz_infl), else /dev/null)
 *   0x40-0x77  kick queue op & 7 and run passes until the target is quiet
 *   0x78-0x7c  the in-flight file in use (the frontend's own memfd or GET_INFLIGHT_FD's):
 *              0x78 write [u16 le offset][u8 len][len bytes]; 0x79 a ring's header
 *              [u8 ring][u8 log2 size][u16 version][u16 desc_num][u16 last_batch_head]
 *              [u16 used_idx]; 0x7a one descriptor's entry [u8 ring][u8 log2 size][u16 head]
 *              [u8 inflight][u16 next][u16 counter] (the ring's part where a region of rings
 *              of 2^size entries puts it); 0x7b its size: [u8 i] fz_infl_sizes[i & 7];
 *              0x7c use the other one (GET's once there is one)
 *   0x7d-0x7f  kick queue op & 7, as 0x40-0x77
 *   0x80-0xbf  write guest memory: [u16 le offset][u8 len][len bytes]
 *   0xc0-0xdf  shrink the guest memory file to ((op & 0x1f) << 12) bytes
 *   0xe0-0xef  run passes
 *   0xf0-0xff  set the dirty log file's size to fz_log_sizes[op & 0xf] (a shrink under a log
 *              in force: the target's guard must turn its next mark into a dropped session)
 * Returns the bytes it took (at least 1, at most size).  A failed session is ended, as the
 * server ends it, before it returns. */
size_t fz_session_op(struct fz_session *s, const uint8_t *data, size_t size);

/* Kick queue q (if it runs) and run `passes` passes. */
void fz_session_kick(struct fz_session *s, unsigned q, unsigned passes);

/* What the server does when the session failed (tq_fail, a memory fault): the device is
 * reset and a new session starts.  Call after anything that may have failed it.  Then the
 * dirty log's check, once nothing is in flight (traps if a written page is not marked). */
void fz_session_check(struct fz_session *s);

/* The end of the input: the connection ends (every queue stops, every request completes:
 * traps if not), the target is destroyed, and every fd handed to it must be closed. */
void fz_session_end(struct fz_session *s);

#endif
