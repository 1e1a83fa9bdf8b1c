/* SPDX-License-Identifier: MIT */
/* trace_obj_mixed.so, second translation unit: provider mixed with flags ONE THREE. */
#define VS_TRACE_FLAGS(X) X(ONE) X(THREE)
#include <vioscope/trace.h>

void mixed_b(unsigned n);

void mixed_b(unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		VS_INFO(THREE, "mixed b %u", i);
}
