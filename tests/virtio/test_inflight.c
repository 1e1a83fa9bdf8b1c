/* SPDX-License-Identifier: MIT */
/*
 * In-flight tracking of a device-side ring (vhost-user INFLIGHT_SHMFD, src/virtio/inflight.c):
 * what the region records as requests are taken and answered, what a device restarted after
 * being killed at each point of that finds and resubmits (every request taken and never
 * answered, exactly once, oldest first, before anything new), and the regions it refuses.
 * A "restart" here is what a new target process does: a fresh vs_vq_dev on the same guest
 * rings and the same region, at the base the frontend sends (QEMU sends the used index after
 * a back-end crash).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "guest.h"

struct fx {
	struct guest g;
	struct vs_vq_dev vq;
	struct vs_vq_elem elem;
	struct vs_vhost_inflight_split *region;
	struct vs_inflight_entry scratch[QSIZE];
	char why[192];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f || guest_init(&f->g))
		return -1;
	f->region = aligned_alloc(64, VS_VHOST_INFLIGHT_RING_BYTES(QSIZE));
	if (!f->region)
		return -1;
	memset(f->region, 0, VS_VHOST_INFLIGHT_RING_BYTES(QSIZE)); /* as GET_INFLIGHT_FD's */
	/* Every head a one-descriptor chain of its own. */
	for (unsigned h = 0; h < QSIZE; h++)
		guest_desc(&f->g, GPA_DESC, h, GPA_DATA + 64ull * h, 64, VS_VRING_DESC_F_WRITE, 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	guest_fini(&f->g);
	free(f->region);
	free(f);
	return 0;
}

/* A device (re)starting on the rings and the region, at base. */
static int start(struct fx *f, uint16_t base)
{
	assert_int_equal(guest_vq_init(&f->g, &f->vq, false, false), 0);
	f->vq.last_avail_idx = f->vq.shadow_avail_idx = base;
	f->why[0] = 0;
	return vs_vq_dev_set_inflight(&f->vq, f->region, f->scratch, f->why, sizeof(f->why));
}

/* A device killed now and restarted as QEMU restarts one: at the used index. */
static int restart(struct fx *f)
{
	return start(f, vs_le16(f->g.used->idx));
}

static uint16_t pop(struct fx *f)
{
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), 0);
	assert_false(f->elem.bad);
	return f->elem.head;
}

static void assert_nothing_to_pop(struct fx *f)
{
	assert_int_equal(vs_vq_dev_avail_count(&f->vq), 0);
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), -EAGAIN);
}

static unsigned marked(struct fx *f)
{
	unsigned n = 0;

	for (unsigned i = 0; i < QSIZE; i++)
		n += f->region->desc[i].inflight;
	return n;
}

/* A fresh region is laid out; a taken head is marked with its order, an answered one not. */
static void take_and_answer(void **state)
{
	struct fx *f = *state;

	assert_int_equal(start(f, 0), 0);
	assert_int_equal(f->region->version, VS_VHOST_INFLIGHT_VERSION);
	assert_int_equal(f->region->desc_num, QSIZE);
	guest_avail(&f->g, 5);
	guest_avail(&f->g, 2);
	guest_avail(&f->g, 9);
	assert_int_equal(pop(f), 5);
	assert_int_equal(pop(f), 2);
	assert_int_equal(pop(f), 9);
	assert_int_equal(marked(f), 3);
	assert_true(f->region->desc[5].counter < f->region->desc[2].counter);
	assert_true(f->region->desc[2].counter < f->region->desc[9].counter);
	vs_vq_dev_fill(&f->vq, 2, 0);
	vs_vq_dev_fill(&f->vq, 5, 0);
	vs_vq_dev_flush(&f->vq);
	assert_int_equal(marked(f), 1);
	assert_int_equal(f->region->desc[9].inflight, 1);
	assert_int_equal(f->region->used_idx, 2);
	assert_int_equal(f->region->last_batch_head, 5);
}

/* Killed with three requests taken: the new device gives them out first, oldest first, each
 * once, then what the driver made available after them; the ring resumes where it was. */
static void killed_with_requests_taken_resubmits_them_oldest_first(void **state)
{
	struct fx *f = *state;

	assert_int_equal(start(f, 0), 0);
	for (uint16_t h = 0; h < 4; h++)
		guest_avail(&f->g, (uint16_t)(7 - h)); /* heads 7 6 5 4 */
	assert_int_equal(pop(f), 7);
	assert_int_equal(pop(f), 6);
	vs_vq_dev_push(&f->vq, 7, 0);
	assert_int_equal(pop(f), 5);
	assert_int_equal(pop(f), 4);
	guest_avail(&f->g, 11); /* made available while the device was down */

	assert_int_equal(restart(f), 0);
	assert_int_equal(vs_vq_dev_avail_count(&f->vq), 4);
	assert_int_equal(pop(f), 6);
	assert_int_equal(pop(f), 5);
	assert_int_equal(pop(f), 4);
	assert_int_equal(pop(f), 11);
	assert_nothing_to_pop(f);
	/* Answered once each: the marks go, and nothing is in flight for a later restart. */
	vs_vq_dev_push(&f->vq, 4, 0);
	vs_vq_dev_push(&f->vq, 6, 0);
	vs_vq_dev_push(&f->vq, 11, 0);
	vs_vq_dev_push(&f->vq, 5, 0);
	assert_int_equal(marked(f), 0);
	assert_int_equal(vs_le16(f->g.used->idx), 5);
	assert_int_equal(restart(f), 0);
	assert_nothing_to_pop(f);
}

/* Resubmission order is the order taken, not the heads' numbers nor avail slots. */
static void resubmission_follows_the_order_taken(void **state)
{
	struct fx *f = *state;
	const uint16_t heads[] = {12, 3, 15, 0, 8};

	assert_int_equal(start(f, 0), 0);
	for (unsigned i = 0; i < 5; i++)
		guest_avail(&f->g, heads[i]);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(pop(f), heads[i]);
	assert_int_equal(restart(f), 0);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(pop(f), heads[i]);
	assert_nothing_to_pop(f);
	/* And a second crash before any is answered resubmits the same, in the same order. */
	assert_int_equal(restart(f), 0);
	for (unsigned i = 0; i < 5; i++)
		assert_int_equal(pop(f), heads[i]);
	assert_nothing_to_pop(f);
}

/* Killed after publishing the used index, before clearing the batch's marks: those requests
 * were answered (the driver saw them) and are not resubmitted; the others are. */
static void killed_between_used_index_and_clearing_resubmits_only_the_unanswered(void **state)
{
	struct fx *f = *state;

	assert_int_equal(start(f, 0), 0);
	for (uint16_t h = 1; h <= 4; h++)
		guest_avail(&f->g, h);
	for (uint16_t h = 1; h <= 4; h++)
		assert_int_equal(pop(f), h);
	vs_vq_dev_fill(&f->vq, 3, 0);
	vs_vq_dev_fill(&f->vq, 1, 0);
	/* vs_vq_dev_flush's first half: the index the driver reads, and no more. */
	__atomic_store_n(&f->g.used->idx, vs_le16(2), __ATOMIC_RELEASE);
	assert_int_equal(marked(f), 4);

	assert_int_equal(restart(f), 0);
	assert_int_equal(marked(f), 2);
	assert_int_equal(f->region->used_idx, 2);
	assert_int_equal(pop(f), 2);
	assert_int_equal(pop(f), 4);
	assert_nothing_to_pop(f);
}

/* Killed after writing used entries but before publishing the index: the driver never saw
 * them answered, so they are resubmitted with the rest. */
static void killed_before_publishing_the_used_index_resubmits_the_batch(void **state)
{
	struct fx *f = *state;

	assert_int_equal(start(f, 0), 0);
	guest_avail(&f->g, 1);
	guest_avail(&f->g, 2);
	assert_int_equal(pop(f), 1);
	assert_int_equal(pop(f), 2);
	vs_vq_dev_fill(&f->vq, 2, 0);
	assert_int_equal(vs_le16(f->g.used->idx), 0);

	assert_int_equal(restart(f), 0);
	assert_int_equal(pop(f), 1);
	assert_int_equal(pop(f), 2);
	assert_nothing_to_pop(f);
}

/* Killed between taking a head and marking it: the region does not know it, and the ring
 * resumes at its avail slot, so it is taken again from the ring, once. */
static void killed_before_marking_takes_the_head_again_from_the_ring(void **state)
{
	struct fx *f = *state;

	assert_int_equal(start(f, 0), 0);
	guest_avail(&f->g, 6);
	guest_avail(&f->g, 9);
	assert_int_equal(pop(f), 6);
	assert_int_equal(pop(f), 9);
	f->region->desc[9].inflight = 0; /* its mark never stored */

	assert_int_equal(restart(f), 0);
	assert_int_equal(vs_vq_dev_avail_count(&f->vq), 2);
	assert_int_equal(pop(f), 6); /* resubmitted */
	assert_int_equal(pop(f), 9); /* from its avail slot */
	assert_nothing_to_pop(f);
}

/* The ring's indices wrap at 65536: the region follows. */
static void indices_wrapping_past_65535(void **state)
{
	struct fx *f = *state;

	f->g.avail_idx = 65534;
	__atomic_store_n(&f->g.avail->idx, vs_le16(65534), __ATOMIC_RELEASE);
	f->g.used->idx = vs_le16(65534);
	assert_int_equal(start(f, 65534), 0);
	for (uint16_t h = 0; h < 4; h++)
		guest_avail(&f->g, h);
	for (uint16_t h = 0; h < 4; h++)
		assert_int_equal(pop(f), h);
	vs_vq_dev_push(&f->vq, 0, 0);
	vs_vq_dev_push(&f->vq, 1, 0);
	vs_vq_dev_push(&f->vq, 2, 0); /* used index 65534 + 3 = 1 */
	assert_int_equal(f->region->used_idx, 1);
	assert_int_equal(restart(f), 0);
	assert_int_equal(pop(f), 3);
	assert_nothing_to_pop(f);
	assert_int_equal(f->vq.last_avail_idx, 2);
}

/* A region with nothing in flight whose used index is another ring's (the driver reset its
 * device; the frontend kept the region): accepted, the ring starts where it is. */
static void nothing_in_flight_after_a_driver_reset_is_accepted(void **state)
{
	struct fx *f = *state;

	assert_int_equal(start(f, 0), 0);
	f->region->used_idx = 40000;
	f->region->last_batch_head = 3;
	assert_int_equal(restart(f), 0);
	assert_int_equal(f->region->used_idx, 0);
	guest_avail(&f->g, 3);
	assert_int_equal(pop(f), 3);
}

/* Each lie the region can tell is refused, with why, and the ring is left untracked (its
 * pops take from the ring only). */
static void assert_refused(struct fx *f, const char *needle)
{
	assert_int_equal(restart(f), -EPROTO);
	assert_non_null(strstr(f->why, needle));
	assert_null(f->vq.inflight);
	assert_int_equal(f->vq.resubmit_num, 0);
}

static void a_region_that_lies_is_refused(void **state)
{
	struct fx *f = *state;

	assert_int_equal(start(f, 0), 0);
	for (uint16_t h = 0; h < 3; h++)
		guest_avail(&f->g, h);
	for (uint16_t h = 0; h < 3; h++)
		assert_int_equal(pop(f), h);
	vs_vq_dev_push(&f->vq, 0, 0);
	struct vs_vhost_inflight_split saved = *f->region;
	struct vs_vhost_inflight_desc d1 = f->region->desc[1];

	f->region->version = 2;
	assert_refused(f, "version 2");
	f->region->version = VS_VHOST_INFLIGHT_VERSION;
	f->region->desc_num = QSIZE * 2;
	assert_refused(f, "the ring has 16");
	*f->region = saved;
	f->region->desc[1].inflight = 7;
	assert_refused(f, "marked 7");
	f->region->desc[1] = d1;
	f->region->used_idx = (uint16_t)(1 - QSIZE - 1); /* 17 behind */
	assert_refused(f, "more than the ring holds");
	*f->region = saved;
	f->region->used_idx = 0; /* one behind: a batch to clear... */
	f->region->desc[0].inflight = 1;
	f->region->last_batch_head = QSIZE + 3; /* ...through a head beyond the ring */
	assert_refused(f, "beyond the ring");
	*f->region = saved;
	f->region->desc[0].inflight = 0;
	for (unsigned h = 3; h < 8; h++) /* 7 in flight; the driver made 2 available */
		f->region->desc[h].inflight = 1;
	assert_refused(f, "in flight");
	for (unsigned h = 3; h < 8; h++)
		f->region->desc[h].inflight = 0;
	/* The truth again: accepted. */
	assert_int_equal(restart(f), 0);
	assert_int_equal(pop(f), 1);
	assert_int_equal(pop(f), 2);
	assert_nothing_to_pop(f);
}

int main(void)
{
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(take_and_answer),
	    T(killed_with_requests_taken_resubmits_them_oldest_first),
	    T(resubmission_follows_the_order_taken),
	    T(killed_between_used_index_and_clearing_resubmits_only_the_unanswered),
	    T(killed_before_publishing_the_used_index_resubmits_the_batch),
	    T(killed_before_marking_takes_the_head_again_from_the_ring),
	    T(indices_wrapping_past_65535),
	    T(nothing_in_flight_after_a_driver_reset_is_accepted),
	    T(a_region_that_lies_is_refused),
	};
	return cmocka_run_group_tests_name("virtio.inflight", tests, NULL, NULL);
}
