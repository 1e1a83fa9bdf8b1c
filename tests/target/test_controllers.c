/* SPDX-License-Identifier: MIT */
/*
 * Several controllers in one target (issue 25): each a vhost-user-scsi device with its own
 * socket, frontend and LUNs, served by the same workers.  A target in this process, one
 * initiator per controller.  Requests are held with the test gate of a LUN's backend, never
 * by a delay, so that what is asserted while they wait is the state under test.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "../initiator/harness.h"
#include "target/target_int.h"

#define DEADLINE_MS 60000 /* any wait: fails the test rather than hang */
#define HELD	    4	  /* reads held in controller b's gate */

struct fx {
	char dir[64], sock_a[96], sock_b[96];
	struct vs_target *t;
	struct vs_ini *a, *b;
	struct vs_ini_queue *qa, *qb;
};

/* Controller "default" on a.sock (LUN 0, RAM) and controller "b" on b.sock (LUN 0 on RAM
 * behind a gate for reads: b_lun), one request queue each, one worker for both. */
static struct fx *fx_open(const char *b_lun)
{
	struct fx *x = calloc(1, sizeof(*x));
	struct vs_target_lun la = {.id = 0, .spec = "ram=16M"}, lb = {.id = 0, .spec = b_lun};
	struct vs_target_controller cb = {
	    .name = "b", .socket_path = x->sock_b, .num_queues = 1, .nluns = 1, .luns = &lb};
	struct vs_target_config cfg = {.socket_path = x->sock_a,
				       .num_queues = 1,
				       .workers = 1,
				       .nluns = 1,
				       .luns = &la,
				       .controllers = &cb,
				       .ncontrollers = 1,
				       .testing = true};
	struct vs_ini_opts o = {.queues = 1, .data_mem = 8u << 20};
	char why[256];

	assert_non_null(x);
	snprintf(x->dir, sizeof(x->dir), "/tmp/vs-ctrl-XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	snprintf(x->sock_a, sizeof(x->sock_a), "%s/a.sock", x->dir);
	snprintf(x->sock_b, sizeof(x->sock_b), "%s/b.sock", x->dir);
	if (vs_target_create(&x->t, &cfg, why, sizeof(why)))
		fail_msg("vs_target_create: %s", why);
	o.socket = x->sock_a;
	assert_int_equal(vs_ini_open(&x->a, &o), 0);
	o.socket = x->sock_b;
	assert_int_equal(vs_ini_open(&x->b, &o), 0);
	x->qa = vs_ini_get_queue(x->a, 0);
	x->qb = vs_ini_get_queue(x->b, 0);
	return x;
}

static void fx_close(struct fx *x)
{
	vs_ini_close(x->a);
	if (x->b)
		vs_ini_close(x->b);
	assert_int_equal(vs_target_destroy(x->t), 0);
	assert_int_equal(rmdir(x->dir), 0);
	free(x);
}

/* Controller b's LUN 0 backend (white box: the test's handle on its gate). */
static struct vs_backend *b_backend(struct fx *x)
{
	for (struct vs_controller *c = x->t->ctrls; c; c = c->next)
		if (!strcmp(c->name, "b"))
			return c->be[0];
	fail_msg("no controller b");
	return NULL;
}

/* Each controller has LUN 0 of its own: the same block written through each reads back
 * what was written through that one; each counts only its own requests. */
static void test_two_controllers_own_luns(void **state)
{
	struct fx *x = fx_open("ram=16M");
	uint8_t *ba = vs_ini_alloc(x->a, 4096, 4096), *bb = vs_ini_alloc(x->b, 4096, 4096);
	struct vs_target_controller_info info[4];
	struct vs_target_lun_stats st;

	(void)state;
	pattern_fill(ba, 4096, 1, 0);
	pattern_fill(bb, 4096, 2, 0);
	assert_int_equal(io_sync(x->qa, VS_INI_WRITE, 0, 0, 8, ba, 4096, 1), 0);
	assert_int_equal(io_sync(x->qb, VS_INI_WRITE, 0, 0, 8, bb, 4096, 1), 0);
	memset(ba, 0, 4096);
	memset(bb, 0, 4096);
	assert_int_equal(io_sync(x->qa, VS_INI_READ, 0, 0, 8, ba, 4096, 1), 0);
	assert_int_equal(io_sync(x->qb, VS_INI_READ, 0, 0, 8, bb, 4096, 1), 0);
	assert_true(pattern_check(ba, 4096, 1, 0));
	assert_true(pattern_check(bb, 4096, 2, 0));
	assert_int_equal(io_sync(x->qb, VS_INI_READ, 0, 0, 8, bb, 4096, 1), 0);

	assert_int_equal(vs_target_controller_list(x->t, info, 4), 2);
	assert_string_equal(info[0].name, VS_TARGET_DEFAULT_CONTROLLER);
	assert_string_equal(info[1].name, "b");
	assert_true(info[0].connected && info[1].connected);
	assert_int_equal(vs_target_lun_stats(x->t, VS_TARGET_DEFAULT_CONTROLLER, &st, 1), 1);
	assert_int_equal(st.reads, 1);
	assert_int_equal(vs_target_lun_stats(x->t, "b", &st, 1), 1);
	assert_int_equal(st.reads, 2);
	fx_close(x);
}

/* Which controller: NULL is refused when there are several, an unknown name is not found,
 * a second controller of the same name or socket is refused, and nothing changes. */
static void test_controller_names_checked(void **state)
{
	struct fx *x = fx_open("ram=16M");
	struct vs_target_lun l = {.id = 1, .spec = "ram=1M"};
	struct vs_target_controller c = {.name = "b",
					 .socket_path = "/tmp/vs-ctrl-unused.sock",
					 .num_queues = 1,
					 .nluns = 1,
					 .luns = &l};
	struct vs_target_lun_info luns[4];
	char why[256];

	(void)state;
	assert_int_equal(vs_target_lun_add(x->t, NULL, &l, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "which controller"));
	assert_int_equal(vs_target_lun_add(x->t, "nope", &l, why, sizeof(why)), -ENOENT);
	assert_int_equal(vs_target_lun_list(x->t, NULL, luns, 4), 0);
	assert_int_equal(vs_target_controller_add(x->t, &c, why, sizeof(why)), -EEXIST);
	c.name = "c";
	c.socket_path = x->sock_b;
	assert_int_equal(vs_target_controller_add(x->t, &c, why, sizeof(why)), -EEXIST);
	c.name = "bad/name";
	assert_int_equal(vs_target_controller_add(x->t, &c, why, sizeof(why)), -EINVAL);
	assert_int_equal(vs_target_controller_remove(x->t, "nope", why, sizeof(why)), -ENOENT);
	assert_int_equal(vs_target_controller_list(x->t, NULL, 0), 2);
	assert_int_equal(vs_target_lun_list(x->t, "b", luns, 4), 1);
	fx_close(x);
}

/* A controller added at run time is served at once, and removed again. */
static void test_controller_added_and_removed(void **state)
{
	struct fx *x = fx_open("ram=16M");
	struct vs_target_lun l = {.id = 3, .spec = "ram=1M"};
	char sock[128], why[256];
	struct vs_target_controller c = {
	    .name = "c", .socket_path = sock, .num_queues = 2, .nluns = 1, .luns = &l};
	struct vs_ini_opts o = {.queues = 2, .data_mem = 4u << 20, .socket = sock};
	struct vs_ini_lun found;
	struct vs_ini *ini;
	uint8_t *buf;

	(void)state;
	snprintf(sock, sizeof(sock), "%s/c.sock", x->dir);
	if (vs_target_controller_add(x->t, &c, why, sizeof(why)))
		fail_msg("controller_add: %s", why);
	assert_int_equal(vs_ini_open(&ini, &o), 0);
	buf = vs_ini_alloc(ini, 4096, 4096);
	assert_int_equal(vs_ini_lun_count(ini), 1);
	assert_int_equal(vs_ini_lun_info(ini, 0, &found), 0);
	assert_int_equal(found.lun, 3);
	assert_int_equal(io_sync(vs_ini_get_queue(ini, 1), VS_INI_READ, 0, 0, 8, buf, 4096, 1), 0);
	vs_ini_close(ini);
	assert_int_equal(vs_target_controller_remove(x->t, "c", why, sizeof(why)), 0);
	assert_int_equal(access(sock, F_OK), -1); /* its socket is gone */
	assert_int_equal(vs_target_controller_list(x->t, NULL, 0), 2);
	fx_close(x);
}

struct remover {
	struct vs_target *t;
	int rc;
	int done; /* atomic */
	char why[256];
};

static void *remove_b(void *arg)
{
	struct remover *r = arg;

	r->rc = vs_target_controller_remove(r->t, "b", r->why, sizeof(r->why));
	__atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Controller b removed while HELD of its reads wait in its backend: the removal waits for
 * them; meanwhile the other controller's requests complete (at least 200 of them, while
 * the removal is still waiting); released, b's reads complete successfully, then the
 * removal returns, and b is gone. */
static void test_removal_under_io_spares_the_others(void **state)
{
	struct fx *x = fx_open("ram=16M,gate=read");
	struct vs_backend *be = b_backend(x);
	uint8_t *ba = vs_ini_alloc(x->a, 4096, 4096), *bb = vs_ini_alloc(x->b, HELD * 4096, 4096);
	struct waiter held[HELD];
	struct remover r = {.t = x->t};
	uint64_t end = now_ms() + DEADLINE_MS;
	unsigned a_done = 0;
	pthread_t th;

	(void)state;
	for (unsigned i = 0; i < HELD; i++) {
		waiter_prep(&held[i], VS_INI_READ, 0, i * 8, 8, bb + i * 4096, 4096, 1);
		assert_int_equal(waiter_submit(x->qb, &held[i]), 0);
	}
	assert_int_equal(vs_backend_gate_wait(be, HELD, DEADLINE_MS), 0);
	assert_int_equal(pthread_create(&th, NULL, remove_b, &r), 0);
	/* The other controller is served throughout. */
	while (a_done < 200) {
		assert_int_equal(io_sync(x->qa, VS_INI_READ, 0, a_done % 64 * 8, 8, ba, 4096, 1),
				 0);
		a_done++;
		assert_true(now_ms() < end);
	}
	assert_int_equal(__atomic_load_n(&r.done, __ATOMIC_ACQUIRE), 0);
	for (unsigned i = 0; i < HELD; i++)
		assert_int_equal(held[i].done, 0);
	assert_int_equal(vs_backend_gate_open(be), HELD);
	for (unsigned i = 0; i < HELD; i++) {
		waiter_wait(x->qb, &held[i]);
		assert_int_equal(held[i].io.result, 0);
	}
	assert_int_equal(pthread_join(th, NULL), 0);
	if (r.rc)
		fail_msg("controller_remove: %s", r.why);
	assert_int_equal(vs_target_controller_list(x->t, NULL, 0), 1);
	vs_ini_close(x->b);
	x->b = NULL;
	assert_int_equal(io_sync(x->qa, VS_INI_READ, 0, 0, 8, ba, 4096, 1), 0);
	fx_close(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_controllers_own_luns),
	    cmocka_unit_test(test_controller_names_checked),
	    cmocka_unit_test(test_controller_added_and_removed),
	    cmocka_unit_test(test_removal_under_io_spares_the_others),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
