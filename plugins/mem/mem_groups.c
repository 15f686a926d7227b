/* SPDX-License-Identifier: MIT */
/*
 * mem probe: outstanding allocations grouped by (process, stack, kind) in
 * the kit's hash map, and the groups sorted for the reports (by process,
 * then most bytes first). Pure.
 */
#include <linux/types.h>

#include "mem_logic.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The map's key: the group's identity. */
struct group_key {
	uint32_t tgid;
	int32_t stack_id;
	uint32_t kind;
};

void mem_groups_init(struct mem_groups *g)
{
	nt_hmap_init(&g->map, sizeof(struct group_key), sizeof(struct mem_group), 0);
}

void mem_groups_free(struct mem_groups *g)
{
	nt_hmap_fini(&g->map);
}

void mem_groups_reset(struct mem_groups *g)
{
	nt_hmap_clear(&g->map);
}

int mem_groups_add(struct mem_groups *g, uint32_t tgid, int32_t stack_id,
		   uint32_t kind, uint64_t bytes, uint64_t count, uint64_t ts_ns)
{
	struct group_key k = {.tgid = tgid, .stack_id = stack_id, .kind = kind};
	struct mem_group *s;
	bool created;

	if (!count)
		count = 1;
	s = nt_hmap_put(&g->map, &k, &created);
	if (!s)
		return -ENOMEM;
	if (created) {
		memset(s, 0, sizeof(*s));
		s->tgid = tgid;
		s->stack_id = stack_id;
		s->kind = kind;
		s->oldest_ns = ts_ns;
	}
	s->bytes += bytes;
	s->count += count;
	if (ts_ns < s->oldest_ns)
		s->oldest_ns = ts_ns;
	return 0;
}

/* Most bytes first, then most allocations, then lowest stack id and kind:
 * a total order, so a report is the same for the same allocations. */
static int group_cmp(const void *a, const void *b)
{
	const struct mem_group *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	if (x->stack_id != y->stack_id)
		return x->stack_id < y->stack_id ? -1 : 1;
	return (int)x->kind - (int)y->kind;
}

static int group_cmp_tgid(const void *a, const void *b)
{
	const struct mem_group *x = a, *y = b;

	if (x->tgid != y->tgid)
		return x->tgid < y->tgid ? -1 : 1;
	return group_cmp(a, b);
}

/* One sort serves every process's report (each takes the head of its run):
 * cheaper per interval than a top-N table per process. */
struct mem_group *mem_groups_sorted(const struct mem_groups *g, size_t *n)
{
	struct nt_hmap_iter it;
	struct mem_group *all;
	size_t k = 0;

	*n = 0;
	if (!nt_hmap_count(&g->map) ||
	    !(all = malloc(nt_hmap_count(&g->map) * sizeof(*all))))
		return NULL;
	nt_hmap_iter_init(&it, (struct nt_hmap *)&g->map);
	while (nt_hmap_iter_next(&it))
		all[k++] = *(const struct mem_group *)it.val;
	qsort(all, k, sizeof(*all), group_cmp_tgid);
	*n = k;
	return all;
}

const struct mem_group *mem_groups_find(const struct mem_group *sorted, size_t n,
					uint32_t tgid, size_t *count)
{
	size_t lo = 0, hi = n, end;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (sorted[mid].tgid < tgid)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (end = lo; end < n && sorted[end].tgid == tgid; end++)
		;
	*count = end - lo;
	return *count ? &sorted[lo] : NULL;
}

size_t mem_groups_top(const struct mem_groups *g, uint32_t tgid,
		      struct mem_group *out, size_t max, size_t *total_groups)
{
	size_t n_all, n;
	struct mem_group *all = mem_groups_sorted(g, &n_all);
	const struct mem_group *run = mem_groups_find(all, n_all, tgid, &n);

	if (total_groups)
		*total_groups = n;
	if (n > max)
		n = max;
	if (n)
		memcpy(out, run, n * sizeof(*out));
	free(all);
	return n;
}
