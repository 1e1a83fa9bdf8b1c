/* SPDX-License-Identifier: MIT */
/* Removing a directory a command made, whole, in this process: after Ctrl-C too, when a
 * job started then (`rm -rf` through vs_job_run) would get the signal passed on to it and
 * die before it removed anything.  No shell, so no quoting of the path either. */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <unistd.h>

#include "util/util.h"

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	if ((type == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT)
		return errno; /* stops the walk; nftw returns it */
	return 0;
}

int vs_remove_tree(const char *path)
{
	/* Depth first (a directory after what it holds), never following a link: a link
	 * someone planted inside is removed, not what it names. */
	int rc = nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);

	if (rc < 0)
		return errno == ENOENT ? 0 : -errno;
	return -rc;
}
