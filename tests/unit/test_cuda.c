/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the cuda probe's pure parts: raw record decoding (cuda_decode.c),
 * the allocation map, copy directions, kernel names, stacks, error names,
 * ELF lookup on the fixture libraries (cuda_lib.c) and maps parsing.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../plugins/cuda/cuda_decode.h"
#include "../../plugins/cuda/cuda_lib.h"

#ifndef FIXTURE_DIR
#define FIXTURE_DIR "."
#endif

static struct nt_cuda_state st;
static struct nt_cuda_rec out[2];

/* Fake symbolizer: 0x1000.. "vector_add(float*, int)", 0x2000.. "train_step",
 * 0x3000.. module only, 0x4000 "a;b", else nothing. */
static int fake_sym(void *arg, uint32_t pid, uint64_t addr, struct nt_symbol *s)
{
	(void)arg;
	(void)pid;
	memset(s, 0, sizeof(*s));
	if (addr >= 0x1000 && addr < 0x1100) {
		s->name = "vector_add(float*, int)";
		s->offset = addr - 0x1000;
		s->module = "/w/cuda_workload";
		return 0;
	}
	if (addr >= 0x2000 && addr < 0x2100) {
		s->name = "train_step";
		s->offset = addr - 0x2000;
		s->module = "/w/cuda_workload";
		return 0;
	}
	if (addr >= 0x3000 && addr < 0x3100) {
		s->module = "/usr/lib/libfoo.so.1";
		s->offset = addr - 0x3000 + 0x500;
		return 0;
	}
	if (addr == 0x4000) {
		s->name = "a;b";
		s->module = "/w/cuda_workload";
		return 0;
	}
	if (addr >= 0x5000 && addr < 0x5100) { /* the loader, no symbol */
		s->module = "/lib64/ld-linux-x86-64.so.2";
		s->offset = addr - 0x5000 + 0x1c000;
		return -ENOENT;
	}
	return -ENOENT;
}

static void setup(void)
{
	nt_cuda_state_init(&st, fake_sym, NULL);
	for (int i = 0; i < NT_CUDA_EVT_N; i++)
		st.type_ids[i] = 100 + (uint32_t)i;
}

static void teardown(void)
{
	nt_cuda_state_fini(&st);
}

static struct nt_cuda_raw_call call(unsigned api, uint64_t ret, uint64_t a0,
				    uint64_t a1, uint64_t a2, uint64_t a3,
				    uint64_t a4)
{
	struct nt_cuda_raw_call rc;

	memset(&rc, 0, sizeof(rc));
	rc.hdr.type = NT_CUDA_RAW_CALL;
	rc.hdr.pid = 42;
	rc.hdr.tid = 43;
	rc.hdr.ts_ns = 1000;
	memcpy(rc.hdr.comm, "work", 5);
	rc.api = (uint16_t)api;
	rc.layer = (uint8_t)nt_cuda_api_layer(api);
	rc.flags = NT_CUDA_F_RET;
	rc.ret = ret;
	rc.device = 0;
	rc.cgroup_id = 777;
	rc.duration_ns = 5000;
	rc.arg[0] = a0;
	rc.arg[1] = a1;
	rc.arg[2] = a2;
	rc.arg[3] = a3;
	rc.arg[4] = a4;
	return rc;
}

static int decode(struct nt_cuda_raw_call *rc)
{
	return nt_cuda_decode_call(&st, rc,
				   NT_CUDA_RAW_CALL_FIXED + rc->nframes * 8u, out);
}

static const char *vstr(const struct nt_cuda_rec *r, struct nt_vstr v)
{
	static char buf[4][4096];
	static int k;

	k = (k + 1) & 3;
	return nt_cuda_vstr(&r->u.hdr, v, buf[k], sizeof(buf[k]));
}

/* ------------------------------------------------------------------ */

START_TEST(test_specs)
{
	struct nt_cuda_spec s;

	ck_assert(nt_cuda_spec_for(NT_CUDA_API_cudaMalloc, &s));
	ck_assert_int_eq(s.family, NT_CUDA_FAM_ALLOC);
	ck_assert_int_eq(s.layer, NT_CUDA_LAYER_RUNTIME);
	ck_assert_int_eq(s.out_arg, 1);
	ck_assert(nt_cuda_spec_for(NT_CUDA_API_cudaMallocPitch, &s));
	ck_assert_int_eq(s.out2_arg, 2);
	ck_assert(nt_cuda_spec_for(NT_CUDA_API_cudaMemcpy2DAsync, &s));
	ck_assert_int_eq(s.nstack, 2);
	ck_assert(!(s.flags & NT_CUDA_SPEC_ENTER_EV)); /* async: returns at once */
	ck_assert(nt_cuda_spec_for(NT_CUDA_API_cudaMemsetAsync, &s));
	ck_assert(!(s.flags & NT_CUDA_SPEC_ENTER_EV));
	ck_assert(nt_cuda_spec_for(NT_CUDA_API_cudaMemcpy, &s));
	ck_assert(s.flags & NT_CUDA_SPEC_ENTER_EV); /* may block */
	ck_assert(nt_cuda_spec_for(NT_CUDA_API_cuMemsetD8_v2, &s));
	ck_assert(s.flags & NT_CUDA_SPEC_ENTER_EV);
	ck_assert(nt_cuda_spec_for(NT_CUDA_API_cuStreamSynchronize, &s));
	ck_assert(s.flags & NT_CUDA_SPEC_ENTER_EV);
	ck_assert_int_eq(s.layer, NT_CUDA_LAYER_DRIVER);
	ck_assert(nt_cuda_spec_for(NT_CUDA_API_cuDevicePrimaryCtxRetain, &s));
	ck_assert_int_eq(s.out_arg, 1);
	ck_assert(!nt_cuda_spec_for(NT_CUDA_API_NONE, &s));
	ck_assert(!nt_cuda_spec_for(NT_CUDA_API_COUNT, &s));
	ck_assert_str_eq(nt_cuda_api_name(NT_CUDA_API_cuMemAlloc_v2), "cuMemAlloc_v2");
	ck_assert_str_eq(nt_cuda_api_name(9999), "");
}
END_TEST

START_TEST(test_alloc_free)
{
	struct nt_cuda_raw_call rc;
	const struct nt_cuda_alloc *a = (const void *)out[0].u.bytes;
	const struct nt_cuda_free *f = (const void *)out[0].u.bytes;
	struct nt_cuda_proc *p;

	rc = call(NT_CUDA_API_cudaMalloc, 0, 0x7ffd0000, 1048576, 0, 0, 0);
	rc.out[0] = 0x7f0000000000ull;
	rc.nframes = 2;
	rc.ips[0] = 0x1005;
	rc.ips[1] = 0x2010;
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(a->hdr.type, 100 + NT_CUDA_EVT_ALLOC);
	ck_assert_uint_eq(a->hdr.pid, 42);
	ck_assert_uint_eq(a->hdr.tid, 43);
	ck_assert_uint_eq(a->cgroup_id, 777);
	ck_assert_uint_eq(a->ptr, 0x7f0000000000ull);
	ck_assert_uint_eq(a->size, 1048576);
	ck_assert_uint_eq(a->kind, NT_CUDA_MEM_DEVICE);
	ck_assert_uint_eq(a->outstanding_bytes, 1048576);
	ck_assert_uint_ne(a->stack_id, 0);
	ck_assert_str_eq(vstr(&out[0], a->api_name), "cudaMalloc");
	ck_assert_str_eq(vstr(&out[0], a->stack), "train_step;vector_add(float*, int)");
	ck_assert_uint_eq(a->hdr.size, a->stack.off + a->stack.len);

	rc = call(NT_CUDA_API_cuMemAlloc_v2, 0, 0x7ffd0000, 4096, 0, 0, 0);
	rc.out[0] = 0x7f0000200000ull;
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(a->outstanding_bytes, 1048576 + 4096);
	ck_assert_uint_eq(a->layer, NT_CUDA_LAYER_DRIVER);

	rc = call(NT_CUDA_API_cudaMallocHost, 0, 0x7ffd0000, 512, 0, 0, 0);
	rc.out[0] = 0x55550000;
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(a->kind, NT_CUDA_MEM_HOST);
	ck_assert_uint_eq(a->outstanding_bytes, 512);

	p = nt_cuda_proc_find(&st, 42);
	ck_assert_ptr_nonnull(p);
	ck_assert_uint_eq(p->nblocks, 3);
	ck_assert_uint_eq(p->device_bytes_now, 1048576 + 4096);
	ck_assert_ptr_nonnull(nt_cuda_block_at(p, 0x7f0000000000ull + 100));
	ck_assert_ptr_null(nt_cuda_block_at(p, 0x7f0000000000ull + 1048576));

	rc = call(NT_CUDA_API_cudaFree, 0, 0x7f0000000000ull, 0, 0, 0, 0);
	rc.hdr.ts_ns = 9000;
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(f->hdr.type, 100 + NT_CUDA_EVT_FREE);
	ck_assert_uint_eq(f->size, 1048576);
	ck_assert_uint_eq(f->alloc_ts_ns, 1000);
	ck_assert_uint_eq(f->kind, NT_CUDA_MEM_DEVICE);
	ck_assert_uint_eq(f->outstanding_bytes, 4096);
	ck_assert_uint_eq(p->tot.free_bytes, 1048576);

	/* cudaFree(NULL): no event */
	rc = call(NT_CUDA_API_cudaFree, 0, 0, 0, 0, 0, 0);
	ck_assert_int_eq(decode(&rc), 0);

	/* a pointer the probe never saw allocated: size 0 */
	rc = call(NT_CUDA_API_cudaFree, 0, 0x1234, 0, 0, 0, 0);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(f->size, 0);
}
END_TEST

START_TEST(test_failed_alloc_error)
{
	struct nt_cuda_raw_call rc;
	const struct nt_cuda_alloc *a = (const void *)out[0].u.bytes;
	const struct nt_cuda_error *e = (const void *)out[1].u.bytes;

	rc = call(NT_CUDA_API_cudaMalloc, 2, 0x7ffd0000, 1ull << 40, 0, 0, 0);
	rc.out[0] = 0xdeadbeef; /* garbage left in *devPtr */
	ck_assert_int_eq(decode(&rc), 2);
	ck_assert_uint_eq(a->ptr, 0);
	ck_assert_int_eq(a->ret, 2);
	ck_assert_uint_eq(a->size, 1ull << 40);
	ck_assert_uint_eq(e->hdr.type, 100 + NT_CUDA_EVT_ERROR);
	ck_assert_int_eq(e->ret, 2);
	ck_assert_uint_eq(e->size, 1ull << 40);
	ck_assert_str_eq(vstr(&out[1], e->api_name), "cudaMalloc");
	ck_assert_str_eq(vstr(&out[1], e->error_name), "cudaErrorMemoryAllocation");
	ck_assert_uint_eq(nt_cuda_proc_find(&st, 42)->nblocks, 0);

	/* driver error names */
	rc = call(NT_CUDA_API_cuModuleGetFunction, 500, 0x7ffd0000, 0xa000, 0, 0, 0);
	ck_assert_int_eq(decode(&rc), 1);
	e = (const void *)out[0].u.bytes;
	ck_assert_str_eq(vstr(&out[0], e->error_name), "CUDA_ERROR_NOT_FOUND");
	ck_assert_str_eq(vstr(&out[0], e->api_name), "cuModuleGetFunction");

	/* unknown code */
	rc = call(NT_CUDA_API_cudaSetDevice, 99999, 9, 0, 0, 0, 0);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_str_eq(vstr(&out[0], e->error_name), "cudaError(99999)");

	/* a call whose return was not measured is no error */
	rc = call(NT_CUDA_API_cudaSetDevice, 3, 9, 0, 0, 0, 0);
	rc.flags = 0;
	ck_assert_int_eq(decode(&rc), 0);
}
END_TEST

START_TEST(test_error_names)
{
	char buf[32];

	ck_assert_str_eq(nt_cuda_error_name(NT_CUDA_LAYER_RUNTIME, 0), "cudaSuccess");
	ck_assert_str_eq(nt_cuda_error_name(NT_CUDA_LAYER_RUNTIME, 35), "cudaErrorInsufficientDriver");
	ck_assert_str_eq(nt_cuda_error_name(NT_CUDA_LAYER_RUNTIME, 100), "cudaErrorNoDevice");
	ck_assert_str_eq(nt_cuda_error_name(NT_CUDA_LAYER_DRIVER, 2), "CUDA_ERROR_OUT_OF_MEMORY");
	ck_assert_str_eq(nt_cuda_error_name(NT_CUDA_LAYER_DRIVER, 100), "CUDA_ERROR_NO_DEVICE");
	ck_assert_ptr_null(nt_cuda_error_name(NT_CUDA_LAYER_DRIVER, 123456));
	ck_assert_str_eq(nt_cuda_error_format(NT_CUDA_LAYER_DRIVER, 123456, buf, sizeof(buf)),
			 "CUresult(123456)");
}
END_TEST

START_TEST(test_memcpy_directions)
{
	struct nt_cuda_raw_call rc;
	const struct nt_cuda_memcpy *m = (const void *)out[0].u.bytes;
	struct nt_cuda_proc *p;

	rc = call(NT_CUDA_API_cudaMalloc, 0, 0x7ffd0000, 65536, 0, 0, 0);
	rc.out[0] = 0x7f1000000000ull;
	ck_assert_int_eq(decode(&rc), 1);
	rc = call(NT_CUDA_API_cudaMallocHost, 0, 0x7ffd0000, 65536, 0, 0, 0);
	rc.out[0] = 0x500000;
	ck_assert_int_eq(decode(&rc), 1);

	rc = call(NT_CUDA_API_cudaMemcpy, 0, 0x7f1000000000ull, 0x500000, 4096, 1, 0);
	rc.duration_ns = 1000;
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(m->hdr.type, 100 + NT_CUDA_EVT_MEMCPY);
	ck_assert_uint_eq(m->direction, NT_CUDA_DIR_H2D);
	ck_assert_uint_eq(m->bytes, 4096);
	ck_assert(!(m->flags & NT_CUDA_F_ASYNC));

	/* cudaMemcpyDefault: classified by the allocation map */
	rc = call(NT_CUDA_API_cudaMemcpy, 0, 0x500000, 0x7f1000000000ull + 100, 10, 4, 0);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(m->direction, NT_CUDA_DIR_D2H);
	rc = call(NT_CUDA_API_cudaMemcpyAsync, 0, 0x7f1000000000ull, 0x7f1000000000ull + 8192, 10, 4, 0x77);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(m->direction, NT_CUDA_DIR_D2D);
	ck_assert_uint_eq(m->stream, 0x77);
	ck_assert(m->flags & NT_CUDA_F_ASYNC);
	rc = call(NT_CUDA_API_cuMemcpy, 0, 0x900000, 0x500000, 10, 0, 0);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(m->direction, NT_CUDA_DIR_H2H);

	/* driver explicit directions */
	rc = call(NT_CUDA_API_cuMemcpyDtoH_v2, 0, 0x500000, 0x7f1000000000ull, 2048, 0, 0);
	rc.duration_ns = 1000;
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(m->direction, NT_CUDA_DIR_D2H);
	ck_assert_uint_eq(m->bytes, 2048);
	rc = call(NT_CUDA_API_cuMemcpyHtoDAsync_v2, 0, 0x7f1000000000ull, 0x500000, 64, 0x99, 0);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(m->direction, NT_CUDA_DIR_H2D);
	ck_assert_uint_eq(m->stream, 0x99);

	/* 2D: kind and stream on the stack */
	rc = call(NT_CUDA_API_cudaMemcpy2DAsync, 0, 0x7f1000000000ull, 512, 0x500000, 512, 100);
	rc.arg[5] = 30;
	rc.sarg[0] = 1;
	rc.sarg[1] = 0x55;
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(m->bytes, 3000);
	ck_assert_uint_eq(m->direction, NT_CUDA_DIR_H2D);
	ck_assert_uint_eq(m->stream, 0x55);

	/* peer */
	rc = call(NT_CUDA_API_cudaMemcpyPeer, 0, 0x7f1000000000ull, 1, 0x7f2000000000ull, 0, 777);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(m->direction, NT_CUDA_DIR_P2P);
	ck_assert_int_eq(m->device, 1);
	ck_assert_int_eq(m->src_device, 0);
	ck_assert_uint_eq(m->bytes, 777);

	p = nt_cuda_proc_find(&st, 42);
	ck_assert_uint_eq(p->tot.copies[NT_CUDA_DIR_H2D], 3);
	ck_assert_uint_eq(p->tot.copy_bytes[NT_CUDA_DIR_H2D], 4096 + 64 + 3000);
	ck_assert_uint_eq(p->tot.sync_copy_bytes[NT_CUDA_DIR_H2D], 4096);
	ck_assert_uint_eq(p->tot.sync_copy_ns[NT_CUDA_DIR_D2H], 1000 + 5000);
	ck_assert_uint_eq(p->tot.copy_bytes[NT_CUDA_DIR_D2H], 10 + 2048);
}
END_TEST

START_TEST(test_memset_sync_graph_enter)
{
	struct nt_cuda_raw_call rc;
	const struct nt_cuda_memset *ms = (const void *)out[0].u.bytes;
	const struct nt_cuda_sync *s = (const void *)out[0].u.bytes;
	const struct nt_cuda_graph_launch *g = (const void *)out[0].u.bytes;
	const struct nt_cuda_enter *e = (const void *)out[0].u.bytes;

	rc = call(NT_CUDA_API_cuMemsetD32Async, 0, 0x7f00, 7, 100, 0x33, 0);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(ms->bytes, 400);
	ck_assert_uint_eq(ms->value, 7);
	ck_assert_uint_eq(ms->stream, 0x33);

	rc = call(NT_CUDA_API_cudaStreamSynchronize, 0, 0x44, 0, 0, 0, 0);
	rc.duration_ns = 2000000;
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(s->hdr.type, 100 + NT_CUDA_EVT_SYNC);
	ck_assert_uint_eq(s->sync_kind, NT_CUDA_SYNC_STREAM);
	ck_assert_uint_eq(s->handle, 0x44);
	ck_assert_uint_eq(s->duration_ns, 2000000);
	rc = call(NT_CUDA_API_cuCtxSynchronize, 0, 0, 0, 0, 0, 0);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(s->sync_kind, NT_CUDA_SYNC_DEVICE);
	ck_assert_uint_eq(nt_cuda_proc_find(&st, 42)->tot.syncs, 2);

	rc = call(NT_CUDA_API_cudaGraphLaunch_ptsz, 0, 0xabc, 0x44, 0, 0, 0);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(g->graph_exec, 0xabc);
	ck_assert(g->flags & NT_CUDA_F_PTSZ);

	rc = call(NT_CUDA_API_cudaMemcpy, 0, 1, 2, 12345, 1, 0);
	rc.hdr.type = NT_CUDA_RAW_ENTER;
	rc.flags = 0;
	ck_assert_int_eq(nt_cuda_decode_enter(&st, &rc, NT_CUDA_RAW_CALL_FIXED, &out[0]), 1);
	ck_assert_uint_eq(e->hdr.type, 100 + NT_CUDA_EVT_ENTER);
	ck_assert_uint_eq(e->bytes, 12345);
	ck_assert_uint_eq(e->family, NT_CUDA_FAM_MEMCPY);
	ck_assert_str_eq(vstr(&out[0], e->api_name), "cudaMemcpy");

	/* malformed: too short, stack overflowing the record */
	ck_assert_int_eq(nt_cuda_decode_call(&st, &rc, 10, out), -EINVAL);
	rc.nframes = 5;
	ck_assert_int_eq(nt_cuda_decode_call(&st, &rc, NT_CUDA_RAW_CALL_FIXED, out), -EINVAL);
}
END_TEST

START_TEST(test_kernel_names)
{
	struct nt_cuda_raw_kname k;
	struct nt_cuda_raw_launch rl;
	const struct nt_cuda_launch *l = (const void *)out[0].u.bytes;
	const char *mangled = "_Z10vector_addPfi";

	/* runtime: host stub symbolized */
	ck_assert_str_eq(nt_cuda_kernel_name(&st, 42, NT_CUDA_LAYER_RUNTIME, 0x1000),
			 "vector_add(float*, int)");
	ck_assert_str_eq(nt_cuda_kernel_name(&st, 42, NT_CUDA_LAYER_RUNTIME, 0x9999), "");

	/* driver: cuLibraryGetKernel then cuKernelGetFunction */
	memset(&k, 0, sizeof(k));
	k.hdr.type = NT_CUDA_RAW_KNAME;
	k.hdr.pid = 42;
	k.api = NT_CUDA_API_cuLibraryGetKernel;
	k.handle = 0xfeed00;
	k.parent = 0xb000;
	k.name_len = (uint32_t)strlen(mangled);
	memcpy(k.name, mangled, k.name_len);
	ck_assert_int_eq(nt_cuda_learn_kname(&st, &k, NT_CUDA_RAW_KNAME_FIXED + k.name_len), 0);
	ck_assert_str_eq(nt_cuda_kernel_name(&st, 42, NT_CUDA_LAYER_DRIVER, 0xfeed00),
			 "vector_add(float*, int)");
	k.api = NT_CUDA_API_cuKernelGetFunction;
	k.parent = 0xfeed00;
	k.handle = 0xf00d;
	k.name_len = 0;
	ck_assert_int_eq(nt_cuda_learn_kname(&st, &k, NT_CUDA_RAW_KNAME_FIXED), 0);
	ck_assert_str_eq(nt_cuda_kernel_name(&st, 42, NT_CUDA_LAYER_DRIVER, 0xf00d),
			 "vector_add(float*, int)");
	/* plain C (Triton) names stay as they are; failed calls teach nothing */
	k.api = NT_CUDA_API_cuModuleGetFunction;
	k.handle = 0x7777;
	k.name_len = 22;
	memcpy(k.name, "triton_poi_fused_add_0", 22);
	ck_assert_int_eq(nt_cuda_learn_kname(&st, &k, NT_CUDA_RAW_KNAME_FIXED + 22), 0);
	ck_assert_str_eq(nt_cuda_kernel_name(&st, 42, NT_CUDA_LAYER_DRIVER, 0x7777),
			 "triton_poi_fused_add_0");
	k.handle = 0x8888;
	k.ret = 500;
	ck_assert_int_eq(nt_cuda_learn_kname(&st, &k, NT_CUDA_RAW_KNAME_FIXED + 22), 0);
	ck_assert_str_eq(nt_cuda_kernel_name(&st, 42, NT_CUDA_LAYER_DRIVER, 0x8888), "");
	ck_assert_int_eq(nt_cuda_learn_kname(&st, &k, 5), -EINVAL);

	/* launch record */
	memset(&rl, 0, sizeof(rl));
	rl.hdr.type = NT_CUDA_RAW_LAUNCH;
	rl.hdr.pid = 42;
	rl.hdr.tid = 44;
	rl.api = NT_CUDA_API_cuLaunchKernel;
	rl.layer = NT_CUDA_LAYER_DRIVER;
	rl.func = 0xf00d;
	rl.grid[0] = 16;
	rl.grid[1] = 2;
	rl.block[0] = 128;
	rl.block[1] = 1;
	rl.block[2] = 1;
	rl.shared_mem = 4096;
	rl.stream = 0x1;
	rl.nframes = 3;
	rl.ips[0] = 0x3010;
	rl.ips[1] = 0x4000;
	rl.ips[2] = 0x2000;
	ck_assert_int_eq(nt_cuda_decode_launch(&st, &rl, NT_CUDA_RAW_LAUNCH_FIXED + 24, &out[0]), 1);
	ck_assert_uint_eq(l->hdr.type, 100 + NT_CUDA_EVT_LAUNCH);
	ck_assert_uint_eq(l->hdr.tid, 44);
	ck_assert_uint_eq(l->grid_x, 16);
	ck_assert_uint_eq(l->grid_y, 2);
	ck_assert_uint_eq(l->block_x, 128);
	ck_assert_uint_eq(l->shared_mem, 4096);
	ck_assert_str_eq(vstr(&out[0], l->kernel), "vector_add(float*, int)");
	ck_assert_str_eq(vstr(&out[0], l->api_name), "cuLaunchKernel");
	ck_assert_str_eq(vstr(&out[0], l->stack), "train_step;a,b;libfoo.so.1+0x510");
}
END_TEST

START_TEST(test_stack_format)
{
	uint64_t ips[4] = { 0x1000, 0x2004, 0x3010, 0 };
	/* the walk past the real stack: a repeat, the loader, no module */
	uint64_t repeat[4] = { 0x1000, 0x2004, 0x2004, 0x3010 };
	uint64_t loader[4] = { 0x1000, 0x2004, 0x5010, 0x5010 };
	uint64_t nowhere[4] = { 0x1000, 0x2004, 0x123456, 0x3010 };
	char buf[80];
	size_t n;

	/* root first, the probed function last; an unnamed frame keeps its
	 * offset in the module */
	n = nt_cuda_format_stack(&st, 1, ips, 4, buf, sizeof(buf), NULL);
	ck_assert_str_eq(buf, "libfoo.so.1+0x510;train_step;vector_add(float*, int)");
	ck_assert_uint_eq(n, strlen(buf));
	nt_cuda_format_stack(&st, 1, repeat, 4, buf, sizeof(buf), NULL);
	ck_assert_str_eq(buf, "train_step;vector_add(float*, int)");
	nt_cuda_format_stack(&st, 1, loader, 4, buf, sizeof(buf), NULL);
	ck_assert_str_eq(buf, "train_step;vector_add(float*, int)");
	nt_cuda_format_stack(&st, 1, nowhere, 4, buf, sizeof(buf), NULL);
	ck_assert_str_eq(buf, "train_step;vector_add(float*, int)");
	/* frame 0 unresolved: the probed function's name stands for it */
	uint64_t late[2] = { 0x7f0000001234, 0x2004 };
	nt_cuda_format_stack(&st, 1, late, 2, buf, sizeof(buf), "cuLaunchKernel");
	ck_assert_str_eq(buf, "train_step;cuLaunchKernel");
	/* depth limit */
	st.stack_depth = 1;
	nt_cuda_format_stack(&st, 1, ips, 4, buf, sizeof(buf), NULL);
	ck_assert_str_eq(buf, "vector_add(float*, int)");
	st.stack_depth = NT_CUDA_STACK_MAX;
	/* truncation keeps whole frames, the innermost ones */
	nt_cuda_format_stack(&st, 1, ips, 4, buf, 40, NULL);
	ck_assert_str_eq(buf, "train_step;vector_add(float*, int)");
	ck_assert_uint_eq(nt_cuda_stack_id(ips, 0), 0);
	ck_assert_uint_ne(nt_cuda_stack_id(ips, 2), nt_cuda_stack_id(ips, 3));
	ck_assert_uint_eq(nt_cuda_stack_id(ips, 2), nt_cuda_stack_id(ips, 2));
}
END_TEST

START_TEST(test_report_and_procs)
{
	struct nt_cuda_raw_call rc;
	struct nt_cuda_kcount top[2] = { { "vector_add", 100 }, { "scale", 50 } };
	struct nt_cuda_proc *p;
	char *text;

	for (uint32_t pid = 1; pid < 200; pid++) {
		rc = call(NT_CUDA_API_cudaMalloc, 0, 0, 100, 0, 0, 0);
		rc.hdr.pid = pid;
		rc.out[0] = 0x1000 * pid;
		ck_assert_int_eq(decode(&rc), 1);
	}
	ck_assert_uint_eq(nt_hmap_count(&st.procs), 199);
	for (uint32_t pid = 1; pid < 200; pid += 2)
		nt_cuda_proc_drop(&st, pid);
	ck_assert_uint_eq(nt_hmap_count(&st.procs), 99);
	for (uint32_t pid = 2; pid < 200; pid += 2)
		ck_assert_ptr_nonnull(nt_cuda_proc_find(&st, pid));
	ck_assert_ptr_null(nt_cuda_proc_find(&st, 3));
	p = nt_cuda_proc_find(&st, 8);
	text = nt_cuda_report_text(p, top, 2);
	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_nonnull(strstr(text, "launches 150 (2 kernels)"));
	ck_assert_ptr_nonnull(strstr(text, "allocations 1 (100 B, 0 failed)"));
	ck_assert_ptr_nonnull(strstr(text, "still allocated 100 B in 1 blocks"));
	ck_assert_ptr_nonnull(strstr(text, "100  vector_add"));
	free(text);
}
END_TEST

START_TEST(test_insn_and_maps)
{
	const uint8_t push[] = { 0x55, 0x48, 0x89, 0xe5 };
	const uint8_t r15[] = { 0x41, 0x57 };
	const uint8_t endbr[] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48 };
	const uint8_t sub[] = { 0x48, 0x83, 0xec, 0x08 };
	char line[] = "7f12a000-7f12b000 r-xp 00002000 08:01 123456   /usr/lib/libcudart.so.13\n";
	char anon[] = "7f12a000-7f12b000 rw-p 00000000 00:00 0 \n";
	char data[] = "7f12a000-7f12b000 r--p 00000000 08:01 123456   /usr/lib/libcudart.so.13\n";
	struct nt_cuda_map m;
	uint64_t skip;

#if defined(__x86_64__)
	ck_assert_int_eq(nt_cuda_insn_classify(push, 4, &skip), NT_CUDA_INSN_PUSH);
	ck_assert_int_eq(nt_cuda_insn_classify(r15, 2, &skip), NT_CUDA_INSN_PUSH);
	ck_assert_int_eq(nt_cuda_insn_classify(endbr, 6, &skip), NT_CUDA_INSN_ENDBR);
	ck_assert_uint_eq(skip, 4);
	ck_assert_int_eq(nt_cuda_insn_classify(sub, 4, &skip), NT_CUDA_INSN_OTHER);
	ck_assert_uint_eq(skip, 0);
#elif defined(__aarch64__)
	{
		/* stp x29, x30, [sp, #-16]! (stepped); cbz x0 (simulated) */
		const uint8_t stp[] = { 0xfd, 0x7b, 0xbf, 0xa9 };
		const uint8_t cbz[] = { 0x80, 0x08, 0x00, 0xb4 };

		(void)push, (void)r15, (void)endbr, (void)sub;
		ck_assert_int_eq(nt_cuda_insn_classify(stp, 4, &skip), NT_CUDA_INSN_OTHER);
		ck_assert_int_eq(nt_cuda_insn_classify(cbz, 4, &skip), NT_CUDA_INSN_SIMULATED);
		ck_assert_uint_eq(skip, 0);
	}
#endif

	ck_assert(nt_cuda_parse_maps_line(line, &m));
	ck_assert_uint_eq(m.start, 0x7f12a000);
	ck_assert_uint_eq(m.offset, 0x2000);
	ck_assert_uint_eq(m.ino, 123456);
	ck_assert_uint_eq(m.dev_major, 8);
	ck_assert_str_eq(m.path, "/usr/lib/libcudart.so.13");
	ck_assert(!nt_cuda_parse_maps_line(anon, &m));
	ck_assert(!nt_cuda_parse_maps_line(data, &m));
	ck_assert(nt_cuda_name_is_runtime("/x/nvidia/cu13/lib/libcudart.so.13"));
	ck_assert(!nt_cuda_name_is_runtime("/x/libcuda.so.1"));
	ck_assert(nt_cuda_name_is_driver("/x/libcuda.so.1"));
}
END_TEST

START_TEST(test_elf_fixtures)
{
	struct nt_cuda_sym s[3] = { { .name = "cudaLaunchKernel" },
				    { .name = "cudaMalloc" },
				    { .name = "no_such_function" } };

	ck_assert_int_eq(nt_cuda_elf_classify(FIXTURE_DIR "/libcudart.so.13"),
			 NT_CUDA_LIB_RUNTIME);
	ck_assert_int_eq(nt_cuda_elf_classify(FIXTURE_DIR "/libcuda.so.1"),
			 NT_CUDA_LIB_DRIVER);
	ck_assert_int_eq(nt_cuda_elf_classify(FIXTURE_DIR "/cuda_workload"),
			 NT_CUDA_LIB_NONE);
	/* a runtime linked into an executable is a runtime: the fixture's
	 * always, NVIDIA's libcudart_static.a where the toolkit has one */
	ck_assert_int_eq(nt_cuda_elf_classify(FIXTURE_DIR "/cuda_static_fx"),
			 NT_CUDA_LIB_RUNTIME);
#if HAVE_STATIC_CUDART
	ck_assert_int_eq(nt_cuda_elf_classify(FIXTURE_DIR "/cuda_static_cudart"),
			 NT_CUDA_LIB_RUNTIME);
#endif
	ck_assert_int_lt(nt_cuda_elf_classify("/nonexistent/libcudart.so"), 0);
	ck_assert_int_eq(nt_cuda_elf_lookup(FIXTURE_DIR "/libcudart.so.13", s, 3), 2);
	ck_assert_uint_ne(s[0].offset, 0);
	/* built with frame pointers: the probe's first instruction is emulated
	 * on x86-64 (push %rbp); on arm64 it is stp x29, x30, [sp, #-N]!,
	 * which the kernel steps */
#if defined(__aarch64__)
	ck_assert_int_eq(s[0].insn, NT_CUDA_INSN_OTHER);
#else
	ck_assert(s[0].insn == NT_CUDA_INSN_PUSH || s[0].insn == NT_CUDA_INSN_ENDBR);
#endif
	ck_assert_uint_eq(s[2].offset, 0);
}
END_TEST


/* A line of /proc/self/status ("VmRSS:", "VmHWM:"), kB. */
static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	long kb = -1;

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			kb = strtol(line + strlen(key), NULL, 10);
	if (f)
		fclose(f);
	return kb;
}

/* Start VmHWM again from the current RSS (Linux 4.0+). */
static void reset_peak_rss(void)
{
	FILE *f = fopen("/proc/self/clear_refs", "we");

	ck_assert_ptr_nonnull(f);
	fputs("5", f);
	fclose(f);
}

/* The file offset of `name`'s code in `path`, from the ELF file read
 * independently (libelf, the whole .dynsym walked). */
static uint64_t offset_by_walk(const char *path, const char *name)
{
	int fd = open(path, O_RDONLY);
	Elf *e;
	Elf_Scn *scn = NULL;
	uint64_t off = 0;

	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	while (e && !off && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM ||
		    !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			GElf_Shdr code;

			if (gelf_getsym(d, (int)i, &sym) && sym.st_shndx != SHN_UNDEF &&
			    !strcmp(elf_strptr(e, sh.sh_link, sym.st_name), name) &&
			    gelf_getshdr(elf_getscn(e, sym.st_shndx), &code))
				off = sym.st_value - code.sh_addr + code.sh_offset;
		}
	}
	if (e)
		elf_end(e);
	close(fd);
	return off;
}

/* A library with 40000 long exported names (about 12 MB of symbol tables):
 * the lookup goes through the GNU hash table and small reads, so it finds
 * the wanted names at the offsets a full walk gives, and this process's
 * peak RSS does not grow by the tables' size (mapped and walked, it grew
 * by all of it: +35 MB for a 36 MB library). */
START_TEST(test_elf_lookup_large_tables)
{
	const char *lib = FIXTURE_DIR "/libmanysyms.so";
	struct nt_cuda_sym s[3] = { { .name = "cudaMalloc" },
				    { .name = "cudaLaunchKernel" },
				    { .name = "_ZN2at6native12_GLOBAL__N_126templated_kernel_with_a_long_nameILi39999EEEvPKfPfllRKNS_10TensorBaseE" } };
	uint64_t want = offset_by_walk(lib, "cudaMalloc");
	long before, peak;

	ck_assert_uint_ne(want, 0);
	reset_peak_rss();
	before = status_kb("VmRSS:");
	ck_assert_int_eq(nt_cuda_elf_lookup(lib, s, 3), 2);
	peak = status_kb("VmHWM:");
	ck_assert(s[0].offset == want || s[0].offset == want + 4); /* endbr64 */
	ck_assert_uint_eq(s[1].offset, 0);
	ck_assert_uint_ne(s[2].offset, 0);
	ck_assert_msg(peak - before < 2048, "peak RSS grew by %ld kB", peak - before);
}
END_TEST

/* ---- issue 19: graphs, virtual memory, error stacks (synthetic records) */

static void captured(uint64_t func, int layer)
{
	struct nt_cuda_raw_launch rl;

	memset(&rl, 0, sizeof(rl));
	rl.hdr.type = NT_CUDA_RAW_LAUNCH;
	rl.hdr.pid = 42;
	rl.hdr.tid = 43;
	rl.func = func;
	rl.layer = (uint8_t)layer;
	rl.first = NT_CUDA_LAUNCH_CAPTURED;
	ck_assert_int_eq(nt_cuda_note_captured(&st, &rl, NT_CUDA_RAW_LAUNCH_FIXED), 0);
}

static uint64_t graphdef(unsigned api, uint64_t out0, uint64_t a0, uint64_t a1,
			 uint64_t a2, uint64_t node_func)
{
	struct nt_cuda_raw_call rc = call(api, 0, a0, a1, a2, 0, 0);

	rc.out[0] = out0;
	memcpy(rc.blob, &node_func, 8);
	ck_assert_int_eq(decode(&rc), 0);
	return out0;
}

static uint32_t kernels_named(uint64_t exec, const char *name)
{
	const struct nt_cuda_glist *k = nt_cuda_graph_launched(&st, 42, exec);
	uint32_t n = 0;

	for (uint32_t i = 0; k && i < k->n; i++)
		n += !strcmp(nt_cuda_kernel_name(&st, 42, k->k[i].layer,
						 k->k[i].func), name);
	return n;
}

START_TEST(test_graph_capture_nodes)
{
	struct nt_cuda_raw_kname kn;
	struct nt_cuda_raw_call rc;

	/* a driver handle named "k_drv" */
	memset(&kn, 0, sizeof(kn));
	kn.hdr.pid = 42;
	kn.api = NT_CUDA_API_cuModuleGetFunction;
	kn.handle = 0xd00;
	kn.name_len = 5;
	memcpy(kn.name, "k_drv", 5);
	ck_assert_int_eq(nt_cuda_learn_kname(&st, &kn, NT_CUDA_RAW_KNAME_FIXED + 5), 0);

	graphdef(NT_CUDA_API_cudaStreamBeginCapture, 0, 0x57, 0, 0, 0);
	captured(0xd00, NT_CUDA_LAYER_DRIVER);
	captured(0x1000, NT_CUDA_LAYER_RUNTIME); /* vector_add stub */
	captured(0xd00, NT_CUDA_LAYER_DRIVER);
	graphdef(NT_CUDA_API_cudaStreamEndCapture, 0x6000, 0x57, 0, 0, 0);
	graphdef(NT_CUDA_API_cudaGraphInstantiate, 0xe000, 0, 0x6000, 0, 0);
	ck_assert_uint_eq(kernels_named(0xe000, "k_drv"), 2);
	ck_assert_uint_eq(kernels_named(0xe000, "vector_add(float*, int)"), 1);

	/* a launch of the graph counts its 3 kernels */
	rc = call(NT_CUDA_API_cudaGraphLaunch, 0, 0xe000, 0x57, 0, 0, 0);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(nt_cuda_proc_find(&st, 42)->tot.launches, 3);

	/* explicit nodes, node updates, exec update */
	graphdef(NT_CUDA_API_cuGraphAddKernelNode_v2, 0xa1, 0, 0x7000, 0, 0xd00);
	graphdef(NT_CUDA_API_cudaGraphAddKernelNode, 0xa2, 0, 0x7000, 0, 0x1000);
	graphdef(NT_CUDA_API_cudaGraphInstantiateWithFlags, 0xe100, 0, 0x7000, 0, 0);
	ck_assert_uint_eq(kernels_named(0xe100, "k_drv"), 1);
	graphdef(NT_CUDA_API_cudaGraphExecKernelNodeSetParams, 0, 0xe100, 0xa2, 0, 0xd00);
	ck_assert_uint_eq(kernels_named(0xe100, "k_drv"), 2);
	graphdef(NT_CUDA_API_cudaGraphKernelNodeSetParams, 0, 0xa1, 0, 0, 0x1000);
	ck_assert_uint_eq(kernels_named(0xe100, "k_drv"), 2); /* the exec keeps its copy */
	graphdef(NT_CUDA_API_cudaGraphExecUpdate, 0, 0xe100, 0x7000, 0, 0);
	ck_assert_uint_eq(kernels_named(0xe100, "k_drv"), 0);
	ck_assert_uint_eq(kernels_named(0xe100, "vector_add(float*, int)"), 2);

	/* a failed capture leaves no graph; destroyed execs are forgotten */
	graphdef(NT_CUDA_API_cuStreamBeginCapture_v2, 0, 0x58, 0, 0, 0);
	captured(0xd00, NT_CUDA_LAYER_DRIVER);
	rc = call(NT_CUDA_API_cuStreamEndCapture, 1, 0x58, 0, 0, 0, 0);
	ck_assert_int_eq(decode(&rc), 1); /* the error event */
	graphdef(NT_CUDA_API_cudaGraphExecDestroy, 0, 0xe000, 0, 0, 0);
	ck_assert_ptr_null(nt_cuda_graph_launched(&st, 42, 0xe000));
}
END_TEST

START_TEST(test_vmm_bookkeeping)
{
	struct nt_cuda_raw_call rc;
	const struct nt_cuda_alloc *a = (const void *)out[0].u.bytes;
	const struct nt_cuda_free *f = (const void *)out[0].u.bytes;
	int32_t loc[2] = { 1, 3 }; /* device 3 */

	/* cuMemCreate: no event, the handle remembered with its device */
	rc = call(NT_CUDA_API_cuMemCreate, 0, 0, 2 << 20, 0, 0, 0);
	rc.out[0] = 0x4a;
	memcpy(rc.blob + 8, loc, 8);
	ck_assert_int_eq(decode(&rc), 0);
	rc = call(NT_CUDA_API_cuMemMap, 0, 0x7f0000000000, 2 << 20, 0, 0x4a, 0);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(out[0].u.hdr.type, 100 + NT_CUDA_EVT_ALLOC);
	ck_assert_uint_eq(a->ptr, 0x7f0000000000);
	ck_assert_uint_eq(a->size, 2 << 20);
	ck_assert_int_eq(a->device, 3);
	ck_assert_uint_eq(a->outstanding_bytes, 2 << 20);
	ck_assert_str_eq(vstr(&out[0], a->api_name), "cuMemMap");
	/* released while mapped: nothing freed yet */
	rc = call(NT_CUDA_API_cuMemRelease, 0, 0x4a, 0, 0, 0, 0);
	ck_assert_int_eq(decode(&rc), 0);
	ck_assert_uint_eq(nt_cuda_outstanding(nt_cuda_proc_find(&st, 42), 3,
					      NT_CUDA_MEM_DEVICE), 2 << 20);
	rc = call(NT_CUDA_API_cuMemUnmap, 0, 0x7f0000000000, 2 << 20, 0, 0, 0);
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_uint_eq(out[0].u.hdr.type, 100 + NT_CUDA_EVT_FREE);
	ck_assert_uint_eq(f->size, 2 << 20);
	ck_assert_int_eq(f->device, 3);
	ck_assert_uint_eq(f->outstanding_bytes, 0);
	/* out of memory: a failed allocation and its error */
	rc = call(NT_CUDA_API_cuMemCreate, 2, 0, 1ull << 40, 0, 0, 0);
	memcpy(rc.blob + 8, loc, 8);
	ck_assert_int_eq(decode(&rc), 2);
	ck_assert_uint_eq(a->ptr, 0);
	ck_assert_uint_eq(a->size, 1ull << 40);
	ck_assert_int_eq(a->ret, 2);
	ck_assert_uint_eq(out[1].u.hdr.type, 100 + NT_CUDA_EVT_ERROR);
}
END_TEST

START_TEST(test_error_return_stack)
{
	struct nt_cuda_raw_call rc = call(NT_CUDA_API_cudaSetDevice, 101, 99, 0, 0, 0, 0);
	const struct nt_cuda_error *e = (const void *)out[0].u.bytes;

	/* taken at the return: frame 0 is the caller */
	rc.ips[0] = 0x2004;
	rc.nframes = 1;
	rc.pad = NT_CUDA_RAWF_RET_STACK;
	ck_assert_int_eq(decode(&rc), 1);
	ck_assert_str_eq(vstr(&out[0], e->error_name), "cudaErrorInvalidDevice");
	ck_assert_str_eq(vstr(&out[0], e->stack), "train_step;cudaSetDevice");
}
END_TEST

static Suite *cuda_suite(void)
{
	Suite *s = suite_create("cuda");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_specs);
	tcase_add_test(tc, test_alloc_free);
	tcase_add_test(tc, test_failed_alloc_error);
	tcase_add_test(tc, test_error_names);
	tcase_add_test(tc, test_memcpy_directions);
	tcase_add_test(tc, test_memset_sync_graph_enter);
	tcase_add_test(tc, test_kernel_names);
	tcase_add_test(tc, test_stack_format);
	tcase_add_test(tc, test_report_and_procs);
	tcase_add_test(tc, test_insn_and_maps);
	tcase_add_test(tc, test_elf_fixtures);
	tcase_add_test(tc, test_elf_lookup_large_tables);
	tcase_add_test(tc, test_graph_capture_nodes);
	tcase_add_test(tc, test_vmm_bookkeeping);
	tcase_add_test(tc, test_error_return_stack);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(cuda_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
