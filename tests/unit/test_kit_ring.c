/* SPDX-License-Identifier: MIT */
/*
 * The kit's ring reader (lib/kit/ring.c) against a real one-page BPF ring
 * (tests/fixtures/kit/kit_ring.bpf.c writes the records): every record in
 * order with its exact bytes, one that crosses the end of the data read
 * whole, a discarded one skipped and not counted, a callback's refusal
 * returned with the ring going on after it, and the data mapped once
 * (what ntcore's RSS is about). Needs root (BPF): without it the program
 * says SKIP and exits 77, which meson counts as skipped.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/kit/ring.h"
#include "kit_ring.bpf.skel.h"

struct ring_args {
	uint32_t n, size, first, discard_at, written;
};

struct got {
	int n;
	uint32_t sizes[16];
	uint32_t seeds[16]; /* first byte of each record */
	int bad_bytes;
	int refuse_at;      /* the callback returns -5 for this record, -1: none */
};

static int on_record(void *ctx, void *data, size_t size)
{
	struct got *g = ctx;
	const uint8_t *b = data;
	int i = g->n;

	if (i >= 16)
		return -7;
	g->sizes[i] = (uint32_t)size;
	g->seeds[i] = size ? b[0] : 0;
	for (size_t k = 0; k < size; k++)
		g->bad_bytes += b[k] != (uint8_t)(b[0] + k);
	g->n++;
	return i == g->refuse_at ? -5 : 0;
}

static uint32_t produce(struct kit_ring_bpf *s, uint32_t n, uint32_t size,
			uint32_t first, uint32_t discard_at)
{
	struct ring_args a = {.n = n, .size = size, .first = first,
			      .discard_at = discard_at};
	/* a syscall program's context is copied back into ctx_in */
	LIBBPF_OPTS(bpf_test_run_opts, o, .ctx_in = &a, .ctx_size_in = sizeof(a));

	ck_assert_int_eq(bpf_prog_test_run_opts(bpf_program__fd(s->progs.produce), &o), 0);
	return a.written;
}

/* Bytes of this process's mappings of BPF maps (the ring's only). */
static size_t bpf_map_mapped(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	size_t total = 0;

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (strstr(line, "bpf-map") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			total += hi - lo;
	}
	if (f)
		fclose(f);
	return total;
}

START_TEST(test_ring_records)
{
	struct kit_ring_bpf *s;
	struct nt_ring *r;
	struct got g = {.refuse_at = -1};
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	s = kit_ring_bpf__open_and_load();
	ck_assert_ptr_nonnull(s);
	ck_assert_int_eq(nt_ring_new(bpf_map__fd(s->maps.ring), 4096, on_record,
				     &g, &r), 0);
	ck_assert_uint_eq(nt_ring_size(r), 4096);
	ck_assert_int_eq(nt_ring_fd(r), bpf_map__fd(s->maps.ring));
	/* consumer page + producer page + the data once (libbpf: twice) */
	ck_assert_uint_eq(bpf_map_mapped(), 2 * page + 4096);
	ck_assert_int_eq(nt_ring_consume(r), 0);

	/* 4 x (8 + 1000) bytes: to 4032 */
	ck_assert_uint_eq(produce(s, 4, 1000, 10, 99), 4);
	ck_assert_int_eq(nt_ring_consume(r), 4);
	ck_assert_int_eq(g.n, 4);
	for (int i = 0; i < 4; i++) {
		ck_assert_uint_eq(g.sizes[i], 1000);
		ck_assert_uint_eq(g.seeds[i], 10 + i);
	}
	/* at 4032: the body runs from 4040 past the end to 944 (copied) */
	ck_assert_uint_eq(produce(s, 2, 1000, 50, 99), 2);
	ck_assert_int_eq(nt_ring_consume(r), 2);
	ck_assert_int_eq(g.n, 6);
	ck_assert_uint_eq(g.seeds[4], 50);
	ck_assert_uint_eq(g.seeds[5], 51);
	ck_assert_int_eq(g.bad_bytes, 0);

	/* a discarded record in the middle: skipped, not counted */
	ck_assert_uint_eq(produce(s, 3, 12, 70, 1), 3);
	ck_assert_int_eq(nt_ring_consume(r), 2);
	ck_assert_int_eq(g.n, 8);
	ck_assert_uint_eq(g.seeds[6], 70);
	ck_assert_uint_eq(g.seeds[7], 72);

	/* refused by the callback: its error, then the rest next time */
	g.refuse_at = 8;
	ck_assert_uint_eq(produce(s, 3, 20, 90, 99), 3);
	ck_assert_int_eq(nt_ring_consume(r), -5);
	ck_assert_int_eq(g.n, 9);
	ck_assert_int_eq(nt_ring_consume(r), 2);
	ck_assert_int_eq(g.n, 11);
	ck_assert_uint_eq(g.seeds[10], 92);
	ck_assert_int_eq(g.bad_bytes, 0);

	nt_ring_free(r);
	ck_assert_uint_eq(bpf_map_mapped(), 0);
	nt_ring_free(NULL);
	kit_ring_bpf__destroy(s);
}
END_TEST

START_TEST(test_ring_bad_input)
{
	struct nt_ring *r = (struct nt_ring *)1;

	ck_assert_int_eq(nt_ring_new(-1, 4096, on_record, NULL, &r), -EBADF);
	ck_assert_ptr_null(r);
	ck_assert_int_eq(nt_ring_new(-1, 3000, on_record, NULL, &r), -EINVAL);
	ck_assert_int_eq(nt_ring_new(-1, 0, on_record, NULL, &r), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("kit_ring");
	TCase *tc = tcase_create("ring");
	SRunner *sr;
	int failed;

	if (geteuid() != 0) {
		printf("SKIP kit-ring: a BPF ring needs root\n");
		return 77; /* meson's "skipped" */
	}
	tcase_add_test(tc, test_ring_records);
	tcase_add_test(tc, test_ring_bad_input);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
