/* SPDX-License-Identifier: MIT */
/*
 * vhost-user device server: listen on a Unix path, accept one frontend at a time, feed
 * its messages to the device (vs_vhost_dev_handle) and send the replies.  The server owns
 * the connection's life; the device below it never calls back up.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "vhost/vhost_dev.h"

#define POLL_MS	   200 /* upper bound on noticing *stop without a wake */
#define IO_TIMEOUT 5   /* seconds a started message may take to arrive (or a reply to leave) */

struct vs_vhost_server {
	struct vs_vhost_dev *dev;
	struct vs_vhost_dev_ops ops; /* connected()/disconnected() are the server's to call */
	void *opaque;
	int listen_fd, conn_fd, wake_fd; /* -1 when unused */
	char *path;
};

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/* A leftover socket file may be replaced only if it is a socket nobody accepts on:
 * 0 when the path is free or stale (the rename below replaces it), else -errno. */
static int check_stale(const char *path, const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		VS_ERROR(VHOST, "%s exists and is not a socket", path);
		return -EEXIST;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0 ? 0 : -errno;
	close(fd);
	if (rc == 0) {
		VS_ERROR(VHOST, "%s: another process is listening on it", path);
		return -EADDRINUSE;
	}
	if (rc != -ECONNREFUSED) {
		VS_ERROR(VHOST, "%s: cannot probe the old socket: %s", path, strerror(-rc));
		return rc;
	}
	VS_INFO(VHOST, "replacing stale socket %s", path);
	return 0;
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

/* The socket appears at its path only once it accepts connections, and never with a mode
 * other than 0600: it is bound, restricted and listening inside a private directory
 * (mode 0700, beside the path, so on the same file system) before it is renamed into
 * place.  Nothing is done by path to a file another user could swap for a symlink. */
static int listen_unix(struct vs_vhost_server *srv, const char *path)
{
	struct sockaddr_un sa;
	char dir[PATH_MAX];
	int fd = -1, dirfd = -1, rc;

	if ((rc = fill_addr(&sa, path))) {
		VS_ERROR(VHOST, "socket path too long: %s", path);
		return rc;
	}
	if ((rc = check_stale(path, &sa)))
		return rc;
	if (snprintf(dir, sizeof(dir), "%s.XXXXXX", path) >= (int)sizeof(dir))
		return -ENAMETOOLONG;
	if (!mkdtemp(dir)) {
		rc = -errno;
		goto out;
	}
	dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (dirfd < 0 || fd < 0) {
		rc = -errno;
		goto out_dir;
	}
	if ((rc = bind_in(fd, dirfd, dir)))
		goto out_dir;
	if (fchmodat(dirfd, "s", 0600, 0) < 0 || listen(fd, 1) < 0 ||
	    renameat(dirfd, "s", AT_FDCWD, path) < 0) {
		rc = -errno;
		unlinkat(dirfd, "s", 0);
		goto out_dir;
	}
	rmdir(dir);
	close(dirfd);
	srv->listen_fd = fd;
	srv->path = strdup(path);
	VS_INFO(VHOST, "listening on %s", path);
	return 0;
out_dir:
	rmdir(dir);
out:
	VS_ERROR(VHOST, "cannot listen on %s: %s", path, strerror(-rc));
	if (dirfd >= 0)
		close(dirfd);
	if (fd >= 0)
		close(fd);
	return rc;
}

struct vs_vhost_server *vs_vhost_server_create(const char *path, unsigned max_queues,
					       uint64_t device_features,
					       const struct vs_vhost_dev_ops *ops, void *opaque)
{
	struct vs_vhost_server *srv = calloc(1, sizeof(*srv));
	int rc;

	if (!srv) {
		errno = ENOMEM;
		return NULL;
	}
	srv->listen_fd = srv->conn_fd = srv->wake_fd = -1;
	if (ops)
		srv->ops = *ops;
	srv->opaque = opaque;
	srv->dev = vs_vhost_dev_new(max_queues, device_features, ops, opaque);
	if (!srv->dev) {
		rc = -errno;
		goto fail;
	}
	srv->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (srv->wake_fd < 0) {
		rc = -errno;
		VS_ERROR(VHOST, "eventfd: %s", strerror(errno));
		goto fail;
	}
	if ((rc = listen_unix(srv, path)))
		goto fail;
	VS_INFO(VHOST, "serving %u queues, features %#llx", max_queues,
		(unsigned long long)device_features);
	return srv;
fail:
	vs_vhost_server_destroy(srv);
	errno = -rc;
	return NULL;
}

static void disconnect(struct vs_vhost_server *srv)
{
	if (srv->conn_fd < 0)
		return;
	close(srv->conn_fd);
	srv->conn_fd = -1;
	vs_vhost_dev_reset(srv->dev); /* stops every queue before memory goes away */
	VS_INFO(VHOST, "frontend disconnected; session state released");
	if (srv->ops.disconnected)
		srv->ops.disconnected(srv->opaque);
}

void vs_vhost_server_destroy(struct vs_vhost_server *srv)
{
	if (!srv)
		return;
	/* The device first: its queues stop before the connection and memory go. */
	vs_vhost_dev_free(srv->dev);
	if (srv->conn_fd >= 0)
		close(srv->conn_fd);
	if (srv->listen_fd >= 0) {
		close(srv->listen_fd);
		if (srv->path)
			unlink(srv->path);
	}
	if (srv->wake_fd >= 0)
		close(srv->wake_fd);
	free(srv->path);
	free(srv);
}

void vs_vhost_server_wake(struct vs_vhost_server *srv)
{
	uint64_t one = 1;

	if (srv->wake_fd >= 0 && write(srv->wake_fd, &one, sizeof(one)) < 0) {
		/* full counter: a wake-up is pending anyway */
	}
}

static void accept_one(struct vs_vhost_server *srv)
{
	struct timeval tv = {.tv_sec = IO_TIMEOUT};
	int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0) {
		if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED)
			return;
		VS_ERROR(VHOST, "accept: %s", strerror(errno));
		/* EMFILE and friends leave the listener readable: don't spin on it. */
		nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
		return;
	}
	/* A frontend that stalls mid-message must not hang us: bound each read and write. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	srv->conn_fd = fd;
	VS_INFO(VHOST, "frontend connected (fd %d)", fd);
	if (srv->ops.connected)
		srv->ops.connected(srv->opaque);
}

/* One message in, at most one reply out.  Negative: drop the connection. */
static int serve_one(struct vs_vhost_server *srv)
{
	struct vs_vhost_msg msg, reply;
	char why[VS_VHOST_WHY_LEN] = "";
	int rc;

	rc = vs_vhost_msg_recv(srv->conn_fd, &msg, why, sizeof(why));
	if (rc == -ECONNRESET)
		return rc;
	if (rc == -EBADMSG) {
		VS_ERROR(VHOST, "bad message %u{vhost_msg} size %u: %s", msg.request, msg.size,
			 why);
		rc = vs_vhost_dev_reject(srv->dev, &msg, &reply);
	} else if (rc) {
		VS_ERROR(VHOST, "receive failed: %s (%d)", why, rc);
		return rc;
	} else {
		rc = vs_vhost_dev_handle(srv->dev, &msg, &reply);
	}
	if (rc <= 0)
		return rc;
	rc = vs_vhost_msg_send(srv->conn_fd, &reply);
	if (rc)
		VS_ERROR(VHOST, "reply to %u{vhost_msg} failed: %s", reply.request, strerror(-rc));
	return rc;
}

int vs_vhost_server_serve(struct vs_vhost_server *srv, volatile sig_atomic_t *stop)
{
	if (srv->listen_fd < 0)
		return -EINVAL;
	/* Atomic loads: the flag may be set by a signal handler or by another thread. */
	while (!__atomic_load_n(stop, __ATOMIC_RELAXED)) {
		struct pollfd p[2] = {
		    {.fd = srv->conn_fd >= 0 ? srv->conn_fd : srv->listen_fd, .events = POLLIN},
		    {.fd = srv->wake_fd, .events = POLLIN},
		};
		int n = poll(p, 2, POLL_MS);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int rc = -errno;
			VS_ERROR(VHOST, "poll: %s", strerror(errno));
			return rc;
		}
		if (p[1].revents & POLLIN) {
			uint64_t v;
			if (read(srv->wake_fd, &v, sizeof(v)) < 0) {
				/* nothing pending: fine */
			}
		}
		if (__atomic_load_n(stop, __ATOMIC_RELAXED) || !p[0].revents)
			continue;
		if (srv->conn_fd < 0) {
			accept_one(srv);
			continue;
		}
		/* Readable, hung up or in error: recv tells which; failures end the session. */
		int rc = serve_one(srv);
		if (rc == -ECONNRESET)
			VS_INFO(VHOST, "frontend closed the connection");
		if (rc < 0)
			disconnect(srv);
	}
	return 0;
}
