/* SPDX-License-Identifier: MIT */
/*
 * mem probe: the allocator functions it can probe, by name and number,
 * and which of them need a return probe. Pure.
 */
#include <linux/types.h>

#include "mem_logic.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

static const char *const fn_names[MEM_FN_COUNT] = {
	[MEM_FN_MALLOC] = "malloc",
	[MEM_FN_CALLOC] = "calloc",
	[MEM_FN_REALLOC] = "realloc",
	[MEM_FN_FREE] = "free",
	[MEM_FN_POSIX_MEMALIGN] = "posix_memalign",
	[MEM_FN_ALIGNED_ALLOC] = "aligned_alloc",
	[MEM_FN_MEMALIGN] = "memalign",
	[MEM_FN_VALLOC] = "valloc",
	[MEM_FN_PVALLOC] = "pvalloc",
	[MEM_FN_MMAP] = "mmap",
	[MEM_FN_MUNMAP] = "munmap",
};

const char *mem_fn_name(unsigned fn)
{
	return fn < MEM_FN_COUNT ? fn_names[fn] : NULL;
}

int mem_fn_from_name(const char *name)
{
	if (!name)
		return -1;
	for (unsigned i = 0; i < MEM_FN_COUNT; i++)
		if (i != MEM_FN_MMAP && i != MEM_FN_MUNMAP &&
		    strcmp(fn_names[i], name) == 0)
			return (int)i;
	return -1;
}

bool mem_fn_needs_return(unsigned fn)
{
	return fn != MEM_FN_FREE && fn != MEM_FN_MUNMAP && fn < MEM_FN_COUNT;
}
