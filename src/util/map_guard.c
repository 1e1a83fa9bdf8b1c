/* SPDX-License-Identifier: MIT */
/*
 * Mappings guarded against SIGBUS.  Whoever can shrink the file behind a shared mapping (a
 * vhost-user frontend its guest memory, another process of our user a trace file) makes
 * the next access past the file's new end raise SIGBUS, which would kill the process.
 * Each such mapping is registered here.  A process-wide SIGBUS handler that finds the
 * faulting address in one of them maps anonymous memory over that mapping from the
 * faulting page to its end (a shrink takes the file's tail), records the fault for the
 * mapping's owner, writes its wake-up eventfd and returns: the access completes on zeros,
 * and the owner, seeing the fault, stops using the mapping (the vhost server drops that
 * frontend, the trace tools stop with an error).  A SIGBUS anywhere else goes to the
 * handler that was there before, or kills the process as it would have without us.
 *
 * The handler jumps nowhere: no thread stops half way through an update of a list, a
 * counter or a lock, so the owner's state stays consistent.  The price is that the
 * accesses made after the fault, until the owner notices, see zeros.
 *
 * The registry is written under a mutex and read by the handler on any thread, so each
 * slot is a seqlock: the handler never acts on a half-written slot.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

#define GUARD_SLOTS 256 /* mappings guarded at once, all owners of the process together */

struct guard_slot {
	unsigned seq; /* odd while the slot is being written */
	uintptr_t base;
	size_t len; /* 0: free */
	size_t page;
	struct vs_map_fault *fault;
};

static struct guard_slot slots[GUARD_SLOTS];
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction previous; /* the SIGBUS action before ours */

/* What would have happened without us: the previous handler, or the default action (the
 * faulting instruction runs again and the kernel delivers SIGBUS with SIG_DFL). */
static void pass_on(int sig, siginfo_t *si, void *uctx)
{
	if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
		previous.sa_sigaction(sig, si, uctx);
		return;
	}
	if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
		previous.sa_handler(sig);
		return;
	}
	signal(SIGBUS, SIG_DFL);
}

/* Read slot i consistently: false when it is free, being written, or changed meanwhile. */
static bool slot_read(unsigned i, struct guard_slot *out)
{
	struct guard_slot *s = &slots[i];
	unsigned seq = __atomic_load_n(&s->seq, __ATOMIC_ACQUIRE);

	if (seq & 1)
		return false;
	out->base = __atomic_load_n(&s->base, __ATOMIC_RELAXED);
	out->len = __atomic_load_n(&s->len, __ATOMIC_RELAXED);
	out->page = __atomic_load_n(&s->page, __ATOMIC_RELAXED);
	out->fault = __atomic_load_n(&s->fault, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return out->len && __atomic_load_n(&s->seq, __ATOMIC_RELAXED) == seq;
}

static void on_sigbus(int sig, siginfo_t *si, void *uctx)
{
	uintptr_t addr = (uintptr_t)si->si_addr;
	int saved_errno = errno;

	for (unsigned i = 0; i < GUARD_SLOTS; i++) {
		struct guard_slot s;
		uintptr_t from, expected = 0;
		uint64_t one = 1;
		long p;

		if (!slot_read(i, &s) || addr < s.base || addr - s.base >= s.len)
			continue;
		from = s.base + ((addr - s.base) & ~(uintptr_t)(s.page - 1));
		/* The raw system call: no sanitizer interceptor runs inside a signal handler. */
		p = syscall(SYS_mmap, from, s.base + s.len - from, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		if (p == -1)
			break;
		__atomic_compare_exchange_n(&s.fault->addr, &expected, addr, false,
					    __ATOMIC_RELEASE, __ATOMIC_RELAXED);
		if (s.fault->wake_fd >= 0 && write(s.fault->wake_fd, &one, sizeof(one)) < 0) {
			/* a full counter: a wake-up is pending anyway */
		}
		errno = saved_errno;
		return;
	}
	errno = saved_errno;
	pass_on(sig, si, uctx);
}

/* Ours must be the handler while a mapping is guarded.  Whoever set one since (a test
 * framework sets its own around each test and puts the old one back after it, a
 * program may too) is taken as the handler before ours, called for the faults that are
 * not ours.  Under slots_lock. */
static int install(void)
{
	struct sigaction cur, sa = {.sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO | SA_ONSTACK};

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, NULL, &cur) < 0)
		return -errno;
	if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigbus)
		return 0;
	previous = cur;
	return sigaction(SIGBUS, &sa, NULL) < 0 ? -errno : 0;
}

int vs_map_guard_add(void *base, size_t len, size_t page, struct vs_map_fault *fault)
{
	int rc;

	pthread_mutex_lock(&slots_lock);
	rc = install();
	if (rc < 0)
		goto out;
	rc = -ENOSPC;
	for (unsigned i = 0; i < GUARD_SLOTS; i++) {
		struct guard_slot *s = &slots[i];

		if (s->len)
			continue;
		__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_RELEASE);
		__atomic_store_n(&s->base, (uintptr_t)base, __ATOMIC_RELAXED);
		__atomic_store_n(&s->page, page, __ATOMIC_RELAXED);
		__atomic_store_n(&s->fault, fault, __ATOMIC_RELAXED);
		__atomic_store_n(&s->len, len, __ATOMIC_RELAXED);
		__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
		rc = (int)i;
		break;
	}
out:
	pthread_mutex_unlock(&slots_lock);
	return rc;
}

void vs_map_guard_remove(int slot)
{
	struct guard_slot *s;

	if (slot < 0 || slot >= GUARD_SLOTS)
		return;
	s = &slots[slot];
	pthread_mutex_lock(&slots_lock);
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&s->len, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&s->seq, s->seq + 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&slots_lock);
}
