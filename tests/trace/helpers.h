/* SPDX-License-Identifier: MIT */
/*
 * Helpers for the trace test drivers: scratch trace directories, running the
 * workload and the CLI as child processes, and walking capture files.  The
 * drivers link the tools library only (no trace runtime), so they never create
 * a trace file of their own.
 */
#ifndef VS_TEST_TRACE_HELPERS_H
#define VS_TEST_TRACE_HELPERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "deadline.h" /* wait_until: every wait has a deadline */
#include "tmpdir.h"   /* scratch directories */
#include "tracetools/tracetools.h"

/* A test's own trace directory, the cmocka fixture of the driver tests: every
 * program a test starts gets VIOSCOPE_TRACE_DIR=DIR, so no test sees another's
 * trace files. */
struct th_tmpdir {
	char dir[512];	   /* from tmpdir_make; removed with everything in it */
	char env_dir[600]; /* "VIOSCOPE_TRACE_DIR=DIR", for th_spawn's ENV */
	/* Next to DIR, not in it, since tests count the files in DIR; also removed. */
	char out[600], err[600]; /* where a test sends the CLI's stdout and stderr */
	char cap[600];		 /* a scratch capture file */
};
/* Make T's directory (tmpdir_make, named after TAG) and paths; 0 or -errno. */
int th_tmpdir_init(struct th_tmpdir *t, const char *tag);
/* Remove the directory, the files in it and the files next to it. */
void th_tmpdir_fini(struct th_tmpdir *t);
/* The same as a cmocka setup/teardown pair: *state becomes a calloc'd struct
 * th_tmpdir.  A test file's setup is `return th_tmpdir_setup(state, "TAG");`. */
int th_tmpdir_setup(void **state, const char *tag);
int th_tmpdir_teardown(void **state);

/* Number of entries in DIR whose name starts with PREFIX (NULL: all). */
int th_count_files(const char *dir, const char *prefix);

/* Start ARGV[0] with ARGV, the current environment plus ENV ("K=V" entries,
 * NULL-terminated, may be NULL) overriding it, stdout/stderr redirected to files
 * when OUT/ERR are set, and KEEP_FDS (-1-terminated, may be NULL) inherited.
 * Returns the pid, or -1. */
pid_t th_spawn(const char *const argv[], const char *const env[], const int keep_fds[],
	       const char *out, const char *err);
/* Exit status of PID, or 128 + signal; -1 on error. */
int th_wait(pid_t pid);
/* th_wait with a deadline: at TIMEOUT_MS, PID is killed (SIGKILL), reaped, and -2 is
 * returned. */
int th_wait_within(pid_t pid, unsigned timeout_ms);
/* th_spawn + th_wait. */
int th_run(const char *const argv[], const char *const env[], const char *out, const char *err);
/* Read a whole file, NUL-terminated (malloc'd); NULL on error. */
char *th_read_file(const char *path, size_t *len);
int th_write_file(const char *path, const void *data, size_t len);
/* Does the file contain needle?  When not, prints the file (for the failing test). */
bool th_file_contains(const char *path, const char *needle);

/* A close-on-exec pipe; th_spawn's KEEP_FDS are made inheritable in the child only,
 * so other children never hold a stray end open. */
int th_pipe(int fds[2]);
/* Read exactly one byte; returns it, or -1 on EOF/error. */
int th_read_byte(int fd);

/* Path of the trace file for PID in DIR. */
void th_shm_path(char *out, size_t len, const char *dir, pid_t pid);

/* Every event of a capture, in the decoder's order, with its formatted message.
 * A callback returning non-zero stops the walk. */
struct th_event {
	const struct vs_cap_event *ev; /* raw event; ev->site NULL for a loss marker */
	const char *msg;	       /* formatted message ("" for loss markers) */
	int fmt_rc;		       /* vs_format_message's result */
};
typedef int (*th_event_fn)(const struct th_event *e, void *opaque);
/* 0, the callback's non-zero value, or a negative error with `why`. */
int th_walk(const char *capture, th_event_fn fn, void *opaque, char *why, size_t whylen);

#endif
