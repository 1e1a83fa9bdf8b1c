/* SPDX-License-Identifier: MIT */
/*
 * Capture files (docs/CAPTURE-FORMAT.md): written by `trace record` and `trace
 * dump`, read by `trace decode`.  The reader maps the file, validates every
 * section and record before use, and reports the file offset of anything wrong.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "trace/tracetools.h"
#include "util/util.h"

/* ---- writer ------------------------------------------------------------------------------ */
static void w_put(struct vs_capw *w, const void *p, size_t n)
{
	if (!w->err && n && fwrite(p, 1, n, w->f) != n)
		w->err = -EIO;
}

static void w_section(struct vs_capw *w, uint32_t type, const void *a, size_t alen, const void *b,
		      size_t blen)
{
	static const uint8_t zeros[8];
	struct vs_cap_section_header sh = { .type = type, .size = alen + blen };
	w_put(w, &sh, sizeof sh);
	w_put(w, a, alen);
	w_put(w, b, blen);
	w_put(w, zeros, (8 - (alen + blen) % 8) % 8);
}

void vs_clock_now(const struct vs_shm_header *h, uint64_t *ts, uint64_t *mono, uint64_t *real)
{
	struct timespec m, r;
	/* The traced process and we read the same invariant TSC. */
	*ts = h->clock_is_tsc ? vs__rdtsc() : 0;
	clock_gettime(CLOCK_MONOTONIC, &m);
	clock_gettime(CLOCK_REALTIME, &r);
	*mono = (uint64_t)m.tv_sec * 1000000000ull + (uint64_t)m.tv_nsec;
	*real = (uint64_t)r.tv_sec * 1000000000ull + (uint64_t)r.tv_nsec;
	if (!h->clock_is_tsc)
		*ts = *mono;
}

/* The header fields come from the snapshot vs_shm_open took (s->snap), the metadata
 * from its private copy: never from the live file. */
int vs_capw_open(struct vs_capw *w, const char *path, const struct vs_shm *s)
{
	const struct vs_shm_header *h = &s->snap;
	memset(w, 0, sizeof *w);
	w->f = fopen(path, "we");
	if (!w->f)
		return -errno;
	struct vs_cap_file_header fh = { .version = VS_CAP_VERSION, .header_size = sizeof fh };
	memcpy(fh.magic, VS_CAP_MAGIC, 8);
	w_put(w, &fh, sizeof fh);
	struct {
		int32_t pid;
		uint32_t pad;
		uint64_t start_time;
		char flavour[16];
		char exe[256];
	} proc = { .pid = h->pid, .start_time = h->start_time };
	memcpy(proc.flavour, h->flavour, sizeof proc.flavour);
	memcpy(proc.exe, h->exe, sizeof proc.exe);
	proc.flavour[15] = proc.exe[255] = '\0';
	w_section(w, VS_SEC_PROCESS, &proc, sizeof proc, NULL, 0);
	w_section(w, VS_SEC_META, s->meta_blob, s->meta_len, NULL, 0);
	return w->err;
}

int vs_capw_events(struct vs_capw *w, const struct vs_shm_ring *r, unsigned slot, const void *data,
		   size_t len)
{
	struct {
		uint32_t tid, slot, generation, pad;
		char name[16];
	} eh = {.tid = __atomic_load_n(&r->tid, __ATOMIC_RELAXED),
		.slot = slot,
		.generation = __atomic_load_n(&r->generation, __ATOMIC_ACQUIRE)};
	if (!len)
		return w->err;
	memcpy(eh.name, r->thread_name, sizeof eh.name);
	eh.name[15] = '\0';
	w_section(w, VS_SEC_EVENTS, &eh, sizeof eh, data, len);
	return w->err;
}

/* Where the next section starts, to undo a write with vs_capw_rewind. */
int64_t vs_capw_tell(struct vs_capw *w)
{
	if (w->err || fflush(w->f) != 0)
		return w->err ? w->err : -EIO;
	long pos = ftell(w->f);
	return pos < 0 ? -errno : pos;
}

int vs_capw_rewind(struct vs_capw *w, int64_t pos)
{
	if (w->err)
		return w->err;
	if (fflush(w->f) != 0 || ftruncate(fileno(w->f), pos) != 0 || fseek(w->f, pos, SEEK_SET))
		w->err = -EIO;
	return w->err;
}

int vs_capw_loss(struct vs_capw *w, const struct vs_shm_ring *r, unsigned slot, uint64_t dropped,
		 uint64_t overwritten)
{
	struct {
		uint32_t tid, slot, generation, pad;
		uint64_t dropped, overwritten;
	} l = {__atomic_load_n(&r->tid, __ATOMIC_RELAXED),
	       slot,
	       __atomic_load_n(&r->generation, __ATOMIC_ACQUIRE),
	       0,
	       dropped,
	       overwritten};
	w_section(w, VS_SEC_LOSS, &l, sizeof l, NULL, 0);
	return w->err;
}

int vs_capw_close(struct vs_capw *w, const struct vs_shm *s)
{
	const struct vs_shm_header *h = &s->snap;
	struct vs_cap_clock c = { .is_tsc = h->clock_is_tsc,
				  .ts0 = h->clk_ts0,
				  .mono0 = h->clk_mono0,
				  .real0 = h->clk_real0 };
	vs_clock_now(h, &c.ts1, &c.mono1, &c.real1);
	w_section(w, VS_SEC_CLOCK, &c, sizeof c, NULL, 0);
	uint64_t end[2] = {w->events,
			   s->hdr ? __atomic_load_n(&s->hdr->no_ring_drops, __ATOMIC_RELAXED) : 0};
	w_section(w, VS_SEC_END, end, sizeof end, NULL, 0);
	if (fflush(w->f) != 0 && !w->err)
		w->err = -errno;
	if (fclose(w->f) != 0 && !w->err)
		w->err = -errno;
	w->f = NULL;
	return w->err;
}

/* ---- reader ------------------------------------------------------------------------------ */
struct chunk {
	uint64_t off, len; /* records, in file */
};
struct stream {
	uint32_t tid, slot, generation;
	char name[16];
	struct chunk *chunks;
	size_t nchunks, cap;
	size_t ci;       /* current chunk */
	uint64_t pos;    /* offset in current chunk */
	uint64_t overwritten, dropped;
	uint64_t marked; /* dropped events reported by inline markers so far */
	bool loss_shown;
};
struct vs_capture {
	const char *path;
	const uint8_t *map;
	size_t size;
	struct vs_meta meta;
	struct vs_cap_clock clock;
	bool have_clock, have_meta, have_end;
	uint64_t no_ring_drops;
	uint32_t pid;
	struct stream *streams;
	size_t nstreams;
};

static int bad(char *why, size_t whylen, const char *path, uint64_t off, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int bad(char *why, size_t whylen, const char *path, uint64_t off, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(why, whylen, "%s: offset %llu (%#llx): ", path, (unsigned long long)off,
			 (unsigned long long)off);
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < whylen)
		vs_vfail(why + n, whylen - (size_t)n, 0, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

static struct stream *stream_get(struct vs_capture *c, uint32_t tid, uint32_t slot, uint32_t gen)
{
	for (size_t i = 0; i < c->nstreams; i++)
		if (c->streams[i].tid == tid && c->streams[i].slot == slot &&
		    c->streams[i].generation == gen)
			return &c->streams[i];
	struct stream *s = realloc(c->streams, (c->nstreams + 1) * sizeof *s);
	if (!s)
		return NULL;
	c->streams = s;
	s = &c->streams[c->nstreams++];
	memset(s, 0, sizeof *s);
	s->tid = tid;
	s->slot = slot;
	s->generation = gen;
	return s;
}

/* Check one record's argument bytes against its site's types. */
static const char *check_args(const struct vs_meta_site *site, const uint8_t *p, size_t len)
{
	size_t off = 0;
	for (unsigned a = 0; a < site->nargs; a++) {
		uint8_t t = site->types[a];
		size_t n = t == VS_ARG_I32 || t == VS_ARG_U32 ? 4 : t == VS_ARG_STR ? 2 : 8;
		if (n > len - off)
			return "arguments run past the record";
		if (t == VS_ARG_STR) {
			uint16_t l;
			memcpy(&l, p + off, 2);
			if (l == VS_TRACE_STR_NULL)
				l = 0;
			l &= (uint16_t)~VS_TRACE_STR_CUT;
			if (l > VS_TRACE_STR_MAX || l > len - off - 2)
				return "string argument runs past the record";
			n += l;
		}
		off += n;
	}
	if (len - off >= 8)
		return "record is larger than its arguments";
	return NULL;
}

/* Validate every record of an EVENTS section up front, so the walk can't fail
 * half-way through its output. */
static int check_records(struct vs_capture *c, uint64_t off, uint64_t len, char *why,
			 size_t whylen)
{
	uint64_t end = off + len;
	while (off < end) {
		struct vs_event_header e;
		static const uint8_t filler[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
		if (end - off == 8 && !memcmp(c->map + off, filler, 8))
			break; /* the 8 bytes a ring could not fit a record into */
		if (end - off < sizeof e)
			return bad(why, whylen, c->path, off, "event record header cut short "
				   "(%llu bytes left in the section)", (unsigned long long)(end - off));
		memcpy(&e, c->map + off, sizeof e);
		if (e.size < sizeof e || (e.size & 7) || e.size > end - off)
			return bad(why, whylen, c->path, off, "event record size %u is invalid "
				   "(must be a multiple of 8, at least 16, within the section)", e.size);
		if (e.site == VS_EVENT_PAD) {
			/* ring padding, copied as is by a streaming recorder */
		} else if (e.site == VS_EVENT_DROPS) {
			if (e.size != 24)
				return bad(why, whylen, c->path, off, "drop marker of size %u", e.size);
		} else if (vs_meta_site_index(&c->meta, e.site) < 0) {
			return bad(why, whylen, c->path, off, "event names site %#x, which is none of "
				   "the capture's %u sites", e.site, c->meta.nsites);
		} else {
			int64_t idx = vs_meta_site_index(&c->meta, e.site);
			const char *err = check_args(&c->meta.sites[idx], c->map + off + sizeof e,
						     e.size - sizeof e);
			if (err)
				return bad(why, whylen, c->path, off, "site %lld: %s", (long long)idx,
					   err);
			if (e.caller > c->meta.ncallers)
				return bad(why, whylen, c->path, off, "caller %u but the capture has "
					   "%u callers", e.caller, c->meta.ncallers);
		}
		off += e.size;
	}
	return 0;
}

int vs_capture_open(struct vs_capture **out, const char *path, char *why, size_t whylen)
{
	struct vs_capture *c = calloc(1, sizeof *c);
	struct stat st;
	int rc = -EINVAL;

	if (!c)
		return -ENOMEM;
	c->path = path;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		free(c);
		return rc;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "%s: not a regular file", path);
		close(fd);
		free(c);
		return -EINVAL;
	}
	c->size = (size_t)st.st_size;
	if (c->size < sizeof(struct vs_cap_file_header)) {
		close(fd);
		free(c);
		return bad(why, whylen, path, 0, "file too short for a capture header (%zu bytes)",
			   (size_t)st.st_size);
	}
	c->map = mmap(NULL, c->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (c->map == MAP_FAILED) {
		snprintf(why, whylen, "%s: mmap: %s", path, strerror(errno));
		free(c);
		return -EIO;
	}
	struct vs_cap_file_header fh;
	memcpy(&fh, c->map, sizeof fh);
	if (memcmp(fh.magic, VS_CAP_MAGIC, 8) != 0) {
		rc = bad(why, whylen, path, 0, "not a vioscope capture (bad magic)");
		goto fail;
	}
	if (fh.version != VS_CAP_VERSION) {
		rc = bad(why, whylen, path, 8, "unsupported capture version %u (this decoder reads "
			 "%u)", fh.version, VS_CAP_VERSION);
		goto fail;
	}
	if (fh.header_size < sizeof fh || fh.header_size > c->size || (fh.header_size & 7)) {
		rc = bad(why, whylen, path, 10, "bad header size %u", fh.header_size);
		goto fail;
	}
	uint64_t off = fh.header_size;
	while (off < c->size) {
		struct vs_cap_section_header sh;
		if (c->size - off < sizeof sh) {
			rc = bad(why, whylen, path, off, "truncated section header");
			goto fail;
		}
		memcpy(&sh, c->map + off, sizeof sh);
		uint64_t body = off + sizeof sh;
		uint64_t padded = (sh.size + 7) & ~7ull;
		if (sh.size > c->size - body || padded > c->size - body) {
			rc = bad(why, whylen, path, off, "section of type %u claims %llu bytes but only "
				 "%llu remain (truncated file?)", sh.type, (unsigned long long)sh.size,
				 (unsigned long long)(c->size - body));
			goto fail;
		}
		if (c->have_end) {
			rc = bad(why, whylen, path, off, "data after the END section");
			goto fail;
		}
		const uint8_t *p = c->map + body;
		switch (sh.type) {
		case VS_SEC_PROCESS:
			if (sh.size >= 4)
				memcpy(&c->pid, p, 4);
			break;
		case VS_SEC_CLOCK:
			if (sh.size != sizeof c->clock) {
				rc = bad(why, whylen, path, off, "clock section of %llu bytes",
					 (unsigned long long)sh.size);
				goto fail;
			}
			memcpy(&c->clock, p, sizeof c->clock);
			if (c->clock.is_tsc > 1 || c->clock.ts1 < c->clock.ts0 ||
			    c->clock.mono1 < c->clock.mono0 || c->clock.real0 == 0) {
				rc = bad(why, whylen, path, off, "clock section is inconsistent (second "
					 "reference point before the first)");
				goto fail;
			}
			c->have_clock = true;
			break;
		case VS_SEC_META:
			if (c->have_meta) {
				rc = bad(why, whylen, path, off, "second metadata section");
				goto fail;
			}
			{
				char mwhy[256];
				if (vs_meta_parse(&c->meta, p, sh.size, mwhy, sizeof mwhy) < 0) {
					rc = bad(why, whylen, path, body, "%s", mwhy);
					goto fail;
				}
			}
			c->have_meta = true;
			break;
		case VS_SEC_EVENTS:
		case VS_SEC_LOSS: {
			size_t hl = sh.type == VS_SEC_EVENTS ? 32 : 32;
			uint32_t ids[3];
			if (sh.size < hl) {
				rc = bad(why, whylen, path, off, "%s section too short",
					 sh.type == VS_SEC_EVENTS ? "events" : "loss");
				goto fail;
			}
			if (!c->have_meta) {
				rc = bad(why, whylen, path, off, "events before the metadata section");
				goto fail;
			}
			memcpy(ids, p, sizeof ids);
			struct stream *s = stream_get(c, ids[0], ids[1], ids[2]);
			if (!s) {
				rc = -ENOMEM;
				goto fail;
			}
			if (sh.type == VS_SEC_LOSS) {
				memcpy(&s->dropped, p + 16, 8);
				memcpy(&s->overwritten, p + 24, 8);
				break;
			}
			memcpy(s->name, p + 16, 16);
			s->name[15] = '\0';
			rc = check_records(c, body + hl, sh.size - hl, why, whylen);
			if (rc < 0)
				goto fail;
			if (s->nchunks == s->cap) {
				size_t cap = s->cap ? s->cap * 2 : 16;
				struct chunk *ch = realloc(s->chunks, cap * sizeof *ch);
				if (!ch) {
					rc = -ENOMEM;
					goto fail;
				}
				s->chunks = ch;
				s->cap = cap;
			}
			s->chunks[s->nchunks++] = (struct chunk){ body + hl, sh.size - hl };
			break;
		}
		case VS_SEC_END:
			if (sh.size != 16) {
				rc = bad(why, whylen, path, off, "END section of %llu bytes",
					 (unsigned long long)sh.size);
				goto fail;
			}
			memcpy(&c->no_ring_drops, p + 8, 8);
			c->have_end = true;
			break;
		default:
			rc = bad(why, whylen, path, off, "unknown section type %u", sh.type);
			goto fail;
		}
		off = body + padded;
	}
	if (!c->have_meta) {
		rc = bad(why, whylen, path, off, "no metadata section");
		goto fail;
	}
	if (!c->have_end || !c->have_clock) {
		rc = bad(why, whylen, path, off, "truncated: the capture has no %s section (was the "
			 "recorder killed?)", c->have_clock ? "END" : "CLOCK");
		goto fail;
	}
	*out = c;
	return 0;
fail:
	vs_capture_close(c);
	return rc;
}

void vs_capture_close(struct vs_capture *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nstreams; i++)
		free(c->streams[i].chunks);
	free(c->streams);
	vs_meta_free(&c->meta);
	if (c->map && c->map != MAP_FAILED)
		munmap((void *)c->map, c->size);
	free(c);
}

uint32_t vs_capture_pid(const struct vs_capture *c)
{
	return c->pid;
}

const struct vs_meta *vs_capture_meta(const struct vs_capture *c)
{
	return &c->meta;
}

static uint64_t to_real(const struct vs_capture *c, uint64_t ts)
{
	const struct vs_cap_clock *k = &c->clock;
	if (!k->is_tsc)
		return k->real0 + (ts - k->mono0);
	long double span = (long double)(k->ts1 - k->ts0);
	long double ns = (long double)(k->mono1 - k->mono0);
	long double rate = span > 0 && ns > 0 ? ns / span : 1.0L;
	long double d = ((long double)ts - (long double)k->ts0) * rate;
	long double r = (long double)k->real0 + d;
	/* A clock section that passed the checks can still put odd events off the scale. */
	return r <= 0 ? 0 : r >= 18446744073709551615.0L ? UINT64_MAX : (uint64_t)r;
}

/* The next event or marker of a stream, past padding (checked at open). */
static const struct vs_event_header *peek(const struct vs_capture *c, struct stream *s)
{
	for (;;) {
		while (s->ci < s->nchunks &&
		       s->chunks[s->ci].len - s->pos < sizeof(struct vs_event_header)) {
			s->ci++;
			s->pos = 0;
		}
		if (s->ci >= s->nchunks)
			return NULL;
		const struct vs_event_header *e =
			(const void *)(c->map + s->chunks[s->ci].off + s->pos);
		uint32_t site;
		uint16_t size;
		memcpy(&site, &e->site, 4);
		memcpy(&size, &e->size, 2);
		if (site != VS_EVENT_PAD)
			return e;
		s->pos += size;
	}
}

int vs_capture_walk(struct vs_capture *c, vs_event_fn fn, void *opaque, char *why, size_t whylen)
{
	int rc;
	(void)why;
	(void)whylen;
	for (size_t i = 0; i < c->nstreams; i++) {
		c->streams[i].ci = 0;
		c->streams[i].pos = 0;
		c->streams[i].loss_shown = false;
		c->streams[i].marked = 0;
	}
	for (;;) {
		struct stream *best = NULL;
		uint64_t best_ts = 0;
		for (size_t i = 0; i < c->nstreams; i++) {
			struct stream *s = &c->streams[i];
			const struct vs_event_header *e = peek(c, s);
			if (e) {
				uint64_t ts;
				memcpy(&ts, &e->ts, 8);
				if (!best || ts < best_ts) {
					best = s;
					best_ts = ts;
				}
			}
		}
		if (!best)
			break;
		struct vs_event_header e;
		memcpy(&e, peek(c, best), sizeof e);
		const uint8_t *payload = c->map + best->chunks[best->ci].off + best->pos + sizeof e;
		struct vs_cap_event ev = { .real_ns = to_real(c, e.ts),
					   .tid = best->tid,
					   .thread_name = best->name };
		if (!best->loss_shown && best->overwritten) {
			ev.lost = best->overwritten;
			ev.lost_what = "overwritten (oldest events of this thread, flight recorder)";
			rc = fn(&ev, opaque);
			if (rc)
				return rc;
			ev.lost = 0;
			ev.lost_what = NULL;
		}
		best->loss_shown = true;
		if (e.site == VS_EVENT_DROPS) {
			memcpy(&ev.lost, payload, 8);
			best->marked += ev.lost;
			ev.lost_what = "dropped (ring full while streaming, or an event larger than a "
				       "quarter of the ring)";
		} else {
			ev.site = &c->meta.sites[vs_meta_site_index(&c->meta, e.site)];
			ev.caller = e.caller ? &c->meta.callers[e.caller - 1] : NULL;
			ev.args = payload;
			ev.args_len = e.size - sizeof e;
		}
		best->pos += e.size;
		rc = fn(&ev, opaque);
		if (rc)
			return rc;
	}
	/* Drops after a thread's last event have no marker in its stream. */
	for (size_t i = 0; i < c->nstreams; i++) {
		struct stream *s = &c->streams[i];
		if (s->dropped > s->marked) {
			struct vs_cap_event ev = { .tid = s->tid,
						   .thread_name = s->name,
						   .lost = s->dropped - s->marked,
						   .lost_what = "dropped at the end of this thread's stream" };
			rc = fn(&ev, opaque);
			if (rc)
				return rc;
		}
	}
	if (c->no_ring_drops) {
		struct vs_cap_event ev = { .lost = c->no_ring_drops,
					   .lost_what = "dropped (no free thread ring: raise "
							"VIOSCOPE_TRACE_THREADS)" };
		return fn(&ev, opaque);
	}
	return 0;
}
