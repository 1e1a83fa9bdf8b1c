/* SPDX-License-Identifier: MIT */
/*
 * `vioscope help`: a command's help, and what the build installs from the same source
 * (struct vs_cli_help, src/util/util.h): the man pages (`help --man DIR`) and the bash
 * completion (`help --bash-completion`).  The top-level usage is here too.
 *
 * A command not yet described by a struct vs_cli_help (its help still printed by its own
 * usage function) gets a man page holding its `--help` text, taken by running it.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tools/commands.h"
#include "util/util.h"

/* ---- the top level ----------------------------------------------------------------------- */

static const struct vs_cli_section top_sections[] = {
    {"Exit status",
     "Every command exits with one of these (README.md, \"Exit status\"):\n"
     "  0    it did what was asked (a check found nothing wrong)\n"
     "  1    the thing tested or asked for failed: a fault found, requests failed, an RPC\n"
     "       error, a target that failed while serving\n"
     "  2    usage: a mistake in the command line (an unknown option, a malformed size,\n"
     "       time, level, flag, spec or PID)\n"
     "  3    could not run: a correct command that could not do its job (no such socket,\n"
     "       process or file, a target that would not start, an image another holds)\n"
     "  130  interrupted by SIGINT (143: SIGTERM) after it stopped its children and\n"
     "       removed what it made; `vioscope target` exits 0 after SIGINT or SIGTERM, its\n"
     "       normal stop"},
    {"Sizes and times",
     "Sizes are bytes with an optional suffix, either case: K, M, G, T, P, E alone or with "
     "iB or B after it (64M, 1GiB, 4KB), all powers of 1024 (KiB as IEC says, K and KB as "
     "fio takes them by default). "
     "Times are seconds, decimals allowed, with an optional unit: us, ms, s, m or min, h, d "
     "(30, 0.5, 500ms, 1m)."},
    {"Environment",
     "  VIOSCOPE_TRACE=SPEC         tracing at start, LEVEL[:FLAG,...] (docs/TRACING.md)\n"
     "  VIOSCOPE_TRACE_DIR=DIR      where trace files live (default: /dev/shm)\n"
     "  VIOSCOPE_TRACE_RING=SIZE    bytes per thread ring, a power of two (default: 1M)\n"
     "  VIOSCOPE_TRACE_THREADS=N    thread rings in the file (default: 64)\n"
     "  VIOSCOPE_TRACE_FILE=PATH    print flavours: write here instead of stderr\n"
     "  VIOSCOPE_TRACE_KEEP=1       keep the trace file after a normal exit\n"
     "  VIOSCOPE_TRACE_CLOCK=monotonic  clock_gettime timestamps instead of the TSC\n"
     "  VIOSCOPE_STATS_CLOCK=monotonic  the target's statistics without the TSC\n"
     "  VIOSCOPE_RPC_SOCKET=PATH    `vioscope rpc`'s --socket when it is not given\n"
     "  VIOSCOPE_BENCH_IMAGE=PATH   the image file `bench` and `demo` serve file LUNs from\n"
     "  VIOSCOPE_BENCH_TARGET_LOG=1 the targets `bench` starts keep their stderr\n"
     "  VIOSCOPE_DEMO_DIR=DIR       where `demo` puts its work files (kept)\n"
     "  NOTIFY_SOCKET=PATH          set by systemd: `vioscope target` reports ready there"},
    {"Files",
     "  /dev/shm/vioscope-trace-PID  each traced process's trace file (VIOSCOPE_TRACE_DIR)"},
    {0},
};

static const struct vs_cli_help top_help = {
    .name = "",
    .summary = "a user-space virtio-scsi stack: target, initiator, checks, benchmarks, tracing",
    .synopsis = "COMMAND [ARGS]\n--help | --version",
    .text = "vioscope is a user-space virtio-scsi storage stack: a vhost-user-scsi target "
	    "(the device QEMU's vhost-user-scsi-pci uses), a user-space initiator (the driver), "
	    "conformance checks, benchmarks, and a tiered tracing system in every layer. One "
	    "binary, a command per job; `vioscope COMMAND --help` (or `man vioscope-COMMAND`) "
	    "for a command's options.\n\n"
	    "One binary per trace flavour: vioscope (cold, the default), vioscope-off, "
	    "vioscope-all, vioscope-cold-print, vioscope-all-print.",
    .sections = top_sections,
};

static int by_order(const void *a, const void *b)
{
	const struct vs_cli_command *x = *(const struct vs_cli_command *const *)a;
	const struct vs_cli_command *y = *(const struct vs_cli_command *const *)b;

	return (x->order > y->order) - (x->order < y->order);
}

/* The commands in the order of the usage text; how many. */
static size_t commands_sorted(const struct vs_cli_command **out, size_t max)
{
	const struct vs_cli_command *cmds;
	size_t n;

	vs_cli_commands(&cmds, &n);
	if (n > max)
		n = max;
	for (size_t i = 0; i < n; i++)
		out[i] = &cmds[i];
	qsort(out, n, sizeof(out[0]), by_order);
	return n;
}

/* A command's one line: its help's summary, else what it registered. */
static const char *summary_of(const struct vs_cli_command *c)
{
	const struct vs_cli_help *h = vs_cli_help_find(c->name);

	return h ? h->summary : c->help;
}

void cli_usage(FILE *f)
{
	const struct vs_cli_command *cmds[32];
	size_t n = commands_sorted(cmds, 32);

	fprintf(f, "usage: vioscope COMMAND [ARGS]\n       vioscope --help | --version\n\n");
	vs_cli_text_print(f, top_help.text, 0, 80);
	fprintf(f, "\nCommands:\n");
	for (size_t i = 0; i < n; i++)
		fprintf(f, "  %-8s %s\n", cmds[i]->name, summary_of(cmds[i]));
	for (const struct vs_cli_section *s = top_help.sections; s->title; s++) {
		fprintf(f, "\n%s:\n", s->title);
		vs_cli_text_print(f, s->text, 2, 80);
	}
	fprintf(f, "\n`man vioscope` has this page too (this binary: %s flavour).\n",
		vs_cli_flavour);
}

/* ---- a command's --help text, from its help or by running it ------------------------------ */

static const struct vs_cli_command *command_find(const char *name)
{
	const struct vs_cli_command *cmds;
	size_t n;

	vs_cli_commands(&cmds, &n);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(cmds[i].name, name))
			return &cmds[i];
	return NULL;
}

/* What `vioscope NAME --help` prints, for a command without a registered help: malloc'd,
 * or NULL.  Its stdout goes to a memfd meanwhile. */
static char *help_output(const struct vs_cli_command *c)
{
	char *argv[] = {(char *)c->name, "--help", NULL}, *text = NULL;
	int fd = memfd_create("vioscope-help", MFD_CLOEXEC), saved = -1, rc;
	off_t len;

	if (fd < 0)
		return NULL;
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	if (saved < 0 || dup2(fd, STDOUT_FILENO) < 0)
		goto out;
	rc = c->fn(2, argv);
	fflush(stdout);
	dup2(saved, STDOUT_FILENO);
	len = lseek(fd, 0, SEEK_END);
	if (rc || len <= 0 || !(text = calloc(1, (size_t)len + 1)) ||
	    pread(fd, text, (size_t)len, 0) != len) {
		free(text);
		text = NULL;
	}
out:
	if (saved >= 0)
		close(saved);
	close(fd);
	return text;
}

/* ---- man pages --------------------------------------------------------------------------- */

/* Text for roff: backslashes and hyphens escaped (options copy as typed), no line starting
 * with a control character. */
static void roff_put(FILE *f, const char *s, size_t len, bool line_start)
{
	for (size_t i = 0; i < len; i++) {
		char c = s[i];

		if (line_start && (c == '.' || c == '\''))
			fputs("\\&", f);
		line_start = false;
		if (c == '\\')
			fputs("\\e", f);
		else if (c == '-')
			fputs("\\-", f);
		else
			fputc(c, f);
		if (c == '\n')
			line_start = true;
	}
}

static void roff_str(FILE *f, const char *s)
{
	roff_put(f, s, strlen(s), true);
}

/* Paragraphs as .PP (roff fills them), kept lines in .nf blocks. */
static void roff_text(FILE *f, const char *text)
{
	enum { NONE, FILLED, KEPT } mode = NONE; /* the block the last line was in */

	for (const char *p = text; p && *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		bool kept = len >= 2 && p[0] == ' ' && p[1] == ' ';

		if (!len) {
			fputs(mode == KEPT ? ".fi\n" : "", f);
			mode = NONE;
		} else if (kept) {
			fputs(mode == NONE ? ".PP\n.nf\n" : mode == FILLED ? ".nf\n" : "", f);
			mode = KEPT;
		} else {
			fputs(mode == NONE ? ".PP\n" : mode == KEPT ? ".fi\n" : "", f);
			mode = FILLED;
		}
		if (len) {
			roff_put(f, p, len, true);
			fputc('\n', f);
		}
		p = nl ? nl + 1 : NULL;
	}
	if (mode == KEPT)
		fputs(".fi\n", f);
}

static void roff_opt(FILE *f, const struct vs_cli_opt *o)
{
	fputs(".TP\n", f);
	if (o->short_name)
		fprintf(f, "\\fB\\-%c\\fR, ", o->short_name);
	fputs("\\fB\\-\\-", f);
	roff_put(f, o->name, strlen(o->name), false);
	fputs("\\fR", f);
	if (o->arg) {
		fputs(" \\fI", f);
		roff_put(f, o->arg, strlen(o->arg), false);
		fputs("\\fR", f);
	}
	fputc('\n', f);
	roff_str(f, o->help);
	if (o->def) {
		fputs(" (default: ", f);
		roff_put(f, o->def, strlen(o->def), false);
		fputs(")", f);
	}
	fputc('\n', f);
}

static void roff_head(FILE *f, const char *page, const char *summary)
{
	char upper[64];
	size_t i;

	for (i = 0; page[i] && i + 1 < sizeof(upper); i++)
		upper[i] = (char)toupper((unsigned char)page[i]);
	upper[i] = 0;
	fprintf(f, ".\\\" Generated by `vioscope help --man` from the help of each command: "
		   "do not edit.\n");
	fprintf(f, ".TH %s 1 \"%s\" \"vioscope %s\" \"vioscope manual\"\n", upper,
		vs_cli_commit_date, vs_cli_version);
	fputs(".SH NAME\n", f);
	roff_put(f, page, strlen(page), true);
	fputs(" \\- ", f);
	roff_put(f, summary, strlen(summary), false);
	fputc('\n', f);
}

static void roff_synopsis(FILE *f, const struct vs_cli_help *h)
{
	const char *p = h->synopsis;

	while (p && *p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		if (*p == ' ') { /* the form above goes on */
			fputs("    ", f);
			roff_put(f, p + 1, len - 1, false);
			fputs("\n.br\n", f);
			p = nl ? nl + 1 : NULL;
			continue;
		}
		fputs("\\fBvioscope", f);
		if (*h->name) {
			fputc(' ', f);
			roff_put(f, h->name, strlen(h->name), false);
		}
		fputs("\\fR ", f);
		roff_put(f, p, len, false);
		fputs("\n.br\n", f);
		p = nl ? nl + 1 : NULL;
	}
}

static void roff_sections(FILE *f, const struct vs_cli_section *s, const char *macro)
{
	for (; s && s->title; s++) {
		char upper[80];
		size_t i;

		for (i = 0; s->title[i] && i + 1 < sizeof(upper); i++)
			upper[i] = !strcmp(macro, ".SH") ? (char)toupper((unsigned char)s->title[i])
							 : s->title[i];
		upper[i] = 0;
		fprintf(f, "%s %s\n", macro, upper);
		roff_text(f, s->text);
	}
}

/* The options of h, --help and --version included. */
static void roff_opts(FILE *f, const struct vs_cli_help *h)
{
	static const struct vs_cli_opt common[] = {
	    {"help", 'h', 0, NULL, NULL, "print this help and exit"},
	    {"version", 0, 0, NULL, NULL, "print the version and the commit built, and exit"},
	};

	for (const struct vs_cli_opt *o = h->opts; o && o->name; o++)
		roff_opt(f, o);
	for (size_t i = 0; i < 2; i++)
		roff_opt(f, &common[i]);
}

/* vioscope-NAME(1): the command's help, then each subcommand's ("trace record"...). */
static void man_command(FILE *f, const struct vs_cli_command *c)
{
	const struct vs_cli_help *const *helps, *h = vs_cli_help_find(c->name);
	size_t nhelps, len = strlen(c->name);
	char page[64];

	vs_cli_helps(&helps, &nhelps);
	snprintf(page, sizeof(page), "vioscope-%s", c->name);
	roff_head(f, page, summary_of(c));
	fputs(".SH SYNOPSIS\n", f);
	if (!h) {
		char *text = help_output(c);

		fprintf(f,
			"\\fBvioscope %s\\fR ...\n.SH DESCRIPTION\nAs `vioscope %s "
			"\\-\\-help` prints it:\n.PP\n.nf\n",
			c->name, c->name);
		roff_str(f, text ? text : "(no help text)\n");
		fputs(".fi\n", f);
		free(text);
	} else {
		roff_synopsis(f, h);
		for (size_t i = 0; i < nhelps; i++)
			if (!strncmp(helps[i]->name, c->name, len) && helps[i]->name[len] == ' ')
				roff_synopsis(f, helps[i]);
		fputs(".SH DESCRIPTION\n", f);
		roff_text(f, h->text);
		fputs(".SH OPTIONS\n", f);
		roff_opts(f, h);
		roff_sections(f, h->sections, ".SH");
		for (size_t i = 0; i < nhelps; i++) {
			const struct vs_cli_help *s = helps[i];

			if (strncmp(s->name, c->name, len) || s->name[len] != ' ')
				continue;
			fprintf(f, ".SH \"VIOSCOPE %s\"\n", s->name);
			roff_str(f, s->summary);
			fputs(".PP\n", f);
			roff_synopsis(f, s);
			roff_text(f, s->text);
			fputs(".SS Options\n", f);
			roff_opts(f, s);
			roff_sections(f, s->sections, ".SS");
		}
	}
	fputs(".SH SEE ALSO\n\\fBvioscope\\fR(1); docs/ in vioscope's sources\n", f);
}

/* vioscope(1): the top level and the list of commands. */
static void man_top(FILE *f)
{
	const struct vs_cli_command *cmds[32];
	size_t n = commands_sorted(cmds, 32);

	roff_head(f, "vioscope", top_help.summary);
	fputs(".SH SYNOPSIS\n", f);
	roff_synopsis(f, &top_help);
	fputs(".SH DESCRIPTION\n", f);
	roff_text(f, top_help.text);
	fputs(".SH COMMANDS\n", f);
	for (size_t i = 0; i < n; i++) {
		fprintf(f, ".TP\n\\fB%s\\fR\n", cmds[i]->name);
		roff_str(f, summary_of(cmds[i]));
		fprintf(f, " (\\fBvioscope\\-%s\\fR(1))\n", cmds[i]->name);
	}
	roff_sections(f, top_help.sections, ".SH");
	fputs(".SH SEE ALSO\n", f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "\\fBvioscope\\-%s\\fR(1)%s\n", cmds[i]->name, i + 1 < n ? "," : "");
}

static int write_page(const char *dir, const char *page, const struct vs_cli_command *c)
{
	char path[4096];
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/%s.1", dir, page);
	f = fopen(path, "we");
	if (!f) {
		fprintf(stderr, "vioscope help: %s: %s\n", path, strerror(errno));
		return VS_EXIT_CANNOT_RUN;
	}
	if (c)
		man_command(f, c);
	else
		man_top(f);
	rc = ferror(f);
	if (fclose(f) || rc) {
		fprintf(stderr, "vioscope help: writing %s failed\n", path);
		return VS_EXIT_CANNOT_RUN;
	}
	return VS_EXIT_OK;
}

static int write_man_pages(const char *dir)
{
	const struct vs_cli_command *cmds[32];
	size_t n = commands_sorted(cmds, 32);
	int rc = write_page(dir, "vioscope", NULL);

	for (size_t i = 0; i < n && !rc; i++) {
		char page[64];

		snprintf(page, sizeof(page), "vioscope-%s", cmds[i]->name);
		rc = write_page(dir, page, cmds[i]);
	}
	return rc;
}

/* ---- bash completion --------------------------------------------------------------------- */

/* A value that names a file: complete file names after the option. */
static bool file_arg(const char *arg)
{
	static const char *const kinds[] = {"PATH", "FILE", "DIR", "IMG", "LOG", "CAPTURE"};

	for (size_t i = 0; arg && i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strstr(arg, kinds[i]))
			return true;
	return false;
}

/* The options a --help text names ("--time", "--json"), once each, for a command without a
 * help of its own. */
static void scraped_opts(FILE *f, const char *text)
{
	char seen[4096] = " ";
	size_t used = 1;

	for (const char *p = text; p && (p = strstr(p, "--"));) {
		const char *w = p + 2;
		size_t len = 0;
		char word[64];

		while (isalnum((unsigned char)w[len]) || w[len] == '-')
			len++;
		snprintf(word, sizeof(word), "--%.*s ", (int)len, w);
		if (len > 1 && len < 60 && (p == text || !isalnum((unsigned char)p[-1])) &&
		    !strstr(seen, word) && used + strlen(word) < sizeof(seen)) {
			fprintf(f, "%s%.*s", used > 1 ? " " : "", (int)len + 2, word);
			used += (size_t)snprintf(seen + used, sizeof(seen) - used, "%s", word);
		}
		p = w + len;
	}
}

static void completion_case(FILE *f, const char *fn, const struct vs_cli_help *const *helps,
			    size_t n, int what)
{
	fprintf(f, "%s() {\n\tcase \"$1\" in\n", fn);
	for (size_t i = 0; i < n; i++) {
		const struct vs_cli_help *h = helps[i];
		size_t len = strlen(h->name);
		bool any = false;

		fprintf(f, "\t\"%s\") echo \"", h->name);
		for (size_t k = 0; what == 2 && k < n; k++) /* subcommands */
			if (!strncmp(helps[k]->name, h->name, len) && helps[k]->name[len] == ' ' &&
			    !strchr(helps[k]->name + len + 1, ' ')) {
				fprintf(f, "%s%s", any ? " " : "", helps[k]->name + len + 1);
				any = true;
			}
		for (const struct vs_cli_opt *o = h->opts; what < 2 && o && o->name; o++)
			if (what == 0 || (what == 1 && file_arg(o->arg))) {
				fprintf(f, "%s--%s", any ? " " : "", o->name);
				any = true;
			}
		fprintf(f, "\";;\n");
	}
}

static int write_completion(FILE *f)
{
	const struct vs_cli_help *const *helps;
	const struct vs_cli_command *cmds[32];
	size_t nhelps, n = commands_sorted(cmds, 32);

	vs_cli_helps(&helps, &nhelps);
	fputs("# bash completion for vioscope and its flavour binaries.\n"
	      "# Generated by `vioscope help --bash-completion` from the help of each command: "
	      "do not edit.\n",
	      f);
	/* Options: from each help; for a command without one, from its --help text. */
	completion_case(f, "_vioscope_opts", helps, nhelps, 0);
	for (size_t i = 0; i < n; i++) {
		char *text;

		if (vs_cli_help_find(cmds[i]->name) || !(text = help_output(cmds[i])))
			continue;
		fprintf(f, "\t\"%s\") echo \"", cmds[i]->name);
		scraped_opts(f, text);
		fprintf(f, "\";;\n");
		free(text);
	}
	fputs("\tesac\n}\n", f);
	completion_case(f, "_vioscope_file_opts", helps, nhelps, 1);
	fputs("\tesac\n}\n", f);
	completion_case(f, "_vioscope_subcommands", helps, nhelps, 2);
	fputs("\tesac\n}\n_vioscope_words() {\n\tcase \"$1\" in\n", f);
	for (size_t i = 0; i < nhelps; i++)
		if (helps[i]->words)
			fprintf(f, "\t\"%s\") echo \"%s\";;\n", helps[i]->name, helps[i]->words);
	fputs("\tesac\n}\n", f);
	fputs("_vioscope() {\n"
	      "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} key subs\n"
	      "\tCOMPREPLY=()\n"
	      "\tif ((COMP_CWORD == 1)); then\n"
	      "\t\tCOMPREPLY=($(compgen -W \"",
	      f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s ", cmds[i]->name);
	fputs("--help --version\" -- \"$cur\"))\n"
	      "\t\treturn\n"
	      "\tfi\n"
	      "\tkey=${COMP_WORDS[1]}\n"
	      "\tsubs=$(_vioscope_subcommands \"$key\")\n"
	      "\tif [[ -n $subs ]]; then\n"
	      "\t\tif ((COMP_CWORD == 2)); then\n"
	      "\t\t\tCOMPREPLY=($(compgen -W \"$subs --help --version\" -- \"$cur\"))\n"
	      "\t\t\treturn\n"
	      "\t\tfi\n"
	      "\t\t[[ \" $subs \" == *\" ${COMP_WORDS[2]} \"* ]] && key=\"$key ${COMP_WORDS[2]}\"\n"
	      "\tfi\n"
	      "\tif [[ \" $(_vioscope_file_opts \"$key\") \" == *\" $prev \"* ]]; then\n"
	      "\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
	      "\t\treturn\n"
	      "\tfi\n"
	      "\tif [[ $cur == -* ]]; then\n"
	      "\t\tCOMPREPLY=($(compgen -W \"$(_vioscope_opts \"$key\") --help --version\" -- "
	      "\"$cur\"))\n"
	      "\t\treturn\n"
	      "\tfi\n"
	      "\tCOMPREPLY=($(compgen -W \"$(_vioscope_words \"$key\")\" -- \"$cur\"))\n"
	      "\t((${#COMPREPLY[@]})) || COMPREPLY=($(compgen -f -- \"$cur\"))\n"
	      "}\n"
	      "complete -F _vioscope vioscope vioscope-off vioscope-all vioscope-cold-print "
	      "vioscope-all-print\n",
	      f);
	return ferror(f) ? VS_EXIT_CANNOT_RUN : VS_EXIT_OK;
}

/* ---- the command ------------------------------------------------------------------------- */

static const struct vs_cli_opt help_opts[] = {
    {"man", 0, 'm', "DIR", NULL,
     "write the man pages, vioscope.1 and vioscope-COMMAND.1 for each command, into DIR "
     "(the build does; `cmake --install` puts them in share/man/man1)"},
    {"bash-completion", 0, 'b', NULL, NULL,
     "print the bash completion script (installed as share/bash-completion/completions/"
     "vioscope)"},
    {0},
};

static const struct vs_cli_help help_help = {
    .name = "help",
    .summary = "a command's help; the man pages and the bash completion",
    .synopsis = "[COMMAND [SUBCOMMAND]]\n--man DIR\n--bash-completion",
    .text = "Print the help of vioscope, of a command or of a subcommand: what "
	    "`vioscope COMMAND [SUBCOMMAND] --help` prints. The man pages and the bash "
	    "completion are made from the same text, so they say what --help says.",
    .opts = help_opts,
};
VS_CLI_HELP(help_help);

static int cmd_help(int argc, char **argv)
{
	struct vs_cli_args a;
	const char *man_dir = NULL;
	bool completion = false;
	int c;

	vs_cli_begin(&a, &help_help, argc, argv);
	while ((c = vs_cli_next(&a)) != VS_CLI_END) {
		switch (c) {
		case VS_CLI_EXIT:
			return a.status;
		case 'm':
			man_dir = a.value;
			break;
		case 'b':
			completion = true;
			break;
		}
	}
	if (man_dir)
		return write_man_pages(man_dir);
	if (completion)
		return write_completion(stdout);
	if (a.next >= argc) {
		cli_usage(stdout);
		return VS_EXIT_OK;
	}
	if (argc - a.next > 2)
		return vs_cli_usage_error(&help_help, "at most COMMAND SUBCOMMAND (see --help)");
	{
		char name[128];
		const struct vs_cli_help *h;
		const struct vs_cli_command *cmd = command_find(argv[a.next]);

		snprintf(name, sizeof(name), "%s%s%s", argv[a.next], argc - a.next > 1 ? " " : "",
			 argc - a.next > 1 ? argv[a.next + 1] : "");
		if ((h = vs_cli_help_find(name))) {
			vs_cli_help_print(h, stdout);
			return VS_EXIT_OK;
		}
		/* A command still printing its own help: `CMD [SUB] --help`. */
		if (cmd && !vs_cli_help_find(cmd->name)) {
			char *args[] = {(char *)cmd->name, "--help", NULL, NULL};

			if (argc - a.next == 2) {
				args[1] = argv[a.next + 1];
				args[2] = "--help";
			}
			return cmd->fn(argc - a.next + 1, args);
		}
		return vs_cli_usage_error(&help_help,
					  "no command '%s' (`vioscope --help` lists them)", name);
	}
}

VS_CLI_INSPECT_COMMAND(help, 9, "help", cmd_help, "a command's help; man pages, completion");
