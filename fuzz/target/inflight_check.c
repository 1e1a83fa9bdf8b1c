/* SPDX-License-Identifier: MIT */
/*
 * fuzz_target_session's check of in-flight tracking (linked with -Wl,--wrap= for
 * vs_vq_dev_set_inflight and vs_vq_dev_pop, so the target's own calls come here first).
 * When a ring starts on a region it believes (vs_vq_dev_set_inflight returned 0):
 *   - the requests it will resubmit are heads of the ring, each at most once, oldest first,
 *     each marked in flight in the region, and no other head is marked there;
 *   - it resumes taking from the avail ring at used index + that many (the avail entries of
 *     the requests it resubmits are not taken a second time);
 * a ring whose region was refused tracks nothing.  Then, until it starts again, every head
 * it pops is a head of the ring, and none is resubmitted twice.
 * A region that faulted (the input shrank its file under the target) reads as zeroes
 * from then on: the region checks give up on it (the device ends the session).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "session.h"
#include "vhost/vhost_int.h"

int __real_vs_vq_dev_set_inflight(struct vs_vq_dev *vq, struct vs_vhost_inflight_split *r,
				  struct vs_inflight_entry *scratch, char *why, size_t whylen);
int __wrap_vs_vq_dev_set_inflight(struct vs_vq_dev *vq, struct vs_vhost_inflight_split *r,
				  struct vs_inflight_entry *scratch, char *why, size_t whylen);
int __real_vs_vq_dev_pop(struct vs_vq_dev *vq, const struct vs_mem *mem, struct vs_vq_elem *elem);
int __wrap_vs_vq_dev_pop(struct vs_vq_dev *vq, const struct vs_mem *mem, struct vs_vq_elem *elem);

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "fuzz: in-flight: " __VA_ARGS__);                                  \
		__builtin_trap();                                                                  \
	} while (0)

/* Per ring (by queue index): what it resubmitted since it last started. */
static struct ring_check {
	const struct vs_vq_dev *vq;
	uint8_t resubmitted[VS_VRING_MAX_SIZE / 8];
} checks[TQ_MAX];
static uint8_t seen[VS_VRING_MAX_SIZE / 8];

static bool bit(const uint8_t *b, unsigned i)
{
	return b[i / 8] & (1u << (i % 8));
}

static void bit_set(uint8_t *b, unsigned i)
{
	b[i / 8] |= (uint8_t)(1u << (i % 8));
}

static bool faulted(void)
{
	return fz_current_dev && __atomic_load_n(&fz_current_dev->fault.addr, __ATOMIC_ACQUIRE);
}

static struct ring_check *check_of(const struct vs_vq_dev *vq)
{
	return vq->qid < TQ_MAX ? &checks[vq->qid] : NULL;
}

int __wrap_vs_vq_dev_set_inflight(struct vs_vq_dev *vq, struct vs_vhost_inflight_split *r,
				  struct vs_inflight_entry *scratch, char *why, size_t whylen)
{
	int rc = __real_vs_vq_dev_set_inflight(vq, r, scratch, why, whylen);
	struct ring_check *c = check_of(vq);
	unsigned n = vq->resubmit_num, marked = 0;

	if (c) {
		c->vq = vq;
		memset(c->resubmitted, 0, sizeof(c->resubmitted));
	}
	if (rc) {
		if (vq->inflight)
			FAIL("vq %u refused its region (%s) but tracks in it\n", vq->qid, why);
		return rc;
	}
	if (vq->inflight != r || vq->resubmit != scratch)
		FAIL("vq %u believes its region but does not use it\n", vq->qid);
	if (n > vq->size)
		FAIL("vq %u: %u to resubmit, the ring has %u\n", vq->qid, n, vq->size);
	memset(seen, 0, sizeof(seen));
	for (unsigned i = 0; i < n; i++) {
		uint16_t h = scratch[i].head;
		if (h >= vq->size)
			FAIL("vq %u resubmits head %u of a ring of %u\n", vq->qid, h, vq->size);
		if (bit(seen, h))
			FAIL("vq %u resubmits head %u twice\n", vq->qid, h);
		bit_set(seen, h);
		if (i && scratch[i].counter < scratch[i - 1].counter)
			FAIL("vq %u resubmits head %u (counter %llu) after a younger one\n",
			     vq->qid, h, (unsigned long long)scratch[i].counter);
	}
	if (n && vq->last_avail_idx != (uint16_t)(vq->used_idx + n))
		FAIL("vq %u resubmits %u but takes from avail %u on (used %u)\n", vq->qid, n,
		     vq->last_avail_idx, vq->used_idx);
	/* The region says what the device believes. */
	for (unsigned i = 0; i < vq->size; i++) {
		uint8_t m = __atomic_load_n(&r->desc[i].inflight, __ATOMIC_RELAXED);
		if (faulted())
			return rc;
		if (m != bit(seen, i))
			FAIL("vq %u: head %u marked %u in its region, %s by the device\n", vq->qid,
			     i, m, bit(seen, i) ? "resubmitted" : "not resubmitted");
		marked += m;
	}
	if (marked != n || r->version != VS_VHOST_INFLIGHT_VERSION || r->desc_num != vq->size ||
	    r->used_idx != vq->used_idx) {
		if (faulted())
			return rc;
		FAIL("vq %u: region version %u desc_num %u used %u, %u marked; the ring: %u "
		     "entries, used %u, %u resubmitted\n",
		     vq->qid, r->version, r->desc_num, r->used_idx, marked, vq->size, vq->used_idx,
		     n);
	}
	return rc;
}

int __wrap_vs_vq_dev_pop(struct vs_vq_dev *vq, const struct vs_mem *mem, struct vs_vq_elem *elem)
{
	bool resubmit = vq->inflight && vq->resubmit_next < vq->resubmit_num, broken = vq->broken;
	struct ring_check *c = check_of(vq);
	int rc = __real_vs_vq_dev_pop(vq, mem, elem);

	/* Nothing given out (an -EIO from the avail ring may come before its head is known). */
	if (broken || !vq->inflight || rc == -EAGAIN || (rc == -EIO && !resubmit))
		return rc;
	if (elem->head >= vq->size)
		FAIL("vq %u gave out head %u of a ring of %u\n", vq->qid, elem->head, vq->size);
	if (resubmit && c && c->vq == vq) {
		if (bit(c->resubmitted, elem->head))
			FAIL("vq %u resubmitted head %u twice\n", vq->qid, elem->head);
		bit_set(c->resubmitted, elem->head);
	}
	return rc;
}
