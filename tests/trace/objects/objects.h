/* SPDX-License-Identifier: MIT */
/*
 * The traced objects of trace.objects (test_objects.c): a program (provider host),
 * the shared library it links (liba) and the modules it loads (plug, a clashing
 * liba, mixed).  Each is its own provider with its own flags; liba and plug have
 * the same flag names.
 */
#ifndef VS_TEST_TRACE_OBJECTS_H
#define VS_TEST_TRACE_OBJECTS_H

/* libtrace_obj_a.so (provider liba, flags NET DISK, flavour all): per i < n,
 * "liba net %u" (NET, info), "liba disk hot %u" (DISK, verbose _HP), and one
 * "liba bytes %s" with VS_BYTES of {0x00, 0xff, 0x10}. */
void obj_a_emit(unsigned n);

/* Every module exports this: per i < n, "<what> %u load %u" on its NET flag. */
typedef void (*obj_module_emit_fn)(unsigned n, unsigned load);
#define OBJ_MODULE_EMIT "module_emit"

#endif
