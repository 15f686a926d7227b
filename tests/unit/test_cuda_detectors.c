/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the CUDA detectors (plugins/cuda/detectors): the pure logic
 * on synthetic streams with hand-computed expectations, then each detector
 * .so driven through its descriptor by a stand-in host (synthetic cuda.*
 * records built with the probe's own structs from plugins/cuda/cuda.h).
 */
#include <check.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ntcore/plugin.h"

#include "cuda.h"

#include "allocmap.h"
#include "cudaev.h"
#include "det_alert.h"
#include "det_util.h"
#include "frag.h"
#include "hang.h"
#include "leak.h"
#include "oomring.h"
#include "pyframes.h"
#include "timeline.h"
#include "track.h"

#include "cudadet_harness.h"

/* ================================================================== */
/* pure logic                                                          */
/* ================================================================== */

START_TEST(test_stacktab)
{
	struct stacktab t;
	uint32_t a, b, c;

	stacktab_init(&t, 3);
	a = stacktab_intern(&t, "main;f;cudaMalloc", 17);
	b = stacktab_intern(&t, "main;g;cudaMalloc;", 18); /* trailing ';' */
	c = stacktab_intern(&t, "main;f;cudaMalloc", 17);
	ck_assert_uint_eq(a, 1);
	ck_assert_uint_eq(b, 2);
	ck_assert_uint_eq(c, a);
	ck_assert_str_eq(stacktab_get(&t, b), "main;g;cudaMalloc");
	ck_assert_uint_eq(stacktab_intern(&t, "", 0), 0);
	ck_assert_str_eq(stacktab_get(&t, 0), "");
	/* max 3: a third distinct stack maps to the overflow entry */
	c = stacktab_intern(&t, "x", 1);
	ck_assert_uint_eq(c, stacktab_intern(&t, "y", 1));
	ck_assert_ptr_nonnull(strstr(stacktab_get(&t, c), "stack_limit"));
	stacktab_fini(&t);
}
END_TEST

START_TEST(test_amap_basic)
{
	struct amap m;
	struct amap_entry e = { 0 }, out;
	struct amap_proc *p;

	ck_assert_int_eq(amap_init(&m), 0);
	/* 5000 allocations force several rehashes */
	for (uint64_t i = 0; i < 5000; i++) {
		e.pid = 7;
		e.ptr = 0x7f0000000000ULL + i * 4096;
		e.size = 4096;
		e.dev = (int32_t)(i % 2);
		e.stack = 1 + (uint32_t)(i % 3);
		ck_assert_int_eq(amap_alloc(&m, &e), 0);
	}
	p = amap_proc_find(&m, 7, 0);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(p->live_count, 2500);
	ck_assert_uint_eq(p->live_bytes, 2500 * 4096);
	/* free the even ones (device 0) */
	for (uint64_t i = 0; i < 5000; i += 2)
		ck_assert(amap_free(&m, 7, 0x7f0000000000ULL + i * 4096, 0, &out));
	ck_assert_uint_eq(p->live_bytes, 0);
	ck_assert_uint_eq(p->peak_bytes, 2500 * 4096);
	ck_assert_uint_eq(p->n_free, 2500);
	ck_assert_uint_eq(amap_count(&m), 2500);
	/* every odd one still found after the backward-shift deletions */
	for (uint64_t i = 1; i < 5000; i += 2)
		ck_assert(amap_lookup(&m, 7, 0x7f0000000000ULL + i * 4096, NULL));
	ck_assert(!amap_free(&m, 7, 0x1234, 0, NULL));
	ck_assert_uint_eq(amap_proc_find(&m, 7, 0)->unmatched_frees, 1);
	/* replacing a live address counts the lost free */
	e.ptr = 0x7f0000000000ULL + 4096;
	e.dev = 1;
	e.size = 100;
	ck_assert_int_eq(amap_alloc(&m, &e), 1);
	ck_assert_uint_eq(amap_proc_find(&m, 7, 1)->replaced, 1);
	ck_assert_uint_eq(amap_proc_find(&m, 7, 1)->live_bytes, 2499 * 4096 + 100);
	/* another pid, then drop pid 7 */
	e.pid = 8;
	ck_assert_int_eq(amap_alloc(&m, &e), 0);
	amap_drop_pid(&m, 7);
	ck_assert_uint_eq(amap_count(&m), 1);
	ck_assert_ptr_null(amap_proc_find(&m, 7, 1));
	ck_assert(amap_lookup(&m, 8, e.ptr, &out));
	ck_assert_uint_eq(out.size, 100);
	amap_fini(&m);
}
END_TEST

START_TEST(test_stack_totals)
{
	struct amap_entry v[5] = {
		{ .ptr = 1, .size = 10, .stack = 1, .ts_ns = 5 },
		{ .ptr = 2, .size = 30, .stack = 2, .ts_ns = 6 },
		{ .ptr = 3, .size = 10, .stack = 1, .ts_ns = 1 },
		{ .ptr = 4, .size = 5, .stack = 3, .ts_ns = 2 },
		{ .ptr = 5, .size = 25, .stack = 1, .ts_ns = 9 },
	};
	struct stack_total *t;
	long n = stack_totals(v, 5, &t);

	ck_assert_int_eq(n, 3);
	ck_assert_uint_eq(t[0].stack, 1);
	ck_assert_uint_eq(t[0].bytes, 45);
	ck_assert_uint_eq(t[0].count, 3);
	ck_assert_uint_eq(t[0].first_ts, 1);
	ck_assert_uint_eq(t[0].last_ts, 9);
	ck_assert_uint_eq(t[1].stack, 2);
	ck_assert_uint_eq(t[1].bytes, 30);
	ck_assert_uint_eq(t[2].bytes, 5);
	free(t);
}
END_TEST

static struct leak_cfg lcfg8(void)
{
	struct leak_cfg c = { .window_ns = SEC, .windows = 8, .threshold = 0.8,
			      .min_growth = 8 * MiB, .noise_bytes = 0 };
	return c;
}

/* feeds one sample per window (at the window's end) */
static bool leak_feed(struct leak_est *e, uint64_t *t, uint64_t live,
		      struct leak_reading *r)
{
	*t += SEC;
	leak_sample(e, *t, live);
	return leak_check(e, r);
}

START_TEST(test_leak_steady)
{
	struct leak_cfg c = lcfg8();
	struct leak_est e;
	struct leak_reading r;
	uint64_t t = 0;

	leak_init(&e, &c);
	leak_sample(&e, t, 0);
	for (int i = 0; i < 50; i++)
		ck_assert(!leak_feed(&e, &t, 512 * MiB, &r));
	/* first window is the baseline; then 8 windows, none grew */
	ck_assert_uint_eq(r.n, 8);
	ck_assert_uint_eq(r.s, 0);
	ck_assert_double_eq_tol(r.p, 1.0 / 10.0, 1e-12);
	ck_assert_uint_eq(r.growth, 0);
}
END_TEST

START_TEST(test_leak_growing)
{
	struct leak_cfg c = lcfg8();
	struct leak_est e;
	struct leak_reading r;
	uint64_t t = 0, live = 100 * MiB;
	int fired = -1, fires = 0;

	leak_init(&e, &c);
	leak_sample(&e, t, live);
	ck_assert(!leak_feed(&e, &t, live, &r)); /* baseline window */
	for (int i = 1; i <= 20; i++) {
		live += 2 * MiB;
		if (leak_feed(&e, &t, live, &r)) {
			fires++;
			if (fired < 0) {
				fired = i;
				/* 8 of 8 windows grew: (8+1)/(8+2) */
				ck_assert_uint_eq(r.n, 8);
				ck_assert_uint_eq(r.s, 8);
				ck_assert_double_eq_tol(r.p, 0.9, 1e-12);
				ck_assert_uint_eq(r.growth, 16 * MiB);
				ck_assert_double_eq_tol(r.rate_bps, 2.0 * MiB, 1e-6);
			}
		}
	}
	/* the ring is full after 8 growing windows */
	ck_assert_int_eq(fired, 8);
	/* no re-alert before the high-water mark doubles (116 -> 232 MiB) */
	ck_assert_int_eq(fires, 1);
}
END_TEST

START_TEST(test_leak_realert_doubling)
{
	struct leak_cfg c = lcfg8();
	struct leak_est e;
	struct leak_reading r;
	uint64_t t = 0, live = 0;
	int at[8], fires = 0;

	leak_init(&e, &c);
	leak_sample(&e, t, 0);
	leak_feed(&e, &t, 0, &r);
	for (int i = 1; i <= 40; i++) {
		live += 2 * MiB;
		if (leak_feed(&e, &t, live, &r) && fires < 8)
			at[fires++] = i;
	}
	/* 16 MiB at window 8, then 32 MiB (16), 64 MiB (32) */
	ck_assert_int_eq(fires, 3);
	ck_assert_int_eq(at[0], 8);
	ck_assert_int_eq(at[1], 16);
	ck_assert_int_eq(at[2], 32);
}
END_TEST

START_TEST(test_leak_threshold_edge)
{
	/* 7 of 8 windows grow: p = 8/10 = 0.8 reaches a 0.8 threshold, and
	 * 0.85 is not reached */
	struct leak_cfg c = lcfg8();
	struct leak_est e;
	struct leak_reading r;
	uint64_t t = 0, live = 0;
	bool fired = false;

	c.threshold = 0.85;
	leak_init(&e, &c);
	leak_sample(&e, t, 0);
	leak_feed(&e, &t, live, &r);
	for (int i = 0; i < 8; i++) {
		if (i != 3)
			live += 4 * MiB;
		fired |= leak_feed(&e, &t, live, &r);
	}
	ck_assert_uint_eq(r.s, 7);
	ck_assert_double_eq_tol(r.p, 0.8, 1e-12);
	ck_assert(!fired);
	c.threshold = 0.8;
	leak_init(&e, &c);
	t = 0;
	live = 0;
	leak_sample(&e, t, 0);
	leak_feed(&e, &t, live, &r);
	fired = false;
	for (int i = 0; i < 8; i++) {
		if (i != 3)
			live += 4 * MiB;
		fired |= leak_feed(&e, &t, live, &r);
	}
	ck_assert(fired);
}
END_TEST

START_TEST(test_leak_sawtooth_cache)
{
	/* a caching allocator: grows to 1 GiB over 3 windows, is emptied,
	 * grows back to the same 1 GiB, ... for 60 windows */
	struct leak_cfg c = lcfg8();
	struct leak_est e;
	struct leak_reading r;
	uint64_t t = 0;
	static const uint64_t cycle[6] = { 256, 512, 1024, 1024, 128, 128 };
	double pmax = 0;

	leak_init(&e, &c);
	leak_sample(&e, t, 0);
	leak_feed(&e, &t, 0, &r);
	for (int i = 0; i < 60; i++) {
		ck_assert(!leak_feed(&e, &t, cycle[i % 6] * MiB, &r));
		if (i >= 8 && r.p > pmax)
			pmax = r.p;
	}
	/* only the first ramp set new highs: 3 windows; once they leave the
	 * ring p falls to 1/(n+2) */
	ck_assert_uint_eq(r.s, 0);
	ck_assert_double_eq_tol(r.p, 0.1, 1e-12);
	ck_assert(pmax <= 0.4 + 1e-12);
}
END_TEST

START_TEST(test_leak_sawtooth_leaking)
{
	/* the same saw-tooth whose peak rises 64 MiB per cycle: a leak under
	 * a cache. New highs only once per 6 windows: p stays low, so this
	 * estimator needs windows as long as the cycle to see it */
	struct leak_cfg c = lcfg8();
	struct leak_est e;
	struct leak_reading r;
	uint64_t t = 0;
	static const uint64_t cycle[6] = { 256, 512, 1024, 1024, 128, 128 };
	bool fired = false;

	leak_init(&e, &c);
	leak_sample(&e, t, 0);
	leak_feed(&e, &t, 0, &r);
	for (int i = 0; i < 60; i++)
		fired |= leak_feed(&e, &t, (cycle[i % 6] + 64 * (uint64_t)(i / 6)) * MiB, &r);
	ck_assert(!fired);
	ck_assert_uint_le(r.s, 2);
	/* with windows of one cycle each it is every window */
	c.window_ns = 6 * SEC;
	leak_init(&e, &c);
	t = 0;
	leak_sample(&e, t, 0);
	for (int i = 0; i < 120; i++) {
		t += SEC;
		leak_sample(&e, t, (cycle[i % 6] + 64 * (uint64_t)(i / 6)) * MiB);
		fired |= leak_check(&e, &r);
	}
	ck_assert(fired);
}
END_TEST

START_TEST(test_leak_gap)
{
	/* no sample for a long time (stopped process): at most a ring's worth
	 * of windows is closed, all at the value then */
	struct leak_cfg c = lcfg8();
	struct leak_est e;
	uint32_t k;

	leak_init(&e, &c);
	leak_sample(&e, 0, 0);
	k = leak_sample(&e, 1000 * SEC, 5 * MiB);
	ck_assert_uint_eq(k, 10);
	ck_assert_uint_eq(e.win_end_ns, 1001 * SEC);
}
END_TEST

static void set_entries(struct amap_entry *v, const uint64_t (*iv)[2], size_t n)
{
	memset(v, 0, n * sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		v[i].ptr = iv[i][0];
		v[i].size = iv[i][1] - iv[i][0];
	}
}

START_TEST(test_frag_hand_maps)
{
	struct amap_entry v[16];
	struct frag_stats s;

	/* A: [0,100) [200,300) [400,500): span 500, holes 100+100 */
	{
		static const uint64_t a[][2] = { { 0, 100 }, { 200, 300 }, { 400, 500 } };

		set_entries(v, a, 3);
		frag_compute(v, 3, &s);
		ck_assert_uint_eq(s.span, 500);
		ck_assert_uint_eq(s.live_bytes, 300);
		ck_assert_uint_eq(s.free_bytes, 200);
		ck_assert_uint_eq(s.holes, 2);
		ck_assert_uint_eq(s.largest_hole, 100);
		ck_assert_uint_eq(s.largest_hole_at, 100);
		ck_assert_double_eq_tol(s.external, 0.5, 1e-12);
		ck_assert_double_eq_tol(s.free_ratio, 0.4, 1e-12);
		ck_assert_double_eq_tol(s.score, 50.0, 1e-9); /* 0.4 >= 0.25 saturates */
		ck_assert_uint_eq(s.hist[0], 2);             /* <= 64 KiB */
	}
	/* B: contiguous: no hole */
	{
		static const uint64_t b[][2] = { { 0, 100 }, { 100, 200 } };

		set_entries(v, b, 2);
		frag_compute(v, 2, &s);
		ck_assert_uint_eq(s.holes, 0);
		ck_assert_double_eq(s.external, 0.0);
		ck_assert_double_eq(s.score, 0.0);
		ck_assert_int_eq(frag_level_of(s.score), FRAG_NONE);
	}
	/* C: 16 blocks of 1 MiB, every other freed: live at 0,2,...,14 MiB;
	 * span 15 MiB, 7 holes of 1 MiB */
	{
		uint64_t c[8][2];

		for (int i = 0; i < 8; i++) {
			c[i][0] = 2 * (uint64_t)i * MiB;
			c[i][1] = c[i][0] + MiB;
		}
		set_entries(v, (const uint64_t(*)[2])c, 8);
		frag_compute(v, 8, &s);
		ck_assert_uint_eq(s.span, 15 * MiB);
		ck_assert_uint_eq(s.free_bytes, 7 * MiB);
		ck_assert_uint_eq(s.holes, 7);
		ck_assert_uint_eq(s.largest_hole, MiB);
		ck_assert_uint_eq(s.hist[1], 7); /* <= 1 MiB */
		{
			char rb[512];

			s.paged = true;
			frag_reading(&s, rb, sizeof(rb));
			ck_assert_ptr_nonnull(strstr(rb, "address space only"));
			ck_assert_ptr_null(strstr(rb, "will fail"));
			s.paged = false;
		}
		ck_assert_uint_eq(s.hist_bytes[1], 7 * MiB);
		ck_assert_double_eq_tol(s.external, 6.0 / 7.0, 1e-12);
		ck_assert_double_eq_tol(s.score, 600.0 / 7.0, 1e-9); /* 85.71 */
		ck_assert_int_eq(frag_level_of(s.score), FRAG_HIGH);
	}
	/* D: one large hole dominates: low external */
	{
		static const uint64_t d[][2] = { { 0, 10 }, { 20, 30 }, { 1030, 1040 } };
		char buf[256];

		set_entries(v, d, 3);
		frag_compute(v, 3, &s);
		ck_assert_uint_eq(s.free_bytes, 1010);
		ck_assert_uint_eq(s.largest_hole, 1000);
		ck_assert_double_eq_tol(s.external, 10.0 / 1010.0, 1e-12);
		ck_assert_double_eq_tol(s.score, 100.0 * 10.0 / 1010.0, 1e-9);
		ck_assert_int_eq(frag_level_of(s.score), FRAG_LOW);
		frag_reading(&s, buf, sizeof(buf));
		ck_assert_ptr_nonnull(strstr(buf, "low"));
	}
	/* E: small share of free memory lowers the score */
	{
		static const uint64_t e[][2] = { { 0, 1000 }, { 1010, 2000 },
						  { 2010, 3000 }, { 3010, 4000 } };

		set_entries(v, e, 4);
		frag_compute(v, 4, &s);
		ck_assert_uint_eq(s.free_bytes, 30);
		ck_assert_double_eq_tol(s.external, 2.0 / 3.0, 1e-12);
		/* free/span = 30/4000 = 0.0075; / 0.25 = 0.03 */
		ck_assert_double_eq_tol(s.score, 100.0 * (2.0 / 3.0) * 0.03, 1e-9);
	}
	/* F: overlapping entries count once */
	{
		static const uint64_t f[][2] = { { 0, 100 }, { 50, 150 }, { 200, 300 } };

		set_entries(v, f, 3);
		frag_compute(v, 3, &s);
		ck_assert_uint_eq(s.live_bytes, 250);
		ck_assert_uint_eq(s.free_bytes, 50);
		ck_assert_uint_eq(s.holes, 1);
	}
	frag_compute(v, 0, &s);
	ck_assert_uint_eq(s.span, 0);
	ck_assert_double_eq(s.score, 0.0);
}
END_TEST

START_TEST(test_frag_used_set)
{
	struct frag_used u;
	struct amap_entry v[3];
	struct frag_stats s;
	static const uint64_t live[][2] = { { 0, MiB }, { 4 * MiB, 5 * MiB },
					    { 8 * MiB, 9 * MiB } };

	frag_used_init(&u);
	/* ever allocated: [0,2M) [4M,5M) [6M,7M)+[7M,9M) (merged) */
	ck_assert_int_eq(frag_used_add(&u, 0, MiB), 0);
	ck_assert_int_eq(frag_used_add(&u, MiB, 2 * MiB), 0);
	ck_assert_int_eq(frag_used_add(&u, 8 * MiB, 9 * MiB), 0);
	ck_assert_int_eq(frag_used_add(&u, 4 * MiB, 5 * MiB), 0);
	ck_assert_int_eq(frag_used_add(&u, 6 * MiB, 7 * MiB), 0);
	ck_assert_int_eq(frag_used_add(&u, 7 * MiB, 8 * MiB), 0);
	ck_assert_uint_eq(u.n, 3);
	ck_assert_uint_eq(u.lo[0], 0);
	ck_assert_uint_eq(u.hi[0], 2 * MiB);
	ck_assert_uint_eq(u.lo[2], 6 * MiB);
	ck_assert_uint_eq(u.hi[2], 9 * MiB);
	/* a range spanning two merges them */
	set_entries(v, live, 3);
	frag_compute_used(v, 3, &u, &s);
	/* gaps [1M,4M): only [1M,2M) was ever used; [5M,8M): [6M,8M) */
	ck_assert_uint_eq(s.holes, 2);
	ck_assert_uint_eq(s.free_bytes, 3 * MiB);
	ck_assert_uint_eq(s.largest_hole, 2 * MiB);
	ck_assert_uint_eq(s.largest_hole_at, 6 * MiB);
	ck_assert_uint_eq(s.span, 6 * MiB); /* 9M minus 3M never used */
	frag_compute(v, 3, &s);
	ck_assert_uint_eq(s.free_bytes, 6 * MiB);
	ck_assert_int_eq(frag_used_add(&u, MiB, 7 * MiB), 0);
	ck_assert_uint_eq(u.n, 1);
	ck_assert_uint_eq(u.hi[0], 9 * MiB);
	frag_used_fini(&u);
}
END_TEST

START_TEST(test_frag_trend)
{
	struct frag_trend t = { 0 };
	struct frag_forecast f;

	frag_trend_forecast(&t, 30, &f);
	ck_assert_str_eq(f.direction, "unknown");
	/* score 10, 20, 30, 40, 50 at 1 s steps: slope 10/s */
	for (int i = 0; i < 5; i++)
		frag_trend_add(&t, (uint64_t)i * SEC, 10.0 * (i + 1), 0.1 * i);
	frag_trend_forecast(&t, 3, &f);
	ck_assert_double_eq_tol(f.slope_per_s, 10.0, 1e-9);
	ck_assert_double_eq_tol(f.forecast, 80.0, 1e-9);
	ck_assert_str_eq(f.direction, "rising");
	frag_trend_forecast(&t, 30, &f);
	ck_assert_double_eq(f.forecast, 100.0); /* clamped */
	/* the ring keeps the last FRAG_TREND_N: a flat tail reads stable */
	for (int i = 5; i < 5 + FRAG_TREND_N; i++)
		frag_trend_add(&t, (uint64_t)i * SEC, 42.0, 0.5);
	frag_trend_forecast(&t, 30, &f);
	ck_assert_double_eq_tol(f.slope_per_s, 0.0, 1e-9);
	ck_assert_double_eq_tol(f.forecast, 42.0, 1e-9);
	ck_assert_str_eq(f.direction, "stable");
	ck_assert_uint_eq(f.samples, FRAG_TREND_N);
}
END_TEST

START_TEST(test_hang_timing)
{
	struct hang_proc p;
	const uint64_t T = 5 * SEC;

	hang_proc_init(&p, 42);
	/* nothing seen yet: never a hang */
	ck_assert_int_eq(hang_check(&p, 100 * SEC, T, true), HANG_OK);
	hang_launch(&p, 10 * SEC, 43, "cudaLaunchKernel", "spin_kernel", 0);
	hang_activity(&p, 11 * SEC, HANG_ACT_MEMCPY, "cudaMemcpy");
	ck_assert_int_eq(hang_check(&p, 15 * SEC, T, true), HANG_OK);
	ck_assert_int_eq(hang_check(&p, 16 * SEC - 1, T, true), HANG_OK);
	ck_assert_int_eq(hang_check(&p, 16 * SEC, T, true), HANG_DUE);
	ck_assert_int_eq(hang_check(&p, 17 * SEC, T, true), HANG_REPORTED);
	ck_assert_str_eq(p.launch_name, "spin_kernel");
	ck_assert_uint_eq(p.launch_ns, 10 * SEC);
	ck_assert_uint_eq(p.last_act_kind, HANG_ACT_MEMCPY);
	/* a late event from before the report does not re-arm */
	hang_activity(&p, 15 * SEC, HANG_ACT_LAUNCH, "x");
	ck_assert_int_eq(hang_check(&p, 30 * SEC, T, true), HANG_REPORTED);
	/* activity after the report: a new quiet period */
	hang_activity(&p, 31 * SEC, HANG_ACT_SYNC, "cudaDeviceSynchronize");
	ck_assert_int_eq(hang_check(&p, 35 * SEC, T, true), HANG_OK);
	ck_assert_int_eq(hang_check(&p, 36 * SEC, T, true), HANG_DUE);
	ck_assert_uint_eq(p.reports, 2);
	/* a dead process */
	ck_assert_int_eq(hang_check(&p, 50 * SEC, T, false), HANG_GONE);
}
END_TEST

START_TEST(test_hang_blocked)
{
	struct hang_proc p;
	const struct hang_blocked *b;
	const uint64_t T = 2 * SEC;

	hang_proc_init(&p, 1);
	hang_launch(&p, 1 * SEC, 2, "cudaLaunchKernel", "k", 0);
	hang_sync_enter(&p, 1 * SEC + 100, 2, NT_CUDA_API_cudaDeviceSynchronize,
			"cudaDeviceSynchronize", 7);
	hang_sync_enter(&p, 2 * SEC, 3, NT_CUDA_API_cudaStreamSynchronize,
			"cudaStreamSynchronize", 8);
	ck_assert_uint_eq(p.nblocked, 2);
	b = hang_longest_blocked(&p);
	ck_assert_uint_eq(b->tid, 2);
	ck_assert_uint_eq(b->stack, 7);
	ck_assert_int_eq(hang_check(&p, 3 * SEC - 1, T, true), HANG_OK);
	ck_assert_int_eq(hang_check(&p, 3 * SEC, T, true), HANG_DUE);
	/* the stream sync returns: tid 2 is still blocked, and it is activity */
	hang_sync_exit(&p, 4 * SEC, 3, "cudaStreamSynchronize");
	ck_assert_uint_eq(p.nblocked, 1);
	ck_assert_uint_eq(hang_longest_blocked(&p)->tid, 2);
	ck_assert_int_eq(hang_check(&p, 5 * SEC, T, true), HANG_OK);
	ck_assert_int_eq(hang_check(&p, 6 * SEC, T, true), HANG_DUE);
	hang_sync_exit(&p, 7 * SEC, 2, "cudaDeviceSynchronize");
	ck_assert_ptr_null(hang_longest_blocked(&p));
	/* a thread only ever blocked (nothing completed): quiet since entry */
	hang_proc_init(&p, 9);
	hang_sync_enter(&p, 10 * SEC, 9, NT_CUDA_API_cudaDeviceSynchronize,
			"cudaDeviceSynchronize", 0);
	ck_assert_int_eq(hang_check(&p, 11 * SEC, T, true), HANG_OK);
	ck_assert_int_eq(hang_check(&p, 12 * SEC, T, true), HANG_DUE);
}
END_TEST

START_TEST(test_oom_ring)
{
	struct oom_ring g;
	struct oom_rec r = { 0 };

	oom_ring_init(&g, 4);
	ck_assert_ptr_null(oom_ring_get(&g, 0));
	for (uint64_t i = 1; i <= 10; i++) {
		r.size = i * 100;
		r.ts_ns = i;
		oom_ring_push(&g, &r);
	}
	ck_assert_uint_eq(g.n, 4);
	ck_assert_uint_eq(g.total, 10);
	ck_assert_uint_eq(oom_ring_get(&g, 0)->size, 1000);
	ck_assert_uint_eq(oom_ring_get(&g, 3)->size, 700);
	ck_assert_ptr_null(oom_ring_get(&g, 4));
	oom_ring_init(&g, 1000);
	ck_assert_uint_eq(g.cap, OOM_RING_MAX);
}
END_TEST

START_TEST(test_util)
{
	struct nt_sb b;
	char buf[64];

	nt_sb_init(&b, 0);
	sb_json_str(&b, "a\"b\\c\n\x01");
	ck_assert_str_eq(nt_sb_str(&b), "\"a\\\"b\\\\c\\n\\u0001\"");
	nt_sb_reset(&b);
	sb_json_stack(&b, "main;leak_here;cudaMalloc;;", 2);
	ck_assert_str_eq(nt_sb_str(&b), "[\"leak_here\",\"cudaMalloc\"]");
	nt_sb_reset(&b);
	sb_xml_str(&b, "a<b>&\"");
	ck_assert_str_eq(nt_sb_str(&b), "a&lt;b&gt;&amp;&quot;");
	nt_sb_fini(&b);
	ck_assert_str_eq(fmt_bytes(512, buf, sizeof(buf)), "512 B");
	ck_assert_str_eq(fmt_bytes(3 * MiB / 2, buf, sizeof(buf)), "1.50 MiB");
	ck_assert_str_eq(stack_frame("c;b;a", 2, buf, sizeof(buf)), "c");
	ck_assert_str_eq(stack_frame("c;b;a", 3, buf, sizeof(buf)), "");
	ck_assert_str_eq(stack_user_frame("main;train_step;libcudart.so.12+0x1234;cuMemAlloc_v2", buf, sizeof(buf)),
			 "train_step");
	ck_assert_str_eq(stack_user_frame("cudaMalloc", buf, sizeof(buf)),
			 "cudaMalloc");
	/* a launch seen at the driver, through the runtime's own frames and
	 * the kernel's host stub */
	ck_assert_str_eq(stack_caller("main;train_loop;wl_kernel;cudaLaunchKernel;launch;cuLaunchKernel", "wl_kernel",
				      buf, sizeof(buf)), "train_loop");
	ck_assert_str_eq(stack_caller("step;k(float*);__device_stub__Z1kPf;cudaLaunchKernel", "k(float*)", buf,
				      sizeof(buf)), "step");
	ck_assert_str_eq(short_fn("c10::cuda::X::alloc_block(c10::A&, bool)", buf, sizeof(buf)),
			 "c10::cuda::X::alloc_block");
	ck_assert_str_eq(short_fn("at::native::(anonymous namespace)::create(int)", buf,
				  sizeof(buf)), "at::native::(anonymous namespace)::create");
	ck_assert_str_eq(short_fn("leak_here", buf, sizeof(buf)), "leak_here");
	ck_assert_int_eq(proc_alive("/proc", (uint32_t)getpid()), 1);
	ck_assert_int_eq(proc_alive("/proc", 0x7ffffff0), 0);
	ck_assert_int_ge(proc_cpu_ticks("/proc", (uint32_t)getpid()), 0);
}
END_TEST

START_TEST(test_cudaev_decode)
{
	struct cuev_cache c = { 0 };
	struct cuev e;
	struct nt_cuda_alloc *a = mk_alloc(100, 5 * SEC, 0x7000, 4096, 0,
					   NT_CUDA_LAYER_RUNTIME, "main;f;cudaMalloc");
	struct proc_exit_rec *x = mk_exit(100, 3);
	char buf[64];

	a->outstanding_bytes = 8192;
	a->duration_ns = 500;
	ck_assert(cuev_decode(&c, &a->hdr, &alloc_schema, &e));
	/* records are stamped at the call's entry: the return is ts + duration */
	ck_assert_uint_eq(e.end_ts, 5 * SEC + 500);
	ck_assert_int_eq(e.type, CUEV_ALLOC);
	ck_assert_uint_eq(e.pid, 100);
	ck_assert_uint_eq(e.ts, 5 * SEC);
	ck_assert_uint_eq(e.ptr, 0x7000);
	ck_assert_uint_eq(e.size, 4096);
	ck_assert_uint_eq(e.outstanding, 8192);
	ck_assert_int_eq(e.device, 0);
	ck_assert_uint_eq(e.api, NT_CUDA_API_cudaMalloc);
	ck_assert_uint_eq(e.kind, NT_CUDA_MEM_DEVICE);
	ck_assert_str_eq(cuev_str_copy(e.stack, buf, sizeof(buf)), "main;f;cudaMalloc");
	ck_assert_str_eq(cuev_api_name(&e, buf, sizeof(buf)), "cudaMalloc");
	ck_assert(!cuev_failed(&e));
	ck_assert_uint_eq(c.n, 1);
	ck_assert(cuev_decode(&c, &a->hdr, &alloc_schema, &e)); /* cached */
	ck_assert_uint_eq(c.n, 1);
	/* a VSTR pointing outside the record reads as empty */
	a->stack.len = 100000;
	ck_assert(cuev_decode(&c, &a->hdr, &alloc_schema, &e));
	ck_assert_uint_eq(e.stack.len, 0);
	/* too short for the schema */
	a->hdr.size = 60;
	ck_assert(!cuev_decode(&c, &a->hdr, &alloc_schema, &e));
	ck_assert(cuev_decode(&c, &x->hdr, &exit_schema, &e));
	ck_assert_int_eq(e.type, CUEV_PROC_EXIT);
	ck_assert_int_eq(e.exit_code, 3);
	ck_assert_int_eq(cuev_type_of("cuda.enter"), CUEV_ENTER);
	ck_assert_int_eq(cuev_type_of("sched.switch"), CUEV_OTHER);
	free(a);
	free(x);
}
END_TEST

START_TEST(test_track_layers)
{
	struct track t;
	struct cuev_cache c = { 0 };
	struct cuev e;
	struct amap_entry ent;
	struct nt_cuda_alloc *d = mk_alloc(5, 100, 0x9000, 1 * MiB, 0,
					   NT_CUDA_LAYER_DRIVER,
					   "cudaMalloc;libcudart.so+0x10;cuMemAlloc_v2");
	struct nt_cuda_alloc *r = mk_alloc(5, 101, 0x9000, 1 * MiB, 0,
					   NT_CUDA_LAYER_RUNTIME,
					   "main;alloc_weights;cudaMalloc");
	struct nt_cuda_free *fd = mk_free(5, 200, 0x9000, NT_CUDA_LAYER_DRIVER);
	struct nt_cuda_free *fr = mk_free(5, 201, 0x9000, NT_CUDA_LAYER_RUNTIME);
	struct amap_proc *p;

	ck_assert_int_eq(track_init(&t, false, 0), 0);
	cuev_decode(&c, &d->hdr, &alloc_schema, &e);
	ck_assert_int_eq(track_alloc(&t, &e, &ent), TRACK_NEW);
	cuev_decode(&c, &r->hdr, &alloc_schema, &e);
	ck_assert_int_eq(track_alloc(&t, &e, &ent), TRACK_DUP);
	p = amap_proc_find(&t.map, 5, 0);
	ck_assert_uint_eq(p->live_bytes, MiB);
	ck_assert_uint_eq(p->live_count, 1);
	ck_assert_uint_eq(p->n_alloc, 1);
	ck_assert_uint_eq(p->replaced, 0);
	ck_assert(amap_lookup(&t.map, 5, 0x9000, &ent));
	ck_assert_str_eq(stacktab_get(&t.st, ent.stack), "main;alloc_weights;cudaMalloc");
	cuev_decode(&c, &fd->hdr, &free_schema, &e);
	ck_assert_int_eq(track_free(&t, &e, &ent), TRACK_FREED);
	cuev_decode(&c, &fr->hdr, &free_schema, &e);
	ck_assert_int_eq(track_free(&t, &e, &ent), TRACK_DUP);
	ck_assert_uint_eq(p->live_bytes, 0);
	ck_assert_uint_eq(p->unmatched_frees, 0);
	/* a second free of the same pointer at the same layer is unknown */
	ck_assert_int_eq(track_free(&t, &e, &ent), TRACK_UNKNOWN);
	/* host memory is not tracked unless asked */
	r->kind = NT_CUDA_MEM_HOST;
	cuev_decode(&c, &r->hdr, &alloc_schema, &e);
	ck_assert_int_eq(track_alloc(&t, &e, &ent), TRACK_IGNORED);
	track_fini(&t);
	free(d);
	free(r);
	free(fd);
	free(fr);
}
END_TEST

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	char *b;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc((size_t)n + 1);
	if (fread(b, 1, (size_t)n, f) != (size_t)n)
		n = 0;
	b[n] = '\0';
	fclose(f);
	if (len)
		*len = (size_t)n;
	return b;
}

static int count_str(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

START_TEST(test_svg_timeline)
{
	struct timeline t;
	struct stacktab st;
	struct amap_entry v[8];
	struct frag_stats fs;
	uint32_t idx[16];
	char path[] = "/tmp/test_cuda_det_svgXXXXXX";
	int fd = mkstemp(path);
	char *svg;
	uint64_t base = 0x7f1200000000ULL;

	ck_assert_int_ge(fd, 0);
	close(fd);
	stacktab_init(&st, 0);
	tl_init(&t, 77, 0, 100);
	/* 16 blocks of 1 MiB, every other one freed, a 4 MiB request fails */
	for (int i = 0; i < 16; i++)
		idx[i] = tl_alloc(&t, base + (uint64_t)i * MiB, MiB,
				  (uint64_t)(i + 1) * 10000000ULL,
				  stacktab_intern(&st, "main;small_block;cudaMalloc", 27));
	for (int i = 1; i < 16; i += 2)
		tl_free(&t, idx[i], 200000000ULL + (uint64_t)i * 1000000ULL);
	tl_failed(&t, 4 * MiB, 300000000ULL, 0);
	/* and a far-away allocation: its never-used gap is collapsed */
	tl_alloc(&t, base + 4096 * MiB, 2 * MiB, 310000000ULL, 0);
	for (int i = 0; i < 8; i++) {
		memset(&v[i], 0, sizeof(v[i]));
		v[i].ptr = base + 2 * (uint64_t)i * MiB;
		v[i].size = MiB;
	}
	frag_compute(v, 8, &fs);
	ck_assert_int_eq(tl_write_svg_file(&t, path, "test <pid 77>", 400000000ULL,
					   &st, &fs, 250000000ULL), 0);
	svg = slurp(path, NULL);
	ck_assert_ptr_nonnull(svg);
	ck_assert_ptr_nonnull(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
	ck_assert_ptr_nonnull(strstr(svg, "</svg>"));
	ck_assert_ptr_nonnull(strstr(svg, "test &lt;pid 77&gt;"));
	/* one bar per allocation: 17, titled with its size and state */
	ck_assert_int_eq(count_str(svg, "fill=\"hsl("), 17 + 2 /* legend */);
	ck_assert_int_eq(count_str(svg, ", freed at small_block"), 8);
	ck_assert_int_eq(count_str(svg, "never freed at small_block"), 8);
	/* the failed request in red */
	ck_assert_int_eq(count_str(svg, "failed allocation of 4.00 MiB"), 1);
	ck_assert_ptr_nonnull(strstr(svg, "failed: 4.00 MiB"));
	ck_assert_ptr_nonnull(strstr(svg, "stroke=\"#e00000\""));
	/* two address clusters, the gap between them left out */
	ck_assert_int_eq(count_str(svg, "never-used address range"), 1);
	ck_assert_ptr_nonnull(strstr(svg, "worst fragmentation, at 0.240 s: score 86/100"));
	ck_assert_int_eq(count_str(svg, "class=\"worst\""), 1);
	ck_assert_ptr_nonnull(strstr(svg, "large allocations will fail"));
	free(svg);
	/* the cap counts what it leaves out */
	for (int i = 0; i < 200; i++)
		tl_alloc(&t, base, 1, 1, 0);
	ck_assert_uint_eq(t.n, 100);
	ck_assert_uint_eq(t.dropped, 118);
	unlink(path);
	tl_fini(&t);
	stacktab_fini(&st);
}
END_TEST

START_TEST(test_det_oom_evidence)
{
	struct det x;
	struct alert_view a;
	struct nt_cuda_alloc *fail;
	static const char *const over[] = { "recent=3", "model=\"contiguous\"", NULL };
	const uint64_t base = 0x7f3300000000ULL;

	det_open(&x, "cuda_oom", over);
	ck_assert_int_eq(F.nsubs, 4); /* cuda.alloc, cuda.free, proc.exit, python.call_stack */
	ck_assert_str_eq(F.schemas[0]->name, "alert.cuda_oom");
	/* 6 blocks of 2 MiB; blocks 1 and 3 freed: holes of 2 MiB each */
	for (int i = 0; i < 6; i++)
		feed(&x, mk_alloc(300, SEC + (uint64_t)i, base + (uint64_t)i * 2 * MiB,
				  2 * MiB, 0, NT_CUDA_LAYER_RUNTIME,
				  i == 5 ? "main;load_batch;cudaMalloc"
					 : "main;alloc_weights;cudaMalloc"),
		     &alloc_schema);
	feed(&x, mk_free(300, 2 * SEC, base + 2 * MiB, NT_CUDA_LAYER_RUNTIME), &free_schema);
	feed(&x, mk_free(300, 2 * SEC, base + 6 * MiB, NT_CUDA_LAYER_RUNTIME), &free_schema);
	ck_assert_int_eq(F.npub, 0);
	/* 64 MiB fails: cudaErrorMemoryAllocation */
	fail = mk_alloc(300, 3 * SEC, 0, 64 * MiB, 2, NT_CUDA_LAYER_RUNTIME,
			"main;train_step;cudaMalloc");
	fail->duration_ns = 1234;
	feed(&x, fail, &alloc_schema);
	ck_assert_int_eq(F.npub, 1);
	ck_assert(alert_get("alert.cuda_oom", 0, &a));
	ck_assert_uint_eq(a.severity, NT_SEV_CRITICAL);
	ck_assert_uint_eq(a.pid, 300);
	ck_assert_msg(strstr(a.msg, "cudaMalloc of 67108864 bytes (64.00 MiB) failed on device 0"),
		      "%s", a.msg);
	ck_assert_ptr_nonnull(strstr(a.msg, "cudaErrorMemoryAllocation"));
	ck_assert_ptr_nonnull(strstr(a.msg, "called from train_step"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"requested_bytes\":67108864"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"live_bytes\":8388608"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"live_count\":4"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"largest_free_hole_bytes\":2097152"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"free_in_span_bytes\":4194304"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"holes\":2"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"stack\":[\"main\",\"train_step\",\"cudaMalloc\"]"));
	/* the last 3 successful allocations, newest first */
	ck_assert_ptr_nonnull(strstr(a.ev, "\"recent_allocations\":[{\"bytes\":2097152,"
					   "\"ptr\":\"0x7f3300a00000\""));
	ck_assert_int_eq(count_str(a.ev, "\"ago_ms\""), 3);
	ck_assert_ptr_nonnull(strstr(a.ev, "\"function\":\"load_batch\""));
	ck_assert_ptr_nonnull(strstr(a.ev, "no room for this request"));
	alert_free(&a);
	/* an allocation that fits the free total but no hole: fragmentation */
	feed(&x, mk_alloc(300, 4 * SEC, 0, 3 * MiB, 2, NT_CUDA_LAYER_RUNTIME,
			  "main;train_step;cudaMalloc"), &alloc_schema);
	ck_assert(alert_get("alert.cuda_oom", 1, &a));
	ck_assert_ptr_nonnull(strstr(a.ev, "fragmentation"));
	alert_free(&a);
	/* other failures are cuda_errors' business */
	feed(&x, mk_alloc(300, 5 * SEC, 0, 0, 1, NT_CUDA_LAYER_RUNTIME, ""), &alloc_schema);
	ck_assert_int_eq(F.npub, 2);
	/* the same request again 3 ms later (an allocator's retry): info */
	feed(&x, mk_alloc(300, 4 * SEC + 3000000, 0, 3 * MiB, 2, NT_CUDA_LAYER_RUNTIME,
			  "main;train_step;cudaMalloc"), &alloc_schema);
	ck_assert(alert_get("alert.cuda_oom", 2, &a));
	ck_assert_uint_eq(a.severity, NT_SEV_INFO);
	ck_assert_msg(strstr(a.msg, "retry 1, 3.0 ms after the previous failure: cudaMalloc of"),
		      "%s", a.msg);
	ck_assert_ptr_nonnull(strstr(a.ev, "\"retry\":true"));
	alert_free(&a);
	det_close(&x);
}
END_TEST

START_TEST(test_det_memleak_exit)
{
	struct det x;
	struct alert_view a;
	const struct det_report *r;
	char *txt;
	static const char *const over[] = { "exit_delay_ms=0", NULL };
	const uint64_t base = 0x7f4400000000ULL;

	det_open(&x, "cuda_memleak", over);
	/* 10 balanced alloc/free pairs, a planted leak of 3 x 4096 + 1000 bytes
	 * from leak_here, a caching allocator block that stays */
	for (int i = 0; i < 10; i++) {
		feed(&x, mk_alloc(400, SEC, base + (uint64_t)i * MiB, MiB, 0,
				  NT_CUDA_LAYER_RUNTIME, "main;scratch;cudaMalloc"),
		     &alloc_schema);
		feed(&x, mk_free(400, SEC, base + (uint64_t)i * MiB, NT_CUDA_LAYER_RUNTIME),
		     &free_schema);
	}
	for (int i = 0; i < 3; i++)
		feed(&x, mk_alloc(400, SEC, base + 100 * MiB + (uint64_t)i * 4096, 4096, 0,
				  NT_CUDA_LAYER_RUNTIME, "main;leak_here;cudaMalloc"),
		     &alloc_schema);
	feed(&x, mk_alloc(400, SEC, base + 200 * MiB, 1000, 0, NT_CUDA_LAYER_RUNTIME,
			  "main;other_leak;cudaMalloc"), &alloc_schema);
	feed(&x, mk_alloc(400, SEC, base + 300 * MiB, 20 * MiB, 0, NT_CUDA_LAYER_RUNTIME,
			  "main;c10::cuda::CUDACachingAllocator::malloc;cudaMalloc"),
	     &alloc_schema);
	/* another process's memory is not in this report */
	feed(&x, mk_alloc(401, SEC, base, 5, 0, NT_CUDA_LAYER_RUNTIME, "x;cudaMalloc"),
	     &alloc_schema);
	feed(&x, mk_exit(400, 0), &exit_schema);
	x.d->poll(x.state, 1, 100);
	ck_assert_int_eq(pub_count("cuda_memleak.report"), 1);
	ck_assert_int_eq(pub_count("alert.cuda_memleak"), 1);
	ck_assert(alert_get("alert.cuda_memleak", 0, &a));
	ck_assert_uint_eq(a.pid, 400);
	ck_assert_uint_eq(a.severity, NT_SEV_WARNING);
	ck_assert_msg(strstr(a.msg, "exited with 13288 bytes"), "%s", a.msg);
	ck_assert_ptr_nonnull(strstr(a.msg, "in 4 allocations; largest from leak_here"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"unfreed_bytes\":13288"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"unfreed_count\":4"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"cache_bytes\":20971520"));
	ck_assert_ptr_nonnull(strstr(a.ev, "{\"bytes\":12288,\"count\":3,\"device\":0,"
					   "\"cache\":false,\"function\":\"leak_here\""));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"function\":\"other_leak\""));
	alert_free(&a);
	r = (const struct det_report *)pub_of("cuda_memleak.report", 0);
	txt = vstr_dup(&r->hdr, r->text);
	ck_assert_ptr_nonnull(strstr(txt, "5 allocations never freed"));
	ck_assert_ptr_nonnull(strstr(txt, "leak_here"));
	ck_assert_ptr_nonnull(strstr(txt, "[held: cache or CUDA library]"));
	ck_assert_ptr_nonnull(strstr(txt, "(not a leak)"));
	free(txt);
	/* pid 400 is forgotten, and a process that never allocated (a shell
	 * shim of the job) has nothing to report: no report, no alert */
	feed(&x, mk_exit(400, 0), &exit_schema);
	feed(&x, mk_exit(402, 0), &exit_schema);
	x.d->flush(x.state);
	ck_assert_int_eq(pub_count("alert.cuda_memleak"), 1);
	ck_assert_int_eq(pub_count("cuda_memleak.report"), 1);
	det_close(&x);
}
END_TEST

START_TEST(test_det_memleak_cache_only_exit)
{
	/* a PyTorch-like process: everything left is the allocator's cache */
	struct det x;
	static const char *const over[] = { "exit_delay_ms=0", NULL };

	det_open(&x, "cuda_memleak", over);
	feed(&x, mk_alloc(500, SEC, 0x7f0000000000ULL, 20 * MiB, 0, NT_CUDA_LAYER_RUNTIME,
			  "python3;c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc;cudaMalloc"), &alloc_schema);
	feed(&x, mk_exit(500, 0), &exit_schema);
	x.d->flush(x.state);
	ck_assert_int_eq(pub_count("alert.cuda_memleak"), 0);
	ck_assert_int_eq(pub_count("cuda_memleak.report"), 1);
	det_close(&x);
}
END_TEST

START_TEST(test_det_memleak_online)
{
	/* real timer ticks (poll) over 20 ms windows: a process that allocates
	 * 1 MiB per window is reported with its top stack; a steady one not */
	struct det x;
	struct alert_view a;
	static const char *const over[] = { "window_ms=20", "windows=4",
		"threshold=0.8", "min_growth_bytes=2097152", NULL };
	const uint64_t base = 0x7f5500000000ULL;
	uint64_t t0 = nt_clock_mono_ns();

	det_open(&x, "cuda_memleak", over);
	ck_assert_uint_eq(F.timer_ms, 10); /* window / 4, at least 10 */
	feed(&x, mk_alloc(601, t0, base + 999 * MiB, 64 * MiB, 0, NT_CUDA_LAYER_RUNTIME,
			  "main;steady;cudaMalloc"), &alloc_schema);
	for (int i = 0; i < 40 && pub_count("alert.cuda_memleak") == 0; i++) {
		feed(&x, mk_alloc(600, nt_clock_mono_ns(), base + (uint64_t)i * MiB, MiB, 0,
				  NT_CUDA_LAYER_RUNTIME, "main;keep_tensor;cudaMalloc"),
		     &alloc_schema);
		/* churn in the steady process: alloc and free */
		feed(&x, mk_alloc(601, nt_clock_mono_ns(), base + 2000 * MiB, MiB, 0,
				  NT_CUDA_LAYER_RUNTIME, "main;steady;cudaMalloc"),
		     &alloc_schema);
		feed(&x, mk_free(601, nt_clock_mono_ns(), base + 2000 * MiB, NT_CUDA_LAYER_RUNTIME),
		     &free_schema);
		for (int k = 0; k < 2; k++) {
			usleep(10000);
			x.d->poll(x.state, 1, 100);
		}
	}
	ck_assert_int_eq(pub_count("alert.cuda_memleak"), 1);
	ck_assert(alert_get("alert.cuda_memleak", 0, &a));
	ck_assert_uint_eq(a.pid, 600);
	ck_assert_ptr_nonnull(strstr(a.msg, "keeps growing"));
	ck_assert_ptr_nonnull(strstr(a.msg, "from keep_tensor"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"kind\":\"growth\""));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"top_stacks\":[{\"bytes\":"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"function\":\"keep_tensor\""));
	alert_free(&a);
	det_close(&x);
}
END_TEST

START_TEST(test_det_errors_ratelimit)
{
	struct det x;
	struct alert_view a;
	static const char *const over[] = { "interval_ms=100000", NULL };

	det_open(&x, "cuda_errors", over);
	for (int i = 0; i < 5; i++)
		feed(&x, mk_error(700, SEC + (uint64_t)i, "cudaMemcpy",
				  "cudaErrorInvalidValue", 1,
				  i == 0 ? "main;copy_back;cudaMemcpy" : "main;other;cudaMemcpy"),
		     &error_schema);
	feed(&x, mk_error(700, 2 * SEC, "cudaLaunchKernel", "cudaErrorIllegalAddress",
			  700, "main;bad_kernel_launch;cudaLaunchKernel"), &error_schema);
	feed(&x, mk_error(700, 2 * SEC, "cudaStreamQuery", "cudaErrorNotReady", 600,
			  "main;poll;cudaStreamQuery"), &error_schema);
	ck_assert_int_eq(pub_count("alert.cuda_errors"), 2);
	ck_assert(alert_get("alert.cuda_errors", 0, &a));
	ck_assert_uint_eq(a.severity, NT_SEV_WARNING);
	ck_assert_msg(strstr(a.msg, "cudaMemcpy returned cudaErrorInvalidValue in pid 700"),
		      "%s", a.msg);
	ck_assert_ptr_nonnull(strstr(a.msg, "called from copy_back"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"first_stack\":[\"main\",\"copy_back\",\"cudaMemcpy\"]"));
	alert_free(&a);
	ck_assert(alert_get("alert.cuda_errors", 1, &a));
	ck_assert_uint_eq(a.severity, NT_SEV_CRITICAL);
	ck_assert_ptr_nonnull(strstr(a.msg, "CUDA_LAUNCH_BLOCKING=1"));
	alert_free(&a);
	/* the interval has not passed: the tick does nothing; shutdown sums up */
	x.d->poll(x.state, 1, 100);
	ck_assert_int_eq(pub_count("alert.cuda_errors"), 2);
	x.d->flush(x.state);
	ck_assert_int_eq(pub_count("alert.cuda_errors"), 3);
	ck_assert(alert_get("alert.cuda_errors", 2, &a));
	ck_assert_msg(strstr(a.msg, "cudaMemcpy returned cudaErrorInvalidValue 4 more times "
				    "(5 in all)"), "%s", a.msg);
	ck_assert_ptr_nonnull(strstr(a.msg, "first called from copy_back"));
	alert_free(&a);
	det_close(&x);
}
END_TEST

START_TEST(test_det_errors_global_limit)
{
	struct det x;
	static const char *const over[] = { "interval_ms=100000", "max_alerts=3", NULL };
	char name[32];

	det_open(&x, "cuda_errors", over);
	for (int i = 0; i < 10; i++) {
		snprintf(name, sizeof(name), "cudaFunc%d", i);
		feed(&x, mk_error(700, SEC, name, "cudaErrorInvalidValue", 1, "main;f"),
		     &error_schema);
	}
	ck_assert_int_eq(pub_count("alert.cuda_errors"), 3);
	det_close(&x);
}
END_TEST

START_TEST(test_det_frag_pattern)
{
	struct det x;
	struct alert_view a;
	char dir[] = "/tmp/test_cuda_fragXXXXXX";
	char opt[256], path[300];
	const char *over[4] = { opt, "interval_ms=10", "model=\"contiguous\"", NULL };
	const uint64_t base = 0x7f6600000000ULL;
	struct stat stt;
	char *svg;

	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(opt, sizeof(opt), "svg_path=\"%s/frag-%%p-%%d.svg\"", dir);
	snprintf(path, sizeof(path), "%s/frag-800-0.svg", dir);
	det_open(&x, "cuda_frag", over);
	/* 32 blocks of 1 MiB, every other freed, then 4 MiB fails */
	for (int i = 0; i < 32; i++)
		feed(&x, mk_alloc(800, SEC + (uint64_t)i * 1000, base + (uint64_t)i * MiB, MiB,
				  0, NT_CUDA_LAYER_RUNTIME, "main;small_block;cudaMalloc"),
		     &alloc_schema);
	for (int i = 1; i < 32; i += 2)
		feed(&x, mk_free(800, 2 * SEC + (uint64_t)i * 1000, base + (uint64_t)i * MiB,
				 NT_CUDA_LAYER_RUNTIME), &free_schema);
	x.d->poll(x.state, 1, 100);
	/* score: 15 holes of 1 MiB in a 31 MiB span: 100 * 14/15 */
	ck_assert_int_eq(pub_count("alert.cuda_frag"), 1);
	ck_assert(alert_get("alert.cuda_frag", 0, &a));
	ck_assert_uint_eq(a.severity, NT_SEV_WARNING);
	ck_assert_msg(strstr(a.msg, "score 93/100"), "%s", a.msg);
	ck_assert_ptr_nonnull(strstr(a.msg, "large allocations will fail although enough memory is free"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"holes\":15"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"free_in_span_bytes\":15728640"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"largest_hole_bytes\":1048576"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"<=1MiB\":15"));
	ck_assert_ptr_nonnull(strstr(a.ev, path));
	alert_free(&a);
	/* no second score alert within realert_ms */
	x.d->poll(x.state, 1, 100);
	ck_assert_int_eq(pub_count("alert.cuda_frag"), 1);
	feed(&x, mk_alloc(800, 3 * SEC, 0, 4 * MiB, 2, NT_CUDA_LAYER_RUNTIME,
			  "main;big_request;cudaMalloc"), &alloc_schema);
	ck_assert_int_eq(pub_count("alert.cuda_frag"), 2);
	ck_assert(alert_get("alert.cuda_frag", 1, &a));
	ck_assert_uint_eq(a.severity, NT_SEV_CRITICAL);
	ck_assert_msg(strstr(a.msg, "allocation of 4.00 MiB failed in pid 800"), "%s", a.msg);
	ck_assert_ptr_nonnull(strstr(a.msg, "15.00 MiB is free in 15 holes"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"caller\":\"big_request\""));
	alert_free(&a);
	ck_assert_int_eq(stat(path, &stt), 0);
	svg = slurp(path, NULL);
	ck_assert_int_eq(count_str(svg, "failed allocation of 4.00 MiB"), 1);
	ck_assert_int_eq(count_str(svg, "never freed at small_block"), 16);
	ck_assert_int_eq(count_str(svg, ", freed at small_block"), 16);
	free(svg);
	unlink(path);
	/* exit writes the picture again and forgets the process */
	feed(&x, mk_exit(800, 0), &exit_schema);
	ck_assert_int_eq(stat(path, &stt), 0);
	unlink(path);
	rmdir(dir);
	det_close(&x);
}
END_TEST

START_TEST(test_det_frag_unused_holes)
{
	/* an allocator that takes fresh addresses although a hole fits (a
	 * virtual-memory or bump allocator) loses nothing to its holes: the
	 * score is measured but not alerted */
	struct det x;
	static const char *const over[] = { "svg_path=\"\"", "interval_ms=10",
					    "model=\"contiguous\"", NULL };
	const uint64_t base = 0x7f7700000000ULL;

	det_open(&x, "cuda_frag", over);
	for (int i = 0; i < 32; i++)
		feed(&x, mk_alloc(810, SEC, base + (uint64_t)i * MiB, MiB, 0,
				  NT_CUDA_LAYER_RUNTIME, "main;blk;cudaMalloc"), &alloc_schema);
	feed(&x, mk_free(810, SEC, base + 1 * MiB, NT_CUDA_LAYER_RUNTIME), &free_schema);
	feed(&x, mk_free(810, SEC, base + 3 * MiB, NT_CUDA_LAYER_RUNTIME), &free_schema);
	x.d->poll(x.state, 1, 100); /* 2 holes: below min_holes */
	ck_assert_int_eq(pub_count("alert.cuda_frag"), 0);
	for (int i = 0; i < 5; i++) /* fit a 1 MiB hole, placed past the span */
		feed(&x, mk_alloc(810, SEC, base + (uint64_t)(100 + i) * MiB, MiB, 0,
				  NT_CUDA_LAYER_RUNTIME, "main;blk;cudaMalloc"), &alloc_schema);
	for (int i = 5; i < 32; i += 2)
		feed(&x, mk_free(810, SEC, base + (uint64_t)i * MiB, NT_CUDA_LAYER_RUNTIME),
		     &free_schema);
	x.d->poll(x.state, 1, 100);
	ck_assert_int_eq(pub_count("alert.cuda_frag"), 0);
	det_close(&x);
}
END_TEST

START_TEST(test_det_frag_paged)
{
	/* the default model: a real driver maps pages; the same pattern and
	 * a failure that fits the holes' total are measured, never alerted */
	struct det x;
	static const char *const over[] = { "svg_path=\"\"", "interval_ms=10", NULL };
	const uint64_t base = 0x7f7800000000ULL;

	det_open(&x, "cuda_frag", over);
	for (int i = 0; i < 32; i++)
		feed(&x, mk_alloc(820, SEC, base + (uint64_t)i * MiB, MiB, 0,
				  NT_CUDA_LAYER_RUNTIME, "main;blk;cudaMalloc"), &alloc_schema);
	for (int i = 1; i < 32; i += 2)
		feed(&x, mk_free(820, SEC, base + (uint64_t)i * MiB, NT_CUDA_LAYER_RUNTIME),
		     &free_schema);
	x.d->poll(x.state, 1, 100);
	feed(&x, mk_alloc(820, 2 * SEC, 0, 4 * MiB, 2, NT_CUDA_LAYER_RUNTIME,
			  "main;big;cudaMalloc"), &alloc_schema);
	ck_assert_int_eq(pub_count("alert.cuda_frag"), 0);
	det_close(&x);
}
END_TEST

START_TEST(test_det_frag_bad_svg_path)
{
	struct det x;
	static const char *const over[] = { "svg_path=\"x-%q.svg\"", NULL };
	const struct nt_cfg_key *keys;
	int ret;

	/* det_open asserts init succeeds, so do it by hand */
	memset(&x, 0, sizeof(x));
	memset(&F, 0, sizeof(F));
	x.dl = dlopen(CUDADET_DIR "/cuda_frag.so", RTLD_NOW | RTLD_LOCAL);
	ck_assert_ptr_nonnull(x.dl);
	x.d = dlsym(x.dl, NT_PLUGIN_SYMBOL);
	x.cfg = calloc(1, x.d->config_size);
	keys = x.d->config;
	for (uint32_t i = 0; i < x.d->n_config; i++)
		cfg_set(&x, &keys[i], strcmp(keys[i].key, "svg_path") == 0 ?
			strchr(over[0], '=') + 1 : keys[i].def);
	ret = x.d->init((struct nt_instance *)&x, &fake_host, x.cfg, &x.state);
	ck_assert_int_eq(ret, -EINVAL);
	ck_assert_int_eq(F.config_errors, 1);
	for (int i = 0; i < x.ns; i++)
		free(x.strings[i]);
	free(x.cfg);
	dlclose(x.dl);
}
END_TEST

static struct nt_cuda_launch *mk_launch(uint32_t pid, uint32_t tid, uint64_t ts,
					const char *kernel, const char *stack)
{
	const char *s[3] = { kernel, "cudaLaunchKernel", stack };
	const size_t sl[3] = { SLOT(struct nt_cuda_launch, kernel),
				  SLOT(struct nt_cuda_launch, api_name),
				  SLOT(struct nt_cuda_launch, stack) };
	struct nt_cuda_launch *l = rec_new(sizeof(*l), s, sl, 3);

	hdr_fill(&l->hdr, pid, tid, ts, "train");
	l->api = NT_CUDA_API_cudaLaunchKernel;
	l->layer = NT_CUDA_LAYER_RUNTIME;
	l->flags = NT_CUDA_F_RET;
	return l;
}

static struct nt_cuda_enter *mk_enter(uint32_t pid, uint32_t tid, uint64_t ts)
{
	const char *s[1] = { "cudaDeviceSynchronize" };
	const size_t sl[1] = { SLOT(struct nt_cuda_enter, api_name) };
	struct nt_cuda_enter *e = rec_new(sizeof(*e), s, sl, 1);

	hdr_fill(&e->hdr, pid, tid, ts, "train");
	e->api = NT_CUDA_API_cudaDeviceSynchronize;
	e->layer = NT_CUDA_LAYER_RUNTIME;
	e->family = NT_CUDA_FAM_SYNC;
	return e;
}

static struct nt_cuda_sync *mk_sync(uint32_t pid, uint32_t tid, uint64_t ts)
{
	const char *s[1] = { "cudaDeviceSynchronize" };
	const size_t sl[1] = { SLOT(struct nt_cuda_sync, api_name) };
	struct nt_cuda_sync *y = rec_new(sizeof(*y), s, sl, 1);

	hdr_fill(&y->hdr, pid, tid, ts, "train");
	y->api = NT_CUDA_API_cudaDeviceSynchronize;
	y->layer = NT_CUDA_LAYER_RUNTIME;
	y->flags = NT_CUDA_F_RET;
	y->sync_kind = NT_CUDA_SYNC_DEVICE;
	return y;
}

START_TEST(test_det_hang)
{
	/* this test process is the target: it is alive. Timeout 100 ms,
	 * checks every 20 ms: the report must come between 100 and 120 ms
	 * after the last activity */
	struct det x;
	struct alert_view a;
	static const char *const over[] = { "timeout_ms=100", "interval_ms=20", NULL };
	uint32_t me = (uint32_t)getpid();
	uint64_t t0, t_alert = 0;

	det_open(&x, "cuda_hang", over);
	ck_assert_uint_eq(F.timer_ms, 20);
	t0 = nt_clock_mono_ns();
	feed(&x, mk_launch(me, me, t0, "spin_forever(int*)", "main;launch_spin;cudaLaunchKernel"),
	     &launch_schema);
	feed(&x, mk_enter(me, me + 1000000, t0 + 1000), &enter_schema);
	/* the poll loop stands in for the 20 ms timer: the report must come
	 * from the first check at or after timeout, and from no earlier one */
	while (nt_clock_mono_ns() - t0 < 400 * 1000000ULL) {
		uint64_t before = nt_clock_mono_ns(), after;

		x.d->poll(x.state, 1, 100);
		after = nt_clock_mono_ns();
		if (!t_alert && pub_count("alert.cuda_hang")) {
			t_alert = after;
			ck_assert_uint_ge(after - t0, 100 * 1000000ULL);
		}
		if (!t_alert)
			ck_assert_msg(before - t0 < 100 * 1000000ULL,
				      "a check after the timeout did not report");
		usleep(20000);
	}
	ck_assert_int_eq(pub_count("alert.cuda_hang"), 1);
	ck_assert_uint_ne(t_alert, 0);
	ck_assert(alert_get("alert.cuda_hang", 0, &a));
	ck_assert_uint_eq(a.severity, NT_SEV_CRITICAL);
	ck_assert_ptr_nonnull(strstr(a.msg, "blocked in cudaDeviceSynchronize"));
	ck_assert_ptr_nonnull(strstr(a.msg, "last launch spin_forever(int*)"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"kernel\":\"spin_forever(int*)\""));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"caller\":\"launch_spin\""));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"blocked\":[{\"tid\":"));
	alert_free(&a);
	/* the sync returns, activity resumes, then silence again: a second
	 * report, without a blocked thread */
	feed(&x, mk_sync(me, me + 1000000, nt_clock_mono_ns()), &sync_schema);
	t0 = nt_clock_mono_ns();
	while (nt_clock_mono_ns() - t0 < 250 * 1000000ULL) {
		x.d->poll(x.state, 1, 100);
		usleep(20000);
	}
	ck_assert_int_eq(pub_count("alert.cuda_hang"), 2);
	ck_assert(alert_get("alert.cuda_hang", 1, &a));
	ck_assert_uint_eq(a.severity, NT_SEV_WARNING);
	ck_assert_ptr_nonnull(strstr(a.msg, "no thread inside a CUDA sync"));
	ck_assert_ptr_nonnull(strstr(a.ev, "\"blocked\":[]"));
	alert_free(&a);
	/* a process that is gone is forgotten, never reported */
	feed(&x, mk_launch(0x7ffffff0, 1, nt_clock_mono_ns() - 10 * SEC, "k", ""), &launch_schema);
	x.d->poll(x.state, 1, 100);
	ck_assert_int_eq(pub_count("alert.cuda_hang"), 2);
	det_close(&x);
}
END_TEST


/* A lent Python stack (python.call_stack) merged in front of a call's
 * native stack; native frames of the lend and other threads' lends are
 * not taken. */
struct fake_lend {
	struct nt_event_hdr hdr;
	uint32_t how, pad;
	struct nt_vstr stack;
	char text[256];
};

START_TEST(test_pyframes)
{
	static const struct nt_field f[] = {
		NT_FIELD(struct fake_lend, how, NT_F_U32, "", ""),
		NT_FIELD(struct fake_lend, stack, NT_F_VSTR, "", ""),
	};
	static const struct nt_schema sc = { .name = "python.call_stack",
					     .fields = f, .n_fields = 2,
					     .min_size = 16 };
	const char *t = "<module> (/w/t.py:40);leaky_step (/w/t.py:9);"
			"libffi.so.8+0x6f7a;operator()(int);cudaMalloc";
	struct fake_lend l = { 0 };
	struct pyframes pf;
	struct cuev e = { 0 };
	char out[128];

	pyf_init(&pf);
	ck_assert(pyf_is(&sc));
	l.hdr.pid = 7;
	l.hdr.tid = 8;
	l.hdr.ts_ns = 1000;
	l.stack.off = offsetof(struct fake_lend, text);
	l.stack.len = (uint32_t)strlen(t);
	memcpy(l.text, t, strlen(t));
	l.hdr.size = (uint32_t)(offsetof(struct fake_lend, text) + strlen(t));
	pyf_note(&pf, &l.hdr, &sc);
	ck_assert_str_eq(pyf_find(&pf, 7, 8, 1000),
			 "<module> (/w/t.py:40);leaky_step (/w/t.py:9)");
	ck_assert_ptr_null(pyf_find(&pf, 7, 8, 999)); /* another call */
	ck_assert_ptr_null(pyf_find(&pf, 7, 9, 1000)); /* another thread */
	e.pid = 7;
	e.tid = 8;
	e.ts = 1000;
	e.stack.p = "main;alloc_it;cudaMalloc";
	e.stack.len = strlen(e.stack.p);
	ck_assert(pyf_merge(&pf, &e));
	ck_assert_str_eq(e.stack.p, "<module> (/w/t.py:40);leaky_step (/w/t.py:9);"
				    "main;alloc_it;cudaMalloc");
	ck_assert_str_eq(stack_py_frame(e.stack.p, out, sizeof(out)),
			 "leaky_step (/w/t.py:9)");
	ck_assert_str_eq(stack_py_frame("main;f(int);cudaMalloc", out, sizeof(out)), "");
	pyf_fini(&pf);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("cuda_detectors");
	TCase *t = tcase_create("logic");

	tcase_add_test(t, test_stacktab);
	tcase_add_test(t, test_pyframes);
	tcase_add_test(t, test_amap_basic);
	tcase_add_test(t, test_stack_totals);
	tcase_add_test(t, test_leak_steady);
	tcase_add_test(t, test_leak_growing);
	tcase_add_test(t, test_leak_realert_doubling);
	tcase_add_test(t, test_leak_threshold_edge);
	tcase_add_test(t, test_leak_sawtooth_cache);
	tcase_add_test(t, test_leak_sawtooth_leaking);
	tcase_add_test(t, test_leak_gap);
	tcase_add_test(t, test_frag_hand_maps);
	tcase_add_test(t, test_frag_used_set);
	tcase_add_test(t, test_frag_trend);
	tcase_add_test(t, test_hang_timing);
	tcase_add_test(t, test_hang_blocked);
	tcase_add_test(t, test_oom_ring);
	tcase_add_test(t, test_util);
	tcase_add_test(t, test_cudaev_decode);
	tcase_add_test(t, test_track_layers);
	tcase_add_test(t, test_svg_timeline);
	suite_add_tcase(s, t);

	t = tcase_create("plugins");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, test_det_oom_evidence);
	tcase_add_test(t, test_det_memleak_exit);
	tcase_add_test(t, test_det_memleak_cache_only_exit);
	tcase_add_test(t, test_det_memleak_online);
	tcase_add_test(t, test_det_errors_ratelimit);
	tcase_add_test(t, test_det_errors_global_limit);
	tcase_add_test(t, test_det_frag_pattern);
	tcase_add_test(t, test_det_frag_unused_holes);
	tcase_add_test(t, test_det_frag_paged);
	tcase_add_test(t, test_det_frag_bad_svg_path);
	tcase_add_test(t, test_det_hang);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	int failed;

	srunner_run_all(r, CK_NORMAL);
	failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
