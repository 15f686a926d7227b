/* SPDX-License-Identifier: MIT */
/*
 * Finding a training step in a stream of kernel launches: a training loop
 * launches the same sequence of kernels every step, so some launches (a
 * kernel with its grid and block, as a 64-bit symbol) come exactly once per
 * step, always the same number of launches apart. Such a symbol is an
 * anchor: each of its launches starts a step, and the time between two is
 * the step time.
 *
 * Over a learning buffer of launches (the first eighth skipped: the first
 * steps warm up caches and autotuners), every symbol seen at least 4 times
 * whose gaps (in launches) are all equal within 5 % is regular; a kernel
 * launched several times per step at uneven places, or once per layer with
 * the step's head and tail between the last layer and the next first, is
 * not. The gap shared by the most regular symbols is the step length
 * (kernels that come once per step are many; one that comes every 10 steps
 * shares its gap with few); ties go to the longer gap. The anchor is the
 * most regular symbol with that gap.
 */
#ifndef AN_PERIOD_H
#define AN_PERIOD_H

#include <stddef.h>
#include <stdint.h>

struct period {
	uint64_t anchor;   /* the symbol that starts a step */
	uint32_t length;   /* launches per step */
	uint32_t steps;    /* anchor launches in the buffer */
	uint32_t since;    /* launches after the last anchor launch in it */
	uint32_t regular;  /* regular symbols with this length */
};

/* The symbol of a launch. */
uint64_t period_symbol(uint64_t func, const uint32_t grid[3],
		       const uint32_t block[3]);
/* Looks for the step in sym[0..n); 0 found, -1 not (yet), -2 ENOMEM. */
int period_find(const uint64_t *sym, size_t n, struct period *out);

#endif
