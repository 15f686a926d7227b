/* SPDX-License-Identifier: MIT */
#include "oomring.h"

#include <string.h>

void oom_ring_init(struct oom_ring *g, uint32_t cap)
{
	memset(g, 0, sizeof(*g));
	g->cap = cap == 0 ? 1 : cap > OOM_RING_MAX ? OOM_RING_MAX : cap;
}

void oom_ring_push(struct oom_ring *g, const struct oom_rec *rec)
{
	g->r[g->head] = *rec;
	g->head = (g->head + 1) % g->cap;
	if (g->n < g->cap)
		g->n++;
	g->total++;
}

const struct oom_rec *oom_ring_get(const struct oom_ring *g, uint32_t i)
{
	if (i >= g->n)
		return NULL;
	return &g->r[(g->head + g->cap - 1 - i) % g->cap];
}
