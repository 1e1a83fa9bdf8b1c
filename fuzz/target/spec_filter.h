/* SPDX-License-Identifier: MIT */
/*
 * The spec filter of the fuzzers that add LUNs (fuzz_target_rpc.c): a fuzz input must never
 * make the process open a host path of its choosing.  A backend spec may only be
 *   ram=SIZE   without options, at most FZ_RAM_MAX bytes (a bigger one costs time, not
 *              coverage); a size that does not parse goes through (the backend refuses it)
 *   null=SIZE  without options, any size (nothing is allocated)
 *   file=PATH[,ro][,direct]  PATH exactly one of the files the fuzzer made itself in its
 *              private directory (mkdtemp, 0700)
 * Everything else (other kinds, other paths, log-writes= and the test options every kind
 * takes) is refused here, before the target sees it.
 *
 * The fuzzer's target also runs with its lun_root (--lun-root) set to fz_files.dir, so that
 * the target itself refuses a file outside it that this filter might let through.
 */
#ifndef FUZZ_SPEC_FILTER_H
#define FUZZ_SPEC_FILTER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FZ_RAM_MAX (4ull << 20)

/* The test files, by index in the dictionary of fuzz_target_rpc.c. */
enum fz_file { FZ_FILE_A, FZ_FILE_B, FZ_FILE_ODD, FZ_FILE_EMPTY, FZ_NFILES };

struct fz_files {
	char dir[PATH_MAX];
	char path[FZ_NFILES][PATH_MAX];
	int fd[FZ_NFILES]; /* kept open: each input resets the files through them */
};

/* Make the private directory and its files (traps if it cannot): under /dev/shm when there
 * is one (every input's target flushes its file LUNs at the end: fdatasync costs nothing
 * on tmpfs), else $TMPDIR or /tmp.  Removed at exit; a run that crashes leaves it behind
 * (libFuzzer's crash handler exits without atexit handlers): vioscope-fuzz-XXXXXX. */
void fz_files_init(struct fz_files *f);

/* Each input starts from the same files: their first sizes, all zeros (what a previous
 * input wrote, or resized, is gone). */
void fz_files_reset(const struct fz_files *f);

/* Whether the backend spec may reach the target. */
bool fz_spec_allowed(const struct fz_files *f, const char *spec);

/* Whether a JSON-RPC request line may reach the target: the spec of every lun_add in it (a
 * request, or each one of a batch) is allowed.  The line is parsed as vs_rpc_handle parses
 * it, and the method and spec are found as it finds them; a line it would refuse before
 * any method runs (not JSON, a spec that is not a string) goes through. */
bool fz_line_allowed(const struct fz_files *f, const char *line, size_t len);

#endif
