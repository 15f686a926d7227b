/* SPDX-License-Identifier: MIT */
/*
 * A small open-addressing hash map from byte-string keys to pointers, and a
 * string interner built on it. Generic plumbing the trace sink needs in
 * several places (tracks, interned names, flame-graph nodes, tables); kept
 * in one file so that moving to the SDK's plugin kit later is a one-file
 * change.
 *
 * Ownership: the map copies each key; values are the caller's (tmap_free
 * calls `free_val` on each when given).
 */
#ifndef NTCORE_TRACE_TMAP_H
#define NTCORE_TRACE_TMAP_H

#include <stddef.h>
#include <stdint.h>

struct tmap_ent {
	uint64_t hash; /* 0: empty slot */
	char *key;
	uint32_t klen;
	void *val;
};

struct tmap {
	struct tmap_ent *ents;
	uint32_t cap; /* power of two, or 0 */
	uint32_t n;
};

uint64_t tmap_hash(const void *key, size_t len);
/* The value stored under key, or NULL. */
void *tmap_get(const struct tmap *m, const void *key, size_t len);
/* Store (or replace) a value; returns 0, or -1 when out of memory. */
int tmap_put(struct tmap *m, const void *key, size_t len, void *val);
/* Iterate: start with *pos = 0; returns the next entry or NULL. */
const struct tmap_ent *tmap_next(const struct tmap *m, uint32_t *pos);
void tmap_free(struct tmap *m, void (*free_val)(void *));

/*
 * Interned strings: each distinct string gets a dense id from 1 upwards
 * and one NUL-terminated copy owned by the table. At most `max` strings
 * (0: unbounded); beyond that strs_id returns 0.
 */
struct strtab {
	struct tmap map;  /* string -> (void *)(uintptr_t)id */
	char **strs;      /* strs[id - 1] */
	uint32_t n, cap, max;
};

uint32_t strtab_id(struct strtab *t, const char *s, size_t len, int *is_new);
static inline const char *strtab_str(const struct strtab *t, uint32_t id)
{
	return id && id <= t->n ? t->strs[id - 1] : "";
}
void strtab_free(struct strtab *t);

#endif
