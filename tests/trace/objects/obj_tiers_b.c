/* SPDX-License-Identifier: MIT */
/* trace_obj_tiers.so, second translation unit, compiled in the cold flavour: its _HP
 * site is compiled out, its cold site is there. */
#define VS_TRACE_FLAGS(X) X(NET) X(DISK)
#include <vioscope/trace.h>

void tiers_b(unsigned n);

void tiers_b(unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		VS_INFO(NET, "tiers b cold %u", i);
		VS_VERBOSE_HP(DISK, "tiers b hot %u", i);
	}
}
