/* SPDX-License-Identifier: MIT */
/* The malicious-frontend tests' session: see hostile.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostile.h"

const char *vioscope;

int hostile_init(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s PATH-TO-VIOSCOPE\n", argv[0]);
		return 2;
	}
	vioscope = argv[1];
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

/* ---- sessions ------------------------------------------------------------------------------- */
static void sess_clear(struct sess *s)
{
	memset(s, 0, sizeof(*s));
	s->p.pid = s->p.pidfd = -1;
	s->g.fd = -1;
	fe_clear(&s->fe);
}

int sess_start(struct sess *s, const char *const *args, const struct fe_opts *o)
{
	struct target_opts to = {.file_size = 64 << 20};
	int rc;

	sess_clear(s);
	for (unsigned i = 0; args && args[i]; i++) {
		if (i == sizeof(to.args) / sizeof(to.args[0]) - 1)
			return -E2BIG;
		to.args[i] = args[i];
	}
	if ((rc = gmem_init(&s->g)) || (rc = target_init(&s->p, "hostile", vioscope)) ||
	    (rc = target_start(&s->p, &to)))
		return rc;
	if (o && (rc = fe_open(&s->fe, s->p.sock, &s->g, o))) {
		fprintf(stderr, "frontend set-up failed: %s\n", strerror(-rc));
		target_log_dump(&s->p);
	}
	return rc;
}

int sess_reconnect(struct sess *s, const struct fe_opts *o)
{
	fe_close(&s->fe);
	return fe_open(&s->fe, s->p.sock, &s->g, o);
}

int sess_end(struct sess *s)
{
	int sig, rc;

	fe_close(&s->fe);
	rc = target_stop(&s->p, SIGTERM, FE_WAIT_MS, &sig);
	if (rc != 0) {
		fprintf(stderr, "target: exit status %d, signal %d\n", rc, sig);
		target_log_dump(&s->p);
	}
	target_fini(&s->p);
	gmem_fini(&s->g);
	return rc;
}

int sess_setup(void **state)
{
	struct sess *s = malloc(sizeof(*s));

	if (!s)
		return -1;
	sess_clear(s);
	*state = s;
	return 0;
}

int sess_teardown(void **state)
{
	struct sess *s = *state;

	/* A failed test leaves its target running: it must not outlive the test. */
	fe_close(&s->fe);
	target_fini(&s->p);
	gmem_fini(&s->g);
	free(s);
	return 0;
}
