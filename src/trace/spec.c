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
	}
	return p;
}

static int flag_bit(const struct vs_spec_provider *p, const char *name)
{
	for (uint32_t i = 0; i < p->nflags && i < 32; i++)
		if (p->flags[i] && strcasecmp(p->flags[i], name) == 0)
			return (int)i;
	return -1;
}

/* "a, b, c" into buf, lower case, cut to fit. */
static void list_names(char *buf, size_t len, const struct vs_spec_provider *provs, unsigned nprovs,
		       int only, bool qualified)
{
	size_t used = 0;
	buf[0] = '\0';
	for (unsigned i = 0; i < nprovs; i++) {
		if (only >= 0 && (unsigned)only != i)
			continue;
		const struct vs_spec_provider *p = &provs[i];
		if (!qualified && only < 0) {
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
						 p->name);
		} else {
			for (uint32_t f = 0; f < p->nflags && used < len; f++) {
				if (!p->flags[f])
					continue;
				used += (size_t)snprintf(buf + used, len - used, "%s%s%s%s",
							 used ? ", " : "", qualified ? p->name : "",
							 qualified && p->name[0] ? "." : "",
							 p->flags[f]);
			}
		}
		if (used >= len)
			break;
	}
	for (char *c = buf; *c; c++)
		*c = (char)tolower((unsigned char)*c);
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
	char list[768];
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
			list_names(list, sizeof list, provs, nprovs, -1, false);
			return spec_fail(why, whylen, "no provider '%.*s' in '%s' (providers: %s)",
					 (int)(dot - term), term, term, list[0] ? list : "none");
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
			list_names(list, sizeof list, provs, nprovs, p, false);
			return spec_fail(why, whylen,
					 "provider '%s' has no flag '%s' (its flags: %s)",
					 provs[p].name, flag, list);
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
		list_names(list, sizeof list, provs, nprovs, -1, true);
		return spec_fail(why, whylen, "unknown flag '%s' (known: %s)", term,
				 list[0] ? list : "none");
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
