/* SPDX-License-Identifier: MIT */
/*
 * The management socket (src/rpc) of a real `vioscope target --rpc PATH` child process,
 * driven over the socket and by the `vioscope rpc` client, with the initiator
 * (tests/initiator/harness.c) as the guest that must see the changes and keep its I/O
 * going.  One scenario per test; `test_rpc NAME` runs one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "../initiator/harness.h"
#include "gate.h" /* unix_connect_wait */
#include "proc.h"
#include "tmpdir.h"

#define DEADLINE_MS 10000

struct fx {
	struct tgt t;
	char rpc[128];
	char log[128]; /* the target's stderr */
	struct vs_ini *ini;
	struct vs_ini_queue *q;
	uint8_t *buf; /* 1 MiB of the initiator's shared memory */
	int fd;	      /* a client of the management socket (fx_client), or -1 */
};

/* Connect to the management socket, waiting for it to appear (it comes after the
 * vhost-user socket the harness waits for). */
static int rpc_connect(const char *path)
{
	int fd = unix_connect_wait(path, DEADLINE_MS);

	assert_true(fd >= 0);
	return fd;
}

/* A target with LUN 0 (and 1), the management socket and more options (NULL-terminated,
 * at most 6), its stderr in x->log; with an initiator connected when ini. */
static struct fx *fx_start(const char *lun0, const char *lun1, const char *const *more, bool ini)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct vs_ini_opts o;
	unsigned n = 0;

	assert_non_null(x);
	x->fd = -1;
	tgt_init(&x->t);
	snprintf(x->rpc, sizeof(x->rpc), "%s/rpc.sock", x->t.tg.dir);
	snprintf(x->log, sizeof(x->log), "%s", x->t.tg.log);
	x->t.o.luns[0] = lun0;
	x->t.o.luns[1] = lun1;
	x->t.o.args[n++] = "--rpc";
	x->t.o.args[n++] = x->rpc;
	for (; more && *more; more++) {
		assert_true(n < 8);
		x->t.o.args[n++] = *more;
	}
	assert_int_equal(tgt_start(&x->t), 0);
	close(rpc_connect(x->rpc)); /* it listens */
	if (!ini)
		return x;
	o = ini_opts(&x->t, 1);
	assert_int_equal(vs_ini_open(&x->ini, &o), 0);
	x->q = vs_ini_get_queue(x->ini, 0);
	x->buf = vs_ini_alloc(x->ini, 1 << 20, 4096);
	assert_non_null(x->buf);
	return x;
}

static struct fx *fx_open(const char *lun0, const char *lun1)
{
	return fx_start(lun0, lun1, NULL, true);
}

/* A target with LUN 0 (16 MiB of RAM), the management socket and more options, no
 * initiator; x->fd a client connected to the socket. */
static struct fx *fx_client(const char *const *more)
{
	struct fx *x = fx_start("0:ram=16M", NULL, more, false);

	x->fd = rpc_connect(x->rpc);
	return x;
}

static void fx_close(struct fx *x)
{
	if (x->fd >= 0)
		close(x->fd);
	if (x->ini)
		vs_ini_close(x->ini);
	tgt_fini(&x->t);
	free(x);
}

/* One line from fd within ms (without its newline), or NULL at EOF/reset. */
static char *read_line_within(int fd, uint64_t ms)
{
	static char buf[1 << 20];
	static size_t len;
	static int owner = -1;
	uint64_t end = now_ms() + ms;

	if (owner != fd) /* one reader at a time: what another fd left is not ours */
		len = 0, owner = fd;
	for (;;) {
		char *nl = memchr(buf, '\n', len);
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;

		if (nl) {
			char *line = strndup(buf, (size_t)(nl - buf));

			len -= (size_t)(nl - buf) + 1;
			memmove(buf, nl + 1, len);
			return line;
		}
		assert_true(now_ms() < end);
		assert_true(len < sizeof(buf));
		if (poll(&p, 1, 100) <= 0)
			continue;
		n = recv(fd, buf + len, sizeof(buf) - len, 0);
		if (n <= 0)
			return NULL;
		len += (size_t)n;
	}
}

static char *read_line(int fd)
{
	return read_line_within(fd, DEADLINE_MS);
}

static void send_all(int fd, const char *s, size_t len)
{
	while (len) {
		ssize_t n = send(fd, s, len, MSG_NOSIGNAL);

		assert_true(n > 0);
		s += n;
		len -= (size_t)n;
	}
}

/* Send one line, return the response parsed. */
static json_t *exchange(int fd, const char *line)
{
	json_t *resp;
	char *reply;

	send_all(fd, line, strlen(line));
	send_all(fd, "\n", 1);
	reply = read_line(fd);
	assert_non_null(reply);
	resp = json_loads(reply, 0, NULL);
	if (!resp)
		fail_msg("not JSON: %s", reply);
	free(reply);
	return resp;
}

/* method(params) on fd: the result (a new reference); fails the test on an error. */
static json_t *call_ok(int fd, const char *method, const char *params)
{
	char line[1024];
	json_t *resp, *result;

	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"%s\",\"params\":%s}", method, params);
	resp = exchange(fd, line);
	result = json_object_get(resp, "result");
	if (!result) {
		char *s = json_dumps(resp, 0);
		fail_msg("%s %s: %s", method, params, s);
	}
	assert_int_equal(json_integer_value(json_object_get(resp, "id")), 7);
	json_incref(result);
	json_decref(resp);
	return result;
}

/* line's response is error code, its message containing text, and data.errno is
 * errname (NULL: no data). */
static void expect_error(int fd, const char *line, int code, const char *text, const char *errname)
{
	json_t *resp = exchange(fd, line), *err = json_object_get(resp, "error");
	const char *msg = json_string_value(json_object_get(err, "message"));

	if (!err || json_integer_value(json_object_get(err, "code")) != code || !msg ||
	    !strstr(msg, text)) {
		char *s = json_dumps(resp, 0);
		fail_msg("%s: wanted %d '%s', got %s", line, code, text, s);
	}
	assert_null(json_object_get(resp, "result"));
	if (errname)
		assert_string_equal(
		    json_string_value(json_object_get(json_object_get(err, "data"), "errno")),
		    errname);
	json_decref(resp);
}

/* The ids lun_list returns, in order, as "0,1,". */
static void list_ids(int fd, char *out, size_t len)
{
	json_t *list = call_ok(fd, "lun_list", "{}"), *l;
	size_t i, n = 0;

	out[0] = 0;
	json_array_foreach(list, i, l)
	{
		n += (size_t)snprintf(out + n, len - n, "%lld,",
				      (long long)json_integer_value(json_object_get(l, "id")));
	}
	json_decref(list);
}

/* The initiator's table index of LUN lun (-1: not there). */
static int ini_index(struct vs_ini *ini, unsigned lun, struct vs_ini_lun *info)
{
	for (unsigned i = 0; i < vs_ini_lun_count(ini); i++)
		if (vs_ini_lun_info(ini, i, info) == 0 && info->lun == lun)
			return (int)i;
	return -1;
}

/* Rescan until LUN lun is there with bytes (0: until it is gone), within the deadline. */
static int ini_wait_lun(struct vs_ini *ini, unsigned lun, uint64_t bytes)
{
	uint64_t end = now_ms() + DEADLINE_MS;
	struct vs_ini_lun info;
	int idx;

	for (;;) {
		idx = ini_index(ini, lun, &info);
		if (bytes ? idx >= 0 && info.num_blocks * info.block_size == bytes : idx < 0)
			return idx;
		assert_true(now_ms() < end);
		vs_ini_rescan(ini);
		usleep(10000);
	}
}

/* Write a pattern over [lba, lba + n) of the LUN at index idx and read it back. */
static void io_roundtrip(struct fx *x, int idx, uint64_t lba, uint32_t n, uint64_t seed)
{
	size_t len = (size_t)n * 512;

	pattern_fill(x->buf, len, seed, lba * 512);
	assert_int_equal(io_sync(x->q, VS_INI_WRITE, (unsigned)idx, lba, n, x->buf, len, 1), 0);
	memset(x->buf, 0, len);
	assert_int_equal(io_sync(x->q, VS_INI_READ, (unsigned)idx, lba, n, x->buf, len, 1), 0);
	assert_true(pattern_check(x->buf, len, seed, lba * 512));
}

/* A request line of method with params (JSON: an object, but for the test that it must be). */
static const char *req(const char *method, const char *params)
{
	static char line[2048];

	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%.32s\",\"params\":%.1900s}", method,
		 params);
	return line;
}

/* ---- JSON-RPC errors ------------------------------------------------------------------- */

/* Every malformed request gets its JSON-RPC error, the target's refusals carry its own
 * message and errno, and the connection goes on serving after each. */
static void test_errors(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL);
	int fd = rpc_connect(x->rpc);
	char ids[64];
	json_t *r;

	(void)state;
	expect_error(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,", -32700, "parse error", NULL);
	expect_error(fd, "[1,", -32700, "parse error", NULL);
	expect_error(fd, "\"lun_list\"", -32600, "must be a JSON object", NULL);
	expect_error(fd, "42", -32600, "must be a JSON object", NULL);
	expect_error(fd, "[]", -32600, "empty batch", NULL);
	expect_error(fd, "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"lun_list\"}", -32600,
		     "'jsonrpc' must be \"2.0\"", NULL);
	expect_error(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":5}", -32600,
		     "'method' must be a string", NULL);
	expect_error(fd, "{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"lun_list\"}", -32600,
		     "'id' must be", NULL);
	expect_error(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_explode\"}", -32601,
		     "method 'lun_explode' not found", NULL);
	expect_error(fd, req("lun_add", "[1]"), -32602, "params must be an object", NULL);
	expect_error(fd, req("lun_add", "{\"spec\":\"ram=1M\"}"), -32602, "missing param 'id'",
		     NULL);
	expect_error(fd, req("lun_add", "{\"id\":\"1\",\"spec\":\"ram=1M\"}"), -32602,
		     "param 'id': expected a whole number in 0..255", NULL);
	expect_error(fd, req("lun_add", "{\"id\":256,\"spec\":\"ram=1M\"}"), -32602, "param 'id'",
		     NULL);
	expect_error(fd, req("lun_add", "{\"id\":1,\"spec\":7}"), -32602, "param 'spec'", NULL);
	expect_error(fd, req("lun_remove", "{\"lun\":1}"), -32602,
		     "lun_remove takes no param 'lun'", NULL);
	expect_error(fd, req("lun_resize", "{\"id\":0,\"size\":\"12Q\"}"), -32602, "param 'size'",
		     NULL);
	expect_error(fd, req("trace_set", "{\"spec\":\"loud:everything\"}"), -32602, "param 'spec'",
		     NULL);
	/* The target's own refusals: a duplicate LUN, a missing one, a bad backend. */
	expect_error(fd, req("lun_add", "{\"id\":0,\"spec\":\"ram=1M\"}"), -32000, "0", "EEXIST");
	expect_error(fd, req("lun_remove", "{\"id\":9}"), -32000, "9", "ENOENT");
	expect_error(fd, req("lun_resize", "{\"id\":9,\"size\":4096}"), -32000, "9", "ENOENT");
	expect_error(fd, req("lun_add", "{\"id\":2,\"spec\":\"file=/nonexistent/dir/img\"}"),
		     -32000, "/nonexistent/dir/img", "ENOENT");
	/* A batch: one response per request, in order; a notification gets none. */
	r = exchange(fd, "[{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"lun_list\"},"
			 "{\"jsonrpc\":\"2.0\",\"method\":\"lun_list\"},"
			 "{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"nope\"}]");
	assert_int_equal(json_array_size(r), 2);
	assert_string_equal(json_string_value(json_object_get(json_array_get(r, 0), "id")), "a");
	assert_non_null(json_object_get(json_array_get(r, 0), "result"));
	assert_int_equal(json_integer_value(json_object_get(
			     json_object_get(json_array_get(r, 1), "error"), "code")),
			 -32601);
	json_decref(r);
	/* Nothing changed, and the connection still serves. */
	list_ids(fd, ids, sizeof(ids));
	assert_string_equal(ids, "0,");
	close(fd);
	fx_close(x);
}

/* ---- QoS -------------------------------------------------------------------------------- */

/* LUN 0's qos object from lun_list: "iops=N,read_bps=N" of its non-zero limits. */
static void qos_of(int fd, char *out, size_t len)
{
	json_t *list = call_ok(fd, "lun_list", "{}");
	json_t *q = json_object_get(json_array_get(list, 0), "qos"), *v;
	const char *key;
	size_t n = 0;

	assert_non_null(q);
	out[0] = 0;
	json_object_foreach(q, key, v)
	{
		if (json_integer_value(v))
			n += (size_t)snprintf(out + n, len - n, "%s=%lld,", key,
					      (long long)json_integer_value(v));
	}
	json_decref(list);
}

/* qos_set: bad params refused before anything changes (each names what was wrong), a
 * valid call sets every limit at once (absent ones unlimited) and lun_list shows them. */
static void test_qos_set(void **state)
{
	struct fx *x = fx_open("0:ram=1M", NULL);
	int fd = rpc_connect(x->rpc);
	char got[512];
	json_t *r;

	(void)state;
	r = call_ok(fd, "qos_set", "{\"id\":0,\"iops\":1000,\"read_bps\":\"50M\"}");
	json_decref(r);
	qos_of(fd, got, sizeof(got));
	assert_string_equal(got, "read_bps=52428800,iops=1000,");

	expect_error(fd, req("qos_set", "{\"iops\":5}"), -32602, "missing param 'id'", NULL);
	expect_error(fd, req("qos_set", "{\"id\":0,\"iopss\":5}"), -32602,
		     "qos_set takes no param 'iopss'", NULL);
	expect_error(fd, req("qos_set", "{\"id\":0,\"iops\":-1}"), -32602, "param 'iops'", NULL);
	expect_error(fd, req("qos_set", "{\"id\":0,\"iops\":\"5\"}"), -32602, "param 'iops'", NULL);
	expect_error(fd, req("qos_set", "{\"id\":0,\"write_iops\":1099511627777}"), -32602,
		     "param 'write_iops'", NULL);
	expect_error(fd, req("qos_set", "{\"id\":0,\"bps\":\"2T\"}"), -32602,
		     "param 'bps': at most", NULL);
	expect_error(fd, req("qos_set", "{\"id\":0,\"bps\":\"5Q\"}"), -32602, "param 'bps'", NULL);
	expect_error(fd, req("qos_set", "{\"id\":0,\"burst_iops\":5}"), -32000,
		     "total iops burst without a total iops limit", "EINVAL");
	expect_error(fd, req("qos_set", "{\"id\":9,\"iops\":5}"), -32000, "no LUN 9", "ENOENT");
	expect_error(fd, req("qos_set", "{\"id\":256,\"iops\":5}"), -32602, "param 'id'", NULL);
	/* none of them changed anything */
	qos_of(fd, got, sizeof(got));
	assert_string_equal(got, "read_bps=52428800,iops=1000,");

	/* absent is unlimited: all limits are set by each call */
	json_decref(call_ok(fd, "qos_set", "{\"id\":0,\"write_iops\":10,\"write_burst_iops\":2}"));
	qos_of(fd, got, sizeof(got));
	assert_string_equal(got, "write_iops=10,write_burst_iops=2,");
	json_decref(call_ok(fd, "qos_set", "{\"id\":0}"));
	qos_of(fd, got, sizeof(got));
	assert_string_equal(got, "");
	close(fd);
	fx_close(x);
}

/* ---- controllers ----------------------------------------------------------------------- */

static unsigned controller_count(int fd)
{
	json_t *list = call_ok(fd, "controller_list", "{}");
	unsigned n = (unsigned)json_array_size(list);

	json_decref(list);
	return n;
}

/* controller_add, controller_remove, controller_list and the controller param: every bad
 * call refused with what was wrong before anything changes (no controller added, no socket
 * left behind); a good one serves at once, with its limits; removal takes its socket. */
static void test_controller_methods(void **state)
{
	struct fx *x = fx_open("0:ram=1M", NULL);
	int fd = rpc_connect(x->rpc);
	char params[1024], vm2[128], longp[200];
	struct vs_ini_opts o;
	struct vs_ini *ini;
	struct stat st;
	json_t *r;

	(void)state;
	snprintf(vm2, sizeof(vm2), "%s/vm2.sock", x->t.tg.dir);
	memset(longp, 'a', sizeof(longp) - 1);
	longp[sizeof(longp) - 1] = 0;
#define ADD(extra)                                                                                 \
	(snprintf(                                                                                 \
	     params, sizeof(params),                                                               \
	     "{\"name\":\"vm2\",\"socket\":\"%s\",\"luns\":[{\"id\":0,\"spec\":\"ram=1M\"}]%s}",   \
	     vm2, extra),                                                                          \
	 req("controller_add", params))
	expect_error(fd, req("controller_add", "{\"socket\":\"/tmp/x.sock\"}"), -32602,
		     "missing param 'name'", NULL);
	expect_error(fd, req("controller_add", "{\"name\":\"vm2\"}"), -32602,
		     "missing param 'socket'", NULL);
	expect_error(fd, ADD(",\"queues\":0"), -32602, "param 'queues': 1..16", NULL);
	expect_error(fd, ADD(",\"queues\":17"), -32602, "param 'queues'", NULL);
	expect_error(fd, ADD(",\"colour\":1"), -32602, "controller_add takes no param 'colour'",
		     NULL);
	expect_error(fd, ADD(",\"qos\":\"iops=fast\""), -32602, "param 'qos'", NULL);
	expect_error(fd, ADD(",\"qos\":\"burst_iops=5\""), -32602, "param 'qos'", NULL);
	snprintf(params, sizeof(params), "{\"name\":\"vm2\",\"socket\":\"%s\",\"luns\":[]}", vm2);
	expect_error(fd, req("controller_add", params), -32602, "param 'luns'", NULL);
	snprintf(params, sizeof(params),
		 "{\"name\":\"vm2\",\"socket\":\"%s\",\"luns\":[{\"id\":0,\"spec\":\"ram=1M\","
		 "\"colour\":1}]}",
		 vm2);
	expect_error(fd, req("controller_add", params), -32602, "colour", NULL);
	snprintf(
	    params, sizeof(params),
	    "{\"name\":\"vm2\",\"socket\":\"%s/%s\",\"luns\":[{\"id\":0,\"spec\":\"ram=1M\"}]}",
	    x->t.tg.dir, longp);
	expect_error(fd, req("controller_add", params), -32602, "param 'socket': at most", NULL);
	/* the target's refusals */
	snprintf(params, sizeof(params),
		 "{\"name\":\"vm/2\",\"socket\":\"%s\",\"luns\":[{\"id\":0,\"spec\":\"ram=1M\"}]}",
		 vm2);
	expect_error(fd, req("controller_add", params), -32000, "controller name", "EINVAL");
	snprintf(params, sizeof(params),
		 "{\"name\":\"default\",\"socket\":\"%s\",\"luns\":[{\"id\":0,\"spec\":"
		 "\"ram=1M\"}]}",
		 vm2);
	expect_error(fd, req("controller_add", params), -32000, "default", "EEXIST");
	snprintf(params, sizeof(params),
		 "{\"name\":\"vm2\",\"socket\":\"%s\",\"luns\":[{\"id\":0,\"spec\":\"ram=1M\"}]}",
		 x->t.tg.sock);
	expect_error(fd, req("controller_add", params), -32000, "", "EEXIST");
	snprintf(params, sizeof(params),
		 "{\"name\":\"vm2\",\"socket\":\"%s\",\"luns\":[{\"id\":0,\"spec\":"
		 "\"file=/nonexistent/img\"}]}",
		 vm2);
	expect_error(fd, req("controller_add", params), -32000, "/nonexistent/img", "ENOENT");
	snprintf(params, sizeof(params),
		 "{\"name\":\"vm2\",\"socket\":\"/nonexistent/dir/vm2.sock\",\"luns\":[{\"id\":0,"
		 "\"spec\":\"ram=1M\"}]}");
	expect_error(fd, req("controller_add", params), -32000, "/nonexistent/dir/vm2.sock",
		     "ENOENT");
	/* none of them added anything or left a socket */
	assert_int_equal(controller_count(fd), 1);
	assert_int_equal(stat(vm2, &st), -1);

	/* a good one: listed, served, with its limits over its LUNs */
	r = call_ok(fd, "controller_add",
		    (snprintf(params, sizeof(params),
			      "{\"name\":\"vm2\",\"socket\":\"%s\",\"queues\":2,"
			      "\"luns\":[{\"id\":3,\"spec\":\"ram=1M\"}],"
			      "\"qos\":\"iops=5000\"}",
			      vm2),
		     params));
	assert_string_equal(json_string_value(json_object_get(r, "name")), "vm2");
	assert_int_equal(json_integer_value(json_object_get(r, "queues")), 2);
	assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "qos"), "iops")),
			 5000);
	json_decref(r);
	assert_int_equal(controller_count(fd), 2);
	o = (struct vs_ini_opts){.queues = 2, .data_mem = 1u << 20, .socket = vm2};
	assert_int_equal(vs_ini_open(&ini, &o), 0);
	assert_int_equal(vs_ini_lun_count(ini), 1);
	vs_ini_close(ini);

	/* with two, the LUN methods need the controller */
	expect_error(fd, req("lun_list", "{}"), -32602, "missing param 'controller'", NULL);
	expect_error(fd, req("lun_list", "{\"controller\":\"vm9\"}"), -32000, "no controller 'vm9'",
		     "ENOENT");
	expect_error(fd, req("lun_list", "{\"controller\":7}"), -32602, "param 'controller'", NULL);
	r = call_ok(fd, "lun_list", "{\"controller\":\"vm2\"}");
	assert_int_equal(json_array_size(r), 1);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(r, 0), "id")), 3);
	json_decref(r);

	/* qos_set id=all: the controller's limits */
	r = call_ok(fd, "qos_set", "{\"controller\":\"vm2\",\"id\":\"all\",\"iops\":50}");
	assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "qos"), "iops")),
			 50);
	json_decref(r);
	expect_error(fd, req("qos_set", "{\"controller\":\"vm2\",\"id\":\"every\",\"iops\":5}"),
		     -32602, "param 'id': expected a LUN number in 0..255 or \"all\"", NULL);
	expect_error(fd, req("qos_set", "{\"controller\":\"vm2\",\"id\":\"all\",\"burst_iops\":5}"),
		     -32000, "controller vm2: QoS", "EINVAL");
	r = call_ok(fd, "controller_list", "{}");
	assert_int_equal(json_integer_value(
			     json_object_get(json_object_get(json_array_get(r, 1), "qos"), "iops")),
			 50);
	json_decref(r);

	/* removal */
	expect_error(fd, req("controller_remove", "{}"), -32602, "missing param 'name'", NULL);
	expect_error(fd, req("controller_remove", "{\"name\":\"vm9\"}"), -32000, "vm9", "ENOENT");
	expect_error(fd, req("controller_remove", "{\"name\":\"vm2\",\"force\":true}"), -32602,
		     "controller_remove takes no param 'force'", NULL);
	json_decref(call_ok(fd, "controller_remove", "{\"name\":\"vm2\"}"));
	assert_int_equal(controller_count(fd), 1);
	assert_int_equal(stat(vm2, &st), -1);
	/* the one left serves, and the param is optional again */
	json_decref(call_ok(fd, "lun_list", "{}"));
	io_roundtrip(x, 0, 0, 8, 11);
#undef ADD
	close(fd);
	fx_close(x);
}

/* ---- LUNs ------------------------------------------------------------------------------ */

/* lun_add, lun_resize and lun_remove change what lun_list says and what the initiator
 * sees: a new LUN that holds data, a larger one whose new blocks can be written with the
 * old data still there, then none; LUN 0 keeps working throughout. */
static void test_lun_lifecycle(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL);
	int fd = rpc_connect(x->rpc), idx0, idx1;
	struct vs_ini_lun info;
	char ids[64];
	json_t *r;

	(void)state;
	r = call_ok(fd, "lun_add", "{\"id\":1,\"spec\":\"ram=4M\"}");
	assert_int_equal(json_integer_value(json_object_get(r, "bytes")), 4 << 20);
	assert_string_equal(json_string_value(json_object_get(r, "kind")), "ram");
	assert_string_equal(json_string_value(json_object_get(r, "spec")), "ram=4M");
	json_decref(r);
	list_ids(fd, ids, sizeof(ids));
	assert_string_equal(ids, "0,1,");
	idx1 = ini_wait_lun(x->ini, 1, 4 << 20);
	io_roundtrip(x, idx1, 8000, 16, 11); /* near the end of 4 MiB (8192 blocks) */

	r = call_ok(fd, "lun_resize", "{\"id\":1,\"size\":\"8M\"}");
	assert_int_equal(json_integer_value(json_object_get(r, "bytes")), 8 << 20);
	json_decref(r);
	idx1 = ini_wait_lun(x->ini, 1, 8 << 20);
	io_roundtrip(x, idx1, 16000, 16, 12); /* past the old end */
	assert_int_equal(io_sync(x->q, VS_INI_READ, (unsigned)idx1, 8000, 16, x->buf, 16 * 512, 1),
			 0);
	assert_true(pattern_check(x->buf, 16 * 512, 11, 8000 * 512)); /* kept */
	/* A size that is not whole blocks is the target's to refuse. */
	expect_error(fd, req("lun_resize", "{\"id\":1,\"size\":1000}"), -32000, "", "EINVAL");

	r = call_ok(fd, "lun_remove", "{\"id\":1}");
	assert_int_equal(json_integer_value(json_object_get(r, "id")), 1);
	json_decref(r);
	list_ids(fd, ids, sizeof(ids));
	assert_string_equal(ids, "0,");
	assert_int_equal(ini_wait_lun(x->ini, 1, 0), -1);
	idx0 = ini_index(x->ini, 0, &info);
	assert_true(idx0 >= 0);
	io_roundtrip(x, idx0, 0, 8, 13);
	close(fd);
	fx_close(x);
}

/* lun_add of a FIFO (file=FIFO,ro: an open for reading waits for a writer) is refused at
 * once, as neither a regular file nor a block device; a second client's call sent right
 * behind it is answered, and the initiator's I/O on LUN 0 goes on.  On dcf1c4a the open
 * blocked for good, in the management thread and under the LUN lock: the second client
 * got no answer. */
static void test_fifo_refused(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL);
	int a = rpc_connect(x->rpc), b = rpc_connect(x->rpc), idx0;
	char fifo[160], line[512], ids[64], *reply;
	struct vs_ini_lun info;
	json_t *resp, *err;

	(void)state;
	snprintf(fifo, sizeof(fifo), "%s/fifo", x->t.tg.dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	snprintf(line, sizeof(line),
		 "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_add\",\"params\":{\"id\":2,"
		 "\"spec\":\"file=%s,ro\"}}\n",
		 fifo);
	send_all(a, line, strlen(line));
	list_ids(b, ids, sizeof(ids)); /* answered, whatever the first call does */
	assert_string_equal(ids, "0,");
	reply = read_line(a);
	assert_non_null(reply);
	resp = json_loads(reply, 0, NULL);
	free(reply);
	err = json_object_get(resp, "error");
	assert_non_null(err);
	assert_non_null(strstr(json_string_value(json_object_get(err, "message")),
			       "is neither a regular file nor a block device"));
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(err, "data"), "errno")), "EINVAL");
	json_decref(resp);
	idx0 = ini_index(x->ini, 0, &info);
	assert_true(idx0 >= 0);
	io_roundtrip(x, idx0, 0, 8, 21);
	close(a);
	close(b);
	unlink(fifo);
	fx_close(x);
}

/* ---- statistics ------------------------------------------------------------------------ */

static uint64_t jget(json_t *o, const char *key)
{
	return (uint64_t)json_integer_value(json_object_get(o, key));
}

static json_t *stats_lun(json_t *st, unsigned id)
{
	size_t i;
	json_t *l;

	json_array_foreach(json_object_get(st, "luns"), i, l)
	{
		if (jget(l, "id") == id)
			return l;
	}
	fail_msg("no LUN %u in stats", id);
	return NULL;
}

/* LUN id's counters moved by exactly reads (read_bytes) and writes (write_bytes) from
 * before to after. */
static void lun_moved(json_t *before, json_t *after, unsigned id, uint64_t reads,
		      uint64_t read_bytes, uint64_t writes, uint64_t write_bytes)
{
	json_t *a = stats_lun(after, id), *b = stats_lun(before, id);

	assert_int_equal(jget(a, "reads") - jget(b, "reads"), reads);
	assert_int_equal(jget(a, "writes") - jget(b, "writes"), writes);
	assert_int_equal(jget(a, "read_bytes") - jget(b, "read_bytes"), read_bytes);
	assert_int_equal(jget(a, "write_bytes") - jget(b, "write_bytes"), write_bytes);
}

/* count requests of op on the LUN at index idx, one after another from LBA 0, each of
 * blocks in nseg segments. */
static void io_run(struct fx *x, enum vs_ini_op op, int idx, int count, uint32_t blocks,
		   unsigned nseg)
{
	for (int k = 0; k < count; k++)
		assert_int_equal(io_sync(x->q, op, (unsigned)idx, (uint64_t)k * blocks, blocks,
					 x->buf, (size_t)blocks * 512, nseg),
				 0);
}

/* A known workload (LUN 0: 5 reads of 4 KiB, 3 writes of 8 KiB; LUN 3: 2 reads of 512 B,
 * 7 writes of 64 KiB) moves each LUN's counters, the queue's and the target's by exactly
 * that much. */
static void test_stats_match(void **state)
{
	struct fx *x = fx_open("0:ram=16M", "3:ram=16M");
	int fd = rpc_connect(x->rpc);
	struct vs_ini_lun info;
	int i0 = ini_index(x->ini, 0, &info), i3 = ini_index(x->ini, 3, &info);
	json_t *before, *after, *a, *qa, *qb;

	(void)state;
	assert_true(i0 >= 0 && i3 >= 0);
	before = call_ok(fd, "stats", "{}");
	io_run(x, VS_INI_WRITE, i0, 3, 16, 1);
	io_run(x, VS_INI_READ, i0, 5, 8, 1);
	io_run(x, VS_INI_WRITE, i3, 7, 128, 2);
	io_run(x, VS_INI_READ, i3, 2, 1, 1);
	after = call_ok(fd, "stats", "{}");

	lun_moved(before, after, 0, 5, 5 * 4096, 3, 3 * 8192);
	a = stats_lun(after, 0);
	assert_int_equal(jget(a, "in_flight"), 0);
	assert_int_equal(jget(a, "failures"), 0);
	assert_true(jget(json_object_get(a, "read_latency_ns"), "p50") > 0);
	assert_true(jget(json_object_get(a, "write_latency_ns"), "p99") >=
		    jget(json_object_get(a, "write_latency_ns"), "p50"));
	lun_moved(before, after, 3, 2, 2 * 512, 7, 7 * 65536);
	qa = json_array_get(json_object_get(after, "queues"), 0);
	qb = json_array_get(json_object_get(before, "queues"), 0);
	assert_int_equal(jget(qa, "requests") - jget(qb, "requests"), 17);
	assert_int_equal(jget(qa, "bytes") - jget(qb, "bytes"),
			 5 * 4096 + 3 * 8192 + 2 * 512 + 7 * 65536);
	assert_int_equal(jget(json_object_get(after, "target"), "requests") -
			     jget(json_object_get(before, "target"), "requests"),
			 17);
	assert_true(jget(after, "time_ns") > jget(before, "time_ns"));
	json_decref(before);
	json_decref(after);
	close(fd);
	fx_close(x);
}

/* ---- bounds ---------------------------------------------------------------------------- */

/* Another client is answered and the initiator's I/O is served (data checked). */
static void still_serving(struct fx *x, int other, uint64_t seed)
{
	char ids[64];
	struct vs_ini_lun info;

	list_ids(other, ids, sizeof(ids));
	assert_string_equal(ids, "0,");
	io_roundtrip(x, ini_index(x->ini, 0, &info), seed, 8, seed);
}

/* A 1 MiB request line: refused with -32600 once it passes 64 KiB, and its client closed,
 * while another client and the initiator's I/O are served before, during and after. */
static void test_long_line(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL);
	int big = rpc_connect(x->rpc), other = rpc_connect(x->rpc);
	static char chunk[65536];
	size_t sent = 0, total = 1 << 20;
	char *line, tail;
	json_t *resp;

	(void)state;
	memset(chunk, 'x', sizeof(chunk));
	send_all(big, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"", 35);
	sent = 35;
	/* Most of a line's limit, no newline yet: buffered, nobody else waits for it. */
	send_all(big, chunk, 60000);
	sent += 60000;
	still_serving(x, other, 1);
	/* The rest, a chunk at a time, serving the others in between; the target stops
	 * reading (and closes) after the limit, so a send may fail: that is the refusal. */
	for (uint64_t seed = 2; sent < total; seed++) {
		size_t n = total - sent < sizeof(chunk) ? total - sent : sizeof(chunk);
		ssize_t w = send(big, chunk, n, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0 && errno != EAGAIN)
			break; /* EPIPE / ECONNRESET: closed by the target */
		if (w > 0)
			sent += (size_t)w;
		still_serving(x, other, seed);
	}
	tail = '\n';
	(void)!send(big, &tail, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	line = read_line(big);
	assert_non_null(line);
	resp = json_loads(line, 0, NULL);
	assert_non_null(resp);
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(resp, "error"), "code")), -32600);
	assert_non_null(strstr(line, "longer than 65536 bytes"));
	assert_true(json_is_null(json_object_get(resp, "id")));
	json_decref(resp);
	free(line);
	assert_null(read_line(big)); /* closed: EOF or reset */
	still_serving(x, other, 99);
	close(big);
	close(other);
	fx_close(x);
}

/* A client that sends requests and never reads its replies holds only itself up: another
 * client is answered and the initiator's I/O goes on. */
static void test_stuck_client(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL);
	int stuck = rpc_connect(x->rpc), other = rpc_connect(x->rpc);
	static const char req[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"stats\"}\n";
	unsigned queued = 0;

	(void)state;
	/* As many requests as its socket takes without blocking (never read). */
	for (unsigned i = 0; i < 100000; i++) {
		ssize_t w = send(stuck, req, sizeof(req) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w < 0) {
			assert_int_equal(errno, EAGAIN);
			break;
		}
		assert_int_equal(w, sizeof(req) - 1);
		queued++;
	}
	assert_true(queued > 100);
	for (uint64_t seed = 1; seed < 20; seed++)
		still_serving(x, other, seed);
	close(stuck);
	still_serving(x, other, 50);
	close(other);
	fx_close(x);
}

/* ---- the socket ------------------------------------------------------------------------ */

/* Run `vioscope target --rpc RPC` (its socket in dir) and wait (deadline) for it to exit:
 * its exit status, its stderr in err. */
static int run_target(const char *dir, const char *rpc, char *why, size_t whylen)
{
	char sock[128];
	const char *argv[] = {VIOSCOPE_BIN, "target", "--socket", sock, "--lun",
			      "0:ram=1M",   "--rpc",  rpc,	  NULL};
	int status;

	snprintf(sock, sizeof(sock), "%s/t2.sock", dir);
	status = proc_run(argv, why, whylen, DEADLINE_MS);
	if (status == -ETIMEDOUT)
		fail_msg("the target did not exit");
	assert_int_equal(access(sock, F_OK), -1); /* its vhost-user socket went too */
	return status;
}

/* The socket is 0600; a path that holds something else is refused and left as it was; a
 * path another target serves is refused. */
static void test_socket_path(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL);
	char path[128], err[2048], content[16] = "";
	struct stat st;
	int fd;

	(void)state;
	assert_int_equal(lstat(x->rpc, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0600);

	snprintf(path, sizeof(path), "%s/not-a-socket", x->t.tg.dir);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "keep me", 7), 7);
	close(fd);
	assert_int_equal(run_target(x->t.tg.dir, path, err, sizeof(err)), 3);
	assert_non_null(strstr(err, "exists and is not a socket"));
	fd = open(path, O_RDONLY);
	assert_int_equal(read(fd, content, sizeof(content)), 7);
	close(fd);
	assert_string_equal(content, "keep me");
	unlink(path);

	assert_int_equal(run_target(x->t.tg.dir, x->rpc, err, sizeof(err)), 3);
	assert_non_null(strstr(err, "another process is listening"));
	fd = rpc_connect(x->rpc); /* the first target's socket is still its own */
	still_serving(x, fd, 3);
	close(fd);
	fx_close(x);
}

/* shutdown answers, then the target stops as on SIGTERM: exit 0, both sockets gone. */
static void test_shutdown(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL);
	int fd = rpc_connect(x->rpc), status = -1;
	uint64_t end;
	json_t *r;

	(void)state;
	vs_ini_close(x->ini);
	x->ini = NULL;
	r = call_ok(fd, "shutdown", "{}");
	assert_true(json_is_true(r));
	json_decref(r);
	end = now_ms() + DEADLINE_MS;
	while (waitpid(x->t.tg.pid, &status, WNOHANG) == 0) {
		assert_true(now_ms() < end);
		usleep(10000);
	}
	x->t.tg.pid = -1;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(access(x->rpc, F_OK), -1);
	assert_int_equal(access(x->t.tg.sock, F_OK), -1);
	close(fd);
	fx_close(x);
}

/* ---- the client ------------------------------------------------------------------------ */

/* The shell command line cmd: exit status (-1: it did not exit), what it wrote in out. */
static int run_cmd(const char *cmd, char *out, size_t outlen)
{
	FILE *f = popen(cmd, "r");
	size_t n;
	int st;

	assert_non_null(f);
	n = fread(out, 1, outlen - 1, f);
	out[n] = 0;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `vioscope rpc ARGS` (socket of x): exit status, stdout+stderr in out. */
static int cli(struct fx *x, char *out, size_t outlen, const char *args)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd), "%s rpc --socket %s %s 2>&1", VIOSCOPE_BIN, x->rpc, args);
	return run_cmd(cmd, out, outlen);
}

/* `vioscope trace show` of x's target: exit status, stdout+stderr in out. */
static int trace_show(struct fx *x, char *out, size_t outlen)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "%s trace show %d 2>&1", VIOSCOPE_BIN, (int)x->t.tg.pid);
	return run_cmd(cmd, out, outlen);
}

/* The client sends id=1 as a number and spec=ram=2M as a string, prints the result as
 * JSON, exits 1 with the target's message on an error, 2 on a bad command line; --table
 * and stats --watch print tables; trace_set changes the target's tracing. */
static void test_client(void **state)
{
	struct fx *x = fx_open("0:ram=16M", NULL);
	static char out[65536];

	(void)state;
	assert_int_equal(cli(x, out, sizeof(out), "lun_add id=1 spec=ram=2M"), 0);
	assert_non_null(strstr(out, "\"bytes\": 2097152"));
	assert_non_null(strstr(out, "\"spec\": \"ram=2M\""));
	assert_int_equal(cli(x, out, sizeof(out), "lun_add id=1 spec=ram=2M"), 1);
	assert_non_null(strstr(out, "vioscope rpc: lun_add: "));
	assert_non_null(strstr(out, "EEXIST"));
	assert_int_equal(cli(x, out, sizeof(out), "--table lun_list"), 0);
	assert_non_null(strstr(out, "LUN  KIND"));
	assert_non_null(strstr(out, "ram=2M"));
	assert_int_equal(cli(x, out, sizeof(out), "stats --table"), 0);
	assert_non_null(strstr(out, "read_bytes"));
	assert_int_equal(cli(x, out, sizeof(out), "stats --watch 0.05 --count 2"), 0);
	assert_non_null(strstr(out, "r/s"));
	assert_non_null(strstr(strstr(out, "r/s") + 1, "r/s")); /* two reports */
	assert_int_equal(cli(x, out, sizeof(out), "lun_resize id=1 size=4M"), 0);
	assert_non_null(strstr(out, "\"bytes\": 4194304"));
	assert_int_equal(cli(x, out, sizeof(out), "lun_remove id=1"), 0);
	assert_int_equal(cli(x, out, sizeof(out), "no_such_method"), 1);
	assert_non_null(strstr(out, "not found"));
	/* trace_set takes effect in the target as `trace enable` would: `trace show` says so. */
	assert_int_equal(cli(x, out, sizeof(out), "trace_set spec=verbose:target.io"), 0);
	assert_int_equal(trace_show(x, out, sizeof(out)), 0);
	if (!strstr(out, "target       verbose  on: io ") ||
	    !strstr(out, "scsi         verbose  on: - "))
		fail_msg("trace_set had no effect:\n%s", out);
	assert_int_equal(cli(x, out, sizeof(out), "trace_set spec=loud"), 1);
	assert_int_equal(cli(x, out, sizeof(out), "lun_add 1"), 2);
	assert_int_equal(cli(x, out, sizeof(out), "lun_list --watch 1"), 2);
	fx_close(x);
}

/* ---- the management plane under hostile clients (issue 22) ------------------------------ */

#define MAX_CLIENTS 64	  /* VS_RPC_MAX_CLIENTS */
#define NOBODY	    65534 /* a uid the target does not run under */

/* The target's stderr holds text (within the deadline: it is written on its threads). */
static bool log_has(struct fx *x, const char *text, uint64_t ms)
{
	uint64_t end = now_ms() + ms;
	static char buf[1 << 16];

	for (;;) {
		FILE *f = fopen(x->log, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = 0;
		if (strstr(buf, text))
			return true;
		if (now_ms() >= end)
			return false;
		usleep(10000);
	}
}

/* Let other users reach the management socket (the test runs as root). */
static void open_to_others(struct fx *x)
{
	assert_int_equal(chmod(x->t.tg.dir, 0711), 0);
	assert_int_equal(chmod(x->rpc, 0666), 0);
}

/* As uid NOBODY (a child process): connect, send line, read one line into reply ("" at
 * EOF).  0, or why the child failed. */
static int as_nobody(const char *sock, const char *line, char *reply, size_t len)
{
	int pfd[2], status;
	size_t n = 0;
	ssize_t r;
	pid_t p;

	assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		char buf[4096];
		size_t got = 0;
		int fd;

		close(pfd[0]);
		if (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY))
			_exit(10);
		snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
		fd = socket(AF_UNIX, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
			_exit(11);
		/* A refused peer may be closed before it sends: what it was told is read all
		 * the same. */
		if (send(fd, line, strlen(line), MSG_NOSIGNAL) >= 0)
			(void)!send(fd, "\n", 1, MSG_NOSIGNAL);
		alarm(DEADLINE_MS / 1000); /* the deadline of the read below */
		while (got < sizeof(buf) && !memchr(buf, '\n', got) &&
		       (r = recv(fd, buf + got, sizeof(buf) - got, 0)) > 0)
			got += (size_t)r;
		if (write(pfd[1], buf, got) != (ssize_t)got)
			_exit(13);
		_exit(0);
	}
	close(pfd[1]);
	while (n + 1 < len && (r = read(pfd[0], reply + n, len - 1 - n)) > 0)
		n += (size_t)r;
	reply[n] = 0;
	close(pfd[0]);
	assert_int_equal(waitpid(p, &status, 0), p);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* 64 clients connect, are answered once and stay without a word: a newcomer is still
 * answered; the one idle longest is closed and told why, the others keep working.  (On
 * dcf1c4a the newcomer was closed at accept: "send: Broken pipe".) */
static void test_idle_clients_are_evicted(void **state)
{
	struct fx *x = fx_start("0:ram=16M", NULL, NULL, false);
	int idle[MAX_CLIENTS], op, closed = 0;
	char ids[64];

	(void)state;
	for (unsigned i = 0; i < MAX_CLIENTS; i++) {
		idle[i] = rpc_connect(x->rpc);
		list_ids(idle[i], ids, sizeof(ids)); /* accepted, answered */
	}
	op = rpc_connect(x->rpc);
	list_ids(op, ids, sizeof(ids));
	assert_string_equal(ids, "0,");
	/* idle[0] was answered first: idle longest.  It was told, then closed. */
	for (unsigned i = 0; i < MAX_CLIENTS; i++) {
		struct pollfd p = {.fd = idle[i], .events = POLLRDHUP};

		if (poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP))) {
			char *line = read_line(idle[i]);

			assert_int_equal(i, 0);
			assert_non_null(line);
			assert_non_null(strstr(line, "idle longest"));
			free(line);
			assert_null(read_line(idle[i]));
			closed++;
		}
	}
	assert_int_equal(closed, 1);
	assert_true(log_has(x, "it had been idle longest", DEADLINE_MS));
	list_ids(idle[MAX_CLIENTS - 1], ids, sizeof(ids));
	assert_string_equal(ids, "0,");
	for (unsigned i = 0; i < MAX_CLIENTS; i++)
		close(idle[i]);
	close(op);
	fx_close(x);
}

/* Half a request line and nothing more: refused with -32600 and closed after
 * VS_RPC_STALL_MS (5 s), another client served meanwhile.  (On dcf1c4a it stayed for
 * good.) */
static void test_partial_line_times_out(void **state)
{
	struct fx *x = fx_start("0:ram=16M", NULL, NULL, false);
	int slow = rpc_connect(x->rpc), other = rpc_connect(x->rpc);
	char ids[64], *line;

	(void)state;
	send_all(slow, "{\"jsonrpc\":\"2.0\",", 17);
	list_ids(other, ids, sizeof(ids));
	assert_string_equal(ids, "0,");
	line = read_line_within(slow, 3 * DEADLINE_MS);
	assert_non_null(line);
	assert_non_null(strstr(line, "-32600"));
	assert_non_null(strstr(line, "no complete request line within 5000 ms"));
	free(line);
	assert_null(read_line(slow));
	list_ids(other, ids, sizeof(ids));
	close(slow);
	close(other);
	fx_close(x);
}

/* A client that queues requests and never reads its replies is closed once they have
 * gone unread for VS_RPC_STALL_MS; the others are served throughout.  (On dcf1c4a it
 * held its slot and its replies for good.) */
static void test_unread_replies_drop_the_client(void **state)
{
	struct fx *x = fx_start("0:ram=16M", NULL, NULL, false);
	int stuck = rpc_connect(x->rpc), other = rpc_connect(x->rpc);
	static const char line[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"stats\"}\n";
	struct pollfd p = {.fd = stuck, .events = POLLRDHUP};
	unsigned queued = 0;
	char ids[64];

	(void)state;
	while (send(stuck, line, sizeof(line) - 1, MSG_NOSIGNAL | MSG_DONTWAIT) > 0)
		queued++;
	assert_int_equal(errno, EAGAIN);
	assert_true(queued > 100);
	list_ids(other, ids, sizeof(ids));
	/* Closed by the target: the hang-up shows while its replies still sit unread. */
	assert_int_equal(poll(&p, 1, 3 * DEADLINE_MS), 1);
	assert_true(p.revents & (POLLRDHUP | POLLHUP));
	assert_true(log_has(x, "its replies went unread for 5000 ms", DEADLINE_MS));
	list_ids(other, ids, sizeof(ids));
	assert_string_equal(ids, "0,");
	close(stuck);
	close(other);
	fx_close(x);
}

/* 30 clients each queue hundreds of requests (every one grows its own LUN by a block) and
 * never read; then an operator connects and asks for lun_list.  The target is stopped
 * (SIGSTOP) while they all send, so that it finds everything at once: the operator's
 * answer must come after at most about one request of each flooder, which the LUNs' sizes
 * in that answer count.  (On dcf1c4a every flooder's buffered lines were answered first:
 * 8,340 requests before the operator's.) */
static void test_a_flood_waits_its_turn(void **state)
{
	enum { FLOODERS = 30 };
	struct fx *x = fx_start("0:ram=16M", NULL, NULL, false);
	int setup = rpc_connect(x->rpc), op, fl[FLOODERS], status;
	unsigned queued[FLOODERS] = {0}, served = 0;
	char line[256], params[64], ids[256];
	json_t *resp, *list, *l;
	size_t i;

	(void)state;
	for (unsigned k = 0; k < FLOODERS; k++) {
		snprintf(params, sizeof(params), "{\"id\":%u,\"spec\":\"ram=1M\"}", k + 1);
		json_decref(call_ok(setup, "lun_add", params));
	}
	close(setup);
	for (unsigned k = 0; k < FLOODERS; k++) {
		fl[k] = rpc_connect(x->rpc);
		list_ids(fl[k], ids, sizeof(ids)); /* accepted */
	}
	assert_int_equal(kill(x->t.tg.pid, SIGSTOP), 0);
	assert_int_equal(waitpid(x->t.tg.pid, &status, WUNTRACED), x->t.tg.pid);
	assert_true(WIFSTOPPED(status));
	/* The operator comes last: it is accepted after the flooders' lines are read, as
	 * dcf1c4a read them and answered them all first. */
	op = rpc_connect(x->rpc);
	for (unsigned k = 0; k < FLOODERS; k++) {
		for (unsigned n = 1; n <= 2000; n++) {
			int len =
			    snprintf(line, sizeof(line),
				     "{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"lun_resize\","
				     "\"params\":{\"id\":%u,\"size\":%u}}\n",
				     n, k + 1, (1u << 20) + 512 * n);
			ssize_t w = send(fl[k], line, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);

			if (w != len)
				break; /* its socket is full (a part of a line is never answered) */
			queued[k]++;
		}
		assert_true(queued[k] >= 200);
	}
	send_all(op, req("lun_list", "{}"), strlen(req("lun_list", "{}")));
	send_all(op, "\n", 1);
	assert_int_equal(kill(x->t.tg.pid, SIGCONT), 0);
	{
		char *reply = read_line(op);

		assert_non_null(reply);
		resp = json_loads(reply, 0, NULL);
		list = json_object_get(resp, "result");
		assert_non_null(list);
		free(reply);
	}
	json_array_foreach(list, i, l)
	{
		uint64_t id = (uint64_t)json_integer_value(json_object_get(l, "id"));
		uint64_t bytes = (uint64_t)json_integer_value(json_object_get(l, "bytes"));

		if (id >= 1 && id <= FLOODERS)
			served += (unsigned)((bytes - (1u << 20)) / 512);
	}
	json_decref(resp);
	/* About one each: at most two, for the requests under way when the operator's came. */
	print_message("%u requests of the %u flooders were answered before the operator's\n",
		      served, FLOODERS);
	if (served > 2 * FLOODERS)
		fail_msg("%u of the flooders' requests were answered before the operator's",
			 served);
	for (unsigned k = 0; k < FLOODERS; k++)
		close(fl[k]);
	close(op);
	fx_close(x);
}

/* A batch of count stats requests (ids 0, 1, ...). */
static const char *stats_batch(unsigned count)
{
	static char batch[4096];
	size_t n = (size_t)snprintf(batch, sizeof(batch), "[");

	for (unsigned k = 0; k < count; k++)
		n += (size_t)snprintf(batch + n, sizeof(batch) - n,
				      "%s{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"stats\"}",
				      k ? "," : "", k);
	snprintf(batch + n, sizeof(batch) - n, "]");
	return batch;
}

/* A batch is bounded before any of it runs: 254 lun_adds, whose replies could pass 1 MiB,
 * are refused whole and add nothing; 16 stats over 64 LUNs too; 4 are answered.  (On
 * dcf1c4a all 254 LUNs were added, and the 16 stats answered in one go: 1,500 of them took
 * ~0.28 s of the server's thread, and hundreds of MB with 256 LUNs.) */
static void test_batch_bounded_before_it_runs(void **state)
{
	struct fx *x = fx_client(NULL);
	static char batch[65536];
	char params[64], ids[1024];
	size_t n = 0;
	json_t *r;

	(void)state;
	n += (size_t)snprintf(batch + n, sizeof(batch) - n, "[");
	for (unsigned k = 1; k <= 254; k++)
		n += (size_t)snprintf(batch + n, sizeof(batch) - n,
				      "%s{\"jsonrpc\":\"2.0\",\"id\":%u,\"method\":\"lun_add\","
				      "\"params\":{\"id\":%u,\"spec\":\"null=1M\"}}",
				      k > 1 ? "," : "", k, k);
	snprintf(batch + n, sizeof(batch) - n, "]");
	expect_error(x->fd, batch, -32600, "nothing of it was run", NULL);
	list_ids(x->fd, ids, sizeof(ids));
	assert_string_equal(ids, "0,");

	for (unsigned k = 1; k < 64; k++) {
		snprintf(params, sizeof(params), "{\"id\":%u,\"spec\":\"null=1M\"}", k);
		json_decref(call_ok(x->fd, "lun_add", params));
	}
	expect_error(x->fd, stats_batch(16), -32600, "could take more than 1048576 bytes", NULL);
	r = exchange(x->fd, stats_batch(4));
	assert_int_equal(json_array_size(r), 4);
	assert_int_equal(json_array_size(json_object_get(
			     json_object_get(json_array_get(r, 3), "result"), "luns")),
			 64);
	json_decref(r);
	fx_close(x);
}

/* By default only root and the target's own uid may use the socket: another uid that can
 * reach it (here: the socket made world-writable) is told why and closed, and its lun_add
 * never runs.  (On dcf1c4a the lun_add ran.) */
static void test_uid_not_allowed_is_refused(void **state)
{
	struct fx *x = fx_client(NULL);
	char reply[4096], ids[64];

	(void)state;
	open_to_others(x);
	assert_int_equal(as_nobody(x->rpc, req("lun_add", "{\"id\":1,\"spec\":\"null=1M\"}"), reply,
				   sizeof(reply)),
			 0);
	if (!strstr(reply, "uid 65534 may not use this management socket (--rpc-allow)"))
		fail_msg("nobody was answered: %s", reply);
	list_ids(x->fd, ids, sizeof(ids));
	assert_string_equal(ids, "0,");
	assert_true(log_has(x, "uid 65534 is not allowed (--rpc-allow)", DEADLINE_MS));
	fx_close(x);
}

/* --rpc-allow names who may: with only uid 65534 listed, root is refused (the client says
 * why and exits 1) and nobody is served.  (On dcf1c4a the option did not exist.) */
static void test_rpc_allow_names_who_may(void **state)
{
	static const char *const more[] = {"--rpc-allow", "65534", NULL};
	struct fx *x = fx_start("0:ram=16M", NULL, more, false);
	char reply[4096];
	static char out[4096];

	(void)state;
	open_to_others(x);
	assert_int_equal(as_nobody(x->rpc, req("lun_list", "{}"), reply, sizeof(reply)), 0);
	if (!strstr(reply, "\"result\":[{\"id\":0"))
		fail_msg("nobody was not served: %s", reply);
	assert_int_equal(cli(x, out, sizeof(out), "lun_list"), 1);
	if (!strstr(out, "uid 0 may not use this management socket (--rpc-allow)"))
		fail_msg("root was not refused: %s", out);
	fx_close(x);
}

/* A frontend that connects under a uid the management socket allows is warned about; one
 * under a uid it does not allow is not.  (On dcf1c4a there was no warning.) */
static void test_frontend_under_a_manager_uid_is_warned(void **state)
{
	static const char *const others[] = {"--rpc-allow", "65534", NULL};
	struct fx *x = fx_start("0:ram=16M", NULL, NULL, true);

	(void)state;
	/* The initiator runs as root, which the socket allows by default. */
	assert_true(log_has(x, "runs as uid 0, which may use the management socket", DEADLINE_MS));
	fx_close(x);
	/* Connected and negotiated: a warning would have been written before the target
	 * read the frontend's first message. */
	x = fx_start("0:ram=16M", NULL, others, true);
	assert_false(log_has(x, "which may use the management socket", 0));
	fx_close(x);
}

/* A file of size bytes at path (0600, zeros). */
static void make_file(const char *path, off_t size)
{
	int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, size), 0);
	close(fd);
}

static void lun_add_refused(int fd, unsigned id, const char *spec, const char *text,
			    const char *errname)
{
	char params[1024];

	snprintf(params, sizeof(params), "{\"id\":%u,\"spec\":\"%s\"}", id, spec);
	expect_error(fd, req("lun_add", params), -32000, text, errname);
}

static void lun_add_ok(int fd, unsigned id, const char *spec)
{
	char params[1024];

	snprintf(params, sizeof(params), "{\"id\":%u,\"spec\":\"%s\"}", id, spec);
	json_decref(call_ok(fd, "lun_add", params));
}

/* --lun-root DIR: file= and log-writes= paths resolve beneath DIR, by the kernel: relative
 * or absolute under it is taken; absolute elsewhere, "..", a symlink leading out are
 * refused (EXDEV), and no log is made outside.  (On dcf1c4a the option did not exist and
 * any file the target could open could be exported.) */
static void test_lun_root_confines_paths(void **state)
{
	char root[128], path[256], spec[512];
	const char *more[] = {"--lun-root", root, NULL};
	struct fx *x;
	char files[64]; /* a directory for the files only */

	(void)state;
	assert_int_equal(tmpdir_make(files, sizeof(files), NULL, "rpc-files"), 0);
	snprintf(root, sizeof(root), "%s/luns", files);
	assert_int_equal(mkdir(root, 0700), 0);
	snprintf(path, sizeof(path), "%s/a.img", root);
	make_file(path, 1 << 20);
	snprintf(path, sizeof(path), "%s/b.img", root); /* a.img is LUN 1's, and locked */
	make_file(path, 1 << 20);
	snprintf(path, sizeof(path), "%s/outside.img", files);
	make_file(path, 1 << 20);
	snprintf(path, sizeof(path), "%s/escape", root);
	assert_int_equal(symlink("../outside.img", path), 0);
	x = fx_client(more);

	lun_add_ok(x->fd, 1, "file=a.img");
	snprintf(spec, sizeof(spec), "file=%s/b.img,ro", root);
	lun_add_ok(x->fd, 2, spec);
	snprintf(spec, sizeof(spec), "file=%s/outside.img", files);
	lun_add_refused(x->fd, 3, spec, "not beneath the LUN root", "EXDEV");
	lun_add_refused(x->fd, 3, "file=../outside.img", "resolves outside the LUN root", "EXDEV");
	lun_add_refused(x->fd, 3, "file=escape", "resolves outside the LUN root", "EXDEV");
	lun_add_refused(x->fd, 3, "ram=1M,log-writes=../stolen.log", "resolves outside", "EXDEV");
	snprintf(path, sizeof(path), "%s/stolen.log", files);
	assert_int_equal(access(path, F_OK), -1);
	lun_add_ok(x->fd, 3, "ram=1M,log-writes=fresh.log");
	snprintf(path, sizeof(path), "%s/fresh.log", root);
	assert_int_equal(access(path, F_OK), 0);
	fx_close(x);
	tmpdir_remove(files);
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : st.st_size;
}

/* A spec is checked whole before anything is made: a file LUN refused for its size leaves
 * no log behind; a log file that exists, or a symlink planted where the log goes, is
 * refused (EEXIST) and what it names is left as it was.  (On dcf1c4a the refused LUN
 * still created its log, and both the file and the symlink's target were truncated.) */
static void test_spec_checked_before_side_effects(void **state)
{
	struct fx *x = fx_client(NULL);
	int v;
	char odd[128], victim[128], planted[128], log[128], spec[512];

	(void)state;
	snprintf(odd, sizeof(odd), "%s/odd.img", x->t.tg.dir);
	snprintf(victim, sizeof(victim), "%s/victim", x->t.tg.dir);
	snprintf(planted, sizeof(planted), "%s/planted.log", x->t.tg.dir);
	snprintf(log, sizeof(log), "%s/fresh.log", x->t.tg.dir);
	make_file(odd, 1000);
	v = open(victim, O_CREAT | O_WRONLY | O_TRUNC, 0600);
	assert_int_equal(write(v, "keep me", 7), 7);
	close(v);
	assert_int_equal(symlink(victim, planted), 0);

	snprintf(spec, sizeof(spec), "file=%s,log-writes=%s", odd, log);
	lun_add_refused(x->fd, 1, spec, "not a whole number of 512-byte blocks", "EINVAL");
	assert_int_equal(access(log, F_OK), -1);
	snprintf(spec, sizeof(spec), "ram=1M,log-writes=%s", victim);
	lun_add_refused(x->fd, 1, spec, "it exists (a log is never overwritten", "EEXIST");
	snprintf(spec, sizeof(spec), "ram=1M,log-writes=%s", planted);
	lun_add_refused(x->fd, 1, spec, "it exists (a log is never overwritten", "EEXIST");
	assert_int_equal(file_size(victim), 7);
	snprintf(spec, sizeof(spec), "ram=1M,log-writes=%s", log);
	lun_add_ok(x->fd, 1, spec);
	assert_int_equal(file_size(log), 512); /* its super block */
	fx_close(x);
}

/* The test-only options are refused unless the target was started with --testing, each
 * naming the switch; with it, taken.  (On dcf1c4a anyone on the socket could arm a lost
 * write, or a 60 s delay, on a production LUN.) */
static void test_test_options_need_testing(void **state)
{
	static const char *const opts[] = {"delay=1000", "delay-every=2", "drop-write=1",
					   "misdirect-write=1", "stale-read=1"};
	static const char *const testing[] = {"--testing", NULL};
	struct fx *x = fx_client(NULL);
	char spec[128], ids[64];

	(void)state;
	for (unsigned i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		snprintf(spec, sizeof(spec), "ram=1M,%s", opts[i]);
		lun_add_refused(x->fd, 1, spec,
				"is a test-only option (the target must be started with --testing)",
				"EPERM");
	}
	list_ids(x->fd, ids, sizeof(ids));
	assert_string_equal(ids, "0,");
	fx_close(x);
	x = fx_client(testing);
	lun_add_ok(x->fd, 1, "ram=1M,delay=1000,drop-write=1");
	fx_close(x);
}

/* trace_set checks its spec as `trace enable` does: an unknown flag or provider is
 * refused naming it and the known ones, and the settings stay as they were.  (On dcf1c4a
 * verbose:nosuchflag succeeded and turned every flag off.) */
static void test_trace_set_checks_flags(void **state)
{
	struct fx *x = fx_client(NULL);
	static char out[65536];

	(void)state;
	json_decref(call_ok(x->fd, "trace_set", "{\"spec\":\"verbose:target.io\"}"));
	expect_error(x->fd, req("trace_set", "{\"spec\":\"verbose:nosuchflag\"}"), -32602,
		     "unknown flag 'nosuchflag' (known: ", NULL);
	expect_error(x->fd, req("trace_set", "{\"spec\":\"verbose:target.nosuch\"}"), -32602,
		     "provider 'target' has no flag 'nosuch'", NULL);
	assert_int_equal(trace_show(x, out, sizeof(out)), 0);
	if (!strstr(out, "target       verbose  on: io "))
		fail_msg("the refused spec changed the settings:\n%s", out);
	fx_close(x);
}

/* Sizes are signed 64-bit (off_t, JSON): beyond that they are refused with a clear error,
 * not wrapped or clamped.  (On dcf1c4a null=18446744073709551104 was added and listed as
 * 9223372036854775807 bytes.) */
static void test_sizes_beyond_int64(void **state)
{
	struct fx *x = fx_client(NULL);
	char ids[64];

	(void)state;
	lun_add_refused(x->fd, 1, "null=18446744073709551104", "is too large", "EINVAL");
	lun_add_refused(x->fd, 1, "null=9223372036854775808", "is too large", "EINVAL");
	lun_add_refused(x->fd, 1, "null=8388608T", "is too large", "EINVAL");
	expect_error(x->fd, req("lun_resize", "{\"id\":0,\"size\":\"16777216T\"}"), -32602,
		     "more than 9223372036854775807 bytes", NULL);
	list_ids(x->fd, ids, sizeof(ids));
	assert_string_equal(ids, "0,");
	fx_close(x);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_qos_set),
	    cmocka_unit_test(test_controller_methods),
	    cmocka_unit_test(test_lun_lifecycle),
	    cmocka_unit_test(test_stats_match),
	    cmocka_unit_test(test_long_line),
	    cmocka_unit_test(test_stuck_client),
	    cmocka_unit_test(test_socket_path),
	    cmocka_unit_test(test_shutdown),
	    cmocka_unit_test(test_client),
	    cmocka_unit_test(test_idle_clients_are_evicted),
	    cmocka_unit_test(test_partial_line_times_out),
	    cmocka_unit_test(test_unread_replies_drop_the_client),
	    cmocka_unit_test(test_a_flood_waits_its_turn),
	    cmocka_unit_test(test_batch_bounded_before_it_runs),
	    cmocka_unit_test(test_uid_not_allowed_is_refused),
	    cmocka_unit_test(test_rpc_allow_names_who_may),
	    cmocka_unit_test(test_frontend_under_a_manager_uid_is_warned),
	    cmocka_unit_test(test_lun_root_confines_paths),
	    cmocka_unit_test(test_spec_checked_before_side_effects),
	    cmocka_unit_test(test_test_options_need_testing),
	    cmocka_unit_test(test_trace_set_checks_flags),
	    cmocka_unit_test(test_sizes_beyond_int64),
	    cmocka_unit_test(test_fifo_refused),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
