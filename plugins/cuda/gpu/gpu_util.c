// SPDX-License-Identifier: MIT
/* ntcore cuda_gpu: generic plumbing (see gpu_util.h). */
#include "gpu_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- u64 map --------------------------------------------------------------- */

static int map_grow(struct gpu_map *m)
{
	struct gpu_map g = { .cap = m->cap ? m->cap * 2 : 64 };

	g.keys = malloc(g.cap * sizeof(*g.keys));
	g.vals = malloc(g.cap * sizeof(*g.vals));
	g.used = calloc(g.cap, 1);
	if (!g.keys || !g.vals || !g.used) {
		gpu_map_free(&g);
		return -1;
	}
	for (uint32_t i = 0; i < m->cap; i++)
		if (m->used[i])
			gpu_map_put(&g, m->keys[i], m->vals[i]);
	gpu_map_free(m);
	*m = g;
	return 0;
}

int gpu_map_put(struct gpu_map *m, uint64_t key, uint64_t val)
{
	uint32_t i;

	if ((m->n + 1) * 4 > m->cap * 3 && map_grow(m))
		return -1;
	for (i = (uint32_t)gpu_mix64(key) & (m->cap - 1); m->used[i]; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key) {
			m->vals[i] = val;
			return 0;
		}
	}
	m->used[i] = 1;
	m->keys[i] = key;
	m->vals[i] = val;
	m->n++;
	return 0;
}

static int64_t map_find(const struct gpu_map *m, uint64_t key)
{
	if (!m->cap)
		return -1;
	for (uint32_t i = (uint32_t)gpu_mix64(key) & (m->cap - 1); m->used[i];
	     i = (i + 1) & (m->cap - 1))
		if (m->keys[i] == key)
			return i;
	return -1;
}

bool gpu_map_get(const struct gpu_map *m, uint64_t key, uint64_t *val)
{
	int64_t i = map_find(m, key);

	if (i < 0)
		return false;
	if (val)
		*val = m->vals[i];
	return true;
}

bool gpu_map_del(struct gpu_map *m, uint64_t key)
{
	int64_t found = map_find(m, key);
	uint32_t i, j, mask = m->cap - 1;

	if (found < 0)
		return false;
	i = (uint32_t)found;
	m->used[i] = 0;
	m->n--;
	/* shift back the entries of the run that follows, so that lookups
	 * need no tombstones */
	for (j = (i + 1) & mask; m->used[j]; j = (j + 1) & mask) {
		uint32_t home = (uint32_t)gpu_mix64(m->keys[j]) & mask;

		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			m->used[i] = 1;
			m->used[j] = 0;
			i = j;
		}
	}
	return true;
}

bool gpu_map_next(const struct gpu_map *m, uint32_t *it, uint64_t *key,
		  uint64_t *val)
{
	for (; *it < m->cap; (*it)++) {
		if (m->used[*it]) {
			*key = m->keys[*it];
			*val = m->vals[*it];
			(*it)++;
			return true;
		}
	}
	return false;
}

void gpu_map_free(struct gpu_map *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	memset(m, 0, sizeof(*m));
}

/* ---- interned strings ---------------------------------------------------- */

void gpu_strtab_init(struct gpu_strtab *t, size_t max_bytes)
{
	memset(t, 0, sizeof(*t));
	t->max_bytes = max_bytes;
}

static uint32_t str_hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
	return (uint32_t)gpu_mix64(h);
}

static int slots_grow(struct gpu_strtab *t)
{
	uint32_t n = t->n_slots ? t->n_slots * 2 : 1024;
	uint32_t *s = calloc(n, sizeof(*s));

	if (!s)
		return -1;
	for (uint32_t id = 1; id <= t->n; id++) {
		uint32_t i = str_hash(t->arena + t->off[id], t->slen[id]) & (n - 1);

		while (s[i])
			i = (i + 1) & (n - 1);
		s[i] = id;
	}
	free(t->slots);
	t->slots = s;
	t->n_slots = n;
	return 0;
}

static uint32_t str_add(struct gpu_strtab *t, const char *s, size_t len)
{
	if (t->len + len + 1 > t->max_bytes || len > UINT32_MAX / 2) {
		t->refused++;
		return 0;
	}
	if (t->len + len + 1 > t->cap) {
		size_t cap = t->cap ? t->cap : 65536;
		char *a;

		while (cap < t->len + len + 1)
			cap *= 2;
		if (!(a = realloc(t->arena, cap)))
			return 0;
		t->arena = a;
		t->cap = cap;
	}
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
	t->n++;
	t->off[t->n] = (uint32_t)t->len;
	t->slen[t->n] = (uint32_t)len;
	t->len += len + 1;
	return t->n;
}

uint32_t gpu_str_intern(struct gpu_strtab *t, const char *s, size_t len)
{
	uint32_t i, id;

	if ((t->n + 1) * 2 > t->n_slots && slots_grow(t))
		return 0;
	for (i = str_hash(s, len) & (t->n_slots - 1); (id = t->slots[i]);
	     i = (i + 1) & (t->n_slots - 1))
		if (t->slen[id] == len && memcmp(t->arena + t->off[id], s, len) == 0)
			return id;
	id = str_add(t, s, len);
	if (id)
		t->slots[i] = id;
	return id;
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
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

/* ---- text buffer ------------------------------------------------------------ */

void gpu_buf_put(struct gpu_buf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		if (!(p = realloc(b->p, cap))) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void gpu_buf_puts(struct gpu_buf *b, const char *s)
{
	gpu_buf_put(b, s, strlen(s));
}

void gpu_buf_printf(struct gpu_buf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		gpu_buf_put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

void gpu_buf_free(struct gpu_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

uint64_t gpu_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
