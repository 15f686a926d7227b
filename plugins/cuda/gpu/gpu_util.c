// SPDX-License-Identifier: MIT
/* ntcore cuda_gpu: generic plumbing (see gpu_util.h). */
#include "gpu_util.h"

#include <stdlib.h>
#include <string.h>

/* ---- u64 map --------------------------------------------------------------- */

/* A zeroed map gets its shape at its first put. */
static bool map_ready(struct gpu_map *m)
{
	return m->h.key_size ||
	       nt_hmap_init(&m->h, sizeof(uint64_t), sizeof(uint64_t), 0) == 0;
}

int gpu_map_put(struct gpu_map *m, uint64_t key, uint64_t val)
{
	uint64_t *v = map_ready(m) ? nt_hmap_put(&m->h, &key, NULL) : NULL;

	if (!v)
		return -1;
	*v = val;
	return 0;
}

bool gpu_map_get(const struct gpu_map *m, uint64_t key, uint64_t *val)
{
	const uint64_t *v = m->h.key_size ? nt_hmap_get(&m->h, &key) : NULL;

	if (v && val)
		*val = *v;
	return v != NULL;
}

bool gpu_map_del(struct gpu_map *m, uint64_t key)
{
	return m->h.key_size && nt_hmap_del(&m->h, &key);
}

bool gpu_map_next(struct gpu_map *m, struct nt_hmap_iter *it, uint64_t *key,
		  uint64_t *val)
{
	if (!m->h.key_size)
		return false;
	if (!it->m)
		nt_hmap_iter_init(it, &m->h);
	if (!nt_hmap_iter_next(it))
		return false;
	memcpy(key, it->key, sizeof(*key));
	memcpy(val, it->val, sizeof(*val));
	return true;
}

void gpu_map_free(struct gpu_map *m)
{
	nt_hmap_fini(&m->h);
	memset(m, 0, sizeof(*m));
}

/* ---- interned strings ---------------------------------------------------- */
/* The bytes live in one arena; the index (an nt_hmap_init_str map) points
 * into it, so it is rebuilt when the arena moves. */

void gpu_strtab_init(struct gpu_strtab *t, size_t max_bytes)
{
	memset(t, 0, sizeof(*t));
	t->max_bytes = max_bytes;
	nt_hmap_init_str(&t->index, sizeof(uint32_t), 0);
}

static int str_index(struct gpu_strtab *t, uint32_t id)
{
	struct nt_hstr key = { t->arena + t->off[id], t->slen[id] };
	uint32_t *v = nt_hmap_put(&t->index, &key, NULL);

	if (!v)
		return -1;
	*v = id;
	return 0;
}

/* The arena moved: every key points to the new one. */
static int str_reindex(struct gpu_strtab *t)
{
	nt_hmap_clear(&t->index);
	for (uint32_t id = 1; id <= t->n; id++)
		if (str_index(t, id))
			return -1;
	return 0;
}

static bool str_room(struct gpu_strtab *t, size_t len)
{
	size_t cap = t->cap ? t->cap : 65536;
	char *a;

	if (t->len + len + 1 <= t->cap)
		return true;
	while (cap < t->len + len + 1)
		cap *= 2;
	if (!(a = realloc(t->arena, cap)))
		return false;
	t->cap = cap;
	if (a != t->arena) {
		t->arena = a;
		return str_reindex(t) == 0;
	}
	return true;
}

static uint32_t str_add(struct gpu_strtab *t, const char *s, size_t len)
{
	if (t->len + len + 1 > t->max_bytes || len > UINT32_MAX / 2) {
		t->refused++;
		return 0;
	}
	if (!str_room(t, len))
		return 0;
	if (t->n + 2 > t->cap_ids) {
		uint32_t cap = t->cap_ids ? t->cap_ids * 2 : 1024;
		uint32_t *o = realloc(t->off, cap * sizeof(*o));

		if (!o)
			return 0;
		t->off = o;
		if (!(o = realloc(t->slen, cap * sizeof(*o))))
			return 0;
		t->slen = o;
		t->cap_ids = cap;
	}
	memcpy(t->arena + t->len, s, len);
	t->arena[t->len + len] = '\0';
	t->off[t->n + 1] = (uint32_t)t->len;
	t->slen[t->n + 1] = (uint32_t)len;
	if (str_index(t, t->n + 1))
		return 0;
	t->len += len + 1;
	return ++t->n;
}

uint32_t gpu_str_intern(struct gpu_strtab *t, const char *s, size_t len)
{
	struct nt_hstr key = { s, len };
	const uint32_t *id = nt_hmap_get(&t->index, &key);

	return id ? *id : str_add(t, s, len);
}

const char *gpu_str(const struct gpu_strtab *t, uint32_t id, uint32_t *len)
{
	if (!id || id > t->n) {
		if (len)
			*len = 0;
		return "";
	}
	if (len)
		*len = t->slen[id];
	return t->arena + t->off[id];
}

void gpu_strtab_free(struct gpu_strtab *t)
{
	free(t->arena);
	free(t->off);
	free(t->slen);
	nt_hmap_fini(&t->index);
	memset(t, 0, sizeof(*t));
}
