/* SPDX-License-Identifier: MIT */
/* Deadlines: see deadline.h. */
#include <poll.h>
#include <time.h>

#include "deadline.h"

uint64_t mono_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t now_ms(void)
{
	return mono_ns() / 1000000u;
}

int ms_left(uint64_t deadline)
{
	uint64_t now = now_ms();

	return now >= deadline ? 0 : deadline - now > INT32_MAX ? INT32_MAX : (int)(deadline - now);
}

bool wait_until(bool (*cond)(void *), void *opaque, unsigned timeout_ms)
{
	uint64_t deadline = now_ms() + timeout_ms;

	while (!cond(opaque)) {
		if (now_ms() >= deadline)
			return cond(opaque);
		poll(NULL, 0, 1);
	}
	return true;
}
