/* SPDX-License-Identifier: MIT */
/*
 * Trace runtime, first half: the process's shared-memory file (made when the first
 * object registers: providers' control words, metadata, per-thread rings), the slow
 * path of event recording, and the print backend.  The fast path is inline in
 * <vioscope/trace.h>; objects, providers and settings are in registry.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "trace/runtime_int.h"
#include "util/util.h"

#define DEFAULT_RINGS	  64
#define DEFAULT_RING_SIZE (1u << 20)
#define DEFAULT_META	  (4u << 20)
#define NCHUNK		  16
/* Tries to reserve room before an event is dropped instead (see vs__reserve_slow). */
#define MAX_RESERVE_ATTEMPTS 64

struct vs_rt_file vs_rt;

/* fast_end == 0 sends the first event of each thread to the slow path, which
 * attaches a ring; a thread that has exited gets the dead writer and drops. */
/* Where events that can't be kept are written (and forgotten): the fast path never
 * tests for failure, so the slow path always hands out somewhere to write. */
#define SCRATCH_SIZE 0x10000
static uint8_t global_scratch[SCRATCH_SIZE];
static uint64_t nowhere;
static struct vs_ring_writer attach_writer = {.data = global_scratch, .pub = &nowhere};
static struct vs_ring_writer dead_writer = {.data = global_scratch, .pub = &nowhere};
__thread struct vs_ring_writer *vs__tls_writer = &attach_writer;

struct thread_ring {
	struct vs_ring_writer w;      /* first: the fast path sees only this */
	struct vs_ring_writer drop_w; /* current after a drop: commits go nowhere */
	uint64_t drop_pub;
	uint8_t *scratch;
	struct vs_shm_ring *shm;
	uint64_t size;
	uint64_t pending_drops; /* to report with a marker once there is room */
	/* Flight-recorder checkpoints: for each of the last NCHUNK chunk boundaries, the
	 * first record at or after it and the event count there.  Overwriting then moves
	 * the tail a chunk at a time and counts the events it passes over without
	 * reading them. */
	uint64_t chunk;	  /* ring size / NCHUNK */
	uint64_t cp_next; /* next boundary to checkpoint */
	struct {
		uint64_t boundary, pos, count;
	} cp[16];
	uint64_t tail_pos;   /* where we last put the tail (a record boundary) ... */
	uint64_t tail_count; /* ... and the event count there (valid iff tail_pos == tail;
				UINT64_MAX: not known) */
	unsigned slot;
	unsigned drops_since_check;
};

static struct {
	pthread_key_t key;
	bool key_ok;
	bool atexit_done;
	bool exiting;
	bool forked;	     /* a fork()ed child: its file is made at its first event */
	void *fork_leftover; /* the forking thread's ring state, in the child */
	FILE *print_file;
	pthread_mutex_t print_lock;
} rt = {.print_lock = PTHREAD_MUTEX_INITIALIZER};

static __thread struct thread_ring *my_ring;

uint64_t vs__clock_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t realtime_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static uint64_t parse_size(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		return 0;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	}
	return *end ? 0 : v;
}

static uint64_t ring_size_from_env(void)
{
	const char *s = getenv("VIOSCOPE_TRACE_RING");
	if (!s)
		return DEFAULT_RING_SIZE;
	uint64_t v = parse_size(s);
	if (v < 4096 || v > (1ull << 30) || (v & (v - 1))) {
		fprintf(stderr,
			"vioscope trace: VIOSCOPE_TRACE_RING=%s: need a power of two "
			"between 4K and 1G; using %u\n",
			s, DEFAULT_RING_SIZE);
		return DEFAULT_RING_SIZE;
	}
	return v;
}

static unsigned rings_from_env(void)
{
	const char *s = getenv("VIOSCOPE_TRACE_THREADS");
	if (!s)
		return DEFAULT_RINGS;
	uint64_t v = parse_size(s);
	if (v < 1 || v > 4096) {
		fprintf(stderr,
			"vioscope trace: VIOSCOPE_TRACE_THREADS=%s: need 1..4096; "
			"using %u\n",
			s, DEFAULT_RINGS);
		return DEFAULT_RINGS;
	}
	return (unsigned)v;
}

static uint64_t meta_from_env(void)
{
	const char *s = getenv("VIOSCOPE_TRACE_META");
	if (!s)
		return DEFAULT_META;
	uint64_t v = parse_size(s);
	if (v < 4096 || v > (1ull << 30)) {
		fprintf(stderr, "vioscope trace: VIOSCOPE_TRACE_META=%s: need 4K..1G; using %u\n",
			s, DEFAULT_META);
		return DEFAULT_META;
	}
	return (v + 7) & ~7ull;
}

const char *vs_shm_dir(void)
{
	const char *d = getenv("VIOSCOPE_TRACE_DIR");
	return d && *d ? d : "/dev/shm";
}

/* A file we have just created under a name nobody else could have chosen: the
 * directory is shared with other users (/dev/shm), so a name they can predict could be
 * theirs already (a file they keep open, a link to one of ours).  mkostemp creates it
 * with O_EXCL, mode 0600; fstat makes sure it is what we made. */
static int create_exclusive(void)
{
	snprintf(vs_rt.tmp_path, sizeof vs_rt.tmp_path, "%s/" VS_SHM_INIT_PREFIX "%d-XXXXXX",
		 vs_shm_dir(), (int)getpid());
	int fd = mkostemp(vs_rt.tmp_path, O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    st.st_nlink != 1 || st.st_size != 0) {
		close(fd);
		unlink(vs_rt.tmp_path);
		return -EEXIST;
	}
	return fd;
}

/* Map the file: a shared-memory file others can open, or, if that is impossible,
 * private memory so tracing still works in-process.  The file is sparse: the areas
 * made for what may come (metadata, rings of threads yet to start) take memory only
 * where they are written. */
static int map_shm(size_t size)
{
	void *p = MAP_FAILED;

	/* Built under a temporary name and renamed into place once complete, so a tool
	 * never sees a half-initialised file (nor one a fork()ed child will replace).
	 * rename() replaces a file left under the final name without opening it. */
	snprintf(vs_rt.path, sizeof vs_rt.path, "%s/%s%d", vs_shm_dir(), VS_SHM_PREFIX,
		 (int)getpid());
	int fd = create_exclusive();
	if (fd >= 0) {
		if (ftruncate(fd, (off_t)size) == 0)
			p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
		if (p == MAP_FAILED)
			unlink(vs_rt.tmp_path);
	} else {
		errno = -fd;
	}
	if (p == MAP_FAILED) {
		fprintf(stderr,
			"vioscope trace: cannot create %s (%s); tracing in private "
			"memory\n",
			vs_rt.path, strerror(errno));
		vs_rt.path[0] = '\0';
		p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return -errno;
	}
	vs_rt.hdr = p;
	vs_rt.size = size;
	return 0;
}

static void on_exit_cleanup(void)
{
	rt.exiting = true;
	if (!vs_rt.hdr)
		return;
	__atomic_store_n(&vs_rt.hdr->exited, 1, __ATOMIC_RELEASE);
	if (vs_rt.path[0] && !__atomic_load_n(&vs_rt.hdr->keep, __ATOMIC_RELAXED))
		unlink(vs_rt.path);
	if (rt.print_file && rt.print_file != stderr)
		fflush(rt.print_file);
}

bool vs_rt_exiting(void)
{
	return rt.exiting;
}

/* At exit, handlers run in the reverse order of their registration, and the one that
 * runs the objects' destructors (ld.so's) is registered when main() is about to be
 * called: a handler registered earlier, from a library's constructor, runs after the
 * destructors, which would then record every object as unloaded.  Registered again
 * once the program itself registers, it runs before them. */
void vs_rt_exit_hook_late(void)
{
	static bool done;
	if (rt.atexit_done && !done) {
		atexit(on_exit_cleanup);
		done = true;
	}
}

static void thread_exit(void *arg)
{
	struct thread_ring *tr = arg;
	vs__tls_writer = &dead_writer;
	my_ring = NULL;
	__atomic_store_n(&tr->shm->state, VS_RING_RETIRED, __ATOMIC_RELEASE);
	/* The ring's data stays in the file: a recorder drains it, a dump shows it.
	 * Only the writer's private state goes. */
	free(tr->scratch);
	free(tr);
}

static void open_print_file(void)
{
	const char *path = getenv("VIOSCOPE_TRACE_FILE");
	rt.print_file = stderr;
	if (path && *path) {
		FILE *f = fopen(path, "ae");
		if (f)
			rt.print_file = f;
		else
			fprintf(stderr,
				"vioscope trace: VIOSCOPE_TRACE_FILE=%s: %s; printing to "
				"stderr\n",
				path, strerror(errno));
	}
}

static void child_after_fork(void);

/* Kept in this copy of the runtime's memory; its value and address go into the file. */
static uint64_t instance_token;

/* Does the trace file of this pid belong to another copy of the runtime in this very
 * process image (a program that links the runtime statically without exporting it,
 * and a library that brings libvioscope_trace.so)?  That copy's token is in our own
 * memory then.  A file left by an earlier image (before exec) or an earlier process
 * with this pid is not: its token is not there.  Only a file such a copy could have
 * made counts (ours, regular, one link); its header is read with pread (a file that
 * shrinks cannot fault us) and the token with process_vm_readv, which fails instead of
 * faulting on an address that is not mapped. */
static bool other_runtime_here(void)
{
	char path[PATH_MAX];
	struct vs_shm_header h;
	struct stat st;
	bool here = false;

	snprintf(path, sizeof path, "%s/%s%d", vs_shm_dir(), VS_SHM_PREFIX, (int)getpid());
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    st.st_nlink == 1 && pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h &&
	    memcmp(h.magic, VS_SHM_MAGIC, 8) == 0 && h.pid == (int32_t)getpid() && h.owner_token &&
	    h.owner_addr != (uintptr_t)&instance_token) {
		uint64_t v = 0;
		struct iovec local = {&v, sizeof v};
		struct iovec remote = {(void *)(uintptr_t)h.owner_addr, sizeof v};
		here = process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == (ssize_t)sizeof v &&
		       v == h.owner_token;
	}
	close(fd);
	return here;
}

int vs_rt_file_create(void)
{
	int rc;

	if (vs_rt.hdr)
		return 0;
	if (other_runtime_here())
		return -EEXIST;
	while (!instance_token)
		if (getrandom(&instance_token, sizeof instance_token, 0) != sizeof instance_token)
			instance_token = vs__clock_ns() ^ (uint64_t)getpid() << 40;
	unsigned nrings = rings_from_env();
	uint64_t ring_size = ring_size_from_env();
	uint64_t meta_cap = meta_from_env();
	size_t provs_off = (sizeof(struct vs_shm_header) + 63) & ~(size_t)63;
	size_t meta_off = provs_off + VS_RT_PROVIDER_SLOTS * sizeof(struct vs_shm_provider);
	size_t rings_off = (meta_off + meta_cap + 4095) & ~(size_t)4095;
	size_t data_off = (rings_off + nrings * sizeof(struct vs_shm_ring) + 4095) & ~(size_t)4095;
	size_t size = data_off + (size_t)nrings * ring_size;

	/* Ctrl-C and kill(1) wait until the file is in place: a process they ended between
	 * mkostemp and rename would leave a temporary file nobody knows is its (a program's
	 * own handlers are not installed yet when this runs from a constructor, so Ctrl-C
	 * on a process group that is just starting ends it here). */
	sigset_t stop_signals, was;
	sigemptyset(&stop_signals);
	sigaddset(&stop_signals, SIGINT);
	sigaddset(&stop_signals, SIGTERM);
	sigaddset(&stop_signals, SIGHUP);
	sigaddset(&stop_signals, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &stop_signals, &was);
	rc = map_shm(size);
	if (rc < 0) {
		pthread_sigmask(SIG_SETMASK, &was, NULL);
		return rc;
	}
	struct vs_shm_header *h = vs_rt.hdr;
	h->version = VS_SHM_VERSION;
	h->header_size = sizeof *h;
	h->total_size = size;
	h->pid = (int32_t)getpid();
	h->start_time = vs_proc_start_time(getpid());
	ssize_t n = readlink("/proc/self/exe", h->exe, sizeof h->exe - 1);
	if (n < 0)
		n = 0;
	h->exe[n] = '\0';
	/* the TSC when invariant (util/clock.c), unless the environment asks for CLOCK_MONOTONIC */
	vs_rt.clock_mono = !vs_tsc_clock("VIOSCOPE_TRACE_CLOCK");
	h->clock_is_tsc = !vs_rt.clock_mono;
	vs_clock_sample(!vs_rt.clock_mono, &h->clk_ts0, &h->clk_mono0, &h->clk_real0);
	h->providers_offset = provs_off;
	h->provider_slots = VS_RT_PROVIDER_SLOTS;
	h->meta_offset = meta_off;
	h->meta_capacity = meta_cap;
	h->rings_offset = rings_off;
	h->ring_count = nrings;
	h->ring_size = ring_size;
	h->data_offset = data_off;
	vs_rt.provs = (struct vs_shm_provider *)((uint8_t *)h + provs_off);
	vs_rt.provider_slots = VS_RT_PROVIDER_SLOTS;
	vs_rt.meta = (uint8_t *)h + meta_off;
	vs_rt.meta_capacity = meta_cap;
	vs_rt.rings = (struct vs_shm_ring *)((uint8_t *)h + rings_off);
	vs_rt.ring_data = (uint8_t *)h + data_off;
	vs_rt.ring_count = nrings;
	vs_rt.ring_size = ring_size;
	h->owner_token = instance_token;
	h->owner_addr = (uintptr_t)&instance_token;
	h->mode = VS_MODE_FLIGHT;
	const char *keep = getenv("VIOSCOPE_TRACE_KEEP");
	h->keep = keep && *keep && strcmp(keep, "0") != 0;
	/* Magic last: a tool that sees it sees a complete header.  Providers and metadata
	 * are added after, each published by its own count. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
	memcpy(h->magic, VS_SHM_MAGIC, 8);
	if (vs_rt.path[0] && rename(vs_rt.tmp_path, vs_rt.path) < 0) {
		/* e.g. another user's file under our name in a sticky directory: tracing
		 * goes on in the (now nameless) file, the tools cannot attach */
		fprintf(stderr,
			"vioscope trace: cannot publish %s (%s); tracing without a trace "
			"file\n",
			vs_rt.path, strerror(errno));
		unlink(vs_rt.tmp_path);
		vs_rt.path[0] = '\0';
	}
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	if (!rt.atexit_done) {
		rt.key_ok = pthread_key_create(&rt.key, thread_exit) == 0;
		atexit(on_exit_cleanup);
		pthread_atfork(NULL, NULL, child_after_fork);
		rt.atexit_done = true;
	}
	rt.forked = false;
	return 0;
}

bool vs_rt_file_deferred(void)
{
	if (!&vs__file_on_demand || !vs__file_on_demand)
		return false;
	/* what the file will have room for, so that what registers meanwhile fits */
	vs_rt.meta_capacity = meta_from_env();
	vs_rt.provider_slots = VS_RT_PROVIDER_SLOTS;
	return true;
}

int vs__file_start(void)
{
	return vs_rt.hdr || vs_reg_child_file() ? 0 : -ENOENT;
}

/* The child of fork() must not write into its parent's rings.  Only async-signal-
 * safe work here: drop the parent's mapping (sites test a private copy of their
 * control words meanwhile); the child makes its own file at its first event (most
 * children exec() before that). */
static void child_after_fork(void)
{
	vs_reg_atfork_child();
	if (vs_rt.hdr)
		munmap(vs_rt.hdr, vs_rt.size);
	vs__tls_writer = &attach_writer;
	rt.fork_leftover = my_ring; /* freed at the first attach: free() isn't safe here */
	my_ring = NULL;
	vs_rt.hdr = NULL;
	vs_rt.path[0] = '\0';
	rt.forked = true;
}

/* Events in [tail, head) of a ring no thread writes any more. */
static uint64_t count_events(const uint8_t *data, uint64_t size, uint64_t tail, uint64_t head)
{
	uint64_t n = 0, mask = size - 1;
	if (head - tail > size)
		return 0;
	while (tail < head) {
		uint64_t off = tail & mask, room = size - off;
		struct vs_event_header e; /* a copy: a recorder may be writing the ring */
		if (room >= sizeof e)
			memcpy(&e, data + off, sizeof e);
		if (room < sizeof e || e.site == VS_EVENT_PAD) {
			tail += room;
			continue;
		}
		if (e.size < sizeof e || (e.size & 7) || e.size > room)
			break;
		n += e.site != VS_EVENT_DROPS;
		tail += e.size;
	}
	return n;
}

static struct thread_ring *attach_ring(void)
{
	if (!vs_rt.hdr && rt.forked) {
		struct thread_ring *old = rt.fork_leftover;
		if (old) {
			free(old->scratch);
			free(old);
			rt.fork_leftover = NULL;
		}
		if (!vs_reg_child_file())
			rt.forked = false; /* no file for this child: its events go nowhere */
	}
	struct vs_shm_header *h = vs_rt.hdr;
	if (!h)
		return NULL;
	struct vs_shm_ring *rings = vs_rt.rings;
	const uint64_t ring_size = vs_rt.ring_size;
	bool streaming = __atomic_load_n(&h->mode, __ATOMIC_ACQUIRE) == VS_MODE_STREAM;

	for (int pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < vs_rt.ring_count; i++) {
			uint32_t want = pass == 0 ? VS_RING_FREE : VS_RING_RETIRED;
			uint32_t cur = want;
			/* A retired ring still holds another thread's last events: only
			 * reuse one when no recorder is waiting to drain it. */
			if (pass == 1 && streaming)
				break;
			if (!__atomic_compare_exchange_n(&rings[i].state, &cur, VS_RING_ACTIVE,
							 false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
				continue;
			/* Own cache lines: the head is written per event, and a neighbour
			 * thread's ring state must not share its line. */
			struct thread_ring *tr =
			    aligned_alloc(128, (sizeof *tr + 127) & ~(size_t)127);
			if (tr) {
				memset(tr, 0, sizeof *tr);
				tr->scratch = malloc(SCRATCH_SIZE);
			}
			if (!tr || !tr->scratch) {
				free(tr);
				__atomic_store_n(&rings[i].state, want, __ATOMIC_RELEASE);
				return NULL;
			}
			tr->drop_w.data = tr->scratch;
			tr->drop_w.pub = &tr->drop_pub;
			struct vs_shm_ring *r = &rings[i];
			r->tid = (uint32_t)gettid_();
			memset(r->thread_name, 0, sizeof r->thread_name);
			pthread_getname_np(pthread_self(), r->thread_name, sizeof r->thread_name);
			r->dropped = 0;
			r->overwritten = 0;
			/* Continue the stream position so a recorder never sees it go back
			 * (positions are modulo 2^64 everywhere, whoever wrote this one). */
			uint64_t pos = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
			uint8_t *data = vs_rt.ring_data + (size_t)i * ring_size;
			if (want == VS_RING_RETIRED) {
				/* The exited thread's last events go with its ring: count them
				 * with the events lost for want of a free ring. */
				uint64_t lost =
				    count_events(data, ring_size,
						 __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE), pos);
				__atomic_fetch_add(&h->no_ring_drops, lost, __ATOMIC_RELAXED);
			}
			__atomic_store_n(&r->tail, pos, __ATOMIC_RELEASE);
			__atomic_fetch_add(&r->generation, 1, __ATOMIC_RELEASE);
			tr->shm = r;
			tr->size = ring_size;
			tr->slot = i;
			tr->w.head = pos;
			tr->w.data = data;
			tr->w.mask = ring_size - 1;
			tr->w.pub = &r->head;
			tr->w.fast_end = 0;
			tr->chunk = ring_size / NCHUNK;
			tr->cp_next = (pos + tr->chunk - 1) & ~(tr->chunk - 1);
			for (int c = 0; c < NCHUNK; c++)
				tr->cp[c].boundary = UINT64_MAX;
			tr->tail_pos = pos;
			tr->tail_count = 0;
			if (rt.key_ok)
				pthread_setspecific(rt.key, tr);
			return tr;
		}
	}
	return NULL;
}

/* Oldest record at tail: how many bytes to skip and whether it was an event. */
static uint64_t record_span(const struct thread_ring *tr, uint64_t pos, bool *is_event)
{
	uint64_t off = pos & tr->w.mask, room = tr->size - off;
	*is_event = false;
	if (room < sizeof(struct vs_event_header))
		return room;
	struct vs_event_header e; /* a copy: whoever else maps the file may be writing here */
	memcpy(&e, tr->w.data + off, sizeof e);
	if (e.size < sizeof e || e.size > room || (e.size & 7))
		return room; /* not our own writes; resynchronise at the wrap */
	*is_event = e.site != VS_EVENT_PAD && e.site != VS_EVENT_DROPS;
	return e.site == VS_EVENT_PAD ? room : e.size;
}

static void checkpoint(struct thread_ring *tr)
{
	while (tr->cp_next <= tr->w.head) {
		unsigned i = (unsigned)(tr->cp_next / tr->chunk) % NCHUNK;
		tr->cp[i].boundary = tr->cp_next;
		tr->cp[i].pos = tr->w.head;
		tr->cp[i].count = tr->w.count;
		tr->cp_next += tr->chunk;
	}
}

/* The checkpoint with the lowest position at or after `pos`, or -1. */
static int checkpoint_at_or_after(const struct thread_ring *tr, uint64_t pos)
{
	int best = -1;
	for (int i = 0; i < NCHUNK; i++) {
		const uint64_t b = tr->cp[i].boundary;
		if (b == UINT64_MAX || b + tr->size <= tr->w.head || tr->cp[i].pos < pos)
			continue; /* empty, from an older lap, or too early */
		if (best < 0 || tr->cp[i].pos < tr->cp[best].pos)
			best = i;
	}
	return best;
}

/* Flight mode: make room by advancing the tail to a checkpoint at least a sixteenth
 * of the ring past what is needed, counting the events overwritten.  Only when the
 * tail was last moved by someone else (a recorder) are records walked one by one,
 * up to the next checkpoint. */
/* Where a walk that counts overwritten events may start, given a tail we did not set.
 * A recorder only moves the tail forward, onto a record boundary; a tail behind the last
 * one we set, or inside a record, was written by something else (another local user can
 * write the file), and walking from it would count events twice or count garbage.  So
 * when the last tail we set is still in the ring, walk from it: the tail is trusted if
 * the walk lands on it, else the walk starts from ours (nothing was consumed).  When ours
 * has been overwritten since (a recorder took many laps), the tail cannot be checked and
 * is taken as it is. */
static uint64_t trusted_start(const struct thread_ring *tr, uint64_t tail, uint64_t head)
{
	uint64_t from = tr->tail_pos;
	if (from == UINT64_MAX || from > head || head - from > tr->size || tail > head)
		return tail;
	if (tail <= from)
		return from;
	uint64_t t = from;
	while (t < tail) {
		bool is_event;
		t += record_span(tr, t, &is_event);
	}
	return t == tail ? tail : from;
}

static void overwrite_oldest(struct thread_ring *tr, uint64_t need_tail)
{
	uint64_t tail = __atomic_load_n(&tr->shm->tail, __ATOMIC_ACQUIRE);
	uint64_t target = need_tail + tr->chunk;
	uint64_t head = tr->w.head, t, lost, count_at_t;

	if (target > head)
		target = head;
	int c = checkpoint_at_or_after(tr, target);
	if (c >= 0 && tail == tr->tail_pos && tr->tail_count != UINT64_MAX) {
		t = tr->cp[c].pos;
		lost = tr->cp[c].count - tr->tail_count;
		count_at_t = tr->cp[c].count;
	} else {
		t = trusted_start(tr, tail, head);
		lost = 0;
		for (;;) {
			int at = checkpoint_at_or_after(tr, t);
			if (t >= target && (at < 0 || tr->cp[at].pos == t || t >= head))
				break;
			bool is_event;
			t += record_span(tr, t, &is_event);
			lost += is_event;
			if (t > head)
				t = head; /* a record that claims to run past the head: not ours */
		}
		int at = checkpoint_at_or_after(tr, t);
		count_at_t = at >= 0 && tr->cp[at].pos == t ? tr->cp[at].count : tr->w.count;
		if (t != head && (at < 0 || tr->cp[at].pos != t))
			count_at_t = UINT64_MAX; /* unknown: the next overwrite walks again */
	}
	/* A recorder attaching right now may move the tail too: whoever moves it first
	 * wins, the other re-evaluates. */
	if (!__atomic_compare_exchange_n(&tr->shm->tail, &tail, t, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return;
	tr->tail_pos = t;
	tr->tail_count = count_at_t;
	__atomic_store_n(&tr->shm->overwritten, tr->shm->overwritten + lost, __ATOMIC_RELAXED);
}

/* A tail past the head, or more than a ring behind it, was written by something that
 * is neither this thread nor a working recorder (a recorder can only hand back what we
 * wrote).  Put it back where we last put it, if that is still in the ring (the events
 * before it are counted already; going further back would count them again), else on
 * the oldest checkpoint still in the ring (the head if there is none): the events from
 * there on are intact, since only we write the ring.  Events before it are no longer
 * readable, and not counted as overwritten: how many there were is not known. */
static __attribute__((noinline, cold)) void repair_tail(struct thread_ring *tr, uint64_t bad)
{
	uint64_t head = tr->w.head, t, count;
	if (tr->tail_pos <= head && head - tr->tail_pos <= tr->size) {
		t = tr->tail_pos;
		count = tr->tail_count;
	} else {
		int c = checkpoint_at_or_after(tr, head > tr->size ? head - tr->size : 0);
		t = c >= 0 ? tr->cp[c].pos : head;
		count = c >= 0 ? tr->cp[c].count : tr->w.count;
	}
	if (!__atomic_compare_exchange_n(&tr->shm->tail, &bad, t, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return; /* changed again meanwhile: the caller looks again */
	tr->tail_pos = t;
	tr->tail_count = count;
}

static bool recorder_gone(struct thread_ring *tr)
{
	if (++tr->drops_since_check < 4096)
		return false;
	tr->drops_since_check = 0;
	int pid = __atomic_load_n(&vs_rt.hdr->recorder_pid, __ATOMIC_RELAXED);
	if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH)) {
		/* A recorder that died must not leave us dropping forever. */
		__atomic_store_n(&vs_rt.hdr->mode, VS_MODE_FLIGHT, __ATOMIC_RELEASE);
		__atomic_store_n(&vs_rt.hdr->recorder_pid, 0, __ATOMIC_RELAXED);
		return true;
	}
	return false;
}

static void put_record(struct thread_ring *tr, uint32_t site, uint32_t size, const void *payload,
		       size_t plen)
{
	struct vs_event_header e = {.ts = vs_rt.clock_mono ? vs__clock_ns() : vs__rdtsc(),
				    .site = site,
				    .size = (uint16_t)size};
	uint8_t *p = tr->w.data + (tr->w.head & tr->w.mask);
	memcpy(p, &e, sizeof e);
	if (plen)
		memcpy(p + sizeof e, payload, plen);
	tr->w.head += size;
}

/* Lose this event: the caller writes it into scratch space and commits it to a
 * writer that publishes nowhere; the next event comes back here. */
static uint8_t *drop(struct thread_ring *tr)
{
	__atomic_store_n(&tr->shm->dropped, tr->shm->dropped + 1, __ATOMIC_RELAXED);
	tr->pending_drops++;
	tr->w.fast_end = 0;
	vs__tls_writer = &tr->drop_w;
	return tr->scratch;
}

uint8_t *vs__reserve_slow(struct vs_ring_writer *w, uint32_t len)
{
	struct thread_ring *tr = my_ring;

	if (w == &attach_writer && !tr) {
		tr = attach_ring();
		if (!tr) {
			if (vs_rt.hdr)
				__atomic_fetch_add(&vs_rt.hdr->no_ring_drops, 1, __ATOMIC_RELAXED);
			return global_scratch; /* committed to attach_writer: nowhere */
		}
		my_ring = tr;
	}
	if (!tr) { /* the thread has exited (a later TLS destructor traces) */
		if (vs_rt.hdr)
			__atomic_fetch_add(&vs_rt.hdr->no_ring_drops, 1, __ATOMIC_RELAXED);
		return global_scratch;
	}
	vs__tls_writer = &tr->w;
	if (len > tr->size / 4 || len > SCRATCH_SIZE)
		return drop(tr);

	/* Bounded: a tail that keeps changing under us (a recorder gone wrong) costs this
	 * event, never the thread. */
	for (unsigned attempt = 0;; attempt++) {
		uint64_t head = tr->w.head;
		uint64_t off = head & tr->w.mask;
		uint32_t marker = tr->pending_drops ? 24 : 0;
		/* A record never straddles the end: pad to the start when it wouldn't fit. */
		uint64_t pad = off + marker + len > tr->size ? tr->size - off : 0;
		uint64_t need = pad + marker + len;
		uint64_t tail = __atomic_load_n(&tr->shm->tail, __ATOMIC_ACQUIRE);

		if (attempt == MAX_RESERVE_ATTEMPTS)
			return drop(tr);
		/* past the head (the difference wraps), or more than a ring behind it */
		if (head - tail > tr->size) {
			repair_tail(tr, tail);
			continue;
		}
		if (head + need - tail > tr->size) {
			uint32_t mode = __atomic_load_n(&vs_rt.hdr->mode, __ATOMIC_ACQUIRE);
			if (mode == VS_MODE_STREAM && !recorder_gone(tr))
				return drop(tr);
			if (mode != VS_MODE_STREAM)
				overwrite_oldest(tr, head + need - tr->size);
			continue;
		}
		if (pad) {
			if (pad >= sizeof(struct vs_event_header)) {
				put_record(tr, VS_EVENT_PAD, (uint32_t)pad, NULL, 0);
			} else {
				/* Too small for a header: a filler readers recognise. */
				memset(tr->w.data + (tr->w.head & tr->w.mask), 0xff, pad);
				tr->w.head += pad;
			}
		}
		if (marker) {
			uint64_t n = tr->pending_drops;
			put_record(tr, VS_EVENT_DROPS, marker, &n, sizeof n);
			tr->pending_drops = 0;
		}
		if (pad || marker)
			__atomic_store_n(tr->w.pub, tr->w.head, __ATOMIC_RELEASE);
		checkpoint(tr);
		uint64_t wrap = (tr->w.head & ~tr->w.mask) + tr->size;
		uint64_t limit = tail + tr->size;
		uint64_t end = wrap < limit ? wrap : limit;
		/* The first event past the next boundary comes here to checkpoint it. */
		tr->w.fast_end = end < tr->cp_next ? end : tr->cp_next;
		return tr->w.data + (tr->w.head & tr->w.mask);
	}
}

/* ---- records made by a call (VS__OUT_OF_LINE, and the inline record's slow path) ------ */
/* The record of site with arguments a (site->types says which member of each), laid out
 * as VS__RECORD lays it out. */
static void emit(const struct vs_site *site, const struct vs_trace_control *c, uint32_t caller,
		 const union vs__arg *a)
{
	struct vs__var var[VS_TRACE_MAX_ARGS];
	const unsigned nargs = site->nargs < VS_TRACE_MAX_ARGS ? site->nargs : VS_TRACE_MAX_ARGS;
	struct vs_ring_writer *w;
	uint64_t ts = vs__now(c), head;
	uint32_t id = site->id, size_caller;
	size_t len = sizeof(struct vs_event_header);
	uint8_t *rec, *p;

	for (unsigned i = 0; i < nargs; i++) {
		var[i] = (struct vs__var){0, 0, 1};
		switch (site->types[i]) {
		case VS_ARG_I32:
		case VS_ARG_U32:
			len += 4;
			break;
		case VS_ARG_STR:
			var[i] = vs__var_str(vs__opaque(a[i].p));
			len += 2 + var[i].keep;
			break;
		case VS_ARG_BYTES:
			var[i] = vs__var_bytes(a[i].b);
			len += 2 + var[i].keep;
			break;
		default: /* 64-bit integers, floating point, pointers */
			len += 8;
			break;
		}
	}
	len = (len + 7) & ~(size_t)7;
	w = vs__tls_writer;
	head = w->head;
	if (head + len <= w->fast_end) {
		rec = w->data + (head & w->mask);
	} else {
		rec = vs__reserve_slow(w, (uint32_t)len);
		w = vs__tls_writer; /* it may have switched writers */
		head = w->head;
	}
	size_caller = (uint32_t)len | caller << 16;
	memcpy(rec, &ts, 8);
	memcpy(rec + 8, &id, 4);
	memcpy(rec + 12, &size_caller, 4);
	p = rec + sizeof(struct vs_event_header);
	for (unsigned i = 0; i < nargs; i++) {
		switch (site->types[i]) {
		case VS_ARG_I32:
			vs__put_i32(&p, (int32_t)a[i].i, var[i]);
			break;
		case VS_ARG_U32:
			vs__put_u32(&p, (uint32_t)a[i].u, var[i]);
			break;
		case VS_ARG_I64:
			vs__put_i64(&p, a[i].i, var[i]);
			break;
		case VS_ARG_U64:
			vs__put_u64(&p, a[i].u, var[i]);
			break;
		case VS_ARG_F64:
		case VS_ARG_LDBL:
			vs__put_f64(&p, a[i].d, var[i]);
			break;
		case VS_ARG_STR:
			vs__put_str(&p, vs__opaque(a[i].p), var[i]);
			break;
		case VS_ARG_BYTES:
			vs__put_bytes(&p, a[i].b, var[i]);
			break;
		default:
			vs__put_ptr(&p, a[i].p, var[i]);
			break;
		}
	}
	w->head = head + len;
	w->count++;
	__atomic_store_n(w->pub, head + len, __ATOMIC_RELEASE);
}

void vs__emit_args(const struct vs_site *site, uint32_t caller, const union vs__arg *args)
{
	emit(site, site->provider->ctl, caller, args);
}

/* The inline record's slow path: its arguments as varargs, promoted as varargs are. */
void vs__emit_ool(const struct vs_site *site, const struct vs_trace_control *c, uint32_t caller,
		  ...)
{
	union vs__arg a[VS_TRACE_MAX_ARGS];
	va_list ap;

	va_start(ap, caller);
	for (unsigned i = 0; i < site->nargs && i < VS_TRACE_MAX_ARGS; i++) {
		switch (site->types[i]) {
		case VS_ARG_I32:
			a[i].i = va_arg(ap, int);
			break;
		case VS_ARG_U32:
			a[i].u = va_arg(ap, unsigned);
			break;
		case VS_ARG_I64:
			a[i].i = va_arg(ap, long long);
			break;
		case VS_ARG_U64:
			a[i].u = va_arg(ap, unsigned long long);
			break;
		case VS_ARG_F64:
			a[i].d = va_arg(ap, double);
			break;
		case VS_ARG_LDBL:
			a[i].d = (double)va_arg(ap, long double);
			break;
		case VS_ARG_STR:
			a[i].p = va_arg(ap, const char *);
			break;
		case VS_ARG_BYTES:
			a[i].b = va_arg(ap, struct vs_bytes);
			break;
		default:
			a[i].p = va_arg(ap, void *);
			break;
		}
	}
	va_end(ap);
	emit(site, c, caller, a);
}

/* ---- control -------------------------------------------------------------------------- */
void vs_trace_keep_on_exit(int keep)
{
	if (vs_rt.hdr)
		__atomic_store_n(&vs_rt.hdr->keep, keep ? 1u : 0u, __ATOMIC_RELAXED);
}

const char *vs_trace_shm_path(void)
{
	return vs_rt.hdr && vs_rt.path[0] ? vs_rt.path : NULL;
}

/* ---- print backend ------------------------------------------------------------------------ */
void vs__print(const struct vs_site *site, const struct vs_caller *caller, const char *fmt, ...)
{
	char prefix[256];
	va_list ap;

	if (!rt.print_file)
		open_print_file();
	vs_format_prefix(prefix, sizeof prefix, realtime_ns(), (uint32_t)gettid_(), site->level,
			 site->provider->name, vs_reg_flag_name(site->provider, site->flag),
			 caller ? caller->func : NULL, site->func);
	/* Notes ({scsi_op}) are for decoders: printf would show them as text. */
	char plain[1024];
	const char *shown = fmt;
	if (strchr(fmt, '{') && vs_format_drop_notes(plain, sizeof plain, fmt) < sizeof plain - 1)
		shown = plain;
	pthread_mutex_lock(&rt.print_lock);
	fputs(prefix, rt.print_file);
	va_start(ap, fmt);
	vfprintf(rt.print_file, shown, ap);
	va_end(ap);
	fputc('\n', rt.print_file);
	pthread_mutex_unlock(&rt.print_lock);
}

/* For the benchmark: redirect print output without touching the environment. */
int vs__print_to(const char *path)
{
	FILE *f = fopen(path, "we");
	if (!f)
		return -errno;
	pthread_mutex_lock(&rt.print_lock);
	if (rt.print_file && rt.print_file != stderr)
		fclose(rt.print_file);
	rt.print_file = f;
	pthread_mutex_unlock(&rt.print_lock);
	return 0;
}

const char *vs__hex(char *out, struct vs_bytes b)
{
	size_t n = b.ptr ? vs__clip(b.len, VS_TRACE_BYTES_MAX) : 0;
	if (!b.ptr)
		return strcpy(out, "(null)");
	return vs_format_hex(out, 2 * VS_TRACE_BYTES_MAX + 8, b.ptr, n, b.len > VS_TRACE_BYTES_MAX);
}
