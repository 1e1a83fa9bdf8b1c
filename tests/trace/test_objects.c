/* SPDX-License-Identifier: MIT */
/*
 * A program, the shared library it links and the modules it loads, each traced as
 * its own provider in its own flavour (tests/trace/objects/): every object registers
 * when it is loaded and is decoded by the tools; dlclose() is safe and a module
 * loaded again is a new object; flags are addressed per provider; a provider
 * declared twice with different flags is reported at load with both names; a process
 * has one runtime.
 *
 * trace_objects runs a script of steps (objects/obj_main.c); with VIOSCOPE_TRACE_KEEP
 * its trace file stays after it exits, for `trace show` and `trace dump`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
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

#define MAX_STEPS 40

/* Run trace_objects (PROGRAM) with STEPS in TD's directory, keeping its trace file,
 * stderr to td->err; it must exit 0.  Returns its pid. */
static pid_t run_objects(const struct th_tmpdir *td, const char *program, const char *spec,
			 const char *extra_env, const char *const steps[])
{
	const char *argv[MAX_STEPS + 2] = {program};
	char trace[256];
	unsigned n = 1;
	for (unsigned i = 0; steps[i]; i++)
		argv[n++] = steps[i];
	argv[n] = NULL;
	snprintf(trace, sizeof trace, "VIOSCOPE_TRACE=%s", spec);
	const char *env[] = {td->env_dir, "VIOSCOPE_TRACE_KEEP=1", trace, extra_env, NULL};
	pid_t pid = th_spawn(argv, env, NULL, NULL, td->err);
	assert_true(pid > 0);
	int st = th_wait(pid);
	if (st != 0) {
		char *err = th_read_file(td->err, NULL);
		fail_msg("%s exited %d: %s", program, st, err ? err : "");
	}
	return pid;
}

/* `trace decode` of PID's kept file into td->out (dumped first into td->cap). */
static char *dump_and_decode(const struct th_tmpdir *td, pid_t pid)
{
	th_dump(td, pid);
	assert_int_equal(th_cli(td, "decode", td->cap, NULL), 0);
	char *out = th_read_file(td->out, NULL);
	assert_non_null(out);
	return out;
}

static unsigned count(const char *text, const char *needle)
{
	unsigned n = 0;
	for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Where the test programs and modules are. */
static void objects_dir(char *out, size_t len)
{
	snprintf(out, len, "%s", OBJECTS);
	char *slash = strrchr(out, '/');
	if (slash)
		*slash = '\0';
}

/* Scenario: sites in the program (cold), in the shared library it links (all: its _HP
 * site is compiled in) and in a module it loads (cold) are recorded into one trace
 * file and decoded with their provider, flag and function; a byte array shows as
 * hex.  `trace show` lists the three objects with their flavours. */
static void test_every_object_decodes(void **state)
{
	struct th_tmpdir *td = *state;
	const char *steps[] = {"host", "1", "liba", "2", "load", "trace_obj_plugin.so",
			       "call", "2", "host", "1", NULL};
	pid_t pid = run_objects(td, OBJECTS, "verbose:all", NULL, steps);
	char *out = dump_and_decode(td, pid);
	assert_int_equal(count(out, " host.START     main: host start 0\n"), 2);
	assert_int_equal(count(out, " host.NET       main: host net 0\n"), 2);
	assert_int_equal(count(out, " liba.NET       obj_a_emit: liba net 1\n"), 1);
	assert_int_equal(count(out, " VERB  liba.DISK      obj_a_emit: liba disk hot 1\n"), 1);
	assert_int_equal(count(out, " liba.DISK      obj_a_emit: liba bytes 00ff10\n"), 1);
	assert_int_equal(count(out, " plug.NET       module_emit: plug net 1 load 1\n"), 1);
	/* in the order they happened, whichever object they come from */
	assert_true(strstr(out, "liba bytes") < strstr(out, "plug net 0"));
	assert_non_null(strstr(strstr(out, "plug net 1"), "host start 0"));
	free(out);

	char dir[PATH_MAX], want[PATH_MAX + 64];
	objects_dir(dir, sizeof dir);
	char pidstr[32];
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	assert_int_equal(th_cli(td, "show", pidstr, NULL), 0);
	snprintf(want, sizeof want, "all              3 sites  %s/libtrace_obj_a.so\n", dir);
	assert_true(th_file_contains(td->out, want));
	snprintf(want, sizeof want, "cold             2 sites  %s/trace_objects\n", dir);
	assert_true(th_file_contains(td->out, want));
	snprintf(want, sizeof want, "cold             1 sites  %s/trace_obj_plugin.so\n", dir);
	assert_true(th_file_contains(td->out, want));
	assert_true(
	    th_file_contains(td->out, "  liba         verbose  on: all  flags: net disk\n"));
}

/* Scenario: a module's events recorded before dlclose() still decode after it (its
 * metadata stays); loaded again, the module is a new object whose events decode
 * too; the program goes on tracing from its other objects after each dlclose(). */
static void test_dlclose_then_load_again(void **state)
{
	struct th_tmpdir *td = *state;
	const char *steps[] = {"load", "trace_obj_plugin.so", "call", "2", "unload", "liba", "1",
			       "load", "trace_obj_plugin.so", "call", "1", "unload", "host", "1",
			       NULL};
	pid_t pid = run_objects(td, OBJECTS, "verbose:all", NULL, steps);
	char *out = dump_and_decode(td, pid);
	assert_int_equal(count(out, "module_emit: plug net 0 load 1\n"), 1);
	assert_int_equal(count(out, "module_emit: plug net 1 load 1\n"), 1);
	assert_int_equal(count(out, "module_emit: plug net 0 load 2\n"), 1);
	assert_true(strstr(out, "load 1\n") < strstr(out, "liba net 0"));
	assert_true(strstr(out, "liba net 0") < strstr(out, "load 2\n"));
	assert_true(strstr(out, "load 2\n") < strstr(out, "host net 0"));
	free(out);

	char pidstr[32];
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	assert_int_equal(th_cli(td, "show", pidstr, NULL), 0);
	char *show = th_read_file(td->out, NULL);
	assert_non_null(show);
	assert_int_equal(count(show, "/trace_obj_plugin.so  (unloaded)\n"), 2);
	assert_int_equal(count(show, "(unloaded)"), 2); /* the others were there to the end */
	free(show);
}

/* Scenario: a print-flavour module beside binary-flavour objects: its events are
 * printed as they happen (to VIOSCOPE_TRACE_FILE), the others go to the rings. */
static void test_print_module_beside_binary_objects(void **state)
{
	struct th_tmpdir *td = *state;
	char print_file[700], env[720];
	snprintf(print_file, sizeof print_file, "%s.print", td->out);
	snprintf(env, sizeof env, "VIOSCOPE_TRACE_FILE=%s", print_file);
	const char *steps[] = {"host", "1", "load",   "trace_obj_plugin_print.so",
			       "call", "2", "unload", "liba",
			       "1",    NULL};
	pid_t pid = run_objects(td, OBJECTS, "info:all", env, steps);
	char *printed = th_read_file(print_file, NULL);
	assert_non_null(printed);
	assert_int_equal(count(printed, "\n"), 2);
	assert_int_equal(count(printed, " INFO  plug.NET       module_emit: plug print 1 load 1\n"),
			 1);
	free(printed);
	unlink(print_file);
	char *out = dump_and_decode(td, pid);
	assert_int_equal(count(out, "plug print"), 0);
	assert_int_equal(count(out, "host net 0\n"), 1);
	assert_int_equal(count(out, "liba net 0\n"), 1);
	free(out);
}

/* A trace_objects run that stops at each "sync" step until we let it go. */
struct synced {
	pid_t pid;
	int ready, go;
};

static void start_synced(const struct th_tmpdir *td, struct synced *s, const char *spec,
			 const char *const steps[])
{
	int r[2], g[2];
	char rfd[16], gfd[16], trace[256];
	const char *argv[MAX_STEPS + 6] = {OBJECTS, "-r", rfd, "-g", gfd};
	unsigned n = 5;
	assert_int_equal(th_pipe(r), 0);
	assert_int_equal(th_pipe(g), 0);
	snprintf(rfd, sizeof rfd, "%d", r[1]);
	snprintf(gfd, sizeof gfd, "%d", g[0]);
	for (unsigned i = 0; steps[i]; i++)
		argv[n++] = steps[i];
	argv[n] = NULL;
	snprintf(trace, sizeof trace, "VIOSCOPE_TRACE=%s", spec);
	const char *env[] = {td->env_dir, "VIOSCOPE_TRACE_KEEP=1", trace, NULL};
	const int keep[] = {r[1], g[0], -1};
	s->pid = th_spawn(argv, env, keep, NULL, td->err);
	assert_true(s->pid > 0);
	close(r[1]);
	close(g[0]);
	s->ready = r[0];
	s->go = g[1];
}

/* Wait until it stops at its next sync step. */
static void at_sync(struct synced *s)
{
	assert_int_equal(th_read_byte(s->ready), 's');
}

static void let_go(struct synced *s)
{
	assert_int_equal(write(s->go, "g", 1), 1);
}

/* Scenario: liba and plug have the same flag names, each its own control words.
 * `trace enable PID verbose:liba.net` turns on liba's NET only; `verbose:net` the
 * NET flag of every provider; `info:plug.all,host.start` all of plug and host's
 * START.  Names that match nothing are refused, naming what exists. */
static void test_flags_addressed_per_provider(void **state)
{
	struct th_tmpdir *td = *state;
	struct synced s;
	char pid[32];
	const char *steps[] = {"load", "trace_obj_plugin.so",
			       "sync", "host",
			       "1",    "liba",
			       "1",    "call",
			       "1",    "sync",
			       "host", "1",
			       "liba", "1",
			       "call", "1",
			       "sync", "host",
			       "1",    "liba",
			       "1",    "call",
			       "1",    NULL};
	start_synced(td, &s, "off", steps);
	snprintf(pid, sizeof pid, "%d", (int)s.pid);

	at_sync(&s);
	assert_int_equal(th_cli(td, "enable", pid, "verbose:liba.net", NULL), 0);
	assert_int_equal(th_cli(td, "enable", pid, "verbose:nosuch.net", NULL), 1);
	assert_true(th_file_contains(td->err, "no provider 'nosuch' in 'nosuch.net' (providers: "));
	assert_int_equal(th_cli(td, "enable", pid, "verbose:liba.cpu", NULL), 1);
	assert_true(
	    th_file_contains(td->err, "provider 'liba' has no flag 'cpu' (its flags: net, disk)"));
	assert_int_equal(th_cli(td, "enable", pid, "verbose:cpu", NULL), 1);
	assert_true(th_file_contains(td->err, "unknown flag 'cpu' (known: "));
	let_go(&s);
	at_sync(&s);
	assert_int_equal(th_cli(td, "enable", pid, "verbose:net", NULL), 0);
	let_go(&s);
	at_sync(&s);
	assert_int_equal(th_cli(td, "enable", pid, "info:plug.all,host.start", NULL), 0);
	assert_int_equal(th_cli(td, "list", NULL), 0);
	assert_true(th_file_contains(td->out, " info     host.start,plug.all "));
	let_go(&s);
	close(s.ready);
	close(s.go);
	assert_int_equal(th_wait(s.pid), 0);

	char *out = dump_and_decode(td, s.pid);
	assert_int_equal(count(out, "liba net 0\n"), 2);	/* first and second batch */
	assert_int_equal(count(out, "plug net 0 load 1\n"), 2); /* second and third */
	assert_int_equal(count(out, "host net 0\n"), 1);	/* second */
	assert_int_equal(count(out, "host start 0\n"), 1);	/* third */
	assert_int_equal(count(out, "liba disk hot"), 0);	/* never its DISK flag */
	free(out);
}

/* Scenario: $VIOSCOPE_TRACE names a provider that is not loaded yet: the program is
 * told (a typo would look the same) and the setting applies to the provider when a
 * module brings it. */
static void test_spec_applies_to_providers_loaded_later(void **state)
{
	struct th_tmpdir *td = *state;
	const char *steps[] = {"host", "1", "liba", "1", "load", "trace_obj_plugin.so",
			       "call", "1", NULL};
	pid_t pid = run_objects(td, OBJECTS, "verbose:plug.net", NULL, steps);
	assert_true(
	    th_file_contains(td->err, "VIOSCOPE_TRACE=verbose:plug.net: no provider 'plug'"));
	assert_true(th_file_contains(td->err, "and to providers loaded later"));
	char *out = dump_and_decode(td, pid);
	assert_int_equal(count(out, "plug net 0 load 1\n"), 1);
	assert_int_equal(count(out, "host"), 0);
	assert_int_equal(count(out, "liba"), 0);
	free(out);
}

/* Scenario: a module declares provider liba with other flags than the library that
 * declared it first: reported when the module is loaded, naming both objects and
 * translation units; the module's liba sites stay off, the library's keep working. */
static void test_clash_between_objects_reported_at_load(void **state)
{
	struct th_tmpdir *td = *state;
	char dir[PATH_MAX], want[2 * PATH_MAX + 256];
	const char *steps[] = {"liba", "1", "load", "trace_obj_clash.so", "call", "1", "unload",
			       "liba", "1", NULL};
	pid_t pid = run_objects(td, OBJECTS, "verbose:all", NULL, steps);
	objects_dir(dir, sizeof dir);
	snprintf(want, sizeof want,
		 "vioscope trace: provider 'liba' is declared with different flags in "
		 "%s/libtrace_obj_a.so (",
		 dir);
	assert_true(th_file_contains(td->err, want));
	assert_true(th_file_contains(td->err, "/obj_lib.c: NET DISK ) and in "));
	snprintf(want, sizeof want,
		 "%s/trace_obj_clash.so (%s/obj_module.c: NET CPU ): the sites of 'liba' in "
		 "%s/trace_obj_clash.so stay disabled",
		 dir, OBJECTS_SRC, dir);
	assert_true(th_file_contains(td->err, want));
	char *out = dump_and_decode(td, pid);
	assert_int_equal(count(out, "liba net 0\n"), 2);
	assert_int_equal(count(out, "clash net"), 0);
	free(out);
}

/* Scenario: two translation units of one module declare provider mixed with
 * different flags: reported at load naming both units; no site of it is on. */
static void test_clash_within_an_object_reported_at_load(void **state)
{
	struct th_tmpdir *td = *state;
	char want[2 * PATH_MAX + 256];
	const char *steps[] = {"load", "trace_obj_mixed.so", "call", "2", "unload", "host", "1",
			       NULL};
	pid_t pid = run_objects(td, OBJECTS, "verbose:all", NULL, steps);
	snprintf(want, sizeof want, "(%s/obj_mixed_a.c: ONE TWO ) and in ", OBJECTS_SRC);
	assert_true(th_file_contains(td->err, "provider 'mixed' is declared with different flags"));
	assert_true(th_file_contains(td->err, want));
	snprintf(want, sizeof want, "(%s/obj_mixed_b.c: ONE THREE ): the sites of 'mixed'",
		 OBJECTS_SRC);
	assert_true(th_file_contains(td->err, want));
	char *out = dump_and_decode(td, pid);
	assert_int_equal(count(out, "mixed"), 0);
	assert_int_equal(count(out, "host net 0\n"), 1);
	free(out);
}

/* Scenario: one module whose translation units have different flavours (all and
 * cold) but the same provider: no clash; the all unit's _HP site records, the cold
 * unit's is compiled out, both cold sites record; `trace show` gives the object's
 * flavours as cold+all. */
static void test_flavours_mixed_within_an_object(void **state)
{
	struct th_tmpdir *td = *state;
	const char *steps[] = {"load", "trace_obj_tiers.so", "call", "2", "sync", "unload", NULL};
	struct synced s;
	char pid[32], dir[PATH_MAX], want[PATH_MAX + 64];
	start_synced(td, &s, "verbose:all", steps);
	snprintf(pid, sizeof pid, "%d", (int)s.pid);
	at_sync(&s);
	assert_int_equal(th_cli(td, "show", pid, NULL), 0);
	objects_dir(dir, sizeof dir);
	snprintf(want, sizeof want, "cold+all         3 sites  %s/trace_obj_tiers.so\n", dir);
	assert_true(th_file_contains(td->out, want));
	let_go(&s);
	close(s.ready);
	close(s.go);
	assert_int_equal(th_wait(s.pid), 0);
	char *err = th_read_file(td->err, NULL);
	assert_non_null(err);
	assert_null(strstr(err, "declared with different flags"));
	free(err);
	char *out = dump_and_decode(td, s.pid);
	assert_int_equal(count(out, " tiers.NET      module_emit: tiers a cold 1 load 1\n"), 1);
	assert_int_equal(count(out, " VERB  tiers.DISK     module_emit: tiers a hot 1\n"), 1);
	assert_int_equal(count(out, " tiers.NET      tiers_b: tiers b cold 1\n"), 1);
	assert_int_equal(count(out, "tiers b hot"), 0);
	free(out);
}

/* Scenario: a program with the runtime linked in statically (its entry points
 * exported) loads a library and a module that link libvioscope_trace.so: they all
 * use the program's runtime, so the process has one trace file with every event. */
static void test_static_program_shares_its_runtime(void **state)
{
	struct th_tmpdir *td = *state;
	const char *steps[] = {"host", "1", "liba",   "1", "load", "trace_obj_plugin.so",
			       "call", "1", "unload", NULL};
	pid_t pid = run_objects(td, OBJECTS_STATIC, "verbose:all", NULL, steps);
	assert_int_equal(th_count_files(td->dir, VS_SHM_PREFIX), 1);
	char *out = dump_and_decode(td, pid);
	assert_int_equal(count(out, "host net 0\n"), 1);
	assert_int_equal(count(out, "liba net 0\n"), 1);
	assert_int_equal(count(out, "plug net 0 load 1\n"), 1);
	free(out);
}

/* Scenario: a program with the runtime linked in without exporting it loads a module
 * that brings libvioscope_trace.so, a second copy: that copy does not take over the
 * process's trace file, it says so, and the module's sites stay off. */
static void test_second_runtime_refuses_clearly(void **state)
{
	struct th_tmpdir *td = *state;
	const char *steps[] = {"host", "1", "load", "trace_obj_plugin.so", "call", "1", "unload",
			       "host", "1", NULL};
	pid_t pid = run_objects(td, OBJECTS_NOEXPORT, "verbose:all", NULL, steps);
	assert_true(th_file_contains(td->err, "/trace_obj_plugin.so: this process has another copy "
					      "of the trace runtime"));
	assert_int_equal(th_count_files(td->dir, VS_SHM_PREFIX), 1);
	char *out = dump_and_decode(td, pid);
	assert_int_equal(count(out, "host net 0\n"), 2);
	assert_int_equal(count(out, "plug"), 0);
	free(out);
}

/* Scenario: `trace record` attaches while the program and its library are the only
 * objects; then the program loads a module, emits from it, unloads it and emits from
 * its library again.  The capture holds the module's metadata, written after the
 * recording started, and its events decode in order between the others. */
static void test_record_across_load_and_unload(void **state)
{
	struct th_tmpdir *td = *state;
	struct synced s;
	struct vs_shm shm;
	const char *steps[] = {"host",	 "1",	 "sync", "load", "trace_obj_plugin.so", "call", "2",
			       "unload", "liba", "1",	 NULL};
	start_synced(td, &s, "verbose:all", steps);
	at_sync(&s);
	pid_t rec = th_start_recording(td, s.pid, td->cap, NULL, &shm);
	vs_shm_close(&shm);
	let_go(&s);
	close(s.ready);
	close(s.go);
	assert_int_equal(th_wait(s.pid), 0);
	assert_int_equal(th_wait(rec), 0); /* the recording ends with the process */
	assert_int_equal(th_cli(td, "decode", td->cap, NULL), 0);
	char *out = th_read_file(td->out, NULL);
	assert_non_null(out);
	assert_int_equal(count(out, " plug.NET       module_emit: plug net 0 load 1\n"), 1);
	assert_int_equal(count(out, " plug.NET       module_emit: plug net 1 load 1\n"), 1);
	assert_int_equal(count(out, " liba.NET       obj_a_emit: liba net 0\n"), 1);
	assert_true(strstr(out, "plug net 1 load 1") < strstr(out, "liba net 0"));
	free(out);
}

static int setup(void **state)
{
	return th_tmpdir_setup(state, "objects");
}

static int teardown(void **state)
{
	return th_tmpdir_teardown(state);
}

#define OBJ_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    OBJ_TEST(test_every_object_decodes),
	    OBJ_TEST(test_dlclose_then_load_again),
	    OBJ_TEST(test_record_across_load_and_unload),
	    OBJ_TEST(test_print_module_beside_binary_objects),
	    OBJ_TEST(test_flags_addressed_per_provider),
	    OBJ_TEST(test_spec_applies_to_providers_loaded_later),
	    OBJ_TEST(test_clash_between_objects_reported_at_load),
	    OBJ_TEST(test_clash_within_an_object_reported_at_load),
	    OBJ_TEST(test_flavours_mixed_within_an_object),
	    OBJ_TEST(test_static_program_shares_its_runtime),
	    OBJ_TEST(test_second_runtime_refuses_clearly),
	};
	return cmocka_run_group_tests_name("trace.objects", tests, NULL, NULL);
}
