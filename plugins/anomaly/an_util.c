/* SPDX-License-Identifier: MIT */
/* Generic plumbing on the plugin kit; see an_util.h. */
#include "an_util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/clock.h"

void an_sb_init(struct an_sb *b)
{
	nt_sb_init(&b->k, 0);
}

void an_sb_free(struct an_sb *b)
{
	nt_sb_fini(&b->k);
}

void an_sb_reset(struct an_sb *b)
{
	nt_sb_reset(&b->k);
}

void an_sb_putn(struct an_sb *b, const char *s, size_t n)
{
	nt_sb_put(&b->k, s, n);
}

void an_sb_puts(struct an_sb *b, const char *s)
{
	nt_sb_puts(&b->k, s);
}

void an_sb_json_str(struct an_sb *b, const char *s)
{
	nt_sb_json_str(&b->k, s ? s : "", s ? strlen(s) : 0);
}

void an_sb_json_num(struct an_sb *b, double v)
{
	if (isfinite(v))
		an_sb_printf(b, "%.6g", v);
	else
		an_sb_puts(b, "null");
}

void an_sb_trim_space(struct an_sb *b)
{
	if (b->k.len && b->k.buf[b->k.len - 1] == ' ')
		nt_sb_rewind(&b->k, b->k.len - 1);
}

const char *an_sb_str(const struct an_sb *b)
{
	return nt_sb_str(&b->k);
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
	return nt_clock_mono_ns();
}

void an_map_init(struct an_map *m)
{
	nt_hmap_init(&m->h, sizeof(uint64_t), sizeof(void *), 0);
}

void an_map_fini(struct an_map *m)
{
	nt_hmap_fini(&m->h);
}

void *an_map_get(const struct an_map *m, uint64_t key)
{
	void *const *v = nt_hmap_get(&m->h, &key);

	return v ? *v : NULL;
}

int an_map_put(struct an_map *m, uint64_t key, void *val)
{
	void **v = nt_hmap_put(&m->h, &key, NULL);

	if (!v)
		return -1;
	*v = val;
	return 0;
}

void an_map_del(struct an_map *m, uint64_t key)
{
	nt_hmap_del(&m->h, &key);
}

size_t an_map_count(const struct an_map *m)
{
	return nt_hmap_count(&m->h);
}

void an_map_each(struct an_map *m, void (*fn)(void *val, void *ctx), void *ctx)
{
	struct nt_hmap_iter it;

	for (nt_hmap_iter_init(&it, &m->h); nt_hmap_iter_next(&it);)
		fn(*(void **)it.val, ctx);
}
