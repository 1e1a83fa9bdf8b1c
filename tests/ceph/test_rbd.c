/* SPDX-License-Identifier: MIT */
/*
 * The RBD backend against a real Ceph cluster (tests/ceph/start.sh; CEPH_CONF names its
 * ceph.conf, VIOSCOPE_CEPH_DIR its directory for restart-osd.sh): a `vioscope target` child
 * serving an RBD image, driven by the initiator.  Each scenario makes its own image through
 * librbd and removes it.  `test_rbd NAME` runs one; without CEPH_CONF it exits 77.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <rados/librados.h>
#include <rbd/librbd.h>

#include "../initiator/harness.h"

#define MIB (1ull << 20)

extern char **environ;

struct img {
	rados_t cluster;
	rados_ioctx_t io;
	char name[64];
	char spec[4300]; /* "0:rbd=rbd/NAME,conf=PATH..." */
};

static const char *conf_path(void)
{
	return getenv("CEPH_CONF");
}

/* A fresh image of size bytes in pool rbd, and the --lun spec serving it (opts appended). */
static void img_create(struct img *m, uint64_t size, const char *opts)
{
	int order = 22;

	assert_int_equal(rados_create(&m->cluster, "admin"), 0);
	assert_int_equal(rados_conf_read_file(m->cluster, conf_path()), 0);
	assert_int_equal(rados_connect(m->cluster), 0);
	assert_int_equal(rados_ioctx_create(m->cluster, "rbd", &m->io), 0);
	snprintf(m->name, sizeof(m->name), "test-rbd-%d-%ld", (int)getpid(), (long)now_ms());
	assert_int_equal(rbd_create(m->io, m->name, size, &order), 0);
	snprintf(m->spec, sizeof(m->spec), "0:rbd=rbd/%s,conf=%s%s", m->name, conf_path(),
		 opts ? opts : "");
}

static void img_resize(struct img *m, uint64_t size)
{
	rbd_image_t image;

	assert_int_equal(rbd_open(m->io, m->name, &image, NULL), 0);
	assert_int_equal(rbd_resize(image, size), 0);
	assert_int_equal(rbd_close(image), 0);
}

static void img_remove(struct img *m)
{
	int rc = rbd_remove(m->io, m->name);

	if (rc < 0)
		fprintf(stderr, "test_rbd: rbd_remove(%s): %s\n", m->name, strerror(-rc));
	rados_ioctx_destroy(m->io);
	rados_shutdown(m->cluster);
}

/* An image of size bytes served by a target child as LUN 0 (spec options appended),
 * the initiator connected with one queue, and an 8 KiB buffer. */
struct fx {
	struct img m;
	struct tgt t;
	struct vs_ini *ini;
	struct vs_ini_queue *q;
	uint8_t *b;
};

static void fx_open(struct fx *x, uint64_t size, const char *opts)
{
	struct vs_ini_opts o;

	img_create(&x->m, size, opts);
	tgt_init(&x->t);
	x->t.o.luns[0] = x->m.spec;
	assert_int_equal(tgt_start(&x->t), 0);
	o = ini_opts(&x->t, 1);
	assert_int_equal(vs_ini_open(&x->ini, &o), 0);
	x->q = vs_ini_get_queue(x->ini, 0);
	x->b = vs_ini_alloc(x->ini, 8192, 4096);
}

static void fx_close(struct fx *x)
{
	vs_ini_close(x->ini);
	tgt_fini(&x->t);
	img_remove(&x->m);
}

/* A raw CDB without data, answered within the harness's deadline. */
static void cdb_none(struct vs_ini_queue *q, struct waiter *w, const uint8_t *cdb, unsigned len)
{
	waiter_prep(w, VS_INI_READ, 0, 0, 0, NULL, 0, 0);
	assert_int_equal(vs_ini_submit_cdb(q, &w->io, 0, 0, cdb, len, false), 0);
	waiter_wait(q, w);
}

static uint16_t sense_asc(const struct waiter *w)
{
	return (uint16_t)(w->io.sense[12] << 8 | w->io.sense[13]);
}

/* The image grows by `rbd resize` (librbd, another client) while the target serves it:
 * the target's header watch sees it, raises CAPACITY DATA HAS CHANGED (2Ah/09h) on the LUN
 * and sends the event PARAM_CHANGE; the initiator rescans on that event (its READ
 * CAPACITY takes the unit attention) and its table shows the new size without a rescan
 * call; the next command is GOOD; READ CAPACITY(16) reports the new size, and the new
 * blocks can be written and read back. */
static void test_resize_unit_attention(void **state)
{
	static const uint8_t tur[6] = {0};
	static uint8_t rc16[16] = {0x9e, 0x10, [13] = 32};
	static struct waiter w;
	static struct fx x;
	struct vs_ini_queue *q;
	struct vs_ini_lun l;
	struct vs_ini *ini;
	unsigned gen;
	uint8_t *b;
	uint64_t end;

	(void)state;
	fx_open(&x, 16 * MIB, NULL);
	ini = x.ini;
	q = x.q;
	b = x.b;
	assert_int_equal(vs_ini_lun_info(ini, 0, &l), 0);
	assert_int_equal(l.num_blocks, 16 * MIB / 512);
	cdb_none(q, &w, tur, 6);
	assert_int_equal(w.io.result, 0); /* nothing pending before the resize */

	gen = vs_ini_lun_generation(ini);
	img_resize(&x.m, 32 * MIB);
	/* The watch notification and the event are asynchronous: poll, with a deadline. */
	for (end = now_ms() + 30000; vs_ini_lun_generation(ini) == gen;) {
		assert_true(now_ms() < end);
		usleep(20000);
	}
	assert_int_equal(vs_ini_lun_info(ini, 0, &l), 0);
	assert_int_equal(l.num_blocks, 32 * MIB / 512);
	cdb_none(q, &w, tur, 6);
	assert_int_equal(w.io.result, 0); /* the initiator's scan took the unit attention */

	waiter_prep(&w, VS_INI_READ, 0, 0, 0, b, 32, 1);
	assert_int_equal(vs_ini_submit_cdb(q, &w.io, 0, 0, rc16, 16, true), 0);
	waiter_wait(q, &w);
	assert_int_equal(w.io.result, 0);
	end = 0;
	for (int i = 0; i < 8; i++)
		end = end << 8 | b[i];
	assert_int_equal(end, 32 * MIB / 512 - 1);

	pattern_fill(b, 4096, 5, 24 * MIB);
	assert_int_equal(io_sync(q, VS_INI_WRITE, 0, 24 * MIB / 512, 8, b, 4096, 1), 0);
	memset(b, 0, 4096);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 24 * MIB / 512, 8, b, 4096, 1), 0);
	assert_true(pattern_check(b, 4096, 5, 24 * MIB));
	fx_close(&x);
}

/* restart-osd.sh DOWN in the background, its stderr in a file; returns once the old OSD
 * is gone (its "gone after" line), with the script's pid. */
static pid_t osd_kill_and_restart_later(unsigned down_s)
{
	char script[4096], arg[16], log[] = "/tmp/vs-test-rbd-osd-XXXXXX", buf[4096];
	posix_spawn_file_actions_t fa;
	char *argv[] = {script, arg, NULL};
	uint64_t end = now_ms() + 60000;
	int fd = mkstemp(log);
	ssize_t n;
	pid_t pid;

	assert_true(fd >= 0);
	snprintf(script, sizeof(script), "%s/restart-osd.sh", TEST_CEPH_DIR);
	snprintf(arg, sizeof(arg), "%u", down_s);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fd, 2);
	assert_int_equal(posix_spawn(&pid, script, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	for (;;) {
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		assert_true(n >= 0);
		buf[n] = 0;
		if (strstr(buf, "gone after"))
			break;
		assert_true(now_ms() < end && waitpid(pid, NULL, WNOHANG) == 0);
		usleep(20000);
	}
	fputs(buf, stderr);
	close(fd);
	unlink(log);
	return pid;
}

static void wait_script(pid_t pid)
{
	int st;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The only OSD is down longer than the LUN's timeout=3: a write and a read each fail
 * after about 3 s with CHECK CONDITION, HARDWARE ERROR, LOGICAL UNIT COMMUNICATION
 * TIME-OUT (08h/01h); the target keeps serving; once the OSD is back, I/O succeeds again
 * and a write acknowledged before the outage reads back intact. */
static void test_osd_down_timeout_sense(void **state)
{
	static struct waiter w;
	static struct fx x;
	struct vs_ini_queue *q;
	uint8_t *b;
	uint64_t t0, took, end;
	pid_t script;
	int rc;

	(void)state;
	fx_open(&x, 16 * MIB, ",timeout=3");
	q = x.q;
	b = x.b;
	pattern_fill(b, 4096, 11, 0);
	waiter_prep(&w, VS_INI_WRITE, 0, 0, 8, b, 4096, 1);
	w.io.fua = true;
	assert_int_equal(waiter_submit(q, &w), 0);
	waiter_wait(q, &w);
	assert_int_equal(w.io.result, 0); /* acknowledged, durable */

	script = osd_kill_and_restart_later(12);
	for (int read = 0; read < 2; read++) {
		pattern_fill(b + 4096, 4096, 12, 64 * 512);
		waiter_prep(&w, read ? VS_INI_READ : VS_INI_WRITE, 0, 64, 8, b + 4096, 4096, 1);
		t0 = now_ms();
		assert_int_equal(waiter_submit(q, &w), 0);
		waiter_wait(q, &w);
		took = now_ms() - t0;
		fprintf(stderr, "test_rbd: %s with the OSD down: result %d after %llu ms\n",
			read ? "read" : "write", w.io.result, (unsigned long long)took);
		assert_int_equal(w.io.result, -EIO);
		assert_int_equal(w.io.scsi_status, 2);
		assert_int_equal(w.io.sense[2] & 0xf, 4); /* HARDWARE ERROR */
		assert_int_equal(sense_asc(&w), 0x0801);  /* LOGICAL UNIT COMMUNICATION TIME-OUT */
		/* It waited for the 3 s timeout, and the timeout ended it: the OSD comes back
		 * 12 s on, and a request still waiting then would have succeeded (no upper
		 * bound on the time: on a loaded machine that is the scheduler's figure). */
		assert_true(took >= 2500);
	}
	wait_script(script); /* the OSD is up again */

	/* The client reconnects on its own; a request may still time out while the PGs peer. */
	for (end = now_ms() + 60000;;) {
		memset(b, 0, 4096);
		rc = io_sync(q, VS_INI_READ, 0, 0, 8, b, 4096, 1);
		if (!rc)
			break;
		assert_true(now_ms() < end);
	}
	assert_true(pattern_check(b, 4096, 11, 0));
	pattern_fill(b + 4096, 4096, 13, 64 * 512);
	assert_int_equal(io_sync(q, VS_INI_WRITE, 0, 64, 8, b + 4096, 4096, 1), 0);
	memset(b + 4096, 0, 4096);
	assert_int_equal(io_sync(q, VS_INI_READ, 0, 64, 8, b + 4096, 4096, 1), 0);
	assert_true(pattern_check(b + 4096, 4096, 13, 64 * 512));
	fx_close(&x);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_resize_unit_attention),
	    cmocka_unit_test(test_osd_down_timeout_sense),
	};

	if (!conf_path() || access(conf_path(), R_OK)) {
		printf("test_rbd: SKIP: no Ceph cluster (CEPH_CONF unset or unreadable: %s)\n",
		       conf_path() ? conf_path() : "unset");
		return 77;
	}
	signal(SIGPIPE, SIG_IGN);
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
