/* SPDX-License-Identifier: MIT */
/* The target with --poll: workers spin over rings and I/O instead of sleeping; and how much
 * CPU an idle target uses in either mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <dirent.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "deadline.h"
#include "fixture.h"

static int setup_poll(void **state)
{
	return (*state = fx_start(true, "")) ? 0 : -1;
}

/* Writes and reads on both request queues and both LUNs round-trip without a single kick
 * (the workers poll the rings), across a reconnect (the workers go from spinning to sleeping
 * and back). */
static void test_poll_rw_reconnect(void **state)
{
	struct fx *x = *state;
	static uint8_t out[2048], in[2048];

	x->fe.no_kick = true;
	for (unsigned i = 0; i < sizeof(out); i++)
		out[i] = (uint8_t)(i ^ 0x5a);
	for (unsigned round = 0; round < 2; round++) {
		for (unsigned q = 0; q < 2; q++) {
			for (unsigned lun = 0; lun < 2; lun++) {
				struct fe_cmd w = {.lun = lun, .out = out, .out_len = sizeof(out)};
				struct fe_cmd r = {.lun = lun, .in = in, .in_len = sizeof(in)};

				cdb10(w.cdb, 0x2a, 0, 64 * q + 8 * lun, 4);
				assert_int_equal(fe_scsi(&x->fe, VS_VIRTIO_SCSI_VQ_REQ0 + q, &w),
						 0);
				assert_int_equal(w.resp.status, 0);
				cdb10(r.cdb, 0x28, 0, 64 * q + 8 * lun, 4);
				memset(in, 0, sizeof(in));
				assert_int_equal(fe_scsi(&x->fe, VS_VIRTIO_SCSI_VQ_REQ0 + q, &r),
						 0);
				assert_int_equal(r.resp.status, 0);
				assert_memory_equal(in, out, sizeof(out));
			}
		}
		fe_close(&x->fe);
		assert_int_equal(fx_connect(x), 0);
	}
	for (unsigned q = 0; q < FX_NQ; q++)
		assert_int_equal(x->fe.kicks[q], 0);
}

/* The control: without --poll, a request nobody kicks for stays in the ring (bounded look,
 * 500 ms), and the kick then gets it served.  So the test above tells polling apart.
 * The request is posted once the workers sleep: a worker still in its adaptive poll
 * would rightly take it without a kick. */
static void test_event_mode_needs_kick(void **state)
{
	struct fx *x = *state;
	struct vs_virtio_scsi_cmd_req req = {0}; /* TEST UNIT READY */
	const uint64_t h = FE_SLOT(1), rs = h + FE_SLOT_RESP;
	struct vs_vq_buf bufs[2] = {{h, sizeof(req), false}, {rs, 108, true}};
	struct vs_vq_drv *vq = &x->fe.vq[VS_VIRTIO_SCSI_VQ_REQ0];
	struct pollfd p = {.fd = x->fe.call[VS_VIRTIO_SCSI_VQ_REQ0], .events = POLLIN};
	uint16_t head, used = vs_le16(vq->used->idx), got;
	uint64_t one = 1;
	uint32_t len;

	vs_vscsi_lun_encode(req.lun, 0, 0);
	memcpy(fe_host(&x->fe, h), &req, sizeof(req));
	x->fe.no_kick = true;
	assert_int_equal(fe_wait_workers_asleep(10000), 0);
	assert_int_equal(fe_post_chain(&x->fe, VS_VIRTIO_SCSI_VQ_REQ0, bufs, 2, &head), 0);
	assert_int_equal(poll(&p, 1, 500), 0);
	assert_int_equal(vs_le16(__atomic_load_n(&vq->used->idx, __ATOMIC_ACQUIRE)), used);
	assert_int_equal(write(x->fe.kick[VS_VIRTIO_SCSI_VQ_REQ0], &one, sizeof(one)), sizeof(one));
	assert_int_equal(fe_wait_used(&x->fe, VS_VIRTIO_SCSI_VQ_REQ0, &got, &len, FE_WAIT_MS), 0);
	assert_int_equal(got, head);
}

/* CPU time (ns) the target's threads (named vs-*) have used, from the kernel's own
 * accounting (/proc/self/task/TID/schedstat: time on a CPU). */
static uint64_t target_cpu_ns(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	uint64_t sum = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char path[300], comm[32] = "";
		unsigned long long ns = 0;
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		if (!(f = fopen(path, "r")))
			continue; /* the thread just exited */
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
		if (strncmp(comm, "vs-", 3))
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/schedstat", e->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		assert_int_equal(fscanf(f, "%llu", &ns), 1);
		fclose(f);
		sum += ns;
	}
	closedir(d);
	return sum;
}

/* Requests one after the other on both request queues: the load that opens the adaptive
 * poll's window (each gap is one round trip of this thread). */
static void steady_load(struct fx *x, unsigned n)
{
	static uint8_t in[4096];

	for (unsigned i = 0; i < n; i++) {
		struct fe_cmd r = {.lun = 1, .in = in, .in_len = 4096};

		cdb10(r.cdb, 0x28, 0, (i * 8) % 2040, 8);
		assert_int_equal(fe_scsi(&x->fe, VS_VIRTIO_SCSI_VQ_REQ0 + i % 2, &r), 0);
		assert_int_equal(r.resp.status, 0);
	}
}

/* A thread of the test's that spins while the target idles: what a thread that never
 * sleeps gets of a CPU on this machine now. */
struct spinner {
	pthread_t thread;
	int stop;	 /* atomic */
	uint64_t cpu_ns; /* its CPU time, when it stopped */
};

static void *spin_main(void *arg)
{
	struct spinner *sp = arg;
	struct timespec t;

	while (!__atomic_load_n(&sp->stop, __ATOMIC_RELAXED))
		;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	sp->cpu_ns = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
	return NULL;
}

/* The share of one CPU the target's threads used over a period of `ms` (at least) in
 * which nobody sends it anything; *spun: the share a spinning thread of the test's got
 * meanwhile (when spun is not NULL). */
static double idle_cpu_share(unsigned ms, double *spun)
{
	struct spinner sp = {0};
	uint64_t t0, c0, t1, c1;
	struct timespec left = {ms / 1000, (long)(ms % 1000) * 1000000};

	if (spun)
		assert_int_equal(pthread_create(&sp.thread, NULL, spin_main, &sp), 0);
	t0 = mono_ns();
	c0 = target_cpu_ns();
	while (nanosleep(&left, &left) < 0) {
		/* interrupted: sleep the rest */
	}
	c1 = target_cpu_ns();
	t1 = mono_ns();
	if (spun) {
		__atomic_store_n(&sp.stop, 1, __ATOMIC_RELAXED);
		pthread_join(sp.thread, NULL);
		*spun = (double)sp.cpu_ns / (double)(t1 - t0);
	}
	return (double)(c1 - c0) / (double)(t1 - t0);
}

/* Event mode with the adaptive poll (the default): after a steady load has opened the
 * window, an idle target sleeps: its threads use under 5% of a CPU over a second. */
static void test_event_mode_idle_sleeps(void **state)
{
	struct fx *x = *state;
	struct vs_target_stats st;
	double share;

	steady_load(x, 3000);
	vs_target_get_stats(x->g.t, &st);
	assert_true(st.requests >= 3000);
	share = idle_cpu_share(1000, NULL);
	fprintf(stderr,
		"   idle target, event mode: %.2f%% of a CPU (%llu idle spells caught "
		"polling, %llu sleeps)\n",
		100 * share, (unsigned long long)st.polled_idle, (unsigned long long)st.sleeps);
	assert_true(share < 0.05);
}

/* The control: the measurement sees a worker that does not sleep (--poll spins while it
 * owns a queue), so the test above tells sleeping apart.  Compared with a thread of the
 * test's that spins meanwhile (it asserted 10% of a CPU: a busy machine gives a spinning
 * thread less than that): a generous floor of a quarter of what that one got. */
static void test_poll_mode_idle_spins(void **state)
{
	struct fx *x = *state;
	double share, spun;

	steady_load(x, 100);
	share = idle_cpu_share(1000, &spun);
	fprintf(stderr, "   idle target, poll mode: %.2f%% of a CPU (a spinning thread: %.2f%%)\n",
		100 * share, 100 * spun);
	assert_true(share > spun / 4);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_poll_rw_reconnect, setup_poll, fx_teardown),
	    FX_TEST(test_event_mode_needs_kick),
	    FX_TEST(test_event_mode_idle_sleeps),
	    cmocka_unit_test_setup_teardown(test_poll_mode_idle_spins, setup_poll, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
