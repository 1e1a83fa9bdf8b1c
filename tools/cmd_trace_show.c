/* SPDX-License-Identifier: MIT */
/* `vioscope trace list` and `vioscope trace show`: what is traced, as text or JSON.
 * Everything shown comes from files other processes wrote: the snapshot vs_shm_open
 * took, escaped for where it goes (text or JSON). */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/cmd_trace.h"
#include "util/util.h"

/* A provider's settings, read live from its slot. */
static void provider_setting(const struct vs_shm *s, uint32_t i, uint32_t *level, uint32_t *mask)
{
	const struct vs_shm_provider *p = vs_shm_provider(s, s->meta.providers[i].slot);
	*level = p ? __atomic_load_n(&p->level, __ATOMIC_RELAXED) : 0;
	*mask = p ? __atomic_load_n(&p->mask, __ATOMIC_RELAXED) : 0;
}

static uint32_t all_flags(const struct vs_meta_provider *p)
{
	return p->nflags >= 32 ? 0xffffffffu : (1u << p->nflags) - 1;
}

/* One provider's flags of mask, lower case, separated by sep: "io,queue", or "" for
 * none. */
static void flag_names(const struct vs_meta_provider *p, uint32_t mask, const char *sep, char *out,
		       size_t len)
{
	size_t n = 0;
	out[0] = '\0';
	for (uint32_t f = 0; f < p->nflags && f < 32 && n < len; f++)
		if (mask & (1u << f))
			n += (size_t)snprintf(out + n, len - n, "%s%s", n ? sep : "",
					      p->flags[f] ? p->flags[f] : "?");
	for (char *c = out; *c; c++)
		*c = (char)tolower((unsigned char)*c);
}

/* One provider's enabled flags: "all", "-" or "io,queue". */
static void flags_text(const struct vs_meta_provider *p, uint32_t mask, char *out, size_t len)
{
	if ((mask & all_flags(p)) == all_flags(p)) {
		snprintf(out, len, "all");
		return;
	}
	flag_names(p, mask, ",", out, len);
	if (!out[0])
		snprintf(out, len, "-");
}

/* The settings of every provider in one line: the level they share (or "mixed"), and
 * "all" or provider.flag,... */
static void settings_summary(const struct vs_shm *s, char *level, size_t llen, char *flags,
			     size_t flen)
{
	const struct vs_meta *m = &s->meta;
	uint32_t lv0 = 0, n = 0;
	bool same = true, everything = true;
	flags[0] = '\0';
	for (uint32_t i = 0; i < m->nproviders; i++) {
		uint32_t lv, mask;
		char one[512];
		provider_setting(s, i, &lv, &mask);
		same &= i == 0 || lv == lv0;
		lv0 = i == 0 ? lv : lv0;
		flags_text(&m->providers[i], mask, one, sizeof one);
		everything &= !strcmp(one, "all");
		if (strcmp(one, "-") != 0 && n < flen)
			n += (size_t)snprintf(flags + n, flen - n, "%s%s.%s", n ? "," : "",
					      m->providers[i].name, one);
	}
	snprintf(level, llen, "%s", !m->nproviders ? "-" : same ? vs_level_name(lv0) : "mixed");
	if (everything || !m->nproviders)
		snprintf(flags, flen, "%s", m->nproviders ? "all" : "-");
	else if (!n)
		snprintf(flags, flen, "-");
}

/* Who streams the process's events: nobody, a live recorder, or one that has gone
 * without detaching (killed: the process then drops what a full ring cannot take). */
enum recorder_state { RECORDER_NONE, RECORDER_LIVE, RECORDER_GONE };
static enum recorder_state recorder_of(const struct vs_shm *s, int32_t *pid)
{
	*pid = __atomic_load_n(&s->hdr->recorder_pid, __ATOMIC_RELAXED);
	if (__atomic_load_n(&s->hdr->mode, __ATOMIC_ACQUIRE) != VS_MODE_STREAM)
		return RECORDER_NONE;
	return vs_shm_recorder_alive(s, *pid) ? RECORDER_LIVE : RECORDER_GONE;
}

static const char *const recorder_state_names[] = {"none", "recording", "gone"};

static unsigned ring_threads(const struct vs_shm *s)
{
	unsigned threads = 0;
	for (unsigned i = 0; i < s->snap.ring_count; i++)
		threads +=
		    __atomic_load_n(&vs_shm_ring(s, i)->state, __ATOMIC_RELAXED) != VS_RING_FREE;
	return threads;
}

/* ---- trace list ----------------------------------------------------------------------- */

static void list_text_entry(const struct vs_shm *s)
{
	/* Escaped: the file is not ours to trust, and exe, flavour or names could carry
	 * terminal escapes. */
	char level[16], flags[256], flags_shown[sizeof flags * 4],
	    flavour[sizeof s->snap.flavour * 4], exe[sizeof s->snap.exe * 4];
	settings_summary(s, level, sizeof level, flags, sizeof flags);
	vs_escape_text(flags_shown, sizeof flags_shown, flags);
	vs_escape_text(flavour, sizeof flavour, s->snap.flavour);
	vs_escape_text(exe, sizeof exe, s->snap.exe);
	printf("%-8d %-5s %-10s %-8s %-24s %-7u %s\n", s->snap.pid,
	       trace_owner_running(s) ? "live" : "dead", flavour, level, flags_shown,
	       ring_threads(s), exe);
}

static void list_json_entry(const struct vs_shm *s, bool first)
{
	char level[16], flags[1024];
	int32_t rpid;
	enum recorder_state rs = recorder_of(s, &rpid);
	settings_summary(s, level, sizeof level, flags, sizeof flags);
	printf("%s    {\"pid\": %d, \"state\": \"%s\", \"flavour\": ", first ? "" : ",\n",
	       s->snap.pid, trace_owner_running(s) ? "live" : "dead");
	vs_fputs_json(s->snap.flavour, stdout);
	printf(", \"level\": \"%s\", \"flags\": ", level);
	vs_fputs_json(flags, stdout);
	printf(", \"threads\": %u, \"recorder\": ", ring_threads(s));
	if (rs == RECORDER_NONE)
		printf("null");
	else
		printf("{\"pid\": %d, \"state\": \"%s\"}", (int)rpid, recorder_state_names[rs]);
	printf(", \"program\": ");
	vs_fputs_json(s->snap.exe, stdout);
	printf(", \"file\": ");
	vs_fputs_json(s->path, stdout);
	putchar('}');
}

int trace_list(int argc, char **argv)
{
	static const struct option opts[] = {{"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
	bool json = false, first = true;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "j", opts, NULL)) != -1) {
		if (c != 'j')
			return VS_EXIT_USAGE;
		json = true;
	}
	if (optind != argc) {
		fprintf(stderr, "vioscope trace list: takes no arguments (`trace list --help`)\n");
		return VS_EXIT_USAGE;
	}
	DIR *d = opendir(vs_shm_dir());
	if (!d) {
		fprintf(stderr, "vioscope trace list: %s: %s\n", vs_shm_dir(), strerror(errno));
		return VS_EXIT_CANNOT_RUN;
	}
	if (json) {
		printf("{\n  ");
		vs_cli_json_meta(stdout); /* the build, the time, the command line */
		printf(",\n  \"trace_dir\": ");
		vs_fputs_json(vs_shm_dir(), stdout);
		printf(",\n  \"processes\": [\n");
	} else {
		printf("%-8s %-5s %-10s %-8s %-24s %-7s %s\n", "PID", "STATE", "FLAVOUR", "LEVEL",
		       "FLAGS", "THREADS", "PROGRAM");
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, VS_SHM_PREFIX, strlen(VS_SHM_PREFIX)) != 0)
			continue;
		char path[1024], why[512];
		struct vs_shm s;
		snprintf(path, sizeof path, "%s/%s", vs_shm_dir(), e->d_name);
		if (vs_shm_open(&s, path, why, sizeof why) < 0) {
			if (json) {
				printf("%s    {\"file\": ", first ? "" : ",\n");
				vs_fputs_json(path, stdout);
				printf(", \"state\": \"bad\", \"error\": ");
				vs_fputs_json(why, stdout);
				putchar('}');
			} else {
				printf("%-8s %-5s ", "?", "bad");
				vs_fputs_text(why, stdout);
				putchar('\n');
			}
			first = false;
			continue;
		}
		if (json)
			list_json_entry(&s, first);
		else
			list_text_entry(&s);
		first = false;
		vs_shm_close(&s);
	}
	closedir(d);
	if (json)
		printf("%s  ]\n}\n", first ? "" : "\n");
	return VS_EXIT_OK;
}

/* ---- trace show ----------------------------------------------------------------------- */

/* sites[p * 32 + f]: how many sites of provider p a flag selects (its own or, for
 * VS_VERBOSE_HP_ALSO, its second). */
static uint32_t *site_counts(const struct vs_meta *m)
{
	uint32_t *n = calloc((size_t)(m->nproviders ? m->nproviders : 1) * 32, sizeof *n);
	for (uint32_t i = 0; n && i < m->nsites; i++) {
		const struct vs_meta_site *site = &m->sites[i];
		if (site->prov >= m->nproviders || site->flag >= 32 || site->also > 32)
			continue;
		n[site->prov * 32 + site->flag]++;
		if (site->also && site->also - 1 != site->flag)
			n[site->prov * 32 + site->also - 1]++;
	}
	return n;
}

static uint32_t sited_mask(const uint32_t *counts, uint32_t prov)
{
	uint32_t mask = 0;
	for (uint32_t f = 0; f < 32; f++)
		mask |= counts[prov * 32 + f] ? 1u << f : 0;
	return mask;
}

static void show_text(const struct vs_shm *s, const uint32_t *counts)
{
	const struct vs_meta *m = &s->meta;
	int32_t rpid;
	enum recorder_state rs = recorder_of(s, &rpid);
	printf("pid %d: ", s->snap.pid);
	vs_fputs_text(s->snap.exe, stdout);
	if (!trace_owner_running(s))
		printf("\nnot running");
	else if (rs == RECORDER_LIVE)
		printf("\nrecording: by pid %d", (int)rpid);
	else if (rs == RECORDER_GONE)
		printf("\nrecorder pid %d has gone without detaching: a ring that fills drops "
		       "events until the process notices or `trace record` takes over",
		       (int)rpid);
	else
		printf("\nflight recorder (nobody records)");
	printf("\nobjects (%u):\n", m->nobjects);
	for (uint32_t i = 0; i < m->nobjects; i++) {
		const struct vs_meta_object *o = &m->objects[i];
		printf("  %-4u %-12s %5u sites  ", i, o->flavour[0] ? o->flavour : "-", o->nsites);
		vs_fputs_text(o->path, stdout);
		printf("%s\n", o->unloaded ? "  (unloaded)" : "");
	}
	printf("providers (%u): level, flags on, flags with trace sites here\n", m->nproviders);
	for (uint32_t i = 0; i < m->nproviders; i++) {
		const struct vs_meta_provider *p = &m->providers[i];
		uint32_t lv, mask;
		char on[512], sited[1024];
		provider_setting(s, i, &lv, &mask);
		flags_text(p, mask, on, sizeof on);
		/* The flags its sites use: a provider declares its whole list (vioscope's 17
		 * by default) whether or not a site has each flag. */
		flag_names(p, sited_mask(counts, i), " ", sited, sizeof sited);
		printf("  ");
		vs_fputs_text(p->name, stdout);
		printf("%*s %-8s on: ", strlen(p->name) < 12 ? (int)(12 - strlen(p->name)) : 0, "",
		       vs_level_name(lv));
		vs_fputs_text(on, stdout);
		printf("  flags: ");
		vs_fputs_text(sited[0] ? sited : "- (no sites)", stdout);
		putchar('\n');
	}
}

/* A JSON array of one provider's flags of mask, lower case. */
static void json_flag_array(const struct vs_meta_provider *p, uint32_t mask)
{
	bool first = true;
	putchar('[');
	for (uint32_t f = 0; f < p->nflags && f < 32; f++) {
		char name[64];
		if (!(mask & (1u << f)))
			continue;
		flag_names(p, 1u << f, "", name, sizeof name);
		printf("%s", first ? "" : ", ");
		vs_fputs_json(name, stdout);
		first = false;
	}
	putchar(']');
}

static void show_json(const struct vs_shm *s, const uint32_t *counts)
{
	const struct vs_meta *m = &s->meta;
	int32_t rpid;
	enum recorder_state rs = recorder_of(s, &rpid);
	printf("{\n  ");
	vs_cli_json_meta(stdout);
	printf(",\n  \"trace_dir\": ");
	vs_fputs_json(vs_shm_dir(), stdout);
	printf(",\n  \"pid\": %d,\n  \"program\": ", s->snap.pid);
	vs_fputs_json(s->snap.exe, stdout);
	printf(",\n  \"running\": %s,\n  \"flavour\": ", trace_owner_running(s) ? "true" : "false");
	vs_fputs_json(s->snap.flavour, stdout);
	printf(",\n  \"recorder\": ");
	if (rs == RECORDER_NONE)
		printf("null");
	else
		printf("{\"pid\": %d, \"state\": \"%s\"}", (int)rpid, recorder_state_names[rs]);
	printf(",\n  \"rings\": {\"threads\": %u, \"slots\": %u, \"bytes\": %llu},\n",
	       ring_threads(s), s->snap.ring_count, (unsigned long long)s->snap.ring_size);
	printf("  \"objects\": [");
	for (uint32_t i = 0; i < m->nobjects; i++) {
		const struct vs_meta_object *o = &m->objects[i];
		printf("%s\n    {\"index\": %u, \"flavour\": ", i ? "," : "", i);
		vs_fputs_json(o->flavour, stdout);
		printf(", \"sites\": %u, \"unloaded\": %s, \"path\": ", o->nsites,
		       o->unloaded ? "true" : "false");
		vs_fputs_json(o->path, stdout);
		putchar('}');
	}
	printf("\n  ],\n  \"providers\": [");
	for (uint32_t i = 0; i < m->nproviders; i++) {
		const struct vs_meta_provider *p = &m->providers[i];
		uint32_t lv, mask, sited = sited_mask(counts, i);
		provider_setting(s, i, &lv, &mask);
		printf("%s\n    {\"name\": ", i ? "," : "");
		vs_fputs_json(p->name, stdout);
		printf(", \"level\": \"%s\", \"on\": ", vs_level_name(lv));
		json_flag_array(p, mask);
		printf(",\n     \"flags\": [");
		bool first = true;
		for (uint32_t f = 0; f < p->nflags && f < 32; f++) {
			char name[64];
			if (!(sited & (1u << f)))
				continue;
			flag_names(p, 1u << f, "", name, sizeof name);
			printf("%s{\"name\": ", first ? "" : ", ");
			vs_fputs_json(name, stdout);
			printf(", \"sites\": %u}", counts[i * 32 + f]);
			first = false;
		}
		printf("],\n     \"declared_without_sites\": ");
		json_flag_array(p, all_flags(p) & ~sited);
		putchar('}');
	}
	printf("\n  ]\n}\n");
}

/* What a process has loaded: its objects, its providers and their settings. */
int trace_show(int argc, char **argv)
{
	static const struct option opts[] = {{"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
	bool json = false;
	struct vs_shm s;
	int c, rc;
	optind = 1;
	while ((c = getopt_long(argc, argv, "j", opts, NULL)) != -1) {
		if (c != 'j')
			return VS_EXIT_USAGE;
		json = true;
	}
	if (optind != argc - 1) {
		fprintf(stderr, "vioscope trace show: usage: show PID|SHMFILE [--json]\n");
		return VS_EXIT_USAGE;
	}
	if ((rc = trace_target_arg("show", argv[optind])) ||
	    (rc = trace_open_target("show", argv[optind], &s)))
		return rc;
	uint32_t *counts = site_counts(&s.meta);
	if (!counts) {
		trace_error("show", "out of memory");
		vs_shm_close(&s);
		return VS_EXIT_FAILED;
	}
	if (json)
		show_json(&s, counts);
	else
		show_text(&s, counts);
	free(counts);
	vs_shm_close(&s);
	return VS_EXIT_OK;
}
