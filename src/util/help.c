/* SPDX-License-Identifier: MIT */
/* Commands' help from their one source (struct vs_cli_help): --help, the option parser
 * built from the same table, the one error format, --version and the JSON members every
 * --json output starts with.  The man pages and the completion are tools/cmd_help.c's. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "util/util.h"

/* The build fills these in (tools/version.c.in); a program without it says so. */
__attribute__((weak)) const char vs_cli_version[] = "unknown";
__attribute__((weak)) const char vs_cli_commit[] = "unknown";
__attribute__((weak)) const char vs_cli_commit_date[] = "unknown";
const char *vs_cli_flavour = "unknown";

/* The linker makes these for the section VS_CLI_HELP fills (weak: a program may have
 * none). */
extern const struct vs_cli_help *const __start_vs_cli_help_table[] __attribute__((weak));
extern const struct vs_cli_help *const __stop_vs_cli_help_table[] __attribute__((weak));

void vs_cli_helps(const struct vs_cli_help *const **first, size_t *count)
{
	*first = __start_vs_cli_help_table;
	*count = __start_vs_cli_help_table
		     ? (size_t)(__stop_vs_cli_help_table - __start_vs_cli_help_table)
		     : 0;
}

const struct vs_cli_help *vs_cli_help_find(const char *name)
{
	const struct vs_cli_help *const *h;
	size_t n;

	vs_cli_helps(&h, &n);
	for (size_t i = 0; i < n; i++)
		if (!strcmp(h[i]->name, name))
			return h[i];
	return NULL;
}

/* ---- text ------------------------------------------------------------------------------ */

/* One paragraph [p, end) filled to width: the first line after `first` (a label, or
 * indent spaces), the others after indent spaces. */
static void fill_hanging(FILE *f, const char *first, const char *p, const char *end,
			 unsigned indent, unsigned width)
{
	unsigned col = (unsigned)fprintf(f, "%s", first);
	bool line_empty = true;

	while (p < end) {
		const char *w;
		unsigned len;

		while (p < end && (*p == ' ' || *p == '\n'))
			p++;
		if (p >= end)
			break;
		for (w = p; w < end && *w != ' ' && *w != '\n'; w++)
			;
		len = (unsigned)(w - p);
		if (!line_empty && col + 1 + len > width) {
			fputc('\n', f);
			col = (unsigned)fprintf(f, "%*s", (int)indent, "");
			line_empty = true;
		}
		col += (unsigned)fprintf(f, "%s%.*s", line_empty ? "" : " ", (int)len, p);
		line_empty = false;
		p = w;
	}
	fputc('\n', f);
}

static void fill(FILE *f, const char *p, const char *end, unsigned indent, unsigned width)
{
	char first[64];

	snprintf(first, sizeof(first), "%*s", (int)(indent < 63 ? indent : 63), "");
	fill_hanging(f, first, p, end, indent, width);
}

/* A line that is kept as it is: it starts with two spaces. */
static bool kept(const char *line)
{
	return line[0] == ' ' && line[1] == ' ';
}

void vs_cli_text_print(FILE *f, const char *text, unsigned indent, unsigned width)
{
	const char *p = text, *run = NULL; /* run: the start of lines still to be filled */

	while (p && *p) {
		const char *nl = strchr(p, '\n');
		const char *eol = nl ? nl : p + strlen(p);
		bool blank = eol == p;

		if (blank || kept(p)) {
			if (run)
				fill(f, run, p, indent, width);
			run = NULL;
			if (blank)
				fputc('\n', f);
			else
				fprintf(f, "%*s%.*s\n", (int)indent, "", (int)(eol - p), p);
		} else if (!run) {
			run = p;
		}
		p = nl ? nl + 1 : NULL;
	}
	if (run)
		fill(f, run, run + strlen(run), indent, width);
}

/* "--socket PATH", "-o, --output FILE" */
static int opt_label(char *buf, size_t len, const struct vs_cli_opt *o)
{
	char letter[8] = "";

	if (o->short_name)
		snprintf(letter, sizeof(letter), "-%c, ", o->short_name);
	return snprintf(buf, len, "%s--%s%s%s", letter, o->name, o->arg ? " " : "",
			o->arg ? o->arg : "");
}

/* "  --socket PATH        listen here ...", the text in a column of its own. */
static void print_opt(FILE *f, const struct vs_cli_opt *o)
{
	char label[96], first[128], text[1024];
	int n = opt_label(label, sizeof(label), o);

	snprintf(text, sizeof(text), "%s%s%s%s", o->help, o->def ? " (default: " : "",
		 o->def ? o->def : "", o->def ? ")" : "");
	if (n <= 20) { /* short labels share the first line with the text */
		snprintf(first, sizeof(first), "  %-20s ", label);
	} else {
		fprintf(f, "  %s\n", label);
		snprintf(first, sizeof(first), "%23s", "");
	}
	fill_hanging(f, first, text, text + strlen(text), 23, 80);
}

static const struct vs_cli_opt help_opts[] = {
    {"help", 'h', 'h', NULL, NULL, "print this help and exit"},
    {"version", 0, 0x7fff, NULL, NULL, "print the version and the commit built, and exit"},
};

void vs_cli_help_print(const struct vs_cli_help *h, FILE *f)
{
	const char *p = h->synopsis;
	bool first = true;

	/* "usage: vioscope NAME LINE" for each form; a line that starts with a space goes on
	 * with the form above it, aligned under its options. */
	while (p && *p) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);

		if (*p == ' ')
			fprintf(f, "%*s%.*s\n",
				(int)(strlen("usage: vioscope  ") + strlen(h->name)), "", len - 1,
				p + 1);
		else
			fprintf(f, "%s vioscope %s %.*s\n", first ? "usage:" : "      ", h->name,
				len, p);
		first = false;
		p = nl ? nl + 1 : NULL;
	}
	fprintf(f, "\n");
	vs_cli_text_print(f, h->text, 0, 80);
	fprintf(f, "\nOptions:\n");
	for (const struct vs_cli_opt *o = h->opts; o && o->name; o++)
		print_opt(f, o);
	for (size_t i = 0; i < sizeof(help_opts) / sizeof(help_opts[0]); i++)
		print_opt(f, &help_opts[i]);
	for (const struct vs_cli_section *s = h->sections; s && s->title; s++) {
		fprintf(f, "\n%s:\n", s->title);
		vs_cli_text_print(f, s->text, 2, 80);
	}
	fprintf(f, "\n`man vioscope-%.*s` has this page too (this binary: %s flavour).\n",
		(int)strcspn(h->name, " "), h->name, vs_cli_flavour);
}

/* ---- errors, version ------------------------------------------------------------------- */

static int verror(const struct vs_cli_help *h, int status, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	fprintf(stderr, "vioscope %s: %s\n", h->name, msg);
	return status;
}

int vs_cli_usage_error(const struct vs_cli_help *h, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = verror(h, VS_EXIT_USAGE, fmt, ap);
	va_end(ap);
	return rc;
}

int vs_cli_error(const struct vs_cli_help *h, int status, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = verror(h, status, fmt, ap);
	va_end(ap);
	return rc;
}

void vs_cli_version_print(FILE *f)
{
	fprintf(f, "vioscope %s (commit %s of %s, %s flavour)\n", vs_cli_version, vs_cli_commit,
		vs_cli_commit_date, vs_cli_flavour);
}

void vs_cli_timestamp(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;
	char secs[32];

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(secs, sizeof(secs), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, len, "%s.%03ldZ", secs, ts.tv_nsec / 1000000);
}

void vs_cli_json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

void vs_cli_json_meta(FILE *f)
{
	char now[40];

	vs_cli_timestamp(now, sizeof(now));
	fprintf(f, "\"vioscope\": {\"version\": ");
	vs_cli_json_string(f, vs_cli_version);
	fprintf(f, ", \"commit\": ");
	vs_cli_json_string(f, vs_cli_commit);
	fprintf(f, ", \"flavour\": ");
	vs_cli_json_string(f, vs_cli_flavour);
	fprintf(f, "}, \"time\": \"%s\", \"argv\": [", now);
	for (char **a = vs_cli_argv; a && *a; a++) {
		if (a != vs_cli_argv)
			fprintf(f, ", ");
		vs_cli_json_string(f, *a);
	}
	fprintf(f, "]");
}

/* ---- the option parser ----------------------------------------------------------------- */

void vs_cli_begin(struct vs_cli_args *a, const struct vs_cli_help *h, int argc, char **argv)
{
	size_t n = 0, s = 0;

	memset(a, 0, sizeof(*a));
	a->help = h;
	a->argc = argc;
	a->argv = argv;
	/* ':' first: a missing value is ':', not '?'; '+' never: options anywhere. */
	a->sopts[s++] = ':';
	for (const struct vs_cli_opt *o = h->opts; o && o->name && n < VS_CLI_MAX_OPTS; o++) {
		a->lopts[n++] = (struct option){o->name, o->arg ? required_argument : no_argument,
						NULL, o->key};
		if (o->short_name) {
			a->sopts[s++] = o->short_name;
			if (o->arg)
				a->sopts[s++] = ':';
		}
	}
	for (size_t i = 0; i < sizeof(help_opts) / sizeof(help_opts[0]); i++)
		a->lopts[n++] =
		    (struct option){help_opts[i].name, no_argument, NULL, help_opts[i].key};
	a->sopts[s++] = 'h';
	optind = 1;
	opterr = 0;
}

/* What getopt_long refused, named: an unknown option, or a value given to a switch. */
static int bad_option(struct vs_cli_args *a)
{
	const char *arg = a->argv[optind - 1];
	size_t len;

	if (strncmp(arg, "--", 2))
		return vs_cli_usage_error(a->help, "unknown option '-%c' (see --help)", optopt);
	len = strcspn(arg + 2, "=");
	for (const struct option *o = a->lopts; o->name; o++)
		if (arg[2 + len] == '=' && !strncmp(o->name, arg + 2, len) && !o->name[len] &&
		    o->has_arg == no_argument)
			return vs_cli_usage_error(a->help, "option '--%s' takes no value", o->name);
	return vs_cli_usage_error(a->help, "unknown option '%.*s' (see --help)", (int)len + 2, arg);
}

int vs_cli_next(struct vs_cli_args *a)
{
	int c = getopt_long(a->argc, a->argv, a->sopts, a->lopts, NULL);

	a->value = optarg;
	switch (c) {
	case -1:
		a->next = optind;
		return VS_CLI_END;
	case 'h':
		vs_cli_help_print(a->help, stdout);
		a->status = VS_EXIT_OK;
		return VS_CLI_EXIT;
	case 0x7fff:
		vs_cli_version_print(stdout);
		a->status = VS_EXIT_OK;
		return VS_CLI_EXIT;
	case ':':
		a->status = vs_cli_usage_error(a->help, "option '%s' needs a value (see --help)",
					       a->argv[optind - 1]);
		return VS_CLI_EXIT;
	case '?':
		a->status = bad_option(a);
		return VS_CLI_EXIT;
	default:
		return c;
	}
}
