/* SPDX-License-Identifier: MIT */
/* Plugin kit: the open-addressing hash map (linear probing, backward-shift
 * deletion) and its hash. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/hmap.h"

/* A slot's hash word: 0 is an empty slot, so every stored hash has its top
 * bit set (the index uses the low bits, so nothing is lost). */
#define HM_USED (1ull << 63)
#define HM_MIN_CAP 16
#define HM_GOLDEN 0x9e3779b97f4a7c15ull

/* The murmur3 finalizer: every input bit reaches every output bit. */
static inline uint64_t fmix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

uint64_t nt_hash_bytes(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = HM_GOLDEN ^ ((uint64_t)n * 0xc2b2ae3d27d4eb4full);
	uint64_t w;

	for (; n >= 8; s += 8, n -= 8) {
		memcpy(&w, s, 8);
		h = (h ^ w) * HM_GOLDEN;
		h ^= h >> 29;
	}
	if (n) {
		w = 0;
		memcpy(&w, s, n);
		h = (h ^ w) * HM_GOLDEN;
		h ^= h >> 29;
	}
	return fmix64(h);
}

static inline uint64_t *slot_hash(const struct nt_hmap *m, size_t i)
{
	return (uint64_t *)(void *)(m->slots + i * m->slot_size);
}

static inline unsigned char *slot_key(const struct nt_hmap *m, size_t i)
{
	return m->slots + i * m->slot_size + sizeof(uint64_t);
}

static inline void *slot_val(const struct nt_hmap *m, size_t i)
{
	return m->slots + i * m->slot_size + m->val_off;
}

static bool hstr_equal(const void *a, const void *b)
{
	const struct nt_hstr *x = a, *y = b;

	return x->len == y->len && memcmp(x->s, y->s, x->len) == 0;
}

static inline bool keys_equal(const struct nt_hmap *m, const void *a,
			      const void *b)
{
	uint32_t n = m->key_size;
	uint64_t x, y;
	uint32_t u, v;

	if (m->str_keys)
		return hstr_equal(a, b);
	if (n == 8) {
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		return x == y;
	}
	if (n == 4) {
		memcpy(&u, a, 4);
		memcpy(&v, b, 4);
		return u == v;
	}
	return memcmp(a, b, n) == 0;
}

/* The slot hash of a key: never 0, which marks an empty slot. */
static inline uint64_t key_hash(const struct nt_hmap *m, const void *key)
{
	const struct nt_hstr *str = key;

	if (m->str_keys)
		return nt_hash_bytes(str->s, str->len) | HM_USED;
	return nt_hash_bytes(key, m->key_size) | HM_USED;
}

static size_t round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

int nt_hmap_init(struct nt_hmap *m, uint32_t key_size, uint32_t val_size,
		 size_t max_entries)
{
	memset(m, 0, sizeof(*m));
	if (!key_size || key_size > (1u << 20) || val_size > (1u << 20) ||
	    max_entries > (SIZE_MAX >> 24))
		return -EINVAL;
	m->key_size = key_size;
	m->val_size = val_size;
	m->val_off = (uint32_t)(sizeof(uint64_t) + round8(key_size));
	m->slot_size = (uint32_t)(m->val_off + round8(val_size));
	m->max = max_entries;
	return 0;
}

int nt_hmap_init_str(struct nt_hmap *m, uint32_t val_size, size_t max_entries)
{
	int err = nt_hmap_init(m, sizeof(struct nt_hstr), val_size, max_entries);

	m->str_keys = !err;
	return err;
}

void nt_hmap_fini(struct nt_hmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->count = 0;
}

void nt_hmap_clear(struct nt_hmap *m)
{
	if (m->slots)
		memset(m->slots, 0, m->cap * m->slot_size);
	m->count = 0;
}

/* Whether key (of hash h) is present; *pos is its slot, or the empty slot
 * where it would go. The table has at least one empty slot. */
static bool find(const struct nt_hmap *m, const void *key, uint64_t h,
		 size_t *pos)
{
	size_t mask = m->cap - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask) {
		uint64_t sh = *slot_hash(m, i);

		if (!sh || (sh == h && keys_equal(m, slot_key(m, i), key))) {
			*pos = i;
			return sh != 0;
		}
	}
}

void *nt_hmap_get(const struct nt_hmap *m, const void *key)
{
	size_t pos;

	if (!m->count)
		return NULL;
	if (!find(m, key, key_hash(m, key), &pos))
		return NULL;
	return slot_val(m, pos);
}

static int grow(struct nt_hmap *m, size_t cap)
{
	unsigned char *old = m->slots;
	size_t old_cap = m->cap, mask = cap - 1;

	if (cap > SIZE_MAX / m->slot_size)
		return -ENOMEM;
	m->slots = calloc(cap, m->slot_size);
	if (!m->slots) {
		m->slots = old;
		return -ENOMEM;
	}
	m->cap = cap;
	for (size_t i = 0; i < old_cap; i++) {
		const unsigned char *s = old + i * m->slot_size;
		uint64_t h;
		size_t j;

		memcpy(&h, s, sizeof(h));
		if (!h)
			continue;
		for (j = h & mask; *slot_hash(m, j); j = (j + 1) & mask)
			;
		memcpy(m->slots + j * m->slot_size, s, m->slot_size);
	}
	free(old);
	return 0;
}

void *nt_hmap_put(struct nt_hmap *m, const void *key, bool *created)
{
	uint64_t h = key_hash(m, key);
	size_t pos;

	if (created)
		*created = false;
	if (m->cap && find(m, key, h, &pos))
		return slot_val(m, pos);
	if (m->max && m->count >= m->max) {
		errno = E2BIG;
		return NULL;
	}
	if ((m->count + 1) * 4 > m->cap * 3) {
		if (grow(m, m->cap ? m->cap * 2 : HM_MIN_CAP)) {
			errno = ENOMEM;
			return NULL;
		}
		find(m, key, h, &pos);
	}
	*slot_hash(m, pos) = h;
	memcpy(slot_key(m, pos), key, m->key_size);
	memset(slot_val(m, pos), 0, m->val_size);
	m->count++;
	if (created)
		*created = true;
	return slot_val(m, pos);
}

/*
 * Empty slot `hole` and pull back the entries after it that probing could
 * no longer reach: an entry may move back to the hole unless its home slot
 * lies cyclically in (hole, j]. Entries only move towards the hole and
 * never past the next empty slot, which is what keeps iteration exact.
 */
static void delete_at(struct nt_hmap *m, size_t hole)
{
	size_t mask = m->cap - 1;

	for (size_t j = (hole + 1) & mask;; j = (j + 1) & mask) {
		uint64_t sh = *slot_hash(m, j);
		size_t home = sh & mask;

		if (!sh)
			break;
		if (hole <= j ? (home > hole && home <= j)
			      : (home > hole || home <= j))
			continue;
		memcpy(m->slots + hole * m->slot_size,
		       m->slots + j * m->slot_size, m->slot_size);
		hole = j;
	}
	*slot_hash(m, hole) = 0;
	m->count--;
}

bool nt_hmap_del(struct nt_hmap *m, const void *key)
{
	size_t pos;

	if (!m->count ||
	    !find(m, key, key_hash(m, key), &pos))
		return false;
	delete_at(m, pos);
	return true;
}

/* Start just after an empty slot: no entry can move across it. */
void nt_hmap_iter_init(struct nt_hmap_iter *it, struct nt_hmap *m)
{
	*it = (struct nt_hmap_iter){.m = m};
	if (!m->count)
		return;
	while (*slot_hash(m, it->at))
		it->at++;
	it->left = m->cap - 1;
}

bool nt_hmap_iter_next(struct nt_hmap_iter *it)
{
	const struct nt_hmap *m = it->m;

	for (;;) {
		if (it->stay) {
			it->stay = false;
		} else {
			if (!it->left)
				return false;
			it->at = (it->at + 1) & (m->cap - 1);
			it->left--;
		}
		if (*slot_hash(m, it->at)) {
			it->key = slot_key(m, it->at);
			it->val = slot_val(m, it->at);
			return true;
		}
	}
}

void nt_hmap_iter_del(struct nt_hmap_iter *it)
{
	delete_at(it->m, it->at);
	it->stay = true;
	it->key = NULL;
	it->val = NULL;
}
