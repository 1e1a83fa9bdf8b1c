/* SPDX-License-Identifier: MIT */
/*
 * A thread of the test's own that emits trace events one step at a time, for the
 * in-process tests: a fresh thread gets a fresh ring (with zeroed counters), and the
 * test looks at that ring between steps.  Each step waits with a deadline, so a thread
 * stuck in the trace runtime fails the test instead of hanging it.
 */
#ifndef VS_TEST_TRACE_STEPPER_H
#define VS_TEST_TRACE_STEPPER_H

#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>

struct th_stepper {
	pthread_t th;
	sem_t go, done;
	uint32_t tid;		 /* the thread's, once started */
	void (*step)(void *arg); /* what it runs next; NULL: exit */
	void *arg;
};

/* Start the thread; 0 or -errno. */
int th_stepper_start(struct th_stepper *s);
/* Run STEP(ARG) on the thread and wait for it: 0, or -ETIMEDOUT after TIMEOUT_S
 * seconds (the step is then still running: the caller fails its test, and the process
 * exits with the thread stuck). */
int th_stepper_run(struct th_stepper *s, void (*step)(void *), void *arg, unsigned timeout_s);
/* Let the thread end (its ring is retired, its events stay) and join it. */
void th_stepper_stop(struct th_stepper *s);

#endif
