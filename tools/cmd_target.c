/* SPDX-License-Identifier: MIT */
/* `vioscope target ...`: the vhost-user-scsi target daemon. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vioscope/target.h>
#include <vioscope/trace.h>

#include "rpc/rpc.h"
#include "util/util.h"

static volatile sig_atomic_t stop_requested;
static struct vs_target *running;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
	vs_target_wake(running); /* async-signal-safe: one eventfd write */
}

/* The management socket's shutdown method: as SIGTERM. */
static void rpc_shutdown(void *arg)
{
	(void)arg;
	stop_requested = 1;
	vs_target_wake(running);
}

/* Why a frontend was dropped, a worker given up on: one line each on stderr. */
static void log_line(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "vioscope target: %s\n", line);
}

static void target_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: vioscope target --socket PATH --lun N:BACKEND [--lun N:BACKEND ...]\n"
	    "                       [--queues N] [--block-size 512|4096] [--workers N] [--poll]\n"
	    "                       [--adaptive-poll US] [--worker-timeout SECONDS] [--rpc PATH]\n"
	    "                       [--rpc-allow USERS] [--lun-root DIR] [--testing]\n"
	    "\n"
	    "A vhost-user-scsi device for QEMU's vhost-user-scsi-pci (one target, LUNs 0..%u).\n"
	    "  --socket PATH        listen here (created owner-only); QEMU connects to it\n"
	    "  --lun N:BACKEND      LUN N (0..%u) backed by one of\n"
	    "                         file=PATH[,ro][,direct]  an image file (io_uring; direct = "
	    "O_DIRECT)\n"
	    "                         ram=SIZE                 anonymous memory (K/M/G/T "
	    "suffixes)\n"
	    "                         null=SIZE                reads zeros, discards writes\n"
	    "                         rbd=POOL/IMAGE[,conf=PATH][,id=USER][,ro][,timeout=S]\n"
	    "                                                  a Ceph RBD image (librbd)%s\n"
	    "  --queues N           request queues, 1..%u (default 1; QEMU's num_queues)\n"
	    "  --block-size B       logical block size, 512 (default) or 4096\n"
	    "  --workers N          worker threads (default: one per queue, at most one per CPU)\n"
	    "  --poll               workers busy-poll instead of sleeping (lower latency, full "
	    "CPUs)\n"
	    "  --adaptive-poll US   without --poll: a worker out of work looks at its rings for\n"
	    "                       up to US microseconds (default %u; 0: never) before it\n"
	    "                       sleeps, adapting to the gaps between requests; no CPU while\n"
	    "                       idle\n"
	    "  --worker-timeout S   longest a worker may take to hand a queue back (default 30);\n"
	    "                       past it the target flushes and exits 1\n"
	    "  --rpc PATH           a management socket (owner-only) speaking JSON-RPC 2.0: add,\n"
	    "                       remove and resize LUNs, statistics, tracing, shutdown\n"
	    "                       (`vioscope rpc --socket PATH ...`, docs/TARGET.md)\n"
	    "  --rpc-allow USERS    who may use it: user names or uids, comma-separated\n"
	    "                       (default: root and the target's own uid); run QEMU under\n"
	    "                       another uid (docs/SECURITY.md)\n"
	    "  --lun-root DIR       file= and log-writes= paths (command line and --rpc alike)\n"
	    "                       must lie beneath DIR: relative to it, or absolute under it\n"
	    "  --testing            allow the test-only backend options (delay=, delay-every=,\n"
	    "                       drop-write=, misdirect-write=, stale-read=)\n"
	    "\n"
	    "SIGINT/SIGTERM: finish in-flight requests, flush the files, exit 0.\n"
	    "Traces: `vioscope trace enable PID verbose:io,queue` (this binary: %s flavour).\n",
	    VS_TARGET_MAX_LUNS - 1, VS_TARGET_MAX_LUNS - 1,
	    vs_target_have_rbd() ? "" : " (not in this build: librbd-dev was missing)",
	    VS_TARGET_MAX_QUEUES, VS_TARGET_ADAPTIVE_POLL_US, vs_trace_flavour());
}

/* "N:BACKEND" into l; 0, or -1 after printing why. */
static int parse_lun(const char *arg, struct vs_target_lun *l, const struct vs_target_lun *luns,
		     unsigned nluns)
{
	const char *colon = strchr(arg, ':');
	char num[16];
	uint64_t id;

	if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof(num)) {
		fprintf(stderr,
			"vioscope target: --lun '%s': expected N:BACKEND (e.g. 0:file=disk.img)\n",
			arg);
		return -1;
	}
	memcpy(num, arg, (size_t)(colon - arg));
	num[colon - arg] = 0;
	if (vs_parse_u64(num, 0, VS_TARGET_MAX_LUNS - 1, &id)) {
		fprintf(stderr, "vioscope target: --lun '%s': LUN number '%s' is not 0..%u\n", arg,
			num, VS_TARGET_MAX_LUNS - 1);
		return -1;
	}
	if (!colon[1]) {
		fprintf(stderr, "vioscope target: --lun '%s': no backend after the colon\n", arg);
		return -1;
	}
	if (strncmp(colon + 1, "file=", 5) && strncmp(colon + 1, "ram=", 4) &&
	    strncmp(colon + 1, "null=", 5) && strncmp(colon + 1, "rbd=", 4)) {
		fprintf(stderr,
			"vioscope target: --lun '%s': unknown backend '%s' (file=PATH, ram=SIZE, "
			"null=SIZE or rbd=POOL/IMAGE)\n",
			arg, colon + 1);
		return -1;
	}
	for (unsigned i = 0; i < nluns; i++) {
		if (luns[i].id == (unsigned)id) {
			fprintf(stderr, "vioscope target: LUN %ld given twice ('%s' and '%s')\n",
				id, luns[i].spec, colon + 1);
			return -1;
		}
	}
	l->id = (unsigned)id;
	l->spec = colon + 1;
	return 0;
}

/* "root,qemu,1000" into uids: 0, or -1 after printing why. */
static int parse_users(const char *list, uint32_t *uids, unsigned *n)
{
	char copy[1024], *save = NULL;

	if (strlen(list) >= sizeof(copy)) {
		fprintf(stderr, "vioscope target: --rpc-allow: the list is too long\n");
		return -1;
	}
	snprintf(copy, sizeof(copy), "%s", list);
	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		struct passwd pw, *found = NULL;
		char buf[4096];
		uint64_t v;

		if (*n >= VS_RPC_MAX_ALLOW) {
			fprintf(stderr, "vioscope target: --rpc-allow: at most %u users\n",
				VS_RPC_MAX_ALLOW);
			return -1;
		}
		if (vs_parse_u64(w, 0, UINT32_MAX - 1, &v) == 0) {
			uids[(*n)++] = (uint32_t)v;
			continue;
		}
		if (getpwnam_r(w, &pw, buf, sizeof(buf), &found) || !found) {
			fprintf(stderr, "vioscope target: --rpc-allow: no user '%s'\n", w);
			return -1;
		}
		uids[(*n)++] = (uint32_t)found->pw_uid;
	}
	if (!*n) {
		fprintf(stderr, "vioscope target: --rpc-allow: no user given\n");
		return -1;
	}
	return 0;
}

static int cmd_target(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"lun", required_argument, NULL, 'l'},
	    {"queues", required_argument, NULL, 'q'},
	    {"block-size", required_argument, NULL, 'b'},
	    {"workers", required_argument, NULL, 'w'},
	    {"poll", no_argument, NULL, 'p'},
	    {"worker-timeout", required_argument, NULL, 't'},
	    {"adaptive-poll", required_argument, NULL, 'a'},
	    {"rpc", required_argument, NULL, 'r'},
	    {"rpc-allow", required_argument, NULL, 'A'},
	    {"lun-root", required_argument, NULL, 'R'},
	    {"testing", no_argument, NULL, 'T'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	static struct vs_target_lun luns[VS_TARGET_MAX_LUNS];
	struct vs_target_config cfg = {
	    .num_queues = 1, .block_size = 512, .luns = luns, .log = log_line};
	struct sigaction sa;
	const char *rpc_path = NULL, *rpc_allow = NULL;
	uint32_t allow[VS_RPC_MAX_ALLOW];
	unsigned nallow = 0;
	struct vs_rpc *rpc = NULL;
	char err[512];
	double secs;
	uint64_t v;
	int c, rc;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			cfg.socket_path = optarg;
			break;
		case 'l':
			if (cfg.nluns >= VS_TARGET_MAX_LUNS) {
				fprintf(stderr, "vioscope target: more than %u LUNs\n",
					VS_TARGET_MAX_LUNS);
				return 2;
			}
			if (parse_lun(optarg, &luns[cfg.nluns], luns, cfg.nluns))
				return 2;
			cfg.nluns++;
			break;
		case 'q':
			if (vs_cli_uint("vioscope target", "queues", optarg, 1,
					VS_TARGET_MAX_QUEUES, &v))
				return 2;
			cfg.num_queues = (unsigned)v;
			break;
		case 'b':
			if (vs_parse_u64(optarg, 512, 4096, &v) || (v != 512 && v != 4096)) {
				fprintf(stderr, "vioscope target: --block-size '%s': 512 or 4096\n",
					optarg);
				return 2;
			}
			cfg.block_size = (uint32_t)v;
			break;
		case 'w':
			if (vs_cli_uint("vioscope target", "workers", optarg, 1,
					VS_TARGET_MAX_WORKERS, &v))
				return 2;
			cfg.workers = (unsigned)v;
			break;
		case 'p':
			cfg.poll = true;
			break;
		case 'a':
			if (vs_cli_uint("vioscope target", "adaptive-poll", optarg, 0,
					VS_TARGET_ADAPTIVE_POLL_MAX, &v))
				return 2;
			cfg.adaptive_poll_us = v ? (unsigned)v : VS_TARGET_ADAPTIVE_POLL_OFF;
			break;
		case 't':
			if (vs_cli_seconds("vioscope target", "worker-timeout", optarg, 0.1, 3600,
					   &secs))
				return 2;
			cfg.worker_timeout_ms = (unsigned)(secs * 1000);
			break;
		case 'r':
			rpc_path = optarg;
			break;
		case 'A':
			rpc_allow = optarg;
			break;
		case 'R':
			cfg.lun_root = optarg;
			break;
		case 'T':
			cfg.testing = true;
			break;
		case 'h':
			target_usage(stdout);
			return 0;
		case ':':
			fprintf(stderr, "vioscope target: option '%s' needs a value\n",
				argv[optind - 1]);
			return 2;
		default:
			fprintf(stderr, "vioscope target: unknown option '%s' (see --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "vioscope target: unexpected argument '%s' (see --help)\n",
			argv[optind]);
		return 2;
	}
	if (!cfg.socket_path || !*cfg.socket_path) {
		fprintf(stderr, "vioscope target: --socket PATH is required\n");
		return 2;
	}
	if (!cfg.nluns) {
		fprintf(stderr, "vioscope target: at least one --lun N:BACKEND is required\n");
		return 2;
	}
	if (rpc_allow && !rpc_path) {
		fprintf(stderr, "vioscope target: --rpc-allow without --rpc\n");
		return 2;
	}
	if (rpc_path) {
		if (rpc_allow && parse_users(rpc_allow, allow, &nallow))
			return 2;
		if (!rpc_allow) { /* the default: root and our own uid */
			allow[nallow++] = 0;
			if (geteuid())
				allow[nallow++] = geteuid();
		}
		/* A frontend under one of them is warned about (it could reconfigure us). */
		cfg.manager_uids = allow;
		cfg.nmanager_uids = nallow;
	}

	/* Handlers before the socket exists: a signal right after must not kill us. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	{
		struct vs_target *t;
		rc = vs_target_create(&t, &cfg, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "vioscope target: %s\n", err);
			return 1;
		}
		running = t;
	}
	if (rpc_path) {
		struct vs_rpc_config rc_cfg = {.path = rpc_path,
					       .target = running,
					       .shutdown = rpc_shutdown,
					       .log = log_line,
					       .allow_uids = allow,
					       .nallow_uids = nallow};

		if (vs_rpc_start(&rpc, &rc_cfg, err, sizeof(err))) {
			struct vs_target *t = running;

			fprintf(stderr, "vioscope target: --rpc: %s\n", err);
			running = NULL; /* no signal may wake a target being torn down */
			vs_target_destroy(t);
			return 1;
		}
	}
	fprintf(stderr,
		"vioscope target: listening on %s (%u LUN%s, %u request queue%s, %s mode)%s%s\n",
		cfg.socket_path, cfg.nluns, cfg.nluns == 1 ? "" : "s", cfg.num_queues,
		cfg.num_queues == 1 ? "" : "s", cfg.poll ? "poll" : "event",
		rpc_path ? "; management socket " : "", rpc_path ? rpc_path : "");
	rc = vs_target_run(running, &stop_requested);
	if (rc)
		fprintf(stderr, "vioscope target: serving failed: %s\n", strerror(-rc));
	else
		fprintf(stderr, "vioscope target: stopping\n");
	{
		struct vs_target *t = running;
		struct vs_target_stats st;
		sigset_t block;

		vs_rpc_stop(rpc); /* no method may reach a target being torn down */
		vs_target_get_stats(t, &st);
		fprintf(stderr,
			"vioscope target: %llu requests; idle spells ended by the adaptive poll "
			"%llu, sleeps %llu, polls cut short (CPU wanted) %llu\n",
			(unsigned long long)st.requests, (unsigned long long)st.polled_idle,
			(unsigned long long)st.sleeps, (unsigned long long)st.preempted);

		/* No handler may wake a target being torn down. */
		sigemptyset(&block);
		sigaddset(&block, SIGINT);
		sigaddset(&block, SIGTERM);
		sigprocmask(SIG_BLOCK, &block, NULL);
		running = NULL;
		int frc = vs_target_destroy(t);
		if (frc == -ETIMEDOUT) {
			fprintf(stderr, "vioscope target: a worker or a flush was given up on (see "
					"above); the backends that answered were flushed\n");
			return 1;
		}
		if (frc) {
			fprintf(stderr, "vioscope target: flushing the backends failed: %s\n",
				strerror(-frc));
			return 1;
		}
	}
	return rc ? 1 : 0;
}

VS_CLI_COMMAND(target, 4, "target", cmd_target, "vhost-user-scsi target (device)");
