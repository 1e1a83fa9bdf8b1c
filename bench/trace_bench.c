/* SPDX-License-Identifier: MIT */
/*
 * `vioscope bench trace`: what one trace event costs, case against case in the
 * same run.  Cases are interleaved round by round so that drift on a shared
 * machine hits them all alike; figures are min/median/max over the rounds.
 * Instruction counts come from callgrind (the binary re-runs itself under
 * valgrind at two iteration counts; the difference divided by the count
 * difference removes start-up costs).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "bench/trace_bench.h"
#include "util/util.h"
#include "tracetools/tracetools.h"

#include "bench/trace_bench_loops.h"

/* ---- the measured loops -------------------------------------------------------------------- */
static void loop_empty(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		BARRIER();
}

static FILE *fprintf_file;
static void loop_fprintf(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		fprintf(fprintf_file, "event %u %u\n", (unsigned)i, 42u);
		BARRIER();
	}
}

/* The floor: a TSC read and a 24-byte store into a per-thread array. */
struct floor_rec {
	uint64_t ts;
	uint32_t a, b, c, d;
};
static __thread struct floor_rec floor_ring[4096];
static void loop_floor(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		struct floor_rec *r = &floor_ring[i & 4095];
		r->ts = vs__rdtsc();
		r->a = (uint32_t)i;
		r->b = 42;
		BARRIER();
	}
}

struct bcase {
	const char *name;
	void (*fn)(uint64_t n); /* NULL: not available in this run */
	bool two_threads;	/* also measured on two threads */
	bool peer;		/* another tracer, shown as a ratio to binary-2-ints */
};

/* Where a module is: $ENV, else next to this program. */
static void module_path(const char *file, const char *env, char *path, size_t len)
{
	const char *p = getenv(env);
	if (p && *p) {
		snprintf(path, len, "%s", p);
		return;
	}
	char exe[512];
	vs_self_exe(exe, sizeof exe);
	const char *slash = strrchr(exe, '/');
	if (slash)
		snprintf(path, len, "%.*s/%s", (int)(slash - exe), exe, file);
	else
		snprintf(path, len, "./%s", file);
}

/* The module, or NULL (with a message unless quiet). */
static void *load_module(const char *file, const char *env, bool quiet)
{
	char path[600];
	module_path(file, env, path, sizeof path);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h && !quiet)
		fprintf(stderr, "bench trace: %s\n", dlerror());
	return h;
}

/* The LTTng-UST loop, when its module was built (liblttng-ust-dev installed) and the
 * session enabled its tracepoint here: a disabled one would be measured otherwise. */
static void (*peer_lttng_loop(bool quiet))(uint64_t)
{
	static void (*fn)(uint64_t);
	static bool tried;
	if (!tried) {
		int (*enabled)(void) = NULL;
		void *h = load_module(VS_BENCH_LTTNG_FILE, "VIOSCOPE_BENCH_LTTNG", quiet);
		if (h) {
			*(void **)&fn = dlsym(h, "vs_bench_loop_lttng");
			*(void **)&enabled = dlsym(h, "vs_bench_lttng_enabled");
		}
		if (fn && (!enabled || !enabled())) {
			if (!quiet)
				fprintf(stderr,
					"bench trace: the LTTng-UST tracepoint "
					"vioscope_bench:two_ints is not enabled in this process "
					"(no registration with the session daemon?): LTTng-UST "
					"peer left out\n");
			fn = NULL;
		}
		tried = true;
	}
	return fn;
}

/* The shared-library and LTTng cases are filled in when they are there. */
static struct bcase cases[] = {
    {"loop-overhead", loop_empty, false, false},
    {"disabled", loop_disabled, true, false},
    {"floor-tsc+store24", loop_floor, true, false},
    {"binary-0-args", loop_args0, true, false},
    {"binary-2-ints", loop_args2, true, false},
    {"binary-4-ints", loop_args4, true, false},
    {"binary-string16", loop_string, true, false},
    {"so-disabled", NULL, false, false},
    {"so-binary-2-ints", NULL, false, false},
    {"so-binary-string16", NULL, false, false},
    {"print-backend", vs_bench_loop_print, false, false},
    {"fprintf-file", loop_fprintf, false, true},
    {"lttng-ust-2-ints", NULL, false, true},
};
#define NCASES (sizeof cases / sizeof cases[0])

static int find_case(const char *name)
{
	for (size_t i = 0; i < NCASES; i++)
		if (!strcmp(cases[i].name, name) && cases[i].fn)
			return (int)i;
	return -1;
}

static void set_case(const char *name, void (*fn)(uint64_t))
{
	for (size_t i = 0; i < NCASES; i++)
		if (!strcmp(cases[i].name, name))
			cases[i].fn = fn;
}

/* The same loops in a shared library (libvioscope_bench_so.so, next to this program or
 * $VIOSCOPE_BENCH_SO): with the program's runtime, whose entry points it exports. */
static void load_so_loops(bool quiet)
{
	void *h = load_module(VS_BENCH_SO_FILE, "VIOSCOPE_BENCH_SO", quiet);
	const struct vs_bench_so_loops *l = h ? dlsym(h, VS_BENCH_SO_SYMBOL) : NULL;
	if (!l)
		return;
	set_case("so-disabled", l->disabled);
	set_case("so-binary-2-ints", l->args2);
	set_case("so-binary-string16", l->string);
}

/* ---- timing -----------------------------------------------------------------------------------
 */
static double now_s(void)
{
	return (double)vs_mono_ns() / 1e9;
}

static void pin(int cpu)
{
	cpu_set_t set;
	int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
	CPU_ZERO(&set);
	CPU_SET(ncpu > 0 ? cpu % ncpu : 0, &set);
	sched_setaffinity(0, sizeof set, &set);
}

struct run_arg {
	const struct bcase *c;
	uint64_t n;
	int cpu;
	double ns;
	pthread_barrier_t *start;
};

static void *run_thread(void *p)
{
	struct run_arg *a = p;
	pin(a->cpu);
	/* Warm: attach the ring and fault all of it in.  A new thread gets a ring slot no
	 * thread has used (attach_ring keeps retired slots for their flight records), and
	 * a first touch of shared memory costs 10-20 us here: faults inside the timed loop
	 * would be measured as event cost.  As many events as are timed, at least 16 bytes
	 * each, cover the 4 MiB ring at --quick's 300k and the default 2M. */
	a->c->fn(a->n);
	if (a->start)
		pthread_barrier_wait(a->start);
	double t0 = now_s();
	a->c->fn(a->n);
	a->ns = (now_s() - t0) * 1e9 / (double)a->n;
	return NULL;
}

/* One measurement: ns per event on 1 thread, or the mean per thread on 2. */
static double measure(const struct bcase *c, uint64_t n, int threads)
{
	struct run_arg a[2] = {{c, n, 0, 0, NULL}, {c, n, 1, 0, NULL}};
	pthread_t t[2];
	pthread_barrier_t b;
	if (threads == 1) {
		run_thread(&a[0]);
		return a[0].ns;
	}
	pthread_barrier_init(&b, NULL, 2);
	for (int i = 0; i < 2; i++) {
		a[i].start = &b;
		pthread_create(&t[i], NULL, run_thread, &a[i]);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&b);
	return (a[0].ns + a[1].ns) / 2;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct result {
	const char *name;
	int threads;
	double min, med, max;
	double instr; /* < 0: not measured */
	double rate;  /* sustained: events/s */
	uint64_t dropped;
};

/* ---- callgrind ----------------------------------------------------------------------------- */
static double callgrind_total(const char *exe, const char *cname, uint64_t n)
{
	char out[PATH_MAX];
	snprintf(out, sizeof out, "%s/vioscope-cg-XXXXXX", vs_tmp_dir());
	int fd = mkstemp(out);
	if (fd < 0)
		return -1;
	close(fd);
	char nbuf[32], outarg[PATH_MAX + 32];
	snprintf(nbuf, sizeof nbuf, "%llu", (unsigned long long)n);
	snprintf(outarg, sizeof outarg, "--callgrind-out-file=%s", out);
	pid_t pid = fork();
	if (pid == 0) {
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0) {
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		execlp("valgrind", "valgrind", "--tool=callgrind", outarg, exe, "bench", "trace",
		       "--inner", cname, nbuf, (char *)NULL);
		_exit(127);
	}
	int st = 0;
	if (pid > 0) {
		vs_interrupt_pass(pid); /* valgrind and the program under it stop with us */
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		vs_interrupt_pass_end(pid);
	}
	double total = -1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		FILE *f = fopen(out, "r");
		char line[256];
		while (f && fgets(line, sizeof line, f))
			if (!strncmp(line, "summary:", 8) || !strncmp(line, "totals:", 7))
				total = strtod(strchr(line, ':') + 1, NULL);
		if (f)
			fclose(f);
	}
	unlink(out);
	return total;
}

static bool have_valgrind(void)
{
	return system("valgrind --version >/dev/null 2>&1") == 0;
}

/* ---- sustained recording ------------------------------------------------------------------- */
/* Emit n two-integer events at `rate` per second (0: as fast as possible), in
 * bursts of 256, so the recorder's drain rate is what is tested. */
static void paced_args2(uint64_t n, double rate)
{
	double t0 = now_s();
	for (uint64_t done = 0; done < n && !vs_interrupted(); done += 256) {
		loop_args2(256);
		if (rate > 0)
			while (now_s() - t0 < (double)(done + 256) / rate)
				;
	}
}

static int sustained(const char *exe, uint64_t n, double rate, struct result *r, const char *dir)
{
	char capture[512], pidbuf[32];
	snprintf(capture, sizeof capture, "%s/vioscope-bench-%d.vst", dir, (int)getpid());
	snprintf(pidbuf, sizeof pidbuf, "%d", (int)getpid());
	pid_t rec = fork();
	if (rec == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the benchmark */
		/* The recorder on the other CPU than the producer: left to the scheduler,
		 * both busy threads sometimes share a CPU for a while and the recorder
		 * falls behind (seen: one run in two lost a third of the events). */
		pin(1);
		int devnull = open("/dev/null", O_WRONLY);
		if (devnull >= 0)
			dup2(devnull, 2);
		execl(exe, exe, "trace", "record", pidbuf, "-o", capture, (char *)NULL);
		_exit(127);
	}
	/* Wait until the recorder has switched us to streaming. */
	struct vs_shm s;
	char why[256];
	if (vs_shm_open(&s, pidbuf, why, sizeof why) < 0) {
		fprintf(stderr, "bench: %s\n", why);
		kill(rec, SIGKILL);
		waitpid(rec, NULL, 0);
		return -1;
	}
	for (int i = 0;
	     i < 5000 && __atomic_load_n(&s.hdr->mode, __ATOMIC_ACQUIRE) != VS_MODE_STREAM; i++)
		usleep(1000);
	pin(0);
	loop_args2(1000);
	uint64_t before = 0;
	for (unsigned i = 0; i < s.snap.ring_count; i++)
		before += vs_shm_ring(&s, i)->dropped;
	double t0 = now_s();
	paced_args2(n, rate);
	double dt = now_s() - t0;
	uint64_t after = 0;
	for (unsigned i = 0; i < s.snap.ring_count; i++)
		after += vs_shm_ring(&s, i)->dropped;
	kill(rec, SIGINT);
	int st;
	waitpid(rec, &st, 0);
	vs_shm_close(&s);
	struct stat sb;
	r->name = rate > 0 ? "sustained-record-paced" : "sustained-record-max";
	r->threads = 1;
	r->rate = (double)n / dt;
	r->min = r->med = r->max = dt * 1e9 / (double)n;
	r->dropped = after - before;
	r->instr = -1;
	bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && stat(capture, &sb) == 0;
	unlink(capture);
	return ok ? 0 : -1;
}

/* Run sustained() in a fresh copy of this binary with a 16 MiB ring (it rides out the
 * recorder being descheduled for 33 ms at 20 M events/s); it prints "rate dropped". */
static int sustained_child(const char *exe, uint64_t n, double rate, struct result *r)
{
	char cmd[1024];
	snprintf(cmd, sizeof cmd,
		 "VIOSCOPE_TRACE_RING=16M VIOSCOPE_TRACE=info:all '%s' bench trace "
		 "--inner-sustained %llu --rate %.6f",
		 exe, (unsigned long long)n, rate > 0 ? rate / 1e6 : 0);
	int fd, pid;
	if (vs_job_start(cmd, &fd, &pid) < 0)
		return -1;
	FILE *p = fdopen(fd, "r");
	double got_rate = 0;
	unsigned long long dropped = 0;
	int ok = p && fscanf(p, "%lf %llu", &got_rate, &dropped) == 2;
	if (p)
		fclose(p);
	else
		close(fd);
	if (vs_job_wait(pid) != 0 || !ok)
		return -1;
	r->name = rate > 0 ? "sustained-record-paced" : "sustained-record-max";
	r->threads = 1;
	r->rate = got_rate;
	r->min = r->med = r->max = 1e9 / got_rate;
	r->dropped = dropped;
	r->instr = -1;
	return 0;
}

/* ---- the shared library and the peers, against the program's own sites ------------------- */
static const struct result *result(const struct result *res, size_t n, const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (res[i].threads == 1 && !strcmp(res[i].name, name))
			return &res[i];
	return NULL;
}

static void print_so_and_peers(const struct result *res, size_t n, bool peers)
{
	static const char *const pairs[][2] = {{"disabled", "so-disabled"},
					       {"binary-2-ints", "so-binary-2-ints"},
					       {"binary-string16", "so-binary-string16"}};
	for (size_t i = 0; i < 3; i++) {
		const struct result *a = result(res, n, pairs[i][0]),
				    *b = result(res, n, pairs[i][1]);
		if (!a || !b)
			continue;
		char ins[32] = "n/a";
		if (a->instr >= 0 && b->instr >= 0)
			snprintf(ins, sizeof ins, "%+.1f", b->instr - a->instr);
		printf("shared library vs program %-17s %s instructions, %.2fx ns\n", pairs[i][0],
		       ins, a->med > 0 ? b->med / a->med : 0.0);
	}
	const struct result *ours = result(res, n, "binary-2-ints");
	if (!peers || !ours)
		return;
	/* ns: median and spread (min-max) over the interleaved rounds, pinned to one CPU */
	printf("\n%-24s %9s %17s %8s %9s %8s\n", "two integers: peers", "ns median", "ns min-max",
	       "x ours", "instr", "x ours");
	for (size_t i = 0; i < NCASES; i++) {
		const struct result *p = result(res, n, cases[i].name);
		if ((!cases[i].peer && p != ours) || !p)
			continue;
		char ins[32] = "-", ratio[32] = "-", spread[48];
		if (p->instr >= 0 && ours->instr > 0) {
			snprintf(ins, sizeof ins, "%.1f", p->instr);
			snprintf(ratio, sizeof ratio, "%.1f", p->instr / ours->instr);
		}
		snprintf(spread, sizeof spread, "%.2f-%.2f", p->min, p->max);
		printf("%-24s %9.2f %17s %8.2f %9s %8s\n", p->name, p->med, spread,
		       p->med / ours->med, ins, ratio);
	}
	if (result(res, n, "lttng-ust-2-ints"))
		printf(
		    "lttng-ust-2-ints: tracepoint vioscope_bench:two_ints, enabled in this process "
		    "(checked), discard channel of 8 x 4 MiB, a session daemon of its own\n");
	else
		printf("(no LTTng-UST case: see the message above)\n");
}

/* --peers: a session daemon of our own around a run of this program (it must be there
 * before the measuring process starts, for that process's tracepoint to register). */
static int run_with_peers(void)
{
	char why[512] = "", mod[600];
	/* only whether the module is there: loading it here would register this process */
	module_path(VS_BENCH_LTTNG_FILE, "VIOSCOPE_BENCH_LTTNG", mod, sizeof mod);
	bool have = access(mod, R_OK) == 0;
	bool lttng = have && vs_bench_lttng_start(why, sizeof why) == 0;
	if (!have)
		fprintf(stderr,
			"bench trace: no %s (built without liblttng-ust-dev?): LTTng-UST "
			"peer left out\n",
			mod);
	else if (!lttng)
		fprintf(stderr, "bench trace: LTTng-UST peer left out: %s\n", why);
	setenv("VIOSCOPE_BENCH_PEERS", lttng ? "lttng" : "fprintf", 1);
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		execv("/proc/self/exe", vs_cli_argv);
		_exit(127);
	}
	int st = 1;
	if (pid > 0)
		vs_interrupt_pass(pid); /* it stops cleanly, then the daemon goes */
	while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (pid > 0)
		vs_interrupt_pass_end(pid);
	int rc = pid < 0	 ? VS_EXIT_CANNOT_RUN
		 : WIFEXITED(st) ? WEXITSTATUS(st)
				 : 128 + WTERMSIG(st);
	if (lttng)
		vs_bench_lttng_stop();
	return rc;
}

/* ---- command -----------------------------------------------------------------------------------
 */
static void usage(FILE *f)
{
	fputs("usage: vioscope bench trace [--json] [--rounds N] [--events N] [--quick]\n"
	      "                            [--no-callgrind] [--no-sustained] [--rate MEPS] "
	      "[--peers]\n"
	      "ns per event (min/median/max over interleaved rounds, pinned) and instructions\n"
	      "per event (callgrind) for each case, on one thread and on two; the so-* cases\n"
	      "are the same sites in a shared library; then the sustained rate while\n"
	      "`vioscope trace record` streams to a file: paced at --rate million events/s\n"
	      "(default 20), then as fast as possible.\n"
	      "--peers: also an LTTng-UST tracepoint with two integer fields (with a session\n"
	      "daemon of its own, started and stopped here) and fprintf, in the same rounds,\n"
	      "each shown as a ratio to binary-2-ints.\n"
	      "Ctrl-C or SIGTERM: the figures of the rounds done, then exit 128 + the signal.\n"
	      "Exit status: 0 done, 2 bad command line, 3 could not run (README, \"Exit "
	      "status\").\n",
	      f);
}

int cmd_bench_trace(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, 0, 'j'},	   {"rounds", required_argument, 0, 'r'},
	    {"events", required_argument, 0, 'n'}, {"quick", no_argument, 0, 'q'},
	    {"no-callgrind", no_argument, 0, 'C'}, {"no-sustained", no_argument, 0, 'S'},
	    {"inner", required_argument, 0, 'I'},  {"help", no_argument, 0, 'h'},
	    {"rate", required_argument, 0, 'R'},   {"inner-sustained", required_argument, 0, 'U'},
	    {"peers", no_argument, 0, 'P'},	   {0, 0, 0, 0}};
	bool json = false, callgrind = true, sust = true, peers = false;
	int rounds = 11;
	uint64_t events = 2000000;
	const char *inner = NULL;
	double sustain_rate = 20e6;
	uint64_t inner_sustained = 0, v;
	char *end;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "jr:n:qh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'r':
			if (vs_cli_uint("bench trace", "rounds", optarg, 1, 1000, &v))
				return 2;
			rounds = (int)v;
			break;
		case 'n':
			if (vs_cli_uint("bench trace", "events", optarg, 1000, UINT64_MAX, &events))
				return 2;
			break;
		case 'q':
			rounds = 5;
			events = 300000;
			break;
		case 'C':
			callgrind = false;
			break;
		case 'S':
			sust = false;
			break;
		case 'P':
			peers = true;
			break;
		case 'I':
			inner = optarg;
			break;
		case 'U':
			inner_sustained = strtoull(optarg, &end, 10);
			break;
		case 'R':
			sustain_rate = strtod(optarg, &end) * 1e6;
			if (*end || sustain_rate < 0) {
				fprintf(stderr, "bench trace: bad --rate '%s' (million events/s)\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc && !inner) {
		usage(stderr);
		return VS_EXIT_USAGE;
	}
	vs_interrupt_catch(); /* from here on a signal ends the run cleanly */
	if (peers && !getenv("VIOSCOPE_BENCH_PEERS"))
		return vs_interrupt_status(run_with_peers());
	if (getenv("VIOSCOPE_BENCH_PEERS") && !strcmp(getenv("VIOSCOPE_BENCH_PEERS"), "lttng"))
		set_case("lttng-ust-2-ints", peer_lttng_loop(false));
	if (!getenv("VIOSCOPE_TRACE_RING")) {
		/* Rings of a few MiB, as a traced program would have. */
		setenv("VIOSCOPE_TRACE_RING", "4M", 1);
		setenv("VIOSCOPE_TRACE", "info:all", 1);
		execv("/proc/self/exe", vs_cli_argv);
		fprintf(stderr, "bench trace: re-exec: %s\n", strerror(errno));
		return 1;
	}
	vs_trace_set(VS_LEVEL_INFO, 0xffffffffu);
	load_so_loops(inner != NULL || inner_sustained || json);
	char tmpl[PATH_MAX];
	snprintf(tmpl, sizeof tmpl, "%s/vioscope-bench-XXXXXX", vs_tmp_dir());
	const char *dir = mkdtemp(tmpl);
	if (!dir) {
		fprintf(stderr, "bench trace: mkdtemp %s: %s\n", tmpl, strerror(errno));
		return VS_EXIT_CANNOT_RUN;
	}
	char path[600];
	snprintf(path, sizeof path, "%s/fprintf.txt", dir);
	fprintf_file = fopen(path, "w");
	snprintf(path, sizeof path, "%s/print.txt", dir);
	vs__print_to(path);
	int rc = 0;

	if (inner_sustained) {
		char exe[512];
		struct result r;
		vs_self_exe(exe, sizeof exe);
		if (sustained(exe, inner_sustained, sustain_rate, &r, dir) < 0)
			rc = 1;
		else
			printf("%.0f %llu\n", r.rate, (unsigned long long)r.dropped);
		goto out;
	}
	if (inner) {
		/* Child mode under valgrind: run one case n times. */
		int i = find_case(inner);
		if (i < 0 || optind != argc - 1) {
			rc = VS_EXIT_USAGE;
			goto out;
		}
		cases[i].fn(strtoull(argv[optind], NULL, 10));
		goto out;
	}

	struct result res[2 * NCASES + 1];
	size_t nres = 0;
	double *samples = calloc((size_t)rounds * NCASES * 2, sizeof(double));
	if (!samples) {
		rc = VS_EXIT_CANNOT_RUN;
		goto out;
	}
	if (!json)
		fprintf(stderr, "bench trace: %d rounds x %llu events per case (%s flavour)\n",
			rounds, (unsigned long long)events, vs_trace_flavour());
	/* Interrupted: the figures of the rounds done (a round cut short is dropped). */
	int asked = rounds, r;
	for (r = 0; r < rounds && !vs_interrupted(); r++) {
		for (size_t i = 0; i < NCASES && !vs_interrupted(); i++) {
			if (!cases[i].fn)
				continue;
			/* Slow cases run fewer events: same statistics, less waiting. */
			uint64_t n = cases[i].peer || cases[i].fn == vs_bench_loop_print
					 ? events / 10
					 : events;
			samples[(i * 2) * (size_t)rounds + (size_t)r] = measure(&cases[i], n, 1);
			if (cases[i].two_threads)
				samples[(i * 2 + 1) * (size_t)rounds + (size_t)r] =
				    measure(&cases[i], n, 2);
		}
		if (vs_interrupted())
			break;
		if (!json && isatty(STDERR_FILENO))
			fprintf(stderr, "\r  round %d/%d", r + 1, rounds);
		rewind(fprintf_file);
	}
	if (!json && isatty(STDERR_FILENO))
		fprintf(stderr, "\n");
	rounds = r;
	if (!rounds) {
		fprintf(stderr, "bench trace: interrupted by %s before a round was done\n",
			vs_signal_name(vs_interrupted()));
		free(samples);
		goto out;
	}
	if (vs_interrupted())
		callgrind = sust = false;
	bool cg = callgrind && have_valgrind();
	/* valgrind must be given our real path: "/proc/self/exe" would name valgrind. */
	char self[512];
	vs_self_exe(self, sizeof self);
	if (callgrind && !cg)
		fprintf(stderr, "bench trace: valgrind not found: no instruction counts\n");
	for (size_t i = 0; i < NCASES; i++) {
		if (!cases[i].fn)
			continue;
		for (int t = 1; t <= (cases[i].two_threads ? 2 : 1); t++) {
			double *s = &samples[(i * 2 + (size_t)(t - 1)) * (size_t)asked];
			qsort(s, (size_t)rounds, sizeof *s, cmp_double);
			struct result *x = &res[nres++];
			x->name = cases[i].name;
			x->threads = t;
			x->min = s[0];
			x->med = s[rounds / 2];
			x->max = s[rounds - 1];
			x->instr = -1;
			x->rate = 0;
			if (cg && t == 1 && !vs_interrupted()) {
				uint64_t n1 = 100000, n2 = 200000;
				double a = callgrind_total(self, cases[i].name, n1);
				double b = callgrind_total(self, cases[i].name, n2);
				if (a > 0 && b > 0 && !vs_interrupted())
					x->instr = (b - a) / (double)(n2 - n1);
			}
		}
	}
	if (sust) {
		char exe[512];
		vs_self_exe(exe, sizeof exe);
		/* At the goal's rate (must not drop), then unpaced (shows where it drops);
		 * each in a fresh process, so no other thread's flight record is queued
		 * ahead of the measured one. */
		double rates[2] = {sustain_rate, 0};
		for (int j = 0; j < 2 && !vs_interrupted(); j++) {
			if (sustained_child(exe, events * 10, rates[j], &res[nres]) == 0)
				nres++;
			else if (!vs_interrupted())
				fprintf(stderr, "bench trace: sustained recording failed\n");
		}
	}

	double floor1 = 0;
	for (size_t i = 0; i < nres; i++)
		if (!strcmp(res[i].name, "floor-tsc+store24") && res[i].threads == 1)
			floor1 = res[i].med;
	if (json) {
		printf("{");
		vs_cli_json_meta(stdout); /* the build, the time, the command line */
		printf(", \"cases\": [\n");
		for (size_t i = 0; i < nres; i++) {
			printf("  {\"name\": \"%s\", \"threads\": %d, \"ns_min\": %.2f, "
			       "\"ns_median\": %.2f, \"ns_max\": %.2f",
			       res[i].name, res[i].threads, res[i].min, res[i].med, res[i].max);
			if (res[i].instr >= 0)
				printf(", \"instructions\": %.1f", res[i].instr);
			if (res[i].rate > 0)
				printf(", \"events_per_s\": %.0f, \"dropped\": %llu", res[i].rate,
				       (unsigned long long)res[i].dropped);
			printf("}%s\n", i + 1 < nres ? "," : "");
		}
		printf("]}\n");
	} else {
		printf("%-24s %7s %9s %9s %9s %9s %8s\n", "case", "threads", "ns min", "ns median",
		       "ns max", "x floor", "instr");
		for (size_t i = 0; i < nres; i++) {
			char ins[32] = "-";
			if (res[i].instr >= 0)
				snprintf(ins, sizeof ins, "%.1f", res[i].instr);
			printf("%-24s %7d %9.2f %9.2f %9.2f %9.2f %8s", res[i].name, res[i].threads,
			       res[i].min, res[i].med, res[i].max,
			       floor1 > 0 ? res[i].med / floor1 : 0, ins);
			if (res[i].rate > 0)
				printf("   %.1f M events/s, %llu dropped", res[i].rate / 1e6,
				       (unsigned long long)res[i].dropped);
			printf("\n");
		}
		for (size_t i = 0; i + 1 < nres; i++)
			if (res[i].threads == 1 && res[i + 1].threads == 2 &&
			    !strcmp(res[i].name, res[i + 1].name) && res[i + 1].med > 0)
				printf("two-thread scaling %-22s %.2fx\n", res[i].name,
				       2 * res[i].med / res[i + 1].med);
		print_so_and_peers(res, nres, peers);
	}
	if (vs_interrupted())
		printf("interrupted by %s after %d of %d rounds: the figures are those rounds'; "
		       "what was to come after it (instruction counts, sustained rates) is left "
		       "out\n",
		       vs_signal_name(vs_interrupted()), rounds, asked);
	free(samples);
out:
	fclose(fprintf_file);
	if (vs_remove_tree(dir) < 0 && rc == VS_EXIT_OK)
		rc = VS_EXIT_FAILED;
	fflush(stdout);
	return vs_interrupt_status(rc);
}
