// SPDX-License-Identifier: MIT
/*
 * libcupti-raw.so: the floor under cuda_gpu's cost. A CUPTI injection
 * library (CUDA_INJECTION64_PATH) that enables what RAW_MODE names and only
 * counts the records CUPTI hands it: no socket, no sender thread, no
 * conversion. tests/gpu/cupti.sh (part cost) runs a job bare, under this
 * library and under cuda_gpu, interleaved, so the report shows how much of
 * the cost is CUPTI's own and how much ntcore's.
 *
 *   RAW_CUPTI   the libcupti to dlopen (default libcupti.so.13)
 *   RAW_MODE    comma-separated (or "none": injection alone, nothing
 *               enabled): ts (CLOCK_MONOTONIC timestamp callback),
 *               kernel (CONCURRENT_KERNEL), memcpy, memset, sync,
 *               api (API records of the functions cuda_gpu's join uses,
 *               thread ids gettid, as cuda_gpu with api_records = true),
 *               api_launch (API records of the four launch functions only),
 *               zeroed (zeroed buffers, ZEROED_OUT_ACTIVITY_BUFFER)
 *   RAW_BUF_KB  buffer size (default 2048, as cuda_gpu)
 * At exit it flushes and prints one line on stderr:
 *   cupti_raw: mode=... records kernel=N memcpy=N memset=N sync=N api=N
 *   other=N dropped=N buffers=N
 * Built with the tree (bench/meson.build), declarations from
 * plugins/cuda/gpu/cupti_abi.h: no CUDA toolkit needed.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cupti_abi.h"
#include "cupti_cbids.h"

#define EXPORT __attribute__((visibility("default")))
#define POOL_MAX 64

/* One state per process: CUPTI's callbacks carry no argument. */
static struct {
	nt_cupti_result (*get_next)(uint8_t *, size_t, struct nt_cupti_activity **);
	nt_cupti_result (*flush_all)(uint32_t);
	nt_cupti_result (*dropped)(void *, uint32_t, size_t *);
	pthread_mutex_t lock;
	uint8_t *pool[POOL_MAX];
	int n_pool;
	size_t buf_size;
	bool zeroed;
	unsigned long long n_kernel, n_memcpy, n_memset, n_sync, n_api, n_other, n_buffers;
	char mode[256];
} raw = { .lock = PTHREAD_MUTEX_INITIALIZER };

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static bool wants(const char *what)
{
	size_t n = strlen(what);

	for (const char *p = raw.mode; (p = strstr(p, what)); p += n)
		if ((p == raw.mode || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

static void on_request(uint8_t **buffer, size_t *size, size_t *max_records)
{
	pthread_mutex_lock(&raw.lock);
	*buffer = raw.n_pool ? raw.pool[--raw.n_pool] : NULL;
	pthread_mutex_unlock(&raw.lock);
	if (!*buffer)
		*buffer = calloc(1, raw.buf_size);
	*size = *buffer ? raw.buf_size : 0;
	*max_records = 0;
}

static void count(const struct nt_cupti_activity *r)
{
	switch (r->kind) {
	case NT_CUPTI_KIND_KERNEL: case NT_CUPTI_KIND_CONCURRENT_KERNEL: raw.n_kernel++; break;
	case NT_CUPTI_KIND_MEMCPY: raw.n_memcpy++; break;
	case NT_CUPTI_KIND_MEMSET: raw.n_memset++; break;
	case NT_CUPTI_KIND_SYNCHRONIZATION: raw.n_sync++; break;
	case NT_CUPTI_KIND_RUNTIME: case NT_CUPTI_KIND_DRIVER: raw.n_api++; break;
	default: raw.n_other++;
	}
}

static void on_complete(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
	struct nt_cupti_activity *r = NULL;

	(void)ctx;
	(void)stream;
	(void)size;
	pthread_mutex_lock(&raw.lock);
	raw.n_buffers++;
	while (raw.get_next(buffer, valid, &r) == NT_CUPTI_SUCCESS)
		count(r);
	pthread_mutex_unlock(&raw.lock);
	if (raw.zeroed)
		memset(buffer, 0, raw.buf_size);
	pthread_mutex_lock(&raw.lock);
	if (raw.n_pool < POOL_MAX) {
		raw.pool[raw.n_pool++] = buffer;
		buffer = NULL;
	}
	pthread_mutex_unlock(&raw.lock);
	free(buffer);
}

static void at_exit(void)
{
	size_t dropped = 0;

	raw.flush_all(NT_CUPTI_FLUSH_FORCED);
	if (raw.dropped)
		raw.dropped(NULL, 0, &dropped);
	fprintf(stderr, "cupti_raw: mode=%s records kernel=%llu memcpy=%llu memset=%llu sync=%llu "
		"api=%llu other=%llu dropped=%zu buffers=%llu\n", raw.mode, raw.n_kernel,
		raw.n_memcpy, raw.n_memset, raw.n_sync, raw.n_api, raw.n_other, dropped,
		raw.n_buffers);
}

/* The API records: every function cuda_gpu's join uses, or the launches. */
static void enable_api(void *h, bool launches_only)
{
	nt_cupti_result (*rt)(nt_cupti_cbid, uint8_t), (*drv)(nt_cupti_cbid, uint8_t);
	nt_cupti_result (*tid)(uint32_t);
	static const uint32_t rt_launch[] = { 211, 430 }, drv_launch[] = { 307, 652 };

	*(void **)&rt = dlsym(h, "cuptiActivityEnableRuntimeApi");
	*(void **)&drv = dlsym(h, "cuptiActivityEnableDriverApi");
	*(void **)&tid = dlsym(h, "cuptiSetThreadIdType");
	if (!rt || !drv)
		return;
	if (tid)
		tid(NT_CUPTI_THREAD_ID_SYSTEM);
	if (launches_only) {
		for (size_t i = 0; i < 2; i++) {
			rt(rt_launch[i], 1);
			drv(drv_launch[i], 1);
		}
		return;
	}
	for (size_t i = 0; i < sizeof(nt_cupti_runtime_cbids) / sizeof(nt_cupti_runtime_cbids[0]); i++)
		rt(nt_cupti_runtime_cbids[i].cbid, 1);
	for (size_t i = 0; i < sizeof(nt_cupti_driver_cbids) / sizeof(nt_cupti_driver_cbids[0]); i++)
		drv(nt_cupti_driver_cbids[i].cbid, 1);
}

static void enable_kinds(nt_cupti_result (*enable)(uint32_t))
{
	static const struct { const char *name; uint32_t kind; } kinds[] = {
		{ "kernel", NT_CUPTI_KIND_CONCURRENT_KERNEL }, { "memcpy", NT_CUPTI_KIND_MEMCPY },
		{ "memset", NT_CUPTI_KIND_MEMSET }, { "sync", NT_CUPTI_KIND_SYNCHRONIZATION },
	};

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (wants(kinds[i].name))
			enable(kinds[i].kind);
}

EXPORT int InitializeInjection(void)
{
	const char *path = getenv("RAW_CUPTI"), *mode = getenv("RAW_MODE"), *kb = getenv("RAW_BUF_KB");
	nt_cupti_result (*reg)(nt_cupti_buf_request_fn, nt_cupti_buf_complete_fn);
	nt_cupti_result (*enable)(uint32_t), (*ts)(nt_cupti_timestamp_fn);
	nt_cupti_result (*attr)(uint32_t, size_t *, void *);
	void *h = dlopen(path ? path : "libcupti.so.13", RTLD_NOW | RTLD_LOCAL);

	snprintf(raw.mode, sizeof(raw.mode), "%s", mode ? mode : "kernel");
	raw.buf_size = (size_t)(kb && atoi(kb) > 0 ? atoi(kb) : 2048) << 10;
	if (!h) {
		fprintf(stderr, "cupti_raw: cannot load %s: %s\n", path ? path : "libcupti.so.13", dlerror());
		return 1;
	}
	*(void **)&reg = dlsym(h, "cuptiActivityRegisterCallbacks");
	*(void **)&enable = dlsym(h, "cuptiActivityEnable");
	*(void **)&ts = dlsym(h, "cuptiActivityRegisterTimestampCallback");
	*(void **)&attr = dlsym(h, "cuptiActivitySetAttribute");
	*(void **)&raw.get_next = dlsym(h, "cuptiActivityGetNextRecord");
	*(void **)&raw.flush_all = dlsym(h, "cuptiActivityFlushAll");
	*(void **)&raw.dropped = dlsym(h, "cuptiActivityGetNumDroppedRecords");
	if (!reg || !enable || !raw.get_next || !raw.flush_all) {
		fprintf(stderr, "cupti_raw: %s lacks the activity API\n", path ? path : "libcupti.so.13");
		return 1;
	}
	if (wants("ts") && ts)
		ts(mono_ns);
	if (wants("zeroed") && attr) {
		uint8_t one = 1;
		size_t len = 1;

		raw.zeroed = attr(NT_CUPTI_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &len, &one) == NT_CUPTI_SUCCESS;
	}
	if (wants("none"))
		return 1;
	if (reg(on_request, on_complete) != NT_CUPTI_SUCCESS) {
		fprintf(stderr, "cupti_raw: cuptiActivityRegisterCallbacks failed\n");
		return 1;
	}
	enable_kinds(enable);
	if (wants("api") || wants("api_launch"))
		enable_api(h, !wants("api"));
	atexit(at_exit);
	return 1;
}
