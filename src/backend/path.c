/* SPDX-License-Identifier: MIT */
/*
 * The paths a backend spec names (file=PATH, log-writes=LOG), opened as whoever gave the
 * spec may: anywhere, or only beneath the LUN root when the target confines LUNs to one
 * directory (--lun-root DIR).  The kernel resolves them there (openat2 RESOLVE_BENEATH,
 * RESOLVE_NO_MAGICLINKS): "..", absolute symlinks and symlinks that lead out are refused
 * whatever is renamed or linked under DIR meanwhile, which no check of the string could
 * promise.  An absolute path is taken when it starts with DIR (as given, or its real path).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/syscall.h>

#include "backend/backend_int.h"

/* path relative to root when it lies under it ("" for root itself), else NULL. */
static const char *under(const char *root, const char *path)
{
	size_t n = strlen(root);

	while (n > 1 && root[n - 1] == '/')
		n--;
	if (n == 1 && root[0] == '/')
		n = 0; /* the root of everything: every absolute path is under it */
	if (strncmp(path, root, n) || (path[n] && path[n] != '/'))
		return NULL;
	path += n;
	while (*path == '/')
		path++;
	return path;
}

/* The spec's path as openat2 takes it from the root: relative ones as they are. */
static const char *relative_path(const char *root, const char *path, char *real, size_t reallen)
{
	const char *rel;
	char *r;

	if (path[0] != '/')
		return path;
	if ((rel = under(root, path)))
		return rel;
	r = realpath(root, NULL);
	if (!r)
		return NULL;
	snprintf(real, reallen, "%s", r);
	free(r);
	return under(real, path);
}

int vs_be_open(const struct vs_backend_opts *o, const char *path, int flags, mode_t mode, char *why,
	       size_t whylen)
{
	struct open_how how = {.flags = (uint64_t)flags,
			       .mode = flags & O_CREAT ? mode : 0,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
	char real[PATH_MAX];
	const char *rel;
	int root, fd, rc;

	if (!o || !o->root) {
		fd = open(path, flags, mode);
		if (fd < 0)
			return vs_fail(why, whylen, -errno, "%s", strerror(errno));
		return fd;
	}
	root = open(o->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return vs_fail(why, whylen, -errno, "the LUN root %s (--lun-root): %s", o->root,
			       strerror(errno));
	rel = relative_path(o->root, path, real, sizeof(real));
	if (!rel || !*rel) {
		rc = vs_fail(why, whylen, -EXDEV, "not beneath the LUN root %s (--lun-root)",
			     o->root);
		goto out;
	}
	fd = (int)syscall(SYS_openat2, root, rel, &how, sizeof(how));
	rc = fd >= 0 ? fd : -errno;
	if (rc == -EXDEV)
		vs_fail(why, whylen, rc, "resolves outside the LUN root %s (--lun-root)", o->root);
	else if (rc == -ELOOP)
		vs_fail(why, whylen, rc,
			"a symlink loop, or a /proc magic link (refused beneath the LUN root)");
	else if (rc == -ENOSYS)
		vs_fail(why, whylen, rc,
			"this kernel has no openat2 (Linux 5.6+): the LUN root cannot be "
			"enforced");
	else if (rc < 0)
		vs_fail(why, whylen, rc, "%s", strerror(-rc));
out:
	close(root);
	return rc;
}
