/* SPDX-License-Identifier: MIT */
/*
 * The metadata: what every loaded object declared (providers, flags, sites, callers),
 * written by the runtime as each object registers so tools can decode events without
 * the binaries, and read back by the tools.  A stream of self-delimiting records,
 * little-endian, validated on parse (docs/CAPTURE-FORMAT.md):
 *
 *   record:   u32 kind, u32 size (whole record, multiple of 8)
 *   OBJECT:   u32 index, u32 first_site, u32 nsites, u32 ncallers, u32 nproviders,
 *             u32 flags (VS_META_OBJECT_STAGES), u64 base, str path, str flavour,
 *             provider x nproviders: u32 slot, u32 nflags, str name, str flag x nflags
 *             site x nsites: u32 line, u8 level, u8 flag, u8 hot, u8 nargs, u8 provider,
 *                            u8 print, u8 also, u8 0, u8 types[16], str file, str func,
 *                            str fmt
 *             caller x ncallers: u32 line, str func, str file
 *             with VS_META_OBJECT_STAGES: u32 nstages,
 *             stage x nstages: u32 site (index in this object), str name, str fields
 *   UNLOAD:   u32 index, u32 0, u64 timestamp
 *   str:      u16 length, bytes (no NUL)
 *
 * Captures made before providers hold one version 1 blob instead (vs_meta_parse_v1).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "trace/trace_shared.h"

#define META_V1_MAGIC 0x444d5356u /* "VSMD" */

/* ---- writing ---------------------------------------------------------------------------- */
void vs_buf_put(struct vs_buf *b, const void *v, size_t n)
{
	if (b->err || !n)
		return;
	if (n > SIZE_MAX / 4 - b->len) {
		b->err = -ENOMEM;
		return;
	}
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

void vs_buf_free(struct vs_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

static void put32(struct vs_buf *b, uint32_t v)
{
	vs_buf_put(b, &v, 4);
}
static void put64(struct vs_buf *b, uint64_t v)
{
	vs_buf_put(b, &v, 8);
}
static void put_str(struct vs_buf *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	if (n > 0xffff)
		n = 0xffff;
	uint16_t l = (uint16_t)n;
	vs_buf_put(b, &l, 2);
	vs_buf_put(b, s, n);
}

/* Starts a record; returns where, for end_record. */
static size_t begin_record(struct vs_buf *b, uint32_t kind)
{
	size_t at = b->len;
	put32(b, kind);
	put32(b, 0);
	return at;
}
static void end_record(struct vs_buf *b, size_t at)
{
	static const uint8_t zeros[8];
	vs_buf_put(b, zeros, (8 - (b->len - at) % 8) % 8);
	if (!b->err) {
		uint32_t size = (uint32_t)(b->len - at);
		memcpy(b->p + at + 4, &size, 4);
	}
}

/* The index of a stage entry's site among sites, or -1. */
static long stage_site(const struct vs_stage *st, const struct vs_site *sites, unsigned nsites)
{
	uintptr_t off = (uintptr_t)st->site - (uintptr_t)sites;
	if (off % sizeof *sites || off / sizeof *sites >= nsites)
		return -1;
	return (long)(off / sizeof *sites);
}

void vs_meta_put_object(struct vs_buf *b, uint32_t index, uint32_t first_site, uint64_t base,
			const char *path, const char *flavour,
			const struct vs_meta_out_provider *provs, unsigned nprovs,
			const struct vs_site *sites, unsigned nsites,
			const struct vs_caller *callers, unsigned ncallers,
			const struct vs_stage *stages, unsigned nstages)
{
	size_t at = begin_record(b, VS_META_OBJECT);
	put32(b, index);
	put32(b, first_site);
	put32(b, nsites);
	put32(b, ncallers);
	put32(b, nprovs);
	put32(b, VS_META_OBJECT_STAGES);
	put64(b, base);
	put_str(b, path);
	put_str(b, flavour);
	for (unsigned i = 0; i < nprovs; i++) {
		put32(b, provs[i].slot);
		put32(b, provs[i].nflags);
		put_str(b, provs[i].name);
		for (uint32_t f = 0; f < provs[i].nflags; f++)
			put_str(b, provs[i].flags[f]);
	}
	for (unsigned i = 0; i < nsites; i++) {
		const struct vs_site *s = &sites[i];
		unsigned p = 0;
		while (p < nprovs && provs[p].p != s->provider)
			p++;
		put32(b, s->line);
		uint8_t small[8] = {s->level,	s->flag,  s->hot,  s->nargs,
				    (uint8_t)p, s->print, s->also, 0};
		vs_buf_put(b, small, sizeof small);
		vs_buf_put(b, s->types, VS_TRACE_MAX_ARGS);
		put_str(b, s->file);
		put_str(b, s->func);
		put_str(b, s->fmt);
	}
	for (unsigned i = 0; i < ncallers; i++) {
		put32(b, callers[i].line);
		put_str(b, callers[i].func);
		put_str(b, callers[i].file);
	}
	/* An entry whose site is not one of this object's (it cannot be one: the linker puts
	 * an object's entries and sites in the same object) is left out. */
	unsigned kept = 0;
	for (unsigned i = 0; i < nstages; i++)
		kept += stage_site(&stages[i], sites, nsites) >= 0;
	put32(b, kept);
	for (unsigned i = 0; i < nstages; i++) {
		long k = stage_site(&stages[i], sites, nsites);
		if (k < 0)
			continue;
		put32(b, (uint32_t)k);
		put_str(b, stages[i].name);
		put_str(b, stages[i].fields);
	}
	end_record(b, at);
}

void vs_meta_put_unload(struct vs_buf *b, uint32_t index, uint64_t ts)
{
	size_t at = begin_record(b, VS_META_UNLOAD);
	put32(b, index);
	put32(b, 0);
	put64(b, ts);
	end_record(b, at);
}

/* ---- reading ---------------------------------------------------------------------------- */
/* Everything a parse allocates, freed at once. */
struct chunk {
	struct chunk *next;
	size_t used, cap;
	max_align_t data[];
};

static void *arena_alloc(struct vs_meta *m, size_t n)
{
	struct chunk *c = m->arena;
	n = (n + 15) & ~(size_t)15;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		struct chunk *k = malloc(sizeof *k + cap);
		if (!k)
			return NULL;
		k->next = c;
		k->used = 0;
		k->cap = cap;
		m->arena = c = k;
	}
	void *p = (uint8_t *)c->data + c->used;
	c->used += n;
	return memset(p, 0, n);
}

struct rd {
	struct vs_meta *m;
	const uint8_t *p;
	size_t len, off;
	char *why;
	size_t whylen;
	int err;
};

static void fail(struct rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
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

static uint64_t get64(struct rd *r, const char *what)
{
	uint64_t v = 0;
	if (need(r, 8, what)) {
		memcpy(&v, r->p + r->off, 8);
		r->off += 8;
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
	char *s = arena_alloc(r->m, (size_t)n + 1);
	if (!s) {
		r->err = -ENOMEM;
		return "";
	}
	memcpy(s, r->p + r->off, n);
	s[n] = '\0';
	/* Strings are shown to people: no control characters from a hostile file. */
	for (uint16_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
			s[i] = '?';
	r->off += n;
	return s;
}

/* Room for one more element of a doubling array (counted in *n, capacity *cap). */
static bool grow(struct rd *r, void **arr, uint32_t n, uint32_t *cap, size_t elsize)
{
	if (n < *cap)
		return true;
	uint32_t ncap = *cap ? *cap * 2 : 16;
	void *p = realloc(*arr, (size_t)ncap * elsize);
	if (!p) {
		r->err = -ENOMEM;
		return false;
	}
	*arr = p;
	*cap = ncap;
	return true;
}

/* An object's own list of its providers while its record is read. */
struct local_prov {
	const char *name;
	uint32_t global; /* index in m->providers, or VS_META_NO_SLOT */
	uint32_t nflags;
	const char **flags;
};

static bool same_flags(const struct vs_meta_provider *g, const struct local_prov *l)
{
	if (g->nflags != l->nflags)
		return false;
	for (uint32_t i = 0; i < l->nflags; i++)
		if (strcasecmp(g->flags[i], l->flags[i]) != 0)
			return false;
	return true;
}

/* The global provider of a slot: the first record naming the slot defines it; later
 * records must agree, and no two slots may share a name. */
static uint32_t provider_for(struct rd *r, uint32_t *cap, const struct local_prov *l, uint32_t slot)
{
	struct vs_meta *m = r->m;
	for (uint32_t i = 0; i < m->nproviders; i++) {
		struct vs_meta_provider *g = &m->providers[i];
		bool same_name = strcasecmp(g->name, l->name) == 0;
		if (g->slot == slot && (!same_name || !same_flags(g, l))) {
			fail(r,
			     "provider slot %u is '%s' in one object and '%s' (or other flags) in "
			     "another",
			     slot, g->name, l->name);
			return VS_META_NO_SLOT;
		}
		if (g->slot == slot)
			return i;
		if (same_name) {
			fail(r, "provider '%s' has two slots (%u and %u)", l->name, g->slot, slot);
			return VS_META_NO_SLOT;
		}
	}
	if (!grow(r, (void **)&m->providers, m->nproviders, cap, sizeof *m->providers))
		return VS_META_NO_SLOT;
	struct vs_meta_provider *g = &m->providers[m->nproviders];
	memset(g, 0, sizeof *g);
	g->name = l->name;
	g->slot = slot;
	g->nflags = l->nflags;
	for (uint32_t i = 0; i < l->nflags; i++)
		g->flags[i] = l->flags[i];
	return m->nproviders++;
}

struct caps {
	uint32_t sites, objects, providers;
};

/* The stage list of an object whose record has one (VS_META_OBJECT_STAGES): each entry
 * names one of its sites, at most once, and one field per argument of that site.  Every
 * site of the object then says its stage is known (NULL: not a stage site). */
static void parse_stages(struct rd *r, size_t end, struct vs_meta_site *sites, uint32_t nsites,
			 uint32_t first_site)
{
	uint32_t n = get32(r, "stage list");
	if (r->err)
		return;
	if ((uint64_t)n * 8 > end - r->off || n > nsites)
		return fail(r, "%u stage entries for %u sites", n, nsites);
	for (uint32_t i = 0; i < n && !r->err; i++) {
		uint32_t k = get32(r, "stage");
		const char *name = get_str(r, "stage name");
		const char *fields = get_str(r, "stage fields");
		if (r->err)
			return;
		if (k >= nsites)
			return fail(r, "stage '%s' of site %u, of %u", name, first_site + k,
				    nsites);
		struct vs_meta_site *s = &sites[k];
		if (s->stage)
			return fail(r, "site %u has two stages ('%s', '%s')", first_site + k,
				    s->stage, name);
		if (!name[0])
			return fail(r, "site %u: a stage without a name", first_site + k);
		const char **f = arena_alloc(r->m, (s->nargs ? s->nargs : 1) * sizeof *f);
		char *copy = arena_alloc(r->m, strlen(fields) + 1);
		if (!f || !copy) {
			r->err = -ENOMEM;
			return;
		}
		strcpy(copy, fields);
		unsigned nf = 0;
		for (char *save, *w = strtok_r(copy, " ", &save); w;
		     w = strtok_r(NULL, " ", &save)) {
			if (nf == s->nargs)
				return fail(r,
					    "site %u: stage '%s' names more fields than its %u "
					    "arguments",
					    first_site + k, name, s->nargs);
			f[nf++] = w;
		}
		if (nf != s->nargs)
			return fail(r, "site %u: stage '%s' names %u fields for %u arguments",
				    first_site + k, name, nf, s->nargs);
		s->stage = name;
		s->fields = f;
	}
	for (uint32_t i = 0; i < nsites; i++)
		sites[i].stages_known = true;
}

static void parse_object(struct rd *r, size_t end, struct caps *caps)
{
	struct vs_meta *m = r->m;
	uint32_t index = get32(r, "object");
	uint32_t first_site = get32(r, "object");
	uint32_t nsites = get32(r, "object");
	uint32_t ncallers = get32(r, "object");
	uint32_t nprovs = get32(r, "object");
	uint32_t flags = get32(r, "object"); /* 0 in captures made before stage sites */
	uint64_t base = get64(r, "object");
	if (r->err)
		return;
	size_t room = end - r->off;
	if (index != m->nobjects)
		return fail(r, "object %u where object %u was expected", index, m->nobjects);
	if (first_site != m->nsites + 1)
		return fail(r,
			    "object %u: first site %u where %u was expected (site ids are "
			    "dense)",
			    index, first_site, m->nsites + 1);
	/* Each entry takes at least a few bytes: bounds the allocations by the input. */
	if ((uint64_t)nsites * 34 > room || (uint64_t)ncallers * 8 > room ||
	    (uint64_t)nprovs * 10 > room || nprovs > 255)
		return fail(r,
			    "object %u: counts (sites %u, callers %u, providers %u) exceed its "
			    "record",
			    index, nsites, ncallers, nprovs);
	if (nsites > UINT32_MAX - 1 - m->nsites)
		return fail(r, "object %u: too many sites", index);
	if (!grow(r, (void **)&m->objects, m->nobjects, &caps->objects, sizeof *m->objects))
		return;
	struct vs_meta_object *o = &m->objects[m->nobjects];
	memset(o, 0, sizeof *o);
	o->first_site = first_site;
	o->nsites = nsites;
	o->ncallers = ncallers;
	o->base = base;
	o->path = get_str(r, "object path");
	o->flavour = get_str(r, "object flavour");

	struct local_prov *lp = arena_alloc(m, (nprovs ? nprovs : 1) * sizeof *lp);
	if (!lp) {
		r->err = -ENOMEM;
		return;
	}
	for (uint32_t i = 0; i < nprovs && !r->err; i++) {
		uint32_t slot = get32(r, "provider");
		lp[i].nflags = get32(r, "provider");
		lp[i].name = get_str(r, "provider name");
		if (r->err)
			return; /* nflags unchecked: never size an allocation with it */
		if (lp[i].nflags < 1 || lp[i].nflags > 32)
			return fail(r, "provider '%s': %u flags (1 to 32)", lp[i].name,
				    lp[i].nflags);
		lp[i].flags = arena_alloc(m, lp[i].nflags * sizeof *lp[i].flags);
		if (!lp[i].flags) {
			r->err = -ENOMEM;
			return;
		}
		for (uint32_t f = 0; f < lp[i].nflags; f++)
			lp[i].flags[f] = get_str(r, "flag name");
		lp[i].global = VS_META_NO_SLOT;
		if (!r->err && slot != VS_META_NO_SLOT)
			lp[i].global = provider_for(r, &caps->providers, &lp[i], slot);
	}
	for (uint32_t i = 0; i < nsites && !r->err; i++) {
		if (!grow(r, (void **)&m->sites, m->nsites, &caps->sites, sizeof *m->sites))
			return;
		struct vs_meta_site *s = &m->sites[m->nsites];
		memset(s, 0, sizeof *s);
		s->line = get32(r, "site");
		if (!need(r, 8 + VS_TRACE_MAX_ARGS, "site"))
			return;
		const uint8_t *q = r->p + r->off;
		s->level = q[0];
		s->flag = q[1];
		s->hot = q[2];
		s->nargs = q[3];
		uint8_t p = q[4];
		s->print = q[5];
		s->also = q[6]; /* 0 in captures made before sites had a second flag */
		memcpy(s->types, q + 8, VS_TRACE_MAX_ARGS);
		r->off += 8 + VS_TRACE_MAX_ARGS;
		if (s->level < 1 || s->level > VS_LEVEL_MAX)
			return fail(r, "site %u: level %u out of range", first_site + i, s->level);
		if (p >= nprovs)
			return fail(r, "site %u: provider %u of %u", first_site + i, p, nprovs);
		if (s->flag >= lp[p].nflags)
			return fail(r, "site %u: flag bit %u, provider '%s' has %u flags",
				    first_site + i, s->flag, lp[p].name, lp[p].nflags);
		if (s->also > lp[p].nflags)
			return fail(r, "site %u: second flag bit %u, provider '%s' has %u flags",
				    first_site + i, s->also - 1, lp[p].name, lp[p].nflags);
		if (s->nargs > VS_TRACE_MAX_ARGS)
			return fail(r, "site %u: %u arguments (max %d)", first_site + i, s->nargs,
				    VS_TRACE_MAX_ARGS);
		for (unsigned a = 0; a < s->nargs; a++)
			if (s->types[a] < VS_ARG_I32 || s->types[a] > VS_ARG_BYTES)
				return fail(r, "site %u: argument %u has unknown type %u",
					    first_site + i, a, s->types[a]);
		s->file = get_str(r, "site file");
		s->func = get_str(r, "site function");
		s->fmt = get_str(r, "site format");
		s->provider = lp[p].name;
		s->flag_name = lp[p].flags[s->flag];
		s->prov = lp[p].global;
		s->object = m->nobjects;
		m->nsites++;
	}
	o->callers = arena_alloc(m, (ncallers ? ncallers : 1) * sizeof *o->callers);
	if (!o->callers) {
		r->err = -ENOMEM;
		return;
	}
	for (uint32_t i = 0; i < ncallers && !r->err; i++) {
		o->callers[i].line = get32(r, "caller");
		o->callers[i].func = get_str(r, "caller function");
		o->callers[i].file = get_str(r, "caller file");
	}
	if ((flags & VS_META_OBJECT_STAGES) && !r->err)
		parse_stages(r, end, &m->sites[m->nsites - nsites], nsites, first_site);
	if (!r->err && r->off > end)
		return fail(r, "object %u runs past its record", index);
	if (!r->err)
		m->nobjects++;
}

int vs_meta_parse(struct vs_meta *m, const void *blob, size_t len, char *why, size_t whylen)
{
	struct rd r = {.m = m, .p = blob, .len = len, .why = why, .whylen = whylen};
	struct caps caps = {0};
	memset(m, 0, sizeof *m);
	if (whylen)
		why[0] = '\0';
	while (r.off < len && !r.err) {
		size_t at = r.off;
		uint32_t kind = get32(&r, "record header");
		uint32_t size = get32(&r, "record header");
		if (r.err)
			break;
		if (size < 8 || size % 8 || size > len - at) {
			r.off = at;
			fail(&r, "record of size %u (a multiple of 8, within the %zu bytes left)",
			     size, len - at);
			break;
		}
		size_t end = at + size;
		/* The record is read as if the metadata ended with it. */
		r.len = end;
		if (kind == VS_META_OBJECT) {
			parse_object(&r, end, &caps);
		} else if (kind == VS_META_UNLOAD) {
			uint32_t index = get32(&r, "unload");
			if (!r.err && index >= m->nobjects)
				fail(&r, "unload of object %u, of %u", index, m->nobjects);
			else if (!r.err)
				m->objects[index].unloaded = true;
		}
		/* other kinds: records of a later version, skipped whole */
		r.len = len;
		r.off = end;
	}
	if (r.err) {
		vs_meta_free(m);
		return r.err;
	}
	return 0;
}

/* ---- version 1: one blob, one object, sites named by address --------------------------------
 *   u32 magic 'VSMD', u32 version 1, u32 nsites, u32 nflags, u32 ncallers, u32 site_base
 *   site:   u32 line, u8 level, u8 flag, u8 hot, u8 nargs, u8 types[16],
 *           str file, str func, str fmt, str flag_name
 *   flag:   u32 bit, str name
 *   caller: u32 line, str func, str file */
int vs_meta_parse_v1(struct vs_meta *m, const void *blob, size_t len, char *why, size_t whylen)
{
	struct rd r = {.m = m, .p = blob, .len = len, .why = why, .whylen = whylen};
	memset(m, 0, sizeof *m);
	if (whylen)
		why[0] = '\0';

	uint32_t magic = get32(&r, "header");
	uint32_t version = get32(&r, "header");
	uint32_t nsites = get32(&r, "header");
	uint32_t nflags = get32(&r, "header");
	uint32_t ncallers = get32(&r, "header");
	m->v1_site_base = get32(&r, "header");
	m->v1 = true;
	if (!r.err && magic != META_V1_MAGIC)
		fail(&r, "bad magic %#x", magic);
	if (!r.err && version != 1)
		fail(&r, "unsupported metadata version %u", version);
	if (!r.err && ((uint64_t)nsites * 32 > len || nflags > 32 || (uint64_t)ncallers * 8 > len))
		fail(&r, "counts (sites %u, flags %u, callers %u) exceed the metadata size %zu",
		     nsites, nflags, ncallers, len);
	if (r.err)
		goto out;
	m->sites = calloc(nsites ? nsites : 1, sizeof *m->sites);
	m->objects = calloc(1, sizeof *m->objects);
	m->providers = calloc(1, sizeof *m->providers);
	struct vs_meta_object *o = m->objects;
	if (o)
		o->callers = arena_alloc(m, (ncallers ? ncallers : 1) * sizeof *o->callers);
	if (!m->sites || !o || !m->providers || !o->callers) {
		r.err = -ENOMEM;
		goto out;
	}
	o->first_site = 0;
	o->path = "";
	o->flavour = "";
	struct vs_meta_provider *p = m->providers;
	p->name = "";
	p->nflags = 32;
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
		s->provider = "";
		s->prov = 0;
		s->object = 0;
	}
	for (uint32_t i = 0; i < nflags && !r.err; i++) {
		uint32_t bit = get32(&r, "flag");
		const char *name = get_str(&r, "flag name");
		if (!r.err && bit >= 32)
			fail(&r, "flag bit %u out of range", bit);
		else if (!r.err)
			p->flags[bit] = name;
	}
	for (uint32_t i = 0; i < ncallers && !r.err; i++) {
		o->callers[i].line = get32(&r, "caller");
		o->callers[i].func = get_str(&r, "caller function");
		o->callers[i].file = get_str(&r, "caller file");
	}
out:
	if (r.err) {
		vs_meta_free(m);
		return r.err;
	}
	m->nsites = nsites;
	o->nsites = nsites;
	o->ncallers = ncallers;
	m->nobjects = 1;
	m->nproviders = 1;
	return 0;
}

void vs_meta_free(struct vs_meta *m)
{
	free(m->sites);
	free(m->objects);
	free(m->providers);
	for (struct chunk *c = m->arena, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	memset(m, 0, sizeof *m);
}

int vs_meta_site_field(const struct vs_meta_site *s, const char *name)
{
	for (unsigned i = 0; s->stage && i < s->nargs; i++)
		if (strcmp(s->fields[i], name) == 0)
			return (int)i;
	return -1;
}

int vs_meta_provider(const struct vs_meta *m, const char *name)
{
	for (uint32_t i = 0; i < m->nproviders; i++)
		if (strcasecmp(m->providers[i].name, name) == 0)
			return (int)i;
	return -1;
}
