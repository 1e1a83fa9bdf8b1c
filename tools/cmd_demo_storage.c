/* SPDX-License-Identifier: MIT */
/*
 * The main job: the storage stack end to end.  A 1 GiB image of its own in /dev/shm, a
 * target and the user-space initiator in every trace flavour (the seed driver's table,
 * interleaved rounds: medians, spreads, and ratios marked when within the noise), then
 * one short run with hot-path tracing on and recorded, and an excerpt of its trace.
 * Everything runs through the CLI itself, as a user would.  The image holds a GiB of
 * memory for as long as it exists: it is removed when the demo ends, whether it finishes,
 * fails or is interrupted (Ctrl-C, SIGTERM, SIGHUP), unless --keep-image.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tools/commands.h"

static char image[PATH_MAX]; /* what the demo created; "" once removed or kept */
static bool keep_image;
static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};

static void image_remove(void)
{
	if (image[0] && !keep_image) {
		unlink(image); /* async-signal-safe */
		image[0] = '\0';
	}
}

/* Interrupted outside a child run: remove the image, then die of the signal as asked. */
static void on_stop(int sig)
{
	image_remove();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* A command; 0 when it succeeded.  While system() waits it ignores SIGINT itself, so a
 * Ctrl-C shows as the command's death by SIGINT (or the shell's exit status 128 + SIGINT):
 * the demo then stops the same way. */
static int run(const char *cmd)
{
	fflush(stdout);
	int rc = system(cmd);
	int sig = 0;

	if (rc != -1 && WIFSIGNALED(rc))
		sig = WTERMSIG(rc);
	else if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) > 128)
		sig = WEXITSTATUS(rc) - 128;
	if (sig == SIGINT || sig == SIGTERM)
		on_stop(sig);
	return rc == 0 ? 0 : -1;
}

/* An image file of our own, 0600, in /dev/shm (else /var/tmp); the benchmark fills it. */
static int image_create(void)
{
	static const char *const dirs[] = {"/dev/shm", "/var/tmp"};
	struct sigaction sa = {.sa_handler = on_stop};
	sigset_t stop, old;
	int rc = -ENOENT;

	sigemptyset(&sa.sa_mask);
	sigemptyset(&stop);
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++) {
		sigaction(stop_signals[i], &sa, NULL);
		sigaddset(&stop, stop_signals[i]);
	}
	/* No interruption between creating the file and noting it for removal. */
	sigprocmask(SIG_BLOCK, &stop, &old);
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char path[PATH_MAX];
		int fd;

		snprintf(path, sizeof(path), "%s/vioscope-demo-XXXXXX.img", dirs[i]);
		fd = mkstemps(path, 4);
		if (fd < 0) {
			rc = -errno;
			continue;
		}
		close(fd);
		memcpy(image, path, sizeof(image));
		rc = setenv("VIOSCOPE_BENCH_IMAGE", image, 1) ? -errno : 0;
		break;
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	return rc;
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

static int demo_run(const char *bindir, const char *out, const struct demo_opts *o)
{
	char cmd[3 * PATH_MAX];
	int rc = 0;

	printf("vioscope demo: a vhost-user-scsi target and the user-space virtio-scsi initiator,\n"
	       "in each trace build flavour, on a 1 GiB image in memory (the seed driver's "
	       "table):\n%s (%s).\n\n",
	       image, o->keep_image ? "kept afterwards" : "removed when the demo ends");
	snprintf(cmd, sizeof cmd, "'%s/vioscope' bench --flavours --rounds %u --time %g%s%s%s",
		 bindir, o->rounds, o->seconds, o->svg ? " --svg '" : "", o->svg ? o->svg : "",
		 o->svg ? "'" : "");
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
	static const char *const sides[][2] = {{"target", "the target (device side)"},
					       {"initiator", "the initiator (driver side)"}};
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
	snprintf(
	    cmd, sizeof cmd,
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

int demo_storage(const char *bindir, const char *out, const struct demo_opts *o)
{
	int rc;

	keep_image = o->keep_image;
	if ((rc = image_create()) < 0) {
		fprintf(stderr, "demo: cannot create an image in /dev/shm or /var/tmp: %s\n",
			strerror(-rc));
		return 1;
	}
	rc = demo_run(bindir, out, o);
	if (keep_image)
		printf("The 1 GiB image is kept: %s (remove it to free the memory).\n", image);
	image_remove();
	return rc;
}
