/* SPDX-License-Identifier: MIT */
/*
 * `vioscope demo`: a small traced workload, recorded and decoded, in two build
 * flavours side by side: the default (cold: hot-path sites compiled out) and
 * `all` (hot-path sites compiled in).  It shows the whole tool chain: a running
 * process, `trace record` streaming its rings, `trace decode` printing them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "tools/commands.h"
#include "tracetools/tracetools.h"
#include "util/util.h"

#define WORKERS	 2
#define REQUESTS 20000

/* ---- the workload: a checksum "device" with a request loop ---------------------------------- */
struct request {
	unsigned tag;
	unsigned len;
	uint8_t data[512];
};

/* An inline helper on the hot path: its trace site names whoever called it. */
static inline uint32_t checksum(const struct request *r VS_CALLER_PARAM)
{
	uint32_t sum = 0;
	for (unsigned i = 0; i < r->len; i++)
		sum = (sum << 1 | sum >> 31) ^ r->data[i];
	VS_VERBOSE_HP(IO, "tag %u: %u bytes, checksum %#x", r->tag, r->len, sum);
	return sum;
}

static void *worker(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	char name[16];
	struct request r;
	uint32_t total = 0;

	snprintf(name, sizeof name, "worker-%u", id);
	pthread_setname_np(pthread_self(), name);
	VS_INFO(INIT, "worker %u starting, %d requests", id, REQUESTS);
	for (unsigned i = 0; i < REQUESTS && !vs_interrupted(); i++) {
		VS_VERBOSE_HP(IO, "tag %u: start", i);
		r.tag = i;
		r.len = 64 + (i * 37) % 448;
		memset(r.data, (int)(i & 0xff), r.len);
		total += checksum(&r VS_CALLER_ARG);
		if (i % 5000 == 4999)
			VS_WARNING(IO, "worker %u: request %u took the slow path (len %u)", id, i,
				   r.len);
		VS_VERBOSE_HP(IO, "tag %u: done", i);
	}
	VS_INFO(INIT, "worker %u done, total checksum %#x", id, total);
	return NULL;
}

static int run_workload(int go_fd)
{
	pthread_t t[WORKERS];
	char c;
	VS_INFO(INIT, "demo workload (%s flavour): %d workers", vs_trace_flavour(), WORKERS);
	/* Wait until the recorder is attached so no event is missed. */
	if (go_fd >= 0 && read(go_fd, &c, 1) != 1)
		VS_ERROR(INIT, "go pipe: %s", strerror(errno));
	for (int i = 0; i < WORKERS; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(t[i], NULL);
	VS_INFO(INIT, "demo workload finished");
	return 0;
}

/* ---- the driver: start a flavour's workload, record it, decode it -----------------------------
 */
struct go {
	int fd;
};
static void release_child(void *opaque)
{
	struct go *g = opaque;
	if (write(g->fd, "g", 1) != 1)
		perror("demo: go pipe");
}

static int count_lines(const char *path, unsigned long *lines)
{
	FILE *f = fopen(path, "r");
	int c;
	*lines = 0;
	if (!f)
		return -errno;
	while ((c = getc(f)) != EOF)
		*lines += c == '\n';
	fclose(f);
	return 0;
}

static void show_excerpt(const char *path, unsigned head, unsigned tail, unsigned long total)
{
	FILE *f = fopen(path, "r");
	char line[1024];
	unsigned long n = 0;
	while (f && fgets(line, sizeof line, f)) {
		if (n < head || n >= total - tail)
			printf("    %s", line);
		else if (n == head)
			printf("    ... %lu more lines ...\n", total - head - tail);
		n++;
	}
	if (f)
		fclose(f);
}

static int demo_flavour(const char *exe, const char *flavour, const char *dir)
{
	char capture[PATH_MAX + 32], text[PATH_MAX + 32], why[512], pid[32];
	int go[2];
	snprintf(capture, sizeof capture, "%s/demo-%s.vst", dir, flavour);
	snprintf(text, sizeof text, "%s/demo-%s.txt", dir, flavour);
	/* A capture is never overwritten: the one of an earlier demo in a kept directory
	 * ($VIOSCOPE_DEMO_DIR) is this demo's own, replaced on purpose. */
	unlink(capture);
	if (pipe(go) < 0)
		return -errno;
	pid_t child = fork();
	if (child == 0) {
		char fd[16];
		close(go[1]);
		snprintf(fd, sizeof fd, "%d", go[0]);
		/* Room for a burst while the recorder waits for a CPU on a busy machine. */
		setenv("VIOSCOPE_TRACE_RING", "8M", 0);
		execl(exe, exe, "demo", "--workload", fd, (char *)NULL);
		fprintf(stderr, "demo: %s: %s\n", exe, strerror(errno));
		_exit(127);
	}
	close(go[0]);
	vs_interrupt_pass(child); /* it stops its workers and exits, removing its trace file */
	snprintf(pid, sizeof pid, "%d", (int)child);
	/* The child sets its trace file up before main(): wait until it is valid. */
	for (int i = 0; i < 2000 && !vs_interrupted(); i++) {
		struct vs_shm s;
		if (vs_shm_open(&s, pid, why, sizeof why) == 0) {
			vs_shm_close(&s);
			break;
		}
		usleep(1000);
	}
	struct go g = {go[1]};
	struct vs_record_opts ro = {.enable_spec = "verbose:all",
				    .started = release_child,
				    .opaque = &g,
				    .stop = vs_interrupt_flag()};
	struct vs_dump_stats st;
	int rc =
	    vs_interrupted() ? -EINTR : vs_trace_record(pid, capture, &ro, &st, why, sizeof why);
	close(go[1]);
	int status;
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	vs_interrupt_pass_end(child);
	if (vs_interrupted())
		return -EINTR;
	if (rc < 0) {
		fprintf(stderr, "demo: record: %s\n", why);
		return rc;
	}
	FILE *out = fopen(text, "w");
	struct vs_decode_opts dopt = {.to_s = -1};
	rc = out ? vs_trace_decode(capture, &dopt, out, why, sizeof why) : -errno;
	if (out)
		fclose(out);
	if (rc < 0) {
		fprintf(stderr, "demo: decode: %s\n", why);
		return rc;
	}
	unsigned long lines;
	count_lines(text, &lines);
	struct stat sb;
	stat(capture, &sb);
	printf(
	    "\n== %s flavour (%s): %lu events from %u threads, %lld-byte capture, %llu dropped\n",
	    flavour, exe, lines, st.threads, (long long)sb.st_size, (unsigned long long)st.dropped);
	show_excerpt(text, 8, 4, lines);
	return 0;
}

static void demo_usage(FILE *f)
{
	fputs("usage: vioscope demo [--rounds N] [--time S] [--svg FILE] [--keep-image]\n"
	      "       vioscope demo --trace\n"
	      "The storage stack in every trace flavour (the seed driver's table: medians and\n"
	      "spreads over N interleaved rounds, default 5, of S seconds per profile, default\n"
	      "0.5; ratios within the noise marked ~), then a decoded trace excerpt.  The 1 GiB\n"
	      "image it makes in /dev/shm is removed at the end, also when interrupted, unless\n"
	      "--keep-image.  --svg FILE: the table as bars with their spread.\n"
	      "--trace: only a small traced workload, recorded and decoded.\n"
	      "Captures go to a new directory in $TMPDIR (or /tmp), kept and named at the end\n"
	      "(VIOSCOPE_DEMO_DIR=DIR: there instead).\n"
	      "Ctrl-C or SIGTERM: the table of the rounds done and the seed, then everything it\n"
	      "started stops and what it made goes (its directory too, unless VIOSCOPE_DEMO_DIR);\n"
	      "exit 128 + the signal.\n"
	      "Exit status: 0 done, 1 a step failed, 2 bad command line, 3 could not run\n"
	      "(README, \"Exit status\").\n",
	      f);
}

static int cmd_demo(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"rounds", required_argument, NULL, 'r'},
	    {"time", required_argument, NULL, 'T'},
	    {"svg", required_argument, NULL, 'S'},
	    {"keep-image", no_argument, NULL, 'k'},
	    {"trace", no_argument, NULL, 't'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	struct demo_opts o = {.rounds = 5, .seconds = 0.5};
	bool trace_only = false;
	uint64_t v;
	int c;

	if (argc == 3 && !strcmp(argv[1], "--workload")) {
		vs_interrupt_catch(); /* its workers stop; exiting removes its trace file */
		return vs_interrupt_status(run_workload(atoi(argv[2])));
	}
	optind = 1;
	while ((c = getopt_long(argc, argv, "r:T:S:kth", opts, NULL)) != -1) {
		switch (c) {
		case 'r':
			if (vs_cli_uint("demo", "rounds", optarg, 1, 64, &v))
				return VS_EXIT_USAGE;
			o.rounds = (unsigned)v;
			break;
		case 'T':
			if (vs_cli_seconds("demo", "time", optarg, 0.2, 60, &o.seconds))
				return VS_EXIT_USAGE;
			break;
		case 'S':
			o.svg = optarg;
			break;
		case 'k':
			o.keep_image = true;
			break;
		case 't':
			trace_only = true;
			break;
		case 'h':
			demo_usage(stdout);
			return VS_EXIT_OK;
		default:
			demo_usage(stderr);
			return VS_EXIT_USAGE;
		}
	}
	if (optind != argc) {
		demo_usage(stderr);
		return VS_EXIT_USAGE;
	}
	char self[PATH_MAX], dir[PATH_MAX], exe[PATH_MAX + 16], made[PATH_MAX] = "";
	vs_self_exe(self, sizeof self);
	if (!self[0]) {
		fprintf(stderr, "demo: cannot find my own binary\n");
		return VS_EXIT_CANNOT_RUN;
	}
	snprintf(dir, sizeof dir, "%s", self);
	*strrchr(dir, '/') = '\0';
	vs_interrupt_catch(); /* from here on a signal ends the demo cleanly */
	const char *keep = getenv("VIOSCOPE_DEMO_DIR");
	char out[PATH_MAX];
	if (keep && *keep) {
		snprintf(out, sizeof out, "%s", keep);
		if (mkdir(out, 0700) < 0 && errno != EEXIST) {
			fprintf(stderr, "demo: VIOSCOPE_DEMO_DIR=%s: %s\n", out, strerror(errno));
			return VS_EXIT_CANNOT_RUN;
		}
	} else {
		snprintf(out, sizeof out, "%s/vioscope-demo-XXXXXX", vs_tmp_dir());
		if (!mkdtemp(out)) {
			fprintf(stderr, "demo: mkdtemp %s: %s\n", out, strerror(errno));
			return VS_EXIT_CANNOT_RUN;
		}
		snprintf(made, sizeof made, "%s", out);
	}
	int rc = 0;
	if (!trace_only) {
		rc = demo_storage(dir, out, &o);
		goto out;
	}
	printf("vioscope demo: %d worker threads x %d requests, each request traced on the hot "
	       "path (VS_VERBOSE_HP)\nand the cold path (VS_INFO, VS_WARNING). "
	       "Recorded with `vioscope trace record`, decoded with `vioscope trace decode`.\n",
	       WORKERS, REQUESTS);
	static const char *const flavours[][2] = {{"cold", "vioscope"}, {"all", "vioscope-all"}};
	for (int i = 0; i < 2 && !vs_interrupted(); i++) {
		snprintf(exe, sizeof exe, "%s/%s", dir, flavours[i][1]);
		if (access(exe, X_OK) != 0) {
			printf("\n== %s flavour: %s not built, skipped\n", flavours[i][0], exe);
			continue;
		}
		if (demo_flavour(exe, flavours[i][0], out) < 0 && !vs_interrupted())
			rc = VS_EXIT_FAILED;
	}
	if (!vs_interrupted())
		printf("\nCaptures and decoded text are in %s.\nTry: %s/vioscope trace decode "
		       "%s/demo-all.vst --flag io --level warning\n",
		       out, dir, out);
out:
	if (vs_interrupted()) {
		/* Its directory goes too when the demo made it; VIOSCOPE_DEMO_DIR is the user's. */
		if (made[0]) {
			if (vs_remove_tree(made) < 0)
				fprintf(stderr, "demo: could not remove %s\n", made);
		}
		printf("vioscope demo: interrupted by %s: what it started is stopped, what it made "
		       "removed%s%s\n",
		       vs_signal_name(vs_interrupted()), made[0] ? "" : "; captures stay in ",
		       made[0] ? "" : out);
	}
	fflush(stdout);
	return vs_interrupt_status(rc);
}

VS_CLI_COMMAND(demo, 3, "demo", cmd_demo, "a small traced workload, recorded and decoded");
