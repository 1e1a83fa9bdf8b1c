/* SPDX-License-Identifier: MIT */
/*
 * `vioscope bench`: CrystalDiskMark-style profiles through the user-space initiator
 * against a vhost-user-scsi target (one given by --socket, or one it starts itself), and
 * `--flavours` (flavours.c): the same profiles for each trace build flavour.
 *
 * Exit status (README, "Exit status"): 0 every profile ran and no request failed; 1 a
 * request failed, or a recording asked for was not made; 2 a bad command line; 3 it could
 * not run (no such socket, a target that would not start, no room for its image); 128 +
 * the signal when interrupted, after it printed what it had measured and its seed,
 * stopped what it started and removed what it made.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
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

static void usage(FILE *f)
{
	fputs("usage: vioscope bench [--socket PATH | --target SPEC] [--profile P]...\n"
	      "                      [--rw read|write] [--time S] [--queues N] [--seed N]\n"
	      "                      [--interrupt | --initiator-poll] [--poll] [--fio] [--json]\n"
	      "                      [--no-progress] [--record DIR]\n"
	      "                      [--adaptive-poll US] [--idle S] [--dirty-log]\n"
	      "                      [--keep-inflight]\n"
	      "       vioscope bench --flavours [--rounds N] [--time S] [--target ...] [--json]\n"
	      "                      [--svg FILE]\n"
	      "       vioscope bench trace ...   (cost of one trace event: `bench trace --help`)\n"
	      "profiles: seq1m-q8t1 seq1m-q1t1 rnd4k-q32t16 rnd4k-q1t1 (the default), or any\n"
	      "seqNm-qQtT / rndNk-qQtT (T threads, Q requests in flight each); --time S per\n"
	      "profile (default 5; 2 with --flavours); --seed N: the random offsets (default 1).\n"
	      "Without --socket or --target a target of this binary's flavour is started on a\n"
	      "1 GiB image of this run's own in /dev/shm, removed when the run ends\n"
	      "(VIOSCOPE_BENCH_IMAGE=PATH: an image of yours, kept; VIOSCOPE_BENCH_TARGET_LOG=1:\n"
	      "the target's messages on stderr).  --fio adds the same profiles run by fio on the\n"
	      "same storage: the raw limit (io_uring on a file=IMG, fio's rbd engine on an\n"
	      "rbd=POOL/IMAGE[,conf=PATH]; a ram= or null= LUN has nothing fio can reach).\n"
	      "--poll: the embedded target busy-polls its queues.  --adaptive-poll US: the\n"
	      "embedded target's (event mode).  The initiator takes completions by interrupt\n"
	      "(its completion thread sleeps until the target signals); --initiator-poll makes it\n"
	      "poll: the lowest latency when a CPU is free for it, and a collapse when other\n"
	      "processes want the CPUs: a starved poller is said in the result (see\n"
	      "docs/PERFORMANCE.md).  Each run prints the CPU time per request of the initiator,\n"
	      "the embedded target and fio.\n"
	      "--dirty-log: the initiator asks the target to log its writes, as a frontend\n"
	      "migrating its guest does (the cost of a live migration's log phase).\n"
	      "--keep-inflight: the initiator shares an in-flight region with the target\n"
	      "(vhost-user INFLIGHT_SHMFD, as QEMU does to survive a backend restart) and\n"
	      "reconnects when it goes away: the target marks each request it takes and\n"
	      "clears each it answers (the cost of in-flight tracking).\n"
	      "--idle S: after each profile stay connected S seconds with nothing in flight\n"
	      "and print the share of a CPU the embedded target used meanwhile.\n"
	      "--record DIR: both processes' traces recorded into DIR (made when missing; one\n"
	      "that holds captures already is refused, so two runs never mix).\n"
	      "--flavours: every flavour once per round, interleaved; cells are medians\n"
	      "+-half the range over the rounds, ratios the median of per-round ratios to\n"
	      "off, marked ~ when within the noise (the ratio's 90% interval holds 1.0) or\n"
	      "? below 5 rounds; --svg FILE also draws the table as bars with their spread.\n"
	      "Ctrl-C or SIGTERM: prints what was measured and the seed, stops the target,\n"
	      "removes what the run made, exits 128 + the signal.\n"
	      "Exit status: 0 done, 1 a request failed (or a recording was not made), 2 bad\n"
	      "command line, 3 could not run (README, \"Exit status\").\n",
	      f);
}

/* Wait (5 s at most) until recorder r streams pid's trace: its pid in the trace file's
 * header, which it sets once it has attached.  False (said why) if it exited or is late. */
static bool wait_attached(pid_t r, int pid, const char *what)
{
	char p[32], why[256] = "";
	snprintf(p, sizeof p, "%d", pid);
	uint64_t deadline = vs_mono_ns() + 5000000000ull;
	while (vs_mono_ns() < deadline && !vs_interrupted()) {
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
	if (!vs_interrupted())
		fprintf(stderr,
			"bench: the recorder of the %s (pid %d) did not attach in 5 s%s%s\n", what,
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

/* Stop a recorder and add what its capture says was lost to *lost (not counted when
 * interrupted: decoding a large capture takes a while); -1 (said why) when it left no
 * capture, so that "nothing lost" is never said of a recording not made. */
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
	if (vs_interrupted())
		return 0;
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

/* --record DIR: a directory for this run's captures alone, made when missing.  One that
 * holds captures (*.vst) already is refused: two runs' captures would mix in it (and a
 * tool reading DIR/initiator-*.vst would join requests of different runs). */
static int record_dir_ready(const char *dir, char *why, size_t whylen)
{
	struct dirent *e;
	DIR *d;

	if (mkdir(dir, 0700) == 0)
		return 0;
	if (errno != EEXIST)
		return vs_fail(why, whylen, -errno, "--record %s: %s", dir, strerror(errno));
	if (!(d = opendir(dir)))
		return vs_fail(why, whylen, -errno, "--record %s: %s", dir, strerror(errno));
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (n > 4 && !strcmp(e->d_name + n - 4, ".vst")) {
			vs_fail(why, whylen, -EEXIST,
				"--record %s already holds captures (%s): this run's would mix "
				"with them; give a new directory",
				dir, e->d_name);
			closedir(d);
			return -EEXIST;
		}
	}
	closedir(d);
	return 0;
}

/* The line that ends an interrupted run: what was not measured in full, the seed. */
static void say_interrupted(FILE *f, char **profiles, int nprof, int done, uint64_t seed)
{
	fprintf(f, "interrupted by %s", vs_signal_name(vs_interrupted()));
	for (int i = done; i < nprof; i++)
		fprintf(f, "%s%s", i == done ? "; not run in full: " : ", ", profiles[i]);
	fprintf(f, "; seed %llu (--seed to repeat)\n", (unsigned long long)seed);
}

static int run_profiles(struct bench_opts *o, char **profiles, int nprof, bool fio,
			const char *record_dir)
{
	char why[512] = "", exe[PATH_MAX], sockdir[PATH_MAX], image[PATH_MAX] = "";
	static char sock[PATH_MAX + 16], spec[1024]; /* o->socket and o->target_spec point here */
	int tpid = -1, rc = VS_EXIT_OK, done = 0;
	pid_t rec_self = -1, rec_target = -1;
	bool have_sockdir = false;

	vs_self_exe(exe, sizeof exe);
	if (record_dir && record_dir_ready(record_dir, why, sizeof why) < 0) {
		fprintf(stderr, "bench: %s\n", why);
		return VS_EXIT_CANNOT_RUN;
	}
	if (!o->socket) {
		if (!o->target_spec) {
			if (bench_default_image(spec, sizeof spec, image, sizeof image, why,
						sizeof why) < 0) {
				rc = VS_EXIT_CANNOT_RUN;
				goto out;
			}
			o->target_spec = spec;
		}
		snprintf(sockdir, sizeof sockdir, "%s/vioscope-bench-XXXXXX", vs_tmp_dir());
		if (!mkdtemp(sockdir)) {
			vs_fail(why, sizeof why, -errno, "mkdtemp %s: %s", sockdir,
				strerror(errno));
			rc = VS_EXIT_CANNOT_RUN;
			goto out;
		}
		have_sockdir = true;
		snprintf(sock, sizeof sock, "%s/target.sock", sockdir);
		unsigned q = o->queues ? o->queues : 16;
		if (bench_target_start(exe, o->target_spec, q, o, sock, &tpid, why, sizeof why) <
		    0) {
			rc = VS_EXIT_CANNOT_RUN;
			goto out;
		}
		o->socket = sock;
		o->target_pid = tpid;
	}
	if (record_dir) {
		rec_self = start_recorder(exe, getpid(), record_dir, "initiator");
		if (tpid > 0 && rec_self > 0)
			rec_target = start_recorder(exe, tpid, record_dir, "target");
		if (rec_self < 0 || (tpid > 0 && rec_target < 0)) {
			/* said why; no run whose recording would be incomplete */
			snprintf(why, sizeof why, "no run: its recording could not start");
			rc = VS_EXIT_CANNOT_RUN;
			goto out;
		}
	}
	struct bench_result res[2 * MAX_PROFILES];
	int nres = 0;
	if (!o->json) {
		fprintf(stderr,
			"vioscope bench (%s flavour) against %s%s%s, %.1f s per profile, "
			"seed %llu\n",
			vs_trace_flavour(), o->socket, o->target_spec ? " = " : "",
			o->target_spec ? o->target_spec : "", o->seconds,
			(unsigned long long)o->seed);
		bench_result_print_header(stdout);
	}
	for (; done < nprof && !vs_interrupted(); done++) {
		struct bench_profile p;
		bench_profile_parse(profiles[done], &p, why, sizeof why);
		why[0] = '\0';
		int prc = bench_run_initiator(o, &p, &res[nres], why, sizeof why);
		if (prc == -EINTR)
			break;
		if (prc < 0) {
			rc = VS_EXIT_CANNOT_RUN;
			break;
		}
		if (!o->json) {
			bench_result_print(stdout, &res[nres]);
			bench_result_notes(stdout, &res[nres]);
		}
		if (res[nres].errors && rc == VS_EXIT_OK)
			rc = VS_EXIT_FAILED;
		nres++;
		if (vs_interrupted())
			break;
	}
	uint64_t lost = 0;
	bool rec_failed = false;
	if (rec_self > 0 && stop_recorder(rec_self, record_dir, "initiator", getpid(), &lost) < 0)
		rec_failed = true;
	if (rec_target > 0 && stop_recorder(rec_target, record_dir, "target", tpid, &lost) < 0)
		rec_failed = true;
	rec_self = rec_target = -1;
	if (rec_failed && rc == VS_EXIT_OK)
		rc = VS_EXIT_FAILED;
	/* The raw limit: fio on the very file or RBD image the target served. */
	for (int i = 0; fio && i < nprof && rc == VS_EXIT_OK && !vs_interrupted(); i++) {
		struct bench_profile p;
		bench_profile_parse(profiles[i], &p, why, sizeof why);
		if (bench_run_fio(o->target_spec, &p, o->write, o->seconds, &res[nres], why,
				  sizeof why) < 0) {
			if (!vs_interrupted())
				rc = VS_EXIT_FAILED;
			break;
		}
		snprintf(res[nres].rw, sizeof res[nres].rw, "%s", o->write ? "fio-w" : "fio-r");
		if (!o->json)
			bench_result_print(stdout, &res[nres]);
		nres++;
	}
	if (o->json) {
		printf("{");
		vs_cli_json_meta(stdout); /* the build, the time, the command line */
		printf(", \"flavour\": \"%s\", \"seed\": %llu, \"trace_lost\": %llu",
		       vs_trace_flavour(), (unsigned long long)o->seed, (unsigned long long)lost);
		if (vs_interrupted())
			printf(", \"interrupted\": \"%s\"", vs_signal_name(vs_interrupted()));
		printf(", \"results\": [");
		for (int i = 0; i < nres; i++) {
			printf(i ? ",\n  " : "\n  ");
			bench_result_json(stdout, &res[i]);
		}
		printf("\n]}\n");
	} else {
		if (vs_interrupted())
			say_interrupted(stdout, profiles, nprof, done, o->seed);
		if (record_dir && lost)
			printf("trace events lost while recording: %llu\n",
			       (unsigned long long)lost);
		else if (record_dir && !rec_failed && !vs_interrupted())
			printf("no trace event lost while recording\n");
		if (record_dir)
			printf("captures in %s\n", record_dir);
	}
out:
	if (rc == VS_EXIT_CANNOT_RUN || (rc == VS_EXIT_FAILED && why[0]))
		fprintf(stderr, "bench: %s\n", why);
	if (rec_self > 0 || rec_target > 0) {
		uint64_t ignored = 0;
		if (rec_self > 0)
			stop_recorder(rec_self, record_dir, "initiator", getpid(), &ignored);
		if (rec_target > 0)
			stop_recorder(rec_target, record_dir, "target", tpid, &ignored);
	}
	if (tpid > 0 && bench_target_stop(tpid) < 0 && !vs_interrupted()) {
		fprintf(stderr, "bench: the target did not exit cleanly\n");
		if (rc == VS_EXIT_OK)
			rc = VS_EXIT_FAILED;
	}
	if (have_sockdir) {
		unlink(sock);
		rmdir(sockdir);
	}
	if (image[0])
		unlink(image);
	fflush(stdout);
	return vs_interrupt_status(rc);
}

static int cmd_bench(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "trace"))
		return cmd_bench_trace(argc - 1, argv + 1);
	static const struct option opts[] = {
	    {"socket", required_argument, 0, 's'},
	    {"target", required_argument, 0, 't'},
	    {"profile", required_argument, 0, 'p'},
	    {"rw", required_argument, 0, 'w'},
	    {"time", required_argument, 0, 'T'},
	    {"queues", required_argument, 0, 'q'},
	    {"interrupt", no_argument, 0, 'i'},
	    {"initiator-poll", no_argument, 0, 'N'},
	    {"json", no_argument, 0, 'j'},
	    {"no-progress", no_argument, 0, 'P'},
	    {"fio", no_argument, 0, 'f'},
	    {"flavours", no_argument, 0, 'F'},
	    {"rounds", required_argument, 0, 'r'},
	    {"record", required_argument, 0, 'R'},
	    {"help", no_argument, 0, 'h'},
	    {"poll", no_argument, 0, 'o'},
	    {"svg", required_argument, 0, 'S'},
	    {"adaptive-poll", required_argument, 0, 'a'},
	    {"idle", required_argument, 0, 'I'},
	    {"seed", required_argument, 0, 'x'},
	    {"dirty-log", no_argument, 0, 'D'},
	    {"keep-inflight", no_argument, 0, 'K'},
	    {0, 0, 0, 0},
	};
	/* Progress redraws one line: only on a terminal. */
	struct bench_opts o = {
	    .seconds = 5, .progress = isatty(STDERR_FILENO), .adaptive_poll_us = -1, .seed = 1};
	char *profiles[MAX_PROFILES];
	int nprof = 0, rounds = BENCH_MIN_ROUNDS, c;
	bool fio = false, flavours = false, time_given = false;
	const char *record = NULL, *svg = NULL;
	char why[256];
	uint64_t v;

	optind = 1;
	while ((c = getopt_long(argc, argv, "s:t:p:w:T:q:iNjPfFr:R:S:a:I:x:DKh", opts, NULL)) !=
	       -1) {
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
				return VS_EXIT_USAGE;
			}
			o.target_spec = optarg;
			break;
		case 'p': {
			struct bench_profile p;
			if (bench_profile_parse(optarg, &p, why, sizeof why) < 0) {
				fprintf(stderr, "bench: %s\n", why);
				return VS_EXIT_USAGE;
			}
			if (nprof == MAX_PROFILES) {
				fprintf(stderr, "bench: at most %d profiles\n", MAX_PROFILES);
				return VS_EXIT_USAGE;
			}
			profiles[nprof++] = optarg;
			break;
		}
		case 'w':
			if (strcmp(optarg, "read") && strcmp(optarg, "write")) {
				fprintf(stderr, "bench: --rw %s: read or write\n", optarg);
				return VS_EXIT_USAGE;
			}
			o.write = !strcmp(optarg, "write");
			break;
		case 'T':
			if (vs_cli_seconds("bench", "time", optarg, 0.2, 3600, &o.seconds))
				return VS_EXIT_USAGE;
			time_given = true;
			break;
		case 'q':
			if (vs_cli_uint("bench", "queues", optarg, 1, 16, &v))
				return VS_EXIT_USAGE;
			o.queues = (unsigned)v;
			break;
		case 'i':
			o.interrupt = true;
			break;
		case 'N':
			o.initiator_poll = true;
			break;
		case 'D':
			o.dirty_log = true;
			break;
		case 'K':
			o.keep_inflight = true;
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
			o.quiet = true;
			break;
		case 'f':
			fio = true;
			break;
		case 'F':
			flavours = true;
			break;
		case 'r':
			if (vs_cli_uint("bench", "rounds", optarg, 1, 64, &v))
				return VS_EXIT_USAGE;
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
				return VS_EXIT_USAGE;
			o.adaptive_poll_us = (int)v;
			break;
		case 'I':
			if (vs_cli_seconds("bench", "idle", optarg, 0.1, 3600, &o.idle_seconds))
				return VS_EXIT_USAGE;
			break;
		case 'x':
			if (vs_cli_uint("bench", "seed", optarg, 1, UINT64_MAX, &o.seed))
				return VS_EXIT_USAGE;
			break;
		case 'h':
			usage(stdout);
			return VS_EXIT_OK;
		default:
			usage(stderr);
			return VS_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "bench: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return VS_EXIT_USAGE;
	}
	if ((o.idle_seconds > 0 || o.adaptive_poll_us >= 0) && (o.socket || flavours)) {
		fprintf(stderr, "bench: --idle and --adaptive-poll are for the target bench starts "
				"itself (not with --socket or --flavours)\n");
		return VS_EXIT_USAGE;
	}
	if (o.interrupt && o.initiator_poll) {
		fprintf(stderr, "bench: --interrupt and --initiator-poll exclude each other\n");
		return VS_EXIT_USAGE;
	}
	if (svg && !flavours) {
		fprintf(stderr, "bench: --svg draws the --flavours table\n");
		return VS_EXIT_USAGE;
	}
	if (o.socket && o.target_spec) {
		fprintf(stderr, "bench: --socket and --target exclude each other\n");
		return VS_EXIT_USAGE;
	}
	if (record && flavours) {
		fprintf(stderr, "bench: --record is for one run (--flavours records its own "
				"`all (hot on)` row)\n");
		return VS_EXIT_USAGE;
	}
	/* fio reaches a file or an RBD image; said before anything runs, not skipped. */
	if (fio && (o.socket || (o.target_spec && strncmp(o.target_spec, "file=", 5) &&
				 strncmp(o.target_spec, "rbd=", 4)))) {
		fprintf(stderr,
			"bench: --fio runs fio on the storage the target serves: a "
			"file=IMG or rbd= target (the default image is one); %s has "
			"nothing fio can reach\n",
			o.socket ? "a target given by --socket" : o.target_spec);
		return VS_EXIT_USAGE;
	}
	if (fio && vs_job_run("fio --version >/dev/null 2>&1") != 0) {
		fprintf(stderr,
			"bench: --fio: fio is not installed (scripts/deps.sh installs it)\n");
		return VS_EXIT_CANNOT_RUN;
	}
	vs_interrupt_catch(); /* from here on a signal ends the run cleanly */
	if (flavours) {
		if (!time_given)
			o.seconds = 2;
		if (nprof != 0 && nprof != 2) {
			fprintf(stderr,
				"bench --flavours: give two --profile (the table's columns) "
				"or none (seq1m-q8t1, rnd4k-q32t16)\n");
			return VS_EXIT_USAGE;
		}
		return bench_flavours(&o, nprof ? profiles : NULL, rounds, svg);
	}
	if (!nprof)
		for (size_t i = 0; i < sizeof default_profiles / sizeof default_profiles[0]; i++)
			profiles[nprof++] = (char *)default_profiles[i];
	return run_profiles(&o, profiles, nprof, fio, record);
}

VS_CLI_COMMAND(bench, 2, "bench", cmd_bench, "benchmarks (`vioscope bench trace`)");
