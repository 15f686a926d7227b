/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: one open-addressing hash map.
 *
 * Keys and values are fixed-size byte blocks given at init (a pid, a
 * struct {tgid, stack_id}, a 64-bit cookie; values are structs or
 * pointers), stored inline in one array: no allocation per entry. Linear
 * probing with the full hash kept beside each entry (compares and growth
 * need no rehash of the key), at most 3/4 full, and deletion by backward
 * shift, so there are no tombstones and lookups stay short however many
 * entries come and go.
 *
 * Bounded: with max_entries set, a put beyond it fails (the caller counts
 * the drop) and the table never grows past the size that bound needs.
 *
 * String keys (names, stacks, metric names: any length): a map made by
 * nt_hmap_init_str takes a struct nt_hstr {s, len} as its key and hashes
 * and compares the bytes it points to. The map stores the struct, not the
 * bytes: they must stay where they are while the entry exists. So look up
 * with any copy (a record's borrowed string), and on a miss copy the bytes
 * somewhere durable first and put the key that points there.
 *
 * Iteration visits each entry exactly once and may delete the entry it is
 * on (nt_hmap_iter_del); any other change during an iteration (a put, a
 * delete of another key) is not allowed.
 *
 *   struct nt_hmap procs;
 *   nt_hmap_init(&procs, sizeof(uint32_t), sizeof(struct proc), 4096);
 *   bool created;
 *   struct proc *p = nt_hmap_put(&procs, &pid, &created);
 *   if (!p) count the drop;             // full (or out of memory)
 *   struct nt_hmap_iter it;
 *   for (nt_hmap_iter_init(&it, &procs); nt_hmap_iter_next(&it);)
 *       if (gone(it.key)) nt_hmap_iter_del(&it);
 *
 * Pointers returned by get/put stay valid until the next put or delete.
 * Not thread-safe.
 */
#ifndef NTCORE_KIT_HMAP_H
#define NTCORE_KIT_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nt_hmap {
	unsigned char *slots; /* cap slots of slot_size bytes */
	size_t cap;           /* a power of two; 0 before the first put */
	size_t count;         /* entries */
	size_t max;           /* entries allowed (0 at init: no bound) */
	uint32_t key_size, val_size;
	uint32_t val_off, slot_size;
	bool str_keys;        /* keys are struct nt_hstr, compared by content */
};

/* The key of a string map: len bytes at s (no NUL needed), borrowed. */
struct nt_hstr {
	const char *s;
	size_t len;
};

struct nt_hmap_iter {
	struct nt_hmap *m;
	size_t at;   /* slot of the entry returned last */
	size_t left; /* slots not yet looked at */
	bool stay;   /* the entry at `at` was deleted: look there again */
	const void *key; /* the current entry (valid until the next call) */
	void *val;
};

/* key_size >= 1; val_size may be 0 (a set). max_entries 0: no bound.
 * Returns 0 or -EINVAL. Allocates nothing until the first put. */
int nt_hmap_init(struct nt_hmap *m, uint32_t key_size, uint32_t val_size,
		 size_t max_entries);
/* A map whose keys are struct nt_hstr (see above). Returns 0 or -EINVAL. */
int nt_hmap_init_str(struct nt_hmap *m, uint32_t val_size, size_t max_entries);
void nt_hmap_fini(struct nt_hmap *m);
/* Remove every entry, keeping the memory. */
void nt_hmap_clear(struct nt_hmap *m);

/* The value stored for key, or NULL. */
void *nt_hmap_get(const struct nt_hmap *m, const void *key);
/*
 * The value for key, inserted zero-filled if absent (*created tells which,
 * when created is not NULL). NULL when the key is new and the map holds
 * max_entries already (errno E2BIG) or memory runs out (errno ENOMEM).
 */
void *nt_hmap_put(struct nt_hmap *m, const void *key, bool *created);
/* Remove key; false when it was not there. */
bool nt_hmap_del(struct nt_hmap *m, const void *key);

static inline size_t nt_hmap_count(const struct nt_hmap *m)
{
	return m->count;
}

void nt_hmap_iter_init(struct nt_hmap_iter *it, struct nt_hmap *m);
/* Move to the next entry (it->key, it->val); false at the end. */
bool nt_hmap_iter_next(struct nt_hmap_iter *it);
/* Delete the current entry; the iteration goes on with the next one. */
void nt_hmap_iter_del(struct nt_hmap_iter *it);

/* The map's hash of n bytes (64-bit, well mixed): for callers that hash
 * elsewhere, e.g. to compare a /proc file with its last read. */
uint64_t nt_hash_bytes(const void *p, size_t n);

#endif /* NTCORE_KIT_HMAP_H */
