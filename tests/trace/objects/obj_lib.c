/* SPDX-License-Identifier: MIT */
/* libtrace_obj_a.so: a traced shared library (provider liba, built in the all
 * flavour: its _HP site is compiled in). */
#define VS_TRACE_FLAGS(X) X(NET) X(DISK)
#include <vioscope/trace.h>

#include "objects.h"

void obj_a_emit(unsigned n)
{
	static const unsigned char bytes[] = {0x00, 0xff, 0x10};
	for (unsigned i = 0; i < n; i++) {
		VS_INFO(NET, "liba net %u", i);
		VS_VERBOSE_HP(DISK, "liba disk hot %u", i);
	}
	VS_INFO(DISK, "liba bytes %s", VS_BYTES(bytes, sizeof bytes));
}
