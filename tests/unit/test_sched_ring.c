/* SPDX-License-Identifier: MIT */
/*
 * sched probe: the ring-buffer handler (plugins/sched/sched_ring.c) fed
 * synthetic byte records, with no kernel and no BPF object: the stand-in
 * host (probe_host.h) records what the handler publishes, counts and adds
 * to metrics. A thread exit record becomes one final sched.thread event and
 * its metric totals, a
 * process's last exit marks it dead, a second exit notice adds nothing,
 * sched.switch records go out whole, a record longer than its slot is
 * dropped and counted, and the poll's budget stops the read.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_priv.h"

#include "probe_host.h"

enum { T_THREAD = 5, T_SWITCH = 6 };

static struct sched_cfg cfg;
static struct sched_state st;

static void setup(void)
{
	static const char *const family[M_N] = {
		[M_ON] = "on", [M_OFF] = "off", [M_RUNQ] = "runq", [M_CSW] = "csw",
		[M_MIGR] = "migr",
	};
	static const uint32_t n_labels[M_N] = {
		[M_ON] = 3, [M_OFF] = 3, [M_RUNQ] = 3, [M_CSW] = 2, [M_MIGR] = 1,
	};

	ph_reset_all();
	memset(&st, 0, sizeof(st));
	memset(&cfg, 0, sizeof(cfg));
	cfg.thread_events = true;
	cfg.runq_hist = "process";
	st.host = &probe_host;
	st.inst = &PH.inst;
	st.cfg = &cfg;
	st.t_thread = T_THREAD;
	st.t_switch = T_SWITCH;
	for (int i = 0; i < M_N; i++)
		st.m[i] = ph_metric(family[i] ? family[i] : "other", n_labels[i]);
	ck_assert_int_eq(sched_map_init(&st.threads, 16), 0);
	ck_assert_int_eq(sched_map_init(&st.procs, 16), 0);
	st.ring_budget = 1u << 30;
}

static void teardown(void)
{
	sched_map_fini(&st.threads, free);
	sched_map_fini(&st.procs, free);
	ph_reset();
}

/* Thread 1001 of process 1000 exits at 10 s: first seen at 4 s, 1.5 s on
 * CPU, 2 ms waiting in 4 run-queue waits, 7 voluntary and 3 involuntary
 * switches, 2 migrations, 9 wakeups. */
static struct sched_exit_rec exit_rec(bool group_dead)
{
	struct sched_exit_rec r;

	memset(&r, 0, sizeof(r));
	r.hdr.type = SCHED_REC_EXIT;
	r.hdr.size = sizeof(r);
	r.hdr.ts_ns = 10000000000ull;
	r.hdr.pid = 1000;
	r.hdr.tid = 1001;
	snprintf(r.hdr.comm, sizeof(r.hdr.comm), "dataloader");
	r.st.tgid = 1000;
	r.st.tid = 1001;
	r.st.oncpu_ns = 1500000000ull;
	r.st.runq_ns = 2000000;
	r.st.runq_count = 4;
	r.st.vol = 7;
	r.st.invol = 3;
	r.st.migrations = 2;
	r.st.wakeups = 9;
	r.st.first_ts = 4000000000ull;
	snprintf(r.st.comm, sizeof(r.st.comm), "old-name");
	r.has_stats = 1;
	r.group_dead = group_dead;
	return r;
}

START_TEST(test_exit_final_event)
{
	struct sched_exit_rec r = exit_rec(false);
	const struct sched_thread_ev *ev;

	ck_assert_int_eq(sched_on_ring(&st, &r, sizeof(r)), 0);
	ck_assert_uint_eq(PH.n_events, 1);
	ev = (const void *)ph_last();
	ck_assert_uint_eq(ev->hdr.size, sizeof(struct sched_thread_ev));
	ck_assert_uint_eq(ev->hdr.type, T_THREAD);
	ck_assert_uint_eq(ev->hdr.pid, 1000);
	ck_assert_uint_eq(ev->hdr.tid, 1001);
	ck_assert_str_eq(ev->hdr.comm, "dataloader"); /* the name at exit */
	ck_assert_uint_eq(ev->oncpu_ns, 1500000000ull);
	ck_assert_uint_eq(ev->offcpu_ns, 4500000000ull);
	ck_assert_uint_eq(ev->runq_wait_ns, 2000000);
	ck_assert_uint_eq(ev->runq_waits, 4);
	ck_assert_uint_eq(ev->vol_switches, 7);
	ck_assert_uint_eq(ev->invol_switches, 3);
	ck_assert_uint_eq(ev->migrations, 2);
	ck_assert_uint_eq(ev->wakeups, 9);
	ck_assert_uint_eq(ev->total_oncpu_ns, 1500000000ull);
	ck_assert_uint_eq(ev->interval_ns, 6000000000ull);
	ck_assert_uint_eq(ev->exited, 1);
	/* Metric totals, labelled pid, tid, comm. */
	ck_assert(ph_sum("add", "on", 1, "1001") == 1.5);
	ck_assert(ph_sum("add", "off", 1, "1001") == 4.5);
	ck_assert(ph_sum("add", "runq", 1, "1001") == 0.002);
	ck_assert(ph_sum("add", "csw", 1, "voluntary") == 7);
	ck_assert(ph_sum("add", "csw", 1, "involuntary") == 3);
	ck_assert(ph_sum("add", "migr", 0, "1000") == 2);
	ck_assert_str_eq(PH.updates[0].labels[0], "1000");
	ck_assert_str_eq(PH.updates[0].labels[2], "dataloader");
	ck_assert_uint_eq(st.threads_seen, 1);
}
END_TEST

START_TEST(test_second_exit_adds_nothing)
{
	struct sched_exit_rec r = exit_rec(false);
	size_t adds;

	sched_on_ring(&st, &r, sizeof(r));
	adds = PH.n_updates;
	sched_on_ring(&st, &r, sizeof(r));
	ck_assert_uint_eq(PH.n_events, 1);
	ck_assert_uint_eq(PH.n_updates, adds);
}
END_TEST

START_TEST(test_group_dead_marks_process)
{
	struct sched_exit_rec r = exit_rec(true);
	struct proc *p;

	r.has_stats = 0; /* an untracked thread: no event, the process ends */
	sched_on_ring(&st, &r, sizeof(r));
	ck_assert_uint_eq(PH.n_events, 0);
	p = sched_map_get(&st.procs, 1000);
	ck_assert_ptr_nonnull(p);
	ck_assert(p->dead);
	ck_assert_uint_eq(p->dead_ns, 10000000000ull);
	ck_assert_str_eq(p->pid_s, "1000");
}
END_TEST

START_TEST(test_no_thread_events)
{
	struct sched_exit_rec r = exit_rec(false);

	cfg.thread_events = false;
	sched_on_ring(&st, &r, sizeof(r));
	ck_assert_uint_eq(PH.n_events, 0);
	ck_assert(ph_sum("add", "on", 1, "1001") == 1.5); /* the metrics still count */
}
END_TEST

START_TEST(test_switch_passes_whole)
{
	struct sched_switch_ev ev;

	memset(&ev, 0xa5, sizeof(ev));
	ev.hdr.type = T_SWITCH;
	ev.hdr.size = sizeof(ev);
	sched_on_ring(&st, &ev, sizeof(ev));
	ck_assert_uint_eq(PH.n_events, 1);
	ck_assert_mem_eq(ph_last(), &ev, sizeof(ev));
	ck_assert_uint_eq(st.ring_n, 1);
}
END_TEST

START_TEST(test_overlong_and_short)
{
	struct sched_exit_rec r = exit_rec(true);

	r.hdr.size = sizeof(r) + 1; /* claims more than the ring handed over */
	sched_on_ring(&st, &r, sizeof(r));
	ck_assert_uint_eq(PH.drops_bpf, 1);
	ck_assert_uint_eq(PH.drops_other, 0);
	r.hdr.size = sizeof(struct nt_event_hdr);
	sched_on_ring(&st, &r, sizeof(struct nt_event_hdr) - 1);
	sched_on_ring(&st, &r, sizeof(struct nt_event_hdr)); /* exit record cut short */
	ck_assert_uint_eq(PH.n_events, 0);
	ck_assert_ptr_null(sched_map_get(&st.procs, 1000));
	ck_assert_ptr_null(sched_map_get(&st.threads, 1001));
}
END_TEST

START_TEST(test_budget_stops_read)
{
	struct sched_switch_ev ev;

	memset(&ev, 0, sizeof(ev));
	ev.hdr.type = T_SWITCH;
	ev.hdr.size = sizeof(ev);
	st.ring_budget = 2;
	ck_assert_int_eq(sched_on_ring(&st, &ev, sizeof(ev)), 0);
	ck_assert_int_eq(sched_on_ring(&st, &ev, sizeof(ev)), -EAGAIN);
	ck_assert_uint_eq(PH.n_events, 2); /* the second is consumed too */
}
END_TEST

static Suite *ring_suite(void)
{
	Suite *s = suite_create("sched_ring");
	TCase *tc = tcase_create("handler");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_exit_final_event);
	tcase_add_test(tc, test_second_exit_adds_nothing);
	tcase_add_test(tc, test_group_dead_marks_process);
	tcase_add_test(tc, test_no_thread_events);
	tcase_add_test(tc, test_switch_passes_whole);
	tcase_add_test(tc, test_overlong_and_short);
	tcase_add_test(tc, test_budget_stops_read);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(ring_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
