/* SPDX-License-Identifier: MIT */
/*
 * Owner-only listening Unix sockets (the target's vhost-user socket, its management
 * socket): the socket appears at its path only once it accepts connections, and never
 * with a mode other than 0600.
 */
#define _GNU_SOURCE /* renameat2 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/util.h"

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/* name (in dirfd) is a socket nobody accepts on, tried through conn (a path to it): 0, or
 * -EEXIST (not a socket), -EADDRINUSE (someone listens), -errno. */
static int probe_stale(int dirfd, const char *name, const char *conn)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, rc;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	if ((rc = fill_addr(&sa, conn)))
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
	close(fd);
	if (rc == 0)
		return -EADDRINUSE;
	return rc == -ECONNREFUSED ? 0 : rc;
}

/* A path to name "s" in dirfd for connect(): through /proc/self/fd (short), else dir/s. */
static void inner_path(char *buf, size_t len, int dirfd, const char *dir)
{
	struct sockaddr_un sa;

	snprintf(buf, len, "/proc/self/fd/%d/s", dirfd);
	if (access(buf, F_OK) != 0 || strlen(buf) >= sizeof(sa.sun_path))
		if (snprintf(buf, len, "%s/s", dir) >= (int)len)
			buf[0] = 0; /* cannot name it: the probe fails, nothing is replaced */
}

/* Move our listening socket (dirfd/"s") to path.  A free path is taken without replacing
 * anything.  Something already there is swapped out only if it is a socket nobody listens
 * on, and only if what was swapped out (RENAME_EXCHANGE) still is one when looked at again
 * in our private directory: if a live server took the path between the first look and the
 * swap, its socket is swapped back and kept.  A socket file that is stale stays stale (to
 * listen, a server binds a new file), so the second look settles it.  Nothing is ever done
 * by path to a file that might have been replaced. */
static int place(int dirfd, const char *dir, const char *path, char *why, size_t whylen)
{
	char inner[PATH_MAX];
	int rc;

	if (renameat2(dirfd, "s", AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EEXIST)
		return vs_fail(why, whylen, -errno, "%s: %s", path, strerror(errno));
	rc = probe_stale(AT_FDCWD, path, path);
	if (rc == -EEXIST)
		return vs_fail(why, whylen, rc, "%s exists and is not a socket", path);
	if (rc == -EADDRINUSE)
		return vs_fail(why, whylen, rc, "%s: another process is listening on it", path);
	if (rc)
		return vs_fail(why, whylen, rc, "%s: cannot probe the old socket: %s", path,
			       strerror(-rc));
	if (renameat2(dirfd, "s", AT_FDCWD, path, RENAME_EXCHANGE) < 0)
		return vs_fail(why, whylen, -errno, "%s: %s", path, strerror(errno));
	inner_path(inner, sizeof(inner), dirfd, dir);
	if ((rc = probe_stale(dirfd, "s", inner)) == 0)
		return 0; /* the caller removes the stale one, now at dirfd/"s" */
	vs_fail(why, whylen, -EADDRINUSE, "%s changed while it was probed (%s): left alone", path,
		strerror(-rc));
	if (renameat2(dirfd, "s", AT_FDCWD, path, RENAME_EXCHANGE) < 0)
		vs_fail(why, whylen, -EADDRINUSE,
			"%s changed while it was probed, and cannot be "
			"swapped back: %s",
			path, strerror(errno));
	return -EADDRINUSE;
}

/* Bind fd to the name "s" inside the directory dirfd: through /proc/self/fd, so that the
 * name fits sun_path whatever the directory's path; else by its full path. */
static int bind_in(int fd, int dirfd, const char *dir)
{
	struct sockaddr_un sa;
	char name[PATH_MAX];

	snprintf(name, sizeof(name), "/proc/self/fd/%d/s", dirfd);
	if (fill_addr(&sa, name) == 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return 0;
	if (snprintf(name, sizeof(name), "%s/s", dir) >= (int)sizeof(name) || fill_addr(&sa, name))
		return -ENAMETOOLONG;
	return bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
}

/* Bound, restricted and listening inside a private directory (mode 0700, beside the
 * path, so on the same file system) before it is moved into place (place()).  Nothing is
 * done by path to a file another user could swap for a symlink. */
int vs_listen_unix(const char *path, int backlog, char *why, size_t whylen)
{
	struct sockaddr_un sa;
	char dir[PATH_MAX];
	int fd = -1, dirfd = -1, rc;

	if (fill_addr(&sa, path))
		return vs_fail(why, whylen, -ENAMETOOLONG, "socket path too long: %s", path);
	if (snprintf(dir, sizeof(dir), "%s.XXXXXX", path) >= (int)sizeof(dir))
		return vs_fail(why, whylen, -ENAMETOOLONG, "socket path too long: %s", path);
	if (!mkdtemp(dir))
		return vs_fail(why, whylen, -errno, "cannot listen on %s: %s", path,
			       strerror(errno));
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (dirfd < 0 || fd < 0) {
		rc = vs_fail(why, whylen, -errno, "cannot listen on %s: %s", path, strerror(errno));
		goto out_dir;
	}
	if ((rc = bind_in(fd, dirfd, dir))) {
		vs_fail(why, whylen, rc, "cannot listen on %s: %s", path, strerror(-rc));
		goto out_dir;
	}
	if (fchmodat(dirfd, "s", 0600, 0) < 0 || listen(fd, backlog) < 0) {
		rc = vs_fail(why, whylen, -errno, "cannot listen on %s: %s", path, strerror(errno));
		goto out_sock;
	}
	if ((rc = place(dirfd, dir, path, why, whylen)))
		goto out_sock;
	unlinkat(dirfd, "s", 0); /* a stale socket swapped out, if any */
	rmdir(dir);
	close(dirfd);
	return fd;
out_sock:
	unlinkat(dirfd, "s", 0);
out_dir:
	rmdir(dir);
	if (dirfd >= 0)
		close(dirfd);
	if (fd >= 0)
		close(fd);
	return rc;
}
