/* SPDX-License-Identifier: MIT */
/*
 * No wait inside the target is unbounded (issue 8, defect 3): a worker that does not hand
 * a queue back within --worker-timeout is given up on, and the target fails cleanly (its
 * backends flushed, exit status 1) instead of hanging, whether a frontend asked for the
 * queue (GET_VRING_BASE) or the operator for the end (SIGTERM).  The stuck worker is made
 * with the backend's test delay: a READ whose completion is held back far longer.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostile.h"

#define REQ0 VS_VIRTIO_SCSI_VQ_REQ0

/* LUN 0 a file, LUN 1 in RAM whose bios complete 60 s late; workers give up after 2 s. */
static const char *const args[] = {
    "--testing",	"--lun", "0:file=%F", "--lun", "1:ram=16M,delay=60000000",
    "--worker-timeout", "2",	 NULL};

/* Start the target; a WRITE to the file LUN (completed), then a READ of the slow LUN
 * left in flight. */
static void write_then_stick(struct sess *s, uint8_t *data)
{
	struct fe_cmd wr = {.out = data, .out_len = 4096}, rd = {.lun = 1, .in_len = 512};
	uint16_t head;

	assert_int_equal(sess_start(s, args, &(struct fe_opts){.nq = 3}), 0);
	for (unsigned i = 0; i < 4096; i++)
		data[i] = (uint8_t)(i * 13 + 1);
	cdb10(wr.cdb, 0x2a, 0, 16, 8);
	assert_int_equal(fe_scsi(&s->fe, REQ0, &wr), 0);
	assert_int_equal(wr.resp.status, 0);
	cdb10(rd.cdb, 0x28, 0, 0, 1);
	memset(fe_slot_in(&s->fe, 1), 0xa5, 512);
	assert_int_equal(fe_post(&s->fe, REQ0, 1, &rd, &head), 0);
	/* In flight once the RAM LUN copied its data (zeros); its completion waits 60 s. */
	for (int64_t deadline = now_ms() + FE_WAIT_MS; *(uint8_t *)fe_slot_in(&s->fe, 1);) {
		assert_true(now_ms() < deadline);
		usleep(1000);
	}
}

/* The target exited 1 within the deadline, said why, and the WRITE is in the file. */
static void assert_failed_cleanly(struct sess *s, int status, int64_t took_ms, const uint8_t *data)
{
	uint8_t disk[4096];
	int fd;

	if (status != 1 || !proc_log_wait(&s->p, "given up on", 0))
		proc_log_dump(&s->p);
	assert_int_equal(status, 1);
	assert_true(proc_log_wait(&s->p, "did not finish 'stop' of queue 2 within 2000 ms", 0));
	assert_true(proc_log_wait(&s->p, "the backends were flushed", 0));
	assert_true(took_ms < 20000); /* the READ was still 40 s from completing */
	fd = open(s->p.file, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, disk, sizeof(disk), 16 * 512), sizeof(disk));
	close(fd);
	assert_memory_equal(disk, data, sizeof(disk));
	proc_cleanup(&s->p);
}

/* GET_VRING_BASE must stop the queue; its worker cannot (the READ is held back): given up. */
static void queue_stop_past_the_worker_timeout_fails_cleanly(void **state)
{
	struct vs_vhost_vring_state st = {.index = REQ0};
	struct sess *s = *state;
	uint8_t data[4096];
	int64_t t0;
	int status, sig;

	write_then_stick(s, data);
	t0 = now_ms();
	assert_int_equal(fe_send(&s->fe, VS_VHOST_GET_VRING_BASE, 0, &st, sizeof(st), NULL, 0), 0);
	/* It ends by itself: no signal. */
	status = proc_stop(&s->p, 0, FE_WAIT_MS, &sig);
	assert_int_equal(sig, 0);
	assert_failed_cleanly(s, status, now_ms() - t0, data);
}

/* SIGTERM with the same READ held back: the target still stops, and flushes. */
static void sigterm_past_the_worker_timeout_still_stops(void **state)
{
	struct sess *s = *state;
	uint8_t data[4096];
	int64_t t0;
	int status, sig;

	write_then_stick(s, data);
	t0 = now_ms();
	status = proc_stop(&s->p, SIGTERM, FE_WAIT_MS, &sig);
	assert_int_equal(sig, 0);
	assert_failed_cleanly(s, status, now_ms() - t0, data);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(queue_stop_past_the_worker_timeout_fails_cleanly,
					    sess_setup, sess_teardown),
	    cmocka_unit_test_setup_teardown(sigterm_past_the_worker_timeout_still_stops, sess_setup,
					    sess_teardown),
	};

	return hostile_init(argc, argv) ?: cmocka_run_group_tests(tests, NULL, NULL);
}
