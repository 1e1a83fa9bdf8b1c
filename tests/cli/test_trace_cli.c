/* SPDX-License-Identifier: MIT */
/*
 * `vioscope trace ...` as a user meets it (issue 24): the real binaries run as child
 * processes against a real target (vioscope-all target with a RAM LUN, driven by
 * `vioscope-all bench`) or the trace tests' workload, each test in its own
 * VIOSCOPE_TRACE_DIR (tests/trace/helpers.h).  One scenario per test: the documented
 * spec records what it names; `trace show` lists the flags that have sites; a spec that
 * selects no site is a warning naming those; one recorder at a time (a second refused,
 * --force takes over, a recorder that died detected); captures never overwritten;
 * `trace live` filters without changing the process; Perfetto output names processes
 * and threads; list and show as JSON; every subcommand's help; the exit status table.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver.h"
#include "util/util.h"
#include "workload.h"

#define DEADLINE_MS 60000

/* A test's directory (helpers.h), and the children a failed test would leave running:
 * killed at teardown if still ours and not reaped (a reaped pid is never signalled: it
 * may be another process's by then). */
struct fixture {
	struct th_tmpdir td; /* first: the tests take *state as their struct th_tmpdir */
	pid_t children[16];
	unsigned nchildren;
};
static struct fixture *current;

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof *f);
	if (!f || th_tmpdir_init(&f->td, "trace-cli") < 0) {
		free(f);
		return -1;
	}
	current = f;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	for (unsigned i = 0; i < f->nchildren; i++)
		if (waitpid(f->children[i], NULL, WNOHANG) == 0) {
			kill(f->children[i], SIGKILL);
			waitpid(f->children[i], NULL, 0);
		}
	th_tmpdir_fini(&f->td);
	free(f);
	current = NULL;
	return 0;
}
#define TMPDIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

/* A child of this test, killed at teardown if the test ends before reaping it. */
static pid_t watched(pid_t pid)
{
	assert_true(pid > 0);
	assert_true(current->nchildren < sizeof current->children / sizeof current->children[0]);
	current->children[current->nchildren++] = pid;
	return pid;
}

/* A path in the test's own directory (removed with it). */
static void td_path(const struct th_tmpdir *td, char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", td->dir, name);
}

/* ---- a real target: `vioscope-all target` with a RAM LUN --------------------------------- */
struct target {
	pid_t pid;
	char pidstr[32];
	char sock[600], shm[600], log[600];
};

static bool target_ready(void *opaque)
{
	struct target *t = opaque;
	struct stat st;
	if (waitpid(t->pid, NULL, WNOHANG) != 0)
		fail_msg("the target exited before it listened (log: %s)", t->log);
	return stat(t->shm, &st) == 0 && stat(t->sock, &st) == 0 && S_ISSOCK(st.st_mode);
}

static void target_start(const struct th_tmpdir *td, struct target *t)
{
	td_path(td, t->sock, sizeof t->sock, "target.sock");
	td_path(td, t->log, sizeof t->log, "target.log");
	const char *argv[] = {VIOSCOPE_ALL, "target",	 "--socket", t->sock,
			      "--lun",	    "0:ram=64M", NULL};
	const char *env[] = {td->env_dir, NULL};
	t->pid = watched(th_spawn(argv, env, NULL, t->log, t->log));
	snprintf(t->pidstr, sizeof t->pidstr, "%d", (int)t->pid);
	th_shm_path(t->shm, sizeof t->shm, td->dir, t->pid);
	assert_true(wait_until(target_ready, t, DEADLINE_MS));
}

static void target_stop(struct target *t)
{
	assert_int_equal(kill(t->pid, SIGTERM), 0);
	int rc = th_wait_within(t->pid, DEADLINE_MS);
	assert_true(rc == 0 || rc == 128 + SIGTERM);
}

/* Requests through the target: the bench's initiator, 0.3 s of 4 KiB random reads. */
static void drive_io(const struct th_tmpdir *td, const struct target *t)
{
	char out[600];
	td_path(td, out, sizeof out, "bench.txt");
	const char *argv[] = {VIOSCOPE_ALL, "bench",  "--socket", t->sock,	   "--profile",
			      "rnd4k-q1t1", "--time", "0.3",	  "--no-progress", NULL};
	const char *env[] = {td->env_dir, NULL};
	pid_t pid = watched(th_spawn(argv, env, NULL, out, out));
	assert_int_equal(th_wait_within(pid, 5 * DEADLINE_MS), 0);
}

/* The flags that have sites in an opened trace file, per provider (as `trace show`
 * must list them): "provider: flag flag ..." lines, lower case. */
static void sited_flags(const struct vs_shm *s, uint32_t *masks)
{
	const struct vs_meta *m = &s->meta;
	for (uint32_t i = 0; i < m->nproviders; i++)
		masks[i] = 0;
	for (uint32_t i = 0; i < m->nsites; i++) {
		const struct vs_meta_site *site = &m->sites[i];
		if (site->prov >= m->nproviders)
			continue;
		masks[site->prov] |= 1u << site->flag;
		if (site->also)
			masks[site->prov] |= 1u << (site->also - 1);
	}
}

static bool has_site_flag(const struct vs_shm *s, const char *provider, const char *flag)
{
	uint32_t masks[256];
	const struct vs_meta *m = &s->meta;
	assert_true(m->nproviders <= 256);
	sited_flags(s, masks);
	for (uint32_t i = 0; i < m->nproviders; i++)
		for (uint32_t f = 0; f < m->providers[i].nflags; f++)
			if ((!provider || !strcasecmp(m->providers[i].name, provider)) &&
			    (masks[i] & (1u << f)) && m->providers[i].flags[f] &&
			    !strcasecmp(m->providers[i].flags[f], flag))
				return true;
	return false;
}

static char *read_or_fail(const char *path)
{
	char *s = th_read_file(path, NULL);
	assert_non_null(s);
	return s;
}

/* ---- item 1: the documented spec records what it names --------------------------------- */

/* Events of a capture per term of a spec ("provider.flag" or "flag"). */
struct term_count {
	char provider[128], flag[128];
	unsigned events;
};
struct term_walk {
	const struct vs_meta *meta;
	struct term_count *terms;
	unsigned n;
};

static bool site_has_flag(const struct vs_meta *m, const struct vs_meta_site *site,
			  const char *flag)
{
	const struct vs_meta_provider *p;
	if (site->prov >= m->nproviders)
		return false;
	p = &m->providers[site->prov];
	return (site->flag < p->nflags && p->flags[site->flag] &&
		!strcasecmp(p->flags[site->flag], flag)) ||
	       (site->also && site->also - 1u < p->nflags && p->flags[site->also - 1] &&
		!strcasecmp(p->flags[site->also - 1], flag));
}

static int count_terms(const struct vs_cap_event *ev, void *opaque)
{
	struct term_walk *w = opaque;
	if (!ev->site)
		return 0;
	for (unsigned i = 0; i < w->n; i++) {
		struct term_count *t = &w->terms[i];
		if ((!t->provider[0] || !strcasecmp(ev->site->provider, t->provider)) &&
		    site_has_flag(w->meta, ev->site, t->flag))
			t->events++;
	}
	return 0;
}

/* The example spec of `vioscope trace --help` ("e.g. SPEC"). */
static void help_example(const struct th_tmpdir *td, char *spec, size_t len)
{
	assert_int_equal(th_cli(td, "--help", NULL), 0);
	char *help = read_or_fail(td->out);
	const char *eg = strstr(help, "e.g. ");
	assert_non_null(eg);
	eg += 5;
	size_t n = strcspn(eg, " \n");
	assert_true(n > 0 && n < len);
	memcpy(spec, eg, n);
	spec[n] = '\0';
	free(help);
}

/* Scenario: the spec `trace --help` gives as its example (the one README and TRACING.md
 * use) is enabled on a running target: it is taken without a warning, and while the
 * bench sends requests through the target, a recording holds events of every term it
 * names (before the fix the example was verbose:scsi.io, which no site has: 0 events). */
static void test_documented_spec_records_what_it_names(void **state)
{
	struct th_tmpdir *td = *state;
	struct target t;
	struct vs_shm shm;
	char spec[128], cap[600], why[512];
	struct term_count terms[8];
	unsigned n = 0;

	help_example(td, spec, sizeof spec);
	const char *colon = strchr(spec, ':');
	assert_non_null(colon);
	for (const char *p = colon + 1; *p && n < 8; n++) {
		size_t k = strcspn(p, ",");
		char term[128];
		assert_true(k < sizeof term);
		memcpy(term, p, k);
		term[k] = '\0';
		const char *dot = strchr(term, '.');
		memset(&terms[n], 0, sizeof terms[n]);
		snprintf(terms[n].provider, sizeof terms[n].provider, "%.*s",
			 dot ? (int)(dot - term) : 0, term);
		snprintf(terms[n].flag, sizeof terms[n].flag, "%s", dot ? dot + 1 : term);
		p += k + (p[k] == ',');
	}
	assert_true(n > 0);

	target_start(td, &t);
	assert_int_equal(th_cli(td, "enable", t.pidstr, spec, NULL), 0);
	char *err = read_or_fail(td->err);
	assert_null(strstr(err, "warning"));
	free(err);
	td_path(td, cap, sizeof cap, "run.vst");
	pid_t rec = watched(th_start_recording(td, t.pid, cap, NULL, &shm));
	vs_shm_close(&shm);
	drive_io(td, &t);
	assert_int_equal(kill(rec, SIGINT), 0);
	assert_int_equal(th_wait_within(rec, DEADLINE_MS), 0);
	target_stop(&t);

	struct vs_capture *c;
	if (vs_capture_open(&c, cap, why, sizeof why) < 0)
		fail_msg("%s", why);
	struct term_walk w = {vs_capture_meta(c), terms, n};
	assert_int_equal(vs_capture_walk(c, count_terms, &w, why, sizeof why), 0);
	vs_capture_close(c);
	for (unsigned i = 0; i < n; i++) {
		print_message("%s%s%s: %u events\n", terms[i].provider,
			      terms[i].provider[0] ? "." : "", terms[i].flag, terms[i].events);
		assert_true(terms[i].events > 0);
	}
}

/* Scenario: `trace show` of a running target lists, for each provider, exactly the flags
 * its sites use (the scsi provider: not io, which it declares like every provider
 * declares vioscope's 17 flags, but no site of it uses). */
static void test_show_lists_the_flags_that_have_sites(void **state)
{
	struct th_tmpdir *td = *state;
	struct target t;
	struct vs_shm s;
	char why[512];
	uint32_t masks[256];

	target_start(td, &t);
	assert_int_equal(th_cli(td, "show", t.pidstr, NULL), 0);
	if (vs_shm_open(&s, t.shm, why, sizeof why) < 0)
		fail_msg("%s", why);
	sited_flags(&s, masks);
	char *out = read_or_fail(td->out);
	const struct vs_meta *m = &s.meta;
	for (uint32_t i = 0; i < m->nproviders; i++) {
		char want[1024], head[80];
		size_t n = 0;
		for (uint32_t f = 0; f < m->providers[i].nflags; f++)
			if (masks[i] & (1u << f))
				n += (size_t)snprintf(want + n, sizeof want - n, "%s%s",
						      n ? " " : "", m->providers[i].flags[f]);
		for (char *c = want; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		/* the provider's line, then its flags to the end of that line */
		snprintf(head, sizeof head, "\n  %s ", m->providers[i].name);
		const char *line = strstr(out, head);
		assert_non_null(line);
		const char *flags = strstr(line, "  flags: ");
		assert_non_null(flags);
		flags += strlen("  flags: ");
		size_t len = strcspn(flags, "\n");
		print_message("%s: %.*s\n", m->providers[i].name, (int)len, flags);
		if (n)
			assert_true(len == strlen(want) && !strncmp(flags, want, len));
		else
			assert_true(!strncmp(flags, "- (no sites)", len));
	}
	assert_true(has_site_flag(&s, "scsi", "scsi"));
	assert_false(has_site_flag(&s, "scsi", "io"));
	vs_shm_close(&s);
	free(out);
	target_stop(&t);
}

/* Scenario: `trace enable PID verbose:scsi.io` on a running target, whose scsi provider
 * has no site with flag io: the setting is made (rc 0, scsi's mask is io) and a warning
 * says that it selects no site, naming scsi's flags that have sites. */
static void test_spec_selecting_no_site_warns_naming_what_exists(void **state)
{
	struct th_tmpdir *td = *state;
	struct target t;
	struct vs_shm s;
	char why[512];

	target_start(td, &t);
	assert_int_equal(th_cli(td, "enable", t.pidstr, "verbose:scsi.io", NULL), 0);
	char *err = read_or_fail(td->err);
	print_message("%s", err);
	const char *w = strstr(err, "warning: ");
	assert_non_null(w);
	static const char head[] = "'scsi.io' selects no trace site (scsi's flags with sites: ";
	const char *list = strstr(w, head);
	assert_non_null(list);
	list += strlen(head);
	if (vs_shm_open(&s, t.shm, why, sizeof why) < 0)
		fail_msg("%s", why);
	/* every name listed is a flag of scsi with sites, and scsi.scsi is among them */
	size_t len = strcspn(list, ")");
	char names[512];
	assert_true(len < sizeof names && list[len] == ')');
	memcpy(names, list, len);
	names[len] = '\0';
	unsigned listed = 0;
	for (char *save, *name = strtok_r(names, ", ", &save); name;
	     name = strtok_r(NULL, ", ", &save)) {
		assert_true(has_site_flag(&s, "scsi", name));
		listed++;
	}
	assert_true(listed >= 1);
	assert_non_null(strstr(list, "scsi"));
	int p = vs_meta_provider(&s.meta, "scsi");
	assert_true(p >= 0);
	const struct vs_shm_provider *ctl = vs_shm_provider(&s, s.meta.providers[p].slot);
	assert_non_null(ctl);
	int io = -1;
	for (uint32_t f = 0; f < s.meta.providers[p].nflags; f++)
		if (!strcasecmp(s.meta.providers[p].flags[f], "io"))
			io = (int)f;
	assert_true(io >= 0);
	assert_int_equal(ctl->mask, 1u << io);
	assert_int_equal(ctl->level, VS_LEVEL_VERBOSE);
	vs_shm_close(&s);
	free(err);
	target_stop(&t);
}

/* ---- item 6: messages that say what is wrong ------------------------------------------ */

/* Scenario: an unknown flag on a target with many providers: refused (usage, 2) with the
 * flags that have sites, as many whole names as fit, then how many more: the message
 * ends with its ')' and each name in it is a provider.flag with sites (before the fix it
 * listed every declared flag and was cut mid-word at 512 bytes). */
static void test_unknown_flag_lists_whole_names(void **state)
{
	struct th_tmpdir *td = *state;
	struct target t;
	struct vs_shm s;
	char why[512];

	target_start(td, &t);
	assert_int_equal(th_cli(td, "enable", t.pidstr, "verbose:nosuch", NULL), VS_EXIT_USAGE);
	char *err = read_or_fail(td->err);
	print_message("%s", err);
	const char *list = strstr(err, "unknown flag 'nosuch' (flags with sites: ");
	assert_non_null(list);
	list += strlen("unknown flag 'nosuch' (flags with sites: ");
	size_t len = strlen(list);
	assert_true(len >= 2 && list[len - 1] == '\n' && list[len - 2] == ')');
	if (vs_shm_open(&s, t.shm, why, sizeof why) < 0)
		fail_msg("%s", why);
	char *names = strndup(list, len - 2);
	assert_non_null(names);
	char *more = strstr(names, " and ");
	if (more) {
		unsigned n;
		assert_int_equal(sscanf(more, " and %u more", &n), 1);
		*more = '\0';
	}
	unsigned listed = 0;
	for (char *save, *name = strtok_r(names, ", ", &save); name;
	     name = strtok_r(NULL, ", ", &save)) {
		char *dot = strchr(name, '.');
		assert_non_null(dot);
		*dot = '\0';
		assert_true(has_site_flag(&s, name, dot + 1));
		listed++;
	}
	assert_true(listed >= 3);
	free(names);
	vs_shm_close(&s);
	free(err);
	target_stop(&t);
}

/* Scenario: `trace decode --level loud` says the level is unknown and lists the levels
 * (before the fix: "level must not be off"); exit 2. */
static void test_decode_names_an_unknown_level(void **state)
{
	struct th_tmpdir *td = *state;
	assert_int_equal(th_cli(td, "decode", "--level", "loud", td->cap, NULL), VS_EXIT_USAGE);
	assert_true(th_file_contains(td->err, "unknown level 'loud'"));
	char *err = read_or_fail(td->err);
	assert_null(strstr(err, "must not be off"));
	free(err);
	assert_int_equal(th_cli(td, "decode", "--level", "off", td->cap, NULL), VS_EXIT_USAGE);
	assert_true(th_file_contains(td->err, "level off shows nothing"));
}

/* ---- item 2: one recorder at a time --------------------------------------------------- */

enum { SEQ_N = 2000 };

struct seq_count {
	unsigned events;
	uint64_t lost;
};
static int count_seq(const struct th_event *e, void *opaque)
{
	struct seq_count *c = opaque;
	unsigned t, i;
	if (!e->ev->site)
		c->lost += e->ev->lost;
	else if (sscanf(e->msg, "seq t=%u i=%u", &t, &i) == 2)
		c->events++;
	return 0;
}

static void start_seq(const struct th_tmpdir *td, struct th_gated *w, char *pidstr, size_t len)
{
	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "2000", NULL};
	th_start_gated(td, w, argv, NULL);
	watched(w->pid);
	snprintf(pidstr, len, "%d", (int)w->pid);
}

static bool recorder_is(void *opaque)
{
	const struct {
		const struct vs_shm *shm;
		pid_t pid;
	} *a = opaque;
	return __atomic_load_n(&a->shm->hdr->recorder_pid, __ATOMIC_ACQUIRE) == a->pid &&
	       __atomic_load_n(&a->shm->hdr->mode, __ATOMIC_ACQUIRE) == VS_MODE_STREAM;
}

/* Scenario: a process is being recorded by A; a second `trace record` is refused (exit 3)
 * naming A's pid and --force, and makes no file; A keeps the recording and, once the
 * process has emitted its 2000 events and exited, holds all of them (before the fix the
 * second recorder was accepted and the two split the events, each saying 0 dropped). */
static void test_second_recorder_is_refused_naming_the_first(void **state)
{
	struct th_tmpdir *td = *state;
	struct th_gated w;
	struct vs_shm shm;
	char pidstr[32], cap_a[600], cap_b[600], want[64];
	struct stat st;

	start_seq(td, &w, pidstr, sizeof pidstr);
	td_path(td, cap_a, sizeof cap_a, "a.vst");
	td_path(td, cap_b, sizeof cap_b, "b.vst");
	pid_t a = watched(th_start_recording(td, w.pid, cap_a, NULL, &shm));
	assert_int_equal(th_cli(td, "record", pidstr, "-o", cap_b, "--duration", "0.2", NULL),
			 VS_EXIT_CANNOT_RUN);
	snprintf(want, sizeof want, "recorded already, by pid %d", (int)a);
	assert_true(th_file_contains(td->err, want));
	assert_true(th_file_contains(td->err, "--force"));
	assert_int_equal(stat(cap_b, &st), -1);
	assert_int_equal(shm.hdr->recorder_pid, a);
	assert_int_equal(shm.hdr->mode, VS_MODE_STREAM);
	vs_shm_close(&shm);

	assert_int_equal(th_let_go_and_wait(&w), 0);
	assert_int_equal(th_wait_within(a, DEADLINE_MS), 0);
	struct seq_count c = {0};
	th_walk_or_fail(cap_a, count_seq, &c);
	assert_int_equal(c.events, SEQ_N);
	assert_int_equal(c.lost, 0);
}

/* Scenario: recorder A records a process; `trace record --force` (B) takes it over: A
 * stops by itself (exit 1, saying B took over), its capture whole; the process's 2000
 * events, emitted after the takeover, are all in B's capture, and B ends with the
 * process (exit 0). */
static void test_force_takes_the_recording_over(void **state)
{
	struct th_tmpdir *td = *state;
	struct th_gated w;
	struct vs_shm shm;
	char pidstr[32], cap_a[600], cap_b[600], err_b[600], want[96];

	start_seq(td, &w, pidstr, sizeof pidstr);
	td_path(td, cap_a, sizeof cap_a, "a.vst");
	td_path(td, cap_b, sizeof cap_b, "b.vst");
	td_path(td, err_b, sizeof err_b, "b.err");
	pid_t a = watched(th_start_recording(td, w.pid, cap_a, NULL, &shm));
	const char *argv[] = {VIOSCOPE_CLI, "trace", "record",	pidstr,
			      "-o",	    cap_b,   "--force", NULL};
	const char *env[] = {td->env_dir, NULL};
	pid_t b = watched(th_spawn(argv, env, NULL, NULL, err_b));
	assert_int_equal(th_wait_within(a, DEADLINE_MS), VS_EXIT_FAILED);
	snprintf(want, sizeof want, "pid %d took the recording of pid %d over", (int)b, (int)w.pid);
	assert_true(th_file_contains(td->err, want));
	struct {
		const struct vs_shm *shm;
		pid_t pid;
	} is_b = {&shm, b};
	assert_true(wait_until(recorder_is, &is_b, DEADLINE_MS));
	vs_shm_close(&shm);

	assert_int_equal(th_let_go_and_wait(&w), 0);
	assert_int_equal(th_wait_within(b, DEADLINE_MS), 0);
	snprintf(want, sizeof want, "from pid %d (--force)", (int)a);
	assert_true(th_file_contains(err_b, want));
	struct seq_count ca = {0}, cb = {0};
	th_walk_or_fail(cap_a, count_seq, &ca);
	th_walk_or_fail(cap_b, count_seq, &cb);
	assert_int_equal(ca.events, 0);
	assert_int_equal(cb.events, SEQ_N);
	assert_int_equal(cb.lost, 0);
}

/* Scenario: recorder A is killed (SIGKILL: it cannot detach); `trace show` says A has
 * gone instead of "recording: by pid A", and a new `trace record` takes over without
 * --force, saying so; it gets the process's 2000 events. */
static void test_dead_recorder_is_detected(void **state)
{
	struct th_tmpdir *td = *state;
	struct th_gated w;
	struct vs_shm shm;
	char pidstr[32], cap_a[600], cap_b[600], err_b[600], want[96];

	start_seq(td, &w, pidstr, sizeof pidstr);
	td_path(td, cap_a, sizeof cap_a, "a.vst");
	td_path(td, cap_b, sizeof cap_b, "b.vst");
	td_path(td, err_b, sizeof err_b, "b.err");
	pid_t a = watched(th_start_recording(td, w.pid, cap_a, NULL, &shm));
	assert_int_equal(kill(a, SIGKILL), 0);
	assert_int_equal(th_wait(a), 128 + SIGKILL);
	assert_int_equal(shm.hdr->recorder_pid, a); /* it left its mark */

	assert_int_equal(th_cli(td, "show", pidstr, NULL), 0);
	snprintf(want, sizeof want, "recording: by pid %d", (int)a);
	char *out = read_or_fail(td->out);
	assert_null(strstr(out, want));
	free(out);
	snprintf(want, sizeof want, "recorder pid %d has gone without detaching", (int)a);
	assert_true(th_file_contains(td->out, want));

	const char *argv[] = {VIOSCOPE_CLI, "trace", "record", pidstr, "-o", cap_b, NULL};
	const char *env[] = {td->env_dir, NULL};
	pid_t b = watched(th_spawn(argv, env, NULL, NULL, err_b));
	struct {
		const struct vs_shm *shm;
		pid_t pid;
	} is_b = {&shm, b};
	assert_true(wait_until(recorder_is, &is_b, DEADLINE_MS));
	vs_shm_close(&shm);
	assert_int_equal(th_let_go_and_wait(&w), 0);
	assert_int_equal(th_wait_within(b, DEADLINE_MS), 0);
	snprintf(want, sizeof want, "pid %d, the recorder of %s, had gone", (int)a, pidstr);
	assert_true(th_file_contains(err_b, want));
	struct seq_count cb = {0};
	th_walk_or_fail(cap_b, count_seq, &cb);
	assert_int_equal(cb.events, SEQ_N);
}

/* ---- item 7: no silent loss ----------------------------------------------------------- */

static void put_file(const char *path, const char *text)
{
	assert_int_equal(th_write_file(path, text, strlen(text)), 0);
}

static void assert_file_is(const char *path, const char *text)
{
	char *s = read_or_fail(path);
	assert_string_equal(s, text);
	free(s);
}

/* Scenario: `trace dump` and `trace record -o` onto an existing file, a symbolic link to
 * one, and a dangling symbolic link: each refused (exit 3, "exists"), the file and the
 * link's target unchanged, nothing made where the dangling link points (before the fix
 * each was truncated and overwritten, through the link); a new name works. */
static void test_captures_are_never_overwritten(void **state)
{
	struct th_tmpdir *td = *state;
	char pidstr[32], old[600], link[600], victim[600], dangling[600], nowhere[600], fresh[600];
	struct stat st;
	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "100", NULL};
	pid_t pid = watched(th_start_holding(td, argv, NULL));
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	td_path(td, old, sizeof old, "old.vst");
	td_path(td, link, sizeof link, "link.vst");
	td_path(td, victim, sizeof victim, "victim");
	td_path(td, dangling, sizeof dangling, "dangling.vst");
	td_path(td, nowhere, sizeof nowhere, "nowhere");
	td_path(td, fresh, sizeof fresh, "fresh.vst");
	put_file(old, "a capture worth keeping");
	put_file(victim, "not a capture");
	assert_int_equal(symlink(victim, link), 0);
	assert_int_equal(symlink(nowhere, dangling), 0);

	const char *outs[] = {old, link, dangling};
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(th_cli(td, "dump", pidstr, "-o", outs[i], NULL),
				 VS_EXIT_CANNOT_RUN);
		assert_true(th_file_contains(td->err, "exists (a capture is never overwritten"));
		assert_int_equal(
		    th_cli(td, "record", pidstr, "-o", outs[i], "--duration", "0.1", NULL),
		    VS_EXIT_CANNOT_RUN);
		assert_true(th_file_contains(td->err, "exists (a capture is never overwritten"));
	}
	assert_file_is(old, "a capture worth keeping");
	assert_file_is(victim, "not a capture");
	assert_int_equal(lstat(nowhere, &st), -1);
	assert_int_equal(lstat(link, &st), 0);
	assert_true(S_ISLNK(st.st_mode));

	assert_int_equal(th_cli(td, "dump", pidstr, "-o", fresh, NULL), 0);
	struct seq_count c = {0};
	th_walk_or_fail(fresh, count_seq, &c);
	assert_int_equal(c.events, 100);
	th_kill_holding(pid);
}

/* ---- `trace live`: it filters; it does not change the process for everyone ----------- */

struct ticker {
	pid_t pid;
	int cmd, reply, ready;
};

static void ticker_start(const struct th_tmpdir *td, struct ticker *t, const char *spec)
{
	int cmd[2], reply[2], ready[2];
	char cfd[16], ofd[16], rfd[16], env_spec[64];
	assert_int_equal(th_pipe(cmd), 0);
	assert_int_equal(th_pipe(reply), 0);
	assert_int_equal(th_pipe(ready), 0);
	snprintf(cfd, sizeof cfd, "%d", cmd[0]);
	snprintf(ofd, sizeof ofd, "%d", reply[1]);
	snprintf(rfd, sizeof rfd, "%d", ready[1]);
	snprintf(env_spec, sizeof env_spec, "VIOSCOPE_TRACE=%s", spec);
	const char *argv[] = {WORKLOAD_COLD, "tick", "-c", cfd, "-o", ofd, "-r", rfd, NULL};
	const char *env[] = {td->env_dir, env_spec, NULL};
	const int keep[] = {cmd[0], reply[1], ready[1], -1};
	t->pid = watched(th_spawn(argv, env, keep, NULL, NULL));
	close(cmd[0]);
	close(reply[1]);
	close(ready[1]);
	t->cmd = cmd[1];
	t->reply = reply[0];
	t->ready = ready[0];
	assert_int_equal(th_read_byte(t->ready), 'r');
}

static void ticker_quit(struct ticker *t)
{
	uint32_t n;
	assert_int_equal(write(t->cmd, &(char){WL_CMD_QUIT}, 1), 1);
	assert_int_equal(read(t->reply, &n, sizeof n), sizeof n);
	assert_int_equal(th_wait(t->pid), 0);
	close(t->cmd);
	close(t->reply);
	close(t->ready);
}

struct shows {
	const char *path, *needle;
};
static bool file_shows(void *opaque)
{
	const struct shows *s = opaque;
	char *text = th_read_file(s->path, NULL);
	bool yes = text && strstr(text, s->needle);
	free(text);
	return yes;
}

/* The app provider's level and mask in an opened trace file. */
static void app_setting(const struct vs_shm *s, uint32_t *level, uint32_t *mask)
{
	int p = vs_meta_provider(&s->meta, "app");
	assert_true(p >= 0);
	const struct vs_shm_provider *ctl = vs_shm_provider(s, s->meta.providers[p].slot);
	assert_non_null(ctl);
	*level = __atomic_load_n(&ctl->level, __ATOMIC_RELAXED);
	*mask = __atomic_load_n(&ctl->mask, __ATOMIC_RELAXED);
}

/* Scenario: a ticker records verbose:all (one verbose TEST event a millisecond);
 * `trace live PID --level verbose --flag test` shows its ticks while the process's own
 * settings stay verbose:all, so every other reader (a recorder) still gets every flag
 * (before the fix live set verbose:test on the process, for everyone). */
static void test_live_filters_without_changing_the_process(void **state)
{
	struct th_tmpdir *td = *state;
	struct ticker t;
	struct vs_shm s;
	char pidstr[32], out[600], err[600], shm[600], why[512];
	uint32_t level, mask;

	ticker_start(td, &t, "verbose:all");
	snprintf(pidstr, sizeof pidstr, "%d", (int)t.pid);
	th_shm_path(shm, sizeof shm, td->dir, t.pid);
	if (vs_shm_open(&s, shm, why, sizeof why) < 0)
		fail_msg("%s", why);
	app_setting(&s, &level, &mask);
	assert_int_equal(level, VS_LEVEL_VERBOSE);
	assert_int_equal(mask, 0xffffffffu);

	td_path(td, out, sizeof out, "live.out");
	td_path(td, err, sizeof err, "live.err");
	const char *argv[] = {VIOSCOPE_CLI, "trace",  "live", pidstr, "--level",
			      "verbose",    "--flag", "test", NULL};
	const char *env[] = {td->env_dir, NULL};
	pid_t live = watched(th_spawn(argv, env, NULL, out, err));
	struct shows ticks = {out, " tick "};
	assert_true(wait_until(file_shows, &ticks, DEADLINE_MS)); /* live is running */
	app_setting(&s, &level, &mask);
	assert_int_equal(level, VS_LEVEL_VERBOSE);
	assert_int_equal(mask, 0xffffffffu);
	assert_int_equal(kill(live, SIGINT), 0);
	assert_int_equal(th_wait_within(live, DEADLINE_MS), 0);
	app_setting(&s, &level, &mask);
	assert_int_equal(mask, 0xffffffffu);
	vs_shm_close(&s);
	ticker_quit(&t);
}

/* Scenario: `trace live PID --enable verbose:test` on a ticker that records nothing
 * (off): it sets the process's settings, says so (for every reader), and shows the
 * ticks that follow. */
static void test_live_enable_sets_the_process_and_says_so(void **state)
{
	struct th_tmpdir *td = *state;
	struct ticker t;
	char pidstr[32], out[600], err[600];

	ticker_start(td, &t, "off");
	snprintf(pidstr, sizeof pidstr, "%d", (int)t.pid);
	td_path(td, out, sizeof out, "live.out");
	td_path(td, err, sizeof err, "live.err");
	const char *argv[] = {VIOSCOPE_CLI, "trace",	    "live", pidstr,
			      "--enable",   "verbose:test", NULL};
	const char *env[] = {td->env_dir, NULL};
	pid_t live = watched(th_spawn(argv, env, NULL, out, err));
	struct shows ticks = {out, " tick "};
	assert_true(wait_until(file_shows, &ticks, DEADLINE_MS));
	assert_int_equal(kill(live, SIGINT), 0);
	assert_int_equal(th_wait_within(live, DEADLINE_MS), 0);
	assert_true(th_file_contains(err, "tracing set to verbose:test (for every reader"));
	ticker_quit(&t);
}

/* ---- item 10: output for machines and people ------------------------------------------ */

/* Thread names of a capture's events, by tid. */
struct threads_seen {
	uint32_t tid[16];
	char name[16][16];
	unsigned n;
};
static int note_thread(const struct vs_cap_event *ev, void *opaque)
{
	struct threads_seen *t = opaque;
	for (unsigned i = 0; i < t->n; i++)
		if (t->tid[i] == ev->tid)
			return 0;
	assert_true(t->n < 16);
	t->tid[t->n] = ev->tid;
	snprintf(t->name[t->n], sizeof t->name[t->n], "%s", ev->thread_name ? ev->thread_name : "");
	t->n++;
	return 0;
}

/* Scenario: a capture of a workload with three named threads, decoded with --chrome:
 * the JSON holds a "ph":"M" process_name event for its pid naming the program, and a
 * thread_name event for each of its threads with that thread's name (before the fix
 * Perfetto showed bare pids and tids). */
static void test_chrome_output_names_processes_and_threads(void **state)
{
	struct th_tmpdir *td = *state;
	struct threads_seen seen = {0};
	char why[512];
	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "50", "-t", "3", NULL};
	pid_t pid = watched(th_start_holding(td, argv, NULL));
	th_dump(td, pid);
	th_kill_holding(pid);
	struct vs_capture *c;
	if (vs_capture_open(&c, td->cap, why, sizeof why) < 0)
		fail_msg("%s", why);
	assert_int_equal(vs_capture_walk(c, note_thread, &seen, why, sizeof why), 0);
	vs_capture_close(c);
	assert_true(seen.n >= 3);

	assert_int_equal(th_cli(td, "decode", td->cap, "--chrome", NULL), 0);
	json_error_t jerr;
	json_t *doc = json_load_file(td->out, 0, &jerr);
	if (!doc)
		fail_msg("chrome output is not JSON: %s (line %d)", jerr.text, jerr.line);
	json_t *events = json_object_get(doc, "traceEvents");
	assert_true(json_is_array(events));
	const char *base = strrchr(WORKLOAD_COLD, '/') + 1;
	unsigned process_named = 0, threads_named = 0;
	size_t i;
	json_t *e;
	json_array_foreach(events, i, e)
	{
		const char *ph = json_string_value(json_object_get(e, "ph"));
		const char *name = json_string_value(json_object_get(e, "name"));
		if (!ph || strcmp(ph, "M") || !name)
			continue;
		assert_int_equal(json_integer_value(json_object_get(e, "pid")), pid);
		const char *value =
		    json_string_value(json_object_get(json_object_get(e, "args"), "name"));
		assert_non_null(value);
		if (!strcmp(name, "process_name")) {
			assert_string_equal(value, base);
			process_named++;
		} else if (!strcmp(name, "thread_name")) {
			json_int_t tid = json_integer_value(json_object_get(e, "tid"));
			bool known = false;
			for (unsigned k = 0; k < seen.n; k++)
				if (seen.tid[k] == tid) {
					assert_string_equal(value, seen.name[k]);
					known = true;
				}
			assert_true(known);
			threads_named++;
		}
	}
	json_decref(doc);
	assert_int_equal(process_named, 1);
	assert_int_equal(threads_named, seen.n);
}

static json_t *load_json_or_fail(const char *path)
{
	json_error_t jerr;
	json_t *doc = json_load_file(path, 0, &jerr);
	if (!doc)
		fail_msg("%s: not JSON: %s (line %d)", path, jerr.text, jerr.line);
	/* what every --json carries (vs_cli_json_meta): the build, the time, the command line */
	assert_non_null(
	    json_string_value(json_object_get(json_object_get(doc, "vioscope"), "version")));
	assert_non_null(json_string_value(json_object_get(doc, "time")));
	assert_true(json_is_array(json_object_get(doc, "argv")));
	return doc;
}

/* Scenario: a workload is traced; `trace list --json` lists it (pid, live, program) with
 * the version and a timestamp, and `trace show PID --json` gives its providers, each
 * flag that has sites with its number of sites (as the metadata says) and the flags
 * declared without sites (before: --json was an unknown option). */
static void test_list_and_show_speak_json(void **state)
{
	struct th_tmpdir *td = *state;
	struct vs_shm s;
	char pidstr[32], shm[600], why[512];
	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "10", NULL};
	pid_t pid = watched(th_start_holding(td, argv, NULL));
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);

	assert_int_equal(th_cli(td, "list", "--json", NULL), 0);
	json_t *doc = load_json_or_fail(td->out);
	json_t *procs = json_object_get(doc, "processes"), *p;
	size_t i;
	unsigned found = 0;
	json_array_foreach(procs, i, p)
	{
		if (json_integer_value(json_object_get(p, "pid")) != pid)
			continue;
		assert_string_equal(json_string_value(json_object_get(p, "state")), "live");
		assert_non_null(strstr(json_string_value(json_object_get(p, "program")),
				       "trace_workload-cold"));
		assert_true(json_is_null(json_object_get(p, "recorder")));
		found++;
	}
	assert_int_equal(found, 1);
	json_decref(doc);

	assert_int_equal(th_cli(td, "show", pidstr, "--json", NULL), 0);
	doc = load_json_or_fail(td->out);
	assert_int_equal(json_integer_value(json_object_get(doc, "pid")), pid);
	th_shm_path(shm, sizeof shm, td->dir, pid);
	if (vs_shm_open(&s, shm, why, sizeof why) < 0)
		fail_msg("%s", why);
	int app = vs_meta_provider(&s.meta, "app");
	assert_true(app >= 0);
	json_t *provs = json_object_get(doc, "providers");
	found = 0;
	json_array_foreach(provs, i, p)
	{
		if (strcmp(json_string_value(json_object_get(p, "name")), "app"))
			continue;
		found++;
		size_t k, listed = 0;
		json_t *f;
		json_array_foreach(json_object_get(p, "flags"), k, f)
		{
			const char *name = json_string_value(json_object_get(f, "name"));
			unsigned want = 0;
			for (uint32_t n = 0; n < s.meta.nsites; n++) {
				const struct vs_meta_site *site = &s.meta.sites[n];
				if (site->prov == (uint32_t)app &&
				    site_has_flag(&s.meta, site, name))
					want++;
			}
			assert_true(want > 0);
			assert_int_equal(json_integer_value(json_object_get(f, "sites")), want);
			listed++;
		}
		size_t unused = json_array_size(json_object_get(p, "declared_without_sites"));
		assert_int_equal(listed + unused, s.meta.providers[app].nflags);
		assert_true(has_site_flag(&s, "app", "test"));
	}
	assert_int_equal(found, 1);
	json_decref(doc);
	vs_shm_close(&s);
	th_kill_holding(pid);
}

/* ---- help and exit status --------------------------------------------------------------- */

/* Scenario: `vioscope trace SUB --help` for every subcommand prints that subcommand's
 * own usage on stdout and exits 0 (before: list, enable, clean exited 2, show took
 * --help for a PID, record/dump/decode/live printed the whole trace help). */
static void test_every_subcommand_has_its_help(void **state)
{
	struct th_tmpdir *td = *state;
	static const char *const subs[] = {"list",   "show",	"enable", "record", "dump",
					   "decode", "latency", "live",	  "clean"};
	for (unsigned i = 0; i < sizeof subs / sizeof subs[0]; i++) {
		char want[64];
		assert_int_equal(th_cli(td, subs[i], "--help", NULL), 0);
		char *out = read_or_fail(td->out);
		snprintf(want, sizeof want, "usage: vioscope trace %s", subs[i]);
		print_message("%s --help: %.60s...\n", subs[i], out);
		assert_true(!strncmp(out, want, strlen(want)));
		assert_null(strstr(out, "SUBCOMMAND"));
		free(out);
	}
}

/* Scenario: every row of the exit status table for the trace commands: 0 done; 1 the
 * thing asked failed (a file that is no capture); 2 usage (a bad option, a malformed
 * PID, level or flag, a flag the process or capture does not have); 3 could not run
 * (no such process, file or trace directory, an output that exists).  Before the fix
 * most of these gave 1. */
static void test_exit_status_table(void **state)
{
	struct th_tmpdir *td = *state;
	char pidstr[32], junk[600], nodir[600], cap[600];
	const char *argv[] = {WORKLOAD_COLD, "seq", "-n", "10", NULL};
	pid_t pid = watched(th_start_holding(td, argv, NULL));
	snprintf(pidstr, sizeof pidstr, "%d", (int)pid);
	td_path(td, junk, sizeof junk, "junk.vst");
	td_path(td, nodir, sizeof nodir, "no-such-dir");
	td_path(td, cap, sizeof cap, "ok.vst");
	put_file(junk, "this is not a capture file at all, not even close");

	/* 0 */
	assert_int_equal(th_cli(td, "enable", pidstr, "verbose:test", NULL), VS_EXIT_OK);
	assert_int_equal(th_cli(td, "dump", pidstr, "-o", cap, NULL), VS_EXIT_OK);
	assert_int_equal(th_cli(td, "decode", cap, "--flag", "app.test", NULL), VS_EXIT_OK);
	assert_int_equal(th_cli(td, "show", pidstr, NULL), VS_EXIT_OK);
	/* 1 */
	assert_int_equal(th_cli(td, "decode", junk, NULL), VS_EXIT_FAILED);
	assert_int_equal(th_cli(td, "latency", junk, NULL), VS_EXIT_FAILED);
	/* 2 */
	assert_int_equal(th_cli(td, "list", "--bogus", NULL), VS_EXIT_USAGE);
	assert_int_equal(th_cli(td, "enable", "0", "info", NULL), VS_EXIT_USAGE);
	assert_true(th_file_contains(td->err, "'0' is not a PID"));
	assert_int_equal(th_cli(td, "show", "99999999999", NULL), VS_EXIT_USAGE);
	assert_int_equal(th_cli(td, "enable", pidstr, "loud", NULL), VS_EXIT_USAGE);
	assert_true(th_file_contains(td->err, "unknown level 'loud'"));
	assert_int_equal(th_cli(td, "enable", pidstr, "verbose:nosuch", NULL), VS_EXIT_USAGE);
	assert_int_equal(th_cli(td, "enable", pidstr, "verbose:app.nosuch", NULL), VS_EXIT_USAGE);
	assert_int_equal(
	    th_cli(td, "record", pidstr, "-o", junk, "--enable", "verbose:nosuch", NULL),
	    VS_EXIT_USAGE);
	assert_int_equal(th_cli(td, "live", pidstr, "--flag", "nosuch", NULL), VS_EXIT_USAGE);
	assert_int_equal(th_cli(td, "decode", cap, "--flag", "nosuch", NULL), VS_EXIT_USAGE);
	assert_int_equal(th_cli(td, "decode", cap, "--thread", "x", NULL), VS_EXIT_USAGE);
	assert_int_equal(th_cli(td, "latency", cap, "--by", "disk", NULL), VS_EXIT_USAGE);
	/* 3 */
	assert_int_equal(th_cli(td, "show", "2147483646", NULL), VS_EXIT_CANNOT_RUN);
	assert_true(th_file_contains(td->err, "no traced process with that pid"));
	assert_int_equal(th_cli(td, "enable", "2147483646", "info", NULL), VS_EXIT_CANNOT_RUN);
	assert_int_equal(th_cli(td, "live", "2147483646", NULL), VS_EXIT_CANNOT_RUN);
	assert_int_equal(th_cli(td, "record", "2147483646", "-o", cap, NULL), VS_EXIT_CANNOT_RUN);
	assert_int_equal(th_cli(td, "decode", nodir, NULL), VS_EXIT_CANNOT_RUN);
	assert_int_equal(th_cli(td, "latency", nodir, NULL), VS_EXIT_CANNOT_RUN);
	assert_int_equal(th_cli(td, "dump", pidstr, "-o", cap, NULL), VS_EXIT_CANNOT_RUN);
	th_kill_holding(pid);

	/* a trace directory that does not exist */
	char env_dir[700];
	snprintf(env_dir, sizeof env_dir, "VIOSCOPE_TRACE_DIR=%s", nodir);
	const char *env[] = {env_dir, NULL};
	const char *list[] = {VIOSCOPE_CLI, "trace", "list", NULL};
	const char *clean[] = {VIOSCOPE_CLI, "trace", "clean", NULL};
	assert_int_equal(th_run(list, env, td->out, td->err), VS_EXIT_CANNOT_RUN);
	assert_int_equal(th_run(clean, env, td->out, td->err), VS_EXIT_CANNOT_RUN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TMPDIR_TEST(test_documented_spec_records_what_it_names),
	    TMPDIR_TEST(test_show_lists_the_flags_that_have_sites),
	    TMPDIR_TEST(test_spec_selecting_no_site_warns_naming_what_exists),
	    TMPDIR_TEST(test_unknown_flag_lists_whole_names),
	    TMPDIR_TEST(test_decode_names_an_unknown_level),
	    TMPDIR_TEST(test_second_recorder_is_refused_naming_the_first),
	    TMPDIR_TEST(test_force_takes_the_recording_over),
	    TMPDIR_TEST(test_dead_recorder_is_detected),
	    TMPDIR_TEST(test_captures_are_never_overwritten),
	    TMPDIR_TEST(test_live_filters_without_changing_the_process),
	    TMPDIR_TEST(test_live_enable_sets_the_process_and_says_so),
	    TMPDIR_TEST(test_chrome_output_names_processes_and_threads),
	    TMPDIR_TEST(test_list_and_show_speak_json),
	    TMPDIR_TEST(test_every_subcommand_has_its_help),
	    TMPDIR_TEST(test_exit_status_table),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
