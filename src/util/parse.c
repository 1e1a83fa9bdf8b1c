/* SPDX-License-Identifier: MIT */
/* Numbers from command lines and specs: strict, so that a typo is an error, not a zero. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/util.h"

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

int vs_parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!s || !is_digit(*s))
		return -EINVAL; /* strtoull would take a sign or leading space */
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno || v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int vs_parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	unsigned shift = 0;
	const char *p = s;

	bool big = false;

	if (!s || !is_digit(*s))
		return -EINVAL;
	for (; is_digit(*p); p++) {
		if (v > (uint64_t)(INT64_MAX - (*p - '0')) / 10)
			big = true; /* keep going: a malformed tail is still -EINVAL */
		else
			v = v * 10 + (uint64_t)(*p - '0');
	}
	switch (*p) {
	case 'k':
	case 'K':
		shift = 10;
		p++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		p++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		p++;
		break;
	case 't':
	case 'T':
		shift = 40;
		p++;
		break;
	default:
		break;
	}
	if (*p)
		return -EINVAL;
	/* Sizes become off_t and JSON integers: both signed 64-bit. */
	if (big || v > (uint64_t)INT64_MAX >> shift)
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int vs_parse_seconds(const char *s, double *out)
{
	char *end;
	double v;

	if (!s || !(is_digit(*s) || *s == '.'))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= 0))
		return -EINVAL;
	*out = v;
	return 0;
}
