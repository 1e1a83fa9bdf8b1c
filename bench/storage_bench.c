/* SPDX-License-Identifier: MIT */
/*
 * `vioscope bench`: CrystalDiskMark-style profiles through the user-space
 * initiator against a vhost-user-scsi target (one given by --socket, or one it
 * starts itself), and `--flavours`: the same profiles for each trace build
 * flavour, interleaved in rounds, printed as the seed driver's table.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "bench/storage.h"
#include "bench/table.h"
#include "bench/trace_bench.h"
#include "tracetools/tracetools.h"
#include "util/util.h"

#define MAX_PROFILES 16

static const char *const default_profiles[] = {"seq1m-q8t1", "seq1m-q1t1", "rnd4k-q32t16",
					       "rnd4k-q1t1"};
/* The seed driver's table: a sequential and a random column (--profile twice overrides). */
static const char *flavour_profiles[2] = {"seq1m-q8t1", "rnd4k-q32t16"};

static void usage(FILE *f)
{
	fputs("usage: vioscope bench [--socket PATH | --target SPEC] [--profile P]...\n"
	      "                      [--rw read|write] [--time S] [--queues N]\n"
	      "                      [--interrupt | --initiator-poll] [--poll] [--fio] [--json]\n"
	      "                      [--no-progress] [--record DIR]\n"
	      "                      [--adaptive-poll US] [--idle S]\n"
	      "       vioscope bench --flavours [--rounds N] [--time S] [--target ...] [--json]\n"
	      "                      [--svg FILE]\n"
	      "       vioscope bench trace ...   (cost of one trace event: `bench trace --help`)\n"
	      "profiles: seq1m-q8t1 seq1m-q1t1 rnd4k-q32t16 rnd4k-q1t1, or any seqNm-qQtT /\n"
	      "rndNk-qQtT (T threads, Q requests in flight each).  Without --socket a target\n"
	      "of this binary's flavour is started on a default 1 GiB image.  --fio adds the\n"
	      "same profiles run by fio on the same storage: the raw limit (io_uring on a\n"
	      "file=IMG, fio's rbd engine on an rbd=POOL/IMAGE[,conf=PATH]).  --poll:\n"
	      "the embedded target busy-polls its queues.  --adaptive-poll US: the embedded\n"
	      "target's (event mode).  The initiator polls for completions, except (said\n"
	      "before each profile) with --interrupt, for an rbd= target (its completions\n"
	      "are 100s of us apart: a polling initiator would spin a CPU the backend needs;\n"
	      "fio's rbd engine sleeps too) and when a profile has as many threads as there\n"
	      "are CPUs; --initiator-poll makes it poll in every case.  Each run prints the\n"
	      "CPU time per request of the initiator, the embedded target and fio.\n"
	      "--idle S: after each profile stay connected S seconds with nothing in flight\n"
	      "and print the share of a CPU the embedded target used meanwhile.\n"
	      "--flavours: every flavour once per round, interleaved; cells are medians\n"
	      "+-half the range over the rounds, ratios the median of per-round ratios to\n"
	      "off, marked ~ when within the noise (the ratio's 90% interval holds 1.0) or\n"
	      "? below 5 rounds; --svg FILE also draws the table as bars with their spread.\n",
	      f);
}

/* Wait (5 s at most) until recorder r streams pid's trace: its pid in the trace file's
 * header, which it sets once it has attached.  False (said why) if it exited or is late. */
static bool wait_attached(pid_t r, int pid, const char *what)
{
	char p[32], why[256] = "";
	snprintf(p, sizeof p, "%d", pid);
	uint64_t deadline = vs_mono_ns() + 5000000000ull;
	while (vs_mono_ns() < deadline) {
		int st;
		if (waitpid(r, &st, WNOHANG) == r) {
			fprintf(stderr, "bench: the recorder of the %s (pid %d) exited at start\n",
				what, pid);
			return false;
		}
		struct vs_shm s;
		if (vs_shm_open(&s, p, why, sizeof why) == 0) {
			bool on = __atomic_load_n(&s.hdr->recorder_pid, __ATOMIC_RELAXED) == r;
			vs_shm_close(&s);
			if (on)
				return true;
		}
		usleep(1000); /* polling a condition, with the deadline above */
	}
	fprintf(stderr, "bench: the recorder of the %s (pid %d) did not attach in 5 s%s%s\n", what,
		pid, *why ? ": " : "", why);
	kill(r, SIGTERM);
	waitpid(r, NULL, 0);
	return false;
}

/* Start recorders for pid (and its target) when --record is given: the recorder's pid
 * once it streams, or -1 (said why). */
static pid_t start_recorder(const char *exe, int pid, const char *dir, const char *what)
{
	char out[PATH_MAX], p[32];
	snprintf(out, sizeof out, "%s/%s-%d.vst", dir, what, pid);
	snprintf(p, sizeof p, "%d", pid);
	pid_t r = fork();
	if (r == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the benchmark */
		int null = open("/dev/null", O_WRONLY);
		if (null >= 0)
			dup2(null, 2); /* its summary line; losses are counted from the capture */
		execl(exe, exe, "trace", "record", p, "-o", out, (char *)NULL);
		_exit(127);
	}
	return wait_attached(r, pid, what) ? r : -1;
}

/* Stop a recorder and add what its capture says was lost to *lost; -1 (said why) when
 * it left no capture, so that "nothing lost" is never said of a recording not made. */
static int stop_recorder(pid_t r, const char *dir, const char *what, int pid, uint64_t *lost_out)
{
	char out[PATH_MAX], cmd[2 * PATH_MAX + 64];
	struct stat sb;
	int st;
	kill(r, SIGINT);
	waitpid(r, &st, 0);
	snprintf(out, sizeof out, "%s/%s-%d.vst", dir, what, pid);
	if (stat(out, &sb) < 0 || sb.st_size == 0) {
		fprintf(stderr, "bench: recording the %s (pid %d) made no capture %s\n", what, pid,
			out);
		return -1;
	}
	/* Count what was lost from the capture itself: the decoder reports every loss. */
	char self[PATH_MAX];
	vs_self_exe(self, sizeof self);
	snprintf(cmd, sizeof cmd, "'%s' trace decode --json '%s' | grep '\"type\":\"loss\"'", self,
		 out);
	FILE *f = popen(cmd, "r");
	char line[512];
	uint64_t lost = 0;
	while (f && fgets(line, sizeof line, f))
		lost += (uint64_t)bench_json_number(line, "count", 0);
	if (f)
		pclose(f);
	*lost_out += lost;
	return 0;
}

static int run_profiles(struct bench_opts *o, char **profiles, int nprof, bool fio,
			const char *record_dir)
{
	char why[512] = "", exe[PATH_MAX], sockdir[] = "/tmp/vioscope-bench-XXXXXX";
	static char sock[PATH_MAX], spec[1024]; /* o->socket and o->target_spec point here */
	int tpid = -1, rc = 0;
	pid_t rec_self = -1, rec_target = -1;

	vs_self_exe(exe, sizeof exe);
	if (record_dir && mkdir(record_dir, 0700) < 0 && errno != EEXIST) {
		fprintf(stderr, "bench: --record %s: %s\n", record_dir, strerror(errno));
		return 1;
	}
	if (!o->socket) {
		if (!o->target_spec) {
			if (bench_default_image(spec, sizeof spec, why, sizeof why) < 0) {
				fprintf(stderr, "bench: %s\n", why);
				return 1;
			}
			o->target_spec = spec;
		}
		if (!mkdtemp(sockdir)) {
			fprintf(stderr, "bench: mkdtemp: %s\n", strerror(errno));
			return 1;
		}
		snprintf(sock, sizeof sock, "%s/target.sock", sockdir);
		unsigned q = o->queues ? o->queues : 16;
		if (bench_target_start(exe, o->target_spec, q, o, sock, &tpid, why, sizeof why) <
		    0) {
			fprintf(stderr, "bench: %s\n", why);
			rmdir(sockdir);
			return 1;
		}
		o->socket = sock;
		o->target_pid = tpid;
	}
	if (record_dir) {
		rec_self = start_recorder(exe, getpid(), record_dir, "initiator");
		if (tpid > 0)
			rec_target = start_recorder(exe, tpid, record_dir, "target");
	}
	struct bench_result res[2 * MAX_PROFILES];
	int nres = 0;
	if (!o->json) {
		fprintf(stderr, "vioscope bench (%s flavour) against %s%s%s, %.1f s per profile\n",
			vs_trace_flavour(), o->socket, o->target_spec ? " = " : "",
			o->target_spec ? o->target_spec : "", o->seconds);
		bench_result_print_header(stdout);
	}
	if (record_dir && (rec_self < 0 || (tpid > 0 && rec_target < 0)))
		rc = 1; /* said why; no run whose recording would be incomplete */
	for (int i = 0; i < nprof && rc == 0; i++) {
		struct bench_profile p;
		bench_profile_parse(profiles[i], &p, why, sizeof why);
		why[0] = '\0';
		if (!o->json) {
			const char *mode_why;
			bool intr = bench_initiator_interrupt(o, &p, &mode_why);
			fprintf(stderr, "%s: the initiator %s (%s)\n", p.name,
				intr ? "takes completions by interrupt" : "polls", mode_why);
		}
		if (bench_run_initiator(o, &p, &res[nres], why, sizeof why) < 0) {
			fprintf(stderr, "bench: %s: %s\n", p.name, why);
			rc = 1;
			break;
		}
		if (!o->json)
			bench_result_print(stdout, &res[nres]);
		nres++;
	}
	uint64_t lost = 0;
	bool rec_failed = false;
	if (rec_self > 0 && stop_recorder(rec_self, record_dir, "initiator", getpid(), &lost) < 0)
		rec_failed = true;
	if (rec_target > 0 && stop_recorder(rec_target, record_dir, "target", tpid, &lost) < 0)
		rec_failed = true;
	if (rec_failed)
		rc = 1;
	if (tpid > 0 && bench_target_stop(tpid) < 0) {
		fprintf(stderr, "bench: the target did not exit cleanly\n");
		rc = 1;
	}
	if (tpid > 0) {
		unlink(sock);
		rmdir(sockdir);
	}
	/* The raw limit: fio on the very file or RBD image the target served. */
	bool fio_spec = o->target_spec && (!strncmp(o->target_spec, "file=", 5) ||
					   !strncmp(o->target_spec, "rbd=", 4));
	for (int i = 0; fio && fio_spec && i < nprof && rc == 0; i++) {
		struct bench_profile p;
		bench_profile_parse(profiles[i], &p, why, sizeof why);
		if (bench_run_fio(o->target_spec, &p, o->write, o->seconds, &res[nres], why,
				  sizeof why) < 0) {
			fprintf(stderr, "bench: fio: %s\n", why);
			rc = 1;
			break;
		}
		snprintf(res[nres].rw, sizeof res[nres].rw, "%s", o->write ? "fio-w" : "fio-r");
		if (!o->json)
			bench_result_print(stdout, &res[nres]);
		nres++;
	}
	if (o->json) {
		printf("{\"flavour\": \"%s\", \"trace_lost\": %llu, \"results\": [",
		       vs_trace_flavour(), (unsigned long long)lost);
		for (int i = 0; i < nres; i++) {
			printf(i ? ",\n  " : "\n  ");
			bench_result_json(stdout, &res[i]);
		}
		printf("\n]}\n");
	} else if (record_dir && lost) {
		printf("trace events lost while recording: %llu\n", (unsigned long long)lost);
	} else if (record_dir && !rec_failed) {
		printf("no trace event lost while recording\n");
	}
	return rc;
}

/* ---- --flavours: the seed driver's table ---------------------------------------------------- */
struct flavour_run {
	const char *label;
	const char *binary; /* next to this one */
	const char *trace;  /* VIOSCOPE_TRACE for the run */
	bool record;
};

static const struct flavour_run flavour_runs[] = {
    {"off", "vioscope-off", NULL, false},
    {"cold", "vioscope", NULL, false},
    {"all (hot off)", "vioscope-all", "info:all", false},
    {"cold-print", "vioscope-cold-print", NULL, false},
    {"all (hot on, recorded)", "vioscope-all", "verbose:all", true},
};
#define NFLAVOURS (sizeof flavour_runs / sizeof flavour_runs[0])

static int run_child(const char *bin, const struct flavour_run *f, const char *target,
		     double seconds, bool poll, const char *dir, char **out)
{
	char cmd[4096], t[32];
	snprintf(t, sizeof t, "%.2f", seconds);
	int n = snprintf(cmd, sizeof cmd,
			 "%s%s%s VIOSCOPE_TRACE_FILE='%s/print.log' '%s' bench "
			 "--json --no-progress --time %s --target '%s'",
			 f->trace ? "VIOSCOPE_TRACE=" : "", f->trace ? f->trace : "",
			 f->trace ? "" : "", dir, bin, t, target);
	if (f->record)
		n += snprintf(cmd + n, sizeof cmd - (size_t)n, " --record '%s'", dir);
	if (poll)
		n += snprintf(cmd + n, sizeof cmd - (size_t)n, " --poll");
	for (size_t i = 0; i < sizeof flavour_profiles / sizeof flavour_profiles[0]; i++)
		n +=
		    snprintf(cmd + n, sizeof cmd - (size_t)n, " --profile %s", flavour_profiles[i]);
	FILE *p = popen(cmd, "r");
	if (!p)
		return -errno;
	size_t cap = 8192, len = 0, k;
	char *buf = malloc(cap);
	while (buf && (k = fread(buf + len, 1, cap - len - 1, p)) > 0)
		len += k;
	int st = pclose(p);
	if (!buf)
		return -ENOMEM;
	buf[len] = '\0';
	*out = buf;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* The table from the rounds: a row per flavour that ran, the reference (`off`) first, then
 * fio's single run. */
static void flavour_table(struct bench_table *t, double v[][BENCH_NCOLS][BENCH_MAX_ROUNDS],
			  bool ran[][BENCH_MAX_ROUNDS], const uint64_t *lost, int rounds,
			  const struct bench_result *fio)
{
	for (int i = 0; i < 2; i++) {
		snprintf(t->title[i], sizeof t->title[i], "%s MiB/s", flavour_profiles[i]);
		for (char *c = t->title[i]; *c && *c != ' '; c++)
			*c = *c == '-' ? ' ' : (char)toupper((unsigned char)*c);
	}
	t->rounds = rounds;
	for (size_t f = 0; f < NFLAVOURS && t->nrows < BENCH_TABLE_ROWS; f++) {
		struct bench_row *row = &t->row[t->nrows];
		double got[BENCH_NCOLS][BENCH_MAX_ROUNDS];
		int n = 0;

		for (int r = 0; r < rounds; r++) {
			if (!ran[f][r])
				continue;
			for (int c = 0; c < BENCH_NCOLS; c++)
				got[c][n] = v[f][c][r];
			n++;
		}
		if (!n)
			continue;
		row->label = flavour_runs[f].label;
		for (int c = 0; c < BENCH_NCOLS; c++)
			bench_stat(got[c], n, &row->cell[c]);
		row->has_ratio = true;
		for (int c = 0; c < 2; c++)
			bench_ratio(v[f][c], v[0][c], ran[f], ran[0], rounds, &row->ratio[c]);
		row->recorded = flavour_runs[f].record;
		row->lost = lost[f];
		t->nrows++;
	}
	if (fio && t->nrows < BENCH_TABLE_ROWS) {
		struct bench_row *row = &t->row[t->nrows++];
		double one[BENCH_NCOLS] = {fio[0].mib_s, fio[1].mib_s, fio[1].iops, fio[1].mean_us};

		row->label = "fio io_uring (1 run)";
		for (int c = 0; c < BENCH_NCOLS; c++)
			bench_stat(&one[c], 1, &row->cell[c]);
	}
}

static int run_flavours(struct bench_opts *o, int rounds, bool json, const char *svg)
{
	char exe[PATH_MAX], dir[PATH_MAX], why[512], spec[1024];
	char tmp[] = "/tmp/vioscope-flavours-XXXXXX";
	vs_self_exe(exe, sizeof exe);
	snprintf(dir, sizeof dir, "%s", exe);
	*strrchr(dir, '/') = '\0';
	if (!o->target_spec) {
		if (bench_default_image(spec, sizeof spec, why, sizeof why) < 0) {
			fprintf(stderr, "bench: %s\n", why);
			return 1;
		}
		o->target_spec = spec;
	}
	if (!mkdtemp(tmp)) {
		fprintf(stderr, "bench: mkdtemp: %s\n", strerror(errno));
		return 1;
	}
	const size_t np = sizeof flavour_profiles / sizeof flavour_profiles[0];
	/* Per flavour, column and round; ran: the flavour's run of that round succeeded. */
	static double v[NFLAVOURS][BENCH_NCOLS][BENCH_MAX_ROUNDS];
	static bool ran[NFLAVOURS][BENCH_MAX_ROUNDS];
	uint64_t lost[NFLAVOURS] = {0};
	int rc = 0;
	if (rounds > BENCH_MAX_ROUNDS)
		rounds = BENCH_MAX_ROUNDS;
	memset(ran, 0, sizeof ran);
	if (!json)
		fprintf(stderr,
			"bench --flavours: %d rounds x %zu flavours x %zu profiles x %.1f s "
			"on %s (interleaved: each round runs every flavour once)\n",
			rounds, NFLAVOURS, np, o->seconds, o->target_spec);
	for (int r = 0; r < rounds; r++) {
		/* Each round starts one flavour further on, so no flavour always runs
		 * right after the recorded one (which leaves dirty pages and busy CPUs). */
		for (size_t k = 0; k < NFLAVOURS; k++) {
			size_t f = (k + (size_t)r) % NFLAVOURS;
			char bin[PATH_MAX + 64], *out = NULL;
			snprintf(bin, sizeof bin, "%s/%s", dir, flavour_runs[f].binary);
			if (access(bin, X_OK) != 0)
				continue;
			if (!json && isatty(STDERR_FILENO))
				fprintf(stderr, "\r  round %d/%d: %-24s", r + 1, rounds,
					flavour_runs[f].label);
			int crc = run_child(bin, &flavour_runs[f], o->target_spec, o->seconds,
					    o->target_poll, tmp, &out);
			if (crc < 0 || !out) {
				fprintf(stderr, "\nbench: %s failed: %s\n", flavour_runs[f].label,
					out ? out : "");
				free(out);
				continue;
			}
			for (size_t i = 0; i < np; i++) {
				char key[64];
				snprintf(key, sizeof key, "\"profile\": \"%s\"",
					 flavour_profiles[i]);
				const char *at = strstr(out, key);
				v[f][i][r] = at ? bench_json_number(at, "mib_s", 0) : 0;
				if (i == 1) {
					v[f][BENCH_COL_IOPS][r] =
					    at ? bench_json_number(at, "iops", 0) : 0;
					v[f][BENCH_COL_US][r] =
					    at ? bench_json_number(at, "mean_us", 0) : 0;
				}
			}
			ran[f][r] = true;
			lost[f] += (uint64_t)bench_json_number(out, "trace_lost", 0);
			free(out);
		}
	}
	if (!json && isatty(STDERR_FILENO))
		fprintf(stderr, "\r%70s\r", "");
	/* fio on the same file, once, as the raw limit row. */
	struct bench_result fio[2];
	bool have_fio = !strncmp(o->target_spec, "file=", 5) || !strncmp(o->target_spec, "rbd=", 4);
	for (size_t i = 0; i < np && have_fio; i++) {
		struct bench_profile p;
		bench_profile_parse(flavour_profiles[i], &p, why, sizeof why);
		if (bench_run_fio(o->target_spec, &p, false, o->seconds, &fio[i], why, sizeof why) <
		    0) {
			fprintf(stderr, "bench: fio: %s\n", why);
			have_fio = false;
		}
	}
	static struct bench_table t;
	memset(&t, 0, sizeof t);
	flavour_table(&t, v, ran, lost, rounds, have_fio ? fio : NULL);
	if (json)
		bench_table_json(stdout, &t);
	else
		bench_table_print(stdout, &t);
	if (svg && bench_table_svg(svg, &t, why, sizeof why) < 0) {
		fprintf(stderr, "bench: --svg %s\n", why);
		rc = 1;
	} else if (svg && !json) {
		printf("Bars: %s\n", svg);
	}
	char cmd[PATH_MAX + 16];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	if (system(cmd) != 0)
		rc = 1;
	return t.nrows ? rc : 1;
}

static int cmd_bench(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "trace"))
		return cmd_bench_trace(argc - 1, argv + 1);
	static const struct option opts[] = {
	    {"socket", required_argument, 0, 's'},  {"target", required_argument, 0, 't'},
	    {"profile", required_argument, 0, 'p'}, {"rw", required_argument, 0, 'w'},
	    {"time", required_argument, 0, 'T'},    {"queues", required_argument, 0, 'q'},
	    {"interrupt", no_argument, 0, 'i'},	    {"initiator-poll", no_argument, 0, 'N'},
	    {"json", no_argument, 0, 'j'},	    {"no-progress", no_argument, 0, 'P'},
	    {"fio", no_argument, 0, 'f'},	    {"flavours", no_argument, 0, 'F'},
	    {"rounds", required_argument, 0, 'r'},  {"record", required_argument, 0, 'R'},
	    {"help", no_argument, 0, 'h'},	    {"poll", no_argument, 0, 'o'},
	    {"svg", required_argument, 0, 'S'},	    {"adaptive-poll", required_argument, 0, 'a'},
	    {"idle", required_argument, 0, 'I'},    {0, 0, 0, 0}};
	/* Progress redraws one line: only on a terminal. */
	struct bench_opts o = {
	    .seconds = 5, .progress = isatty(STDERR_FILENO), .adaptive_poll_us = -1};
	char *profiles[MAX_PROFILES];
	int nprof = 0, rounds = BENCH_MIN_ROUNDS, c;
	bool fio = false, flavours = false;
	const char *record = NULL, *svg = NULL;
	char why[256];
	uint64_t v;

	optind = 1;
	while ((c = getopt_long(argc, argv, "s:t:p:w:T:q:iNjPfFr:R:S:a:I:h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.socket = optarg;
			break;
		case 't':
			if (strncmp(optarg, "file=", 5) && strncmp(optarg, "ram=", 4) &&
			    strncmp(optarg, "null=", 5) && strncmp(optarg, "rbd=", 4)) {
				fprintf(stderr,
					"bench: --target %s: expected file=IMG, ram=SIZE, "
					"null=SIZE or rbd=POOL/IMAGE\n",
					optarg);
				return 2;
			}
			o.target_spec = optarg;
			break;
		case 'p': {
			struct bench_profile p;
			if (bench_profile_parse(optarg, &p, why, sizeof why) < 0) {
				fprintf(stderr, "bench: %s\n", why);
				return 2;
			}
			if (nprof == MAX_PROFILES) {
				fprintf(stderr, "bench: at most %d profiles\n", MAX_PROFILES);
				return 2;
			}
			profiles[nprof++] = optarg;
			break;
		}
		case 'w':
			if (strcmp(optarg, "read") && strcmp(optarg, "write")) {
				fprintf(stderr, "bench: --rw %s: read or write\n", optarg);
				return 2;
			}
			o.write = !strcmp(optarg, "write");
			break;
		case 'T':
			if (vs_cli_seconds("bench", "time", optarg, 0.2, 3600, &o.seconds))
				return 2;
			break;
		case 'q':
			if (vs_cli_uint("bench", "queues", optarg, 1, 16, &v))
				return 2;
			o.queues = (unsigned)v;
			break;
		case 'i':
			o.interrupt = true;
			break;
		case 'N':
			o.initiator_poll = true;
			break;
		case 'o':
			o.target_poll = true;
			break;
		case 'j':
			o.json = true;
			o.progress = false;
			break;
		case 'P':
			o.progress = false;
			break;
		case 'f':
			fio = true;
			break;
		case 'F':
			flavours = true;
			break;
		case 'r':
			if (vs_cli_uint("bench", "rounds", optarg, 1, 64, &v))
				return 2;
			rounds = (int)v;
			break;
		case 'R':
			record = optarg;
			break;
		case 'S':
			svg = optarg;
			break;
		case 'a':
			if (vs_cli_uint("bench", "adaptive-poll", optarg, 0, 1000000, &v))
				return 2;
			o.adaptive_poll_us = (int)v;
			break;
		case 'I':
			if (vs_cli_seconds("bench", "idle", optarg, 0.1, 3600, &o.idle_seconds))
				return 2;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "bench: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	if ((o.idle_seconds > 0 || o.adaptive_poll_us >= 0) && (o.socket || flavours)) {
		fprintf(stderr, "bench: --idle and --adaptive-poll are for the target bench starts "
				"itself (not with --socket or --flavours)\n");
		return 2;
	}
	if (o.interrupt && o.initiator_poll) {
		fprintf(stderr, "bench: --interrupt and --initiator-poll exclude each other\n");
		return 2;
	}
	if (svg && !flavours) {
		fprintf(stderr, "bench: --svg draws the --flavours table\n");
		return 2;
	}
	if (o.socket && o.target_spec) {
		fprintf(stderr, "bench: --socket and --target exclude each other\n");
		return 2;
	}
	if (flavours) {
		if (o.seconds == 5)
			o.seconds = 2;
		if (nprof == 2) {
			flavour_profiles[0] = profiles[0];
			flavour_profiles[1] = profiles[1];
		} else if (nprof) {
			fprintf(stderr,
				"bench --flavours: give two --profile (the table's columns) "
				"or none (seq1m-q8t1, rnd4k-q32t16)\n");
			return 2;
		}
		return run_flavours(&o, rounds, o.json, svg);
	}
	if (!nprof)
		for (size_t i = 0; i < sizeof default_profiles / sizeof default_profiles[0]; i++)
			profiles[nprof++] = (char *)default_profiles[i];
	return run_profiles(&o, profiles, nprof, fio, record);
}

VS_CLI_COMMAND(bench, 2, "bench", cmd_bench, "benchmarks (`vioscope bench trace`)");
