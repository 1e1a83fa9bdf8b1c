/* SPDX-License-Identifier: MIT */
/*
 * The target tests' fixture: a target in this process (tests/common/target.h: white-box
 * tests reach into it) with LUN 0 a 1 MiB file and LUN 1 1 MiB of RAM, two request queues,
 * and the tests' frontend (tests/common/frontend.h) connected to it with every ring, the
 * way QEMU and a guest driver would.
 */
#ifndef TESTS_TARGET_FIXTURE_H
#define TESTS_TARGET_FIXTURE_H

#include <stdbool.h>

#include "frontend.h"
#include "target.h"

#define FX_NQ 4 /* control, event, 2 request queues */

struct fx {
	struct target g;
	struct gmem mem; /* kept across connections */
	struct fe fe;
};

/* How the fixture's frontend connects: FX_NQ rings of 128 entries, direct chains unless a
 * test sets fe.indirect, hotplug events, an error eventfd per ring. */
extern const struct fe_opts fx_fe_opts;

/* Start the target (poll: its workers busy-poll; lun0_opts appended to LUN 0's spec, e.g.
 * ",gate=write") and connect the frontend.  NULL on failure (said why). */
struct fx *fx_start(bool poll, const char *lun0_opts);
void fx_stop(struct fx *x);
/* (Re)connect the frontend: a new session on the same target and guest memory. */
int fx_connect(struct fx *x);

/* cmocka fixtures: fx_start(false, "") / with lun0_opts. */
int fx_setup(void **state);
int fx_setup_with(void **state, const char *lun0_opts);
int fx_teardown(void **state);
/* A cmocka test on the fx_setup fixture. */
#define FX_TEST(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)

#endif /* TESTS_TARGET_FIXTURE_H */
