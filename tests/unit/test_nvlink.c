/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the nvlink probe's pure parts: NVML struct layouts (pinned
 * to the published nvml.h facts, independently of the declarations the
 * plugin and the stand-in share), NCCL argument decoding and byte
 * conventions, communicator numbering and the hang check, the XID table,
 * the NVML loader against the stand-in library, and the kallsyms names
 * given to dma_fence drivers.
 */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ksym.h"
#include "nccl_model.h"
#include "nccl_state.h"
#include "nvml_api.h"
#include "nvml_load.h"
#include "xid.h"

#define SEC 1000000000ull

START_TEST(test_nvml_layouts)
{
	/* nvmlFieldValue_t: fieldId 0, scopeId 4, timestamp 8, latencyUsec 16,
	 * valueType 24, nvmlReturn 28, value 32; 40 bytes */
	ck_assert_uint_eq(sizeof(struct nvml_field_value), 40);
	ck_assert_uint_eq(offsetof(struct nvml_field_value, scope_id), 4);
	ck_assert_uint_eq(offsetof(struct nvml_field_value, value_type), 24);
	ck_assert_uint_eq(offsetof(struct nvml_field_value, ret), 28);
	ck_assert_uint_eq(offsetof(struct nvml_field_value, value), 32);
	/* nvmlPciInfo_t: busIdLegacy[16], 5 unsigned ints, busId[32] */
	ck_assert_uint_eq(sizeof(struct nvml_pci_info), 68);
	ck_assert_uint_eq(offsetof(struct nvml_pci_info, bus_id), 36);
	/* nvmlProcessInfo_t (v2 layout): pid, usedGpuMemory at 8, 2 ids */
	ck_assert_uint_eq(sizeof(struct nvml_process_info), 24);
	ck_assert_uint_eq(offsetof(struct nvml_process_info, used_gpu_memory), 8);
	/* nvmlProcessUtilizationSample_t: pid, timeStamp at 8, 4 utils */
	ck_assert_uint_eq(sizeof(struct nvml_process_util), 32);
	ck_assert_uint_eq(offsetof(struct nvml_process_util, sm_util), 16);
	/* nvmlEventData_t: device, eventType 8, eventData 16, 2 ids */
	ck_assert_uint_eq(sizeof(struct nvml_event_data), 32);
	ck_assert_uint_eq(offsetof(struct nvml_event_data, event_data), 16);
	ck_assert_uint_eq(sizeof(struct nvml_memory), 24);
	/* nvmlMemory_v2_t: version, total 8, reserved 16, free 24, used 32;
	 * nvmlMemory_v2 = sizeof | 2 << 24 */
	ck_assert_uint_eq(sizeof(struct nvml_memory_v2), 40);
	ck_assert_uint_eq(offsetof(struct nvml_memory_v2, used), 32);
	ck_assert_uint_eq(NVML_MEMORY_V2_VERSION, 0x02000028);
	ck_assert_uint_eq(offsetof(struct nvml_memory, used), 16);
	ck_assert_uint_eq(sizeof(struct nvml_utilization), 8);
}
END_TEST

START_TEST(test_decode_args)
{
	__u64 reg[6] = { 0x1000, 0x2000, 1048576, 7, 0, 0xc0ffee };
	__u64 stk[2] = { 0x5eed, 0x77 };
	struct nvl_args a;

	/* ncclAllReduce(send, recv, count, float32, sum, comm, stream) */
	nvl_decode_args(NVL_C_ALLREDUCE, reg, stk, &a);
	ck_assert_uint_eq(a.count, 1048576);
	ck_assert_int_eq(a.dtype, 7);
	ck_assert_int_eq(a.op, 0);
	ck_assert_uint_eq(a.comm, 0xc0ffee);
	ck_assert_uint_eq(a.stream, 0x5eed);
	ck_assert_int_eq(a.root, -1);
	ck_assert_uint_eq(nvl_call_bytes(&a), 4194304);
	/* ncclReduce(send, recv, count, float64, prod, root, comm, stream) */
	{
		__u64 r2[6] = { 1, 2, 500, 8, 1, 1 };
		__u64 s2[2] = { 0xabc, 0xdef };

		nvl_decode_args(NVL_C_REDUCE, r2, s2, &a);
		ck_assert_uint_eq(a.count, 500);
		ck_assert_int_eq(a.root, 1);
		ck_assert_uint_eq(a.comm, 0xabc);
		ck_assert_uint_eq(a.stream, 0xdef);
		ck_assert_uint_eq(nvl_call_bytes(&a), 4000);
	}
	/* ncclSend(send, count, int32, peer, comm, stream) */
	{
		__u64 r3[6] = { 1, 256, 2, 1, 0xcc, 0 };

		nvl_decode_args(NVL_C_SEND, r3, stk, &a);
		ck_assert_uint_eq(a.count, 256);
		ck_assert_int_eq(a.root, 1);
		ck_assert_uint_eq(a.comm, 0xcc);
		ck_assert_int_eq(a.op, -1);
		ck_assert_uint_eq(nvl_call_bytes(&a), 1024);
	}
	/* ncclCommInitRank(comm *, nranks, id, rank): x86-64 passes the id in
	 * memory, rank in reg 3; arm64 the id's address in reg 3, rank in 4 */
	{
#if defined(__aarch64__)
		__u64 r4[6] = { 0x7ffd0000, 8, 0x7ffd1000, 5, 0, 0 };
#else
		__u64 r4[6] = { 0x7ffd0000, 8, 5, 0, 0, 0 };
#endif

		nvl_decode_args(NVL_C_INITRANK, r4, stk, &a);
		ck_assert_int_eq(a.nranks, 8);
		ck_assert_int_eq(a.rank, 5);
	}
	/* an int argument is the low 32 bits of its register */
	{
		__u64 r5[6] = { 0, 0, 10, 0xffffffff00000009ull, 0, 0 };

		nvl_decode_args(NVL_C_ALLGATHER, r5, stk, &a);
		ck_assert_int_eq(a.dtype, 9);
	}
}
END_TEST

START_TEST(test_model_facts)
{
	ck_assert_uint_eq(nvl_dtype_size(0), 1);
	ck_assert_uint_eq(nvl_dtype_size(4), 8);
	ck_assert_uint_eq(nvl_dtype_size(6), 2);
	ck_assert_uint_eq(nvl_dtype_size(9), 2);
	ck_assert_uint_eq(nvl_dtype_size(11), 1);
	ck_assert_uint_eq(nvl_dtype_size(12), 0);
	ck_assert_uint_eq(nvl_dtype_size(-1), 0);
	ck_assert_str_eq(nvl_dtype_name(9), "bfloat16");
	ck_assert_str_eq(nvl_op_name(2), "max");
	ck_assert_str_eq(nvl_op_name(-1), "");
	ck_assert_str_eq(nvl_op_name(5), "custom");
	ck_assert_str_eq(nvl_call_name(NVL_C_ALLREDUCE), "ncclAllReduce");
	ck_assert_str_eq(nvl_call_pname(NVL_C_GROUPEND), "pncclGroupEnd");
	ck_assert(nvl_call_is_collective(NVL_C_BROADCAST));
	ck_assert(!nvl_call_is_collective(NVL_C_SEND));
	ck_assert(nvl_call_moves_data(NVL_C_RECV));
	ck_assert(!nvl_call_moves_data(NVL_C_GROUPEND));
	/* nccl-tests: allgather S = sendcount x nranks x size */
	ck_assert_uint_eq(nvl_algbw_bytes(NVL_C_ALLGATHER, 8192, 4), 32768);
	ck_assert_uint_eq(nvl_algbw_bytes(NVL_C_ALLREDUCE, 8192, 4), 8192);
	ck_assert_double_eq_tol(nvl_busbw_factor(NVL_C_ALLREDUCE, 2), 1.0, 1e-12);
	ck_assert_double_eq_tol(nvl_busbw_factor(NVL_C_ALLREDUCE, 8), 1.75, 1e-12);
	ck_assert_double_eq_tol(nvl_busbw_factor(NVL_C_ALLGATHER, 4), 0.75, 1e-12);
	ck_assert_double_eq_tol(nvl_busbw_factor(NVL_C_BROADCAST, 4), 1.0, 1e-12);
	{
		uint8_t z[128] = { 0 }, u[128] = { 0 };

		u[0] = 1;
		ck_assert_uint_eq(nvl_uid_hash(z, sizeof(z)), 0);
		ck_assert_uint_ne(nvl_uid_hash(u, sizeof(u)), 0);
		ck_assert_uint_eq(nvl_uid_hash(u, sizeof(u)), nvl_uid_hash(u, sizeof(u)));
	}
}
END_TEST

static struct nvl_coll coll(uint64_t ts, uint32_t call, uint64_t bytes)
{
	struct nvl_coll k = { 0, ts, bytes / 4, bytes, call, 7, 0 };

	return k;
}

START_TEST(test_comm_table)
{
	struct nvl_comms t = { 0 };
	struct nvl_comm *c;

	for (uint32_t i = 0; i < 40; i++)
		ck_assert_ptr_nonnull(nvl_comm_add(&t, 100 + i, 0xa0 + i, 7, 0, 2));
	c = nvl_comm_find(&t, 117, 0xa0 + 17);
	ck_assert_ptr_nonnull(c);
	ck_assert_uint_eq(nvl_comm_collective(c, &(struct nvl_coll){ .call = 1 }), 1);
	ck_assert_uint_eq(nvl_comm_collective(c, &(struct nvl_coll){ .call = 1 }), 2);
	ck_assert_uint_eq(c->ring[2].seq, 2);
	nvl_comm_drop(&t, 117, 0xa0 + 17);
	ck_assert_ptr_null(nvl_comm_find(&t, 117, 0xa0 + 17));
	nvl_comm_drop_pid(&t, 118);
	ck_assert_ptr_null(nvl_comm_find(&t, 118, 0xa0 + 18));
	ck_assert_ptr_nonnull(nvl_comm_find(&t, 119, 0xa0 + 19));
	/* a slot freed is reused, the table does not grow */
	c = nvl_comm_add(&t, 999, 1, 7, 1, 2);
	ck_assert_uint_eq(t.n, 40);
	nvl_comms_free(&t);
}
END_TEST

/* Rank 1 never enters collective #3 that rank 0 entered (and waits in). */
START_TEST(test_hang_missing_rank)
{
	struct nvl_comms t = { 0 };
	struct nvl_comm *r0 = nvl_comm_add(&t, 10, 0xa, 0x77, 0, 2);
	struct nvl_comm *r1 = nvl_comm_add(&t, 11, 0xb, 0x77, 1, 2);
	struct nvl_hang h[4];
	struct nvl_pending p = { .pid = 10, .tid = 12, .comm = 0xa, .ts_ns = 3 * SEC };
	struct nvl_coll k;

	for (int i = 0; i < 2; i++) {
		k = coll(1 * SEC, NVL_C_ALLREDUCE, 4096);
		nvl_comm_collective(r0, &k);
		nvl_comm_collective(r1, &k);
	}
	p.c = coll(3 * SEC, NVL_C_ALLREDUCE, 4194304);
	/* 9 s later with a 10 s timeout: nothing yet */
	ck_assert_uint_eq(nvl_hang_check(&t, &p, 1, 12 * SEC, 10 * SEC, h, 4), 0);
	ck_assert_uint_eq(nvl_hang_check(&t, &p, 1, 13 * SEC, 10 * SEC, h, 4), 1);
	ck_assert_int_eq(h[0].missing_rank, 1);
	ck_assert_uint_eq(h[0].missing_pid, 11);
	ck_assert_uint_eq(h[0].missing_last_seq, 2);
	ck_assert_int_eq(h[0].wait_rank, 0);
	ck_assert_uint_eq(h[0].wait_pid, 10);
	ck_assert_uint_eq(h[0].wait_tid, 12);
	ck_assert_uint_eq(h[0].call, NVL_C_ALLREDUCE);
	ck_assert_uint_eq(h[0].seq, 3);
	ck_assert_uint_eq(h[0].bytes, 4194304);
	ck_assert_uint_eq(h[0].wait_ns, 10 * SEC);
	ck_assert(h[0].blocked);
	ck_assert_int_eq(h[0].ranks_seen, 2);
	ck_assert_uint_eq(h[0].uid, 0x77);
	/* reported once: not again, not as a separate "blocked" finding */
	ck_assert_uint_eq(nvl_hang_check(&t, &p, 1, 20 * SEC, 10 * SEC, h, 4), 0);
	nvl_comms_free(&t);
}
END_TEST

/* NCCL's calls return at once: rank 0 is 2 collectives ahead, none
 * pending; rank 1 is reported for #3 when #3 is old enough. */
START_TEST(test_hang_async_lag)
{
	struct nvl_comms t = { 0 };
	struct nvl_comm *r0 = nvl_comm_add(&t, 10, 0xa, 0x99, 0, 2);
	struct nvl_comm *r1 = nvl_comm_add(&t, 11, 0xb, 0x99, 1, 2);
	struct nvl_hang h[4];
	struct nvl_coll k = coll(1 * SEC, NVL_C_ALLREDUCE, 400);

	nvl_comm_collective(r0, &k);
	nvl_comm_collective(r1, &k);
	k = coll(2 * SEC, NVL_C_BROADCAST, 800);
	nvl_comm_collective(r0, &k);
	k = coll(5 * SEC, NVL_C_ALLREDUCE, 1600);
	nvl_comm_collective(r0, &k);
	ck_assert_uint_eq(nvl_hang_check(&t, NULL, 0, 12 * SEC, 10 * SEC, h, 4), 1);
	ck_assert_int_eq(h[0].missing_rank, 1);
	ck_assert_uint_eq(h[0].seq, 2);
	ck_assert_uint_eq(h[0].call, NVL_C_BROADCAST);
	ck_assert(!h[0].blocked);
	/* rank 1 catches up to #2: #3 entered at 5 s is reported at 15 s */
	k = coll(13 * SEC, NVL_C_BROADCAST, 800);
	nvl_comm_collective(r1, &k);
	ck_assert_uint_eq(nvl_hang_check(&t, NULL, 0, 14 * SEC, 10 * SEC, h, 4), 0);
	ck_assert_uint_eq(nvl_hang_check(&t, NULL, 0, 15 * SEC, 10 * SEC, h, 4), 1);
	ck_assert_uint_eq(h[0].seq, 3);
	ck_assert_uint_eq(h[0].bytes, 1600);
	/* caught up: nothing more */
	k = coll(16 * SEC, NVL_C_ALLREDUCE, 1600);
	nvl_comm_collective(r1, &k);
	ck_assert_uint_eq(nvl_hang_check(&t, NULL, 0, 40 * SEC, 10 * SEC, h, 4), 0);
	nvl_comms_free(&t);
}
END_TEST

/* A call inside NCCL whose peers are not traced here; a comm init that
 * waits for a rank that never comes. */
START_TEST(test_hang_blocked_and_init)
{
	struct nvl_comms t = { 0 };
	struct nvl_hang h[4];
	struct nvl_pending p[2];

	nvl_comm_add(&t, 10, 0xa, 0x55, 0, 4);
	memset(p, 0, sizeof(p));
	p[0].pid = 10;
	p[0].tid = 10;
	p[0].comm = 0xa;
	p[0].ts_ns = 1 * SEC;
	p[0].c = coll(1 * SEC, NVL_C_ALLREDUCE, 64);
	p[1].pid = 20;
	p[1].tid = 21;
	p[1].ts_ns = 2 * SEC;
	p[1].c = coll(2 * SEC, NVL_C_INITRANK, 0);
	p[1].uid = 0x66;
	p[1].rank = 0;
	p[1].nranks = 2;
	ck_assert_uint_eq(nvl_hang_check(&t, p, 2, 11 * SEC, 10 * SEC, h, 4), 1);
	ck_assert(h[0].blocked);
	ck_assert_int_eq(h[0].missing_rank, -1);
	ck_assert_int_eq(h[0].ranks_seen, 1);
	ck_assert_int_eq(h[0].nranks, 4);
	ck_assert_uint_eq(h[0].seq, 1);
	ck_assert_uint_eq(nvl_hang_check(&t, p, 2, 12 * SEC, 10 * SEC, h, 4), 1);
	ck_assert_uint_eq(h[0].call, NVL_C_INITRANK);
	ck_assert_int_eq(h[0].missing_rank, 1);
	ck_assert_int_eq(h[0].ranks_seen, 1);
	ck_assert_uint_eq(h[0].wait_pid, 20);
	ck_assert_uint_eq(h[0].uid, 0x66);
	ck_assert_uint_eq(nvl_hang_check(&t, p, 2, 30 * SEC, 10 * SEC, h, 4), 0);
	nvl_comms_free(&t);
}
END_TEST

START_TEST(test_groups)
{
	static struct nvl_groups g;
	struct nvl_group *e;

	memset(&g, 0, sizeof(g));
	ck_assert_ptr_null(nvl_group_get(&g, 5, 1, false));
	e = nvl_group_get(&g, 5, 1, true);
	e->depth = 1;
	ck_assert_ptr_eq(nvl_group_get(&g, 5, 2, false), e);
	for (uint32_t t = 100; t < 100 + NVL_GROUPS_MAX; t++)
		nvl_group_get(&g, t, 10 + t, true);
	/* the stalest (tid 5, used at 2) was evicted */
	ck_assert_ptr_null(nvl_group_get(&g, 5, 1000, false));
}
END_TEST

START_TEST(test_xid_table)
{
	const struct nvl_xid_info *x = nvl_xid_lookup(79);

	ck_assert_uint_eq(x->xid, 79);
	ck_assert_uint_eq(x->severity, 2);
	ck_assert_ptr_nonnull(strstr(x->meaning, "fallen off the bus"));
	ck_assert_uint_eq(nvl_xid_lookup(31)->severity, 1);
	ck_assert_ptr_nonnull(strstr(nvl_xid_lookup(48)->meaning, "ECC"));
	ck_assert_uint_eq(nvl_xid_lookup(12345)->xid, 0);
}
END_TEST

/* Fence drivers are named from kallsyms: the module, else the function;
 * an address not listed becomes hex; answers are cached. */
START_TEST(test_ksym_names)
{
	char path[] = "/tmp/ntcore-test-kallsyms.XXXXXX";
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	struct nvl_ksyms c = { .path = path };
	struct nvl_ksym k;
	const struct nvl_ksym *e;

	ck_assert_ptr_nonnull(f);
	fputs("ffffffff81da4e70 T __traceiter_dma_fence_emit\n"
	      "ffffffff81da5000 t dma_fence_stub_get_name\n"
	      "ffffffffc0a1b2c0 t amdgpu_fence_get_driver_name\t[amdgpu]\n", f);
	fclose(f);
	ck_assert(nvl_ksym_parse_line("ffffffffc0a1b2c0 t amdgpu_fence_get_driver_name\t[amdgpu]\n",
				      0xffffffffc0a1b2c0ull, &k));
	ck_assert_str_eq(k.func, "amdgpu_fence_get_driver_name");
	ck_assert_str_eq(k.module, "amdgpu");
	ck_assert(!nvl_ksym_parse_line("ffffffffc0a1b2c0 t x\n", 0xffffffffc0a1b2c1ull, &k));
	ck_assert(!nvl_ksym_parse_line("garbage\n", 0, &k));

	e = nvl_ksym_find(&c, 0xffffffffc0a1b2c0ull);
	ck_assert_str_eq(nvl_ksym_driver(e), "amdgpu");
	e = nvl_ksym_find(&c, 0xffffffff81da5000ull);
	ck_assert_str_eq(nvl_ksym_driver(e), "dma_fence_stub_get_name");
	ck_assert_str_eq(e->module, "");
	e = nvl_ksym_find(&c, 0xffffffff81000001ull);
	ck_assert_str_eq(nvl_ksym_driver(e), "0xffffffff81000001");
	e = nvl_ksym_find(&c, 0);
	ck_assert_str_eq(nvl_ksym_driver(e), "");
	ck_assert_uint_eq(c.n, 3);
	unlink(path); /* cached: no second read */
	e = nvl_ksym_find(&c, 0xffffffffc0a1b2c0ull);
	ck_assert_str_eq(nvl_ksym_driver(e), "amdgpu");
	ck_assert_uint_eq(c.n, 3);
}
END_TEST

START_TEST(test_nvml_loader)
{
	struct nvml_lib l;
	char err[256], buf[32];
	unsigned int n = 0;

	ck_assert_int_eq(nvml_lib_open(&l, "/nonexistent/libnvidia-ml.so.1", err,
				       sizeof(err)), -1);
	ck_assert_ptr_nonnull(strstr(err, "/nonexistent/libnvidia-ml.so.1"));
	ck_assert_ptr_null(l.handle);
	ck_assert_int_eq(nvml_lib_open(&l, FIXTURE_DIR "/libnvidia-ml.so.1", err,
				       sizeof(err)), 0);
	ck_assert_ptr_nonnull(l.field_values);
	ck_assert_ptr_nonnull(l.event_wait);
	ck_assert_int_eq(l.init(), 0);
	ck_assert_int_eq(l.device_count(&n), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_str_eq(nvml_lib_strerror(&l, 3, buf, sizeof(buf)), "Not Supported");
	nvml_lib_close(&l);
	ck_assert_ptr_null(l.handle);
}
END_TEST

static Suite *nvlink_suite(void)
{
	Suite *s = suite_create("nvlink");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, test_nvml_layouts);
	tcase_add_test(tc, test_decode_args);
	tcase_add_test(tc, test_model_facts);
	tcase_add_test(tc, test_comm_table);
	tcase_add_test(tc, test_hang_missing_rank);
	tcase_add_test(tc, test_hang_async_lag);
	tcase_add_test(tc, test_hang_blocked_and_init);
	tcase_add_test(tc, test_groups);
	tcase_add_test(tc, test_xid_table);
	tcase_add_test(tc, test_nvml_loader);
	tcase_add_test(tc, test_ksym_names);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(nvlink_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
