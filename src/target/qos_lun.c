/* SPDX-License-Identifier: MIT */
/*
 * A LUN's and a controller's QoS limits as the target's users see them (struct
 * vs_target_qos: the option's syntax, the RPC, the lists) and their life with the LUN or
 * controller: set with it, changed by vs_target_qos_set or vs_target_controller_qos_set, a
 * LUN's reset when it is removed.  The buckets are qos.c's; the parking of
 * what they refuse is request.c's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "target/target_int.h"

static void to_limits(const struct vs_target_qos *q, struct qos_limits *l)
{
	memset(l, 0, sizeof(*l));
	for (unsigned d = 0; d < QOS_DIRS; d++) {
		l->rate[QOS_IOPS * QOS_DIRS + d] = q->iops[d];
		l->rate[QOS_BPS * QOS_DIRS + d] = q->bps[d];
		l->burst[QOS_IOPS * QOS_DIRS + d] = q->burst_iops[d];
		l->burst[QOS_BPS * QOS_DIRS + d] = q->burst_bps[d];
	}
}

static void from_limits(const struct qos_limits *l, struct vs_target_qos *q)
{
	for (unsigned d = 0; d < QOS_DIRS; d++) {
		q->iops[d] = l->rate[QOS_IOPS * QOS_DIRS + d];
		q->bps[d] = l->rate[QOS_BPS * QOS_DIRS + d];
		q->burst_iops[d] = l->burst[QOS_IOPS * QOS_DIRS + d];
		q->burst_bps[d] = l->burst[QOS_BPS * QOS_DIRS + d];
	}
}

/* The option's names, in vs_target_qos order: "" (total), "read_", "write_" prefixes. */
static const char *const prefix[VS_QOS_DIRS] = {"read_", "write_", ""};

static uint64_t *field(struct vs_target_qos *q, const char *name, size_t len, bool *bytes)
{
	static const char *const kinds[] = {"iops", "bps", "burst_iops", "burst_bps"};

	for (unsigned d = 0; d < VS_QOS_DIRS; d++) {
		size_t pl = strlen(prefix[d]);

		if (len < pl || strncmp(name, prefix[d], pl))
			continue;
		for (unsigned k = 0; k < 4; k++) {
			if (len - pl != strlen(kinds[k]) || strncmp(name + pl, kinds[k], len - pl))
				continue;
			*bytes = k & 1;
			return k == 0	? &q->iops[d]
			       : k == 1 ? &q->bps[d]
			       : k == 2 ? &q->burst_iops[d]
					: &q->burst_bps[d];
		}
	}
	return NULL;
}

int vs_target_qos_parse(const char *spec, struct vs_target_qos *q, char *why, size_t whylen)
{
	struct qos_limits l;
	const char *p = spec;
	char cause[128];

	memset(q, 0, sizeof(*q));
	if (!spec || !strcmp(spec, "none"))
		return 0;
	while (*p) {
		const char *end = strchr(p, ','), *eq;
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char val[32];
		uint64_t *f, v;
		bool bytes;

		eq = memchr(p, '=', len);
		if (!eq || !(f = field(q, p, (size_t)(eq - p), &bytes)))
			return vs_fail(why, whylen, -EINVAL,
				       "QoS '%.*s': expected [read_|write_][burst_]iops=N or "
				       "[read_|write_][burst_]bps=SIZE",
				       (int)(len > 64 ? 64 : len), p);
		if (len - (size_t)(eq + 1 - p) >= sizeof(val))
			return vs_fail(why, whylen, -EINVAL, "QoS '%.*s': value too long",
				       (int)(len > 64 ? 64 : len), p);
		memcpy(val, eq + 1, len - (size_t)(eq + 1 - p));
		val[len - (size_t)(eq + 1 - p)] = 0;
		if (bytes ? vs_parse_size(val, &v) : vs_parse_u64(val, 0, UINT64_MAX, &v))
			return vs_fail(why, whylen, -EINVAL, "QoS '%.*s': '%s' is not %s",
				       (int)(eq - p), p, val,
				       bytes ? "a size (bytes, or with a K, M, G or T suffix)"
					     : "a whole number");
		*f = v;
		p = end ? end + 1 : p + len;
	}
	to_limits(q, &l);
	if (qos_limits_check(&l, cause, sizeof(cause)))
		return vs_fail(why, whylen, -EINVAL, "QoS '%s': %s", spec, cause);
	return 0;
}

void vs_target_qos_format(const struct vs_target_qos *q, char *buf, size_t len)
{
	size_t n = 0;

	if (len)
		*buf = 0;
	for (unsigned d = 0; d < VS_QOS_DIRS; d++) {
		const uint64_t v[4] = {q->iops[d], q->bps[d], q->burst_iops[d], q->burst_bps[d]};
		static const char *const kinds[] = {"iops", "bps", "burst_iops", "burst_bps"};

		for (unsigned k = 0; k < 4; k++)
			if (v[k] && n < len)
				n +=
				    (size_t)snprintf(buf + n, len - n, "%s%s%s=%llu", n ? "," : "",
						     prefix[d], kinds[k], (unsigned long long)v[k]);
	}
	if (!n && len)
		snprintf(buf, len, "none");
}

/* What is wrong with q's limits (cause), or 0 when nothing is (or there are none). */
static int limits_wrong(const struct vs_target_qos *q, char *cause, size_t len)
{
	struct qos_limits l;

	if (!q)
		return 0;
	to_limits(q, &l);
	return qos_limits_check(&l, cause, len);
}

int tq_qos_check(const struct vs_target_qos *q, unsigned id, char *why, size_t whylen)
{
	char cause[128];

	if (limits_wrong(q, cause, sizeof(cause)))
		return tq_err(why, whylen, -EINVAL, "LUN %u: QoS: %s", id, cause);
	return 0;
}

int tq_ctrl_qos_check(const struct vs_target_qos *q, const char *name, char *why, size_t whylen)
{
	char cause[128];

	if (limits_wrong(q, cause, sizeof(cause)))
		return tq_err(why, whylen, -EINVAL, "controller %s: QoS: %s", name, cause);
	return 0;
}

void tq_qos_apply(struct vs_controller *c, unsigned id, const struct vs_target_qos *q)
{
	tq_qos_apply_set(c, &c->qos[id], q);
}

void tq_qos_apply_set(struct vs_controller *c, struct qos_set *s, const struct vs_target_qos *q)
{
	struct qos_limits l;

	if (q)
		to_limits(q, &l);
	else
		memset(&l, 0, sizeof(l));
	qos_set_limits(s, &l, vs_mono_ns());
	/* requests parked under the old limits are looked at under the new ones */
	worker_park_check(c->t);
}

void tq_qos_reset(struct vs_controller *c, unsigned id)
{
	tq_qos_apply(c, id, NULL);
	__atomic_store_n(&c->qos[id].throttled, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&c->qos[id].throttled_ns, 0, __ATOMIC_RELAXED);
}

void tq_qos_info(struct vs_controller *c, unsigned id, struct vs_target_qos *q)
{
	struct qos_limits l;

	qos_get_limits(&c->qos[id], &l);
	from_limits(&l, q);
}

void tq_ctrl_qos_info(struct vs_controller *c, struct vs_target_qos *q)
{
	struct qos_limits l;

	qos_get_limits(&c->qos_all, &l);
	from_limits(&l, q);
}

int tq_ctrl_qos_set(struct vs_controller *c, const struct vs_target_qos *q, char *why,
		    size_t whylen)
{
	char s[256];
	int rc;

	if (why && whylen)
		*why = 0;
	if (!q)
		return tq_err(why, whylen, -EINVAL, "no limits given");
	if ((rc = tq_ctrl_qos_check(q, c->name, why, whylen)))
		return rc;
	tq_qos_apply_set(c, &c->qos_all, q);
	vs_target_qos_format(q, s, sizeof(s));
	VS_INFO(EVENT, "controller %s: QoS over all its LUNs %s", c->name, s);
	return 0;
}

int tq_qos_set(struct vs_controller *c, unsigned id, const struct vs_target_qos *q, char *why,
	       size_t whylen)
{
	int rc;

	if (why && whylen)
		*why = 0;
	if (!q)
		return tq_err(why, whylen, -EINVAL, "no limits given");
	if (id >= VS_TARGET_MAX_LUNS)
		return tq_err(why, whylen, -ENOENT, "no LUN %u", id);
	if ((rc = tq_qos_check(q, id, why, whylen)))
		return rc;
	/* Under luns_lock: a LUN removed meanwhile is reset after (lun_retire), never before. */
	pthread_mutex_lock(&c->luns_lock);
	if (c->lun_state[id] != TQ_LUN_PRESENT && c->lun_state[id] != TQ_LUN_RESIZING)
		rc = tq_err(why, whylen, -ENOENT, "no LUN %u", id);
	else
		tq_qos_apply(c, id, q);
	pthread_mutex_unlock(&c->luns_lock);
	if (!rc) {
		char s[256];

		vs_target_qos_format(q, s, sizeof(s));
		VS_INFO(EVENT, "LUN %u: QoS %s", id, s);
	}
	return rc;
}
