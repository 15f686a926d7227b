// SPDX-License-Identifier: MIT
/*
 * ntcore cuda_gpu: GPU time per launching stack, for flame graphs weighted
 * by GPU microseconds (cuda.gpu_stack events, rendered by the file sink's
 * folded format like the python probe's python.stack). An entry is (pid,
 * launching thread, base stack, leaf: "[gpu] kernel"); published as deltas
 * since the last publication, like python.stack counts. Pure: published by
 * gpu_events.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"

struct fold_ent {
	uint32_t pid, tid, base, name;
	uint64_t ns, launches;
	uint64_t us_out, ns_out, launches_out; /* published so far */
	char comm[16];
	bool gone;
};

/* An entry's identity. */
struct fold_key {
	uint32_t pid, tid, base, name;
};

struct gpu_folded {
	struct fold_ent *e;
	uint32_t n, cap, max;
	struct nt_hmap at; /* struct fold_key -> uint32_t index into e */
	uint64_t overflow_ns;
};

struct gpu_folded *gpu_folded_new(uint32_t max_stacks)
{
	struct gpu_folded *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->max = max_stacks ? max_stacks : 100000;
	nt_hmap_init(&f->at, sizeof(struct fold_key), sizeof(uint32_t), 0);
	return f;
}

void gpu_folded_free(struct gpu_folded *f)
{
	if (!f)
		return;
	free(f->e);
	nt_hmap_fini(&f->at);
	free(f);
}

static struct fold_ent *find(struct gpu_folded *f, uint32_t pid, uint32_t tid,
			     uint32_t base, uint32_t name, bool create)
{
	struct fold_key key = { pid, tid, base, name };
	uint32_t *idx = nt_hmap_get(&f->at, &key);

	if (idx && !f->e[*idx].gone)
		return &f->e[*idx];
	if (!create || f->n >= f->max)
		return NULL;
	if (f->n == f->cap) {
		uint32_t cap = f->cap ? f->cap * 2 : 256;
		struct fold_ent *g = realloc(f->e, cap * sizeof(*g));

		if (!g)
			return NULL;
		f->e = g;
		f->cap = cap;
	}
	idx = nt_hmap_put(&f->at, &key, NULL);
	if (!idx)
		return NULL;
	*idx = f->n;
	memset(&f->e[f->n], 0, sizeof(f->e[0]));
	f->e[f->n].pid = pid;
	f->e[f->n].tid = tid;
	f->e[f->n].base = base;
	f->e[f->n].name = name;
	return &f->e[f->n++];
}

void gpu_folded_add(struct gpu_folded *f, uint32_t pid, uint32_t tid,
		    const char *comm, uint32_t base, uint32_t name, uint64_t ns)
{
	struct fold_ent *e = find(f, pid, tid, base, name, true);

	if (!e) /* over max_stacks: one "[other stacks]" entry per process */
		e = find(f, pid, 0, 0, 0, true);
	if (!e) {
		f->overflow_ns += ns;
		return;
	}
	e->ns += ns;
	e->launches++;
	if (comm && comm[0])
		snprintf(e->comm, sizeof(e->comm), "%s", comm);
}

void gpu_folded_emit(struct gpu_folded *f, uint32_t pid, gpu_folded_fn fn, void *arg)
{
	for (uint32_t i = 0; i < f->n; i++) {
		struct fold_ent *e = &f->e[i];
		uint64_t us = e->ns / 1000;

		if (e->gone || (pid && e->pid != pid) || e->ns == e->ns_out)
			continue;
		fn(arg, e->pid, e->tid, e->comm, e->base, e->name, us - e->us_out,
		   e->ns - e->ns_out, e->launches - e->launches_out);
		e->us_out = us;
		e->ns_out = e->ns;
		e->launches_out = e->launches;
	}
}

/* Entries of a finished process are dropped (the index is rebuilt: the
 * others move down). */
void gpu_folded_forget(struct gpu_folded *f, uint32_t pid)
{
	uint32_t kept = 0;

	for (uint32_t i = 0; i < f->n; i++)
		if (f->e[i].pid != pid)
			f->e[kept++] = f->e[i];
	f->n = kept;
	nt_hmap_clear(&f->at);
	for (uint32_t i = 0; i < f->n; i++) {
		struct fold_key key = { f->e[i].pid, f->e[i].tid, f->e[i].base,
					f->e[i].name };
		uint32_t *idx = nt_hmap_put(&f->at, &key, NULL);

		if (idx)
			*idx = i;
	}
}
