/* SPDX-License-Identifier: MIT */
/*
 * `vioscope trace live PID`: decoded events as they happen.  The rings are read as a
 * flight-recorder dump reads them (never in stream mode, so the traced process is not
 * slowed and no recorder is displaced): every few milliseconds each ring's new
 * records are copied out (vs_ring_copy) and printed in the decoder's text.  Events
 * the process dropped or overwrote before we read them are shown as markers, never
 * hidden.  It ends on *stop (Ctrl-C) or when the process exits (after a last pass).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tracetools/tracetools.h"

#define POLL_NS 5000000L /* 5 ms between passes */

struct live_ring {
	uint32_t generation;
	uint64_t pos, dropped, overwritten;
	bool seen;
};

/* Wall-clock ns of a timestamp: the file's reference point and one taken now. */
static uint64_t wall_ns(const struct vs_shm *s, uint64_t ts)
{
	const struct vs_shm_header *h = &s->snap;
	if (!h->clock_is_tsc)
		return h->clk_real0 + (ts - h->clk_mono0);
	uint64_t ts1, mono1, real1;
	vs_clock_now(h, &ts1, &mono1, &real1);
	long double rate =
	    ts1 > h->clk_ts0 && mono1 > h->clk_mono0
		? (long double)(mono1 - h->clk_mono0) / (long double)(ts1 - h->clk_ts0)
		: 1.0L;
	long double r =
	    (long double)h->clk_real0 + ((long double)ts - (long double)h->clk_ts0) * rate;
	return r <= 0 ? 0 : (uint64_t)r;
}

static void marker(FILE *out, uint32_t tid, uint64_t n, const char *what)
{
	fprintf(out, "-                             %-6u ***** %llu events %s\n", tid,
		(unsigned long long)n, what);
}

/* Print the records of one copied stretch of ring i. */
static int print_records(struct vs_shm *s, uint32_t tid, const uint8_t *p, size_t n, FILE *out,
			 const struct vs_live_opts *o)
{
	for (size_t off = 0; off + sizeof(struct vs_event_header) <= n;) {
		struct vs_event_header e;
		memcpy(&e, p + off, sizeof e);
		if (e.size < sizeof e || off + e.size > n)
			break;
		const uint8_t *args = p + off + sizeof e;
		size_t alen = e.size - sizeof e;
		off += e.size;
		if (e.site == VS_EVENT_DROPS) {
			uint64_t lost = 0;
			memcpy(&lost, args, alen >= 8 ? 8 : 0);
			marker(out, tid, lost, "dropped");
			continue;
		}
		int64_t idx = vs_meta_site_index(&s->meta, e.site);
		if (idx < 0) {
			/* an object loaded since: read the metadata again */
			void *blob;
			size_t len;
			char why[256];
			struct vs_meta m;
			if (vs_shm_meta_now(s, &blob, &len, why, sizeof why) == 0) {
				if (vs_meta_parse(&m, blob, len, why, sizeof why) == 0) {
					vs_meta_free(&s->meta);
					s->meta = m;
					free(s->meta_blob);
					s->meta_blob = blob;
					s->meta_len = len;
					blob = NULL;
				}
				free(blob);
			}
			idx = vs_meta_site_index(&s->meta, e.site);
			if (idx < 0)
				continue;
		}
		const struct vs_meta_site *site = &s->meta.sites[idx];
		if (o->max_level && site->level > o->max_level)
			continue;
		char msg[4096], prefix[512];
		vs_format_message_noted(msg, sizeof msg, site, args, alen, vs_proto_notes,
					vs_proto_nnotes);
		vs_format_prefix(prefix, sizeof prefix, wall_ns(s, e.ts), tid, site->level,
				 site->provider, site->flag_name, NULL, site->func);
		vs_fputs_text(prefix, out);
		vs_fputs_text(msg, out);
		fputc('\n', out);
	}
	return 0;
}

/* One pass over the rings; returns how many bytes of records it printed. */
static size_t pass(struct vs_shm *s, struct live_ring *lr, uint8_t *buf, size_t cap, FILE *out,
		   const struct vs_live_opts *o, bool from_now)
{
	size_t total = 0;
	for (unsigned i = 0; i < s->snap.ring_count; i++) {
		struct vs_shm_ring *r = vs_shm_ring(s, i);
		if (__atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == VS_RING_FREE)
			continue;
		uint32_t gen = __atomic_load_n(&r->generation, __ATOMIC_ACQUIRE);
		uint32_t tid = __atomic_load_n(&r->tid, __ATOMIC_RELAXED);
		uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		uint64_t dropped = __atomic_load_n(&r->dropped, __ATOMIC_RELAXED);
		uint64_t overwritten = __atomic_load_n(&r->overwritten, __ATOMIC_RELAXED);
		struct live_ring *l = &lr[i];
		if (!l->seen || l->generation != gen) {
			/* a thread we have not read yet: from now on (at start), else all of it */
			*l = (struct live_ring){
			    gen, from_now ? head : __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE),
			    dropped, overwritten, true};
		}
		if (dropped > l->dropped)
			marker(out, tid, dropped - l->dropped, "dropped (ring full)");
		l->dropped = dropped;
		uint64_t tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		if (tail > l->pos) {
			/* the flight recorder moved past what we had not read yet */
			marker(out, tid, overwritten - l->overwritten,
			       "overwritten before they were shown");
			l->pos = tail;
		}
		l->overwritten = overwritten;
		while (l->pos < head) {
			uint64_t before = l->pos;
			size_t n = vs_ring_copy(s, i, &l->pos, head, buf, cap);
			print_records(s, tid, buf, n, out, o);
			total += n;
			if (l->pos == before)
				break; /* nothing parsable: next pass */
		}
	}
	return total;
}

int vs_trace_live(const char *target, const struct vs_live_opts *o, FILE *out, char *why,
		  size_t whylen)
{
	struct vs_shm s;
	int rc = vs_shm_open(&s, target, why, whylen);
	if (rc < 0)
		return rc;
	if (o->enable_spec && (rc = vs_shm_apply_spec(&s, o->enable_spec, why, whylen)) < 0) {
		vs_shm_close(&s);
		return rc;
	}
	size_t cap = s.snap.ring_size;
	uint8_t *buf = malloc(cap);
	struct live_ring *lr = calloc(s.snap.ring_count ? s.snap.ring_count : 1, sizeof *lr);
	if (!buf || !lr) {
		snprintf(why, whylen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	pass(&s, lr, buf, cap, out, o, true);
	for (;;) {
		bool gone =
		    !vs_shm_owner_alive(&s) || __atomic_load_n(&s.hdr->exited, __ATOMIC_ACQUIRE);
		pass(&s, lr, buf, cap, out, o, false);
		fflush(out);
		if (vs_shm_shrunk(&s)) {
			snprintf(why, whylen,
				 "%s shrank while it was read (truncated by its owner)", s.path);
			rc = -EIO;
			break;
		}
		if (gone || (o->stop && *o->stop))
			break; /* that last pass took what the process left */
		struct timespec ts = {0, POLL_NS};
		nanosleep(&ts, NULL);
	}
out:
	free(buf);
	free(lr);
	vs_shm_close(&s);
	return rc;
}
