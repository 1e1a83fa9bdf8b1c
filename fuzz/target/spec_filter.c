/* SPDX-License-Identifier: MIT */
/* The fuzzers' spec filter and their private test files: see spec_filter.h. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "spec_filter.h"
#include "util/util.h"

static const struct {
	const char *name;
	off_t size;
} files[FZ_NFILES] = {
    [FZ_FILE_A] = {"a", 1 << 20},
    [FZ_FILE_B] = {"b", 64 << 10},
    [FZ_FILE_ODD] = {"odd", 1000}, /* not a whole number of blocks: refused by the target */
    [FZ_FILE_EMPTY] = {"empty", 0},
};

static const struct fz_files *to_remove;

static void files_remove(void)
{
	for (unsigned i = 0; i < FZ_NFILES; i++)
		unlink(to_remove->path[i]);
	rmdir(to_remove->dir);
}

/* The filter refuses what it must and lets through what it should, checked once at start
 * (a filter that refused everything would look like a quiet fuzzer). */
static void self_check(const struct fz_files *f)
{
	static const char *const refused[] = {
	    "file=/etc/passwd",
	    "file=%s/../a",
	    "file=%s/a/",
	    "file=%s",
	    "file=%s/a,log-writes=%s/b",
	    "file=%s/a,delay=1",
	    "file=%s/a,",
	    "file=%s/ax",
	    "ram=8M",
	    "ram=1M,log-writes=%s/b",
	    "null=1M,drop-write=1",
	    "rbd=p/i",
	    "RAM=1M",
	    "ram",
	    "",
	    "file=",
	};
	static const char *const allowed[] = {
	    "ram=1M",
	    "ram=4M",
	    "ram=junk",
	    "null=16E",
	    "null=1",
	    "file=%s/a",
	    "file=%s/b,ro,direct",
	};
	char spec[2 * PATH_MAX + 64];

	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		snprintf(spec, sizeof(spec), refused[i], f->dir, f->dir);
		if (fz_spec_allowed(f, spec))
			__builtin_trap();
	}
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
		snprintf(spec, sizeof(spec), allowed[i], f->dir);
		if (!fz_spec_allowed(f, spec))
			__builtin_trap();
	}
}

void fz_files_init(struct fz_files *f)
{
	const char *base = getenv("TMPDIR");

	if (access("/dev/shm", W_OK) == 0)
		base = "/dev/shm";
	else if (!base || !*base)
		base = "/tmp";
	if ((size_t)snprintf(f->dir, sizeof(f->dir), "%s/vioscope-fuzz-XXXXXX", base) >=
		sizeof(f->dir) ||
	    !mkdtemp(f->dir))
		__builtin_trap();
	for (unsigned i = 0; i < FZ_NFILES; i++) {
		snprintf(f->path[i], sizeof(f->path[i]), "%s/%s", f->dir, files[i].name);
		f->fd[i] = open(f->path[i], O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (f->fd[i] < 0)
			__builtin_trap();
	}
	to_remove = f;
	atexit(files_remove);
	fz_files_reset(f);
	self_check(f);
}

void fz_files_reset(const struct fz_files *f)
{
	for (unsigned i = 0; i < FZ_NFILES; i++)
		if (ftruncate(f->fd[i], 0) < 0 || ftruncate(f->fd[i], files[i].size) < 0)
			__builtin_trap();
}

/* PATH[,ro][,direct]: one of our files, and only the options that open nothing else. */
static bool file_args_allowed(const struct fz_files *f, const char *args)
{
	size_t plen = strcspn(args, ",");
	const char *opt = args + plen;
	bool ours = false;

	for (unsigned i = 0; i < FZ_NFILES && !ours; i++)
		ours = strlen(f->path[i]) == plen && !strncmp(f->path[i], args, plen);
	if (!ours)
		return false;
	while (*opt) {
		size_t olen;

		opt++; /* the comma */
		olen = strcspn(opt, ",");
		if (!((olen == 2 && !strncmp(opt, "ro", 2)) ||
		      (olen == 6 && !strncmp(opt, "direct", 6))))
			return false;
		opt += olen;
	}
	return true;
}

bool fz_spec_allowed(const struct fz_files *f, const char *spec)
{
	uint64_t size;

	if (!strncmp(spec, "ram=", 4) || !strncmp(spec, "null=", 5)) {
		const char *arg = strchr(spec, '=') + 1;

		/* No options: log-writes= opens a path, the others are test faults. */
		if (strchr(arg, ','))
			return false;
		return spec[0] == 'n' || vs_parse_size(arg, &size) < 0 || size <= FZ_RAM_MAX;
	}
	if (!strncmp(spec, "file=", 5))
		return file_args_allowed(f, spec + 5);
	return false;
}

/* One request of a line, as handle_one (src/rpc/methods.c) finds its method and spec. */
static bool request_allowed(const struct fz_files *f, json_t *req)
{
	json_t *method = json_object_get(req, "method");
	json_t *params = json_object_get(req, "params");
	json_t *spec = json_object_get(params, "spec");

	if (!json_is_string(method) || strcmp(json_string_value(method), "lun_add"))
		return true;
	return !json_is_string(spec) || fz_spec_allowed(f, json_string_value(spec));
}

bool fz_line_allowed(const struct fz_files *f, const char *line, size_t len)
{
	json_t *req = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, NULL);
	bool ok = true;

	if (json_is_array(req)) {
		size_t i;
		json_t *r;

		json_array_foreach(req, i, r) ok = ok && request_allowed(f, r);
	} else if (req) {
		ok = request_allowed(f, req);
	}
	json_decref(req);
	return ok;
}
