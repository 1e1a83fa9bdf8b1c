/* SPDX-License-Identifier: MIT */
/*
 * trace_objects [-r FD -g FD] STEP...: a traced program (provider host, flags START
 * NET) that links libtrace_obj_a.so and loads modules, one step at a time:
 *
 *   host N      N times "host start %u" (START) and "host net %u" (NET)
 *   liba N      obj_a_emit(N) in the shared library
 *   load NAME   dlopen() NAME from this program's directory (one module at a time)
 *   call N      the loaded module's module_emit(N, number of loads so far)
 *   unload      dlclose() it
 *   sync        write 's' to the -r FD, wait for a byte on the -g FD (the test acts)
 *
 * Built as trace_objects (the shared runtime), trace_objects_static (the static
 * runtime, its entry points exported) and trace_objects_noexport (the runtime's
 * objects linked in without exporting them, and without the library: a module it
 * loads brings a second copy of the runtime).
 * Exit status 0, or 1 with a message on stderr.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VS_TRACE_FLAGS(X) X(START) X(NET)
#include <vioscope/trace.h>

#include "objects.h"

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "trace_objects: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	exit(1);
}

int main(int argc, char **argv)
{
	char dir[PATH_MAX], path[PATH_MAX + 64];
	int ready = -1, go = -1, i = 1;
	void *module = NULL;
	unsigned loads = 0;

	ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
	if (n <= 0)
		die("readlink /proc/self/exe", NULL);
	dir[n] = '\0';
	dirname(dir);
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "-r"))
			ready = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-g"))
			go = atoi(argv[i + 1]);
		else
			die("unknown option", argv[i]);
	}
	for (; i < argc; i++) {
		const char *step = argv[i];
		const char *arg = i + 1 < argc ? argv[i + 1] : "";
		unsigned count = (unsigned)strtoul(arg, NULL, 10);
		if (!strcmp(step, "host")) {
			for (unsigned k = 0; k < count; k++) {
				VS_INFO(START, "host start %u", k);
				VS_INFO(NET, "host net %u", k);
			}
			i++;
		} else if (!strcmp(step, "liba")) {
#ifndef OBJ_NO_LIBA
			obj_a_emit(count);
#endif
			i++;
		} else if (!strcmp(step, "load")) {
			snprintf(path, sizeof path, "%s/%s", dir, arg);
			if (module || !(module = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
				die("dlopen", module ? "a module is loaded already" : dlerror());
			loads++;
			i++;
		} else if (!strcmp(step, "call")) {
			obj_module_emit_fn fn;
			*(void **)&fn = module ? dlsym(module, OBJ_MODULE_EMIT) : NULL;
			if (!fn)
				die("call: no module_emit", module ? dlerror() : "nothing loaded");
			fn(count, loads);
			i++;
		} else if (!strcmp(step, "unload")) {
			if (!module || dlclose(module) != 0)
				die("dlclose", module ? dlerror() : "nothing loaded");
			module = NULL;
		} else if (!strcmp(step, "sync")) {
			char c = 's';
			if (ready < 0 || go < 0 || write(ready, &c, 1) != 1 || read(go, &c, 1) != 1)
				die("sync needs -r and -g", NULL);
		} else {
			die("unknown step", step);
		}
	}
	return 0;
}
