/* SPDX-License-Identifier: MIT */
/* Scratch directories: see tmpdir.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "tmpdir.h"

int tmpdir_make(char *dir, size_t len, const char *base, const char *tag)
{
	if (!base || !*base)
		base = getenv("TMPDIR");
	if (!base || !*base)
		base = "/tmp";
	if ((size_t)snprintf(dir, len, "%s/vioscope-%s-XXXXXX", base, tag) >= len)
		return -ENAMETOOLONG;
	return mkdtemp(dir) ? 0 : -errno;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path); /* -1 (errno set) stops the walk */
}

int tmpdir_remove(const char *dir)
{
	return nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS) ? -errno : 0;
}
