/* SPDX-License-Identifier: MIT */
/*
 * Fuzz the device-side descriptor walker.  The input becomes a descriptor table, an avail
 * ring, a used ring and two guest memory regions, each in its own exactly-sized allocation,
 * so any access outside them is an ASan report.  Pop until the queue is empty or broken,
 * touching every byte of every iovec returned.
 *
 * Input layout:
 *   [0]     queue size = 1 << (b % 9)
 *   [1]     bit 0 EVENT_IDX, bit 1 INDIRECT_DESC, bit 2 gap between the regions
 *   [2..3]  le16: bytes of guest memory in region 0 (the rest is region 1)
 *   then    descriptor table (16 * size), avail ring (6 + 2 * size), used ring (6 + 8 * size),
 *           guest memory (at most 64 KiB); missing bytes are zero.
 * Region 0 starts at gpa 0x1000; region 1 follows it directly, or after a 0x1000 gap.
 */
#include <errno.h>
#include <stdlib.h>

#include "proto/virtio_scsi_proto.h"
#include "virtio/virtio.h"

#define MEM_MAX (64u << 10)

static void *take(const uint8_t **p, size_t *left, size_t len)
{
	uint8_t *b = calloc(1, len ? len : 1);
	size_t n = len < *left ? len : *left;
	if (!b)
		abort();
	memcpy(b, *p, n);
	*p += n;
	*left -= n;
	return b;
}

static void touch(const struct iovec *iov, unsigned n, bool write)
{
	volatile uint8_t sink = 0;
	for (unsigned i = 0; i < n; i++) {
		uint8_t *b = iov[i].iov_base;
		for (size_t j = 0; j < iov[i].iov_len; j++) {
			sink ^= b[j];
			if (write)
				b[j] = (uint8_t)j;
		}
	}
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct vs_vq_elem elem;
	struct vs_vq_dev vq;
	struct vs_mem mem;
	const uint8_t *p = data;
	size_t left = size;
	uint8_t hdr[4] = {0};

	memcpy(hdr, data, size < 4 ? size : 4);
	p += size < 4 ? size : 4;
	left -= size < 4 ? size : 4;

	unsigned qsize = 1u << (hdr[0] % 9);
	bool event_idx = hdr[1] & 1, indirect = hdr[1] & 2, gap = hdr[1] & 4;
	void *desc = take(&p, &left, vs_vring_desc_bytes(qsize));
	void *avail = take(&p, &left, vs_vring_avail_bytes(qsize));
	void *used = take(&p, &left, vs_vring_used_bytes(qsize));
	size_t memlen = left < MEM_MAX ? left : MEM_MAX;
	size_t len0 = vs_ld_le16(hdr + 2);
	if (len0 > memlen)
		len0 = memlen;
	size_t len1 = memlen - len0;
	uint8_t *r0 = take(&p, &left, len0);
	uint8_t *r1 = take(&p, &left, len1);

	vs_mem_reset(&mem);
	if (len0)
		vs_mem_add(&mem, 0x1000, len0, 0x100000, r0);
	if (len1)
		vs_mem_add(&mem, 0x1000 + len0 + (gap ? 0x1000 : 0), len1, 0x200000, r1);

	if (vs_vq_dev_init(&vq, qsize, desc, avail, used, event_idx, indirect, 0))
		abort(); /* valid size and malloc alignment: init must accept */
	vs_vq_dev_set_notification(&vq, true);
	vs_vq_dev_avail_count(&vq);
	for (unsigned i = 0;; i++) {
		int rc = vs_vq_dev_pop(&vq, &mem, &elem);
		if (rc == -EAGAIN || rc == -EIO)
			break;
		if (i >= qsize)
			abort(); /* never more chains than the ring can hold */
		if (rc == 0) {
			if (elem.out_num > VS_VQ_MAX_SEGS || elem.in_num > VS_VQ_MAX_SEGS ||
			    elem.out_len + elem.in_len > VS_VQ_MAX_CHAIN_BYTES)
				abort();
			touch(elem.out, elem.out_num, false);
			touch(elem.in, elem.in_num, true);
		} else if (!elem.bad || elem.head >= qsize) {
			abort(); /* a per-chain error must return a usable head */
		}
		vs_vq_dev_push(&vq, elem.head, rc ? 0 : (uint32_t)elem.in_len);
		vs_vq_dev_should_notify(&vq);
	}

	unsigned t, l;
	vs_vscsi_lun_decode(r0 && len0 >= 8 ? r0 : (const uint8_t *)"\1\0\100\0\0\0\0\0", &t, &l);

	free(desc);
	free(avail);
	free(used);
	free(r0);
	free(r1);
	return 0;
}
