/* SPDX-License-Identifier: MIT */
/* `vioscope trace latency CAPTURE... [--json] [--by lun|queue|op] [--slow N] [--svg FILE]`. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "tools/commands.h"
#include "tracetools/tracetools.h"
#include "util/util.h"

int trace_latency(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, 0, 'j'},	 {"by", required_argument, 0, 'b'},
	    {"slow", required_argument, 0, 's'}, {"svg", required_argument, 0, 'S'},
	    {"help", no_argument, 0, 'h'},	 {0, 0, 0, 0}};
	struct vs_latency_opts o = {.by = -1};
	uint64_t v;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "jb:s:h", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o.json = true;
			break;
		case 'b':
			o.by = !strcmp(optarg, "lun")	  ? 0
			       : !strcmp(optarg, "queue") ? 1
			       : !strcmp(optarg, "op")	  ? 2
							  : -2;
			if (o.by == -2) {
				fprintf(stderr,
					"vioscope trace latency: --by %s: expected lun, queue "
					"or op\n",
					optarg);
				return 2;
			}
			break;
		case 'S':
			o.svg = optarg;
			break;
		case 's':
			if (vs_cli_uint("vioscope trace latency", "slow", optarg, 1, 1000, &v))
				return 2;
			o.slow = (unsigned)v;
			break;
		case 'h':
			printf(
			    "usage: vioscope trace latency CAPTURE... [--json] [--by lun|queue|op] "
			    "[--slow N] [--svg FILE]\n"
			    "Joins driver (initiator) and device (target) captures by request tag\n"
			    "and prints per stage count, p50, p90, p99, p99.9 and max.\n");
			return 0;
		default:
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "vioscope trace latency: usage: latency CAPTURE... [--json] "
				"[--by lun|queue|op] [--slow N]\n");
		return 2;
	}
	char why[512];
	if (vs_trace_latency((const char *const *)argv + optind, (unsigned)(argc - optind), &o,
			     stdout, why, sizeof why) < 0) {
		fputs("vioscope trace latency: ", stderr);
		vs_fputs_text(why, stderr);
		fputc('\n', stderr);
		return 1;
	}
	return 0;
}
