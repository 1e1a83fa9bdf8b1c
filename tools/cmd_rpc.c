/* SPDX-License-Identifier: MIT */
/*
 * `vioscope rpc [--socket PATH] METHOD [key=value ...]`: one JSON-RPC 2.0 call to a
 * target's management socket (`vioscope target --rpc PATH`, src/rpc), its result printed
 * as JSON or (--table) as a table; `stats --watch S` prints rates every S seconds, like
 * iostat.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "util/util.h"

#define REPLY_MAX (64u << 20) /* a reply longer than this is not waited for */

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void rpc_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: vioscope rpc [--socket PATH] [--timeout S] [--table] METHOD [KEY=VALUE ...]\n"
	    "       vioscope rpc [--socket PATH] stats --watch S [--count N]\n"
	    "\n"
	    "Call a method of a target's management socket (`vioscope target --rpc PATH`)\n"
	    "and print its result as JSON; exit 1 with the error's message if it fails.\n"
	    "  --socket PATH   the management socket (default: $VIOSCOPE_RPC_SOCKET)\n"
	    "  --timeout S     longest wait for the reply (default 60)\n"
	    "  --table         lun_list and stats as a table\n"
	    "  --watch S       stats every S seconds: IOPS, MB/s, in flight and latency per LUN\n"
	    "                  and queue, until interrupted or --count N lines of output\n"
	    "Methods: lun_add id=N spec=BACKEND   lun_remove id=N   lun_resize id=N size=SIZE\n"
	    "         lun_list   stats   trace_set spec=LEVEL[:FLAG,...]   shutdown\n"
	    "A VALUE that is a JSON number, true, false or null is sent as one (id=3 -> 3);\n"
	    "anything else as a string (spec=ram=64M, size=2G).  docs/TARGET.md has them all.\n");
}

struct conn {
	int fd;
	char *buf; /* what was read past the last reply */
	size_t len;
	double timeout;
	unsigned next_id;
};

static int conn_open(struct conn *c, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "vioscope rpc: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "vioscope rpc: cannot connect to %s: %s\n", path, strerror(errno));
		return -1;
	}
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

/* KEY=VALUE into params: a JSON number, true, false or null as itself, else a string. */
static int add_param(json_t *params, const char *arg)
{
	const char *eq = strchr(arg, '=');
	json_t *v;
	char *key;

	if (!eq || eq == arg) {
		fprintf(stderr, "vioscope rpc: '%s': expected KEY=VALUE\n", arg);
		return -1;
	}
	v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
	if (v && !json_is_number(v) && !json_is_boolean(v) && !json_is_null(v)) {
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

static void print_watch(json_t *now, json_t *prev)
{
	double secs = (double)(u(now, "time_ns") - u(prev, "time_ns")) / 1e9;
	size_t i;
	json_t *l;

	printf("%-4s %9s %9s %9s %9s %6s %9s %9s %9s %9s %9s %9s\n", "LUN", "r/s", "w/s", "rMB/s",
	       "wMB/s", "inflt", "r_p50_us", "r_p99_us", "r_p999", "w_p50_us", "w_p99_us",
	       "w_p999");
	json_array_foreach(json_object_get(now, "luns"), i, l)
	{
		json_t *p = find(prev, "luns", "id", u(l, "id"));

		printf(
		    "%-4" PRIu64 " %9.0f %9.0f %9.2f %9.2f %6" PRIu64
		    " %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f\n",
		    u(l, "id"), rate(l, p, "reads", secs), rate(l, p, "writes", secs),
		    rate(l, p, "read_bytes", secs) / 1e6, rate(l, p, "write_bytes", secs) / 1e6,
		    u(l, "in_flight"), u2(l, "read_latency_ns", "p50") / 1e3,
		    u2(l, "read_latency_ns", "p99") / 1e3, u2(l, "read_latency_ns", "p999") / 1e3,
		    u2(l, "write_latency_ns", "p50") / 1e3, u2(l, "write_latency_ns", "p99") / 1e3,
		    u2(l, "write_latency_ns", "p999") / 1e3);
	}
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

static int watch(struct conn *c, double interval, uint64_t count)
{
	json_t *params = json_object(), *prev;
	struct sigaction sa = {.sa_handler = on_interrupt};
	bool rpc_error;
	int rc = 0;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	prev = call(c, "stats", params, &rpc_error);
	for (uint64_t n = 0; prev && (!count || n < count) && !interrupted; n++) {
		struct timespec ts = {(time_t)interval,
				      (long)((interval - (double)(time_t)interval) * 1e9)};
		json_t *now;

		while (nanosleep(&ts, &ts) && !interrupted)
			;
		if (interrupted)
			break;
		now = call(c, "stats", params, &rpc_error);
		if (!now) {
			rc = 1;
			break;
		}
		print_watch(now, prev);
		json_decref(prev);
		prev = now;
	}
	if (!prev)
		rc = 1;
	json_decref(prev);
	json_decref(params);
	return rc;
}

static int cmd_rpc(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"timeout", required_argument, NULL, 't'},
	    {"table", no_argument, NULL, 'T'},
	    {"watch", required_argument, NULL, 'w'},
	    {"count", required_argument, NULL, 'n'},
	    {"help", no_argument, NULL, 'h'},
	    {0},
	};
	const char *path = getenv("VIOSCOPE_RPC_SOCKET"), *method;
	struct conn c = {.fd = -1, .timeout = 60};
	double interval = 0;
	uint64_t count = 0;
	bool table = false, rpc_error;
	json_t *params = NULL, *result = NULL;
	int ch, rc = 1;

	optind = 1;
	opterr = 0;
	/* Options anywhere (`rpc stats --watch 1`): getopt moves KEY=VALUE after them. */
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			path = optarg;
			break;
		case 't':
			if (vs_cli_seconds("vioscope rpc", "timeout", optarg, 0.001, 86400,
					   &c.timeout))
				return 2;
			break;
		case 'T':
			table = true;
			break;
		case 'w':
			if (vs_cli_seconds("vioscope rpc", "watch", optarg, 0.01, 86400, &interval))
				return 2;
			break;
		case 'n':
			if (vs_cli_uint("vioscope rpc", "count", optarg, 1, UINT32_MAX, &count))
				return 2;
			break;
		case 'h':
			rpc_usage(stdout);
			return 0;
		case ':':
			fprintf(stderr, "vioscope rpc: option '%s' needs a value\n",
				argv[optind - 1]);
			return 2;
		default:
			fprintf(stderr, "vioscope rpc: unknown option '%s' (see --help)\n",
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind >= argc) {
		rpc_usage(stderr);
		return 2;
	}
	method = argv[optind++];
	if (!path || !*path) {
		fprintf(stderr,
			"vioscope rpc: --socket PATH (or $VIOSCOPE_RPC_SOCKET) is required\n");
		return 2;
	}
	if ((interval > 0 || count) && strcmp(method, "stats")) {
		fprintf(stderr, "vioscope rpc: --watch and --count are for stats\n");
		return 2;
	}
	params = json_object();
	for (; optind < argc; optind++)
		if (!params || add_param(params, argv[optind])) {
			json_decref(params);
			return 2;
		}
	if (conn_open(&c, path))
		goto out;
	if (interval > 0) {
		rc = watch(&c, interval, count);
		goto out;
	}
	result = call(&c, method, params, &rpc_error);
	if (!result)
		goto out;
	if (table && !strcmp(method, "lun_list"))
		print_lun_table(result);
	else if (table && !strcmp(method, "stats"))
		print_stats_table(result);
	else {
		char *s = json_dumps(result, JSON_INDENT(2) | JSON_ENCODE_ANY);

		printf("%s\n", s ? s : "");
		free(s);
	}
	rc = 0;
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
