/* SPDX-License-Identifier: MIT */
/*
 * Reading a write log (proto/logwrites_proto.h) for `vioscope check flush`.  The log is a
 * file from outside: every field is checked once, here, before anything is replayed
 * (magic, version, sector size, each entry's flags and place in the file, each write's
 * range against the base image), and a bad one is named with its entry number.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check/check_int.h"
#include "proto/logwrites_proto.h"
#include "util/util.h"

static int read_at(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread(fd, buf, len, (off_t)off);

	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

int lw_open(struct lw_log *l, const char *path, uint64_t dev_bytes, char *why, size_t whylen)
{
	struct vs_lw_super s;
	struct stat st;
	uint64_t pos, n;
	uint8_t *sec = NULL;
	int rc;

	memset(l, 0, sizeof(*l));
	l->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (l->fd < 0)
		return vs_fail(why, whylen, -errno, "%s: %s", path, strerror(errno));
	if (fstat(l->fd, &st) < 0 || (rc = read_at(l->fd, &s, sizeof(s), 0)) < 0)
		return vs_fail(why, whylen, -EINVAL, "%s: too short for a write log", path);
	if (le64toh(s.magic) != VS_LW_MAGIC || le64toh(s.version) != VS_LW_VERSION)
		return vs_fail(why, whylen, -EINVAL,
			       "%s: not a write log (magic %#llx version %llu; a dm-log-writes "
			       "log has magic %#llx version 1)",
			       path, (unsigned long long)le64toh(s.magic),
			       (unsigned long long)le64toh(s.version),
			       (unsigned long long)VS_LW_MAGIC);
	l->sectorsize = le32toh(s.sectorsize);
	if (l->sectorsize < 512 || l->sectorsize > 65536 || (l->sectorsize & (l->sectorsize - 1)))
		return vs_fail(why, whylen, -EINVAL,
			       "%s: sector size %u is not a power of two in "
			       "512..65536",
			       path, l->sectorsize);
	n = le64toh(s.nr_entries);
	l->file_size = (uint64_t)st.st_size;
	if (n > l->file_size / l->sectorsize)
		return vs_fail(why, whylen, -EINVAL, "%s: %llu entries cannot fit in %llu bytes",
			       path, (unsigned long long)n, (unsigned long long)l->file_size);
	l->e = calloc(n ? n : 1, sizeof(*l->e));
	sec = malloc(l->sectorsize);
	if (!l->e || !sec) {
		free(sec);
		return vs_fail(why, whylen, -ENOMEM, "%s: no memory for %llu entries", path,
			       (unsigned long long)n);
	}
	pos = l->sectorsize;
	for (uint64_t i = 0; i < n; i++) {
		struct vs_lw_entry le;
		struct lw_entry *e = &l->e[i];
		uint64_t data;

		if (pos > l->file_size - l->sectorsize || read_at(l->fd, sec, l->sectorsize, pos)) {
			rc = vs_fail(why, whylen, -EINVAL,
				     "%s: entry %llu: beyond the end of the "
				     "file (cut short?)",
				     path, (unsigned long long)i);
			goto fail;
		}
		memcpy(&le, sec, sizeof(le));
		e->sector = le64toh(le.sector);
		e->nr_sectors = le64toh(le.nr_sectors);
		e->flags = le64toh(le.flags);
		if (e->flags & ~(uint64_t)VS_LW_KNOWN_FLAGS || (!e->flags && !e->nr_sectors)) {
			rc = vs_fail(why, whylen, -EINVAL,
				     "%s: entry %llu: malformed (flags %#llx, "
				     "%llu sectors)",
				     path, (unsigned long long)i, (unsigned long long)e->flags,
				     (unsigned long long)e->nr_sectors);
			goto fail;
		}
		if (e->flags & VS_LW_MARK) {
			uint64_t len = le64toh(le.data_len);

			if (len > l->sectorsize - sizeof(le))
				len = l->sectorsize - sizeof(le);
			snprintf(e->mark, sizeof(e->mark), "%.*s", (int)len,
				 (const char *)sec + sizeof(le));
			e->nr_sectors = 0;
		}
		pos += l->sectorsize;
		e->data_off = pos;
		data = (e->flags & (VS_LW_DISCARD | VS_LW_MARK)) ? 0 : e->nr_sectors;
		if (e->nr_sectors > dev_bytes / l->sectorsize ||
		    e->sector > dev_bytes / l->sectorsize - e->nr_sectors) {
			rc = vs_fail(why, whylen, -EINVAL,
				     "%s: entry %llu: sectors %llu+%llu are beyond the base image "
				     "(%llu bytes)",
				     path, (unsigned long long)i, (unsigned long long)e->sector,
				     (unsigned long long)e->nr_sectors,
				     (unsigned long long)dev_bytes);
			goto fail;
		}
		if (data > (l->file_size - pos) / l->sectorsize) {
			rc = vs_fail(why, whylen, -EINVAL,
				     "%s: entry %llu: its data runs past the "
				     "end of the file",
				     path, (unsigned long long)i);
			goto fail;
		}
		pos += data * l->sectorsize;
	}
	l->n = n;
	free(sec);
	return 0;
fail:
	free(sec);
	return rc;
}

void lw_close(struct lw_log *l)
{
	if (l->fd > 0)
		close(l->fd);
	free(l->e);
	memset(l, 0, sizeof(*l));
}

const char *lw_describe(const struct lw_log *l, uint64_t i, char *buf, size_t len)
{
	const struct lw_entry *e = &l->e[i];

	if (e->flags & VS_LW_MARK)
		snprintf(buf, len, "#%llu mark '%s'", (unsigned long long)i, e->mark);
	else if (e->flags & VS_LW_FLUSH && !e->nr_sectors)
		snprintf(buf, len, "#%llu FLUSH", (unsigned long long)i);
	else
		snprintf(buf, len, "#%llu %s sectors %llu+%llu%s", (unsigned long long)i,
			 e->flags & VS_LW_DISCARD ? "discard" : "write",
			 (unsigned long long)e->sector, (unsigned long long)e->nr_sectors,
			 e->flags & VS_LW_FUA ? " FUA" : "");
	return buf;
}
