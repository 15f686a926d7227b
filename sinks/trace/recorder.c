/* SPDX-License-Identifier: MIT */
/* The flight recorder's bounded chunk list (recorder.h). */
#include "recorder.h"

#include <stdlib.h>
#include <string.h>

#define CHUNK_MAX (1u << 20)
#define CHUNK_MIN 4096u

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

void rec_init(struct recorder *r, size_t max_bytes, uint64_t window_ns)
{
	memset(r, 0, sizeof(*r));
	r->max_bytes = max_bytes;
	r->window_ns = window_ns;
	r->chunk_bytes = max_bytes / 16;
	if (r->chunk_bytes > CHUNK_MAX)
		r->chunk_bytes = CHUNK_MAX;
	if (r->chunk_bytes < CHUNK_MIN)
		r->chunk_bytes = CHUNK_MIN;
}

static void drop_head(struct recorder *r)
{
	struct rec_chunk *c = r->head;

	r->head = c->next;
	if (!r->head)
		r->tail = NULL;
	r->bytes -= sizeof(*c) + c->cap;
	r->items -= c->n_items;
	r->evicted += c->n_items;
	free(c);
}

/* Chunks wholly older than the window (the tail always stays). */
static void evict_old(struct recorder *r)
{
	while (r->head && r->head != r->tail &&
	       r->head->newest_ts + r->window_ns < r->newest_ts)
		drop_head(r);
}

static struct rec_chunk *chunk_for(struct recorder *r, size_t need)
{
	struct rec_chunk *t = r->tail;

	if (t && t->cap - t->used >= need)
		return t;
	size_t cap = need > r->chunk_bytes ? need : r->chunk_bytes;
	if (sizeof(*t) + cap > r->max_bytes)
		return NULL;
	while (r->head && r->bytes + sizeof(*t) + cap > r->max_bytes)
		drop_head(r);
	struct rec_chunk *c = malloc(sizeof(*c) + cap);
	if (!c)
		return NULL;
	c->next = NULL;
	c->cap = cap;
	c->used = 0;
	c->newest_ts = 0;
	c->n_items = 0;
	if (r->tail)
		r->tail->next = c;
	else
		r->head = c;
	r->tail = c;
	r->bytes += sizeof(*c) + cap;
	if (r->bytes > r->peak_bytes)
		r->peak_bytes = r->bytes;
	return c;
}

int rec_append(struct recorder *r, uint32_t tag, const void *rec, uint32_t len,
	       uint64_t ts)
{
	size_t need = align8(sizeof(struct rec_item) + len);
	struct rec_chunk *c = chunk_for(r, need);

	if (!c) {
		r->too_big++;
		return -1;
	}
	struct rec_item it = {.len = len, .tag = tag};
	memcpy(c->data + c->used, &it, sizeof(it));
	memcpy(c->data + c->used + sizeof(it), rec, len);
	c->used += need;
	c->n_items++;
	r->items++;
	if (ts > c->newest_ts)
		c->newest_ts = ts;
	if (ts > r->newest_ts)
		r->newest_ts = ts;
	evict_old(r);
	return 0;
}

void rec_visit(const struct recorder *r, rec_visit_fn fn, void *arg)
{
	for (const struct rec_chunk *c = r->head; c; c = c->next) {
		for (size_t at = 0; at < c->used;) {
			struct rec_item it;
			memcpy(&it, c->data + at, sizeof(it));
			fn(arg, it.tag, c->data + at + sizeof(it), it.len);
			at += align8(sizeof(it) + it.len);
		}
	}
}

void rec_fini(struct recorder *r)
{
	while (r->head)
		drop_head(r);
	r->evicted = 0;
}
