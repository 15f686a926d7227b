/* SPDX-License-Identifier: MIT */
/*
 * Generic plumbing of the anomaly detector, kept in one file so that moving
 * to the SDK's plugin kit (issue 20) is a one-file change: a growable string
 * buffer with JSON escaping, a 64-bit hash, the monotonic clock.
 * Pure C, no ntcore dependency.
 */
#ifndef AN_UTIL_H
#define AN_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct an_sb {
	char *p;
	size_t len, cap;
	bool oom; /* an allocation failed: the content is truncated */
};

void an_sb_init(struct an_sb *b);
void an_sb_free(struct an_sb *b);
void an_sb_reset(struct an_sb *b);
void an_sb_putn(struct an_sb *b, const char *s, size_t n);
void an_sb_puts(struct an_sb *b, const char *s);
void an_sb_printf(struct an_sb *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Appends `s` as a quoted JSON string. */
void an_sb_json_str(struct an_sb *b, const char *s);
/* Appends a finite double as JSON (non-finite values as null). */
void an_sb_json_num(struct an_sb *b, double v);
/* NUL-terminated view; "" when empty. */
const char *an_sb_str(const struct an_sb *b);

/* FNV-1a over n bytes, continuing from `h` (start with AN_HASH_SEED). */
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



/*
 * An open-addressing hash map from a 64-bit key (a hash, never 0) to a
 * pointer; linear probing with backward-shift deletion, so lookups stay
 * short after many removals. The map does not own the values.
 */
struct an_map {
	uint64_t *keys;
	void **vals;
	size_t cap, n;
};

void an_map_init(struct an_map *m);
void an_map_fini(struct an_map *m);
void *an_map_get(const struct an_map *m, uint64_t key);
/* Inserts or replaces; returns -1 on ENOMEM. */
int an_map_put(struct an_map *m, uint64_t key, void *val);
void an_map_del(struct an_map *m, uint64_t key);
#endif
