/* SPDX-License-Identifier: MIT */
/* /proc/PID/stat: when a process started, which tells a reused pid apart.  Built into the
 * trace runtime as well (it is installed without the rest of util): nothing else of util
 * here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/util.h"

uint64_t vs_proc_start_time(int pid)
{
	char path[64], buf[1024];
	snprintf(path, sizeof path, "/proc/%d/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* comm may contain spaces and parentheses: fields restart after the last ')' */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	p++;
	for (int field = 3; field < 22 && p; field++) {
		p = strchr(p + 1, ' ');
	}
	return p ? strtoull(p + 1, NULL, 10) : 0;
}
