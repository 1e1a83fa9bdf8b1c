/* SPDX-License-Identifier: MIT */
/*
 * Capture files (docs/CAPTURE-FORMAT.md): written by `trace record` and `trace
 * dump`, read by `trace decode`.  The reader copies the file, validates every
 * section and record before use, and reports the file offset of anything wrong.
 * It reads version 2 (metadata records, one or more META sections) and version 1
 * (one metadata blob, sites named by address).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tracetools/tracetools.h"
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
	struct vs_cap_section_header sh = {.type = type, .size = alen + blen};
	w_put(w, &sh, sizeof sh);
	w_put(w, a, alen);
	w_put(w, b, blen);
	w_put(w, zeros, (8 - (alen + blen) % 8) % 8);
}

void vs_clock_now(const struct vs_shm_header *h, uint64_t *ts, uint64_t *mono, uint64_t *real)
{
	/* The traced process and we read the same invariant TSC. */
	vs_clock_sample(h->clock_is_tsc, ts, mono, real);
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
	struct vs_cap_file_header fh = {.version = VS_CAP_VERSION, .header_size = sizeof fh};
	memcpy(fh.magic, VS_CAP_MAGIC, 8);
	w_put(w, &fh, sizeof fh);
	struct {
		int32_t pid;
		uint32_t pad;
		uint64_t start_time;
		char flavour[16];
		char exe[256];
	} proc = {.pid = h->pid, .start_time = h->start_time};
	memcpy(proc.flavour, h->flavour, sizeof proc.flavour);
	memcpy(proc.exe, h->exe, sizeof proc.exe);
	proc.flavour[15] = proc.exe[255] = '\0';
	w_section(w, VS_SEC_PROCESS, &proc, sizeof proc, NULL, 0);
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

/* The metadata goes last, read from the file as it is now: objects that were loaded
 * while the capture was taken are in it.  Should the file's metadata have become
 * unreadable since open (its owner rewrote it), the copy taken at open is used. */
int vs_capw_close(struct vs_capw *w, const struct vs_shm *s)
{
	const struct vs_shm_header *h = &s->snap;
	void *meta = NULL;
	size_t meta_len = 0;
	char why[256];
	if (s->hdr && !vs_shm_shrunk(s) &&
	    vs_shm_meta_now(s, &meta, &meta_len, why, sizeof why) == 0 && meta_len >= s->meta_len) {
		w_section(w, VS_SEC_META, meta, meta_len, NULL, 0);
	} else {
		w_section(w, VS_SEC_META, s->meta_blob, s->meta_len, NULL, 0);
	}
	free(meta);
	struct vs_cap_clock c = {.is_tsc = h->clock_is_tsc,
				 .ts0 = h->clk_ts0,
				 .mono0 = h->clk_mono0,
				 .real0 = h->clk_real0};
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

/* ---- reader ------------------------------------------------------------------------------
 * A capture is as untrusted as its author (docs/SECURITY.md), and it may be rewritten
 * or truncated while it is decoded.  So it is read once, into private memory, and
 * validated there; the walk reads only that copy.  The bookkeeping stays linear in the
 * file whatever its shape (a million one-event threads, a million tiny sections):
 * streams are found through a hash table, arrays grow by doubling, and the threads are
 * merged in time order through a binary heap.  `work` counts the steps of all that
 * (probes, elements moved by growth, heap levels) so tests can check it. */
#define NONE SIZE_MAX
struct chunk {
	uint64_t off, len; /* records, in the copy */
	size_t next;	   /* the stream's next chunk, or NONE */
};
struct stream {
	uint32_t tid, slot, generation;
	char name[16];
	size_t first, last; /* its chunks, in file order (NONE: none yet) */
	size_t ci;	    /* current chunk */
	uint64_t pos;	    /* offset in the current chunk */
	uint64_t next_ts;   /* timestamp of the event there: the merge's key */
	uint64_t overwritten, dropped;
	uint64_t marked; /* dropped events reported by inline markers so far */
	bool loss_shown;
};
struct vs_capture {
	const char *path;
	uint8_t *data; /* the file, copied */
	size_t size;
	struct vs_meta meta;
	struct vs_cap_clock clock;
	uint16_t version;
	bool have_clock, have_end;
	uint64_t no_ring_drops;
	uint32_t pid;
	struct stream *streams;
	size_t nstreams, streams_cap;
	struct chunk *chunks;
	size_t nchunks, chunks_cap;
	size_t *index; /* open addressing: stream number + 1, or 0 for a free slot */
	size_t index_cap;
	size_t *heap; /* the walk's merge: stream numbers */
	uint64_t work;
};

/* Room for element n of ARR (CAP elements): doubles, counting what realloc may move. */
#define GROW(c, arr, cap, n)                                                                       \
	((n) < (cap) ? 0 : grow_array((c), (void **)&(arr), &(cap), (n), sizeof *(arr)))
static int grow_array(struct vs_capture *c, void **arr, size_t *cap, size_t n, size_t elsize)
{
	size_t ncap = *cap ? *cap * 2 : 16;
	if (ncap > SIZE_MAX / elsize)
		return -ENOMEM;
	void *p = realloc(*arr, ncap * elsize);
	if (!p)
		return -ENOMEM;
	c->work += n;
	*arr = p;
	*cap = ncap;
	return 0;
}

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

static size_t stream_hash(uint32_t tid, uint32_t slot, uint32_t gen)
{
	uint64_t h = ((uint64_t)tid << 32 | slot) * 0x9e3779b97f4a7c15ull ^
		     (uint64_t)gen * 0xc2b2ae3d27d4eb4full;
	return (size_t)(h ^ h >> 31);
}

/* The index slot of (tid, slot, gen): where it is, or the free slot it would take. */
static size_t index_find(struct vs_capture *c, uint32_t tid, uint32_t slot, uint32_t gen)
{
	size_t mask = c->index_cap - 1, i = stream_hash(tid, slot, gen) & mask;
	for (;; i = (i + 1) & mask) {
		c->work++;
		size_t v = c->index[i];
		if (!v)
			return i;
		const struct stream *s = &c->streams[v - 1];
		if (s->tid == tid && s->slot == slot && s->generation == gen)
			return i;
	}
}

/* Keep the index at most half full. */
static int index_grow(struct vs_capture *c)
{
	size_t cap = c->index_cap ? c->index_cap * 2 : 64;
	size_t *old = c->index, old_cap = c->index_cap;
	c->index = calloc(cap, sizeof *c->index);
	if (!c->index) {
		c->index = old;
		return -ENOMEM;
	}
	c->index_cap = cap;
	for (size_t i = 0; i < old_cap; i++) {
		if (!old[i])
			continue;
		const struct stream *s = &c->streams[old[i] - 1];
		c->index[index_find(c, s->tid, s->slot, s->generation)] = old[i];
	}
	free(old);
	return 0;
}

static struct stream *stream_get(struct vs_capture *c, uint32_t tid, uint32_t slot, uint32_t gen)
{
	if ((c->nstreams + 1) * 2 > c->index_cap && index_grow(c) < 0)
		return NULL;
	size_t i = index_find(c, tid, slot, gen);
	if (c->index[i])
		return &c->streams[c->index[i] - 1];
	if (GROW(c, c->streams, c->streams_cap, c->nstreams) < 0)
		return NULL;
	struct stream *s = &c->streams[c->nstreams++];
	memset(s, 0, sizeof *s);
	s->tid = tid;
	s->slot = slot;
	s->generation = gen;
	s->first = s->last = NONE;
	c->index[i] = c->nstreams;
	return s;
}

static int add_chunk(struct vs_capture *c, struct stream *s, uint64_t off, uint64_t len)
{
	if (GROW(c, c->chunks, c->chunks_cap, c->nchunks) < 0)
		return -ENOMEM;
	size_t k = c->nchunks++;
	c->chunks[k] = (struct chunk){off, len, NONE};
	if (s->last == NONE)
		s->first = k;
	else
		c->chunks[s->last].next = k;
	s->last = k;
	return 0;
}

uint64_t vs_capture_work(const struct vs_capture *c)
{
	return c->work;
}

/* Check one record's argument bytes against its site's types. */
static const char *check_args(const struct vs_meta_site *site, const uint8_t *p, size_t len)
{
	size_t off = 0;
	for (unsigned a = 0; a < site->nargs; a++) {
		uint8_t t = site->types[a];
		bool var = t == VS_ARG_STR || t == VS_ARG_BYTES;
		size_t n = t == VS_ARG_I32 || t == VS_ARG_U32 ? 4 : var ? 2 : 8;
		if (n > len - off)
			return "arguments run past the record";
		if (var) {
			uint16_t l;
			memcpy(&l, p + off, 2);
			if (l == VS_TRACE_STR_NULL)
				l = 0;
			l &= (uint16_t)~VS_TRACE_STR_CUT;
			if (l > (t == VS_ARG_STR ? VS_TRACE_STR_MAX : VS_TRACE_BYTES_MAX) ||
			    l > len - off - 2)
				return t == VS_ARG_STR ? "string argument runs past the record"
						       : "byte array runs past the record";
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
static int check_records(struct vs_capture *c, uint64_t off, uint64_t len, char *why, size_t whylen)
{
	uint64_t end = off + len;
	while (off < end) {
		struct vs_event_header e;
		static const uint8_t filler[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
		if (end - off == 8 && !memcmp(c->data + off, filler, 8))
			break; /* the 8 bytes a ring could not fit a record into */
		if (end - off < sizeof e)
			return bad(why, whylen, c->path, off,
				   "event record header cut short "
				   "(%llu bytes left in the section)",
				   (unsigned long long)(end - off));
		memcpy(&e, c->data + off, sizeof e);
		if (e.size < sizeof e || (e.size & 7) || e.size > end - off)
			return bad(why, whylen, c->path, off,
				   "event record size %u is invalid "
				   "(must be a multiple of 8, at least 16, within the section)",
				   e.size);
		if (e.site == VS_EVENT_PAD) {
			/* ring padding, copied as is by a streaming recorder */
		} else if (e.site == VS_EVENT_DROPS) {
			if (e.size != 24)
				return bad(why, whylen, c->path, off, "drop marker of size %u",
					   e.size);
		} else if (vs_meta_site_index(&c->meta, e.site) < 0) {
			return bad(why, whylen, c->path, off,
				   "event names site %#x, which is none of "
				   "the capture's %u sites",
				   e.site, c->meta.nsites);
		} else {
			int64_t idx = vs_meta_site_index(&c->meta, e.site);
			const struct vs_meta_site *site = &c->meta.sites[idx];
			const struct vs_meta_object *obj = &c->meta.objects[site->object];
			const char *err =
			    check_args(site, c->data + off + sizeof e, e.size - sizeof e);
			if (err)
				return bad(why, whylen, c->path, off, "site %u: %s", e.site, err);
			if (e.caller > obj->ncallers)
				return bad(why, whylen, c->path, off,
					   "caller %u but the site's object "
					   "has %u callers",
					   e.caller, obj->ncallers);
		}
		off += e.size;
	}
	return 0;
}

/* Pass 1: every section's framing; PROCESS, CLOCK, META, END; then the metadata is
 * parsed.  Pass 2: EVENTS and LOSS, each record checked against the metadata. */
static int scan(struct vs_capture *c, uint64_t off, int pass, char *why, size_t whylen)
{
	const char *path = c->path;
	struct vs_buf meta = {0};
	uint64_t meta_at = 0;
	unsigned nmeta = 0;
	int rc = 0;

	while (off < c->size) {
		struct vs_cap_section_header sh;
		if (c->size - off < sizeof sh) {
			rc = bad(why, whylen, path, off, "truncated section header");
			goto out;
		}
		memcpy(&sh, c->data + off, sizeof sh);
		uint64_t body = off + sizeof sh;
		uint64_t padded = (sh.size + 7) & ~7ull;
		if (sh.size > c->size - body || padded > c->size - body) {
			rc = bad(why, whylen, path, off,
				 "section of type %u claims %llu bytes but only "
				 "%llu remain (truncated file?)",
				 sh.type, (unsigned long long)sh.size,
				 (unsigned long long)(c->size - body));
			goto out;
		}
		if (pass == 1 && c->have_end) {
			rc = bad(why, whylen, path, off, "data after the END section");
			goto out;
		}
		const uint8_t *p = c->data + body;
		bool events = sh.type == VS_SEC_EVENTS || sh.type == VS_SEC_LOSS;
		if (pass == 2 && !events) {
			off = body + padded;
			continue;
		}
		switch (sh.type) {
		case VS_SEC_PROCESS:
			if (sh.size >= 4)
				memcpy(&c->pid, p, 4);
			break;
		case VS_SEC_CLOCK:
			if (sh.size != sizeof c->clock) {
				rc = bad(why, whylen, path, off, "clock section of %llu bytes",
					 (unsigned long long)sh.size);
				goto out;
			}
			memcpy(&c->clock, p, sizeof c->clock);
			if (c->clock.is_tsc > 1 || c->clock.ts1 < c->clock.ts0 ||
			    c->clock.mono1 < c->clock.mono0 || c->clock.real0 == 0) {
				rc = bad(why, whylen, path, off,
					 "clock section is inconsistent (second "
					 "reference point before the first)");
				goto out;
			}
			c->have_clock = true;
			break;
		case VS_SEC_META:
			if (c->version == 1 && nmeta) {
				rc = bad(why, whylen, path, off, "second metadata section");
				goto out;
			}
			if (!nmeta++)
				meta_at = body;
			vs_buf_put(&meta, p, sh.size);
			if (meta.err) {
				rc = meta.err;
				goto out;
			}
			break;
		case VS_SEC_EVENTS:
		case VS_SEC_LOSS: {
			size_t hl = 32;
			uint32_t ids[3];
			if (sh.size < hl) {
				rc = bad(why, whylen, path, off, "%s section too short",
					 sh.type == VS_SEC_EVENTS ? "events" : "loss");
				goto out;
			}
			if (pass == 1)
				break;
			memcpy(ids, p, sizeof ids);
			struct stream *s = stream_get(c, ids[0], ids[1], ids[2]);
			if (!s) {
				rc = -ENOMEM;
				goto out;
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
				goto out;
			if (add_chunk(c, s, body + hl, sh.size - hl) < 0) {
				rc = -ENOMEM;
				goto out;
			}
			break;
		}
		case VS_SEC_END:
			if (sh.size != 16) {
				rc = bad(why, whylen, path, off, "END section of %llu bytes",
					 (unsigned long long)sh.size);
				goto out;
			}
			memcpy(&c->no_ring_drops, p + 8, 8);
			c->have_end = true;
			break;
		default:
			rc = bad(why, whylen, path, off, "unknown section type %u", sh.type);
			goto out;
		}
		off = body + padded;
	}
	if (pass == 2)
		goto out;
	if (!nmeta) {
		rc = bad(why, whylen, path, off, "no metadata section");
		goto out;
	}
	if (!c->have_end || !c->have_clock) {
		rc = bad(why, whylen, path, off,
			 "truncated: the capture has no %s section (was the "
			 "recorder killed?)",
			 c->have_clock ? "END" : "CLOCK");
		goto out;
	}
	char mwhy[256];
	rc = c->version == 1 ? vs_meta_parse_v1(&c->meta, meta.p, meta.len, mwhy, sizeof mwhy)
			     : vs_meta_parse(&c->meta, meta.p, meta.len, mwhy, sizeof mwhy);
	if (rc == -EINVAL)
		rc = bad(why, whylen, path, meta_at, "%s%s", mwhy,
			 nmeta > 1 ? " (in the metadata sections put end to end)" : "");
out:
	vs_buf_free(&meta);
	return rc;
}

/* What a file that is no capture is, for the refusal. */
static const char *file_kind(mode_t mode)
{
	return S_ISFIFO(mode)	? "a FIFO"
	       : S_ISCHR(mode)	? "a character device"
	       : S_ISBLK(mode)	? "a block device"
	       : S_ISSOCK(mode) ? "a socket"
	       : S_ISDIR(mode)	? "a directory"
				: "a special file";
}

/* The capture at path open for reading (*st its fstat), or -errno with why set.
 * O_NONBLOCK: opening a FIFO (or a device) must not wait for a writer before fstat says
 * what it is; only a regular file is read, blocking again.  Symbolic links are followed:
 * the path is the operator's, and what a link names is checked like anything else. */
static int capture_fd(const char *path, struct stat *st, char *why, size_t whylen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), rc, flags;

	if (fd < 0) {
		rc = -errno;
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, st) < 0) {
		rc = -errno;
		snprintf(why, whylen, "%s: %s", path, strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st->st_mode)) {
		rc = -EINVAL;
		snprintf(why, whylen,
			 "%s: %s, not a regular file: refusing to read it as a capture", path,
			 file_kind(st->st_mode));
		goto fail;
	}
	if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
		rc = -errno;
		snprintf(why, whylen, "%s: fcntl: %s", path, strerror(errno));
		goto fail;
	}
	return fd;
fail:
	close(fd);
	return rc;
}

int vs_capture_open(struct vs_capture **out, const char *path, char *why, size_t whylen)
{
	struct vs_capture *c = calloc(1, sizeof *c);
	struct stat st;
	int rc = -EINVAL;

	if (!c)
		return -ENOMEM;
	c->path = path;
	int fd = capture_fd(path, &st, why, whylen);
	if (fd < 0) {
		free(c);
		return fd;
	}
	/* Copied, not mapped: the file may change or shrink while we decode it. */
	c->size = (size_t)st.st_size;
	c->data = malloc(c->size ? c->size : 1);
	if (!c->data) {
		snprintf(why, whylen, "%s: %zu bytes: out of memory", path, c->size);
		close(fd);
		free(c);
		return -ENOMEM;
	}
	size_t got = 0;
	while (got < c->size) {
		ssize_t n = pread(fd, c->data + got, c->size - got, (off_t)got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(why, whylen, "%s: read: %s", path, strerror(errno));
			close(fd);
			vs_capture_close(c);
			return rc;
		}
		if (n == 0)
			break; /* shorter than fstat said: it shrank; what was read is checked */
		got += (size_t)n;
	}
	close(fd);
	c->size = got;
	if (c->size < sizeof(struct vs_cap_file_header)) {
		rc = bad(why, whylen, path, 0, "file too short for a capture header (%zu bytes)",
			 c->size);
		vs_capture_close(c);
		return rc;
	}
	struct vs_cap_file_header fh;
	memcpy(&fh, c->data, sizeof fh);
	if (memcmp(fh.magic, VS_CAP_MAGIC, 8) != 0) {
		rc = bad(why, whylen, path, 0, "not a vioscope capture (bad magic)");
		goto fail;
	}
	if (fh.version != VS_CAP_VERSION && fh.version != 1) {
		rc = bad(why, whylen, path, 8,
			 "unsupported capture version %u (this decoder reads "
			 "1 and %u)",
			 fh.version, VS_CAP_VERSION);
		goto fail;
	}
	if (fh.header_size < sizeof fh || fh.header_size > c->size || (fh.header_size & 7)) {
		rc = bad(why, whylen, path, 10, "bad header size %u", fh.header_size);
		goto fail;
	}
	c->version = fh.version;
	/* Events are checked against the metadata, which may come after them (a recorder
	 * writes it last): two passes. */
	rc = scan(c, fh.header_size, 1, why, whylen);
	if (rc == 0)
		rc = scan(c, fh.header_size, 2, why, whylen);
	if (rc < 0)
		goto fail;
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
	free(c->streams);
	free(c->chunks);
	free(c->index);
	free(c->heap);
	vs_meta_free(&c->meta);
	free(c->data);
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

const struct vs_cap_clock *vs_capture_clock(const struct vs_capture *c)
{
	return &c->clock;
}

bool vs_capture_share_clock(struct vs_capture *c, const struct vs_cap_clock *k)
{
	if (!c->clock.is_tsc || !k->is_tsc)
		return false;
	c->clock = *k;
	return true;
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

/* The next event or marker of a stream, past padding (all checked at open), or NULL
 * at its end; sets the stream's merge key. */
static const uint8_t *peek(const struct vs_capture *c, struct stream *s)
{
	for (;;) {
		while (s->ci != NONE &&
		       c->chunks[s->ci].len - s->pos < sizeof(struct vs_event_header)) {
			s->ci = c->chunks[s->ci].next;
			s->pos = 0;
		}
		if (s->ci == NONE)
			return NULL;
		const uint8_t *p = c->data + c->chunks[s->ci].off + s->pos;
		struct vs_event_header e;
		memcpy(&e, p, sizeof e);
		if (e.site != VS_EVENT_PAD) {
			s->next_ts = e.ts;
			return p;
		}
		s->pos += e.size;
	}
}

/* Merge order: the earlier next event; on a tie, the stream seen first in the file. */
static bool goes_before(const struct vs_capture *c, size_t a, size_t b)
{
	const struct stream *x = &c->streams[a], *y = &c->streams[b];
	return x->next_ts < y->next_ts || (x->next_ts == y->next_ts && a < b);
}

static void sift_down(struct vs_capture *c, size_t n, size_t i)
{
	size_t *h = c->heap;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		c->work++;
		if (l < n && goes_before(c, h[l], h[m]))
			m = l;
		if (r < n && goes_before(c, h[r], h[m]))
			m = r;
		if (m == i)
			return;
		size_t t = h[i];
		h[i] = h[m];
		h[m] = t;
		i = m;
	}
}

int vs_capture_walk(struct vs_capture *c, vs_event_fn fn, void *opaque, char *why, size_t whylen)
{
	int rc;
	size_t n = 0;
	(void)why;
	(void)whylen;
	free(c->heap);
	c->heap = malloc((c->nstreams ? c->nstreams : 1) * sizeof *c->heap);
	if (!c->heap)
		return -ENOMEM;
	for (size_t i = 0; i < c->nstreams; i++) {
		struct stream *s = &c->streams[i];
		s->ci = s->first;
		s->pos = 0;
		s->loss_shown = false;
		s->marked = 0;
		if (peek(c, s))
			c->heap[n++] = i;
	}
	for (size_t i = n / 2; i-- > 0;)
		sift_down(c, n, i);
	while (n) {
		struct stream *best = &c->streams[c->heap[0]];
		struct vs_event_header e;
		const uint8_t *rec = peek(c, best);
		memcpy(&e, rec, sizeof e);
		const uint8_t *payload = rec + sizeof e;
		struct vs_cap_event ev = {
		    .real_ns = to_real(c, e.ts), .tid = best->tid, .thread_name = best->name};
		if (!best->loss_shown && best->overwritten) {
			ev.lost = best->overwritten;
			ev.lost_what =
			    "overwritten (oldest events of this thread, flight recorder)";
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
			ev.lost_what =
			    "dropped (ring full while streaming, or an event larger than a "
			    "quarter of the ring)";
		} else {
			ev.site = &c->meta.sites[vs_meta_site_index(&c->meta, e.site)];
			ev.caller = e.caller
					? &c->meta.objects[ev.site->object].callers[e.caller - 1]
					: NULL;
			ev.args = payload;
			ev.args_len = e.size - sizeof e;
		}
		best->pos += e.size;
		if (peek(c, best)) {
			sift_down(c, n, 0);
		} else if (--n) {
			c->heap[0] = c->heap[n];
			sift_down(c, n, 0);
		}
		rc = fn(&ev, opaque);
		if (rc)
			return rc;
	}
	/* Drops after a thread's last event have no marker in its stream. */
	for (size_t i = 0; i < c->nstreams; i++) {
		struct stream *s = &c->streams[i];
		if (s->dropped > s->marked) {
			struct vs_cap_event ev = {.tid = s->tid,
						  .thread_name = s->name,
						  .lost = s->dropped - s->marked,
						  .lost_what =
						      "dropped at the end of this thread's stream"};
			rc = fn(&ev, opaque);
			if (rc)
				return rc;
		}
	}
	if (c->no_ring_drops) {
		struct vs_cap_event ev = {.lost = c->no_ring_drops,
					  .lost_what = "dropped (no free thread ring: raise "
						       "VIOSCOPE_TRACE_THREADS)"};
		return fn(&ev, opaque);
	}
	return 0;
}
