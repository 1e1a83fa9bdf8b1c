/* SPDX-License-Identifier: MIT */
/*
 * Guest memory: SET_MEM_TABLE, ADD_MEM_REG, REM_MEM_REG.  A new map is built (and every
 * region mapped) before anything changes, so a failure leaves the old map in force; the
 * swap itself happens with every ring stopped, so a worker never sees an unmapped region.
 */
#define _GNU_SOURCE /* F_GET_SEALS */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <vioscope/trace.h>

#include "vhost/vhost_int.h"

#define FAIL(code, ...) vs_fail(why, whylen, code, __VA_ARGS__)

/* The file systems guest memory may live on: memory ones.  On any other (FUSE, NFS, a
 * disk), a page fault on guest memory can block a worker for as long as that file system
 * wants, and a FUSE server run by the frontend's user wants forever. */
static bool memory_fs(int fd, const char **name)
{
	struct statfs sf;

	if (fstatfs(fd, &sf) < 0)
		return false;
	*name = sf.f_type == TMPFS_MAGIC       ? "tmpfs"
		: sf.f_type == HUGETLBFS_MAGIC ? "hugetlbfs"
					       : NULL;
	return *name != NULL;
}

int vs_vhost_map_file(struct vs_vhost_dev *d, const struct vs_vhost_mem_region *r, int fd,
		      struct vs_vhost_map *map, uint8_t **host, char *why, size_t whylen)
{
	uint64_t align = (uint64_t)sysconf(_SC_PAGESIZE), start, lead;
	const char *fs = NULL;
	struct stat st;
	int seals, rc;
	void *p;

	if (fstat(fd, &st) < 0)
		return FAIL(-errno, "fstat: %s", strerror(errno));
	if (!S_ISREG(st.st_mode))
		return FAIL(-EINVAL, "region fd is not a memory file (mode %#o)",
			    (unsigned)st.st_mode);
	if (!memory_fs(fd, &fs))
		return FAIL(-EINVAL, "region fd is a file on a disk or network file system, not "
				     "tmpfs or hugetlbfs (a memfd)");
	/* validated: mmap_offset + memory_size does not wrap */
	if ((uint64_t)st.st_size < r->mmap_offset + r->memory_size)
		return FAIL(-EINVAL, "region needs %#llx bytes of its file, which has %#llx",
			    (unsigned long long)(r->mmap_offset + r->memory_size),
			    (unsigned long long)st.st_size);
	/* hugetlbfs reports its page size here; mappings must start on one. */
	if (st.st_blksize > 0 && ((uint64_t)st.st_blksize & ((uint64_t)st.st_blksize - 1)) == 0 &&
	    (uint64_t)st.st_blksize > align)
		align = (uint64_t)st.st_blksize;
	start = r->mmap_offset & ~(align - 1);
	lead = r->mmap_offset - start;
	if (r->memory_size + lead > SIZE_MAX - align)
		return FAIL(-EINVAL, "region too large to map");
	p = mmap(NULL, (size_t)(r->memory_size + lead), PROT_READ | PROT_WRITE, MAP_SHARED, fd,
		 (off_t)start);
	if (p == MAP_FAILED)
		return FAIL(-errno, "mmap of %#llx bytes at offset %#llx: %s%s",
			    (unsigned long long)(r->memory_size + lead), (unsigned long long)start,
			    strerror(errno), errno == EACCES ? " (fd not open for writing)" : "");
	map->base = p;
	map->len = (size_t)(r->memory_size + lead);
	/* The guard replaces whole pages: cover the mapping's last (huge) page entirely. */
	map->guard = vs_map_guard_add(p, (map->len + align - 1) & ~(align - 1), align, &d->fault);
	if (map->guard < 0) {
		rc = map->guard;
		munmap(p, map->len);
		*map = (struct vs_vhost_map){.guard = -1};
		return FAIL(rc, "cannot guard the mapping: %s", strerror(-rc));
	}
	seals = fcntl(fd, F_GET_SEALS);
	VS_INFO(MEMORY, "region file on %s, %s", fs,
		seals >= 0 && (seals & F_SEAL_SHRINK)
		    ? "sealed against shrinking"
		    : "not sealed against shrinking: a shrink fails the device, guarded");
	*host = (uint8_t *)p + lead;
	return 0;
}

void vs_vhost_unmap_file(struct vs_vhost_map *m)
{
	if (!m->base)
		return;
	vs_map_guard_remove(m->guard);
	munmap(m->base, m->len);
	*m = (struct vs_vhost_map){.guard = -1};
}

void vs_vhost_mem_unmap_all(struct vs_vhost_dev *d)
{
	if (d->wedged)
		return; /* a queue may still run on it: leave it mapped */
	for (unsigned i = 0; i < VS_MEM_MAX_REGIONS; i++)
		vs_vhost_unmap_file(&d->maps[i]);
	vs_mem_reset(&d->mem);
	__atomic_store_n(&d->fault.addr, 0, __ATOMIC_RELAXED);
}

/* Install a new map: stop the running rings, swap, drop the old mappings listed in
 * `drop`, tell the user, restart.  A ring that no longer fits the map stays stopped and
 * the request fails.  nmaps[first_new..] are mappings made for this request: unmapped
 * again if a ring cannot be stopped (then nothing changes). */
static int commit(struct vs_vhost_dev *d, const struct vs_mem *nm, struct vs_vhost_map *nmaps,
		  unsigned first_new, struct vs_vhost_map *drop, unsigned ndrop, char *why,
		  size_t whylen)
{
	/* While migrating, a page we write beyond the log would never be copied: the frontend
	 * grows the log before it grows memory (QEMU's vhost_commit). */
	if (vs_vhost_log_active(d) && !vs_vhost_log_covers(&d->log, nm)) {
		for (unsigned i = first_new; i < nm->nregions; i++)
			vs_vhost_unmap_file(&nmaps[i]);
		return FAIL(-EINVAL,
			    "the new memory map reaches beyond the dirty log (%#llx bytes)",
			    (unsigned long long)d->log.bytes);
	}
	if (vs_vhost_rings_stop(d)) {
		for (unsigned i = first_new; i < nm->nregions; i++)
			vs_vhost_unmap_file(&nmaps[i]);
		return FAIL(-EIO, "a queue could not be stopped: the memory map stays");
	}
	for (unsigned i = 0; i < ndrop; i++)
		vs_vhost_unmap_file(&drop[i]);
	d->mem = *nm;
	memset(d->maps, 0, sizeof(d->maps));
	memcpy(d->maps, nmaps, sizeof(d->maps[0]) * nm->nregions);
	VS_INFO(VHOST, "memory table: %u region(s)", nm->nregions);
	for (unsigned i = 0; i < nm->nregions; i++) {
		const struct vs_mem_region *r = &nm->regions[i];
		VS_INFO(VHOST, "  region %u: gpa %#llx size %#llx uva %#llx host %p", i,
			(unsigned long long)r->gpa, (unsigned long long)r->size,
			(unsigned long long)r->uva, r->host);
	}
	if (d->ops.mem_changed)
		d->ops.mem_changed(d->opaque, &d->mem);
	return vs_vhost_rings_update(d, why, whylen);
}

/* Map r and append it to nm/nmaps; on failure nothing of it remains. */
static int add_region(struct vs_vhost_dev *d, struct vs_mem *nm, struct vs_vhost_map *nmaps,
		      const struct vs_vhost_mem_region *r, int fd, char *why, size_t whylen)
{
	struct vs_vhost_map map = {.guard = -1};
	uint8_t *host = NULL;
	int rc;

	if (nm->nregions >= VS_MEM_MAX_REGIONS)
		return FAIL(-ENOSPC, "more than %u regions", VS_MEM_MAX_REGIONS);
	if ((rc = vs_vhost_map_file(d, r, fd, &map, &host, why, whylen)))
		return rc;
	rc = vs_mem_add(nm, r->guest_phys_addr, r->memory_size, r->userspace_addr, host);
	if (rc) {
		vs_vhost_unmap_file(&map);
		return FAIL(rc, "region gpa %#llx size %#llx uva %#llx overlaps another",
			    (unsigned long long)r->guest_phys_addr,
			    (unsigned long long)r->memory_size,
			    (unsigned long long)r->userspace_addr);
	}
	nmaps[nm->nregions - 1] = map;
	return 0;
}

int vs_vhost_set_mem_table_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, char *why,
				size_t whylen)
{
	const struct vs_vhost_memory *m = &msg->payload.memory;
	struct vs_vhost_map nmaps[VS_MEM_MAX_REGIONS] = {0};
	struct vs_mem nm;
	int rc = 0;

	vs_mem_reset(&nm);
	for (unsigned i = 0; i < m->nregions && !rc; i++) {
		const struct vs_vhost_mem_region *r = &m->regions[i];
		VS_INFO(VHOST,
			"SET_MEM_TABLE region %u: gpa %#llx size %#llx uva %#llx offset %#llx", i,
			(unsigned long long)r->guest_phys_addr, (unsigned long long)r->memory_size,
			(unsigned long long)r->userspace_addr, (unsigned long long)r->mmap_offset);
		rc = add_region(d, &nm, nmaps, r, msg->fds[i], why, whylen);
	}
	if (rc) {
		for (unsigned i = 0; i < nm.nregions; i++)
			vs_vhost_unmap_file(&nmaps[i]);
		return rc;
	}
	/* The fds are closed by the caller: the mappings hold the memory. */
	return commit(d, &nm, nmaps, 0, d->maps, VS_MEM_MAX_REGIONS, why, whylen);
}

int vs_vhost_add_mem_reg_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, char *why,
			      size_t whylen)
{
	const struct vs_vhost_mem_region *r = &msg->payload.mem_reg.region;
	struct vs_vhost_map nmaps[VS_MEM_MAX_REGIONS];
	struct vs_mem nm = d->mem;
	int rc;

	VS_INFO(VHOST, "ADD_MEM_REG: gpa %#llx size %#llx uva %#llx offset %#llx",
		(unsigned long long)r->guest_phys_addr, (unsigned long long)r->memory_size,
		(unsigned long long)r->userspace_addr, (unsigned long long)r->mmap_offset);
	memcpy(nmaps, d->maps, sizeof(nmaps));
	if ((rc = add_region(d, &nm, nmaps, r, msg->fds[0], why, whylen)))
		return rc;
	return commit(d, &nm, nmaps, nm.nregions - 1, NULL, 0, why, whylen);
}

int vs_vhost_rem_mem_reg_exec(struct vs_vhost_dev *d, struct vs_vhost_msg *msg, char *why,
			      size_t whylen)
{
	const struct vs_vhost_mem_region *r = &msg->payload.mem_reg.region;
	struct vs_vhost_map nmaps[VS_MEM_MAX_REGIONS] = {0};
	struct vs_vhost_map drop;
	struct vs_mem nm;
	unsigned i, n = 0;

	VS_INFO(VHOST, "REM_MEM_REG: gpa %#llx size %#llx uva %#llx",
		(unsigned long long)r->guest_phys_addr, (unsigned long long)r->memory_size,
		(unsigned long long)r->userspace_addr);
	/* The spec identifies the region by guest address, user address and size. */
	for (i = 0; i < d->mem.nregions; i++) {
		const struct vs_mem_region *o = &d->mem.regions[i];
		if (o->gpa == r->guest_phys_addr && o->uva == r->userspace_addr &&
		    o->size == r->memory_size)
			break;
	}
	if (i == d->mem.nregions)
		return FAIL(-ENOENT, "no region gpa %#llx size %#llx uva %#llx",
			    (unsigned long long)r->guest_phys_addr,
			    (unsigned long long)r->memory_size,
			    (unsigned long long)r->userspace_addr);
	nm = d->mem;
	nm.nregions = 0;
	for (unsigned j = 0; j < d->mem.nregions; j++) {
		if (j == i)
			continue;
		nm.regions[n] = d->mem.regions[j];
		nmaps[n++] = d->maps[j];
	}
	nm.nregions = n;
	drop = d->maps[i];
	return commit(d, &nm, nmaps, nm.nregions, &drop, 1, why, whylen);
}
