/* SPDX-License-Identifier: MIT */
/*
 * vhost-user back-end socket: listen on a Unix path, accept one frontend at a time, feed
 * its messages to vs_vhost_backend_handle() and send the replies.
 */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <poll.h>
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

#include "vhost/internal.h"

#define POLL_MS	   200 /* upper bound on noticing *stop without a wake */
#define IO_TIMEOUT 5   /* seconds a started message may take to arrive (or a reply to leave) */

static int fill_addr(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

/* A leftover socket file is replaced only if it is a socket nobody accepts on. */
static int clear_stale(const char *path, const struct sockaddr_un *sa)
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
	VS_INFO(VHOST, "removing stale socket %s", path);
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

static int listen_unix(struct vs_vhost_backend *b, const char *path)
{
	struct sockaddr_un sa;
	int fd = -1, rc;

	if ((rc = fill_addr(&sa, path))) {
		VS_ERROR(VHOST, "socket path too long: %s", path);
		return rc;
	}
	if ((rc = clear_stale(path, &sa)))
		return rc;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = -errno;
		goto out;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		rc = -errno;
		goto out;
	}
	/* Before listen(): nobody can connect while the mode is still the umask's. */
	if (chmod(path, 0600) < 0 || listen(fd, 1) < 0) {
		rc = -errno;
		unlink(path);
		goto out;
	}
	b->listen_fd = fd;
	b->path = strdup(path);
	VS_INFO(VHOST, "listening on %s (%u queues, features %#llx)", path, b->max_queues,
		(unsigned long long)b->offered_features);
	return 0;
out:
	VS_ERROR(VHOST, "cannot listen on %s: %s", path, strerror(-rc));
	if (fd >= 0)
		close(fd);
	return rc;
}

struct vs_vhost_backend *vs_vhost_backend_create(const char *path, unsigned max_queues,
						 uint64_t device_features,
						 const struct vs_vhost_backend_ops *ops,
						 void *opaque)
{
	struct vs_vhost_backend *b = vs_vhost_backend_new(max_queues, device_features, ops, opaque);
	int rc;

	if (!b)
		return NULL;
	b->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (b->wake_fd < 0) {
		rc = -errno;
		VS_ERROR(VHOST, "eventfd: %s", strerror(errno));
		goto fail;
	}
	if ((rc = listen_unix(b, path)))
		goto fail;
	return b;
fail:
	vs_vhost_backend_destroy(b);
	errno = -rc;
	return NULL;
}

static void disconnect(struct vs_vhost_backend *b)
{
	if (b->conn_fd < 0)
		return;
	close(b->conn_fd);
	b->conn_fd = -1;
	vs_vhost_backend_reset(b); /* stops every queue before memory goes away */
	VS_INFO(VHOST, "frontend disconnected; session state released");
	if (b->ops.disconnected)
		b->ops.disconnected(b->opaque);
}

void vs_vhost_server_close(struct vs_vhost_backend *b)
{
	if (b->conn_fd >= 0) {
		close(b->conn_fd);
		b->conn_fd = -1;
	}
	if (b->listen_fd >= 0) {
		close(b->listen_fd);
		b->listen_fd = -1;
		if (b->path)
			unlink(b->path);
	}
	if (b->wake_fd >= 0) {
		close(b->wake_fd);
		b->wake_fd = -1;
	}
	free(b->path);
	b->path = NULL;
}

void vs_vhost_backend_wake(struct vs_vhost_backend *b)
{
	uint64_t one = 1;

	if (b->wake_fd >= 0 && write(b->wake_fd, &one, sizeof(one)) < 0) {
		/* full counter: a wake-up is pending anyway */
	}
}

static void accept_one(struct vs_vhost_backend *b)
{
	struct timeval tv = {.tv_sec = IO_TIMEOUT};
	int fd = accept4(b->listen_fd, NULL, NULL, SOCK_CLOEXEC);

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
	b->conn_fd = fd;
	VS_INFO(VHOST, "frontend connected (fd %d)", fd);
	if (b->ops.connected)
		b->ops.connected(b->opaque);
}

/* One message in, at most one reply out.  Negative: drop the connection. */
static int serve_one(struct vs_vhost_backend *b)
{
	struct vs_vhost_msg msg, reply;
	char why[WHY_LEN] = "";
	int rc;

	rc = vs_vhost_msg_recv(b->conn_fd, &msg, why, sizeof(why));
	if (rc == -ECONNRESET)
		return rc;
	if (rc == -EBADMSG) {
		VS_ERROR(VHOST, "bad message %s (%u) size %u: %s",
			 vs_vhost_request_name(msg.request), msg.request, msg.size, why);
		rc = vs_vhost_backend_reject(b, &msg, &reply);
	} else if (rc) {
		VS_ERROR(VHOST, "receive failed: %s (%d)", why, rc);
		return rc;
	} else {
		rc = vs_vhost_backend_handle(b, &msg, &reply);
	}
	if (rc <= 0)
		return rc;
	rc = vs_vhost_msg_send(b->conn_fd, &reply);
	if (rc)
		VS_ERROR(VHOST, "reply to %s failed: %s", vs_vhost_request_name(reply.request),
			 strerror(-rc));
	return rc;
}

int vs_vhost_backend_serve(struct vs_vhost_backend *b, volatile sig_atomic_t *stop)
{
	if (b->listen_fd < 0)
		return -EINVAL;
	/* Atomic loads: the flag may be set by a signal handler or by another thread. */
	while (!__atomic_load_n(stop, __ATOMIC_RELAXED)) {
		struct pollfd p[2] = {
		    {.fd = b->conn_fd >= 0 ? b->conn_fd : b->listen_fd, .events = POLLIN},
		    {.fd = b->wake_fd, .events = POLLIN},
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
			if (read(b->wake_fd, &v, sizeof(v)) < 0) {
				/* nothing pending: fine */
			}
		}
		if (__atomic_load_n(stop, __ATOMIC_RELAXED) || !p[0].revents)
			continue;
		if (b->conn_fd < 0) {
			accept_one(b);
			continue;
		}
		/* Readable, hung up or in error: recv tells which; failures end the session. */
		int rc = serve_one(b);
		if (rc == -ECONNRESET)
			VS_INFO(VHOST, "frontend closed the connection");
		if (rc < 0)
			disconnect(b);
	}
	return 0;
}
