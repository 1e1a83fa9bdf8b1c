/* SPDX-License-Identifier: MIT */
/* `vioscope trace ...`: the tools side of tracing.  Exit status (README, "Exit status"):
 * 0 done; 1 it ran and failed (a file that is not valid, a write error, a recording
 * taken over); 2 usage (a bad option, level, flag, spec or PID); 3 could not run (no
 * such process or file, a file that is not ours, an output that exists, a process that
 * another recorder records). */
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

#include "tools/cmd_trace.h"
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

void trace_error(const char *sub, const char *why)
{
	fprintf(stderr, "vioscope trace %s: ", sub);
	vs_fputs_text(why, stderr);
	fputc('\n', stderr);
}

/* A warning about a spec (terms that select no site): said, never fatal. */
static void trace_warning(const char *sub, const struct vs_shm *s, const char *warn)
{
	bool hot = false;
	if (!warn[0])
		return;
	for (uint32_t i = 0; i < s->meta.nobjects; i++)
		hot |= strstr(s->meta.objects[i].flavour, "all") != NULL;
	fprintf(stderr, "vioscope trace %s: warning: pid %d: ", sub, s->snap.pid);
	vs_fputs_text(warn, stderr);
	fprintf(stderr, "%s\n",
		hot ? ""
		    : " (its objects have no hot-path sites: the -all "
		      "flavours do)");
}

int trace_exit_status(int rc)
{
	switch (-rc) {
	case ENOENT:
	case ESRCH:
	case EPERM:
	case EACCES:
	case ENOTDIR:
	case ELOOP:
	case EISDIR:
	case EEXIST:
	case EBUSY:
	case EROFS:
	case ENAMETOOLONG:
		return VS_EXIT_CANNOT_RUN;
	default:
		return VS_EXIT_FAILED;
	}
}

int trace_target_arg(const char *sub, const char *arg)
{
	const char *p = arg + (*arg == '-' || *arg == '+');
	char *end;
	if (!*p || strspn(p, "0123456789") != strlen(p))
		return 0; /* not a number: a path */
	errno = 0;
	long pid = strtol(arg, &end, 10);
	if (errno || pid <= 0 || pid > INT32_MAX) {
		fprintf(stderr,
			"vioscope trace %s: '%s' is not a PID (a positive number) nor a "
			"trace file\n",
			sub, arg);
		return VS_EXIT_USAGE;
	}
	return 0;
}

int trace_open_target(const char *sub, const char *arg, struct vs_shm *s)
{
	char why[512];
	int rc = vs_shm_open(s, arg, why, sizeof why);
	if (rc < 0) {
		trace_error(sub, why);
		return trace_exit_status(rc);
	}
	return 0;
}

bool trace_owner_running(const struct vs_shm *s)
{
	return vs_shm_owner_alive(s) && !__atomic_load_n(&s->hdr->exited, __ATOMIC_RELAXED);
}

/* A level or spec given on the command line, checked before anything is opened: 0, or
 * 2 (said why). */
static int spec_syntax(const char *sub, const char *what, const char *spec, uint32_t *level)
{
	char why[512];
	uint32_t lv;
	if (vs_spec_eval(spec, NULL, 0, false, level ? level : &lv, NULL, why, sizeof why) < 0) {
		fprintf(stderr, "vioscope trace %s: %s%s%s: ", sub, what, what[0] ? " " : "", spec);
		vs_fputs_text(why, stderr);
		fputc('\n', stderr);
		return VS_EXIT_USAGE;
	}
	return 0;
}

/* ---- help --------------------------------------------------------------------------- */

struct trace_sub {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
};
static const struct trace_sub *find_sub(const char *name);

/* The spec example is checked by a test: it must record what it names. */
#define SPEC_HELP                                                                                  \
	"  SPEC = LEVEL[:FLAG,...]: LEVEL off, critical, error, warning, info, verbose (or\n"      \
	"  0-5); FLAG = provider.flag, provider.all, a flag name (of every provider that\n"        \
	"  has it), or all.  `trace show PID` lists each provider's flags that have sites;\n"      \
	"  a term that selects no site is set anyway, with a warning naming those.\n"              \
	"  e.g. verbose:scsi.scsi,target.io  (SCSI commands and the target's requests)\n"

static void trace_usage(FILE *f)
{
	fputs(
	    "usage: vioscope trace SUBCOMMAND [ARGS]   (`vioscope trace SUBCOMMAND --help`)\n"
	    "  list [--json]                traced processes (live and dead), their settings\n"
	    "  show PID [--json]            its objects and providers: level, flags on, and\n"
	    "                               the flags that have trace sites in it\n"
	    "  enable PID SPEC              set level and flags live, for every reader\n"
	    "  record PID -o FILE [--duration S] [--enable SPEC] [--force]\n"
	    "                               stream events to a new FILE until PID exits, S\n"
	    "                               seconds pass, or Ctrl-C; one recorder at a time\n"
	    "  dump PID|SHMFILE -o FILE     the last events (flight recorder) of a live or\n"
	    "                               dead process, into a new FILE\n"
	    "  decode FILE... [--json|--chrome] [--level L] [--flag F,...] [--thread TID]\n"
	    "              [--from S] [--to S]\n"
	    "                               print events; --chrome: for ui.perfetto.dev\n"
	    "  decode FILE --ctf DIR        a CTF 1.8 trace (babeltrace2, Trace Compass)\n"
	    "  latency CAPTURE... [--json] [--by lun|queue|op] [--slow N] [--svg FILE]\n"
	    "                               where requests spent their time, per stage\n"
	    "  live PID [--level L] [--flag F,...] [--enable SPEC]\n"
	    "                               its events as they happen, until Ctrl-C or exit\n"
	    "  clean [--dry-run]            remove trace files of dead processes\n" SPEC_HELP
	    "Exit status: 0 done, 1 failed, 2 usage, 3 could not run (README, \"Exit status\").\n",
	    f);
}

static int sub_help(const char *name)
{
	const struct trace_sub *sub = find_sub(name);
	fputs(sub->help, stdout);
	return VS_EXIT_OK;
}

/* ---- enable ------------------------------------------------------------------------- */

static int trace_enable(int argc, char **argv)
{
	char why[512], warn[1024];
	struct vs_shm s;
	int rc;
	if (argc != 3) {
		fprintf(stderr, "vioscope trace enable: usage: enable PID SPEC\n");
		return VS_EXIT_USAGE;
	}
	if ((rc = trace_target_arg("enable", argv[1])) ||
	    (rc = spec_syntax("enable", "", argv[2], NULL)) ||
	    (rc = trace_open_target("enable", argv[1], &s)))
		return rc;
	if (vs_shm_apply_spec(&s, argv[2], warn, sizeof warn, why, sizeof why) < 0) {
		trace_error("enable", why);
		vs_shm_close(&s);
		return VS_EXIT_USAGE; /* a name the process has no provider or flag for */
	}
	printf("pid %s: tracing set to %s\n", argv[1], argv[2]);
	trace_warning("enable", &s, warn);
	vs_shm_close(&s);
	return VS_EXIT_OK;
}

/* ---- record, dump ------------------------------------------------------------------- */

struct record_start {
	const struct vs_dump_stats *st;
	const char *target;
};

/* Said once streaming has begun: whom it took the recording from. */
static void record_started(void *opaque)
{
	const struct record_start *r = opaque;
	if (!r->st->displaced)
		return;
	if (r->st->displaced_alive)
		fprintf(stderr,
			"vioscope trace record: took the recording of %s over from pid %d "
			"(--force): that recorder stops, its capture whole\n",
			r->target, (int)r->st->displaced);
	else
		fprintf(stderr,
			"vioscope trace record: pid %d, the recorder of %s, had gone without "
			"detaching: taking over\n",
			(int)r->st->displaced, r->target);
}

static int trace_record_or_dump(int argc, char **argv, bool record)
{
	static const struct option opts[] = {{"output", required_argument, 0, 'o'},
					     {"duration", required_argument, 0, 'd'},
					     {"enable", required_argument, 0, 'e'},
					     {"force", no_argument, 0, 'F'},
					     {0, 0, 0, 0}};
	const char *out = NULL, *spec = NULL;
	const char *name = record ? "record" : "dump";
	double duration = 0;
	bool force = false;
	int c, rc;
	optind = 1;
	while ((c = getopt_long(argc, argv, "o:d:e:", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			out = optarg;
			break;
		case 'd':
		case 'e':
		case 'F':
			if (!record) {
				fprintf(stderr, "vioscope trace dump: --%s is for `trace record`\n",
					c == 'd'   ? "duration"
					: c == 'e' ? "enable"
						   : "force");
				return VS_EXIT_USAGE;
			}
			if (c == 'd' && vs_parse_seconds(optarg, &duration)) {
				fprintf(stderr, "vioscope trace record: bad --duration '%s'\n",
					optarg);
				return VS_EXIT_USAGE;
			}
			spec = c == 'e' ? optarg : spec;
			force |= c == 'F';
			break;
		default:
			return VS_EXIT_USAGE;
		}
	}
	if (optind != argc - 1 || !out) {
		fprintf(stderr, "vioscope trace %s: usage: %s PID%s -o FILE%s\n", name, name,
			record ? "" : "|SHMFILE",
			record ? " [--duration S] [--enable SPEC] [--force]" : "");
		return VS_EXIT_USAGE;
	}
	const char *target = argv[optind];
	if ((rc = trace_target_arg(name, target)) ||
	    (spec && (rc = spec_syntax(name, "--enable", spec, NULL))))
		return rc;
	char why[512];
	struct vs_dump_stats st;
	if (record && spec) {
		/* Names checked against the process first: a flag it has no provider or flag
		 * for is a usage error, and a term that selects nothing is said before the
		 * recording starts. */
		char warn[1024];
		struct vs_shm s;
		if ((rc = trace_open_target(name, target, &s)))
			return rc;
		rc = vs_shm_check_spec(&s, spec, warn, sizeof warn, why, sizeof why);
		if (rc == 0)
			trace_warning("record", &s, warn);
		vs_shm_close(&s);
		if (rc < 0) {
			trace_error(name, why);
			return VS_EXIT_USAGE;
		}
	}
	if (record) {
		stop_on_signals();
		struct record_start started = {&st, target};
		struct vs_record_opts ro = {.duration_s = duration,
					    .stop = &stop_requested,
					    .enable_spec = spec,
					    .force = force,
					    .started = record_started,
					    .opaque = &started};
		rc = vs_trace_record(target, out, &ro, &st, why, sizeof why);
	} else {
		rc = vs_trace_dump(target, out, &st, why, sizeof why);
	}
	if (rc < 0 && rc != -ECANCELED) {
		trace_error(name, why);
		return trace_exit_status(rc);
	}
	fprintf(stderr,
		"%s: %u thread(s), %llu bytes of events, %llu dropped, %llu overwritten%s\n", out,
		st.threads, (unsigned long long)st.bytes, (unsigned long long)st.dropped,
		(unsigned long long)st.overwritten, st.alive ? "" : " (process not running)");
	if (rc == -ECANCELED) {
		trace_error(name, why);
		return VS_EXIT_FAILED;
	}
	return VS_EXIT_OK;
}

/* ---- decode ------------------------------------------------------------------------- */

static int trace_decode(int argc, char **argv)
{
	static const struct option opts[] = {{"json", no_argument, 0, 'j'},
					     {"chrome", no_argument, 0, 'c'},
					     {"ctf", required_argument, 0, 'C'},
					     {"level", required_argument, 0, 'l'},
					     {"flag", required_argument, 0, 'f'},
					     {"thread", required_argument, 0, 't'},
					     {"from", required_argument, 0, 'F'},
					     {"to", required_argument, 0, 'T'},
					     {0, 0, 0, 0}};
	struct vs_decode_opts o = {.to_s = -1};
	const char *ctf_dir = NULL;
	char flags[512];
	int c, rc;
	optind = 1;
	while ((c = getopt_long(argc, argv, "jl:f:t:", opts, NULL)) != -1) {
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
			if ((rc = spec_syntax("decode", "--level", optarg, &o.max_level)))
				return rc;
			if (o.max_level == 0) {
				fprintf(stderr,
					"vioscope trace decode: --level %s: level off shows "
					"nothing (critical, error, warning, info or verbose)\n",
					optarg);
				return VS_EXIT_USAGE;
			}
			break;
		case 'f':
			snprintf(flags, sizeof flags, "verbose:%s", optarg);
			if ((rc = spec_syntax("decode", "--flag", flags, NULL)))
				return rc;
			o.flag_spec = optarg;
			break;
		case 't':
			if (vs_cli_uint("vioscope trace decode", "thread", optarg, 1, UINT32_MAX,
					&v))
				return VS_EXIT_USAGE;
			o.tid = (uint32_t)v;
			break;
		case 'F':
		case 'T': {
			double s;
			if (vs_parse_seconds(optarg, &s)) {
				fprintf(stderr, "vioscope trace decode: bad --%s '%s' (seconds)\n",
					c == 'F' ? "from" : "to", optarg);
				return VS_EXIT_USAGE;
			}
			*(c == 'F' ? &o.from_s : &o.to_s) = s;
			break;
		}
		default:
			return VS_EXIT_USAGE;
		}
	}
	if (optind >= argc || (optind != argc - 1 && ctf_dir)) {
		fprintf(stderr, "vioscope trace decode: usage: decode FILE... [options] (--ctf: "
				"one FILE)\n");
		return VS_EXIT_USAGE;
	}
	char why[512];
	if (ctf_dir) {
		if (o.json || o.chrome || o.max_level || o.flag_spec || o.tid || o.from_s > 0 ||
		    o.to_s >= 0) {
			fprintf(stderr,
				"vioscope trace decode: --ctf exports every event; it takes "
				"no other option\n");
			return VS_EXIT_USAGE;
		}
		if ((rc = vs_trace_export_ctf(argv[optind], ctf_dir, why, sizeof why)) < 0) {
			trace_error("decode", why);
			return trace_exit_status(rc);
		}
		return VS_EXIT_OK;
	}
	rc = vs_trace_decode_many((const char *const *)argv + optind, (unsigned)(argc - optind), &o,
				  stdout, why, sizeof why);
	if (rc < 0) {
		trace_error("decode", why);
		/* -EDOM: --flag names a flag the capture has no provider or flag for */
		return rc == -EDOM ? VS_EXIT_USAGE : trace_exit_status(rc);
	}
	return VS_EXIT_OK;
}

/* ---- live --------------------------------------------------------------------------- */

/* Whether the process records less than `live` would show (its level or flags): said,
 * since live only filters. */
static void live_note(const struct vs_shm *s, const char *flags, unsigned max_level)
{
	const struct vs_meta *m = &s->meta;
	struct vs_spec_provider *sp = vs_meta_spec_providers(m);
	uint32_t *want = calloc(m->nproviders ? m->nproviders : 1, sizeof *want), level;
	char spec[512], why[512];
	bool less = false;
	snprintf(spec, sizeof spec, "verbose%s%s", flags ? ":" : "", flags ? flags : "");
	if (sp && want &&
	    vs_spec_eval(spec, sp, m->nproviders, false, &level, want, why, sizeof why) == 0) {
		for (uint32_t i = 0; i < m->nproviders && !less; i++) {
			const struct vs_shm_provider *p = vs_shm_provider(s, m->providers[i].slot);
			uint32_t lv = p ? __atomic_load_n(&p->level, __ATOMIC_RELAXED) : 0;
			uint32_t on = p ? __atomic_load_n(&p->mask, __ATOMIC_RELAXED) : 0;
			for (unsigned l = 1; l <= (max_level ? max_level : VS_LEVEL_MAX); l++)
				less |= (want[i] & sp[i].sited[l] & ~(l <= lv ? on : 0)) != 0;
		}
	}
	if (less)
		fprintf(stderr,
			"vioscope trace live: pid %d records less than --level/--flag "
			"would show (`trace show %d`): live only filters; `--enable SPEC` "
			"or `trace enable` changes what it records, for every reader\n",
			s->snap.pid, s->snap.pid);
	free(sp);
	free(want);
}

/* `trace live PID [--level L] [--flag F,...] [--enable SPEC]`: the level and flags
 * filter what is shown; --enable sets the process's settings (for every reader). */
static int trace_live(int argc, char **argv)
{
	static const struct option opts[] = {{"level", required_argument, 0, 'l'},
					     {"flag", required_argument, 0, 'f'},
					     {"enable", required_argument, 0, 'e'},
					     {0, 0, 0, 0}};
	const char *level = NULL, *flags = NULL, *enable = NULL;
	struct vs_live_opts o = {.stop = &stop_requested};
	char spec[512], why[512], warn[1024];
	struct vs_shm s;
	int c, rc;
	optind = 1;
	while ((c = getopt_long(argc, argv, "l:f:e:", opts, NULL)) != -1) {
		switch (c) {
		case 'l':
			level = optarg;
			break;
		case 'f':
			flags = optarg;
			break;
		case 'e':
			enable = optarg;
			break;
		default:
			return VS_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "vioscope trace live: usage: live PID [--level L] [--flag F,...] "
				"[--enable SPEC]\n");
		return VS_EXIT_USAGE;
	}
	const char *target = argv[optind];
	snprintf(spec, sizeof spec, "%s%s%s", level ? level : "verbose", flags ? ":" : "",
		 flags ? flags : "");
	if ((rc = trace_target_arg("live", target)) ||
	    (rc = spec_syntax("live", "--level/--flag", spec, &o.max_level)) ||
	    (enable && (rc = spec_syntax("live", "--enable", enable, NULL))))
		return rc;
	if (level && o.max_level == 0) {
		fprintf(stderr, "vioscope trace live: --level %s: level off shows nothing\n",
			level);
		return VS_EXIT_USAGE;
	}
	if ((rc = trace_open_target("live", target, &s)))
		return rc;
	rc = vs_shm_check_spec(&s, spec, warn, sizeof warn, why, sizeof why);
	if (rc == 0 && enable) {
		trace_warning("live", &s, warn);
		rc = vs_shm_apply_spec(&s, enable, warn, sizeof warn, why, sizeof why);
		if (rc == 0)
			fprintf(stderr,
				"vioscope trace live: pid %d: tracing set to %s (for every "
				"reader of the process)\n",
				s.snap.pid, enable);
	}
	if (rc == 0) {
		trace_warning("live", &s, warn);
		if (!enable && (level || flags))
			live_note(&s, flags, o.max_level);
	}
	vs_shm_close(&s);
	if (rc < 0) {
		trace_error("live", why);
		return VS_EXIT_USAGE;
	}
	o.flag_spec = flags;
	if (!level)
		o.max_level = 0;
	stop_on_signals();
	if ((rc = vs_trace_live(target, &o, stdout, why, sizeof why)) < 0) {
		trace_error("live", why);
		return trace_exit_status(rc);
	}
	return VS_EXIT_OK;
}

/* ---- clean -------------------------------------------------------------------------- */

static int trace_clean(int argc, char **argv)
{
	bool dry = argc > 1 && !strcmp(argv[1], "--dry-run");
	if (argc > 2 || (argc == 2 && !dry)) {
		fprintf(stderr, "vioscope trace clean: usage: clean [--dry-run]\n");
		return VS_EXIT_USAGE;
	}
	DIR *d = opendir(vs_shm_dir());
	if (!d) {
		fprintf(stderr, "vioscope trace clean: %s: %s\n", vs_shm_dir(), strerror(errno));
		return VS_EXIT_CANNOT_RUN;
	}
	struct dirent *e;
	int removed = 0, rc = VS_EXIT_OK;
	while ((e = readdir(d))) {
		static const char init_prefix[] = VS_SHM_INIT_PREFIX;
		if (!strncmp(e->d_name, init_prefix, sizeof init_prefix - 1)) {
			/* A process killed while setting its file up leaves this behind. */
			char path[1024];
			long pid = strtol(e->d_name + sizeof init_prefix - 1, NULL, 10);
			if (pid <= 0 || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
				continue;
			snprintf(path, sizeof path, "%s/%s", vs_shm_dir(), e->d_name);
			printf("%s %s\n", dry ? "would remove" : "removed", path);
			if (!dry && unlink(path) < 0)
				rc = VS_EXIT_FAILED;
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
			rc = VS_EXIT_FAILED;
		}
		removed++;
	}
	closedir(d);
	if (!removed)
		printf("no trace files of dead processes in %s\n", vs_shm_dir());
	return rc;
}

/* ---- subcommands -------------------------------------------------------------------- */

static const struct trace_sub subs[] = {
    {"list", trace_list,
     "usage: vioscope trace list [--json]\n"
     "  The traced processes whose trace files are in $VIOSCOPE_TRACE_DIR (default\n"
     "  /dev/shm), live and dead: flavour, level, flags on, threads, program.\n"
     "  --json   one JSON object: version, timestamp, the directory, each process (with\n"
     "           its recorder)\n"},
    {"show", trace_show,
     "usage: vioscope trace show PID|SHMFILE [--json]\n"
     "  What the process has loaded and who records it: its objects (executable,\n"
     "  libraries, modules: flavour and number of sites) and its providers: level, the\n"
     "  flags that are on, and the flags that have trace sites in it (a provider declares\n"
     "  more; only these select anything).  A recorder that has gone without detaching\n"
     "  is said so.\n"
     "  --json   one JSON object, with each flag's number of sites and the flags declared\n"
     "           without sites\n"},
    {"enable", trace_enable,
     "usage: vioscope trace enable PID SPEC\n"
     "  Set its level and flags now, no restart, for every reader of the process (a\n"
     "  recorder, `trace live`, a later dump).\n" SPEC_HELP},
    {"record", NULL,
     "usage: vioscope trace record PID -o FILE [--duration S] [--enable SPEC] [--force]\n"
     "  Stream its events into FILE until it exits, S seconds pass, or Ctrl-C.  While it\n"
     "  streams, a full ring drops new events (counted, marked where lost) instead of\n"
     "  overwriting old ones.  FILE is made new: an existing file (or a symbolic link)\n"
     "  is never overwritten.\n"
     "  --duration S   stop after S seconds (default: no limit)\n"
     "  --enable SPEC  set level and flags as streaming starts (as `trace enable`)\n"
     "  --force        take the recording over from the recorder that has it (it stops,\n"
     "                 its capture whole); without it a second recorder is refused,\n"
     "                 naming the first.  One that has gone is taken over in any case.\n"},
    {"dump", NULL,
     "usage: vioscope trace dump PID|SHMFILE -o FILE\n"
     "  The last events of each thread (the flight recorder) of a live or dead process,\n"
     "  into FILE, made new: an existing file (or a symbolic link) is never overwritten.\n"},
    {"decode", trace_decode,
     "usage: vioscope trace decode FILE... [--json|--chrome] [--level L] [--flag F,...]\n"
     "                             [--thread TID] [--from S] [--to S]\n"
     "       vioscope trace decode FILE --ctf DIR\n"
     "  Print the events of captures, one line each (default: text, like tracefmt).\n"
     "  --json         one JSON object per event\n"
     "  --chrome       trace-event JSON for ui.perfetto.dev or chrome://tracing: each\n"
     "                 capture a named process, its threads named; driver and device\n"
     "                 captures together: each request's stages joined by flow arrows\n"
     "  --level L      events at level L and below (default: every level)\n"
     "  --flag F,...   events of these flags: provider.flag, a flag of every provider,\n"
     "                 provider.all (default: every flag)\n"
     "  --thread TID   that thread's events only\n"
     "  --from S --to S  a window, in seconds from the first event\n"
     "  --ctf DIR      write a CTF 1.8 trace into DIR (babeltrace2, Trace Compass);\n"
     "                 files in DIR are never replaced\n"},
    {"latency", trace_latency,
     "usage: vioscope trace latency CAPTURE... [--json] [--by lun|queue|op] [--slow N]\n"
     "                              [--svg FILE]\n"
     "  Joins driver (initiator) and device (target) captures by request tag and prints,\n"
     "  per stage, count, p50, p90, p99, p99.9 and max (docs/TRACING.md).\n"
     "  --json         the same as one JSON object\n"
     "  --by X         one table per LUN, queue or opcode (default: one for all)\n"
     "  --slow N       the N slowest requests (1-1000) with what their threads did\n"
     "  --svg FILE     also draw the stage distributions as an SVG\n"},
    {"live", trace_live,
     "usage: vioscope trace live PID [--level L] [--flag F,...] [--enable SPEC]\n"
     "  Its events as they happen, read every 5 ms without taking the stream from a\n"
     "  recorder, until Ctrl-C or the process exits.\n"
     "  --level L      show events at level L and below (default: all it records)\n"
     "  --flag F,...   show these flags only (default: all it records)\n"
     "                 (both only filter: the process's settings stay as they are)\n"
     "  --enable SPEC  set the process's level and flags first, as `trace enable` does:\n"
     "                 for every reader of the process, and they stay after live ends\n"},
    {"clean", trace_clean,
     "usage: vioscope trace clean [--dry-run]\n"
     "  Remove the trace files that processes which have gone left behind (killed: a\n"
     "  normal exit removes its own) in $VIOSCOPE_TRACE_DIR (default /dev/shm).\n"
     "  --dry-run      say what would be removed, remove nothing\n"},
};

static const struct trace_sub *find_sub(const char *name)
{
	for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
		if (!strcmp(subs[i].name, name))
			return &subs[i];
	return NULL;
}

/* Does a subcommand's command line ask for its help? */
static bool wants_help(int argc, char **argv)
{
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return true;
	return false;
}

static int cmd_trace(int argc, char **argv)
{
	if (argc < 2) {
		trace_usage(stderr);
		return VS_EXIT_USAGE;
	}
	const char *name = argv[1];
	if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
		if (argc > 2 && find_sub(argv[2]))
			return sub_help(argv[2]);
		trace_usage(stdout);
		return VS_EXIT_OK;
	}
	const struct trace_sub *sub = find_sub(name);
	if (!sub) {
		fprintf(stderr, "vioscope trace: unknown subcommand '%s'\n", name);
		trace_usage(stderr);
		return VS_EXIT_USAGE;
	}
	argc--;
	argv++;
	if (wants_help(argc, argv))
		return sub_help(name);
	if (!strcmp(name, "record") || !strcmp(name, "dump"))
		return trace_record_or_dump(argc, argv, !strcmp(name, "record"));
	return sub->fn(argc, argv);
}

VS_CLI_INSPECT_COMMAND(trace, 1, "trace", cmd_trace,
		       "list, show, enable, record, dump, decode, latency, live and clean traces");
