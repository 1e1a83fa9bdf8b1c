/* SPDX-License-Identifier: MIT */
/*
 * Backend specs, the checks every bio passes before a backend sees it, and dispatch
 * through the per-kind ops table.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vioscope/trace.h>

#include "backend/backend_int.h"

/* The options every kind takes (hooks.c: log-writes, and the test-only delay and faults) go
 * into be; args without them into rest, for the kind to parse.  0, or -EINVAL with why set. */
static int common_options(struct vs_backend *be, const char *args, bool testing, char *rest,
			  size_t restlen, char *why, size_t whylen)
{
	size_t used = 0;
	bool first = true;
	int rc;

	for (const char *p = args; p;) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char field[4200];

		if (len >= sizeof(field))
			return vs_fail(why, whylen, -EINVAL, "backend spec field too long");
		snprintf(field, sizeof(field), "%.*s", (int)len, p);
		rc = first ? 0 : vs_be_hooks_parse(be, field, testing, why, whylen);
		if (rc < 0)
			return rc;
		if (!rc) {
			if (used + len + 2 > restlen)
				return vs_fail(why, whylen, -EINVAL, "backend spec too long");
			used += (size_t)snprintf(rest + used, restlen - used, "%s%.*s",
						 first ? "" : ",", (int)len, p);
		}
		first = false;
		p = comma ? comma + 1 : NULL;
	}
	return 0;
}

/* ram=SIZE and null=SIZE: 0, or -errno with why set. */
static int parse_size(const char *spec, const char *args, uint64_t *size, char *why, size_t whylen)
{
	int rc = vs_parse_size(args, size);

	if (rc == -ERANGE)
		return vs_fail(why, whylen, -EINVAL,
			       "%s: size '%s' is too large (at most %lld bytes, 8 EiB - 1)", spec,
			       args, (long long)INT64_MAX);
	if (rc < 0 || *size == 0)
		return vs_fail(why, whylen, -EINVAL, "%s: bad size '%s' (use e.g. 64M, 1G)", spec,
			       args);
	return 0;
}

/* Before the log is created: nothing of a refused spec may be left behind. */
static int check_size(struct vs_backend *be, const struct vs_backend_opts *o, char *why,
		      size_t whylen)
{
	uint64_t size = vs_backend_size(be);

	if (o->block_size && (size < o->block_size || size % o->block_size))
		return vs_fail(why, whylen, -EINVAL,
			       "size %llu bytes is not a whole number of %u-byte blocks",
			       (unsigned long long)size, o->block_size);
	return 0;
}

int vs_backend_open(struct vs_backend **out, const char *spec, char *why, size_t whylen)
{
	static const struct vs_backend_opts trusting = {.testing = true};

	return vs_backend_open_opts(out, spec, &trusting, why, whylen);
}

enum be_kind { KIND_FILE, KIND_RAM, KIND_NULL, KIND_RBD };

/* The kind a spec names and where its arguments start: 0, or -EINVAL with why set.  A kind
 * given without its value ("ram") is told what it needs. */
static int spec_kind(const char *spec, enum be_kind *kind, const char **args, char *why,
		     size_t whylen)
{
	static const char usage[] = "use file=PATH[,ro][,direct][,shared], ram=SIZE, null=SIZE or "
				    "rbd=POOL/IMAGE[,conf=PATH][,id=USER][,ro][,timeout=SECONDS]";
	static const struct {
		const char *name;
		enum be_kind kind;
		const char *needs;
	} kinds[] = {
	    {"file", KIND_FILE, "a path (file=PATH[,ro][,direct][,shared])"},
	    {"ram", KIND_RAM, "a size (ram=SIZE, e.g. ram=1G)"},
	    {"null", KIND_NULL, "a size (null=SIZE, e.g. null=1G)"},
	    {"rbd", KIND_RBD, "an image (rbd=POOL/IMAGE[,conf=PATH][,id=USER][,ro][,timeout=S])"},
	};
	const char *eq = spec ? strchr(spec, '=') : NULL;
	size_t klen = eq ? (size_t)(eq - spec) : spec ? strcspn(spec, ",") : 0;

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		if (strlen(kinds[i].name) != klen || strncmp(spec, kinds[i].name, klen))
			continue;
		if (!eq) {
			VS_ERROR(BACKEND, "bad backend spec '%s': no '='", spec);
			return vs_fail(why, whylen, -EINVAL, "bad backend spec '%s': %s needs %s",
				       spec, kinds[i].name, kinds[i].needs);
		}
		*kind = kinds[i].kind;
		*args = eq + 1;
		return 0;
	}
	if (!eq) {
		VS_ERROR(BACKEND, "bad backend spec '%s': no '='", spec ? spec : "(null)");
		return vs_fail(why, whylen, -EINVAL, "bad backend spec '%s' (%s)",
			       spec ? spec : "(null)", usage);
	}
	VS_ERROR(BACKEND, "unknown backend kind in '%s'", spec);
	return vs_fail(why, whylen, -EINVAL, "unknown backend '%.*s' (%s)", (int)klen, spec, usage);
}

/* A new backend with its common options parsed (args without them into rest): 0, or
 * -errno with why set and nothing allocated. */
static int backend_new(struct vs_backend **out, const char *args, const struct vs_backend_opts *o,
		       char *rest, size_t restlen, char *why, size_t whylen)
{
	struct vs_backend *be = calloc(1, sizeof(*be));
	int rc;

	*out = NULL;
	if (!be)
		return vs_fail(why, whylen, -ENOMEM, "out of memory");
	be->mem_align = be->off_align = 1;
	be->file.fd = be->file.fd_buffered = -1;
	pthread_mutex_init(&be->size_lock, NULL);
	if ((rc = common_options(be, args, o->testing, rest, restlen, why, whylen))) {
		vs_be_hooks_close(be);
		pthread_mutex_destroy(&be->size_lock);
		free(be);
		return rc;
	}
	*out = be;
	return 0;
}

static void backend_free(struct vs_backend *be)
{
	vs_be_hooks_close(be);
	pthread_mutex_destroy(&be->size_lock);
	free(be);
}

/* ram= and null=: the size, and whole blocks of o->block_size. */
static int parse_lun_size(const char *spec, const char *args, const struct vs_backend_opts *o,
			  uint64_t *size, char *why, size_t whylen)
{
	int rc = parse_size(spec, args, size, why, whylen);

	if (rc < 0) {
		VS_ERROR(BACKEND, "%s: bad size '%s'", spec, args);
		return rc;
	}
	if (o->block_size && (*size < o->block_size || *size % o->block_size))
		return vs_fail(why, whylen, -EINVAL,
			       "size %llu bytes is not a whole number of %u-byte blocks",
			       (unsigned long long)*size, o->block_size);
	return 0;
}

int vs_backend_spec_check(const char *spec, const struct vs_backend_opts *o, char *why,
			  size_t whylen)
{
	struct vs_backend *be;
	enum be_kind kind;
	const char *args;
	char rest[4200];
	uint64_t size;
	int rc;

	if (why && whylen)
		*why = 0;
	if ((rc = spec_kind(spec, &kind, &args, why, whylen)) ||
	    (rc = backend_new(&be, args, o, rest, sizeof(rest), why, whylen)))
		return rc;
	backend_free(be);
	switch (kind) {
	case KIND_FILE:
		return vs_be_file_check(rest, why, whylen);
	case KIND_RBD:
#ifdef VS_HAVE_RBD
		return vs_be_rbd_check(rest, why, whylen);
#else
		return 0; /* it says it is not built in when it is opened */
#endif
	case KIND_RAM:
	case KIND_NULL:
		return parse_lun_size(spec, rest, o, &size, why, whylen);
	}
	return 0;
}

int vs_backend_open_opts(struct vs_backend **out, const char *spec, const struct vs_backend_opts *o,
			 char *why, size_t whylen)
{
	struct vs_backend *be;
	enum be_kind kind;
	const char *rest;
	char args[4200];
	uint64_t size = 0;
	int rc;

	*out = NULL;
	if (why && whylen)
		*why = 0;
	if ((rc = spec_kind(spec, &kind, &rest, why, whylen)) ||
	    (rc = backend_new(&be, rest, o, args, sizeof(args), why, whylen)))
		return rc;
	switch (kind) {
	case KIND_FILE:
		rc = vs_be_file_open(be, args, o, why, whylen);
		break;
	case KIND_RBD:
#ifdef VS_HAVE_RBD
		rc = vs_be_rbd_open(be, args, why, whylen);
#else
		vs_fail(why, whylen, 0,
			"rbd: this vioscope was built without the RBD backend (librbd-dev was "
			"not installed when it was built)");
		VS_ERROR(BACKEND, "rbd backend '%s': not built in", spec);
		rc = -EOPNOTSUPP;
#endif
		break;
	case KIND_RAM:
	case KIND_NULL:
		rc = parse_size(spec, args, &size, why, whylen);
		if (rc < 0)
			VS_ERROR(BACKEND, "%s: bad size '%s'", spec, args);
		else if (kind == KIND_RAM)
			rc = vs_be_ram_open(be, size, why, whylen);
		else
			rc = vs_be_null_open(be, size, why, whylen);
		break;
	}
	if (rc == 0 && ((rc = check_size(be, o, why, whylen)) < 0 ||
			(rc = vs_be_hooks_start(be, o, why, whylen)) < 0))
		be->ops->close(be);
	if (rc < 0) {
		backend_free(be);
		return rc;
	}
	VS_INFO(BACKEND, "opened %s backend '%s': %llu bytes, read-only %d, alignment %u",
		be->ops->kind, spec, (unsigned long long)be->size, be->ro,
		vs_backend_alignment(be));
	*out = be;
	return 0;
}

void vs_backend_close(struct vs_backend *be)
{
	if (!be)
		return;
	VS_INFO(BACKEND, "closing %s backend (%llu bytes, %llu bounced bios)", be->ops->kind,
		(unsigned long long)vs_backend_size(be),
		(unsigned long long)vs_backend_bounce_count(be));
	vs_be_hooks_close(be);
	be->ops->close(be);
	pthread_mutex_destroy(&be->size_lock);
	free(be);
}

uint64_t vs_backend_size(const struct vs_backend *be)
{
	return __atomic_load_n(&be->size, __ATOMIC_RELAXED);
}

bool vs_backend_durable(const struct vs_backend *be)
{
	return be->durable;
}

const char *vs_backend_identity(const struct vs_backend *be)
{
	return be->identity;
}

bool vs_backend_have_rbd(void)
{
#ifdef VS_HAVE_RBD
	return true;
#else
	return false;
#endif
}

int vs_backend_watch_size(struct vs_backend *be, vs_backend_size_fn fn, void *arg)
{
	int rc = 0;

	pthread_mutex_lock(&be->size_lock);
	if (be->size_fn && be->size_arg != arg) {
		rc = -EBUSY;
	} else {
		be->size_fn = fn;
		be->size_arg = arg;
	}
	pthread_mutex_unlock(&be->size_lock);
	return rc;
}

void vs_backend_unwatch_size(struct vs_backend *be, void *arg)
{
	pthread_mutex_lock(&be->size_lock);
	if (be->size_arg == arg) {
		be->size_fn = NULL;
		be->size_arg = NULL;
	}
	pthread_mutex_unlock(&be->size_lock);
}

/* The watcher runs under the lock, so that unwatching waits for a call in progress. */
void vs_backend_size_changed(struct vs_backend *be, uint64_t new_size)
{
	uint64_t old = __atomic_exchange_n(&be->size, new_size, __ATOMIC_RELAXED);

	if (old == new_size)
		return;
	VS_INFO(BACKEND, "%s backend %s: size changed from %llu to %llu bytes", be->ops->kind,
		be->identity, (unsigned long long)old, (unsigned long long)new_size);
	pthread_mutex_lock(&be->size_lock);
	if (be->size_fn)
		be->size_fn(be->size_arg, old, new_size);
	pthread_mutex_unlock(&be->size_lock);
}

int vs_backend_resize(struct vs_backend *be, uint64_t new_size, int (*drain)(void *arg), void *arg,
		      char *why, size_t whylen)
{
	uint64_t old = vs_backend_size(be);
	int rc;

	if (why && whylen)
		*why = 0;
	if (!be->ops->resize || be->ro) {
		vs_fail(why, whylen, 0, "a %s%s backend cannot be resized here%s",
			be->ro ? "read-only " : "", be->ops->kind,
			!strcmp(be->ops->kind, "rbd") ? " (resize the image: the LUN follows)"
						      : "");
		return -ENOTSUP;
	}
	if (new_size == old)
		return 0;
	if (be->ops->resize_check && (rc = be->ops->resize_check(be, old, new_size, why, whylen)))
		return rc;
	/* Shrinking: the new end first (bios past it are refused from now on), then the
	 * caller's wait for those in flight, then the storage; growing: the other way. */
	if (new_size < old) {
		vs_backend_size_changed(be, new_size);
		if (drain && (rc = drain(arg))) {
			vs_fail(why, whylen, rc,
				"requests in flight did not complete: the size stays %llu bytes",
				(unsigned long long)old);
			goto undo;
		}
	}
	if ((rc = be->ops->resize(be, old, new_size, why, whylen)) < 0)
		goto undo;
	vs_backend_size_changed(be, new_size);
	return 0;
undo:
	VS_ERROR(BACKEND, "%s backend: resize %llu -> %llu bytes: %s", be->ops->kind,
		 (unsigned long long)old, (unsigned long long)new_size,
		 why && *why ? why : strerror(-rc));
	vs_backend_size_changed(be, old);
	return rc;
}

bool vs_backend_read_only(const struct vs_backend *be)
{
	return be->ro;
}

bool vs_backend_supports_discard(const struct vs_backend *be)
{
	return be->discard;
}

const char *vs_backend_kind(const struct vs_backend *be)
{
	return be->ops->kind;
}

unsigned vs_backend_alignment(const struct vs_backend *be)
{
	return be->mem_align > be->off_align ? be->mem_align : be->off_align;
}

uint64_t vs_backend_bounce_count(const struct vs_backend *be)
{
	return __atomic_load_n(&be->bounces, __ATOMIC_RELAXED);
}

/* The bio's own consistency, then its range; reason set for the trace.  noinline:
 * gcc 12 otherwise sees the short literal behind why and warns inside trace.h's
 * bounded strnlen (-Wstringop-overread), a false positive. */
static __attribute__((noinline)) int bio_check(const struct vs_backend *be,
					       const struct vs_bio *bio, const char **why)
{
	bool data = bio->op == VS_BIO_READ || bio->op == VS_BIO_WRITE;
	uint64_t size;
	size_t total = 0;

	if (!bio->done) {
		*why = "no done callback";
		return -EINVAL;
	}
	if ((unsigned)bio->op > VS_BIO_WRITE_ZEROES) {
		*why = "unknown op";
		return -EINVAL;
	}
	if (data) {
		if (bio->iovcnt < 0 || bio->iovcnt > IOV_MAX || (bio->iovcnt && !bio->iov)) {
			*why = "bad iovec array";
			return -EINVAL;
		}
		if (!vs_iov_total(bio->iov, (unsigned)bio->iovcnt, &total)) {
			*why = "iovec total overflows";
			return -EINVAL;
		}
		if (total != bio->len) {
			*why = "len differs from iovec total";
			return -EINVAL;
		}
	}
	if (bio->op == VS_BIO_FLUSH)
		return 0; /* covers the whole backend; offset and len are ignored */
	size = __atomic_load_n(&be->size, __ATOMIC_RELAXED); /* rbd: resized while in use */
	if (bio->offset > size || bio->len > size - bio->offset) {
		*why = "beyond the end";
		return -ERANGE;
	}
	if (bio->op != VS_BIO_READ && be->ro) {
		*why = "read-only backend";
		return -EROFS;
	}
	if ((bio->op == VS_BIO_DISCARD || bio->op == VS_BIO_WRITE_ZEROES) && !be->discard) {
		*why = "discard not supported";
		return -EOPNOTSUPP;
	}
	return 0;
}

/* A zero-length bio, or a flush (whatever its length): a flush fails at once with the
 * writeback error its backend keeps, else goes to the backend watched for its result. */
static __attribute__((noinline, cold)) int dispatch_empty(struct vs_backend *be,
							  struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	int err;

	if (bio->op != VS_BIO_FLUSH) {
		vs_io_ctx_defer(ctx, bio, 0); /* nothing to do, but done() still runs */
		return 0;
	}
	if ((err = __atomic_load_n(&be->flush_err, __ATOMIC_ACQUIRE))) {
		vs_io_ctx_defer(ctx, bio, err);
		return 0;
	}
	bio->hooked = be; /* its completion passes vs_be_flush_completed */
	return be->ops->submit(be, ctx, bio);
}

static inline int dispatch(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	if (__builtin_expect(bio->len == 0 || bio->op == VS_BIO_FLUSH, 0))
		return dispatch_empty(be, ctx, bio);
	return be->ops->submit(be, ctx, bio);
}

int vs_be_dispatch(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	return dispatch(be, ctx, bio);
}

void vs_be_flush_completed(struct vs_backend *be, int res)
{
	int none = 0;

	/* Errors that say nothing of the writes before the flush are not kept. */
	if (res >= 0 || res == -ETIMEDOUT || res == -EAGAIN || res == -ENOMEM ||
	    res == -ECANCELED || res == -EINTR)
		return;
	if (__atomic_compare_exchange_n(&be->flush_err, &none, res, false, __ATOMIC_RELEASE,
					__ATOMIC_RELAXED))
		VS_ERROR(BACKEND,
			 "%s backend %s: a flush failed (%s): every later flush fails with it "
			 "until the backend is opened again",
			 be->ops->kind, be->identity, strerror(-res));
}

int vs_backend_flush_error(const struct vs_backend *be)
{
	return __atomic_load_n(&be->flush_err, __ATOMIC_ACQUIRE);
}

/* A bio refused by the checks (why) or by the backend's submit (rc): rc, reported.  Out of
 * line (docs/TRACING.md, "Keeping hot functions lean"): the warnings' arguments inline made
 * vs_backend_submit save three more registers on every request in the flavours with sites
 * (bench/callgrind-per-io.sh, target: 10 instructions a command). */
static __attribute__((noinline, cold)) int
submit_refused(const struct vs_backend *be, const struct vs_bio *bio, const char *why, int rc)
{
	if (why)
		VS_WARNING(BACKEND, "%s bio %s off %llu len %llu rejected: %s", be->ops->kind,
			   vs_bio_op_name(bio->op), (unsigned long long)bio->offset,
			   (unsigned long long)bio->len, why);
	else
		VS_WARNING(BACKEND, "%s bio %s off %llu len %llu failed at submit: %s",
			   be->ops->kind, vs_bio_op_name(bio->op), (unsigned long long)bio->offset,
			   (unsigned long long)bio->len, strerror(-rc));
	(void)be, (void)bio; /* the off flavour */
	return rc;
}

int vs_backend_submit(struct vs_backend *be, struct vs_io_ctx *ctx, struct vs_bio *bio)
{
	const char *why = NULL;
	int rc;

	rc = bio_check(be, bio, &why);
	if (__builtin_expect(rc < 0, 0))
		return submit_refused(be, bio, why, rc);
	if (ctx->inflight >= ctx->depth)
		return -EAGAIN;
	bio->delay_us = 0;
	bio->hooked = NULL;
	if (__builtin_expect(be->hooks != NULL, 0) && vs_be_hooks_submit(be, ctx, bio)) {
		ctx->inflight++; /* the hook completed or holds it: done() runs at a later reap */
		return 0;
	}
	rc = dispatch(be, ctx, bio);
	if (rc == 0)
		ctx->inflight++;
	else if (__builtin_expect(rc != -EAGAIN, 0))
		return submit_refused(be, bio, NULL, rc);
	return rc;
}
