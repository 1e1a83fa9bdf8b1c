/* SPDX-License-Identifier: MIT */
/*
 * The malicious-frontend tests' session: a real `vioscope target` process on a socket of its
 * own (tests/common/target.h: started by the test, stopped by PID, its stderr kept in a
 * file), and the tests' frontend (tests/common/frontend.h) speaking vhost-user to it over
 * that socket, able to send any message with any fds, with a guest (memfd memory,
 * driver-side rings, SCSI commands) to go with it.
 */
#ifndef TESTS_HOSTILE_H
#define TESTS_HOSTILE_H

#include <stdbool.h>
#include <stdint.h>

#include "deadline.h"
#include "frontend.h"
#include "gate.h"
#include "target.h"

extern const char *vioscope; /* the binary under test: argv[1] */

/* The start of a test's main(): vioscope from argv[1] (2 after the usage when it is
 * missing), SIGPIPE ignored.  return hostile_init(argc, argv) ?: cmocka_run_group_tests(...) */
int hostile_init(int argc, char **argv);

/* ---- one target, one guest, one frontend: what most tests start with ------------------------ */
struct sess {
	struct target p; /* its image file ("%F" in an argument) is 64 MiB */
	struct gmem g;
	struct fe fe;
};
/* cmocka fixture: *state is a struct sess, not started; teardown kills a target a failed
 * test left running. */
int sess_setup(void **state);
int sess_teardown(void **state);
/* A cmocka test on the sess_setup fixture. */
#define SESS_TEST(f) cmocka_unit_test_setup_teardown(f, sess_setup, sess_teardown)
/* Start the target with args (`vioscope target` options after --socket, NULL-terminated;
 * "%F", "%R", "%D" expanded: target.h), connect and set up o->nq rings (a frontend left
 * closed when o is NULL).  0 or -errno, the target's stderr printed on failure. */
int sess_start(struct sess *s, const char *const *args, const struct fe_opts *o);
/* A fresh frontend on the same target and guest memory, as QEMU reconnecting would. */
int sess_reconnect(struct sess *s, const struct fe_opts *o);
/* First the bystander (a second controller every session's target has, with a well-behaved
 * frontend) must be served: 32 reads, each GOOD.  Then SIGTERM: the target's exit status
 * (0: it stopped cleanly and its flush ran), -1 when it did not exit within the deadline or
 * died of a signal, or the bystander was not served; everything released. */
int sess_end(struct sess *s);

#endif /* TESTS_HOSTILE_H */
