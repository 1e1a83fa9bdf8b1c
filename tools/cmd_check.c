/* SPDX-License-Identifier: MIT */
/* `vioscope check flush|verify|stress`: the conformance suites (src/check, docs/RELIABILITY.md). */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "util/util.h"

static void check_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: vioscope check flush --log LOG --base IMG [--fsck CMD] [--verify CMD]\n"
	    "                            [--subsets N] [--seed S] [--workdir DIR] [--keep]\n"
	    "       vioscope check verify [--socket PATH | --target SPEC | --device PATH]\n"
	    "                             [--time S] [--queues N] [--lun I] [--size BYTES]\n"
	    "                             [--depth N] [--seed S]\n"
	    "       vioscope check stress [--time S] [--queues N] [--size BYTES] [--dir DIR]\n"
	    "                             [--seed S]\n"
	    "\n"
	    "flush   replay a write log (a LUN's log-writes=LOG) onto a copy of BASE up to every\n"
	    "        flush and FUA point, plus --subsets random subsets of the writes still\n"
	    "        unflushed there (default 4); run --fsck and --verify on each crash state\n"
	    "        (the image path is appended to the command)\n"
	    "verify  write self-describing blocks and read them back: a running target's\n"
	    "        socket, a target started here on SPEC (e.g. ram=256M), or a file or block\n"
	    "        device through io_uring; names lost, stale, misdirected and torn writes\n"
	    "stress  verify's traffic plus flushes and unmaps under ABORT TASK and LUN RESET\n"
	    "        storms, target kills and memory-table changes, on a target started here\n"
	    "\n"
	    "Exit status: 0 passed, 1 a fault found, 2 bad command line, 3 a request hung.\n");
}

static int bad(const char *msg, const char *arg)
{
	fprintf(stderr, "vioscope check: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
	return 2;
}

static int finish(const char *cmd, int rc, const char *why)
{
	if (rc < 0) {
		fprintf(stderr, "vioscope check %s: %s\n", cmd, why);
		return 1;
	}
	return rc;
}

static int check_flush(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"log", required_argument, NULL, 'l'},
	    {"base", required_argument, NULL, 'b'},
	    {"fsck", required_argument, NULL, 'f'},
	    {"verify", required_argument, NULL, 'v'},
	    {"subsets", required_argument, NULL, 'n'},
	    {"seed", required_argument, NULL, 'S'},
	    {"workdir", required_argument, NULL, 'w'},
	    {"keep", no_argument, NULL, 'k'},
	    {0},
	};
	struct vs_check_flush_opts o = {.subsets = 4, .out = stdout};
	char why[512];
	uint64_t v;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			o.log = optarg;
			break;
		case 'b':
			o.base = optarg;
			break;
		case 'f':
			o.fsck = optarg;
			break;
		case 'v':
			o.verify = optarg;
			break;
		case 'n':
			if (vs_cli_uint("vioscope check flush", "subsets", optarg, 0, 1u << 20, &v))
				return 2;
			o.subsets = (unsigned)v;
			break;
		case 'S':
			if (vs_cli_uint("vioscope check flush", "seed", optarg, 1, UINT64_MAX,
					&o.seed))
				return 2;
			break;
		case 'w':
			o.workdir = optarg;
			break;
		case 'k':
			o.keep = true;
			break;
		default:
			return bad("flush: unknown option or missing value:", argv[optind - 1]);
		}
	}
	if (!o.log || !o.base)
		return bad("flush: --log and --base are required", NULL);
	if (!o.fsck && !o.verify)
		return bad("flush: give --fsck or --verify (or both)", NULL);
	return finish("flush", vs_check_flush(&o, why, sizeof(why)), why);
}

/* verify and stress share their options. */
static int io_options(const char *cmd, int argc, char **argv, struct vs_check_io_opts *o)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"target", required_argument, NULL, 't'},
	    {"device", required_argument, NULL, 'd'},
	    {"time", required_argument, NULL, 'T'},
	    {"queues", required_argument, NULL, 'q'},
	    {"lun", required_argument, NULL, 'L'},
	    {"size", required_argument, NULL, 'z'},
	    {"depth", required_argument, NULL, 'D'},
	    {"seed", required_argument, NULL, 'S'},
	    {"dir", required_argument, NULL, 'r'},
	    {0},
	};
	bool stress = !strcmp(cmd, "vioscope check stress");
	uint64_t v;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (stress && (c == 's' || c == 't' || c == 'd' || c == 'L'))
			return bad("stress: it starts its own target; unknown option",
				   argv[optind - 1]);
		if (!stress && c == 'r')
			return bad("verify: unknown option", argv[optind - 1]);
		switch (c) {
		case 's':
			o->socket = optarg;
			break;
		case 't':
			o->target_spec = optarg;
			break;
		case 'd':
			o->device = optarg;
			break;
		case 'T':
			if (vs_cli_seconds(cmd, "time", optarg, 0.1, 7 * 86400.0, &o->seconds))
				return 2;
			break;
		case 'q':
			if (vs_cli_uint(cmd, "queues", optarg, 1, 16, &v))
				return 2;
			o->queues = (unsigned)v;
			break;
		case 'L':
			if (vs_cli_uint(cmd, "lun", optarg, 0, 255, &v))
				return 2;
			o->lun = (unsigned)v;
			break;
		case 'z':
			if (vs_parse_size(optarg, &o->size) || o->size < 65536)
				return bad("--size: expected a size of at least 64K, e.g. 256M:",
					   optarg);
			break;
		case 'D':
			if (vs_cli_uint(cmd, "depth", optarg, 1, 64, &v))
				return 2;
			o->max_depth = (unsigned)v;
			break;
		case 'S':
			if (vs_cli_uint(cmd, "seed", optarg, 1, UINT64_MAX, &o->seed))
				return 2;
			break;
		case 'r':
			o->dir = optarg;
			break;
		default:
			return bad("unknown option or missing value:", argv[optind - 1]);
		}
	}
	if (optind < argc)
		return bad("unexpected argument:", argv[optind]);
	return 0;
}

static int check_verify(int argc, char **argv)
{
	static char exe[4096];
	struct vs_check_io_opts o = {.seconds = 10, .exe = exe, .out = stdout};
	char why[512];
	int rc;

	vs_self_exe(exe, sizeof(exe));
	if ((rc = io_options("vioscope check verify", argc, argv, &o)))
		return rc;
	if (!!o.socket + !!o.target_spec + !!o.device != 1)
		return bad("verify: give one of --socket PATH, --target SPEC, --device PATH", NULL);
	return finish("verify", vs_check_verify(&o, why, sizeof(why)), why);
}

static int check_stress(int argc, char **argv)
{
	static char exe[4096];
	struct vs_check_io_opts o = {.seconds = 60, .exe = exe, .out = stdout};
	char why[512];
	int rc;

	vs_self_exe(exe, sizeof(exe));
	if ((rc = io_options("vioscope check stress", argc, argv, &o)))
		return rc;
	return finish("stress", vs_check_stress(&o, why, sizeof(why)), why);
}

static int cmd_check(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		check_usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "flush"))
		return check_flush(argc - 1, argv + 1);
	if (!strcmp(argv[1], "verify"))
		return check_verify(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stress"))
		return check_stress(argc - 1, argv + 1);
	fprintf(stderr, "vioscope check: unknown check '%s'\n\n", argv[1]);
	check_usage(stderr);
	return 2;
}

VS_CLI_COMMAND(check, 5, "check", cmd_check,
	       "conformance checks: flush (crash states), verify (data), stress");
