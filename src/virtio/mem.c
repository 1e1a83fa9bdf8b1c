/* SPDX-License-Identifier: MIT */
/* Guest memory map: translation of guest-physical and frontend user addresses. */
#include <errno.h>

#include "virtio/virtio.h"

void vs_mem_reset(struct vs_mem *m)
{
	memset(m, 0, sizeof(*m));
}

/* [a, a + as) and [b, b + bs) intersect; callers guarantee neither wraps. */
static bool ranges_overlap(uint64_t a, uint64_t as, uint64_t b, uint64_t bs)
{
	return a < b + bs && b < a + as;
}

int vs_mem_add(struct vs_mem *m, uint64_t gpa, uint64_t size, uint64_t uva, void *host)
{
	const char *why = NULL;
	int rc = -EINVAL;

	if (m->nregions >= VS_MEM_MAX_REGIONS) {
		why = "too many regions";
		rc = -ENOSPC;
		goto out;
	}
	if (size == 0 || !host) {
		why = "no size or no mapping";
		goto out;
	}
	/* Ends are computed as start + size elsewhere: refuse ranges where that wraps. */
	if (gpa + size < gpa || uva + size < uva) {
		why = "region wraps the address space";
		goto out;
	}
	for (unsigned i = 0; i < m->nregions; i++) {
		const struct vs_mem_region *r = &m->regions[i];
		if (ranges_overlap(gpa, size, r->gpa, r->size) ||
		    ranges_overlap(uva, size, r->uva, r->size)) {
			why = "region overlaps another";
			goto out;
		}
	}
	m->regions[m->nregions++] = (struct vs_mem_region){
	    .gpa = gpa,
	    .size = size,
	    .uva = uva,
	    .host = host,
	};
	VS_INFO(MEMORY, "region %u: gpa %#llx size %#llx uva %#llx host %p", m->nregions - 1,
		(unsigned long long)gpa, (unsigned long long)size, (unsigned long long)uva, host);
	return 0;
out:
	VS_ERROR(MEMORY, "region gpa %#llx size %#llx uva %#llx rejected: %s",
		 (unsigned long long)gpa, (unsigned long long)size, (unsigned long long)uva, why);
	return rc;
}

/* Offset of addr inside [start, start + size), or -1; never computes a wrapping sum. */
static inline int64_t offset_in(uint64_t addr, uint64_t start, uint64_t size)
{
	if (addr < start || addr - start >= size)
		return -1;
	return (int64_t)(addr - start);
}

/* The host address of [addr, addr + len) when it lies inside one region, looked up by
 * guest physical or by frontend user address. */
static void *lookup(const struct vs_mem *m, uint64_t addr, uint64_t len, bool by_uva)
{
	if (len == 0)
		len = 1;
	for (unsigned i = 0; i < m->nregions; i++) {
		const struct vs_mem_region *r = &m->regions[i];
		int64_t off = offset_in(addr, by_uva ? r->uva : r->gpa, r->size);
		if (off >= 0)
			return len <= r->size - (uint64_t)off ? r->host + off : NULL;
	}
	return NULL;
}

void *vs_mem_gpa(const struct vs_mem *m, uint64_t gpa, uint64_t len)
{
	return lookup(m, gpa, len, false);
}

void *vs_mem_uva(const struct vs_mem *m, uint64_t uva, uint64_t len)
{
	return lookup(m, uva, len, true);
}

int vs_mem_gpa_iov(const struct vs_mem *m, uint64_t gpa, uint64_t len, struct iovec *iov,
		   int max_iov)
{
	int n = 0;

	while (len) {
		const struct vs_mem_region *r = NULL;
		int64_t off = -1;
		for (unsigned i = 0; i < m->nregions && off < 0; i++) {
			r = &m->regions[i];
			off = offset_in(gpa, r->gpa, r->size);
		}
		if (off < 0)
			return -EFAULT;
		if (n >= max_iov)
			return -ENOBUFS;
		uint64_t chunk = r->size - (uint64_t)off;
		if (chunk > len)
			chunk = len;
		iov[n].iov_base = r->host + off;
		iov[n].iov_len = chunk;
		n++;
		len -= chunk;
		/* A region filled in by hand may end at 2^64: never wrap around to address 0. */
		if (len && gpa + chunk < gpa)
			return -EFAULT;
		gpa += chunk;
	}
	return n;
}
