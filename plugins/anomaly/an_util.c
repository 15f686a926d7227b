/* SPDX-License-Identifier: MIT */
/* Generic plumbing: string buffer, hash, clock (see an_util.h). */
#include "an_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void an_sb_init(struct an_sb *b)
{
	memset(b, 0, sizeof(*b));
}

void an_sb_free(struct an_sb *b)
{
	free(b->p);
	an_sb_init(b);
}

void an_sb_reset(struct an_sb *b)
{
	b->len = 0;
	if (b->p)
		b->p[0] = '\0';
}

static bool sb_reserve(struct an_sb *b, size_t more)
{
	size_t need = b->len + more + 1, cap;
	char *p;

	if (b->oom)
		return false;
	if (need <= b->cap)
		return true;
	for (cap = b->cap ? b->cap : 256; cap < need; cap *= 2)
		;
	p = realloc(b->p, cap);
	if (!p) {
		b->oom = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

void an_sb_putn(struct an_sb *b, const char *s, size_t n)
{
	if (!sb_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void an_sb_puts(struct an_sb *b, const char *s)
{
	an_sb_putn(b, s, strlen(s));
}

void an_sb_printf(struct an_sb *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !sb_reserve(b, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

void an_sb_json_str(struct an_sb *b, const char *s)
{
	an_sb_putn(b, "\"", 1);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			an_sb_printf(b, "\\%c", c);
		else if (c < 0x20)
			an_sb_printf(b, "\\u%04x", c);
		else
			an_sb_putn(b, (const char *)&c, 1);
	}
	an_sb_putn(b, "\"", 1);
}

void an_sb_json_num(struct an_sb *b, double v)
{
	if (isfinite(v))
		an_sb_printf(b, "%.6g", v);
	else
		an_sb_puts(b, "null");
}

const char *an_sb_str(const struct an_sb *b)
{
	return b->p ? b->p : "";
}

uint64_t an_hash(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;

	for (size_t i = 0; i < n; i++) {
		h ^= c[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

uint64_t an_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void an_map_init(struct an_map *m)
{
	memset(m, 0, sizeof(*m));
}

void an_map_fini(struct an_map *m)
{
	free(m->keys);
	free(m->vals);
	an_map_init(m);
}

static size_t slot_of(const struct an_map *m, uint64_t key)
{
	return (size_t)(key * 0x9e3779b97f4a7c15ULL >> 20) & (m->cap - 1);
}

void *an_map_get(const struct an_map *m, uint64_t key)
{
	if (!key)
		key = 1;
	if (!m->cap)
		return NULL;
	for (size_t i = slot_of(m, key);; i = (i + 1) & (m->cap - 1)) {
		if (m->keys[i] == key)
			return m->vals[i];
		if (!m->keys[i])
			return NULL;
	}
}

static int map_grow(struct an_map *m)
{
	struct an_map g = { .cap = m->cap ? m->cap * 2 : 64 };

	g.keys = calloc(g.cap, sizeof(*g.keys));
	g.vals = calloc(g.cap, sizeof(*g.vals));
	if (!g.keys || !g.vals) {
		free(g.keys);
		free(g.vals);
		return -1;
	}
	for (size_t i = 0; i < m->cap; i++)
		if (m->keys[i])
			an_map_put(&g, m->keys[i], m->vals[i]);
	an_map_fini(m);
	*m = g;
	return 0;
}

int an_map_put(struct an_map *m, uint64_t key, void *val)
{
	size_t i;

	if (!key)
		key = 1; /* 0 marks an empty slot */
	if ((m->n + 1) * 4 > m->cap * 3 && map_grow(m) < 0)
		return -1;
	for (i = slot_of(m, key); m->keys[i] && m->keys[i] != key;
	     i = (i + 1) & (m->cap - 1))
		;
	if (!m->keys[i])
		m->n++;
	m->keys[i] = key;
	m->vals[i] = val;
	return 0;
}

void an_map_del(struct an_map *m, uint64_t key)
{
	size_t i, j;

	if (!key)
		key = 1;
	if (!m->cap)
		return;
	for (i = slot_of(m, key); m->keys[i] != key; i = (i + 1) & (m->cap - 1))
		if (!m->keys[i])
			return;
	/* backward shift: pull later members of the probe chain into the hole */
	for (j = (i + 1) & (m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1)) {
		size_t home = slot_of(m, m->keys[j]);

		if (((j - home) & (m->cap - 1)) >= ((j - i) & (m->cap - 1))) {
			m->keys[i] = m->keys[j];
			m->vals[i] = m->vals[j];
			i = j;
		}
	}
	m->keys[i] = 0;
	m->vals[i] = NULL;
	m->n--;
}
