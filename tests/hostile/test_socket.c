/* SPDX-License-Identifier: MIT */
/*
 * The listening socket (issue 8, defect 8): its path appears only once it accepts
 * connections, with mode 0600 from that first moment; a symlink planted where it goes is
 * not followed; a live socket is never replaced, a stale one is, and one that comes alive
 * while the target probes it is kept.
 *
 * The races are made deterministic by running the target's start under ptrace: its main
 * thread stops at every system call, and the test looks (or plants something) exactly
 * between two of them.  The target is detached before anything else happens.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostile.h"
#include "tmpdir.h"

struct ctx {
	char dir[64], sock[96], log[96], victim[96];
	pid_t pid;
};

static int setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return -1;
	if (tmpdir_make(c->dir, sizeof(c->dir), NULL, "sock"))
		return -1;
	snprintf(c->sock, sizeof(c->sock), "%s/sock", c->dir);
	snprintf(c->log, sizeof(c->log), "%s/stderr", c->dir);
	snprintf(c->victim, sizeof(c->victim), "%s/victim", c->dir);
	c->pid = -1;
	*state = c;
	return 0;
}

static int teardown(void **state)
{
	struct ctx *c = *state;

	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
	}
	if (tmpdir_remove(c->dir))
		fprintf(stderr, "cannot remove %s\n", c->dir);
	free(c);
	return 0;
}

static bool log_has(struct ctx *c, const char *needle)
{
	char buf[8192];
	int fd = open(c->log, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	buf[n > 0 ? n : 0] = 0;
	if (!strstr(buf, needle))
		fprintf(stderr, "target stderr:\n%s\n", buf);
	return strstr(buf, needle) != NULL;
}

static void fill(struct sockaddr_un *sa, const char *path)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	strcpy(sa->sun_path, path);
}

/* A non-blocking connect: 0 or -errno. */
static int try_connect(const char *path)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), rc;

	fill(&sa, path);
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
	close(fd);
	return rc;
}

/* A socket of ours at path: listening, or stale (bound and closed). */
static int our_socket(const char *path, bool listening)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	fill(&sa, path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (!listening) {
		close(fd);
		return -1;
	}
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

/* Our listener still answers at path: a connection made there arrives on lfd. */
static void assert_still_ours(const char *path, int lfd)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), afd;

	fill(&sa, path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	assert_true(afd >= 0);
	close(afd);
	close(fd);
}

/* ---- the target under ptrace ------------------------------------------------------------- */
/* Called at every system-call stop of the target's main thread (entry: ret unused); true
 * to detach and let it run. */
typedef bool (*visit_fn)(struct ctx *c, bool entry, long nr, long ret, void *arg);

/* Start `vioscope target --socket SOCK --lun 0:ram=1M` traced; returns once visit() asked
 * to detach (true) or the target exited (false). */
static bool run_traced(struct ctx *c, visit_fn visit, void *arg)
{
	char *argv[] = {(char *)vioscope, "target", "--socket", c->sock, "--lun", "0:ram=1M", NULL};
	int st, sig = 0;

	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		int log = open(c->log, O_CREAT | O_WRONLY | O_APPEND, 0600);
		dup2(log, 2);
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		execv(vioscope, argv);
		_exit(127);
	}
	assert_int_equal(waitpid(c->pid, &st, 0), c->pid); /* the exec's SIGTRAP */
	assert_true(WIFSTOPPED(st));
	assert_int_equal(ptrace(PTRACE_SETOPTIONS, c->pid, NULL,
				(void *)(long)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL)),
			 0);
	for (;;) {
		struct __ptrace_syscall_info si;

		assert_int_equal(ptrace(PTRACE_SYSCALL, c->pid, NULL, (void *)(long)sig), 0);
		sig = 0;
		assert_int_equal(waitpid(c->pid, &st, __WALL), c->pid);
		if (WIFEXITED(st) || WIFSIGNALED(st)) {
			c->pid = -1;
			return false;
		}
		if (WSTOPSIG(st) != (SIGTRAP | 0x80)) {
			sig = WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st); /* pass signals on */
			continue;
		}
		if (ptrace(PTRACE_GET_SYSCALL_INFO, c->pid, (void *)sizeof(si), &si) <= 0)
			continue;
		if (si.op == PTRACE_SYSCALL_INFO_ENTRY && visit(c, true, (long)si.entry.nr, 0, arg))
			break;
		if (si.op == PTRACE_SYSCALL_INFO_EXIT &&
		    visit(c, false, -1, (long)si.exit.rval, arg))
			break;
	}
	assert_int_equal(ptrace(PTRACE_DETACH, c->pid, NULL, NULL), 0);
	return true;
}

/* The exit status of the target, waiting at most FE_WAIT_MS. */
static int wait_exit(struct ctx *c)
{
	uint64_t deadline = now_ms() + FE_WAIT_MS;
	int st;

	while (waitpid(c->pid, &st, WNOHANG) == 0) {
		if (now_ms() > deadline) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &st, 0);
			c->pid = -1;
			return -1;
		}
		usleep(5000);
	}
	c->pid = -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void stop_target(struct ctx *c)
{
	kill(c->pid, SIGTERM);
	assert_int_equal(wait_exit(c), 0);
}

/* ---- the path appears only when connectable, 0600 from the start ------------------------- */
struct first_sight {
	bool seen;
	int connect_rc;
	mode_t mode;
};

static bool look(struct ctx *c, bool entry, long nr, long ret, void *arg)
{
	struct first_sight *fs = arg;
	struct stat st;

	(void)entry;
	(void)nr;
	(void)ret;
	if (lstat(c->sock, &st) < 0)
		return false;
	fs->seen = true;
	fs->mode = st.st_mode;
	fs->connect_rc = try_connect(c->sock);
	return true;
}

/* Between any two system calls of the target's start-up, the moment its socket path
 * exists, it is a socket with mode 0600 that accepts a connection. */
static void the_path_appears_only_when_connectable(void **state)
{
	struct ctx *c = *state;
	struct first_sight fs = {0};

	assert_true(run_traced(c, look, &fs));
	assert_true(fs.seen);
	assert_true(S_ISSOCK(fs.mode));
	assert_int_equal(fs.mode & 0777, 0600);
	assert_int_equal(fs.connect_rc, 0);
	stop_target(c);
}

/* ---- a symlink planted where the socket goes ---------------------------------------------- */
struct plant {
	bool bound; /* bind() returned: plant at the next stop */
	bool planted;
};

static bool plant_after_bind(struct ctx *c, bool entry, long nr, long ret, void *arg)
{
	struct plant *p = arg;

	(void)ret;
	if (entry && nr == SYS_bind) {
		p->bound = true;
		return false;
	}
	if (!entry || !p->bound)
		return false;
	/* Where the socket goes, now a symlink to a file of someone else's. */
	unlink(c->sock);
	assert_int_equal(symlink(c->victim, c->sock), 0);
	p->planted = true;
	return true;
}

/* Right after the target bound its socket, another user replaces what is at the path with
 * a symlink to their file: the target must not change that file (a chmod by path would make
 * it 0600), and must not pretend to listen there. */
static void a_symlink_planted_where_the_socket_goes_is_not_followed(void **state)
{
	struct ctx *c = *state;
	struct plant p = {0};
	struct stat st;
	int fd, status;

	fd = open(c->victim, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(fchmod(fd, 0644), 0);
	close(fd);
	assert_true(run_traced(c, plant_after_bind, &p));
	assert_true(p.planted);
	status = wait_exit(c);
	assert_int_equal(stat(c->victim, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0644);
	assert_int_equal(lstat(c->sock, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(status, 3); /* could not run (enum vs_exit) */
	assert_true(log_has(c, "exists and is not a socket"));
}

/* ---- live and stale sockets ---------------------------------------------------------------- */
static int run_plain(struct ctx *c)
{
	char *argv[] = {(char *)vioscope, "target", "--socket", c->sock, "--lun", "0:ram=1M", NULL};

	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		int log = open(c->log, O_CREAT | O_WRONLY | O_APPEND, 0600);
		dup2(log, 2);
		execv(vioscope, argv);
		_exit(127);
	}
	return 0;
}

/* Another process listens at the path: the target refuses to start, and that socket
 * stays where it is. */
static void a_live_socket_is_not_replaced(void **state)
{
	struct ctx *c = *state;
	int lfd = our_socket(c->sock, true);

	run_plain(c);
	assert_int_equal(wait_exit(c), 3);
	assert_still_ours(c->sock, lfd);
	close(lfd);
	assert_true(log_has(c, "another process is listening on it"));
}

/* A socket file nobody listens on (a target that crashed): replaced. */
static void a_stale_socket_is_replaced(void **state)
{
	struct ctx *c = *state;
	struct fe fe;
	uint64_t features;
	uint64_t deadline = now_ms() + FE_WAIT_MS;

	our_socket(c->sock, false);
	assert_int_equal(try_connect(c->sock), -ECONNREFUSED);
	run_plain(c);
	while (try_connect(c->sock) != 0) {
		assert_true(now_ms() < deadline);
		usleep(5000);
	}
	assert_int_equal(fe_connect(&fe, c->sock, NULL), 0);
	assert_int_equal(vs_vhost_drv_get_features(&fe.drv, &features), 0);
	fe_close(&fe);
	stop_target(c);
}

/* ---- a stale socket that comes alive while the target probes it ---------------------------- */
struct revive {
	bool probed; /* the probe's connect() returned ECONNREFUSED */
	int lfd;
};

static bool revive_after_probe(struct ctx *c, bool entry, long nr, long ret, void *arg)
{
	struct revive *r = arg;
	static bool in_connect;

	if (entry) {
		in_connect = nr == SYS_connect;
		if (!r->probed)
			return false;
		/* The probe is done; before the target's next step, a live server takes the path.
		 */
		unlink(c->sock);
		r->lfd = our_socket(c->sock, true);
		return true;
	}
	if (in_connect && ret == -ECONNREFUSED)
		r->probed = true;
	return false;
}

static void a_stale_socket_that_comes_alive_while_probed_is_kept(void **state)
{
	struct ctx *c = *state;
	struct revive r = {.lfd = -1};

	our_socket(c->sock, false);
	assert_true(run_traced(c, revive_after_probe, &r));
	assert_true(r.lfd >= 0);
	assert_int_equal(wait_exit(c), 3);
	assert_still_ours(c->sock, r.lfd);
	close(r.lfd);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(the_path_appears_only_when_connectable, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(a_symlink_planted_where_the_socket_goes_is_not_followed,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(a_live_socket_is_not_replaced, setup, teardown),
	    cmocka_unit_test_setup_teardown(a_stale_socket_is_replaced, setup, teardown),
	    cmocka_unit_test_setup_teardown(a_stale_socket_that_comes_alive_while_probed_is_kept,
					    setup, teardown),
	};

	return hostile_init(argc, argv) ?: cmocka_run_group_tests(tests, NULL, NULL);
}
