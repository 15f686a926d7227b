/* SPDX-License-Identifier: MIT */
/*
 * ntcore plugin kit: a top-N table, the rows with the largest scores.
 *
 * For reports ("the 10 slowest requests", "the busiest connections"):
 * offer every candidate row with its score; the table keeps the `cap`
 * largest, sorted, largest first. A row offered with a score equal to the
 * smallest kept one does not displace it, and among equal scores the row
 * offered first comes first, so a report is the same for the same input.
 * Keyed offers merge: a row offered again under the same key replaces the
 * earlier one (a connection whose byte count grew). Rows that fell out are
 * not remembered: when a kept row's score drops, a row dropped earlier with
 * a larger score does not come back.
 *
 * Rows are copied in (item_size bytes each). An offer costs O(cap); meant
 * for tables of tens to a few thousand rows. Not thread-safe.
 */
#ifndef NTCORE_KIT_TOPN_H
#define NTCORE_KIT_TOPN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct nt_topn {
	unsigned char *rows; /* cap rows of row_size bytes, sorted */
	size_t n, cap;
	size_t item_size, row_size;
};

/* Returns 0, -EINVAL (item_size 0) or -ENOMEM. cap may be 0 (keeps
 * nothing). */
int nt_topn_init(struct nt_topn *t, size_t cap, size_t item_size);
void nt_topn_fini(struct nt_topn *t);
/* Forget every row, keeping the memory. */
static inline void nt_topn_reset(struct nt_topn *t) { t->n = 0; }

/* Keep `item` if its score is among the cap largest; true when kept. */
bool nt_topn_offer(struct nt_topn *t, uint64_t score, const void *item);
/* The same, first removing a row kept earlier under `key`. */
bool nt_topn_offer_keyed(struct nt_topn *t, uint64_t key, uint64_t score,
			 const void *item);

static inline size_t nt_topn_count(const struct nt_topn *t) { return t->n; }
/* The i-th row (0: largest score), and its score when `score` is not
 * NULL; NULL when i >= count. Valid until the next offer. */
const void *nt_topn_at(const struct nt_topn *t, size_t i, uint64_t *score);

#endif /* NTCORE_KIT_TOPN_H */
