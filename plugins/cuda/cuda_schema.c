/* SPDX-License-Identifier: MIT */
/*
 * cuda probe, user side: the schemas of the published records (cuda.h) and
 * the metric families, as data.
 */
#include "cuda_plugin.h"

/* ------------------------------------------------------------------ */
/* Schemas                                                             */
/* ------------------------------------------------------------------ */

#define COMMON(T)                                                              \
	NT_FIELD(T, cgroup_id, NT_F_U64, "", "cgroup v2 id of the calling thread"), \
	NT_FIELD(T, duration_ns, NT_F_U64, "ns", "time spent in the call (0 unless measured)"), \
	NT_FIELD(T, api, NT_F_U16, "", "API function id (plugins/cuda/cuda_api.h)"), \
	NT_FIELD(T, layer, NT_F_U8, "", "1 runtime (libcudart), 2 driver (libcuda), 3 function table"), \
	NT_FIELD(T, flags, NT_F_U8, "", "1 return measured, 2 async, 4 per-thread default stream, 8 static runtime"), \
	NT_FIELD(T, ret, NT_F_S32, "", "return code: cudaError_t (runtime) or CUresult (driver)"), \
	NT_FIELD(T, device, NT_F_S32, "", "device ordinal, -1 unknown")

#define F(T, m, t, u, d) NT_FIELD(T, m, t, u, d)

static const struct nt_field alloc_fields[] = {
	COMMON(struct nt_cuda_alloc),
	F(struct nt_cuda_alloc, ptr, NT_F_HEX64, "", "pointer returned (0 on failure)"),
	F(struct nt_cuda_alloc, size, NT_F_U64, "bytes", "bytes requested"),
	F(struct nt_cuda_alloc, stream, NT_F_HEX64, "", "stream (async allocations)"),
	F(struct nt_cuda_alloc, outstanding_bytes, NT_F_U64, "bytes", "live bytes of this kind on this device for the process after the call"),
	F(struct nt_cuda_alloc, stack_id, NT_F_HEX64, "", "hash of the raw stack (0: none)"),
	F(struct nt_cuda_alloc, kind, NT_F_U32, "", "1 device, 2 managed, 3 pinned host, 4 stream-ordered (async)"),
	F(struct nt_cuda_alloc, alloc_flags, NT_F_U32, "", "flags passed (cudaHostAlloc, cudaMallocManaged)"),
	F(struct nt_cuda_alloc, api_name, NT_F_VSTR, "", "function called"),
	F(struct nt_cuda_alloc, stack, NT_F_VSTR, "", "symbolized frames, root first (the probed function last), ';'-separated"),
};

static const struct nt_field free_fields[] = {
	COMMON(struct nt_cuda_free),
	F(struct nt_cuda_free, ptr, NT_F_HEX64, "", "pointer freed"),
	F(struct nt_cuda_free, size, NT_F_U64, "bytes", "bytes of the block (0: allocation not seen)"),
	F(struct nt_cuda_free, stream, NT_F_HEX64, "", "stream (async frees)"),
	F(struct nt_cuda_free, outstanding_bytes, NT_F_U64, "bytes", "live bytes of this kind on this device after the call"),
	F(struct nt_cuda_free, stack_id, NT_F_HEX64, "", "hash of the raw stack (0: none)"),
	F(struct nt_cuda_free, alloc_ts_ns, NT_F_U64, "ns", "CLOCK_MONOTONIC time of the matching allocation (0 unknown)"),
	F(struct nt_cuda_free, kind, NT_F_U32, "", "kind of the block (as in cuda.alloc)"),
	F(struct nt_cuda_free, api_name, NT_F_VSTR, "", "function called"),
	F(struct nt_cuda_free, stack, NT_F_VSTR, "", "symbolized frames, root first (the probed function last), ';'-separated"),
};

static const struct nt_field memcpy_fields[] = {
	COMMON(struct nt_cuda_memcpy),
	F(struct nt_cuda_memcpy, dst, NT_F_HEX64, "", "destination"),
	F(struct nt_cuda_memcpy, src, NT_F_HEX64, "", "source"),
	F(struct nt_cuda_memcpy, bytes, NT_F_U64, "bytes", "bytes copied"),
	F(struct nt_cuda_memcpy, stream, NT_F_HEX64, "", "stream (async copies)"),
	F(struct nt_cuda_memcpy, direction, NT_F_U32, "", "1 h2d, 2 d2h, 3 d2d, 4 h2h, 5 p2p, 0 unknown"),
	F(struct nt_cuda_memcpy, src_device, NT_F_S32, "", "source device of peer copies, else -1"),
	F(struct nt_cuda_memcpy, api_name, NT_F_VSTR, "", "function called"),
};

static const struct nt_field memset_fields[] = {
	COMMON(struct nt_cuda_memset),
	F(struct nt_cuda_memset, ptr, NT_F_HEX64, "", "destination"),
	F(struct nt_cuda_memset, bytes, NT_F_U64, "bytes", "bytes set"),
	F(struct nt_cuda_memset, stream, NT_F_HEX64, "", "stream (async sets)"),
	F(struct nt_cuda_memset, value, NT_F_U32, "", "value"),
	F(struct nt_cuda_memset, api_name, NT_F_VSTR, "", "function called"),
};

static const struct nt_field launch_fields[] = {
	COMMON(struct nt_cuda_launch),
	F(struct nt_cuda_launch, func, NT_F_HEX64, "", "runtime: host stub address; driver: CUfunction/CUkernel handle"),
	F(struct nt_cuda_launch, stream, NT_F_HEX64, "", "stream"),
	F(struct nt_cuda_launch, stack_id, NT_F_HEX64, "", "hash of the raw stack (0: none)"),
	F(struct nt_cuda_launch, grid_x, NT_F_U32, "", "grid x"),
	F(struct nt_cuda_launch, grid_y, NT_F_U32, "", "grid y"),
	F(struct nt_cuda_launch, grid_z, NT_F_U32, "", "grid z"),
	F(struct nt_cuda_launch, block_x, NT_F_U32, "", "block x"),
	F(struct nt_cuda_launch, block_y, NT_F_U32, "", "block y"),
	F(struct nt_cuda_launch, block_z, NT_F_U32, "", "block z"),
	F(struct nt_cuda_launch, shared_mem, NT_F_U32, "bytes", "dynamic shared memory"),
	F(struct nt_cuda_launch, kernel, NT_F_VSTR, "", "demangled kernel name (\"\" unknown)"),
	F(struct nt_cuda_launch, api_name, NT_F_VSTR, "", "function called"),
	F(struct nt_cuda_launch, stack, NT_F_VSTR, "", "symbolized frames, root first (the probed function last), ';'-separated"),
};

static const struct nt_field graph_fields[] = {
	COMMON(struct nt_cuda_graph_launch),
	F(struct nt_cuda_graph_launch, graph_exec, NT_F_HEX64, "", "executable graph"),
	F(struct nt_cuda_graph_launch, stream, NT_F_HEX64, "", "stream"),
	F(struct nt_cuda_graph_launch, api_name, NT_F_VSTR, "", "function called"),
};

static const struct nt_field sync_fields[] = {
	COMMON(struct nt_cuda_sync),
	F(struct nt_cuda_sync, handle, NT_F_HEX64, "", "stream or event (0 device)"),
	F(struct nt_cuda_sync, sync_kind, NT_F_U32, "", "1 device, 2 stream, 3 event"),
	F(struct nt_cuda_sync, api_name, NT_F_VSTR, "", "function called"),
};

static const struct nt_field enter_fields[] = {
	COMMON(struct nt_cuda_enter),
	F(struct nt_cuda_enter, handle, NT_F_HEX64, "", "stream or event, 0 none"),
	F(struct nt_cuda_enter, bytes, NT_F_U64, "bytes", "bytes of a copy or set"),
	F(struct nt_cuda_enter, family, NT_F_U32, "", "3 memcpy, 4 memset, 7 sync"),
	F(struct nt_cuda_enter, api_name, NT_F_VSTR, "", "function entered"),
};

static const struct nt_field error_fields[] = {
	COMMON(struct nt_cuda_error),
	F(struct nt_cuda_error, size, NT_F_U64, "bytes", "bytes requested/copied/set, 0 otherwise"),
	F(struct nt_cuda_error, handle, NT_F_HEX64, "", "pointer, stream or handle the call was given"),
	F(struct nt_cuda_error, stack_id, NT_F_HEX64, "", "hash of the raw stack (0: none)"),
	F(struct nt_cuda_error, api_name, NT_F_VSTR, "", "function that failed"),
	F(struct nt_cuda_error, error_name, NT_F_VSTR, "", "name of the return code"),
	F(struct nt_cuda_error, stack, NT_F_VSTR, "", "symbolized frames (allocations with stacks = true)"),
};

static const struct nt_field call_fields[] = {
	COMMON(struct nt_cuda_call),
	F(struct nt_cuda_call, threshold_ns, NT_F_U64, "ns", "the entry's threshold"),
	F(struct nt_cuda_call, ret64, NT_F_HEX64, "", "integer return register"),
	F(struct nt_cuda_call, stack_id, NT_F_HEX64, "", "hash of the raw stack (0: none)"),
	F(struct nt_cuda_call, library, NT_F_VSTR, "", "function-table library"),
	F(struct nt_cuda_call, symbol, NT_F_VSTR, "", "function"),
	F(struct nt_cuda_call, stack, NT_F_VSTR, "", "symbolized frames of the caller (stacks = true)"),
};

static const struct nt_field library_fields[] = {
	COMMON(struct nt_cuda_library),
	F(struct nt_cuda_library, base, NT_F_HEX64, "", "load address (0 unknown)"),
	F(struct nt_cuda_library, n_probes, NT_F_U32, "count", "uprobes attached in it"),
	F(struct nt_cuda_library, is_static, NT_F_U32, "", "1: a runtime linked into this object"),
	F(struct nt_cuda_library, path, NT_F_VSTR, "", "file probed"),
	F(struct nt_cuda_library, version, NT_F_VSTR, "", "what it is: runtime, driver, functions"),
};

static const struct nt_field report_fields[] = {
	F(struct nt_cuda_report, cgroup_id, NT_F_U64, "", "cgroup v2 id"),
	F(struct nt_cuda_report, subject_pid, NT_F_U32, "", "process summarized"),
	F(struct nt_cuda_report, text, NT_F_VSTR, "", "summary table"),
};

#define SCHEMA(n, d, f, T)                                                     \
	{ .name = (n), .desc = (d), .fields = (f), .n_fields = NT_ARRAY_LEN(f), \
	  .min_size = sizeof(T) }

const struct nt_schema cuda_schemas[NT_CUDA_EVT_N] = {
	[NT_CUDA_EVT_ALLOC] = SCHEMA(NT_CUDA_EV_ALLOC, "a CUDA allocation call (device, managed, pinned host, async)", alloc_fields, struct nt_cuda_alloc),
	[NT_CUDA_EVT_FREE] = SCHEMA(NT_CUDA_EV_FREE, "a CUDA free call", free_fields, struct nt_cuda_free),
	[NT_CUDA_EVT_MEMCPY] = SCHEMA(NT_CUDA_EV_MEMCPY, "a CUDA memory copy", memcpy_fields, struct nt_cuda_memcpy),
	[NT_CUDA_EVT_MEMSET] = SCHEMA(NT_CUDA_EV_MEMSET, "a CUDA memset", memset_fields, struct nt_cuda_memset),
	[NT_CUDA_EVT_LAUNCH] = SCHEMA(NT_CUDA_EV_LAUNCH, "a kernel launch (launch_events = true)", launch_fields, struct nt_cuda_launch),
	[NT_CUDA_EVT_GRAPH] = SCHEMA(NT_CUDA_EV_GRAPH, "a CUDA graph launch", graph_fields, struct nt_cuda_graph_launch),
	[NT_CUDA_EVT_SYNC] = SCHEMA(NT_CUDA_EV_SYNC, "time a thread blocked in a device/stream/event synchronisation", sync_fields, struct nt_cuda_sync),
	[NT_CUDA_EVT_ENTER] = SCHEMA(NT_CUDA_EV_ENTER, "a thread entered a call that may block (enter_events = true)", enter_fields, struct nt_cuda_enter),
	[NT_CUDA_EVT_ERROR] = SCHEMA(NT_CUDA_EV_ERROR, "a probed CUDA call returned an error", error_fields, struct nt_cuda_error),
	[NT_CUDA_EVT_CALL] = SCHEMA(NT_CUDA_EV_CALL, "a function-table call slower than its threshold", call_fields, struct nt_cuda_call),
	[NT_CUDA_EVT_LIBRARY] = SCHEMA(NT_CUDA_EV_LIBRARY, "a library the probe attached to", library_fields, struct nt_cuda_library),
	[NT_CUDA_EVT_REPORT] = SCHEMA(NT_CUDA_EV_REPORT, "per-process CUDA summary at exit", report_fields, struct nt_cuda_report),
};

/* ------------------------------------------------------------------ */
/* Metrics                                                             */
/* ------------------------------------------------------------------ */

static const char *const l_kernel[] = { "pid", "kernel" };
static const char *const l_pid[] = { "pid" };
static const char *const l_named[] = { "pid", "method" };
static const char *const l_mem[] = { "pid", "device", "kind" };
static const char *const l_dir[] = { "pid", "direction" };
static const char *const l_sync[] = { "pid", "kind" };
static const char *const l_err[] = { "pid", "function", "error" };
static const char *const l_fn[] = { "pid", "library", "function" };
static const char *const l_hit[] = { "function" };


static const double fn_bounds[NT_CUDA_FN_BUCKETS] = {
	1e-6, 4e-6, 16e-6, 64e-6, 256e-6, 1e-3, 4e-3, 16e-3, 64e-3, 0.256,
	1.0, 4.0,
};

const struct nt_metric_desc cuda_metric_tmpl[M_N] = {
	[M_LAUNCH] = { "ntcore_cuda_launches_total", "Kernel launches per kernel", NT_METRIC_COUNTER, 2, l_kernel, NULL, 0, 0 },
	[M_GRAPH] = { "ntcore_cuda_graph_launches_total", "CUDA graph launches", NT_METRIC_COUNTER, 1, l_pid, NULL, 0, 0 },
	[M_DEVBYTES] = { "ntcore_cuda_memory_bytes", "Outstanding (allocated, not freed) bytes per process, device and kind", NT_METRIC_GAUGE, 3, l_mem, NULL, 0, 0 },
	[M_ALLOC_BYTES] = { "ntcore_cuda_alloc_bytes_total", "Bytes allocated", NT_METRIC_COUNTER, 3, l_mem, NULL, 0, 0 },
	[M_ALLOCS] = { "ntcore_cuda_allocs_total", "Successful allocation calls", NT_METRIC_COUNTER, 3, l_mem, NULL, 0, 0 },
	[M_FREE_BYTES] = { "ntcore_cuda_free_bytes_total", "Bytes freed (blocks whose allocation was seen)", NT_METRIC_COUNTER, 3, l_mem, NULL, 0, 0 },
	[M_FREES] = { "ntcore_cuda_frees_total", "Successful free calls", NT_METRIC_COUNTER, 3, l_mem, NULL, 0, 0 },
	[M_COPY_BYTES] = { "ntcore_cuda_copy_bytes_total", "Bytes copied per direction (h2d, d2h, d2d, h2h, p2p)", NT_METRIC_COUNTER, 2, l_dir, NULL, 0, 0 },
	[M_COPIES] = { "ntcore_cuda_copies_total", "Copies per direction", NT_METRIC_COUNTER, 2, l_dir, NULL, 0, 0 },
	[M_COPY_SEC] = { "ntcore_cuda_copy_seconds_total", "Time spent in synchronous copies per direction", NT_METRIC_COUNTER, 2, l_dir, NULL, 0, 0 },
	[M_COPY_BW] = { "ntcore_cuda_copy_bandwidth_bytes_per_second", "Bandwidth of synchronous copies per direction (bytes / time in the calls, since start)", NT_METRIC_GAUGE, 2, l_dir, NULL, 0, 0 },
	[M_SYNC_SEC] = { "ntcore_cuda_sync_seconds_total", "Time threads blocked in synchronisation (device, stream, event)", NT_METRIC_COUNTER, 2, l_sync, NULL, 0, 0 },
	[M_SYNCS] = { "ntcore_cuda_syncs_total", "Synchronisation calls", NT_METRIC_COUNTER, 2, l_sync, NULL, 0, 0 },
	[M_ERRORS] = { "ntcore_cuda_api_errors_total", "Failed CUDA calls per function and error name", NT_METRIC_COUNTER, 3, l_err, NULL, 0, 0 },
	[M_CALLS] = { "ntcore_cuda_calls_total", "Function-table calls", NT_METRIC_COUNTER, 3, l_fn, NULL, 0, 0 },
	[M_CALL_SEC] = { "ntcore_cuda_call_seconds", "Function-table call latency", NT_METRIC_HISTOGRAM, 3, l_fn, fn_bounds, NT_CUDA_FN_BUCKETS, 0 },
	[M_NAMED] = { "ntcore_cuda_launches_named_total", "Kernel launches by how the kernel's name was found (load, symbol, join, memory; none: unnamed)", NT_METRIC_COUNTER, 2, l_named, NULL, 0, 0 },
	[M_HITS] = { "ntcore_cuda_probe_hits_total", "Uprobe hits per probed function, every process using the library (each hit is a trap: the probe's cost)", NT_METRIC_COUNTER, 1, l_hit, NULL, 0, 0 },
	[M_SLOW] = { "ntcore_cuda_slow_calls_total", "Function-table calls over the entry's threshold", NT_METRIC_COUNTER, 3, l_fn, NULL, 0, 0 },
};
