/* SPDX-License-Identifier: MIT */
/* Device-side split virtqueue: chain validation, used ring, notifications. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "guest.h"

#define R 0
#define W VS_VRING_DESC_F_WRITE
#define N VS_VRING_DESC_F_NEXT
#define I VS_VRING_DESC_F_INDIRECT

struct fx {
	struct guest g;
	struct vs_vq_dev vq;
	struct vs_vq_elem elem;
};

static int setup_flags(void **state, bool event_idx, bool indirect)
{
	struct fx *f = calloc(1, sizeof(*f));
	if (!f || guest_init(&f->g) || guest_vq_init(&f->g, &f->vq, event_idx, indirect))
		return -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_flags(state, false, true);
}

static int setup_event_idx(void **state)
{
	return setup_flags(state, true, true);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	guest_fini(&f->g);
	free(f);
	return 0;
}

/* A one-descriptor chain the queue must accept, to show it still works after an error. */
static void pop_valid_single(struct fx *f, uint16_t head)
{
	guest_desc(&f->g, GPA_DESC, head, GPA_DATA, 64, W, 0);
	guest_avail(&f->g, head);
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), 0);
	assert_int_equal(f->elem.head, head);
	assert_false(f->elem.bad);
	vs_vq_dev_push(&f->vq, head, 0);
}

/* Expect a per-chain error: the head comes back marked bad, the queue stays usable. */
static void expect_bad_chain(struct fx *f, uint16_t head, int rc)
{
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), rc);
	assert_true(f->elem.bad);
	assert_int_equal(f->elem.head, head);
	assert_int_equal(f->elem.out_num + f->elem.in_num, 0);
	assert_false(f->vq.broken);
	vs_vq_dev_push(&f->vq, head, 0);
	pop_valid_single(f, 15);
}

/* Expect a structural error: -EIO now and on every later pop, with a reason. */
static void expect_broken(struct fx *f)
{
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), -EIO);
	assert_true(f->vq.broken);
	assert_non_null(f->vq.broken_reason);
	guest_desc(&f->g, GPA_DESC, 15, GPA_DATA, 64, W, 0);
	guest_avail(&f->g, 15);
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), -EIO);
	assert_int_equal(vs_vq_dev_avail_count(&f->vq), 0);
}

/* Header (readable, in C) + data and response (writable, in A) pop as one element with the
 * right host addresses and lengths. */
static void test_valid_chain(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_DESC, 3, GPA_C + 0x100, 51, R | N, 7);
	guest_desc(&f->g, GPA_DESC, 7, GPA_DATA, 4096, W | N, 1);
	guest_desc(&f->g, GPA_DESC, 1, GPA_DATA + 0x2000, 108, W, 0);
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), -EAGAIN);
	guest_avail(&f->g, 3);
	assert_int_equal(vs_vq_dev_avail_count(&f->vq), 1);
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), 0);
	assert_int_equal(f->elem.head, 3);
	assert_false(f->elem.bad);
	assert_int_equal(f->elem.out_num, 1);
	assert_int_equal(f->elem.in_num, 2);
	assert_int_equal(f->elem.out_len, 51);
	assert_int_equal(f->elem.in_len, 4096 + 108);
	assert_ptr_equal(f->elem.out[0].iov_base, f->g.buf + 0x10100);
	assert_ptr_equal(f->elem.in[0].iov_base, f->g.buf + GPA_DATA);
	assert_int_equal(f->elem.in[0].iov_len, 4096);
	assert_ptr_equal(f->elem.in[1].iov_base, f->g.buf + GPA_DATA + 0x2000);
	assert_int_equal(f->elem.in[1].iov_len, 108);
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), -EAGAIN);
}

/* An indirect table (header + data + response) pops like a direct chain. */
static void test_valid_indirect(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_IND, 0, GPA_C, 51, R | N, 1);
	guest_desc(&f->g, GPA_IND, 1, GPA_C + 0x1000, 512, R | N, 2);
	guest_desc(&f->g, GPA_IND, 2, GPA_DATA, 108, W, 0);
	guest_desc(&f->g, GPA_DESC, 5, GPA_IND, 48, I, 0);
	guest_avail(&f->g, 5);
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), 0);
	assert_int_equal(f->elem.head, 5);
	assert_int_equal(f->elem.out_num, 2);
	assert_int_equal(f->elem.in_num, 1);
	assert_int_equal(f->elem.out_len, 51 + 512);
	assert_ptr_equal(f->elem.out[1].iov_base, f->g.buf + 0x11000);
}

/* Pushing writes id/len into the used ring and publishes used->idx; fill defers the idx. */
static void test_used_push(void **state)
{
	struct fx *f = *state;
	vs_vq_dev_push(&f->vq, 9, 1234);
	assert_int_equal(vs_le16(f->g.used->idx), 1);
	assert_int_equal(vs_le32(f->g.used->ring[0].id), 9);
	assert_int_equal(vs_le32(f->g.used->ring[0].len), 1234);
	vs_vq_dev_fill(&f->vq, 4, 1);
	vs_vq_dev_fill(&f->vq, 2, 2);
	assert_int_equal(vs_le16(f->g.used->idx), 1);
	vs_vq_dev_flush(&f->vq);
	assert_int_equal(vs_le16(f->g.used->idx), 3);
	assert_int_equal(vs_le32(f->g.used->ring[2].id), 2);
}

/* Rule: the head index must be < queue size (else the queue breaks). */
static void test_head_beyond_size(void **state)
{
	struct fx *f = *state;
	guest_avail(&f->g, QSIZE);
	expect_broken(f);
}

/* Rule: every next index in the ring's table must be < queue size. */
static void test_next_beyond_size(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_DESC, 0, GPA_DATA, 16, R | N, QSIZE + 3);
	guest_avail(&f->g, 0);
	expect_broken(f);
}

/* Rule: a chain may not loop (longer than the table). */
static void test_loop(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_DESC, 0, GPA_DATA, 16, R | N, 1);
	guest_desc(&f->g, GPA_DESC, 1, GPA_DATA, 16, R | N, 2);
	guest_desc(&f->g, GPA_DESC, 2, GPA_DATA, 16, R | N, 0);
	guest_avail(&f->g, 0);
	expect_broken(f);
}

/* Rule: avail->idx may not run more than queue size ahead of what we popped. */
static void test_avail_idx_runaway(void **state)
{
	struct fx *f = *state;
	f->g.avail->idx = vs_le16(QSIZE + 1);
	expect_broken(f);
}

/* Rule: an indirect table's length is a non-zero multiple of 16. */
static void test_indirect_len_not_multiple(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_IND, 0, GPA_DATA, 16, W, 0);
	guest_desc(&f->g, GPA_DESC, 4, GPA_IND, 24, I, 0);
	guest_avail(&f->g, 4);
	expect_bad_chain(f, 4, -EINVAL);
}

/* Rule: no INDIRECT descriptor inside an indirect table. */
static void test_nested_indirect(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_IND, 0, GPA_DATA, 16, R | N, 1);
	guest_desc(&f->g, GPA_IND, 1, GPA_IND + 0x100, 16, I, 0);
	guest_desc(&f->g, GPA_DESC, 4, GPA_IND, 32, I, 0);
	guest_avail(&f->g, 4);
	expect_bad_chain(f, 4, -EINVAL);
}

/* Rule: an indirect table has at most VS_VQ_MAX_INDIRECT entries. */
static void test_indirect_too_long(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_DESC, 4, GPA_IND, 16 * (VS_VQ_MAX_INDIRECT + 1), I, 0);
	guest_avail(&f->g, 4);
	expect_bad_chain(f, 4, -EINVAL);
}

/* Rule: INDIRECT and NEXT are never set on the same descriptor. */
static void test_indirect_with_next(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_IND, 0, GPA_DATA, 16, W, 0);
	guest_desc(&f->g, GPA_DESC, 4, GPA_IND, 16, I | N, 5);
	guest_desc(&f->g, GPA_DESC, 5, GPA_DATA, 16, W, 0);
	guest_avail(&f->g, 4);
	expect_bad_chain(f, 4, -EINVAL);
}

/* Rule: a next index inside an indirect table stays inside that table. */
static void test_indirect_next_beyond_table(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_IND, 0, GPA_DATA, 16, R | N, 2);
	guest_desc(&f->g, GPA_IND, 1, GPA_DATA, 16, W, 0);
	guest_desc(&f->g, GPA_DESC, 4, GPA_IND, 32, I, 0);
	guest_avail(&f->g, 4);
	expect_bad_chain(f, 4, -EINVAL);
}

/* Rule: INDIRECT is refused when VS_VIRTIO_F_INDIRECT_DESC was not negotiated. */
static void test_indirect_not_negotiated(void **state)
{
	struct fx *f = *state;
	assert_int_equal(guest_vq_init(&f->g, &f->vq, false, false), 0);
	guest_desc(&f->g, GPA_IND, 0, GPA_DATA, 16, W, 0);
	guest_desc(&f->g, GPA_DESC, 4, GPA_IND, 16, I, 0);
	guest_avail(&f->g, 4);
	expect_bad_chain(f, 4, -EINVAL);
}

/* Rule: every buffer lies inside guest memory. */
static void test_address_outside_regions(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_DESC, 2, GPA_DATA, 51, R | N, 3);
	guest_desc(&f->g, GPA_DESC, 3, 0x40000, 512, W, 0);
	guest_avail(&f->g, 2);
	expect_bad_chain(f, 2, -EFAULT);
}

/* A buffer crossing from A into the adjacent B is split into two iovecs. */
static void test_crossing_adjacent_regions_split(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_DESC, 6, GPA_B - 0x10, 0x30, W, 0);
	guest_avail(&f->g, 6);
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), 0);
	assert_int_equal(f->elem.in_num, 2);
	assert_ptr_equal(f->elem.in[0].iov_base, f->g.buf + 0xfff0);
	assert_int_equal(f->elem.in[0].iov_len, 0x10);
	assert_ptr_equal(f->elem.in[1].iov_base, f->g.buf + 0x30000);
	assert_int_equal(f->elem.in[1].iov_len, 0x20);
	assert_int_equal(f->elem.in_len, 0x30);
}

/* A buffer running from C into the gap after it is refused. */
static void test_crossing_into_gap(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_DESC, 6, GPA_C + REGION_SIZE - 0x10, 0x30, W, 0);
	guest_avail(&f->g, 6);
	expect_bad_chain(f, 6, -EFAULT);
}

/* Rule: device-readable descriptors come before device-writable ones. */
static void test_writable_before_readable(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_DESC, 0, GPA_DATA, 108, W | N, 1);
	guest_desc(&f->g, GPA_DESC, 1, GPA_C, 51, R, 0);
	guest_avail(&f->g, 0);
	expect_bad_chain(f, 0, -EINVAL);
}

/* Rule: a chain carries at most VS_VQ_MAX_CHAIN_BYTES.  Two 40 MiB buffers live in a lazily
 * allocated mapping, so the length cap, not the map, is what refuses them. */
static void test_too_long_total(void **state)
{
	struct fx *f = *state;
	const uint64_t big = 80ull << 20, gpa = 0x10000000;
	void *p = mmap(NULL, big, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	assert_true(p != MAP_FAILED);
	assert_int_equal(vs_mem_add(&f->g.mem, gpa, big, 0x10000000, p), 0);
	guest_desc(&f->g, GPA_DESC, 0, gpa, 40u << 20, R | N, 1);
	guest_desc(&f->g, GPA_DESC, 1, gpa + (40u << 20), 40u << 20, W, 0);
	guest_avail(&f->g, 0);
	expect_bad_chain(f, 0, -E2BIG);
	munmap(p, big);
}

/* Rule: at most VS_VQ_MAX_SEGS iovecs per direction (an indirect table of 259 buffers). */
static void test_too_many_segments(void **state)
{
	struct fx *f = *state;
	const unsigned n = VS_VQ_MAX_SEGS + 1;
	for (unsigned i = 0; i < n; i++)
		guest_desc(&f->g, GPA_IND, i, GPA_DATA + i, 1, R | (i + 1 < n ? N : 0),
			   (uint16_t)(i + 1));
	guest_desc(&f->g, GPA_DESC, 8, GPA_IND, 16 * n, I, 0);
	guest_avail(&f->g, 8);
	expect_bad_chain(f, 8, -ENOBUFS);
}

/* vs_vring_need_event: true iff the event index lies in [old, new), across the 16-bit wrap. */
static void test_need_event_math(void **state)
{
	(void)state;
	assert_true(vs_vring_need_event(0, 1, 0));
	assert_false(vs_vring_need_event(1, 1, 0));
	assert_true(vs_vring_need_event(5, 10, 3));
	assert_false(vs_vring_need_event(2, 10, 3));
	assert_false(vs_vring_need_event(10, 10, 3));
	assert_true(vs_vring_need_event(65535, 0, 65535));
	assert_true(vs_vring_need_event(65534, 2, 65533));
	assert_true(vs_vring_need_event(1, 2, 65533));
	assert_false(vs_vring_need_event(2, 2, 65533));
	assert_false(vs_vring_need_event(65532, 2, 65533));
	assert_false(vs_vring_need_event(7, 7, 7)); /* nothing new: never */
}

/* EVENT_IDX, device side: interrupt when used idx passes used_event, including the wrap
 * from 65535 to 0. */
static void test_should_notify_event_idx_wrap(void **state)
{
	struct fx *f = *state;
	uint16_t *used_event = &f->g.avail->ring[QSIZE];
	f->g.used->idx = vs_le16(65534);
	assert_int_equal(guest_vq_init(&f->g, &f->vq, true, true), 0);
	assert_true(vs_vq_dev_should_notify(&f->vq)); /* first call: always */
	*used_event = vs_le16(65535);
	vs_vq_dev_push(&f->vq, 0, 0); /* used 65535: event 65535 not yet passed */
	assert_false(vs_vq_dev_should_notify(&f->vq));
	vs_vq_dev_push(&f->vq, 1, 0); /* used 0: passed 65535 */
	assert_int_equal(vs_le16(f->g.used->idx), 0);
	assert_true(vs_vq_dev_should_notify(&f->vq));
	vs_vq_dev_push(&f->vq, 2, 0); /* event stays behind: no interrupt */
	assert_false(vs_vq_dev_should_notify(&f->vq));
	*used_event = vs_le16(1);
	vs_vq_dev_push(&f->vq, 3, 0);
	vs_vq_dev_push(&f->vq, 4, 0); /* used 1 -> 3 passes 1 */
	assert_true(vs_vq_dev_should_notify(&f->vq));
}

/* Without EVENT_IDX the driver's NO_INTERRUPT flag decides. */
static void test_should_notify_flags(void **state)
{
	struct fx *f = *state;
	vs_vq_dev_push(&f->vq, 0, 0);
	assert_true(vs_vq_dev_should_notify(&f->vq));
	f->g.avail->flags = vs_le16(VS_VRING_AVAIL_F_NO_INTERRUPT);
	vs_vq_dev_push(&f->vq, 1, 0);
	assert_false(vs_vq_dev_should_notify(&f->vq));
}

/* EVENT_IDX: enabling writes avail_event = last_avail_idx, pops keep it following; while
 * disabled it stays put.  Without EVENT_IDX, used->flags NO_NOTIFY toggles. */
static void test_set_notification(void **state)
{
	struct fx *f = *state;
	uint16_t *avail_event = (uint16_t *)&f->g.used->ring[QSIZE];
	guest_desc(&f->g, GPA_DESC, 0, GPA_DATA, 8, W, 0);
	guest_avail(&f->g, 0);
	guest_avail(&f->g, 0);
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), 0);
	assert_int_equal(vs_le16(*avail_event), 1);
	vs_vq_dev_set_notification(&f->vq, false);
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), 0);
	assert_int_equal(vs_le16(*avail_event), 1);
	vs_vq_dev_set_notification(&f->vq, true);
	assert_int_equal(vs_le16(*avail_event), 2);
	assert_int_equal(f->g.used->flags, 0);

	assert_int_equal(guest_vq_init(&f->g, &f->vq, false, true), 0);
	vs_vq_dev_set_notification(&f->vq, false);
	assert_int_equal(vs_le16(f->g.used->flags), VS_VRING_USED_F_NO_NOTIFY);
	vs_vq_dev_set_notification(&f->vq, true);
	assert_int_equal(vs_le16(f->g.used->flags), 0);
}

/* init refuses sizes that are not powers of 2 or too big, and misaligned rings. */
static void test_init_rules(void **state)
{
	struct fx *f = *state;
	void *d = gva(&f->g, GPA_DESC);
	assert_int_equal(vs_vq_dev_init(&f->vq, 12, d, f->g.avail, f->g.used, 0, 0, 0), -EINVAL);
	assert_int_equal(vs_vq_dev_init(&f->vq, 65536, d, f->g.avail, f->g.used, 0, 0, 0), -EINVAL);
	assert_int_equal(vs_vq_dev_init(&f->vq, 0, d, f->g.avail, f->g.used, 0, 0, 0), -EINVAL);
	assert_int_equal(
	    vs_vq_dev_init(&f->vq, 16, (uint8_t *)d + 8, f->g.avail, f->g.used, 0, 0, 0), -EINVAL);
	assert_int_equal(
	    vs_vq_dev_init(&f->vq, 16, d, f->g.avail, (uint8_t *)f->g.used + 2, 0, 0, 0), -EINVAL);
}

/* A zero-length descriptor is accepted and takes no iovec. */
static void test_zero_length_descriptor(void **state)
{
	struct fx *f = *state;
	guest_desc(&f->g, GPA_DESC, 0, 0xdead0000, 0, R | N, 1);
	guest_desc(&f->g, GPA_DESC, 1, GPA_DATA, 8, W, 0);
	guest_avail(&f->g, 0);
	assert_int_equal(vs_vq_dev_pop(&f->vq, &f->g.mem, &f->elem), 0);
	assert_int_equal(f->elem.out_num, 0);
	assert_int_equal(f->elem.in_num, 1);
}

#define T(fn)  cmocka_unit_test_setup_teardown(fn, setup, teardown)
#define TE(fn) cmocka_unit_test_setup_teardown(fn, setup_event_idx, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_valid_chain),
	    T(test_valid_indirect),
	    T(test_used_push),
	    T(test_head_beyond_size),
	    T(test_next_beyond_size),
	    T(test_loop),
	    T(test_avail_idx_runaway),
	    T(test_indirect_len_not_multiple),
	    T(test_nested_indirect),
	    T(test_indirect_too_long),
	    T(test_indirect_with_next),
	    T(test_indirect_next_beyond_table),
	    T(test_indirect_not_negotiated),
	    T(test_address_outside_regions),
	    T(test_crossing_adjacent_regions_split),
	    T(test_crossing_into_gap),
	    T(test_writable_before_readable),
	    T(test_too_long_total),
	    T(test_too_many_segments),
	    cmocka_unit_test(test_need_event_math),
	    T(test_should_notify_event_idx_wrap),
	    T(test_should_notify_flags),
	    TE(test_set_notification),
	    T(test_init_rules),
	    T(test_zero_length_descriptor),
	};
	return cmocka_run_group_tests_name("virtio.vq_dev", tests, NULL, NULL);
}
