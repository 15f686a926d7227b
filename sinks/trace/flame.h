/* SPDX-License-Identifier: MIT */
/*
 * Flame graphs for the report page: a tree of frames built from folded
 * stacks ("root;caller;leaf", or leaf first), each path weighted (samples,
 * calls, GPU nanoseconds), drawn as an inline SVG icicle (root on top).
 * At most `max_nodes` nodes: past that a stack stops at its deepest known
 * frame and the rest of its weight stays there (counted in `truncated`).
 */
#ifndef NTCORE_TRACE_FLAME_H
#define NTCORE_TRACE_FLAME_H

#include <stdbool.h>
#include <stdint.h>

#include "jsonl.h"
#include "tmap.h"

struct flame_node {
	uint32_t name;          /* strtab id */
	uint32_t first_child;   /* node index, 0: none (0 is the root) */
	uint32_t next_sibling;
	uint64_t total;         /* weight of this node and below */
};

struct flame {
	struct strtab names;
	struct flame_node *nodes;
	uint32_t n, cap, max_nodes;
	struct tmap edges; /* (parent, name) -> child index */
	uint64_t truncated;
	const char *unit;  /* "samples", "calls", "ns" */
};

void flame_init(struct flame *f, uint32_t max_nodes, const char *unit);
/*
 * Add one stack: `root` (or NULL) is put above it, `leaf` (len > 0) below
 * it; `stack` holds ';'-separated frames, root first unless `leaf_first`.
 */
void flame_add(struct flame *f, const char *root, const char *stack,
	       size_t len, bool leaf_first, const char *leaf, size_t leaf_len,
	       uint64_t weight);
static inline uint64_t flame_total(const struct flame *f)
{
	return f->n ? f->nodes[0].total : 0;
}
/* An <svg> of the tree, `width` px wide; `gpu` picks the green palette. */
void flame_svg(const struct flame *f, struct nt_buf *out, unsigned width,
	       bool gpu);
void flame_fini(struct flame *f);

#endif
