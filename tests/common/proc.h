/* SPDX-License-Identifier: MIT */
/*
 * A command run to its end: for what must exit by itself (a refused command line, a target
 * that must not start), with a deadline like every other wait.
 */
#ifndef TESTS_COMMON_PROC_H
#define TESTS_COMMON_PROC_H

#include <stddef.h>

/* Run argv (argv[0] the path) with its stderr captured into why (NUL-terminated, cut at
 * whylen - 1 bytes; stdout goes to /dev/null) and wait for it to exit within timeout_ms:
 * its exit status, 128 + the signal that killed it, or -ETIMEDOUT (it was killed) or
 * another -errno. */
int proc_run(const char *const argv[], char *why, size_t whylen, int timeout_ms);

#endif
