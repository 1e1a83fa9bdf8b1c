/* SPDX-License-Identifier: MIT */
/* Numbers from command lines and specs: strict, so that a typo is an error, not a zero. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* A case-insensitive match of the whole of s against word. */
static bool is_word(const char *s, const char *word)
{
	for (; *word; s++, word++)
		if ((*s | 0x20) != *word)
			return false;
	return !*s;
}

/* K, KiB, KB (all powers of 1024: KiB as IEC says, K and KB as fio takes them by default),
 * M, G, T, P, E; B or nothing: bytes. */
static int size_shift(const char *suffix, unsigned *shift)
{
	static const char units[] = "kmgtpe";
	const char *u;

	if (!*suffix || is_word(suffix, "b")) {
		*shift = 0;
		return 0;
	}
	u = strchr(units, *suffix | 0x20);
	if (!u ||
	    !(is_word(suffix + 1, "") || is_word(suffix + 1, "b") || is_word(suffix + 1, "ib")))
		return -EINVAL;
	*shift = 10 * (unsigned)(u - units + 1);
	return 0;
}

int vs_parse_size(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	unsigned shift;
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
	if (size_shift(p, &shift))
		return -EINVAL;
	/* Sizes become off_t and JSON integers: both signed 64-bit. */
	if (big || v > (uint64_t)INT64_MAX >> shift)
		return -ERANGE;
	*out = v << shift;
	return 0;
}

/* us, ms, s (or nothing), m or min, h, d: how many seconds one is. */
static int time_unit(const char *suffix, double *secs)
{
	static const struct {
		const char *name;
		double secs;
	} units[] = {{"", 1},	{"s", 1},    {"us", 1e-6}, {"ms", 1e-3},
		     {"m", 60}, {"min", 60}, {"h", 3600},  {"d", 86400}};

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (is_word(suffix, units[i].name)) {
			*secs = units[i].secs;
			return 0;
		}
	return -EINVAL;
}

int vs_parse_seconds(const char *s, double *out)
{
	double v, unit;
	char *end;

	if (!s || !(is_digit(*s) || *s == '.'))
		return -EINVAL;
	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || time_unit(end, &unit) || !(v >= 0))
		return -EINVAL;
	/* strtod reads "1e3", "0x10", "inf" too: only plain decimals are times here. */
	for (const char *p = s; p < end; p++)
		if (!is_digit(*p) && *p != '.')
			return -EINVAL;
	v *= unit;
	if (!(v < 1e12)) /* past 30,000 years: a typo, and beyond what a deadline holds */
		return -EINVAL;
	*out = v;
	return 0;
}
