/* SPDX-License-Identifier: MIT */
/*
 * ntcore python probe: a u64 -> pointer map (processes by pid, threads by
 * tid, code objects and types by address, names by hash), as a thin
 * adapter over the kit's nt_hmap: a zeroed struct py_map is an empty map;
 * values are never NULL (NULL means absent). Not thread-safe.
 */
#ifndef NTCORE_PYMAP_H
#define NTCORE_PYMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/kit/hmap.h"

struct py_map {
	struct nt_hmap h; /* key uint64_t, value void *; unset until the first put */
};

/* An iteration: zero it before the first py_map_next. */
struct py_map_it {
	struct nt_hmap_iter i;
	bool started;
};

void *py_map_get(const struct py_map *m, uint64_t key);
/* Insert or replace (val must not be NULL); 0 or -1 on ENOMEM. */
int py_map_put(struct py_map *m, uint64_t key, void *val);
/* Remove and return the value (NULL if absent). Not during an iteration
 * of m (py_map_it_del deletes the entry an iteration is on). */
void *py_map_del(struct py_map *m, uint64_t key);
size_t py_map_count(const struct py_map *m);
/* The next entry; false at the end. */
bool py_map_next(struct py_map *m, struct py_map_it *it, uint64_t *key,
		 void **val);
/* Remove the entry the iteration is on and return its value; the
 * iteration goes on with the next one. */
void *py_map_it_del(struct py_map_it *it);
void py_map_free(struct py_map *m);

#endif
