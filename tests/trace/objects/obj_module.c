/* SPDX-License-Identifier: MIT */
/* A module the test program dlopen()s.  Built several times (tests/trace/
 * CMakeLists.txt): the plug-in (provider plug, flags NET DISK like liba's) in the
 * cold and cold-print flavours, and a module that declares provider liba with other
 * flags than libtrace_obj_a.so does (OBJ_CLASH): a clash. */
#ifdef OBJ_CLASH
#define VS_TRACE_FLAGS(X) X(NET) X(CPU)
#else
#define VS_TRACE_FLAGS(X) X(NET) X(DISK)
#endif
#include <vioscope/trace.h>

#include "objects.h"

__attribute__((visibility("default"))) void module_emit(unsigned n, unsigned load)
{
	for (unsigned i = 0; i < n; i++)
		VS_INFO(NET, "%s %u load %u", OBJ_WHAT, i, load);
}
