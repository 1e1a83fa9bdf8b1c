/* SPDX-License-Identifier: MIT */
/*
 * Trace settings: "LEVEL[:TERM,...]" specs resolved against the providers of a
 * process (or of a capture, for decode filters), and the control words they become.
 * Used by the runtime ($VIOSCOPE_TRACE, vs_trace_set_spec) and by the tools.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "trace/trace_shared.h"

static const char *const level_names[] = {"off", "critical", "error", "warning", "info", "verbose"};

const char *vs_level_name(unsigned level)
{
	return level <= VS_LEVEL_MAX ? level_names[level] : "?";
}

int vs_level_parse(const char *s, size_t n)
{
	if (n == 1 && s[0] >= '0' && s[0] <= '5')
		return s[0] - '0';
	for (int i = 0; i <= VS_LEVEL_MAX; i++)
		if (strlen(level_names[i]) == n && strncasecmp(s, level_names[i], n) == 0)
			return i;
	if (n == 4 && strncasecmp(s, "warn", 4) == 0)
		return VS_LEVEL_WARNING;
	return -1;
}

void vs_ctl_compute(struct vs_trace_control *ctl, uint32_t level, uint32_t mask)
{
	for (uint32_t l = 0; l <= VS_LEVEL_MAX; l++)
		ctl->enabled[l] = l >= 1 && l <= level ? mask : 0;
}

void vs_ctl_store(struct vs_shm_provider *p, uint32_t level, uint32_t mask)
{
	struct vs_trace_control c;
	vs_ctl_compute(&c, level, mask);
	__atomic_store_n(&p->level, level, __ATOMIC_RELAXED);
	__atomic_store_n(&p->mask, mask, __ATOMIC_RELAXED);
	/* Word by word: sites read them with plain loads while we write. */
	for (int i = 0; i <= VS_LEVEL_MAX; i++)
		__atomic_store_n(&p->ctl.enabled[i], c.enabled[i], __ATOMIC_RELAXED);
}

struct vs_spec_provider *vs_meta_spec_providers(const struct vs_meta *m)
{
	struct vs_spec_provider *p = calloc(m->nproviders ? m->nproviders : 1, sizeof *p);
	for (uint32_t i = 0; p && i < m->nproviders; i++) {
		p[i].name = m->providers[i].name;
		p[i].nflags = m->providers[i].nflags;
		p[i].flags = m->providers[i].flags;
		p[i].sites_known = true;
	}
	for (uint32_t i = 0; p && i < m->nsites; i++) {
		const struct vs_meta_site *site = &m->sites[i];
		if (site->prov < m->nproviders && site->level <= VS_LEVEL_MAX && site->flag < 32 &&
		    site->also <= 32)
			p[site->prov].sited[site->level] |= VS__FLAGS_MASK(site->flag, site->also);
	}
	return p;
}

uint32_t vs_spec_sited(const struct vs_spec_provider *p, unsigned level)
{
	uint32_t mask = 0;
	for (unsigned l = 1; l <= level && l <= VS_LEVEL_MAX; l++)
		mask |= p->sited[l];
	return mask;
}

static int flag_bit(const struct vs_spec_provider *p, const char *name)
{
	for (uint32_t i = 0; i < p->nflags && i < 32; i++)
		if (p->flags[i] && strcasecmp(p->flags[i], name) == 0)
			return (int)i;
	return -1;
}

/* Whole names into a buffer: what does not fit is counted, never cut. */
struct name_list {
	char *buf;
	size_t len, used;
	unsigned more;
};
/* Room kept for the count of the names left out: " and 4294967295 more". */
#define NAME_LIST_TAIL 24

static void name_add(struct name_list *l, const char *prov, const char *name)
{
	char one[160];
	int n =
	    snprintf(one, sizeof one, "%s%s%s", prov ? prov : "", prov && prov[0] ? "." : "", name);
	if (l->more || n < 0 || (size_t)n >= sizeof one ||
	    l->used + 2 + (size_t)n + NAME_LIST_TAIL >= l->len) {
		l->more++;
		return;
	}
	for (char *c = one; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	l->used +=
	    (size_t)snprintf(l->buf + l->used, l->len - l->used, "%s%s", l->used ? ", " : "", one);
}

/* "a, b, c" (lower case) into buf, len bytes at most, then " and N more" when the rest
 * does not fit: provider names (only < 0, !qualified), the flags of provider `only`, or
 * provider.flag of every provider (qualified).  Flags with sites only, where known. */
static void list_names(char *buf, size_t len, const struct vs_spec_provider *provs, unsigned nprovs,
		       int only, bool qualified)
{
	struct name_list l = {buf, len, 0, 0};
	if (!len)
		return;
	buf[0] = '\0';
	for (unsigned i = 0; i < nprovs; i++) {
		if (only >= 0 && (unsigned)only != i)
			continue;
		const struct vs_spec_provider *p = &provs[i];
		if (!qualified && only < 0) {
			name_add(&l, NULL, p->name);
			continue;
		}
		uint32_t sited = vs_spec_sited(p, VS_LEVEL_MAX);
		for (uint32_t f = 0; f < p->nflags && f < 32; f++)
			if (p->flags[f] && (!p->sites_known || (sited & (1u << f))))
				name_add(&l, qualified ? p->name : NULL, p->flags[f]);
	}
	if (l.more)
		snprintf(buf + l.used, len - l.used, "%s%u more", l.used ? " and " : "", l.more);
	else if (!l.used)
		snprintf(buf, len, "none");
}

/* "HEAD" + list_names(...) + ")" into why, the list cut to whole names to fit. */
static int fail_listing(char *why, size_t whylen, const char *head,
			const struct vs_spec_provider *provs, unsigned nprovs, int only,
			bool qualified)
{
	if (!whylen)
		return -EINVAL;
	snprintf(why, whylen, "%s", head);
	size_t h = strlen(why);
	if (h + 2 < whylen) {
		list_names(why + h, whylen - h - 1, provs, nprovs, only, qualified);
		strcat(why, ")");
	}
	return -EINVAL;
}

/* The label of a list of flags: with sites, where that is known. */
static const char *flags_label(const struct vs_spec_provider *provs, unsigned nprovs)
{
	return nprovs && provs[0].sites_known ? "flags with sites" : "known";
}

static int spec_fail(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int spec_fail(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* "all", "*" or 0xMASK as a mask; -1 if the word is a name. */
static int mask_word(const char *w, uint32_t *mask, char *why, size_t whylen)
{
	if (strcasecmp(w, "all") == 0 || strcmp(w, "*") == 0) {
		*mask = 0xffffffffu;
		return 0;
	}
	if (w[0] == '0' && (w[1] == 'x' || w[1] == 'X')) {
		char *end;
		unsigned long v = strtoul(w, &end, 16);
		if (*end || v > 0xffffffffu || !w[2])
			return spec_fail(why, whylen, "bad flag mask '%s'", w);
		*mask = (uint32_t)v;
		return 0;
	}
	return 1;
}

/* One term into masks. */
static int apply_term(const char *term, const struct vs_spec_provider *provs, unsigned nprovs,
		      bool strict, uint32_t *masks, char *why, size_t whylen)
{
	char head[320];
	const char *dot = strchr(term, '.');
	const char *flag = dot ? dot + 1 : term;
	uint32_t mask;
	int rc;

	if (dot) {
		int p = -1;
		for (unsigned i = 0; i < nprovs && p < 0; i++)
			if (strlen(provs[i].name) == (size_t)(dot - term) &&
			    strncasecmp(provs[i].name, term, (size_t)(dot - term)) == 0)
				p = (int)i;
		if (p < 0) {
			if (!strict)
				return 0;
			snprintf(head, sizeof head,
				 "no provider '%.*s' in '%s' (providers: ", (int)(dot - term), term,
				 term);
			return fail_listing(why, whylen, head, provs, nprovs, -1, false);
		}
		rc = mask_word(flag, &mask, why, whylen);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			masks[p] |= mask;
			return 0;
		}
		int bit = flag_bit(&provs[p], flag);
		if (bit < 0) {
			if (!strict)
				return 0;
			snprintf(head, sizeof head,
				 "provider '%s' has no flag '%s' (its %s: ", provs[p].name, flag,
				 provs[p].sites_known ? "flags with sites" : "flags");
			return fail_listing(why, whylen, head, provs, nprovs, p, false);
		}
		masks[p] |= 1u << bit;
		return 0;
	}
	rc = mask_word(term, &mask, why, whylen);
	if (rc < 0)
		return rc;
	bool matched = false;
	for (unsigned i = 0; i < nprovs; i++) {
		int bit = rc == 0 ? 0 : flag_bit(&provs[i], term);
		if (rc == 0)
			masks[i] |= mask;
		else if (bit >= 0)
			masks[i] |= 1u << bit;
		matched |= rc == 0 || bit >= 0;
	}
	if (!matched && rc == 1 && strict) {
		snprintf(head, sizeof head, "unknown flag '%s' (%s: ", term,
			 flags_label(provs, nprovs));
		return fail_listing(why, whylen, head, provs, nprovs, -1, true);
	}
	return 0;
}

int vs_spec_eval(const char *spec, const struct vs_spec_provider *provs, unsigned nprovs,
		 bool strict, uint32_t *level, uint32_t *masks, char *why, size_t whylen)
{
	const char *colon = strchr(spec, ':');
	size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
	int lv = n ? vs_level_parse(spec, n) : -1;

	if (n == 0)
		return spec_fail(why, whylen,
				 "expected LEVEL[:FLAG,...], LEVEL one of off, critical, "
				 "error, warning, info, verbose (or 0-5)");
	if (lv < 0)
		return spec_fail(why, whylen,
				 "unknown level '%.*s' (off, critical, error, warning, "
				 "info, verbose, or 0-5)",
				 (int)(n > 64 ? 64 : n), spec);
	*level = (uint32_t)lv;
	for (unsigned i = 0; i < nprovs; i++)
		masks[i] = colon ? 0 : 0xffffffffu;
	if (!colon)
		return 0;
	const char *p = colon + 1;
	if (!*p)
		return spec_fail(why, whylen, "no flags after ':' (use 'all' or names)");
	while (*p) {
		char term[128];
		size_t k = strcspn(p, ",+|");
		if (k == 0 || k >= sizeof term)
			return spec_fail(why, whylen, "empty or overlong flag name in '%.64s'",
					 colon + 1);
		memcpy(term, p, k);
		term[k] = '\0';
		int rc = apply_term(term, provs, nprovs, strict, masks, why, whylen);
		if (rc < 0)
			return rc;
		p += k;
		if (*p)
			p++;
	}
	return 0;
}

/* Why term (its masks: what it selects) selects no site at `level`, into warn. */
static void describe_unsited(char *warn, size_t warnlen, const char *term, const uint32_t *masks,
			     const struct vs_spec_provider *provs, unsigned nprovs, unsigned level)
{
	char head[320];
	int only = -1, nsel = 0;
	for (unsigned i = 0; i < nprovs; i++) {
		for (unsigned l = level + 1; l <= VS_LEVEL_MAX; l++)
			if (masks[i] & provs[i].sited[l]) {
				/* sites there are, only more verbose than the spec's level */
				snprintf(warn, warnlen,
					 "'%s' selects no trace site at level %s (its sites are at "
					 "level %s and above)",
					 term, vs_level_name(level), vs_level_name(l));
				return;
			}
		if (masks[i]) {
			only = (int)i;
			nsel++;
		}
	}
	if (nsel == 1 && strchr(term, '.')) {
		snprintf(head, sizeof head,
			 "'%s' selects no trace site (%s's flags with sites: ", term,
			 provs[only].name);
		fail_listing(warn, warnlen, head, provs, nprovs, only, false);
	} else {
		snprintf(head, sizeof head, "'%s' selects no trace site (flags with sites: ", term);
		fail_listing(warn, warnlen, head, provs, nprovs, -1, true);
	}
}

unsigned vs_spec_unsited(const char *spec, const struct vs_spec_provider *provs, unsigned nprovs,
			 char *warn, size_t warnlen)
{
	uint32_t level, *masks = calloc(nprovs ? nprovs : 1, sizeof *masks);
	const char *colon = strchr(spec, ':');
	const char *p = colon ? colon + 1 : spec;
	char why[256];
	size_t used = 0;
	unsigned n = 0;

	if (warnlen)
		warn[0] = '\0';
	if (!masks || vs_spec_eval(spec, NULL, 0, false, &level, NULL, why, sizeof why) < 0 ||
	    level == 0)
		goto out;
	while (*p) {
		char term[128];
		size_t k = colon ? strcspn(p, ",+|") : strlen(p);
		if (k == 0 || k >= sizeof term)
			break;
		memcpy(term, p, k);
		term[k] = '\0';
		p += k;
		if (*p)
			p++;
		memset(masks, 0, (nprovs ? nprovs : 1) * sizeof *masks);
		if (!colon)
			memset(masks, 0xff, nprovs * sizeof *masks); /* a bare level: every flag */
		else if (apply_term(term, provs, nprovs, false, masks, why, sizeof why) < 0)
			continue;
		bool selects = false;
		for (unsigned i = 0; i < nprovs; i++)
			selects |= (masks[i] & vs_spec_sited(&provs[i], level)) != 0;
		if (selects)
			continue;
		n++;
		if (used + 3 < warnlen) {
			if (used)
				used += (size_t)snprintf(warn + used, warnlen - used, "; ");
			describe_unsited(warn + used, warnlen - used, term, masks, provs, nprovs,
					 level);
			used += strlen(warn + used);
		}
	}
out:
	free(masks);
	return n;
}
