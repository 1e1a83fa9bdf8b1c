/* SPDX-License-Identifier: MIT */
/* The off flavour: no runtime at all, only the API so programs still link. */
#include <errno.h>
#include <stddef.h>

#include <vioscope/trace.h>

int vs_trace_set(int level, uint32_t flag_mask)
{
	(void)level;
	(void)flag_mask;
	return -ENOTSUP;
}

int vs_trace_set_spec(const char *spec)
{
	(void)spec;
	return -ENOTSUP;
}

void vs_trace_keep_on_exit(int keep)
{
	(void)keep;
}

const char *vs_trace_shm_path(void)
{
	return NULL;
}

const char *vs_trace_flavour(void)
{
	return "off";
}

/* Internal hooks the tools call whatever their flavour. */
int vs__print_to(const char *path)
{
	(void)path;
	return -ENOTSUP;
}
