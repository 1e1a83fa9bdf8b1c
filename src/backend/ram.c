/* SPDX-License-Identifier: MIT */
/*
 * ram=SIZE: anonymous memory, reserved lazily (MAP_NORESERVE), so a large LUN costs
 * only what is written, in 2 MiB steps: the range asks for transparent huge pages
 * (MADV_HUGEPAGE), so that a LUN's first touch of each 2 MiB is one page fault, not 512.
 * A fault costs 10-20 us on these virtual machines; with 4 KiB pages a fresh 1 GiB LUN
 * served 50-60k IOPS to random reads where a warm one serves 0.9-1.2M (PERFORMANCE.md
 * "RAM LUNs and page faults").  Reads of never-written memory map the kernel's zero page
 * and allocate nothing.  The address range is reserved for up to RAM_RESERVE (or SIZE
 * when larger) and only SIZE of it made accessible, so that the LUN can grow in place
 * while workers use it (mprotect; the base never moves).  Bios complete synchronously and are
 * handed to the context's deferred list, so done() still runs from vs_io_ctx_reap().
 *
 * MAP_NORESERVE means the kernel never refuses a size: a LUN larger than the machine would
 * be accepted and fail only when the guest fills it (the OOM killer then ends the target,
 * and every LUN's data with it).  So the sizes of this process's RAM LUNs together may not
 * pass the machine's memory, RAM and swap (ram_claim): refused at open and at a resize.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>

#include <vioscope/trace.h>

#include "backend/backend_int.h"

/* Bytes the RAM LUNs of this process hold (their sizes), against the machine's memory. */
static uint64_t ram_claimed;

static void ram_units(char *buf, size_t len, uint64_t bytes)
{
	snprintf(buf, len, "%.1f GiB", (double)bytes / (1ull << 30));
}

/* Take `more` bytes for a RAM LUN (`what`: "" or why they are wanted): 0, or -ENOMEM with
 * err saying what the machine has, when the RAM LUNs would hold more than its RAM and swap
 * together. */
static int ram_claim(const char *what, uint64_t more, char *why, size_t whylen)
{
	uint64_t machine, held = __atomic_load_n(&ram_claimed, __ATOMIC_RELAXED);
	char ram[32], swap[32], wanted[32], other[32];
	struct sysinfo si;

	if (sysinfo(&si) < 0) { /* cannot tell: the kernel's own limits apply */
		__atomic_add_fetch(&ram_claimed, more, __ATOMIC_RELAXED);
		return 0;
	}
	machine = ((uint64_t)si.totalram + si.totalswap) * si.mem_unit;
	for (;;) {
		if (more <= machine && held <= machine - more) {
			if (__atomic_compare_exchange_n(&ram_claimed, &held, held + more, false,
							__ATOMIC_RELAXED, __ATOMIC_RELAXED))
				return 0;
			continue; /* another LUN took some meanwhile: held is new */
		}
		ram_units(ram, sizeof(ram), (uint64_t)si.totalram * si.mem_unit);
		ram_units(swap, sizeof(swap), (uint64_t)si.totalswap * si.mem_unit);
		ram_units(wanted, sizeof(wanted), more);
		ram_units(other, sizeof(other), held);
		VS_ERROR(BACKEND, "ram: %llu bytes more than the machine's memory",
			 (unsigned long long)more);
		return vs_fail(why, whylen, -ENOMEM,
			       "%s%llu bytes (%s) is more than this machine's memory can hold: %s "
			       "of RAM and %s of swap, of which this process's RAM LUNs hold %s",
			       what, (unsigned long long)more, wanted, ram, swap, other);
	}
}

static void ram_close(struct vs_backend *be)
{
	if (be->ram.mem) {
		munmap(be->ram.mem, be->ram.map_len);
		__atomic_sub_fetch(&ram_claimed, be->ram.claimed, __ATOMIC_RELAXED);
	}
}

/* Whole pages go back to the kernel (they then read as zeros); the edges are cleared. */
static void ram_zero(struct vs_backend *be, uint64_t off, uint64_t len)
{
	char *base = be->ram.mem;
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t first = (off + pg - 1) / pg * pg, last = (off + len) / pg * pg;

	if (first >= last || madvise(base + first, last - first, MADV_DONTNEED) < 0) {
		memset(base + off, 0, len);
		return;
	}
	memset(base + off, 0, first - off);
	memset(base + last, 0, off + len - last);
}

static int ram_submit(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	char *p = (char *)be->ram.mem + bio->offset;

	switch (bio->op) {
	case VS_BIO_READ:
		vs_iov_from_buf(bio->iov, (unsigned)bio->iovcnt, 0, p, bio->len);
		break;
	case VS_BIO_WRITE:
		vs_iov_to_buf(bio->iov, (unsigned)bio->iovcnt, 0, p, bio->len);
		break;
	case VS_BIO_DISCARD:
	case VS_BIO_WRITE_ZEROES:
		ram_zero(be, bio->offset, bio->len);
		break;
	case VS_BIO_FLUSH:
		break; /* nothing outlives the process anyway */
	}
	vs_io_ctx_defer(ctx, bio, 0);
	return 0;
}

static int ram_read_sync(struct vs_backend *be, void *buf, uint64_t len, uint64_t off)
{
	memcpy(buf, (char *)be->ram.mem + off, len);
	return 0;
}

#define RAM_RESERVE (64ull << 30) /* address space, not memory */

static int ram_resize_check(struct vs_backend *be, uint64_t old, uint64_t new_size, char *why,
			    size_t whylen)
{
	if (new_size < old) {
		vs_fail(why, whylen, 0, "a ram backend only grows (%llu -> %llu bytes)",
			(unsigned long long)old, (unsigned long long)new_size);
		return -ENOTSUP;
	}
	if (new_size > be->ram.map_len) {
		vs_fail(why, whylen, 0, "a ram backend grows to at most %llu bytes",
			(unsigned long long)be->ram.map_len);
		return -ENOSPC;
	}
	return 0;
}

/* The growth is claimed before the mapping grows, and given back if it does not. */

static int ram_resize(struct vs_backend *be, uint64_t old, uint64_t new_size, char *why,
		      size_t whylen)
{
	uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), from = old / pg * pg;
	int rc;

	if ((rc = ram_claim("growing by ", new_size - old, why, whylen)))
		return rc;
	/* From the page holding the old end: mprotect wants a page-aligned start. */
	if (mprotect((char *)be->ram.mem + from, new_size - from, PROT_READ | PROT_WRITE) < 0) {
		rc = -errno;
		__atomic_sub_fetch(&ram_claimed, new_size - old, __ATOMIC_RELAXED);
		vs_fail(why, whylen, rc, "cannot grow the mapping: %s", strerror(-rc));
		return rc;
	}
	be->ram.claimed += new_size - old;
	return 0;
}

static const struct vs_be_ops ram_ops = {
    .kind = "ram",
    .submit = ram_submit,
    .close = ram_close,
    .read_sync = ram_read_sync,
    .resize_check = ram_resize_check,
    .resize = ram_resize,
};

int vs_be_ram_open(struct vs_backend *be, uint64_t size, char *why, size_t whylen)
{
	uint64_t reserve = size > RAM_RESERVE ? size : RAM_RESERVE;
	void *mem;
	int rc;

	if (size > SIZE_MAX) {
		if (why)
			snprintf(why, whylen, "ram=%llu: too large", (unsigned long long)size);
		return -ENOMEM;
	}
	if ((rc = ram_claim("", size, why, whylen)))
		return rc;
	mem = mmap(NULL, (size_t)reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		   -1, 0);
	if (mem == MAP_FAILED) { /* no room for growth: the size alone */
		reserve = size;
		mem = mmap(NULL, (size_t)reserve, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	}
	if (mem != MAP_FAILED && mprotect(mem, (size_t)size, PROT_READ | PROT_WRITE) < 0) {
		int e = errno;

		munmap(mem, (size_t)reserve);
		errno = e;
		mem = MAP_FAILED;
	}
	if (mem == MAP_FAILED) {
		rc = -errno;
		__atomic_sub_fetch(&ram_claimed, size, __ATOMIC_RELAXED);
		if (why)
			snprintf(why, whylen, "ram: cannot map %llu bytes: %s",
				 (unsigned long long)size, strerror(-rc));
		VS_ERROR(BACKEND, "ram: mmap of %llu bytes: %s", (unsigned long long)size,
			 strerror(-rc));
		return rc;
	}
	/* Advice only: without THP (a kernel that has it off) the LUN works with 4 KiB pages. */
	(void)madvise(mem, (size_t)reserve, MADV_HUGEPAGE);
	be->ops = &ram_ops;
	be->size = size;
	be->discard = true;
	be->ram.mem = mem;
	be->ram.map_len = (size_t)reserve;
	be->ram.claimed = size;
	return 0;
}
