/* SPDX-License-Identifier: MIT */
/*
 * Numbers read one after another out of a capture (event sequence numbers,
 * ticks): how many, the first and the last, and whether each was one more than
 * the one before.  Header-only, so that the in-process tests, which link no
 * test helpers, can use it too.
 */
#ifndef VS_TEST_TRACE_SEQUENCE_H
#define VS_TEST_TRACE_SEQUENCE_H

#include <stdbool.h>

struct th_sequence {
	unsigned n;	      /* numbers seen */
	unsigned first, last; /* valid when n > 0 */
	bool contiguous;      /* each one was the one before plus one (n > 0) */
};

static inline void th_sequence_add(struct th_sequence *s, unsigned v)
{
	if (s->n == 0) {
		s->first = v;
		s->contiguous = true;
	} else if (v != s->last + 1) {
		s->contiguous = false;
	}
	s->last = v;
	s->n++;
}

#endif
