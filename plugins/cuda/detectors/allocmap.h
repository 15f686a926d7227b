/* SPDX-License-Identifier: MIT */
/*
 * Live device allocations, keyed by (pid, device pointer), with their
 * allocation stacks interned in a string table, plus per (pid, device)
 * totals. Pure logic shared by cuda_memleak, cuda_oom and cuda_frag.
 */
#ifndef CUDA_DET_ALLOCMAP_H
#define CUDA_DET_ALLOCMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/kit/hmap.h"

/* ---- interned stack texts (the probe's ';'-separated frames); id 0 = none ---- */
struct stacktab {
	char **str;           /* owned copies; str[0] unused */
	uint32_t n, cap;
	struct nt_hmap index; /* struct nt_hstr (into str[]) -> uint32_t id */
	uint32_t max;     /* most distinct stacks kept; then `overflow_id` */
	uint32_t overflow_id;
};

void stacktab_init(struct stacktab *t, uint32_t max);
void stacktab_fini(struct stacktab *t);
/* Returns the id of the text (n bytes), interning it; 0 for an empty text. */
uint32_t stacktab_intern(struct stacktab *t, const char *s, size_t n);
/* The text of an id, "" for 0 or an unknown id. */
const char *stacktab_get(const struct stacktab *t, uint32_t id);

/* ---- live allocations ---- */
struct amap_entry {
	uint64_t ptr;
	uint64_t size;
	uint64_t ts_ns;
	uint32_t pid;
	uint32_t tid;
	int32_t dev;
	uint32_t stack; /* stacktab id */
	uint32_t aux;   /* owner's use (cuda_frag: timeline record index) */
	uint32_t api;   /* allocating function (NT_CUDA_API_*) */
	uint32_t pad;   /* track.c: the layer that reported it */
};

struct amap_proc {
	uint32_t pid;
	int32_t dev;
	uint64_t live_bytes, live_count, peak_bytes;
	uint64_t n_alloc, n_free, n_failed;
	uint64_t freed_bytes;
	uint64_t unmatched_frees; /* frees of pointers we never saw allocated */
	uint64_t replaced;        /* allocs at a live address (a free we missed) */
};

struct amap {
	struct nt_hmap live;   /* (pid, ptr) -> struct amap_entry */
	struct amap_proc *procs;
	size_t nprocs, cprocs;
};

int amap_init(struct amap *m);
void amap_fini(struct amap *m);
/* Records a live allocation. Returns 1 when it replaced an entry at the same
 * (pid, ptr) (whose free was missed), 0 otherwise, -ENOMEM on failure. */
int amap_alloc(struct amap *m, const struct amap_entry *a);
/* Removes (pid, ptr); copies it to *out when found. Returns true if found.
 * An unknown pointer counts as unmatched in the (pid, dev_hint) totals. */
bool amap_free(struct amap *m, uint32_t pid, uint64_t ptr, int32_t dev_hint,
	       struct amap_entry *out);
bool amap_lookup(const struct amap *m, uint32_t pid, uint64_t ptr,
		 struct amap_entry *out);
/* Sets the owner's `aux` of a live entry; false when not found. */
bool amap_set_aux(struct amap *m, uint32_t pid, uint64_t ptr, uint32_t aux);
/* Totals of (pid, dev), created on first use (NULL on ENOMEM). */
struct amap_proc *amap_proc(struct amap *m, uint32_t pid, int32_t dev);
struct amap_proc *amap_proc_find(const struct amap *m, uint32_t pid, int32_t dev);
/* Live allocations of (pid, dev) sorted by address; dev < 0 = any device.
 * Returns how many were stored into a malloc'd *out (caller frees), or -1. */
long amap_collect(const struct amap *m, uint32_t pid, int32_t dev,
		  struct amap_entry **out);
/* Live allocations held. */
static inline size_t amap_count(const struct amap *m)
{
	return nt_hmap_count(&m->live);
}
/* Forgets every allocation and total of pid. */
void amap_drop_pid(struct amap *m, uint32_t pid);

/* Live bytes aggregated by allocation stack. */
struct stack_total {
	uint32_t stack;
	uint64_t bytes;
	uint64_t count;
	uint64_t first_ts, last_ts;
	int32_t dev;
};
/* Aggregates the given entries by stack, sorted by bytes, descending.
 * Returns the number of distinct stacks in a malloc'd *out, or -1. */
long stack_totals(const struct amap_entry *v, size_t n, struct stack_total **out);

#endif
