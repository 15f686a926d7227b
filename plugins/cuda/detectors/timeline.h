/* SPDX-License-Identifier: MIT */
/*
 * Memory timeline of one (process, device): every allocation as a bar from
 * its alloc to its free (address on the vertical axis, time on the
 * horizontal one), failed allocations marked in red, written as an SVG file
 * a person opens in a browser.
 */
#ifndef CUDA_DET_TIMELINE_H
#define CUDA_DET_TIMELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "allocmap.h"
#include "frag.h"

struct tl_rec {
	uint64_t ptr, size;
	uint64_t t0, t1;  /* alloc and free time, ns; t1 = 0 while live */
	uint32_t stack;
	uint8_t failed;
	uint8_t pad[3];
};

struct timeline {
	uint32_t pid;
	int32_t dev;
	struct tl_rec *r;
	uint32_t n, cap, max;
	uint64_t dropped;   /* allocations not recorded (max reached) */
	uint64_t t_first, t_last;
};

void tl_init(struct timeline *t, uint32_t pid, int32_t dev, uint32_t max);
void tl_fini(struct timeline *t);
/* Returns the record index (for tl_free) or UINT32_MAX when not recorded. */
uint32_t tl_alloc(struct timeline *t, uint64_t ptr, uint64_t size,
		  uint64_t ts, uint32_t stack);
void tl_free(struct timeline *t, uint32_t idx, uint64_t ts);
void tl_failed(struct timeline *t, uint64_t size, uint64_t ts, uint32_t stack);

/* Writes the picture. `fs` (may be NULL) is a fragmentation reading printed
 * under the title: the worst one of the run when fs_ts is its time (then a
 * marker line shows that moment), else the current one (fs_ts 0); t_end
 * closes live bars. Returns 0 or a negative errno. */
int tl_write_svg(const struct timeline *t, FILE *f, const char *title,
		 uint64_t t_end, const struct stacktab *st,
		 const struct frag_stats *fs, uint64_t fs_ts);
/* Same, to a path (written to PATH.tmp, then renamed). */
int tl_write_svg_file(const struct timeline *t, const char *path,
		      const char *title, uint64_t t_end,
		      const struct stacktab *st, const struct frag_stats *fs,
		      uint64_t fs_ts);

#endif
