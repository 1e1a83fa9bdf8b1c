/* SPDX-License-Identifier: MIT */
/*
 * Time for tests: every wait has a deadline, and a deadline is the only thing a test
 * reads the clock for (figures a test compares come from the run itself).
 */
#ifndef TESTS_COMMON_DEADLINE_H
#define TESTS_COMMON_DEADLINE_H

#include <stdbool.h>
#include <stdint.h>

/* CLOCK_MONOTONIC in milliseconds / nanoseconds, since an arbitrary start. */
uint64_t now_ms(void);
uint64_t mono_ns(void);

/* The milliseconds left until deadline (a now_ms() value), 0 once it has passed: a poll()
 * timeout. */
int ms_left(uint64_t deadline);

/* Poll cond every millisecond until it holds (true) or timeout_ms have passed (false, after
 * a last look): a wait for something that must happen, never a measurement. */
bool wait_until(bool (*cond)(void *), void *opaque, unsigned timeout_ms);

#endif
