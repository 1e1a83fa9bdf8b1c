/* SPDX-License-Identifier: MIT */
/* `vioscope trace ...`: the tools side of tracing. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/commands.h"
#include "tracetools/tracetools.h"
#include "util/util.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

/* Ctrl-C and SIGTERM end a command that follows a process (record, live) cleanly. */
static void stop_on_signals(void)
{
	struct sigaction sa = {.sa_handler = on_signal};
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* An error from the trace layer: it may quote a file's contents (a flag name, say),
 * so it is escaped like the decoder's text. */
static void trace_error(const char *sub, const char *why)
{
	fprintf(stderr, "vioscope trace %s: ", sub);
	vs_fputs_text(why, stderr);
	fputc('\n', stderr);
}

static void trace_usage(FILE *f)
{
	fputs("usage: vioscope trace SUBCOMMAND\n"
	      "  list                         traced processes (live and dead) and their settings\n"
	      "  show PID                     its objects (executable, libraries, modules) and\n"
	      "                               providers: flags, level, what is on\n"
	      "  enable PID SPEC              set level and flags live, SPEC = LEVEL[:FLAG,...]\n"
	      "                               FLAG = provider.flag, provider.all, a flag of every\n"
	      "                               provider, or all; e.g. verbose:scsi.io,queue  "
	      "info:all\n"
	      "  record PID -o FILE [--duration S] [--enable SPEC]\n"
	      "                               stream events to FILE until PID exits, S seconds\n"
	      "                               pass, or Ctrl-C\n"
	      "  dump PID|SHMFILE -o FILE     take the last events (flight recorder) of a live or\n"
	      "                               dead process\n"
	      "  decode FILE... [--json|--chrome] [--level L] [--flag F,...] [--thread TID]\n"
	      "              [--from S] [--to S]\n"
	      "                               print events; S = seconds from the first event;\n"
	      "                               --chrome: trace-event JSON for ui.perfetto.dev;\n"
	      "                               driver and device captures together: each\n"
	      "                               request's stages joined by flow arrows\n"
	      "  decode FILE --ctf DIR        write a CTF 1.8 trace (babeltrace2, Trace Compass)\n"
	      "  latency CAPTURE... [--json] [--by lun|queue|op] [--slow N] [--svg FILE]\n"
	      "                               where requests spent their time: driver and\n"
	      "                               device captures joined by tag, per stage\n"
	      "  live PID [--level L] [--flag F,...]\n"
	      "                               print its events as they happen (sets level and\n"
	      "                               flags first); until Ctrl-C or it exits\n"
	      "  clean [--dry-run]            remove trace files of dead processes\n",
	      f);
}

/* A provider's settings, read live from its slot. */
static void provider_setting(const struct vs_shm *s, uint32_t i, uint32_t *level, uint32_t *mask)
{
	const struct vs_shm_provider *p = vs_shm_provider(s, s->meta.providers[i].slot);
	*level = p ? __atomic_load_n(&p->level, __ATOMIC_RELAXED) : 0;
	*mask = p ? __atomic_load_n(&p->mask, __ATOMIC_RELAXED) : 0;
}

/* One provider's enabled flags: "all", "-" or "io,queue". */
static void flags_text(const struct vs_meta_provider *p, uint32_t mask, char *out, size_t len)
{
	uint32_t all = p->nflags >= 32 ? 0xffffffffu : (1u << p->nflags) - 1;
	size_t n = 0;
	out[0] = '\0';
	if ((mask & all) == all) {
		snprintf(out, len, "all");
		return;
	}
	for (uint32_t f = 0; f < p->nflags && n < len; f++)
		if (mask & (1u << f))
			n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "," : "",
					      p->flags[f] ? p->flags[f] : "?");
	if (!n)
		snprintf(out, len, "-");
	for (char *c = out; *c; c++)
		*c = (char)tolower((unsigned char)*c);
}

/* The settings of every provider in one line: the level they share (or "mixed"), and
 * "all" or provider.flag,... */
static void settings_summary(const struct vs_shm *s, char *level, size_t llen, char *flags,
			     size_t flen)
{
	const struct vs_meta *m = &s->meta;
	uint32_t lv0 = 0, n = 0;
	bool same = true, everything = true;
	flags[0] = '\0';
	for (uint32_t i = 0; i < m->nproviders; i++) {
		uint32_t lv, mask;
		char one[512];
		provider_setting(s, i, &lv, &mask);
		same &= i == 0 || lv == lv0;
		lv0 = i == 0 ? lv : lv0;
		flags_text(&m->providers[i], mask, one, sizeof one);
		everything &= !strcmp(one, "all");
		if (strcmp(one, "-") != 0 && n < flen)
			n += (size_t)snprintf(flags + n, flen - n, "%s%s.%s", n ? "," : "",
					      m->providers[i].name, one);
	}
	snprintf(level, llen, "%s", !m->nproviders ? "-" : same ? vs_level_name(lv0) : "mixed");
	if (everything || !m->nproviders)
		snprintf(flags, flen, "%s", m->nproviders ? "all" : "-");
	else if (!n)
		snprintf(flags, flen, "-");
}

static int trace_list(int argc, char **argv)
{
	(void)argv;
	if (argc > 1) {
		fprintf(stderr, "vioscope trace list: takes no arguments\n");
		return 2;
	}
	DIR *d = opendir(vs_shm_dir());
	if (!d) {
		fprintf(stderr, "vioscope trace list: %s: %s\n", vs_shm_dir(), strerror(errno));
		return 1;
	}
	printf("%-8s %-5s %-10s %-8s %-24s %-7s %s\n", "PID", "STATE", "FLAVOUR", "LEVEL", "FLAGS",
	       "THREADS", "PROGRAM");
	struct dirent *e;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, VS_SHM_PREFIX, strlen(VS_SHM_PREFIX)) != 0)
			continue;
		char path[1024], why[512];
		struct vs_shm s;
		snprintf(path, sizeof path, "%s/%s", vs_shm_dir(), e->d_name);
		if (vs_shm_open(&s, path, why, sizeof why) < 0) {
			printf("%-8s %-5s ", "?", "bad");
			vs_fputs_text(why, stdout);
			putchar('\n');
			continue;
		}
		/* From the snapshot vs_shm_open took, and escaped: the file is not ours to
		 * trust, and exe, flavour or names could carry terminal escapes. */
		char level[16], flags[256], flags_shown[sizeof flags * 4],
		    flavour[sizeof s.snap.flavour * 4], exe[sizeof s.snap.exe * 4];
		settings_summary(&s, level, sizeof level, flags, sizeof flags);
		vs_escape_text(flags_shown, sizeof flags_shown, flags);
		vs_escape_text(flavour, sizeof flavour, s.snap.flavour);
		vs_escape_text(exe, sizeof exe, s.snap.exe);
		unsigned threads = 0;
		for (unsigned i = 0; i < s.snap.ring_count; i++)
			threads += __atomic_load_n(&vs_shm_ring(&s, i)->state, __ATOMIC_RELAXED) !=
				   VS_RING_FREE;
		bool alive =
		    vs_shm_owner_alive(&s) && !__atomic_load_n(&s.hdr->exited, __ATOMIC_RELAXED);
		printf("%-8d %-5s %-10s %-8s %-24s %-7u %s\n", s.snap.pid, alive ? "live" : "dead",
		       flavour, level, flags_shown, threads, exe);
		vs_shm_close(&s);
	}
	closedir(d);
	return 0;
}

/* What a process has loaded: its objects, its providers and their settings. */
static int trace_show(int argc, char **argv)
{
	char why[512];
	struct vs_shm s;
	if (argc != 2) {
		fprintf(stderr, "vioscope trace show: usage: show PID|SHMFILE\n");
		return 2;
	}
	if (vs_shm_open(&s, argv[1], why, sizeof why) < 0) {
		trace_error("show", why);
		return 1;
	}
	const struct vs_meta *m = &s.meta;
	uint32_t mode = __atomic_load_n(&s.hdr->mode, __ATOMIC_ACQUIRE);
	int32_t recorder = __atomic_load_n(&s.hdr->recorder_pid, __ATOMIC_RELAXED);
	printf("pid %d: ", s.snap.pid);
	vs_fputs_text(s.snap.exe, stdout);
	bool alive = vs_shm_owner_alive(&s) && !__atomic_load_n(&s.hdr->exited, __ATOMIC_RELAXED);
	if (!alive)
		printf("\nnot running");
	else if (mode == VS_MODE_STREAM)
		printf("\nrecording: by pid %d", (int)recorder);
	else
		printf("\nflight recorder (nobody records)");
	printf("\nobjects (%u):\n", m->nobjects);
	for (uint32_t i = 0; i < m->nobjects; i++) {
		const struct vs_meta_object *o = &m->objects[i];
		printf("  %-4u %-12s %5u sites  ", i, o->flavour[0] ? o->flavour : "-", o->nsites);
		vs_fputs_text(o->path, stdout);
		printf("%s\n", o->unloaded ? "  (unloaded)" : "");
	}
	printf("providers (%u):\n", m->nproviders);
	for (uint32_t i = 0; i < m->nproviders; i++) {
		const struct vs_meta_provider *p = &m->providers[i];
		uint32_t lv, mask;
		char on[512], all[1024];
		provider_setting(&s, i, &lv, &mask);
		flags_text(p, mask, on, sizeof on);
		size_t n = 0;
		for (uint32_t f = 0; f < p->nflags && n < sizeof all; f++)
			n += (size_t)snprintf(all + n, sizeof all - n, "%s%s", n ? " " : "",
					      p->flags[f] ? p->flags[f] : "?");
		printf("  ");
		vs_fputs_text(p->name, stdout);
		printf("%*s %-8s on: ", strlen(p->name) < 12 ? (int)(12 - strlen(p->name)) : 0, "",
		       vs_level_name(lv));
		vs_fputs_text(on, stdout);
		printf("  flags: ");
		for (char *c = all; *c; c++)
			*c = (char)tolower((unsigned char)*c);
		vs_fputs_text(all, stdout);
		putchar('\n');
	}
	vs_shm_close(&s);
	return 0;
}

static int trace_clean(int argc, char **argv)
{
	bool dry = argc > 1 && !strcmp(argv[1], "--dry-run");
	if (argc > 2 || (argc == 2 && !dry)) {
		fprintf(stderr, "vioscope trace clean: usage: clean [--dry-run]\n");
		return 2;
	}
	DIR *d = opendir(vs_shm_dir());
	if (!d) {
		fprintf(stderr, "vioscope trace clean: %s: %s\n", vs_shm_dir(), strerror(errno));
		return 1;
	}
	struct dirent *e;
	int removed = 0, rc = 0;
	while ((e = readdir(d))) {
		static const char init_prefix[] = ".vioscope-init-";
		if (!strncmp(e->d_name, init_prefix, sizeof init_prefix - 1)) {
			/* A process killed while setting its file up leaves this behind. */
			char path[1024];
			long pid = strtol(e->d_name + sizeof init_prefix - 1, NULL, 10);
			if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
				continue;
			snprintf(path, sizeof path, "%s/%s", vs_shm_dir(), e->d_name);
			printf("%s %s\n", dry ? "would remove" : "removed", path);
			if (!dry && unlink(path) < 0)
				rc = 1;
			removed++;
			continue;
		}
		if (strncmp(e->d_name, VS_SHM_PREFIX, strlen(VS_SHM_PREFIX)) != 0)
			continue;
		char path[1024], why[512];
		struct vs_shm s;
		snprintf(path, sizeof path, "%s/%s", vs_shm_dir(), e->d_name);
		bool dead;
		if (vs_shm_open(&s, path, why, sizeof why) < 0) {
			/* Not even a valid header: only remove it if its pid is gone. */
			long pid = strtol(e->d_name + strlen(VS_SHM_PREFIX), NULL, 10);
			dead = pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
		} else {
			dead = !vs_shm_owner_alive(&s);
			vs_shm_close(&s);
		}
		if (!dead)
			continue;
		printf("%s %s\n", dry ? "would remove" : "removed", path);
		if (!dry && unlink(path) < 0) {
			fprintf(stderr, "vioscope trace clean: %s: %s\n", path, strerror(errno));
			rc = 1;
		}
		removed++;
	}
	closedir(d);
	if (!removed)
		printf("no trace files of dead processes in %s\n", vs_shm_dir());
	return rc;
}

static int trace_enable(int argc, char **argv)
{
	char why[512];
	if (argc != 3) {
		fprintf(stderr, "vioscope trace enable: usage: enable PID LEVEL[:FLAG,...]\n");
		return 2;
	}
	if (vs_trace_enable(argv[1], argv[2], why, sizeof why) < 0) {
		trace_error("enable", why);
		return 1;
	}
	printf("pid %s: tracing set to %s\n", argv[1], argv[2]);
	return 0;
}

static int trace_record_or_dump(int argc, char **argv, bool record)
{
	static const struct option opts[] = {{"output", required_argument, 0, 'o'},
					     {"duration", required_argument, 0, 'd'},
					     {"enable", required_argument, 0, 'e'},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	const char *out = NULL, *spec = NULL;
	const char *name = record ? "record" : "dump";
	double duration = 0;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:d:e:h", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'd':
			if (vs_parse_seconds(optarg, &duration) || !record) {
				fprintf(stderr, "vioscope trace %s: bad --duration '%s'\n", name,
					optarg);
				return 2;
			}
			break;
		case 'e':
			spec = optarg;
			break;
		case 'h':
			trace_usage(stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (optind != argc - 1 || !out) {
		fprintf(stderr, "vioscope trace %s: usage: %s PID -o FILE%s\n", name, name,
			record ? " [--duration S] [--enable SPEC]" : "");
		return 2;
	}
	char why[512];
	struct vs_dump_stats st;
	int rc;
	if (record) {
		stop_on_signals();
		struct vs_record_opts ro = {
		    .duration_s = duration, .stop = &stop_requested, .enable_spec = spec};
		rc = vs_trace_record(argv[optind], out, &ro, &st, why, sizeof why);
	} else {
		rc = vs_trace_dump(argv[optind], out, &st, why, sizeof why);
	}
	if (rc < 0) {
		trace_error(name, why);
		return 1;
	}
	fprintf(stderr,
		"%s: %u thread(s), %llu bytes of events, %llu dropped, %llu overwritten%s\n", out,
		st.threads, (unsigned long long)st.bytes, (unsigned long long)st.dropped,
		(unsigned long long)st.overwritten, st.alive ? "" : " (process not running)");
	return 0;
}

static int trace_decode(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"json", no_argument, 0, 'j'},	 {"chrome", no_argument, 0, 'c'},
	    {"ctf", required_argument, 0, 'C'},	 {"level", required_argument, 0, 'l'},
	    {"flag", required_argument, 0, 'f'}, {"thread", required_argument, 0, 't'},
	    {"from", required_argument, 0, 'F'}, {"to", required_argument, 0, 'T'},
	    {"help", no_argument, 0, 'h'},	 {0, 0, 0, 0}};
	struct vs_decode_opts o = {.to_s = -1};
	const char *ctf_dir = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "jl:f:t:h", opts, NULL)) != -1) {
		char why[256];
		uint64_t v;
		switch (c) {
		case 'j':
			o.json = true;
			break;
		case 'c':
			o.chrome = true;
			break;
		case 'C':
			ctf_dir = optarg;
			break;
		case 'l':
			if (vs_spec_eval(optarg, NULL, 0, true, &o.max_level, NULL, why,
					 sizeof why) < 0 ||
			    o.max_level == 0) {
				fprintf(stderr, "vioscope trace decode: --level %s: %s\n", optarg,
					o.max_level == 0 ? "level must not be off" : why);
				return 2;
			}
			break;
		case 'f':
			o.flag_spec = optarg;
			break;
		case 't':
			if (vs_cli_uint("vioscope trace decode", "thread", optarg, 1, UINT32_MAX,
					&v))
				return 2;
			o.tid = (uint32_t)v;
			break;
		case 'F':
		case 'T': {
			double s;
			if (vs_parse_seconds(optarg, &s)) {
				fprintf(stderr, "vioscope trace decode: bad --%s '%s' (seconds)\n",
					c == 'F' ? "from" : "to", optarg);
				return 2;
			}
			*(c == 'F' ? &o.from_s : &o.to_s) = s;
			break;
		}
		case 'h':
			trace_usage(stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (optind >= argc || (optind != argc - 1 && ctf_dir)) {
		fprintf(stderr, "vioscope trace decode: usage: decode FILE... [options] (--ctf: "
				"one FILE)\n");
		return 2;
	}
	char why[512];
	if (ctf_dir) {
		if (o.json || o.chrome || o.max_level || o.flag_spec || o.tid || o.from_s > 0 ||
		    o.to_s >= 0) {
			fprintf(stderr,
				"vioscope trace decode: --ctf exports every event; it takes "
				"no other option\n");
			return 2;
		}
		if (vs_trace_export_ctf(argv[optind], ctf_dir, why, sizeof why) < 0) {
			trace_error("decode", why);
			return 1;
		}
		return 0;
	}
	if (vs_trace_decode_many((const char *const *)argv + optind, (unsigned)(argc - optind), &o,
				 stdout, why, sizeof why) < 0) {
		trace_error("decode", why);
		return 1;
	}
	return 0;
}

/* `trace live PID [--level L] [--flag F,...]`: the level and flags are set on the
 * process (as `trace enable` would) and the level also filters what is shown. */
static int trace_live(int argc, char **argv)
{
	static const struct option opts[] = {{"level", required_argument, 0, 'l'},
					     {"flag", required_argument, 0, 'f'},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	const char *level = NULL, *flags = NULL;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "l:f:h", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			level = optarg;
			break;
		case 'f':
			flags = optarg;
			break;
		case 'h':
			trace_usage(stdout);
			return 0;
		default:
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr,
			"vioscope trace live: usage: live PID [--level L] [--flag F,...]\n");
		return 2;
	}
	char spec[512], why[512];
	struct vs_live_opts o = {.stop = &stop_requested};
	if (level || flags) {
		snprintf(spec, sizeof spec, "%s%s%s", level ? level : "verbose", flags ? ":" : "",
			 flags ? flags : "");
		o.enable_spec = spec;
		if (vs_spec_eval(spec, NULL, 0, false, &o.max_level, NULL, why, sizeof why) < 0) {
			fprintf(stderr, "vioscope trace live: %s: %s\n", spec, why);
			return 2;
		}
	}
	stop_on_signals();
	if (vs_trace_live(argv[optind], &o, stdout, why, sizeof why) < 0) {
		trace_error("live", why);
		return 1;
	}
	return 0;
}

static int cmd_trace(int argc, char **argv)
{
	if (argc < 2) {
		trace_usage(stderr);
		return 2;
	}
	const char *sub = argv[1];
	argc--;
	argv++;
	if (!strcmp(sub, "list"))
		return trace_list(argc, argv);
	if (!strcmp(sub, "enable"))
		return trace_enable(argc, argv);
	if (!strcmp(sub, "show"))
		return trace_show(argc, argv);
	if (!strcmp(sub, "record"))
		return trace_record_or_dump(argc, argv, true);
	if (!strcmp(sub, "dump"))
		return trace_record_or_dump(argc, argv, false);
	if (!strcmp(sub, "decode"))
		return trace_decode(argc, argv);
	if (!strcmp(sub, "clean"))
		return trace_clean(argc, argv);
	if (!strcmp(sub, "latency"))
		return trace_latency(argc, argv);
	if (!strcmp(sub, "live"))
		return trace_live(argc, argv);
	if (!strcmp(sub, "-h") || !strcmp(sub, "--help")) {
		trace_usage(stdout);
		return 0;
	}
	fprintf(stderr, "vioscope trace: unknown subcommand '%s'\n", sub);
	trace_usage(stderr);
	return 2;
}

VS_CLI_INSPECT_COMMAND(trace, 1, "trace", cmd_trace,
		       "list, show, enable, record, dump, decode and clean traces");
