/* SPDX-License-Identifier: MIT */
/*
 * `vioscope rpc [--socket PATH] METHOD [key=value ...]`: one JSON-RPC 2.0 call to a
 * target's management socket (`vioscope target --rpc PATH`, src/rpc), its result printed
 * as JSON or (--table) as a table; `stats --watch S` prints rates every S seconds, like
 * iostat.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "util/util.h"

#define REPLY_MAX (64u << 20) /* a reply longer than this is not waited for */

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	interrupted = sig;
}

enum { OPT_SOCKET = 256, OPT_TIMEOUT, OPT_TABLE, OPT_WATCH, OPT_COUNT, OPT_JSON };

static const struct vs_cli_opt rpc_opts[] = {
    {"socket", 0, OPT_SOCKET, "PATH", "$VIOSCOPE_RPC_SOCKET",
     "the target's management socket (`vioscope target --rpc PATH`)"},
    {"timeout", 0, OPT_TIMEOUT, "S", "60 s", "the longest wait for a reply (1ms..1d)"},
    {"table", 0, OPT_TABLE, NULL, NULL, "lun_list and stats as a table instead of JSON"},
    {"watch", 0, OPT_WATCH, "S", NULL,
     "stats every S (10ms..1d), as iostat: per interval the IOPS, MB/s and latency "
     "percentiles of each LUN (of the requests completed in that interval) and queue, with a "
     "timestamp; until interrupted or --count reports"},
    {"count", 0, OPT_COUNT, "N", "no end", "with --watch: stop after N reports"},
    {"json", 0, OPT_JSON, NULL, NULL,
     "machine-readable: the result with the version, a timestamp and the call made; with "
     "--watch one JSON object per line (JSON Lines) per interval"},
    {0},
};

static const struct vs_cli_section rpc_sections[] = {
    {"Methods",
     "  controller_add name=NAME socket=PATH [queues=N] luns=[{\"id\":N,\"spec\":BACKEND},...]\n"
     "                [qos=LIMITS]  one more vhost-user-scsi device, served at once\n"
     "  controller_remove name=NAME its frontend's requests finish, flushed, gone\n"
     "  controller_list             the controllers: socket, queues, LUNs, frontend\n"
     "  lun_add id=N spec=BACKEND   a LUN at run time (any `target --lun` backend)\n"
     "  lun_remove id=N             after its requests in flight, flushed\n"
     "  lun_resize id=N size=SIZE   files grow or shrink, RAM grows\n"
     "  lun_list                    the LUNs (with their QoS limits)\n"
     "  qos_set id=N [iops=N] [bps=SIZE] [read_iops=N] ...   a LUN's QoS limits, all at\n"
     "                              once (absent or 0: unlimited; names as `target --qos`);\n"
     "                              id=all: the controller's, over all its LUNs together\n"
     "  stats [interval=true]       counters and latency per LUN and queue\n"
     "  trace_set spec=LEVEL[:FLAG,...]   the target's tracing, at once\n"
     "  save_config [path=NAME]     the live configuration, into the --config file\n"
     "  shutdown                    stop the target as SIGTERM does\n"
     "\n"
     "The LUN methods and stats take controller=NAME, required when the target has several "
     "controllers.\n\n"
     "A VALUE that is a JSON number, true, false, null, array or object is sent as one (id=3 "
     "is 3); anything else as a string (spec=ram=64M, size=2G). docs/TARGET.md has each "
     "method's result and errors."},
    {"Exit status",
     "  0  the call succeeded (--watch: until interrupted, or --count reports)\n"
     "  1  the target answered with an error (its message is printed), or broke off\n"
     "  2  a mistake in the command line (an option, a KEY=VALUE)\n"
     "  3  no target there: the socket cannot be connected to\n"
     "  130, 143  --watch stopped by SIGINT, SIGTERM"},
    {"Examples", "  vioscope rpc --socket /tmp/vs-rpc.sock lun_add id=1 spec=ram=1G\n"
		 "  vioscope rpc --socket /tmp/vs-rpc.sock --table lun_list\n"
		 "  vioscope rpc --socket /tmp/vs-rpc.sock stats --watch 1 --count 10\n"
		 "  vioscope rpc --socket /tmp/vs-rpc.sock stats --watch 1 --json | jq .luns"},
    {0},
};

static const struct vs_cli_help rpc_help = {
    .name = "rpc",
    .summary = "call a running target's management socket (JSON-RPC 2.0)",
    .synopsis = "[--socket PATH] [--timeout S] [--table | --json] METHOD [KEY=VALUE ...]\n"
		"[--socket PATH] [--json] stats --watch S [--count N]",
    .text = "Call one method of a target's management socket (`vioscope target --rpc PATH`) "
	    "and print its result, as indented JSON by default; an error's message goes to "
	    "stderr.",
    .opts = rpc_opts,
    .sections = rpc_sections,
    .words = "controller_add controller_remove controller_list lun_add lun_remove lun_resize "
	     "lun_list qos_set stats trace_set save_config shutdown",
};
VS_CLI_HELP(rpc_help);

struct conn {
	int fd;
	char *buf; /* what was read past the last reply */
	size_t len;
	double timeout;
	unsigned next_id;
};

/* 0, or the exit status after saying why. */
static int conn_open(struct conn *c, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	if (strlen(path) >= sizeof(sa.sun_path))
		return vs_cli_usage_error(&rpc_help, "socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return vs_cli_error(&rpc_help, VS_EXIT_CANNOT_RUN, "cannot connect to %s: %s", path,
				    strerror(errno));
	return 0;
}

/* Read up to the next newline (the deadline is c->timeout): the line, malloc'd. */
static char *read_line(struct conn *c)
{
	uint64_t end = vs_mono_ns() + (uint64_t)(c->timeout * 1e9);

	for (;;) {
		char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
		uint64_t now = vs_mono_ns();
		struct pollfd p = {.fd = c->fd, .events = POLLIN};
		char *grown;
		ssize_t n;

		if (nl) {
			size_t l = (size_t)(nl - c->buf);
			char *line = strndup(c->buf, l);

			c->len -= l + 1;
			memmove(c->buf, nl + 1, c->len);
			return line;
		}
		if (c->len >= REPLY_MAX) {
			fprintf(stderr, "vioscope rpc: a reply longer than %u bytes\n", REPLY_MAX);
			return NULL;
		}
		if (now >= end || interrupted) {
			fprintf(stderr, "vioscope rpc: %s\n",
				interrupted ? "interrupted" : "no reply in time (see --timeout)");
			return NULL;
		}
		n = poll(&p, 1, (int)((end - now) / 1000000) + 1);
		if (n <= 0)
			continue;
		grown = realloc(c->buf, c->len + 65536);
		if (!grown)
			return NULL;
		c->buf = grown;
		n = recv(c->fd, c->buf + c->len, 65536, 0);
		if (n <= 0) {
			fprintf(stderr, "vioscope rpc: the target closed the connection%s%s\n",
				n < 0 ? ": " : "", n < 0 ? strerror(errno) : "");
			return NULL;
		}
		c->len += (size_t)n;
	}
}

/* Send one request and wait for its reply: the result (a new reference), or NULL after
 * printing the error (*rpc_error set when it was the server's). */
static json_t *call(struct conn *c, const char *method, json_t *params, bool *rpc_error)
{
	unsigned id = ++c->next_id;
	json_t *req = json_pack("{s:s, s:I, s:s, s:O}", "jsonrpc", "2.0", "id", (json_int_t)id,
				"method", method, "params", params);
	char *line = req ? json_dumps(req, JSON_COMPACT) : NULL, *reply = NULL;
	json_t *resp = NULL, *result = NULL, *err;
	size_t off = 0, len;
	json_error_t jerr;

	*rpc_error = false;
	json_decref(req);
	if (!line)
		return NULL;
	len = strlen(line);
	line[len++] = '\n'; /* over the NUL: sent by length */
	while (off < len) {
		ssize_t n = send(c->fd, line + off, len - off, MSG_NOSIGNAL);

		if (n < 0) {
			int e = errno;

			/* Closed on us: it may have said why (a uid it refuses, a full table). */
			if ((reply = read_line(c)))
				break;
			fprintf(stderr, "vioscope rpc: send: %s\n", strerror(e));
			goto out;
		}
		off += (size_t)n;
	}
	if (!reply && !(reply = read_line(c)))
		goto out;
	resp = json_loads(reply, 0, &jerr);
	if (!resp) {
		fprintf(stderr, "vioscope rpc: the reply is not JSON: %s\n", jerr.text);
		goto out;
	}
	err = json_object_get(resp, "error");
	if (err) {
		json_t *data = json_object_get(err, "data");
		const char *en = json_string_value(json_object_get(data, "errno"));

		fprintf(stderr, "vioscope rpc: %s: %s (code %" JSON_INTEGER_FORMAT "%s%s)\n",
			method, json_string_value(json_object_get(err, "message")),
			json_integer_value(json_object_get(err, "code")), en ? ", " : "",
			en ? en : "");
		*rpc_error = true;
		goto out;
	}
	result = json_object_get(resp, "result");
	if (!result || json_integer_value(json_object_get(resp, "id")) != (json_int_t)id) {
		fprintf(stderr, "vioscope rpc: a reply without a result for id %u\n", id);
		result = NULL;
		goto out;
	}
	json_incref(result);
out:
	json_decref(resp);
	free(reply);
	free(line);
	return result;
}

/* KEY=VALUE into params: a JSON number, true, false, null, an array or an object as itself
 * (controller_add's luns=[{"id":0,"spec":"ram=1G"}]), else a string. */
static int add_param(json_t *params, const char *arg)
{
	const char *eq = strchr(arg, '=');
	json_t *v;
	char *key;

	if (!eq || eq == arg) {
		vs_cli_usage_error(&rpc_help, "'%s': expected KEY=VALUE", arg);
		return -1;
	}
	v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
	if (v && !json_is_number(v) && !json_is_boolean(v) && !json_is_null(v) &&
	    !json_is_array(v) && !json_is_object(v)) {
		json_decref(v);
		v = NULL;
	}
	if (!v)
		v = json_string(eq + 1);
	key = strndup(arg, (size_t)(eq - arg));
	if (!v || !key || json_object_set_new(params, key, v)) {
		fprintf(stderr, "vioscope rpc: '%s': not a valid parameter (UTF-8?)\n", arg);
		free(key);
		return -1;
	}
	free(key);
	return 0;
}

/* ---- tables ---------------------------------------------------------------------------- */

static uint64_t u(json_t *o, const char *key)
{
	json_int_t v = json_integer_value(json_object_get(o, key));

	return v > 0 ? (uint64_t)v : 0;
}

static uint64_t u2(json_t *o, const char *obj, const char *key)
{
	return u(json_object_get(o, obj), key);
}

static void print_lun_table(json_t *list)
{
	size_t i;
	json_t *l;

	printf("%-4s %-5s %14s %6s %-3s %s\n", "LUN", "KIND", "BYTES", "BLOCK", "RO", "SPEC");
	json_array_foreach(list, i, l)
	{
		printf("%-4" PRIu64 " %-5s %14" PRIu64 " %6" PRIu64 " %-3s %s\n", u(l, "id"),
		       json_string_value(json_object_get(l, "kind")), u(l, "bytes"),
		       u(l, "block_size"),
		       json_is_true(json_object_get(l, "read_only")) ? "yes" : "no",
		       json_string_value(json_object_get(l, "spec")));
	}
}

static uint64_t errors_of(json_t *lun)
{
	uint64_t sum = u(lun, "failures");
	size_t k;
	json_t *v;

	json_array_foreach(json_object_get(lun, "sense_keys"), k, v)
	{
		if (k) /* key 0 (NO SENSE) is not an error */
			sum += json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
	}
	return sum;
}

static void print_stats_table(json_t *st)
{
	size_t i;
	json_t *l;

	printf("%-4s %10s %10s %8s %8s %14s %14s %6s %6s %9s %9s %9s %9s\n", "LUN", "reads",
	       "writes", "flushes", "unmaps", "read_bytes", "write_bytes", "inflt", "errors",
	       "r_p50_us", "r_p99_us", "w_p50_us", "w_p99_us");
	json_array_foreach(json_object_get(st, "luns"), i, l)
	{
		printf(
		    "%-4" PRIu64 " %10" PRIu64 " %10" PRIu64 " %8" PRIu64 " %8" PRIu64 " %14" PRIu64
		    " %14" PRIu64 " %6" PRIu64 " %6" PRIu64 " %9.1f %9.1f %9.1f %9.1f\n",
		    u(l, "id"), u(l, "reads"), u(l, "writes"), u(l, "flushes"), u(l, "unmaps"),
		    u(l, "read_bytes"), u(l, "write_bytes"), u(l, "in_flight"), errors_of(l),
		    u2(l, "read_latency_ns", "p50") / 1e3, u2(l, "read_latency_ns", "p99") / 1e3,
		    u2(l, "write_latency_ns", "p50") / 1e3, u2(l, "write_latency_ns", "p99") / 1e3);
	}
	printf("\n%-5s %12s %14s %6s %10s\n", "queue", "requests", "bytes", "inflt", "notifies");
	json_array_foreach(json_object_get(st, "queues"), i, l)
	{
		printf("%-5" PRIu64 " %12" PRIu64 " %14" PRIu64 " %6" PRIu64 " %10" PRIu64 "\n",
		       u(l, "queue"), u(l, "requests"), u(l, "bytes"), u(l, "in_flight"),
		       u(l, "notifies"));
	}
}

/* ---- --watch --------------------------------------------------------------------------- */

/* The entry of prev's array key whose idkey equals id (NULL: none, e.g. a LUN just added). */
static json_t *find(json_t *prev, const char *key, const char *idkey, uint64_t id)
{
	size_t i;
	json_t *e;

	json_array_foreach(json_object_get(prev, key), i, e)
	{
		if (u(e, idkey) == id)
			return e;
	}
	return NULL;
}

/* Per second, from the counter's change (0 when it went back: a LUN removed and added). */
static double rate(json_t *now, json_t *then, const char *key, double secs)
{
	uint64_t a = u(now, key), b = then ? u(then, key) : 0;

	return a >= b && secs > 0 ? (double)(a - b) / secs : 0;
}

/* The latency percentiles of one direction, in microseconds. */
static json_t *latency_us(json_t *lun, const char *key)
{
	return json_pack("{s:f, s:f, s:f}", "p50", u2(lun, key, "p50") / 1e3, "p99",
			 u2(lun, key, "p99") / 1e3, "p999", u2(lun, key, "p999") / 1e3);
}

/* One interval as a JSON object (a line of --watch --json): rates over the interval, the
 * latency of the requests completed in it, what is in flight now. */
static json_t *watch_json(json_t *now, json_t *prev, double secs, const char *path)
{
	json_t *luns = json_array(), *queues = json_array(), *l;
	size_t i;

	json_array_foreach(json_object_get(now, "luns"), i, l)
	{
		json_t *p = find(prev, "luns", "id", u(l, "id"));
		uint64_t errors = errors_of(l), before = p ? errors_of(p) : 0;

		json_array_append_new(
		    luns,
		    json_pack("{s:I, s:f, s:f, s:f, s:f, s:I, s:I, s:o, s:o, s:b}", "id",
			      (json_int_t)u(l, "id"), "reads_per_s", rate(l, p, "reads", secs),
			      "writes_per_s", rate(l, p, "writes", secs), "read_mb_per_s",
			      rate(l, p, "read_bytes", secs) / 1e6, "write_mb_per_s",
			      rate(l, p, "write_bytes", secs) / 1e6, "in_flight",
			      (json_int_t)u(l, "in_flight"), "errors",
			      (json_int_t)(errors >= before ? errors - before : errors),
			      "read_latency_us", latency_us(l, "read_latency_ns"),
			      "write_latency_us", latency_us(l, "write_latency_ns"),
			      "latency_over_interval",
			      json_is_true(json_object_get(l, "latency_over_interval"))));
	}
	json_array_foreach(json_object_get(now, "queues"), i, l)
	{
		json_t *p = find(prev, "queues", "queue", u(l, "queue"));

		json_array_append_new(queues,
				      json_pack("{s:I, s:f, s:f, s:I, s:f}", "queue",
						(json_int_t)u(l, "queue"), "iops",
						rate(l, p, "requests", secs), "mb_per_s",
						rate(l, p, "bytes", secs) / 1e6, "in_flight",
						(json_int_t)u(l, "in_flight"), "notifies_per_s",
						rate(l, p, "notifies", secs)));
	}
	return json_pack("{s:s, s:f, s:o, s:o}", "socket", path, "interval_s",
			 round(secs * 1e6) / 1e6, "luns", luns, "queues", queues);
}

/* An object as a line that starts with the members every --json carries (version,
 * timestamp, the command line). */
static void print_json_line(json_t *body, size_t flags)
{
	char *s = body ? json_dumps(body, flags) : NULL;

	printf("{");
	vs_cli_json_meta(stdout);
	if (s && s[1] != '}')
		printf(", %s\n", s + 1);
	else
		printf("}\n");
	free(s);
	fflush(stdout);
}

static void print_watch(json_t *now, json_t *prev, double secs)
{
	char stamp[40];
	bool since_added = false;
	size_t i;
	json_t *l;

	vs_cli_timestamp(stamp, sizeof(stamp));
	printf("%s  over %.3f s\n", stamp, secs);
	printf("%-4s %9s %9s %9s %9s %6s %9s %9s %9s %9s %9s %9s\n", "LUN", "r/s", "w/s", "rMB/s",
	       "wMB/s", "inflt", "r_p50_us", "r_p99_us", "r_p999", "w_p50_us", "w_p99_us",
	       "w_p999");
	json_array_foreach(json_object_get(now, "luns"), i, l)
	{
		json_t *p = find(prev, "luns", "id", u(l, "id"));
		bool added = !json_is_true(json_object_get(l, "latency_over_interval"));
		char id[24];

		since_added |= added;
		snprintf(id, sizeof(id), "%" PRIu64 "%s", u(l, "id"), added ? "*" : "");
		printf(
		    "%-4s %9.0f %9.0f %9.2f %9.2f %6" PRIu64 " %9.1f %9.1f %9.1f %9.1f %9.1f "
		    "%9.1f\n",
		    id, rate(l, p, "reads", secs), rate(l, p, "writes", secs),
		    rate(l, p, "read_bytes", secs) / 1e6, rate(l, p, "write_bytes", secs) / 1e6,
		    u(l, "in_flight"), u2(l, "read_latency_ns", "p50") / 1e3,
		    u2(l, "read_latency_ns", "p99") / 1e3, u2(l, "read_latency_ns", "p999") / 1e3,
		    u2(l, "write_latency_ns", "p50") / 1e3, u2(l, "write_latency_ns", "p99") / 1e3,
		    u2(l, "write_latency_ns", "p999") / 1e3);
	}
	if (since_added)
		printf("(*: added in this interval: its latency is since it was added)\n");
	printf("%-5s %9s %9s %6s %9s\n", "queue", "IOPS", "MB/s", "inflt", "notify/s");
	json_array_foreach(json_object_get(now, "queues"), i, l)
	{
		json_t *p = find(prev, "queues", "queue", u(l, "queue"));

		printf("%-5" PRIu64 " %9.0f %9.2f %6" PRIu64 " %9.0f\n", u(l, "queue"),
		       rate(l, p, "requests", secs), rate(l, p, "bytes", secs) / 1e6,
		       u(l, "in_flight"), rate(l, p, "notifies", secs));
	}
	printf("\n");
	fflush(stdout);
}

struct watch_opts {
	const char *path;
	double interval;
	uint64_t count; /* 0: until interrupted */
	bool json;
};

/* Until deadline (CLOCK_MONOTONIC ns) or a signal: false when interrupted. */
static bool sleep_until(uint64_t deadline)
{
	struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};

	while (!interrupted && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL))
		;
	return !interrupted;
}

/* Reports every interval, on a fixed schedule (no drift): the latency of each is of the
 * requests completed in it (the method's interval param). */
static int watch(struct conn *c, const struct watch_opts *w)
{
	json_t *params = json_pack("{s:b}", "interval", 1), *prev;
	struct sigaction sa = {.sa_handler = on_interrupt};
	uint64_t start = vs_mono_ns(), step = (uint64_t)(w->interval * 1e9);
	bool rpc_error, broke = false;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	prev = call(c, "stats", params, &rpc_error);
	for (uint64_t n = 0; prev && (!w->count || n < w->count); n++) {
		json_t *now;
		double secs;

		if (!sleep_until(start + (n + 1) * step))
			break;
		now = call(c, "stats", params, &rpc_error);
		if (!now) {
			broke = true;
			break;
		}
		secs = (double)(u(now, "time_ns") - u(prev, "time_ns")) / 1e9;
		if (w->json) {
			json_t *body = watch_json(now, prev, secs, w->path);

			print_json_line(body, JSON_COMPACT);
			json_decref(body);
		} else {
			print_watch(now, prev, secs);
		}
		json_decref(prev);
		prev = now;
	}
	if (!prev && !interrupted)
		broke = true; /* the first call failed */
	json_decref(prev);
	json_decref(params);
	if (interrupted)
		return 128 + interrupted;
	return broke ? VS_EXIT_FAILED : VS_EXIT_OK;
}

/* The result of one call, as JSON (--json: with the version, a timestamp and the call). */
static void print_result(json_t *result, const char *path, const char *method, json_t *params,
			 bool json)
{
	json_t *body;

	if (!json) {
		char *s = json_dumps(result, JSON_INDENT(2) | JSON_ENCODE_ANY);

		printf("%s\n", s ? s : "");
		free(s);
		return;
	}
	body = json_pack("{s:s, s:s, s:O, s:O}", "socket", path, "method", method, "params", params,
			 "result", result);
	print_json_line(body, JSON_INDENT(2));
	json_decref(body);
}

static int cmd_rpc(int argc, char **argv)
{
	const char *path = getenv("VIOSCOPE_RPC_SOCKET"), *method;
	struct conn c = {.fd = -1, .timeout = 60};
	struct watch_opts w = {0};
	bool table = false, json = false, rpc_error;
	json_t *params = NULL, *result = NULL;
	struct vs_cli_args a;
	int ch, rc;

	/* Options anywhere (`rpc stats --watch 1`): getopt moves KEY=VALUE after them. */
	vs_cli_begin(&a, &rpc_help, argc, argv);
	while ((ch = vs_cli_next(&a)) != VS_CLI_END) {
		switch (ch) {
		case VS_CLI_EXIT:
			return a.status;
		case OPT_SOCKET:
			path = a.value;
			break;
		case OPT_TIMEOUT:
			if (vs_cli_seconds("vioscope rpc", "timeout", a.value, 0.001, 86400,
					   &c.timeout))
				return VS_EXIT_USAGE;
			break;
		case OPT_TABLE:
			table = true;
			break;
		case OPT_WATCH:
			if (vs_cli_seconds("vioscope rpc", "watch", a.value, 0.01, 86400,
					   &w.interval))
				return VS_EXIT_USAGE;
			break;
		case OPT_COUNT:
			if (vs_cli_uint("vioscope rpc", "count", a.value, 1, UINT32_MAX, &w.count))
				return VS_EXIT_USAGE;
			break;
		case OPT_JSON:
			json = true;
			break;
		}
	}
	if (a.next >= argc)
		return vs_cli_usage_error(&rpc_help, "which METHOD? (see --help)");
	method = argv[a.next++];
	if (!path || !*path)
		return vs_cli_usage_error(&rpc_help,
					  "--socket PATH (or $VIOSCOPE_RPC_SOCKET) is required");
	if ((w.interval > 0 || w.count) && strcmp(method, "stats"))
		return vs_cli_usage_error(&rpc_help, "--watch and --count are for stats");
	if (w.count && !(w.interval > 0))
		return vs_cli_usage_error(&rpc_help, "--count goes with --watch");
	if (table && json)
		return vs_cli_usage_error(&rpc_help, "--table or --json, not both");
	params = json_object();
	for (; a.next < argc; a.next++)
		if (!params || add_param(params, argv[a.next])) {
			json_decref(params);
			return VS_EXIT_USAGE;
		}
	if ((rc = conn_open(&c, path)))
		goto out;
	if (w.interval > 0) {
		w.path = path;
		w.json = json;
		rc = watch(&c, &w);
		goto out;
	}
	rc = VS_EXIT_FAILED;
	result = call(&c, method, params, &rpc_error);
	if (!result)
		goto out;
	if (table && !strcmp(method, "lun_list"))
		print_lun_table(result);
	else if (table && !strcmp(method, "stats"))
		print_stats_table(result);
	else
		print_result(result, path, method, params, json);
	rc = VS_EXIT_OK;
out:
	json_decref(result);
	json_decref(params);
	if (c.fd >= 0)
		close(c.fd);
	free(c.buf);
	return rc;
}

VS_CLI_INSPECT_COMMAND(rpc, 6, "rpc", cmd_rpc,
		       "call a target's management socket (`vioscope target --rpc PATH`)");
