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

/*
 * A two-CPU stand-in for the kernel: each thread has its true runtime (what
 * se.sum_exec_runtime would say) and the CPU's last seen switch-in. sw()
 * runs what the sched_switch program runs, with `traced` = 0 modelling a
 * switch the kernel did not report (the runtimes still move).
 */
struct sim {
	struct sched_cpu_last cl[2];
	struct sched_tstat *t[8];
	__u64 se[8];      /* true runtime per thread */
	__u64 since[8];   /* running since (0: not running) */
	int n;
};

static int sim_add(struct sim *m, struct sched_tstat *s, __u32 tid, __u64 now)
{
	memset(s, 0, sizeof(*s));
	s->tid = tid;
	s->tgid = 100;
	s->first_ts = now;
	m->t[m->n] = s;
	m->se[m->n] = 0;
	m->since[m->n] = 0;
	return m->n++;
}

static int sim_idx(const struct sim *m, const struct sched_tstat *s)
{
	for (int i = 0; i < m->n; i++)
		if (m->t[i] == s)
			return i;
	return -1;
}

static struct sched_tstat *sim_find(const struct sim *m, __u32 tid)
{
	for (int i = 0; i < m->n; i++)
		if (m->t[i]->tid == tid)
			return m->t[i];
	return NULL;
}

/* The runtime the kernel has for thread i at `now`. */
static __u64 sim_se(struct sim *m, int i, __u64 now)
{
	return m->se[i] + (m->since[i] ? now - m->since[i] : 0);
}

/* prev/next: NULL for an untracked task (or idle). Returns 1 and sets *wait
 * when a run-queue wait was measured. */
static int sw(struct sim *m, int cpu, struct sched_tstat *prev, int runnable,
	      struct sched_tstat *next, __u64 now, int traced, __u64 *wait)
{
	int pi = prev ? sim_idx(m, prev) : -1, ni = next ? sim_idx(m, next) : -1;
	int measured = 0;
	__u64 slice = 0;

	if (pi >= 0) { /* the kernel's own accounting */
		m->se[pi] = sim_se(m, pi, now);
		m->since[pi] = 0;
	}
	if (ni >= 0)
		m->since[ni] = now;
	if (traced) {
		struct sched_cpu_last *cl = &m->cl[cpu];
		__u32 ptid = prev ? prev->tid : 0;
		struct sched_tstat *lost =
			cl->tid && cl->tid != ptid ? sim_find(m, cl->tid) : NULL;

		measured = sched_switch_acct(cl, lost, prev,
					     pi >= 0 ? m->se[pi] : 0, runnable,
					     next, ni >= 0 ? m->se[ni] : 0, now,
					     (__u32)cpu, &slice, wait);
	}
	return measured;
}

START_TEST(test_acct_new_thread_sequence)
{
	struct sim m = { 0 };
	struct sched_tstat a;
	__u64 wait = 0, on, off;

	sim_add(&m, &a, 7, 100);
	/* Forked and woken (new) at 100, runs at 150 on CPU 1. */
	sched_acct_wake(&a, 100, 0);
	ck_assert_int_eq(sw(&m, 1, NULL, 0, &a, 150, 1, &wait), 1);
	ck_assert_uint_eq(wait, 50);
	/* Preempted at 1150: still runnable, involuntary. */
	sw(&m, 1, &a, 1, NULL, 1150, 1, &wait);
	/* Runs again at 1200 on CPU 0 (waited 50 on the run queue). */
	ck_assert_int_eq(sw(&m, 0, NULL, 0, &a, 1200, 1, &wait), 1);
	ck_assert_uint_eq(wait, 50);
	/* Blocks at 1700: voluntary, not queued. */
	sw(&m, 0, &a, 0, NULL, 1700, 1, &wait);
	/* Woken at 5700, runs at 5710. */
	sched_acct_wake(&a, 5700, sim_se(&m, 0, 5700));
	ck_assert_int_eq(sw(&m, 0, NULL, 0, &a, 5710, 1, &wait), 1);
	ck_assert_uint_eq(wait, 10);

	ck_assert_uint_eq(a.oncpu_ns, 1000 + 500);
	ck_assert_uint_eq(a.runq_ns, 110);
	ck_assert_uint_eq(a.runq_count, 3);
	ck_assert_uint_eq(a.vol, 1);
	ck_assert_uint_eq(a.invol, 1);
	ck_assert_uint_eq(a.wakeups, 2);
	ck_assert_uint_eq(a.cpu, 0);
	ck_assert_uint_eq(a.on_ts, 5710);
	ck_assert_uint_eq(a.se_last, 1500);

	/* Seen at 6000 from user space, running: the slice in progress
	 * comes from the kernel's runtime; off-CPU is the rest since 100. */
	sched_acct_now(&a, 6000, sim_se(&m, 0, 6000), &on, &off);
	ck_assert_uint_eq(on, 1500 + 290);
	ck_assert_uint_eq(off, 5900 - 1790);
	/* Unknown runtime (unreadable): no estimate, never a guess. */
	sched_acct_now(&a, 6000, 0, &on, &off);
	ck_assert_uint_eq(on, 1500);
	/* Leaves at 6000 (blocked): the slice is exact. */
	sw(&m, 0, &a, 0, NULL, 6000, 1, &wait);
	sched_acct_now(&a, 9000, 0, &on, &off);
	ck_assert_uint_eq(on, 1790);
	ck_assert_uint_eq(off, 8900 - 1790);
	ck_assert_uint_eq(a.oncpu_ns, sim_se(&m, 0, 9000));
}
END_TEST

START_TEST(test_acct_first_seen_running)
{
	struct sim m = { 0 };
	struct sched_tstat a;
	__u64 wait = 77, on, off;

	/* Already running when the probe attached (entry made at its first
	 * switch-out, with the kernel's runtime then as the baseline): that
	 * slice is not counted. */
	sim_add(&m, &a, 7, 100);
	m.se[0] = 5000; /* ran before the probe saw it */
	a.se_last = 5000;
	sw(&m, 0, &a, 0, NULL, 100, 1, &wait);
	ck_assert_uint_eq(a.oncpu_ns, 0);
	ck_assert_uint_eq(a.vol, 1);
	/* Back on at 300 without a wakeup seen: no run-queue wait. */
	ck_assert_int_eq(sw(&m, 0, NULL, 0, &a, 300, 1, &wait), 0);
	ck_assert_uint_eq(wait, 77);
	ck_assert_uint_eq(a.runq_count, 0);
	sw(&m, 0, &a, 1, NULL, 1300, 1, &wait);
	ck_assert_uint_eq(a.oncpu_ns, 1000);
	ck_assert_uint_eq(a.invol, 1);
	sched_acct_now(&a, 1300, 0, &on, &off);
	ck_assert_uint_eq(off, 200);
}
END_TEST

START_TEST(test_acct_wakeup_while_running)
{
	struct sim m = { 0 };
	struct sched_tstat a;
	__u64 wait = 0;

	/* A wakeup that lands before the thread got off its CPU (it had set
	 * a sleep state and was woken before schedule()) must not leave a
	 * stale queue stamp once it blocks for real. */
	sim_add(&m, &a, 7, 0);
	sw(&m, 0, NULL, 0, &a, 10, 1, &wait);
	sched_acct_wake(&a, 20, sim_se(&m, 0, 20));
	sw(&m, 0, &a, 0, NULL, 30, 1, &wait); /* blocks */
	ck_assert_uint_eq(a.wake_ts, 0);
	sw(&m, 0, NULL, 0, &a, 1030, 1, &wait); /* no wakeup seen */
	ck_assert_uint_eq(a.runq_count, 0);
	ck_assert_uint_eq(a.oncpu_ns, 20);
	ck_assert_uint_eq(a.wakeups, 1);
}
END_TEST

START_TEST(test_acct_ping_pong)
{
	/* Two threads on one CPU handing it back and forth: their on-CPU
	 * times are exact and add up to the elapsed time. */
	struct sim m = { 0 };
	struct sched_tstat a, b;
	__u64 t = 1000, wait, total_a_on = 0, total_b_on = 0, on, off;

	sim_add(&m, &a, 1, 1000);
	sim_add(&m, &b, 2, 1000);
	sw(&m, 0, NULL, 0, &a, t, 1, &wait);
	for (int i = 0; i < 1000; i++) {
		__u64 slice_a = 100 + i % 7, slice_b = 50 + i % 3;

		t += slice_a;
		total_a_on += slice_a;
		sched_acct_wake(&b, t, sim_se(&m, 1, t));
		sw(&m, 0, &a, 0, &b, t, 1, &wait);
		t += slice_b;
		total_b_on += slice_b;
		sched_acct_wake(&a, t, sim_se(&m, 0, t));
		sw(&m, 0, &b, 0, &a, t, 1, &wait);
	}
	ck_assert_uint_eq(a.oncpu_ns, total_a_on);
	ck_assert_uint_eq(b.oncpu_ns, total_b_on);
	sched_acct_now(&a, t, sim_se(&m, 0, t), &on, &off);
	ck_assert_uint_eq(off, total_b_on);
	sched_acct_now(&b, t, sim_se(&m, 1, t), &on, &off);
	ck_assert_uint_eq(on + off, t - 1000);
	ck_assert_uint_eq(a.vol, 1000);
	ck_assert_uint_eq(b.vol, 1000);
	ck_assert_uint_eq(a.invol + b.invol, 0);
	ck_assert_uint_eq(a.runq_count, 1000);
	ck_assert_uint_eq(b.runq_count, 1000);
	ck_assert_uint_eq(a.runq_ns + b.runq_ns, 0); /* switched in at once */
}
END_TEST

START_TEST(test_acct_unseen_switch_out)
{
	/* Some kernels do not report every switch. L is switched in (seen),
	 * runs 300, leaves for idle unseen, and the CPU idles 2,000,000 ns
	 * until idle -> X is seen. L must not gather the idle time. */
	struct sim m = { 0 };
	struct sched_tstat l, x;
	__u64 wait, on, off;

	sim_add(&m, &l, 87, 0);
	sim_add(&m, &x, 88, 0);
	sw(&m, 1, NULL, 0, &l, 1000, 1, &wait);
	sw(&m, 1, &l, 0, NULL, 1300, 0, &wait); /* unseen */
	/* A read from user space meanwhile: L looks running, but its kernel
	 * runtime says 300, not 1,999,000. */
	sched_acct_now(&l, 2000000, sim_se(&m, 0, 2000000), &on, &off);
	ck_assert_uint_eq(on, 300);
	/* idle -> X seen: L's slice is over. */
	sw(&m, 1, NULL, 0, &x, 2001000, 1, &wait);
	ck_assert_uint_eq(l.on_ts, 0);
	ck_assert_uint_eq(m.cl[1].tid, 88);
	/* L wakes and runs again (on CPU 0): its 300 is counted from the
	 * kernel's runtime, and the wait since the wakeup is measured. */
	sched_acct_wake(&l, 3000000, sim_se(&m, 0, 3000000));
	ck_assert_int_eq(sw(&m, 0, NULL, 0, &l, 3000010, 1, &wait), 1);
	ck_assert_uint_eq(wait, 10);
	ck_assert_uint_eq(l.oncpu_ns, 300);
	sw(&m, 0, &l, 0, NULL, 3000110, 1, &wait);
	ck_assert_uint_eq(l.oncpu_ns, 400);
	ck_assert_uint_eq(l.oncpu_ns, sim_se(&m, 0, 3000110));
}
END_TEST

START_TEST(test_acct_unseen_switch_in)
{
	/* B is preempted by L (seen), but the kernel puts B back unseen and
	 * L's switch-out is unseen too; later B -> idle is seen. B's time
	 * back on the CPU is counted from its runtime, L gets only what it
	 * ran, and B's stale queue stamp is not taken as a wait. */
	struct sim m = { 0 };
	struct sched_tstat b, l;
	__u64 wait = 0;

	sim_add(&m, &b, 10, 0);
	sim_add(&m, &l, 11, 0);
	sw(&m, 0, NULL, 0, &b, 100, 1, &wait);   /* B runs */
	sw(&m, 0, &b, 1, &l, 600, 1, &wait);     /* B preempted by L */
	ck_assert_uint_eq(b.oncpu_ns, 500);
	ck_assert_uint_eq(b.wake_ts, 600);
	sw(&m, 0, &l, 0, &b, 650, 0, &wait);     /* L -> B, unseen */
	sw(&m, 0, &b, 0, NULL, 2650, 1, &wait);  /* B -> idle, seen */
	ck_assert_uint_eq(b.oncpu_ns, 2500);     /* 500 + 2000 */
	ck_assert_uint_eq(b.runq_count, 0);
	ck_assert_uint_eq(l.on_ts, 0);            /* lost on this CPU */
	/* L runs again later: its 50 shows up, exact. */
	ck_assert_int_eq(sw(&m, 0, NULL, 0, &l, 5000, 1, &wait), 0);
	ck_assert_uint_eq(l.oncpu_ns, 50);
	ck_assert_uint_eq(l.runq_count, 0); /* it ran since it was queued */
}
END_TEST

START_TEST(test_acct_exit)
{
	struct sim m = { 0 };
	struct sched_tstat a;
	__u64 wait = 0;

	sim_add(&m, &a, 7, 0);
	sw(&m, 0, NULL, 0, &a, 100, 1, &wait);
	sw(&m, 0, &a, 1, NULL, 400, 1, &wait);
	sw(&m, 0, NULL, 0, &a, 500, 1, &wait);
	/* Exits at 800 while running, its switch-in seen on this CPU: the
	 * slice is exact even though the kernel's runtime lags (ticks). */
	ck_assert(sched_chain_ok(&a, &m.cl[0]));
	ck_assert_uint_eq(sched_acct_exit(&a, 800, 300 + 200,
					  sched_chain_ok(&a, &m.cl[0])),
			  600);
	/* Seen from another CPU's record (chain broken): the runtime. */
	ck_assert(!sched_chain_ok(&a, &m.cl[1]));
	ck_assert_uint_eq(sched_acct_exit(&a, 800, 300 + 250, 0), 550);
	ck_assert_uint_eq(sched_acct_exit(&a, 800, 100, 0), 300);
}
END_TEST

/* ---- deltas ---------------------------------------------------------- */

START_TEST(test_totals_advance)
{
	struct sched_tstat s;
	struct sched_totals last, cur, d;

	memset(&s, 0, sizeof(s));
	memset(&last, 0, sizeof(last));
	s.first_ts = 1000;
	s.oncpu_ns = 1000;
	s.on_ts = 5000; /* running since 5000 */
	s.se_last = 1000;
	s.vol = 3;
	s.invol = 4;
	s.migrations = 2;
	s.wakeups = 3;
	s.runq_ns = 70;
	s.runq_count = 7;
	sched_totals_from(&s, 5500, 1500, &cur); /* kernel: 500 more */
	ck_assert_uint_eq(cur.on_ns, 1500);
	ck_assert_uint_eq(cur.off_ns, 4500 - 1500);
	ck_assert(sched_totals_advance(&last, &cur, &d));
	ck_assert_uint_eq(d.on_ns, 1500);
	ck_assert_uint_eq(d.off_ns, 3000);
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

	/* It left at 5400 (the read before overshot by 100 ns): the published
	 * total does not go back and the next growth is net. */
	s.oncpu_ns = 1400;
	s.on_ts = 0;
	s.se_last = 1400;
	s.vol = 4;
	sched_totals_from(&s, 5600, 0, &cur);
	ck_assert_uint_eq(cur.on_ns, 1400);
	ck_assert_uint_eq(cur.off_ns, 4600 - 1400);
	ck_assert(sched_totals_advance(&last, &cur, &d));
	ck_assert_uint_eq(d.on_ns, 0);
	ck_assert_uint_eq(last.on_ns, 1500);
	ck_assert_uint_eq(d.off_ns, 200);
	ck_assert_uint_eq(d.vol, 1);
	s.oncpu_ns = 1600;
	sched_totals_from(&s, 5600, 0, &cur);
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
	ck_assert_uint_eq(nt_hmap_count(&m.map), 20000);
	ck_assert_uint_ge(m.map.cap, 8192);
	for (uint32_t i = 0; i < 20000; i++)
		ck_assert_ptr_eq(sched_map_get(&m, i * 7 + 1), &vals[i]);
	ck_assert_ptr_null(sched_map_get(&m, 3));
	/* Replace keeps the count. */
	ck_assert_int_eq(sched_map_put(&m, 1, &vals[5]), 0);
	ck_assert_uint_eq(nt_hmap_count(&m.map), 20000);
	ck_assert_ptr_eq(sched_map_get(&m, 1), &vals[5]);
	for (uint32_t i = 0; i < 20000; i += 2)
		ck_assert_ptr_nonnull(sched_map_del(&m, i * 7 + 1));
	ck_assert_ptr_null(sched_map_del(&m, 1));
	ck_assert_uint_eq(nt_hmap_count(&m.map), 10000);
	ck_assert_ptr_null(sched_map_get(&m, 2 * 7 + 1));
	ck_assert_ptr_eq(sched_map_get(&m, 3 * 7 + 1), &vals[3]);
	sched_map_fini(&m, NULL);
	ck_assert_ptr_null(m.map.slots);
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
	tcase_add_test(tc, test_acct_unseen_switch_out);
	tcase_add_test(tc, test_acct_unseen_switch_in);
	tcase_add_test(tc, test_acct_exit);
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
