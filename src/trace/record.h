/* SPDX-License-Identifier: MIT */
/* Tool operations on a traced process: dump, record, enable, decode. */
#ifndef VS_TRACE_RECORD_H
#define VS_TRACE_RECORD_H

#include <signal.h>

#include "trace/tracefmt.h"

struct vs_dump_stats {
	unsigned threads;
	uint64_t bytes;
	uint64_t dropped;
	uint64_t overwritten;
	bool alive;
};

/* target: pid or shm path.  Errors: -errno and `why`. */
int vs_trace_dump(const char *target, const char *out, struct vs_dump_stats *st, char *why,
		  size_t whylen);

struct vs_record_opts {
	double duration_s;                 /* 0: until the process exits or *stop */
	volatile sig_atomic_t *stop;       /* may be NULL */
	const char *enable_spec;           /* set level/flags when recording starts */
	void (*started)(void *opaque);     /* called once streaming has begun */
	void *opaque;
};
int vs_trace_record(const char *target, const char *out, const struct vs_record_opts *o,
		    struct vs_dump_stats *st, char *why, size_t whylen);

int vs_trace_enable(const char *target, const char *spec, char *why, size_t whylen);

struct vs_decode_opts {
	bool json;
	bool chrome;            /* Chrome/Perfetto trace-event JSON (chrome://tracing, ui.perfetto.dev) */
	unsigned max_level;     /* 0: all */
	uint32_t flag_mask;     /* 0: all */
	uint32_t tid;           /* 0: all */
	double from_s, to_s;    /* window relative to the first event; to_s < 0: open */
	const char *flag_spec;  /* names, resolved against the capture's flags */
};
/* Decode a capture to `out`.  Returns 0, or -errno with `why` (bad file, bad filter). */
int vs_trace_decode(const char *path, const struct vs_decode_opts *o, FILE *out, char *why,
		    size_t whylen);

#endif
