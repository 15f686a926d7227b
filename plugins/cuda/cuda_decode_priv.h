/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: what the decoder's files share and no one else uses.
 * cuda_decode.c turns raw records into events; cuda_proc.c keeps each
 * process's state and allocation map; cuda_stack.c formats stacks;
 * cuda_names.c names kernels; cuda_report.c writes the per-process
 * report. Ownership as in cuda_decode.h.
 */
#ifndef NTCORE_CUDA_DECODE_PRIV_H
#define NTCORE_CUDA_DECODE_PRIV_H

#include <errno.h>
#include <stdlib.h>

#include "cuda_decode.h"

/* The kernel-name maps: u64 handle -> owned string (a char * value). */
static inline void nt_cuda_smap_free(struct nt_hmap *m)
{
	struct nt_hmap_iter it;

	for (nt_hmap_iter_init(&it, m); nt_hmap_iter_next(&it);)
		free(*(char **)it.val);
	nt_hmap_fini(m);
}

static inline const char *nt_cuda_smap_get(const struct nt_hmap *m, uint64_t key)
{
	char **v = nt_hmap_get(m, &key);

	return v ? *v : NULL;
}

/* Takes ownership of val (freed on failure). */
static inline int nt_cuda_smap_put(struct nt_hmap *m, uint64_t key, char *val)
{
	char **v;

	if (!val)
		return -ENOMEM;
	v = nt_hmap_put(m, &key, NULL);
	if (!v) {
		free(val);
		return -ENOMEM;
	}
	free(*v);
	*v = val;
	return 0;
}

/* The allocation map (cuda_proc.c): record a new block (one at the same
 * address, a free we missed, is replaced), returning the outstanding bytes
 * of its (device, kind) after; remove the block at exactly ptr, false if
 * unknown. */
uint64_t nt_cuda_block_add(struct nt_cuda_proc *p,
			   const struct nt_cuda_block *b);
bool nt_cuda_block_remove(struct nt_cuda_proc *p, uint64_t ptr,
			  struct nt_cuda_block *out);

#endif /* NTCORE_CUDA_DECODE_PRIV_H */
