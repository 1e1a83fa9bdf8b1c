/* SPDX-License-Identifier: MIT */
/*
 * What the cmocka driver tests share on top of helpers.h: running `vioscope
 * trace` and the workload in a test's struct th_tmpdir, and reading what they
 * leave.  Unlike helpers.c, these fail the running test (cmocka asserts) when a
 * step that every caller relies on goes wrong, so that a test reads as its
 * scenario.  Only the drivers link them: they need cmocka and VIOSCOPE_CLI.
 */
#ifndef VS_TEST_TRACE_DRIVER_H
#define VS_TEST_TRACE_DRIVER_H

#include <sys/types.h>

#include "helpers.h"

/* `vioscope trace ARGS...` (NULL-terminated, at most 8) in TD's trace directory,
 * stdout to td->out and stderr to td->err; returns its exit status. */
int th_cli(const struct th_tmpdir *td, ...) __attribute__((sentinel));

/* Run ARGV (argv[0] a workload binary; NULL-terminated) in TD's trace directory
 * with ENV's "K=V" entries added (NULL-terminated, may be NULL) and stdout to OUT
 * (NULL: not redirected), and wait for it: it must exit 0.  Returns its pid, which
 * names its trace file. */
pid_t th_run_workload(const struct th_tmpdir *td, const char *const argv[], const char *const env[],
		      const char *out);

/* Start ARGV with "-r FD -H" added: a workload that emits, says 'd', then holds
 * (sleeps until killed).  Returns its pid once it has said 'r' (its trace file
 * exists) and 'd' (it has emitted everything). */
pid_t th_start_holding(const struct th_tmpdir *td, const char *const argv[], const char *out);
/* SIGKILL a holding workload (no exit handler runs) and reap it. */
void th_kill_holding(pid_t pid);

/* A workload started with "-r FD -g FD" added: set up, its trace file there, but
 * waiting to be let go before it emits, so that a recorder can attach first. */
struct th_gated {
	pid_t pid;
	int ready, go; /* our ends of its pipes */
};
void th_start_gated(const struct th_tmpdir *td, struct th_gated *w, const char *const argv[],
		    const char *const env[]);
/* Let it emit, wait for it to end, close the pipes; returns its exit status. */
int th_let_go_and_wait(struct th_gated *w);

/* Start `vioscope trace record PID -o OUT` (plus "--enable SPEC" unless ENABLE is
 * NULL) with stderr to td->err, and wait (up to 60 s) until it has attached: PID's
 * trace file is in stream mode with it as the recorder.  SHM is left open on that
 * file for the caller to look at and vs_shm_close.  Returns the recorder's pid. */
pid_t th_start_recording(const struct th_tmpdir *td, pid_t pid, const char *out, const char *enable,
			 struct vs_shm *shm);

/* `vioscope trace dump PID -o td->cap`: it must exit 0. */
void th_dump(const struct th_tmpdir *td, pid_t pid);
/* th_walk CAPTURE; the test fails, with the decoder's reason, unless all of it reads. */
void th_walk_or_fail(const char *capture, th_event_fn fn, void *opaque);
/* th_dump, th_walk_or_fail of the capture, then remove it. */
void th_dump_and_walk(const struct th_tmpdir *td, pid_t pid, th_event_fn fn, void *opaque);

#endif
