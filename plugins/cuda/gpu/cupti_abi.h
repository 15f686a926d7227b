/* SPDX-License-Identifier: MIT */
/*
 * The part of NVIDIA's CUPTI activity API that ntcore uses, declared here so
 * that nothing in ntcore needs the CUDA toolkit to build (a fresh Debian has
 * none); the injection library dlopens libcupti at run time.
 *
 * Facts from the published headers (cupti_activity.h, cupti_result.h,
 * CUPTI_API_VERSION 130001, CUDA 13.0): enum values, function signatures and
 * record layouts. Records are declared as the PREFIX of NVIDIA's structs
 * that ntcore reads (every record is packed and 8-byte aligned); the fields
 * read are the same in every record version since CUDA 11 (Kernel4..10,
 * Memcpy5/6, Memset4, Synchronization/Synchronization2, API), so one
 * declaration reads the records of a CUDA 12 and a CUDA 13 CUPTI alike.
 * tests/unit/cupti_layout_check.c checks every offset below against the
 * real headers where /usr/local/cuda is installed.
 */
#ifndef NTCORE_CUPTI_ABI_H
#define NTCORE_CUPTI_ABI_H

#include <stddef.h>
#include <stdint.h>

#define NT_CUPTI_REC __attribute__((packed, aligned(8)))

typedef int nt_cupti_result;            /* CUptiResult */
typedef uint32_t nt_cupti_cbid;         /* CUpti_CallbackId */
#define NT_CUPTI_SUCCESS 0
#define NT_CUPTI_ERROR_MAX_LIMIT_REACHED 12
#define NT_CUPTI_ERROR_NOT_INITIALIZED 15
#define NT_CUPTI_ERROR_MULTIPLE_SUBSCRIBERS 39

/* CUpti_ActivityKind (the ones ntcore enables or reads) */
enum {
	NT_CUPTI_KIND_MEMCPY = 1,
	NT_CUPTI_KIND_MEMSET = 2,
	NT_CUPTI_KIND_KERNEL = 3,
	NT_CUPTI_KIND_DRIVER = 4,
	NT_CUPTI_KIND_RUNTIME = 5,
	NT_CUPTI_KIND_CONCURRENT_KERNEL = 10,
	NT_CUPTI_KIND_SYNCHRONIZATION = 38,
};

/* CUpti_ActivityFlag */
#define NT_CUPTI_FLUSH_FORCED 1u
/* CUpti_ActivityThreadIdType: SYSTEM = gettid() on Linux */
#define NT_CUPTI_THREAD_ID_SYSTEM 1
/* CUpti_ActivityAttribute ZEROED_OUT_ACTIVITY_BUFFER (a uint8_t): the
 * client hands CUPTI zeroed buffers, so CUPTI does not zero each buffer it
 * is given on the application thread that asked for it */
#define NT_CUPTI_ATTR_ZEROED_OUT_ACTIVITY_BUFFER 5

/* CUpti_ActivityMemcpyKind */
enum {
	NT_CUPTI_MEMCPY_UNKNOWN = 0,
	NT_CUPTI_MEMCPY_HTOD = 1,
	NT_CUPTI_MEMCPY_DTOH = 2,
	NT_CUPTI_MEMCPY_HTOA = 3,
	NT_CUPTI_MEMCPY_ATOH = 4,
	NT_CUPTI_MEMCPY_ATOA = 5,
	NT_CUPTI_MEMCPY_ATOD = 6,
	NT_CUPTI_MEMCPY_DTOA = 7,
	NT_CUPTI_MEMCPY_DTOD = 8,
	NT_CUPTI_MEMCPY_HTOH = 9,
	NT_CUPTI_MEMCPY_PTOP = 10,
};

/* CUpti_ActivitySynchronizationType */
enum {
	NT_CUPTI_SYNC_UNKNOWN = 0,
	NT_CUPTI_SYNC_EVENT = 1,
	NT_CUPTI_SYNC_STREAM_WAIT_EVENT = 2,
	NT_CUPTI_SYNC_STREAM = 3,
	NT_CUPTI_SYNC_CONTEXT = 4,
};

/* CUpti_Activity: every record starts with its kind */
struct nt_cupti_activity {
	uint32_t kind;
} NT_CUPTI_REC;

/* CUpti_ActivityKernel4..10, up to `name` */
struct nt_cupti_kernel {
	uint32_t kind;
	uint8_t cacheConfig;
	uint8_t sharedMemoryConfig;
	uint16_t registersPerThread;
	uint32_t partitionedGlobalCacheRequested;
	uint32_t partitionedGlobalCacheExecuted;
	uint64_t start;
	uint64_t end;
	uint64_t completed;
	uint32_t deviceId;
	uint32_t contextId;
	uint32_t streamId;
	int32_t gridX, gridY, gridZ;
	int32_t blockX, blockY, blockZ;
	int32_t staticSharedMemory;
	int32_t dynamicSharedMemory;
	uint32_t localMemoryPerThread;
	uint32_t localMemoryTotal;
	uint32_t correlationId;
	int64_t gridId;
	const char *name; /* mangled; owned by CUPTI, shared by all records */
} NT_CUPTI_REC;

/* CUpti_ActivityMemcpy5/6, up to runtimeCorrelationId */
struct nt_cupti_memcpy {
	uint32_t kind;
	uint8_t copyKind;
	uint8_t srcKind;
	uint8_t dstKind;
	uint8_t flags;
	uint64_t bytes;
	uint64_t start;
	uint64_t end;
	uint32_t deviceId;
	uint32_t contextId;
	uint32_t streamId;
	uint32_t correlationId;        /* the driver API call's */
	uint32_t runtimeCorrelationId; /* the runtime API call's */
} NT_CUPTI_REC;

/* CUpti_ActivityMemset4, up to memoryKind */
struct nt_cupti_memset {
	uint32_t kind;
	uint32_t value;
	uint64_t bytes;
	uint64_t start;
	uint64_t end;
	uint32_t deviceId;
	uint32_t contextId;
	uint32_t streamId;
	uint32_t correlationId;
	uint16_t flags;
	uint16_t memoryKind;
} NT_CUPTI_REC;

/* CUpti_ActivitySynchronization(2), up to cudaEventId */
struct nt_cupti_sync {
	uint32_t kind;
	uint32_t type; /* NT_CUPTI_SYNC_* */
	uint64_t start;
	uint64_t end;
	uint32_t correlationId;
	uint32_t contextId;
	uint32_t streamId;
	uint32_t cudaEventId;
} NT_CUPTI_REC;

/* CUpti_ActivityAPI (runtime and driver records): the whole struct */
struct nt_cupti_api {
	uint32_t kind; /* NT_CUPTI_KIND_RUNTIME or _DRIVER */
	uint32_t cbid;
	uint64_t start;
	uint64_t end;
	uint32_t processId;
	uint32_t threadId; /* gettid() with NT_CUPTI_THREAD_ID_SYSTEM */
	uint32_t correlationId;
	uint32_t returnValue;
} NT_CUPTI_REC;

/* Callback and function types (CUPTIAPI is empty on Linux). */
typedef void (*nt_cupti_buf_request_fn)(uint8_t **buffer, size_t *size,
					size_t *max_records);
typedef void (*nt_cupti_buf_complete_fn)(void *context, uint32_t stream_id,
					 uint8_t *buffer, size_t size,
					 size_t valid_size);
typedef uint64_t (*nt_cupti_timestamp_fn)(void);

/*
 * The CUPTI entry points ntcore calls, resolved with dlsym by these names.
 * Optional ones (NULL when an older CUPTI lacks them) are marked.
 */
struct nt_cupti_api_table {
	nt_cupti_result (*GetVersion)(uint32_t *version);
	nt_cupti_result (*GetResultString)(nt_cupti_result r, const char **s);
	nt_cupti_result (*ActivityRegisterCallbacks)(nt_cupti_buf_request_fn,
						     nt_cupti_buf_complete_fn);
	nt_cupti_result (*ActivityEnable)(uint32_t kind);
	nt_cupti_result (*ActivityDisable)(uint32_t kind);
	nt_cupti_result (*ActivityEnableRuntimeApi)(nt_cupti_cbid, uint8_t);
	nt_cupti_result (*ActivityEnableDriverApi)(nt_cupti_cbid, uint8_t);
	nt_cupti_result (*ActivityGetNextRecord)(uint8_t *buffer, size_t valid,
						 struct nt_cupti_activity **rec);
	nt_cupti_result (*ActivityGetNumDroppedRecords)(void *ctx, uint32_t stream,
							size_t *dropped);
	nt_cupti_result (*ActivityFlushAll)(uint32_t flag);
	nt_cupti_result (*ActivityRegisterTimestampCallback)(nt_cupti_timestamp_fn);
	nt_cupti_result (*SetThreadIdType)(uint32_t type);
	/* cuptiActivitySetAttribute (optional) */
	nt_cupti_result (*ActivitySetAttribute)(uint32_t attr, size_t *size, void *value);
};

#endif /* NTCORE_CUPTI_ABI_H */
