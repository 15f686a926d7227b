/* SPDX-License-Identifier: MIT */
/*
 * The nvlink probe's NCCL ring handler (nccl_record.c) fed synthetic ring
 * records, with no kernel and no BPF: a stand-in host records what is
 * published and every metric update, and the tests check the events'
 * fields, the metric labels and values, and that malformed records are
 * ignored.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_model.h"
#include "nvl.h"

enum { T_COLL = 40, T_INIT = 41 };

#define MAX_EVENTS 64
#define MAX_UPDATES 1024

struct update {
	int metric; /* enum nvl_metric */
	char labels[128]; /* label values joined by '|' */
	double v;
	char op; /* 'a'dd or 's'et */
};

/* What the stand-in host saw (one test at a time: check forks each). */
static struct {
	unsigned char ev[MAX_EVENTS][512];
	size_t n_ev;
	struct update up[MAX_UPDATES];
	size_t n_up;
	char drop_stage[32];
	uint64_t drops;
} seen;

static int fx_publish(struct nt_instance *inst, const struct nt_event_hdr *ev)
{
	(void)inst;
	ck_assert_uint_le(ev->size, sizeof(seen.ev[0]));
	ck_assert_uint_lt(seen.n_ev, MAX_EVENTS);
	memcpy(seen.ev[seen.n_ev++], ev, ev->size);
	return 1;
}

static int labels_of(int m)
{
	return m == NVM_NCCL_ERRORS || m == NVM_NCCL_ALGBW || m == NVM_NCCL_BUSBW ? 4 : 5;
}

static void record(struct nt_metric *m, const char *const *lv, double v, char op)
{
	struct update *u;
	int idx = (int)(uintptr_t)m - 1;
	size_t off = 0;

	ck_assert_uint_lt(seen.n_up, MAX_UPDATES);
	u = &seen.up[seen.n_up++];
	u->metric = idx;
	u->v = v;
	u->op = op;
	for (int i = 0; i < labels_of(idx); i++)
		off += (size_t)snprintf(u->labels + off, sizeof(u->labels) - off,
					"%s%s", i ? "|" : "", lv[i]);
}

static void fx_add(struct nt_metric *m, const char *const *lv, double v)
{
	record(m, lv, v, 'a');
}

static void fx_set(struct nt_metric *m, const char *const *lv, double v)
{
	record(m, lv, v, 's');
}

static void fx_drop(struct nt_instance *inst, const char *stage, uint64_t n)
{
	(void)inst;
	snprintf(seen.drop_stage, sizeof(seen.drop_stage), "%s", stage);
	seen.drops += n;
}

static const struct nt_host host = {
	.publish = fx_publish,
	.metric_add = fx_add,
	.metric_set = fx_set,
	.count_drop = fx_drop,
};

static struct nvl_cfg cfg = { .collective_events = true };

static struct nvl *plugin(void)
{
	struct nvl *s = calloc(1, sizeof(*s));

	ck_assert_ptr_nonnull(s);
	memset(&seen, 0, sizeof(seen));
	s->host = &host;
	s->cfg = &cfg;
	s->types[NVL_EV_COLL] = T_COLL;
	s->types[NVL_EV_INIT] = T_INIT;
	for (int i = 0; i < NVM_N; i++)
		s->nm.m[i] = (struct nt_metric *)(uintptr_t)(i + 1);
	return s;
}

static void plugin_free(struct nvl *s)
{
	nvl_comms_free(&s->comms);
	free(s);
}

static struct nvl_raw_call call_rec(uint32_t pid, uint32_t call, uint64_t ts,
				    uint64_t dur)
{
	struct nvl_raw_call r;

	memset(&r, 0, sizeof(r));
	r.hdr.type = NVL_RAW_CALL;
	r.hdr.size = sizeof(r);
	r.hdr.pid = pid;
	r.hdr.tid = pid;
	r.hdr.ts_ns = ts;
	snprintf(r.hdr.comm, sizeof(r.hdr.comm), "train%u", pid);
	r.duration_ns = dur;
	r.call = call;
	return r;
}

/* ncclCommInitRank(&comm, nranks, id, rank) returning handle. The rank is
 * in the 3rd register on x86-64 and the 4th on arm64: both are set. */
static void feed_init(struct nvl *s, uint32_t pid, int rank, uint64_t handle)
{
	struct nvl_raw_call r = call_rec(pid, NVL_C_INITRANK, 1000, 5000);

	r.reg[1] = 2; /* nranks */
	r.reg[2] = r.reg[3] = (uint64_t)rank;
	r.nhandles = 1;
	r.handles[0] = handle;
	for (int i = 0; i < NVL_UID_LEN; i++)
		r.uid[i] = (uint8_t)(i + 1);
	nvl_nccl_record(s, &r, sizeof(r));
}

/* ncclAllReduce(send, recv, count, dtype, op, comm, stream) */
static struct nvl_raw_call allreduce(uint32_t pid, uint64_t comm, uint64_t count,
				     uint64_t dur)
{
	struct nvl_raw_call r = call_rec(pid, NVL_C_ALLREDUCE, 2000, dur);

	r.reg[2] = count;
	r.reg[3] = 7; /* ncclFloat32 */
	r.reg[4] = 0; /* ncclSum */
	r.reg[5] = comm;
	r.stk[0] = 0x55; /* the stream */
	return r;
}

static const struct update *find_update(int metric, char op)
{
	for (size_t i = 0; i < seen.n_up; i++)
		if (seen.up[i].metric == metric && seen.up[i].op == op)
			return &seen.up[i];
	return NULL;
}

START_TEST(test_init_then_allreduce)
{
	struct nvl *s = plugin();
	uint8_t uid[NVL_UID_LEN];
	uint64_t want_uid;
	struct nvl_raw_call r;
	const struct nvl_ev_init *ei;
	const struct nvl_ev_coll *ec;
	const struct update *u;

	for (int i = 0; i < NVL_UID_LEN; i++)
		uid[i] = (uint8_t)(i + 1);
	want_uid = nvl_uid_hash(uid, sizeof(uid));
	feed_init(s, 100, 1, 0xc0ffee);
	ck_assert_uint_eq(seen.n_ev, 1);
	ei = (const struct nvl_ev_init *)seen.ev[0];
	ck_assert_uint_eq(ei->hdr.type, T_INIT);
	ck_assert_uint_eq(ei->hdr.size, sizeof(*ei));
	ck_assert_uint_eq(ei->hdr.pid, 100);
	ck_assert_uint_eq(ei->comm_handle, 0xc0ffee);
	ck_assert_uint_eq(ei->communicator, want_uid);
	ck_assert_int_eq(ei->rank, 1);
	ck_assert_int_eq(ei->nranks, 2);
	ck_assert_uint_eq(ei->duration_ns, 5000);
	ck_assert_str_eq(ei->name, "ncclCommInitRank");

	/* 1024 float32 in 1 ms on that communicator */
	seen.n_up = 0;
	r = allreduce(100, 0xc0ffee, 1024, 1000000);
	nvl_nccl_record(s, &r, sizeof(r));
	ck_assert_uint_eq(seen.n_ev, 2);
	ec = (const struct nvl_ev_coll *)seen.ev[1];
	ck_assert_uint_eq(ec->hdr.type, T_COLL);
	ck_assert_uint_eq(ec->hdr.size, sizeof(*ec));
	ck_assert_str_eq(ec->hdr.comm, "train100");
	ck_assert_str_eq(ec->name, "ncclAllReduce");
	ck_assert_str_eq(ec->dtype, "float32");
	ck_assert_str_eq(ec->op, "sum");
	ck_assert_uint_eq(ec->count, 1024);
	ck_assert_uint_eq(ec->bytes, 4096);
	ck_assert_uint_eq(ec->algbw_bytes, 4096);
	ck_assert_uint_eq(ec->communicator, want_uid);
	ck_assert_uint_eq(ec->comm_handle, 0xc0ffee);
	ck_assert_uint_eq(ec->stream, 0x55);
	ck_assert_uint_eq(ec->seq, 1);
	ck_assert_int_eq(ec->rank, 1);
	ck_assert_int_eq(ec->nranks, 2);
	ck_assert_uint_eq(ec->calls, 1);
	ck_assert_uint_eq(ec->in_group, 0);
	ck_assert_double_eq_tol(ec->algbw, 4096e3, 1e-6);

	/* the call counters: {pid, comm, rank, nranks, call} */
	u = find_update(NVM_NCCL_BYTES, 'a');
	ck_assert_ptr_nonnull(u);
	ck_assert_str_eq(u->labels, "100|train100|1|2|ncclAllReduce");
	ck_assert_double_eq(u->v, 4096);
	u = find_update(NVM_NCCL_SECONDS, 'a');
	ck_assert_ptr_nonnull(u);
	ck_assert_double_eq_tol(u->v, 1e-3, 1e-12);

	/* the interval's bandwidth: algbw 4.096 MB/s, busbw x 2(n-1)/n = 1 */
	seen.n_up = 0;
	nvl_nccl_bw_publish(s);
	ck_assert_uint_eq(seen.n_up, 2);
	u = find_update(NVM_NCCL_ALGBW, 's');
	ck_assert_ptr_nonnull(u);
	ck_assert_str_eq(u->labels, "100|train100|1|ncclAllReduce");
	ck_assert_double_eq_tol(u->v, 4096e3, 1e-6);
	u = find_update(NVM_NCCL_BUSBW, 's');
	ck_assert_ptr_nonnull(u);
	ck_assert_double_eq_tol(u->v, 4096e3, 1e-6);
	/* and reset: nothing the next interval */
	seen.n_up = 0;
	nvl_nccl_bw_publish(s);
	ck_assert_uint_eq(seen.n_up, 0);
	plugin_free(s);
}
END_TEST

START_TEST(test_group_of_sends)
{
	struct nvl *s = plugin();
	struct nvl_raw_call r;
	const struct nvl_ev_coll *ec;

	feed_init(s, 200, 0, 0xabc);
	r = call_rec(200, NVL_C_GROUPSTART, 3000, 10);
	nvl_nccl_record(s, &r, NVL_RAW_CALL_SHORT);
	/* ncclSend(buf, count, dtype, peer, comm, stream): 10 float64 to 1 */
	r = call_rec(200, NVL_C_SEND, 3100, 20);
	r.reg[1] = 10;
	r.reg[2] = 8; /* ncclFloat64 */
	r.reg[3] = 1;
	r.reg[4] = 0xabc;
	nvl_nccl_record(s, &r, NVL_RAW_CALL_SHORT);
	r = call_rec(200, NVL_C_GROUPEND, 3200, 4000);
	nvl_nccl_record(s, &r, NVL_RAW_CALL_SHORT);

	ck_assert_uint_eq(seen.n_ev, 3); /* init, send, group end */
	ec = (const struct nvl_ev_coll *)seen.ev[1];
	ck_assert_str_eq(ec->name, "ncclSend");
	ck_assert_uint_eq(ec->in_group, 1);
	ck_assert_uint_eq(ec->bytes, 80);
	ck_assert_int_eq(ec->root, 1);
	ck_assert_uint_eq(ec->seq, 0); /* point to point: not numbered */
	ec = (const struct nvl_ev_coll *)seen.ev[2];
	ck_assert_str_eq(ec->name, "ncclGroupEnd");
	ck_assert_uint_eq(ec->calls, 1);
	ck_assert_uint_eq(ec->bytes, 80);
	ck_assert_uint_eq(ec->comm_handle, 0xabc);
	ck_assert_int_eq(ec->rank, 0);
	ck_assert_int_eq(ec->nranks, 2);
	plugin_free(s);
}
END_TEST

START_TEST(test_failed_call_counted)
{
	struct nvl *s = plugin();
	struct nvl_raw_call r = allreduce(300, 0x1, 4, 100);
	const struct update *u;

	r.ret = 3; /* ncclInternalError */
	nvl_nccl_record(s, &r, NVL_RAW_CALL_SHORT);
	u = find_update(NVM_NCCL_ERRORS, 'a');
	ck_assert_ptr_nonnull(u);
	ck_assert_str_eq(u->labels, "300|train300|ncclAllReduce|3");
	ck_assert_double_eq(u->v, 1);
	/* unknown communicator: rank and nranks empty, the event says -1 */
	ck_assert_uint_eq(seen.n_ev, 1);
	ck_assert_int_eq(((const struct nvl_ev_coll *)seen.ev[0])->rank, -1);
	/* a failed call is no bandwidth */
	seen.n_up = 0;
	nvl_nccl_bw_publish(s);
	ck_assert_uint_eq(seen.n_up, 0);
	plugin_free(s);
}
END_TEST

START_TEST(test_bad_records_ignored)
{
	struct nvl *s = plugin();
	struct nvl_raw_call r = allreduce(400, 0x1, 4, 100);

	nvl_nccl_record(s, &r, NVL_RAW_CALL_SHORT - 1); /* short */
	r.call = NVL_C_N;                                /* unknown call */
	nvl_nccl_record(s, &r, sizeof(r));
	r = call_rec(400, NVL_C_INITRANK, 1, 1);        /* init, cut short */
	nvl_nccl_record(s, &r, sizeof(r) - 1);
	ck_assert_uint_eq(seen.n_ev, 0);
	ck_assert_uint_eq(seen.n_up, 0);
	plugin_free(s);
}
END_TEST

START_TEST(test_bandwidth_slots_full_counts_drop)
{
	struct nvl *s = plugin();
	struct nvl_cfg no_events = { .collective_events = false };

	s->cfg = &no_events;

	for (uint32_t pid = 1; pid <= NVL_BW_MAX + 3; pid++) {
		struct nvl_raw_call r = allreduce(pid, 0x1, 4, 100);

		nvl_nccl_record(s, &r, NVL_RAW_CALL_SHORT);
	}
	seen.n_up = 0;
	seen.drops = 0;
	nvl_nccl_bw_publish(s);
	ck_assert_str_eq(seen.drop_stage, "nccl_bw");
	ck_assert_uint_eq(seen.drops, 3);
	plugin_free(s);
}
END_TEST

START_TEST(test_no_collective_events_when_off)
{
	struct nvl *s = plugin();
	struct nvl_cfg off = { .collective_events = false };
	struct nvl_raw_call r = allreduce(500, 0x1, 4, 100);

	s->cfg = &off;
	nvl_nccl_record(s, &r, NVL_RAW_CALL_SHORT);
	ck_assert_uint_eq(seen.n_ev, 0);
	ck_assert_ptr_nonnull(find_update(NVM_NCCL_CALLS, 'a')); /* metrics kept */
	plugin_free(s);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("nvlink-ring");
	TCase *tc = tcase_create("nccl");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_init_then_allreduce);
	tcase_add_test(tc, test_group_of_sends);
	tcase_add_test(tc, test_failed_call_counted);
	tcase_add_test(tc, test_bad_records_ignored);
	tcase_add_test(tc, test_bandwidth_slots_full_counts_drop);
	tcase_add_test(tc, test_no_collective_events_when_off);
	suite_add_tcase(su, tc);
	sr = srunner_create(su);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
