/* SPDX-License-Identifier: MIT */
/*
 * A hostile guest rewrites descriptors while the target pops them (issue 8).  A racing
 * thread keeps changing the descriptors of chains in flight: addresses out of guest
 * memory or into its hole, lengths cut or zeroed, chains cut short, INDIRECT where it was
 * not negotiated.  Every chain must come back exactly once, within the lengths the guest
 * gave, either refused or answered; a READ answered GOOD must have read the right data;
 * and once the racing stops, the target works as before.
 *
 * The target runs in this process (its library, over the real socket), so that the
 * ThreadSanitizer build of this test (scripts/test.sh) sees the target's threads while a
 * guest races it: the serving thread, the control thread and the worker handing queues,
 * requests and completions to each other.  (The guest's race itself goes through two
 * mappings of one memory file, the frontend's and the target's, which ThreadSanitizer
 * tracks as unrelated memory: the copy-once rule is what keeps that race harmless, and the
 * answers checked below are what shows it.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <vioscope/target.h>

#include "hostile.h"
#include "util/util.h"

#define REQ0	 VS_VIRTIO_SCSI_VQ_REQ0
#define QSIZE	 256
#define COMMANDS 4000
/* On a loaded machine the racer may get no CPU while the first 4,000 run (or while the
 * next 36,000 run: 1 run in 40 beside three CPU hogs): go on until one chain in flight
 * was hit, for up to this long. */
#define HIT_DEADLINE_MS 60000
#define RACER_START_MS 10000
#define DEPTH	       32
#define BLOCKS	       64 /* LBAs read, each filled with its own pattern first */

static uint8_t pattern(unsigned lba, unsigned k)
{
	return (uint8_t)(lba * 37 + k * 3 + 1);
}

/* ---- the racing guest thread ------------------------------------------------------------- */
struct racer {
	struct fe *fe;
	pthread_mutex_t *mu; /* orders it with our own writes of the table (fe_post) */
	pthread_t thr;
	int stop;
	uint64_t rewrites;
	uint32_t seed;
};

static uint32_t rnd(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

static void *race(void *arg)
{
	struct racer *r = arg;
	struct vs_vring_desc *desc = r->fe->vq[REQ0].desc;

	while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
		pthread_mutex_lock(r->mu);
		for (int i = 0; i < 2; i++) {
			struct vs_vring_desc *d = &desc[rnd(&r->seed) % QSIZE];
			uint16_t flags = vs_le16(__atomic_load_n(&d->flags, __ATOMIC_RELAXED));
			uint32_t len = vs_le32(__atomic_load_n(&d->len, __ATOMIC_RELAXED));

			switch (rnd(&r->seed) % 6) {
			case 0: /* out of guest memory */
				__atomic_store_n(&d->addr, vs_le64(0xdead0000000ull),
						 __ATOMIC_RELAXED);
				break;
			case 1: /* into the hole between the regions */
				__atomic_store_n(&d->addr, vs_le64(FE_GAP_START), __ATOMIC_RELAXED);
				break;
			case 2:
				__atomic_store_n(&d->len, 0, __ATOMIC_RELAXED);
				break;
			case 3:
				__atomic_store_n(&d->len, vs_le32(len / 2), __ATOMIC_RELAXED);
				break;
			case 4: /* the chain ends here */
				__atomic_store_n(&d->flags, vs_le16(flags & ~VS_VRING_DESC_F_NEXT),
						 __ATOMIC_RELAXED);
				break;
			case 5: /* not negotiated */
				__atomic_store_n(&d->flags,
						 vs_le16(flags | VS_VRING_DESC_F_INDIRECT),
						 __ATOMIC_RELAXED);
				break;
			}
		}
		__atomic_add_fetch(&r->rewrites, 2, __ATOMIC_RELAXED);
		pthread_mutex_unlock(r->mu);
	}
	return NULL;
}

/* ---- the test ------------------------------------------------------------------------------ */
static int read_block(struct fe *fe, pthread_mutex_t *mu, unsigned slot, unsigned lba,
		      uint16_t *head)
{
	struct fe_cmd c = {.tag = lba, .in_len = 512};
	int rc;

	uint64_t one = 1;

	cdb10(c.cdb, 0x28, 0, lba, 1);
	memset(fe_slot_in(fe, slot), 0, 512);
	/* Written under the lock, kicked outside it: the racing goes on while the target pops. */
	pthread_mutex_lock(mu);
	rc = fe_post(fe, REQ0, slot, &c, head);
	pthread_mutex_unlock(mu);
	if (!rc && write(fe->kick[REQ0], &one, sizeof(one)) != sizeof(one))
		rc = -errno;
	return rc;
}

static void descriptors_rewritten_while_the_target_pops_them(void **state)
{
	const struct fe_opts opts = {.nq = 3, .qsize = {128, 128, QSIZE}, .no_indirect = true};
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	struct racer r = {.mu = &mu, .seed = 0x9e3779b9u};
	uint16_t slot_of[QSIZE];
	unsigned lba_of[DEPTH], posted = 0, good = 0, refused = 0, inflight = 0;
	const struct target_opts to = {.in_process = true, .luns = {"0:ram=16M"}};
	struct vs_target_stats st;
	struct target tg;
	struct gmem g;
	struct fe fe;

	(void)state;
	assert_int_equal(target_init(&tg, "race", NULL), 0);
	assert_int_equal(target_start(&tg, &to), 0);
	assert_int_equal(gmem_init(&g), 0);
	assert_int_equal(fe_open(&fe, tg.sock, &g, &opts), 0);
	for (unsigned lba = 0; lba < BLOCKS; lba++) {
		uint8_t b[512];
		struct fe_cmd c = {.out = b, .out_len = 512};

		for (unsigned k = 0; k < 512; k++)
			b[k] = pattern(lba, k);
		cdb10(c.cdb, 0x2a, 0, lba, 1);
		assert_int_equal(fe_scsi(&fe, REQ0, &c), 0);
		assert_int_equal(c.resp.status, 0);
	}

	r.fe = &fe;
	fe.no_kick = true; /* read_block kicks */
	assert_int_equal(pthread_create(&r.thr, NULL, race, &r), 0);
	/* The racer must be running before the first command is posted. */
	uint64_t deadline = vs_mono_ns() + RACER_START_MS * 1000000ull;
	while (__atomic_load_n(&r.rewrites, __ATOMIC_RELAXED) == 0 && vs_mono_ns() < deadline)
		sched_yield();
	assert_true(__atomic_load_n(&r.rewrites, __ATOMIC_RELAXED) > 0);
	const uint64_t hit_deadline = vs_mono_ns() + HIT_DEADLINE_MS * 1000000ull;
	/* Slots 1..DEPTH, one command each at a time. */
	for (unsigned s = 0; s < DEPTH; s++, posted++, inflight++) {
		uint16_t head;
		lba_of[s] = posted % BLOCKS;
		assert_int_equal(read_block(&fe, &mu, s + 1, lba_of[s], &head), 0);
		slot_of[head] = (uint16_t)s;
	}
	while (inflight > 0) {
		struct vs_virtio_scsi_cmd_resp resp;
		uint16_t head;
		uint32_t len;
		unsigned s;

		assert_int_equal(fe_wait_used(&fe, REQ0, &head, &len, FE_WAIT_MS), 0);
		s = slot_of[head];
		inflight--;
		memcpy(&resp, gmem_host(&g, FE_SLOT(s + 1) + FE_SLOT_RESP), sizeof(resp));
		if (len >= sizeof(resp) && resp.response == VS_VIRTIO_SCSI_S_OK &&
		    resp.status == 0 && len == sizeof(resp) + 512) {
			const uint8_t *data = fe_slot_in(&fe, s + 1);
			for (unsigned k = 0; k < 512; k++)
				assert_int_equal(data[k], pattern(lba_of[s], k));
			good++;
		} else {
			refused++;
		}
		if (posted < COMMANDS || (refused == 0 && vs_mono_ns() < hit_deadline)) {
			lba_of[s] = posted % BLOCKS;
			assert_int_equal(read_block(&fe, &mu, s + 1, lba_of[s], &head), 0);
			slot_of[head] = (uint16_t)s;
			posted++;
			inflight++;
		}
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(r.thr, NULL);
	assert_int_equal(inflight, 0);
	assert_int_equal(good + refused, posted);
	assert_true(r.rewrites > 0);
	/* The racing hit chains in flight (nothing else makes a READ of a written block fail). */
	assert_true(refused > 0);
	vs_target_get_stats(tg.t, &st);
	assert_int_equal(st.requests + st.bad_requests, BLOCKS + posted);

	/* Racing over: the same queue serves as before. */
	fe.no_kick = false;
	for (unsigned lba = 0; lba < BLOCKS; lba++) {
		struct fe_cmd c = {.in_len = 512};
		cdb10(c.cdb, 0x28, 0, lba, 1);
		assert_int_equal(fe_scsi(&fe, REQ0, &c), 0);
		assert_int_equal(c.resp.response, VS_VIRTIO_SCSI_S_OK);
		assert_int_equal(c.resp.status, 0);
		for (unsigned k = 0; k < 512; k++)
			assert_int_equal(((uint8_t *)fe_slot_in(&fe, 0))[k], pattern(lba, k));
	}
	fprintf(stderr,
		"race: %u commands, %u answered GOOD, %u refused or failed, %llu rewrites\n",
		posted, good, refused, (unsigned long long)r.rewrites);
	fe_close(&fe);
	gmem_fini(&g);
	target_fini(&tg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(descriptors_rewritten_while_the_target_pops_them),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
