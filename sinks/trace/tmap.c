/* SPDX-License-Identifier: MIT */
/* Open-addressing hash map with copied byte keys, and a string interner. */
#include "tmap.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a, then a final mix so that low bits are usable as a slot index. */
uint64_t tmap_hash(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h ? h : 1;
}

static struct tmap_ent *slot_of(const struct tmap *m, uint64_t h,
				const void *key, size_t len)
{
	uint32_t mask = m->cap - 1;

	for (uint32_t i = (uint32_t)h & mask;; i = (i + 1) & mask) {
		struct tmap_ent *e = &m->ents[i];
		if (!e->hash || (e->hash == h && e->klen == len &&
				 memcmp(e->key, key, len) == 0))
			return e;
	}
}

void *tmap_get(const struct tmap *m, const void *key, size_t len)
{
	if (!m->cap)
		return NULL;
	struct tmap_ent *e = slot_of(m, tmap_hash(key, len), key, len);
	return e->hash ? e->val : NULL;
}

static int grow(struct tmap *m)
{
	uint32_t cap = m->cap ? m->cap * 2 : 16;
	struct tmap_ent *ents = calloc(cap, sizeof(*ents));
	struct tmap old = *m;

	if (!ents)
		return -1;
	m->ents = ents;
	m->cap = cap;
	for (uint32_t i = 0; i < old.cap; i++) {
		struct tmap_ent *e = &old.ents[i];
		if (e->hash)
			*slot_of(m, e->hash, e->key, e->klen) = *e;
	}
	free(old.ents);
	return 0;
}

int tmap_put(struct tmap *m, const void *key, size_t len, void *val)
{
	if ((m->n + 1) * 4 > m->cap * 3 && grow(m))
		return -1;
	uint64_t h = tmap_hash(key, len);
	struct tmap_ent *e = slot_of(m, h, key, len);
	if (e->hash) {
		e->val = val;
		return 0;
	}
	char *copy = malloc(len ? len : 1);
	if (!copy)
		return -1;
	memcpy(copy, key, len);
	e->hash = h;
	e->key = copy;
	e->klen = (uint32_t)len;
	e->val = val;
	m->n++;
	return 0;
}

const struct tmap_ent *tmap_next(const struct tmap *m, uint32_t *pos)
{
	while (*pos < m->cap) {
		const struct tmap_ent *e = &m->ents[(*pos)++];
		if (e->hash)
			return e;
	}
	return NULL;
}

void tmap_free(struct tmap *m, void (*free_val)(void *))
{
	for (uint32_t i = 0; i < m->cap; i++) {
		if (!m->ents[i].hash)
			continue;
		free(m->ents[i].key);
		if (free_val)
			free_val(m->ents[i].val);
	}
	free(m->ents);
	memset(m, 0, sizeof(*m));
}

uint32_t strtab_id(struct strtab *t, const char *s, size_t len, int *is_new)
{
	void *v = tmap_get(&t->map, s, len);

	if (is_new)
		*is_new = 0;
	if (v)
		return (uint32_t)(uintptr_t)v;
	if (t->max && t->n >= t->max)
		return 0;
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 64;
		char **strs = realloc(t->strs, cap * sizeof(*strs));
		if (!strs)
			return 0;
		t->strs = strs;
		t->cap = cap;
	}
	char *copy = malloc(len + 1);
	if (!copy)
		return 0;
	memcpy(copy, s, len);
	copy[len] = '\0';
	uint32_t id = t->n + 1;
	if (tmap_put(&t->map, s, len, (void *)(uintptr_t)id)) {
		free(copy);
		return 0;
	}
	t->strs[t->n++] = copy;
	if (is_new)
		*is_new = 1;
	return id;
}

void strtab_free(struct strtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->strs[i]);
	free(t->strs);
	tmap_free(&t->map, NULL);
	memset(t, 0, sizeof(*t));
}
