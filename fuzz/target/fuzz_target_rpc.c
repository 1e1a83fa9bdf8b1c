/* SPDX-License-Identifier: MIT */
/*
 * Stateful fuzzing of the management socket's methods against a live target: the guest's
 * operations of fuzz_target_session.c (vhost-user messages, kicks, guest memory writes,
 * shrinks: session.c) interleaved with JSON-RPC requests answered by vs_rpc_handle
 * (src/rpc, through a server without a socket: vs_rpc_new) against the same manual-mode
 * target.  LUNs are added, removed, resized and listed while the guest's commands and
 * TMFs are in flight on them, and the trace settings change under them.
 *
 * A sibling of target_session rather than more operations in it: that target's input
 * format and its corpus keep their meaning, and the set-up this one needs (test files,
 * the spec filter, the trace settings put back for each input) stays out of it.
 *
 * Input: [u16 le n][n bytes] guest memory (as target_session), then operations:
 *   0x00-0x2f, 0x40-0xff  the guest's, as in fuzz_target_session.c (session.h)
 *   0x30-0x37  kick queue op & 7 and run one pass only: the commands it pops stay in flight
 *              (RAM and null bios complete at the next pass), for a request to meet them
 *   0x38-0x3d  one request of method op - 0x38 (lun_add, lun_remove, lun_resize, lun_list,
 *              stats, trace_set): [form][params]
 *   0x3e       a batch: [n] then (n & 3) + 1 requests, each [method % 6][form][params]
 *   0x3f       a raw line: [u16 le len][len bytes] (the JSON parser, the request checks)
 * form: bits 0-1 the request's id (0: a number, 1: a string, 2: none: a notification,
 *   3: null); bit 2: an unknown param besides; bit 3: params as an array; bit 4: no params.
 * params, one byte each, an index (modulo) into a dictionary of valid and edge values:
 *   lun_add [id][spec], lun_remove [id], lun_resize [id][size], trace_set [trace spec].
 * Missing bytes at the end of the input count as 0.  Each input starts from the same
 * target: LUN 0 ram=1M, LUN 1 null=1M, LUN 2 the test file "a" (1 MiB of zeros again), the
 * trace settings of the process's start.
 *
 * Every line passes the spec filter (spec_filter.h) first: a lun_add of anything but
 * small RAM, null and the fuzzer's own test files is refused there and never reaches the
 * target.  Checked: each response is one line of JSON answering its request (its id; a
 * result or an error); a notification gets none; a LUN added is listed and a LUN removed
 * is not; no LUN of the target has a spec the filter refuses.
 *
 * FUZZ_RPC_VERBOSE=1 in the environment prints every line, its answer and the commands in
 * flight when it came (to see what a seed or a finding does).
 */
#include <stdarg.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rpc/rpc.h"
#include "session.h"
#include "spec_filter.h"

#define LINE_MAX_FUZZ 8192

enum method { M_LUN_ADD, M_LUN_REMOVE, M_LUN_RESIZE, M_LUN_LIST, M_STATS, M_TRACE_SET, M_N };

static const char *const method_names[M_N] = {"lun_add",  "lun_remove", "lun_resize",
					      "lun_list", "stats",	"trace_set"};
static const unsigned method_nparams[M_N] = {2, 1, 2, 0, 0, 1};

/* Dictionaries of JSON values.  make_corpus.py names entries by their index: add at the
 * end, never reorder. */
/* clang-format off */
static const char *const ids[] = {
	"0", "1", "2", "3", "255", "256",			/* 0-5 */
	"-1", "\"1\"", "1.5", "null", "4294967296",		/* 6-10 */
};
static const char *const sizes[] = {
	"0", "512", "4096", "1048576", "2097152", "4194304",	/* 0-5 */
	"1048577", "513", "\"4K\"", "\"1M\"", "\"3M\"",		/* 6-10 */
	"\"16E\"", "\"1T\"", "\"64G\"", "\"1.5M\"", "-512",	/* 11-15 */
	"\"\"", "true", "9223372036854775807",			/* 16-18 */
	"\"9999999999999T\"",					/* 19 */
};
static const char *const trace_specs[] = {
	"\"info:all\"", "\"verbose:io,queue\"", "\"debug:all\"",	/* 0-2 */
	"\"error\"", "\"off\"", "\"warning:target.all\"",		/* 3-5 */
	"\"verbose:rpc.all\"", "\"bogus\"", "\"info:nosuchflag\"",	/* 6-8 */
	"\":\"", "\"verbose:,,,\"", "\"\"", "7",			/* 9-12 */
	NULL,	/* 13: "verbose:aaa...", 597 characters (long_trace_spec) */
};
/* Backend specs: these, then NFILESPECS of the test files (made at start: their paths are
 * the private directory's). */
static const char *const fixed_specs[] = {
	"\"ram=1M\"", "\"ram=4M\"", "\"ram=512\"", "\"ram=513\"",	/* 0-3 */
	"\"ram=0\"", "\"ram=junk\"", "\"ram=1\\u004d\"" /* 1M */,	/* 4-6 */
	"\"ram=8M\"",			/* 7: refused, over FZ_RAM_MAX */
	"\"null=1M\"", "\"null=4K\"", "\"null=0\"",			/* 8-10 */
	"\"null=16777215T\"",		/* 11: 2^64 - 2^40 */
	"\"null=18446744073709551104\"",	/* 12: 2^64 - 512 */
	"\"null=9223372036854775808\"",	/* 13: 2^63 */
	"\"null=1M,delay=1000\"",	/* 14: refused, a test option */
	"\"rbd=pool/image\"",		/* 15: refused, not ours */
	"\"file=/etc/passwd\"",		/* 16: refused, not ours */
	"\"bogus\"", "\"\"",						/* 17-18 */
	"\"ram=1M,log-writes=x\"",	/* 19: refused, opens a path */
	"5", "null",							/* 20-21 */
};
/* clang-format on */
#define NTRACE	   (sizeof(trace_specs) / sizeof(trace_specs[0]))
#define NFIXED	   (sizeof(fixed_specs) / sizeof(fixed_specs[0]))
#define NFILESPECS 8 /* 22-29: a, a ro, b, b direct, odd, empty, a rw, a log-writes */
#define NSPECS	   (NFIXED + NFILESPECS)

static struct fz_files files;
static char file_specs[NFILESPECS][PATH_MAX + 32];
static const char *specs[NSPECS];
static char long_trace_spec[600];
static char lun2_spec[PATH_MAX + 8]; /* the file LUN every input starts with */
static const char *trace_spec0;	     /* the settings each input starts from */
static bool verbose;		     /* $FUZZ_RPC_VERBOSE: every line and its answer */
static long long request_count;	     /* this input's: the ids of its requests */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static const struct {
		enum fz_file file;
		const char *opts;
	} fs[NFILESPECS] = {{FZ_FILE_A, ""},
			    {FZ_FILE_A, ",ro"},
			    {FZ_FILE_B, ""},
			    {FZ_FILE_B, ",direct"},
			    {FZ_FILE_ODD, ""},
			    {FZ_FILE_EMPTY, ""},
			    {FZ_FILE_A, ",rw"} /* refused: no such option */,
			    {FZ_FILE_A, ",log-writes=x"} /* refused: opens a path */};

	(void)argc;
	(void)argv;
	fz_session_init();
	fz_files_init(&files);
	for (unsigned i = 0; i < NFIXED; i++)
		specs[i] = fixed_specs[i];
	for (unsigned i = 0; i < NFILESPECS; i++) {
		snprintf(file_specs[i], sizeof(file_specs[i]), "\"file=%s%s\"",
			 files.path[fs[i].file], fs[i].opts);
		specs[NFIXED + i] = file_specs[i];
	}
	snprintf(lun2_spec, sizeof(lun2_spec), "file=%s", files.path[FZ_FILE_A]);
	memset(long_trace_spec, 'a', sizeof(long_trace_spec) - 1);
	memcpy(long_trace_spec, "\"verbose:", 9);
	long_trace_spec[sizeof(long_trace_spec) - 2] = '"';
	verbose = getenv("FUZZ_RPC_VERBOSE") != NULL;
	trace_spec0 = getenv("VIOSCOPE_TRACE") ? getenv("VIOSCOPE_TRACE") : "info:all";
	return 0;
}

/* ---- building requests -------------------------------------------------------------------- */

struct line {
	char s[LINE_MAX_FUZZ];
	size_t len;
};

static void put(struct line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct line *l, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(l->s + l->len, sizeof(l->s) - l->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(l->s) - l->len)
		__builtin_trap(); /* the dictionaries are short: cannot happen */
	l->len += (size_t)n;
}

/* What a structured request expects back. */
struct expect {
	bool answered; /* has an id: one response */
	long long id;  /* form 0: the numeric id */
	bool numeric;
	enum method m;
	int lun; /* lun_add, lun_remove: the LUN number it names (-1: not a valid one) */
};

static uint8_t next_byte(const uint8_t **p, size_t *left)
{
	uint8_t b = 0;

	if (*left) {
		b = **p;
		(*p)++;
		(*left)--;
	}
	return b;
}

static const char *pick(const char *const *dict, size_t n, uint8_t b)
{
	const char *v = dict[b % n];

	return v ? v : long_trace_spec;
}

/* One request into l from [form][params] at *p. */
static void build(struct line *l, enum method m, const uint8_t **p, size_t *left, struct expect *x)
{
	uint8_t form = next_byte(p, left);
	const char *param[2] = {NULL, NULL};
	uint8_t b[2] = {0, 0};

	for (unsigned i = 0; i < method_nparams[m]; i++)
		b[i] = next_byte(p, left);
	switch (m) {
	case M_LUN_ADD:
		param[0] = pick(ids, sizeof(ids) / sizeof(ids[0]), b[0]);
		param[1] = pick(specs, NSPECS, b[1]);
		break;
	case M_LUN_REMOVE:
		param[0] = pick(ids, sizeof(ids) / sizeof(ids[0]), b[0]);
		break;
	case M_LUN_RESIZE:
		param[0] = pick(ids, sizeof(ids) / sizeof(ids[0]), b[0]);
		param[1] = pick(sizes, sizeof(sizes) / sizeof(sizes[0]), b[1]);
		break;
	case M_TRACE_SET:
		param[0] = pick(trace_specs, NTRACE, b[0]);
		break;
	default:
		break;
	}
	memset(x, 0, sizeof(*x));
	x->m = m;
	x->lun = -1;
	if (param[0] && (m == M_LUN_ADD || m == M_LUN_REMOVE)) {
		char *end;
		long v = strtol(param[0], &end, 10);

		if (!*end && v >= 0 && v < VS_TARGET_MAX_LUNS)
			x->lun = (int)v;
	}

	put(l, "{\"jsonrpc\":\"2.0\",\"method\":\"%s\"", method_names[m]);
	if (!(form & 0x10)) {
		static const char *const names[M_N][2] = {
		    {"id", "spec"}, {"id", NULL}, {"id", "size"}, {NULL}, {NULL}, {"spec", NULL}};

		put(l, ",\"params\":%c", form & 8 ? '[' : '{');
		for (unsigned i = 0; i < method_nparams[m]; i++) {
			if (form & 8)
				put(l, "%s%s", i ? "," : "", param[i]);
			else
				put(l, "%s\"%s\":%s", i ? "," : "", names[m][i], param[i]);
		}
		if (form & 4) /* one more than it takes */
			put(l, "%s%s1", method_nparams[m] ? "," : "", form & 8 ? "" : "\"x\":");
		put(l, "%c", form & 8 ? ']' : '}');
	}
	switch (form & 3) {
	case 0:
		x->answered = x->numeric = true;
		x->id = ++request_count;
		put(l, ",\"id\":%lld", x->id);
		break;
	case 1:
		x->answered = true;
		put(l, ",\"id\":\"r%lld\"", ++request_count);
		break;
	case 2:
		break; /* a notification */
	default:
		x->answered = true;
		put(l, ",\"id\":null");
		break;
	}
	put(l, "}");
}

/* ---- checking responses ------------------------------------------------------------------- */

/* The line being answered, for the report of a check that failed. */
static struct {
	const char *line, *resp;
	size_t len;
} cur;

static __attribute__((noreturn)) void broken(const char *what)
{
	fprintf(stderr, "fuzz_target_rpc: %s\n  request:  %.*s\n  response: %s\n", what,
		(int)cur.len, cur.line ? cur.line : "", cur.resp ? cur.resp : "(none here)");
	__builtin_trap();
}

static bool lun_listed(struct vs_target *t, unsigned id)
{
	struct vs_target_lun_info luns[VS_TARGET_MAX_LUNS];
	unsigned n = vs_target_lun_list(t, NULL, luns, VS_TARGET_MAX_LUNS);

	for (unsigned i = 0; i < n && i < VS_TARGET_MAX_LUNS; i++)
		if (luns[i].id == id)
			return true;
	return false;
}

/* r answers x: its id, a result or an error; and when t is given (a request alone, not in
 * a batch, whose later requests change the LUNs again), what a success says holds in t. */
static void check_answer(struct vs_target *t, json_t *r, const struct expect *x)
{
	json_t *id = json_object_get(r, "id");
	json_t *result = json_object_get(r, "result"), *error = json_object_get(r, "error");

	if (!json_is_object(r) || !id)
		broken("a response without an id");
	if (!result == !error)
		broken("a response needs a result or an error, not both");
	if (x->numeric && (!json_is_integer(id) || json_integer_value(id) != x->id))
		broken("a response to another id");
	if (error && !json_is_integer(json_object_get(error, "code")))
		broken("an error without a code");
	if (!t || !result)
		return;
	if (x->m == M_LUN_ADD && (x->lun < 0 || !lun_listed(t, (unsigned)x->lun)))
		broken("lun_add succeeded, but the LUN is not listed");
	if (x->m == M_LUN_REMOVE && (x->lun < 0 || lun_listed(t, (unsigned)x->lun)))
		broken("lun_remove succeeded, but the LUN is still listed");
}

/* Send one line through the filter and the handler.  x: the structured requests in it
 * (nx of them, in a batch or a request alone), NULL for a raw line. */
static void send_line(struct fz_session *s, struct vs_rpc *rpc, const char *line, size_t len,
		      const struct expect *x, unsigned nx, bool batch)
{
	unsigned answered = 0, k = 0;
	json_t *resp;
	char *out;

	if (!fz_line_allowed(&files, line, len)) {
		if (verbose)
			fprintf(stderr, "refused by the filter: %.*s\n", (int)len, line);
		return; /* the target never sees it */
	}
	if (verbose)
		fprintf(stderr, "in flight: queue 2: %u, queue 3: %u\n-> %.*s\n",
			s->t->ctrls->q[2].inflight, s->t->ctrls->q[3].inflight, (int)len, line);
	cur.line = line;
	cur.len = len;
	cur.resp = out = vs_rpc_handle(rpc, line, len);
	if (verbose)
		fprintf(stderr, "<- %s\n", out ? out : "(none)");
	if (out && strchr(out, '\n'))
		broken("a response of more than one line");
	resp = out ? json_loads(out, JSON_DECODE_ANY, NULL) : NULL;
	if (out && !resp)
		broken("a response that is not JSON");
	if (x) {
		for (unsigned i = 0; i < nx; i++)
			answered += x[i].answered;
		if (!answered != !out)
			broken(answered ? "no response" : "a response to notifications");
		if (!batch && resp) {
			check_answer(s->t, resp, &x[0]);
		} else if (resp) {
			if (!json_is_array(resp) || json_array_size(resp) != answered)
				broken(
				    "a batch's response without one entry per request with an id");
			for (unsigned i = 0; i < nx; i++)
				if (x[i].answered)
					check_answer(NULL, json_array_get(resp, k++), &x[i]);
		}
	}
	json_decref(resp);
	free(out);
	cur.resp = NULL;
}

/* No LUN of any controller has a spec the filter refuses (a lun_add or controller_add that
 * slipped past it). */
static void check_specs(struct vs_target *t)
{
	pthread_mutex_lock(&t->ctrl_lock);
	for (struct vs_controller *c = t->ctrls; c; c = c->next)
		for (unsigned id = 0; id < VS_TARGET_MAX_LUNS; id++)
			if (c->spec[id] && !fz_spec_allowed(&files, c->spec[id])) {
				fprintf(stderr,
					"fuzz_target_rpc: controller %s LUN %u holds '%s'\n",
					c->name, id, c->spec[id]);
				broken("a LUN whose spec the filter refuses (after the last line "
				       "sent)");
			}
	pthread_mutex_unlock(&t->ctrl_lock);
}

/* One management operation (op 0x38-0x3f); returns the bytes it took. */
static size_t rpc_op(struct fz_session *s, struct vs_rpc *rpc, const uint8_t *data, size_t size)
{
	const uint8_t *p = data + 1;
	size_t left = size - 1;
	struct expect x[4];
	static struct line l;
	unsigned n = 1;

	l.len = 0;
	if (data[0] == 0x3f) {
		size_t len = next_byte(&p, &left);

		len |= (size_t)next_byte(&p, &left) << 8;
		if (len > left)
			len = left;
		send_line(s, rpc, (const char *)p, len, NULL, 0, false);
		p += len;
	} else if (data[0] == 0x3e) {
		n = (next_byte(&p, &left) & 3) + 1;
		put(&l, "[");
		for (unsigned i = 0; i < n; i++) {
			put(&l, "%s", i ? "," : "");
			build(&l, (enum method)(next_byte(&p, &left) % M_N), &p, &left, &x[i]);
		}
		put(&l, "]");
		send_line(s, rpc, l.s, l.len, x, n, true);
	} else {
		build(&l, (enum method)(data[0] - 0x38), &p, &left, &x[0]);
		send_line(s, rpc, l.s, l.len, x, 1, false);
	}
	check_specs(s->t);
	fz_session_check(s);
	return (size_t)(p - data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vs_target_lun luns[3] = {{.id = 0, .spec = "ram=1M"},
					{.id = 1, .spec = "null=1M"},
					{.id = 2, .spec = lun2_spec}};
	/* The target confines file specs to the fuzzer's directory itself too (--lun-root):
	 * what the filter might let through by mistake is refused there. */
	struct vs_target_config cfg = {
	    .num_queues = 2, .workers = 2, .nluns = 3, .luns = luns, .lun_root = files.dir};
	struct vs_rpc_config rcfg = {0};
	struct fz_session s;
	struct vs_rpc *rpc;
	size_t used;

	if (size < 2)
		return 0;
	fz_files_reset(&files);
	request_count = 0;
	vs_trace_set_spec(trace_spec0); /* trace_set of an earlier input is undone */
	used = fz_session_begin(&s, &cfg, data, size);
	data += used;
	size -= used;
	rcfg.target = s.t; /* no shutdown: the method is refused */
	if (vs_rpc_new(&rpc, &rcfg))
		__builtin_trap();
	while (size) {
		if (data[0] >= 0x30 && data[0] < 0x38) {
			fz_session_kick(&s, data[0] & 7, 1);
			fz_session_check(&s);
			used = 1;
		} else if (data[0] >= 0x38 && data[0] < 0x40) {
			used = rpc_op(&s, rpc, data, size);
		} else {
			used = fz_session_op(&s, data, size);
		}
		data += used;
		size -= used;
	}
	vs_rpc_stop(rpc);
	fz_session_end(&s);
	return 0;
}
