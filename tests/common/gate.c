/* SPDX-License-Identifier: MIT */
/* The test gate's socket: see gate.h. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "deadline.h"
#include "gate.h"

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return fd;
	rc = -errno;
	close(fd);
	return rc;
}

int unix_connect_wait(const char *path, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	int fd;

	while ((fd = unix_connect(path)) < 0 && now_ms() < deadline)
		poll(NULL, 0, 10);
	return fd;
}

int line_send(int fd, const char *line)
{
	size_t len = strlen(line);

	while (len) {
		ssize_t n = send(fd, line, len, MSG_NOSIGNAL);

		if (n <= 0)
			return n < 0 ? -errno : -EPIPE;
		line += n;
		len -= (size_t)n;
	}
	return 0;
}

int line_recv(int fd, char *buf, size_t len, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	size_t n = 0;

	while (n + 1 < len) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		uint64_t now = now_ms();

		if (now >= deadline || poll(&pf, 1, (int)(deadline - now)) != 1)
			return -ETIMEDOUT;
		if (read(fd, buf + n, 1) != 1)
			return -EPIPE;
		if (buf[n] == '\n')
			break;
		n++;
	}
	buf[n] = 0;
	return 0;
}

int gate_listen(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 1) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

int gate_accept(int lfd, int timeout_ms)
{
	struct pollfd pf = {.fd = lfd, .events = POLLIN};
	int fd;

	if (poll(&pf, 1, timeout_ms) != 1)
		return -ETIMEDOUT;
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int gate_next(int fd, unsigned *held, unsigned *total, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	char line[64];

	for (;;) {
		uint64_t now = now_ms();
		int rc = now < deadline ? line_recv(fd, line, sizeof(line), (int)(deadline - now))
					: -ETIMEDOUT;

		if (rc)
			return rc;
		if (sscanf(line, "held %u %u", held, total) == 2)
			return 0;
	}
}

int gate_wait_held(int fd, unsigned n, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	unsigned held, total;

	for (;;) {
		uint64_t now = now_ms();
		int rc = now < deadline ? gate_next(fd, &held, &total, (int)(deadline - now))
					: -ETIMEDOUT;

		if (rc)
			return rc;
		if (held >= n)
			return 0;
	}
}
