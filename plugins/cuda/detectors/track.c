/* SPDX-License-Identifier: MIT */
#include "track.h"

#include <string.h>

#include "../cuda.h"

int track_init(struct track *t, bool include_host, uint32_t stack_limit)
{
	memset(t, 0, sizeof(*t));
	t->include_host = include_host;
	stacktab_init(&t->st, stack_limit);
	return amap_init(&t->map);
}

void track_fini(struct track *t)
{
	amap_fini(&t->map);
	stacktab_fini(&t->st);
}

bool track_kind_ok(const struct track *t, uint32_t kind)
{
	/* UNKNOWN: a probe that does not say; count it as device memory */
	return kind == NT_CUDA_MEM_UNKNOWN || nt_cuda_mem_on_device(kind) ||
	       (t->include_host && kind == NT_CUDA_MEM_HOST);
}

uint32_t track_stack(struct track *t, const struct cuev *e)
{
	return stacktab_intern(&t->st, e->stack.p, e->stack.len);
}

enum track_res track_alloc(struct track *t, const struct cuev *e,
			   struct amap_entry *entry)
{
	struct amap_entry a, old;
	int r;

	if (e->ptr == 0 || cuev_failed(e) || !track_kind_ok(t, e->kind)) {
		t->ignored++;
		return TRACK_IGNORED;
	}
	if (amap_lookup(&t->map, e->pid, e->ptr, &old) && old.size == e->size &&
	    old.pad != e->layer && e->ts - old.ts_ns < 1000000000ULL) {
		/* the same call at the other layer: keep the runtime's stack */
		t->dup_allocs++;
		if (e->layer == NT_CUDA_LAYER_RUNTIME || !old.stack) {
			uint32_t sid = track_stack(t, e);

			if (sid) {
				old.stack = sid;
				old.api = e->api;
				old.tid = e->tid;
				old.pad = e->layer;
				amap_alloc(&t->map, &old);
				/* amap_alloc counted a replacement: undo */
				struct amap_proc *p = amap_proc(&t->map, e->pid, old.dev);

				if (p) {
					p->replaced--;
					p->n_alloc--;
				}
			}
		}
		if (entry)
			*entry = old;
		return TRACK_DUP;
	}
	memset(&a, 0, sizeof(a));
	a.ptr = e->ptr;
	a.size = e->size;
	a.ts_ns = e->ts;
	a.pid = e->pid;
	a.tid = e->tid;
	a.dev = e->device;
	a.stack = track_stack(t, e);
	a.api = e->api;
	a.pad = e->layer; /* the layer that reported it */
	r = amap_alloc(&t->map, &a);
	if (r < 0)
		return TRACK_NOMEM;
	if (entry)
		*entry = a;
	return r == 1 ? TRACK_REPLACED : TRACK_NEW;
}

enum track_res track_free(struct track *t, const struct cuev *e,
			  struct amap_entry *entry)
{
	struct amap_entry old;

	if (e->ptr == 0 || cuev_failed(e))
		return TRACK_IGNORED;
	if (amap_lookup(&t->map, e->pid, e->ptr, &old)) {
		amap_free(&t->map, e->pid, e->ptr, e->device, &old);
		t->recent[t->rhead].ptr = e->ptr;
		t->recent[t->rhead].pid = e->pid;
		t->recent[t->rhead].layer = e->layer;
		t->rhead = (t->rhead + 1) % TRACK_RECENT;
		if (entry)
			*entry = old;
		return TRACK_FREED;
	}
	for (uint32_t i = 0; i < TRACK_RECENT; i++)
		if (t->recent[i].ptr == e->ptr && t->recent[i].pid == e->pid &&
		    t->recent[i].layer != e->layer) {
			t->recent[i].ptr = 0; /* fold once */
			t->dup_frees++;
			return TRACK_DUP;
		}
	if (!track_kind_ok(t, e->kind))
		return TRACK_IGNORED;
	t->unknown_frees++;
	{
		struct amap_proc *p = amap_proc(&t->map, e->pid,
						e->device < 0 ? 0 : e->device);

		if (p)
			p->unmatched_frees++;
	}
	return TRACK_UNKNOWN;
}
