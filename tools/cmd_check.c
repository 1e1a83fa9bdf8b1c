/* SPDX-License-Identifier: MIT */
/* `vioscope check flush|verify|stress`: the conformance suites (src/check, docs/RELIABILITY.md). */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/check.h"
#include "util/util.h"

static const char flush_usage[] =
    "usage: vioscope check flush --log LOG --base IMG [--fsck CMD] [--verify CMD]\n"
    "                            [--subsets N] [--seed S] [--workdir DIR] [--keep]\n"
    "flush   replay a write log (a LUN's log-writes=LOG) onto a copy of BASE up to every\n"
    "        flush and FUA point, plus --subsets random subsets of the writes still\n"
    "        unflushed there (default 4); run --fsck and --verify on each crash state\n"
    "        (the image path is appended to the command); scratch images in --workdir\n"
    "        (default $TMPDIR or /tmp), removed at the end\n";
static const char verify_usage[] =
    "usage: vioscope check verify [--socket PATH | --target SPEC | --device PATH]\n"
    "                             [--destroy-data] [--time S] [--queues N] [--lun I]\n"
    "                             [--size BYTES] [--depth N] [--seed S] [--writes N]\n"
    "verify  write self-describing blocks and read them back: a running target's\n"
    "        socket, a target started here on SPEC (e.g. ram=256M), or a file or block\n"
    "        device through io_uring; names lost, stale, misdirected and torn writes.\n"
    "        It writes over what it tests (its first 1 GiB, or --size): a --socket LUN\n"
    "        or a --device is its only with --destroy-data.  --time S of random I/O\n"
    "        (default 10; progress every 2 s), or until --writes N writes were made (the\n"
    "        same work on any machine: with --seed and --queues 1 --depth 1, the same\n"
    "        requests), then every sector is read back\n";
static const char stress_usage[] =
    "usage: vioscope check stress [--time S] [--queues N] [--size BYTES] [--dir DIR]\n"
    "                             [--seed S]\n"
    "stress  verify's traffic plus flushes and unmaps under ABORT TASK and LUN RESET\n"
    "        storms, target kills and memory-table changes, on a target started here\n"
    "        on a file LUN in --dir (default /var/tmp), removed at the end; --time S\n"
    "        (default 60)\n";
static const char check_status[] =
    "Ctrl-C or SIGTERM: prints what was checked so far and the seed, stops the target,\n"
    "removes what the check made, exits 128 + the signal.\n"
    "Exit status: 0 passed, 1 a fault found (a hung request too), 2 bad command line,\n"
    "3 could not run (no such socket, file or directory, a target that would not start).\n";

static void check_usage(FILE *f, const char *which)
{
	if (!which || !strcmp(which, "flush"))
		fputs(flush_usage, f);
	if (!which || !strcmp(which, "verify"))
		fputs(verify_usage, f);
	if (!which || !strcmp(which, "stress"))
		fputs(stress_usage, f);
	fputs(check_status, f);
}

static int bad(const char *msg, const char *arg)
{
	fprintf(stderr, "vioscope check: %s%s%s\n", msg, arg ? " " : "", arg ? arg : "");
	return VS_EXIT_USAGE;
}

/* A check's result as an exit status: what it found, 3 when it could not run (said why),
 * 128 + the signal when interrupted (it said what it had checked). */
static int finish(const char *cmd, int rc, const char *why)
{
	if (rc < 0 && vs_interrupted())
		fprintf(stderr, "vioscope check %s: interrupted by %s before it began (%s)\n", cmd,
			vs_signal_name(vs_interrupted()), why);
	else if (rc < 0)
		fprintf(stderr, "vioscope check %s: %s\n", cmd, why);
	return vs_interrupt_status(rc < 0 ? VS_EXIT_CANNOT_RUN : rc);
}

/* --help among a check's arguments: its own help, and nothing run. */
static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return true;
	return false;
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

	if (wants_help(argc, argv)) {
		check_usage(stdout, "flush");
		return VS_EXIT_OK;
	}
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
				return VS_EXIT_USAGE;
			o.subsets = (unsigned)v;
			break;
		case 'S':
			if (vs_cli_uint("vioscope check flush", "seed", optarg, 1, UINT64_MAX,
					&o.seed))
				return VS_EXIT_USAGE;
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
	vs_interrupt_catch();
	return finish("flush", vs_check_flush(&o, why, sizeof(why)), why);
}

/* verify and stress share their options. */
static int io_options(const char *cmd, int argc, char **argv, struct vs_check_io_opts *o,
		      bool *destroy_data)
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
	    {"destroy-data", no_argument, NULL, 'X'},
	    {"writes", required_argument, NULL, 'W'},
	    {0},
	};
	bool stress = !strcmp(cmd, "vioscope check stress");
	uint64_t v;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
		if (stress &&
		    (c == 's' || c == 't' || c == 'd' || c == 'L' || c == 'X' || c == 'W'))
			return bad("stress: it starts its own target; unknown option",
				   argv[optind - 1]);
		if (!stress && c == 'r')
			return bad("verify: unknown option", argv[optind - 1]);
		switch (c) {
		case 's':
			o->socket = optarg;
			break;
		case 't':
			if (strncmp(optarg, "file=", 5) && strncmp(optarg, "ram=", 4) &&
			    strncmp(optarg, "null=", 5) && strncmp(optarg, "rbd=", 4))
				return bad(
				    "verify: --target: expected file=IMG, ram=SIZE, null=SIZE "
				    "or rbd=POOL/IMAGE, not",
				    optarg);
			o->target_spec = optarg;
			break;
		case 'X':
			*destroy_data = true;
			break;
		case 'd':
			o->device = optarg;
			break;
		case 'T':
			if (vs_cli_seconds(cmd, "time", optarg, 0.1, 7 * 86400.0, &o->seconds))
				return VS_EXIT_USAGE;
			break;
		case 'q':
			if (vs_cli_uint(cmd, "queues", optarg, 1, 16, &v))
				return VS_EXIT_USAGE;
			o->queues = (unsigned)v;
			break;
		case 'L':
			if (vs_cli_uint(cmd, "lun", optarg, 0, 255, &v))
				return VS_EXIT_USAGE;
			o->lun = (unsigned)v;
			break;
		case 'z':
			if (vs_parse_size(optarg, &o->size) || o->size < 65536)
				return bad("--size: expected a size of at least 64K, e.g. 256M:",
					   optarg);
			break;
		case 'D':
			if (vs_cli_uint(cmd, "depth", optarg, 1, 64, &v))
				return VS_EXIT_USAGE;
			o->max_depth = (unsigned)v;
			break;
		case 'S':
			if (vs_cli_uint(cmd, "seed", optarg, 1, UINT64_MAX, &o->seed))
				return VS_EXIT_USAGE;
			break;
		case 'r':
			o->dir = optarg;
			break;
		case 'W':
			if (vs_cli_uint(cmd, "writes", optarg, 1, UINT64_MAX, &o->max_writes))
				return VS_EXIT_USAGE;
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
	bool destroy_data = false;
	char why[512];
	int rc;

	if (wants_help(argc, argv)) {
		check_usage(stdout, "verify");
		return VS_EXIT_OK;
	}
	vs_self_exe(exe, sizeof(exe));
	if ((rc = io_options("vioscope check verify", argc, argv, &o, &destroy_data)))
		return rc;
	if (!!o.socket + !!o.target_spec + !!o.device != 1)
		return bad("verify: give one of --socket PATH, --target SPEC, --device PATH", NULL);
	/* A target started here is the check's own; anything else holds someone's data. */
	if ((o.socket || o.device) && !destroy_data) {
		fprintf(stderr,
			"vioscope check verify: %s %s: verify writes over the data it tests (its "
			"first %s); add --destroy-data to confirm that what is there may go\n",
			o.socket ? "--socket" : "--device", o.socket ? o.socket : o.device,
			o.size ? "--size bytes" : "1 GiB");
		return VS_EXIT_USAGE;
	}
	vs_interrupt_catch();
	return finish("verify", vs_check_verify(&o, why, sizeof(why)), why);
}

static int check_stress(int argc, char **argv)
{
	static char exe[4096];
	struct vs_check_io_opts o = {.seconds = 60, .exe = exe, .out = stdout};
	bool destroy_data = false;
	char why[512];
	int rc;

	if (wants_help(argc, argv)) {
		check_usage(stdout, "stress");
		return VS_EXIT_OK;
	}
	vs_self_exe(exe, sizeof(exe));
	if ((rc = io_options("vioscope check stress", argc, argv, &o, &destroy_data)))
		return rc;
	vs_interrupt_catch();
	return finish("stress", vs_check_stress(&o, why, sizeof(why)), why);
}

static int cmd_check(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		check_usage(argc < 2 ? stderr : stdout, NULL);
		return argc < 2 ? VS_EXIT_USAGE : VS_EXIT_OK;
	}
	if (!strcmp(argv[1], "flush"))
		return check_flush(argc - 1, argv + 1);
	if (!strcmp(argv[1], "verify"))
		return check_verify(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stress"))
		return check_stress(argc - 1, argv + 1);
	fprintf(stderr, "vioscope check: unknown check '%s'\n\n", argv[1]);
	check_usage(stderr, NULL);
	return VS_EXIT_USAGE;
}

VS_CLI_COMMAND(check, 5, "check", cmd_check,
	       "conformance checks: flush (crash states), verify (data), stress");
