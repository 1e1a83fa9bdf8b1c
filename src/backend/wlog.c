/* SPDX-License-Identifier: MIT */
/*
 * The write log behind log-writes=LOG: every completed write, write-zeroes and discard, and
 * every completed flush, in the format and the order of Linux's dm-log-writes
 * (proto/logwrites_proto.h), so that `vioscope check flush` and xfstests' replay-log can
 * rebuild every state a crash could have left.
 *
 * The order is what makes the log useful: a write is logged once it is durable.  A FUA
 * write is logged when it completes.  Other writes (and discards, which may sit in a cache
 * too) wait in memory on the unflushed list; a flush, when submitted, takes that list (the
 * writes completed before it, which it covers) and, when it completes, logs them and then
 * its FLUSH entry.  Writes completing while a flush runs wait for the next one.  At close
 * the writes still unflushed are logged after the last flush, then an end mark.
 *
 * Everything is in 512-byte sectors (the super block's sectorsize).  The super block's
 * entry count is rewritten at every FLUSH and FUA entry and at close, so a log cut short
 * by a killed process still reads up to its last durable point.  Any failure (a bio not in
 * whole sectors, the log file full, too much unflushed data) stops the log, once, loudly:
 * a log with a hole would describe crash states that never existed.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "backend/backend_int.h"
#include "proto/logwrites_proto.h"

#define SECTOR	      512u
#define UNFLUSHED_MAX (1ull << 30) /* bytes of write data held for the next flush */

/* A completed write (or discard) waiting for the flush that makes it durable. */
struct wlog_write {
	struct wlog_write *next;
	uint64_t sector, nr_sectors, flags;
	uint8_t data[]; /* nr_sectors sectors; none for a discard */
};

struct wlog_list {
	struct wlog_write *head, **tail;
};

/* A flush in flight and the writes it covers. */
struct wlog_flush {
	struct wlog_flush *next;
	const struct vs_bio *bio;
	struct wlog_list covered;
};

struct vs_wlog {
	pthread_mutex_t lock;
	int fd;
	char *path;
	uint64_t pos;	  /* byte offset of the next entry */
	uint64_t entries; /* logged */
	struct wlog_list unflushed;
	uint64_t unflushed_bytes;
	struct wlog_flush *flushes;
	bool stopped;
};

static void list_init(struct wlog_list *l)
{
	l->head = NULL;
	l->tail = &l->head;
}

static void list_free(struct wlog_list *l)
{
	while (l->head) {
		struct wlog_write *w = l->head;

		l->head = w->next;
		free(w);
	}
	l->tail = &l->head;
}

static int write_all(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static __attribute__((cold)) void wlog_stop(struct vs_wlog *log, const char *why, int rc)
{
	if (log->stopped)
		return;
	log->stopped = true;
	list_free(&log->unflushed);
	log->unflushed_bytes = 0;
	VS_ERROR(BACKEND, "log-writes %s: %s%s%s: the log stops at %llu entries", log->path, why,
		 rc ? ": " : "", rc ? strerror(-rc) : "", (unsigned long long)log->entries);
	fprintf(stderr, "vioscope: log-writes %s: %s%s%s: the log stops at %llu entries\n",
		log->path, why, rc ? ": " : "", rc ? strerror(-rc) : "",
		(unsigned long long)log->entries);
}

static int super_write(struct vs_wlog *log)
{
	uint8_t sector[SECTOR] = {0};
	struct vs_lw_super s = {
	    .magic = htole64(VS_LW_MAGIC),
	    .version = htole64(VS_LW_VERSION),
	    .nr_entries = htole64(log->entries),
	    .sectorsize = htole32(SECTOR),
	};

	memcpy(sector, &s, sizeof(s));
	return write_all(log->fd, sector, SECTOR, 0);
}

/* One entry at the end of the log: its sector, then its data (nr_sectors sectors, unless
 * it is a discard or a flush), or a mark's name inside its sector. */
static void entry_write(struct vs_wlog *log, uint64_t sector, uint64_t nr_sectors, uint64_t flags,
			const void *data, const char *mark)
{
	uint8_t hdr[SECTOR] = {0};
	struct vs_lw_entry e = {
	    .sector = htole64(sector),
	    .nr_sectors = htole64(nr_sectors),
	    .flags = htole64(flags),
	    .data_len = htole64(mark ? strlen(mark) : 0),
	};
	uint64_t data_len = data ? nr_sectors * SECTOR : 0;
	int rc;

	if (log->stopped)
		return;
	memcpy(hdr, &e, sizeof(e));
	if (mark)
		snprintf((char *)hdr + sizeof(e), SECTOR - sizeof(e), "%s", mark);
	if ((rc = write_all(log->fd, hdr, SECTOR, log->pos)) ||
	    (data_len && (rc = write_all(log->fd, data, data_len, log->pos + SECTOR)))) {
		wlog_stop(log, "writing the log", rc);
		return;
	}
	log->pos += SECTOR + data_len;
	log->entries++;
	if ((flags & (VS_LW_FLUSH | VS_LW_FUA | VS_LW_MARK)) && (rc = super_write(log)))
		wlog_stop(log, "writing the log's super block", rc);
}

static void list_log(struct vs_wlog *log, struct wlog_list *l)
{
	for (struct wlog_write *w = l->head; w; w = w->next)
		entry_write(log, w->sector, w->nr_sectors, w->flags,
			    (w->flags & VS_LW_DISCARD) ? NULL : w->data, NULL);
	list_free(l);
}

int vs_wlog_open(struct vs_wlog **out, const char *path, const struct vs_backend_opts *o, char *why,
		 size_t whylen)
{
	struct vs_wlog *log = calloc(1, sizeof(*log));
	char cause[200];
	int rc;

	*out = NULL;
	if (!log || !(log->path = strdup(path))) {
		free(log);
		return vs_fail(why, whylen, -ENOMEM, "log-writes: out of memory");
	}
	/* Created, never reused: an existing file, or a symlink planted in a shared directory,
	 * would have us truncate whatever it names. */
	log->fd = vs_be_open(o, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600,
			     cause, sizeof(cause));
	if (log->fd < 0) {
		rc = log->fd;
		if (rc == -EEXIST)
			vs_fail(why, whylen, rc,
				"log-writes=%s: it exists (a log is never overwritten: remove "
				"it or name a new file)",
				path);
		else
			vs_fail(why, whylen, rc, "log-writes=%s: cannot create it: %s", path,
				cause);
		goto fail;
	}
	if ((rc = super_write(log)) < 0) {
		vs_fail(why, whylen, rc, "log-writes=%s: %s", path, strerror(-rc));
		goto fail;
	}
	pthread_mutex_init(&log->lock, NULL);
	list_init(&log->unflushed);
	log->pos = SECTOR;
	*out = log;
	return 0;
fail:
	if (log->fd >= 0)
		close(log->fd);
	free(log->path);
	free(log);
	return rc;
}

void vs_wlog_flush_submitted(struct vs_wlog *log, const struct vs_bio *flush)
{
	struct wlog_flush *f = calloc(1, sizeof(*f));

	pthread_mutex_lock(&log->lock);
	if (!f) {
		wlog_stop(log, "no memory for a flush", -ENOMEM);
	} else if (!log->stopped) {
		f->bio = flush;
		f->covered = log->unflushed;
		if (!f->covered.head)
			f->covered.tail = &f->covered.head;
		list_init(&log->unflushed);
		log->unflushed_bytes = 0;
		f->next = log->flushes;
		log->flushes = f;
		f = NULL;
	}
	pthread_mutex_unlock(&log->lock);
	free(f);
}

/* The flush record of bio, taken off the list (NULL if none). */
static struct wlog_flush *flush_take(struct vs_wlog *log, const struct vs_bio *bio)
{
	for (struct wlog_flush **p = &log->flushes; *p; p = &(*p)->next) {
		struct wlog_flush *f = *p;

		if (f->bio == bio) {
			*p = f->next;
			return f;
		}
	}
	return NULL;
}

static void flush_completed(struct vs_wlog *log, const struct vs_bio *bio, int res)
{
	struct wlog_flush *f = flush_take(log, bio);

	if (!f)
		return; /* submitted while the log was stopped */
	if (res < 0) {
		/* Not durable after all: they still wait, ahead of later writes. */
		if (f->covered.head) {
			*f->covered.tail = log->unflushed.head;
			if (!log->unflushed.head)
				log->unflushed.tail = f->covered.tail;
			log->unflushed.head = f->covered.head;
		}
	} else {
		list_log(log, &f->covered);
		entry_write(log, 0, 0, VS_LW_FLUSH, NULL, NULL);
	}
	free(f);
}

static void write_completed(struct vs_wlog *log, const struct vs_bio *bio)
{
	bool discard = bio->op != VS_BIO_WRITE;
	uint64_t flags = discard ? VS_LW_DISCARD : (bio->fua ? VS_LW_FUA : 0);
	struct wlog_write *w;

	if ((bio->offset | bio->len) % SECTOR) {
		wlog_stop(log, "a bio not in whole 512-byte sectors", 0);
		return;
	}
	if (flags & VS_LW_FUA) {
		uint8_t *data = malloc(bio->len);

		if (!data) {
			wlog_stop(log, "no memory for a FUA write", -ENOMEM);
			return;
		}
		vs_iov_to_buf(bio->iov, (unsigned)bio->iovcnt, 0, data, bio->len);
		entry_write(log, bio->offset / SECTOR, bio->len / SECTOR, flags, data, NULL);
		free(data);
		return;
	}
	if (!discard && log->unflushed_bytes + bio->len > UNFLUSHED_MAX) {
		wlog_stop(log, "more than 1 GiB written without a flush", 0);
		return;
	}
	w = malloc(sizeof(*w) + (discard ? 0 : bio->len));
	if (!w) {
		wlog_stop(log, "no memory for an unflushed write", -ENOMEM);
		return;
	}
	w->next = NULL;
	w->sector = bio->offset / SECTOR;
	w->nr_sectors = bio->len / SECTOR;
	w->flags = flags;
	if (!discard) {
		vs_iov_to_buf(bio->iov, (unsigned)bio->iovcnt, 0, w->data, bio->len);
		log->unflushed_bytes += bio->len;
	}
	*log->unflushed.tail = w;
	log->unflushed.tail = &w->next;
}

void vs_wlog_completed(struct vs_wlog *log, const struct vs_bio *bio, int res)
{
	pthread_mutex_lock(&log->lock);
	if (bio->op == VS_BIO_FLUSH)
		flush_completed(log, bio, res);
	else if (res == 0 && bio->len && !log->stopped)
		write_completed(log, bio);
	pthread_mutex_unlock(&log->lock);
}

void vs_wlog_close(struct vs_wlog *log)
{
	if (!log)
		return;
	pthread_mutex_lock(&log->lock);
	while (log->flushes) {
		struct wlog_flush *f = log->flushes;

		log->flushes = f->next;
		list_log(log, &f->covered);
		free(f);
	}
	list_log(log, &log->unflushed);
	entry_write(log, 0, 0, VS_LW_MARK, NULL, VS_LW_END_MARK);
	if (!log->stopped && super_write(log) < 0)
		wlog_stop(log, "writing the log's super block", -EIO);
	VS_INFO(BACKEND, "log-writes %s: %llu entries, %llu bytes", log->path,
		(unsigned long long)log->entries, (unsigned long long)log->pos);
	pthread_mutex_unlock(&log->lock);
	pthread_mutex_destroy(&log->lock);
	close(log->fd);
	free(log->path);
	free(log);
}
