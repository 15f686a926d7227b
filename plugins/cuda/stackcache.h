/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: formatted stacks kept by (pid, frames). A training step
 * launches from a few hundred call sites, again and again: symbolizing and
 * formatting each launch's stack was most of the probe's user-side time per
 * launch record (and what made it fall behind at 400k launches/s). A stack
 * is kept only when every frame was named with its module, so a frame that
 * a later read of the process's maps would name is never frozen unnamed.
 * Direct-mapped, bounded (NT_CUDA_SC_SLOTS), a process's stacks forgotten
 * at its exit. Ownership: the cache owns its copies; text returned by get
 * is valid until the next put or forget.
 */
#ifndef NTCORE_CUDA_STACKCACHE_H
#define NTCORE_CUDA_STACKCACHE_H

#include <stddef.h>
#include <stdint.h>

#define NT_CUDA_SC_SLOTS 2048

struct nt_cuda_sc_slot {
	uint64_t hash;
	uint32_t pid, n;
	const char *top;  /* frame 0's fallback name (static text) */
	uint64_t *ips;    /* n frames, then the text, in one allocation */
	char *text;
	size_t len;
};

struct nt_cuda_stack_cache {
	struct nt_cuda_sc_slot *slots; /* NULL until the first put */
	uint64_t hits, misses;
};

/* The text kept for these frames (*len set), or NULL. */
const char *nt_cuda_sc_get(struct nt_cuda_stack_cache *c, uint32_t pid,
			   const uint64_t *ips, uint32_t n, const char *top,
			   size_t *len);
void nt_cuda_sc_put(struct nt_cuda_stack_cache *c, uint32_t pid,
		    const uint64_t *ips, uint32_t n, const char *top,
		    const char *text, size_t len);
void nt_cuda_sc_forget_pid(struct nt_cuda_stack_cache *c, uint32_t pid);
void nt_cuda_sc_fini(struct nt_cuda_stack_cache *c);

#endif
