/* SPDX-License-Identifier: MIT */
/*
 * mem probe: the ring-buffer handler (plugins/mem/mem_ring.c) fed synthetic
 * byte records, with no kernel and no BPF object: the stand-in host
 * (probe_host.h) records what the handler publishes, counts and logs. Published records go out whole
 * and unchanged, an OOM kill also counts into its metric and logs, a record
 * longer than its ring slot is dropped and counted, and the internal
 * records (exit, exec, stack, fork) change the state as they should.
 */
#include <linux/types.h>

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem_priv.h"

#include "probe_host.h"

enum { T_RSS = 3, T_OOM = 7 };

static struct mem_config cfg;
static struct mem_state st;

static void setup(void)
{
	ph_reset_all();
	memset(&st, 0, sizeof(st));
	memset(&cfg, 0, sizeof(cfg));
	st.host = &probe_host;
	st.inst = &PH.inst;
	st.cfg = &cfg;
	st.t_rss = T_RSS;
	st.t_oom = T_OOM;
	st.m[M_OOM] = ph_metric("oom", 1); /* pid */
	mem_symcache_init(&st.syms);
	mem_groups_init(&st.groups);
}

static void teardown(void)
{
	for (size_t i = 0; i < st.n_procs; i++)
		free(st.procs[i]);
	free(st.procs);
	free(st.exits);
	mem_symcache_free(&st.syms);
	mem_groups_free(&st.groups);
	ph_reset();
}

/* A published record: a header and `extra` payload bytes. */
static size_t make_event(unsigned char *buf, uint32_t type, uint32_t pid,
			 const char *comm, size_t extra)
{
	struct nt_event_hdr *h = (struct nt_event_hdr *)buf;

	memset(buf, 0, sizeof(*h) + extra);
	h->type = type;
	h->size = (uint32_t)(sizeof(*h) + extra);
	h->pid = pid;
	h->tid = pid;
	snprintf(h->comm, sizeof(h->comm), "%s", comm);
	for (size_t i = 0; i < extra; i++)
		buf[sizeof(*h) + i] = (unsigned char)(i * 7 + 1);
	return sizeof(*h) + extra;
}

static struct mem_internal internal(uint32_t kind, uint32_t tgid, uint32_t child,
				    int32_t stack_id, const char *comm)
{
	struct mem_internal r;

	memset(&r, 0, sizeof(r));
	r.hdr.type = 0;
	r.hdr.size = sizeof(r);
	r.hdr.pid = tgid;
	snprintf(r.hdr.comm, sizeof(r.hdr.comm), "%s", comm);
	r.kind = kind;
	r.tgid = tgid;
	r.child = child;
	r.stack_id = stack_id;
	return r;
}

START_TEST(test_published_whole)
{
	unsigned char rec[128];
	size_t n = make_event(rec, T_RSS, 4242, "trainer", 40);

	ck_assert_int_eq(mem_on_record(&st, rec, n), 0);
	ck_assert_uint_eq(PH.n_events, 1);
	ck_assert_uint_eq(ph_last()->size, n);
	ck_assert_mem_eq(ph_last(), rec, n);
	ck_assert_uint_eq(PH.drops_bpf + PH.drops_other, 0);
	ck_assert_uint_eq(PH.n_updates, 0);
}
END_TEST

START_TEST(test_oom_counts_and_logs)
{
	unsigned char rec[128];
	size_t n = make_event(rec, T_OOM, 31337, "hog", 16);

	mem_on_record(&st, rec, n);
	ck_assert_uint_eq(PH.n_events, 1);
	ck_assert_uint_eq(PH.n_updates, 1);
	ck_assert(ph_sum("add", "oom", 0, "31337") == 1);
	ck_assert_int_eq(PH.warns, 1);
	ck_assert_str_eq(PH.warn, "OOM killer chose pid 31337 (hog)");
}
END_TEST

START_TEST(test_overlong_dropped)
{
	unsigned char rec[128];
	size_t n = make_event(rec, T_RSS, 1, "x", 16);

	/* The header claims more than the ring handed over. */
	((struct nt_event_hdr *)rec)->size = (uint32_t)n + 1;
	mem_on_record(&st, rec, n);
	ck_assert_uint_eq(PH.n_events, 0);
	ck_assert_uint_eq(PH.drops_bpf, 1);
	ck_assert_uint_eq(PH.drops_other, 0);
}
END_TEST

START_TEST(test_short_ignored)
{
	unsigned char rec[sizeof(struct mem_internal)] = {0};

	/* Shorter than a header, and an internal record cut short. */
	mem_on_record(&st, rec, sizeof(struct nt_event_hdr) - 1);
	mem_on_record(&st, rec, sizeof(struct nt_event_hdr));
	ck_assert_uint_eq(PH.n_events, 0);
	ck_assert_uint_eq(PH.drops_bpf + PH.drops_other, 0);
	ck_assert_uint_eq(st.n_exits, 0);
}
END_TEST

START_TEST(test_exit_queued_once_with_comm)
{
	struct mem_internal r = internal(MEM_REC_EXIT, 4000001, 0, -1, "worker-3");

	mem_on_record(&st, &r, sizeof(r));
	mem_on_record(&st, &r, sizeof(r)); /* twice: queued once */
	ck_assert_uint_eq(st.n_exits, 1);
	ck_assert_uint_eq(st.exits[0], 4000001);
	ck_assert_uint_eq(st.n_procs, 1);
	ck_assert_str_eq(st.procs[0]->comm, "worker-3");
	ck_assert_uint_eq(PH.n_events, 0);
}
END_TEST

START_TEST(test_exec_forgets_stacks)
{
	struct mem_internal r = internal(MEM_REC_EXEC, 77, 0, -1, "python3");

	ck_assert_int_eq(mem_symcache_put(&st.syms, 77, 5, "main;f", "f", false), 0);
	ck_assert_int_eq(mem_symcache_put(&st.syms, 78, 5, "main;g", "g", false), 0);
	mem_on_record(&st, &r, sizeof(r));
	ck_assert_ptr_null(mem_symcache_get(&st.syms, 77, 5));
	ck_assert_str_eq(mem_symcache_get(&st.syms, 78, 5)->text, "main;g");
}
END_TEST

START_TEST(test_stack_and_fork_without_work)
{
	/* No symbolizing budget left in this poll, and probes not bound per
	 * pid: neither record has anything to do (nor touches the object). */
	struct mem_internal s = internal(MEM_REC_STACK, 9, 0, 12, "a");
	struct mem_internal f = internal(MEM_REC_FORK, 9, 10, -1, "a");

	st.sym_budget = 0;
	st.per_pid = false;
	mem_on_record(&st, &s, sizeof(s));
	mem_on_record(&st, &f, sizeof(f));
	ck_assert_uint_eq(st.n_procs, 0);
	ck_assert_ptr_null(mem_symcache_get(&st.syms, 9, 12));
	ck_assert_uint_eq(PH.n_events + PH.drops_bpf + PH.drops_other, 0);
	ck_assert_int_eq(PH.warns, 0);
}
END_TEST

static Suite *ring_suite(void)
{
	Suite *s = suite_create("mem_ring");
	TCase *tc = tcase_create("handler");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_published_whole);
	tcase_add_test(tc, test_oom_counts_and_logs);
	tcase_add_test(tc, test_overlong_dropped);
	tcase_add_test(tc, test_short_ignored);
	tcase_add_test(tc, test_exit_queued_once_with_comm);
	tcase_add_test(tc, test_exec_forgets_stacks);
	tcase_add_test(tc, test_stack_and_fork_without_work);
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
