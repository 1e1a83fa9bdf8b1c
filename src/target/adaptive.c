/* SPDX-License-Identifier: MIT */
/*
 * The adaptive poll of an event-mode worker: how long it keeps looking at its rings after
 * running out of work, before it arms the kicks and sleeps.  QEMU's AioContext polling
 * (poll-max-ns, poll-grow, poll-shrink) with one addition for machines whose CPUs are
 * shared, as the benchmark's driver and target share two:
 *
 * - The window grows (doubling, from AP_START_NS) while idle spells end shortly after it
 *   ran out, i.e. a longer look would have caught the work without a sleep and a wake-up;
 *   it halves when a spell outlasts the bound (the work is too far apart to wait for); it
 *   stays when the look caught the work.  So an idle worker spins at most once, for at
 *   most the bound, and then sleeps with no timeout: no CPU while idle.
 * - A look that finds the worker was off the CPU between two of its checks (a gap of
 *   AP_PREEMPT_NS or more) means another thread wanted this CPU: the benchmark's polling
 *   driver, a completion thread, anyone.  Spinning there only delays them, so the window
 *   drops to 0 and stays there for AP_HOLDOFF_NS: the worker sleeps at once, as without
 *   adaptive polling, until the CPU has been free for a while.
 *
 * Pure arithmetic on timestamps the caller passes, so that it can be tested alone.
 */
#include "target/target_int.h"

void ap_init(struct adaptive_poll *ap, uint64_t max_ns)
{
	*ap = (struct adaptive_poll){.max_ns = max_ns};
}

uint64_t ap_window(const struct adaptive_poll *ap, uint64_t now)
{
	return now < ap->holdoff_until ? 0 : ap->window_ns;
}

void ap_idle_ended(struct adaptive_poll *ap, uint64_t idle_start, uint64_t now)
{
	uint64_t idle = now - idle_start;

	if (!ap->max_ns || idle_start < ap->holdoff_until)
		return; /* no adapting while held off: the spells say nothing about spinning */
	if (idle <= ap->window_ns)
		return; /* the look caught it: the window is right */
	if (idle > ap->max_ns) {
		ap->window_ns /= 2; /* too far apart to wait for */
		if (ap->window_ns < AP_START_NS)
			ap->window_ns = 0;
		return;
	}
	/* A little longer would have caught it without a sleep. */
	ap->window_ns = ap->window_ns ? 2 * ap->window_ns : AP_START_NS;
	if (ap->window_ns > ap->max_ns)
		ap->window_ns = ap->max_ns;
}

void ap_preempted(struct adaptive_poll *ap, uint64_t now)
{
	ap->window_ns = 0;
	ap->holdoff_until = now + AP_HOLDOFF_NS;
}
