/* SPDX-License-Identifier: MIT */
/*
 * systemd's readiness protocol, for `vioscope target` under a Type=notify unit
 * (vioscope-target@.service): one datagram of "KEY=VALUE" lines to the AF_UNIX datagram
 * socket $NOTIFY_SOCKET names, a path or, after '@', an abstract name (sd_notify(3),
 * systemd.io/NOTIFY).  Written here rather than linked from libsystemd: the protocol is
 * a documented, stable datagram that systemd itself suggests reimplementing, and this
 * keeps libsystemd-dev out of the build (docs/DESIGN.md).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tools/commands.h"

int cli_sd_notify(const char *state)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = path ? strlen(path) : 0;
	socklen_t salen;
	ssize_t n;
	int fd, rc = 0;

	if (!len) /* not started by systemd (or by a unit that waits for nothing) */
		return 0;
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* the abstract namespace: no NUL at the end */
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
	if (n < 0)
		rc = -errno;
	else if ((size_t)n != strlen(state))
		rc = -EMSGSIZE;
	close(fd);
	return rc;
}
