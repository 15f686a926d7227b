/* SPDX-License-Identifier: MIT */
/* The decoder's per-process state: processes, the allocation map and
 * what is outstanding per device. */
#include "cuda_decode_priv.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* Processes                                                           */
/* ------------------------------------------------------------------ */

void nt_cuda_state_init(struct nt_cuda_state *st, nt_cuda_sym_fn sym,
			void *sym_arg)
{
	memset(st, 0, sizeof(*st));
	nt_hmap_init(&st->procs, sizeof(uint32_t), sizeof(struct nt_cuda_proc *),
		     0);
	st->sym = sym;
	st->sym_arg = sym_arg;
	st->stack_depth = NT_CUDA_STACK_MAX;
	nt_cuda_koff_init(&st->koff);
}

_Static_assert(NT_CUDA_API_COUNT <= NT_CUDA_FN_BASE,
	       "api ids and function-table cookies overlap");

/* Bound of each per-process graph table and of the handle table. */
#define PROC_HANDLES_MAX 65536

static void proc_free(struct nt_cuda_proc *p)
{
	if (!p)
		return;
	nt_cuda_graphs_fini(&p->graphs);
	nt_hmap_fini(&p->vmm);
	free(p->blocks);
	free(p->outst);
	nt_cuda_smap_free(&p->knames);
	nt_cuda_smap_free(&p->kparent);
	nt_cuda_knproc_fini(&p->kn);
	free(p);
}

void nt_cuda_state_fini(struct nt_cuda_state *st)
{
	struct nt_hmap_iter it;

	nt_cuda_sc_fini(&st->stacks);
	for (nt_hmap_iter_init(&it, &st->procs); nt_hmap_iter_next(&it);)
		proc_free(*(struct nt_cuda_proc **)it.val);
	nt_hmap_fini(&st->procs);
}

struct nt_cuda_proc *nt_cuda_proc_find(const struct nt_cuda_state *st,
				       uint32_t pid)
{
	struct nt_cuda_proc **pp = nt_hmap_get(&st->procs, &pid);

	return pp ? *pp : NULL;
}

struct nt_cuda_proc *nt_cuda_proc_get(struct nt_cuda_state *st, uint32_t pid)
{
	struct nt_cuda_proc **pp, *p = nt_cuda_proc_find(st, pid);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	pp = nt_hmap_put(&st->procs, &pid, NULL);
	if (!pp) {
		free(p);
		return NULL;
	}
	*pp = p;
	p->pid = pid;
	nt_cuda_graphs_init(&p->graphs, PROC_HANDLES_MAX);
	nt_hmap_init(&p->vmm, sizeof(uint64_t), sizeof(struct nt_cuda_vmm),
		     PROC_HANDLES_MAX);
	nt_hmap_init(&p->knames, sizeof(uint64_t), sizeof(char *), 0);
	nt_hmap_init(&p->kparent, sizeof(uint64_t), sizeof(char *), 0);
	nt_cuda_knproc_init(&p->kn);
	return p;
}

void nt_cuda_proc_drop(struct nt_cuda_state *st, uint32_t pid)
{
	nt_cuda_sc_forget_pid(&st->stacks, pid);
	proc_free(nt_cuda_proc_find(st, pid));
	nt_hmap_del(&st->procs, &pid);
}

/* ------------------------------------------------------------------ */
/* Allocation map                                                      */
/* ------------------------------------------------------------------ */

/* Index of the first block with ptr >= addr. */
static size_t block_lower(const struct nt_cuda_proc *p, uint64_t addr)
{
	size_t lo = 0, hi = p->nblocks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->blocks[mid].ptr < addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct nt_cuda_block *nt_cuda_block_at(const struct nt_cuda_proc *p,
					     uint64_t addr)
{
	size_t i = block_lower(p, addr);

	if (i < p->nblocks && p->blocks[i].ptr == addr)
		return &p->blocks[i];
	if (i == 0)
		return NULL;
	i--;
	if (addr - p->blocks[i].ptr < (p->blocks[i].size ? p->blocks[i].size : 1))
		return &p->blocks[i];
	return NULL;
}

static struct nt_cuda_outst *outst_slot(struct nt_cuda_proc *p, int32_t dev,
					uint32_t kind)
{
	struct nt_cuda_outst *n;

	for (size_t i = 0; i < p->noutst; i++)
		if (p->outst[i].device == dev && p->outst[i].kind == kind)
			return &p->outst[i];
	n = realloc(p->outst, (p->noutst + 1) * sizeof(*n));
	if (!n)
		return NULL;
	p->outst = n;
	n = &p->outst[p->noutst++];
	n->device = dev;
	n->kind = kind;
	n->bytes = 0;
	return n;
}

uint64_t nt_cuda_outstanding(const struct nt_cuda_proc *p, int32_t device,
			     uint32_t kind)
{
	for (size_t i = 0; i < p->noutst; i++)
		if (p->outst[i].device == device && p->outst[i].kind == kind)
			return p->outst[i].bytes;
	return 0;
}

/* Record a new block; a block at the same address (a free we missed) is
 * replaced. Returns the outstanding bytes of its (device, kind) after. */
uint64_t nt_cuda_block_add(struct nt_cuda_proc *p,
			   const struct nt_cuda_block *b)
{
	size_t i = block_lower(p, b->ptr);
	struct nt_cuda_outst *o;

	if (i < p->nblocks && p->blocks[i].ptr == b->ptr) {
		struct nt_cuda_outst *old =
			outst_slot(p, p->blocks[i].device, p->blocks[i].kind);

		if (old)
			old->bytes -= old->bytes < p->blocks[i].size
					      ? old->bytes
					      : p->blocks[i].size;
		if (nt_cuda_mem_on_device(p->blocks[i].kind))
			p->device_bytes_now -= p->blocks[i].size;
		p->blocks[i] = *b;
	} else {
		if (p->nblocks == p->capblocks) {
			size_t ncap = p->capblocks ? p->capblocks * 2 : 64;
			struct nt_cuda_block *nb =
				realloc(p->blocks, ncap * sizeof(*nb));

			if (!nb)
				return 0;
			p->blocks = nb;
			p->capblocks = ncap;
		}
		memmove(&p->blocks[i + 1], &p->blocks[i],
			(p->nblocks - i) * sizeof(*b));
		p->blocks[i] = *b;
		p->nblocks++;
	}
	if (nt_cuda_mem_on_device(b->kind)) {
		p->device_bytes_now += b->size;
		if (p->device_bytes_now > p->tot.peak_device_bytes)
			p->tot.peak_device_bytes = p->device_bytes_now;
	}
	o = outst_slot(p, b->device, b->kind);
	if (!o)
		return 0;
	o->bytes += b->size;
	return o->bytes;
}

/* Remove the block at exactly ptr; false if unknown. */
bool nt_cuda_block_remove(struct nt_cuda_proc *p, uint64_t ptr,
			  struct nt_cuda_block *out)
{
	size_t i = block_lower(p, ptr);
	struct nt_cuda_outst *o;

	if (i >= p->nblocks || p->blocks[i].ptr != ptr)
		return false;
	*out = p->blocks[i];
	memmove(&p->blocks[i], &p->blocks[i + 1],
		(p->nblocks - i - 1) * sizeof(*out));
	p->nblocks--;
	o = outst_slot(p, out->device, out->kind);
	if (o)
		o->bytes -= o->bytes < out->size ? o->bytes : out->size;
	if (nt_cuda_mem_on_device(out->kind))
		p->device_bytes_now -= p->device_bytes_now < out->size
					       ? p->device_bytes_now
					       : out->size;
	return true;
}

