/* SPDX-License-Identifier: MIT */
/*
 * `vioscope target` and `vioscope rpc` as processes, where a test needs more than a shell:
 * systemd's readiness datagram, a frontend whose connection the target must log, and
 * requests that make the latency of one interval differ from the latency since the LUN
 * was added.  Each test is one ctest test (ops_cli.<name>); the binary under test is
 * argv[1].
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "frontend.h" /* tests/common */

#define DEADLINE_MS 20000 /* every wait's bound: far beyond what a loaded machine needs */

static const char *vioscope; /* the binary under test */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

struct scratch {
	char dir[64];
	char path[8][128];
	unsigned n;
};

static const char *scratch_path(struct scratch *s, const char *name)
{
	char path[sizeof(s->path[0])];

	assert_true(s->n < 8);
	snprintf(path, sizeof(path), "%s/%s", s->dir, name);
	memcpy(s->path[s->n], path, sizeof(path));
	return s->path[s->n++];
}

static void scratch_make(struct scratch *s)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/vs-ops-cli-XXXXXX");
	assert_non_null(mkdtemp(s->dir));
}

static void scratch_remove(struct scratch *s)
{
	for (unsigned i = 0; i < s->n; i++)
		unlink(s->path[i]);
	rmdir(s->dir);
}

/* argv (NULL-terminated) started with stdout and stderr into files (NULL: /dev/null) and
 * NAME=VALUE from env (or NULL) added to the environment. */
static pid_t spawn(char *const argv[], const char *out, const char *err, const char *env)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int o = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int e = open(err ? err : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);

		if (o < 0 || e < 0 || dup2(o, 1) < 0 || dup2(e, 2) < 0)
			_exit(127);
		if (env)
			putenv((char *)env);
		execv(vioscope, argv);
		_exit(127);
	}
	return pid;
}

/* Its exit status within DEADLINE_MS, or -1 after killing it (it did not end). */
static int wait_exit(pid_t pid)
{
	uint64_t end = now_ms() + DEADLINE_MS;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		poll(NULL, 0, 10);
	}
}

/* Whether a connection to the Unix socket at path is accepted now. */
static bool accepts(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* Wait (DEADLINE_MS) until the socket accepts; false if it never did. */
static bool wait_accepts(const char *path)
{
	uint64_t end = now_ms() + DEADLINE_MS;

	while (!accepts(path))
		if (now_ms() > end || poll(NULL, 0, 10) < 0)
			return false;
	return true;
}

/* The file's text (malloc'd; "" when missing). */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	char *text = calloc(1, 1 << 20);
	size_t n = 0;

	assert_non_null(text);
	if (f) {
		n = fread(text, 1, (1 << 20) - 1, f);
		fclose(f);
	}
	text[n] = 0;
	return text;
}

/* Wait (DEADLINE_MS) until the file holds want; false if it never did. */
static bool wait_text(const char *path, const char *want)
{
	uint64_t end = now_ms() + DEADLINE_MS;

	for (;;) {
		char *text = slurp(path);
		bool found = strstr(text, want) != NULL;

		free(text);
		if (found)
			return true;
		if (now_ms() > end)
			return false;
		poll(NULL, 0, 10);
	}
}

/* The test frontend on a target's socket: guest memory, 2 request queues (the target is
 * started with --queues 2), direct descriptors. */
static const struct fe_opts ops_fe_opts = {.nq = 4, .direct = true};
static void ops_fe_open(struct fe *fe, struct gmem *g, const char *sock)
{
	fe_clear(fe);
	assert_int_equal(gmem_init(g), 0);
	assert_int_equal(fe_open(fe, sock, g, &ops_fe_opts), 0);
}
static void ops_fe_close(struct fe *fe, struct gmem *g)
{
	fe_close(fe);
	gmem_fini(g);
}

/* ---- readiness (sd_notify) ---------------------------------------------------------------- */

/* A datagram socket bound where NOTIFY_SOCKET will say (name: a path, or "@..."). */
static int notify_socket(const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(name);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0 && len < sizeof(sa.sun_path));
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = 0;
	assert_int_equal(bind(fd, (struct sockaddr *)&sa,
			      (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)),
			 0);
	return fd;
}

/* The next datagram within DEADLINE_MS into buf ("" if none came). */
static void notify_recv(int fd, char *buf, size_t len)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	ssize_t n = 0;

	buf[0] = 0;
	if (poll(&p, 1, DEADLINE_MS) == 1)
		n = recv(fd, buf, len - 1, 0);
	buf[n > 0 ? n : 0] = 0;
}

/* Started with NOTIFY_SOCKET=name: READY=1 comes when both sockets already accept, and
 * STOPPING=1 on SIGTERM, before a clean exit. */
static void ready_when_listening(const char *name)
{
	struct scratch s;
	char env[160], msg[1024];
	int fd = notify_socket(name);
	pid_t pid;

	scratch_make(&s);
	const char *vhost = scratch_path(&s, "vhost.sock"), *rpc = scratch_path(&s, "rpc.sock");
	char *argv[] = {"vioscope",  "target", "--socket", (char *)vhost, "--rpc",
			(char *)rpc, "--lun",  "0:ram=1M", NULL};

	snprintf(env, sizeof(env), "NOTIFY_SOCKET=%s", name);
	pid = spawn(argv, NULL, NULL, env);
	notify_recv(fd, msg, sizeof(msg));
	if (!strstr(msg, "READY=1")) {
		kill(pid, SIGKILL);
		wait_exit(pid);
		fail_msg("no READY=1 from the target within %d ms (got '%s')", DEADLINE_MS, msg);
	}
	/* Ready means serving: both sockets accept at once. */
	assert_true(accepts(vhost));
	assert_true(accepts(rpc));
	assert_non_null(strstr(msg, "STATUS=listening on "));
	assert_int_equal(kill(pid, SIGTERM), 0);
	notify_recv(fd, msg, sizeof(msg));
	if (!strstr(msg, "STOPPING=1"))
		fail_msg("no STOPPING=1 after SIGTERM (got '%s')", msg);
	assert_int_equal(wait_exit(pid), 0);
	close(fd);
	if (name[0] != '@')
		unlink(name);
	scratch_remove(&s);
}

static void test_notify_ready_path(void **state)
{
	char name[64];

	(void)state;
	snprintf(name, sizeof(name), "/tmp/vs-ops-notify-%d", (int)getpid());
	ready_when_listening(name);
}

static void test_notify_ready_abstract(void **state)
{
	char name[64];

	(void)state;
	snprintf(name, sizeof(name), "@vs-ops-notify-%d", (int)getpid());
	ready_when_listening(name);
}

/* ---- the frontend's connection in the log --------------------------------------------------- */

/* A frontend connects and disconnects: the target says both on stderr at its default
 * level, naming the frontend's pid (ours). */
static void test_frontend_connect_logged(void **state)
{
	struct scratch s;
	char want[128];
	struct fe fe;
	struct gmem mem;
	pid_t pid;

	(void)state;
	scratch_make(&s);
	const char *vhost = scratch_path(&s, "vhost.sock"), *err = scratch_path(&s, "stderr");
	char *argv[] = {"vioscope", "target",	"--socket", (char *)vhost, "--lun",
			"0:ram=1M", "--queues", "2",	    NULL}; /* the test frontend's rings */

	pid = spawn(argv, NULL, err, NULL);
	assert_true(wait_accepts(vhost));
	ops_fe_open(&fe, &mem, vhost);
	snprintf(want, sizeof(want), "connection 1: a frontend connected (pid %d, uid %u)",
		 (int)getpid(), (unsigned)geteuid());
	if (!wait_text(err, want)) {
		char *text = slurp(err);

		kill(pid, SIGKILL);
		wait_exit(pid);
		fail_msg("no '%s' in the target's stderr:\n%s", want, text);
	}
	ops_fe_close(&fe, &mem);
	snprintf(want, sizeof(want), "connection 1: the frontend (pid %d) disconnected",
		 (int)getpid());
	if (!wait_text(err, want)) {
		char *text = slurp(err);

		kill(pid, SIGKILL);
		wait_exit(pid);
		fail_msg("no '%s' in the target's stderr:\n%s", want, text);
	}
	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(wait_exit(pid), 0);
	scratch_remove(&s);
}

/* ---- rpc stats --watch: per interval ----------------------------------------------------------
 */

/* `vioscope rpc ARGS...` to completion: its exit status, its stdout in *out (malloc'd). */
static int rpc_run(struct scratch *s, const char *out, char **text, ...)
{
	char *argv[16] = {"vioscope", "rpc"};
	unsigned n = 2;
	va_list ap;
	int rc;

	(void)s;
	va_start(ap, text);
	while (n < 15 && (argv[n] = va_arg(ap, char *)))
		n++;
	va_end(ap);
	argv[n] = NULL;
	rc = wait_exit(spawn(argv, out, NULL, NULL));
	*text = slurp(out);
	return rc;
}

static json_t *json_at(json_t *root, const char *a, size_t i, const char *b, const char *c)
{
	json_t *v = json_object_get(json_array_get(json_object_get(root, a), i), b);

	return c ? json_object_get(v, c) : v;
}

/* Writes that each took 20 ms, then an interval with none: `rpc stats` (since the LUN was
 * added) still says 20 ms, the interval --watch reports says nothing completed in it (0),
 * and each report is a JSON line with the version, a timestamp and the command line. */
static void test_watch_reports_the_interval(void **state)
{
	struct scratch s;
	uint8_t data[512] = {1};
	struct fe_cmd c = {.out = data, .out_len = sizeof(data)};
	json_error_t jerr;
	json_t *since, *line;
	char *text, start[32];
	struct fe fe;
	struct gmem mem;
	time_t t0 = time(NULL);
	pid_t pid;

	(void)state;
	scratch_make(&s);
	const char *vhost = scratch_path(&s, "vhost.sock"), *rpc = scratch_path(&s, "rpc.sock"),
		   *out = scratch_path(&s, "out");
	char *argv[] = {"vioscope",  "target",	  "--socket", (char *)vhost,	      "--rpc",
			(char *)rpc, "--testing", "--lun",    "0:ram=1M,delay=20000", "--queues",
			"2",	     NULL};

	pid = spawn(argv, NULL, NULL, NULL);
	assert_true(wait_accepts(vhost));
	assert_true(wait_accepts(rpc));
	ops_fe_open(&fe, &mem, vhost);
	for (uint32_t lba = 0; lba < 3; lba++) {
		cdb10(c.cdb, 0x2a, 0, lba, 1); /* WRITE(10) */
		assert_int_equal(fe_scsi(&fe, VS_VIRTIO_SCSI_VQ_REQ0, &c), 0);
		assert_int_equal(c.resp.status, 0);
	}

	/* Since the LUN was added: the delayed writes, each at least 20 ms. */
	assert_int_equal(rpc_run(&s, out, &text, "--socket", rpc, "stats", NULL), 0);
	since = json_loads(text, 0, &jerr);
	if (!since)
		fail_msg("rpc stats printed no JSON (%s):\n%s", jerr.text, text);
	free(text);
	assert_true(json_integer_value(json_at(since, "luns", 0, "write_latency_ns", "p50")) >=
		    20000000);
	json_decref(since);

	/* An interval with no request: nothing completed in it. */
	text = NULL;
	int rc = rpc_run(&s, out, &text, "--socket", rpc, "stats", "--watch", "0.1", "--count", "1",
			 "--json", NULL);
	if (rc != 0)
		fail_msg("rpc stats --watch --json: exit %d:\n%s", rc, text);
	assert_int_equal(strchr(text, '\n') - text + 1, (long)strlen(text)); /* one line */
	line = json_loads(text, 0, &jerr);
	if (!line)
		fail_msg("not a JSON line (%s):\n%s", jerr.text, text);
	free(text);
	assert_true(json_is_true(json_at(line, "luns", 0, "latency_over_interval", NULL)));
	assert_true(json_real_value(json_at(line, "luns", 0, "write_latency_us", "p50")) == 0);
	assert_true(json_real_value(json_at(line, "luns", 0, "writes_per_s", NULL)) == 0);
	assert_true(json_real_value(json_object_get(line, "interval_s")) > 0);
	/* What every --json carries. */
	assert_non_null(
	    json_string_value(json_object_get(json_object_get(line, "vioscope"), "version")));
	assert_non_null(
	    json_string_value(json_object_get(json_object_get(line, "vioscope"), "commit")));
	assert_string_equal(json_string_value(json_array_get(json_object_get(line, "argv"), 2)),
			    "--socket");
	strftime(start, sizeof(start), "%Y-%m-%dT%H:%M:%S", gmtime(&t0));
	const char *stamp = json_string_value(json_object_get(line, "time"));
	assert_non_null(stamp);
	assert_int_equal(strlen(stamp), strlen("2025-01-02T10:11:12.345Z"));
	assert_true(strncmp(stamp, start, strlen(start)) >= 0); /* not before the test began */
	json_decref(line);

	/* The table: a timestamp first, then the same interval's zeros. */
	assert_int_equal(rpc_run(&s, out, &text, "--socket", rpc, "stats", "--watch", "0.1",
				 "--count", "1", NULL),
			 0);
	if (strncmp(text, start, 4) || !strstr(text, "Z  over ") ||
	    !strstr(text, "0            0         0      0.00      0.00"))
		fail_msg("rpc stats --watch printed:\n%s", text);
	free(text);

	ops_fe_close(&fe, &mem);
	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(wait_exit(pid), 0);
	scratch_remove(&s);
}

/* ---- the configuration file: restart and reload ------------------------------------------- */

/* path holds text (0600). */
static void put_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* A configuration with one RAM LUN 0 and a management socket. */
static void put_config(const char *path, const char *vhost, const char *rpc)
{
	char text[1024];

	snprintf(text, sizeof(text),
		 "{\"rpc\": \"%s\",\n \"controllers\": [{\"name\": \"t\", \"socket\": \"%s\", "
		 "\"queues\": 2,\n  \"luns\": [{\"id\": 0, \"spec\": \"ram=1M\"}]}]}\n",
		 rpc, vhost);
	put_file(path, text);
}

/* The byte at offset i of the test image: every block differs. */
static uint8_t image_byte(size_t i)
{
	return (uint8_t)(i / 512 * 7 + i % 251);
}

/* A target started from a config; a file LUN added over the management socket, its QoS
 * limit and the trace spec changed, save_config; stopped and started from the saved file:
 * lun_list has the LUN with its spec and limit, the trace spec is in the file, and the
 * test frontend reads the image's bytes from the LUN. */
static void test_config_restart_restores(void **state)
{
	struct scratch s;
	uint8_t image[8192], block[512];
	char spec[200], *text;
	json_error_t jerr;
	json_t *root, *list;
	struct fe fe;
	struct gmem mem;
	pid_t pid;

	(void)state;
	scratch_make(&s);
	const char *vhost = scratch_path(&s, "vhost.sock"), *rpc = scratch_path(&s, "rpc.sock"),
		   *out = scratch_path(&s, "out"), *conf = scratch_path(&s, "target.json"),
		   *disk = scratch_path(&s, "disk.img");
	char *argv[] = {"vioscope", "target", "--config", (char *)conf, NULL};

	for (size_t i = 0; i < sizeof(image); i++)
		image[i] = image_byte(i);
	put_file(disk, "");
	{
		int fd = open(disk, O_WRONLY | O_CLOEXEC);

		assert_int_equal(write(fd, image, sizeof(image)), (ssize_t)sizeof(image));
		close(fd);
	}
	put_config(conf, vhost, rpc);
	pid = spawn(argv, NULL, NULL, NULL);
	assert_true(wait_accepts(vhost));
	assert_true(wait_accepts(rpc));
	snprintf(spec, sizeof(spec), "spec=file=%s", disk);
	assert_int_equal(rpc_run(&s, out, &text, "--socket", rpc, "lun_add", "id=1", spec, NULL),
			 0);
	free(text);
	assert_int_equal(
	    rpc_run(&s, out, &text, "--socket", rpc, "trace_set", "spec=verbose:vhost", NULL), 0);
	free(text);
	assert_int_equal(
	    rpc_run(&s, out, &text, "--socket", rpc, "qos_set", "id=1", "write_iops=700", NULL), 0);
	free(text);
	assert_int_equal(rpc_run(&s, out, &text, "--socket", rpc, "save_config", NULL), 0);
	free(text);
	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(wait_exit(pid), 0);
	text = slurp(conf);
	if (!strstr(text, "\"trace\": \"verbose:vhost\"") || !strstr(text, spec + 5))
		fail_msg("the saved configuration lacks the LUN or the trace spec:\n%s", text);
	free(text);

	pid = spawn(argv, NULL, NULL, NULL);
	assert_true(wait_accepts(vhost));
	assert_true(wait_accepts(rpc));
	assert_int_equal(rpc_run(&s, out, &text, "--socket", rpc, "--json", "lun_list", NULL), 0);
	root = json_loads(text, 0, &jerr);
	list = json_object_get(root, "result");
	if (json_array_size(list) != 2)
		fail_msg("lun_list after the restart:\n%s", text);
	assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 1), "id")), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(list, 1), "spec")),
			    spec + 5);
	assert_int_equal(json_integer_value(json_object_get(
			     json_object_get(json_array_get(list, 1), "qos"), "write_iops")),
			 700);
	json_decref(root);
	free(text);
	ops_fe_open(&fe, &mem, vhost);
	for (uint32_t lba = 0; lba < sizeof(image) / 512; lba++) {
		struct fe_cmd c = {.lun = 1, .in = block, .in_len = sizeof(block)};

		cdb10(c.cdb, 0x28, 0, lba, 1); /* READ(10) */
		assert_int_equal(fe_scsi(&fe, VS_VIRTIO_SCSI_VQ_REQ0, &c), 0);
		assert_int_equal(c.resp.status, 0);
		assert_memory_equal(block, image + lba * 512, 512);
	}
	ops_fe_close(&fe, &mem);
	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(wait_exit(pid), 0);
	scratch_remove(&s);
}

/* Under systemd a SIGHUP reload is announced: RELOADING=1 (with MONOTONIC_USEC), then
 * READY=1 once the file was applied; the target still serves after it. */
static void test_notify_reload(void **state)
{
	struct scratch s;
	char env[160], msg[1024], name[64];
	int fd;
	pid_t pid;

	(void)state;
	snprintf(name, sizeof(name), "/tmp/vs-ops-notify-reload-%d", (int)getpid());
	fd = notify_socket(name);
	scratch_make(&s);
	const char *vhost = scratch_path(&s, "vhost.sock"), *rpc = scratch_path(&s, "rpc.sock"),
		   *conf = scratch_path(&s, "target.json");
	char *argv[] = {"vioscope", "target", "--config", (char *)conf, NULL};

	put_config(conf, vhost, rpc);
	snprintf(env, sizeof(env), "NOTIFY_SOCKET=%s", name);
	pid = spawn(argv, NULL, NULL, env);
	notify_recv(fd, msg, sizeof(msg));
	if (!strstr(msg, "READY=1")) {
		kill(pid, SIGKILL);
		wait_exit(pid);
		fail_msg("no READY=1 from the target within %d ms (got '%s')", DEADLINE_MS, msg);
	}
	assert_int_equal(kill(pid, SIGHUP), 0);
	notify_recv(fd, msg, sizeof(msg));
	if (!strstr(msg, "RELOADING=1") || !strstr(msg, "MONOTONIC_USEC="))
		fail_msg("no RELOADING=1 after SIGHUP (got '%s')", msg);
	notify_recv(fd, msg, sizeof(msg));
	if (!strstr(msg, "READY=1"))
		fail_msg("no READY=1 after the reload (got '%s')", msg);
	assert_true(accepts(vhost));
	assert_int_equal(kill(pid, SIGTERM), 0);
	notify_recv(fd, msg, sizeof(msg));
	if (!strstr(msg, "STOPPING=1"))
		fail_msg("no STOPPING=1 after SIGTERM (got '%s')", msg);
	assert_int_equal(wait_exit(pid), 0);
	close(fd);
	unlink(name);
	scratch_remove(&s);
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		const struct CMUnitTest test;
	} tests[] = {
	    {"notify_ready_path", cmocka_unit_test(test_notify_ready_path)},
	    {"notify_ready_abstract", cmocka_unit_test(test_notify_ready_abstract)},
	    {"frontend_connect_logged", cmocka_unit_test(test_frontend_connect_logged)},
	    {"watch_reports_the_interval", cmocka_unit_test(test_watch_reports_the_interval)},
	    {"config_restart_restores", cmocka_unit_test(test_config_restart_restores)},
	    {"notify_reload", cmocka_unit_test(test_notify_reload)},
	};

	if (argc != 3) {
		fprintf(stderr, "usage: %s PATH-TO-VIOSCOPE TEST\n", argv[0]);
		return 2;
	}
	vioscope = argv[1];
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		if (!strcmp(tests[i].name, argv[2]))
			return _cmocka_run_group_tests(tests[i].name, &tests[i].test, 1, NULL,
						       NULL);
	fprintf(stderr, "no test '%s'\n", argv[2]);
	return 2;
}
