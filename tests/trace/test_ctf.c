/* SPDX-License-Identifier: MIT */
/*
 * `vioscope trace decode FILE --ctf DIR` read back by babeltrace2: it must read the
 * trace without a warning, and show, thread by thread and event by event, the events
 * our own decoder walks: the same site (event name), the same instant (ns) and the
 * same argument values.  Skipped (77) when babeltrace2 is not installed.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver.h"

#define BABELTRACE "/usr/bin/babeltrace2"

static int setup(void **state)
{
	return th_tmpdir_setup(state, "ctf");
}
/* The export and babeltrace2's output sit beside the directory (td->out + suffix):
 * removed here too, whatever the test did. */
static int teardown(void **state)
{
	struct th_tmpdir *td = *state;
	char cmd[4 * sizeof td->out];
	snprintf(cmd, sizeof cmd, "rm -rf '%s.ctf' '%s.bt' '%s.bterr'", td->out, td->out, td->out);
	if (system(cmd) != 0)
		return -1;
	return th_tmpdir_teardown(state);
}
#define TMPDIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* What one event must look like in babeltrace2's text: its thread, time, name and
 * field values in order (as babeltrace2 prints them). */
struct expect {
	uint32_t tid;
	char time[32];
	char name[160];
	char values[2048];
};
struct expected {
	struct expect *e;
	size_t n, cap;
};

static void add_value(char *out, size_t len, const char *v)
{
	size_t n = strlen(out);
	snprintf(out + n, len - n, "%s%s", n ? "|" : "", v);
}

/* The values of an event's arguments from the raw record, typed by its site. */
static void expected_values(const struct vs_cap_event *ev, char *out, size_t len)
{
	const uint8_t *p = ev->args;
	size_t off = 0;
	char v[1200];
	out[0] = '\0';
	for (unsigned a = 0; a < ev->site->nargs; a++) {
		uint8_t t = ev->site->types[a];
		if (t == VS_ARG_STR || t == VS_ARG_BYTES) {
			uint16_t l;
			memcpy(&l, p + off, 2);
			off += 2;
			l &= (uint16_t)~VS_TRACE_STR_CUT;
			if (t == VS_ARG_STR) {
				snprintf(v, sizeof v, "\"%.*s\"", (int)l, (const char *)p + off);
				add_value(out, len, v);
			} else {
				snprintf(v, sizeof v, "%u", l);
				add_value(out, len, v);
				size_t k = snprintf(v, sizeof v, "[ ");
				for (unsigned i = 0; i < l; i++)
					k += snprintf(v + k, sizeof v - k, "%s[%u] = 0x%X",
						      i ? ", " : "", i, p[off + i]);
				snprintf(v + k, sizeof v - k, " ]");
				add_value(out, len, v);
			}
			off += l;
			continue;
		}
		if (t == VS_ARG_I32 || t == VS_ARG_U32) {
			uint32_t x;
			memcpy(&x, p + off, 4);
			off += 4;
			if (t == VS_ARG_I32)
				snprintf(v, sizeof v, "%d", (int32_t)x);
			else
				snprintf(v, sizeof v, "%u", x);
		} else if (t == VS_ARG_F64 || t == VS_ARG_LDBL) {
			double d;
			memcpy(&d, p + off, 8);
			off += 8;
			snprintf(v, sizeof v, "%g", d);
		} else {
			uint64_t x;
			memcpy(&x, p + off, 8);
			off += 8;
			if (t == VS_ARG_I64)
				snprintf(v, sizeof v, "%lld", (long long)x);
			else
				snprintf(v, sizeof v, "%llu", (unsigned long long)x);
		}
		add_value(out, len, v);
	}
}

static int collect(const struct th_event *te, void *opaque)
{
	struct expected *x = opaque;
	const struct vs_cap_event *ev = te->ev;
	assert_non_null(ev->site); /* these captures lose nothing */
	if (x->n == x->cap) {
		x->cap = x->cap ? 2 * x->cap : 64;
		x->e = realloc(x->e, x->cap * sizeof *x->e);
		assert_non_null(x->e);
	}
	struct expect *e = &x->e[x->n++];
	e->tid = ev->tid;
	snprintf(e->time, sizeof e->time, "[%llu.%09llu]",
		 (unsigned long long)(ev->real_ns / 1000000000u),
		 (unsigned long long)(ev->real_ns % 1000000000u));
	snprintf(e->name, sizeof e->name, "%s:%s:%u", ev->site->provider, ev->site->func,
		 ev->site->line);
	expected_values(ev, e->values, sizeof e->values);
	return 0;
}

/* The values of babeltrace2's last "{ a = 1, b = "x, y", c = [ ... ] }" group,
 * '|'-separated, numbers shown in base 16 as decimal; the first field's name into
 * first_name. */
static void parse_values(const char *line, char *out, size_t len, char *first_name, size_t fnlen)
{
	const char *g = strrchr(line, '{');
	/* the payload is the last top-level group: step back over nested groups */
	for (const char *q = line + strlen(line); q > line; q--)
		if (q[-1] == '{' && (q - line < 3 || strncmp(q - 4, "}, {", 4) == 0)) {
			g = q - 1;
			break;
		}
	out[0] = '\0';
	first_name[0] = '\0';
	assert_non_null(g);
	const char *p = g + 1;
	int depth = 0;
	bool quoted = false, in_value = false, first = true;
	char cur[1200];
	size_t n = 0;
	for (; *p; p++) {
		char c = *p;
		if (quoted) {
			if (c == '\\' && p[1]) {
				cur[n++] = c;
				c = *++p;
			} else if (c == '"') {
				quoted = false;
			}
		} else if (c == '"') {
			quoted = true;
		} else if (c == '[') {
			depth++;
		} else if (c == ']') {
			depth--;
		} else if (depth == 0 && (c == ',' || c == '}')) {
			while (n && cur[n - 1] == ' ')
				n--;
			cur[n] = '\0';
			if (in_value && !strncmp(cur, "0x", 2) && cur[2]) /* base 16: as a number */
				snprintf(cur, sizeof cur, "%llu", strtoull(cur, NULL, 16));
			if (in_value)
				add_value(out, len, cur);
			n = 0;
			in_value = false;
			if (c == '}')
				break;
			continue;
		} else if (depth == 0 && !in_value && c == '=') {
			while (n && cur[n - 1] == ' ')
				n--;
			cur[n] = '\0';
			if (first)
				snprintf(first_name, fnlen, "%.*s", (int)(fnlen - 1),
					 cur[0] == ' ' ? cur + 1 : cur);
			first = false;
			in_value = true;
			n = 0;
			if (p[1] == ' ')
				p++;
			continue;
		}
		if (n < sizeof cur - 2)
			cur[n++] = c;
	}
}

/* Export CAPTURE, run babeltrace2 on it, and compare each thread's events with ours.
 * Returns the number of threads (stream files) seen. */
static unsigned export_and_compare(struct th_tmpdir *td, const char *first_field_of_ptr_event)
{
	char dir[700], out[700], err[700];
	struct expected x = {0};

	th_walk_or_fail(td->cap, collect, &x);
	assert_true(x.n > 0);
	snprintf(dir, sizeof dir, "%s.ctf", td->out);
	assert_int_equal(th_cli(td, "decode", td->cap, "--ctf", dir, NULL), 0);

	snprintf(out, sizeof out, "%s.bt", td->out);
	snprintf(err, sizeof err, "%s.bterr", td->out);
	const char *bt[] = {BABELTRACE, "--clock-seconds", "--no-delta", dir, NULL};
	assert_int_equal(th_run(bt, NULL, out, err), 0);
	size_t errlen = 1;
	char *errtext = th_read_file(err, &errlen);
	assert_non_null(errtext);
	if (errlen)
		fail_msg("babeltrace2 said: %s", errtext); /* no warning, no error */
	free(errtext);

	size_t len;
	char *text = th_read_file(out, &len);
	assert_non_null(text);
	size_t matched = 0;
	bool *used = calloc(x.n, sizeof *used);
	assert_non_null(used);
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		/* [time] (host?) name: { tid = N, thread_name = "..." }, { fields } */
		char *tidp = strstr(line, "{ tid = ");
		assert_non_null(tidp);
		uint32_t tid = (uint32_t)strtoul(tidp + 8, NULL, 10);
		/* this thread's next event of ours */
		size_t i = 0;
		while (i < x.n && (used[i] || x.e[i].tid != tid))
			i++;
		if (i == x.n)
			fail_msg("babeltrace2 shows an event we do not have: %s", line);
		used[i] = true;
		struct expect *e = &x.e[i];
		if (strncmp(line, e->time, strlen(e->time)) != 0)
			fail_msg("time: ours %s, babeltrace2: %s", e->time, line);
		char name[200];
		snprintf(name, sizeof name, " %s: ", e->name);
		if (!strstr(line, name))
			fail_msg("event name: ours %s, babeltrace2: %s", e->name, line);
		char values[2048], first[64];
		parse_values(line, values, sizeof values, first, sizeof first);
		if (strcmp(values, e->values) != 0)
			fail_msg("values of %s: ours '%s', babeltrace2's '%s'", e->name, e->values,
				 values);
		if (first_field_of_ptr_event && strstr(e->name, ":214") && strstr(line, "ptr ="))
			assert_string_equal(first, first_field_of_ptr_event);
		matched++;
	}
	assert_int_equal(matched, x.n); /* and none of ours missing */
	free(used);
	free(text);
	free(x.e);

	unsigned streams = 0;
	DIR *d = opendir(dir);
	assert_non_null(d);
	for (struct dirent *de; (de = readdir(d));)
		streams += !strncmp(de->d_name, "stream-", 7);
	closedir(d);
	char cmd[800];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	unlink(out);
	unlink(err);
	return streams;
}

/* Scenario: one event of every argument type (ints of each width and sign, doubles,
 * a long double, a pointer, strings short, long and empty, a byte array, no
 * argument, an inline helper's event): babeltrace2 shows each with the same time
 * and values, fields named from the format ("ptr %p" -> ptr). */
static void test_every_argument_type(void **state)
{
	struct th_tmpdir *td = *state;
	const char *argv[] = {WORKLOAD_ALL, "kinds", NULL};
	const char *keep[] = {"VIOSCOPE_TRACE_KEEP=1", "VIOSCOPE_TRACE=verbose:all", NULL};
	pid_t pid = th_run_workload(td, argv, keep, NULL);
	th_dump(td, pid);
	assert_int_equal(export_and_compare(td, "ptr"), 1);
	unlink(td->cap);
}

/* Scenario: three threads of 29 numbered events each: three streams, each thread's
 * events in its order, at the same instants.  (29: the only empty string is a
 * thread's first; babeltrace2 2.0 shows an empty string field that follows a
 * non-empty one with the earlier value, docs/CAPTURE-FORMAT.md.) */
static void test_one_stream_per_thread(void **state)
{
	struct th_tmpdir *td = *state;
	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "29", "-t", "3", NULL};
	const char *keep[] = {"VIOSCOPE_TRACE_KEEP=1", NULL};
	pid_t pid = th_run_workload(td, argv, keep, NULL);
	th_dump(td, pid);
	assert_int_equal(export_and_compare(td, NULL), 3);
	unlink(td->cap);
}

/* Scenario: an export never overwrites: a directory that already holds a trace is
 * refused with a message saying so. */
static void test_existing_trace_is_not_replaced(void **state)
{
	struct th_tmpdir *td = *state;
	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "5", NULL};
	const char *keep[] = {"VIOSCOPE_TRACE_KEEP=1", NULL};
	char dir[700];
	pid_t pid = th_run_workload(td, argv, keep, NULL);
	th_dump(td, pid);
	snprintf(dir, sizeof dir, "%s.ctf", td->out);
	assert_int_equal(th_cli(td, "decode", td->cap, "--ctf", dir, NULL), 0);
	assert_int_equal(th_cli(td, "decode", td->cap, "--ctf", dir, NULL), 3);
	assert_true(th_file_contains(td->err, "already holds a trace"));
	char cmd[800];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
	unlink(td->cap);
}

int main(void)
{
	if (access(BABELTRACE, X_OK) != 0) {
		fprintf(stderr, "skipped: %s is not installed (scripts/deps.sh)\n", BABELTRACE);
		return 77;
	}
	const struct CMUnitTest tests[] = {
	    TMPDIR_TEST(test_every_argument_type),
	    TMPDIR_TEST(test_one_stream_per_thread),
	    TMPDIR_TEST(test_existing_trace_is_not_replaced),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
