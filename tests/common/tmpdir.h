/* SPDX-License-Identifier: MIT */
/*
 * Scratch directories: every test that needs files makes one of its own (mkdtemp) and
 * removes it with everything in it, also after a failed assertion left files behind.
 */
#ifndef TESTS_COMMON_TMPDIR_H
#define TESTS_COMMON_TMPDIR_H

#include <stddef.h>

/* A fresh directory BASE/vioscope-TAG-XXXXXX into dir (BASE: base, else $TMPDIR, else
 * /tmp).  0 or -errno. */
int tmpdir_make(char *dir, size_t len, const char *base, const char *tag);
/* Remove dir and everything below it (links are removed, not followed).  0 or -errno. */
int tmpdir_remove(const char *dir);

#endif
