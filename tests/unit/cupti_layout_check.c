/* SPDX-License-Identifier: MIT */
/*
 * Checks ntcore's own declarations of CUPTI (plugins/cuda/gpu/cupti_abi.h:
 * enum values, record layouts) against NVIDIA's headers: every field ntcore
 * reads at the same offset and size in the record versions of CUDA 13
 * (Kernel10, Memcpy6, Memset4, Synchronization2, API) and, where the
 * toolkit still declares them, of CUDA 12 (Kernel9, Memcpy5,
 * Synchronization). Built and run by cupti_layout_check.sh where a CUDA
 * toolkit is installed. Prints one line per mismatch; exit 1 on any.
 */
#include <cupti.h>
#include <stdbool.h>
#include <stdio.h>

#include "../../plugins/cuda/gpu/cupti_abi.h"
#include "../../plugins/cuda/gpu/cupti_cbids.h"

static int bad, checked;

#define SAME(mine, theirs, field)                                              \
	do {                                                                   \
		checked++;                                                     \
		if (offsetof(mine, field) != offsetof(theirs, field) ||       \
		    sizeof(((mine *)0)->field) != sizeof(((theirs *)0)->field)) { \
			printf("MISMATCH %s.%s: ours at %zu (%zu bytes), %s at %zu (%zu bytes)\n", \
			       #mine, #field, offsetof(mine, field),           \
			       sizeof(((mine *)0)->field), #theirs,            \
			       offsetof(theirs, field), sizeof(((theirs *)0)->field)); \
			bad++;                                                 \
		}                                                              \
	} while (0)

#define EQ(a, b)                                                               \
	do {                                                                   \
		checked++;                                                     \
		if ((long)(a) != (long)(b)) {                                  \
			printf("MISMATCH %s = %ld, %s = %ld\n", #a, (long)(a), #b, (long)(b)); \
			bad++;                                                 \
		}                                                              \
	} while (0)

#define KERNEL(T)                                                              \
	SAME(struct nt_cupti_kernel, T, kind);                                 \
	SAME(struct nt_cupti_kernel, T, registersPerThread);                   \
	SAME(struct nt_cupti_kernel, T, start);                                \
	SAME(struct nt_cupti_kernel, T, end);                                  \
	SAME(struct nt_cupti_kernel, T, deviceId);                             \
	SAME(struct nt_cupti_kernel, T, contextId);                            \
	SAME(struct nt_cupti_kernel, T, streamId);                             \
	SAME(struct nt_cupti_kernel, T, gridX);                                \
	SAME(struct nt_cupti_kernel, T, gridY);                                \
	SAME(struct nt_cupti_kernel, T, gridZ);                                \
	SAME(struct nt_cupti_kernel, T, blockX);                               \
	SAME(struct nt_cupti_kernel, T, blockY);                               \
	SAME(struct nt_cupti_kernel, T, blockZ);                               \
	SAME(struct nt_cupti_kernel, T, staticSharedMemory);                   \
	SAME(struct nt_cupti_kernel, T, dynamicSharedMemory);                  \
	SAME(struct nt_cupti_kernel, T, correlationId);                        \
	SAME(struct nt_cupti_kernel, T, name)

#define MEMCPY(T)                                                              \
	SAME(struct nt_cupti_memcpy, T, kind);                                 \
	SAME(struct nt_cupti_memcpy, T, copyKind);                             \
	SAME(struct nt_cupti_memcpy, T, srcKind);                              \
	SAME(struct nt_cupti_memcpy, T, dstKind);                              \
	SAME(struct nt_cupti_memcpy, T, bytes);                                \
	SAME(struct nt_cupti_memcpy, T, start);                                \
	SAME(struct nt_cupti_memcpy, T, end);                                  \
	SAME(struct nt_cupti_memcpy, T, deviceId);                             \
	SAME(struct nt_cupti_memcpy, T, contextId);                            \
	SAME(struct nt_cupti_memcpy, T, streamId);                             \
	SAME(struct nt_cupti_memcpy, T, correlationId);                        \
	SAME(struct nt_cupti_memcpy, T, runtimeCorrelationId)

#define SYNC(T)                                                                \
	SAME(struct nt_cupti_sync, T, kind);                                   \
	SAME(struct nt_cupti_sync, T, type);                                   \
	SAME(struct nt_cupti_sync, T, start);                                  \
	SAME(struct nt_cupti_sync, T, end);                                    \
	SAME(struct nt_cupti_sync, T, correlationId);                          \
	SAME(struct nt_cupti_sync, T, contextId);                              \
	SAME(struct nt_cupti_sync, T, streamId);                               \
	SAME(struct nt_cupti_sync, T, cudaEventId)

static void records(void)
{
	KERNEL(CUpti_ActivityKernel10);
	MEMCPY(CUpti_ActivityMemcpy6);
	SYNC(CUpti_ActivitySynchronization2);
	SAME(struct nt_cupti_memset, CUpti_ActivityMemset4, kind);
	SAME(struct nt_cupti_memset, CUpti_ActivityMemset4, value);
	SAME(struct nt_cupti_memset, CUpti_ActivityMemset4, bytes);
	SAME(struct nt_cupti_memset, CUpti_ActivityMemset4, start);
	SAME(struct nt_cupti_memset, CUpti_ActivityMemset4, end);
	SAME(struct nt_cupti_memset, CUpti_ActivityMemset4, deviceId);
	SAME(struct nt_cupti_memset, CUpti_ActivityMemset4, contextId);
	SAME(struct nt_cupti_memset, CUpti_ActivityMemset4, streamId);
	SAME(struct nt_cupti_memset, CUpti_ActivityMemset4, correlationId);
	SAME(struct nt_cupti_memset, CUpti_ActivityMemset4, flags);
	SAME(struct nt_cupti_memset, CUpti_ActivityMemset4, memoryKind);
	SAME(struct nt_cupti_api, CUpti_ActivityAPI, kind);
	SAME(struct nt_cupti_api, CUpti_ActivityAPI, cbid);
	SAME(struct nt_cupti_api, CUpti_ActivityAPI, start);
	SAME(struct nt_cupti_api, CUpti_ActivityAPI, end);
	SAME(struct nt_cupti_api, CUpti_ActivityAPI, processId);
	SAME(struct nt_cupti_api, CUpti_ActivityAPI, threadId);
	SAME(struct nt_cupti_api, CUpti_ActivityAPI, correlationId);
	SAME(struct nt_cupti_api, CUpti_ActivityAPI, returnValue);
	EQ(sizeof(struct nt_cupti_api), sizeof(CUpti_ActivityAPI));
#if CUPTI_API_VERSION >= 130000
	/* the stand-in CUPTI's record sizes (tests/fixtures/cuda/fake_cupti.c) */
	EQ(216, sizeof(CUpti_ActivityKernel10));
	EQ(96, sizeof(CUpti_ActivityMemcpy6));
	EQ(88, sizeof(CUpti_ActivityMemset4));
	EQ(56, sizeof(CUpti_ActivitySynchronization2));
	EQ(40, sizeof(CUpti_ActivityAPI));
#endif
}

/* CUDA 12's record versions (cupti_activity_deprecated.h in CUDA 13) */
static void older_records(void)
{
	KERNEL(CUpti_ActivityKernel9);
	MEMCPY(CUpti_ActivityMemcpy5);
	SYNC(CUpti_ActivitySynchronization);
}

static void enums(void)
{
	EQ(NT_CUPTI_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY);
	EQ(NT_CUPTI_KIND_MEMSET, CUPTI_ACTIVITY_KIND_MEMSET);
	EQ(NT_CUPTI_KIND_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL);
	EQ(NT_CUPTI_KIND_DRIVER, CUPTI_ACTIVITY_KIND_DRIVER);
	EQ(NT_CUPTI_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_RUNTIME);
	EQ(NT_CUPTI_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	EQ(NT_CUPTI_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
	EQ(NT_CUPTI_FLUSH_FORCED, CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	EQ(NT_CUPTI_THREAD_ID_SYSTEM, CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
	EQ(NT_CUPTI_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER);
	EQ(NT_CUPTI_SUCCESS, CUPTI_SUCCESS);
	EQ(NT_CUPTI_ERROR_MAX_LIMIT_REACHED, CUPTI_ERROR_MAX_LIMIT_REACHED);
	EQ(NT_CUPTI_ERROR_NOT_INITIALIZED, CUPTI_ERROR_NOT_INITIALIZED);
	EQ(NT_CUPTI_MEMCPY_HTOD, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
	EQ(NT_CUPTI_MEMCPY_DTOH, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH);
	EQ(NT_CUPTI_MEMCPY_DTOD, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD);
	EQ(NT_CUPTI_MEMCPY_HTOH, CUPTI_ACTIVITY_MEMCPY_KIND_HTOH);
	EQ(NT_CUPTI_MEMCPY_PTOP, CUPTI_ACTIVITY_MEMCPY_KIND_PTOP);
	EQ(NT_CUPTI_SYNC_EVENT, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE);
	EQ(NT_CUPTI_SYNC_STREAM_WAIT_EVENT, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT);
	EQ(NT_CUPTI_SYNC_STREAM, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE);
	EQ(NT_CUPTI_SYNC_CONTEXT, CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE);
	/* a few callback ids of the generated table */
	EQ(nt_cupti_runtime_cbids[0].cbid >= 1, 1);
}

/* The generated callback-id table against the headers' own names. */
static void cbids(void)
{
	static const struct { uint32_t mine, theirs; } some[] = {
		{ 211, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 },
		{ 430, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060 },
		{ 311, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000 },
		{ 31, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020 },
		{ 41, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020 },
		{ 49, CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020 },
		{ 307, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel },
		{ 652, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx },
		{ 514, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch },
		{ 276, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2 },
		{ 305, CUPTI_DRIVER_TRACE_CBID_cuMemcpy },
		{ 249, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2 },
	};
	bool found;

	for (size_t i = 0; i < sizeof(some) / sizeof(some[0]); i++) {
		EQ(some[i].mine, some[i].theirs);
		found = false;
		for (size_t k = 0; k < sizeof(nt_cupti_runtime_cbids) / sizeof(nt_cupti_runtime_cbids[0]); k++)
			found |= nt_cupti_runtime_cbids[k].cbid == some[i].mine;
		for (size_t k = 0; k < sizeof(nt_cupti_driver_cbids) / sizeof(nt_cupti_driver_cbids[0]); k++)
			found |= nt_cupti_driver_cbids[k].cbid == some[i].mine;
		EQ(found, 1);
	}
}

int main(void)
{
	records();
	older_records();
	enums();
	cbids();
	printf("cupti_layout_check: %d checks against CUPTI_API_VERSION %d, %d mismatches\n",
	       checked, CUPTI_API_VERSION, bad);
	return bad ? 1 : 0;
}
