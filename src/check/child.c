/* SPDX-License-Identifier: MIT */
/* A `vioscope target` child for verify --target and stress: started, stopped, killed. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check/check_int.h"
#include "tracetools/tracetools.h"
#include "util/util.h"

int child_target_start(struct child_target *c, const char *exe, const char *sock, const char *spec,
		       unsigned queues, char *why, size_t whylen)
{
	unsigned n = 0;

	snprintf(c->sock, sizeof(c->sock), "%s", sock);
	snprintf(c->argbuf[0], sizeof(c->argbuf[0]), "%s", exe);
	snprintf(c->argbuf[1], sizeof(c->argbuf[1]), "0:%s", spec);
	snprintf(c->argbuf[2], sizeof(c->argbuf[2]), "%u", queues);
	c->argv[n++] = c->argbuf[0];
	c->argv[n++] = "target";
	c->argv[n++] = "--socket";
	c->argv[n++] = c->sock;
	c->argv[n++] = "--lun";
	c->argv[n++] = c->argbuf[1];
	c->argv[n++] = "--queues";
	c->argv[n++] = c->argbuf[2];
	c->argv[n++] = "--testing"; /* the checks' own targets: faults and delays are the point */
	c->argv[n] = NULL;
	return vs_spawn_server(c->argv, c->sock, 10000, false, &c->pid, why, whylen);
}

int child_target_stop(struct child_target *c, int sig)
{
	int pid = c->pid, rc;

	if (pid <= 0)
		return 0;
	rc = vs_child_stop(pid, sig, 10000);
	c->pid = -1;
	if (sig == SIGKILL || rc < 0 || rc >= 128) {
		/* A killed process cannot remove its trace file: do it for it. */
		vs_shm_remove_reaped(pid);
		return sig == SIGKILL && rc == 128 + SIGKILL ? 0 : rc;
	}
	return rc;
}
