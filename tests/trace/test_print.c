/* SPDX-License-Identifier: MIT */
/*
 * The print backend: the workload built cold-print / all-print writes formatted
 * lines to $VIOSCOPE_TRACE_FILE.  Each line must carry the decoder's prefix
 * ("YYYY-MM-DD HH:MM:SS.nnnnnnnnn TID LEVEL FLAG FUNC: ") and the message, and read
 * the same as `vioscope trace decode` of the same events from the binary flavour.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver.h"

/* Each test runs in its own VIOSCOPE_TRACE_DIR (helpers.h, struct th_tmpdir). */
static int setup(void **state)
{
	return th_tmpdir_setup(state, "print");
}
#define TMPDIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup, th_tmpdir_teardown)

static void now_text(char *out, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	vs_format_walltime(out, len, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec);
}

/* Lines of a text file, split in place. */
static unsigned split_lines(char *text, char **lines, unsigned max)
{
	unsigned n = 0;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l && n < max;
	     l = strtok_r(NULL, "\n", &save))
		lines[n++] = l;
	return n;
}

/* What a print-flavour workload wrote in print mode, and when it ran. */
struct printed {
	pid_t pid;
	char *text; /* the whole file (free it), split in place into: */
	char *lines[16];
	unsigned n;
	char before[64], after[64]; /* wall time before the start, after the end */
};

static void run_print(struct th_tmpdir *td, const char *workload, struct printed *p)
{
	char file[600], env_file[700];
	snprintf(file, sizeof file, "%s/print.txt", td->dir);
	snprintf(env_file, sizeof env_file, "VIOSCOPE_TRACE_FILE=%s", file);
	const char *argv[] = {workload, "print", NULL};
	const char *env[] = {env_file, "VIOSCOPE_TRACE=verbose:all", NULL};
	now_text(p->before, sizeof p->before);
	p->pid = th_run_workload(td, argv, env, NULL);
	now_text(p->after, sizeof p->after);
	p->text = th_read_file(file, NULL);
	assert_non_null(p->text);
	p->n = split_lines(p->text, p->lines, 16);
	unlink(file);
}

/* Check line I: a wall time within the run, the process's tid, then exactly the
 * rest of the prefix ("LEVEL app.FLAG FUNC: " as vs_format_prefix lays it out: the
 * workload is the default provider, app) and MSG. */
static void check_line(const struct printed *p, unsigned i, unsigned level, const char *flag,
		       const char *caller, const char *func, const char *msg)
{
	const char *line = p->lines[i];
	regex_t re;
	char want[512], prefix[256];

	assert_int_equal(regcomp(&re,
				 "^[0-9]{4}-[0-9]{2}-[0-9]{2} "
				 "[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{9} "
				 "[0-9]+ +[A-Z]+ +app\\.[A-Z]+ +[A-Za-z_>]+: ",
				 REG_EXTENDED | REG_NOSUB),
			 0);
	int m = regexec(&re, line, 0, NULL, 0);
	regfree(&re);
	if (m != 0)
		fail_msg("line does not have the prefix format: \"%s\"", line);
	/* the time is when the event happened: between the run's start and end */
	assert_true(strncmp(line, p->before, 29) >= 0);
	assert_true(strncmp(line, p->after, 29) <= 0);
	/* everything after the time is the decoder's prefix and the message */
	vs_format_prefix(prefix, sizeof prefix, 0, (uint32_t)p->pid, level, "app", flag, caller,
			 func);
	snprintf(want, sizeof want, "%s%s", strchr(prefix, '.') + 11, msg);
	assert_string_equal(line + 30, want);
}

/* Scenario: cold-print writes one line per cold-path event with the decoder's
 * prefix and the formatted message; the _HP event is compiled out; an inline
 * helper shows only itself (caller naming needs hot sites). */
static void test_cold_print_lines(void **state)
{
	struct th_tmpdir *td = *state;
	struct printed p;

	run_print(td, WORKLOAD_COLD_PRINT, &p);
	assert_int_equal(p.n, 4);
	check_line(&p, 0, VS_LEVEL_INFO, "TEST", NULL, "wl_print_events", "print 42 hello");
	check_line(&p, 1, VS_LEVEL_ERROR, "INIT", NULL, "wl_print_events",
		   "error path rc=-5 why=no such thing");
	check_line(&p, 2, VS_LEVEL_WARNING, "QUEUE", NULL, "wl_print_events", "warn 7 2.50");
	check_line(&p, 3, VS_LEVEL_INFO, "TEST", NULL, "wl_helper", "helper v=9");
	free(p.text);
}

/* Scenario: all-print also prints the _HP event, and the helper as caller>callee. */
static void test_all_print_lines(void **state)
{
	struct th_tmpdir *td = *state;
	struct printed p;

	run_print(td, WORKLOAD_ALL_PRINT, &p);
	assert_int_equal(p.n, 5);
	check_line(&p, 3, VS_LEVEL_VERBOSE, "IO", NULL, "wl_print_events", "hot 1");
	check_line(&p, 4, VS_LEVEL_INFO, "TEST", "wl_print_events", "wl_helper", "helper v=9");
	free(p.text);
}

/* Past the time and the tid: "LEVEL FLAG FUNC: message". */
static const char *after_tid(const char *line)
{
	const char *p = line + 30;
	while (*p >= '0' && *p <= '9')
		p++;
	while (*p == ' ')
		p++;
	return p;
}

/* Scenario: the same events through the binary flavour (all), dumped and decoded
 * by `vioscope trace decode`, read exactly like the all-print lines after the
 * time and tid. */
static void test_print_matches_decoder(void **state)
{
	struct th_tmpdir *td = *state;
	struct printed p;
	char *dtext, *dlines[16];
	unsigned dn;

	run_print(td, WORKLOAD_ALL_PRINT, &p);

	const char *argv[] = {WORKLOAD_ALL, "print", NULL};
	const char *env[] = {"VIOSCOPE_TRACE=verbose:all", "VIOSCOPE_TRACE_KEEP=1", NULL};
	th_dump(td, th_run_workload(td, argv, env, NULL));
	assert_int_equal(th_cli(td, "decode", td->cap, NULL), 0);
	dtext = th_read_file(td->out, NULL);
	assert_non_null(dtext);
	dn = split_lines(dtext, dlines, 16);
	assert_int_equal(dn, p.n);
	for (unsigned i = 0; i < p.n; i++)
		assert_string_equal(after_tid(dlines[i]), after_tid(p.lines[i]));
	free(p.text);
	free(dtext);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TMPDIR_TEST(test_cold_print_lines),
	    TMPDIR_TEST(test_all_print_lines),
	    TMPDIR_TEST(test_print_matches_decoder),
	};
	return cmocka_run_group_tests_name("trace.print", tests, NULL, NULL);
}
