/* SPDX-License-Identifier: MIT */
/* trace_obj_tiers.so, first translation unit, compiled in the all flavour: provider
 * tiers (flags NET DISK), like the second unit (obj_tiers_b.c), compiled cold.  One
 * object, two tiers: each unit's sites work at its own. */
#define VS_TRACE_FLAGS(X) X(NET) X(DISK)
#include <vioscope/trace.h>

#include "objects.h"

void tiers_b(unsigned n);

__attribute__((visibility("default"))) void module_emit(unsigned n, unsigned load)
{
	for (unsigned i = 0; i < n; i++) {
		VS_INFO(NET, "tiers a cold %u load %u", i, load);
		VS_VERBOSE_HP(DISK, "tiers a hot %u", i);
	}
	tiers_b(n);
}
