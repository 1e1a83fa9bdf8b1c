/* SPDX-License-Identifier: MIT */
/* Guest memory map: translation, region crossing, overflow, iovec copies. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "guest.h"

static int setup(void **state)
{
	struct guest *g = malloc(sizeof(*g));
	if (!g || guest_init(g))
		return -1;
	*state = g;
	return 0;
}

static int teardown(void **state)
{
	guest_fini(*state);
	free(*state);
	return 0;
}

/* An address inside a region translates to that region's host mapping plus the offset. */
static void test_gpa_inside_region(void **state)
{
	struct guest *g = *state;
	assert_ptr_equal(vs_mem_gpa(&g->mem, GPA_B + 0x10, 0x100), g->buf + 0x30010);
	assert_ptr_equal(vs_mem_gpa(&g->mem, GPA_C, REGION_SIZE), g->buf + 0x10000);
}

/* A range that leaves its region (even into an adjacent one) is not one host pointer. */
static void test_gpa_crossing_is_null(void **state)
{
	struct guest *g = *state;
	assert_null(vs_mem_gpa(&g->mem, GPA_A + REGION_SIZE - 8, 16));
	assert_null(vs_mem_gpa(&g->mem, GPA_C + REGION_SIZE - 8, 16));
	/* exactly to the end is fine, one byte more is not */
	assert_non_null(vs_mem_gpa(&g->mem, GPA_C + 0x10, REGION_SIZE - 0x10));
	assert_null(vs_mem_gpa(&g->mem, GPA_C + 0x10, REGION_SIZE - 0x10 + 1));
	assert_non_null(vs_mem_uva(&g->mem, 0x7f0000080010ull, REGION_SIZE - 0x10));
	assert_null(vs_mem_uva(&g->mem, 0x7f0000080010ull, REGION_SIZE - 0x10 + 1));
}

/* Addresses in the gap or past the end, and lengths that would wrap, are refused. */
static void test_gpa_outside_and_overflow(void **state)
{
	struct guest *g = *state;
	assert_null(vs_mem_gpa(&g->mem, 0x40000, 1));
	assert_null(vs_mem_gpa(&g->mem, GPA_C + REGION_SIZE, 0));
	assert_null(vs_mem_gpa(&g->mem, GPA_C + 8, UINT64_MAX));
	assert_null(vs_mem_gpa(&g->mem, UINT64_MAX, 2));
	/* len 0 is looked up as len 1 */
	assert_ptr_equal(vs_mem_gpa(&g->mem, GPA_A + 5, 0), g->buf + 5);
}

/* Frontend user addresses translate through the uva of each region. */
static void test_uva(void **state)
{
	struct guest *g = *state;
	assert_ptr_equal(vs_mem_uva(&g->mem, 0x7f0000080020ull, 0x20), g->buf + 0x10020);
	assert_null(vs_mem_uva(&g->mem, 0x7f0000090000ull, 1));
	assert_null(vs_mem_uva(&g->mem, 0x7f000000fff0ull, 0x20));
}

/* A buffer crossing from A into the adjacent B becomes two iovecs with each region's host
 * address. */
static void test_iov_split_across_adjacent_regions(void **state)
{
	struct guest *g = *state;
	struct iovec iov[4];
	int n = vs_mem_gpa_iov(&g->mem, GPA_B - 0x100, 0x300, iov, 4);
	assert_int_equal(n, 2);
	assert_ptr_equal(iov[0].iov_base, g->buf + 0xff00);
	assert_int_equal(iov[0].iov_len, 0x100);
	assert_ptr_equal(iov[1].iov_base, g->buf + 0x30000);
	assert_int_equal(iov[1].iov_len, 0x200);
}

/* A buffer running from B into the gap after it is refused as a whole. */
static void test_iov_into_gap(void **state)
{
	struct guest *g = *state;
	struct iovec iov[4];
	assert_int_equal(vs_mem_gpa_iov(&g->mem, GPA_B + REGION_SIZE - 0x10, 0x20, iov, 4),
			 -EFAULT);
}

/* Needing more iovecs than offered is -ENOBUFS, a zero-length buffer needs none. */
static void test_iov_limits(void **state)
{
	struct guest *g = *state;
	struct iovec iov[1];
	assert_int_equal(vs_mem_gpa_iov(&g->mem, GPA_B - 1, 2, iov, 1), -ENOBUFS);
	assert_int_equal(vs_mem_gpa_iov(&g->mem, 0xdead0000, 0, iov, 1), 0);
}

/* A region filled in by hand that ends at 2^64 does not let a buffer wrap around to 0. */
static void test_iov_no_wrap(void **state)
{
	(void)state;
	static uint8_t host[32];
	struct vs_mem m = {.nregions = 2};
	m.regions[0] = (struct vs_mem_region){.gpa = UINT64_MAX - 15, .size = 16, .host = host};
	m.regions[1] = (struct vs_mem_region){.gpa = 0, .size = 16, .host = host + 16};
	struct iovec iov[4];
	assert_int_equal(vs_mem_gpa_iov(&m, UINT64_MAX - 7, 16, iov, 4), -EFAULT);
	assert_int_equal(vs_mem_gpa_iov(&m, UINT64_MAX - 7, 8, iov, 4), 1);
}

/* vs_mem_add refuses overlaps, wrapping ranges, empty regions and a ninth region. */
static void test_add_rules(void **state)
{
	(void)state;
	struct vs_mem m;
	static uint8_t host[16];
	vs_mem_reset(&m);
	assert_int_equal(vs_mem_add(&m, 0x1000, 0x1000, 0x1000, host), 0);
	assert_int_equal(vs_mem_add(&m, 0x1800, 0x1000, 0x9000, host), -EINVAL);
	assert_int_equal(vs_mem_add(&m, 0x5000, 0x1000, 0x1800, host), -EINVAL);
	assert_int_equal(vs_mem_add(&m, UINT64_MAX - 0xff, 0x100, 0x20000, host), -EINVAL);
	assert_int_equal(vs_mem_add(&m, 0x9000, 0, 0x30000, host), -EINVAL);
	for (unsigned i = 1; i < VS_MEM_MAX_REGIONS; i++)
		assert_int_equal(
		    vs_mem_add(&m, 0x10000ull * (i + 1), 0x100, 0x10000ull * (i + 1), host), 0);
	assert_int_equal(vs_mem_add(&m, 0x1000000, 0x100, 0x1000000, host), -ENOSPC);
	assert_int_equal(m.nregions, VS_MEM_MAX_REGIONS);
}

/* Copies to and from iovecs honour the offset and stop at the iovecs' end. */
static void test_iov_copy(void **state)
{
	(void)state;
	uint8_t a[3] = {1, 2, 3}, b[4] = {4, 5, 6, 7}, out[8] = {0};
	struct iovec iov[2] = {{a, sizeof(a)}, {b, sizeof(b)}};
	assert_int_equal(vs_iov_to_buf(iov, 2, 2, out, sizeof(out)), 5);
	assert_memory_equal(out, ((uint8_t[]){3, 4, 5, 6, 7}), 5);
	assert_int_equal(vs_iov_from_buf(iov, 2, 1, ((uint8_t[]){9, 9, 9}), 3), 3);
	assert_memory_equal(a, ((uint8_t[]){1, 9, 9}), 3);
	assert_int_equal(b[0], 9);
	assert_int_equal(vs_iov_to_buf(iov, 2, 7, out, 1), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_gpa_inside_region),
	    T(test_gpa_crossing_is_null),
	    T(test_gpa_outside_and_overflow),
	    T(test_uva),
	    T(test_iov_split_across_adjacent_regions),
	    T(test_iov_into_gap),
	    T(test_iov_limits),
	    cmocka_unit_test(test_iov_no_wrap),
	    cmocka_unit_test(test_add_rules),
	    cmocka_unit_test(test_iov_copy),
	};
	return cmocka_run_group_tests_name("virtio.mem", tests, NULL, NULL);
}
