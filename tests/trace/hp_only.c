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
