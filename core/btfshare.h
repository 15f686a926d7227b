/* SPDX-License-Identifier: MIT */
/*
 * The kernel BTF parsed once per run: the core's definitions of libbpf's
 * btf__load_vmlinux_btf() and btf__free(), which libbpf and the plugins
 * call (btfshare.c says how and why).
 */
#ifndef NTCORE_CORE_BTFSHARE_H
#define NTCORE_CORE_BTFSHARE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

struct nt_btfshare_stats {
	uint64_t parses;   /* real parses of the kernel BTF (1 per run) */
	uint64_t calls;    /* btf__load_vmlinux_btf() calls served */
	uint64_t parse_ns; /* time the parse took */
};

/* Free the shared parse (daemon exit); a later call parses again. */
void nt_btfshare_release(void);
/* A plugin holds the parse (host->vmlinux_btf: valid until exit). */
void nt_btfshare_pin(void);
/* Once every BPF object is loaded: free the parse (~5 MB) unless a plugin
 * holds it; a later load parses again. True when it was freed. */
bool nt_btfshare_release_unpinned(void);
struct nt_btfshare_stats nt_btfshare_stats(void);

#endif
