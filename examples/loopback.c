/* SPDX-License-Identifier: MIT */
/*
 * loopback: vioscope's target and initiator as libraries, in one program built against an
 * installed vioscope.  The target serves a 1 MiB RAM LUN on a Unix socket (its own thread);
 * the initiator connects to it as a vhost-user frontend, writes 4 KiB, reads them back and
 * compares.  Exit 0 and one line when they match.
 *
 *   cmake: target_link_libraries(loopback PRIVATE vioscope::target-cold vioscope::initiator-cold)
 *   pkg-config: vioscope-target-cold vioscope-initiator-cold
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vioscope/initiator.h>
#include <vioscope/target.h>

static volatile sig_atomic_t stop;

static void *serve(void *target)
{
	return (void *)(intptr_t)vs_target_run(target, &stop);
}

static void io_done(struct vs_ini_io *io)
{
	*(int *)io->opaque = 1;
}

/* One request, polled until it completes (10 s at most): its result. */
static int run_io(struct vs_ini_queue *q, enum vs_ini_op op, struct iovec *iov, uint32_t nblocks)
{
	int done = 0;
	struct vs_ini_io io = {.op = op,
			       .lun = 0,
			       .lba = 0,
			       .nblocks = nblocks,
			       .iov = iov,
			       .iovcnt = 1,
			       .done = io_done,
			       .opaque = &done};
	time_t give_up = time(NULL) + 10;
	int rc = vs_ini_submit(q, &io);

	if (rc)
		return rc;
	while (!done && time(NULL) < give_up)
		vs_ini_poll(q, 1);
	return done ? io.result : -ETIMEDOUT;
}

int main(void)
{
	char dir[] = "/tmp/vioscope-loopback-XXXXXX", sock[64], err[512];
	struct vs_target_lun lun = {.id = 0, .spec = "ram=1M"};
	struct vs_target_config cfg = {.socket_path = sock, .nluns = 1, .luns = &lun};
	struct vs_ini_opts opts = {.socket = sock, .queues = 1};
	struct vs_target *t = NULL;
	struct vs_ini *ini = NULL;
	struct vs_ini_lun info;
	struct iovec iov;
	pthread_t server;
	uint8_t *buf;
	int rc = 1, wrc, rrc;

	if (!mkdtemp(dir))
		return 1;
	snprintf(sock, sizeof(sock), "%s/vhost.sock", dir);
	if (vs_target_create(&t, &cfg, err, sizeof(err))) {
		fprintf(stderr, "loopback: target: %s\n", err);
		goto out;
	}
	if (pthread_create(&server, NULL, serve, t))
		goto out;
	if ((wrc = vs_ini_open(&ini, &opts)) || vs_ini_lun_info(ini, 0, &info)) {
		fprintf(stderr, "loopback: initiator: %s\n", strerror(wrc ? -wrc : ENODEV));
		goto stop;
	}
	iov.iov_len = 4096;
	iov.iov_base = buf = vs_ini_alloc(ini, iov.iov_len, 4096);
	for (size_t i = 0; buf && i < iov.iov_len; i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	wrc = buf ? run_io(vs_ini_get_queue(ini, 0), VS_INI_WRITE, &iov,
			   (uint32_t)(iov.iov_len / info.block_size))
		  : -ENOMEM;
	if (buf)
		memset(buf, 0, iov.iov_len);
	rrc = wrc ? wrc
		  : run_io(vs_ini_get_queue(ini, 0), VS_INI_READ, &iov,
			   (uint32_t)(iov.iov_len / info.block_size));
	for (size_t i = 0; !rrc && i < iov.iov_len; i++)
		if (buf[i] != (uint8_t)(i * 7 + 1))
			rrc = -EIO;
	if (wrc || rrc) {
		fprintf(stderr, "loopback: %s: %s\n", wrc ? "write" : "read back",
			strerror(-(wrc ? wrc : rrc)));
	} else {
		printf("loopback: LUN 0 (%s %s, %llu blocks of %u bytes): 4096 bytes written and "
		       "read back\n",
		       info.vendor, info.product, (unsigned long long)info.num_blocks,
		       info.block_size);
		rc = 0;
	}
stop:
	vs_ini_close(ini);
	stop = 1;
	vs_target_wake(t);
	pthread_join(server, NULL);
out:
	if (t && vs_target_destroy(t))
		rc = 1;
	rmdir(dir);
	return rc;
}
