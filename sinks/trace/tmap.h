/* SPDX-License-Identifier: MIT */
/*
 * The trace sink's maps, on the kit's string map (nt_hmap_init_str):
 * byte-string keys (names, schema pointers, (parent, name) pairs) to
 * pointers, with the key bytes copied and owned here because the kit's map
 * only borrows them; and a string interner giving dense ids.
 *
 * A zeroed struct tmap (or strtab) is an empty one: the kit's map is made
 * on the first put. Ownership: the map owns its key copies; values are the
 * caller's (tmap_free calls `free_val` on each when given).
 */
#ifndef NTCORE_TRACE_TMAP_H
#define NTCORE_TRACE_TMAP_H

#include <stddef.h>
#include <stdint.h>

#include <ntcore/kit/hmap.h>

/* One entry, stored as the kit map's value; its key points at `key`. */
struct tmap_ent {
	char *key; /* owned copy of the key bytes */
	uint32_t klen;
	void *val;
};

struct tmap {
	struct nt_hmap map; /* struct nt_hstr -> struct tmap_ent */
};

/* The value stored under key, or NULL. */
void *tmap_get(const struct tmap *m, const void *key, size_t len);
/* Store (or replace) a value; returns 0, or -1 when out of memory. */
int tmap_put(struct tmap *m, const void *key, size_t len, void *val);
static inline size_t tmap_count(const struct tmap *m)
{
	return nt_hmap_count(&m->map);
}
/* Iterate (no put or free meanwhile): tmap_iter_init, then tmap_next
 * until it returns NULL. Entries come in no particular order. */
void tmap_iter_init(struct nt_hmap_iter *it, const struct tmap *m);
const struct tmap_ent *tmap_next(struct nt_hmap_iter *it);
void tmap_free(struct tmap *m, void (*free_val)(void *));

/*
 * Interned strings: each distinct string gets a dense id from 1 upwards
 * and one NUL-terminated copy owned by the table (which is also the kit
 * map's key). At most `max` strings (0: unbounded); beyond that strtab_id
 * returns 0.
 */
struct strtab {
	struct nt_hmap map; /* struct nt_hstr (into strs) -> uint32_t id */
	char **strs;        /* strs[id - 1] */
	uint32_t n, cap, max;
};

uint32_t strtab_id(struct strtab *t, const char *s, size_t len, int *is_new);
static inline const char *strtab_str(const struct strtab *t, uint32_t id)
{
	return id && id <= t->n ? t->strs[id - 1] : "";
}
void strtab_free(struct strtab *t);

#endif
