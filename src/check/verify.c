/* SPDX-License-Identifier: MIT */
/*
 * `vioscope check verify`: the Disk Verification of the seed driver, on a target (through
 * the initiator) or on a file or block device (io_uring): random writes of self-describing
 * sectors and reads that check them, on every queue at several depths, then every sector
 * read back.  Any wrong sector is named (lost, stale, misdirected, torn) and fails the run.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vioscope/initiator.h>

#include "check/check_int.h"
#include "util/util.h"

static double mib(uint64_t bytes)
{
	return (double)bytes / (1 << 20);
}

static void print_phase(FILE *out, const char *name, const struct eng *e, double secs,
			const uint64_t before[ENG_OPS], const uint64_t before_bytes[ENG_OPS])
{
	uint64_t ops[ENG_OPS], bytes[ENG_OPS], res[RES_COUNT], sectors;

	eng_totals(e, ops, bytes, res, &sectors);
	fprintf(out, "  %-9s %.1f s: %llu writes (%.0f MiB), %llu reads (%.0f MiB)\n", name, secs,
		(unsigned long long)(ops[ENG_WRITE] - before[ENG_WRITE]),
		mib(bytes[ENG_WRITE] - before_bytes[ENG_WRITE]),
		(unsigned long long)(ops[ENG_READ] - before[ENG_READ]),
		mib(bytes[ENG_READ] - before_bytes[ENG_READ]));
}

int vs_check_verify(const struct vs_check_io_opts *o, char *why, size_t whylen)
{
	FILE *out = o->out ? o->out : stdout;
	unsigned queues = o->queues ? o->queues : 2, depth = o->max_depth ? o->max_depth : 32;
	struct child_target child = {.pid = -1};
	struct port_ini pi = {0};
	struct port_uring pu = {.fd = -1};
	struct eng e = {0};
	char dir[PATH_MAX], sock[PATH_MAX + 16], what[PATH_MAX + 64];
	const char *socket = o->socket;
	uint64_t ops0[ENG_OPS], bytes0[ENG_OPS], ops[ENG_OPS], bytes[ENG_OPS], res[RES_COUNT], sect;
	double t_random, t_back;
	bool have_dir = false, engine = false;
	int rc;

	if (o->device) {
		if ((rc = port_uring_open(&pu, o->device, depth, why, whylen)) < 0)
			goto out;
		snprintf(what, sizeof(what), "%s (io_uring%s)", o->device,
			 pu.direct ? ", O_DIRECT" : ", buffered");
		rc = eng_init(&e, &eng_port_uring, &pu, pu.size, pu.block, queues, o, false, why,
			      whylen);
	} else {
		if (o->target_spec) {
			snprintf(dir, sizeof(dir), "%s/vs-verify-XXXXXX", vs_tmp_dir());
			if (!mkdtemp(dir)) {
				rc = vs_fail(why, whylen, -errno, "mkdtemp: %s", strerror(errno));
				goto out;
			}
			have_dir = true;
			snprintf(sock, sizeof(sock), "%s/target.sock", dir);
			if ((rc = child_target_start(&child, o->exe, sock, o->target_spec, queues,
						     why, whylen)) < 0)
				goto out;
			socket = sock;
		}
		if ((rc = port_ini_open(&pi, socket, queues, o->lun, depth, false, why, whylen)) <
		    0)
			goto out;
		snprintf(what, sizeof(what), "LUN %u of %s%s%s", o->lun,
			 o->target_spec ? "a target on " : socket,
			 o->target_spec ? o->target_spec : "", "");
		queues = vs_ini_queue_count(pi.ini);
		rc = eng_init(&e, &eng_port_ini, &pi, pi.blocks * pi.block, pi.block, queues, o,
			      false, why, whylen);
	}
	engine = true;
	if (rc < 0)
		goto out;
	fprintf(out,
		"vioscope check verify: %s: %.0f MiB in %u-byte blocks, %u queues, depths "
		"1, 4, 16, %u, requests of 512 B to %u KiB%s\n",
		what, mib(e.nsect * VS_VB_SECTOR), e.unit * VS_VB_SECTOR, e.nthreads, e.max_depth,
		e.max_sect / 2, o->target_spec ? "" : "; its data is written over");
	fflush(out);
	e.progress = out;
	e.progress_s = 2;
	eng_totals(&e, ops0, bytes0, res, &sect);
	if ((rc = eng_run(&e, o->seconds, why, whylen)) < 0)
		goto out;
	t_random = eng_elapsed(&e);
	print_phase(out, "random", &e, t_random, ops0, bytes0);
	eng_totals(&e, ops0, bytes0, res, &sect);
	if (!vs_interrupted() && (rc = eng_readback(&e, why, whylen)) < 0)
		goto out;
	t_back = eng_elapsed(&e) - t_random;
	if (!vs_interrupted())
		print_phase(out, "read-back", &e, t_back, ops0, bytes0);
	eng_totals(&e, ops, bytes, res, &sect);
	fprintf(out,
		"  verified  %llu sectors (%.0f MiB) in %llu requests: lost %llu, stale %llu, "
		"misdirected %llu, torn %llu\n",
		(unsigned long long)sect, mib(sect * VS_VB_SECTOR),
		(unsigned long long)(ops[ENG_READ] + ops[ENG_WRITE]),
		(unsigned long long)e.err[E_LOST], (unsigned long long)e.err[E_STALE],
		(unsigned long long)e.err[E_MISDIRECTED], (unsigned long long)e.err[E_TORN]);
	rc = eng_errors(&e) ? 1 : 0;
out:
	if (pi.ini)
		port_ini_close(&pi);
	port_uring_close(&pu);
	if (child.pid > 0) {
		int st = child_target_stop(&child, SIGTERM);

		if (st != 0 && rc >= 0 && engine) {
			eng_error(&e, E_IO, "the target exited with status %d after SIGTERM", st);
			rc = 1;
		}
	}
	if (have_dir) {
		unlink(sock);
		rmdir(dir);
	}
	if (rc == 1) {
		fprintf(out, "  errors:\n");
		eng_print_errors(&e, out);
	}
	if (rc >= 0 && engine && vs_interrupted())
		fprintf(out,
			"INTERRUPTED by %s at %.1f s: %s; what was read checked as above; seed "
			"%llu (--seed to repeat)\n",
			vs_signal_name(vs_interrupted()), eng_elapsed(&e),
			"the read-back of every sector was not done", (unsigned long long)e.seed);
	else if (rc == 1)
		fprintf(out, "FAIL: %llu errors\n", (unsigned long long)eng_errors(&e));
	else if (rc == 0)
		fprintf(out, "PASS: every sector read back as last written\n");
	if (engine)
		eng_fini(&e);
	return rc;
}
