/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: the kernels of each CUDA graph of a process (cuda_graph.h):
 * lists built from captures and kernel nodes, copied into executable
 * graphs at instantiation and exec update, counted at each graph launch.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_graph.h"

static void glist_free(struct nt_cuda_glist *l)
{
	free(l->k);
	memset(l, 0, sizeof(*l));
}

static int glist_push(struct nt_cuda_glist *l, const struct nt_cuda_gkern *k)
{
	if (l->n >= NT_CUDA_GRAPH_MAX_KERNELS) {
		l->truncated++;
		return -E2BIG;
	}
	if (l->n == l->cap) {
		uint32_t ncap = l->cap ? l->cap * 2 : 16;
		struct nt_cuda_gkern *nk = realloc(l->k, ncap * sizeof(*nk));

		if (!nk)
			return -ENOMEM;
		l->k = nk;
		l->cap = ncap;
	}
	l->k[l->n++] = *k;
	return 0;
}

static int glist_copy(struct nt_cuda_glist *dst, const struct nt_cuda_glist *src)
{
	struct nt_cuda_gkern *k = NULL;

	if (src && src->n) {
		k = malloc(src->n * sizeof(*k));
		if (!k)
			return -ENOMEM;
		memcpy(k, src->k, src->n * sizeof(*k));
	}
	free(dst->k);
	dst->k = k;
	dst->n = dst->cap = src ? src->n : 0;
	dst->truncated = src ? src->truncated : 0;
	return 0;
}

static void table_free_lists(struct nt_hmap *m)
{
	struct nt_hmap_iter it;

	for (nt_hmap_iter_init(&it, m); nt_hmap_iter_next(&it);)
		glist_free(it.val);
	nt_hmap_fini(m);
}

/* The list under key, created empty if absent; NULL when full. */
static struct nt_cuda_glist *list_at(struct nt_hmap *m, const void *key)
{
	return nt_hmap_put(m, key, NULL);
}

static void list_drop(struct nt_hmap *m, const void *key)
{
	struct nt_cuda_glist *l = nt_hmap_get(m, key);

	if (!l)
		return;
	glist_free(l);
	nt_hmap_del(m, key);
}

void nt_cuda_graphs_init(struct nt_cuda_graphs *g, uint64_t max_handles)
{
	memset(g, 0, sizeof(*g));
	g->max_handles = max_handles;
	nt_hmap_init(&g->capture, sizeof(uint32_t), sizeof(struct nt_cuda_glist),
		     max_handles);
	nt_hmap_init(&g->graphs, sizeof(uint64_t), sizeof(struct nt_cuda_glist),
		     max_handles);
	nt_hmap_init(&g->execs, sizeof(uint64_t), sizeof(struct nt_cuda_glist),
		     max_handles);
	nt_hmap_init(&g->nodes, sizeof(uint64_t), sizeof(uint64_t),
		     max_handles ? max_handles * 16 : 0);
}

void nt_cuda_graphs_fini(struct nt_cuda_graphs *g)
{
	table_free_lists(&g->capture);
	table_free_lists(&g->graphs);
	table_free_lists(&g->execs);
	nt_hmap_fini(&g->nodes);
}

int nt_cuda_graph_capture_begin(struct nt_cuda_graphs *g, uint32_t tid)
{
	list_drop(&g->capture, &tid);
	return list_at(&g->capture, &tid) ? 0 : -errno;
}

int nt_cuda_graph_capture_add(struct nt_cuda_graphs *g, uint32_t tid,
			      int layer, uint64_t func)
{
	struct nt_cuda_glist *l = list_at(&g->capture, &tid);
	struct nt_cuda_gkern k = { .func = func, .layer = (uint8_t)layer };

	return l ? glist_push(l, &k) : -errno;
}

int nt_cuda_graph_capture_end(struct nt_cuda_graphs *g, uint32_t tid,
			      uint64_t graph)
{
	struct nt_cuda_glist cap, *dst;
	struct nt_cuda_glist *l = nt_hmap_get(&g->capture, &tid);
	int rc = 0;

	if (!l)
		return 0;
	cap = *l;
	nt_hmap_del(&g->capture, &tid);
	if (!graph) {
		glist_free(&cap);
		return 0;
	}
	dst = list_at(&g->graphs, &graph);
	if (!dst) {
		glist_free(&cap);
		return -errno;
	}
	if (!dst->n) { /* the usual case: a new graph takes the list */
		free(dst->k);
		*dst = cap;
		return 0;
	}
	/* captured into an existing graph (BeginCaptureToGraph): appended */
	for (uint32_t i = 0; i < cap.n && !rc; i++)
		rc = glist_push(dst, &cap.k[i]);
	glist_free(&cap);
	return rc;
}

int nt_cuda_graph_add_node(struct nt_cuda_graphs *g, uint64_t graph,
			   uint64_t node, int layer, uint64_t func)
{
	struct nt_cuda_glist *l = list_at(&g->graphs, &graph);
	struct nt_cuda_gkern k = { .node = node, .func = func,
				   .layer = (uint8_t)layer };
	uint64_t *owner;
	int rc;

	if (!l)
		return -errno;
	rc = glist_push(l, &k);
	if (rc)
		return rc;
	owner = nt_hmap_put(&g->nodes, &node, NULL);
	if (!owner)
		return -errno;
	*owner = graph;
	return 0;
}

static void list_set_node(struct nt_cuda_glist *l, uint64_t node, int layer,
			  uint64_t func)
{
	for (uint32_t i = 0; l && i < l->n; i++) {
		if (l->k[i].node == node) {
			l->k[i].func = func;
			l->k[i].layer = (uint8_t)layer;
		}
	}
}

void nt_cuda_graph_node_set(struct nt_cuda_graphs *g, uint64_t node,
			    int layer, uint64_t func)
{
	uint64_t *graph = nt_hmap_get(&g->nodes, &node);

	if (graph)
		list_set_node(nt_hmap_get(&g->graphs, graph), node, layer, func);
}

void nt_cuda_graph_exec_node_set(struct nt_cuda_graphs *g, uint64_t exec,
				 uint64_t node, int layer, uint64_t func)
{
	list_set_node(nt_hmap_get(&g->execs, &exec), node, layer, func);
}

int nt_cuda_graph_instantiate(struct nt_cuda_graphs *g, uint64_t exec,
			      uint64_t graph)
{
	const struct nt_cuda_glist *src = nt_hmap_get(&g->graphs, &graph);
	struct nt_cuda_glist copy = { 0 }, *dst;
	int rc = glist_copy(&copy, src);

	if (rc)
		return rc;
	dst = list_at(&g->execs, &exec);
	if (!dst) {
		glist_free(&copy);
		return -errno;
	}
	glist_free(dst);
	*dst = copy;
	return 0;
}

void nt_cuda_graph_destroy(struct nt_cuda_graphs *g, uint64_t graph)
{
	struct nt_hmap_iter it;

	list_drop(&g->graphs, &graph);
	for (nt_hmap_iter_init(&it, &g->nodes); nt_hmap_iter_next(&it);)
		if (*(const uint64_t *)it.val == graph)
			nt_hmap_iter_del(&it);
}

void nt_cuda_graph_exec_destroy(struct nt_cuda_graphs *g, uint64_t exec)
{
	list_drop(&g->execs, &exec);
}

const struct nt_cuda_glist *nt_cuda_graph_kernels(const struct nt_cuda_graphs *g,
						  uint64_t exec)
{
	return nt_hmap_get(&g->execs, &exec);
}
