/* SPDX-License-Identifier: MIT */
/* trace_obj_mixed.so, first translation unit: provider mixed with flags ONE TWO;
 * the second unit (obj_mixed_b.c) declares ONE THREE: a clash inside one object. */
#define VS_TRACE_FLAGS(X) X(ONE) X(TWO)
#include <vioscope/trace.h>

#include "objects.h"

void mixed_b(unsigned n);

__attribute__((visibility("default"))) void module_emit(unsigned n, unsigned load)
{
	for (unsigned i = 0; i < n; i++)
		VS_INFO(ONE, "mixed a %u load %u", i, load);
	mixed_b(n);
}
