/* SPDX-License-Identifier: MIT */
/*
 * The anomaly detector's generic plumbing, on the SDK's plugin kit
 * (<ntcore/kit/>): a string builder with JSON output, a map from 64-bit
 * keys to pointers, an incremental 64-bit hash for composite keys, the
 * monotonic clock. One file, so that the rest of the plugin does not depend
 * on the kit's spelling.
 */
#ifndef AN_UTIL_H
#define AN_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/kit/hmap.h"
#include "ntcore/kit/sb.h"

/* A growable string builder (the kit's, unbounded but by memory). */
struct an_sb {
	struct nt_sb k;
};

void an_sb_init(struct an_sb *b);
void an_sb_free(struct an_sb *b);
void an_sb_reset(struct an_sb *b);
void an_sb_putn(struct an_sb *b, const char *s, size_t n);
void an_sb_puts(struct an_sb *b, const char *s);
/* printf (the kit's: all or nothing) */
#define an_sb_printf(b, ...) nt_sb_printf(&(b)->k, __VA_ARGS__)
/* Appends `s` as a quoted JSON string. */
void an_sb_json_str(struct an_sb *b, const char *s);
/* Appends a finite double as JSON (non-finite values as null). */
void an_sb_json_num(struct an_sb *b, double v);
/* Drops one trailing space, if any. */
void an_sb_trim_space(struct an_sb *b);
/* NUL-terminated view; "" when empty. */
const char *an_sb_str(const struct an_sb *b);

/* FNV-1a over n bytes, continuing from `h` (start with AN_HASH_SEED):
 * composite keys are hashed part by part. */
#define AN_HASH_SEED 0xcbf29ce484222325ULL
uint64_t an_hash(uint64_t h, const void *p, size_t n);
static inline uint64_t an_hash_str(uint64_t h, const char *s)
{
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* CLOCK_MONOTONIC in ns (the clock of event timestamps). */
uint64_t an_now_ns(void);

/* A map from 64-bit keys to pointers (the kit's map); it does not own the
 * values. */
struct an_map {
	struct nt_hmap h;
};

void an_map_init(struct an_map *m);
void an_map_fini(struct an_map *m);
void *an_map_get(const struct an_map *m, uint64_t key);
/* Inserts or replaces; returns -1 on ENOMEM. */
int an_map_put(struct an_map *m, uint64_t key, void *val);
void an_map_del(struct an_map *m, uint64_t key);
size_t an_map_count(const struct an_map *m);
/* Calls fn(val, ctx) for every value. */
void an_map_each(struct an_map *m, void (*fn)(void *val, void *ctx), void *ctx);

#endif
