/* SPDX-License-Identifier: MIT */
/* The repeating kernel sequence of a training step; see period.h. */
#include "period.h"

#include <stdlib.h>
#include <string.h>

#include "an_util.h"

#define MIN_OCCURRENCES 4
#define MIN_LENGTH 2

struct symstat {
	uint64_t sym;
	uint32_t count, first, last;
	uint32_t gap_min, gap_max;
	uint64_t gap_sum;
};

uint64_t period_symbol(uint64_t func, const uint32_t grid[3],
		       const uint32_t block[3])
{
	uint64_t h = an_hash(AN_HASH_SEED, &func, sizeof(func));

	h = an_hash(h, grid, 3 * sizeof(*grid));
	return an_hash(h, block, 3 * sizeof(*block)) | 1;
}

/* One pass: occurrence and gap statistics of every symbol in sym[from, n). */
static struct symstat *gather(const uint64_t *sym, size_t from, size_t n,
			      size_t *nstats)
{
	struct an_map idx;
	struct symstat *st = malloc((n - from) * sizeof(*st));
	size_t k = 0;

	an_map_init(&idx);
	if (!st)
		return NULL;
	for (size_t i = from; i < n; i++) {
		uintptr_t slot = (uintptr_t)an_map_get(&idx, sym[i]);
		struct symstat *s;

		if (!slot) {
			if (an_map_put(&idx, sym[i], (void *)(uintptr_t)(k + 1)) < 0) {
				free(st);
				an_map_fini(&idx);
				return NULL;
			}
			st[k] = (struct symstat){ .sym = sym[i], .count = 1,
						  .first = (uint32_t)i,
						  .last = (uint32_t)i,
						  .gap_min = UINT32_MAX };
			k++;
			continue;
		}
		s = &st[slot - 1];
		uint32_t gap = (uint32_t)i - s->last;

		s->gap_min = gap < s->gap_min ? gap : s->gap_min;
		s->gap_max = gap > s->gap_max ? gap : s->gap_max;
		s->gap_sum += gap;
		s->last = (uint32_t)i;
		s->count++;
	}
	an_map_fini(&idx);
	*nstats = k;
	return st;
}

static uint32_t regular_gap(const struct symstat *s)
{
	uint32_t mean, tol;

	if (s->count < MIN_OCCURRENCES)
		return 0;
	mean = (uint32_t)((s->gap_sum + (s->count - 1) / 2) / (s->count - 1));
	tol = mean / 20;
	if (mean < MIN_LENGTH || s->gap_max - s->gap_min > tol)
		return 0;
	return mean;
}

/* The gap shared by the most regular symbols (ties: the longer). */
static uint32_t common_gap(const struct symstat *st, size_t k, uint32_t *votes)
{
	uint32_t best = 0, best_n = 0;

	for (size_t i = 0; i < k; i++) {
		uint32_t g = regular_gap(&st[i]), n = 0;

		if (!g)
			continue;
		for (size_t j = 0; j < k; j++) {
			uint32_t h = regular_gap(&st[j]);

			if (h && (h > g ? h - g : g - h) <= g / 20)
				n++;
		}
		if (n > best_n || (n == best_n && g > best)) {
			best = g;
			best_n = n;
		}
	}
	*votes = best_n;
	return best;
}

int period_find(const uint64_t *sym, size_t n, struct period *out)
{
	size_t from = n / 8, k;
	struct symstat *st, *pick = NULL;
	uint32_t g, votes;

	if (n < 16)
		return -1;
	if (!(st = gather(sym, from, n, &k)))
		return -2;
	g = common_gap(st, k, &votes);
	for (size_t i = 0; g && i < k; i++) {
		uint32_t h = regular_gap(&st[i]);

		if (!h || (h > g ? h - g : g - h) > g / 20)
			continue;
		if (!pick || st[i].gap_max - st[i].gap_min <
				     pick->gap_max - pick->gap_min ||
		    (st[i].gap_max - st[i].gap_min ==
			     pick->gap_max - pick->gap_min &&
		     st[i].first < pick->first))
			pick = &st[i];
	}
	if (!pick) {
		free(st);
		return -1;
	}
	*out = (struct period){ .anchor = pick->sym, .length = g,
				.regular = votes, .since = (uint32_t)(n - 1 - pick->last) };
	for (size_t i = 0; i < n; i++)
		out->steps += sym[i] == pick->sym;
	free(st);
	return 0;
}
