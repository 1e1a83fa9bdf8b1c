/* SPDX-License-Identifier: MIT */
/*
 * `vioscope trace latency`: where each request spent its time.  The driver's and the
 * device's captures (same host clock, same request tag) are read into one timeline
 * per request from the stage events our sites record (the table below), joined by
 * tag, and summarised per stage: count, p50, p90, p99, p99.9, max.  With one side's
 * captures only, that side's stages.  docs/TRACING.md ("Where requests spend their
 * time") explains the stages.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracetools/tracetools.h"

/* ---- the stage events: which site says what -------------------------------------------- */
/* A stage site is known by its provider and the stage it declares (VS_STAGE), and its
 * fields by name.  Captures made before sites declared stages (their metadata says
 * which: stages_known) are read by the format's first words and argument positions,
 * as those sites recorded them then. */
enum stage_ev {
	EV_NONE,
	D_SUBMIT,
	D_WITHDRAWN,
	D_KICK,
	D_POLL,
	D_DONE,
	T_POP,
	B_SUBMIT,
	B_DONE,
	T_DONE
};
enum field { F_Q, F_TAG, F_LUN, F_LUN_HI, F_LUN_LO, F_OP, NFIELDS };
static const char *const field_name[NFIELDS] = {"q", "tag", "lun", "lun_hi", "lun_lo", "op"};
static const struct stage_site {
	enum stage_ev ev;
	const char *provider, *stage;
	const char *old_prefix;	 /* captures made before VS_STAGE: */
	int8_t old_arg[NFIELDS]; /* the fields' argument indices then, -1: none */
} stage_sites[] = {
    {D_SUBMIT, "initiator", "submit", "q %u tag %#llx lun %u op %#x", {0, 1, 2, -1, -1, 3}},
    {D_WITHDRAWN, "initiator", "withdrawn", "q %u tag %#llx: withdrawn", {0, 1, -1, -1, -1, -1}},
    {D_KICK, "initiator", "kick", "q %u kick", {0, -1, -1, -1, -1, -1}},
    {D_POLL, "virtio", "poll", "driver vq %u used head", {-1, -1, -1, -1, -1, -1}},
    {D_DONE, "initiator", "done", "q %u tag %#llx done:", {0, 1, -1, -1, -1, -1}},
    {T_POP, "target", "pop", "q %u head %u tag %#llx lun %02x%02x op", {0, 2, -1, 3, 4, 5}},
    {B_SUBMIT, "scsi", "backend_submit", "tag %#llx: bio %u submitted", {-1, 0, -1, -1, -1, -1}},
    {B_DONE, "scsi", "backend_done", "tag %#llx: bio done", {-1, 0, -1, -1, -1, -1}},
    {T_DONE, "target", "push", "q %u tag %#llx lun %u op %#x done:", {0, 1, -1, -1, -1, -1}},
};
#define NSTAGE_SITES (sizeof stage_sites / sizeof stage_sites[0])

/* The stages shown: intervals between two of a request's instants. */
static const struct {
	const char *name;
	enum vs_lat_when from, to;
	const char *what;
} stages[] = {
    {"submit>kick", VS_LAT_SUBMIT, VS_LAT_KICK, "driver: queued until the kick"},
    {"kick>pop", VS_LAT_KICK, VS_LAT_POP, "notification (or none needed) and the device noticing"},
    {"kick>poll", VS_LAT_KICK, VS_LAT_POLL, "driver's view of the device (no device capture)"},
    {"pop>backend", VS_LAT_POP, VS_LAT_BSUB, "device: parse, SCSI, to the backend"},
    {"backend", VS_LAT_BSUB, VS_LAT_BDONE, "backend submit to complete"},
    {"backend>push", VS_LAT_BDONE, VS_LAT_PUSH, "device: response, used ring"},
    {"push>poll", VS_LAT_PUSH, VS_LAT_POLL, "interrupt or poll: the driver noticing"},
    {"poll>done", VS_LAT_POLL, VS_LAT_DONE, "driver: completion"},
    {"device", VS_LAT_POP, VS_LAT_PUSH, "device total"},
    {"total", VS_LAT_SUBMIT, VS_LAT_DONE, "driver total"},
};
#define NSTAGES (sizeof stages / sizeof stages[0])

/* A capture decides how many requests are in flight (40,000 submits that never complete
 * fill 2.5 MB), so the events that find one look it up, never search:
 * per tag, the open requests with that tag form a stack (the newest on top, the one an
 * event closes); per driver queue, the open requests not kicked yet form a list that its
 * next kick takes whole. */
#define NONE VS_U64MAP_NONE
struct link {
	size_t below;	      /* the next older open request of this tag */
	size_t next_unkicked; /* the next request of this queue waiting for a kick */
};

struct side {
	struct vs_lat_req *r;
	struct link *link; /* [cap], beside r */
	size_t n, cap;
	struct vs_u64map by_tag; /* tag -> its newest open request */
};

struct lat {
	struct side drv, dev;
	struct vs_u64map unkicked; /* driver queue -> its open requests not kicked yet */
	uint32_t pid;		   /* of the capture being read */
	uint64_t last_poll[64];	   /* per driver thread slot: latest "used head" time */
	uint32_t poll_tid[64];
	int err;
};

/* A new open request with this tag, on top of the tag's stack. */
static struct vs_lat_req *new_req(struct side *s, uint64_t tag)
{
	if (s->n == s->cap) {
		size_t c = s->cap ? s->cap * 2 : 1024;
		struct vs_lat_req *p = realloc(s->r, c * sizeof *p);
		if (!p)
			return NULL;
		s->r = p;
		struct link *k = realloc(s->link, c * sizeof *k);
		if (!k)
			return NULL;
		s->link = k;
		s->cap = c;
	}
	size_t i = s->n;
	s->link[i] = (struct link){.below = vs_u64map_get(&s->by_tag, tag), .next_unkicked = NONE};
	if (vs_u64map_put(&s->by_tag, tag, i) < 0)
		return NULL;
	s->n++;
	memset(&s->r[i], 0, sizeof s->r[i]);
	s->r[i].tag = tag;
	return &s->r[i];
}

/* The newest open request of this side with this tag, or NULL; CLOSE takes it off. */
static struct vs_lat_req *find_open(struct side *s, uint64_t tag, bool close)
{
	size_t i = vs_u64map_get(&s->by_tag, tag);
	if (i == NONE)
		return NULL;
	if (close) {
		/* The tag is in the map: setting it needs no room, it cannot fail. */
		vs_u64map_put(&s->by_tag, tag, s->link[i].below);
		s->r[i].closed = true;
	}
	return &s->r[i];
}

/* Each capture is one process: what it leaves open does not carry over. */
static void forget_open(struct lat *l)
{
	vs_u64map_free(&l->drv.by_tag);
	vs_u64map_free(&l->dev.by_tag);
	vs_u64map_free(&l->unkicked);
}

/* Integer arguments of an event, by the site's types (strings and bytes skipped). */
static unsigned int_args(const struct vs_cap_event *ev, uint64_t *v, unsigned max)
{
	size_t off = 0;
	unsigned n = 0;
	for (unsigned a = 0; a < ev->site->nargs && n < max; a++) {
		uint8_t t = ev->site->types[a];
		size_t size = t == VS_ARG_I32 || t == VS_ARG_U32 ? 4 : 8;
		v[n] = 0;
		if (t == VS_ARG_STR || t == VS_ARG_BYTES) {
			uint16_t l = 0;
			if (ev->args_len - off < 2)
				return n;
			memcpy(&l, ev->args + off, 2);
			off += 2 + (l == VS_TRACE_STR_NULL ? 0 : (l & (uint16_t)~VS_TRACE_STR_CUT));
			n++;
			continue;
		}
		if (ev->args_len - off < size)
			return n;
		if (size == 4) {
			uint32_t x;
			memcpy(&x, ev->args + off, 4);
			v[n] = x;
		} else {
			memcpy(&v[n], ev->args + off, 8);
		}
		off += size;
		n++;
	}
	return n;
}

static const struct stage_site *classify(const struct vs_meta_site *s)
{
	if (s->stages_known && !s->stage)
		return NULL;
	for (unsigned i = 0; i < NSTAGE_SITES; i++) {
		const struct stage_site *k = &stage_sites[i];
		if (strcmp(s->provider, k->provider) != 0)
			continue;
		if (s->stages_known ? !strcmp(s->stage, k->stage)
				    : !strncmp(s->fmt, k->old_prefix, strlen(k->old_prefix)))
			return k;
	}
	return NULL;
}

/* A stage event's fields (0 where the site has none): by name, or where sites of older
 * captures had them. */
static void fields_of(const struct vs_cap_event *ev, const struct stage_site *k,
		      uint64_t v[NFIELDS])
{
	uint64_t a[VS_TRACE_MAX_ARGS] = {0};
	unsigned n = int_args(ev, a, VS_TRACE_MAX_ARGS);
	for (unsigned f = 0; f < NFIELDS; f++) {
		int i = ev->site->stages_known ? vs_meta_site_field(ev->site, field_name[f])
					       : k->old_arg[f];
		v[f] = i >= 0 && (unsigned)i < n ? a[i] : 0;
	}
}

static uint64_t *poll_slot(struct lat *l, uint32_t tid)
{
	unsigned h = tid % 64;
	l->poll_tid[h] = tid;
	return &l->last_poll[h];
}

static int on_event(const struct vs_cap_event *ev, void *opaque)
{
	struct lat *l = opaque;
	const struct stage_site *k = ev->site ? classify(ev->site) : NULL;
	if (!k)
		return 0;
	uint64_t v[NFIELDS];
	fields_of(ev, k, v);
	uint64_t tag = v[F_TAG], t = ev->real_ns;
	struct vs_lat_req *r;
	switch (k->ev) {
	case D_SUBMIT:
		if (!(r = new_req(&l->drv, tag)))
			return -ENOMEM;
		*r = (struct vs_lat_req){.tag = tag,
					 .q = (uint32_t)v[F_Q],
					 .lun = (uint32_t)v[F_LUN],
					 .op = (uint32_t)v[F_OP],
					 .tid_driver = ev->tid,
					 .pid_driver = l->pid};
		r->t[VS_LAT_SUBMIT] = t;
		l->drv.link[r - l->drv.r].next_unkicked = vs_u64map_get(&l->unkicked, r->q);
		if (vs_u64map_put(&l->unkicked, r->q, (size_t)(r - l->drv.r)) < 0)
			return -ENOMEM;
		break;
	case D_WITHDRAWN: /* recorded as submitted, then the ring refused it */
		if ((r = find_open(&l->drv, tag, true)))
			r->withdrawn = true;
		break;
	case D_KICK: {
		/* Every open request of the queue not kicked yet: this kick is theirs. */
		size_t i = vs_u64map_get(&l->unkicked, v[F_Q]);
		if (i == NONE || !t)
			break;
		for (; i != NONE; i = l->drv.link[i].next_unkicked)
			if (!l->drv.r[i].closed)
				l->drv.r[i].t[VS_LAT_KICK] = t;
		vs_u64map_put(&l->unkicked, v[F_Q], NONE); /* in the map: cannot fail */
		break;
	}
	case D_POLL:
		*poll_slot(l, ev->tid) = t;
		break;
	case D_DONE:
		if ((r = find_open(&l->drv, tag, true))) {
			uint64_t *p = poll_slot(l, ev->tid);
			r->t[VS_LAT_POLL] = *p >= r->t[VS_LAT_SUBMIT] ? *p : 0;
			r->t[VS_LAT_DONE] = t;
			/* A kick after the driver took the used entry (the completion callback
			 * submitting the next request) was not this request's. */
			if (r->t[VS_LAT_POLL] && r->t[VS_LAT_KICK] > r->t[VS_LAT_POLL])
				r->t[VS_LAT_KICK] = 0;
		}
		break;
	case T_POP:
		if (!(r = new_req(&l->dev, tag)))
			return -ENOMEM;
		*r = (struct vs_lat_req){.tag = tag,
					 .q = (uint32_t)v[F_Q],
					 /* the LUN's two bytes (SAM flat space) */
					 .lun = (uint32_t)((v[F_LUN_HI] & 0x3f) << 8 | v[F_LUN_LO]),
					 .op = (uint32_t)v[F_OP],
					 .tid_device = ev->tid,
					 .pid_device = l->pid};
		r->t[VS_LAT_POP] = t;
		break;
	case B_SUBMIT:
		if ((r = find_open(&l->dev, tag, false)) && !r->t[VS_LAT_BSUB])
			r->t[VS_LAT_BSUB] = t;
		break;
	case B_DONE:
		if ((r = find_open(&l->dev, tag, false)))
			r->t[VS_LAT_BDONE] = t; /* the last bio's */
		break;
	case T_DONE:
		if ((r = find_open(&l->dev, tag, true)))
			r->t[VS_LAT_PUSH] = t;
		break;
	case EV_NONE:
		break;
	}
	return 0;
}

/* ---- joining the sides ------------------------------------------------------------------ */
static int by_tag_then_pop(const void *x, const void *y)
{
	const struct vs_lat_req *a = x, *b = y;
	if (a->tag != b->tag)
		return a->tag < b->tag ? -1 : 1;
	return (a->t[VS_LAT_POP] > b->t[VS_LAT_POP]) - (a->t[VS_LAT_POP] < b->t[VS_LAT_POP]);
}

static int by_tag_then_submit(const void *x, const void *y, void *reqs)
{
	const struct vs_lat_req *a = (struct vs_lat_req *)reqs + *(const size_t *)x,
				*b = (struct vs_lat_req *)reqs + *(const size_t *)y;
	if (a->tag != b->tag)
		return a->tag < b->tag ? -1 : 1;
	return (a->t[VS_LAT_SUBMIT] > b->t[VS_LAT_SUBMIT]) -
	       (a->t[VS_LAT_SUBMIT] < b->t[VS_LAT_SUBMIT]);
}

/* Each driver request takes the device's timeline of the same tag popped after the
 * previous driver request of that tag completed and before this one did.  Not "after
 * this one's submit": the driver records its submit event after publishing the request,
 * and a polling device may pop it first.  A tag repeats when the driver's slots start
 * over (a reconnect), hence the window.  Returns the requests to report: joined driver
 * requests, or one side. */
static int join(struct lat *l, bool *have_drv, bool *have_dev)
{
	*have_drv = l->drv.n > 0;
	*have_dev = l->dev.n > 0;
	if (!*have_drv || !*have_dev)
		return 0;
	size_t *order = malloc(l->drv.n * sizeof *order);
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < l->drv.n; i++)
		order[i] = i;
	qsort_r(order, l->drv.n, sizeof *order, by_tag_then_submit, l->drv.r);
	qsort(l->dev.r, l->dev.n, sizeof *l->dev.r, by_tag_then_pop);
	for (size_t i = 0; i < l->drv.n; i++) {
		struct vs_lat_req *d = &l->drv.r[order[i]];
		const struct vs_lat_req *prev = i ? &l->drv.r[order[i - 1]] : NULL;
		uint64_t after = prev && prev->tag == d->tag ? prev->t[VS_LAT_DONE] : 0;
		/* The first device request of the tag popped after `after`: a binary search,
		 * not a walk through the tag's requests (a capture may give thousands one
		 * tag).  It is the one, unless it was popped after this one completed. */
		size_t lo = 0, hi = l->dev.n;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			const struct vs_lat_req *m = &l->dev.r[mid];
			if (m->tag < d->tag || (m->tag == d->tag && m->t[VS_LAT_POP] <= after))
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < l->dev.n && l->dev.r[lo].tag == d->tag) {
			const struct vs_lat_req *v = &l->dev.r[lo];
			if (d->t[VS_LAT_DONE] && v->t[VS_LAT_POP] > d->t[VS_LAT_DONE])
				continue;
			for (int w = VS_LAT_POP; w <= VS_LAT_PUSH; w++)
				d->t[w] = v->t[w];
			/* The device took it before any kick: it was polling, the kick that
			 * followed was for later requests. */
			if (d->t[VS_LAT_KICK] > d->t[VS_LAT_POP])
				d->t[VS_LAT_KICK] = 0;
			d->tid_device = v->tid_device;
			d->pid_device = v->pid_device;
		}
	}
	free(order);
	return 0;
}

/* ---- statistics -------------------------------------------------------------------------- */
static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return (a > b) - (a < b);
}

/* Nearest rank: the smallest value with at least p of the values at or below it. */
static uint64_t pct(const uint64_t *v, size_t n, double p)
{
	size_t k = (size_t)(p * (double)n + 0.999999);
	return v[k ? (k > n ? n - 1 : k - 1) : 0];
}

/* With both sides, the driver's view of the device (kick>poll) is split into the
 * device's stages. */
static bool both_sides;

static bool stage_value(const struct vs_lat_req *r, unsigned s, uint64_t *ns)
{
	if (both_sides && stages[s].from == VS_LAT_KICK && stages[s].to == VS_LAT_POLL)
		return false;
	uint64_t a = r->t[stages[s].from], b = r->t[stages[s].to];
	/* A request published while the device was still busy or polling needs no kick
	 * (notifications suppressed): the device could see it from its submit, so the
	 * stages from the kick start there; submit>kick has no value for it. */
	bool from_kick = stages[s].from == VS_LAT_KICK && stages[s].to != VS_LAT_KICK;
	if (!a && from_kick)
		a = r->t[VS_LAT_SUBMIT];
	if (!a || !b)
		return false;
	/* The driver records its submit and its kick after publishing the request; a
	 * polling device may pop it first.  It waited for nothing: 0. */
	if (b < a && from_kick)
		b = a;
	if (b < a)
		return false;
	*ns = b - a;
	return true;
}

const char *vs_latency_stage(unsigned s)
{
	return s < NSTAGES ? stages[s].name : NULL;
}

size_t vs_latency_values(const struct vs_lat_set *set, unsigned s, uint64_t *out)
{
	size_t k = 0;
	both_sides = set->driver && set->device;
	for (size_t i = 0; i < set->n; i++)
		k += stage_value(&set->r[i], s, &out[k]);
	return k;
}

struct summary {
	size_t count;
	uint64_t p50, p90, p99, p999, max;
};

/* A request's group key: its LUN (by 0), queue (1) or opcode (2). */
static uint32_t group_of(const struct vs_lat_req *r, int by)
{
	return by == 0 ? r->lun : by == 1 ? r->q : r->op;
}

static int by_group(const void *x, const void *y, void *by)
{
	uint32_t a = group_of(x, *(const int *)by), b = group_of(y, *(const int *)by);
	return (a > b) - (a < b);
}

/* Stage s over the requests of `rs` whose group key is `key` (all when by < 0). */
static int summarise(const struct vs_lat_req *rs, size_t n, unsigned s, int by, uint32_t key,
		     struct summary *out)
{
	uint64_t *v = malloc((n ? n : 1) * sizeof *v);
	size_t k = 0;
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct vs_lat_req *r = &rs[i];
		if (by >= 0 && group_of(r, by) != key)
			continue;
		if (stage_value(r, s, &v[k]))
			k++;
	}
	memset(out, 0, sizeof *out);
	out->count = k;
	if (k) {
		qsort(v, k, sizeof *v, cmp_u64);
		*out = (struct summary){
		    k, pct(v, k, .5), pct(v, k, .9), pct(v, k, .99), pct(v, k, .999), v[k - 1]};
	}
	free(v);
	return 0;
}

/* ---- output ------------------------------------------------------------------------------- */
static const char *op_name(uint32_t op)
{
	for (size_t i = 0; i < vs_proto_nnotes; i++)
		if (!strcmp(vs_proto_notes[i].name, "scsi_op"))
			return vs_proto_notes[i].int_name(op);
	return NULL;
}

static void group_label(char *out, size_t len, int by, uint32_t key)
{
	const char *name = by == 2 ? op_name(key) : NULL;
	if (by == 0)
		snprintf(out, len, "lun %u", key);
	else if (by == 1)
		snprintf(out, len, "queue %u", key);
	else if (name)
		snprintf(out, len, "op %s", name);
	else
		snprintf(out, len, "op %#x", key);
}

static void print_table(FILE *out, const struct vs_lat_req *rs, size_t n, int by, uint32_t key,
			bool json, bool *first_json)
{
	char label[64] = "all";
	if (by >= 0)
		group_label(label, sizeof label, by, key);
	if (!json)
		fprintf(out, "%s%s (µs):\n%-14s %8s %10s %10s %10s %10s %10s\n",
			by >= 0 ? "\n" : "", label, "stage", "count", "p50", "p90", "p99", "p99.9",
			"max");
	for (unsigned s = 0; s < NSTAGES; s++) {
		struct summary m;
		if (summarise(rs, n, s, by, key, &m) < 0 || !m.count)
			continue;
		if (json) {
			fprintf(
			    out,
			    "%s{\"group\":\"%s\",\"stage\":\"%s\",\"count\":%zu,\"p50_ns\":%llu,"
			    "\"p90_ns\":%llu,\"p99_ns\":%llu,\"p99_9_ns\":%llu,\"max_ns\":%llu}",
			    *first_json ? "" : ",\n", label, stages[s].name, m.count,
			    (unsigned long long)m.p50, (unsigned long long)m.p90,
			    (unsigned long long)m.p99, (unsigned long long)m.p999,
			    (unsigned long long)m.max);
			*first_json = false;
			continue;
		}
		fprintf(out, "%-14s %8zu %10.1f %10.1f %10.1f %10.1f %10.1f   %s\n", stages[s].name,
			m.count, m.p50 / 1e3, m.p90 / 1e3, m.p99 / 1e3, m.p999 / 1e3, m.max / 1e3,
			stages[s].what);
	}
}

/* ---- the slowest requests, and what their threads did meanwhile --------------------------- */
#define AROUND_PER_THREAD 12
#define AROUND_MAX	  (2 * AROUND_PER_THREAD)
struct slow {
	const struct vs_lat_req *r;
	uint64_t from, to;
	char *lines[AROUND_MAX];
	unsigned nlines, ndriver, ndevice;
};
struct around {
	struct slow *s;
	unsigned n;
};

static int on_around(const struct vs_cap_event *ev, void *opaque)
{
	struct around *a = opaque;
	for (unsigned i = 0; i < a->n; i++) {
		struct slow *s = &a->s[i];
		bool drv = ev->tid == s->r->tid_driver;
		unsigned *quota = drv ? &s->ndriver : &s->ndevice;
		if (ev->real_ns < s->from || ev->real_ns > s->to ||
		    (!drv && ev->tid != s->r->tid_device) || *quota == AROUND_PER_THREAD)
			continue;
		++*quota;
		char msg[1024], line[1200];
		if (ev->site)
			vs_format_message_noted(msg, sizeof msg, ev->site, ev->args, ev->args_len,
						vs_proto_notes, vs_proto_nnotes);
		else
			snprintf(msg, sizeof msg, "***** %llu events %s",
				 (unsigned long long)ev->lost,
				 ev->lost_what ? ev->lost_what : "lost");
		snprintf(line, sizeof line, "+%9.1f µs  %-6u %s: %s", (ev->real_ns - s->from) / 1e3,
			 ev->tid, ev->site ? ev->site->func : "-", msg);
		s->lines[s->nlines++] = strdup(line);
	}
	return 0;
}

static uint64_t request_span(const struct vs_lat_req *r, uint64_t *from)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	for (int w = 0; w < VS_LAT_COUNT; w++)
		if (r->t[w]) {
			lo = r->t[w] < lo ? r->t[w] : lo;
			hi = r->t[w] > hi ? r->t[w] : hi;
		}
	*from = lo;
	return hi >= lo ? hi - lo : 0;
}

static int by_span_desc(const void *x, const void *y)
{
	uint64_t fa, fb, a = request_span(*(const struct vs_lat_req *const *)x, &fa),
			 b = request_span(*(const struct vs_lat_req *const *)y, &fb);
	return (a < b) - (a > b);
}

static int print_slow(FILE *out, const char *const *paths, unsigned npaths,
		      const struct vs_lat_req *rs, size_t n, unsigned want, bool json, char *why,
		      size_t whylen)
{
	const struct vs_lat_req **order = malloc((n ? n : 1) * sizeof *order);
	if (!order)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		order[i] = &rs[i];
	qsort(order, n, sizeof *order, by_span_desc);
	unsigned k = want < n ? want : (unsigned)n;
	struct slow *sl = calloc(k ? k : 1, sizeof *sl);
	int rc = sl ? 0 : -ENOMEM;
	for (unsigned i = 0; i < k && sl; i++) {
		sl[i].r = order[i];
		uint64_t span = request_span(order[i], &sl[i].from);
		sl[i].to = sl[i].from + span;
	}
	struct around a = {sl, k};
	for (unsigned p = 0; p < npaths && rc == 0 && k; p++) {
		struct vs_capture *c;
		rc = vs_capture_open(&c, paths[p], why, whylen);
		if (rc == 0) {
			rc = vs_capture_walk(c, on_around, &a, why, whylen);
			vs_capture_close(c);
		}
	}
	for (unsigned i = 0; i < k && rc == 0; i++) {
		const struct vs_lat_req *r = sl[i].r;
		char label[64];
		group_label(label, sizeof label, 2, r->op);
		if (json)
			fprintf(out, "%s{\"tag\":%llu,\"queue\":%u,\"lun\":%u,\"op\":%u",
				i ? ",\n" : "", (unsigned long long)r->tag, r->q, r->lun, r->op);
		else
			fprintf(out, "\n#%u tag %#llx queue %u lun %u %s:", i + 1,
				(unsigned long long)r->tag, r->q, r->lun, label);
		for (unsigned s = 0; s < NSTAGES; s++) {
			uint64_t ns;
			if (!stage_value(r, s, &ns))
				continue;
			if (json)
				fprintf(out, ",\"%s_ns\":%llu", stages[s].name,
					(unsigned long long)ns);
			else
				fprintf(out, " %s %.1f", stages[s].name, ns / 1e3);
		}
		if (json) {
			fputs(",\"events\":[", out);
			for (unsigned j = 0; j < sl[i].nlines; j++) {
				fputs(j ? "," : "", out);
				vs_fputs_json(sl[i].lines[j], out);
			}
			fputs("]}", out);
			continue;
		}
		fputs(" (µs)\n", out);
		for (unsigned j = 0; j < sl[i].nlines; j++) {
			fputs("    ", out);
			vs_fputs_text(sl[i].lines[j], out);
			fputc('\n', out);
		}
	}
	for (unsigned i = 0; sl && i < k; i++)
		for (unsigned j = 0; j < sl[i].nlines; j++)
			free(sl[i].lines[j]);
	free(sl);
	free(order);
	return rc;
}

/* ---- the command ------------------------------------------------------------------------- */
int vs_latency_collect(const char *const *paths, unsigned npaths, struct vs_lat_set *set, char *why,
		       size_t whylen)
{
	struct lat l = {0};
	int rc = 0;
	bool have_drv, have_dev, have_clock = false;
	struct vs_cap_clock clock; /* the first TSC capture's: every capture's events on it */

	memset(set, 0, sizeof *set);
	for (unsigned p = 0; p < npaths && rc == 0; p++) {
		struct vs_capture *c;
		rc = vs_capture_open(&c, paths[p], why, whylen);
		if (rc < 0)
			break;
		if (have_clock)
			vs_capture_share_clock(c, &clock);
		else if (vs_capture_clock(c)->is_tsc)
			clock = *vs_capture_clock(c), have_clock = true;
		forget_open(&l);
		l.pid = vs_capture_pid(c);
		rc = vs_capture_walk(c, on_event, &l, why, whylen);
		vs_capture_close(c);
	}
	if (rc == -ENOMEM)
		snprintf(why, whylen, "out of memory");
	forget_open(&l);
	free(l.drv.link);
	free(l.dev.link);
	if (rc < 0) {
		free(l.drv.r);
		free(l.dev.r);
		return rc;
	}
	size_t kept = 0;
	for (size_t i = 0; i < l.drv.n; i++)
		if (!l.drv.r[i].withdrawn)
			l.drv.r[kept++] = l.drv.r[i];
	l.drv.n = kept;
	if (join(&l, &have_drv, &have_dev) < 0) {
		snprintf(why, whylen, "out of memory");
		free(l.drv.r);
		free(l.dev.r);
		return -ENOMEM;
	}
	set->driver = have_drv;
	set->device = have_dev;
	/* the driver's requests carry the device's timeline where joined */
	struct side *rep = have_drv ? &l.drv : &l.dev;
	set->r = rep->r;
	set->n = rep->n;
	free(have_drv ? l.dev.r : l.drv.r);
	if (!set->n) {
		snprintf(why, whylen,
			 "no request events in %s (record with VIOSCOPE_TRACE="
			 "verbose:stage, the stage events alone, or verbose:all, in the all "
			 "flavour)",
			 npaths == 1 ? paths[0] : "these captures");
		free(set->r);
		set->r = NULL;
		return -ENOENT;
	}
	return 0;
}

int vs_trace_latency(const char *const *paths, unsigned npaths, const struct vs_latency_opts *o,
		     FILE *out, char *why, size_t whylen)
{
	struct vs_lat_set set;
	int rc = vs_latency_collect(paths, npaths, &set, why, whylen);
	if (rc < 0)
		return rc;
	bool have_drv = set.driver, have_dev = set.device;
	both_sides = have_drv && have_dev;
	const struct {
		const struct vs_lat_req *r;
		size_t n;
	} rep_ = {set.r, set.n}, *rep = &rep_;
	bool first = true;
	if (o->json && o->json_head) {
		fputc('{', out);
		o->json_head(out);
		fputc(',', out);
	} else if (o->json) {
		fputc('{', out);
	}
	if (o->json)
		fprintf(out, "\"sides\":\"%s\",\"requests\":%zu,\"stages\":[\n",
			have_drv && have_dev ? "both"
			: have_drv	     ? "driver"
					     : "device",
			rep->n);
	else
		fprintf(out, "%zu requests (%s)\n", rep->n,
			have_drv && have_dev ? "driver and device joined by tag"
			: have_drv	     ? "driver side only"
					     : "device side only");
	if (o->by < 0) {
		print_table(out, rep->r, rep->n, -1, 0, o->json, &first);
	} else {
		/* Groups in order of their key, each a run of the requests sorted by it: a
		 * capture may have as many groups as requests. */
		struct vs_lat_req *sorted = malloc((rep->n ? rep->n : 1) * sizeof *sorted);
		if (!sorted) {
			snprintf(why, whylen, "out of memory");
			free(set.r);
			return -ENOMEM;
		}
		memcpy(sorted, rep->r, rep->n * sizeof *sorted);
		int by = o->by;
		qsort_r(sorted, rep->n, sizeof *sorted, by_group, &by);
		for (size_t i = 0, end; i < rep->n; i = end) {
			uint32_t g = group_of(&sorted[i], o->by);
			for (end = i + 1; end < rep->n && group_of(&sorted[end], o->by) == g; end++)
				;
			print_table(out, sorted + i, end - i, o->by, g, o->json, &first);
		}
		free(sorted);
	}
	if (o->json)
		fputs("\n],\"slow\":[\n", out);
	if (o->svg && rc == 0)
		rc = vs_latency_svg(&set, o->svg, why, whylen);
	if (o->slow && rc == 0)
		rc = print_slow(out, paths, npaths, rep->r, rep->n, o->slow, o->json, why, whylen);
	if (o->json)
		fputs("\n]}\n", out);
	free(set.r);
	return rc;
}
