/* SPDX-License-Identifier: MIT */
/*
 * Hostile captures given to the tools on top of the decoder (issue 22, defect 8): a FIFO
 * named as a capture must be refused at once by `trace decode`, `decode --ctf` and
 * `trace latency` (opening it waited for a writer for ever), and captures shaped to make
 * the CTF export's stream lookup and `trace latency`'s open-request lookups cost a search
 * per event must not.  Time is compared with the same run's own figures, as ratios of
 * CPU time: two captures whose work is the same unless the lookups search (CTF), or a
 * capture ten times as large in the same shape, which must cost about ten times as much,
 * not a hundred (latency).  The captures are forged byte by byte (forge.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver.h"
#include "forge.h"

#define CLI_WAIT_MS 30000 /* bounds the wait for a command that must end at once */
#define SCALE	    10	  /* the large capture against the small one */
#define RATIO_MAX   30.0  /* linear: ~10 (SCALE); quadratic: ~100 (SCALE^2) */
#define REPEATS	    3	  /* the fastest of these counts: others' load only adds */

/* ---- a FIFO named as a capture ------------------------------------------------------------ */

/* `vioscope trace ARGS...` (NULL-terminated) in TD, with a deadline: its exit status, or
 * -2 when it had to be killed. */
static int cli_within(const struct th_tmpdir *td, const char *const args[])
{
	const char *argv[16] = {VIOSCOPE_CLI, "trace"};
	const char *env[] = {td->env_dir, NULL};
	size_t n = 2;
	for (; *args; args++) {
		assert_true(n < sizeof argv / sizeof argv[0] - 1);
		argv[n++] = *args;
	}
	argv[n] = NULL;
	pid_t pid = th_spawn(argv, env, NULL, td->out, td->err);
	assert_true(pid > 0);
	return th_wait_within(pid, CLI_WAIT_MS);
}

/* Nobody writes the FIFO: every command that reads captures refuses it, saying what it is,
 * instead of waiting in open() for a writer. */
static void test_fifo_as_a_capture_is_refused_at_once(void **state)
{
	struct th_tmpdir *td = *state;
	char fifo[600], ctf[600];
	snprintf(fifo, sizeof fifo, "%s/capture.vst", td->dir);
	snprintf(ctf, sizeof ctf, "%s/ctf", td->dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	const char *const decode[] = {"decode", fifo, NULL};
	const char *const export[] = {"decode", fifo, "--ctf", ctf, NULL};
	const char *const latency[] = {"latency", fifo, NULL};
	const char *const *cmds[] = {decode, export, latency};
	for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
		assert_int_equal(cli_within(td, cmds[i]), 1);
		assert_true(th_file_contains(td->err, "a FIFO, not a regular file"));
	}
	assert_int_equal(access(ctf, F_OK), -1); /* nothing exported */
}

/* ---- timing -------------------------------------------------------------------------------- */
static uint64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The CPU time this thread spent in run(path, opaque), the least of REPEATS runs: load on
 * the machine can only add to a run, never take from it. */
static uint64_t least_cpu_ns(void (*run)(const char *, void *), const char *path, void *opaque)
{
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < REPEATS; i++) {
		uint64_t t0 = cpu_ns();
		run(path, opaque);
		uint64_t t = cpu_ns() - t0;
		best = t < best ? t : best;
	}
	return best;
}

/* Forge the shape at n and at SCALE * n into TD's capture, time run on each (after one
 * untimed run: the allocator and the caches warm up), and require the large one to cost
 * at most RATIO_MAX times the small one. */
static void assert_linear(struct th_tmpdir *td, const char *what, unsigned n,
			  void (*forge)(const char *, unsigned), void (*run)(const char *, void *),
			  void *opaque)
{
	forge(td->cap, n);
	run(td->cap, opaque);
	uint64_t small = least_cpu_ns(run, td->cap, opaque);
	forge(td->cap, SCALE * n);
	uint64_t large = least_cpu_ns(run, td->cap, opaque);
	double ratio = (double)large / (double)(small ? small : 1);
	print_message("%s: %.1f ms at %u, %.1f ms at %u: x%.1f (linear ~%d, quadratic ~%d)\n", what,
		      small / 1e6, n, large / 1e6, SCALE * n, ratio, SCALE, SCALE * SCALE);
	assert_true(ratio < RATIO_MAX);
}

/* ---- CTF export: one stream per thread ------------------------------------------------------ */
/* Not a capture ten times as large: the export writes a file per thread, and files cost
 * more than a search through 40,000 threads' streams does, so the search never dominated
 * (on dcf1c4a 4,000 and 40,000 one-event threads cost x14, not x100).  Instead two
 * captures of the same threads and events, whose busy thread's stream is made first or
 * last: the same work, unless finding a stream costs the streams made before it. */
#define CTF_THREADS 5000
#define CTF_EVENTS  (64 * CTF_THREADS) /* of the busy thread */
#define CTF_MAX	    2.0		       /* the same work: ~1; a search: ~5 (dcf1c4a) */

/* On tmpfs: creating a file there costs the same each time (on a disk file system the
 * journal, shared with whatever else runs, made one export cost 4 times another). */
static char ctf_dir[64];  /* removed by the teardown, if a test failed with it there */
static unsigned ctf_runs; /* exports into ctf_dir/0 .. ctf_runs - 1 */

/* Export the capture at path into a new directory: the CPU time it took. */
static uint64_t export_ctf(const char *path)
{
	char dir[700], why[512];
	snprintf(dir, sizeof dir, "%s/%u", ctf_dir, ctf_runs++);
	uint64_t t0 = cpu_ns();
	if (vs_trace_export_ctf(path, dir, why, sizeof why) < 0)
		fail_msg("%s", why);
	uint64_t t = cpu_ns() - t0;
	assert_int_equal(th_count_files(dir, "stream-"), CTF_THREADS); /* one per thread */
	return t;
}

static void forge_busy_thread(const char *path, bool last)
{
	struct fbuf cap = {0};
	forge_shape_busy_thread(&cap, CTF_THREADS, CTF_EVENTS, last);
	assert_int_equal(th_write_file(path, cap.p, cap.len), 0);
	fb_free(&cap);
}

static void test_ctf_export_finds_a_stream_without_a_search(void **state)
{
	struct th_tmpdir *td = *state;
	char first_cap[600], last_cap[600];
	uint64_t first = UINT64_MAX, last = UINT64_MAX;
	snprintf(first_cap, sizeof first_cap, "%s/first.vst", td->dir);
	snprintf(last_cap, sizeof last_cap, "%s/last.vst", td->dir);
	forge_busy_thread(first_cap, false);
	forge_busy_thread(last_cap, true);
	assert_int_equal(tmpdir_make(ctf_dir, sizeof ctf_dir, "/dev/shm", "ctf"), 0);
	/* One export of each untimed (the allocator and the caches warm up), then the two in
	 * turn: whatever else the machine does falls on both alike. */
	export_ctf(first_cap);
	export_ctf(last_cap);
	for (int i = 0; i < REPEATS; i++) {
		uint64_t f = export_ctf(first_cap), l = export_ctf(last_cap);
		first = f < first ? f : first;
		last = l < last ? l : last;
	}
	double ratio = (double)last / (double)(first ? first : 1);
	print_message("ctf export, %u threads, %u events of one: %.1f ms when its stream is made "
		      "first, %.1f ms last: x%.2f\n",
		      CTF_THREADS, CTF_EVENTS, first / 1e6, last / 1e6, ratio);
	assert_true(ratio < CTF_MAX);
}

static void remove_ctf_dir(void)
{
	if (!ctf_dir[0])
		return;
	tmpdir_remove(ctf_dir);
	ctf_dir[0] = '\0';
	ctf_runs = 0;
}

/* ---- trace latency: requests in flight ------------------------------------------------------ */
static void forge_requests(const char *path, unsigned n)
{
	struct fbuf cap = {0};
	forge_shape_requests(&cap, n);
	assert_int_equal(th_write_file(path, cap.p, cap.len), 0);
	fb_free(&cap);
}

/* `trace latency --by queue` of the capture, its output thrown away. */
static void latency_by_queue(const char *path, void *opaque)
{
	const struct vs_latency_opts o = {.by = 1};
	char why[512];
	FILE *out = fopen("/dev/null", "w");
	(void)opaque;
	assert_non_null(out);
	if (vs_trace_latency(&path, 1, &o, out, why, sizeof why) < 0)
		fail_msg("%s", why);
	fclose(out);
}

/* What the lookups found, on a capture of forge_shape_requests' shape: each kick went to
 * the request of its queue, and each completed request of the reused tag was joined with
 * the device's request popped in its own lifetime. */
static void assert_requests_joined(const char *path, unsigned n)
{
	struct vs_lat_set set;
	char why[512];
	if (vs_latency_collect(&path, 1, &set, why, sizeof why) < 0)
		fail_msg("%s", why);
	assert_true(set.driver && set.device);
	assert_int_equal(set.n, 2 * n);
	for (unsigned i = 0; i < n; i++) {
		const struct vs_lat_req *r = &set.r[i];
		assert_int_equal(r->tag, i);
		assert_int_equal(r->q, i + 1);
		assert_int_equal(r->t[VS_LAT_KICK], FORGE_REAL0 + 2ull * i + 1);
		assert_int_equal(r->t[VS_LAT_DONE], 0);
		assert_int_equal(r->t[VS_LAT_POP], 0);
	}
	for (unsigned j = 0; j < n; j++) {
		const struct vs_lat_req *r = &set.r[n + j];
		uint64_t t = FORGE_REAL0 + 2ull * n + 10ull * j;
		assert_int_equal(r->tag, FORGE_REUSED_TAG);
		assert_int_equal(r->t[VS_LAT_SUBMIT], t);
		assert_int_equal(r->t[VS_LAT_POP], t + 2);
		assert_int_equal(r->t[VS_LAT_PUSH], t + 4);
		assert_int_equal(r->t[VS_LAT_DONE], t + 6);
	}
	free(set.r);
}

static void test_latency_of_many_requests_in_flight_is_linear(void **state)
{
	struct th_tmpdir *td = *state;
	forge_requests(td->cap, 100);
	assert_requests_joined(td->cap, 100);
	assert_linear(td, "trace latency --by queue", 2000, forge_requests, latency_by_queue, NULL);
}

static int setup(void **state)
{
	return th_tmpdir_setup(state, "hostile-tools");
}

static int teardown(void **state)
{
	remove_ctf_dir();
	return th_tmpdir_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_fifo_as_a_capture_is_refused_at_once, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_ctf_export_finds_a_stream_without_a_search, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_latency_of_many_requests_in_flight_is_linear,
					    setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
