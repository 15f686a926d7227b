/* SPDX-License-Identifier: MIT */
/*
 * mem probe: the text of one stack frame, and the tests that end a
 * frame-pointer walk or skip allocator plumbing when blaming a leak. Pure.
 */
#include <linux/types.h>

#include "mem_logic.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *basename_of(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;

	return s ? s + 1 : path;
}

void mem_format_frame(char *buf, size_t len, uint64_t addr, int sym_rc,
		      const struct nt_symbol *sym)
{
	const char *mod = sym ? basename_of(sym->module) : NULL;

	if (sym_rc == 0 && sym && sym->name) {
		if (mod)
			snprintf(buf, len, "%s+0x%" PRIx64 " (%s)", sym->name,
				 sym->offset, mod);
		else
			snprintf(buf, len, "%s+0x%" PRIx64, sym->name, sym->offset);
	} else if (mod) {
		snprintf(buf, len, "%s+0x%" PRIx64, mod, sym->offset);
	} else {
		snprintf(buf, len, "0x%" PRIx64, addr);
	}
	for (char *p = buf; (p = strchr(p, ';')); p++)
		*p = ','; /* C++ names may hold one; frames are ';'-separated */
}

bool mem_frame_implausible(uint64_t addr, uint64_t prev_addr, int sym_rc,
			   const struct nt_symbol *sym)
{
	const char *mod = sym ? basename_of(sym->module) : NULL;

	if (!addr || addr == prev_addr || !mod)
		return true;
	return (sym_rc != 0 || !sym->name || !sym->name[0]) && strncmp(mod, "ld-", 3) == 0;
}

bool mem_frame_is_allocator(const char *name, const char *module,
			    const char *alloc_module)
{
	static const char *const wrappers[] = {
		"operator new", "operator delete", "_Znw", "_Zna", "__libc_",
	};

	if (module && alloc_module && strcmp(module, alloc_module) == 0)
		return true;
	if (!name)
		return false;
	for (size_t i = 0; i < NT_ARRAY_LEN(wrappers); i++)
		if (strncmp(name, wrappers[i], strlen(wrappers[i])) == 0)
			return true;
	return mem_fn_from_name(name) >= 0;
}
