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

#include "util/util.h"
#include "vhost/vhost_dev.h"

#define POLL_MS	   200 /* upper bound on noticing *stop without a wake */
#define IO_TIMEOUT 5   /* seconds a started message may take to arrive (or a reply to leave) */

struct vs_vhost_server {
	struct vs_vhost_dev *dev;
	struct vs_vhost_dev_ops ops; /* connected()/disconnected() are the server's to call */
	void *opaque;
	int listen_fd, conn_fd, wake_fd; /* -1 when unused */
	char *path;
	struct ucred peer; /* the frontend's process, when conn_fd >= 0 (pid 0: unknown) */

	/* vs_vhost_server_drop(), from any thread; under drop_lock: */
	pthread_mutex_t drop_lock;
	bool session; /* a frontend is connected */
	bool drop;    /* ... and must be dropped, because of drop_why */
	char drop_why[VS_VHOST_WHY_LEN + 64];
};

/* The socket appears at its path only once it accepts connections, and never with a mode
 * other than 0600 (vs_listen_unix). */
static int listen_unix(struct vs_vhost_server *srv, const char *path)
{
	char why[PATH_MAX + 128];
	int fd = vs_listen_unix(path, 1, why, sizeof(why));

	if (fd < 0) {
		VS_ERROR(VHOST, "%s", why);
		return fd;
	}
	srv->listen_fd = fd;
	srv->path = strdup(path);
	VS_INFO(VHOST, "listening on %s", path);
	return 0;
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

int vs_vhost_server_peer(const struct vs_vhost_server *srv, pid_t *pid, uid_t *uid)
{
	if (srv->conn_fd < 0 || !srv->peer.pid)
		return -ENOTCONN;
	*pid = srv->peer.pid;
	*uid = srv->peer.uid;
	return 0;
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
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &srv->peer, &(socklen_t){sizeof(srv->peer)}))
		srv->peer = (struct ucred){.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
	pthread_mutex_lock(&srv->drop_lock);
	srv->session = true;
	pthread_mutex_unlock(&srv->drop_lock);
	VS_INFO(VHOST, "frontend connected (fd %d): pid %d uid %u", fd, (int)srv->peer.pid,
		(unsigned)srv->peer.uid);
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
		snprintf(why, whylen, "reply to %s failed: %s",
			 vs_vhost_request_name(reply.request), strerror(-rc));
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
