/* SPDX-License-Identifier: MIT */
/* ntcore python probe: the u64 -> pointer map over the kit's nt_hmap
 * (pymap.h). */
#include "pymap.h"

#include <string.h>

static int map_ready(struct py_map *m)
{
	if (m->h.key_size)
		return 0;
	return nt_hmap_init(&m->h, sizeof(uint64_t), sizeof(void *), 0);
}

void *py_map_get(const struct py_map *m, uint64_t key)
{
	void *const *v;

	if (!m->h.key_size)
		return NULL;
	v = nt_hmap_get(&m->h, &key);
	return v ? *v : NULL;
}

int py_map_put(struct py_map *m, uint64_t key, void *val)
{
	void **v;

	if (map_ready(m))
		return -1;
	v = nt_hmap_put(&m->h, &key, NULL);
	if (!v)
		return -1;
	*v = val;
	return 0;
}

void *py_map_del(struct py_map *m, uint64_t key)
{
	void *v = py_map_get(m, key);

	if (v)
		nt_hmap_del(&m->h, &key);
	return v;
}

size_t py_map_count(const struct py_map *m)
{
	return m->h.key_size ? nt_hmap_count(&m->h) : 0;
}

bool py_map_next(struct py_map *m, struct py_map_it *it, uint64_t *key,
		 void **val)
{
	if (!m->h.key_size)
		return false;
	if (!it->started) {
		nt_hmap_iter_init(&it->i, &m->h);
		it->started = true;
	}
	if (!nt_hmap_iter_next(&it->i))
		return false;
	memcpy(key, it->i.key, sizeof(*key));
	memcpy(val, it->i.val, sizeof(*val));
	return true;
}

void *py_map_it_del(struct py_map_it *it)
{
	void *v;

	memcpy(&v, it->i.val, sizeof(v));
	nt_hmap_iter_del(&it->i);
	return v;
}

void py_map_free(struct py_map *m)
{
	if (m->h.key_size)
		nt_hmap_fini(&m->h);
	memset(m, 0, sizeof(*m));
}
