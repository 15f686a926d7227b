/* SPDX-License-Identifier: MIT */
/*
 * Allocation tracking from cuda.alloc / cuda.free events, shared by
 * cuda_memleak, cuda_oom and cuda_frag: the live map, the interned stacks,
 * and the folding of a call seen at two layers (cudaMalloc calling
 * cuMemAlloc_v2 inside the runtime gives two events for one allocation:
 * the driver one returns first; the runtime one carries the user's stack).
 */
#ifndef CUDA_DET_TRACK_H
#define CUDA_DET_TRACK_H

#include <stdbool.h>
#include <stdint.h>

#include "allocmap.h"
#include "cudaev.h"

#define TRACK_RECENT 64

enum track_res {
	TRACK_IGNORED = 0, /* not device memory, failed, null pointer */
	TRACK_NEW,         /* a new live allocation */
	TRACK_DUP,         /* the same allocation seen at the other layer */
	TRACK_REPLACED,    /* an allocation at a live address (a lost free) */
	TRACK_FREED,       /* a live allocation was freed */
	TRACK_UNKNOWN,     /* a free of a pointer never seen allocated */
	TRACK_NOMEM,
};

struct track {
	struct amap map;
	struct stacktab st;
	bool include_host;
	struct {
		uint64_t ptr;
		uint32_t pid;
		uint32_t layer;
	} recent[TRACK_RECENT]; /* recent frees, to fold the second layer */
	uint32_t rhead;
	uint64_t dup_allocs, dup_frees, unknown_frees, ignored;
};

int track_init(struct track *t, bool include_host, uint32_t stack_limit);
void track_fini(struct track *t);
/* The memory kinds tracked: device, async, managed (+ host if asked). */
bool track_kind_ok(const struct track *t, uint32_t kind);
/* cuda.alloc that succeeded. *entry gets the live entry (after the call). */
enum track_res track_alloc(struct track *t, const struct cuev *e,
			   struct amap_entry *entry);
/* cuda.free. *entry gets the freed entry when TRACK_FREED. */
enum track_res track_free(struct track *t, const struct cuev *e,
			  struct amap_entry *entry);
/* Interns the event's stack text. */
uint32_t track_stack(struct track *t, const struct cuev *e);

#endif
