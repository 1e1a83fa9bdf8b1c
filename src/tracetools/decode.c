/* SPDX-License-Identifier: MIT */
/* `trace decode`: one line per event, like tracefmt, or JSON lines, or Chrome
 * trace-event JSON.  Every string from the capture is escaped for where it goes:
 * \xNN for control characters in text, JSON escaping in JSON. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracetools/tracetools.h"

struct dctx {
	const struct vs_decode_opts *o;
	const uint32_t *masks; /* per provider of the capture, from --flag; NULL: all */
	FILE *out;
	uint64_t first_ns;
	bool have_first;
	uint64_t shown, lost;
	uint32_t pid;
};

static int on_event(const struct vs_cap_event *ev, void *opaque)
{
	struct dctx *d = opaque;
	const struct vs_decode_opts *o = d->o;
	char when[64], msg[4096];

	if (!d->have_first && ev->real_ns) {
		d->first_ns = ev->real_ns;
		d->have_first = true;
	}
	double rel = d->have_first ? (double)(ev->real_ns - d->first_ns) / 1e9 : 0;
	if (o->tid && ev->tid != o->tid)
		return 0;
	if (ev->real_ns && (rel < o->from_s || (o->to_s >= 0 && rel > o->to_s)))
		return 0;
	if (!ev->site) {
		/* Losses are always shown: a filter must not hide that events are missing. */
		d->lost += ev->lost;
		if (o->chrome) {
			d->shown++;
			fprintf(d->out,
				"%s{\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%u,"
				"\"tid\":%u,\"name\":\"events lost\",\"cat\":\"loss\","
				"\"args\":{\"count\":%llu}}",
				d->shown > 1 ? ",\n" : "",
				ev->real_ns ? (double)(ev->real_ns - d->first_ns) / 1000.0 : 0,
				d->pid, ev->tid, (unsigned long long)ev->lost);
		} else if (o->json) {
			fprintf(d->out,
				"{\"type\":\"loss\",\"time_ns\":%llu,\"tid\":%u,\"count\":%llu,"
				"\"what\":",
				(unsigned long long)ev->real_ns, ev->tid,
				(unsigned long long)ev->lost);
			vs_fputs_json(ev->lost_what, d->out);
			fputs("}\n", d->out);
		} else {
			vs_format_walltime(when, sizeof when, ev->real_ns);
			fprintf(d->out, "%s %-6u ***** %llu events ", ev->real_ns ? when : "-",
				ev->tid, (unsigned long long)ev->lost);
			vs_fputs_text(ev->lost_what, d->out);
			fputc('\n', d->out);
		}
		return 0;
	}
	if (o->max_level && ev->site->level > o->max_level)
		return 0;
	if (d->masks &&
	    (ev->site->prov == VS_META_NO_SLOT ||
	     !(d->masks[ev->site->prov] & VS__FLAGS_MASK(ev->site->flag, ev->site->also))))
		return 0;
	vs_format_message_noted(msg, sizeof msg, ev->site, ev->args, ev->args_len, vs_proto_notes,
				vs_proto_nnotes);
	d->shown++;
	if (o->chrome) {
		/* Chrome/Perfetto trace-event JSON: one instant event per event. */
		fprintf(d->out,
			"%s{\"ph\":\"i\",\"s\":\"t\",\"ts\":%.3f,\"pid\":%u,\"tid\":%u,"
			"\"name\":",
			d->shown > 1 ? ",\n" : "", (double)(ev->real_ns - d->first_ns) / 1000.0,
			d->pid, ev->tid);
		if (ev->caller) {
			char both[256];
			snprintf(both, sizeof both, "%s>%s", ev->caller->func, ev->site->func);
			vs_fputs_json(both, d->out);
		} else {
			vs_fputs_json(ev->site->func, d->out);
		}
		char cat[256];
		snprintf(cat, sizeof cat, "%s%s%s", ev->site->provider,
			 ev->site->provider[0] ? "." : "", ev->site->flag_name);
		fprintf(d->out, ",\"cat\":");
		vs_fputs_json(cat, d->out);
		fprintf(d->out,
			",\"args\":{\"level\":\"%s\",\"message\":", vs_level_name(ev->site->level));
		vs_fputs_json(msg, d->out);
		fputs("}}", d->out);
		return 0;
	}
	if (o->json) {
		fprintf(d->out, "{\"type\":\"event\",\"time_ns\":%llu,\"tid\":%u,\"thread\":",
			(unsigned long long)ev->real_ns, ev->tid);
		vs_fputs_json(ev->thread_name ? ev->thread_name : "", d->out);
		fprintf(d->out, ",\"level\":\"%s\",\"provider\":", vs_level_name(ev->site->level));
		vs_fputs_json(ev->site->provider, d->out);
		fputs(",\"flag\":", d->out);
		vs_fputs_json(ev->site->flag_name, d->out);
		fputs(",\"function\":", d->out);
		vs_fputs_json(ev->site->func, d->out);
		if (ev->caller) {
			fputs(",\"caller\":", d->out);
			vs_fputs_json(ev->caller->func, d->out);
		}
		fputs(",\"file\":", d->out);
		vs_fputs_json(ev->site->file, d->out);
		fprintf(d->out, ",\"line\":%u,\"hot\":%s,\"message\":", ev->site->line,
			ev->site->hot ? "true" : "false");
		vs_fputs_json(msg, d->out);
		fputs("}\n", d->out);
	} else {
		char prefix[512];
		vs_format_prefix(prefix, sizeof prefix, ev->real_ns, ev->tid, ev->site->level,
				 ev->site->provider, ev->site->flag_name,
				 ev->caller ? ev->caller->func : NULL, ev->site->func);
		/* Names and arguments come from the traced process: no terminal controls. */
		vs_fputs_text(prefix, d->out);
		vs_fputs_text(msg, d->out);
		fputc('\n', d->out);
	}
	return 0;
}

/* One capture's events into `out` with the state `d` carries across captures (the
 * Chrome output's comma and time base). */
static int decode_one(const char *path, struct dctx *d, char *why, size_t whylen)
{
	struct vs_capture *c;
	int rc = vs_capture_open(&c, path, why, whylen);
	if (rc < 0)
		return rc;
	uint32_t *masks = NULL;
	if (d->o->flag_spec) {
		/* reuse the spec parser: "verbose:" + names, strict */
		const struct vs_meta *m = vs_capture_meta(c);
		struct vs_spec_provider *sp = vs_meta_spec_providers(m);
		char spec[512];
		uint32_t level;
		masks = calloc(m->nproviders ? m->nproviders : 1, sizeof *masks);
		snprintf(spec, sizeof spec, "verbose:%s", d->o->flag_spec);
		rc = !sp || !masks
			 ? -ENOMEM
			 : vs_spec_eval(spec, sp, m->nproviders, true, &level, masks, why, whylen);
		free(sp);
	}
	if (rc == 0) {
		d->masks = masks;
		d->pid = vs_capture_pid(c);
		rc = vs_capture_walk(c, on_event, d, why, whylen);
		d->masks = NULL;
	}
	vs_capture_close(c);
	free(masks);
	return rc;
}

static int first_event(const struct vs_cap_event *ev, void *opaque)
{
	uint64_t *first = opaque;
	if (!ev->real_ns)
		return 0;
	*first = ev->real_ns;
	return 1; /* that is all we need */
}

/* The earliest event of all the captures: the Chrome output's time 0. */
static uint64_t time_base(const char *const *paths, unsigned n)
{
	uint64_t base = UINT64_MAX;
	for (unsigned i = 0; i < n; i++) {
		struct vs_capture *c;
		char why[256];
		uint64_t first = 0;
		if (vs_capture_open(&c, paths[i], why, sizeof why) < 0)
			continue;
		vs_capture_walk(c, first_event, &first, why, sizeof why);
		vs_capture_close(c);
		if (first && first < base)
			base = first;
	}
	return base == UINT64_MAX ? 0 : base;
}

/* A slice ("X") of one stage on the thread that spent it. */
static void chrome_slice(struct dctx *d, const char *name, const char *tag_text, uint32_t pid,
			 uint32_t tid, uint64_t from, uint64_t to)
{
	if (!from || !to || to < from || !pid)
		return;
	fprintf(d->out,
		"%s{\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%u,\"tid\":%u,\"name\":\"%s\","
		"\"cat\":\"request\",\"args\":{\"tag\":\"%s\"}}",
		d->shown++ ? ",\n" : "", (double)(from - d->first_ns) / 1000.0,
		(double)(to - from) / 1000.0, pid, tid, name, tag_text);
}

/* A flow event: s(tart), t (step) or f(inish), bound to the slice around it. */
static void chrome_flow(struct dctx *d, char ph, size_t id, uint32_t pid, uint32_t tid, uint64_t at)
{
	if (!at || !pid)
		return;
	fprintf(d->out,
		"%s{\"ph\":\"%c\",%s\"id\":%zu,\"ts\":%.3f,\"pid\":%u,\"tid\":%u,"
		"\"name\":\"request\",\"cat\":\"request\"}",
		d->shown++ ? ",\n" : "", ph, ph == 'f' ? "\"bp\":\"e\"," : "", id,
		(double)(at - d->first_ns) / 1000.0, pid, tid);
}

/* Each request as slices of its stages on the driver's and the device's threads, and,
 * where both sides are there, a flow driver -> device -> driver (ui.perfetto.dev draws
 * the arrows). */
static void chrome_requests(struct dctx *d, const char *const *paths, unsigned n)
{
	struct vs_lat_set set;
	char why[256];
	if (vs_latency_collect(paths, n, &set, why, sizeof why) < 0)
		return; /* no request events: nothing to draw */
	for (size_t i = 0; i < set.n; i++) {
		const struct vs_lat_req *r = &set.r[i];
		const uint64_t *t = r->t;
		char tag[32], name[64];
		snprintf(tag, sizeof tag, "%#llx", (unsigned long long)r->tag);
		snprintf(name, sizeof name, "request %s", tag);
		chrome_slice(d, name, tag, r->pid_driver, r->tid_driver, t[VS_LAT_SUBMIT],
			     t[VS_LAT_DONE]);
		chrome_slice(d, "submit>kick", tag, r->pid_driver, r->tid_driver, t[VS_LAT_SUBMIT],
			     t[VS_LAT_KICK]);
		chrome_slice(d, "poll>done", tag, r->pid_driver, r->tid_driver, t[VS_LAT_POLL],
			     t[VS_LAT_DONE]);
		snprintf(name, sizeof name, "device %s", tag);
		chrome_slice(d, name, tag, r->pid_device, r->tid_device, t[VS_LAT_POP],
			     t[VS_LAT_PUSH]);
		chrome_slice(d, "pop>backend", tag, r->pid_device, r->tid_device, t[VS_LAT_POP],
			     t[VS_LAT_BSUB]);
		chrome_slice(d, "backend", tag, r->pid_device, r->tid_device, t[VS_LAT_BSUB],
			     t[VS_LAT_BDONE]);
		chrome_slice(d, "backend>push", tag, r->pid_device, r->tid_device, t[VS_LAT_BDONE],
			     t[VS_LAT_PUSH]);
		if (!set.driver || !set.device || !r->pid_device || !t[VS_LAT_DONE])
			continue;
		chrome_flow(d, 's', i + 1, r->pid_driver, r->tid_driver, t[VS_LAT_SUBMIT]);
		chrome_flow(d, 't', i + 1, r->pid_device, r->tid_device, t[VS_LAT_POP]);
		chrome_flow(d, 't', i + 1, r->pid_device, r->tid_device,
			    t[VS_LAT_PUSH] > t[VS_LAT_POP] ? t[VS_LAT_PUSH] - 1 : t[VS_LAT_POP]);
		chrome_flow(d, 'f', i + 1, r->pid_driver, r->tid_driver,
			    t[VS_LAT_DONE] > t[VS_LAT_SUBMIT] ? t[VS_LAT_DONE] - 1
							      : t[VS_LAT_DONE]);
	}
	free(set.r);
}

int vs_trace_decode_many(const char *const *paths, unsigned n, const struct vs_decode_opts *o,
			 FILE *out, char *why, size_t whylen)
{
	struct dctx d = {.o = o, .out = out};
	int rc = 0;
	if (o->chrome) {
		/* one time base for every capture (same host clock) */
		d.first_ns = time_base(paths, n);
		d.have_first = d.first_ns != 0;
		fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", out);
	}
	for (unsigned i = 0; i < n && rc == 0; i++)
		rc = decode_one(paths[i], &d, why, whylen);
	if (o->chrome) {
		if (rc == 0)
			chrome_requests(&d, paths, n);
		fputs("\n]}\n", out);
	}
	if (fflush(out) != 0 && rc == 0) {
		snprintf(why, whylen, "writing output: %s", strerror(errno));
		rc = -EIO;
	}
	return rc;
}

int vs_trace_decode(const char *path, const struct vs_decode_opts *o, FILE *out, char *why,
		    size_t whylen)
{
	return vs_trace_decode_many(&path, 1, o, out, why, whylen);
}
