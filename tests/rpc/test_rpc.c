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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "../initiator/harness.h"

#define DEADLINE_MS 10000

struct fx {
	struct tgt t;
	char rpc[128];
	struct vs_ini *ini;
	struct vs_ini_queue *q;
	uint8_t *buf; /* 1 MiB of the initiator's shared memory */
};

/* Connect to the management socket, waiting for it to appear (it comes after the
 * vhost-user socket the harness waits for). */
static int rpc_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	uint64_t end = now_ms() + DEADLINE_MS;
	int fd;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	for (;;) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		assert_true(fd >= 0);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return fd;
		close(fd);
		assert_true(now_ms() < end);
		usleep(5000);
	}
}

static struct fx *fx_open(const char *lun0, const char *lun1)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct vs_ini_opts o;

	assert_non_null(x);
	tgt_init(&x->t);
	snprintf(x->rpc, sizeof(x->rpc), "%s/rpc.sock", x->t.dir);
	x->t.luns[0] = lun0;
	x->t.luns[1] = lun1;
	x->t.args[0] = "--rpc";
	x->t.args[1] = x->rpc;
	assert_int_equal(tgt_start(&x->t), 0);
	close(rpc_connect(x->rpc)); /* it listens */
	o = ini_opts(&x->t, 1);
	assert_int_equal(vs_ini_open(&x->ini, &o), 0);
	x->q = vs_ini_get_queue(x->ini, 0);
	x->buf = vs_ini_alloc(x->ini, 1 << 20, 4096);
	assert_non_null(x->buf);
	return x;
}

static void fx_close(struct fx *x)
{
	if (x->ini)
		vs_ini_close(x->ini);
	tgt_fini(&x->t);
	free(x);
}

/* One line from fd within the deadline (without its newline), or NULL at EOF/reset. */
static char *read_line(int fd)
{
	static char buf[1 << 20];
	static size_t len;
	static int owner = -1;
	uint64_t end = now_ms() + DEADLINE_MS;

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
	expect_error(fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_add\",\"params\":[1]}",
		     -32602, "params must be an object", NULL);
	expect_error(fd,
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_add\",\"params\":{\"spec\":"
		     "\"ram=1M\"}}",
		     -32602, "missing param 'id'", NULL);
	expect_error(
	    fd,
	    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_add\",\"params\":{\"id\":\"1\","
	    "\"spec\":\"ram=1M\"}}",
	    -32602, "param 'id': expected a whole number in 0..255", NULL);
	expect_error(fd,
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_add\",\"params\":{\"id\":256,"
		     "\"spec\":\"ram=1M\"}}",
		     -32602, "param 'id'", NULL);
	expect_error(fd,
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_add\",\"params\":{\"id\":1,"
		     "\"spec\":7}}",
		     -32602, "param 'spec'", NULL);
	expect_error(
	    fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_remove\",\"params\":{\"lun\":1}}",
	    -32602, "lun_remove takes no param 'lun'", NULL);
	expect_error(fd,
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_resize\",\"params\":{\"id\":0,"
		     "\"size\":\"12Q\"}}",
		     -32602, "param 'size'", NULL);
	expect_error(fd,
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"trace_set\",\"params\":{\"spec\":"
		     "\"loud:everything\"}}",
		     -32602, "param 'spec'", NULL);
	/* The target's own refusals: a duplicate LUN, a missing one, a bad backend. */
	expect_error(fd,
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_add\",\"params\":{\"id\":0,"
		     "\"spec\":\"ram=1M\"}}",
		     -32000, "0", "EEXIST");
	expect_error(
	    fd, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_remove\",\"params\":{\"id\":9}}",
	    -32000, "9", "ENOENT");
	expect_error(fd,
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_resize\",\"params\":{\"id\":9,"
		     "\"size\":4096}}",
		     -32000, "9", "ENOENT");
	expect_error(fd,
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_add\",\"params\":{\"id\":2,"
		     "\"spec\":\"file=/nonexistent/dir/img\"}}",
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
	expect_error(fd,
		     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"lun_resize\",\"params\":{\"id\":1,"
		     "\"size\":1000}}",
		     -32000, "", "EINVAL");

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
	snprintf(fifo, sizeof(fifo), "%s/fifo", x->t.dir);
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

/* A known workload (LUN 0: 5 reads of 4 KiB, 3 writes of 8 KiB; LUN 3: 2 reads of 512 B,
 * 7 writes of 64 KiB) moves each LUN's counters, the queue's and the target's by exactly
 * that much. */
static void test_stats_match(void **state)
{
	struct fx *x = fx_open("0:ram=16M", "3:ram=16M");
	int fd = rpc_connect(x->rpc);
	struct vs_ini_lun info;
	int i0 = ini_index(x->ini, 0, &info), i3 = ini_index(x->ini, 3, &info);
	json_t *before, *after, *a, *b, *qa, *qb;

	(void)state;
	assert_true(i0 >= 0 && i3 >= 0);
	before = call_ok(fd, "stats", "{}");
	for (int k = 0; k < 3; k++)
		assert_int_equal(io_sync(x->q, VS_INI_WRITE, (unsigned)i0, (uint64_t)k * 16, 16,
					 x->buf, 8192, 1),
				 0);
	for (int k = 0; k < 5; k++)
		assert_int_equal(
		    io_sync(x->q, VS_INI_READ, (unsigned)i0, (uint64_t)k * 8, 8, x->buf, 4096, 1),
		    0);
	for (int k = 0; k < 7; k++)
		assert_int_equal(io_sync(x->q, VS_INI_WRITE, (unsigned)i3, (uint64_t)k * 128, 128,
					 x->buf, 65536, 2),
				 0);
	for (int k = 0; k < 2; k++)
		assert_int_equal(
		    io_sync(x->q, VS_INI_READ, (unsigned)i3, (uint64_t)k, 1, x->buf, 512, 1), 0);
	after = call_ok(fd, "stats", "{}");

	a = stats_lun(after, 0);
	b = stats_lun(before, 0);
	assert_int_equal(jget(a, "reads") - jget(b, "reads"), 5);
	assert_int_equal(jget(a, "writes") - jget(b, "writes"), 3);
	assert_int_equal(jget(a, "read_bytes") - jget(b, "read_bytes"), 5 * 4096);
	assert_int_equal(jget(a, "write_bytes") - jget(b, "write_bytes"), 3 * 8192);
	assert_int_equal(jget(a, "in_flight"), 0);
	assert_int_equal(jget(a, "failures"), 0);
	assert_true(jget(json_object_get(a, "read_latency_ns"), "p50") > 0);
	assert_true(jget(json_object_get(a, "write_latency_ns"), "p99") >=
		    jget(json_object_get(a, "write_latency_ns"), "p50"));
	a = stats_lun(after, 3);
	b = stats_lun(before, 3);
	assert_int_equal(jget(a, "reads") - jget(b, "reads"), 2);
	assert_int_equal(jget(a, "writes") - jget(b, "writes"), 7);
	assert_int_equal(jget(a, "read_bytes") - jget(b, "read_bytes"), 2 * 512);
	assert_int_equal(jget(a, "write_bytes") - jget(b, "write_bytes"), 7 * 65536);
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

/* Run `vioscope target` with these extra arguments and wait (deadline) for it to exit:
 * its exit status, its stderr in err. */
static int run_target(const char *dir, const char *rpc, char *err, size_t errlen)
{
	char sock[128], log[128];
	pid_t p;
	int status = -1;
	uint64_t end = now_ms() + DEADLINE_MS;
	FILE *f;

	snprintf(sock, sizeof(sock), "%s/t2.sock", dir);
	snprintf(log, sizeof(log), "%s/t2.log", dir);
	p = fork();
	assert_true(p >= 0);
	if (p == 0) {
		int fd = open(log, O_CREAT | O_WRONLY | O_TRUNC, 0600);

		dup2(fd, 2);
		execl(VIOSCOPE_BIN, VIOSCOPE_BIN, "target", "--socket", sock, "--lun", "0:ram=1M",
		      "--rpc", rpc, (char *)NULL);
		_exit(127);
	}
	while (waitpid(p, &status, WNOHANG) == 0) {
		if (now_ms() > end) {
			kill(p, SIGKILL);
			waitpid(p, NULL, 0);
			fail_msg("the target did not exit");
		}
		usleep(10000);
	}
	f = fopen(log, "r");
	assert_non_null(f);
	err[fread(err, 1, errlen - 1, f)] = 0;
	fclose(f);
	unlink(log);
	assert_int_equal(access(sock, F_OK), -1); /* its vhost-user socket went too */
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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

	snprintf(path, sizeof(path), "%s/not-a-socket", x->t.dir);
	fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "keep me", 7), 7);
	close(fd);
	assert_int_equal(run_target(x->t.dir, path, err, sizeof(err)), 1);
	assert_non_null(strstr(err, "exists and is not a socket"));
	fd = open(path, O_RDONLY);
	assert_int_equal(read(fd, content, sizeof(content)), 7);
	close(fd);
	assert_string_equal(content, "keep me");
	unlink(path);

	assert_int_equal(run_target(x->t.dir, x->rpc, err, sizeof(err)), 1);
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
	while (waitpid(x->t.pid, &status, WNOHANG) == 0) {
		assert_true(now_ms() < end);
		usleep(10000);
	}
	x->t.pid = -1;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(access(x->rpc, F_OK), -1);
	assert_int_equal(access(x->t.sock, F_OK), -1);
	close(fd);
	fx_close(x);
}

/* ---- the client ------------------------------------------------------------------------ */

/* `vioscope rpc ARGS` (socket of x): exit status, stdout+stderr in out. */
static int cli(struct fx *x, char *out, size_t outlen, const char *args)
{
	char cmd[1024];
	size_t n;
	FILE *f;
	int st;

	snprintf(cmd, sizeof(cmd), "%s rpc --socket %s %s 2>&1", VIOSCOPE_BIN, x->rpc, args);
	f = popen(cmd, "r");
	assert_non_null(f);
	n = fread(out, 1, outlen - 1, f);
	out[n] = 0;
	st = pclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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
	{
		char cmd[256];
		FILE *f;
		size_t n;

		snprintf(cmd, sizeof(cmd), "%s trace show %d 2>&1", VIOSCOPE_BIN, (int)x->t.pid);
		f = popen(cmd, "r");
		assert_non_null(f);
		n = fread(out, 1, sizeof(out) - 1, f);
		out[n] = 0;
		assert_int_equal(pclose(f), 0);
		if (!strstr(out, "target       verbose  on: io ") ||
		    !strstr(out, "scsi         verbose  on: - "))
			fail_msg("trace_set had no effect:\n%s", out);
	}
	assert_int_equal(cli(x, out, sizeof(out), "trace_set spec=loud"), 1);
	assert_int_equal(cli(x, out, sizeof(out), "lun_add 1"), 2);
	assert_int_equal(cli(x, out, sizeof(out), "lun_list --watch 1"), 2);
	fx_close(x);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_errors),	 cmocka_unit_test(test_lun_lifecycle),
	    cmocka_unit_test(test_stats_match),	 cmocka_unit_test(test_long_line),
	    cmocka_unit_test(test_stuck_client), cmocka_unit_test(test_socket_path),
	    cmocka_unit_test(test_shutdown),	 cmocka_unit_test(test_client),
	    cmocka_unit_test(test_fifo_refused),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
