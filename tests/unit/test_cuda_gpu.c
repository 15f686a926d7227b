/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of cuda_gpu's pure parts: the join (API records, host calls,
 * lent Python stacks, the wait for late events, graph launches), stacks
 * made root first, the GPU-weighted folded aggregation, the injection
 * library's record conversion and messages (names sent once, again after a
 * lost message; API calls the join does not need left out), the choice of
 * libcupti, and the plumbing (u64 map, interned strings).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "gpu_join.h"
#include "inject.h"
#include "inject_find.h"

/* ---- the join ----------------------------------------------------------------- */

static struct nt_gpu_api api(uint32_t corr, uint32_t tid, uint64_t s, uint64_t e,
			     uint8_t call)
{
	struct nt_gpu_api a = { .start = s, .end = e, .tid = tid, .correlation = corr,
				.cbid = 211, .call = call };
	return a;
}

START_TEST(join_call_and_stacks)
{
	struct gpu_proc *p = gpu_proc_new(100, 1024, 1024);
	struct nt_gpu_api a = api(7, 101, 10000, 12000, NT_GPU_CALL_LAUNCH);
	struct gpu_joined j;

	p->system_tid = true;
	/* the probe's uprobe fires before CUPTI's own entry stamp */
	ck_assert_int_eq(gpu_join_call(p, 101, "main", 9990, NT_GPU_CALL_LAUNCH, 5), 0);
	ck_assert_int_eq(gpu_join_lend(p, 101, NULL, 9990, 6), 0);
	gpu_join_call(p, 101, "main", 12500, NT_GPU_CALL_LAUNCH, 8); /* the next launch */
	gpu_join_api(p, &a);
	ck_assert_int_eq(gpu_join_find(p, 7, 0, false, &j), 0);
	ck_assert_int_eq(j.how, GPU_JOIN_CALL);
	ck_assert_uint_eq(j.tid, 101);
	ck_assert_uint_eq(j.call_ts, 9990);
	ck_assert_uint_eq(j.api_start, 10000);
	ck_assert_uint_eq(j.stack, 5);
	ck_assert_uint_eq(j.py_stack, 6);
	ck_assert_str_eq(j.thr->comm, "main");
	gpu_proc_free(p);
}
END_TEST

START_TEST(join_lend_first)
{
	struct gpu_proc *p = gpu_proc_new(100, 1024, 1024);
	struct nt_gpu_api a = api(3, 101, 500, 900, NT_GPU_CALL_LAUNCH);
	struct gpu_joined j;

	p->system_tid = true;
	/* the python probe's stack may come before the call it belongs to */
	gpu_join_lend(p, 101, NULL, 600, 9);
	gpu_join_call(p, 101, "t", 600, NT_GPU_CALL_LAUNCH, 4);
	gpu_join_api(p, &a);
	ck_assert_int_eq(gpu_join_find(p, 3, 0, true, &j), 0);
	ck_assert_uint_eq(j.stack, 4);
	ck_assert_uint_eq(j.py_stack, 9);
	gpu_proc_free(p);
}
END_TEST

START_TEST(join_waits)
{
	struct gpu_proc *p = gpu_proc_new(100, 1024, 1024);
	struct nt_gpu_api a = api(4, 101, 10000000, 10002000, NT_GPU_CALL_LAUNCH);
	struct gpu_joined j;

	p->system_tid = true;
	/* no API record yet: wait, unless final */
	ck_assert_int_eq(gpu_join_find(p, 4, 0, false, &j), 1);
	ck_assert_int_eq(gpu_join_find(p, 4, 0, true, &j), 0);
	ck_assert_int_eq(j.how, GPU_JOIN_NONE);
	gpu_join_api(p, &a);
	/* the probe never reported a launch of this process: no wait */
	ck_assert_int_eq(gpu_join_find(p, 4, 0, false, &j), 0);
	ck_assert_int_eq(j.how, GPU_JOIN_THREAD);
	ck_assert_uint_eq(j.tid, 101);
	/* it reports launches, the thread's are older than the call: wait */
	gpu_join_call(p, 101, "t", 5000000, NT_GPU_CALL_LAUNCH, 1);
	ck_assert_int_eq(gpu_join_find(p, 4, 0, false, &j), 1);
	/* a later one came: the call's own launch event is not coming */
	gpu_join_call(p, 101, "t", 10002500, NT_GPU_CALL_LAUNCH, 1);
	ck_assert_int_eq(gpu_join_find(p, 4, 0, false, &j), 0);
	ck_assert_int_eq(j.how, GPU_JOIN_THREAD);
	ck_assert_uint_eq(j.call_ts, 0);
	gpu_proc_free(p);
}
END_TEST

START_TEST(join_no_api_records)
{
	struct gpu_proc *p = gpu_proc_new(100, 1024, 1024);
	struct gpu_joined j;

	/* the job sends no API records (api_records = false): nothing to
	 * wait for, the record belongs to the process only */
	p->api_off = true;
	gpu_join_call(p, 101, "t", 5000000, NT_GPU_CALL_LAUNCH, 1);
	ck_assert_int_eq(gpu_join_find(p, 4, 0, false, &j), 0);
	ck_assert_int_eq(j.how, GPU_JOIN_NONE);
	ck_assert_uint_eq(j.tid, 0);
	ck_assert_uint_eq(j.call_ts, 0);
	ck_assert_uint_eq(j.api_start, 0);
	gpu_proc_free(p);
}
END_TEST

START_TEST(join_graph_and_kinds)
{
	struct gpu_proc *p = gpu_proc_new(100, 1024, 1024);
	struct nt_gpu_api g = api(10, 101, 1000, 2000, NT_GPU_CALL_GRAPH);
	struct nt_gpu_api l = api(11, 101, 3000, 4000, NT_GPU_CALL_LAUNCH);
	struct nt_gpu_api c = api(12, 101, 5000, 6000, NT_GPU_CALL_COPY);
	struct gpu_joined j;

	p->system_tid = true;
	gpu_join_call(p, 101, "t", 1100, NT_GPU_CALL_GRAPH, 21);
	gpu_join_call(p, 101, "t", 3100, NT_GPU_CALL_LAUNCH, 22);
	gpu_join_call(p, 101, "t", 5100, NT_GPU_CALL_COPY, 23);
	gpu_join_api(p, &g);
	gpu_join_api(p, &l);
	gpu_join_api(p, &c);
	/* every kernel of a graph shares its launch's correlation */
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(gpu_join_find(p, 10, 0, false, &j), 0);
		ck_assert_uint_eq(j.stack, 21);
		ck_assert_uint_eq(j.call_ts, 1100);
	}
	/* a copy by its runtime correlation when the driver's is unknown */
	ck_assert_int_eq(gpu_join_find(p, 99, 12, false, &j), 0);
	ck_assert_uint_eq(j.stack, 23);
	ck_assert_int_eq(gpu_join_find(p, 11, 0, false, &j), 0);
	ck_assert_uint_eq(j.stack, 22);
	gpu_proc_free(p);
}
END_TEST

START_TEST(join_taken_and_outer)
{
	struct gpu_proc *p = gpu_proc_new(100, 1024, 1024);
	struct nt_gpu_api a = api(1, 101, 1000, 2000, NT_GPU_CALL_LAUNCH);
	struct nt_gpu_api b = api(2, 101, 1000, 2000, NT_GPU_CALL_LAUNCH);
	struct nt_gpu_api inner = api(1, 101, 1200, 1800, NT_GPU_CALL_LAUNCH);
	struct gpu_joined j;

	p->system_tid = true;
	gpu_join_call(p, 101, "t", 1500, NT_GPU_CALL_LAUNCH, 7);
	gpu_join_api(p, &a);
	gpu_join_api(p, &inner); /* a driver call inside the runtime's, same id */
	gpu_join_api(p, &b);
	ck_assert_int_eq(gpu_join_find(p, 1, 0, true, &j), 0);
	ck_assert_uint_eq(j.api_start, 1000); /* the outer call kept */
	ck_assert_int_eq(j.how, GPU_JOIN_CALL);
	/* the launch event is taken: another correlation does not get it */
	ck_assert_int_eq(gpu_join_find(p, 2, 0, true, &j), 0);
	ck_assert_int_eq(j.how, GPU_JOIN_THREAD);
	gpu_proc_free(p);
}
END_TEST

START_TEST(join_preempted_uprobe)
{
	struct gpu_proc *p = gpu_proc_new(100, 1024, 1024);
	struct nt_gpu_api a = api(1, 101, 1000, 2000, NT_GPU_CALL_COPY);
	struct nt_gpu_api b = api(2, 101, 9000000, 9001000, NT_GPU_CALL_COPY);
	struct gpu_joined j;

	p->system_tid = true;
	/* the uprobe of call 2 fired 7 ms before CUPTI's entry stamp (the
	 * thread was preempted in between): still after call 1 ended */
	gpu_join_call(p, 101, "t", 900, NT_GPU_CALL_COPY, 1);
	gpu_join_call(p, 101, "t", 2500, NT_GPU_CALL_COPY, 2);
	gpu_join_api(p, &a);
	gpu_join_api(p, &b);
	ck_assert_int_eq(gpu_join_find(p, 2, 0, false, &j), 0);
	ck_assert_int_eq(j.how, GPU_JOIN_CALL);
	ck_assert_uint_eq(j.call_ts, 2500);
	ck_assert_int_eq(gpu_join_find(p, 1, 0, false, &j), 0);
	ck_assert_uint_eq(j.call_ts, 900);
	gpu_proc_free(p);
}
END_TEST

START_TEST(join_pthread_ids)
{
	struct gpu_proc *p = gpu_proc_new(100, 1024, 1024);
	struct nt_gpu_api a = api(5, 0xdeadbeef, 1000, 2000, NT_GPU_CALL_LAUNCH);
	struct gpu_joined j;

	/* an API threadId that is not a tid: joined by time, any thread */
	gpu_join_call(p, 102, "w", 1500, NT_GPU_CALL_LAUNCH, 3);
	gpu_join_api(p, &a);
	ck_assert_int_eq(gpu_join_find(p, 5, 0, true, &j), 0);
	ck_assert_uint_eq(j.tid, 102);
	ck_assert_uint_eq(j.stack, 3);
	gpu_proc_free(p);
}
END_TEST

START_TEST(join_ring_order_and_bound)
{
	struct gpu_proc *p = gpu_proc_new(100, 1024, 1024);
	struct gpu_thread *t;
	struct gpu_joined j;

	p->system_tid = true;
	/* out of order inserts stay sorted; over max the oldest go */
	for (uint64_t i = 0; i < 3000; i++)
		gpu_join_call(p, 101, "t", 100000 + (i ^ 1) * 10, NT_GPU_CALL_LAUNCH, (uint32_t)i + 1);
	t = gpu_thread_get(p, 101, false);
	ck_assert_uint_eq(t->n, 1024);
	ck_assert_uint_eq(t->newest_ts, 100000 + 2999 * 10);
	for (uint32_t i = 1; i < t->n; i++)
		ck_assert_uint_lt(t->ring[(t->head + i - 1) & (t->cap - 1)].ts,
				  t->ring[(t->head + i) & (t->cap - 1)].ts);
	{
		struct nt_gpu_api a = api(9, 101, 100000 + 2990 * 10, 100000 + 2990 * 10 + 5,
					  NT_GPU_CALL_LAUNCH);

		gpu_join_api(p, &a);
		ck_assert_int_eq(gpu_join_find(p, 9, 0, false, &j), 0);
		ck_assert_uint_eq(j.call_ts, 100000 + 2990 * 10);
		ck_assert_uint_eq(j.stack, (2990 ^ 1) + 1);
	}
	gpu_proc_free(p);
}
END_TEST

START_TEST(join_api_ring_wraps)
{
	struct gpu_proc *p = gpu_proc_new(100, 1024, 1024);
	struct gpu_joined j;

	p->system_tid = true;
	for (uint32_t c = 1; c <= 3000; c++) {
		struct nt_gpu_api a = api(c, 101, c * 10, c * 10 + 5, NT_GPU_CALL_LAUNCH);

		gpu_join_api(p, &a);
	}
	ck_assert_int_eq(gpu_join_find(p, 5, 0, false, &j), 1); /* forgotten */
	ck_assert_int_eq(gpu_join_find(p, 2999, 0, false, &j), 0);
	ck_assert_uint_eq(j.api_start, 29990);
	ck_assert_uint_le(nt_hmap_count(&p->api_at.h), 1024);
	gpu_proc_free(p);
}
END_TEST

START_TEST(stacks_root_first)
{
	struct nt_sb b;
	const char *in = "cuLaunchKernel;launch;cudaLaunchKernel;fwd;main";

	nt_sb_init(&b, 0);

	gpu_stack_root_first(in, strlen(in), "cuLaunchKernel", &b);
	ck_assert_str_eq(b.buf, "main;fwd;cudaLaunchKernel;launch;cuLaunchKernel");
	/* already root first: unchanged */
	in = "main;fwd;cudaLaunchKernel;launch;cuLaunchKernel";
	gpu_stack_root_first(in, strlen(in), "cuLaunchKernel", &b);
	ck_assert_str_eq(b.buf, "main;fwd;cudaLaunchKernel;launch;cuLaunchKernel");
	in = "cuLaunchKernel+0x12;libx.so+0x40;main";
	gpu_stack_root_first(in, strlen(in), "cuLaunchKernel", &b);
	ck_assert_str_eq(b.buf, "main;libx.so+0x40;cuLaunchKernel+0x12");
	in = "cuLaunchKernelEx;main";
	gpu_stack_root_first(in, strlen(in), "cuLaunchKernel", &b);
	ck_assert_str_eq(b.buf, "cuLaunchKernelEx;main"); /* not the probed function */
	nt_sb_fini(&b);
}
END_TEST

/* ---- folded -------------------------------------------------------------------- */

struct emitted {
	uint32_t tid, base, name;
	uint64_t us, ns, n;
	char comm[16];
};

static void collect(void *arg, uint32_t pid, uint32_t tid, const char *comm,
		    uint32_t base, uint32_t name, uint64_t us, uint64_t ns, uint64_t n)
{
	struct emitted *e = arg;

	(void)pid;
	while (e->n)
		e++;
	*e = (struct emitted){ tid, base, name, us, ns, n, "" };
	snprintf(e->comm, sizeof(e->comm), "%s", comm);
}

START_TEST(folded_deltas)
{
	struct gpu_folded *f = gpu_folded_new(3);
	struct emitted out[8];

	gpu_folded_add(f, 1, 11, "a", 5, 6, 1500);
	gpu_folded_add(f, 1, 11, "a", 5, 6, 1600);
	gpu_folded_add(f, 1, 11, "a", 5, 7, 999);
	gpu_folded_add(f, 2, 21, "b", 5, 6, 4000);
	memset(out, 0, sizeof(out));
	gpu_folded_emit(f, 1, collect, out);
	ck_assert_uint_eq(out[0].us, 3); /* 3100 ns: 3 us so far */
	ck_assert_uint_eq(out[0].ns, 3100);
	ck_assert_uint_eq(out[0].n, 2);
	ck_assert_str_eq(out[0].comm, "a");
	ck_assert_uint_eq(out[1].us, 0);
	ck_assert_uint_eq(out[1].ns, 999);
	ck_assert_uint_eq(out[2].n, 0); /* pid 2 not emitted */
	gpu_folded_add(f, 1, 11, "a", 5, 6, 900);
	memset(out, 0, sizeof(out));
	gpu_folded_emit(f, 1, collect, out);
	ck_assert_uint_eq(out[0].us, 1); /* 4000 ns in all: 4 us, 3 sent before */
	ck_assert_uint_eq(out[0].ns, 900);
	ck_assert_uint_eq(out[1].n, 0);
	/* full (3 entries): the fourth key goes to pid's [other stacks] */
	gpu_folded_forget(f, 2);
	gpu_folded_add(f, 1, 12, "c", 8, 9, 2000);
	gpu_folded_add(f, 1, 13, "d", 8, 9, 3000);
	memset(out, 0, sizeof(out));
	gpu_folded_emit(f, 0, collect, out);
	ck_assert_uint_eq(out[0].tid, 12);
	ck_assert_uint_eq(out[1].tid, 0);
	ck_assert_uint_eq(out[1].base, 0);
	ck_assert_uint_eq(out[1].ns, 0); /* no room for the catch-all either */
	gpu_folded_free(f);
}
END_TEST

/* ---- the injection library's messages -------------------------------------------- */

struct sent {
	uint8_t msgs[16][NT_GPU_MSG_MAX];
	size_t len[16];
	int n;
	int fail_next;
};

static int fake_send(void *arg, const void *buf, size_t len)
{
	struct sent *s = arg;

	if (s->fail_next) {
		s->fail_next--;
		return -1;
	}
	ck_assert_int_lt(s->n, 16);
	memcpy(s->msgs[s->n], buf, len);
	s->len[s->n++] = len;
	return 0;
}

/* Records of a message by type; checks the framing. */
static int count_type(const struct sent *s, int m, uint16_t type)
{
	const struct nt_gpu_msg *h = (const void *)s->msgs[m];
	size_t off = sizeof(*h);
	int n = 0;

	ck_assert_uint_eq(h->magic, NT_GPU_MAGIC);
	ck_assert_uint_eq(h->size, s->len[m]);
	while (off < s->len[m]) {
		const struct nt_gpu_rec *r = (const void *)(s->msgs[m] + off);

		ck_assert_uint_eq(r->size % 8, 0);
		ck_assert_uint_ge(r->size, sizeof(*r));
		n += r->type == type;
		off += r->size;
	}
	ck_assert_uint_eq(off, s->len[m]);
	return n;
}

static const struct nt_gpu_rec *first_of(const struct sent *s, int m, uint16_t type)
{
	size_t off = sizeof(struct nt_gpu_msg);

	while (off < s->len[m]) {
		const struct nt_gpu_rec *r = (const void *)(s->msgs[m] + off);

		if (r->type == type)
			return r;
		off += r->size;
	}
	return NULL;
}

START_TEST(inject_records_and_names)
{
	static struct sent s;
	struct inj_out o;
	struct nt_cupti_kernel k = { .kind = NT_CUPTI_KIND_CONCURRENT_KERNEL, .start = 100,
				     .end = 250, .deviceId = 1, .contextId = 2, .streamId = 7,
				     .gridX = 30, .gridY = 1, .gridZ = 1, .blockX = 256,
				     .blockY = 1, .blockZ = 1, .staticSharedMemory = 16,
				     .dynamicSharedMemory = 1024, .correlationId = 42,
				     .registersPerThread = 32, .name = "_Z8bwd_gemmPfi" };
	struct nt_cupti_api a = { .kind = NT_CUPTI_KIND_RUNTIME, .cbid = 211, .start = 90,
				  .end = 95, .threadId = 555, .correlationId = 42 };
	struct nt_cupti_api other = { .kind = NT_CUPTI_KIND_DRIVER, .cbid = 1 /* cuInit */ };
	struct nt_cupti_activity odd = { .kind = 6 /* CUPTI_ACTIVITY_KIND_EVENT */ };
	const struct nt_gpu_kernel *wk;
	const struct nt_gpu_api *wa;
	const struct nt_gpu_name *wn;

	memset(&s, 0, sizeof(s));
	inj_out_init(&o);
	o.send = fake_send;
	o.send_arg = &s;
	inj_out_record(&o, (const struct nt_cupti_activity *)&a);
	inj_out_record(&o, (const struct nt_cupti_activity *)&other);
	inj_out_record(&o, &odd);
	inj_out_record(&o, (const struct nt_cupti_activity *)&k);
	inj_out_record(&o, (const struct nt_cupti_activity *)&k);
	inj_out_flush(&o);
	ck_assert_int_eq(s.n, 1);
	ck_assert_int_eq(count_type(&s, 0, NT_GPU_R_API), 1); /* cuInit left out */
	ck_assert_int_eq(count_type(&s, 0, NT_GPU_R_KERNEL), 2);
	ck_assert_int_eq(count_type(&s, 0, NT_GPU_R_NAME), 1); /* once */
	ck_assert_uint_eq(o.unknown_records, 1);
	wa = (const void *)first_of(&s, 0, NT_GPU_R_API);
	ck_assert_uint_eq(wa->tid, 555);
	ck_assert_uint_eq(wa->correlation, 42);
	ck_assert_uint_eq(wa->call, NT_GPU_CALL_LAUNCH);
	ck_assert_uint_eq(wa->driver, 0);
	wk = (const void *)first_of(&s, 0, NT_GPU_R_KERNEL);
	ck_assert_uint_eq(wk->start, 100);
	ck_assert_uint_eq(wk->end, 250);
	ck_assert_uint_eq(wk->device, 1);
	ck_assert_uint_eq(wk->stream, 7);
	ck_assert_int_eq(wk->grid[0], 30);
	ck_assert_int_eq(wk->block[0], 256);
	ck_assert_int_eq(wk->static_shared + wk->dynamic_shared, 1040);
	ck_assert_uint_eq(wk->registers, 32);
	wn = (const void *)first_of(&s, 0, NT_GPU_R_NAME);
	ck_assert_uint_eq(wn->id, wk->name_id);
	ck_assert_uint_eq(wn->len, 14);
	ck_assert_int_eq(memcmp(wn + 1, "_Z8bwd_gemmPfi", 14), 0);
	/* a lost message: its names are defined again in the next one */
	s.fail_next = 1;
	k.name = "second_kernel";
	inj_out_record(&o, (const struct nt_cupti_activity *)&k);
	inj_out_flush(&o);
	ck_assert_uint_eq(o.send_dropped, 1);
	inj_out_record(&o, (const struct nt_cupti_activity *)&k);
	k.name = "_Z8bwd_gemmPfi";
	inj_out_record(&o, (const struct nt_cupti_activity *)&k);
	inj_out_flush(&o);
	ck_assert_int_eq(s.n, 2);
	ck_assert_int_eq(count_type(&s, 1, NT_GPU_R_NAME), 1); /* second_kernel only */
	ck_assert_int_eq(count_type(&s, 1, NT_GPU_R_KERNEL), 2);
	inj_out_fini(&o);
}
END_TEST

START_TEST(inject_messages_split)
{
	static struct sent s;
	struct inj_out o;
	struct nt_cupti_memcpy c = { .kind = NT_CUPTI_KIND_MEMCPY, .copyKind = 1,
				     .bytes = 1000, .start = 1, .end = 2,
				     .correlationId = 3, .runtimeCorrelationId = 4 };
	int total = 0;

	memset(&s, 0, sizeof(s));
	inj_out_init(&o);
	o.send = fake_send;
	o.send_arg = &s;
	for (int i = 0; i < 1000; i++) /* 56 bytes each: two messages */
		inj_out_record(&o, (const struct nt_cupti_activity *)&c);
	inj_out_flush(&o);
	ck_assert_int_eq(s.n, 2);
	for (int m = 0; m < s.n; m++) {
		ck_assert_uint_le(s.len[m], NT_GPU_MSG_MAX);
		total += count_type(&s, m, NT_GPU_R_MEMCPY);
	}
	ck_assert_int_eq(total, 1000);
	ck_assert_uint_eq(((const struct nt_gpu_memcpy *)first_of(&s, 0, NT_GPU_R_MEMCPY))
				  ->runtime_correlation, 4);
	inj_out_fini(&o);
}
END_TEST

/* ---- which libcupti -------------------------------------------------------------- */

struct fs {
	const char *files[8];
};

static bool fs_has(void *arg, const char *path)
{
	const struct fs *f = arg;

	for (int i = 0; i < 8 && f->files[i]; i++)
		if (!strcmp(f->files[i], path))
			return true;
	return false;
}

/* a glob with one '*': the made-up files that match it */
static size_t fs_glob(void *arg, const char *pattern, char out[][512], size_t max)
{
	const struct fs *f = arg;
	const char *star = strchr(pattern, '*');
	size_t n = 0;

	for (int i = 0; i < 8 && f->files[i] && n < max; i++) {
		const char *p = f->files[i];
		size_t pre = star ? (size_t)(star - pattern) : strlen(pattern);
		const char *suf = star ? star + 1 : "";

		if (!strncmp(p, pattern, pre) && strlen(p) >= pre + strlen(suf) &&
		    !strcmp(p + strlen(p) - strlen(suf), suf) && (star || !strcmp(p, pattern)))
			snprintf(out[n++], 512, "%s", p);
	}
	return n;
}

static int find(const char *const *loaded, size_t n, const char *override, int drv,
		struct fs *fs, char *out, bool *bare, char *why)
{
	struct nt_cupti_where w = { loaded, n, override, drv, "x86_64", fs_has, fs_glob, fs };

	return nt_cupti_find(&w, out, 512, bare, why, 512);
}

START_TEST(find_cupti)
{
	const char *venv = "/v/lib/python3.12/site-packages/nvidia/cu13/lib";
	const char *loaded[] = { "/usr/lib/libc.so.6",
				 "/v/lib/python3.12/site-packages/triton/backends/nvidia/lib/cupti/libcupti.so.12",
				 "/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcudart.so.13",
				 "/v/lib/python3.12/site-packages/torchvision.libs/libcudart.faf08d9a.so.13" };
	struct fs fs = { { "/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13",
			   "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13" } };
	char out[512], why[512];
	bool bare;

	(void)venv;
	/* the venv's, next to the runtime; Triton's CUPTI 12 is never taken */
	ck_assert_int_eq(find(loaded, 4, NULL, 0, &fs, out, &bare, why), 0);
	ck_assert_str_eq(out, "/v/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13");
	ck_assert(!bare);
	/* without it: the toolkit's of the same major */
	fs.files[0] = "/nothing";
	ck_assert_int_eq(find(loaded, 4, NULL, 0, &fs, out, &bare, why), 0);
	ck_assert_str_eq(out, "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcupti.so.13");
	/* an override of another major is refused with a reason */
	ck_assert_int_eq(find(loaded, 4, "/x/libcupti.so.12", 0, &fs, out, &bare, why), -1);
	ck_assert_ptr_nonnull(strstr(why, "is CUPTI 12, the job's CUDA is 13"));
	/* nothing anywhere: the bare soname, with the reason if that fails too */
	fs.files[1] = NULL;
	ck_assert_int_eq(find(loaded, 4, NULL, 0, &fs, out, &bare, why), 0);
	ck_assert(bare);
	ck_assert_str_eq(out, "libcupti.so.13");
	ck_assert_ptr_nonnull(strstr(why, "no libcupti.so.13 for CUDA 13"));
}
END_TEST

START_TEST(find_cupti_layouts)
{
	const char *cu12[] = { "/v/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12" };
	const char *loaded13[] = { "/opt/x/libcudart.so.13", "/opt/k/libcupti.so.13.0.1" };
	const char *nort[] = { "/usr/lib/libcuda.so.1" };
	struct fs fs = { { "/v/site-packages/nvidia/cuda_runtime/lib/../../cuda_cupti/lib/libcupti.so.12" } };
	char out[512], why[512];
	bool bare;

	ck_assert_int_eq(find(cu12, 1, NULL, 0, &fs, out, &bare, why), 0);
	ck_assert_str_eq(out, "/v/site-packages/nvidia/cuda_runtime/lib/../../cuda_cupti/lib/libcupti.so.12");
	/* one already loaded (kineto): that one, whatever else exists */
	ck_assert_int_eq(find(loaded13, 2, "/else/libcupti.so.13", 0, &fs, out, &bare, why), 0);
	ck_assert_str_eq(out, "/opt/k/libcupti.so.13.0.1");
	/* no runtime: the driver's major */
	ck_assert_int_eq(find(nort, 1, NULL, 13, &fs, out, &bare, why), 0);
	ck_assert_str_eq(out, "libcupti.so.13");
	ck_assert_int_eq(find(nort, 1, NULL, 0, &fs, out, &bare, why), -1);
	ck_assert_ptr_nonnull(strstr(why, "cannot tell the job's CUDA version"));
}
END_TEST

/* ---- plumbing --------------------------------------------------------------------- */

START_TEST(map_against_reference)
{
	static uint64_t ref[4096];
	static bool in[4096];
	struct gpu_map m = { 0 };
	uint32_t seed = 1;

	for (int i = 0; i < 200000; i++) {
		uint32_t k;
		uint64_t v;

		seed = seed * 1103515245 + 12345;
		k = (seed >> 8) % 4096;
		if ((seed >> 4) % 3 == 0) {
			ck_assert_int_eq(gpu_map_del(&m, k), in[k]);
			in[k] = false;
		} else {
			gpu_map_put(&m, k, (uint64_t)i);
			ref[k] = (uint64_t)i;
			in[k] = true;
		}
		k = (seed >> 16) % 4096;
		ck_assert_int_eq(gpu_map_get(&m, k, &v), in[k]);
		if (in[k])
			ck_assert_uint_eq(v, ref[k]);
	}
	gpu_map_free(&m);
}
END_TEST

START_TEST(strtab)
{
	struct gpu_strtab t;
	uint32_t a, b, len;

	gpu_strtab_init(&t, 64);
	a = gpu_str_intern(&t, "main;fwd", 8);
	b = gpu_str_intern(&t, "main;bwd", 8);
	ck_assert_uint_ne(a, b);
	ck_assert_uint_eq(gpu_str_intern(&t, "main;fwd", 8), a);
	ck_assert_str_eq(gpu_str(&t, b, &len), "main;bwd");
	ck_assert_uint_eq(len, 8);
	ck_assert_str_eq(gpu_str(&t, 0, &len), "");
	/* over max_bytes: refused, counted */
	ck_assert_uint_eq(gpu_str_intern(&t, "0123456789012345678901234567890123456789012345678901234567890",
					 61), 0);
	ck_assert_uint_eq(t.refused, 1);
	gpu_strtab_free(&t);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cuda_gpu");
	TCase *tc = tcase_create("all");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, join_call_and_stacks);
	tcase_add_test(tc, join_lend_first);
	tcase_add_test(tc, join_waits);
	tcase_add_test(tc, join_no_api_records);
	tcase_add_test(tc, join_graph_and_kinds);
	tcase_add_test(tc, join_taken_and_outer);
	tcase_add_test(tc, join_preempted_uprobe);
	tcase_add_test(tc, join_pthread_ids);
	tcase_add_test(tc, join_ring_order_and_bound);
	tcase_add_test(tc, join_api_ring_wraps);
	tcase_add_test(tc, stacks_root_first);
	tcase_add_test(tc, folded_deltas);
	tcase_add_test(tc, inject_records_and_names);
	tcase_add_test(tc, inject_messages_split);
	tcase_add_test(tc, find_cupti);
	tcase_add_test(tc, find_cupti_layouts);
	tcase_add_test(tc, map_against_reference);
	tcase_add_test(tc, strtab);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
