/* SPDX-License-Identifier: MIT */
/*
 * `trace decode FILE --ctf DIR`: a capture as a CTF 1.8 trace (babeltrace2, Trace
 * Compass).  DIR gets `metadata` (TSDL text) and one data stream file per thread,
 * `stream-TID`, each one packet.  One event class per site, its fields typed by the
 * site's argument types and named from the words of its format ("tag %#llx lun %u" ->
 * tag, lun); one more class, vioscope:events_lost, for loss markers.  Timestamps are
 * the decoder's wall-clock nanoseconds, so both tools show the same instant.  The
 * mapping is documented in docs/CAPTURE-FORMAT.md ("CTF export").
 *
 * The capture is untrusted: names that go into the metadata are reduced to safe
 * characters, strings become valid UTF-8 without NULs (vs_escape_text), and an
 * event whose bytes do not match its site's types keeps zeros for what is missing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tracetools/tracetools.h"

#define CTF_MAGIC      0xC1FC1FC1u
#define FIELD_NAME_MAX 32
#define TEXT_MAX       512 /* a recorded string is at most VS_TRACE_STR_MAX; a loss's reason */

/* A site's fields: one per argument. */
struct ctf_class {
	char names[VS_TRACE_MAX_ARGS][FIELD_NAME_MAX];
	bool hex[VS_TRACE_MAX_ARGS]; /* shown in base 16 (%x, %X, %p) */
};

/* One thread's data stream, built in memory, written at the end. */
struct ctf_stream {
	uint32_t tid;
	char name[16];
	uint64_t ts_begin, ts_end;
	struct vs_buf events;
};

struct ctf {
	const struct vs_meta *meta;
	struct ctf_class *classes; /* [meta->nsites] */
	struct ctf_stream *streams;
	size_t nstreams, cap;
	struct vs_u64map by_tid; /* tid -> stream: one lookup per event, however many threads */
	int err;
};

/* ---- names from formats -------------------------------------------------------------- */

/* The word just before a conversion ("lun %u" -> lun), made an identifier; none when
 * another conversion comes first ("%d %u"): FROM is where the previous one ended. */
static void word_before(const char *from, const char *pct, char *out, size_t len)
{
	const char *end = pct;
	while (end > from && (end[-1] == ' ' || end[-1] == '=' || end[-1] == ':'))
		end--;
	const char *start = end;
	while (start > from &&
	       (start[-1] == '_' || (start[-1] >= 'a' && start[-1] <= 'z') ||
		(start[-1] >= 'A' && start[-1] <= 'Z') || (start[-1] >= '0' && start[-1] <= '9')))
		start--;
	size_t n = 0;
	for (const char *p = start; p < end && n + 1 < len; p++)
		out[n++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
	out[n] = '\0';
}

/* Names and bases of a site's arguments, in order: from the format where a word
 * stands before the conversion, else argN; a name used twice gets its index. */
static void class_of(const struct vs_meta_site *s, struct ctf_class *k)
{
	unsigned arg = 0;
	const char *prev_end = s->fmt;
	memset(k, 0, sizeof *k);
	for (const char *f = s->fmt; *f && arg < s->nargs; f++) {
		if (*f != '%')
			continue;
		const char *pct = f++;
		if (*f == '%')
			continue;
		while (*f && strchr("-+ #0'", *f))
			f++;
		for (int part = 0; part < 2; part++) { /* width, then precision */
			if (part == 1 && *f == '.')
				f++;
			if (*f == '*' && arg < s->nargs)
				snprintf(k->names[arg++], FIELD_NAME_MAX, "%s",
					 part ? "precision" : "width");
			if (*f == '*')
				f++;
			while (*f >= '0' && *f <= '9')
				f++;
		}
		while (*f && strchr("hljztqL", *f))
			f++;
		if (!*f || arg >= s->nargs)
			break;
		word_before(prev_end, pct, k->names[arg], FIELD_NAME_MAX);
		k->hex[arg] = *f == 'x' || *f == 'X' || *f == 'p';
		arg++;
		prev_end = f + 1;
	}
	for (unsigned i = 0; i < s->nargs; i++) {
		bool clash = !k->names[i][0] || (k->names[i][0] >= '0' && k->names[i][0] <= '9');
		for (unsigned j = 0; j < i && !clash; j++)
			clash = !strcmp(k->names[i], k->names[j]);
		if (clash || !k->names[i][0]) {
			char base[20];
			snprintf(base, sizeof base, "%s", k->names[i][0] ? k->names[i] : "arg");
			snprintf(k->names[i], FIELD_NAME_MAX, "%s%u", base, i & 0xff);
		}
	}
}

/* A string for a TSDL quoted literal: only characters that need no escape. */
static void tsdl_safe(char *out, size_t len, const char *s)
{
	size_t n = 0;
	for (; s && *s && n + 1 < len; s++) {
		char c = *s;
		bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			  (c >= '0' && c <= '9') || strchr("_:.-/<> ", c);
		out[n++] = ok ? c : '_';
	}
	out[n] = '\0';
}

/* ---- metadata ------------------------------------------------------------------------ */
static int loglevel(unsigned level)
{
	/* the LTTng-UST/syslog levels Trace Compass shows */
	static const int map[] = {14, 2, 3, 4, 6, 14};
	return map[level <= VS_LEVEL_MAX ? level : 0];
}

static void put_field_type(FILE *f, uint8_t type, bool hex, const char *name)
{
	switch (type) {
	case VS_ARG_I32:
	case VS_ARG_U32:
		fprintf(f, "\t\tinteger { size = 32; align = 8; signed = %s; base = %d; } _%s;\n",
			type == VS_ARG_I32 ? "true" : "false", hex ? 16 : 10, name);
		break;
	case VS_ARG_I64:
	case VS_ARG_U64:
	case VS_ARG_PTR:
		fprintf(f, "\t\tinteger { size = 64; align = 8; signed = %s; base = %d; } _%s;\n",
			type == VS_ARG_I64 ? "true" : "false", hex || type == VS_ARG_PTR ? 16 : 10,
			name);
		break;
	case VS_ARG_F64:
	case VS_ARG_LDBL:
		fprintf(f, "\t\tfloating_point { exp_dig = 11; mant_dig = 53; align = 8; } _%s;\n",
			name);
		break;
	case VS_ARG_STR:
		fprintf(f, "\t\tstring _%s;\n", name);
		break;
	case VS_ARG_BYTES:
		fprintf(f, "\t\tinteger { size = 16; align = 8; signed = false; } _%s_len;\n",
			name);
		fprintf(f,
			"\t\tinteger { size = 8; align = 8; signed = false; base = 16; } "
			"_%s[_%s_len];\n",
			name, name);
		break;
	}
}

static int write_metadata(const struct ctf *x, const char *dir, const struct vs_cap_clock *clk,
			  uint32_t pid)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/metadata", dir);
	FILE *f = fopen(path, "wx");
	if (!f)
		return -errno;
	fputs("/* CTF 1.8 */\n\n"
	      "typealias integer { size = 8; align = 8; signed = false; } := uint8_t;\n"
	      "typealias integer { size = 32; align = 8; signed = false; } := uint32_t;\n"
	      "typealias integer { size = 64; align = 8; signed = false; } := uint64_t;\n\n"
	      "trace {\n\tmajor = 1;\n\tminor = 8;\n\tbyte_order = le;\n"
	      "\tpacket.header := struct {\n\t\tuint32_t magic;\n\t\tuint32_t stream_id;\n\t};\n"
	      "};\n\n",
	      f);
	fprintf(f, "env {\n\ttracer_name = \"vioscope\";\n\tvpid = %u;\n};\n\n", pid);
	/* The decoder's wall clock: the capture's timestamps (TSC or CLOCK_MONOTONIC),
	 * calibrated with its two reference points and put on CLOCK_REALTIME. */
	fprintf(f,
		"clock {\n\tname = \"vioscope_realtime\";\n"
		"\tdescription = \"capture clock (%s) calibrated over %.3f s of CLOCK_MONOTONIC, "
		"shown as CLOCK_REALTIME ns\";\n"
		"\tfreq = 1000000000;\n\toffset_s = 0;\n\toffset = 0;\n\tprecision = 1;\n"
		"\tabsolute = TRUE;\n};\n\n",
		clk->is_tsc ? "TSC" : "CLOCK_MONOTONIC",
		clk->mono1 > clk->mono0 ? (double)(clk->mono1 - clk->mono0) / 1e9 : 0.0);
	fputs("typealias integer { size = 64; align = 8; signed = false; "
	      "map = clock.vioscope_realtime.value; } := vs_clock_t;\n\n"
	      "stream {\n\tid = 0;\n"
	      "\tpacket.context := struct {\n\t\tvs_clock_t timestamp_begin;\n"
	      "\t\tvs_clock_t timestamp_end;\n\t\tuint64_t content_size;\n"
	      "\t\tuint64_t packet_size;\n\t\tuint32_t tid;\n\t\tstring thread_name;\n\t};\n"
	      "\tevent.header := struct {\n\t\tuint32_t id;\n\t\tvs_clock_t timestamp;\n\t};\n"
	      "};\n\n",
	      f);
	const struct vs_meta *m = x->meta;
	for (uint32_t i = 0; i < m->nsites; i++) {
		const struct vs_meta_site *s = &m->sites[i];
		char prov[64], func[128];
		tsdl_safe(prov, sizeof prov, s->provider[0] ? s->provider : "app");
		tsdl_safe(func, sizeof func, s->func);
		fprintf(f,
			"event {\n\tname = \"%s:%s:%u\";\n\tid = %u;\n\tstream_id = 0;\n"
			"\tloglevel = %d;\n\tfields := struct {\n",
			prov, func, s->line, i, loglevel(s->level));
		for (unsigned a = 0; a < s->nargs; a++)
			put_field_type(f, s->types[a], x->classes[i].hex[a],
				       x->classes[i].names[a]);
		fputs("\t};\n};\n\n", f);
	}
	fprintf(f,
		"event {\n\tname = \"vioscope:events_lost\";\n\tid = %u;\n\tstream_id = 0;\n"
		"\tfields := struct {\n\t\tuint64_t _count;\n\t\tstring _what;\n\t};\n};\n",
		m->nsites);
	int rc = ferror(f) ? -EIO : 0;
	if (fclose(f) != 0 && !rc)
		rc = -errno;
	return rc;
}

/* ---- events -------------------------------------------------------------------------- */
static struct ctf_stream *stream_of(struct ctf *x, const struct vs_cap_event *ev)
{
	size_t i = vs_u64map_get(&x->by_tid, ev->tid);
	if (i != VS_U64MAP_NONE)
		return &x->streams[i];
	if (vs_u64map_put(&x->by_tid, ev->tid, x->nstreams) < 0)
		return NULL;
	if (x->nstreams == x->cap) {
		size_t cap = x->cap ? 2 * x->cap : 16;
		struct ctf_stream *p = realloc(x->streams, cap * sizeof *p);
		if (!p)
			return NULL;
		x->streams = p;
		x->cap = cap;
	}
	struct ctf_stream *s = &x->streams[x->nstreams++];
	memset(s, 0, sizeof *s);
	s->tid = ev->tid;
	s->ts_begin = ev->real_ns;
	tsdl_safe(s->name, sizeof s->name, ev->thread_name ? ev->thread_name : "");
	return s;
}

/* A recorded string as a CTF string: valid UTF-8 without NULs, escaped as the
 * decoder's text is (a NUL inside shows as \x00), NUL-terminated. */
static void put_string(struct vs_buf *b, const char *s, size_t n)
{
	char raw[4 * TEXT_MAX + 1], text[16 * TEXT_MAX + 1];
	size_t k = 0;
	n = n < TEXT_MAX ? n : TEXT_MAX;
	for (size_t i = 0; i < n; i++) {
		if (s[i]) {
			raw[k++] = s[i];
		} else {
			memcpy(raw + k, "\\x00", 4);
			k += 4;
		}
	}
	raw[k] = '\0';
	size_t len = vs_escape_text(text, sizeof text, raw);
	vs_buf_put(b, text, len + 1);
}

/* One event's fields from its recorded bytes, typed by its site; what the bytes do
 * not hold is written as zeros (and empty strings), so the stream stays readable. */
static void put_fields(struct vs_buf *b, const struct vs_meta_site *s, const uint8_t *p, size_t len)
{
	size_t off = 0;
	static const uint8_t zeros[8];
	for (unsigned a = 0; a < s->nargs; a++) {
		uint8_t t = s->types[a];
		if (t == VS_ARG_STR || t == VS_ARG_BYTES) {
			uint16_t l = VS_TRACE_STR_NULL;
			if (len - off >= 2)
				memcpy(&l, p + off, 2);
			off = len - off >= 2 ? off + 2 : len;
			size_t n = l == VS_TRACE_STR_NULL ? 0 : l & (uint16_t)~VS_TRACE_STR_CUT;
			size_t max = t == VS_ARG_STR ? VS_TRACE_STR_MAX : VS_TRACE_BYTES_MAX;
			if (n > max || n > len - off)
				n = 0;
			if (t == VS_ARG_STR) {
				put_string(
				    b, l == VS_TRACE_STR_NULL ? "(null)" : (const char *)p + off,
				    l == VS_TRACE_STR_NULL ? 6 : n);
			} else {
				uint16_t n16 = (uint16_t)n;
				vs_buf_put(b, &n16, 2);
				vs_buf_put(b, p + off, n);
			}
			off += n;
			continue;
		}
		size_t size = t == VS_ARG_I32 || t == VS_ARG_U32 ? 4 : 8;
		vs_buf_put(b, len - off >= size ? p + off : zeros, size);
		off = len - off >= size ? off + size : len;
	}
}

static int on_event(const struct vs_cap_event *ev, void *opaque)
{
	struct ctf *x = opaque;
	struct ctf_stream *s = stream_of(x, ev);
	if (!s)
		return -ENOMEM;
	int64_t idx = ev->site ? ev->site - x->meta->sites : -1;
	uint32_t id = idx >= 0 ? (uint32_t)idx : x->meta->nsites;
	uint64_t ts = ev->real_ns < s->ts_end ? s->ts_end : ev->real_ns; /* never backwards */
	vs_buf_put(&s->events, &id, 4);
	vs_buf_put(&s->events, &ts, 8);
	s->ts_end = ts;
	if (ev->site) {
		put_fields(&s->events, ev->site, ev->args, ev->args_len);
	} else {
		vs_buf_put(&s->events, &ev->lost, 8);
		const char *what = ev->lost_what ? ev->lost_what : "events lost";
		put_string(&s->events, what, strlen(what));
	}
	return s->events.err ? -ENOMEM : 0;
}

static int write_stream(const char *dir, const struct ctf_stream *s)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/stream-%u", dir, s->tid);
	struct vs_buf h = {0};
	uint32_t magic = CTF_MAGIC, stream_id = 0;
	size_t name_len = strlen(s->name) + 1;
	uint64_t bits = 8 * (uint64_t)(8 + 8 * 4 + 4 + name_len + s->events.len);
	vs_buf_put(&h, &magic, 4);
	vs_buf_put(&h, &stream_id, 4);
	vs_buf_put(&h, &s->ts_begin, 8);
	vs_buf_put(&h, &s->ts_end, 8);
	vs_buf_put(&h, &bits, 8); /* content_size */
	vs_buf_put(&h, &bits, 8); /* packet_size: no padding */
	vs_buf_put(&h, &s->tid, 4);
	vs_buf_put(&h, s->name, name_len);
	int rc = h.err ? -ENOMEM : 0;
	FILE *f = rc ? NULL : fopen(path, "wx");
	if (!rc && !f)
		rc = -errno;
	if (f) {
		fwrite(h.p, 1, h.len, f);
		fwrite(s->events.p, 1, s->events.len, f);
		rc = ferror(f) ? -EIO : 0;
		if (fclose(f) != 0 && !rc)
			rc = -errno;
	}
	vs_buf_free(&h);
	return rc;
}

int vs_trace_export_ctf(const char *path, const char *dir, char *why, size_t whylen)
{
	struct vs_capture *c;
	struct ctf x = {0};
	int rc = vs_capture_open(&c, path, why, whylen);
	if (rc < 0)
		return rc;
	x.meta = vs_capture_meta(c);
	x.classes = calloc(x.meta->nsites ? x.meta->nsites : 1, sizeof *x.classes);
	if (!x.classes) {
		rc = -ENOMEM;
		snprintf(why, whylen, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < x.meta->nsites; i++)
		class_of(&x.meta->sites[i], &x.classes[i]);
	rc = vs_capture_walk(c, on_event, &x, why, whylen);
	if (rc == -ENOMEM)
		snprintf(why, whylen, "out of memory");
	if (rc < 0)
		goto out;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		snprintf(why, whylen, "%s: %s", dir, strerror(errno));
		goto out;
	}
	rc = write_metadata(&x, dir, vs_capture_clock(c), vs_capture_pid(c));
	for (size_t i = 0; i < x.nstreams && rc == 0; i++)
		rc = write_stream(dir, &x.streams[i]);
	if (rc < 0)
		snprintf(why, whylen, "%s: %s%s", dir, strerror(-rc),
			 rc == -EEXIST
			     ? " (it already holds a trace: give an empty or new directory)"
			     : "");
out:
	for (size_t i = 0; i < x.nstreams; i++)
		vs_buf_free(&x.streams[i].events);
	free(x.streams);
	vs_u64map_free(&x.by_tid);
	free(x.classes);
	vs_capture_close(c);
	return rc;
}
