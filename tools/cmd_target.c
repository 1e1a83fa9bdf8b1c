/* SPDX-License-Identifier: MIT */
/* `vioscope target ...`: the vhost-user-scsi target daemon. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vioscope/target.h>
#include <vioscope/trace.h>

#include "rpc/config.h"
#include "rpc/config_live.h"
#include "rpc/rpc.h"
#include "tools/commands.h"
#include "util/util.h"

/* serving_paused makes vs_target_run return to the main loop, which then stops, or reloads
 * the configuration file and serves again. */
static volatile sig_atomic_t stop_requested, reload_requested, serving_paused;
static struct vs_target *running;

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		reload_requested = 1;
	else
		stop_requested = 1;
	serving_paused = 1;
	vs_target_wake(running); /* async-signal-safe: one eventfd write */
}

/* The management socket's shutdown method: as SIGTERM. */
static void rpc_shutdown(void *arg)
{
	(void)arg;
	stop_requested = 1;
	serving_paused = 1;
	vs_target_wake(running);
}

/* Why a frontend was dropped, a worker given up on: one line each on stderr. */
static void log_line(void *arg, const char *line)
{
	(void)arg;
	fprintf(stderr, "vioscope target: %s\n", line);
}

_Static_assert(VS_TARGET_MAX_LUNS == 256 && VS_TARGET_MAX_QUEUES == 16 &&
		   VS_TARGET_MAX_WORKERS == 64 && VS_TARGET_ADAPTIVE_POLL_US == 32 &&
		   VS_TARGET_ADAPTIVE_POLL_MAX == 1000000 && VS_RPC_MAX_ALLOW == 16,
	       "the help below states these numbers");

enum {
	OPT_SOCKET = 256,
	OPT_LUN,
	OPT_QUEUES,
	OPT_BLOCK_SIZE,
	OPT_WORKERS,
	OPT_POLL,
	OPT_ADAPTIVE_POLL,
	OPT_WORKER_TIMEOUT,
	OPT_RPC,
	OPT_RPC_ALLOW,
	OPT_LUN_ROOT,
	OPT_TESTING,
	OPT_QOS,
	OPT_CONTROLLER,
	OPT_CONFIG,
	OPT_CONFIG_AUTOSAVE,
};

static const struct vs_cli_opt target_opts[] = {
    {"socket", 0, OPT_SOCKET, "PATH", NULL,
     "listen here (required); QEMU's vhost-user-scsi-pci connects to it. The socket is created "
     "owner-only (0600) and appears once it accepts connections; a stale socket nobody listens "
     "on is replaced, anything else there is refused"},
    {"lun", 0, OPT_LUN, "N:BACKEND", NULL,
     "LUN N (0..255) on BACKEND (see Backends); at least one per controller, each N once in it"},
    {"controller", 0, OPT_CONTROLLER, "NAME:socket=PATH[,queues=N]", NULL,
     "one more vhost-user-scsi device (a VM's disk controller) served by this target, with "
     "its own socket (no comma in PATH) and request queues (1..16, default 1); the --lun and "
     "--qos options after it are its LUNs, those before any --controller the --socket one's. "
     "Up to 64; the workers serve every controller's queues"},
    {"qos", 0, OPT_QOS, "N:LIMITS", NULL,
     "QoS limits of LUN N (given with --lun), or with all:LIMITS of its controller over all its "
     "LUNs together (a request goes when both let it), comma-separated: [read_|write_]iops=N, "
     "[read_|write_]bps=SIZE (K/M/G/T: powers of 1024), and their bursts "
     "[read_|write_]burst_iops=N, [read_|write_]burst_bps=SIZE (default: a tenth of a second's "
     "worth); no prefix: reads and writes together. Reads and writes over a limit wait in the "
     "target, in order. Changed at run time with `rpc qos_set`"},
    {"queues", 0, OPT_QUEUES, "N", "1", "request queues, 1..16: give QEMU the same num_queues"},
    {"block-size", 0, OPT_BLOCK_SIZE, "B", "512",
     "logical block size, 512 or 4096; every LUN's size must be a whole number of blocks"},
    {"workers", 0, OPT_WORKERS, "N", "one per queue, at most one per CPU",
     "worker threads for the request queues, 1..64"},
    {"poll", 0, OPT_POLL, NULL, NULL,
     "workers busy-poll the rings and io_uring instead of sleeping: the lowest latency, a whole "
     "CPU each"},
    {"adaptive-poll", 0, OPT_ADAPTIVE_POLL, "US", "32",
     "without --poll: a worker out of work keeps looking at its rings for a window of up to US "
     "microseconds (0..1000000; 0: never) before it sleeps, adapting to the gaps between "
     "requests; an idle target uses no CPU"},
    {"worker-timeout", 0, OPT_WORKER_TIMEOUT, "S", "30 s",
     "the longest a worker may take to hand a queue back, and a flush to finish (0.1 s..1 h); "
     "past it the target names the LUN, flushes the backends that answer and exits 1"},
    {"rpc", 0, OPT_RPC, "PATH", NULL,
     "a management socket (owner-only, JSON-RPC 2.0) to add, remove and resize LUNs, read "
     "statistics, change tracing and stop the target; `vioscope rpc --socket PATH` is its "
     "client. Not the --socket path"},
    {"rpc-allow", 0, OPT_RPC_ALLOW, "USERS", "root and the target's own uid",
     "who may use the management socket: user names or uids, comma-separated, at most 16. Run "
     "QEMU under a uid not in it: it would be warned about"},
    {"lun-root", 0, OPT_LUN_ROOT, "DIR", NULL,
     "every file= and log-writes= path, on the command line and through --rpc alike, must lie "
     "beneath DIR (relative to it, or absolute under it); \"..\" and symlinks leading out are "
     "refused"},
    {"testing", 0, OPT_TESTING, NULL, NULL,
     "allow the test-only backend options (see Backends); without it a spec naming one is "
     "refused"},
    {"config", 0, OPT_CONFIG, "FILE", NULL,
     "every setting and LUN from FILE (JSON, the shape the management socket's save_config "
     "writes: docs/TARGET.md), checked whole before anything is created; then no other "
     "option but --config-autosave. SIGHUP reloads it"},
    {"config-autosave", 0, OPT_CONFIG_AUTOSAVE, NULL, NULL,
     "with --config: after every change made over the management socket (a LUN added, "
     "removed, resized; trace_set) write the live configuration back to FILE, atomically"},
    {0},
};

static const struct vs_cli_section target_sections[] = {
    {"Backends",
     "  file=PATH[,ro][,direct][,shared]\n"
     "                           an image file or a block device, through io_uring; ro:\n"
     "                           read-only, direct: O_DIRECT. Locked as QEMU locks its\n"
     "                           images: a second writer (a target, a LUN, QEMU) is refused;\n"
     "                           shared: writers that all say shared coexist (a live\n"
     "                           migration's source and destination on one host)\n"
     "  ram=SIZE                 anonymous memory; the RAM LUNs of a target together may\n"
     "                           not pass the machine's RAM and swap\n"
     "  null=SIZE                reads zeros, discards writes (for benchmarks)\n"
     "  rbd=POOL/IMAGE[,conf=PATH][,id=USER][,ro][,timeout=S]\n"
     "                           a Ceph RBD image (librbd: in builds made with\n"
     "                           librbd-dev; others refuse rbd= and say so)\n"
     "\n"
     "Any backend takes these after its own options:\n"
     "  ,log-writes=LOG          every completed write, unmap and flush recorded in LOG\n"
     "                           (dm-log-writes format) for `vioscope check flush`; LOG is\n"
     "                           created and must not exist\n"
     "and, only with --testing (what `vioscope check` and `bench` use):\n"
     "  ,delay=USEC[,delay-every=K]  every Kth bio (default: each) completes USEC us late\n"
     "  ,drop-write=K            the Kth write bio is acknowledged but never written\n"
     "  ,misdirect-write=K       the Kth write bio lands one 512-byte sector further on\n"
     "  ,stale-read=K            the Kth write's old data goes to the next read of it\n"
     "  ,fail-flush=K            the Kth flush bio fails with EIO\n"
     "  ,gate=KIND[:FIRST[-[LAST]]][,gate-sock=PATH]  bios of KIND held until a test\n"
     "                           lets them go (src/backend/gate.c)\n"
     "\n"
     "SIZE: bytes, or with a K, M, G, T suffix (KiB, GiB...: powers of 1024), e.g. 64M, 1GiB."},
    {"Logging",
     "One line each on stderr: listening; each frontend that connects and disconnects, with "
     "its pid; a frontend dropped and why; a LUN, flush or worker given up on; the request "
     "counts at exit. Under systemd (a Type=notify unit such as vioscope-target@.service) the "
     "target reports itself ready once both sockets listen (READY=1), reloading on SIGHUP "
     "(RELOADING=1, then READY=1) and stopping on a signal (STOPPING=1). Trace flags for more: "
     "`vioscope trace enable PID "
     "verbose:vhost,queue,io` (docs/TARGET.md)."},
    {"Signals", "SIGINT and SIGTERM (and the management socket's shutdown): finish the requests in "
		"flight, flush the files (fdatasync), remove the sockets and exit 0. SIGHUP: "
		"read the --config file again and apply what changed (LUNs added, removed, "
		"replaced; the trace spec), or log why not and change nothing."},
    {"Exit status",
     "  0  stopped by SIGINT, SIGTERM or shutdown, everything flushed\n"
     "  1  failed while serving: a worker or a flush given up on, a flush that failed, the\n"
     "     socket failing\n"
     "  2  a mistake in the command line: an unknown option, a malformed LUN spec (its\n"
     "     backend, options, size, or a size that is not whole blocks), a test-only option\n"
     "     without --testing, --rpc naming the --socket path, a --config file that is not\n"
     "     valid (its path, line and column are named) or given with other options\n"
     "  3  could not start: an image missing or in use, a socket path taken, more RAM\n"
     "     than the machine has, a Ceph cluster out of reach, a --lun-root that is not\n"
     "     there, a --config file that cannot be read"},
    {"Examples",
     "  vioscope target --socket /tmp/vs.sock --lun 0:file=disk.img --lun 1:ram=1G --queues 2\n"
     "  vioscope target --socket /run/vs.sock --lun 0:rbd=rbd/vm1 --rpc /run/vs-rpc.sock"},
    {0},
};

static const struct vs_cli_help target_help = {
    .name = "target",
    .summary = "vhost-user-scsi target (device) for QEMU's vhost-user-scsi-pci",
    .synopsis = "--socket PATH --lun N:BACKEND [--lun N:BACKEND ...] [--queues N]\n"
		" [--block-size 512|4096] [--workers N] [--poll | --adaptive-poll US]\n"
		" [--worker-timeout S] [--rpc PATH [--rpc-allow USERS]] [--lun-root DIR]\n"
		" [--qos N:LIMITS ...] [--testing]\n"
		"--config FILE [--config-autosave]",
    .text = "A vhost-user back-end for QEMU's vhost-user-scsi-pci: the guest's own virtio_scsi "
	    "driver sees one SCSI target with up to 256 LUNs, each on an image file, a block "
	    "device, a Ceph RBD image, memory or nothing (null). One frontend at a time; when "
	    "it goes, the queues stop after their requests in flight, the files are flushed and "
	    "the next connection is served. docs/TARGET.md has the details.",
    .opts = target_opts,
    .sections = target_sections,
};
VS_CLI_HELP(target_help);

/* Whether two socket paths name one file (neither need exist yet): the directories each
 * resolves to, and the names in them. */
static bool same_path(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
	char da[PATH_MAX], db[PATH_MAX], ra[PATH_MAX], rb[PATH_MAX];

	if (strcmp(sa ? sa + 1 : a, sb ? sb + 1 : b))
		return false;
	snprintf(da, sizeof(da), "%.*s", sa ? (int)(sa - a) + 1 : 1, sa ? a : ".");
	snprintf(db, sizeof(db), "%.*s", sb ? (int)(sb - b) + 1 : 1, sb ? b : ".");
	if (!realpath(da, ra) || !realpath(db, rb))
		return !strcmp(a, b);
	return !strcmp(ra, rb);
}

/* "N:BACKEND" into l (the backend is checked with the others, vs_target_lun_check): 0, or
 * VS_EXIT_USAGE after saying why. */
static int parse_lun(const char *arg, struct vs_target_lun *l, const struct vs_target_lun *luns,
		     unsigned nluns)
{
	const char *colon = strchr(arg, ':');
	char num[16];
	uint64_t id;

	if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof(num))
		return vs_cli_usage_error(
		    &target_help, "--lun '%s': expected N:BACKEND (e.g. 0:file=disk.img)", arg);
	memcpy(num, arg, (size_t)(colon - arg));
	num[colon - arg] = 0;
	if (vs_parse_u64(num, 0, VS_TARGET_MAX_LUNS - 1, &id))
		return vs_cli_usage_error(&target_help, "--lun '%s': LUN number '%s' is not 0..%u",
					  arg, num, VS_TARGET_MAX_LUNS - 1);
	if (!colon[1])
		return vs_cli_usage_error(&target_help, "--lun '%s': no backend after the colon",
					  arg);
	for (unsigned i = 0; i < nluns; i++)
		if (luns[i].id == (unsigned)id)
			return vs_cli_usage_error(&target_help,
						  "LUN %u given twice ('%s' and '%s')",
						  (unsigned)id, luns[i].spec, colon + 1);
	l->id = (unsigned)id;
	l->spec = colon + 1;
	return 0;
}

/* The slot of --qos all:LIMITS (the controller's) after the LUNs' in a controller's arrays. */
#define QOS_ALL VS_TARGET_MAX_LUNS

/* "N:LIMITS" into qos[N], "all:LIMITS" into qos[QOS_ALL] (given[] set): 0, or
 * VS_EXIT_USAGE after saying why. */
static int parse_qos(const char *arg, struct vs_target_qos *qos, bool *given)
{
	const char *colon = strchr(arg, ':');
	char num[16], err[512];
	uint64_t id;

	if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof(num))
		return vs_cli_usage_error(
		    &target_help, "--qos '%s': expected N:LIMITS (e.g. 0:iops=1000,bps=50M)", arg);
	memcpy(num, arg, (size_t)(colon - arg));
	num[colon - arg] = 0;
	if (!strcmp(num, "all"))
		id = QOS_ALL;
	else if (vs_parse_u64(num, 0, VS_TARGET_MAX_LUNS - 1, &id))
		return vs_cli_usage_error(&target_help,
					  "--qos '%s': '%s' is not a LUN number 0..%u or all", arg,
					  num, VS_TARGET_MAX_LUNS - 1);
	if (given[id])
		return id == QOS_ALL ? vs_cli_usage_error(&target_help,
							  "--qos: all given twice for a controller")
				     : vs_cli_usage_error(&target_help, "--qos: LUN %u given twice",
							  (unsigned)id);
	if (vs_target_qos_parse(colon + 1, &qos[id], err, sizeof(err)))
		return vs_cli_usage_error(&target_help, "--qos '%s': %s", arg, err);
	given[id] = true;
	return 0;
}

/* A controller of the command line: its options, then its LUNs and their limits. */
struct cli_ctrl {
	struct vs_target_controller cc;
	char name[VS_TARGET_NAME_MAX + 1];
	char socket[108];
	struct vs_target_lun luns[VS_TARGET_MAX_LUNS];
	struct vs_target_qos qos[VS_TARGET_MAX_LUNS + 1]; /* + QOS_ALL */
	bool qos_given[VS_TARGET_MAX_LUNS + 1];
};

/* "NAME:socket=PATH[,queues=N]" into x: 0, or VS_EXIT_USAGE after saying why. */
static int parse_controller(const char *arg, struct cli_ctrl *x)
{
	const char *colon = strchr(arg, ':');
	char opts[256], *save = NULL;
	uint64_t v;

	if (!colon || colon == arg || (size_t)(colon - arg) > VS_TARGET_NAME_MAX)
		return vs_cli_usage_error(&target_help,
					  "--controller '%s': expected NAME:socket=PATH[,queues=N] "
					  "(e.g. vm1:socket=/run/vm1.sock)",
					  arg);
	memcpy(x->name, arg, (size_t)(colon - arg));
	x->name[colon - arg] = 0;
	if (strlen(colon + 1) >= sizeof(opts))
		return vs_cli_usage_error(&target_help, "--controller '%s': too long", arg);
	snprintf(opts, sizeof(opts), "%s", colon + 1);
	x->cc.num_queues = 1;
	for (char *o = strtok_r(opts, ",", &save); o; o = strtok_r(NULL, ",", &save)) {
		if (!strncmp(o, "socket=", 7) && o[7] && strlen(o + 7) < sizeof(x->socket)) {
			snprintf(x->socket, sizeof(x->socket), "%s", o + 7);
		} else if (!strncmp(o, "queues=", 7) &&
			   !vs_parse_u64(o + 7, 1, VS_TARGET_MAX_QUEUES, &v)) {
			x->cc.num_queues = (unsigned)v;
		} else {
			return vs_cli_usage_error(&target_help,
						  "--controller '%s': '%s' is not socket=PATH (at "
						  "most 107 bytes) or queues=1..%u",
						  arg, o, VS_TARGET_MAX_QUEUES);
		}
	}
	if (!x->socket[0])
		return vs_cli_usage_error(&target_help, "--controller '%s': no socket=PATH", arg);
	x->cc.name = x->name;
	x->cc.socket_path = x->socket;
	x->cc.luns = x->luns;
	return 0;
}

/* "root,qemu,1000" into uids: 0, or VS_EXIT_USAGE after saying why. */
static int parse_users(const char *list, uint32_t *uids, unsigned *n)
{
	char copy[1024], *save = NULL;

	if (strlen(list) >= sizeof(copy))
		return vs_cli_usage_error(&target_help, "--rpc-allow: the list is too long");
	snprintf(copy, sizeof(copy), "%s", list);
	for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
		struct passwd pw, *found = NULL;
		char buf[4096];
		uint64_t v;

		if (*n >= VS_RPC_MAX_ALLOW)
			return vs_cli_usage_error(&target_help, "--rpc-allow: at most %u users",
						  VS_RPC_MAX_ALLOW);
		if (vs_parse_u64(w, 0, UINT32_MAX - 1, &v) == 0) {
			uids[(*n)++] = (uint32_t)v;
			continue;
		}
		if (getpwnam_r(w, &pw, buf, sizeof(buf), &found) || !found)
			return vs_cli_usage_error(&target_help, "--rpc-allow: no user '%s'", w);
		uids[(*n)++] = (uint32_t)found->pw_uid;
	}
	if (!*n)
		return vs_cli_usage_error(&target_help, "--rpc-allow: no user given");
	return 0;
}

static const char *opt_name(int key)
{
	for (const struct vs_cli_opt *o = target_opts; o->name; o++)
		if (o->key == key)
			return o->name;
	return "?";
}

/* What --config and --config-autosave say. */
struct config_opts {
	const char *path; /* NULL: the command line holds the settings */
	bool autosave;
	int setting; /* the first option that is a setting (with --config, refused) */
};

/* The options into cfg (and the management socket's): 0, or the exit status after saying
 * why (--help and --version: 0 after printing, with *done set). */
/* A controller's --qos onto its --lun entries (its all:LIMITS onto *all), and what its
 * specs say alone checked (a typo is the command line's): 0, or VS_EXIT_USAGE after saying
 * why. */
static int finish_luns(const struct vs_target_config *cfg, const char *ctrl,
		       struct vs_target_lun *luns, unsigned nluns, struct vs_target_qos *qos,
		       bool *qos_given, const struct vs_target_qos **all)
{
	*all = qos_given[QOS_ALL] ? &qos[QOS_ALL] : NULL;
	for (unsigned i = 0; i < nluns; i++)
		if (qos_given[luns[i].id]) {
			luns[i].qos = &qos[luns[i].id];
			qos_given[luns[i].id] = false;
		}
	for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++)
		if (qos_given[id])
			return vs_cli_usage_error(
			    &target_help, "--qos for LUN %u, which no --lun %s%s%sgives", id,
			    ctrl ? "of controller " : "", ctrl ? ctrl : "", ctrl ? " " : "");
	for (unsigned i = 0; i < nluns; i++) {
		char err[512];

		if (vs_target_lun_check(cfg, &luns[i], err, sizeof(err)))
			return vs_cli_usage_error(&target_help, "%s%s%s", ctrl ? "controller " : "",
						  ctrl ? ctrl : "", err);
	}
	return 0;
}

/* The --controller options (controllers[0..n-1]); freed at exit. */
static struct cli_ctrl *cli_ctrls[VS_TARGET_MAX_CONTROLLERS];
static struct vs_target_controller cli_ccs[VS_TARGET_MAX_CONTROLLERS];

static int parse_options(int argc, char **argv, struct vs_target_config *cfg,
			 struct vs_target_lun *luns, const char **rpc_path, const char **rpc_allow,
			 struct config_opts *conf, bool *done)
{
	static struct vs_target_qos qos[VS_TARGET_MAX_LUNS + 1]; /* + QOS_ALL */
	static bool qos_given[VS_TARGET_MAX_LUNS + 1];
	/* where --lun and --qos go: --socket's controller, or the last --controller */
	struct vs_target_lun *cur_luns = luns;
	unsigned *cur_n = &cfg->nluns, nctrl = 0;
	struct vs_target_qos *cur_qos = qos;
	bool *cur_given = qos_given;
	struct vs_cli_args a;
	double secs;
	uint64_t v;
	int c, rc;

	vs_cli_begin(&a, &target_help, argc, argv);
	while ((c = vs_cli_next(&a)) != VS_CLI_END) {
		if (c >= OPT_SOCKET && c <= OPT_TESTING && !conf->setting)
			conf->setting = c;
		switch (c) {
		case VS_CLI_EXIT:
			*done = true;
			return a.status;
		case OPT_CONFIG:
			conf->path = a.value;
			break;
		case OPT_CONFIG_AUTOSAVE:
			conf->autosave = true;
			break;
		case OPT_SOCKET:
			cfg->socket_path = a.value;
			break;
		case OPT_LUN:
			if (*cur_n >= VS_TARGET_MAX_LUNS)
				return vs_cli_usage_error(&target_help, "more than %u LUNs",
							  VS_TARGET_MAX_LUNS);
			if ((rc = parse_lun(a.value, &cur_luns[*cur_n], cur_luns, *cur_n)))
				return rc;
			(*cur_n)++;
			break;
		case OPT_CONTROLLER:
			if (nctrl >= VS_TARGET_MAX_CONTROLLERS)
				return vs_cli_usage_error(&target_help, "more than %u controllers",
							  VS_TARGET_MAX_CONTROLLERS);
			if (!(cli_ctrls[nctrl] = calloc(1, sizeof(*cli_ctrls[nctrl]))))
				return vs_cli_error(&target_help, VS_EXIT_CANNOT_RUN,
						    "out of memory");
			if ((rc = parse_controller(a.value, cli_ctrls[nctrl])))
				return rc;
			for (unsigned i = 0; i < nctrl; i++)
				if (!strcmp(cli_ctrls[i]->name, cli_ctrls[nctrl]->name) ||
				    same_path(cli_ctrls[i]->socket, cli_ctrls[nctrl]->socket))
					return vs_cli_usage_error(
					    &target_help, "--controller '%s': %s given twice",
					    a.value,
					    strcmp(cli_ctrls[i]->name, cli_ctrls[nctrl]->name)
						? "its socket"
						: "its name");
			cur_luns = cli_ctrls[nctrl]->luns;
			cur_n = &cli_ctrls[nctrl]->cc.nluns;
			cur_qos = cli_ctrls[nctrl]->qos;
			cur_given = cli_ctrls[nctrl]->qos_given;
			nctrl++;
			break;
		case OPT_QUEUES:
			if (vs_cli_uint("vioscope target", "queues", a.value, 1,
					VS_TARGET_MAX_QUEUES, &v))
				return VS_EXIT_USAGE;
			cfg->num_queues = (unsigned)v;
			break;
		case OPT_BLOCK_SIZE:
			if (vs_parse_u64(a.value, 512, 4096, &v) || (v != 512 && v != 4096))
				return vs_cli_usage_error(
				    &target_help, "--block-size '%s': 512 or 4096", a.value);
			cfg->block_size = (uint32_t)v;
			break;
		case OPT_WORKERS:
			if (vs_cli_uint("vioscope target", "workers", a.value, 1,
					VS_TARGET_MAX_WORKERS, &v))
				return VS_EXIT_USAGE;
			cfg->workers = (unsigned)v;
			break;
		case OPT_POLL:
			cfg->poll = true;
			break;
		case OPT_ADAPTIVE_POLL:
			if (vs_cli_uint("vioscope target", "adaptive-poll", a.value, 0,
					VS_TARGET_ADAPTIVE_POLL_MAX, &v))
				return VS_EXIT_USAGE;
			cfg->adaptive_poll_us = v ? (unsigned)v : VS_TARGET_ADAPTIVE_POLL_OFF;
			break;
		case OPT_WORKER_TIMEOUT:
			if (vs_cli_seconds("vioscope target", "worker-timeout", a.value, 0.1, 3600,
					   &secs))
				return VS_EXIT_USAGE;
			cfg->worker_timeout_ms = (unsigned)(secs * 1000);
			break;
		case OPT_RPC:
			*rpc_path = a.value;
			break;
		case OPT_RPC_ALLOW:
			*rpc_allow = a.value;
			break;
		case OPT_LUN_ROOT:
			cfg->lun_root = a.value;
			break;
		case OPT_TESTING:
			cfg->testing = true;
			break;
		case OPT_QOS:
			if ((rc = parse_qos(a.value, cur_qos, cur_given)))
				return rc;
			break;
		}
	}
	if (a.next < argc)
		return vs_cli_usage_error(&target_help, "unexpected argument '%s' (see --help)",
					  argv[a.next]);
	/* One source for each setting: the file is what save_config writes back, and a
	 * command-line value beside it would be lost there or fight it at a reload. */
	if (conf->path && conf->setting)
		return vs_cli_usage_error(&target_help,
					  "--%s with --config: with a configuration file every "
					  "setting is the file's",
					  opt_name(conf->setting));
	if (conf->autosave && !conf->path)
		return vs_cli_usage_error(&target_help, "--config-autosave without --config");
	if (conf->path) {
		if (nctrl)
			return vs_cli_usage_error(
			    &target_help, "--controller with --config: with a configuration "
					  "file every setting is the file's");
		return 0;
	}
	if ((!cfg->socket_path || !*cfg->socket_path) && !nctrl)
		return vs_cli_usage_error(&target_help,
					  "--socket PATH (or a --controller) is required");
	if (cfg->socket_path && !cfg->nluns)
		return vs_cli_usage_error(&target_help, "at least one --lun N:BACKEND is required");
	if (!cfg->socket_path && cfg->nluns)
		return vs_cli_usage_error(&target_help,
					  "--lun before any --controller, and no --socket for it");
	if ((rc = finish_luns(cfg, NULL, luns, cfg->nluns, qos, qos_given, &cfg->qos)))
		return rc;
	for (unsigned i = 0; i < nctrl; i++) {
		struct cli_ctrl *x = cli_ctrls[i];

		if (!x->cc.nluns)
			return vs_cli_usage_error(
			    &target_help,
			    "controller %s: at least one --lun N:BACKEND after "
			    "its --controller",
			    x->name);
		if (cfg->socket_path && same_path(cfg->socket_path, x->socket))
			return vs_cli_usage_error(&target_help,
						  "controller %s: the --socket path %s is taken",
						  x->name, x->socket);
		if (!strcmp(x->name, VS_TARGET_DEFAULT_CONTROLLER) && cfg->socket_path)
			return vs_cli_usage_error(
			    &target_help, "controller %s: the name of --socket's controller",
			    x->name);
		if ((rc = finish_luns(cfg, x->name, x->luns, x->cc.nluns, x->qos, x->qos_given,
				      &x->cc.qos)))
			return rc;
		cli_ccs[i] = x->cc;
	}
	cfg->controllers = cli_ccs;
	cfg->ncontrollers = nctrl;
	if (*rpc_allow && !*rpc_path)
		return vs_cli_usage_error(&target_help, "--rpc-allow without --rpc");
	/* Else the management socket would find the target's own listening there. */
	for (unsigned i = 0; *rpc_path && i <= nctrl; i++) {
		const char *sock = i < nctrl ? cli_ctrls[i]->socket : cfg->socket_path;

		if (sock && same_path(*rpc_path, sock))
			return vs_cli_usage_error(
			    &target_help,
			    "--rpc %s names %s%s%s path: the management "
			    "socket needs a path of its own",
			    *rpc_path, i < nctrl ? "controller " : "the --socket",
			    i < nctrl ? cli_ctrls[i]->name : "", i < nctrl ? "'s socket" : "");
	}
	return 0;
}

/* "listening on PATH (N LUNs, Q request queues)" for each controller, --socket's first. */
static void listening(const struct vs_target_config *cfg, char *buf, size_t len)
{
	size_t n = 0;

	*buf = 0;
	for (unsigned i = 0; i <= cfg->ncontrollers && n < len; i++) {
		const struct vs_target_controller *cc = i ? &cfg->controllers[i - 1] : NULL;
		const char *sock = cc ? cc->socket_path : cfg->socket_path;
		unsigned luns = cc ? cc->nluns : cfg->nluns,
			 q = cc ? cc->num_queues : cfg->num_queues;

		if (!sock)
			continue;
		n += (size_t)snprintf(
		    buf + n, len - n, "%s%s%s%slistening on %s (%u LUN%s, %u request queue%s)",
		    n ? "; " : "", cc ? "controller " : "", cc ? cc->name : "", cc ? " " : "", sock,
		    luns, luns == 1 ? "" : "s", q, q == 1 ? "" : "s");
	}
}

static void notify_ready(const struct vs_target_config *cfg, const char *rpc_path)
{
	char state[8192], what[7168];
	int rc;

	listening(cfg, what, sizeof(what));
	snprintf(state, sizeof(state), "READY=1\nSTATUS=%s%s%s", what,
		 rpc_path ? "; management socket " : "", rpc_path ? rpc_path : "");
	if ((rc = cli_sd_notify(state)))
		fprintf(stderr,
			"vioscope target: cannot tell systemd it is ready ($NOTIFY_SOCKET): "
			"%s\n",
			strerror(-rc));
}

/* The settings from the --config file into cfg and the management socket's: 0, or the
 * exit status after saying why (what the file says: 2; a file that cannot be read: 3). */
static int load_config(const char *path, struct vs_config *conf, struct vs_target_config *cfg,
		       const char **rpc_path, uint32_t *allow, unsigned *nallow)
{
	char err[1024];
	int rc = vs_config_load(path, conf, err, sizeof(err));

	if (rc)
		return vs_cli_error(&target_help,
				    rc == -EINVAL ? VS_EXIT_USAGE : VS_EXIT_CANNOT_RUN,
				    "--config %s", err);
	vs_config_target(conf, cfg);
	cfg->log = log_line;
	*rpc_path = conf->rpc[0] ? conf->rpc : NULL;
	for (unsigned k = 0; *rpc_path && k < conf->nctrls; k++)
		if (same_path(*rpc_path, conf->ctrls[k].socket))
			return vs_cli_usage_error(
			    &target_help,
			    "--config %s: rpc %s names controller %s's socket: "
			    "the management socket needs a path of its own",
			    path, *rpc_path, conf->ctrls[k].name);
	for (unsigned i = 0; i < conf->nallow; i++)
		allow[(*nallow)++] = conf->allow_uids[i];
	/* Applied as the check: a refused spec changes nothing (vs_trace_set_spec_why). */
	if (conf->trace[0] && vs_trace_set_spec_why(conf->trace, err, sizeof(err)) < 0)
		return vs_cli_usage_error(&target_help, "--config %s: trace '%s': %s", path,
					  conf->trace, err);
	return 0;
}

/* SIGHUP: the --config file again, systemd told (RELOADING=1, then READY=1). */
static void reload(struct vs_config_live *live, const struct vs_target_config *cfg,
		   const char *rpc_path)
{
	struct timespec ts;
	char state[128];

	if (!live) {
		fprintf(stderr, "vioscope target: SIGHUP: started without --config, nothing to "
				"reload\n");
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(state, sizeof(state), "RELOADING=1\nMONOTONIC_USEC=%llu",
		 (unsigned long long)ts.tv_sec * 1000000ull +
		     (unsigned long long)ts.tv_nsec / 1000);
	cli_sd_notify(state);
	vs_config_live_reload(live); /* each step, or why nothing changed, is logged */
	notify_ready(cfg, rpc_path);
}

/* Serve until a stop is asked for, reloading the configuration on each SIGHUP. */
static int serve(struct vs_config_live *live, const struct vs_target_config *cfg,
		 const char *rpc_path)
{
	for (;;) {
		int rc = 0;

		/* Cleared before the flags are looked at: a signal after this stops the next
		 * vs_target_run at once. */
		serving_paused = 0;
		if (!stop_requested && !reload_requested)
			rc = vs_target_run(running, &serving_paused);
		if (rc || stop_requested)
			return rc;
		if (reload_requested) {
			reload_requested = 0;
			reload(live, cfg, rpc_path);
		}
	}
}

static int cmd_target(int argc, char **argv)
{
	static struct vs_target_lun luns[VS_TARGET_MAX_LUNS];
	static struct vs_config conf_file;
	static struct vs_config_live live;
	struct vs_target_config cfg = {
	    .num_queues = 1, .block_size = 512, .luns = luns, .log = log_line};
	struct config_opts conf = {0};
	struct sigaction sa;
	const char *rpc_path = NULL, *rpc_allow = NULL;
	uint32_t allow[VS_RPC_MAX_ALLOW];
	unsigned nallow = 0;
	struct vs_rpc *rpc = NULL;
	bool done = false, has_live = false;
	char err[512];
	int rc;

	rc = parse_options(argc, argv, &cfg, luns, &rpc_path, &rpc_allow, &conf, &done);
	if (rc || done)
		return rc;
	if (conf.path && (rc = load_config(conf.path, &conf_file, &cfg, &rpc_path, allow, &nallow)))
		return rc;
	if (rpc_path) {
		if (rpc_allow && (rc = parse_users(rpc_allow, allow, &nallow)))
			return rc;
		if (!nallow) { /* the default: root and our own uid */
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
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* A file-size limit (RLIMIT_FSIZE) fails the write that passes it (EFBIG: a save of
	 * the configuration, a write log) instead of killing the target and its guest's disk. */
	signal(SIGXFSZ, SIG_IGN);

	{
		struct vs_target *t;
		rc = vs_target_create(&t, &cfg, err, sizeof(err));
		if (rc) /* what the command line says was checked: the world refused */
			return vs_cli_error(&target_help, VS_EXIT_CANNOT_RUN, "%s", err);
		running = t;
	}
	if (conf.path) {
		if (vs_config_live_init(&live, &conf_file, conf.path, conf.autosave, running,
					log_line, NULL)) {
			struct vs_target *t = running;

			running = NULL;
			vs_target_destroy(t);
			return vs_cli_error(&target_help, VS_EXIT_USAGE,
					    "--config %s: path too long", conf.path);
		}
		has_live = true;
	}
	if (rpc_path) {
		struct vs_rpc_config rc_cfg = {.path = rpc_path,
					       .target = running,
					       .shutdown = rpc_shutdown,
					       .log = log_line,
					       .allow_uids = allow,
					       .nallow_uids = nallow,
					       .live = has_live ? &live : NULL};

		if (vs_rpc_start(&rpc, &rc_cfg, err, sizeof(err))) {
			struct vs_target *t = running;

			running = NULL; /* no signal may wake a target being torn down */
			vs_target_destroy(t);
			return vs_cli_error(&target_help, VS_EXIT_CANNOT_RUN, "--rpc: %s", err);
		}
	}
	{
		char what[7168];

		listening(&cfg, what, sizeof(what));
		fprintf(stderr, "vioscope target: %s, %s mode%s%s\n", what,
			cfg.poll ? "poll" : "event", rpc_path ? "; management socket " : "",
			rpc_path ? rpc_path : "");
	}
	notify_ready(&cfg, rpc_path);
	rc = serve(has_live ? &live : NULL, &cfg, rpc_path);
	cli_sd_notify("STOPPING=1\nSTATUS=stopping: finishing requests, flushing");
	if (rc)
		fprintf(stderr, "vioscope target: serving failed: %s\n", strerror(-rc));
	else
		fprintf(stderr, "vioscope target: stopping\n");
	{
		struct vs_target *t = running;
		struct vs_target_stats st;
		sigset_t block;

		vs_rpc_stop(rpc); /* no method may reach a target being torn down */
		if (has_live)
			vs_config_live_fini(&live);
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
		sigaddset(&block, SIGHUP);
		sigprocmask(SIG_BLOCK, &block, NULL);
		running = NULL;
		int frc = vs_target_destroy(t);
		if (frc == -ETIMEDOUT) {
			fprintf(stderr, "vioscope target: a worker or a flush was given up on (see "
					"above); the backends that answered were flushed\n");
			return VS_EXIT_FAILED;
		}
		if (frc) {
			fprintf(stderr, "vioscope target: flushing the backends failed: %s\n",
				strerror(-frc));
			return VS_EXIT_FAILED;
		}
	}
	return rc ? VS_EXIT_FAILED : VS_EXIT_OK;
}

VS_CLI_COMMAND(target, 4, "target", cmd_target, "vhost-user-scsi target (device)");
