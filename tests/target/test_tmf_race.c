/* SPDX-License-Identifier: MIT */
/*
 * TMFs racing LUN removal (issue 22, defect 1): a LOGICAL UNIT RESET or an I_T NEXUS RESET
 * looks a LUN up in the table and writes its unit attention into it; a removal must not free
 * the LUN in between.  Built in the cold-print flavour: the reset's trace line
 * (vs_scsi_lun_reset, "lun '%s' (%u): reset ...") is printed between the look-up and the
 * write, so a test can hold the control thread right there by making the print block (its
 * stderr a full pipe), or widen the window for the race (the line written to a terminal).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"
#include "thread_wait.h"
#include "trace/trace_shared.h" /* vs__print_to */
#include "util/util.h"

#define CTLQ	VS_VIRTIO_SCSI_VQ_CTRL
#define WAIT_NS 10000000000ull
#define QUIET	"error" /* what the print flavour prints outside the held sections */

struct removal {
	struct vs_target *t;
	unsigned id;
	pid_t tid; /* atomic: set when it runs */
	int rc;
	char err[256];
	int done; /* atomic */
};

static void *remove_main(void *arg)
{
	struct removal *r = arg;

	__atomic_store_n(&r->tid, gettid(), __ATOMIC_RELEASE);
	r->rc = vs_target_lun_remove(r->t, NULL, r->id, r->err, sizeof(r->err));
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* stderr made a one-page pipe with room bytes free: a print that does not fit blocks in
 * write() (glibc writes an unbuffered stream's prefix, message and newline as three writes,
 * each appended to the page while it fits).  Undone by stderr_release. */
struct stuck_stderr {
	int saved, rd, wr;
};

static void stderr_block(struct stuck_stderr *s, size_t room)
{
	char junk[4096], path[64];
	int p[2], fill;

	memset(junk, '.', sizeof(junk));
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	assert_int_equal(fcntl(p[1], F_SETPIPE_SZ, 4096), 4096);
	s->rd = p[0];
	s->wr = p[1];
	s->saved = dup(2);
	assert_true(s->saved >= 0);
	/* A second open of the pipe: non-blocking for us alone, the target's writes block. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[1]);
	fill = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	assert_true(fill >= 0);
	assert_int_equal(write(fill, junk, sizeof(junk) - room), (ssize_t)(sizeof(junk) - room));
	close(fill);
	assert_int_equal(dup2(p[1], 2), 2);
}

static void stderr_release(struct stuck_stderr *s)
{
	uint64_t end = vs_mono_ns() + WAIT_NS;
	char buf[4096], wchan[64];

	dup2(s->saved, 2); /* later prints go where they went before */
	close(s->saved);
	fcntl(s->rd, F_SETFL, O_NONBLOCK);
	do { /* room for the print in progress, until it is out of the pipe */
		while (read(s->rd, buf, sizeof(buf)) > 0)
			;
		thread_wchan(0, "vs-ctl", wchan, sizeof(wchan));
	} while (strstr(wchan, "pipe_write") && vs_mono_ns() < end && !poll(NULL, 0, 1));
	close(s->rd);
	close(s->wr);
}

/* The length of the first n trace lines an I_T NEXUS RESET prints (the device's "scsi dev
 * ...: reset", then one per LUN in order), read from a pipe it printed into. */
static size_t nexus_lines(struct fx *x, unsigned n)
{
	char buf[4096], *end;
	int p[2], saved = dup(2);
	uint8_t resp = 0xee;
	ssize_t got;

	assert_int_equal(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
	assert_int_equal(dup2(p[1], 2), 2);
	assert_int_equal(fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET, 0, 0, 0, &resp), 0);
	dup2(saved, 2);
	close(saved);
	got = read(p[0], buf, sizeof(buf) - 1);
	close(p[0]);
	close(p[1]);
	assert_int_equal(resp, VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_true(got > 0);
	buf[got] = 0;
	end = buf;
	for (unsigned i = 0; i < n; i++) {
		assert_non_null(end = strchr(end, '\n'));
		end++;
	}
	return (size_t)(end - buf);
}

/* Post a TMF of subtype for lun on the control queue (TMF trace lines on), stderr a pipe with
 * room bytes free; once the control thread blocks in a print, remove LUN victim; then let
 * the print go.  The removal must not finish while the TMF holds the LUN: it waits (sleeps)
 * instead.  Trace lines are off again afterwards. */
static void reset_held_while_removed(struct fx *x, uint32_t subtype, unsigned lun, unsigned victim,
				     size_t room)
{
	struct removal r = {.t = x->g.t, .id = victim};
	const uint64_t reqa = FE_SLOT(1), respa = reqa + FE_SLOT_RESP;
	struct vs_virtio_scsi_ctrl_tmf_req req = {.type = vs_le32(VS_VIRTIO_SCSI_T_TMF),
						  .subtype = vs_le32(subtype)};
	struct vs_vq_buf bufs[2] = {{reqa, sizeof(req), false}, {respa, 1, true}};
	struct stuck_stderr se;
	bool held = false, removed_while_held = false;
	char wchan[64] = "", state_at = '?';
	uint16_t head;
	uint32_t len;
	pthread_t thr;

	memset(&thr, 0, sizeof(thr)); /* joined only once made (fail_msg does not return) */
	assert_int_equal(vs_vscsi_lun_encode(req.lun, 0, lun), 0);
	memcpy(fe_host(&x->fe, reqa), &req, sizeof(req));
	*(uint8_t *)fe_host(&x->fe, respa) = 0xee;

	stderr_block(&se, room);
	assert_int_equal(fe_post_chain(&x->fe, CTLQ, bufs, 2, &head), 0);
	for (uint64_t end = vs_mono_ns() + WAIT_NS; !held && vs_mono_ns() < end;) {
		thread_wchan(0, "vs-ctl", wchan, sizeof(wchan));
		if (!(held = strstr(wchan, "pipe_write") != NULL))
			poll(NULL, 0, 1); /* polling a condition, with the deadline above */
	}
	if (held) {
		assert_int_equal(pthread_create(&thr, NULL, remove_main, &r), 0);
		/* Until the removal finished, or sleeps (waits for something). */
		for (uint64_t end = vs_mono_ns() + WAIT_NS; vs_mono_ns() < end;) {
			pid_t tid = __atomic_load_n(&r.tid, __ATOMIC_ACQUIRE);

			if (__atomic_load_n(&r.done, __ATOMIC_ACQUIRE) ||
			    (tid && (state_at = thread_state(0, tid)) == 'S'))
				break;
			poll(NULL, 0, 1);
		}
		removed_while_held = __atomic_load_n(&r.done, __ATOMIC_ACQUIRE);
	}
	assert_int_equal(vs_trace_set_spec(QUIET), 0); /* what is printing finishes, no more */
	stderr_release(&se); /* the TMF goes on: on dcf1c4a, into the freed LUN */
	if (!held)
		fail_msg("the control thread did not block in the reset's print (wchan '%s')",
			 wchan);
	assert_int_equal(pthread_join(thr, NULL), 0);
	assert_false(removed_while_held);
	assert_int_equal(state_at, 'S');
	if (r.rc)
		fail_msg("remove: %s", r.err);
	assert_int_equal(fe_wait_used(&x->fe, CTLQ, &head, &len, FE_WAIT_MS), 0);
	assert_int_equal(len, 1);
	assert_int_equal(*(uint8_t *)fe_host(&x->fe, respa), VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
	assert_int_equal(vs_target_lun_list(x->g.t, NULL, NULL, 0), 1);
}

/* A LOGICAL UNIT RESET of LUN 1 held in the middle of its reset (the control thread blocked
 * in the reset's trace print, with the LUN looked up) while LUN 1 is removed: the removal
 * waits for the TMF to be done with the LUN.  On dcf1c4a it finished at once and freed the
 * LUN, and the reset then read and wrote freed memory (ASan: heap-use-after-free). */
static void test_lun_reset_held_inside_a_lun_being_removed(void **state)
{
	assert_int_equal(vs_trace_set_spec("info:scsi.tmf"), 0);
	reset_held_while_removed(*state, VS_VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 1, 1, 0);
}

/* The same for an I_T NEXUS RESET, held in LUN 1's reset (its first two lines, the device's
 * and LUN 0's, fit in the pipe; LUN 1's does not) while LUN 1 is removed. */
static void test_nexus_reset_held_inside_a_lun_being_removed(void **state)
{
	size_t room;

	assert_int_equal(vs_trace_set_spec("info:scsi.tmf"), 0);
	room = nexus_lines(*state, 2) + 16;
	reset_held_while_removed(*state, VS_VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET, 0, 1, room);
}

/* ---- the race as reported: resets back to back while a LUN comes and goes ---------------- */
#define RACE_CYCLES 1500 /* adds and removes */

struct churn {
	struct vs_target *t;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* pairs moved, or stop */
	unsigned pairs;	     /* NEXUS + LUN RESET pairs answered (under lock) */
	bool stop;	     /* under lock */
	unsigned cycles;     /* atomic */
	int rc;		     /* the first failure, reported to the test thread */
	char err[256];
};

/* Wait until two more pairs were answered (the second begun after the call): false when the
 * test stops or at the deadline. */
static bool churn_two_pairs(struct churn *c)
{
	uint64_t end = vs_mono_ns() + WAIT_NS;
	unsigned from;
	bool ok;

	pthread_mutex_lock(&c->lock);
	from = c->pairs;
	while (c->pairs < from + 2 && !c->stop && vs_mono_ns() < end) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&c->cond, &c->lock, &ts);
	}
	ok = c->pairs >= from + 2;
	pthread_mutex_unlock(&c->lock);
	return ok;
}

/* Add LUN 2, let two resets pairs by, remove it, let two more by: RACE_CYCLES times. */
static void *churn_main(void *arg)
{
	struct churn *c = arg;
	struct vs_target_lun l = {.id = 2, .spec = "ram=1M"};

	for (unsigned i = 0; i < RACE_CYCLES && !c->rc; i++) {
		if ((c->rc = vs_target_lun_add(c->t, NULL, &l, c->err, sizeof(c->err))))
			break;
		if (!churn_two_pairs(c))
			break;
		if ((c->rc = vs_target_lun_remove(c->t, NULL, 2, c->err, sizeof(c->err))))
			break;
		if (!churn_two_pairs(c))
			break;
		__atomic_store_n(&c->cycles, i + 1, __ATOMIC_RELEASE);
	}
	pthread_mutex_lock(&c->lock);
	c->stop = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

/* The print backend's output: a pseudo-terminal (line-buffered: one write per trace line, as
 * on a console) whose other end a thread reads and drops. */
struct pty_sink {
	int master;
	pthread_t thr;
};

static void *pty_drain(void *arg)
{
	struct pty_sink *p = arg;
	char buf[4096];

	while (read(p->master, buf, sizeof(buf)) > 0)
		;
	return NULL;
}

static void pty_sink_open(struct pty_sink *p)
{
	char slave[64];
	struct termios tio;
	int fd;

	p->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	assert_true(p->master >= 0);
	assert_int_equal(grantpt(p->master), 0);
	assert_int_equal(unlockpt(p->master), 0);
	assert_int_equal(ptsname_r(p->master, slave, sizeof(slave)), 0);
	fd = open(slave, O_RDWR | O_NOCTTY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(tcgetattr(fd, &tio), 0);
	cfmakeraw(&tio);
	assert_int_equal(tcsetattr(fd, TCSANOW, &tio), 0);
	assert_int_equal(vs__print_to(slave), 0);
	close(fd);
	assert_int_equal(pthread_create(&p->thr, NULL, pty_drain, p), 0);
}

static void pty_sink_close(struct pty_sink *p)
{
	assert_int_equal(vs__print_to("/dev/null"), 0); /* the slave closes: read() ends */
	assert_int_equal(pthread_join(p->thr, NULL), 0);
	close(p->master);
}

/* I_T NEXUS RESETs and LOGICAL UNIT RESETs of LUN 2, one after the other, while another
 * thread adds and removes LUN 2, letting two pairs of resets by after each change (so that
 * the LUN RESET of a pair begun after it finds the LUN there, and gone): the reset's trace
 * line printed to a terminal between look-up and write (a window of microseconds).  Every
 * reset answers FUNCTION COMPLETE, or INCORRECT LUN for a LUN RESET with LUN 2 gone; each
 * of those was seen RACE_CYCLES times at least; every add and remove succeeded.  On
 * dcf1c4a under ASan: heap-use-after-free. */
static void test_resets_back_to_back_while_a_lun_comes_and_goes(void **state)
{
	struct fx *x = *state;
	struct churn c = {.t = x->g.t};
	unsigned present = 0, absent = 0;
	struct pty_sink sink;
	pthread_t thr;
	bool stop = false;

	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	pty_sink_open(&sink);
	assert_int_equal(vs_trace_set_spec("info:scsi.tmf"), 0);
	assert_int_equal(pthread_create(&thr, NULL, churn_main, &c), 0);
	while (!stop) {
		uint8_t resp = 0xee;

		assert_int_equal(
		    fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET, 0, 0, 0, &resp), 0);
		assert_int_equal(resp, VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE);
		assert_int_equal(
		    fe_tmf(&x->fe, VS_VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET, 0, 2, 0, &resp), 0);
		if (resp == VS_VIRTIO_SCSI_S_FUNCTION_COMPLETE) {
			present++;
		} else {
			assert_int_equal(resp, VS_VIRTIO_SCSI_S_INCORRECT_LUN);
			absent++;
		}
		pthread_mutex_lock(&c.lock);
		c.pairs++;
		pthread_cond_broadcast(&c.cond);
		stop = c.stop;
		pthread_mutex_unlock(&c.lock);
	}
	assert_int_equal(pthread_join(thr, NULL), 0);
	assert_int_equal(vs_trace_set_spec(QUIET), 0);
	pty_sink_close(&sink);
	if (c.rc)
		fail_msg("add/remove failed: %d %s", c.rc, c.err);
	print_message("%u adds and removes under %u resets; LUN RESET found the LUN %u times, "
		      "not %u times\n",
		      c.cycles, 2 * (present + absent), present, absent);
	assert_int_equal(c.cycles, RACE_CYCLES);
	assert_true(present >= RACE_CYCLES && absent >= RACE_CYCLES);
	pthread_mutex_destroy(&c.lock);
	pthread_cond_destroy(&c.cond);
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN); /* a print still in the pipe when it closes: EPIPE, not death */
	vs_trace_set_spec(QUIET);
	const struct CMUnitTest tests[] = {
	    FX_TEST(test_lun_reset_held_inside_a_lun_being_removed),
	    FX_TEST(test_nexus_reset_held_inside_a_lun_being_removed),
	    FX_TEST(test_resets_back_to_back_while_a_lun_comes_and_goes),
	};

	if (argc > 1) /* one test by name */
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
