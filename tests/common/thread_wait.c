/* SPDX-License-Identifier: MIT */
/* Where a process's threads sleep: see thread_wait.h. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "deadline.h"
#include "thread_wait.h"

/* The first line of /proc/PID/task/TID/NAME, its newline dropped; false when gone. */
static bool task_read(pid_t pid, const char *tid, const char *name, char *out, size_t len)
{
	char path[128];
	FILE *f;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/task/%s/%s", (int)pid, tid, name);
	else
		snprintf(path, sizeof(path), "/proc/self/task/%s/%s", tid, name);
	if (!(f = fopen(path, "r")))
		return false;
	if (!fgets(out, (int)len, f))
		out[0] = 0;
	fclose(f);
	out[strcspn(out, "\n")] = 0;
	return true;
}

static DIR *tasks_open(pid_t pid)
{
	char path[64];

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/task");
	return opendir(path);
}

bool thread_wchan(pid_t pid, const char *comm, char *wchan, size_t len)
{
	DIR *d = tasks_open(pid);
	struct dirent *e;
	bool found = false;
	char name[32];

	wchan[0] = 0;
	while (d && !found && (e = readdir(d)))
		if (e->d_name[0] != '.' && task_read(pid, e->d_name, "comm", name, sizeof(name)) &&
		    !strcmp(name, comm))
			found = task_read(pid, e->d_name, "wchan", wchan, len);
	if (d)
		closedir(d);
	return found;
}

char thread_state(pid_t pid, pid_t tid)
{
	char id[16], stat[256], *paren;

	snprintf(id, sizeof(id), "%d", (int)tid);
	if (!task_read(pid, id, "stat", stat, sizeof(stat)) || !(paren = strrchr(stat, ')')))
		return '?';
	return paren[1] == ' ' ? paren[2] : '?';
}

struct asleep {
	pid_t pid;
	const char *prefix;
	const char *const *where;
};

static bool sleeps_in(const char *wchan, const char *const where[])
{
	for (; *where; where++)
		if (strstr(wchan, *where))
			return true;
	return false;
}

static bool all_asleep(void *opaque)
{
	const struct asleep *a = opaque;
	DIR *d = tasks_open(a->pid);
	struct dirent *e;
	unsigned seen = 0;
	bool awake = false;
	char name[32], wchan[64];

	while (d && !awake && (e = readdir(d))) {
		if (e->d_name[0] == '.' ||
		    !task_read(a->pid, e->d_name, "comm", name, sizeof(name)) ||
		    strncmp(name, a->prefix, strlen(a->prefix)))
			continue;
		if (!task_read(a->pid, e->d_name, "wchan", wchan, sizeof(wchan)))
			continue; /* exited */
		seen++;
		awake = !sleeps_in(wchan, a->where);
	}
	if (d)
		closedir(d);
	return seen && !awake;
}

bool threads_wait_asleep_in(pid_t pid, const char *prefix, const char *const where[],
			    unsigned timeout_ms)
{
	struct asleep a = {pid, prefix, where};

	return wait_until(all_asleep, &a, timeout_ms);
}

static void *when_waiting_main(void *arg)
{
	static const char *const futex[] = {"futex", NULL};
	struct when_waiting *w = arg;

	w->waited = threads_wait_asleep_in(w->pid, w->comm, futex, 20000);
	w->act(w->arg);
	return NULL;
}

int when_waiting_start(struct when_waiting *w)
{
	w->waited = false;
	return -pthread_create(&w->thread, NULL, when_waiting_main, w);
}

bool when_waiting_join(struct when_waiting *w)
{
	pthread_join(w->thread, NULL);
	return w->waited;
}
