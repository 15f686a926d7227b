/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the kit's hash map: exact contents after puts, deletes,
 * growth, clears and bounded use; iteration that visits every entry once,
 * also while deleting; and a long random run checked against a plain
 * array, with keys that collide and clusters that wrap around the table.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/hmap.h"

START_TEST(test_hmap_basic)
{
	struct nt_hmap m;
	bool created;

	ck_assert_int_eq(nt_hmap_init(&m, 0, 8, 0), -EINVAL);
	ck_assert_int_eq(nt_hmap_init(&m, sizeof(uint32_t), sizeof(uint64_t), 0), 0);
	ck_assert_ptr_eq(nt_hmap_get(&m, &(uint32_t){1}), NULL);
	ck_assert(!nt_hmap_del(&m, &(uint32_t){1}));
	for (uint32_t k = 0; k < 10000; k++) {
		uint64_t *v = nt_hmap_put(&m, &k, &created);
		ck_assert_ptr_nonnull(v);
		ck_assert(created);
		ck_assert_uint_eq(*v, 0); /* new values are zeroed */
		*v = (uint64_t)k * 2;
	}
	ck_assert_uint_eq(nt_hmap_count(&m), 10000);
	ck_assert(m.count * 4 <= m.cap * 3);
	uint64_t *again = nt_hmap_put(&m, &(uint32_t){77}, &created);
	ck_assert(!created);
	ck_assert_uint_eq(*again, 154);
	for (uint32_t k = 0; k < 10000; k += 2)
		ck_assert(nt_hmap_del(&m, &k));
	ck_assert_uint_eq(nt_hmap_count(&m), 5000);
	for (uint32_t k = 0; k < 10000; k++) {
		uint64_t *v = nt_hmap_get(&m, &k);
		if (k % 2 == 0) {
			ck_assert_ptr_eq(v, NULL);
		} else {
			ck_assert_ptr_nonnull(v);
			ck_assert_uint_eq(*v, (uint64_t)k * 2);
		}
	}
	ck_assert_ptr_eq(nt_hmap_get(&m, &(uint32_t){10000}), NULL);
	nt_hmap_clear(&m);
	ck_assert_uint_eq(nt_hmap_count(&m), 0);
	ck_assert_ptr_eq(nt_hmap_get(&m, &(uint32_t){1}), NULL);
	ck_assert_ptr_nonnull(nt_hmap_put(&m, &(uint32_t){1}, NULL));
	ck_assert_uint_eq(nt_hmap_count(&m), 1);
	nt_hmap_fini(&m);
}
END_TEST

START_TEST(test_hmap_bounded_and_set)
{
	struct nt_hmap m;

	ck_assert_int_eq(nt_hmap_init(&m, sizeof(uint64_t), sizeof(void *), 100), 0);
	for (uint64_t k = 0; k < 100; k++)
		ck_assert_ptr_nonnull(nt_hmap_put(&m, &k, NULL));
	errno = 0;
	ck_assert_ptr_eq(nt_hmap_put(&m, &(uint64_t){100}, NULL), NULL);
	ck_assert_int_eq(errno, E2BIG);
	ck_assert_ptr_nonnull(nt_hmap_put(&m, &(uint64_t){42}, NULL)); /* old */
	ck_assert_uint_eq(m.cap, 256); /* 100 entries at <= 3/4 load */
	ck_assert(nt_hmap_del(&m, &(uint64_t){3}));
	ck_assert_ptr_nonnull(nt_hmap_put(&m, &(uint64_t){100}, NULL));
	ck_assert_uint_eq(nt_hmap_count(&m), 100);
	ck_assert_uint_eq(m.cap, 256);
	nt_hmap_fini(&m);

	/* value size 0: a set */
	ck_assert_int_eq(nt_hmap_init(&m, 3, 0, 0), 0);
	ck_assert_ptr_nonnull(nt_hmap_put(&m, "abc", NULL));
	ck_assert_ptr_nonnull(nt_hmap_get(&m, "abc"));
	ck_assert_ptr_eq(nt_hmap_get(&m, "abd"), NULL);
	nt_hmap_fini(&m);

	ck_assert_uint_eq(nt_hash_bytes("abc", 3), nt_hash_bytes("abc", 3));
	ck_assert_uint_ne(nt_hash_bytes("\0", 1), nt_hash_bytes("\0\0", 2));
	ck_assert_uint_ne(nt_hash_bytes("", 0), nt_hash_bytes("\0", 1));
	ck_assert_uint_ne(nt_hash_bytes("abcdefgh1", 9), nt_hash_bytes("abcdefgh2", 9));
}
END_TEST

START_TEST(test_hmap_strings)
{
	enum { N = 1000 };
	struct nt_hmap m;
	char *durable[N], transient[32];
	struct nt_hmap_iter it;
	size_t visits = 0;

	ck_assert_int_eq(nt_hmap_init_str(&m, sizeof(uint32_t), 0), 0);
	for (uint32_t i = 0; i < N; i++) {
		/* Look up with a transient copy; on a miss, keep a durable one. */
		int n = snprintf(transient, sizeof(transient), "frame;%u;main", i * 7);
		struct nt_hstr key = {transient, (size_t)n};
		ck_assert_ptr_eq(nt_hmap_get(&m, &key), NULL);
		durable[i] = strdup(transient);
		key.s = durable[i];
		bool created;
		*(uint32_t *)nt_hmap_put(&m, &key, &created) = i;
		ck_assert(created);
	}
	/* Keys are compared by content and length, not by pointer or NUL. */
	for (uint32_t i = 0; i < N; i++) {
		int n = snprintf(transient, sizeof(transient), "frame;%u;mainXYZ", i * 7);
		struct nt_hstr key = {transient, (size_t)n - 3};
		uint32_t *v = nt_hmap_get(&m, &key);
		ck_assert_ptr_nonnull(v);
		ck_assert_uint_eq(*v, i);
		key.len--;
		ck_assert_ptr_eq(nt_hmap_get(&m, &key), NULL);
	}
	struct nt_hstr empty = {"", 0};
	ck_assert_ptr_eq(nt_hmap_get(&m, &empty), NULL);
	ck_assert(nt_hmap_del(&m, &(struct nt_hstr){"frame;0;main", 12}));
	ck_assert_uint_eq(nt_hmap_count(&m), N - 1);
	for (nt_hmap_iter_init(&it, &m); nt_hmap_iter_next(&it);) {
		const struct nt_hstr *k = it.key;
		ck_assert_ptr_eq(k->s, durable[*(uint32_t *)it.val]);
		visits++;
	}
	ck_assert_uint_eq(visits, N - 1);
	nt_hmap_fini(&m);
	for (uint32_t i = 0; i < N; i++)
		free(durable[i]);
}
END_TEST

/* A 12-byte key, so the generic compare and the tail of the hash run. */
struct key12 {
	uint32_t pid;
	int32_t stack;
	uint32_t kind;
};

START_TEST(test_hmap_iterate_and_delete)
{
	enum { N = 3000 };
	struct nt_hmap m;
	struct nt_hmap_iter it;
	unsigned char seen[N] = {0};
	size_t visits = 0;

	ck_assert_int_eq(nt_hmap_init(&m, sizeof(struct key12), sizeof(uint32_t), 0), 0);
	for (uint32_t i = 0; i < N; i++) {
		struct key12 k = {i, -(int32_t)i, i % 7};
		*(uint32_t *)nt_hmap_put(&m, &k, NULL) = i;
	}
	/* Delete every third entry while iterating: each entry is seen once. */
	for (nt_hmap_iter_init(&it, &m); nt_hmap_iter_next(&it);) {
		const struct key12 *k = it.key;
		uint32_t v = *(uint32_t *)it.val;

		ck_assert_uint_eq(k->pid, v);
		ck_assert_uint_eq(seen[v], 0);
		seen[v] = 1;
		visits++;
		if (v % 3 == 0)
			nt_hmap_iter_del(&it);
	}
	ck_assert_uint_eq(visits, N);
	ck_assert_uint_eq(nt_hmap_count(&m), N - N / 3);
	visits = 0;
	for (nt_hmap_iter_init(&it, &m); nt_hmap_iter_next(&it);) {
		ck_assert_uint_ne(*(uint32_t *)it.val % 3, 0);
		visits++;
		nt_hmap_iter_del(&it); /* empty it as we go */
	}
	ck_assert_uint_eq(visits, N - N / 3);
	ck_assert_uint_eq(nt_hmap_count(&m), 0);
	nt_hmap_iter_init(&it, &m);
	ck_assert(!nt_hmap_iter_next(&it));
	nt_hmap_fini(&m);
}
END_TEST

/* xorshift64: a fixed sequence, so a failure repeats. */
static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Every present key of the model is in the map with its value, and the
 * iteration (deleting some as it goes) sees exactly the model. */
static void check_against(struct nt_hmap *m, uint32_t *model, uint32_t keys,
			  uint64_t *rng)
{
	struct nt_hmap_iter it;
	size_t present = 0, visits = 0;

	for (uint32_t k = 0; k < keys; k++) {
		uint32_t *v = nt_hmap_get(m, &k);
		if (model[k]) {
			ck_assert_ptr_nonnull(v);
			ck_assert_uint_eq(*v, model[k]);
			present++;
		} else {
			ck_assert_ptr_eq(v, NULL);
		}
	}
	ck_assert_uint_eq(nt_hmap_count(m), present);
	for (nt_hmap_iter_init(&it, m); nt_hmap_iter_next(&it);) {
		uint32_t k = *(const uint32_t *)it.key;
		ck_assert_uint_eq(*(uint32_t *)it.val, model[k]);
		ck_assert_uint_lt(model[k], 0x80000000u); /* not seen yet */
		model[k] |= 0x80000000u;
		visits++;
		if (next_rand(rng) % 4 == 0) {
			nt_hmap_iter_del(&it);
			model[k] = 0;
		}
	}
	ck_assert_uint_eq(visits, present);
	for (uint32_t k = 0; k < keys; k++)
		model[k] &= 0x7fffffffu;
}

START_TEST(test_hmap_random_model)
{
	enum { KEYS = 512, OPS = 200000 };
	uint32_t model[KEYS] = {0}; /* 0: absent, else the value */
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	struct nt_hmap m;

	/* Bounded at 200 of 512 keys: the table stays small and dense, so
	 * collisions and wrapped clusters are the rule. */
	ck_assert_int_eq(nt_hmap_init(&m, sizeof(uint32_t), sizeof(uint32_t), 200), 0);
	for (uint32_t op = 1; op <= OPS; op++) {
		uint32_t k = (uint32_t)(next_rand(&rng) % KEYS);
		size_t count = nt_hmap_count(&m);

		if (next_rand(&rng) % 3) {
			uint32_t *v = nt_hmap_put(&m, &k, NULL);
			if (!model[k] && count == 200) {
				ck_assert_ptr_eq(v, NULL);
				continue;
			}
			ck_assert_ptr_nonnull(v);
			*v = model[k] = op;
		} else {
			ck_assert_int_eq(nt_hmap_del(&m, &k), model[k] != 0);
			model[k] = 0;
		}
		if (op % 20000 == 0)
			check_against(&m, model, KEYS, &rng);
	}
	check_against(&m, model, KEYS, &rng);
	ck_assert_uint_le(m.cap, 512);
	nt_hmap_fini(&m);
}
END_TEST

static Suite *hmap_suite(void)
{
	Suite *s = suite_create("kit_hmap");
	TCase *t = tcase_create("hmap");

	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_hmap_basic);
	tcase_add_test(t, test_hmap_bounded_and_set);
	tcase_add_test(t, test_hmap_strings);
	tcase_add_test(t, test_hmap_iterate_and_delete);
	tcase_add_test(t, test_hmap_random_model);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(hmap_suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
