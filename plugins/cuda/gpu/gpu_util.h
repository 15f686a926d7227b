/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda_gpu: its plumbing, on the plugin kit: a u64 map over
 * nt_hmap and interned strings; text is built with the kit's nt_sb and
 * time read with nt_clock_mono_ns (both included from here).
 */
#ifndef NTCORE_GPU_UTIL_H
#define NTCORE_GPU_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/kit/clock.h"
#include "ntcore/kit/hmap.h"
#include "ntcore/kit/sb.h"

/* u64 -> u64 on the kit's nt_hmap (a zeroed struct is an empty map). */
struct gpu_map {
	struct nt_hmap h;
};

int gpu_map_put(struct gpu_map *m, uint64_t key, uint64_t val); /* 0 / -1 */
bool gpu_map_get(const struct gpu_map *m, uint64_t key, uint64_t *val);
bool gpu_map_del(struct gpu_map *m, uint64_t key);
/* *it starts zeroed ({0}); false at the end (no insertion or deletion
 * meanwhile) */
bool gpu_map_next(struct gpu_map *m, struct nt_hmap_iter *it, uint64_t *key,
		  uint64_t *val);
void gpu_map_free(struct gpu_map *m);

/* Interned strings: id 1.. for each distinct string; 0 means none. */
struct gpu_strtab {
	char *arena;
	size_t len, cap, max_bytes;
	uint32_t *off, *slen;   /* by id */
	uint32_t n, cap_ids;
	struct nt_hmap index;   /* struct nt_hstr (into arena) -> uint32_t id */
	uint64_t refused;       /* strings not kept: max_bytes reached */
};

void gpu_strtab_init(struct gpu_strtab *t, size_t max_bytes);
/* The id of s[0..len) (added when new); 0 when full or out of memory. */
uint32_t gpu_str_intern(struct gpu_strtab *t, const char *s, size_t len);
/* The string of id ("" for 0 or unknown); *len gets its length. */
const char *gpu_str(const struct gpu_strtab *t, uint32_t id, uint32_t *len);
void gpu_strtab_free(struct gpu_strtab *t);

#endif
