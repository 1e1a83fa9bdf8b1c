/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the capture reader and decoder on hostile files.  Each input
 * is written to a memfd and opened through /proc/self/fd like any capture path;
 * a capture that opens is walked with every event formatted, then decoded as
 * text, JSON and Chrome trace-event JSON (to /dev/null).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tracetools/tracetools.h"

static int fd = -1;
static char path[64];
static FILE *devnull;

static int on_event(const struct vs_cap_event *ev, void *opaque)
{
	char msg[4096], prefix[512];
	size_t *n = opaque;

	if (ev->site) {
		vs_format_message(msg, sizeof msg, ev->site, ev->args, ev->args_len);
		vs_format_prefix(prefix, sizeof prefix, ev->real_ns, ev->tid, ev->site->level,
				 ev->site->provider, ev->site->flag_name,
				 ev->caller ? ev->caller->func : NULL, ev->site->func);
	}
	(*n)++;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vs_capture *c;
	char why[512];

	if (fd < 0) {
		fd = memfd_create("capture", MFD_CLOEXEC);
		devnull = fopen("/dev/null", "we");
		if (fd < 0 || !devnull)
			abort();
		snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) < 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size))
		abort();
	if (vs_capture_open(&c, path, why, sizeof why) < 0)
		return 0;
	size_t events = 0;
	vs_capture_walk(c, on_event, &events, why, sizeof why);
	vs_capture_close(c);

	struct vs_decode_opts o = {.to_s = -1};
	vs_trace_decode(path, &o, devnull, why, sizeof why);
	o.json = true;
	vs_trace_decode(path, &o, devnull, why, sizeof why);
	o.json = false;
	o.chrome = true;
	vs_trace_decode(path, &o, devnull, why, sizeof why);
	return 0;
}
