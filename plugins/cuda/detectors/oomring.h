/* SPDX-License-Identifier: MIT */
/*
 * The evidence an out-of-memory alert carries: a ring of the last successful
 * allocations of a process (most recent first when read back).
 */
#ifndef CUDA_DET_OOMRING_H
#define CUDA_DET_OOMRING_H

#include <stdint.h>

#define OOM_RING_MAX 64

struct oom_rec {
	uint64_t ts_ns;
	uint64_t ptr;
	uint64_t size;
	uint32_t tid;
	uint32_t stack;
	uint32_t api;
	int32_t dev;
};

struct oom_ring {
	struct oom_rec r[OOM_RING_MAX];
	uint32_t cap;  /* <= OOM_RING_MAX */
	uint32_t head, n;
	uint64_t total;
};

void oom_ring_init(struct oom_ring *g, uint32_t cap);
void oom_ring_push(struct oom_ring *g, const struct oom_rec *rec);
/* The i-th most recent record (0 = newest), NULL past the end. */
const struct oom_rec *oom_ring_get(const struct oom_ring *g, uint32_t i);

#endif
