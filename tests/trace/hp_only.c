/* SPDX-License-Identifier: MIT */
/*
 * A request loop whose only trace sites are hot-path (_HP) ones, compiled three
 * times by check_hp_codegen.sh's test: cold with and without the sites (must be
 * the same machine code: _HP sites cost nothing in cold builds) and all with the
 * sites (must differ: proves the comparison sees them).
 *
 * The #ifdefs exist only to build the "without" object; real call sites never
 * need them.
 */
#include <stddef.h>

#include <vioscope/trace.h>

struct hp_req {
	unsigned tag;
	unsigned len;
	unsigned long long lba;
	int status;
};

int vs_test_hp_process(struct hp_req *r, int n)
{
	int done = 0;

#ifdef WITH_SITES
	VS_VERBOSE_HP(IO, "--> enter");
#endif
	for (int i = 0; i < n; i++) {
#ifdef WITH_SITES
		VS_VERBOSE_HP(IO, "req %u lba %llu len %u", r[i].tag, r[i].lba, r[i].len);
#endif
		if (r[i].len == 0) {
#ifdef WITH_SITES
			VS_ERROR_HP(IO, "req %u: empty", r[i].tag);
#endif
			r[i].status = -22;
			continue;
		}
		r[i].status = 0;
		done++;
	}
#ifdef WITH_SITES
	VS_VERBOSE_HP(IO, "<-- exit rc=%d", done);
#endif
	return done;
}

/* A small hot function with a six-argument site in an unlikely branch (vioscope's SCSI
 * completion, shortened).  Its record out of line (_OOL), the all flavour's prologue
 * saves the registers it saves without the site; inline, more, paid on every call with
 * the site off (check_hp_codegen.sh --saves; <vioscope/trace_impl.h>, VS__OUT_OF_LINE). */
struct hp_cmd {
	unsigned long long tag;
	const unsigned char *cdb;
	int status;
	unsigned char sense[18];
	unsigned sense_len;
	size_t in_len, out_len, in_xfer, out_xfer, in_resid, out_resid;
	void *buf;
	void (*done)(struct hp_cmd *c);
};

void vs_test_hp_release(void *buf);

#define HP_COMPLETE(name, SITE)                                                                    \
	void name(struct hp_cmd *c);                                                               \
	void name(struct hp_cmd *c)                                                                \
	{                                                                                          \
		if (c->status == 0) {                                                              \
			c->in_resid = c->in_len - c->in_xfer;                                      \
			c->out_resid = c->out_len - c->out_xfer;                                   \
		} else {                                                                           \
			c->in_resid = c->in_len;                                                   \
			c->out_resid = c->out_len;                                                 \
		}                                                                                  \
		vs_test_hp_release(c->buf);                                                        \
		c->buf = NULL;                                                                     \
		if (__builtin_expect(c->status != 0, 0))                                           \
			SITE(IO, "tag %#llx op %#x status %#x sense %s resid in %zu out %zu",      \
			     c->tag, c->cdb[0], c->status,                                         \
			     VS_BYTES(c->sense, c->sense_len < 18 ? c->sense_len : 18),            \
			     c->in_resid, c->out_resid);                                           \
		c->done(c);                                                                        \
	}
#ifdef WITH_SITES
HP_COMPLETE(vs_test_hp_complete, VS_VERBOSE_HP_OOL)
HP_COMPLETE(vs_test_hp_complete_inline, VS_VERBOSE_HP)
#else
#define NO_SITE(...) ((void)0)
HP_COMPLETE(vs_test_hp_complete, NO_SITE)
HP_COMPLETE(vs_test_hp_complete_inline, NO_SITE)
#endif
