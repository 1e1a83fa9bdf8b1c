/* SPDX-License-Identifier: MIT */
/* The adaptive poll's arithmetic (src/target/adaptive.c): how the window of an event-mode
 * worker follows the idle spells it sees, and how it closes when the CPU is wanted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "target/target_int.h"

#define US 1000ull
#define T0 (1000000000ull) /* an arbitrary "now" */

/* One idle spell of `idle` ns beginning at *now; the clock moves past it. */
static void spell(struct adaptive_poll *ap, uint64_t *now, uint64_t idle)
{
	ap_idle_ended(ap, *now, *now + idle);
	*now += idle + 1 * US; /* a pass in between */
}

/* A bound of 32 us and spells of 20 us (steady load) until the window reaches it. */
static void open_fully(struct adaptive_poll *ap, uint64_t *now)
{
	ap_init(ap, 32 * US);
	for (int i = 0; i < 6; i++)
		spell(ap, now, 20 * US);
	assert_int_equal(ap_window(ap, *now), 32 * US);
}

/* Steady load: spells a little longer than the window (a longer look would have caught
 * them) open it from nothing by doubling, up to the bound, where spells it catches keep it. */
static void test_short_spells_grow_to_the_bound(void **state)
{
	struct adaptive_poll ap;
	uint64_t now = T0, expect = AP_START_NS;

	(void)state;
	ap_init(&ap, 32 * US);
	assert_int_equal(ap_window(&ap, now), 0);
	spell(&ap, &now, 10 * US);
	assert_int_equal(ap_window(&ap, now), AP_START_NS);
	while (expect < 32 * US) {
		spell(&ap, &now, ap_window(&ap, now) + 1); /* just missed */
		expect = expect * 2 > 32 * US ? 32 * US : expect * 2;
		assert_int_equal(ap_window(&ap, now), expect);
	}
	for (int i = 0; i < 10; i++) {
		spell(&ap, &now, 32 * US); /* caught, at the very end */
		assert_int_equal(ap_window(&ap, now), 32 * US);
	}
}

/* A spell the window caught leaves it as it is; one longer than the bound halves it, and
 * below the starting window it closes: an idle worker polls once, briefly, then sleeps. */
static void test_long_spells_close_the_window(void **state)
{
	struct adaptive_poll ap;
	uint64_t now = T0;

	(void)state;
	open_fully(&ap, &now);
	spell(&ap, &now, 5 * US); /* caught */
	assert_int_equal(ap_window(&ap, now), 32 * US);
	spell(&ap, &now, 1000 * US);
	assert_int_equal(ap_window(&ap, now), 16 * US);
	for (int i = 0; i < 3; i++)
		spell(&ap, &now, 1000 * US);
	assert_int_equal(ap_window(&ap, now), AP_START_NS);
	spell(&ap, &now, 1000 * US);
	assert_int_equal(ap_window(&ap, now), 0);
	spell(&ap, &now, 5000000 * US);
	assert_int_equal(ap_window(&ap, now), 0);
}

/* Preempted while polling: no polling at all for the hold-off, and spells during it do not
 * reopen the window; after it the window grows again from the start. */
static void test_preemption_holds_polling_off(void **state)
{
	struct adaptive_poll ap;
	uint64_t now = T0;

	(void)state;
	open_fully(&ap, &now);
	ap_preempted(&ap, now);
	assert_int_equal(ap_window(&ap, now), 0);
	for (int i = 0; i < 100; i++)
		spell(&ap, &now, 20 * US); /* 2.1 ms in all: well inside the hold-off */
	assert_int_equal(ap_window(&ap, now), 0);
	now += AP_HOLDOFF_NS;
	assert_int_equal(ap_window(&ap, now), 0); /* the window itself was closed */
	spell(&ap, &now, 20 * US);
	assert_int_equal(ap_window(&ap, now), AP_START_NS);
}

/* A bound of 0 (--adaptive-poll 0): the window never opens, whatever the spells. */
static void test_zero_bound_never_polls(void **state)
{
	struct adaptive_poll ap;
	uint64_t now = T0;

	(void)state;
	ap_init(&ap, 0);
	for (int i = 0; i < 50; i++) {
		spell(&ap, &now, (uint64_t)(i % 5) * US + 1);
		assert_int_equal(ap_window(&ap, now), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_short_spells_grow_to_the_bound),
	    cmocka_unit_test(test_long_spells_close_the_window),
	    cmocka_unit_test(test_preemption_holds_polling_off),
	    cmocka_unit_test(test_zero_bound_never_polls),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
