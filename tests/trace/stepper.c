/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "stepper.h"

static void *stepper_main(void *arg)
{
	struct th_stepper *s = arg;
	s->tid = (uint32_t)syscall(SYS_gettid);
	sem_post(&s->done);
	for (;;) {
		sem_wait(&s->go);
		if (!s->step)
			return NULL;
		s->step(s->arg);
		sem_post(&s->done);
	}
}

int th_stepper_start(struct th_stepper *s)
{
	memset(s, 0, sizeof *s);
	sem_init(&s->go, 0, 0);
	sem_init(&s->done, 0, 0);
	int rc = pthread_create(&s->th, NULL, stepper_main, s);
	if (rc)
		return -rc;
	while (sem_wait(&s->done) < 0) /* its tid is known from here on */
		;
	return 0;
}

int th_stepper_run(struct th_stepper *s, void (*step)(void *), void *arg, unsigned timeout_s)
{
	struct timespec deadline;
	s->step = step;
	s->arg = arg;
	sem_post(&s->go);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += timeout_s;
	while (sem_timedwait(&s->done, &deadline) < 0)
		if (errno != EINTR)
			return -ETIMEDOUT;
	return 0;
}

void th_stepper_stop(struct th_stepper *s)
{
	s->step = NULL;
	sem_post(&s->go);
	pthread_join(s->th, NULL);
	sem_destroy(&s->go);
	sem_destroy(&s->done);
}
