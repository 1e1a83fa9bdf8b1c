/* SPDX-License-Identifier: MIT */
/*
 * The configuration file: JSON text to struct vs_config, checked whole (config.h), and
 * back.  jansson parses; it keeps no positions of values, so an error found after parsing
 * is located by walking the text again to the value's JSON path (find_pos), members
 * addressed by their order, which jansson keeps (duplicate keys are refused at parse).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "rpc/config.h"
#include "util/util.h"

#define MAX_DEPTH 6

struct step {
	size_t index;	 /* of the member or element, in the text's order */
	const char *key; /* a member's name; NULL: an array element */
};

struct ctx {
	const char *text;
	size_t len;
	const char *name;
	char *err;
	size_t errlen;
	struct step path[MAX_DEPTH];
	unsigned depth;
};

/* ---- where a value is in the text ----------------------------------------------------- */

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

static const char *skip_string(const char *p, const char *end)
{
	for (p++; p < end && *p != '"'; p++)
		if (*p == '\\')
			p++;
	return p < end ? p + 1 : end;
}

/* Past the value at p (the text is valid JSON: jansson parsed it). */
static const char *skip_value(const char *p, const char *end)
{
	unsigned nest = 0;

	do {
		p = skip_ws(p, end);
		if (p >= end)
			return end;
		if (*p == '"')
			p = skip_string(p, end);
		else if (*p == '{' || *p == '[')
			nest++, p++;
		else if (*p == '}' || *p == ']')
			nest--, p++;
		else if (*p == ',' || *p == ':')
			p++;
		else
			while (p < end && !strchr(" \t\r\n,:]}", *p))
				p++;
	} while (nest && p < end);
	return p;
}

/* The position of the value at path[0..depth) (of a member: its key), or the start. */
static const char *find_pos(const struct ctx *x, unsigned depth)
{
	const char *p = x->text, *end = x->text + x->len;

	p = skip_ws(p, end);
	for (unsigned d = 0; d < depth && p < end; d++) {
		bool object = *p == '{';

		p = skip_ws(p + 1, end);
		for (size_t i = 0; i < x->path[d].index && p < end; i++) {
			if (object) {
				p = skip_string(p, end);
				p = skip_ws(p, end);
				p++; /* ':' */
			}
			p = skip_value(p, end);
			p = skip_ws(p, end);
			p = skip_ws(p + 1, end); /* ',' */
		}
		if (d + 1 == depth)
			return p;
		if (object) {
			p = skip_ws(skip_string(p, end), end);
			p = skip_ws(p + 1, end);
		}
	}
	return p;
}

static int bad_at(struct ctx *x, unsigned depth, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad_at(struct ctx *x, unsigned depth, const char *fmt, ...)
{
	const char *pos = find_pos(x, depth);
	char where[256] = "", what[512];
	unsigned line = 1, col = 1;
	size_t w = 0;
	va_list ap;

	for (const char *p = x->text; p < pos; p++, col++)
		if (*p == '\n')
			line++, col = 0;
	for (unsigned d = 0; d < depth && w < sizeof(where); d++) {
		const struct step *s = &x->path[d];

		if (s->key)
			w += (size_t)snprintf(where + w, sizeof(where) - w, "%s%s", d ? "." : "",
					      s->key);
		else
			w += (size_t)snprintf(where + w, sizeof(where) - w, "[%zu]", s->index);
	}
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(x->err, x->errlen, "%s:%u:%u: %s%s%s", x->name, line, col, where,
		 depth ? ": " : "", what);
	return -EINVAL;
}

/* The value at the current path is wrong. */
#define bad(x, ...) bad_at(x, (x)->depth, __VA_ARGS__)

/* ---- values ---------------------------------------------------------------------------- */

static int get_uint(struct ctx *x, json_t *v, uint64_t min, uint64_t max, unsigned *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)min ||
	    (uint64_t)json_integer_value(v) > max)
		return bad(x, "expected a whole number in %llu..%llu", (unsigned long long)min,
			   (unsigned long long)max);
	*out = (unsigned)json_integer_value(v);
	return 0;
}

static int get_bool(struct ctx *x, json_t *v, bool *out)
{
	if (!json_is_boolean(v))
		return bad(x, "expected true or false");
	*out = json_is_true(v);
	return 0;
}

/* A non-empty string without NUL that fits size bytes. */
static int get_str(struct ctx *x, json_t *v, char *out, size_t size)
{
	if (!json_is_string(v) || !json_string_length(v))
		return bad(x, "expected a non-empty string");
	if (strlen(json_string_value(v)) != json_string_length(v))
		return bad(x, "the string holds a NUL");
	if (json_string_length(v) >= size)
		return bad(x, "longer than %zu bytes", size - 1);
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

static int get_allow(struct ctx *x, json_t *v, struct vs_config *c)
{
	size_t i;
	json_t *u;

	if (!json_is_array(v) || !json_array_size(v))
		return bad(x, "expected a non-empty array of user names or uids");
	if (json_array_size(v) > VS_RPC_MAX_ALLOW)
		return bad(x, "at most %u users", VS_RPC_MAX_ALLOW);
	json_array_foreach(v, i, u)
	{
		struct passwd pw, *found = NULL;
		char buf[4096];
		int rc = 0;

		x->path[x->depth++] = (struct step){i, NULL};
		if (json_is_integer(u)) {
			unsigned uid;

			if (!(rc = get_uint(x, u, 0, UINT32_MAX - 1, &uid))) {
				c->allow_uids[i] = uid;
				snprintf(c->allow[i], sizeof(c->allow[i]), "%u", uid);
			}
		} else if (!(rc = get_str(x, u, c->allow[i], sizeof(c->allow[i])))) {
			if (getpwnam_r(c->allow[i], &pw, buf, sizeof(buf), &found) || !found)
				rc = bad(x, "no user '%s'", c->allow[i]);
			else
				c->allow_uids[i] = (uint32_t)found->pw_uid;
		}
		x->depth--;
		if (rc)
			return rc;
	}
	c->nallow = (unsigned)json_array_size(v);
	return 0;
}

/* ---- objects --------------------------------------------------------------------------- */

/* Where each LUN's spec is, for the checks made once the target-wide settings are known. */
struct spec_at {
	struct step path[5];
};

/* A LUN's QoS limits: a string as `--qos N:LIMITS` takes them ("iops=500,burst_iops=50"). */
static int get_qos(struct ctx *x, json_t *v, struct vs_target_qos *q)
{
	char text[VS_CONFIG_MAX_SPEC], why[256];
	int rc = get_str(x, v, text, sizeof(text));

	if (!rc && vs_target_qos_parse(text, q, why, sizeof(why)))
		rc = bad(x, "%s", why);
	return rc;
}

static int parse_lun(struct ctx *x, json_t *o, struct vs_config_ctrl *c, struct spec_at *at)
{
	struct vs_config_lun *l = &c->luns[c->nluns];
	bool has_id = false, has_spec = false;
	const char *key;
	size_t i = 0;
	json_t *v;
	int rc = 0;

	if (!json_is_object(o))
		return bad(x, "expected an object {\"id\": N, \"spec\": \"BACKEND\"}");
	json_object_foreach(o, key, v)
	{
		x->path[x->depth++] = (struct step){i++, key};
		if (!strcmp(key, "id")) {
			has_id = !(rc = get_uint(x, v, 0, VS_TARGET_MAX_LUNS - 1, &l->id));
			for (unsigned k = 0; has_id && k < c->nluns; k++)
				if (c->luns[k].id == l->id)
					rc = bad(x, "LUN %u given twice", l->id);
		} else if (!strcmp(key, "spec")) {
			has_spec = !(rc = get_str(x, v, l->spec, sizeof(l->spec)));
			memcpy(at->path, x->path, sizeof(at->path));
		} else if (!strcmp(key, "qos")) {
			rc = get_qos(x, v, &l->qos);
		} else {
			rc = bad(x, "unknown key '%s' (a LUN has id, spec and qos)", key);
		}
		x->depth--;
		if (rc)
			return rc;
	}
	if (!has_id || !has_spec)
		return bad(x, "a LUN needs %s", has_id ? "a spec" : "an id");
	c->nluns++;
	return 0;
}

static bool name_ok(const char *s)
{
	for (; *s; s++)
		if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z') &&
		    !(*s >= '0' && *s <= '9') && !strchr("-_.", *s))
			return false;
	return true;
}

static int parse_controller(struct ctx *x, json_t *o, struct vs_config_ctrl *c, struct spec_at *at)
{
	bool has_luns = false;
	const char *key;
	size_t i = 0, j;
	json_t *v, *l;
	int rc = 0;

	if (!json_is_object(o))
		return bad(x, "expected an object {\"name\", \"socket\", \"queues\", \"qos\", "
			      "\"luns\"}");
	json_object_foreach(o, key, v)
	{
		x->path[x->depth++] = (struct step){i++, key};
		if (!strcmp(key, "name")) {
			if (!(rc = get_str(x, v, c->name, sizeof(c->name))) && !name_ok(c->name))
				rc = bad(x, "'%s': a name is letters, digits, '-', '_' and '.'",
					 c->name);
		} else if (!strcmp(key, "socket")) {
			rc = get_str(x, v, c->socket, sizeof(c->socket));
		} else if (!strcmp(key, "queues")) {
			rc = get_uint(x, v, 1, VS_TARGET_MAX_QUEUES, &c->queues);
		} else if (!strcmp(key, "qos")) {
			rc = get_qos(x, v, &c->qos);
		} else if (!strcmp(key, "luns")) {
			has_luns = true;
			if (!json_is_array(v) || !json_array_size(v))
				rc = bad(x, "expected a non-empty array of LUNs");
			else if (json_array_size(v) > VS_TARGET_MAX_LUNS)
				rc = bad(x, "more than %u LUNs", VS_TARGET_MAX_LUNS);
			json_array_foreach(v, j, l)
			{
				if (rc)
					break;
				x->path[x->depth++] = (struct step){j, NULL};
				rc = parse_lun(x, l, c, &at[j]);
				x->depth--;
			}
		} else {
			rc = bad(x,
				 "unknown key '%s' (a controller has name, socket, queues, qos and "
				 "luns)",
				 key);
		}
		x->depth--;
		if (rc)
			return rc;
	}
	if (!c->name[0])
		return bad(x, "a controller needs a \"name\"");
	if (!c->socket[0])
		return bad(x, "a controller needs a \"socket\" (the vhost-user socket path)");
	if (!has_luns)
		return bad(x, "a controller needs \"luns\"");
	return 0;
}

static int parse_controllers(struct ctx *x, json_t *v, struct vs_config *c, struct spec_at *at)
{
	size_t n = json_is_array(v) ? json_array_size(v) : 0;
	int rc = 0;

	if (!n)
		return bad(x, "expected a non-empty array of controllers");
	if (n > VS_TARGET_MAX_CONTROLLERS)
		return bad(x, "more than %u controllers", VS_TARGET_MAX_CONTROLLERS);
	if (!(c->ctrls = calloc(n, sizeof(*c->ctrls))) || !(c->tcs = calloc(n, sizeof(*c->tcs))))
		return bad(x, "out of memory");
	for (size_t i = 0; i < n && !rc; i++) {
		struct vs_config_ctrl *k = &c->ctrls[i];

		x->path[x->depth++] = (struct step){i, NULL};
		k->queues = 1;
		rc = parse_controller(x, json_array_get(v, i), k, &at[i * VS_TARGET_MAX_LUNS]);
		for (size_t j = 0; !rc && j < i; j++)
			if (!strcmp(c->ctrls[j].name, k->name))
				rc = bad(x, "controller '%s' given twice", k->name);
			else if (!strcmp(c->ctrls[j].socket, k->socket))
				rc = bad(x, "socket %s given twice (controllers %s and %s)",
					 k->socket, c->ctrls[j].name, k->name);
		x->depth--;
		c->nctrls = (unsigned)i + 1;
	}
	return rc;
}

static int parse_top(struct ctx *x, json_t *root, struct vs_config *c, struct spec_at *at)
{
	bool has_controllers = false;
	const char *key;
	unsigned u;
	size_t i = 0;
	json_t *v;
	int rc = 0;

	if (!json_is_object(root))
		return bad(x, "expected an object with \"controllers\"");
	json_object_foreach(root, key, v)
	{
		x->path[x->depth++] = (struct step){i++, key};
		if (!strcmp(key, "controllers")) {
			has_controllers = true;
			rc = parse_controllers(x, v, c, at);
		} else if (!strcmp(key, "workers")) {
			rc = get_uint(x, v, 1, VS_TARGET_MAX_WORKERS, &c->workers);
		} else if (!strcmp(key, "poll")) {
			rc = get_bool(x, v, &c->poll);
		} else if (!strcmp(key, "adaptive_poll_us")) {
			c->has_adaptive_poll = true;
			rc = get_uint(x, v, 0, VS_TARGET_ADAPTIVE_POLL_MAX, &c->adaptive_poll_us);
		} else if (!strcmp(key, "block_size")) {
			if (!(rc = get_uint(x, v, 512, 4096, &u)) && u != 512 && u != 4096)
				rc = bad(x, "512 or 4096");
			c->block_size = u;
		} else if (!strcmp(key, "worker_timeout_ms")) {
			rc = get_uint(x, v, 100, 3600000, &c->worker_timeout_ms);
		} else if (!strcmp(key, "rpc")) {
			rc = get_str(x, v, c->rpc, sizeof(c->rpc));
		} else if (!strcmp(key, "rpc_allow")) {
			rc = get_allow(x, v, c);
		} else if (!strcmp(key, "lun_root")) {
			rc = get_str(x, v, c->lun_root, sizeof(c->lun_root));
		} else if (!strcmp(key, "testing")) {
			rc = get_bool(x, v, &c->testing);
		} else if (!strcmp(key, "trace")) {
			rc = get_str(x, v, c->trace, sizeof(c->trace));
		} else {
			rc = bad(x,
				 "unknown key '%s' (workers, poll, adaptive_poll_us, block_size, "
				 "worker_timeout_ms, rpc, rpc_allow, lun_root, testing, trace, "
				 "controllers)",
				 key);
		}
		x->depth--;
		if (rc)
			return rc;
	}
	if (!has_controllers)
		return bad(x, "no \"controllers\": one is needed");
	if (c->poll && c->has_adaptive_poll)
		return bad(x, "poll and adaptive_poll_us together: the adaptive poll is for "
			      "event mode (without poll)");
	if (c->nallow && !c->rpc[0])
		return bad(x, "rpc_allow without rpc");
	return 0;
}

int vs_config_parse(const char *text, size_t len, const char *name, struct vs_config *c, char *err,
		    size_t errlen)
{
	struct spec_at *at =
	    calloc((size_t)VS_TARGET_MAX_CONTROLLERS * VS_TARGET_MAX_LUNS, sizeof(*at));
	struct ctx x = {.text = text, .len = len, .name = name, .err = err, .errlen = errlen};
	struct vs_target_config tc;
	json_error_t jerr;
	json_t *root;
	int rc;

	memset(c, 0, sizeof(*c));
	c->block_size = 512;
	if (!at) {
		snprintf(err, errlen, "%s: out of memory", name);
		return -ENOMEM;
	}
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		snprintf(err, errlen, "%s:%d:%d: %s", name, jerr.line, jerr.column, jerr.text);
		free(at);
		return -EINVAL;
	}
	rc = parse_top(&x, root, c, at);
	/* What the specs say alone, now that block_size and testing are known (root still
	 * held: the paths name its keys). */
	if (!rc)
		vs_config_target(c, &tc);
	for (unsigned k = 0; !rc && k < c->nctrls; k++)
		for (unsigned i = 0; !rc && i < c->ctrls[k].nluns; i++) {
			const struct spec_at *where = &at[k * VS_TARGET_MAX_LUNS + i];
			char why[512];

			if (vs_target_lun_check(&tc, &c->ctrls[k].tluns[i], why, sizeof(why))) {
				memcpy(x.path, where->path, sizeof(where->path));
				rc = bad_at(&x, 5, "%s", why);
			}
		}
	json_decref(root);
	free(at);
	if (rc)
		vs_config_free(c);
	return rc;
}

int vs_config_load(const char *path, struct vs_config *c, char *err, size_t errlen)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	char *text = NULL;
	size_t len = 0;
	struct stat st;
	int rc = 0;

	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot open: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snprintf(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	if (!(text = malloc(VS_CONFIG_MAX_BYTES + 1))) {
		rc = -ENOMEM;
		snprintf(err, errlen, "%s: out of memory", path);
		goto out;
	}
	/* Read to the end, not st_size: bounded by the limit whatever the file claims. */
	for (;;) {
		ssize_t n = read(fd, text + len, VS_CONFIG_MAX_BYTES + 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: cannot read: %s", path, strerror(-rc));
			goto out;
		}
		if (!n)
			break;
		len += (size_t)n;
		if (len > VS_CONFIG_MAX_BYTES) {
			rc = -EINVAL;
			snprintf(err, errlen, "%s: more than %u bytes", path, VS_CONFIG_MAX_BYTES);
			goto out;
		}
	}
	rc = vs_config_parse(text, len, path, c, err, errlen);
out:
	free(text);
	close(fd);
	return rc;
}

void vs_config_target(struct vs_config *c, struct vs_target_config *tc)
{
	memset(tc, 0, sizeof(*tc));
	tc->workers = c->workers;
	tc->block_size = c->block_size;
	tc->poll = c->poll;
	if (c->has_adaptive_poll)
		tc->adaptive_poll_us =
		    c->adaptive_poll_us ? c->adaptive_poll_us : VS_TARGET_ADAPTIVE_POLL_OFF;
	tc->worker_timeout_ms = c->worker_timeout_ms;
	tc->testing = c->testing;
	tc->lun_root = c->lun_root[0] ? c->lun_root : NULL;
	for (unsigned k = 0; k < c->nctrls; k++) {
		struct vs_config_ctrl *x = &c->ctrls[k];

		for (unsigned i = 0; i < x->nluns; i++)
			x->tluns[i] = (struct vs_target_lun){
			    .id = x->luns[i].id, .spec = x->luns[i].spec, .qos = &x->luns[i].qos};
		c->tcs[k] = (struct vs_target_controller){.name = x->name,
							  .socket_path = x->socket,
							  .num_queues = x->queues,
							  .nluns = x->nluns,
							  .luns = x->tluns,
							  .qos = &x->qos};
	}
	tc->controllers = c->tcs;
	tc->ncontrollers = c->nctrls;
}

void vs_config_free(struct vs_config *c)
{
	free(c->ctrls);
	free(c->tcs);
	c->ctrls = NULL;
	c->tcs = NULL;
	c->nctrls = 0;
}

void vs_config_move(struct vs_config *to, struct vs_config *from)
{
	vs_config_free(to);
	*to = *from;
	from->ctrls = NULL;
	from->tcs = NULL;
	from->nctrls = 0;
}

int vs_config_copy(struct vs_config *to, const struct vs_config *from)
{
	*to = *from;
	to->ctrls = calloc(from->nctrls ? from->nctrls : 1, sizeof(*to->ctrls));
	to->tcs = calloc(from->nctrls ? from->nctrls : 1, sizeof(*to->tcs));
	if (!to->ctrls || !to->tcs) {
		vs_config_free(to);
		return -ENOMEM;
	}
	memcpy(to->ctrls, from->ctrls, from->nctrls * sizeof(*to->ctrls));
	return 0;
}

const struct vs_config_ctrl *vs_config_ctrl(const struct vs_config *c, const char *name)
{
	for (unsigned k = 0; k < c->nctrls; k++)
		if (!strcmp(c->ctrls[k].name, name))
			return &c->ctrls[k];
	return NULL;
}

/* ---- saving ---------------------------------------------------------------------------- */

/* One live controller: its name, socket, queues, and the LUNs it has now. */
static json_t *dump_ctrl(struct vs_target *t, const struct vs_target_controller_info *ci)
{
	static struct vs_target_lun_info luns[VS_TARGET_MAX_LUNS]; /* the caller's lock */
	unsigned n = vs_target_lun_list(t, ci->name, luns, VS_TARGET_MAX_LUNS);
	json_t *ctl = json_object(), *jl = json_array();

	if (!ctl || !jl) {
		json_decref(ctl);
		json_decref(jl);
		return NULL;
	}
	json_object_set_new(ctl, "name", json_string(ci->name));
	json_object_set_new(ctl, "socket", json_string(ci->socket_path));
	json_object_set_new(ctl, "queues", json_integer(ci->num_queues));
	{
		char all[VS_CONFIG_MAX_SPEC];

		vs_target_qos_format(&ci->qos, all, sizeof(all));
		if (strcmp(all, "none"))
			json_object_set_new(ctl, "qos", json_string(all));
	}
	for (unsigned i = 0; i < n && i < VS_TARGET_MAX_LUNS; i++) {
		char qos[VS_CONFIG_MAX_SPEC];
		json_t *l =
		    json_pack("{s:I, s:s}", "id", (json_int_t)luns[i].id, "spec", luns[i].spec);

		vs_target_qos_format(&luns[i].qos, qos, sizeof(qos));
		if (l && strcmp(qos, "none"))
			json_object_set_new(l, "qos", json_string(qos));
		json_array_append_new(jl, l);
	}
	json_object_set_new(ctl, "luns", jl);
	return ctl;
}

char *vs_config_dump(const struct vs_config *c, struct vs_target *t, const char *trace)
{
	static struct vs_target_controller_info ci[VS_TARGET_MAX_CONTROLLERS]; /* caller's lock */
	json_t *root = json_object(), *ctls = json_array();
	unsigned n = vs_target_controller_list(t, ci, VS_TARGET_MAX_CONTROLLERS);
	char *text = NULL;

	if (!root || !ctls)
		goto out;
	/* Only what was given: an absent setting keeps following the default. */
	if (c->workers)
		json_object_set_new(root, "workers", json_integer(c->workers));
	if (c->poll)
		json_object_set_new(root, "poll", json_true());
	if (c->has_adaptive_poll)
		json_object_set_new(root, "adaptive_poll_us", json_integer(c->adaptive_poll_us));
	json_object_set_new(root, "block_size", json_integer(c->block_size));
	if (c->worker_timeout_ms)
		json_object_set_new(root, "worker_timeout_ms", json_integer(c->worker_timeout_ms));
	if (c->rpc[0])
		json_object_set_new(root, "rpc", json_string(c->rpc));
	if (c->nallow) {
		json_t *a = json_array();

		for (unsigned i = 0; a && i < c->nallow; i++) {
			uint64_t uid;

			json_array_append_new(a, vs_parse_u64(c->allow[i], 0, UINT32_MAX - 1, &uid)
						     ? json_string(c->allow[i])
						     : json_integer((json_int_t)uid));
		}
		json_object_set_new(root, "rpc_allow", a);
	}
	if (c->lun_root[0])
		json_object_set_new(root, "lun_root", json_string(c->lun_root));
	if (c->testing)
		json_object_set_new(root, "testing", json_true());
	if (trace && trace[0])
		json_object_set_new(root, "trace", json_string(trace));
	for (unsigned i = 0; i < n && i < VS_TARGET_MAX_CONTROLLERS; i++) {
		json_t *ctl = dump_ctrl(t, &ci[i]);

		if (!ctl)
			goto out;
		json_array_append_new(ctls, ctl);
	}
	json_object_set_new(root, "controllers", ctls);
	ctls = NULL;
	text = json_dumps(root, JSON_INDENT(2));
out:
	json_decref(root);
	json_decref(ctls);
	return text;
}

int vs_config_write(const char *path, const char *text, char *err, size_t errlen)
{
	const char *slash = strrchr(path, '/');
	char dir[PATH_MAX], tmp[PATH_MAX];
	size_t len = strlen(text), off = 0;
	int fd, dfd = -1, rc = 0;

	if (snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) + 1 : 1,
		     slash ? path : ".") >= (int)sizeof(dir) ||
	    snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path) >= (int)sizeof(tmp)) {
		snprintf(err, errlen, "%s: path too long", path);
		return -ENAMETOOLONG;
	}
	/* mkostemp: O_CREAT|O_EXCL, mode 0600, a name nobody else holds. */
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "%s: cannot create a temporary file beside it: %s", path,
			 strerror(-rc));
		return rc;
	}
	while (off < len) {
		ssize_t n = write(fd, text + off, len - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			snprintf(err, errlen, "%s: writing %s: %s", path, tmp, strerror(-rc));
			goto out;
		}
		off += (size_t)n;
	}
	if (fsync(fd)) {
		rc = -errno;
		snprintf(err, errlen, "%s: fsync of %s: %s", path, tmp, strerror(-rc));
		goto out;
	}
	if (rename(tmp, path)) {
		rc = -errno;
		snprintf(err, errlen, "%s: renaming %s over it: %s", path, tmp, strerror(-rc));
		goto out;
	}
	tmp[0] = 0; /* renamed: nothing to remove */
	/* The rename is durable once the directory is. */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd)) {
		rc = -errno;
		snprintf(err, errlen, "%s: written, but fsync of its directory %s: %s", path, dir,
			 strerror(-rc));
	}
out:
	if (tmp[0])
		unlink(tmp);
	if (dfd >= 0)
		close(dfd);
	close(fd);
	return rc;
}
