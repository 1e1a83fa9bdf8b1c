/* SPDX-License-Identifier: MIT */
/* The target under test, in this process or as a process: see target.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "deadline.h"
#include "target.h"
#include "tmpdir.h"
#include "tracetools/tracetools.h" /* where a killed process's trace file is */

#define START_MS 20000

/* ---- what is still running at exit --------------------------------------------------------- */
/* A failed assertion leaves its test function without stopping its target (and its struct
 * may have been on that function's stack): the process kills what is left and removes the
 * directories at exit, from copies kept here. */
static struct {
	pid_t pid;
	char dir[64];
} live[16];

static void forget_trace_file(pid_t pid)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/%s%d", vs_shm_dir(), VS_SHM_PREFIX, (int)pid);
	unlink(p);
	snprintf(p, sizeof(p), "%s/.vioscope-init-%d", vs_shm_dir(), (int)pid);
	unlink(p);
}

static void kill_pid(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	forget_trace_file(pid); /* it could not remove its own */
}

static void cleanup_at_exit(void)
{
	for (unsigned i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
		if (!live[i].dir[0])
			continue;
		if (live[i].pid > 0)
			kill_pid(live[i].pid);
		tmpdir_remove(live[i].dir);
		live[i].dir[0] = 0;
	}
}

/* The entry of dir ("": a free one). */
static unsigned live_slot(const char *dir)
{
	unsigned i;

	for (i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (!strcmp(live[i].dir, dir))
			break;
	return i;
}

static void live_pid(const struct target *tg)
{
	unsigned i = live_slot(tg->dir);

	if (i < sizeof(live) / sizeof(live[0]))
		live[i].pid = tg->pid;
}

static void kill_process(struct target *tg)
{
	if (tg->pid <= 0)
		return;
	kill_pid(tg->pid);
	if (tg->pidfd >= 0)
		close(tg->pidfd);
	tg->pid = tg->pidfd = -1;
	live_pid(tg);
}

/* ---- set-up ---------------------------------------------------------------------------------- */
int target_init(struct target *tg, const char *tag, const char *bin)
{
	static bool registered;
	unsigned i;
	int rc;

	memset(tg, 0, sizeof(*tg));
	tg->pid = tg->pidfd = -1;
	tg->bin = bin;
	if ((rc = tmpdir_make(tg->dir, sizeof(tg->dir), NULL, tag)))
		return rc;
	snprintf(tg->sock, sizeof(tg->sock), "%s/sock", tg->dir);
	snprintf(tg->file, sizeof(tg->file), "%s/disk.img", tg->dir);
	snprintf(tg->log, sizeof(tg->log), "%s/target.log", tg->dir);
	snprintf(tg->rpc, sizeof(tg->rpc), "%s/rpc.sock", tg->dir);
	snprintf(tg->gate, sizeof(tg->gate), "%s/gate.sock", tg->dir);
	if (!registered) {
		atexit(cleanup_at_exit);
		registered = true;
	}
	if ((i = live_slot("")) < sizeof(live) / sizeof(live[0])) {
		snprintf(live[i].dir, sizeof(live[i].dir), "%s", tg->dir);
		live[i].pid = -1;
	}
	return 0;
}

/* s with "%F", "%R", "%G" and "%D" replaced by tg's paths, into out. */
static const char *expand(const struct target *tg, const char *s, char *out, size_t len)
{
	size_t n = 0;

	for (; *s && n + 1 < len; s++) {
		const char *with = NULL;

		if (s[0] == '%' && s[1])
			with = s[1] == 'F'   ? tg->file
			       : s[1] == 'R' ? tg->rpc
			       : s[1] == 'G' ? tg->gate
			       : s[1] == 'D' ? tg->dir
					     : NULL;
		if (!with) {
			out[n++] = *s;
			continue;
		}
		n += (size_t)snprintf(out + n, len - n, "%s", with);
		s++;
	}
	out[n < len ? n : len - 1] = 0;
	return out;
}

static int make_file(const struct target *tg, uint64_t size)
{
	int fd = open(tg->file, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
	int rc = fd < 0 || ftruncate(fd, (off_t)size) < 0 ? -errno : 0;

	if (fd >= 0)
		close(fd);
	return rc;
}

static bool listening(const struct target *tg)
{
	struct stat st;

	return stat(tg->sock, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* ---- in this process ------------------------------------------------------------------------- */
static void *serve(void *arg)
{
	struct target *tg = arg;

	vs_target_run(tg->t, &tg->stop);
	return NULL;
}

static int start_in_process(struct target *tg, const struct target_opts *o)
{
	static char specs[8][512];
	struct vs_target_lun luns[8];
	struct vs_target_config cfg = {.socket_path = tg->sock,
				       .num_queues = o->queues,
				       .workers = o->workers,
				       .block_size = o->block_size,
				       .poll = o->poll,
				       .testing = o->testing,
				       .luns = luns};
	char err[256];
	int rc;

	if (o->args[0])
		return -EINVAL; /* command-line options: a process only */
	for (; cfg.nluns < 8 && o->luns[cfg.nluns]; cfg.nluns++) {
		char *colon;

		expand(tg, o->luns[cfg.nluns], specs[cfg.nluns], sizeof(specs[0]));
		if (!(colon = strchr(specs[cfg.nluns], ':')))
			return -EINVAL;
		luns[cfg.nluns] = (struct vs_target_lun){.id = (unsigned)atoi(specs[cfg.nluns]),
							 .spec = colon + 1};
	}
	tg->stop = 0;
	if ((rc = vs_target_create(&tg->t, &cfg, err, sizeof(err)))) {
		fprintf(stderr, "target: %s\n", err);
		return rc;
	}
	if ((rc = -pthread_create(&tg->thread, NULL, serve, tg))) {
		vs_target_destroy(tg->t);
		tg->t = NULL;
	}
	return rc;
}

static int stop_in_process(struct target *tg)
{
	int rc;

	__atomic_store_n(&tg->stop, 1, __ATOMIC_RELAXED);
	vs_target_wake(tg->t);
	pthread_join(tg->thread, NULL);
	rc = vs_target_destroy(tg->t);
	tg->t = NULL;
	return rc;
}

static void *churn_main(void *arg)
{
	struct lun_churn *c = arg;
	uint64_t end = now_ms() + 60000;

	while ((c->cycles < c->min_cycles ||
		__atomic_load_n(&c->io_rounds, __ATOMIC_ACQUIRE) < c->min_rounds) &&
	       !c->rc && now_ms() < end) {
		if ((c->rc = vs_target_lun_add(c->t, NULL, &c->lun, c->err, sizeof(c->err))))
			break;
		c->rc = vs_target_lun_remove(c->t, NULL, c->lun.id, c->err, sizeof(c->err));
		c->cycles++;
	}
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

int lun_churn_start(struct lun_churn *c)
{
	c->cycles = c->io_rounds = 0;
	c->done = c->rc = 0;
	c->err[0] = 0;
	return -pthread_create(&c->thread, NULL, churn_main, c);
}

bool lun_churn_running(struct lun_churn *c)
{
	return !__atomic_load_n(&c->done, __ATOMIC_ACQUIRE);
}

void lun_churn_round(struct lun_churn *c)
{
	__atomic_add_fetch(&c->io_rounds, 1, __ATOMIC_RELEASE);
}

int lun_churn_join(struct lun_churn *c)
{
	pthread_join(c->thread, NULL);
	return c->rc;
}

/* ---- as a process ---------------------------------------------------------------------------- */
static int start_process(struct target *tg, const struct target_opts *o)
{
	static char expanded[32][512];
	char *argv[64], q[16], w[16], bs[16];
	unsigned n = 0, e = 0;
	uint64_t deadline;

	if (!tg->bin)
		return -EINVAL;
	argv[n++] = (char *)tg->bin;
	argv[n++] = "target";
	argv[n++] = "--socket";
	argv[n++] = tg->sock;
	if (o->queues) {
		snprintf(q, sizeof(q), "%u", o->queues);
		argv[n++] = "--queues";
		argv[n++] = q;
	}
	if (o->workers) {
		snprintf(w, sizeof(w), "%u", o->workers);
		argv[n++] = "--workers";
		argv[n++] = w;
	}
	if (o->block_size) {
		snprintf(bs, sizeof(bs), "%u", o->block_size);
		argv[n++] = "--block-size";
		argv[n++] = bs;
	}
	if (o->poll)
		argv[n++] = "--poll";
	if (o->testing)
		argv[n++] = "--testing";
	for (unsigned i = 0; i < 8 && o->luns[i]; i++) {
		argv[n++] = "--lun";
		argv[n++] = (char *)expand(tg, o->luns[i], expanded[e], sizeof(expanded[e]));
		e++;
	}
	for (unsigned i = 0; i < 16 && o->args[i] && e < 32; i++)
		argv[n++] = (char *)expand(tg, o->args[i], expanded[e++], sizeof(expanded[0]));
	argv[n] = NULL;

	unlink(tg->sock); /* a killed target leaves its socket behind */
	tg->pid = fork();
	if (tg->pid < 0)
		return -errno;
	if (tg->pid == 0) {
		int log = open(tg->log, O_CREAT | O_WRONLY | O_APPEND, 0600);

		prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive the test */
		if (log >= 0) {
			dup2(log, 1);
			if (!getenv("VIOSCOPE_TEST_TARGET_LOG")) /* else on the test's stderr */
				dup2(log, 2);
		}
		execv(tg->bin, argv);
		_exit(127);
	}
	live_pid(tg);
	tg->pidfd = (int)syscall(SYS_pidfd_open, tg->pid, 0);
	if (tg->pidfd < 0)
		return -errno;
	/* Readiness: the socket appears once the target listens. */
	for (deadline = now_ms() + START_MS; now_ms() < deadline && target_alive(tg);
	     poll(NULL, 0, 10))
		if (listening(tg))
			return 0;
	target_log_dump(tg);
	kill_process(tg);
	return -ETIMEDOUT;
}

static int stop_process(struct target *tg, int signo, int timeout_ms, int *sig)
{
	struct pollfd pf = {.fd = tg->pidfd, .events = POLLIN};
	int st = 0, rc = -1;

	if (signo)
		kill(tg->pid, signo);
	if (poll(&pf, 1, timeout_ms) != 1) {
		fprintf(stderr, "target pid %d did not exit within %d ms: killed\n", tg->pid,
			timeout_ms);
		kill_process(tg);
		return -1;
	}
	if (waitpid(tg->pid, &st, 0) == tg->pid) {
		if (WIFEXITED(st))
			rc = WEXITSTATUS(st);
		else if (WIFSIGNALED(st)) {
			forget_trace_file(tg->pid);
			if (sig)
				*sig = WTERMSIG(st);
		}
	}
	close(tg->pidfd);
	tg->pid = tg->pidfd = -1;
	live_pid(tg);
	return rc;
}

/* ---- either ---------------------------------------------------------------------------------- */
int target_start(struct target *tg, const struct target_opts *o)
{
	int rc;

	tg->in_process = o->in_process;
	if (o->file_size && (rc = make_file(tg, o->file_size)))
		return rc;
	return o->in_process ? start_in_process(tg, o) : start_process(tg, o);
}

int target_stop(struct target *tg, int signo, int timeout_ms, int *sig)
{
	if (sig)
		*sig = 0;
	if (tg->t)
		return stop_in_process(tg);
	return tg->pid > 0 ? stop_process(tg, signo, timeout_ms, sig) : -1;
}

void target_fini(struct target *tg)
{
	if (tg->t)
		stop_in_process(tg);
	kill_process(tg);
	if (tg->dir[0]) {
		unsigned i = live_slot(tg->dir);

		tmpdir_remove(tg->dir);
		if (i < sizeof(live) / sizeof(live[0]))
			live[i].dir[0] = 0;
	}
	tg->dir[0] = 0;
}

bool target_alive(struct target *tg)
{
	struct pollfd pf = {.fd = tg->pidfd, .events = POLLIN};

	return tg->pidfd >= 0 && poll(&pf, 1, 0) == 0;
}

int target_fd_count(struct target *tg)
{
	char path[64];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)tg->pid);
	if (!(d = opendir(path)))
		return -errno;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

static char *log_read(struct target *tg)
{
	int fd = open(tg->log, O_RDONLY | O_CLOEXEC);
	char *buf = NULL;
	size_t len = 0, cap = 0;
	ssize_t n;

	if (fd < 0)
		return NULL;
	for (;;) {
		if (cap - len < 4097) {
			char *nb = realloc(buf, cap += 65536);
			if (!nb)
				break;
			buf = nb;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (buf)
		buf[len] = 0;
	return buf;
}

bool target_log_wait(struct target *tg, const char *needle, int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		char *log = log_read(tg);
		bool found = log && strstr(log, needle);

		free(log);
		if (found)
			return true;
		if (now_ms() >= deadline)
			return false;
		poll(NULL, 0, 10);
	}
}

void target_log_dump(struct target *tg)
{
	char *log = log_read(tg);

	fprintf(stderr, "---- target log ----\n%s---- end ----\n", log ? log : "(none)\n");
	free(log);
}

int target_rpc(struct target *tg, const char *request, char *reply, size_t len, int timeout_ms)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
	size_t got = 0;
	int fd, rc = 0;

	if (len < 2 || strlen(tg->rpc) >= sizeof(sa.sun_path))
		return -EINVAL;
	strcpy(sa.sun_path, tg->rpc);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    send(fd, request, strlen(request), MSG_NOSIGNAL) != (ssize_t)strlen(request) ||
	    send(fd, "\n", 1, MSG_NOSIGNAL) != 1) {
		rc = -errno;
		goto out;
	}
	while (!memchr(reply, '\n', got)) {
		struct pollfd pf = {.fd = fd, .events = POLLIN};
		int left = ms_left(deadline);
		ssize_t n;

		if (left <= 0 || poll(&pf, 1, left) != 1) {
			rc = -ETIMEDOUT;
			goto out;
		}
		n = recv(fd, reply + got, len - 1 - got, 0);
		if (n <= 0) {
			rc = n ? -errno : -ECONNRESET;
			goto out;
		}
		got += (size_t)n;
		if (got == len - 1 && !memchr(reply, '\n', got)) {
			rc = -EMSGSIZE;
			goto out;
		}
	}
	*(char *)memchr(reply, '\n', got) = 0;
out:
	close(fd);
	if (rc)
		reply[0] = 0;
	return rc;
}
