/* SPDX-License-Identifier: MIT */
/*
 * The OTLP encoder's bump arena: each request's protobuf-c message tree is
 * built in chunks that are reset, not freed, between requests, so a batch
 * costs no malloc per attribute; and the UTF-8-safe string copies made
 * into it (the kit's repair: OTLP strings must be valid UTF-8).
 */
#include <stdlib.h>
#include <string.h>

#include <ntcore/kit/utf8.h>

#include "otlp_pb.h"

struct otlp_chunk {
	struct otlp_chunk *next;
	size_t size, used;
	max_align_t data[];
};

#define OTLP_CHUNK_DEFAULT (256u * 1024u)

void *otlp_alloc(struct otlp_arena *a, size_t n)
{
	struct otlp_chunk *c = a->cur;

	n = (n + 15u) & ~(size_t)15u;
	while (c && c->used + n > c->size)
		c = c->next; /* reuse later chunks kept from earlier requests */
	if (c) {
		/* skipped chunks stay unused until the next reset; keep cur on the
		 * chunk that fits */
		void *p = (char *)c->data + c->used;

		c->used += n;
		a->cur = c;
		return p;
	}
	size_t size = a->chunk_size ? a->chunk_size : OTLP_CHUNK_DEFAULT;

	if (size < n)
		size = n;
	c = malloc(sizeof(*c) + size);
	if (!c)
		return NULL;
	c->next = NULL;
	c->size = size;
	c->used = n;
	if (!a->first) {
		a->first = c;
	} else {
		struct otlp_chunk *last = a->cur ? a->cur : a->first;

		while (last->next)
			last = last->next;
		last->next = c;
	}
	a->cur = c;
	return c->data;
}

char *otlp_strdup(struct otlp_arena *a, const char *s, size_t len)
{
	char *p = otlp_alloc(a, len + 1);

	if (!p)
		return NULL;
	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

void otlp_arena_reset(struct otlp_arena *a)
{
	for (struct otlp_chunk *c = a->first; c; c = c->next)
		c->used = 0;
	a->cur = a->first;
}

void otlp_arena_free(struct otlp_arena *a)
{
	struct otlp_chunk *c = a->first;

	while (c) {
		struct otlp_chunk *next = c->next;

		free(c);
		c = next;
	}
	a->first = a->cur = NULL;
}

size_t otlp_utf8_sanitize(const char *in, size_t len, char *out)
{
	/* event strings end at a NUL; the kit's checks take exact lengths */
	size_t n = strnlen(in, len);

	/* nearly every string is valid: one check and one copy (the repair
	 * copies character by character) */
	if (nt_utf8_valid(in, n)) {
		memcpy(out, in, n);
		out[n] = '\0';
		return n;
	}
	return nt_utf8_repair(in, n, out, 3 * len + 1);
}

char *otlp_arena_utf8(struct otlp_arena *a, const char *s, size_t len)
{
	char *p = otlp_alloc(a, 3 * len + 1);

	if (p)
		otlp_utf8_sanitize(s, len, p);
	return p;
}

