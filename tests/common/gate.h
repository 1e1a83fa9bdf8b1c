/* SPDX-License-Identifier: MIT */
/*
 * The test's end of a backend's test gate in another process (gate-sock=PATH,
 * src/backend/gate.c): the backend connects when it opens, tells "held H T" each time the
 * number of bios it holds changes, and takes "release N" and "open".  Also the connection
 * and line I/O of the target's management socket.  Functions return 0, an fd, or -errno.
 */
#ifndef TESTS_COMMON_GATE_H
#define TESTS_COMMON_GATE_H

#include <stddef.h>

/* Listen at path (before the backend opens), then accept its connection. */
int gate_listen(const char *path);
int gate_accept(int lfd, int timeout_ms);
/* Read the gate's "held H T" lines until one says H >= n: 0 or -ETIMEDOUT. */
int gate_wait_held(int fd, unsigned n, int timeout_ms);
/* The next "held H T" line within timeout_ms. */
int gate_next(int fd, unsigned *held, unsigned *total, int timeout_ms);

/* Connect to the unix stream socket at path (the target's management socket), trying again
 * until it accepts (it listens a moment after the vhost-user socket) or timeout_ms passed:
 * the fd or -errno. */
int unix_connect_wait(const char *path, int timeout_ms);
/* Send all of line / receive one line (its newline dropped) within timeout_ms. */
int line_send(int fd, const char *line);
int line_recv(int fd, char *buf, size_t len, int timeout_ms);

#endif
