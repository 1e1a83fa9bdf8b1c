/* SPDX-License-Identifier: MIT */
/* Reading a write log (dm-log-writes format, proto/logwrites_proto.h) in tests: the entries
 * its super block counts, with each write's first data byte. */
#ifndef TESTS_LWLOG_H
#define TESTS_LWLOG_H

#include <endian.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "proto/logwrites_proto.h"

struct lw_test_entry {
	uint64_t sector, nr_sectors, flags;
	char mark[64];
	uint8_t first_byte; /* of the data, when there is some */
};

/* Up to max entries of the log at path: their count, or -1 when it is not a 512-byte-sector
 * write log. */
static inline int lw_test_read(const char *path, struct lw_test_entry *e, unsigned max)
{
	struct vs_lw_super s;
	uint8_t sec[512];
	uint64_t pos = 512, n;
	int fd = open(path, O_RDONLY);

	if (fd < 0 || pread(fd, &s, sizeof(s), 0) != sizeof(s) || le64toh(s.magic) != VS_LW_MAGIC ||
	    le64toh(s.version) != VS_LW_VERSION || le32toh(s.sectorsize) != 512) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	n = le64toh(s.nr_entries);
	for (unsigned i = 0; i < n && i < max; i++) {
		struct vs_lw_entry le;

		if (pread(fd, sec, 512, (off_t)pos) != 512)
			break;
		memcpy(&le, sec, sizeof(le));
		e[i].sector = le64toh(le.sector);
		e[i].nr_sectors = le64toh(le.nr_sectors);
		e[i].flags = le64toh(le.flags);
		e[i].mark[0] = 0;
		e[i].first_byte = 0;
		if (e[i].flags & VS_LW_MARK)
			snprintf(e[i].mark, sizeof(e[i].mark), "%.*s", (int)le64toh(le.data_len),
				 (char *)sec + sizeof(le));
		pos += 512;
		if (!(e[i].flags & (VS_LW_DISCARD | VS_LW_MARK)) && e[i].nr_sectors) {
			if (pread(fd, &e[i].first_byte, 1, (off_t)pos) != 1)
				break;
			pos += e[i].nr_sectors * 512;
		}
	}
	close(fd);
	return (int)n;
}

#endif
