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
#include <pthread.h>
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

	/* vs_vhost_server_drop(), from any thread; under drop_lock: */
	pthread_mutex_t drop_lock;
	bool session; /* a frontend is connected */
	bool drop;    /* ... and must be dropped, because of drop_why */
	char drop_why[VS_VHOST_WHY_LEN + 64];
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
static int place(int dirfd, const char *dir, const char *path)
{
	char inner[PATH_MAX];
	int rc;

	if (renameat2(dirfd, "s", AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	rc = probe_stale(AT_FDCWD, path, path);
	if (rc == -EEXIST)
		VS_ERROR(VHOST, "%s exists and is not a socket", path);
	else if (rc == -EADDRINUSE)
		VS_ERROR(VHOST, "%s: another process is listening on it", path);
	else if (rc)
		VS_ERROR(VHOST, "%s: cannot probe the old socket: %s", path, strerror(-rc));
	if (rc)
		return rc;
	if (renameat2(dirfd, "s", AT_FDCWD, path, RENAME_EXCHANGE) < 0)
		return -errno;
	inner_path(inner, sizeof(inner), dirfd, dir);
	if ((rc = probe_stale(dirfd, "s", inner)) == 0) {
		VS_INFO(VHOST, "replaced stale socket %s", path);
		return 0; /* the caller removes the stale one, now at dirfd/"s" */
	}
	VS_ERROR(VHOST, "%s changed while it was probed (%s): left alone", path, strerror(-rc));
	if (renameat2(dirfd, "s", AT_FDCWD, path, RENAME_EXCHANGE) < 0)
		VS_ERROR(VHOST, "%s: cannot swap back: %s", path, strerror(errno));
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

/* The socket appears at its path only once it accepts connections, and never with a mode
 * other than 0600: it is bound, restricted and listening inside a private directory
 * (mode 0700, beside the path, so on the same file system) before it is moved into
 * place (place()).  Nothing is done by path to a file another user could swap for a
 * symlink. */
static int listen_unix(struct vs_vhost_server *srv, const char *path)
{
	struct sockaddr_un sa;
	char dir[PATH_MAX];
	int fd = -1, dirfd = -1, rc;

	if ((rc = fill_addr(&sa, path))) {
		VS_ERROR(VHOST, "socket path too long: %s", path);
		return rc;
	}
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
	if (fchmodat(dirfd, "s", 0600, 0) < 0 || listen(fd, 1) < 0) {
		rc = -errno;
		goto out_sock;
	}
	if ((rc = place(dirfd, dir, path)))
		goto out_sock;
	unlinkat(dirfd, "s", 0); /* a stale socket swapped out, if any */
	rmdir(dir);
	close(dirfd);
	srv->listen_fd = fd;
	srv->path = strdup(path);
	VS_INFO(VHOST, "listening on %s", path);
	return 0;
out_sock:
	unlinkat(dirfd, "s", 0);
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
	pthread_mutex_init(&srv->drop_lock, NULL);
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
	vs_vhost_dev_set_wake_fd(srv->dev, srv->wake_fd);
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

/* End the session; why: NULL when the frontend left, else why we dropped it. */
static void disconnect(struct vs_vhost_server *srv, const char *why)
{
	if (srv->conn_fd < 0)
		return;
	close(srv->conn_fd);
	srv->conn_fd = -1;
	vs_vhost_dev_reset(srv->dev); /* stops every queue before memory goes away */
	/* Every queue is stopped: no drop for this session can come any more. */
	pthread_mutex_lock(&srv->drop_lock);
	srv->session = srv->drop = false;
	pthread_mutex_unlock(&srv->drop_lock);
	VS_INFO(VHOST, "frontend %s; session state released", why ? "dropped" : "disconnected");
	if (srv->ops.disconnected)
		srv->ops.disconnected(srv->opaque, why);
}

void vs_vhost_server_drop(struct vs_vhost_server *srv, const char *why)
{
	pthread_mutex_lock(&srv->drop_lock);
	if (srv->session && !srv->drop) {
		srv->drop = true;
		snprintf(srv->drop_why, sizeof(srv->drop_why), "%s", why);
	}
	pthread_mutex_unlock(&srv->drop_lock);
	vs_vhost_server_wake(srv);
}

/* A drop was asked for, or guest memory faulted: true with the reason in why. */
static bool drop_due(struct vs_vhost_server *srv, char *why, size_t whylen)
{
	bool due;

	pthread_mutex_lock(&srv->drop_lock);
	due = srv->drop;
	if (due)
		snprintf(why, whylen, "%s", srv->drop_why);
	pthread_mutex_unlock(&srv->drop_lock);
	return due || vs_vhost_dev_fault(srv->dev, why, whylen);
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
	pthread_mutex_destroy(&srv->drop_lock);
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
	pthread_mutex_lock(&srv->drop_lock);
	srv->session = true;
	pthread_mutex_unlock(&srv->drop_lock);
	VS_INFO(VHOST, "frontend connected (fd %d)", fd);
	if (srv->ops.connected)
		srv->ops.connected(srv->opaque);
}

/* One message in, at most one reply out.  Negative: drop the connection, why says why
 * (-ECONNRESET: the frontend closed it). */
static int serve_one(struct vs_vhost_server *srv, char *why, size_t whylen)
{
	struct vs_vhost_msg msg, reply;
	char codec[VS_VHOST_WHY_LEN] = "";
	int rc;

	rc = vs_vhost_msg_recv(srv->conn_fd, &msg, codec, sizeof(codec));
	if (rc == -ECONNRESET)
		return rc;
	if (rc == -EBADMSG) {
		VS_ERROR(VHOST, "bad message %u{vhost_msg} size %u: %s", msg.request, msg.size,
			 codec);
		snprintf(why, whylen, "bad message %s (%u): %s", vs_vhost_request_name(msg.request),
			 msg.request, codec);
		rc = vs_vhost_dev_reject(srv->dev, &msg, &reply);
	} else if (rc) {
		VS_ERROR(VHOST, "receive failed: %s (%d)", codec, rc);
		snprintf(why, whylen, "receive failed: %s", codec);
		return rc;
	} else {
		rc = vs_vhost_dev_handle(srv->dev, &msg, &reply);
		if (rc < 0)
			snprintf(why, whylen, "%s failed: %s", vs_vhost_request_name(msg.request),
				 vs_vhost_dev_last_error(srv->dev));
	}
	if (rc <= 0)
		return rc;
	rc = vs_vhost_msg_send(srv->conn_fd, &reply);
	if (rc) {
		VS_ERROR(VHOST, "reply to %u{vhost_msg} failed: %s", reply.request, strerror(-rc));
		snprintf(why, whylen, "reply to %s failed: %s", vs_vhost_request_name(reply.request),
			 strerror(-rc));
	}
	return rc;
}

int vs_vhost_server_serve(struct vs_vhost_server *srv, volatile sig_atomic_t *stop)
{
	char why[sizeof(srv->drop_why)];

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
		if (srv->conn_fd >= 0 && drop_due(srv, why, sizeof(why))) {
			VS_ERROR(VHOST, "dropping the frontend: %s", why);
			disconnect(srv, why);
		}
		if (vs_vhost_dev_wedged(srv->dev)) {
			VS_CRITICAL(VHOST, "the device is wedged (a queue could not be stopped): "
					   "serving ends");
			return -EIO;
		}
		if (__atomic_load_n(stop, __ATOMIC_RELAXED) || !p[0].revents)
			continue;
		if (srv->conn_fd < 0) {
			accept_one(srv);
			continue;
		}
		/* Readable, hung up or in error: recv tells which; failures end the session. */
		int rc = serve_one(srv, why, sizeof(why));
		if (rc == -ECONNRESET)
			VS_INFO(VHOST, "frontend closed the connection");
		if (rc < 0)
			disconnect(srv, rc == -ECONNRESET ? NULL : why);
	}
	return 0;
}
