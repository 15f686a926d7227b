/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the sched probe's pure logic: the accounting rules the BPF
 * programs run (sched.h, driven here by synthetic switch sequences), the
 * log2 run-queue histogram, delta publication, the tid table, the top-N
 * ranking and the report text.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/sched/sched_logic.h"

/* ---- log2 histogram ------------------------------------------------ */

START_TEST(test_log2)
{
	ck_assert_uint_eq(sched_log2(0), 0);
	ck_assert_uint_eq(sched_log2(1), 0);
	ck_assert_uint_eq(sched_log2(2), 1);
	ck_assert_uint_eq(sched_log2(3), 1);
	ck_assert_uint_eq(sched_log2(4), 2);
	ck_assert_uint_eq(sched_log2(1023), 9);
	ck_assert_uint_eq(sched_log2(1024), 10);
	ck_assert_uint_eq(sched_log2(0xFFFFFFFFull), 31);
	ck_assert_uint_eq(sched_log2(0x100000000ull), 32);
	ck_assert_uint_eq(sched_log2(1ull << 40), 40);
	ck_assert_uint_eq(sched_log2(~0ull), 63);
	for (unsigned i = 0; i < 64; i++) {
		ck_assert_uint_eq(sched_log2(1ull << i), i);
		if (i > 1)
			ck_assert_uint_eq(sched_log2((1ull << i) - 1), i - 1);
	}
}
END_TEST

START_TEST(test_hist_slot)
{
	/* Slot i: floor(log2(us)) == i; under 2 us is slot 0. */
	ck_assert_uint_eq(sched_hist_slot(0), 0);
	ck_assert_uint_eq(sched_hist_slot(999), 0);
	ck_assert_uint_eq(sched_hist_slot(1999), 0);
	ck_assert_uint_eq(sched_hist_slot(2000), 1);
	ck_assert_uint_eq(sched_hist_slot(3999), 1);
	ck_assert_uint_eq(sched_hist_slot(4000), 2);
	ck_assert_uint_eq(sched_hist_slot(100000), 6);      /* 100 us */
	ck_assert_uint_eq(sched_hist_slot(1000000000), 19); /* 1 s */
	ck_assert_uint_eq(sched_hist_slot(8388608000ull), 23);
	ck_assert_uint_eq(sched_hist_slot(8388607999ull), 22);
	ck_assert_uint_eq(sched_hist_slot(~0ull), SCHED_HIST_SLOTS - 1);
}
END_TEST

START_TEST(test_hist_bounds_agree_with_slots)
{
	double b[SCHED_HIST_BOUNDS];

	sched_hist_bounds(b);
	ck_assert_double_eq_tol(b[0], 2e-6, 1e-12);
	ck_assert_double_eq_tol(b[1], 4e-6, 1e-12);
	ck_assert_double_eq_tol(b[SCHED_HIST_BOUNDS - 1], 8.388608, 1e-9);
	/* Every value in slot i is below bound i and at least bound i-1. */
	for (int i = 0; i < SCHED_HIST_BOUNDS; i++) {
		uint64_t top = (uint64_t)(b[i] * 1e9 + 0.5) - 1; /* ns */

		ck_assert_uint_eq(sched_hist_slot(top), (unsigned)i);
		ck_assert_uint_eq(sched_hist_slot(top + 1), (unsigned)i + 1);
	}
}
END_TEST

START_TEST(test_hist_quantile)
{
	struct sched_hist h, h2;

	memset(&h, 0, sizeof(h));
	ck_assert_double_eq(sched_hist_quantile(&h, 0.5), 0);
	h.slots[0] = 50; /* < 2 us */
	h.slots[3] = 49; /* 8..16 us */
	h.slots[10] = 1; /* 1..2 ms */
	h.sum_ns = 123;
	ck_assert_uint_eq(sched_hist_count(&h), 100);
	ck_assert_double_eq_tol(sched_hist_quantile(&h, 0.50), 2e-6, 1e-12);
	ck_assert_double_eq_tol(sched_hist_quantile(&h, 0.51), 16e-6, 1e-12);
	ck_assert_double_eq_tol(sched_hist_quantile(&h, 0.99), 16e-6, 1e-12);
	ck_assert_double_eq_tol(sched_hist_quantile(&h, 1.0), 2048e-6, 1e-12);
	memset(&h2, 0, sizeof(h2));
	h2.slots[SCHED_HIST_SLOTS - 1] = 100;
	h2.sum_ns = 7;
	ck_assert_double_eq_tol(sched_hist_quantile(&h2, 0.5), 2 * 8.388608, 1e-9);
	sched_hist_merge(&h, &h2);
	ck_assert_uint_eq(sched_hist_count(&h), 200);
	ck_assert_uint_eq(h.slots[0], 50);
	ck_assert_uint_eq(h.slots[SCHED_HIST_SLOTS - 1], 100);
	ck_assert_uint_eq(h.sum_ns, 130);
}
END_TEST

/* ---- accounting from synthetic switch sequences -------------------- */

START_TEST(test_acct_new_thread_sequence)
{
	struct sched_tstat s;
	__u64 wait = 0, on, off;

	memset(&s, 0, sizeof(s));
	/* Forked: woken (new) at 100, runs at 150. */
	sched_acct_wake(&s, 100);
	ck_assert_int_eq(sched_acct_in(&s, 150, 1, &wait), 1);
	ck_assert_uint_eq(wait, 50);
	/* Preempted at 1150: still runnable, involuntary. */
	sched_acct_out(&s, 1150, 1);
	/* Runs again at 1200 on CPU 2 (waited 50 on the run queue). */
	ck_assert_int_eq(sched_acct_in(&s, 1200, 2, &wait), 1);
	ck_assert_uint_eq(wait, 50);
	/* Blocks at 1700: voluntary, not queued. */
	sched_acct_out(&s, 1700, 0);
	/* Woken at 5700, runs at 5710. */
	sched_acct_wake(&s, 5700);
	ck_assert_int_eq(sched_acct_in(&s, 5710, 2, &wait), 1);
	ck_assert_uint_eq(wait, 10);

	ck_assert_uint_eq(s.oncpu_ns, 1000 + 500);
	ck_assert_uint_eq(s.offcpu_ns, 50 + 50 + 4010);
	ck_assert_uint_eq(s.runq_ns, 110);
	ck_assert_uint_eq(s.runq_count, 3);
	ck_assert_uint_eq(s.vol, 1);
	ck_assert_uint_eq(s.invol, 1);
	ck_assert_uint_eq(s.wakeups, 2);
	ck_assert_uint_eq(s.cpu, 2);
	ck_assert_uint_eq(s.on_ts, 5710);
	ck_assert_uint_eq(s.off_ts, 0);

	/* Totals now count the slice in progress. */
	sched_acct_now(&s, 6000, &on, &off);
	ck_assert_uint_eq(on, 1500 + 290);
	ck_assert_uint_eq(off, 4110);
	/* Leaves at 6000 (blocked) and the gap is counted as it goes. */
	sched_acct_out(&s, 6000, 0);
	sched_acct_now(&s, 9000, &on, &off);
	ck_assert_uint_eq(on, 1790);
	ck_assert_uint_eq(off, 4110 + 3000);
}
END_TEST

START_TEST(test_acct_first_seen_running)
{
	struct sched_tstat s;
	__u64 wait = 77, on, off;

	/* Already running when the probe attached: the first event is its
	 * switch-out, whose slice start is unknown (not counted). */
	memset(&s, 0, sizeof(s));
	sched_acct_out(&s, 100, 0);
	ck_assert_uint_eq(s.oncpu_ns, 0);
	ck_assert_uint_eq(s.vol, 1);
	/* Back on at 300 without a wakeup seen: off-CPU 200, no runq wait. */
	ck_assert_int_eq(sched_acct_in(&s, 300, 0, &wait), 0);
	ck_assert_uint_eq(wait, 77);
	ck_assert_uint_eq(s.offcpu_ns, 200);
	ck_assert_uint_eq(s.runq_count, 0);
	sched_acct_out(&s, 1300, 1);
	ck_assert_uint_eq(s.oncpu_ns, 1000);
	ck_assert_uint_eq(s.invol, 1);

	/* First seen being switched in (was sleeping at attach): the gap
	 * before is unknown. */
	memset(&s, 0, sizeof(s));
	ck_assert_int_eq(sched_acct_in(&s, 500, 3, &wait), 0);
	ck_assert_uint_eq(s.offcpu_ns, 0);
	sched_acct_now(&s, 800, &on, &off);
	ck_assert_uint_eq(on, 300);
	ck_assert_uint_eq(off, 0);
}
END_TEST

START_TEST(test_acct_wakeup_while_running)
{
	struct sched_tstat s;
	__u64 wait = 0;

	/* A wakeup that lands before the thread got off its CPU (it had set
	 * a sleep state and was woken before schedule()) must not leave a
	 * stale queue stamp once it blocks for real. */
	memset(&s, 0, sizeof(s));
	sched_acct_in(&s, 0 + 10, 0, &wait);
	sched_acct_wake(&s, 20);
	ck_assert_uint_eq(s.off_ts, 0); /* running: no off-CPU start */
	sched_acct_out(&s, 30, 0);      /* blocks */
	ck_assert_uint_eq(s.wake_ts, 0);
	sched_acct_in(&s, 1030, 0, &wait); /* no wakeup seen */
	ck_assert_uint_eq(s.runq_count, 0);
	ck_assert_uint_eq(s.offcpu_ns, 1000);
	ck_assert_uint_eq(s.oncpu_ns, 20);
	ck_assert_uint_eq(s.wakeups, 1);
}
END_TEST

START_TEST(test_acct_ping_pong)
{
	/* Two threads on one CPU handing it back and forth: their on-CPU
	 * times add up to the wall time and each one's off-CPU time is the
	 * other's on-CPU time. */
	struct sched_tstat a, b;
	__u64 t = 1000, wait, total_a_on = 0, total_b_on = 0;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	sched_acct_in(&a, t, 0, &wait);
	for (int i = 0; i < 1000; i++) {
		__u64 slice_a = 100 + i % 7, slice_b = 50 + i % 3;

		t += slice_a;
		total_a_on += slice_a;
		sched_acct_out(&a, t, 0);
		sched_acct_wake(&b, t);
		sched_acct_in(&b, t, 0, &wait);
		t += slice_b;
		total_b_on += slice_b;
		sched_acct_out(&b, t, 0);
		sched_acct_wake(&a, t);
		sched_acct_in(&a, t, 0, &wait);
	}
	ck_assert_uint_eq(a.oncpu_ns, total_a_on);
	ck_assert_uint_eq(b.oncpu_ns, total_b_on);
	ck_assert_uint_eq(a.offcpu_ns, total_b_on);
	/* b's first off-CPU period starts at its first wakeup. */
	ck_assert_uint_eq(b.offcpu_ns, total_a_on - (100 + 0));
	ck_assert_uint_eq(a.vol, 1000);
	ck_assert_uint_eq(b.vol, 1000);
	ck_assert_uint_eq(a.invol + b.invol, 0);
	ck_assert_uint_eq(a.runq_count, 1000);
	ck_assert_uint_eq(b.runq_count, 1000);
	ck_assert_uint_eq(a.runq_ns + b.runq_ns, 0); /* switched in at once */
}
END_TEST

/* ---- deltas ---------------------------------------------------------- */

START_TEST(test_totals_advance)
{
	struct sched_tstat s;
	struct sched_totals last, cur, d;

	memset(&s, 0, sizeof(s));
	memset(&last, 0, sizeof(last));
	s.oncpu_ns = 1000;
	s.on_ts = 5000; /* running since 5000 */
	s.vol = 3;
	s.invol = 4;
	s.migrations = 2;
	s.wakeups = 3;
	s.runq_ns = 70;
	s.runq_count = 7;
	sched_totals_from(&s, 5500, &cur);
	ck_assert_uint_eq(cur.on_ns, 1500);
	ck_assert(sched_totals_advance(&last, &cur, &d));
	ck_assert_uint_eq(d.on_ns, 1500);
	ck_assert_uint_eq(d.vol, 3);
	ck_assert_uint_eq(d.invol, 4);
	ck_assert_uint_eq(d.migr, 2);
	ck_assert_uint_eq(d.wake, 3);
	ck_assert_uint_eq(d.runq_ns, 70);
	ck_assert_uint_eq(d.runq_n, 7);
	ck_assert_uint_eq(last.on_ns, 1500);

	/* Nothing new: no delta. */
	ck_assert(!sched_totals_advance(&last, &cur, &d));
	ck_assert_uint_eq(d.on_ns, 0);

	/* It left at 5400 (the value read before overshot by 100 ns): the
	 * published total does not go back and the next growth is net. */
	s.oncpu_ns = 1400;
	s.on_ts = 0;
	s.off_ts = 5400;
	s.vol = 4;
	sched_totals_from(&s, 5600, &cur);
	ck_assert_uint_eq(cur.on_ns, 1400);
	ck_assert_uint_eq(cur.off_ns, 200);
	ck_assert(sched_totals_advance(&last, &cur, &d));
	ck_assert_uint_eq(d.on_ns, 0);
	ck_assert_uint_eq(last.on_ns, 1500);
	ck_assert_uint_eq(d.off_ns, 200);
	ck_assert_uint_eq(d.vol, 1);
	s.oncpu_ns = 1600;
	sched_totals_from(&s, 5600, &cur);
	sched_totals_advance(&last, &cur, &d);
	ck_assert_uint_eq(d.on_ns, 100);
	ck_assert_uint_eq(last.on_ns, 1600);
}
END_TEST

/* ---- table ---------------------------------------------------------- */

START_TEST(test_map)
{
	struct sched_map m;
	static int vals[20000];

	ck_assert_int_eq(sched_map_init(&m, 4), 0);
	ck_assert_ptr_null(sched_map_get(&m, 1));
	for (uint32_t i = 0; i < 20000; i++) {
		vals[i] = (int)i;
		ck_assert_int_eq(sched_map_put(&m, i * 7 + 1, &vals[i]), 0);
	}
	ck_assert_uint_eq(m.n, 20000);
	ck_assert_uint_ge(m.nb, 8192);
	for (uint32_t i = 0; i < 20000; i++)
		ck_assert_ptr_eq(sched_map_get(&m, i * 7 + 1), &vals[i]);
	ck_assert_ptr_null(sched_map_get(&m, 3));
	/* Replace keeps the count. */
	ck_assert_int_eq(sched_map_put(&m, 1, &vals[5]), 0);
	ck_assert_uint_eq(m.n, 20000);
	ck_assert_ptr_eq(sched_map_get(&m, 1), &vals[5]);
	for (uint32_t i = 0; i < 20000; i += 2)
		ck_assert_ptr_nonnull(sched_map_del(&m, i * 7 + 1));
	ck_assert_ptr_null(sched_map_del(&m, 1));
	ck_assert_uint_eq(m.n, 10000);
	ck_assert_ptr_null(sched_map_get(&m, 2 * 7 + 1));
	ck_assert_ptr_eq(sched_map_get(&m, 3 * 7 + 1), &vals[3]);
	sched_map_fini(&m, NULL);
	ck_assert_ptr_null(m.b);
}
END_TEST

static void count_cb(void *val, void *arg)
{
	*(int *)arg += *(int *)val;
}

START_TEST(test_map_each_and_free)
{
	struct sched_map m;
	int sum = 0;

	ck_assert_int_eq(sched_map_init(&m, 0), 0);
	for (int i = 1; i <= 100; i++) {
		int *v = malloc(sizeof(*v));

		*v = i;
		ck_assert_int_eq(sched_map_put(&m, (uint32_t)i, v), 0);
	}
	sched_map_each(&m, count_cb, &sum);
	ck_assert_int_eq(sum, 5050);
	free(sched_map_del(&m, 50));
	sum = 0;
	sched_map_each(&m, count_cb, &sum);
	ck_assert_int_eq(sum, 5000);
	sched_map_fini(&m, free); /* valgrind: nothing leaks */
}
END_TEST

/* ---- top-N and report ---------------------------------------------- */

static struct sched_row mkrow(uint32_t tid, uint64_t on_ns)
{
	struct sched_row r;

	memset(&r, 0, sizeof(r));
	r.pid = 100;
	r.tid = tid;
	snprintf(r.comm, sizeof(r.comm), "t%u", tid);
	r.t.on_ns = on_ns;
	return r;
}

START_TEST(test_top_keep)
{
	struct sched_row rows[3], r;
	size_t n = 0;
	const uint64_t on[] = { 50, 10, 70, 20, 60, 5 };

	for (uint32_t i = 0; i < 6; i++) {
		r = mkrow(i + 1, on[i]);
		sched_top_keep(rows, &n, 3, &r);
	}
	ck_assert_uint_eq(n, 3);
	sched_rows_sort(rows, n);
	ck_assert_uint_eq(rows[0].t.on_ns, 70);
	ck_assert_uint_eq(rows[1].t.on_ns, 60);
	ck_assert_uint_eq(rows[2].t.on_ns, 50);
	r = mkrow(9, 50); /* ties lose to the lower tid already kept */
	ck_assert(!sched_top_keep(rows, &n, 3, &r));
	ck_assert(!sched_top_keep(rows, &n, 0, &r));
}
END_TEST

START_TEST(test_report_format)
{
	struct sched_row rows[2];
	struct sched_hist h;
	char buf[1024], small[40];
	size_t len;

	rows[0] = mkrow(7, 1500000000ull);
	rows[0].t.off_ns = 250000000ull;
	rows[0].t.runq_ns = 30000;
	rows[0].t.runq_n = 3;
	rows[0].t.vol = 4;
	rows[0].t.invol = 5;
	rows[0].t.migr = 6;
	rows[1] = mkrow(8, 1000);
	rows[1].exited = true;
	memset(&h, 0, sizeof(h));
	h.slots[2] = 4;
	h.sum_ns = 4 * 5000;
	len = sched_report_format(buf, sizeof(buf), rows, 2, 1, &h, 2.0, 2);
	ck_assert_uint_eq(len, strlen(buf));
	ck_assert_ptr_nonnull(strstr(buf, "2 threads seen in 2.0 s"));
	ck_assert_ptr_nonnull(strstr(buf, "4 waits, avg 5.0 us, p50 <= 8 us"));
	ck_assert_ptr_nonnull(strstr(buf, "ONCPU_s"));
	ck_assert_ptr_nonnull(strstr(buf,
		"    100       7 t7                    1.500      0.250      10.0         4         5       6\n"));
	ck_assert_ptr_null(strstr(buf, "t8")); /* top_n = 1 */
	len = sched_report_format(buf, sizeof(buf), rows, 2, 5, NULL, 1.0, 2);
	ck_assert_ptr_nonnull(strstr(buf, " (exited)\n"));
	ck_assert_ptr_null(strstr(buf, "run-queue"));
	/* Truncation keeps a terminated string of cap - 1 bytes. */
	len = sched_report_format(small, sizeof(small), rows, 2, 5, &h, 1.0, 2);
	ck_assert_uint_eq(len, sizeof(small) - 1);
	ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
}
END_TEST

static Suite *sched_suite(void)
{
	Suite *s = suite_create("sched");
	TCase *tc = tcase_create("logic");

	tcase_add_test(tc, test_log2);
	tcase_add_test(tc, test_hist_slot);
	tcase_add_test(tc, test_hist_bounds_agree_with_slots);
	tcase_add_test(tc, test_hist_quantile);
	tcase_add_test(tc, test_acct_new_thread_sequence);
	tcase_add_test(tc, test_acct_first_seen_running);
	tcase_add_test(tc, test_acct_wakeup_while_running);
	tcase_add_test(tc, test_acct_ping_pong);
	tcase_add_test(tc, test_totals_advance);
	tcase_add_test(tc, test_map);
	tcase_add_test(tc, test_map_each_and_free);
	tcase_add_test(tc, test_top_keep);
	tcase_add_test(tc, test_report_format);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(sched_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
