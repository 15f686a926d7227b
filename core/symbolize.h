/* SPDX-License-Identifier: MIT */
/*
 * User-space symbolization for traced processes with elfutils (libdwfl):
 * symbol, offset, module and, with debug info, file:line; C++ names are
 * demangled. One Dwfl per process, refreshed when an address falls outside
 * every known module (a library loaded late), and a per-process cache of
 * resolved addresses. Strings stay valid until the process is forgotten.
 */
#ifndef NTCORE_CORE_SYMBOLIZE_H
#define NTCORE_CORE_SYMBOLIZE_H

#include <stdint.h>

#include "ntcore/plugin.h"

#define NT_SYM_PROCS 64

struct nt_sym_proc;

struct nt_symbolizer {
	struct nt_sym_proc *procs[NT_SYM_PROCS];
	uint64_t clock; /* for least-recently-used eviction */
	/* The C++ runtime's demangler, loaded at the first C++ name: linking
	 * libstdc++ cost 1.1 MB of RSS (it and libm, libgcc_s) in every run,
	 * most of which never meets a C++ symbol. Owned: dlclose at fini. */
	void *cxx_lib;
	char *(*cxa_demangle)(const char *mangled, char *buf, size_t *len, int *status);
	bool cxx_tried;
};

void nt_symbolizer_init(struct nt_symbolizer *s);
void nt_symbolizer_fini(struct nt_symbolizer *s);
/* 0 on success; -ESRCH when the process is gone, -ENOENT when no module
 * or symbol covers the address (out->module may still be set). */
int nt_symbolize(struct nt_symbolizer *s, uint32_t pid, uint64_t addr,
		 struct nt_symbol *out);
/* Drop what is known of a process if it was first read before `before_ns`
 * (CLOCK_MONOTONIC, e.g. an exec's time: a map read after the exec, by a
 * probe that held the process, stays). UINT64_MAX drops it whatever. */
void nt_symbolizer_forget(struct nt_symbolizer *s, uint32_t pid,
			  uint64_t before_ns);

#endif
