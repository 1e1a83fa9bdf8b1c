/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "forge.h"

void fb_put(struct fbuf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *q = realloc(b->p, cap);
		if (!q) {
			fprintf(stderr, "forge: out of memory\n");
			abort();
		}
		b->p = q;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
}

void fb_put16(struct fbuf *b, uint16_t v)
{
	fb_put(b, &v, 2);
}

void fb_put32(struct fbuf *b, uint32_t v)
{
	fb_put(b, &v, 4);
}

void fb_put64(struct fbuf *b, uint64_t v)
{
	fb_put(b, &v, 8);
}

void fb_put_str_arg(struct fbuf *b, const char *s, size_t n)
{
	fb_put16(b, (uint16_t)n);
	fb_put(b, s, n);
}

void fb_free(struct fbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

/* Up to N bytes of SRC into a fixed field: without a NUL when it fills the field, as a
 * hostile file would have it. */
static void fill(char *dst, size_t n, const char *src)
{
	memcpy(dst, src, strnlen(src, n));
}

static void put_meta_str(struct fbuf *b, const char *s)
{
	fb_put16(b, (uint16_t)strlen(s));
	fb_put(b, s, strlen(s));
}

#define FORGE_MAX_PROVIDERS 8

/* Site s's provider's index in names (added when new). */
static unsigned provider_slot(const char **names, unsigned *n, const struct forge_site *s)
{
	const char *name = s->provider ? s->provider : "forged";
	unsigned i = 0;
	while (i < *n && strcmp(names[i], name))
		i++;
	if (i == *n) {
		if (*n == FORGE_MAX_PROVIDERS) {
			fprintf(stderr, "forge: more than %d providers\n", FORGE_MAX_PROVIDERS);
			abort();
		}
		names[(*n)++] = name;
	}
	return i;
}

/* One OBJECT record (docs/CAPTURE-FORMAT.md), with its stage list or without. */
static void forge_object(struct fbuf *b, const struct forge_site *sites, unsigned n, bool staged)
{
	const char *provs[FORGE_MAX_PROVIDERS] = {"forged"};
	unsigned nprovs = 0;
	size_t at = b->len;
	for (unsigned i = 0; i < n; i++)
		provider_slot(provs, &nprovs, &sites[i]);
	nprovs += !nprovs; /* "forged", with no site */
	fb_put32(b, VS_META_OBJECT);
	fb_put32(b, 0); /* size, below */
	fb_put32(b, 0); /* index */
	fb_put32(b, forge_site_id(0));
	fb_put32(b, n);
	fb_put32(b, 0); /* no callers */
	fb_put32(b, nprovs);
	fb_put32(b, staged ? VS_META_OBJECT_STAGES : 0);
	fb_put64(b, 0x400000);
	put_meta_str(b, "/forged/exe");
	put_meta_str(b, "cold");
	for (unsigned p = 0; p < nprovs; p++) {
		fb_put32(b, p); /* slot */
		fb_put32(b, 1); /* one flag */
		put_meta_str(b, provs[p]);
		put_meta_str(b, "TEST");
	}
	for (unsigned i = 0; i < n; i++) {
		const struct forge_site *s = &sites[i];
		uint8_t prov = (uint8_t)provider_slot(provs, &nprovs, s);
		uint8_t small[8] = {
		    s->level ? s->level : VS_LEVEL_INFO, 0, 0, s->nargs, prov, 0, 0, 0};
		fb_put32(b, 100 + i);
		fb_put(b, small, sizeof small);
		fb_put(b, s->types, VS_TRACE_MAX_ARGS);
		put_meta_str(b, "forged.c");
		put_meta_str(b, s->func ? s->func : "forged");
		put_meta_str(b, s->fmt);
	}
	if (staged) {
		uint32_t nstages = 0;
		for (unsigned i = 0; i < n; i++)
			nstages += sites[i].stage != NULL;
		fb_put32(b, nstages);
		for (unsigned i = 0; i < n; i++) {
			if (!sites[i].stage)
				continue;
			fb_put32(b, i);
			put_meta_str(b, sites[i].stage);
			put_meta_str(b, sites[i].fields ? sites[i].fields : "");
		}
	}
	static const uint8_t zeros[8];
	fb_put(b, zeros, (8 - (b->len - at) % 8) % 8);
	uint32_t size = (uint32_t)(b->len - at);
	memcpy(b->p + at + 4, &size, 4);
}

void forge_meta(struct fbuf *b, const struct forge_site *sites, unsigned n)
{
	forge_object(b, sites, n, false);
}

void forge_meta_staged(struct fbuf *b, const struct forge_site *sites, unsigned n)
{
	forge_object(b, sites, n, true);
}

void forge_meta_v1(struct fbuf *b, const struct forge_site *sites, unsigned n)
{
	fb_put32(b, 0x444d5356u); /* "VSMD" */
	fb_put32(b, 1);
	fb_put32(b, n);
	fb_put32(b, 1); /* one flag */
	fb_put32(b, 0); /* no callers */
	fb_put32(b, FORGE_V1_SITE_BASE);
	for (unsigned i = 0; i < n; i++) {
		const struct forge_site *s = &sites[i];
		uint8_t small[4] = {s->level ? s->level : VS_LEVEL_INFO, 0, 0, s->nargs};
		fb_put32(b, 100 + i);
		fb_put(b, small, 4);
		fb_put(b, s->types, VS_TRACE_MAX_ARGS);
		put_meta_str(b, "forged.c");
		put_meta_str(b, s->func ? s->func : "forged");
		put_meta_str(b, s->fmt);
		put_meta_str(b, "TEST");
	}
	fb_put32(b, 0);
	put_meta_str(b, "TEST");
}

void forge_record(struct fbuf *b, uint64_t ts, uint32_t site, const void *args, size_t len)
{
	static const uint8_t zeros[8];
	struct vs_event_header e = {
	    .ts = ts, .site = site, .size = (uint16_t)((sizeof e + len + 7) & ~(size_t)7)};
	fb_put(b, &e, sizeof e);
	fb_put(b, args, len);
	fb_put(b, zeros, e.size - sizeof e - len);
}

static void section(struct fbuf *b, uint32_t type, const void *p1, size_t n1, const void *p2,
		    size_t n2)
{
	static const uint8_t zeros[8];
	struct vs_cap_section_header sh = {.type = type, .size = n1 + n2};
	fb_put(b, &sh, sizeof sh);
	fb_put(b, p1, n1);
	fb_put(b, p2, n2);
	fb_put(b, zeros, (8 - (n1 + n2) % 8) % 8);
}

void forge_cap_begin(struct fbuf *b, const struct fbuf *meta, const char *exe, const char *flavour)
{
	forge_cap_begin_v(b, VS_CAP_VERSION, meta, exe, flavour);
}

void forge_cap_begin_v(struct fbuf *b, uint16_t version, const struct fbuf *meta, const char *exe,
		       const char *flavour)
{
	struct vs_cap_file_header fh = {.version = version, .header_size = sizeof fh};
	struct {
		int32_t pid;
		uint32_t pad;
		uint64_t start_time;
		char flavour[16];
		char exe[256];
	} proc = {.pid = 4242};
	memcpy(fh.magic, VS_CAP_MAGIC, 8);
	fb_put(b, &fh, sizeof fh);
	fill(proc.flavour, sizeof proc.flavour, flavour);
	fill(proc.exe, sizeof proc.exe, exe);
	section(b, VS_SEC_PROCESS, &proc, sizeof proc, NULL, 0);
	section(b, VS_SEC_META, meta->p, meta->len, NULL, 0);
}

void forge_cap_events(struct fbuf *b, uint32_t tid, uint32_t slot, uint32_t gen, const char *name,
		      const void *records, size_t len)
{
	struct {
		uint32_t tid, slot, generation, pad;
		char name[16];
	} eh = {.tid = tid, .slot = slot, .generation = gen};
	fill(eh.name, sizeof eh.name, name);
	section(b, VS_SEC_EVENTS, &eh, sizeof eh, records, len);
}

struct vs_cap_clock forge_mono_clock(void)
{
	return (struct vs_cap_clock){.is_tsc = 0,
				     .ts0 = 0,
				     .mono0 = 0,
				     .real0 = FORGE_REAL0,
				     .ts1 = 1000000000ull,
				     .mono1 = 1000000000ull,
				     .real1 = FORGE_REAL0 + 1000000000ull};
}

void forge_cap_end(struct fbuf *b)
{
	struct vs_cap_clock c = forge_mono_clock();
	forge_cap_end_clock(b, &c);
}

void forge_cap_end_clock(struct fbuf *b, const struct vs_cap_clock *c)
{
	uint64_t end[2] = {0, 0};
	section(b, VS_SEC_CLOCK, c, sizeof *c, NULL, 0);
	section(b, VS_SEC_END, end, sizeof end, NULL, 0);
}

void forge_shm(struct fbuf *b, struct forge_shm *g, const struct fbuf *meta, unsigned rings,
	       uint64_t ring_size, int pid, uint64_t start_time)
{
	g->provs_off = (sizeof(struct vs_shm_header) + 63) & ~(size_t)63;
	g->meta_off = g->provs_off + FORGE_PROVIDER_SLOTS * sizeof(struct vs_shm_provider);
	g->rings_off = (g->meta_off + meta->len + 4095) & ~(size_t)4095;
	g->data_off = (g->rings_off + rings * sizeof(struct vs_shm_ring) + 4095) & ~(size_t)4095;
	g->size = g->data_off + rings * ring_size;
	g->rings = rings;
	g->ring_size = ring_size;
	b->len = 0;
	fb_put(b, NULL, 0);
	while (b->len < g->size) {
		static const uint8_t zeros[4096];
		size_t n = g->size - b->len < sizeof zeros ? g->size - b->len : sizeof zeros;
		fb_put(b, zeros, n);
	}
	struct vs_shm_header *h = forge_shm_header(b);
	memcpy(h->magic, VS_SHM_MAGIC, 8);
	h->version = VS_SHM_VERSION;
	h->header_size = sizeof *h;
	h->total_size = g->size;
	h->pid = pid;
	h->start_time = start_time;
	snprintf(h->exe, sizeof h->exe, "/forged/exe");
	snprintf(h->flavour, sizeof h->flavour, "cold");
	h->clk_real0 = FORGE_REAL0;
	h->providers_offset = g->provs_off;
	h->provider_slots = FORGE_PROVIDER_SLOTS;
	h->nproviders = 1;
	vs_ctl_store((struct vs_shm_provider *)(b->p + g->provs_off), VS_LEVEL_INFO, 0xffffffffu);
	h->meta_offset = g->meta_off;
	h->meta_capacity = g->rings_off - g->meta_off;
	h->meta_used = meta->len;
	h->rings_offset = g->rings_off;
	h->ring_count = rings;
	h->ring_size = ring_size;
	h->data_offset = g->data_off;
	memcpy(b->p + g->meta_off, meta->p, meta->len);
}

void forge_shm_ring(struct fbuf *b, const struct forge_shm *g, unsigned i, uint32_t tid,
		    const void *records, size_t len)
{
	struct vs_shm_ring *r = (struct vs_shm_ring *)(b->p + g->rings_off) + i;
	r->state = VS_RING_ACTIVE;
	r->tid = tid;
	r->generation = 1;
	snprintf(r->thread_name, sizeof r->thread_name, "forged-%u", i);
	r->tail = 0;
	r->head = len;
	memcpy(b->p + g->data_off + i * g->ring_size, records, len);
}

/* ---- shapes ------------------------------------------------------------------------------ */
static const struct forge_site count_site[] = {
    {.fmt = "n=%u", .func = "count", .nargs = 1, .types = {VS_ARG_U32}},
};

void forge_shape_threads(struct fbuf *cap, unsigned n, unsigned k)
{
	struct fbuf meta = {0}, rec = {0};
	forge_meta(&meta, count_site, 1);
	forge_cap_begin(cap, &meta, "/forged/exe", "cold");
	for (unsigned i = 0; i < n; i++) {
		rec.len = 0;
		for (unsigned j = 0; j < k; j++)
			forge_record(&rec, (uint64_t)j * n + i, forge_site_id(0), &i, sizeof i);
		forge_cap_events(cap, i + 1, i, 1, "t", rec.p, rec.len);
	}
	forge_cap_end(cap);
	fb_free(&meta);
	fb_free(&rec);
}

/* The stage sites of src/tracetools/latency.c, as our programs record them. */
enum { SUBMIT, KICK, DONE, POP, PUSH };
static const struct forge_site stage_sites[] = {
    [SUBMIT] = {.fmt = "q %u tag %#llx lun %u op %#x",
		.provider = "initiator",
		.nargs = 4,
		.types = {VS_ARG_U32, VS_ARG_U64, VS_ARG_U32, VS_ARG_U32}},
    [KICK] = {.fmt = "q %u kick", .provider = "initiator", .nargs = 1, .types = {VS_ARG_U32}},
    [DONE] = {.fmt = "q %u tag %#llx done: %u",
	      .provider = "initiator",
	      .nargs = 3,
	      .types = {VS_ARG_U32, VS_ARG_U64, VS_ARG_U32}},
    [POP] = {.fmt = "q %u head %u tag %#llx lun %02x%02x op %#x",
	     .provider = "target",
	     .nargs = 6,
	     .types = {VS_ARG_U32, VS_ARG_U32, VS_ARG_U64, VS_ARG_U32, VS_ARG_U32, VS_ARG_U32}},
    [PUSH] = {.fmt = "q %u tag %#llx lun %u op %#x done: %u",
	      .provider = "target",
	      .nargs = 5,
	      .types = {VS_ARG_U32, VS_ARG_U64, VS_ARG_U32, VS_ARG_U32, VS_ARG_U32}},
};

/* One stage event: the site's integer arguments, packed as its types say. */
static void stage_event(struct fbuf *rec, uint64_t ts, unsigned site, const uint64_t *v)
{
	uint8_t args[8 * VS_TRACE_MAX_ARGS];
	size_t len = 0;
	for (unsigned a = 0; a < stage_sites[site].nargs; a++) {
		uint32_t narrow = (uint32_t)v[a];
		bool wide = stage_sites[site].types[a] == VS_ARG_U64;
		memcpy(args + len, wide ? (const void *)&v[a] : (const void *)&narrow,
		       wide ? 8 : 4);
		len += wide ? 8 : 4;
	}
	forge_record(rec, ts, forge_site_id(site), args, len);
}

void forge_shape_requests(struct fbuf *cap, unsigned n)
{
	struct fbuf meta = {0}, drv = {0}, dev = {0};
	uint64_t base = 2ull * n;
	forge_meta(&meta, stage_sites, sizeof stage_sites / sizeof stage_sites[0]);
	forge_cap_begin(cap, &meta, "/forged/exe", "all");
	for (unsigned i = 0; i < n; i++) {
		stage_event(&drv, 2ull * i, SUBMIT, (uint64_t[]){i + 1, i, 0, 0x28});
		stage_event(&drv, 2ull * i + 1, KICK, (uint64_t[]){i + 1});
	}
	for (unsigned j = 0; j < n; j++) {
		uint64_t t = base + 10ull * j;
		stage_event(&drv, t, SUBMIT, (uint64_t[]){0, FORGE_REUSED_TAG, 0, 0x2a});
		stage_event(&dev, t + 2, POP, (uint64_t[]){0, j, FORGE_REUSED_TAG, 0, 0, 0x2a});
		stage_event(&dev, t + 4, PUSH, (uint64_t[]){0, FORGE_REUSED_TAG, 0, 0x2a, 0});
		stage_event(&drv, t + 6, DONE, (uint64_t[]){0, FORGE_REUSED_TAG, 0});
	}
	forge_cap_events(cap, 1, 0, 1, "driver", drv.p, drv.len);
	forge_cap_events(cap, 2, 1, 1, "device", dev.p, dev.len);
	forge_cap_end(cap);
	fb_free(&meta);
	fb_free(&drv);
	fb_free(&dev);
}

void forge_shape_busy_thread(struct fbuf *cap, unsigned n, unsigned m, bool last)
{
	struct fbuf meta = {0}, rec = {0};
	unsigned busy = last ? n - 1 : 0;
	forge_meta(&meta, count_site, 1);
	forge_cap_begin(cap, &meta, "/forged/exe", "cold");
	for (unsigned i = 0; i < n; i++) {
		rec.len = 0;
		forge_record(&rec, i, forge_site_id(0), &i, sizeof i);
		for (unsigned j = 0; i == busy && j < m; j++)
			forge_record(&rec, n + j, forge_site_id(0), &j, sizeof j);
		forge_cap_events(cap, i + 1, i, 1, "t", rec.p, rec.len);
	}
	forge_cap_end(cap);
	fb_free(&meta);
	fb_free(&rec);
}
