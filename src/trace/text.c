/* SPDX-License-Identifier: MIT */
/*
 * The text of an event line, the same from the print backend (runtime.c) and the
 * decoder (src/tracetools): the prefix, wall-clock time, byte arrays in hex, and a
 * format's decode-time notes dropped for printf.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "trace/trace_shared.h"

/* name: lower-case letters, digits, '_' */
size_t vs_note_len(const char *f)
{
	size_t n = 1;
	if (f[0] != '{')
		return 0;
	while ((f[n] >= 'a' && f[n] <= 'z') || (f[n] >= '0' && f[n] <= '9') || f[n] == '_')
		n++;
	return n > 1 && f[n] == '}' && n <= VS_NOTE_NAME_MAX ? n + 1 : 0;
}

size_t vs_format_drop_notes(char *out, size_t outlen, const char *fmt)
{
	size_t n = 0;
	bool after_conversion = false;
	if (!outlen)
		return 0;
	for (const char *f = fmt; *f && n + 1 < outlen;) {
		size_t skip = after_conversion ? vs_note_len(f) : 0;
		if (skip) {
			f += skip;
			after_conversion = false;
			continue;
		}
		after_conversion = false;
		if (f[0] == '%' && f[1] == '%') {
			out[n++] = *f++;
			if (n + 1 < outlen)
				out[n++] = *f++;
			continue;
		}
		if (f[0] == '%') {
			/* copy the conversion up to its conversion character */
			out[n++] = *f++;
			while (*f && n + 1 < outlen && strchr("-+ #0'*.0123456789hljztqL", *f))
				out[n++] = *f++;
			if (*f && n + 1 < outlen)
				out[n++] = *f++;
			after_conversion = true;
			continue;
		}
		out[n++] = *f++;
	}
	out[n] = '\0';
	return n;
}

void vs_format_walltime(char *out, size_t outlen, uint64_t real_ns)
{
	time_t sec = (time_t)(real_ns / 1000000000ull);
	struct tm tm;
	char date[32];
	localtime_r(&sec, &tm);
	strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &tm);
	snprintf(out, outlen, "%s.%09llu", date, (unsigned long long)(real_ns % 1000000000ull));
}

int vs_format_prefix(char *out, size_t outlen, uint64_t real_ns, uint32_t tid, unsigned level,
		     const char *provider, const char *flag, const char *caller, const char *func)
{
	char t[64], pf[128];
	static const char *const tags[] = {"OFF", "CRIT", "ERROR", "WARN", "INFO", "VERB"};
	vs_format_walltime(t, sizeof t, real_ns);
	snprintf(pf, sizeof pf, "%s%s%s", provider ? provider : "",
		 provider && provider[0] ? "." : "", flag ? flag : "?");
	return snprintf(out, outlen, "%s %-6u %-5s %-14s %s%s%s: ", t, tid,
			level <= VS_LEVEL_MAX ? tags[level] : "?", pf, caller ? caller : "",
			caller ? ">" : "", func ? func : "?");
}

char *vs_format_hex(char *out, size_t outlen, const uint8_t *p, size_t n, bool cut)
{
	static const char digits[] = "0123456789abcdef";
	size_t o = 0;
	if (!outlen)
		return out;
	for (size_t i = 0; i < n && o + 2 < outlen; i++) {
		out[o++] = digits[p[i] >> 4];
		out[o++] = digits[p[i] & 15];
	}
	if (cut && o + 5 < outlen) {
		memcpy(out + o, "[...]", 5);
		o += 5;
	}
	out[o] = '\0';
	return out;
}
