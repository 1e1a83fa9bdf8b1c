/* SPDX-License-Identifier: MIT */
/* `vioscope trace latency CAPTURE... [--json] [--by lun|queue|op] [--slow N] [--svg FILE]`. */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "tools/cmd_trace.h"
#include "tools/commands.h"
#include "tracetools/tracetools.h"
#include "util/util.h"

int trace_latency(int argc, char **argv)
{
	static const struct option opts[] = {{"json", no_argument, 0, 'j'},
					     {"by", required_argument, 0, 'b'},
					     {"slow", required_argument, 0, 's'},
					     {"svg", required_argument, 0, 'S'},
					     {0, 0, 0, 0}};
	struct vs_latency_opts o = {.by = -1};
	uint64_t v;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "jb:s:", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o.json = true;
			o.json_head = vs_cli_json_meta;
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
				return VS_EXIT_USAGE;
			}
			break;
		case 'S':
			o.svg = optarg;
			break;
		case 's':
			if (vs_cli_uint("vioscope trace latency", "slow", optarg, 1, 1000, &v))
				return VS_EXIT_USAGE;
			o.slow = (unsigned)v;
			break;
		default:
			return VS_EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "vioscope trace latency: usage: latency CAPTURE... [--json] "
				"[--by lun|queue|op] [--slow N] [--svg FILE]\n");
		return VS_EXIT_USAGE;
	}
	char why[512];
	int rc = vs_trace_latency((const char *const *)argv + optind, (unsigned)(argc - optind), &o,
				  stdout, why, sizeof why);
	if (rc < 0) {
		trace_error("latency", why);
		return trace_exit_status(rc);
	}
	return VS_EXIT_OK;
}
