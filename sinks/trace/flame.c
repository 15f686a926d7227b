/* SPDX-License-Identifier: MIT */
/* Flame-graph trees and their SVG (flame.h). */
#include "flame.h"
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FRAMES 512
#define ROW_PX 17
#define MIN_PX 0.3
#define CHAR_PX 7.0

static uint32_t node_new(struct flame *f, uint32_t name)
{
	if (f->n == f->cap) {
		uint32_t cap = f->cap ? f->cap * 2 : 256;
		struct flame_node *nodes = realloc(f->nodes, cap * sizeof(*nodes));
		if (!nodes)
			return 0;
		f->nodes = nodes;
		f->cap = cap;
	}
	f->nodes[f->n] = (struct flame_node){.name = name};
	return f->n++;
}

void flame_init(struct flame *f, uint32_t max_nodes, const char *unit)
{
	memset(f, 0, sizeof(*f));
	f->max_nodes = max_nodes < 2 ? 2 : max_nodes;
	f->unit = unit;
	node_new(f, strtab_id(&f->names, "all", 3, NULL));
}

/* The child of `parent` named s, created when there is room; 0 if none. */
static uint32_t child(struct flame *f, uint32_t parent, const char *s, size_t len)
{
	uint32_t name = strtab_id(&f->names, s, len, NULL);
	uint32_t key[2] = {parent, name};
	void *v;

	if (!name || !f->n)
		return 0;
	if ((v = tmap_get(&f->edges, key, sizeof(key))))
		return (uint32_t)(uintptr_t)v;
	if (f->n >= f->max_nodes)
		return 0;
	uint32_t c = node_new(f, name);
	if (!c || tmap_put(&f->edges, key, sizeof(key), (void *)(uintptr_t)c))
		return 0;
	f->nodes[c].next_sibling = f->nodes[parent].first_child;
	f->nodes[parent].first_child = c;
	return c;
}

/* Split a folded stack into frames; returns how many (at most max). */
static uint32_t split(const char *s, size_t len, const char **at, size_t *lens,
		      uint32_t max)
{
	uint32_t n = 0;
	size_t i = 0;

	while (i < len && n < max) {
		size_t j = i;
		while (j < len && s[j] != ';')
			j++;
		if (j > i) {
			at[n] = s + i;
			lens[n++] = j - i;
		}
		i = j + 1;
	}
	return n;
}

void flame_add(struct flame *f, const char *root, const char *stack,
	       size_t len, bool leaf_first, const char *leaf, size_t leaf_len,
	       uint64_t weight)
{
	const char *at[MAX_FRAMES + 2];
	size_t lens[MAX_FRAMES + 2];
	uint32_t n = 0;

	if (!f->n || !weight)
		return;
	if (root) {
		at[n] = root;
		lens[n++] = strlen(root);
	}
	uint32_t k = stack ? split(stack, len, at + n, lens + n, MAX_FRAMES) : 0;
	for (uint32_t i = 0; leaf_first && i < k / 2; i++) {
		const char *t = at[n + i];
		size_t tl = lens[n + i];
		at[n + i] = at[n + k - 1 - i];
		lens[n + i] = lens[n + k - 1 - i];
		at[n + k - 1 - i] = t;
		lens[n + k - 1 - i] = tl;
	}
	n += k;
	if (leaf && leaf_len) {
		at[n] = leaf;
		lens[n++] = leaf_len;
	}
	uint32_t node = 0;
	f->nodes[0].total += weight;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t c = child(f, node, at[i], lens[i]);
		if (!c) {
			f->truncated += weight;
			break;
		}
		node = c;
		f->nodes[node].total += weight;
	}
}

/* ---- SVG ----------------------------------------------------------- */

struct layout {
	const struct flame *f;
	struct nt_buf *out;
	double px_per_unit;
	unsigned width;
	bool gpu;
};

static unsigned depth_of(const struct flame *f, uint32_t node, unsigned d)
{
	unsigned best = d;

	for (uint32_t c = f->nodes[node].first_child; c; c = f->nodes[c].next_sibling)
		if (d < MAX_FRAMES + 2) {
			unsigned cd = depth_of(f, c, d + 1);
			best = cd > best ? cd : best;
		}
	return best;
}

/* FNV-1a with a final mix, spelled out rather than the kit's hash: a
 * frame's colour must stay the same from one version to the next (people
 * compare flame graphs side by side), and the kit promises no stable hash. */
static uint64_t colour_hash(const char *name)
{
	uint64_t h = 1469598103934665603ull;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h ? h : 1;
}

static unsigned color_of(const char *name, bool gpu)
{
	uint64_t h = colour_hash(name);
	unsigned r, g, b;

	if (gpu) {
		r = 50 + (unsigned)(h % 60);
		g = 170 + (unsigned)((h >> 8) % 70);
		b = 60 + (unsigned)((h >> 16) % 50);
	} else {
		r = 205 + (unsigned)(h % 50);
		g = 80 + (unsigned)((h >> 8) % 130);
		b = 40 + (unsigned)((h >> 16) % 40);
	}
	return r << 16 | g << 8 | b;
}

static void label(struct nt_buf *out, const char *name, double w)
{
	size_t fit = w > 12 ? (size_t)((w - 6) / CHAR_PX) : 0;
	size_t n = strlen(name);

	if (fit < 3)
		return;
	if (n <= fit) {
		html_escape(out, name, n);
	} else {
		html_escape(out, name, fit - 2);
		nt_buf_put(out, "..", 2);
	}
}

static int by_total(const void *a, const void *b, void *arg)
{
	const struct flame *f = arg;
	uint64_t x = f->nodes[*(const uint32_t *)a].total;
	uint64_t y = f->nodes[*(const uint32_t *)b].total;

	return x < y ? 1 : x > y ? -1 : 0;
}

static void draw(struct layout *L, uint32_t node, double x, unsigned depth)
{
	const struct flame_node *nd = &L->f->nodes[node];
	double w = (double)nd->total * L->px_per_unit;
	const char *name = strtab_str(&L->f->names, nd->name);
	double pct = 100.0 * (double)nd->total / (double)L->f->nodes[0].total;

	if (w < MIN_PX || depth > MAX_FRAMES + 1)
		return;
	nt_buf_printf(L->out, "<g class=\"f\" data-x=\"%.2f\" data-w=\"%.2f\" "
		      "data-d=\"%u\"><title>", x, w, depth);
	html_escape(L->out, name, strlen(name));
	nt_buf_printf(L->out, " (%llu %s, %.2f%%)</title><rect x=\"%.2f\" y=\"%u\" "
		      "width=\"%.2f\" height=\"%u\" fill=\"#%06x\"/><text x=\"%.2f\" "
		      "y=\"%u\">", (unsigned long long)nd->total, L->f->unit, pct, x,
		      depth * ROW_PX, w, ROW_PX - 1, color_of(name, L->gpu), x + 3,
		      depth * ROW_PX + ROW_PX - 5);
	label(L->out, name, w);
	nt_buf_put(L->out, "</text></g>\n", 12);

	uint32_t n = 0;
	for (uint32_t c = nd->first_child; c; c = L->f->nodes[c].next_sibling)
		n++;
	uint32_t *kids = n ? malloc(n * sizeof(*kids)) : NULL;
	if (!kids)
		return;
	n = 0;
	for (uint32_t c = nd->first_child; c; c = L->f->nodes[c].next_sibling)
		kids[n++] = c;
	qsort_r(kids, n, sizeof(kids[0]), by_total, (void *)L->f);
	for (uint32_t i = 0; i < n; i++) {
		draw(L, kids[i], x, depth + 1);
		x += (double)L->f->nodes[kids[i]].total * L->px_per_unit;
	}
	free(kids);
}

void flame_svg(const struct flame *f, struct nt_buf *out, unsigned width,
	       bool gpu)
{
	uint64_t total = flame_total(f);
	unsigned rows = f->n ? depth_of(f, 0, 1) : 1;
	struct layout L = {.f = f, .out = out, .width = width, .gpu = gpu,
			   .px_per_unit = total ? (double)width / (double)total : 0};

	nt_buf_printf(out, "<svg class=\"flame\" xmlns=\"http://www.w3.org/2000/svg\" "
		      "width=\"%u\" height=\"%u\" data-width=\"%u\">\n", width,
		      rows * ROW_PX + 2, width);
	if (total)
		draw(&L, 0, 0, 0);
	nt_buf_put(out, "</svg>\n", 7);
}

void flame_fini(struct flame *f)
{
	strtab_free(&f->names);
	tmap_free(&f->edges, NULL);
	free(f->nodes);
	memset(f, 0, sizeof(*f));
}
