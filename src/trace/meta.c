/* SPDX-License-Identifier: MIT */
/*
 * The metadata blob: every site, flag name and inline caller of a program,
 * serialised from the program's own ELF sections so tools can decode events
 * without the binary.  Little-endian, length-prefixed, validated on parse.
 *
 *   u32 magic 'VSMD', u32 version 1, u32 nsites, u32 nflags, u32 ncallers, u32 site_base
 *   site:   u32 line, u8 level, u8 flag, u8 hot, u8 nargs, u8 types[16],
 *           str file, str func, str fmt, str flag_name
 *   flag:   u32 bit, str name
 *   caller: u32 line, str func, str file
 *   str:    u16 length, bytes (no NUL)
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "trace/tracetools.h"

#define META_MAGIC 0x444d5356u /* "VSMD" */

extern const struct vs_site __start_vs_trace_sites[] __attribute__((weak));
extern const struct vs_site __stop_vs_trace_sites[] __attribute__((weak));
extern const struct vs_caller __start_vs_trace_callers[] __attribute__((weak));
extern const struct vs_caller __stop_vs_trace_callers[] __attribute__((weak));
extern const struct vs_flag_name __start_vs_trace_flagnames[] __attribute__((weak));
extern const struct vs_flag_name __stop_vs_trace_flagnames[] __attribute__((weak));

struct buf {
	uint8_t *p;
	size_t len, cap;
	int err;
};

static void put(struct buf *b, const void *v, size_t n)
{
	if (b->err)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 4096;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *p = realloc(b->p, cap);
		if (!p) {
			b->err = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, v, n);
	b->len += n;
}
static void put32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void put_str(struct buf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n > 0xffff)
		n = 0xffff;
	uint16_t l = (uint16_t)n;
	put(b, &l, 2);
	put(b, s, n);
}

int vs_meta_build_self(void **blob, size_t *len)
{
	struct buf b = { 0 };
	const struct vs_site *s0 = __start_vs_trace_sites, *s1 = __stop_vs_trace_sites;
	const struct vs_caller *c0 = __start_vs_trace_callers, *c1 = __stop_vs_trace_callers;
	const struct vs_flag_name *f0 = __start_vs_trace_flagnames, *f1 = __stop_vs_trace_flagnames;
	uint32_t nsites = s0 ? (uint32_t)(s1 - s0) : 0;
	uint32_t ncallers = c0 ? (uint32_t)(c1 - c0) : 0;
	const char *names[32] = { 0 };
	uint32_t nflags = 0;

	/* Every translation unit contributes the names it knows; keep one per bit. */
	for (const struct vs_flag_name *f = f0; f && f < f1; f++)
		if (f->bit < 32 && !names[f->bit])
			names[f->bit] = f->name;
	for (uint32_t i = 0; i < nsites; i++)
		if (s0[i].flag < 32 && !names[s0[i].flag])
			names[s0[i].flag] = s0[i].flag_name;
	for (int i = 0; i < 32; i++)
		nflags += names[i] != NULL;

	put32(&b, META_MAGIC);
	put32(&b, 1);
	put32(&b, nsites);
	put32(&b, nflags);
	put32(&b, ncallers);
	/* Events carry the low 32 bits of their site's address: this maps them back. */
	put32(&b, (uint32_t)(uintptr_t)s0);
	for (uint32_t i = 0; i < nsites; i++) {
		const struct vs_site *s = &s0[i];
		put32(&b, s->line);
		uint8_t small[4] = { s->level, s->flag, s->hot, s->nargs };
		put(&b, small, 4);
		put(&b, s->types, VS_TRACE_MAX_ARGS);
		put_str(&b, s->file);
		put_str(&b, s->func);
		put_str(&b, s->fmt);
		put_str(&b, s->flag_name);
	}
	for (uint32_t i = 0; i < 32; i++) {
		if (!names[i])
			continue;
		put32(&b, i);
		put_str(&b, names[i]);
	}
	for (uint32_t i = 0; i < ncallers; i++) {
		put32(&b, c0[i].line);
		put_str(&b, c0[i].func);
		put_str(&b, c0[i].file);
	}
	if (b.err) {
		free(b.p);
		return b.err;
	}
	*blob = b.p;
	*len = b.len;
	return 0;
}

struct rd {
	const uint8_t *p;
	size_t len, off;
	char *why;
	size_t whylen;
	int err;
	char *strs;
	size_t strs_off;
};

static void fail(struct rd *r, const char *fmt, ...)
{
	va_list ap;
	if (r->err)
		return;
	r->err = -EINVAL;
	int n = snprintf(r->why, r->whylen, "metadata byte %zu: ", r->off);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < r->whylen)
		vsnprintf(r->why + n, r->whylen - (size_t)n, fmt, ap);
	va_end(ap);
}

static bool need(struct rd *r, size_t n, const char *what)
{
	if (r->err)
		return false;
	if (n > r->len - r->off) {
		fail(r, "truncated %s (needs %zu bytes, %zu left)", what, n, r->len - r->off);
		return false;
	}
	return true;
}

static uint32_t get32(struct rd *r, const char *what)
{
	uint32_t v = 0;
	if (need(r, 4, what)) {
		memcpy(&v, r->p + r->off, 4);
		r->off += 4;
	}
	return v;
}

static const char *get_str(struct rd *r, const char *what)
{
	uint16_t n = 0;
	if (!need(r, 2, what))
		return "";
	memcpy(&n, r->p + r->off, 2);
	r->off += 2;
	if (!need(r, n, what))
		return "";
	char *s = r->strs + r->strs_off;
	memcpy(s, r->p + r->off, n);
	s[n] = '\0';
	/* Strings are shown to people: no control characters from a hostile file. */
	for (uint16_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
			s[i] = '?';
	r->off += n;
	r->strs_off += (size_t)n + 1;
	return s;
}

int vs_meta_parse(struct vs_meta *m, const void *blob, size_t len, char *why, size_t whylen)
{
	struct rd r = { .p = blob, .len = len, .why = why, .whylen = whylen };
	memset(m, 0, sizeof *m);
	if (whylen)
		why[0] = '\0';

	uint32_t magic = get32(&r, "header");
	uint32_t version = get32(&r, "header");
	uint32_t nsites = get32(&r, "header");
	uint32_t nflags = get32(&r, "header");
	uint32_t ncallers = get32(&r, "header");
	m->site_base = get32(&r, "header");
	if (!r.err && magic != META_MAGIC)
		fail(&r, "bad magic %#x", magic);
	if (!r.err && version != 1)
		fail(&r, "unsupported metadata version %u", version);
	/* Each entry takes at least a few bytes: bounds the allocations by the input. */
	if (!r.err && ((uint64_t)nsites * 32 > len || nflags > 32 || (uint64_t)ncallers * 8 > len))
		fail(&r, "counts (sites %u, flags %u, callers %u) exceed the metadata size %zu",
		     nsites, nflags, ncallers, len);
	if (r.err)
		return r.err;
	/* Every string fits in len bytes plus one NUL per string. */
	r.strs = malloc(len + (size_t)nsites * 4 + nflags + (size_t)ncallers * 2 + 1);
	m->sites = calloc(nsites ? nsites : 1, sizeof *m->sites);
	m->callers = calloc(ncallers ? ncallers : 1, sizeof *m->callers);
	if (!r.strs || !m->sites || !m->callers) {
		free(r.strs);
		free(m->sites);
		free(m->callers);
		m->sites = NULL;
		m->callers = NULL;
		return -ENOMEM;
	}
	m->strings = r.strs;
	for (uint32_t i = 0; i < nsites && !r.err; i++) {
		struct vs_meta_site *s = &m->sites[i];
		s->line = get32(&r, "site");
		if (!need(&r, 4 + VS_TRACE_MAX_ARGS, "site"))
			break;
		s->level = r.p[r.off];
		s->flag = r.p[r.off + 1];
		s->hot = r.p[r.off + 2];
		s->nargs = r.p[r.off + 3];
		memcpy(s->types, r.p + r.off + 4, VS_TRACE_MAX_ARGS);
		r.off += 4 + VS_TRACE_MAX_ARGS;
		if (s->level < 1 || s->level > VS_LEVEL_MAX)
			fail(&r, "site %u: level %u out of range", i, s->level);
		else if (s->flag >= 32)
			fail(&r, "site %u: flag bit %u out of range", i, s->flag);
		else if (s->nargs > VS_TRACE_MAX_ARGS)
			fail(&r, "site %u: %u arguments (max %d)", i, s->nargs, VS_TRACE_MAX_ARGS);
		for (unsigned a = 0; a < s->nargs && !r.err; a++)
			if (s->types[a] < VS_ARG_I32 || s->types[a] > VS_ARG_LDBL)
				fail(&r, "site %u: argument %u has unknown type %u", i, a,
				     s->types[a]);
		s->file = get_str(&r, "site file");
		s->func = get_str(&r, "site function");
		s->fmt = get_str(&r, "site format");
		s->flag_name = get_str(&r, "site flag name");
	}
	for (uint32_t i = 0; i < nflags && !r.err; i++) {
		uint32_t bit = get32(&r, "flag");
		const char *name = get_str(&r, "flag name");
		if (!r.err && bit >= 32)
			fail(&r, "flag bit %u out of range", bit);
		else if (!r.err)
			m->flag_names[bit] = name;
	}
	for (uint32_t i = 0; i < ncallers && !r.err; i++) {
		m->callers[i].line = get32(&r, "caller");
		m->callers[i].func = get_str(&r, "caller function");
		m->callers[i].file = get_str(&r, "caller file");
	}
	if (r.err) {
		vs_meta_free(m);
		return r.err;
	}
	m->nsites = nsites;
	m->nflags = nflags;
	m->ncallers = ncallers;
	return 0;
}

void vs_meta_free(struct vs_meta *m)
{
	free(m->sites);
	free(m->callers);
	free(m->strings);
	memset(m, 0, sizeof *m);
}

int vs_meta_flag_bit(const struct vs_meta *m, const char *name)
{
	for (int i = 0; i < 32; i++)
		if (m->flag_names[i] && strcasecmp(m->flag_names[i], name) == 0)
			return i;
	return -1;
}

static const char *const level_names[] = { "off", "critical", "error", "warning", "info",
					   "verbose" };

const char *vs_level_name(unsigned level)
{
	return level <= VS_LEVEL_MAX ? level_names[level] : "?";
}

void vs_ctl_compute(struct vs_trace_control *ctl, uint32_t level, uint32_t mask)
{
	memset(ctl, 0, sizeof *ctl);
	for (uint32_t l = 1; l <= VS_LEVEL_MAX; l++)
		ctl->enabled[l] = l <= level ? mask : 0;
}

void vs_ctl_store(struct vs_shm_header *h, uint32_t level, uint32_t mask)
{
	struct vs_trace_control c;
	vs_ctl_compute(&c, level, mask);
	h->level = level;
	h->flags = mask;
	/* Word by word: sites read them with plain loads while we write. */
	for (int i = 0; i < 8; i++)
		__atomic_store_n(&h->ctl.enabled[i], c.enabled[i], __ATOMIC_RELAXED);
}

int vs_spec_parse(const char *spec, const char *const flag_names[32], uint32_t *level,
		  uint32_t *mask, char *why, size_t whylen)
{
	char lv[32];
	const char *colon = strchr(spec, ':');
	size_t n = colon ? (size_t)(colon - spec) : strlen(spec);

	if (n == 0 || n >= sizeof lv) {
		snprintf(why, whylen, "expected LEVEL[:FLAG,...], LEVEL one of off, critical, "
				      "error, warning, info, verbose (or 0-5)");
		return -EINVAL;
	}
	memcpy(lv, spec, n);
	lv[n] = '\0';
	*level = 99;
	for (unsigned i = 0; i <= VS_LEVEL_MAX; i++)
		if (strcasecmp(lv, level_names[i]) == 0)
			*level = i;
	if (strcasecmp(lv, "warn") == 0)
		*level = VS_LEVEL_WARNING;
	if (n == 1 && lv[0] >= '0' && lv[0] <= '5')
		*level = (uint32_t)(lv[0] - '0');
	if (*level == 99) {
		snprintf(why, whylen, "unknown level '%s' (off, critical, error, warning, info, "
				      "verbose, or 0-5)", lv);
		return -EINVAL;
	}
	*mask = 0xffffffffu;
	if (!colon)
		return 0;
	*mask = 0;
	const char *p = colon + 1;
	if (!*p) {
		snprintf(why, whylen, "no flags after ':' (use 'all' or names)");
		return -EINVAL;
	}
	while (*p) {
		char name[64];
		size_t k = strcspn(p, ",+|");
		if (k == 0 || k >= sizeof name) {
			snprintf(why, whylen, "empty or overlong flag name in '%s'", colon + 1);
			return -EINVAL;
		}
		memcpy(name, p, k);
		name[k] = '\0';
		if (strcasecmp(name, "all") == 0) {
			*mask = 0xffffffffu;
		} else if (name[0] == '0' && (name[1] == 'x' || name[1] == 'X')) {
			char *end;
			unsigned long v = strtoul(name, &end, 16);
			if (*end || v > 0xffffffffu) {
				snprintf(why, whylen, "bad flag mask '%s'", name);
				return -EINVAL;
			}
			*mask |= (uint32_t)v;
		} else {
			int bit = -1;
			for (int i = 0; i < 32 && bit < 0; i++)
				if (flag_names && flag_names[i] && strcasecmp(flag_names[i], name) == 0)
					bit = i;
			if (bit < 0) {
				char known[512] = "";
				for (int i = 0; i < 32; i++) {
					if (!flag_names || !flag_names[i])
						continue;
					size_t used = strlen(known);
					snprintf(known + used, sizeof known - used, "%s%s",
						 used ? ", " : "", flag_names[i]);
				}
				for (char *c = known; *c; c++)
					*c = (char)tolower((unsigned char)*c);
				snprintf(why, whylen, "unknown flag '%s' (known: %s)", name,
					 known[0] ? known : "none");
				return -EINVAL;
			}
			*mask |= 1u << bit;
		}
		p += k;
		if (*p)
			p++;
	}
	return 0;
}
