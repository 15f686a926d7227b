/* SPDX-License-Identifier: MIT */
/* Plugin kit: the top-N table, a sorted array of rows. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/topn.h"

/* A row: its score, its key (keyed offers), then the item. */
struct row_head {
	uint64_t score;
	uint64_t key;
	bool keyed;
};

#define ROW_ITEM_OFF ((sizeof(struct row_head) + 15) & ~(size_t)15)

static unsigned char *row_at(const struct nt_topn *t, size_t i)
{
	return t->rows + i * t->row_size;
}

static const struct row_head *head_at(const struct nt_topn *t, size_t i)
{
	return (const struct row_head *)(const void *)row_at(t, i);
}

int nt_topn_init(struct nt_topn *t, size_t cap, size_t item_size)
{
	memset(t, 0, sizeof(*t));
	if (!item_size || item_size > (1u << 24))
		return -EINVAL;
	t->cap = cap;
	t->item_size = item_size;
	t->row_size = ROW_ITEM_OFF + ((item_size + 15) & ~(size_t)15);
	if (cap && !(t->rows = calloc(cap, t->row_size)))
		return -ENOMEM;
	return 0;
}

void nt_topn_fini(struct nt_topn *t)
{
	free(t->rows);
	memset(t, 0, sizeof(*t));
}

static void remove_row(struct nt_topn *t, size_t i)
{
	memmove(row_at(t, i), row_at(t, i + 1), (t->n - i - 1) * t->row_size);
	t->n--;
}

static bool insert(struct nt_topn *t, const struct row_head *h,
		   const void *item)
{
	size_t lo = 0, hi = t->n;

	if (!t->cap || (t->n == t->cap && head_at(t, t->n - 1)->score >= h->score))
		return false;
	/* After every row with a score >= this one: equal scores keep the
	 * order they were offered in. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (head_at(t, mid)->score >= h->score)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (t->n == t->cap)
		t->n--; /* the smallest row falls out */
	memmove(row_at(t, lo + 1), row_at(t, lo), (t->n - lo) * t->row_size);
	memcpy(row_at(t, lo), h, sizeof(*h));
	memcpy(row_at(t, lo) + ROW_ITEM_OFF, item, t->item_size);
	t->n++;
	return true;
}

bool nt_topn_offer(struct nt_topn *t, uint64_t score, const void *item)
{
	struct row_head h = {.score = score};

	return insert(t, &h, item);
}

bool nt_topn_offer_keyed(struct nt_topn *t, uint64_t key, uint64_t score,
			 const void *item)
{
	struct row_head h = {.score = score, .key = key, .keyed = true};

	for (size_t i = 0; i < t->n; i++) {
		const struct row_head *r = head_at(t, i);
		if (r->keyed && r->key == key) {
			remove_row(t, i);
			break;
		}
	}
	return insert(t, &h, item);
}

const void *nt_topn_at(const struct nt_topn *t, size_t i, uint64_t *score)
{
	if (i >= t->n)
		return NULL;
	if (score)
		*score = head_at(t, i)->score;
	return row_at(t, i) + ROW_ITEM_OFF;
}
