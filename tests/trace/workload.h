/* SPDX-License-Identifier: MIT */
/*
 * What the traced workload program (workload.c) emits, shared with the tests that
 * check it: each numbered event's format and values are a pure function of
 * (thread, number), so a test can rebuild the exact expected message.
 */
#ifndef VS_TEST_TRACE_WORKLOAD_H
#define VS_TEST_TRACE_WORKLOAD_H

#include <stdint.h>
#include <stdio.h>

/* One numbered event: thread index, sequence number, and values that change with
 * it (a 64-bit mix, a negative int, a string of varying length) so records have
 * different sizes and land at every offset of a ring. */
#define WL_SEQ_FMT "seq t=%u i=%u v=%#llx d=%d s=%s"

static const char wl_alphabet[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

static inline unsigned long long wl_mix(unsigned t, unsigned i)
{
	return (unsigned long long)i * 0x9e3779b97f4a7c15ull ^ ((unsigned long long)t << 56);
}

static inline int wl_neg(unsigned i)
{
	return -(int)(i % 100000u) - 1;
}

/* Points into wl_alphabet: a suffix of length (i * 7 + t) % 41. */
static inline const char *wl_str(unsigned t, unsigned i)
{
	unsigned len = (i * 7u + t) % 41u;
	return wl_alphabet + (sizeof wl_alphabet - 1 - len);
}

static inline int wl_expect_seq(char *buf, size_t len, unsigned t, unsigned i)
{
	return snprintf(buf, len, WL_SEQ_FMT, t, i, wl_mix(t, i), wl_neg(i), wl_str(t, i));
}

/* Live control (tick mode): one command byte in, a u32 reply out. */
#define WL_CMD_COUNT 'c' /* reply: number of ticks emitted so far */
#define WL_CMD_QUIT  'q' /* reply: final count, then exit 0 */

#define WL_TICK_FMT "tick %u"

/* Unique strings for the flavour checks (check_flavour_strings.cmake). */
#define WL_OFFCHECK_FMT "vioscope-offcheck-%d-unique"
#define WL_HPCHECK_FMT	"vioscope-hpcheck-%d-unique"

#endif
