/* SPDX-License-Identifier: MIT */
/*
 * Hostile trace files, as the tools (often run as root) meet them: planted by another
 * user, linked, not regular files, rewritten or truncated while a tool reads them, a
 * writer lapping the ring under `dump`, names and flavours full of terminal escapes.
 * And the runtime's side: a traced process must not use a file someone planted under
 * the names it creates.
 *
 * The trace files here are forged byte by byte (forge.h) in the test's own
 * VIOSCOPE_TRACE_DIR; tests that plant files as another user fork a child that
 * becomes `nobody` (they are skipped when not run as root).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "driver.h"
#include "forge.h"

#define RING   4096u
#define NOBODY 65534

/* ---- a forged trace file: ring 0 holds "n=0" .. "n=9", ring 1 "n=100" .. "n=104" ---- */
static const struct forge_site sites[] = {
    {.fmt = "n=%u", .func = "forged", .nargs = 1, .types = {VS_ARG_U32}},
};

static void ring_records(struct fbuf *rec, unsigned first, unsigned count)
{
	for (unsigned i = first; i < first + count; i++)
		forge_record(rec, 1000 + i, forge_site_id(0), &i, sizeof i);
}

/* The image of a valid trace file that names PID as its writer (alive if it is us). */
static void forge_file(struct fbuf *img, struct forge_shm *g, int pid)
{
	struct fbuf meta = {0}, r0 = {0}, r1 = {0};
	forge_meta(&meta, sites, 1);
	forge_shm(img, g, &meta, 2, RING, pid, vs_proc_start_time(pid));
	ring_records(&r0, 0, 10);
	ring_records(&r1, 100, 5);
	forge_shm_ring(img, g, 0, 1111, r0.p, r0.len);
	forge_shm_ring(img, g, 1, 2222, r1.p, r1.len);
	fb_free(&meta);
	fb_free(&r0);
	fb_free(&r1);
}

/* Write a forged file for our own pid (so that `record` takes it for a live process)
 * into the test's directory; PATH gets its name. */
static void write_forged(const struct th_tmpdir *td, struct forge_shm *g, char *path, size_t len)
{
	struct fbuf img = {0};
	forge_file(&img, g, (int)getpid());
	th_shm_path(path, len, td->dir, getpid());
	assert_int_equal(th_write_file(path, img.p, img.len), 0);
	fb_free(&img);
}

/* A second, independent mapping of a file: what "another process" writes through. */
static struct vs_shm_header *map_other(const char *path, size_t size)
{
	int fd = open(path, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	assert_true(p != MAP_FAILED);
	return p;
}

/* A forged file (write_forged) and a second mapping of it, to rewrite it through. */
static struct vs_shm_header *write_forged_mapped(const struct th_tmpdir *td, struct forge_shm *g,
						 char *path, size_t len)
{
	write_forged(td, g, path, len);
	return map_other(path, g->size);
}

/* The messages of a capture, in order, into MSGS (at most MAX); returns how many. */
struct msgs {
	char text[64][32];
	unsigned n;
};
static int collect(const struct th_event *e, void *opaque)
{
	struct msgs *m = opaque;
	if (e->ev->site && m->n < 64)
		snprintf(m->text[m->n++], sizeof m->text[0], "%s", e->msg);
	return 0;
}

/* The capture holds exactly ring 0's ten events and ring 1's five, every one intact. */
static void assert_forged_events(const char *cap)
{
	struct msgs m = {0};
	th_walk_or_fail(cap, collect, &m);
	assert_int_equal(m.n, 15);
	unsigned seen0 = 0, seen1 = 0;
	for (unsigned i = 0; i < m.n; i++) {
		char want[32];
		unsigned v = strtoul(m.text[i] + 2, NULL, 10);
		if (v < 100) {
			snprintf(want, sizeof want, "n=%u", seen0++);
		} else {
			snprintf(want, sizeof want, "n=%u", 100 + seen1++);
		}
		assert_string_equal(m.text[i], want);
	}
	assert_int_equal(seen0, 10);
	assert_int_equal(seen1, 5);
}

/* ---- files another user planted ---------------------------------------------------- */

/* As `nobody`, in a forked child: create PATH (mode 0666) holding IMG.  False when we
 * cannot become nobody (not root): the caller skips. */
static bool plant_as_nobody(const char *dir, const char *path, const struct fbuf *img)
{
	if (geteuid() != 0)
		return false;
	assert_int_equal(chmod(dir, 01777), 0); /* like /dev/shm */
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		umask(0);
		if (setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
			_exit(2);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0 || write(fd, img->p, img->len) != (ssize_t)img->len)
			_exit(3);
		_exit(close(fd) == 0 ? 0 : 4);
	}
	assert_int_equal(th_wait(pid), 0);
	return true;
}

/* A file of another user under the name a root `trace record PID` opens: refused,
 * naming the owner, before a byte of it is read. */
static void test_planted_file_of_another_user_is_refused(void **state)
{
	struct th_tmpdir *td = *state;
	struct fbuf img = {0};
	struct forge_shm g;
	struct vs_shm s;
	char path[600], why[512], pidstr[32];

	forge_file(&img, &g, (int)getpid());
	th_shm_path(path, sizeof path, td->dir, getpid());
	if (!plant_as_nobody(td->dir, path, &img)) {
		fb_free(&img);
		skip();
	}
	fb_free(&img);
	snprintf(pidstr, sizeof pidstr, "%d", (int)getpid());
	assert_int_equal(vs_shm_open(&s, path, why, sizeof why), -EPERM);
	assert_non_null(strstr(why, "owned by uid 65534 (nobody)"));

	assert_int_equal(th_cli(td, "record", pidstr, "-o", td->cap, "--duration", "0.2", NULL), 3);
	assert_true(th_file_contains(td->err, "owned by uid 65534 (nobody), not by you"));
	assert_int_equal(access(td->cap, F_OK), -1); /* no capture started */
	assert_int_equal(th_cli(td, "dump", pidstr, "-o", td->cap, NULL), 3);
	assert_true(th_file_contains(td->err, "owned by uid 65534"));
	assert_int_equal(th_cli(td, "enable", pidstr, "verbose:all", NULL), 3);
	assert_true(th_file_contains(td->err, "owned by uid 65534"));
	assert_int_equal(th_cli(td, "list", NULL), 0);
	assert_true(th_file_contains(td->out, "owned by uid 65534"));
}

/* A second link to a trace file (it could be a file of ours linked into a place
 * another user controls, or theirs into ours): refused. */
static void test_hard_linked_file_is_refused(void **state)
{
	struct th_tmpdir *td = *state;
	struct forge_shm g;
	struct vs_shm s;
	char path[600], link_path[700], why[512];

	write_forged(td, &g, path, sizeof path);
	snprintf(link_path, sizeof link_path, "%s/other-name", td->dir);
	assert_int_equal(link(path, link_path), 0);
	assert_int_equal(vs_shm_open(&s, path, why, sizeof why), -EPERM);
	assert_non_null(strstr(why, "has 2 links"));
	unlink(link_path);
	assert_int_equal(vs_shm_open(&s, path, why, sizeof why), 0); /* one link again */
	vs_shm_close(&s);
}

/* A FIFO under the name: refused at once (opening it must not block), as is a
 * directory. */
static void test_fifo_or_directory_is_refused(void **state)
{
	struct th_tmpdir *td = *state;
	struct vs_shm s;
	char path[600], why[512];

	th_shm_path(path, sizeof path, td->dir, 1);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(vs_shm_open(&s, path, why, sizeof why), -EPERM);
	assert_non_null(strstr(why, "not a regular file"));
	th_shm_path(path, sizeof path, td->dir, 2);
	assert_int_equal(mkdir(path, 0700), 0);
	assert_true(vs_shm_open(&s, path, why, sizeof why) < 0);
	rmdir(path);
}

/* A file of ours that others may write: refused. */
static void test_file_writable_by_others_is_refused(void **state)
{
	struct th_tmpdir *td = *state;
	struct forge_shm g;
	struct vs_shm s;
	char path[600], why[512];

	write_forged(td, &g, path, sizeof path);
	assert_int_equal(chmod(path, 0622), 0);
	assert_int_equal(vs_shm_open(&s, path, why, sizeof why), -EPERM);
	assert_non_null(strstr(why, "writable by other users"));
}

/* ---- the runtime's files: pre-created names are not used ------------------------------ */

/* Start the cold workload ("seq -n 10", holding) once GATE is written to, so that the
 * test knows its pid before its runtime creates its file; returns the pid. */
static pid_t fork_gated_workload(const struct th_tmpdir *td, int gate, int ready)
{
	char rfd[16];
	snprintf(rfd, sizeof rfd, "%d", ready);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char b;
		const char *dir = td->env_dir + strlen("VIOSCOPE_TRACE_DIR=");
		if (read(gate, &b, 1) != 1 || fcntl(ready, F_SETFD, 0) < 0)
			_exit(126);
		setenv("VIOSCOPE_TRACE_DIR", dir, 1);
		execl(WORKLOAD_COLD, WORKLOAD_COLD, "seq", "-n", "10", "-r", rfd, "-H",
		      (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Another user creates, before a traced process starts, files under every name it
 * could predict: the setup name of the old runtime and the final name.  The process
 * must neither write into nor truncate them: its trace file is its own (our uid, one
 * link, mode 0600, another inode), and the planted setup file is as it was. */
static void test_runtime_does_not_use_planted_files(void **state)
{
	struct th_tmpdir *td = *state;
	struct fbuf junk = {0};
	char init_path[700], final_path[600];
	struct stat planted_init, planted_final, st;
	int gate[2], ready[2];

	fb_put(&junk, "planted by nobody, must stay as it is", 37);
	assert_int_equal(th_pipe(gate), 0);
	assert_int_equal(th_pipe(ready), 0);
	pid_t pid = fork_gated_workload(td, gate[0], ready[1]);
	snprintf(init_path, sizeof init_path, "%s/.vioscope-init-%d", td->dir, (int)pid);
	th_shm_path(final_path, sizeof final_path, td->dir, pid);
	if (!plant_as_nobody(td->dir, init_path, &junk)) {
		kill(pid, SIGKILL);
		th_wait(pid);
		fb_free(&junk);
		skip();
	}
	assert_true(plant_as_nobody(td->dir, final_path, &junk));
	assert_int_equal(stat(init_path, &planted_init), 0);
	assert_int_equal(stat(final_path, &planted_final), 0);

	assert_int_equal(write(gate[1], "g", 1), 1);
	assert_int_equal(th_read_byte(ready[0]), 'r');
	assert_int_equal(th_read_byte(ready[0]), 'd');

	assert_int_equal(lstat(final_path, &st), 0);
	assert_true(S_ISREG(st.st_mode));
	assert_int_equal(st.st_uid, geteuid());
	assert_int_equal(st.st_nlink, 1);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_true(st.st_ino != planted_init.st_ino && st.st_ino != planted_final.st_ino);
	size_t len;
	char *text = th_read_file(init_path, &len);
	assert_non_null(text);
	assert_int_equal(len, junk.len);
	assert_memory_equal(text, junk.p, junk.len);
	free(text);
	/* and the tools take the file the process made */
	th_dump(td, pid);
	th_kill_holding(pid);
	unlink(init_path);
	close(gate[0]);
	close(gate[1]);
	close(ready[0]);
	close(ready[1]);
	fb_free(&junk);
}

/* ---- geometry rewritten after vs_shm_open checked it ------------------------------------ */

/* The fields that place rings, provider slots and metadata, set to values that point
 * far outside the file, and exe/flavour without their NUL. */
static void flip_geometry(struct vs_shm_header *h)
{
	h->ring_size = 1ull << 30;
	h->ring_count = 4096;
	h->rings_offset = 1ull << 40;
	h->data_offset = 1ull << 41;
	h->meta_offset = 1ull << 42;
	h->meta_capacity = 1ull << 20;
	h->meta_used = 1ull << 40;
	h->providers_offset = 1ull << 43;
	h->provider_slots = 65536;
	memset(h->exe, 'x', sizeof h->exe);
	memset(h->flavour, 'y', sizeof h->flavour);
}

/* Rewritten between vs_shm_open and each later step: every step places things by what
 * was checked at open.  The ring copy fills a buffer of exactly one (real) ring and
 * gives back ring 0's records; the capture written from it carries the metadata read
 * at open (the length now claimed is beyond the area checked at open) and decodes to
 * the forged events. */
static void test_geometry_rewritten_after_open(void **state)
{
	struct th_tmpdir *td = *state;
	struct forge_shm g;
	struct vs_shm s;
	struct vs_capw w;
	char path[600], why[512];

	write_forged(td, &g, path, sizeof path);
	assert_int_equal(vs_shm_open(&s, path, why, sizeof why), 0);
	struct vs_shm_header *other = map_other(path, g.size);
	flip_geometry(other);

	assert_int_equal(s.snap.ring_size, RING);
	assert_int_equal(s.snap.ring_count, 2);
	assert_null(vs_shm_ring(&s, 2));
	assert_ptr_equal(vs_shm_ring(&s, 1), (uint8_t *)s.hdr + g.rings_off + 128);
	assert_ptr_equal(vs_shm_ring_data(&s, 1), (uint8_t *)s.hdr + g.data_off + RING);

	assert_int_equal(vs_capw_open(&w, td->cap, &s), 0);
	uint8_t *buf = malloc(RING); /* exactly one ring: ASan sees any overflow */
	assert_non_null(buf);
	for (unsigned i = 0; i < 2; i++) {
		struct vs_shm_ring *r = vs_shm_ring(&s, i);
		uint64_t from = 0, head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		size_t n = vs_ring_copy(&s, i, &from, head, buf, RING);
		assert_int_equal(n, head);
		assert_int_equal(from, head);
		assert_int_equal(vs_capw_events(&w, r, i, buf, n), 0);
	}
	free(buf);
	assert_int_equal(vs_capw_close(&w, &s), 0);
	vs_shm_close(&s);
	munmap(other, g.size);
	assert_forged_events(td->cap);
}

struct flipper {
	pthread_t th;
	struct vs_shm_header *h;
	struct vs_shm_header good;
	int stop;
	unsigned long flips;
};

/* Busy for a while: each state of the header lasts long enough for a dump to see it
 * at open and another one later. */
static void hold(void)
{
	for (volatile unsigned k = 0; k < 2000; k++)
		;
}

static void *flip_main(void *arg)
{
	struct flipper *f = arg;
	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
		memcpy(f->h, &f->good, sizeof f->good);
		hold();
		flip_geometry(f->h);
		hold();
		__atomic_fetch_add(&f->flips, 1, __ATOMIC_RELAXED);
	}
	memcpy(f->h, &f->good, sizeof f->good);
	return NULL;
}

static bool flipping(void *opaque)
{
	return __atomic_load_n(&((struct flipper *)opaque)->flips, __ATOMIC_RELAXED) > 0;
}

/* The same, racing: a thread rewrites the geometry and puts it back, over and over,
 * while `dump` runs 200 times.  Each dump either refuses the file (it saw the bad
 * header at open) or produces exactly the forged events: never a read outside the
 * file or a buffer (ASan), never a capture built from a mix. */
static void test_geometry_rewritten_while_dumping(void **state)
{
	struct th_tmpdir *td = *state;
	struct forge_shm g;
	struct flipper f = {0};
	struct vs_dump_stats st;
	char path[600], why[512];
	unsigned ok = 0, refused = 0;

	f.h = write_forged_mapped(td, &g, path, sizeof path);
	memcpy(&f.good, f.h, sizeof f.good);
	assert_int_equal(pthread_create(&f.th, NULL, flip_main, &f), 0);
	assert_true(wait_until(flipping, &f, 60000));
	for (int i = 0; i < 200; i++) {
		unlink(td->cap); /* a capture is never overwritten */
		int rc = vs_trace_dump(path, td->cap, &st, why, sizeof why);
		if (rc == 0) {
			assert_forged_events(td->cap);
			ok++;
		} else {
			assert_non_null(strstr(why, "not a valid vioscope trace file"));
			refused++;
		}
	}
	unsigned long flips = __atomic_load_n(&f.flips, __ATOMIC_RELAXED);
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
	pthread_join(f.th, NULL);
	munmap(f.h, g.size);
	print_message("%u dumps made, %u refused, %lu flips\n", ok, refused, flips);
}

/* ---- a writer lapping the ring while it is copied (flight mode under `dump`) ------------
 * Records of 24 to 64 bytes carry a sequence number; the writer moves the tail past
 * the oldest records before it overwrites them, as the runtime does, and its payload
 * bytes are zeros: a reader that took a size from overwritten bytes would see 0. */
struct lapper {
	pthread_t th;
	struct vs_shm_ring *r;
	uint8_t *data;
	int stop;
	uint64_t written;
};

static bool lapped_8_times(void *opaque)
{
	const struct lapper *l = opaque;
	return __atomic_load_n(&l->r->head, __ATOMIC_ACQUIRE) >= 8 * RING;
}

static void *lap_main(void *arg)
{
	struct lapper *l = arg;
	uint64_t head = 0, tail = 0, seq = 0;
	uint64_t starts[RING / 16];
	unsigned first = 0, count = 0; /* starts of the records in [tail, head), a FIFO */

	while (!__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE)) {
		uint32_t len = 24 + 8 * (uint32_t)(seq % 6);
		uint64_t off = head & (RING - 1);
		uint64_t pad = off + len > RING ? RING - off : 0;
		while (head + pad + len - tail > RING) {
			first = (first + 1) % (RING / 16);
			count--;
			tail = count ? starts[first] : head;
		}
		__atomic_store_n(&l->r->tail, tail, __ATOMIC_RELEASE);
		if (pad) {
			if (pad >= 16) {
				struct vs_event_header e = {.site = VS_EVENT_PAD,
							    .size = (uint16_t)pad};
				memcpy(l->data + off, &e, sizeof e);
				memset(l->data + off + 16, 0, pad - 16);
			} else {
				memset(l->data + off, 0xff, pad);
			}
			starts[(first + count++) % (RING / 16)] = head;
			head += pad;
			off = 0;
		}
		struct vs_event_header e = {
		    .ts = seq, .site = forge_site_id(0), .size = (uint16_t)len};
		memcpy(l->data + off, &e, sizeof e);
		memcpy(l->data + off + 16, &seq, 8);
		memset(l->data + off + 24, 0, len - 24);
		starts[(first + count++) % (RING / 16)] = head;
		head += len;
		seq++;
		__atomic_store_n(&l->r->head, head, __ATOMIC_RELEASE);
	}
	l->written = seq;
	return NULL;
}

struct copier {
	pthread_t th;
	struct vs_shm *s;
	unsigned copies, records;
	char failure[256];
	int done;
};

static void *copy_main(void *arg)
{
	struct copier *c = arg;
	struct vs_shm_ring *r = vs_shm_ring(c->s, 0);
	uint8_t *buf = malloc(RING);
	for (unsigned i = 0; buf && i < 20000 && !c->failure[0]; i++) {
		uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
		uint64_t from = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
		size_t n = vs_ring_copy(c->s, 0, &from, head, buf, RING);
		uint64_t prev = 0;
		for (size_t o = 0; o < n;) {
			struct vs_event_header e;
			uint64_t seq = 0;
			if (n - o < 24) {
				snprintf(c->failure, sizeof c->failure,
					 "copy %u: %zu bytes at the end", i, n - o);
				break;
			}
			memcpy(&e, buf + o, sizeof e);
			memcpy(&seq, buf + o + 16, 8);
			if (e.site != forge_site_id(0) || e.size != 24 + 8 * (seq % 6) ||
			    e.size > n - o || (o && seq != prev + 1) || e.ts != seq) {
				snprintf(c->failure, sizeof c->failure,
					 "copy %u: bad record at %zu "
					 "(site %#x size %u seq %llu after %llu)",
					 i, o, e.site, e.size, (unsigned long long)seq,
					 (unsigned long long)prev);
				break;
			}
			prev = seq;
			o += e.size;
			c->records++;
		}
		c->copies++;
	}
	free(buf);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static bool copier_done(void *opaque)
{
	struct copier *c = opaque;
	return __atomic_load_n(&c->done, __ATOMIC_ACQUIRE);
}

/* 20000 copies of a ring a writer keeps lapping (it has lapped it 8 times before the
 * first, and laps it at least twice more during them): each copy is a run of whole
 * records with consecutive sequence numbers, and every copy returns (the test fails,
 * rather than hangs, if one does not within 60 s). */
static void test_ring_copy_against_a_lapping_writer(void **state)
{
	struct th_tmpdir *td = *state;
	struct forge_shm g;
	struct vs_shm s;
	struct lapper l = {0};
	struct copier c = {.s = &s};
	char path[600], why[512];

	write_forged(td, &g, path, sizeof path);
	assert_int_equal(vs_shm_open(&s, path, why, sizeof why), 0);
	struct vs_shm_header *other = map_other(path, g.size);
	l.r = (struct vs_shm_ring *)((uint8_t *)other + g.rings_off);
	l.data = (uint8_t *)other + g.data_off;
	memset(l.data, 0, RING);
	__atomic_store_n(&l.r->head, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&l.r->tail, 0, __ATOMIC_RELEASE);
	assert_int_equal(pthread_create(&l.th, NULL, lap_main, &l), 0);
	assert_true(wait_until(lapped_8_times, &l, 60000));
	uint64_t head_before = __atomic_load_n(&l.r->head, __ATOMIC_ACQUIRE);
	assert_int_equal(pthread_create(&c.th, NULL, copy_main, &c), 0);
	bool finished = wait_until(copier_done, &c, 60000);
	uint64_t head_after = __atomic_load_n(&l.r->head, __ATOMIC_ACQUIRE);
	__atomic_store_n(&l.stop, 1, __ATOMIC_RELEASE);
	pthread_join(l.th, NULL);
	if (!finished)
		fail_msg("vs_ring_copy did not return within 60 s (after %u copies)", c.copies);
	pthread_join(c.th, NULL);
	if (c.failure[0])
		fail_msg("%s", c.failure);
	print_message("%u copies, %u records; the writer lapped the ring %llu times meanwhile\n",
		      c.copies, c.records, (unsigned long long)((head_after - head_before) / RING));
	assert_int_equal(c.copies, 20000);
	assert_true(c.records > 0);
	assert_true(head_after - head_before >= 2 * RING); /* it raced the copies */
	vs_shm_close(&s);
	munmap(other, g.size);
}

/* ---- the file shrinks under a tool ------------------------------------------------------- */

/* Truncated after vs_shm_open: the next read of the mapping must not kill the tool
 * (SIGBUS); it reads nothing and knows the file shrank. */
static void test_file_truncated_under_the_mapping(void **state)
{
	struct th_tmpdir *td = *state;
	struct forge_shm g;
	struct vs_shm s;
	char path[600], why[512];
	uint8_t buf[RING];

	write_forged(td, &g, path, sizeof path);
	assert_int_equal(vs_shm_open(&s, path, why, sizeof why), 0);
	assert_false(vs_shm_shrunk(&s));
	assert_int_equal(truncate(path, 0), 0);
	uint64_t from = 0;
	assert_int_equal(vs_ring_copy(&s, 0, &from, 240, buf, sizeof buf), 0);
	assert_true(vs_shm_shrunk(&s));
	assert_int_equal(__atomic_load_n(&vs_shm_ring(&s, 0)->head, __ATOMIC_ACQUIRE), 0);
	vs_shm_close(&s);
}

struct drained {
	const struct vs_shm *s;
};
/* The recorder has taken every ring's records: each tail is at its head. */
static bool rings_drained(void *opaque)
{
	const struct vs_shm *s = ((struct drained *)opaque)->s;
	for (unsigned i = 0; i < s->snap.ring_count; i++) {
		const struct vs_shm_ring *r = vs_shm_ring(s, i);
		if (__atomic_load_n(&r->tail, __ATOMIC_ACQUIRE) !=
		    __atomic_load_n(&r->head, __ATOMIC_ACQUIRE))
			return false;
	}
	return true;
}

/* Truncated while `trace record` streams it: the recorder stops with an error that
 * says so, and the capture it leaves is whole and holds what it had read: both rings'
 * records, read before the truncation (the test waits until every ring is drained; it
 * waited for ring 0 alone, and a slow recorder had not read ring 1 yet). */
static void test_file_truncated_while_recording(void **state)
{
	struct th_tmpdir *td = *state;
	struct forge_shm g;
	struct vs_shm s;
	char path[600];

	write_forged(td, &g, path, sizeof path);
	pid_t rec = th_start_recording(td, getpid(), td->cap, NULL, &s);
	struct drained d = {&s};
	assert_true(wait_until(rings_drained, &d, 60000));
	vs_shm_close(&s);
	assert_int_equal(truncate(path, 0), 0);
	assert_int_equal(th_wait(rec), 1);
	assert_true(th_file_contains(td->err, "shrank while it was read"));
	assert_forged_events(td->cap);
}

/* Ring 0 claims three rings and a bit more than it holds (head 3 rings + 64 past its
 * tail) while `trace record` streams the file: the recorder must not stream that
 * many bytes from a 4 KiB ring (they would run past the file); ring 0's records cannot
 * be placed and are left out, ring 1's five are recorded. */
static void test_record_bounds_a_head_past_the_ring(void **state)
{
	struct th_tmpdir *td = *state;
	struct forge_shm g;
	char path[600], pidstr[32];

	struct vs_shm_header *h = write_forged_mapped(td, &g, path, sizeof path);
	struct vs_shm_ring *r0 = (struct vs_shm_ring *)((uint8_t *)h + g.rings_off);
	r0->head = 3 * RING + 64;
	munmap(h, g.size);
	snprintf(pidstr, sizeof pidstr, "%d", (int)getpid());
	assert_int_equal(th_cli(td, "record", pidstr, "-o", td->cap, "--duration", "0.3", NULL), 0);
	struct msgs m = {0};
	th_walk_or_fail(td->cap, collect, &m);
	assert_int_equal(m.n, 5);
	for (unsigned i = 0; i < 5; i++) {
		char want[32];
		snprintf(want, sizeof want, "n=%u", 100 + i);
		assert_string_equal(m.text[i], want);
	}
}

/* ---- names and flavours reach the terminal escaped ----------------------------------- */

/* exe and flavour full of escape sequences, without their NUL: `trace list` shows them
 * escaped (no ESC or BEL byte on the terminal) and cut at their fields' ends. */
static void test_list_escapes_names(void **state)
{
	struct th_tmpdir *td = *state;
	struct forge_shm g;
	char path[600];

	struct vs_shm_header *h = write_forged_mapped(td, &g, path, sizeof path);
	memset(h->exe, 'e', sizeof h->exe);
	memcpy(h->exe, "\x1b[2J\x1b]0;owned\x07", 14);
	memcpy(h->flavour, "\x1b[31mREDREDREDRE", 16);
	munmap(h, g.size);

	assert_int_equal(th_cli(td, "list", NULL), 0);
	size_t len;
	char *out = th_read_file(td->out, &len);
	assert_non_null(out);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)out[i] < 0x20 && out[i] != '\n')
			fail_msg("control character %#x at byte %zu of:\n%s", out[i], i, out);
	/* the flavour's 15 bytes (the 16th is its NUL now), then the next column */
	assert_non_null(strstr(out, "\\x1b[31mREDREDREDR "));
	/* the exe's 255 bytes, escaped, then the end of the line */
	char want[300] = "\\x1b[2J\\x1b]0;owned\\x07";
	size_t at = strlen(want);
	memset(want + at, 'e', 255 - 14);
	memcpy(want + at + 255 - 14, "\n", 2);
	assert_non_null(strstr(out, want));
	free(out);
}

/* An error that quotes the file (here the flag names of its metadata, one with a DEL
 * in it) reaches the terminal escaped. */
static void test_errors_quoting_the_file_are_escaped(void **state)
{
	struct th_tmpdir *td = *state;
	struct forge_shm g;
	char path[600], pidstr[32];

	struct vs_shm_header *h = write_forged_mapped(td, &g, path, sizeof path);
	uint8_t *meta = (uint8_t *)h + g.meta_off;
	uint8_t *name = memmem(meta, h->meta_used, "\x04\0TEST", 6); /* the provider's flag */
	assert_non_null(name);
	name[3] = 0x7f;
	munmap(h, g.size);
	snprintf(pidstr, sizeof pidstr, "%d", (int)getpid());
	assert_int_equal(th_cli(td, "enable", pidstr, "verbose:nosuch", NULL), 2);
	size_t len;
	char *err = th_read_file(td->err, &len);
	assert_non_null(err);
	assert_null(memchr(err, 0x7f, len));
	if (!strstr(err, "flags with sites: forged.t\\x7fst"))
		fail_msg("no escaped flag name in: %s", err);
	free(err);
}

static int setup(void **state)
{
	return th_tmpdir_setup(state, "hostile-shm");
}

#define TMPDIR_TEST(f) cmocka_unit_test_setup_teardown(f, setup, th_tmpdir_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
	    TMPDIR_TEST(test_planted_file_of_another_user_is_refused),
	    TMPDIR_TEST(test_hard_linked_file_is_refused),
	    TMPDIR_TEST(test_fifo_or_directory_is_refused),
	    TMPDIR_TEST(test_file_writable_by_others_is_refused),
	    TMPDIR_TEST(test_runtime_does_not_use_planted_files),
	    TMPDIR_TEST(test_geometry_rewritten_after_open),
	    TMPDIR_TEST(test_geometry_rewritten_while_dumping),
	    TMPDIR_TEST(test_ring_copy_against_a_lapping_writer),
	    TMPDIR_TEST(test_file_truncated_under_the_mapping),
	    TMPDIR_TEST(test_file_truncated_while_recording),
	    TMPDIR_TEST(test_record_bounds_a_head_past_the_ring),
	    TMPDIR_TEST(test_list_escapes_names),
	    TMPDIR_TEST(test_errors_quoting_the_file_are_escaped),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
