/* SPDX-License-Identifier: MIT */
/* The trace sink's maps with owned keys and its string interner, on the
 * kit's string map (see tmap.h). */
#include "tmap.h"

#include <stdlib.h>
#include <string.h>

void *tmap_get(const struct tmap *m, const void *key, size_t len)
{
	struct nt_hstr k = { key, len };
	const struct tmap_ent *e = nt_hmap_get(&m->map, &k);

	return e ? e->val : NULL;
}

int tmap_put(struct tmap *m, const void *key, size_t len, void *val)
{
	struct nt_hstr k = { key, len };
	struct tmap_ent *e;
	char *copy;

	if (!m->map.key_size &&
	    nt_hmap_init_str(&m->map, sizeof(struct tmap_ent), 0))
		return -1;
	if ((e = nt_hmap_get(&m->map, &k))) {
		e->val = val;
		return 0;
	}
	copy = malloc(len ? len : 1);
	if (!copy)
		return -1;
	memcpy(copy, key, len);
	k.s = copy; /* the map keeps this key: it must point at our copy */
	e = nt_hmap_put(&m->map, &k, NULL);
	if (!e) {
		free(copy);
		return -1;
	}
	*e = (struct tmap_ent){ copy, (uint32_t)len, val };
	return 0;
}

void tmap_iter_init(struct nt_hmap_iter *it, const struct tmap *m)
{
	/* the kit's iterator takes a mutable map for iter_del, unused here */
	nt_hmap_iter_init(it, (struct nt_hmap *)&m->map);
}

const struct tmap_ent *tmap_next(struct nt_hmap_iter *it)
{
	return nt_hmap_iter_next(it) ? it->val : NULL;
}

void tmap_free(struct tmap *m, void (*free_val)(void *))
{
	struct nt_hmap_iter it;
	const struct tmap_ent *e;

	for (tmap_iter_init(&it, m); (e = tmap_next(&it));) {
		if (free_val)
			free_val(e->val);
		free(e->key);
	}
	nt_hmap_fini(&m->map);
	memset(m, 0, sizeof(*m));
}

/* Room for one more string in strs; 0 or -1. */
static int strs_reserve(struct strtab *t)
{
	uint32_t cap;
	char **strs;

	if (t->n < t->cap)
		return 0;
	cap = t->cap ? t->cap * 2 : 64;
	strs = realloc(t->strs, cap * sizeof(*strs));
	if (!strs)
		return -1;
	t->strs = strs;
	t->cap = cap;
	return 0;
}

uint32_t strtab_id(struct strtab *t, const char *s, size_t len, int *is_new)
{
	struct nt_hstr k = { s, len };
	uint32_t *id = t->map.key_size ? nt_hmap_get(&t->map, &k) : NULL;
	char *copy;

	if (is_new)
		*is_new = 0;
	if (id)
		return *id;
	if ((t->max && t->n >= t->max) || strs_reserve(t) ||
	    (!t->map.key_size && nt_hmap_init_str(&t->map, sizeof(uint32_t), 0)))
		return 0;
	copy = malloc(len + 1);
	if (!copy)
		return 0;
	memcpy(copy, s, len);
	copy[len] = '\0';
	k.s = copy;
	if (!(id = nt_hmap_put(&t->map, &k, NULL))) {
		free(copy);
		return 0;
	}
	t->strs[t->n++] = copy;
	*id = t->n;
	if (is_new)
		*is_new = 1;
	return *id;
}

void strtab_free(struct strtab *t)
{
	for (uint32_t i = 0; i < t->n; i++)
		free(t->strs[i]);
	free(t->strs);
	nt_hmap_fini(&t->map);
	memset(t, 0, sizeof(*t));
}
