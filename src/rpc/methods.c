/* SPDX-License-Identifier: MIT */
/*
 * The JSON-RPC 2.0 layer and the methods: one request line in, one response line out.
 * Parsing and building JSON is jansson's; every request is checked here once (shape,
 * method, the names and types of its params) before a method sees it, so a method only
 * calls the target and turns what it returns into JSON.
 */
#define _GNU_SOURCE /* strerrorname_np */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <vioscope/target.h>
#include <vioscope/trace.h>

#include "rpc/config_live.h"
#include "rpc/rpc_int.h"
#include "util/util.h"

struct rpc_error {
	int code;   /* 0: none */
	int errnum; /* the target's -errno, for data.errno (0: no data) */
	char msg[512];
};

static json_t *fail(struct rpc_error *e, int code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static json_t *fail(struct rpc_error *e, int code, int errnum, const char *fmt, ...)
{
	va_list ap;

	e->code = code;
	e->errnum = errnum;
	va_start(ap, fmt);
	vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
	va_end(ap);
	return NULL;
}

/* A JSON string of text that may not be UTF-8 (a message cut mid-character, a spec's
 * bytes): bytes past ASCII become '?' when jansson refuses it as it is. */
static json_t *text(const char *s)
{
	json_t *j = json_string(s);
	char *copy;

	if (j || !s)
		return j;
	copy = strdup(s);
	if (!copy)
		return NULL;
	for (char *p = copy; *p; p++)
		if ((unsigned char)*p >= 0x80)
			*p = '?';
	j = json_string(copy);
	free(copy);
	return j;
}

/* A counter as a JSON integer (json_int_t is signed 64-bit). */
static json_t *num(uint64_t v)
{
	return json_integer(v > (uint64_t)INT64_MAX ? INT64_MAX : (json_int_t)v);
}

/* The target refused (rc = -errno): its own message, and which errno. */
static json_t *target_fail(struct rpc_error *e, int rc, const char *err)
{
	return fail(e, VS_RPC_TARGET_ERROR, -rc, "%s", err[0] ? err : strerror(-rc));
}

/* ---- params ---------------------------------------------------------------------------- */

/* A whole number in 0..max named name: 0, or -1 with e set. */
static int param_uint(json_t *params, const char *name, uint64_t max, uint64_t *out,
		      struct rpc_error *e)
{
	json_t *v = json_object_get(params, name);

	if (!v) {
		fail(e, VS_RPC_INVALID_PARAMS, 0, "missing param '%s'", name);
		return -1;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max) {
		fail(e, VS_RPC_INVALID_PARAMS, 0, "param '%s': expected a whole number in 0..%llu",
		     name, (unsigned long long)max);
		return -1;
	}
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

/* A non-empty string named name: 0, or -1 with e set. */
static int param_str(json_t *params, const char *name, const char **out, struct rpc_error *e)
{
	json_t *v = json_object_get(params, name);

	if (!v) {
		fail(e, VS_RPC_INVALID_PARAMS, 0, "missing param '%s'", name);
		return -1;
	}
	if (!json_is_string(v) || !json_string_length(v) ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		fail(e, VS_RPC_INVALID_PARAMS, 0, "param '%s': expected a non-empty string", name);
		return -1;
	}
	*out = json_string_value(v);
	return 0;
}

/* A size in bytes: a whole number, or a string with a K/M/G/T suffix as on the command
 * line ("64M"): 0, or -1 with e set. */
static int param_size(json_t *params, const char *name, uint64_t *out, struct rpc_error *e)
{
	json_t *v = json_object_get(params, name);

	if (v && json_is_string(v)) {
		int rc = vs_parse_size(json_string_value(v), out);

		if (rc == 0)
			return 0;
		if (rc == -ERANGE)
			fail(e, VS_RPC_INVALID_PARAMS, 0,
			     "param '%s': '%.64s' is more than %lld bytes", name,
			     json_string_value(v), (long long)INT64_MAX);
		else
			fail(e, VS_RPC_INVALID_PARAMS, 0,
			     "param '%s': '%.64s' is not a size (bytes, or with a K, M, G or T "
			     "suffix)",
			     name, json_string_value(v));
		return -1;
	}
	if (v && !json_is_integer(v)) {
		fail(e, VS_RPC_INVALID_PARAMS, 0,
		     "param '%s': expected bytes (a whole number, or a string such as \"64M\")",
		     name);
		return -1;
	}
	return param_uint(params, name, INT64_MAX, out, e);
}

/* ---- methods --------------------------------------------------------------------------- */

/* QoS limits by name, as qos_set and the --qos option take them: {prefix}{kind}. */
static const char *const qos_prefix[VS_QOS_DIRS] = {"read_", "write_", ""};
static const char *const qos_kind[4] = {"iops", "bps", "burst_iops", "burst_bps"};

static uint64_t *qos_field(struct vs_target_qos *q, unsigned d, unsigned k)
{
	return k == 0	? &q->iops[d]
	       : k == 1 ? &q->bps[d]
	       : k == 2 ? &q->burst_iops[d]
			: &q->burst_bps[d];
}

/* Every limit, 0 when unlimited (bursts: 0 when the default). */
static json_t *qos_json(const struct vs_target_qos *q)
{
	struct vs_target_qos c = *q;
	json_t *j = json_object();
	char name[32];

	for (unsigned d = 0; j && d < VS_QOS_DIRS; d++)
		for (unsigned k = 0; k < 4; k++) {
			snprintf(name, sizeof(name), "%s%s", qos_prefix[d], qos_kind[k]);
			json_object_set_new(j, name, num(*qos_field(&c, d, k)));
		}
	return j;
}

/* The controller a method is about: its optional param "controller", which must name one
 * the target has; absent, the target's only controller (*name NULL).  0, or -1 with e set. */
static int which_ctrl(struct vs_rpc *rpc, json_t *params, const char **name, struct rpc_error *e)
{
	static struct vs_target_controller_info list[VS_TARGET_MAX_CONTROLLERS];
	unsigned n = vs_target_controller_list(rpc->cfg.target, list, VS_TARGET_MAX_CONTROLLERS);
	char names[512] = "";
	size_t len = 0;

	for (unsigned i = 0; i < n && i < VS_TARGET_MAX_CONTROLLERS && len < sizeof(names); i++)
		len += (size_t)snprintf(names + len, sizeof(names) - len, "%s%s", i ? ", " : "",
					list[i].name);
	*name = NULL;
	if (!json_object_get(params, "controller")) {
		if (n == 1)
			return 0;
		fail(e, VS_RPC_INVALID_PARAMS, 0,
		     "missing param 'controller': the target has %u controllers (%s)", n, names);
		return -1;
	}
	if (param_str(params, "controller", name, e))
		return -1;
	for (unsigned i = 0; i < n && i < VS_TARGET_MAX_CONTROLLERS; i++)
		if (!strcmp(list[i].name, *name))
			return 0;
	fail(e, VS_RPC_TARGET_ERROR, ENOENT, "no controller '%.64s' (there are: %s)", *name, names);
	return -1;
}

static json_t *lun_info_json(const struct vs_target_lun_info *l)
{
	return json_pack("{s:I, s:o, s:s, s:o, s:I, s:b, s:o}", "id", (json_int_t)l->id, "spec",
			 text(l->spec), "kind", l->kind, "bytes", num(l->bytes), "block_size",
			 (json_int_t)l->block_size, "read_only", l->read_only, "qos",
			 qos_json(&l->qos));
}

/* The LUN's entry in the target's list, as JSON (an application error if it is gone). */
static json_t *lun_json(struct vs_rpc *rpc, const char *ctrl, unsigned id, struct rpc_error *e)
{
	struct vs_target_lun_info luns[VS_TARGET_MAX_LUNS];
	unsigned n = vs_target_lun_list(rpc->cfg.target, ctrl, luns, VS_TARGET_MAX_LUNS);

	for (unsigned i = 0; i < n && i < VS_TARGET_MAX_LUNS; i++)
		if (luns[i].id == id)
			return lun_info_json(&luns[i]);
	return fail(e, VS_RPC_TARGET_ERROR, ENOENT, "LUN %u went away", id);
}

static json_t *m_lun_add(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
			 struct rpc_error *e)
{
	struct vs_target_lun lun = {.id = 0};
	char err[512] = "";
	uint64_t id;
	const char *ctrl;
	int rc;

	(void)s;
	if (which_ctrl(rpc, params, &ctrl, e))
		return NULL;
	if (param_uint(params, "id", VS_TARGET_MAX_LUNS - 1, &id, e) ||
	    param_str(params, "spec", &lun.spec, e))
		return NULL;
	lun.id = (unsigned)id;
	rc = vs_target_lun_add(rpc->cfg.target, ctrl, &lun, err, sizeof(err));
	if (rc)
		return target_fail(e, rc, err);
	vs_config_live_changed(rpc->cfg.live);
	return lun_json(rpc, ctrl, lun.id, e);
}

static json_t *m_lun_remove(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
			    struct rpc_error *e)
{
	char err[512] = "";
	uint64_t id;
	const char *ctrl;
	int rc;

	(void)s;
	if (which_ctrl(rpc, params, &ctrl, e))
		return NULL;
	if (param_uint(params, "id", VS_TARGET_MAX_LUNS - 1, &id, e))
		return NULL;
	rc = vs_target_lun_remove(rpc->cfg.target, ctrl, (unsigned)id, err, sizeof(err));
	if (rc)
		return target_fail(e, rc, err);
	vs_config_live_changed(rpc->cfg.live);
	return json_pack("{s:I}", "id", (json_int_t)id);
}

static json_t *m_lun_resize(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
			    struct rpc_error *e)
{
	uint64_t id, size;
	char err[512] = "";
	const char *ctrl;
	int rc;

	(void)s;
	if (which_ctrl(rpc, params, &ctrl, e))
		return NULL;
	if (param_uint(params, "id", VS_TARGET_MAX_LUNS - 1, &id, e) ||
	    param_size(params, "size", &size, e))
		return NULL;
	rc = vs_target_lun_resize(rpc->cfg.target, ctrl, (unsigned)id, size, err, sizeof(err));
	if (rc)
		return target_fail(e, rc, err);
	vs_config_live_changed(rpc->cfg.live);
	return lun_json(rpc, ctrl, (unsigned)id, e);
}

static json_t *controller_json(const struct vs_target_controller_info *c);

/* The controller named (NULL: the only one) as controller_list shows it. */
static json_t *controller_json_named(struct vs_rpc *rpc, const char *name, struct rpc_error *e)
{
	static struct vs_target_controller_info list[VS_TARGET_MAX_CONTROLLERS];
	unsigned n = vs_target_controller_list(rpc->cfg.target, list, VS_TARGET_MAX_CONTROLLERS);

	for (unsigned i = 0; i < n && i < VS_TARGET_MAX_CONTROLLERS; i++)
		if (!name ? n == 1 : !strcmp(list[i].name, name))
			return controller_json(&list[i]);
	return fail(e, VS_RPC_TARGET_ERROR, ENOENT, "controller %s went away",
		    name ? name : "(the only one)");
}

/* Limits absent are 0 (unlimited): the call sets all of them, of LUN id, or with id "all"
 * of the controller over all its LUNs together (as `target --qos all:LIMITS`).  Every param
 * is checked before the target is asked, and the target checks the set before it changes
 * anything. */
static json_t *m_qos_set(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
			 struct rpc_error *e)
{
	struct vs_target_qos q;
	char err[512] = "", name[32];
	uint64_t id = 0;
	const char *ctrl;
	bool all;
	int rc;

	(void)s;
	if (which_ctrl(rpc, params, &ctrl, e))
		return NULL;
	memset(&q, 0, sizeof(q));
	all = json_is_string(json_object_get(params, "id")) &&
	      !strcmp(json_string_value(json_object_get(params, "id")), "all");
	if (!all && param_uint(params, "id", VS_TARGET_MAX_LUNS - 1, &id, e)) {
		if (json_object_get(params, "id"))
			return fail(e, VS_RPC_INVALID_PARAMS, 0,
				    "param 'id': expected a LUN number in 0..%u or \"all\"",
				    VS_TARGET_MAX_LUNS - 1);
		return NULL;
	}
	for (unsigned d = 0; d < VS_QOS_DIRS; d++)
		for (unsigned k = 0; k < 4; k++) {
			snprintf(name, sizeof(name), "%s%s", qos_prefix[d], qos_kind[k]);
			if (!json_object_get(params, name))
				continue;
			if ((k & 1) ? param_size(params, name, qos_field(&q, d, k), e)
				    : param_uint(params, name, VS_TARGET_QOS_MAX,
						 qos_field(&q, d, k), e))
				return NULL;
			if (*qos_field(&q, d, k) > VS_TARGET_QOS_MAX)
				return fail(e, VS_RPC_INVALID_PARAMS, 0, "param '%s': at most %llu",
					    name, (unsigned long long)VS_TARGET_QOS_MAX);
		}
	if (all) {
		rc = vs_target_controller_qos_set(rpc->cfg.target, ctrl, &q, err, sizeof(err));
		if (rc)
			return target_fail(e, rc, err);
		vs_config_live_changed(rpc->cfg.live);
		return controller_json_named(rpc, ctrl, e);
	}
	rc = vs_target_qos_set(rpc->cfg.target, ctrl, (unsigned)id, &q, err, sizeof(err));
	if (rc)
		return target_fail(e, rc, err);
	vs_config_live_changed(rpc->cfg.live);
	return lun_json(rpc, ctrl, (unsigned)id, e);
}

static json_t *m_lun_list(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
			  struct rpc_error *e)
{
	struct vs_target_lun_info luns[VS_TARGET_MAX_LUNS];
	const char *ctrl;
	unsigned n;
	json_t *list;

	(void)s;
	if (which_ctrl(rpc, params, &ctrl, e))
		return NULL;
	n = vs_target_lun_list(rpc->cfg.target, ctrl, luns, VS_TARGET_MAX_LUNS);
	list = json_array();
	for (unsigned i = 0; list && i < n && i < VS_TARGET_MAX_LUNS; i++)
		json_array_append_new(list, lun_info_json(&luns[i]));
	return list;
}

static json_t *lun_stats_json(const struct vs_target_lun_stats *s)
{
	json_t *keys = json_array();

	for (unsigned k = 0; keys && k < 16; k++)
		json_array_append_new(keys, num(s->sense_keys[k]));
	return json_pack(
	    "{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o,"
	    " s:{s:o, s:o, s:o}, s:{s:o, s:o, s:o}}",
	    "id", (json_int_t)s->id, "reads", num(s->reads), "writes", num(s->writes), "flushes",
	    num(s->flushes), "unmaps", num(s->unmaps), "others", num(s->others), "read_bytes",
	    num(s->read_bytes), "write_bytes", num(s->write_bytes), "sense_keys", keys, "failures",
	    num(s->failures), "in_flight", num(s->in_flight), "throttled", num(s->throttled),
	    "throttled_ns", num(s->throttled_ns), "read_latency_ns", "p50", num(s->read_p50_ns),
	    "p99", num(s->read_p99_ns), "p999", num(s->read_p999_ns), "write_latency_ns", "p50",
	    num(s->write_p50_ns), "p99", num(s->write_p99_ns), "p999", num(s->write_p999_ns));
}

/* An optional boolean named name: 0 (*out false when absent), or -1 with e set. */
static int param_bool(json_t *params, const char *name, bool *out, struct rpc_error *e)
{
	json_t *v = json_object_get(params, name);

	*out = false;
	if (!v)
		return 0;
	if (!json_is_boolean(v)) {
		fail(e, VS_RPC_INVALID_PARAMS, 0, "param '%s': expected true or false", name);
		return -1;
	}
	*out = json_is_true(v);
	return 0;
}

/* interval: this connection's mark, made at its first such request (at most RPC_MAX_MARKS
 * connections hold one: each costs up to 20 KiB per LUN). */
static struct vs_target_stats_mark *session_mark(struct vs_rpc *rpc, struct rpc_session *s,
						 struct rpc_error *e)
{
	if (s->mark)
		return s->mark;
	if (rpc->marks >= RPC_MAX_MARKS) {
		fail(e, VS_RPC_TARGET_ERROR, EBUSY,
		     "%u connections take interval statistics already: close one (a `vioscope rpc "
		     "stats --watch`) or ask without interval",
		     RPC_MAX_MARKS);
		return NULL;
	}
	if (!(s->mark = vs_target_stats_mark_new())) {
		fail(e, VS_RPC_INTERNAL_ERROR, ENOMEM, "out of memory");
		return NULL;
	}
	rpc->marks++;
	return s->mark;
}

void rpc_session_end(struct vs_rpc *rpc, struct rpc_session *s)
{
	if (s->mark) {
		vs_target_stats_mark_free(s->mark);
		rpc->marks--;
	}
	memset(s, 0, sizeof(*s));
}

static json_t *m_stats(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
		       struct rpc_error *e)
{
	struct vs_target_lun_stats luns[VS_TARGET_MAX_LUNS];
	struct vs_target_queue_stats queues[VS_TARGET_MAX_QUEUES];
	struct vs_target *t = rpc->cfg.target;
	struct vs_target_stats_mark *mark = NULL;
	bool interval, over[VS_TARGET_MAX_LUNS];
	struct vs_target_stats st;
	json_t *jl, *jq, *r;
	uint64_t now, since = 0;
	const char *ctrl;
	unsigned nl, nq;

	if (which_ctrl(rpc, params, &ctrl, e) || param_bool(params, "interval", &interval, e) ||
	    (interval && !(mark = session_mark(rpc, s, e))))
		return NULL;
	jl = json_array();
	jq = json_array();
	vs_target_get_stats(t, &st);
	nl = mark ? vs_target_lun_stats_since(t, ctrl, mark, luns, over, VS_TARGET_MAX_LUNS)
		  : vs_target_lun_stats(t, ctrl, luns, VS_TARGET_MAX_LUNS);
	now = vs_mono_ns();
	nq = vs_target_queue_stats(t, ctrl, queues, VS_TARGET_MAX_QUEUES);
	for (unsigned i = 0; jl && i < nl && i < VS_TARGET_MAX_LUNS; i++) {
		json_t *l = lun_stats_json(&luns[i]);

		if (l && mark) /* which latencies are of the interval, which since the add */
			json_object_set_new(l, "latency_over_interval", json_boolean(over[i]));
		json_array_append_new(jl, l);
	}
	for (unsigned i = 0; jq && i < nq && i < VS_TARGET_MAX_QUEUES; i++)
		json_array_append_new(
		    jq, json_pack("{s:I, s:o, s:o, s:o, s:o}", "queue", (json_int_t)queues[i].queue,
				  "requests", num(queues[i].requests), "bytes",
				  num(queues[i].bytes), "in_flight", num(queues[i].in_flight),
				  "notifies", num(queues[i].notifies)));
	r = json_pack("{s:o, s:{s:o, s:o, s:o, s:o, s:o}, s:o, s:o}", "time_ns", num(now), "target",
		      "connections", num(st.connections), "requests", num(st.requests),
		      "bad_requests", num(st.bad_requests), "tmfs", num(st.tmfs), "notifies",
		      num(st.notifies), "luns", jl, "queues", jq);
	if (mark) {
		since = s->mark_ns ? now - s->mark_ns : 0;
		s->mark_ns = now;
		if (r) /* 0: the first look, latency since each LUN was added */
			json_object_set_new(r, "interval_ns", num(since));
	}
	return r;
}

static json_t *controller_json(const struct vs_target_controller_info *c)
{
	return json_pack("{s:o, s:o, s:I, s:I, s:b, s:I, s:o, s:o, s:o, s:o}", "name",
			 text(c->name), "socket", text(c->socket_path), "queues",
			 (json_int_t)c->num_queues, "luns", (json_int_t)c->nluns, "connected",
			 c->connected, "peer_pid", (json_int_t)c->peer_pid, "connections",
			 num(c->connections), "qos", qos_json(&c->qos), "throttled",
			 num(c->throttled), "throttled_ns", num(c->throttled_ns));
}

static json_t *m_controller_list(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
				 struct rpc_error *e)
{
	static struct vs_target_controller_info list[VS_TARGET_MAX_CONTROLLERS];
	unsigned n = vs_target_controller_list(rpc->cfg.target, list, VS_TARGET_MAX_CONTROLLERS);
	json_t *j = json_array();

	(void)s;
	(void)params;
	(void)e;
	for (unsigned i = 0; j && i < n && i < VS_TARGET_MAX_CONTROLLERS; i++)
		json_array_append_new(j, controller_json(&list[i]));
	return j;
}

/* controller_add's "luns": [{"id": N, "spec": "BACKEND", "qos": "LIMITS"}, ...], each
 * checked as lun_add checks it before anything is made. */
static int param_luns(json_t *params, struct vs_target_lun *luns, struct vs_target_qos *qos,
		      unsigned *n, struct rpc_error *e)
{
	json_t *list = json_object_get(params, "luns"), *l;
	size_t i;

	if (!json_is_array(list) || !json_array_size(list) ||
	    json_array_size(list) > VS_TARGET_MAX_LUNS) {
		fail(e, VS_RPC_INVALID_PARAMS, 0,
		     "param 'luns': expected 1..%u LUNs [{\"id\": N, \"spec\": \"BACKEND\"}, ...]",
		     VS_TARGET_MAX_LUNS);
		return -1;
	}
	*n = 0;
	json_array_foreach(list, i, l)
	{
		const char *key, *q = NULL;
		uint64_t id;
		json_t *v;

		if (!json_is_object(l)) {
			fail(e, VS_RPC_INVALID_PARAMS, 0, "param 'luns[%zu]': expected an object",
			     i);
			return -1;
		}
		json_object_foreach(l, key, v)
		{
			if (strcmp(key, "id") && strcmp(key, "spec") && strcmp(key, "qos")) {
				fail(e, VS_RPC_INVALID_PARAMS, 0,
				     "param 'luns[%zu]': no member '%.32s' (a LUN has id, spec, "
				     "qos)",
				     i, key);
				return -1;
			}
		}
		luns[i] = (struct vs_target_lun){.id = 0};
		if (param_uint(l, "id", VS_TARGET_MAX_LUNS - 1, &id, e) ||
		    param_str(l, "spec", &luns[i].spec, e) ||
		    (json_object_get(l, "qos") && param_str(l, "qos", &q, e))) {
			char msg[sizeof(e->msg)];

			snprintf(msg, sizeof(msg), "%s", e->msg);
			fail(e, e->code, e->errnum, "luns[%zu]: %s", i, msg);
			return -1;
		}
		luns[i].id = (unsigned)id;
		for (size_t k = 0; k < i; k++)
			if (luns[k].id == luns[i].id) {
				fail(e, VS_RPC_INVALID_PARAMS, 0,
				     "param 'luns': LUN %u given twice", luns[i].id);
				return -1;
			}
		if (q) {
			char why[256];

			if (vs_target_qos_parse(q, &qos[i], why, sizeof(why))) {
				fail(e, VS_RPC_INVALID_PARAMS, 0, "param 'luns[%zu].qos': %s", i,
				     why);
				return -1;
			}
			luns[i].qos = &qos[i];
		}
		(*n)++;
	}
	return 0;
}

static json_t *m_controller_add(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
				struct rpc_error *e)
{
	static struct vs_target_lun luns[VS_TARGET_MAX_LUNS];
	static struct vs_target_qos qos[VS_TARGET_MAX_LUNS];
	static struct vs_target_controller_info list[VS_TARGET_MAX_CONTROLLERS];
	struct vs_target_controller cc = {.num_queues = 1, .luns = luns};
	struct vs_target_qos all;
	const char *limits = NULL;
	char err[512] = "";
	uint64_t queues = 1;
	unsigned n;
	int rc;

	(void)s;
	if (param_str(params, "name", &cc.name, e) ||
	    param_str(params, "socket", &cc.socket_path, e) ||
	    (json_object_get(params, "queues") &&
	     param_uint(params, "queues", VS_TARGET_MAX_QUEUES, &queues, e)))
		return NULL;
	if (!queues)
		return fail(e, VS_RPC_INVALID_PARAMS, 0, "param 'queues': 1..%u",
			    VS_TARGET_MAX_QUEUES);
	if (strlen(cc.socket_path) >= sizeof(list[0].socket_path))
		return fail(e, VS_RPC_INVALID_PARAMS, 0, "param 'socket': at most %zu bytes",
			    sizeof(list[0].socket_path) - 1);
	cc.num_queues = (unsigned)queues;
	if (json_object_get(params, "qos")) {
		if (param_str(params, "qos", &limits, e))
			return NULL;
		if (vs_target_qos_parse(limits, &all, err, sizeof(err)))
			return fail(e, VS_RPC_INVALID_PARAMS, 0, "param 'qos': %s", err);
		cc.qos = &all;
	}
	if (param_luns(params, luns, qos, &cc.nluns, e))
		return NULL;
	rc = vs_target_controller_add(rpc->cfg.target, &cc, err, sizeof(err));
	if (rc)
		return target_fail(e, rc, err);
	vs_config_live_changed(rpc->cfg.live);
	n = vs_target_controller_list(rpc->cfg.target, list, VS_TARGET_MAX_CONTROLLERS);
	for (unsigned i = 0; i < n && i < VS_TARGET_MAX_CONTROLLERS; i++)
		if (!strcmp(list[i].name, cc.name))
			return controller_json(&list[i]);
	return fail(e, VS_RPC_TARGET_ERROR, ENOENT, "controller %s went away", cc.name);
}

static json_t *m_controller_remove(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
				   struct rpc_error *e)
{
	const char *name;
	char err[512] = "";
	int rc;

	(void)s;
	if (param_str(params, "name", &name, e))
		return NULL;
	rc = vs_target_controller_remove(rpc->cfg.target, name, err, sizeof(err));
	if (rc == -ENOENT || rc == -EBUSY || rc == -EINVAL)
		return target_fail(e, rc, err);
	vs_config_live_changed(rpc->cfg.live); /* removed, even when its flush failed */
	if (rc)
		return target_fail(e, rc, err);
	return json_pack("{s:s}", "name", name);
}

static json_t *m_trace_set(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
			   struct rpc_error *e)
{
	const char *spec;
	char why[400];

	(void)s;
	if (param_str(params, "spec", &spec, e))
		return NULL;
	/* Through the live configuration, when there is one: save_config then writes it. */
	if ((rpc->cfg.live ? vs_config_live_trace(rpc->cfg.live, spec, why, sizeof(why))
			   : vs_trace_set_spec_why(spec, why, sizeof(why))) < 0)
		return fail(e, VS_RPC_INVALID_PARAMS, 0, "param 'spec': '%.64s': %s", spec, why);
	vs_config_live_changed(rpc->cfg.live);
	return json_pack("{s:s}", "spec", spec);
}

static json_t *m_save_config(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
			     struct rpc_error *e)
{
	const char *name = NULL, *written = NULL;
	char err[1024] = "";
	int rc;

	(void)s;
	if (json_object_get(params, "path") && param_str(params, "path", &name, e))
		return NULL;
	if (!rpc->cfg.live)
		return fail(e, VS_RPC_TARGET_ERROR, ENOTSUP,
			    "the target was started without --config: there is no configuration "
			    "file to save to");
	rc = vs_config_live_save(rpc->cfg.live, name, &written, err, sizeof(err));
	if (rc == -EINVAL)
		return fail(e, VS_RPC_INVALID_PARAMS, 0, "param 'path': %s", err);
	if (rc)
		return target_fail(e, rc, err);
	return json_pack("{s:o}", "path", text(written));
}

static json_t *m_shutdown(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
			  struct rpc_error *e)
{
	(void)s;
	(void)params;
	if (!rpc->cfg.shutdown)
		return fail(e, VS_RPC_TARGET_ERROR, ENOTSUP, "this server cannot shut down");
	rpc->cfg.shutdown(rpc->cfg.arg); /* the reply still goes out: vs_rpc_stop flushes */
	return json_true();
}

struct method {
	const char *name;
	json_t *(*fn)(struct vs_rpc *rpc, struct rpc_session *s, json_t *params,
		      struct rpc_error *e);
	const char *params[16]; /* the names it takes (NULL-terminated) */
};

static const struct method methods[] = {
    {"controller_add", m_controller_add, {"name", "socket", "queues", "luns", "qos", NULL}},
    {"controller_remove", m_controller_remove, {"name", NULL}},
    {"controller_list", m_controller_list, {NULL}},
    {"lun_add", m_lun_add, {"controller", "id", "spec", NULL}},
    {"lun_remove", m_lun_remove, {"controller", "id", NULL}},
    {"lun_resize", m_lun_resize, {"controller", "id", "size", NULL}},
    {"lun_list", m_lun_list, {"controller", NULL}},
    {"qos_set",
     m_qos_set,
     {"controller", "id", "iops", "read_iops", "write_iops", "bps", "read_bps", "write_bps",
      "burst_iops", "read_burst_iops", "write_burst_iops", "burst_bps", "read_burst_bps",
      "write_burst_bps", NULL}},
    {"stats", m_stats, {"controller", "interval", NULL}},
    {"trace_set", m_trace_set, {"spec", NULL}},
    {"save_config", m_save_config, {"path", NULL}},
    {"shutdown", m_shutdown, {NULL}},
};

static const struct method *find_method(const char *name)
{
	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (!strcmp(methods[i].name, name))
			return &methods[i];
	return NULL;
}

/* Every param is one the method takes (a misspelt name is an error, not a default). */
static int check_param_names(const struct method *m, json_t *params, struct rpc_error *e)
{
	const char *key;
	json_t *v;

	json_object_foreach(params, key, v)
	{
		bool known = false;

		for (unsigned i = 0; m->params[i] && !known; i++)
			known = !strcmp(m->params[i], key);
		if (!known) {
			fail(e, VS_RPC_INVALID_PARAMS, 0, "%s takes no param '%s'", m->name, key);
			return -1;
		}
	}
	return 0;
}

/* ---- requests -------------------------------------------------------------------------- */

static json_t *error_json(const struct rpc_error *e)
{
	json_t *err = json_pack("{s:i, s:o}", "code", e->code, "message", text(e->msg));
	const char *name = e->errnum ? strerrorname_np(e->errnum) : NULL;

	if (err && name)
		json_object_set_new(err, "data", json_pack("{s:s}", "errno", name));
	return err;
}

static json_t *response(json_t *id, json_t *result, const struct rpc_error *e)
{
	json_t *r = json_pack("{s:s}", "jsonrpc", "2.0");

	if (!r) {
		json_decref(result);
		return NULL;
	}
	if (e->code)
		json_object_set_new(r, "error", error_json(e));
	else
		json_object_set_new(r, "result", result);
	json_object_set(r, "id", id ? id : json_null());
	return r;
}

/* One request object: its response, or NULL for a notification (a well-formed request
 * without an id), answered with nothing as JSON-RPC 2.0 says. */
static json_t *handle_one(struct vs_rpc *rpc, struct rpc_session *s, json_t *req)
{
	struct rpc_error e = {0};
	const struct method *m;
	json_t *id = NULL, *v, *params, *result = NULL;
	bool notification = false;

	if (!json_is_object(req)) {
		fail(&e, VS_RPC_INVALID_REQUEST, 0, "a request must be a JSON object");
		goto reply;
	}
	id = json_object_get(req, "id");
	if (id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id)) {
		id = NULL;
		fail(&e, VS_RPC_INVALID_REQUEST, 0, "'id' must be a string, an integer or null");
		goto reply;
	}
	v = json_object_get(req, "jsonrpc");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0")) {
		fail(&e, VS_RPC_INVALID_REQUEST, 0, "'jsonrpc' must be \"2.0\"");
		goto reply;
	}
	v = json_object_get(req, "method");
	if (!json_is_string(v)) {
		fail(&e, VS_RPC_INVALID_REQUEST, 0, "'method' must be a string");
		goto reply;
	}
	notification = !id;
	m = find_method(json_string_value(v));
	if (!m) {
		fail(&e, VS_RPC_METHOD_NOT_FOUND, 0,
		     "method '%s' not found (controller_add, controller_remove, controller_list, "
		     "lun_add, lun_remove, lun_resize, lun_list, qos_set, stats, trace_set, "
		     "save_config, shutdown)",
		     json_string_value(v));
		goto reply;
	}
	params = json_object_get(req, "params");
	if (params && !json_is_object(params)) {
		fail(&e, VS_RPC_INVALID_PARAMS, 0, "params must be an object (by name)");
		goto reply;
	}
	if (!params)
		params = json_object();
	else
		json_incref(params);
	if (params && check_param_names(m, params, &e) == 0) {
		result = m->fn(rpc, s, params, &e);
		if (!result && !e.code)
			fail(&e, VS_RPC_INTERNAL_ERROR, ENOMEM, "out of memory");
	}
	json_decref(params);
reply:
	if (notification) {
		json_decref(result);
		return NULL;
	}
	return response(id, result, &e);
}

static char *dump(json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL; /* compact: never a newline */

	json_decref(j);
	return s;
}

/* ---- bounds ---------------------------------------------------------------------------- */

/* The most bytes an error response to req can take: a message of at most 512 bytes, and
 * req's id echoed, escaped. */
static size_t error_bound(json_t *req)
{
	json_t *id = json_object_get(req, "id");

	return 4096 + (json_is_string(id) ? 6 * json_string_length(id) : 0);
}

/* What the target holds now, as reply_bound counts it: the most LUNs and queues any of its
 * controllers has (a request is about one of them), and how many controllers. */
struct rpc_sizes {
	unsigned luns, queues, controllers;
};

static struct rpc_sizes sizes_now(struct vs_rpc *rpc)
{
	static struct vs_target_controller_info list[VS_TARGET_MAX_CONTROLLERS];
	struct rpc_sizes n = {0, 0, 0};

	n.controllers = vs_target_controller_list(rpc->cfg.target, list, VS_TARGET_MAX_CONTROLLERS);
	for (unsigned i = 0; i < n.controllers && i < VS_TARGET_MAX_CONTROLLERS; i++) {
		n.luns = list[i].nluns > n.luns ? list[i].nluns : n.luns;
		n.queues = list[i].num_queues > n.queues ? list[i].num_queues : n.queues;
	}
	return n;
}

/* The most bytes req's response can take, from what the target holds now: a stats answer
 * grows with the LUNs (under 1 KiB each) and queues, a lun_list one with the LUNs (each
 * spec up to 255 bytes, 6 each once escaped); anything else fits an error's bound. */
static size_t reply_bound(json_t *req, struct rpc_sizes n)
{
	const char *method = json_string_value(json_object_get(req, "method"));
	size_t bound = error_bound(req);

	if (!method)
		return bound;
	if (!strcmp(method, "stats"))
		bound += (size_t)n.luns * 1536 + (size_t)n.queues * 256;
	else if (!strcmp(method, "lun_list"))
		bound += (size_t)n.luns * 2560;
	else if (!strcmp(method, "lun_add") || !strcmp(method, "lun_resize") ||
		 !strcmp(method, "qos_set"))
		bound += 2560;
	else if (!strcmp(method, "save_config"))
		bound += 6 * 4096; /* the path written, escaped */
	else if (!strcmp(method, "controller_list") || !strcmp(method, "controller_add"))
		bound += (size_t)(n.controllers + 1) * 1024; /* names, socket paths escaped */
	return bound;
}

static char *refuse_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *refuse_line(const char *fmt, ...)
{
	struct rpc_error e = {.code = VS_RPC_INVALID_REQUEST};
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e.msg, sizeof(e.msg), fmt, ap);
	va_end(ap);
	return dump(response(NULL, NULL, &e));
}

/* ---- request lines --------------------------------------------------------------------- */

struct rpc_line {
	struct rpc_session *session; /* of the connection that sent it */
	json_t *req;		     /* one request, or a batch: an array of them */
	size_t next;		     /* a batch: the request to answer next */
	json_t *out;		     /* a batch: the responses so far */
	size_t budget;		     /* a batch: reply bytes left (VS_RPC_MAX_REPLY at the start) */
};

struct rpc_line *rpc_line_start(struct vs_rpc *rpc, struct rpc_session *session, const char *text,
				size_t len, char **reply)
{
	struct rpc_error e = {0};
	struct rpc_line *l;
	json_error_t jerr;
	json_t *req = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	struct rpc_sizes now = {0, 0, 0};
	size_t i, bound = 0;
	json_t *r;

	*reply = NULL;
	if (!req) {
		fail(&e, VS_RPC_PARSE_ERROR, 0, "parse error: %s (column %d)", jerr.text,
		     jerr.column);
		*reply = dump(response(NULL, NULL, &e));
		return NULL;
	}
	if (json_is_array(req) && !json_array_size(req)) {
		json_decref(req);
		*reply = refuse_line("an empty batch");
		return NULL;
	}
	/* A batch is answered a request at a time, between other clients' requests; what its
	 * replies may take is bounded before any of it runs. */
	if (json_is_array(req))
		now = sizes_now(rpc);
	json_array_foreach(req, i, r)
	{
		bound += reply_bound(r, now);
		if (bound > VS_RPC_MAX_REPLY) {
			*reply = refuse_line(
			    "a batch of %zu requests whose replies could take more than %u bytes "
			    "(stats: 1.5 KiB a LUN, lun_list: 2.5 KiB a LUN, others 4 KiB): "
			    "nothing of it was run; send fewer requests a line",
			    json_array_size(req), VS_RPC_MAX_REPLY);
			json_decref(req);
			return NULL;
		}
	}
	l = calloc(1, sizeof(*l));
	if (!l || (json_is_array(req) && !(l->out = json_array()))) {
		free(l);
		json_decref(req);
		fail(&e, VS_RPC_INTERNAL_ERROR, ENOMEM, "out of memory");
		*reply = dump(response(NULL, NULL, &e));
		return NULL;
	}
	l->session = session;
	l->req = req;
	l->budget = VS_RPC_MAX_REPLY;
	return l;
}

bool rpc_line_step(struct vs_rpc *rpc, struct rpc_line *l, char **reply)
{
	json_t *r, *one;
	size_t bound;

	*reply = NULL;
	if (!json_is_array(l->req)) {
		*reply = dump(handle_one(rpc, l->session, l->req));
		rpc_line_free(l);
		return true;
	}
	r = json_array_get(l->req, l->next++);
	/* LUNs added since the line was checked must not make it pass its bound: past it, a
	 * request is answered with an error (whose bound the check counted) instead. */
	bound = reply_bound(r, sizes_now(rpc));
	if (bound > l->budget) {
		json_t *id = json_object_get(r, "id");
		struct rpc_error e = {0};

		fail(&e, VS_RPC_INVALID_REQUEST, 0,
		     "not run: the batch's replies would pass %u bytes", VS_RPC_MAX_REPLY);
		if (!json_is_string(id) && !json_is_integer(id))
			id = NULL;
		one =
		    json_is_object(r) && !json_object_get(r, "id") ? NULL : response(id, NULL, &e);
		bound = error_bound(r);
	} else {
		one = handle_one(rpc, l->session, r);
	}
	l->budget -= bound < l->budget ? bound : l->budget;
	if (one)
		json_array_append_new(l->out, one);
	if (l->next < json_array_size(l->req))
		return false;
	if (json_array_size(l->out))
		*reply = dump(json_incref(l->out));
	rpc_line_free(l);
	return true;
}

void rpc_line_free(struct rpc_line *l)
{
	if (!l)
		return;
	json_decref(l->req);
	json_decref(l->out);
	free(l);
}

char *vs_rpc_handle(struct vs_rpc *rpc, const char *line, size_t len)
{
	char *reply;
	struct rpc_line *l = rpc_line_start(rpc, &rpc->own, line, len, &reply);

	while (l && !rpc_line_step(rpc, l, &reply))
		;
	return reply;
}
