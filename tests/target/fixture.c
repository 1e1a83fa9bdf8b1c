/* SPDX-License-Identifier: MIT */
/* The target tests' fixture: see fixture.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"

const struct fe_opts fx_fe_opts = {.nq = FX_NQ, .direct = true, .hotplug = true, .err_fds = true};

struct fx *fx_start(bool poll, const char *lun0_opts)
{
	struct fx *x = calloc(1, sizeof(*x));
	char lun0[256];
	/* testing: the TMF and LUN tests hold requests in flight with gate= */
	struct target_opts o = {.in_process = true,
				.luns = {lun0, "1:ram=1M"},
				.queues = 2,
				.poll = poll,
				.testing = true,
				.file_size = 1 << 20};

	if (!x)
		return NULL;
	x->mem.fd = -1;
	x->g.pid = x->g.pidfd = -1;
	fe_clear(&x->fe);
	snprintf(lun0, sizeof(lun0), "0:file=%%F%s", lun0_opts);
	if (gmem_init(&x->mem) || target_init(&x->g, "target", NULL) || target_start(&x->g, &o) ||
	    fx_connect(x)) {
		fprintf(stderr, "fixture set-up failed\n");
		fx_stop(x);
		return NULL;
	}
	return x;
}

int fx_connect(struct fx *x)
{
	fe_close(&x->fe);
	return fe_open(&x->fe, x->g.sock, &x->mem, &fx_fe_opts);
}

void fx_stop(struct fx *x)
{
	fe_close(&x->fe);
	target_fini(&x->g);
	gmem_fini(&x->mem);
	free(x);
}

int fx_setup(void **state)
{
	return fx_setup_with(state, "");
}

int fx_setup_with(void **state, const char *lun0_opts)
{
	return (*state = fx_start(false, lun0_opts)) ? 0 : -1;
}

int fx_teardown(void **state)
{
	fx_stop(*state);
	return 0;
}
