/* SPDX-License-Identifier: MIT */
/* Driver-side queue alone (validation of what a device writes), and both halves talking
 * through one ring in fake guest memory. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "guest.h"

#define DSIZE	 8
#define GPA_RING 0x1000ull
#define TOTAL	 100000u

struct fx {
	struct guest g;
	struct vs_vq_drv drv;
	struct vs_vq_dev dev;
	struct vs_vq_elem elem;
};

static int setup_flags(void **state, bool event_idx)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f || guest_init(&f->g))
		return -1;
	if (vs_vq_drv_init(&f->drv, DSIZE, gva(&f->g, GPA_RING), event_idx, true))
		return -1;
	if (vs_vq_dev_init(&f->dev, DSIZE, f->drv.desc, f->drv.avail, f->drv.used, event_idx, true,
			   0))
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_flags(state, false);
}

static int setup_event_idx(void **state)
{
	return setup_flags(state, true);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	vs_vq_drv_destroy(&f->drv);
	guest_fini(&f->g);
	free(f);
	return 0;
}

/* Device-side write of a used entry, bypassing the device queue (a misbehaving device). */
static void used_write(struct fx *f, uint32_t id, uint32_t len)
{
	uint16_t idx = vs_le16(f->drv.used->idx);
	f->drv.used->ring[idx % DSIZE].id = vs_le32(id);
	f->drv.used->ring[idx % DSIZE].len = vs_le32(len);
	f->drv.used->idx = vs_le16((uint16_t)(idx + 1));
}

static const struct vs_vq_buf two_bufs[2] = {
    {.addr = GPA_C, .len = 16, .write = false},
    {.addr = GPA_B, .len = 64, .write = true},
};

/* A used entry naming the head that is in flight, with len <= its writable bytes, is taken
 * and its descriptors return to the free list. */
static void test_drv_used_ok(void **state)
{
	struct fx *f = *state;
	uint16_t head, h2;
	uint32_t len;
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &head), 0);
	assert_int_equal(f->drv.num_free, DSIZE - 2);
	assert_int_equal(vs_vq_drv_get_used(&f->drv, &h2, &len), -EAGAIN);
	used_write(f, head, 64);
	assert_true(vs_vq_drv_has_used(&f->drv));
	assert_int_equal(vs_vq_drv_get_used(&f->drv, &h2, &len), 0);
	assert_int_equal(h2, head);
	assert_int_equal(len, 64);
	assert_int_equal(f->drv.num_free, DSIZE);
}

/* Rule: a used id >= queue size breaks the driver queue. */
static void test_drv_used_id_beyond_size(void **state)
{
	struct fx *f = *state;
	uint16_t head;
	uint32_t len;
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &head), 0);
	used_write(f, DSIZE, 0);
	assert_int_equal(vs_vq_drv_get_used(&f->drv, &head, &len), -EIO);
	assert_true(f->drv.broken);
}

/* Rule: a used id that is not a chain in flight (here: a non-head descriptor). */
static void test_drv_used_id_not_in_flight(void **state)
{
	struct fx *f = *state;
	uint16_t head;
	uint32_t len;
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &head), 0);
	used_write(f, (head + 1) % DSIZE, 0);
	assert_int_equal(vs_vq_drv_get_used(&f->drv, &head, &len), -EIO);
	assert_true(f->drv.broken);
}

/* Rule: the used len may not exceed the chain's device-writable bytes. */
static void test_drv_used_len_too_big(void **state)
{
	struct fx *f = *state;
	uint16_t head;
	uint32_t len;
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &head), 0);
	used_write(f, head, 65);
	assert_int_equal(vs_vq_drv_get_used(&f->drv, &head, &len), -EIO);
}

/* Rule: used->idx may not run more than the queue size ahead. */
static void test_drv_used_idx_runaway(void **state)
{
	struct fx *f = *state;
	uint16_t head;
	uint32_t len;
	f->drv.used->idx = vs_le16(DSIZE + 1);
	assert_int_equal(vs_vq_drv_get_used(&f->drv, &head, &len), -EIO);
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &head), -EIO);
}

/* add refuses readable-after-writable chains and runs out of descriptors with -ENOSPC. */
static void test_drv_add_rules(void **state)
{
	struct fx *f = *state;
	const struct vs_vq_buf bad[2] = {two_bufs[1], two_bufs[0]};
	uint16_t head;
	assert_int_equal(vs_vq_drv_add(&f->drv, bad, 2, &head), -EINVAL);
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 0, &head), -EINVAL);
	for (unsigned i = 0; i < DSIZE / 2; i++)
		assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &head), 0);
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 1, &head), -ENOSPC);
	/* an indirect chain needs one descriptor only, but there is none left either */
	assert_int_equal(
	    vs_vq_drv_add_indirect(&f->drv, two_bufs, 2, gva(&f->g, GPA_IND), GPA_IND, &head),
	    -ENOSPC);
}

/* EVENT_IDX kicks: the driver kicks when it passes the device's avail_event, not again
 * until the device has caught up and re-armed. */
static void test_kick_event_idx(void **state)
{
	struct fx *f = *state;
	uint16_t head;
	vs_vq_dev_set_notification(&f->dev, true);
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &head), 0);
	assert_true(vs_vq_drv_should_kick(&f->drv));
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &head), 0);
	assert_false(vs_vq_drv_should_kick(&f->drv));
	assert_int_equal(vs_vq_dev_pop(&f->dev, &f->g.mem, &f->elem), 0);
	assert_int_equal(vs_vq_dev_pop(&f->dev, &f->g.mem, &f->elem), 0);
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &head), 0);
	assert_true(vs_vq_drv_should_kick(&f->drv));
	assert_false(vs_vq_drv_should_kick(&f->drv)); /* nothing new since */
}

/* EVENT_IDX interrupts: the device interrupts when it passes used_event, which the driver
 * moves as it consumes; with callbacks disabled it stops moving. */
static void test_interrupt_event_idx(void **state)
{
	struct fx *f = *state;
	uint16_t h[3], head;
	uint32_t len;
	for (int i = 0; i < 3; i++)
		assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &h[i]), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(vs_vq_dev_pop(&f->dev, &f->g.mem, &f->elem), 0);
	vs_vq_drv_enable_cb(&f->drv, true);
	vs_vq_dev_push(&f->dev, h[0], 0);
	assert_true(vs_vq_dev_should_notify(&f->dev));
	assert_int_equal(vs_vq_drv_get_used(&f->drv, &head, &len), 0);
	vs_vq_dev_push(&f->dev, h[1], 0);
	assert_true(vs_vq_dev_should_notify(&f->dev));
	vs_vq_drv_enable_cb(&f->drv, false);
	assert_int_equal(vs_vq_drv_get_used(&f->drv, &head, &len), 0);
	vs_vq_dev_push(&f->dev, h[2], 0);
	assert_false(vs_vq_dev_should_notify(&f->dev));
}

/* Without EVENT_IDX: NO_NOTIFY / NO_INTERRUPT flags carry the decisions. */
static void test_kick_and_interrupt_flags(void **state)
{
	struct fx *f = *state;
	uint16_t head;
	vs_vq_dev_set_notification(&f->dev, false);
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &head), 0);
	assert_false(vs_vq_drv_should_kick(&f->drv));
	vs_vq_dev_set_notification(&f->dev, true);
	assert_int_equal(vs_vq_drv_add(&f->drv, two_bufs, 2, &head), 0);
	assert_true(vs_vq_drv_should_kick(&f->drv));
	vs_vq_drv_enable_cb(&f->drv, false);
	vs_vq_dev_push(&f->dev, head, 0);
	assert_false(vs_vq_dev_should_notify(&f->dev));
	vs_vq_drv_enable_cb(&f->drv, true);
	assert_true(vs_vq_dev_should_notify(&f->dev));
}

/* ---- both halves, 100k requests ------------------------------------------------------- */

struct req_hdr {
	uint64_t seq;
	uint32_t data_len;
	uint32_t data_write;
};

struct slot {
	bool busy;
	uint64_t seq;
	uint32_t in_bytes;
	uint16_t head;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t n)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state % n);
}

/* Per slot: header in C, response in B, data in A (slot 7's data crosses from A into B),
 * indirect table in A. */
static uint64_t slot_hdr(unsigned s)
{
	return GPA_C + 0x100ull * s;
}
static uint64_t slot_resp(unsigned s)
{
	return GPA_B + 0x1000 + 0x100ull * s;
}
static uint64_t slot_data(unsigned s)
{
	return s == 7 ? GPA_B - 0x800 : GPA_DATA + 0x1000ull * s;
}
static uint64_t slot_table(unsigned s)
{
	return GPA_IND + 0x100ull * s;
}

static void drv_submit(struct fx *f, struct slot *slots, unsigned s, uint64_t seq)
{
	struct req_hdr h = {.seq = seq, .data_len = 1 + rnd(4096), .data_write = rnd(2)};
	struct vs_vq_buf b[3];
	unsigned n = 0;
	bool indirect = rnd(2);
	uint16_t head;

	memcpy(gva(&f->g, slot_hdr(s)), &h, sizeof(h));
	b[n++] = (struct vs_vq_buf){slot_hdr(s), sizeof(h), false};
	if (!h.data_write)
		b[n++] = (struct vs_vq_buf){slot_data(s), h.data_len, false};
	if (h.data_write)
		b[n++] = (struct vs_vq_buf){slot_data(s), h.data_len, true};
	b[n++] = (struct vs_vq_buf){slot_resp(s), 8, true};
	if (indirect)
		assert_int_equal(vs_vq_drv_add_indirect(&f->drv, b, n, gva(&f->g, slot_table(s)),
							slot_table(s), &head),
				 0);
	else
		assert_int_equal(vs_vq_drv_add(&f->drv, b, n, &head), 0);
	slots[s] = (struct slot){true, seq, 8 + (h.data_write ? h.data_len : 0), head};
}

/* The device checks the chain against the header it describes, then answers with seq. */
static void dev_complete(struct fx *f, const struct vs_vq_elem *e)
{
	struct req_hdr h;
	assert_false(e->bad);
	assert_int_equal(vs_iov_to_buf(e->out, e->out_num, 0, &h, sizeof(h)), sizeof(h));
	assert_int_equal(e->out_len, sizeof(h) + (h.data_write ? 0 : h.data_len));
	assert_int_equal(e->in_len, 8 + (h.data_write ? h.data_len : 0));
	assert_int_equal(vs_iov_from_buf(e->in, e->in_num, e->in_len - 8, &h.seq, 8), 8);
	vs_vq_dev_push(&f->dev, e->head, (uint32_t)e->in_len);
}

static void run_pair(struct fx *f)
{
	struct slot slots[DSIZE] = {0};
	static struct vs_vq_elem elems[DSIZE];
	uint64_t submitted = 0, completed = 0, kicks = 0;
	unsigned idle = 0;

	while (completed < TOTAL) {
		uint64_t before = completed;
		/* driver: fill some free slots */
		unsigned want = 1 + rnd(DSIZE);
		for (unsigned s = 0; s < DSIZE && want && submitted < TOTAL; s++) {
			if (slots[s].busy || f->drv.num_free < 3)
				continue;
			drv_submit(f, slots, s, submitted++);
			want--;
		}
		kicks += vs_vq_drv_should_kick(&f->drv);
		/* device: pop a few, complete them in reverse order */
		unsigned n = 0, take = 1 + rnd(DSIZE);
		while (n < take && vs_vq_dev_pop(&f->dev, &f->g.mem, &elems[n]) == 0)
			n++;
		while (n)
			dev_complete(f, &elems[--n]);
		vs_vq_dev_should_notify(&f->dev);
		/* driver: reap; each completion matches its slot and carries its seq */
		uint16_t head;
		uint32_t len;
		while (vs_vq_drv_get_used(&f->drv, &head, &len) == 0) {
			unsigned s;
			for (s = 0; s < DSIZE; s++)
				if (slots[s].busy && slots[s].head == head)
					break;
			assert_true(s < DSIZE);
			assert_int_equal(len, slots[s].in_bytes);
			uint64_t seq;
			memcpy(&seq, gva(&f->g, slot_resp(s)), 8);
			assert_int_equal(seq, slots[s].seq);
			slots[s].busy = false;
			completed++;
		}
		/* a lost chain or descriptor would stall the loop: fail instead of hanging */
		idle = completed == before ? idle + 1 : 0;
		assert_true(idle < 1000);
	}
	assert_int_equal(f->drv.num_free, DSIZE);
	assert_false(f->drv.broken);
	assert_false(f->dev.broken);
	assert_true(kicks > 0);
	/* TOTAL > 65536: the 16-bit indices wrapped and still agree */
	assert_int_equal(f->drv.avail_idx, (uint16_t)TOTAL);
	assert_int_equal(f->dev.used_idx, (uint16_t)TOTAL);
}

/* 100k requests of random shape (direct or indirect, data in or out, one data buffer
 * crossing regions) complete out of order, each exactly once with its own answer. */
static void test_pair_100k(void **state)
{
	run_pair(*state);
}

/* The same with EVENT_IDX on both sides. */
static void test_pair_100k_event_idx(void **state)
{
	run_pair(*state);
}

#define T(fn)  cmocka_unit_test_setup_teardown(fn, setup, teardown)
#define TE(fn) cmocka_unit_test_setup_teardown(fn, setup_event_idx, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_drv_used_ok),
	    T(test_drv_used_id_beyond_size),
	    T(test_drv_used_id_not_in_flight),
	    T(test_drv_used_len_too_big),
	    T(test_drv_used_idx_runaway),
	    T(test_drv_add_rules),
	    TE(test_kick_event_idx),
	    TE(test_interrupt_event_idx),
	    T(test_kick_and_interrupt_flags),
	    T(test_pair_100k),
	    TE(test_pair_100k_event_idx),
	};
	return cmocka_run_group_tests_name("virtio.vq_pair", tests, NULL, NULL);
}
