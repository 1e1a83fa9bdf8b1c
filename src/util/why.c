/* SPDX-License-Identifier: MIT */
/* Error reasons: one sentence saying what was wrong, written where the caller asked. */
#include <stdio.h>

#include "util/util.h"

int vs_vfail(char *why, size_t whylen, int rc, const char *fmt, va_list ap)
{
	if (why && whylen)
		vsnprintf(why, whylen, fmt, ap);
	return rc;
}

int vs_fail(char *why, size_t whylen, int rc, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vs_vfail(why, whylen, rc, fmt, ap);
	va_end(ap);
	return rc;
}
