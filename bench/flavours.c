/* SPDX-License-Identifier: MIT */
/*
 * `vioscope bench --flavours`: the same two profiles for each trace build flavour (the
 * binaries beside this one), interleaved in rounds, printed as the seed driver's table.
 * Each flavour's run is a `vioscope-FLAVOUR bench --json` child, a job of its own that an
 * interruption reaches at once; the table then holds the runs completed before it.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/storage.h"
#include "bench/table.h"
#include "tracetools/tracetools.h"
#include "util/util.h"

/* The seed driver's table: a sequential and a random column (--profile twice overrides). */
static const char *flavour_profiles[2] = {"seq1m-q8t1", "rnd4k-q32t16"};

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

/* One flavour's run: its JSON output in *out (malloc'd); 0, or -errno / its exit status. */
static int run_child(const char *bin, const struct flavour_run *f, const struct bench_opts *o,
		     const char *dir, int round, char **out)
{
	char cmd[4096], t[32], rec[PATH_MAX + 32] = "";
	snprintf(t, sizeof t, "%.2f", o->seconds);
	if (f->record) /* a directory per round: a run's captures never mix with another's */
		snprintf(rec, sizeof rec, " --record '%s/rec-%d'", dir, round);
	int n = snprintf(cmd, sizeof cmd,
			 "%s%s%s VIOSCOPE_TRACE_FILE='%s/print.log' exec '%s' bench "
			 "--json --no-progress --time %s --seed %llu --target '%s'%s%s%s",
			 f->trace ? "VIOSCOPE_TRACE=" : "", f->trace ? f->trace : "",
			 f->trace ? "" : "", dir, bin, t, (unsigned long long)o->seed,
			 o->target_spec, rec, o->target_poll ? " --poll" : "",
			 o->interrupt	     ? " --interrupt"
			 : o->initiator_poll ? " --initiator-poll"
					     : "");
	for (size_t i = 0; i < sizeof flavour_profiles / sizeof flavour_profiles[0]; i++)
		n +=
		    snprintf(cmd + n, sizeof cmd - (size_t)n, " --profile %s", flavour_profiles[i]);
	int fd, pid, rc = vs_job_start(cmd, &fd, &pid);
	if (rc < 0)
		return rc;
	size_t cap = 8192, len = 0;
	char *buf = malloc(cap);
	ssize_t k;
	while (buf && (k = read(fd, buf + len, cap - len - 1)) != 0) {
		if (k < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		len += (size_t)k;
		if (len + 1 == cap) {
			char *b = realloc(buf, cap *= 2);
			if (!b)
				break;
			buf = b;
		}
	}
	close(fd);
	rc = vs_job_wait(pid);
	/* Ctrl-C as the run was starting, before its handlers were in place: sh -c execs the
	 * run, so pid is the run's, and its trace file is ours to remove. */
	if (rc >= 128)
		vs_shm_remove_reaped(pid);
	if (!buf)
		return -ENOMEM;
	buf[len] = '\0';
	*out = buf;
	return rc;
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

/* Which flavours' binaries are beside this one: have[f]; their count.  The ones missing
 * are named in missing[] ("" when none). */
static size_t flavours_here(const char *dir, bool have[NFLAVOURS], char *missing, size_t len)
{
	size_t n = 0, used = 0;

	missing[0] = '\0';
	for (size_t f = 0; f < NFLAVOURS; f++) {
		char bin[PATH_MAX + 64];

		snprintf(bin, sizeof bin, "%s/%s", dir, flavour_runs[f].binary);
		have[f] = access(bin, X_OK) == 0;
		n += have[f];
		if (!have[f] && !strstr(missing, flavour_runs[f].binary) && used < len)
			used += (size_t)snprintf(missing + used, len - used, "%s%s",
						 used ? ", " : "", flavour_runs[f].binary);
	}
	return n;
}

int bench_flavours(struct bench_opts *o, char **profiles, int rounds, const char *svg)
{
	char exe[PATH_MAX], dir[PATH_MAX], why[512], spec[1024], image[PATH_MAX] = "";
	char tmp[PATH_MAX], missing[256];
	bool have[NFLAVOURS], cut = false; /* cut: a round was interrupted */
	int rc = VS_EXIT_OK, r = 0;

	if (profiles) {
		flavour_profiles[0] = profiles[0];
		flavour_profiles[1] = profiles[1];
	}
	vs_self_exe(exe, sizeof exe);
	snprintf(dir, sizeof dir, "%s", exe);
	*strrchr(dir, '/') = '\0';
	size_t nhave = flavours_here(dir, have, missing, sizeof missing);
	if (!have[0] || nhave < 2) {
		fprintf(stderr,
			"bench --flavours: only %zu of the %zu flavour runs can run here: no %s "
			"beside %s.  The flavours are built side by side (build/tools/ of a build "
			"tree); the table compares each with `off`\n",
			nhave, NFLAVOURS, missing, exe);
		return VS_EXIT_CANNOT_RUN;
	}
	if (!o->target_spec) {
		if (bench_default_image(spec, sizeof spec, image, sizeof image, why, sizeof why) <
		    0) {
			fprintf(stderr, "bench: %s\n", why);
			return vs_interrupt_status(VS_EXIT_CANNOT_RUN);
		}
		o->target_spec = spec;
	}
	snprintf(tmp, sizeof tmp, "%s/vioscope-flavours-XXXXXX", vs_tmp_dir());
	if (!mkdtemp(tmp)) {
		fprintf(stderr, "bench: mkdtemp %s: %s\n", tmp, strerror(errno));
		if (image[0])
			unlink(image);
		return VS_EXIT_CANNOT_RUN;
	}
	const size_t np = sizeof flavour_profiles / sizeof flavour_profiles[0];
	/* Per flavour, column and round; ran: the flavour's run of that round succeeded. */
	static double v[NFLAVOURS][BENCH_NCOLS][BENCH_MAX_ROUNDS];
	static bool ran[NFLAVOURS][BENCH_MAX_ROUNDS];
	uint64_t lost[NFLAVOURS] = {0};
	if (rounds > BENCH_MAX_ROUNDS)
		rounds = BENCH_MAX_ROUNDS;
	memset(ran, 0, sizeof ran);
	if (!o->json)
		fprintf(stderr,
			"bench --flavours: %d rounds x %zu flavours x %zu profiles x %.1f s "
			"on %s (interleaved: each round runs every flavour once), seed %llu%s%s\n",
			rounds, nhave, np, o->seconds, o->target_spec, (unsigned long long)o->seed,
			missing[0] ? "; not here, left out: " : "", missing);
	for (r = 0; r < rounds && !vs_interrupted(); r++) {
		/* Each round starts one flavour further on, so no flavour always runs
		 * right after the recorded one (which leaves dirty pages and busy CPUs). */
		for (size_t k = 0; k < NFLAVOURS && !vs_interrupted(); k++) {
			size_t f = (k + (size_t)r) % NFLAVOURS;
			char bin[PATH_MAX + 64], *out = NULL;
			snprintf(bin, sizeof bin, "%s/%s", dir, flavour_runs[f].binary);
			if (!have[f])
				continue;
			if (!o->json && isatty(STDERR_FILENO))
				fprintf(stderr, "\r  round %d/%d: %-24s", r + 1, rounds,
					flavour_runs[f].label);
			int crc = run_child(bin, &flavour_runs[f], o, tmp, r, &out);
			/* A run cut short is no round's figure; one that ended whole just before
			 * Ctrl-C (exit status 0, its JSON read) is kept. */
			if (vs_interrupted() && (crc != 0 || !out)) {
				free(out);
				cut = true;
				break;
			}
			if (crc != 0 || !out) {
				fprintf(stderr, "\nbench: %s failed (exit status %d)%s%s\n",
					flavour_runs[f].label, crc, out && *out ? ": " : "",
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
			if (vs_interrupted()) {
				cut = true;
				break;
			}
		}
		if (cut)
			break;
		if (!o->json)
			fprintf(stderr, "%s  round %d/%d done\n", isatty(STDERR_FILENO) ? "\r" : "",
				r + 1, rounds);
	}
	if (!o->json && isatty(STDERR_FILENO))
		fprintf(stderr, "\r%70s\r", "");
	/* fio on the same file, once, as the raw limit row. */
	struct bench_result fio[2];
	bool have_fio =
	    (!strncmp(o->target_spec, "file=", 5) || !strncmp(o->target_spec, "rbd=", 4)) &&
	    !vs_interrupted();
	for (size_t i = 0; i < np && have_fio; i++) {
		struct bench_profile p;
		bench_profile_parse(flavour_profiles[i], &p, why, sizeof why);
		if (bench_run_fio(o->target_spec, &p, false, o->seconds, &fio[i], why, sizeof why) <
		    0) {
			if (!vs_interrupted())
				fprintf(stderr, "bench: fio: %s\n", why);
			have_fio = false;
		}
	}
	static struct bench_table t;
	memset(&t, 0, sizeof t);
	/* r: the rounds done, or the index of the one cut short */
	flavour_table(&t, v, ran, lost, cut ? r + 1 : r, have_fio ? fio : NULL);
	if (o->json)
		bench_table_json(stdout, &t, vs_cli_json_meta);
	else
		bench_table_print(stdout, &t);
	if (vs_interrupted())
		printf("interrupted by %s %s round %d of %d: the table holds the runs completed "
		       "before it; seed %llu (--seed to repeat)\n",
		       vs_signal_name(vs_interrupted()), cut ? "in" : "after", cut ? r + 1 : r,
		       rounds, (unsigned long long)o->seed);
	if (svg && t.nrows && bench_table_svg(svg, &t, why, sizeof why) < 0) {
		fprintf(stderr, "bench: --svg %s\n", why);
		rc = VS_EXIT_FAILED;
	} else if (svg && t.nrows && !o->json) {
		printf("Bars: %s\n", svg);
	}
	if (vs_remove_tree(tmp) < 0)
		rc = VS_EXIT_FAILED;
	if (image[0])
		unlink(image);
	if (!t.nrows && rc == VS_EXIT_OK)
		rc = VS_EXIT_FAILED; /* every run failed (said why) */
	fflush(stdout);
	return vs_interrupt_status(rc);
}
