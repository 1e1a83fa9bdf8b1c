/* SPDX-License-Identifier: MIT */
/*
 * Taking events out of a process's rings into a capture file: `dump` (one pass
 * over the flight recorder, live or dead process) and `record` (stream while the
 * process runs).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tracetools/tracetools.h"
#include "util/util.h"

/* Bytes of one ring's backlog taken per pass over the rings. */
#define BACKLOG_SLICE (256u << 10)

static int start_capture(struct vs_shm *s, struct vs_capw *w, const char *target, const char *out,
			 char *why, size_t whylen)
{
	int rc = vs_shm_open(s, target, why, whylen);
	if (rc < 0)
		return rc;
	rc = vs_capw_open(w, out, s);
	if (rc < 0) {
		if (rc == -EEXIST)
			snprintf(why, whylen,
				 "%s: exists (a capture is never overwritten: remove it "
				 "or name a new file)",
				 out);
		else
			snprintf(why, whylen, "%s: %s", out, strerror(-rc));
		vs_shm_close(s);
	}
	return rc;
}

/* Close the capture, whole (CLOCK and END) even when the trace file shrank under us:
 * what was read before stays decodable, and the error says why it ends there. */
static int finish_capture(struct vs_shm *s, struct vs_capw *w, const char *out, char *why,
			  size_t whylen)
{
	int rc = vs_capw_close(w, s);
	if (rc < 0) {
		snprintf(why, whylen, "%s: write failed: %s", out, strerror(-rc));
	} else if (vs_shm_shrunk(s)) {
		snprintf(why, whylen,
			 "%s shrank while it was read (truncated by its owner); %s "
			 "holds the events read before that",
			 s->path, out);
		rc = -EIO;
	}
	vs_shm_close(s);
	return rc;
}

int vs_trace_dump(const char *target, const char *out, struct vs_dump_stats *st, char *why,
		  size_t whylen)
{
	struct vs_shm s;
	struct vs_capw w;
	int rc = start_capture(&s, &w, target, out, why, whylen);
	if (rc < 0)
		return rc;
	const uint64_t ring_size = s.snap.ring_size;
	uint8_t *buf = malloc(ring_size);
	if (!buf) {
		vs_capw_close(&w, &s);
		vs_shm_close(&s);
		return -ENOMEM;
	}
	memset(st, 0, sizeof *st);
	st->alive = vs_shm_owner_alive(&s);
	for (unsigned i = 0; i < s.snap.ring_count; i++) {
		struct vs_shm_ring *r = vs_shm_ring(&s, i);
		uint32_t state = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
		if (state == VS_RING_FREE)
			continue;
		uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		uint64_t from = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		size_t n = vs_ring_copy(&s, i, &from, head, buf, ring_size);
		uint64_t dropped = __atomic_load_n(&r->dropped, __ATOMIC_RELAXED);
		uint64_t overwritten = __atomic_load_n(&r->overwritten, __ATOMIC_RELAXED);
		vs_capw_events(&w, r, i, buf, n);
		vs_capw_loss(&w, r, i, dropped, overwritten);
		st->threads++;
		st->bytes += n;
		st->overwritten += overwritten;
		st->dropped += dropped;
	}
	free(buf);
	return finish_capture(&s, &w, out, why, whylen);
}

/* Become pid's recorder: lock our byte (vs_shm_recorder_alive), then take recorder_pid
 * from nobody, from a recorder that has gone, or (force) from one that records.  The
 * pid displaced, if any, goes to st. */
static int claim_recording(struct vs_shm *s, bool force, struct vs_dump_stats *st, char *why,
			   size_t whylen)
{
	const int32_t me = (int32_t)getpid();
	struct flock lk = {.l_type = F_WRLCK,
			   .l_whence = SEEK_SET,
			   .l_start = VS_SHM_RECORDER_LOCK + me,
			   .l_len = 1};
	if (fcntl(s->fd, F_OFD_SETLK, &lk) < 0) {
		int e = errno;
		if (e == EAGAIN || e == EACCES) {
			snprintf(why, whylen,
				 "pid %d is recorded already by another recorder in "
				 "this process (pid %d)",
				 s->snap.pid, (int)me);
			return -EBUSY;
		}
		snprintf(why, whylen, "%s: cannot lock it as its recorder: %s", s->path,
			 strerror(e));
		return -e;
	}
	for (;;) {
		int32_t cur = __atomic_load_n(&s->hdr->recorder_pid, __ATOMIC_ACQUIRE);
		bool alive = cur > 0 && vs_shm_recorder_alive(s, cur);
		if (alive && !force) {
			snprintf(why, whylen,
				 "pid %d is recorded already, by pid %d: a second recorder would "
				 "split its events between the two (`trace record --force` takes "
				 "the recording over)",
				 s->snap.pid, (int)cur);
			return -EBUSY;
		}
		if (__atomic_compare_exchange_n(&s->hdr->recorder_pid, &cur, me, false,
						__ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			st->displaced = cur;
			st->displaced_alive = alive;
			break;
		}
	}
	return 0;
}

/* Streaming begins (the owner stops overwriting and leaves the tail to us) once the
 * recording is whole: claimed, and the --enable spec applied.  Anyone who sees stream
 * mode with our pid (the tests, `trace show`) may count on both. */
static void begin_streaming(struct vs_shm *s)
{
	__atomic_store_n(&s->hdr->mode, VS_MODE_STREAM, __ATOMIC_RELEASE);
}

/* Back to the flight recorder, unless another recorder has taken over meanwhile. */
static void release_recording(struct vs_shm *s)
{
	int32_t me = (int32_t)getpid();
	if (__atomic_load_n(&s->hdr->recorder_pid, __ATOMIC_ACQUIRE) != me)
		return;
	__atomic_store_n(&s->hdr->mode, VS_MODE_FLIGHT, __ATOMIC_RELEASE);
	__atomic_compare_exchange_n(&s->hdr->recorder_pid, &me, 0, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_RELAXED);
}

/* Still the recorder?  Says why not.  A recorder giving up (release_recording) may set
 * the flight mode just after our claim: put stream mode back. */
static bool still_recording(struct vs_shm *s, const char *out, char *why, size_t whylen)
{
	if (vs_shm_shrunk(s))
		return true; /* zeros now: the loop ends on that, and says so */
	int32_t cur = __atomic_load_n(&s->hdr->recorder_pid, __ATOMIC_ACQUIRE);
	if (cur != (int32_t)getpid()) {
		if (cur > 0)
			snprintf(why, whylen,
				 "pid %d took the recording of pid %d over (`trace record "
				 "--force`); %s holds the events until then",
				 (int)cur, s->snap.pid, out);
		else
			snprintf(why, whylen,
				 "pid %d stopped streaming to this recorder (its trace "
				 "file names no recorder now); %s holds the events until then",
				 s->snap.pid, out);
		return false;
	}
	if (__atomic_load_n(&s->hdr->mode, __ATOMIC_ACQUIRE) != VS_MODE_STREAM)
		__atomic_store_n(&s->hdr->mode, VS_MODE_STREAM, __ATOMIC_RELEASE);
	return true;
}

int vs_trace_record(const char *target, const char *out, const struct vs_record_opts *o,
		    struct vs_dump_stats *st, char *why, size_t whylen)
{
	struct vs_shm s;
	struct vs_capw w;
	int rc = start_capture(&s, &w, target, out, why, whylen);
	if (rc < 0)
		return rc;
	struct vs_shm_header *h = s.hdr; /* live control fields only: geometry is s.snap's */
	const unsigned n = s.snap.ring_count;
	const uint64_t ring_size = s.snap.ring_size;
	uint8_t *buf = malloc(ring_size);
	uint64_t *from = calloc(n, sizeof *from);
	uint32_t *gen = calloc(n, sizeof *gen);
	bool *seen = calloc(n, sizeof *seen);
	if (!buf || !from || !gen || !seen) {
		rc = -ENOMEM;
		goto out;
	}
	memset(st, 0, sizeof *st);
	/* After the capture is made, so that a capture we cannot write never ends a
	 * recording that --force would take over. */
	rc = claim_recording(&s, o->force, st, why, whylen);
	if (rc < 0)
		goto refused;
	if (o->enable_spec) {
		rc = vs_shm_apply_spec(&s, o->enable_spec, NULL, 0, why, whylen);
		if (rc < 0)
			goto out;
	}
	begin_streaming(&s);
	if (o->started)
		o->started(o->opaque);

	uint64_t t_end = o->duration_s > 0 ? vs_mono_ns() + (uint64_t)(o->duration_s * 1e9) : 0;
	bool last_pass = false;
	uint64_t next_alive_check = 0;
	for (;;) {
		size_t got = 0;
		size_t budget = BACKLOG_SLICE; /* backlog bytes this pass, over all rings */
		if (!still_recording(&s, out, why, whylen)) {
			rc = -ECANCELED; /* the capture is whole up to here: closed below */
			break;
		}
		/* exited is one load; whether a killed owner is still there means reading
		 * /proc, so that is asked at most every 50 ms, not on every pass. */
		bool owner_gone = __atomic_load_n(&h->exited, __ATOMIC_ACQUIRE);
		if (!owner_gone && vs_mono_ns() >= next_alive_check) {
			owner_gone = !vs_shm_owner_alive(&s);
			next_alive_check = vs_mono_ns() + 50000000ull;
		}
		for (unsigned i = 0; i < n; i++) {
			struct vs_shm_ring *r = vs_shm_ring(&s, i);
			if (vs_shm_shrunk(&s))
				break; /* it reads as zeros now: nothing more to take */
			uint32_t state = __atomic_load_n(&r->state, __ATOMIC_ACQUIRE);
			if (state == VS_RING_FREE && !seen[i])
				continue;
			uint32_t g = __atomic_load_n(&r->generation, __ATOMIC_ACQUIRE);
			if (!seen[i] || g != gen[i]) {
				if (seen[i])
					vs_capw_loss(&w, r, i, 0, 0);
				seen[i] = true;
				gen[i] = g;
				from[i] = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
			}
			uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
			if (head != from[i] && head - from[i] > BACKLOG_SLICE && budget == 0 &&
			    !last_pass)
				continue; /* this pass's share of backlog is spent */
			if (head != from[i]) {
				uint64_t old_tail = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
				size_t k = 0;
				int64_t mark = -1;
				/* A backlog (an exited thread's flight record, say) goes by the
				 * careful path a slice at a time, so it cannot hold up the rings
				 * of live threads for long. */
				bool backlog = head - from[i] > BACKLOG_SLICE && !last_pass;
				/* The ring's bytes as they are can only be streamed when they
				 * are what the writer wrote since we last took the tail: at
				 * most one ring's worth, starting at the tail. */
				if (old_tail == from[i] && !backlog && head - from[i] <= ring_size)
					mark = vs_capw_tell(&w);
				if (mark >= 0) {
					/* Streaming: the bytes go from the ring to the file as they
					 * are (padding included, the decoder skips it), in at most
					 * two pieces: no copy, no walk over records. */
					const uint8_t *data = vs_shm_ring_data(&s, i);
					uint64_t off = from[i] & (ring_size - 1);
					uint64_t len = head - from[i];
					uint64_t first =
					    len < ring_size - off ? len : ring_size - off;
					vs_capw_events(&w, r, i, data + off, first);
					if (len > first)
						vs_capw_events(&w, r, i, data, len - first);
					k = len;
					if (vs_shm_shrunk(&s)) {
						/* zeros from the fault on: take none of it */
						vs_capw_rewind(&w, mark);
						break;
					}
				} else {
					size_t cap =
					    backlog ? (budget ? budget : BACKLOG_SLICE) : ring_size;
					if (cap > ring_size)
						cap = ring_size;
					k = vs_ring_copy(&s, i, &from[i], head, buf, cap);
					if (backlog)
						budget -= k < budget ? k : budget;
					vs_capw_events(&w, r, i, buf, k);
				}
				/* Hand the space back.  The owner moves the tail itself only in
				 * flight mode, i.e. before it noticed us: then what was just
				 * written may have been overwritten under us, so undo it and take
				 * the careful path next time. */
				uint64_t new_from = mark >= 0 ? head : from[i];
				if (__atomic_compare_exchange_n(&r->tail, &old_tail, new_from,
								false, __ATOMIC_RELEASE,
								__ATOMIC_RELAXED)) {
					from[i] = new_from;
					got += k;
					st->bytes += k;
				} else if (mark >= 0) {
					vs_capw_rewind(&w, mark);
					from[i] = old_tail;
				} else {
					got += k;
					st->bytes += k;
				}
			} else if (state == VS_RING_RETIRED) {
				/* Drained a thread that has exited: its slot may be reused. */
				uint32_t want = VS_RING_RETIRED;
				__atomic_compare_exchange_n(&r->state, &want, VS_RING_FREE, false,
							    __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
			}
		}
		if (w.err) {
			rc = w.err;
			snprintf(why, whylen, "%s: write failed: %s", out, strerror(-rc));
			goto out;
		}
		if (last_pass || vs_shm_shrunk(&s))
			break;
		if (owner_gone || (o->stop && *o->stop) || (t_end && vs_mono_ns() >= t_end)) {
			last_pass = true; /* one more pass picks up what came meanwhile */
			continue;
		}
		if (!got)
			usleep(200);
	}
	for (unsigned i = 0; i < n && !vs_shm_shrunk(&s); i++) {
		if (!seen[i])
			continue;
		struct vs_shm_ring *r = vs_shm_ring(&s, i);
		uint64_t dropped = __atomic_load_n(&r->dropped, __ATOMIC_RELAXED);
		uint64_t overwritten = __atomic_load_n(&r->overwritten, __ATOMIC_RELAXED);
		vs_capw_loss(&w, r, i, dropped, overwritten);
		st->threads++;
		st->dropped += dropped;
		st->overwritten += overwritten;
	}
	st->alive = vs_shm_owner_alive(&s) && !__atomic_load_n(&h->exited, __ATOMIC_ACQUIRE);
out:
	release_recording(&s);
refused:
	free(buf);
	free(from);
	free(gen);
	free(seen);
	if (rc < 0 && rc != -ECANCELED) {
		if (!st->threads && !st->bytes)
			vs_capw_discard(&w, out); /* refused before it began: leave nothing */
		else
			vs_capw_close(&w, &s);
		vs_shm_close(&s);
		return rc;
	}
	int frc = finish_capture(&s, &w, out, why, whylen);
	return frc < 0 ? frc : rc;
}

/* A spec against the file's providers (strict), and what it selects no site of. */
static int eval_spec(const struct vs_shm *s, const char *spec, uint32_t *level, uint32_t *masks,
		     char *warn, size_t warnlen, char *why, size_t whylen)
{
	const struct vs_meta *m = &s->meta;
	struct vs_spec_provider *sp = vs_meta_spec_providers(m);
	int rc = -ENOMEM;
	if (warnlen)
		warn[0] = '\0';
	if (sp)
		rc = vs_spec_eval(spec, sp, m->nproviders, true, level, masks, why, whylen);
	if (rc == 0 && warnlen)
		vs_spec_unsited(spec, sp, m->nproviders, warn, warnlen);
	if (rc == -ENOMEM)
		snprintf(why, whylen, "out of memory");
	free(sp);
	return rc;
}

int vs_shm_check_spec(const struct vs_shm *s, const char *spec, char *warn, size_t warnlen,
		      char *why, size_t whylen)
{
	const struct vs_meta *m = &s->meta;
	uint32_t level, *masks = calloc(m->nproviders ? m->nproviders : 1, sizeof *masks);
	int rc = masks ? eval_spec(s, spec, &level, masks, warn, warnlen, why, whylen) : -ENOMEM;
	if (!masks)
		snprintf(why, whylen, "out of memory");
	free(masks);
	return rc;
}

int vs_shm_apply_spec(struct vs_shm *s, const char *spec, char *warn, size_t warnlen, char *why,
		      size_t whylen)
{
	const struct vs_meta *m = &s->meta;
	uint32_t level, *masks = calloc(m->nproviders ? m->nproviders : 1, sizeof *masks);
	int rc = masks ? eval_spec(s, spec, &level, masks, warn, warnlen, why, whylen) : -ENOMEM;
	for (uint32_t i = 0; rc == 0 && i < m->nproviders; i++) {
		/* slots were checked against the snapshot's provider_slots by the parser's
		 * caller: vs_shm_provider() says NULL otherwise */
		struct vs_shm_provider *p = vs_shm_provider(s, m->providers[i].slot);
		if (p)
			vs_ctl_store(p, level, masks[i]);
	}
	if (!masks)
		snprintf(why, whylen, "out of memory");
	free(masks);
	return rc;
}
