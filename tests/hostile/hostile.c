/* SPDX-License-Identifier: MIT */
/* The malicious-frontend tests' session: see hostile.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

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

/* Every session's target has a second controller, the bystander, with a well-behaved
 * frontend of its own at the end (sess_end): whatever the test's frontend did to its own
 * controller, the bystander must still be served. */
static const char *const bystander_args[] = {"--controller", "bystander:socket=%D/bystander.sock",
					     "--lun", "0:ram=16M"};
#define BYSTANDER_READS 32

static bool path_exists(void *path)
{
	struct stat st;
	return stat(path, &st) == 0;
}

int sess_start(struct sess *s, const char *const *args, const struct fe_opts *o)
{
	char by_sock[160];
	const unsigned nby = sizeof(bystander_args) / sizeof(bystander_args[0]);
	struct target_opts to = {.file_size = 64 << 20};
	unsigned n = 0;
	int rc;

	sess_clear(s);
	for (; args && args[n]; n++) {
		if (n + nby >= sizeof(to.args) / sizeof(to.args[0]) - 1)
			return -E2BIG;
		to.args[n] = args[n];
	}
	for (unsigned i = 0; i < nby; i++)
		to.args[n + i] = bystander_args[i];
	if ((rc = gmem_init(&s->g)) || (rc = target_init(&s->p, "hostile", vioscope)) ||
	    (rc = target_start(&s->p, &to)))
		return rc;
	/* target_start waited for the first controller's socket; the bystander's comes after it
	 * (tests that count the target's fds start counting once every controller listens). */
	snprintf(by_sock, sizeof(by_sock), "%s/bystander.sock", s->p.dir);
	if (!wait_until(path_exists, by_sock, FE_WAIT_MS)) {
		fprintf(stderr, "the bystander controller's socket %s never appeared\n", by_sock);
		target_log_dump(&s->p);
		return -ETIMEDOUT;
	}
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

/* The bystander's frontend: BYSTANDER_READS reads of its LUN 0, each GOOD.  0, or -1 after
 * saying what failed. */
static int bystander_served(struct sess *s)
{
	const struct fe_opts o = {.nq = 3};
	struct gmem g;
	struct fe fe;
	char sock[160];
	int rc;

	fe_clear(&fe);
	snprintf(sock, sizeof(sock), "%s/bystander.sock", s->p.dir);
	if ((rc = gmem_init(&g))) {
		fprintf(stderr, "bystander: guest memory: %s\n", strerror(-rc));
		return -1;
	}
	rc = fe_open(&fe, sock, &g, &o);
	for (uint32_t lba = 0; !rc && lba < BYSTANDER_READS; lba++)
		rc = fe_read_ok(&fe, VS_VIRTIO_SCSI_VQ_REQ0, lba);
	if (rc)
		fprintf(stderr,
			"bystander: the other controller of the target was not served: %s\n",
			strerror(rc < 0 ? -rc : EIO));
	fe_close(&fe);
	gmem_fini(&g);
	return rc ? -1 : 0;
}

int sess_end(struct sess *s)
{
	int sig, rc, by;

	fe_close(&s->fe);
	by = bystander_served(s);
	rc = target_stop(&s->p, SIGTERM, FE_WAIT_MS, &sig);
	if (rc != 0) {
		fprintf(stderr, "target: exit status %d, signal %d\n", rc, sig);
		target_log_dump(&s->p);
	}
	target_fini(&s->p);
	gmem_fini(&s->g);
	return rc ? rc : by;
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
