/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "deadline.h"
#include "helpers.h"

extern char **environ;

int th_tmpdir_init(struct th_tmpdir *t, const char *tag)
{
	int rc = tmpdir_make(t->dir, sizeof t->dir, NULL, tag);
	if (rc < 0)
		return rc;
	snprintf(t->env_dir, sizeof t->env_dir, "VIOSCOPE_TRACE_DIR=%s", t->dir);
	snprintf(t->out, sizeof t->out, "%s.out", t->dir);
	snprintf(t->err, sizeof t->err, "%s.err", t->dir);
	snprintf(t->cap, sizeof t->cap, "%s.vstrace", t->dir);
	return 0;
}

void th_tmpdir_fini(struct th_tmpdir *t)
{
	tmpdir_remove(t->dir);
	/* a test that stopped early (a failed assert) may have left any of these */
	unlink(t->out);
	unlink(t->err);
	unlink(t->cap);
}

int th_tmpdir_setup(void **state, const char *tag)
{
	struct th_tmpdir *t = calloc(1, sizeof *t);
	if (!t || th_tmpdir_init(t, tag) < 0) {
		free(t);
		return -1;
	}
	*state = t;
	return 0;
}

int th_tmpdir_teardown(void **state)
{
	struct th_tmpdir *t = *state;
	th_tmpdir_fini(t);
	free(t);
	return 0;
}

int th_count_files(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	if (!d)
		return -1;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!prefix || !strncmp(e->d_name, prefix, strlen(prefix)))
			n++;
	}
	closedir(d);
	return n;
}

/* environ with ENV's entries replacing same-named ones; built before fork so the
 * child (perhaps of a threaded parent) only has to call execve. */
static char **build_env(const char *const env[])
{
	size_t n = 0, k = 0;
	while (environ[n])
		n++;
	while (env && env[k])
		k++;
	char **out = calloc(n + k + 1, sizeof *out);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		bool overridden = false;
		size_t nl = strcspn(environ[i], "=");
		for (size_t j = 0; j < k && !overridden; j++)
			overridden = !strncmp(environ[i], env[j], nl) && env[j][nl] == '=';
		if (!overridden)
			out[o++] = environ[i];
	}
	for (size_t j = 0; j < k; j++)
		out[o++] = (char *)env[j];
	return out;
}

static void redirect(const char *path, int fd)
{
	int f = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (f < 0 || dup2(f, fd) < 0)
		_exit(126);
	close(f);
}

pid_t th_spawn(const char *const argv[], const char *const env[], const int keep_fds[],
	       const char *out, const char *err)
{
	char **envp = build_env(env);
	if (!envp)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		for (int i = 0; keep_fds && keep_fds[i] >= 0; i++)
			fcntl(keep_fds[i], F_SETFD, 0);
		if (out)
			redirect(out, 1);
		if (err)
			redirect(err, 2);
		execve(argv[0], (char *const *)argv, envp);
		_exit(127);
	}
	free(envp);
	return pid;
}

int th_wait(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	return 128 + WTERMSIG(st);
}

int th_wait_within(pid_t pid, unsigned timeout_ms)
{
	uint64_t end = now_ms() + timeout_ms;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);
		if (r < 0 && errno != EINTR)
			return -1;
		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (now_ms() >= end) {
			kill(pid, SIGKILL);
			th_wait(pid);
			return -2;
		}
		usleep(1000); /* a wait with a deadline: polls for the exit */
	}
}

int th_run(const char *const argv[], const char *const env[], const char *out, const char *err)
{
	pid_t pid = th_spawn(argv, env, NULL, out, err);
	return pid < 0 ? -1 : th_wait(pid);
}

bool th_file_contains(const char *path, const char *needle)
{
	char *text = th_read_file(path, NULL);
	bool found = text && strstr(text, needle);
	if (!found)
		fprintf(stderr, "%s does not contain \"%s\":\n%s\n", path, needle,
			text ? text : "");
	free(text);
	return found;
}

char *th_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;
	if (!f)
		return NULL;
	for (;;) {
		if (cap - n < 4096) {
			cap = cap ? cap * 2 : 65536;
			char *b = realloc(buf, cap + 1);
			if (!b) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = b;
		}
		size_t k = fread(buf + n, 1, cap - n, f);
		n += k;
		if (k == 0)
			break;
	}
	fclose(f);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

int th_write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return -errno;
	size_t k = fwrite(data, 1, len, f);
	if (fclose(f) != 0 || k != len)
		return -EIO;
	return 0;
}

int th_pipe(int fds[2])
{
	return pipe2(fds, O_CLOEXEC);
}

int th_read_byte(int fd)
{
	unsigned char c;
	ssize_t n;
	while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
		;
	return n == 1 ? c : -1;
}

void th_shm_path(char *out, size_t len, const char *dir, pid_t pid)
{
	snprintf(out, len, "%s/%s%d", dir, VS_SHM_PREFIX, (int)pid);
}

struct walk_ctx {
	th_event_fn fn;
	void *opaque;
};

static int walk_one(const struct vs_cap_event *ev, void *opaque)
{
	struct walk_ctx *w = opaque;
	char msg[8192] = "";
	struct th_event e = {.ev = ev, .msg = msg};
	if (ev->site)
		e.fmt_rc = vs_format_message(msg, sizeof msg, ev->site, ev->args, ev->args_len);
	return w->fn(&e, w->opaque);
}

int th_walk(const char *capture, th_event_fn fn, void *opaque, char *why, size_t whylen)
{
	struct vs_capture *c;
	struct walk_ctx w = {fn, opaque};
	int rc = vs_capture_open(&c, capture, why, whylen);
	if (rc < 0)
		return rc;
	rc = vs_capture_walk(c, walk_one, &w, why, whylen);
	vs_capture_close(c);
	return rc;
}
