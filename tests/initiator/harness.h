/* SPDX-License-Identifier: MIT */
/*
 * End-to-end harness: a real `vioscope target` child process on a temporary socket
 * (VIOSCOPE_BIN, from CMake), and small synchronous helpers over the initiator API.
 * Set VIOSCOPE_TEST_TARGET_LOG=1 to see the target's stderr (else in its directory's
 * target.log).
 */
#ifndef TESTS_INITIATOR_HARNESS_H
#define TESTS_INITIATOR_HARNESS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <vioscope/initiator.h>

#include "deadline.h" /* now_ms */
#include "target.h"

/* The target as a `vioscope target` process (VIOSCOPE_BIN; tests/common/target.h): tests
 * fill o (LUNs "0:ram=64M", queues, more options) between tgt_init and tgt_start. */
struct tgt {
	struct target tg;
	struct target_opts o;
};

/* Make the temporary directory (and sock/file paths) once per test; one queue. */
void tgt_init(struct tgt *t);
/* Start the target (again: same socket) and wait for its socket.  0 or -errno. */
int tgt_start(struct tgt *t);
/* Send sig, reap the child. */
void tgt_kill(struct tgt *t, int sig);
/* Stop (SIGTERM) and remove the temporary files. */
void tgt_fini(struct tgt *t);

/* Options for t with everything else default (poll mode). */
struct vs_ini_opts ini_opts(const struct tgt *t, unsigned queues);

/* A request waited for: 0 with io->result set, or the submit error. */
struct waiter {
	struct vs_ini_io io;
	struct iovec iov[256];
	volatile int done;
};
void waiter_prep(struct waiter *w, enum vs_ini_op op, unsigned lun, uint64_t lba, uint32_t nblocks,
		 void *buf, size_t len, unsigned nseg);
int waiter_submit(struct vs_ini_queue *q, struct waiter *w);
/* Poll q until w completes (bounded by a generous deadline: fails the test after). */
void waiter_wait(struct vs_ini_queue *q, struct waiter *w);
int io_sync(struct vs_ini_queue *q, enum vs_ini_op op, unsigned lun, uint64_t lba, uint32_t nblocks,
	    void *buf, size_t len, unsigned nseg);

/* Deterministic bytes for (seed, byte offset on the LUN). */
void pattern_fill(uint8_t *buf, size_t len, uint64_t seed, uint64_t off);
bool pattern_check(const uint8_t *buf, size_t len, uint64_t seed, uint64_t off);

#endif
