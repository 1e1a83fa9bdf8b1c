/* SPDX-License-Identifier: MIT */
/*
 * Where a process's threads are (/proc/PID/task): a test that must act while a thread of
 * the target waits for something (a TMF waiting for the requests it reset, a worker
 * asleep) asks the kernel where that thread sleeps instead of guessing how long it takes.
 */
#ifndef TESTS_COMMON_THREAD_WAIT_H
#define TESTS_COMMON_THREAD_WAIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The wait channel (/proc/PID/task/TID/wchan: the kernel function it sleeps in, "0" when
 * running) of the first thread of pid (0: this process) named comm; false when there is
 * no such thread. */
bool thread_wchan(pid_t pid, const char *comm, char *wchan, size_t len);

/* The scheduler state letter of thread tid of pid (0: this process), from
 * /proc/PID/task/TID/stat ('R' running, 'S' asleep, ...), '?' when gone. */
char thread_state(pid_t pid, pid_t tid);

/* Wait (timeout_ms at most) until there is a thread of pid whose name starts with prefix
 * and every such thread sleeps in a kernel function whose name contains one of where[]
 * (NULL-terminated; e.g. "futex": blocked on a lock or condition variable). */
bool threads_wait_asleep_in(pid_t pid, const char *prefix, const char *const where[],
			    unsigned timeout_ms);

/* A TMF (or a removal) that waits for requests a test gate holds cannot be answered until
 * they go, and the test thread is the one waiting for the answer: a thread of its own lets
 * them go (act(arg)) once thread comm of pid sleeps in a futex wait, i.e. waits for them,
 * or at the deadline (waited false: the test then fails instead of hanging). */
struct when_waiting {
	pid_t pid;	  /* 0: this process */
	const char *comm; /* e.g. "vs-ctl", the target's control thread */
	void (*act)(void *arg);
	void *arg;
	/* set by it */
	pthread_t thread;
	bool waited;
};
int when_waiting_start(struct when_waiting *w);
/* Join it: whether the thread was seen waiting before act ran. */
bool when_waiting_join(struct when_waiting *w);

#endif
