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

struct gpu_folded {
	struct fold_ent *e;
	uint32_t n, cap, max;
	struct gpu_map at; /* hash of the key -> index (probed on collision) */
	uint64_t overflow_ns;
};

struct gpu_folded *gpu_folded_new(uint32_t max_stacks)
{
	struct gpu_folded *f = calloc(1, sizeof(*f));

	if (f)
		f->max = max_stacks ? max_stacks : 100000;
	return f;
}

void gpu_folded_free(struct gpu_folded *f)
{
	if (!f)
		return;
	free(f->e);
	gpu_map_free(&f->at);
	free(f);
}

static uint64_t key_hash(uint32_t pid, uint32_t tid, uint32_t base, uint32_t name)
{
	return gpu_mix64(((uint64_t)pid << 32 | tid) ^ gpu_mix64((uint64_t)base << 32 | name));
}

static struct fold_ent *find(struct gpu_folded *f, uint32_t pid, uint32_t tid,
			     uint32_t base, uint32_t name, bool create)
{
	uint64_t h = key_hash(pid, tid, base, name), idx;

	while (gpu_map_get(&f->at, h, &idx)) {
		struct fold_ent *e = &f->e[idx];

		if (e->pid == pid && e->tid == tid && e->base == base && e->name == name &&
		    !e->gone)
			return e;
		h = gpu_mix64(h + 1);
	}
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
	if (gpu_map_put(&f->at, h, f->n))
		return NULL;
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

/* Entries of a finished process are dropped (the map is rebuilt). */
void gpu_folded_forget(struct gpu_folded *f, uint32_t pid)
{
	uint32_t kept = 0;

	for (uint32_t i = 0; i < f->n; i++)
		if (f->e[i].pid != pid)
			f->e[kept++] = f->e[i];
	f->n = kept;
	gpu_map_free(&f->at);
	for (uint32_t i = 0; i < f->n; i++) {
		uint64_t h = key_hash(f->e[i].pid, f->e[i].tid, f->e[i].base, f->e[i].name);

		while (gpu_map_get(&f->at, h, NULL))
			h = gpu_mix64(h + 1);
		gpu_map_put(&f->at, h, i);
	}
}
