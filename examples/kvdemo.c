/* SPDX-License-Identifier: MIT */
/*
 * The program of the example: reads commands on stdin and runs them on a kvstore.
 *
 *     put KEY VALUE   get KEY   del KEY   (one per line; end of input ends it)
 *
 * Provider "kvdemo", with flags of its own (CMD, IO); built in the cold flavour,
 * while the library it uses (provider "kv") is built in the all flavour.
 */
#define VS_TRACE_FLAGS(X) X(CMD) X(IO)
#include <vioscope/trace.h>

#include <stdio.h>
#include <string.h>

#include "kvstore.h"

int main(void)
{
	char line[512], value[4096];
	unsigned lineno = 0, bad = 0;
	struct kv *kv = kv_open(64);

	if (!kv)
		return 1;
	VS_INFO(IO, "kvdemo (%s flavour) reading commands", vs_trace_flavour());
	while (fgets(line, sizeof line, stdin)) {
		char *save = NULL, *cmd = strtok_r(line, " \t\n", &save);
		char *key = strtok_r(NULL, " \t\n", &save), *val = strtok_r(NULL, "\n", &save);
		size_t len;
		lineno++;
		if (!cmd)
			continue;
		VS_INFO(CMD, "line %u: %s %s", lineno, cmd, key ? key : "");
		if (!strcmp(cmd, "put") && key && val) {
			printf("%s\n", kv_put(kv, key, val, strlen(val)) == 0 ? "ok" : "refused");
		} else if (!strcmp(cmd, "get") && key) {
			if (kv_get(kv, key, value, sizeof value - 1, &len) == 0)
				printf("%.*s\n", (int)(len < sizeof value ? len : sizeof value),
				       value);
			else
				printf("(none)\n");
		} else if (!strcmp(cmd, "del") && key) {
			printf("%s\n", kv_del(kv, key) == 0 ? "deleted" : "(none)");
		} else {
			VS_ERROR(CMD, "line %u: cannot parse '%s'", lineno, cmd);
			printf("? put KEY VALUE | get KEY | del KEY\n");
			bad++;
		}
		fflush(stdout);
	}
	VS_INFO(IO, "end of input after %u lines, %u bad", lineno, bad);
	kv_close(kv);
	return 0;
}
