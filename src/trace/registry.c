/* SPDX-License-Identifier: MIT */
/*
 * Trace runtime, second half: the objects of the process (executable, shared
 * libraries, modules) as they register and deregister, their providers, the metadata
 * records that describe them in the trace file, and the settings (level and flags per
 * provider).
 *
 * Each object calls vs__object_register() from a constructor of each of its traced
 * translation units (the first one does the work) and vs__object_unregister() from a
 * destructor (the last one does).  Registration gives the object's sites their ids,
 * gives each of its providers a slot of control words in the file (shared by every
 * object that declares the same provider with the same flags), appends its record to
 * the metadata, and only then points its providers at their slots: until that
 * instant its sites are off, so no event can name a site the metadata lacks.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "trace/runtime_int.h"

/* One per provider name: a slot of control words in the file. */
struct rt_provider {
	char *name;
	char *flag_text; /* as the first unit declared it: "A B C " */
	const char *flags[32];
	uint32_t nflags;
	char *first_object; /* where it was first declared, for clash reports */
	char *first_unit;
};

/* A registered object. */
struct rt_object {
	struct vs_object *obj;
	char *path;
	char flavour[64];
	uint32_t index;
	unsigned nprov;
	struct vs_provider **prov; /* its providers that have a slot */
};

static struct {
	pthread_mutex_t lock;
	bool spec_read;
	char *spec; /* settings for providers as they appear */
	struct rt_provider provs[VS_RT_PROVIDER_SLOTS];
	uint32_t nprovs;
	struct rt_object **objs;
	size_t nobjs, objs_cap;
	uint32_t next_index;
	uint32_t next_site; /* ids start at 1 */
	struct vs_buf meta; /* every record so far: a forked child writes them into its file */
	bool forked;	    /* no file of its own yet: a child of fork(), or on demand */
	struct vs_trace_control fork_ctl[VS_RT_PROVIDER_SLOTS];
	uint32_t fork_level[VS_RT_PROVIDER_SLOTS], fork_mask[VS_RT_PROVIDER_SLOTS];
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER, .next_site = 1};

static void reg_prepare(void)
{
	pthread_mutex_lock(&reg.lock);
}
static void reg_parent(void)
{
	pthread_mutex_unlock(&reg.lock);
}
static void reg_child(void)
{
	pthread_mutex_unlock(&reg.lock);
}

/* ---- settings ---------------------------------------------------------------------------- */
static void read_spec(void)
{
	const char *env = getenv("VIOSCOPE_TRACE");
	uint32_t level;
	char why[256];

	if (reg.spec_read)
		return;
	reg.spec_read = true;
	pthread_atfork(reg_prepare, reg_parent, reg_child);
	if (env && *env && vs_spec_eval(env, NULL, 0, false, &level, NULL, why, sizeof why) < 0) {
		fprintf(stderr, "vioscope trace: VIOSCOPE_TRACE=%s: %s; using info:all\n", env,
			why);
		env = NULL;
	}
	reg.spec = strdup(env && *env ? env : "info:all");
}

static struct vs_spec_provider spec_provider(const struct rt_provider *p)
{
	return (struct vs_spec_provider){p->name, p->nflags, p->flags};
}

/* Slot i's words: the file's, or a forked child's private copy before it has a file. */
static void store_slot(uint32_t i, uint32_t level, uint32_t mask)
{
	if (reg.forked || !vs_rt.hdr) {
		vs_ctl_compute(&reg.fork_ctl[i], level, mask);
		reg.fork_level[i] = level;
		reg.fork_mask[i] = mask;
		return;
	}
	vs_ctl_store(&vs_rt.provs[i], level, mask);
}

/* The current spec, as it applies to a provider that has just appeared. */
static void apply_spec_to(uint32_t i)
{
	struct vs_spec_provider sp = spec_provider(&reg.provs[i]);
	uint32_t level = VS_LEVEL_INFO, mask = 0xffffffffu;
	char why[256];
	if (vs_spec_eval(reg.spec, &sp, 1, false, &level, &mask, why, sizeof why) < 0) {
		level = VS_LEVEL_INFO;
		mask = 0xffffffffu;
	}
	store_slot(i, level, mask);
}

static struct vs_spec_provider *all_spec_providers(void)
{
	struct vs_spec_provider *sp = calloc(reg.nprovs ? reg.nprovs : 1, sizeof *sp);
	for (uint32_t i = 0; sp && i < reg.nprovs; i++)
		sp[i] = spec_provider(&reg.provs[i]);
	return sp;
}

/* Once the program itself has registered (the last object loaded before main()), a
 * name in $VIOSCOPE_TRACE that no provider has is most likely a typo: say so. */
static void check_spec(void)
{
	struct vs_spec_provider *sp = all_spec_providers();
	uint32_t *masks = calloc(reg.nprovs ? reg.nprovs : 1, sizeof *masks), level;
	char why[512];
	if (sp && masks &&
	    vs_spec_eval(reg.spec, sp, reg.nprovs, true, &level, masks, why, sizeof why) < 0)
		fprintf(stderr,
			"vioscope trace: VIOSCOPE_TRACE=%s: %s; it applies to what "
			"matches, and to providers loaded later\n",
			reg.spec, why);
	free(sp);
	free(masks);
}

int vs_trace_set_provider(const char *provider, int level, uint32_t flag_mask)
{
	int rc = -ENOENT;
	if (level < 0 || level > VS_LEVEL_MAX)
		return -EINVAL;
	pthread_mutex_lock(&reg.lock);
	for (uint32_t i = 0; i < reg.nprovs; i++) {
		if (strcasecmp(reg.provs[i].name, provider) == 0) {
			store_slot(i, (uint32_t)level, flag_mask);
			rc = 0;
		}
	}
	pthread_mutex_unlock(&reg.lock);
	return rc;
}

/* Strict, as `vioscope trace enable`: a provider or flag that no loaded object declares is
 * refused (a typo would otherwise turn every flag off), and nothing changes. */
int vs_trace_set_spec_why(const char *spec, char *why, size_t whylen)
{
	uint32_t level;
	char reason[512];
	int rc = 0;
	pthread_mutex_lock(&reg.lock);
	read_spec();
	struct vs_spec_provider *sp = all_spec_providers();
	uint32_t *masks = calloc(reg.nprovs ? reg.nprovs : 1, sizeof *masks);
	char *copy = spec ? strdup(spec) : NULL;
	if (!sp || !masks || !copy) {
		rc = spec ? -ENOMEM : -EINVAL;
		snprintf(reason, sizeof reason, "%s", spec ? "out of memory" : "no spec");
	} else if (vs_spec_eval(spec, sp, reg.nprovs, true, &level, masks, reason, sizeof reason) <
		   0) {
		rc = -EINVAL;
	} else {
		for (uint32_t i = 0; i < reg.nprovs; i++)
			store_slot(i, level, masks[i]);
		free(reg.spec);
		reg.spec = copy;
		copy = NULL;
	}
	free(copy);
	free(sp);
	free(masks);
	pthread_mutex_unlock(&reg.lock);
	if (rc < 0 && why && whylen)
		snprintf(why, whylen, "%s", reason);
	return rc;
}

int vs_trace_set_spec(const char *spec)
{
	return vs_trace_set_spec_why(spec, NULL, 0);
}

/* ---- providers --------------------------------------------------------------------------- */
/* Splits "A B C " into names (in place); returns how many. */
static uint32_t split_flags(char *text, const char *flags[32])
{
	uint32_t n = 0;
	for (char *save = NULL, *w = strtok_r(text, " ", &save); w && n < 32;
	     w = strtok_r(NULL, " ", &save))
		flags[n++] = w;
	return n;
}

static bool same_flag_text(const char *a, const char *b)
{
	return strcasecmp(a, b) == 0;
}

static int find_provider(const char *name)
{
	for (uint32_t i = 0; i < reg.nprovs; i++)
		if (strcasecmp(reg.provs[i].name, name) == 0)
			return (int)i;
	return -1;
}

static void free_provider(struct rt_provider *p)
{
	free(p->name);
	free(p->flag_text);
	free(p->first_object);
	free(p->first_unit);
	memset(p, 0, sizeof *p);
}

/* A new slot for a provider first declared by `unit` in `path`. */
static int new_provider(const struct vs_unit *unit, const char *path)
{
	struct rt_provider *p = &reg.provs[reg.nprovs];
	p->name = strdup(unit->provider->name);
	p->flag_text = strdup(unit->flags);
	p->first_object = strdup(path);
	p->first_unit = strdup(unit->file);
	char *split = p->flag_text ? strdup(p->flag_text) : NULL;
	if (!p->name || !split || !p->first_object || !p->first_unit) {
		free(split);
		free_provider(p);
		return -ENOMEM;
	}
	p->nflags = split_flags(split, p->flags); /* split stays: flags point into it */
	return (int)reg.nprovs++;
}

const char *vs_reg_flag_name(const struct vs_provider *p, unsigned flag)
{
	if (p->slot >= reg.nprovs || flag >= reg.provs[p->slot].nflags)
		return "?";
	return reg.provs[p->slot].flags[flag];
}

/* ---- objects ----------------------------------------------------------------------------- */
/* Where the object containing `addr` was loaded from: the program itself is named by
 * /proc/self/exe. */
static char *object_path(const void *addr, uint64_t *base, bool *is_main)
{
	Dl_info info;
	struct link_map *lm = NULL;
	char exe[PATH_MAX];
	*base = 0;
	*is_main = true;
	if (dladdr1(addr, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm) {
		*base = (uint64_t)lm->l_addr;
		if (lm->l_name && lm->l_name[0]) {
			*is_main = false;
			return strdup(lm->l_name);
		}
	}
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = '\0';
	return strdup(exe);
}

static void object_flavour(const struct vs_object *obj, char *out, size_t len)
{
	static const char *const names[3][2] = {
	    {"off", "off"}, {"cold", "cold-print"}, {"all", "all-print"}};
	bool seen[3][2] = {{false}};
	size_t used = 0;
	out[0] = '\0';
	for (const struct vs_unit *u = obj->units; u && u < obj->units_end; u++)
		seen[u->tier > 2 ? 2 : u->tier][u->print ? 1 : 0] = true;
	for (int t = 1; t < 3; t++)
		for (int p = 0; p < 2; p++)
			if (seen[t][p] && used < len)
				used += (size_t)snprintf(out + used, len - used, "%s%s",
							 used ? "+" : "", names[t][p]);
}

/* The header's summary: the one flavour of every object, or "mixed". */
static void update_flavour(void)
{
	const char *f = reg.nobjs ? reg.objs[0]->flavour : "";
	for (size_t i = 1; i < reg.nobjs; i++)
		if (strcmp(reg.objs[i]->flavour, f) != 0)
			f = "mixed";
	if (vs_rt.hdr && !reg.forked) {
		char *h = vs_rt.hdr->flavour;
		size_t n = strnlen(f, sizeof vs_rt.hdr->flavour - 1);
		memcpy(h, f, n);
		memset(h + n, 0, sizeof vs_rt.hdr->flavour - n);
	}
}

/* Append a record to the metadata, in our copy and in the file; false if the file's
 * area is full. */
static bool append_meta(const struct vs_buf *rec)
{
	if (rec->err || reg.meta.len + rec->len > vs_rt.meta_capacity)
		return false;
	vs_buf_put(&reg.meta, rec->p, rec->len);
	if (reg.meta.err)
		return false;
	if (vs_rt.hdr && !reg.forked) {
		memcpy(vs_rt.meta + reg.meta.len - rec->len, rec->p, rec->len);
		__atomic_store_n(&vs_rt.hdr->meta_used, reg.meta.len, __ATOMIC_RELEASE);
	}
	return true;
}

/* An object's view of one of its providers while it registers. */
struct obj_prov {
	struct vs_provider *p;
	const struct vs_unit *unit; /* the first unit that declared it */
	int slot;		    /* existing or new slot, -1: refused */
	bool is_new;
	const char *flags[32];
	uint32_t nflags;
	char *split;
};

static void report_clash(const char *name, const char *obj_a, const char *unit_a,
			 const char *flags_a, const char *obj_b, const char *unit_b,
			 const char *flags_b)
{
	fprintf(stderr,
		"vioscope trace: provider '%s' is declared with different flags in %s (%s: %s) "
		"and in %s (%s: %s): the sites of '%s' in %s stay disabled; give one of them "
		"another provider name\n",
		name, obj_a, unit_a, flags_a, obj_b, unit_b, flags_b, name, obj_b);
}

/* The object's providers, each checked against its other units and against the
 * providers already known; new slots are only numbered here (made on commit). */
static int plan_providers(const struct vs_object *obj, const char *path, struct obj_prov **out,
			  unsigned *nout)
{
	struct obj_prov *op = NULL;
	unsigned n = 0, cap = 0;
	uint32_t next_slot = reg.nprovs;
	for (const struct vs_unit *u = obj->units; u && u < obj->units_end; u++) {
		unsigned i = 0;
		while (i < n && op[i].p != u->provider)
			i++;
		if (i < n) {
			if (op[i].slot >= 0 && !same_flag_text(op[i].unit->flags, u->flags)) {
				report_clash(u->provider->name, path, op[i].unit->file,
					     op[i].unit->flags, path, u->file, u->flags);
				op[i].slot = -1;
			}
			continue;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 8;
			struct obj_prov *q = realloc(op, cap * sizeof *op);
			if (!q)
				goto nomem;
			op = q;
		}
		struct obj_prov *o = &op[n++];
		memset(o, 0, sizeof *o);
		o->p = u->provider;
		o->unit = u;
		o->split = strdup(u->flags);
		if (!o->split)
			goto nomem;
		o->nflags = split_flags(o->split, o->flags);
		int g = find_provider(u->provider->name);
		if (g >= 0 && !same_flag_text(reg.provs[g].flag_text, u->flags)) {
			report_clash(u->provider->name, reg.provs[g].first_object,
				     reg.provs[g].first_unit, reg.provs[g].flag_text, path, u->file,
				     u->flags);
			o->slot = -1;
		} else if (g >= 0) {
			o->slot = g;
		} else if (next_slot < vs_rt.provider_slots) {
			o->slot = (int)next_slot++;
			o->is_new = true;
		} else {
			fprintf(stderr,
				"vioscope trace: %s: more than %u providers in one process: "
				"the sites of '%s' stay disabled\n",
				path, vs_rt.provider_slots, u->provider->name);
			o->slot = -1;
		}
	}
	*out = op;
	*nout = n;
	return 0;
nomem:
	for (unsigned i = 0; i < n; i++)
		free(op[i].split);
	free(op);
	return -ENOMEM;
}

static void register_object(struct vs_object *obj)
{
	uint64_t base;
	bool is_main;
	struct obj_prov *op = NULL;
	unsigned nop = 0;
	struct vs_buf rec = {0};
	struct rt_object *ro = calloc(1, sizeof *ro);
	char *path = object_path(obj, &base, &is_main);

	read_spec();
	if (!vs_rt.hdr && !reg.forked && vs_rt_file_deferred()) {
		/* No file until the program asks for one: sites test private control
		 * words meanwhile, as in a forked child (vs__file_start). */
		reg.forked = true;
	} else if (!vs_rt.hdr && !reg.forked) {
		int rc = vs_rt_file_create();
		if (rc == -EEXIST)
			fprintf(stderr,
				"vioscope trace: %s: this process has another copy of the trace "
				"runtime (linked statically into the program without exporting its "
				"entry points): the sites of %s stay disabled; link every traced "
				"object with libvioscope_trace.so, or link the program with "
				"vioscope::trace-runtime-static, which exports them\n",
				path ? path : "?", path ? path : "this object");
		if (rc < 0)
			goto out;
	}
	if (!ro || !path || plan_providers(obj, path, &op, &nop) < 0)
		goto out;
	ro->prov = calloc(nop ? nop : 1, sizeof *ro->prov);
	if (!ro->prov)
		goto out;
	if (reg.nobjs == reg.objs_cap) {
		size_t cap = reg.objs_cap ? reg.objs_cap * 2 : 16;
		struct rt_object **q = realloc(reg.objs, cap * sizeof *q);
		if (!q)
			goto out;
		reg.objs = q;
		reg.objs_cap = cap;
	}
	const unsigned nsites = obj->sites ? (unsigned)(obj->sites_end - obj->sites) : 0;
	const unsigned ncallers = obj->callers ? (unsigned)(obj->callers_end - obj->callers) : 0;
	const unsigned nstages = obj->stages ? (unsigned)(obj->stages_end - obj->stages) : 0;
	struct vs_meta_out_provider *mp = calloc(nop ? nop : 1, sizeof *mp);
	if (!mp)
		goto out;
	for (unsigned i = 0; i < nop; i++)
		mp[i] = (struct vs_meta_out_provider){
		    op[i].p, op[i].p->name, op[i].slot < 0 ? VS_META_NO_SLOT : (uint32_t)op[i].slot,
		    op[i].nflags, op[i].flags};
	object_flavour(obj, ro->flavour, sizeof ro->flavour);
	vs_meta_put_object(&rec, reg.next_index, reg.next_site, base, path, ro->flavour, mp, nop,
			   obj->sites, nsites, obj->callers, ncallers, obj->stages, nstages);
	free(mp);
	if (nsites > UINT32_MAX - 2 - reg.next_site || !append_meta(&rec)) {
		fprintf(stderr,
			"vioscope trace: %s: no room for its metadata (%zu bytes; raise "
			"VIOSCOPE_TRACE_META): its sites stay disabled\n",
			path, rec.len);
		goto out;
	}

	/* Committed: from here the object is known to the tools. */
	for (unsigned i = 0; i < nsites; i++)
		obj->sites[i].id = reg.next_site + i;
	reg.next_site += nsites;
	ro->obj = obj;
	ro->path = path;
	path = NULL;
	ro->index = reg.next_index++;
	for (unsigned i = 0; i < nop; i++) {
		if (op[i].slot < 0)
			continue;
		if (op[i].is_new) {
			if ((uint32_t)op[i].slot != reg.nprovs ||
			    new_provider(op[i].unit, ro->path) < 0)
				continue;
			if (vs_rt.hdr)
				vs_rt.provs[op[i].slot].ctl.clock = vs_rt.clock_mono;
			reg.fork_ctl[op[i].slot].clock = vs_rt.clock_mono;
			apply_spec_to((uint32_t)op[i].slot);
			if (vs_rt.hdr && !reg.forked)
				__atomic_store_n(&vs_rt.hdr->nproviders, reg.nprovs,
						 __ATOMIC_RELEASE);
		}
		op[i].p->slot = (uint32_t)op[i].slot;
		const struct vs_trace_control *ctl = reg.forked || !vs_rt.hdr
							 ? &reg.fork_ctl[op[i].slot]
							 : &vs_rt.provs[op[i].slot].ctl;
		__atomic_store_n(&op[i].p->ctl, ctl, __ATOMIC_RELEASE);
		ro->prov[ro->nprov++] = op[i].p;
	}
	reg.objs[reg.nobjs++] = ro;
	ro = NULL;
	update_flavour();
	if (is_main) {
		vs_rt_exit_hook_late();
		check_spec();
	}
out:
	if (ro) {
		free(ro->prov);
		free(ro);
	}
	for (unsigned i = 0; i < nop; i++)
		free(op[i].split);
	free(op);
	vs_buf_free(&rec);
	free(path);
}

void vs__object_register(struct vs_object *obj)
{
	pthread_mutex_lock(&reg.lock);
	if (obj->refs++ == 0)
		register_object(obj);
	pthread_mutex_unlock(&reg.lock);
}

void vs__object_unregister(struct vs_object *obj)
{
	pthread_mutex_lock(&reg.lock);
	if (obj->refs == 0 || --obj->refs > 0) {
		pthread_mutex_unlock(&reg.lock);
		return;
	}
	for (size_t i = 0; i < reg.nobjs; i++) {
		struct rt_object *ro = reg.objs[i];
		if (ro->obj != obj)
			continue;
		/* Its code and data go away with it: forget every pointer into them.  Its
		 * metadata stays, so its events already in the rings still decode. */
		reg.objs[i] = reg.objs[--reg.nobjs];
		if (!vs_rt_exiting()) {
			struct vs_buf rec = {0};
			vs_meta_put_unload(&rec, ro->index,
					   vs_rt.clock_mono ? vs__clock_ns() : vs__rdtsc());
			append_meta(&rec);
			vs_buf_free(&rec);
			update_flavour();
		}
		free(ro->prov);
		free(ro->path);
		free(ro);
		break;
	}
	pthread_mutex_unlock(&reg.lock);
}

/* ---- fork -------------------------------------------------------------------------------- */
void vs_reg_atfork_child(void)
{
	if (!vs_rt.hdr)
		return;
	for (uint32_t i = 0; i < reg.nprovs; i++) {
		const struct vs_shm_provider *sp = &vs_rt.provs[i];
		uint32_t level = __atomic_load_n(&sp->level, __ATOMIC_RELAXED);
		reg.fork_level[i] = level > VS_LEVEL_MAX ? VS_LEVEL_MAX : level;
		reg.fork_mask[i] = __atomic_load_n(&sp->mask, __ATOMIC_RELAXED);
		vs_ctl_compute(&reg.fork_ctl[i], reg.fork_level[i], reg.fork_mask[i]);
		reg.fork_ctl[i].clock = vs_rt.clock_mono;
	}
	for (size_t i = 0; i < reg.nobjs; i++)
		for (unsigned k = 0; k < reg.objs[i]->nprov; k++) {
			struct vs_provider *p = reg.objs[i]->prov[k];
			p->ctl = &reg.fork_ctl[p->slot];
		}
	reg.forked = true;
}

bool vs_reg_child_file(void)
{
	bool ok = false;
	pthread_mutex_lock(&reg.lock);
	if (!reg.forked) {
		ok = vs_rt.hdr != NULL;
		goto out;
	}
	reg.forked = false;
	if (vs_rt_file_create() < 0 || reg.meta.len > vs_rt.meta_capacity) {
		reg.forked = true;
		goto out;
	}
	/* The settings it inherited, the records of every object so far. */
	for (uint32_t i = 0; i < reg.nprovs; i++) {
		vs_rt.provs[i].ctl.clock = vs_rt.clock_mono;
		vs_ctl_store(&vs_rt.provs[i], reg.fork_level[i], reg.fork_mask[i]);
	}
	memcpy(vs_rt.meta, reg.meta.p, reg.meta.len);
	__atomic_store_n(&vs_rt.hdr->meta_used, reg.meta.len, __ATOMIC_RELEASE);
	__atomic_store_n(&vs_rt.hdr->nproviders, reg.nprovs, __ATOMIC_RELEASE);
	for (size_t i = 0; i < reg.nobjs; i++)
		for (unsigned k = 0; k < reg.objs[i]->nprov; k++) {
			struct vs_provider *p = reg.objs[i]->prov[k];
			__atomic_store_n(&p->ctl, &vs_rt.provs[p->slot].ctl, __ATOMIC_RELEASE);
		}
	update_flavour();
	ok = true;
out:
	pthread_mutex_unlock(&reg.lock);
	return ok;
}
