/* SPDX-License-Identifier: MIT */
/*
 * The main job: the storage stack end to end.  A default image, a target and the
 * user-space initiator in every trace flavour (the seed driver's table), then one
 * short run with hot-path tracing on and recorded, and an excerpt of its trace.
 * Everything runs through the CLI itself, as a user would.
 */
#define _GNU_SOURCE
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/commands.h"

static int run(const char *cmd)
{
	fflush(stdout);
	int rc = system(cmd);
	return rc == 0 ? 0 : -1;
}

/* Decode a capture to a text file, print how many events and an excerpt. */
static void excerpt(const char *bindir, const char *capture, const char *what, unsigned lines)
{
	char cmd[3 * PATH_MAX];
	printf("\n-- %s: `vioscope trace decode %s`\n", what, capture);
	snprintf(cmd, sizeof cmd,
		 "'%s/vioscope' trace decode '%s' > '%s.txt' && "
		 "printf '   %%s events\\n' \"$(wc -l < '%s.txt')\" && "
		 "grep -m%u -E ' (VERB|INFO) ' '%s.txt' | sed 's/^/   /' && "
		 "echo '   ...' && grep -m%u -E ' (IO|QUEUE|SCSI|BACKEND|NOTIFY) ' '%s.txt' | "
		 "tail -n %u | sed 's/^/   /'",
		 bindir, capture, capture, capture, lines, capture, 4 * lines, capture, lines);
	if (run(cmd) < 0)
		printf("   (decode failed)\n");
}

int demo_storage(const char *bindir, const char *out)
{
	char cmd[3 * PATH_MAX];
	int rc = 0;

	printf("vioscope demo: a vhost-user-scsi target and the user-space virtio-scsi initiator,\n"
	       "in each trace build flavour, on a default 1 GiB image (the seed driver's table).\n\n");
	snprintf(cmd, sizeof cmd, "'%s/vioscope' bench --flavours --rounds 1 --time 1", bindir);
	if (run(cmd) < 0) {
		fprintf(stderr, "demo: the flavour comparison failed\n");
		rc = 1;
	}

	printf("\nOne more short run in the `all` flavour with hot-path tracing enabled\n"
	       "(VIOSCOPE_TRACE=verbose:all) and recorded by `vioscope trace record`:\n\n");
	snprintf(cmd, sizeof cmd,
		 "VIOSCOPE_TRACE=verbose:all VIOSCOPE_TRACE_RING=8M '%s/vioscope-all' bench "
		 "--profile rnd4k-q4t1 --time 0.3 --record '%s'",
		 bindir, out);
	if (run(cmd) < 0) {
		fprintf(stderr, "demo: the traced run failed\n");
		return 1;
	}
	static const char *const sides[][2] = { { "target", "the target (device side)" },
						{ "initiator", "the initiator (driver side)" } };
	for (int i = 0; i < 2; i++) {
		char pattern[PATH_MAX + 32];
		glob_t g;
		snprintf(pattern, sizeof pattern, "%s/%s-*.vst", out, sides[i][0]);
		if (glob(pattern, 0, NULL, &g) == 0 && g.gl_pathc > 0)
			excerpt(bindir, g.gl_pathv[0], sides[i][1], 6);
		else
			printf("\n-- %s: no capture\n", sides[i][1]);
		globfree(&g);
	}
	/* Where the recorded run's requests spent their time, both sides joined. */
	printf("\n-- where the requests spent their time: `vioscope trace latency`\n");
	snprintf(cmd, sizeof cmd,
		 "'%s/vioscope' trace latency '%s'/initiator-*.vst '%s'/target-*.vst | sed 's/^/   /'",
		 bindir, out, out);
	if (run(cmd) < 0)
		printf("   (trace latency failed)\n");
	printf("\nCaptures are in %s.  Try:\n  %s/vioscope trace decode %s/target-*.vst --flag tmf,"
	       "vhost --level info\n  %s/vioscope trace decode --chrome %s/initiator-*.vst "
	       "%s/target-*.vst > trace.json   # ui.perfetto.dev: requests as flows\n"
	       "  %s/vioscope trace latency %s/*.vst --slow 3 --svg stages.svg\n",
	       out, bindir, out, bindir, out, out, bindir, out);
	return rc;
}
