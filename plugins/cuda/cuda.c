/* SPDX-License-Identifier: MIT */
/*
 * cuda probe, user side: finds the CUDA runtime (libcudart, shared or linked
 * statically) and driver (libcuda) each target really uses, attaches the
 * uprobes of cuda.bpf.c to them (and to the config's function table), turns
 * the raw records into cuda.* events (cuda_decode.c) and keeps the metrics.
 * See docs/cuda.md for the events, metrics, keys and what it cannot see.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/links.h"
#include "ntcore/plugin.h"

#include "cuda.bpf.skel.h"
#include "cuda_decode.h"
#include "cuda_lib.h"
#include "uprobes.h"

enum { TOK_RING = 1, TOK_TICK = 2 };

/* Gauges of an exited process are removed this many ticks later. */
#define DEAD_TICKS 2

/* ------------------------------------------------------------------ */
/* Config                                                              */
/* ------------------------------------------------------------------ */

struct fn_cfg {
	const char *library;
	struct nt_strlist symbols;
	double threshold_ms;
};

struct cuda_cfg {
	const char *launch_layer;
	bool stacks;
	int64_t stack_depth;
	bool launch_events;
	bool enter_events;
	bool stop_on_load;
	bool watch_libraries;
	struct nt_strlist libraries;
	int64_t interval_ms;
	int64_t ringbuf_kb;
	bool report;
	int64_t max_series;
	struct nt_cfg_array functions;
};

static const char *const layer_choices[] = { "auto", "runtime", "driver",
					     "both", NULL };

#define KEY(k, t, d, lo, hi, text)                                             \
	{ .key = #k, .type = (t), .offset = offsetof(struct cuda_cfg, k),      \
	  .def = (d), .min = (lo), .max = (hi), .desc = (text) }

static const struct nt_cfg_key fn_keys[] = {
	{ .key = "library", .type = NT_CFG_STRING,
	  .offset = offsetof(struct fn_cfg, library), .def = NULL,
	  .min = 1, .max = 0,
	  .desc = "library: a name (\"cublas\" matches libcublas.so*), a basename prefix (\"libcublasLt\") or an absolute path" },
	{ .key = "symbols", .type = NT_CFG_STRING_LIST,
	  .offset = offsetof(struct fn_cfg, symbols), .def = NULL,
	  .min = 1, .max = 0, .desc = "exported function names to probe" },
	{ .key = "threshold_ms", .type = NT_CFG_FLOAT,
	  .offset = offsetof(struct fn_cfg, threshold_ms), .def = "10.0",
	  .min = 0, .max = 3600000,
	  .desc = "calls at least this slow publish a cuda.call event (0: none)" },
};

static const struct nt_cfg_key cuda_config[] = {
	{ .key = "launch_layer", .type = NT_CFG_STRING,
	  .offset = offsetof(struct cuda_cfg, launch_layer), .def = "\"auto\"",
	  .min = 1, .max = 0, .choices = layer_choices,
	  .desc = "where kernel launches are probed (one probe hit per launch): auto, runtime (cudaLaunchKernel), driver (cuLaunchKernel), both (two hits)" },
	KEY(stacks, NT_CFG_BOOL, "false", 1, 0,
	    "record the CPU call stack at allocations, frees, graph launches and (with launch_events) launches"),
	KEY(stack_depth, NT_CFG_INT, "16", 1, NT_CUDA_STACK_MAX,
	    "frames kept in a symbolized stack"),
	KEY(launch_events, NT_CFG_BOOL, "false", 1, 0,
	    "publish one cuda.launch event per kernel launch (counts per kernel are metrics either way)"),
	KEY(enter_events, NT_CFG_BOOL, "false", 1, 0,
	    "publish cuda.enter when a thread enters a call that may block (sync, synchronous copy/set): for hang detection"),
	KEY(stop_on_load, NT_CFG_BOOL, "true", 1, 0,
	    "stop a target (SIGSTOP/SIGCONT) while probes are attached to a CUDA library it just opened or a binary it exec'd, so no call is missed"),
	KEY(watch_libraries, NT_CFG_BOOL, "true", 1, 0,
	    "check every shared object a target opens for a statically linked CUDA runtime (targets only)"),
	{ .key = "libraries", .type = NT_CFG_STRING_LIST,
	  .offset = offsetof(struct cuda_cfg, libraries), .def = "[]",
	  .min = 1, .max = 0,
	  .desc = "extra CUDA runtime/driver files (or glob patterns) to probe from the start" },
	KEY(interval_ms, NT_CFG_INT, "1000", 50, 3600000,
	    "how often launch counts and function-table statistics are copied into the metrics (ms)"),
	KEY(ringbuf_kb, NT_CFG_INT, "0", 0, 1048576,
	    "BPF ring buffer size in KiB (a power of two); 0: 8192 with launch_events, else 2048 (the ring is mapped into ntcore: it counts in its RSS)"),
	KEY(report, NT_CFG_BOOL, "true", 1, 0,
	    "publish a cuda.report text summary when a traced process exits"),
	KEY(max_series, NT_CFG_INT, "10000", 16, 1000000,
	    "label sets kept per metric family"),
	{ .key = "functions", .type = NT_CFG_GROUP_LIST,
	  .offset = offsetof(struct cuda_cfg, functions), .def = NULL,
	  .min = 1, .max = 0, .sub = fn_keys, .n_sub = NT_ARRAY_LEN(fn_keys),
	  .sub_size = sizeof(struct fn_cfg),
	  .desc = "function table: ( { library = \"cublas\"; symbols = [ \"cublasGemmEx\" ]; threshold_ms = 5.0; } , ... ): counts, latency histograms, slow-call events" },
};

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

static const struct nt_schema schemas[NT_CUDA_EVT_N] = {
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
static const char *const l_mem[] = { "pid", "device", "kind" };
static const char *const l_dir[] = { "pid", "direction" };
static const char *const l_sync[] = { "pid", "kind" };
static const char *const l_err[] = { "pid", "function", "error" };
static const char *const l_fn[] = { "pid", "library", "function" };

enum {
	M_LAUNCH, M_GRAPH, M_DEVBYTES, M_ALLOC_BYTES, M_ALLOCS, M_FREE_BYTES,
	M_FREES, M_COPY_BYTES, M_COPIES, M_COPY_SEC, M_COPY_BW, M_SYNC_SEC,
	M_SYNCS, M_ERRORS, M_CALLS, M_CALL_SEC, M_SLOW, M_N
};

static const double fn_bounds[NT_CUDA_FN_BUCKETS] = {
	1e-6, 4e-6, 16e-6, 64e-6, 256e-6, 1e-3, 4e-3, 16e-3, 64e-3, 0.256,
	1.0, 4.0,
};

static const struct nt_metric_desc metric_tmpl[M_N] = {
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
	[M_SLOW] = { "ntcore_cuda_slow_calls_total", "Function-table calls over the entry's threshold", NT_METRIC_COUNTER, 3, l_fn, NULL, 0, 0 },
};

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

struct lib {
	uint64_t dev, ino;
	char *path;
	int kind; /* enum nt_cuda_libkind, or -1: checked, nothing to probe */
	bool is_static;
	struct nt_uprobes up;     /* its links (uprobes.h) */
	/* auto layer, no driver known: this runtime's launch probes, apart,
	 * to be detached when a driver shows up (launch_fallback_end) */
	struct nt_uprobes fallback;
};

struct fn_entry {
	char *library;
	char *symbol;
	uint64_t threshold_ns;
};

/* Last launch count seen per BPF key (for metric deltas). */
struct lcount {
	struct nt_cuda_launch_key key;
	uint64_t count;
	int32_t slot; /* fast-path slot in lslots, -1 none */
	bool used;
};

/* Last function-table stats seen per (pid, fn). */
struct fcount {
	struct nt_cuda_fn_key key;
	struct nt_cuda_fn_stats st;
	bool used;
};

struct cuda {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct cuda_cfg *cfg;
	int types[NT_CUDA_EVT_N];
	struct nt_metric_desc mdesc[M_N];
	struct nt_metric *m[M_N];
	struct nt_cuda_state st;
	struct cuda_bpf *skel;
	struct bpf_link *tp_links[3];
	struct ring_buffer *rb;
	struct lib *libs;
	size_t nlibs, caplibs;
	struct fn_entry *fns;
	size_t nfns;
	struct lcount *lc; /* open addressing */
	struct nt_cuda_lslot *lslots; /* mmapped BPF array (fast launch path) */
	size_t lslots_len;
	size_t nlc, caplc;
	struct fcount *fc;
	size_t nfc, capfc;
	int layer_launch; /* bit 1: runtime, bit 2: driver */
	bool auto_layer;  /* launch_layer = "auto" (see launch_fallback_*) */
	size_t n_driver_libs;
	bool fallback_on; /* launches probed at the runtime layer for now */
	uint32_t handover_until; /* tick at which the hand-over is over */
	uint32_t opener_tid; /* the thread whose open is being handled, or 0 */
	bool multi;       /* kernel has uprobe_multi links (6.6+) */
	bool attached;
	uint64_t drops_reported;
	uint64_t probes;
	uint32_t tick;
	struct nt_cuda_rec rec[2];
	char pidbuf[16];
};

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

static int sym_cb(void *arg, uint32_t pid, uint64_t addr, struct nt_symbol *out)
{
	struct cuda *c = arg;

	return c->host->symbolize(c->inst, pid, addr, out);
}

static const char *pid_s(struct cuda *c, uint32_t pid)
{
	snprintf(c->pidbuf, sizeof(c->pidbuf), "%u", pid);
	return c->pidbuf;
}

static uint64_t lkey_hash(const struct nt_cuda_launch_key *k)
{
	return nt_cuda_mix64(k->func ^ ((uint64_t)k->tgid << 32) ^ k->api);
}

static struct lcount *lc_get(struct cuda *c, const struct nt_cuda_launch_key *k)
{
	size_t i;

	if ((c->nlc + 1) * 2 > c->caplc) {
		size_t ncap = c->caplc ? c->caplc * 2 : 256;
		struct lcount *n = calloc(ncap, sizeof(*n));

		if (!n)
			return NULL;
		for (size_t j = 0; j < c->caplc; j++) {
			if (!c->lc[j].used)
				continue;
			for (i = lkey_hash(&c->lc[j].key) & (ncap - 1); n[i].used;
			     i = (i + 1) & (ncap - 1))
				;
			n[i] = c->lc[j];
		}
		free(c->lc);
		c->lc = n;
		c->caplc = ncap;
	}
	for (i = lkey_hash(k) & (c->caplc - 1); c->lc[i].used;
	     i = (i + 1) & (c->caplc - 1))
		if (!memcmp(&c->lc[i].key, k, sizeof(*k)))
			return &c->lc[i];
	c->lc[i].used = true;
	c->lc[i].key = *k;
	c->lc[i].count = 0;
	c->lc[i].slot = -1;
	c->nlc++;
	return &c->lc[i];
}

static struct fcount *fc_get(struct cuda *c, const struct nt_cuda_fn_key *k)
{
	for (size_t i = 0; i < c->nfc; i++)
		if (c->fc[i].key.tgid == k->tgid && c->fc[i].key.fn == k->fn)
			return &c->fc[i];
	if (c->nfc == c->capfc) {
		size_t ncap = c->capfc ? c->capfc * 2 : 64;
		struct fcount *n = realloc(c->fc, ncap * sizeof(*n));

		if (!n)
			return NULL;
		c->fc = n;
		c->capfc = ncap;
	}
	memset(&c->fc[c->nfc], 0, sizeof(c->fc[0]));
	c->fc[c->nfc].key = *k;
	c->fc[c->nfc].used = true;
	return &c->fc[c->nfc++];
}

static const char *mem_kind_label(uint32_t k)
{
	return nt_cuda_mem_kind_name(k);
}

/* ------------------------------------------------------------------ */
/* Publishing and metrics                                              */
/* ------------------------------------------------------------------ */

static void account(struct cuda *c, const struct nt_event_hdr *ev)
{
	const struct nt_host *h = c->host;
	char dev[12];
	const char *pid;

	if ((int)ev->type == c->types[NT_CUDA_EVT_ALLOC]) {
		const struct nt_cuda_alloc *a = (const void *)ev;

		if (a->ret || !a->ptr)
			return;
		pid = pid_s(c, ev->pid);
		snprintf(dev, sizeof(dev), "%d", a->device);
		const char *lv[] = { pid, dev, mem_kind_label(a->kind) };
		h->metric_add(c->m[M_ALLOCS], lv, 1);
		h->metric_add(c->m[M_ALLOC_BYTES], lv, (double)a->size);
		h->metric_set(c->m[M_DEVBYTES], lv, (double)a->outstanding_bytes);
	} else if ((int)ev->type == c->types[NT_CUDA_EVT_FREE]) {
		const struct nt_cuda_free *f = (const void *)ev;

		if (f->ret)
			return;
		pid = pid_s(c, ev->pid);
		snprintf(dev, sizeof(dev), "%d", f->device);
		const char *lv[] = { pid, dev, mem_kind_label(f->kind) };
		h->metric_add(c->m[M_FREES], lv, 1);
		h->metric_add(c->m[M_FREE_BYTES], lv, (double)f->size);
		h->metric_set(c->m[M_DEVBYTES], lv, (double)f->outstanding_bytes);
	} else if ((int)ev->type == c->types[NT_CUDA_EVT_MEMCPY]) {
		const struct nt_cuda_memcpy *m = (const void *)ev;
		struct nt_cuda_proc *p;

		if (m->ret)
			return;
		pid = pid_s(c, ev->pid);
		const char *lv[] = { pid, nt_cuda_dir_name(m->direction) };
		h->metric_add(c->m[M_COPIES], lv, 1);
		h->metric_add(c->m[M_COPY_BYTES], lv, (double)m->bytes);
		if (!(m->flags & NT_CUDA_F_ASYNC)) {
			h->metric_add(c->m[M_COPY_SEC], lv, (double)m->duration_ns / 1e9);
			p = nt_cuda_proc_find(&c->st, ev->pid);
			if (p && m->direction < 6 && p->tot.sync_copy_ns[m->direction])
				h->metric_set(c->m[M_COPY_BW], lv,
					      (double)p->tot.sync_copy_bytes[m->direction] * 1e9 /
						      (double)p->tot.sync_copy_ns[m->direction]);
		}
	} else if ((int)ev->type == c->types[NT_CUDA_EVT_SYNC]) {
		const struct nt_cuda_sync *s = (const void *)ev;
		static const char *const kinds[] = { "unknown", "device", "stream", "event" };

		pid = pid_s(c, ev->pid);
		const char *lv[] = { pid, kinds[s->sync_kind < 4 ? s->sync_kind : 0] };
		h->metric_add(c->m[M_SYNCS], lv, 1);
		h->metric_add(c->m[M_SYNC_SEC], lv, (double)s->duration_ns / 1e9);
	} else if ((int)ev->type == c->types[NT_CUDA_EVT_GRAPH]) {
		const struct nt_cuda_graph_launch *g = (const void *)ev;

		if (g->ret)
			return;
		const char *lv[] = { pid_s(c, ev->pid) };
		h->metric_add(c->m[M_GRAPH], lv, 1);
	} else if ((int)ev->type == c->types[NT_CUDA_EVT_ERROR]) {
		const struct nt_cuda_error *e = (const void *)ev;
		char fn[64], en[64];

		nt_cuda_vstr(ev, e->api_name, fn, sizeof(fn));
		nt_cuda_vstr(ev, e->error_name, en, sizeof(en));
		const char *lv[] = { pid_s(c, ev->pid), fn, en };
		h->metric_add(c->m[M_ERRORS], lv, 1);
	}
}

static void publish(struct cuda *c, struct nt_cuda_rec *r)
{
	account(c, &r->u.hdr);
	c->host->publish(c->inst, &r->u.hdr);
}

/* ------------------------------------------------------------------ */
/* Attaching                                                           */
/* ------------------------------------------------------------------ */

/* Probes of one program in one file, attached together. */
struct batch {
	struct bpf_program *prog;
	bool ret;
	size_t n;
	uint64_t offs[NT_CUDA_API_COUNT + NT_CUDA_FN_MAX];
	uint64_t cookies[NT_CUDA_API_COUNT + NT_CUDA_FN_MAX];
	const char *names[NT_CUDA_API_COUNT + NT_CUDA_FN_MAX];
};

static void batch_add(struct batch *b, uint64_t off, uint64_t cookie,
		      const char *name)
{
	if (b->n >= NT_ARRAY_LEN(b->offs))
		return;
	b->offs[b->n] = off;
	b->cookies[b->n] = cookie;
	b->names[b->n] = name;
	b->n++;
}

static void attach_warn(void *arg, const char *path, const char *name,
			bool ret, int err)
{
	struct cuda *c = arg;

	c->host->log(c->inst, NT_LOG_WARN, "%s: cannot attach %s%s: %s", path,
		     name, ret ? " (return)" : "", strerror(err));
}

static int batch_attach(struct cuda *c, struct lib *l, struct batch *b)
{
	int r = nt_uprobes_attach(&l->up, b->prog, l->path, b->ret, c->multi,
				  b->offs, b->cookies, b->names, b->n,
				  attach_warn, c);

	if (r < 0)
		c->host->log(c->inst, NT_LOG_WARN, "%s: cannot attach %zu %s probes: %s",
			     l->path, b->n, bpf_program__name(b->prog), strerror(-r));
	else
		c->probes += (uint64_t)r;
	return r;
}

static bool launch_layer_on(struct cuda *c, int layer)
{
	return c->layer_launch & (1 << layer);
}

/* auto layer: runtime launches are probed while no driver is known */
static bool launch_fallback_wanted(const struct cuda *c, int layer)
{
	return c->auto_layer && layer == NT_CUDA_LAYER_RUNTIME && !c->n_driver_libs;
}

/* Runtime launch probes of `l`, as a fallback (see launch_fallback_wanted). */
static void launch_fallback_attach(struct cuda *c, struct lib *l,
				   struct batch *rt, struct batch *rt_ex)
{
	struct batch *bs[2] = {rt, rt_ex};

	for (int i = 0; i < 2; i++) {
		int r = bs[i]->n ? nt_uprobes_attach(&l->fallback, bs[i]->prog, l->path,
						     false, c->multi, bs[i]->offs,
						     bs[i]->cookies, bs[i]->names, bs[i]->n,
						     attach_warn, c)
				 : 0;
		if (r < 0) {
			c->probes -= l->fallback.nprobes;
			nt_uprobes_release(&l->fallback);
			return;
		}
		c->probes += (uint64_t)r;
	}
	if (!l->fallback.nprobes)
		return;
	if (!c->fallback_on)
		c->host->log(c->inst, NT_LOG_INFO,
			     "%s: no CUDA driver library (libcuda.so.1) found: launches are probed "
			     "at the runtime layer until one is (launches that bypass this "
			     "runtime, as Triton's and cuBLAS's do, are not seen meanwhile)",
			     l->path);
	c->fallback_on = true;
}

/* Deletes the runtime-launch marks of every thread but `keep`. */
static void forget_rt_marks(struct cuda *c, uint32_t keep)
{
	int fd = bpf_map__fd(c->skel->maps.rt_marks);
	uint32_t key, next, dead[256];
	size_t n = 0;
	bool more = bpf_map_get_next_key(fd, NULL, &next) == 0;

	while (more) {
		key = next;
		more = bpf_map_get_next_key(fd, &key, &next) == 0;
		if (key != keep && n < NT_ARRAY_LEN(dead))
			dead[n++] = key;
		if (n == NT_ARRAY_LEN(dead) || !more) {
			for (size_t i = 0; i < n; i++)
				bpf_map_delete_elem(fd, &dead[i]);
			n = 0;
		}
	}
}

/* A driver library is probed: the runtime-layer launch probes go. */
static void launch_fallback_end(struct cuda *c, const struct lib *drv)
{
	c->n_driver_libs++;
	if (!c->fallback_on)
		return;
	for (size_t i = 0; i < c->nlibs; i++) {
		c->probes -= c->libs[i].fallback.nprobes;
		nt_uprobes_release(&c->libs[i].fallback);
	}
	c->fallback_on = false;
	/* A launch in flight (the opener's, if the runtime loads its driver
	 * inside a launch) reaches both layers: the BPF side counts it once.
	 * The other threads' marks are of launches long done: forget them. */
	uint64_t mark;
	forget_rt_marks(c, c->opener_tid);
	if (c->opener_tid && bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.rt_marks),
						 &c->opener_tid, &mark) == 0) {
		c->skel->bss->handover = true; /* the BPF side ends it */
		c->handover_until = c->tick + 2;
	}
	c->host->log(c->inst, NT_LOG_INFO,
		     "%s: a CUDA driver library: launches are now probed at the driver layer",
		     drv->path);
}

/* Does function-table entry `fe` name this file? */
static bool fn_lib_matches(const struct fn_entry *fe, const char *path,
			   const struct stat *st)
{
	const char *base = strrchr(path, '/');
	size_t n = strlen(fe->library);
	char pfx[256];

	base = base ? base + 1 : path;
	if (fe->library[0] == '/') {
		struct stat s2;

		return stat(fe->library, &s2) == 0 && s2.st_ino == st->st_ino &&
		       s2.st_dev == st->st_dev;
	}
	if (!strncmp(fe->library, "lib", 3))
		return !strncmp(base, fe->library, n);
	snprintf(pfx, sizeof(pfx), "lib%s.so", fe->library);
	return !strncmp(base, pfx, strlen(pfx));
}

static struct lib *lib_find(struct cuda *c, uint64_t dev, uint64_t ino)
{
	for (size_t i = 0; i < c->nlibs; i++)
		if (c->libs[i].dev == dev && c->libs[i].ino == ino)
			return &c->libs[i];
	return NULL;
}

/* Was the program at `path` found to hold a CUDA runtime (linked in)? A
 * short-lived one may exit before its records are read: its memory map
 * is then read while it is held at its exec, to name its stacks. */
static bool exe_has_runtime(struct cuda *c, const char *path)
{
	struct stat st;
	const struct lib *l;

	return stat(path, &st) == 0 && (l = lib_find(c, st.st_dev, st.st_ino)) &&
	       l->kind == NT_CUDA_LIB_RUNTIME;
}

/* The name of a live process (/proc/PID/comm) into an event header. */
static void proc_comm(uint32_t pid, char comm[NT_COMM_LEN])
{
	char path[48], name[NT_COMM_LEN + 2] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	if (!(f = fopen(path, "re")))
		return;
	if (fgets(name, sizeof(name), f)) {
		name[strcspn(name, "\n")] = '\0';
		memset(comm, 0, NT_COMM_LEN);
		memcpy(comm, name, strnlen(name, NT_COMM_LEN));
	}
	fclose(f);
}

static void publish_library(struct cuda *c, const struct lib *l, uint32_t pid,
			    int err, size_t nprobes)
{
	struct nt_cuda_rec *r = &c->rec[0];
	struct nt_cuda_library *e;
	struct timespec ts;
	const char *what;

	memset(r->u.bytes, 0, sizeof(*e));
	e = (void *)r->u.bytes;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	e->hdr.type = (uint32_t)c->types[NT_CUDA_EVT_LIBRARY];
	e->hdr.size = sizeof(*e);
	e->hdr.ts_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	e->hdr.pid = pid;
	e->hdr.tid = pid;
	if (pid)
		proc_comm(pid, e->hdr.comm);
	e->layer = l->kind == NT_CUDA_LIB_RUNTIME ? NT_CUDA_LAYER_RUNTIME
		   : l->kind == NT_CUDA_LIB_DRIVER ? NT_CUDA_LAYER_DRIVER
						    : NT_CUDA_LAYER_USER;
	e->ret = err;
	e->device = -1;
	e->flags = l->is_static ? NT_CUDA_F_STATIC : 0;
	e->n_probes = (uint32_t)nprobes;
	e->is_static = l->is_static;
	what = l->kind == NT_CUDA_LIB_RUNTIME
		       ? (l->is_static ? "runtime (static)" : "runtime")
	       : l->kind == NT_CUDA_LIB_DRIVER ? "driver"
					       : "functions";
	nt_cuda_rec_str(r, &e->path, l->path, strlen(l->path));
	nt_cuda_rec_str(r, &e->version, what, strlen(what));
	c->host->publish(c->inst, &r->u.hdr);
}

/*
 * Probe the file at `path` (openable here: for another mount namespace,
 * /proc/PID/root/...). Deduplicated by inode; a file with nothing to probe
 * is remembered too.
 */
static int probe_file(struct cuda *c, const char *path, uint32_t pid)
{
	size_t nsyms = NT_CUDA_API_COUNT + c->nfns;
	struct nt_cuda_sym *syms;
	struct stat st;
	struct lib *l;
	int kind, found, err = 0;
	size_t before;
	bool fn_any = false;

	if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return -errno ? -errno : -EINVAL;
	if (lib_find(c, st.st_dev, st.st_ino))
		return 0;
	if (c->nlibs == c->caplibs) {
		size_t ncap = c->caplibs ? c->caplibs * 2 : 32;
		struct lib *n = realloc(c->libs, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		c->libs = n;
		c->caplibs = ncap;
	}
	l = &c->libs[c->nlibs++];
	memset(l, 0, sizeof(*l));
	l->dev = st.st_dev;
	l->ino = st.st_ino;
	l->kind = -1;
	l->path = strdup(path);
	if (!l->path)
		return -ENOMEM;

	for (size_t i = 0; i < c->nfns; i++)
		fn_any |= fn_lib_matches(&c->fns[i], path, &st);
	kind = nt_cuda_elf_classify(path);
	if (kind <= 0 && !fn_any)
		return 0; /* nothing here */

	syms = calloc(nsyms, sizeof(*syms));
	if (!syms)
		return -ENOMEM;
	syms[0].name = "";
#define SYMNAME_(id, sym, layer, fam) syms[NT_CUDA_API_##id].name = sym;
	NT_CUDA_APIS(SYMNAME_)
#undef SYMNAME_
	for (size_t i = 0; i < c->nfns; i++)
		syms[NT_CUDA_API_COUNT + i].name =
			fn_lib_matches(&c->fns[i], path, &st) ? c->fns[i].symbol : "";
	found = nt_cuda_elf_lookup(path, syms, nsyms);
	if (found < 0) {
		free(syms);
		return found;
	}
	l->kind = kind > 0 ? kind : NT_CUDA_LIB_NONE;
	l->is_static = kind == NT_CUDA_LIB_RUNTIME && !nt_cuda_name_is_runtime(path);
	before = l->up.nprobes;
	{
		/* 8, 9: runtime launches as the auto layer's fallback */
		static struct batch bt[10]; /* loop thread only: not re-entered */
		struct bpf_program *progs[10] = {
			c->skel->progs.call_enter, c->skel->progs.call_return,
			c->skel->progs.launch_rt, c->skel->progs.launch_rt_ex,
			c->skel->progs.launch_drv, c->skel->progs.launch_drv_ex,
			c->skel->progs.fn_enter, c->skel->progs.fn_return,
			c->skel->progs.launch_rt, c->skel->progs.launch_rt_ex,
		};

		for (int i = 0; i < 10; i++) {
			bt[i].prog = progs[i];
			bt[i].ret = i == 1 || i == 7;
			bt[i].n = 0;
		}
		for (unsigned api = 1; kind > 0 && api < NT_CUDA_API_COUNT; api++) {
			const struct nt_cuda_sym *sy = &syms[api];
			int layer = nt_cuda_api_layer(api);
			int fam = nt_cuda_api_family(api);

			if (!sy->offset)
				continue;
			if ((layer == NT_CUDA_LAYER_RUNTIME) != (kind == NT_CUDA_LIB_RUNTIME))
				continue;
			if (sy->insn == NT_CUDA_INSN_OTHER)
				c->host->log(c->inst, NT_LOG_DEBUG,
					     "%s: %s starts with an instruction the kernel single-steps (slower probe)",
					     path, sy->name);
			if (fam != NT_CUDA_FAM_LAUNCH) {
				batch_add(&bt[0], sy->offset, api, sy->name);
				batch_add(&bt[1], sy->offset, api, sy->name);
				continue;
			}
			bool fallback = launch_fallback_wanted(c, layer);
			if (!launch_layer_on(c, layer) && !fallback)
				continue;
			switch (api) {
			case NT_CUDA_API_cudaLaunchKernelExC:
			case NT_CUDA_API_cudaLaunchKernelExC_ptsz:
				batch_add(&bt[fallback ? 9 : 3], sy->offset, api, sy->name);
				break;
			case NT_CUDA_API_cuLaunchKernelEx:
			case NT_CUDA_API_cuLaunchKernelEx_ptsz:
				batch_add(&bt[5], sy->offset, api, sy->name);
				break;
			default:
				batch_add(fallback ? &bt[8]
					  : layer == NT_CUDA_LAYER_RUNTIME ? &bt[2] : &bt[4],
					  sy->offset, api, sy->name);
			}
		}
		for (size_t i = 0; i < c->nfns; i++) {
			const struct nt_cuda_sym *sy = &syms[NT_CUDA_API_COUNT + i];

			if (!sy->offset)
				continue;
			batch_add(&bt[6], sy->offset, NT_CUDA_FN_BASE + i, sy->name);
			batch_add(&bt[7], sy->offset, NT_CUDA_FN_BASE + i, sy->name);
		}
		/* return probes first: an entry never lacks its return */
		for (int i = 7; i >= 0; i--)
			if (batch_attach(c, l, &bt[i]) < 0)
				err = -EIO;
		if (bt[8].n + bt[9].n)
			launch_fallback_attach(c, l, &bt[8], &bt[9]);
	}
	free(syms);
	if (l->kind == NT_CUDA_LIB_DRIVER && c->auto_layer)
		launch_fallback_end(c, l);
	c->host->log(c->inst, NT_LOG_INFO, "%s: %s, %zu probes attached",
		     path,
		     l->kind == NT_CUDA_LIB_RUNTIME
			     ? (l->is_static ? "CUDA runtime (static)" : "CUDA runtime")
		     : l->kind == NT_CUDA_LIB_DRIVER ? "CUDA driver"
						     : "function table",
		     l->up.nprobes - before);
	publish_library(c, l, pid, err, l->up.nprobes - before);
	return 0;
}

static void probe_file_cb(void *arg, const char *path, uint32_t pid)
{
	probe_file(arg, path, pid);
}

static void scan_pid(struct cuda *c, uint32_t pid)
{
	nt_cuda_scan_files(pid, probe_file_cb, c);
}

static void probe_path_cb(void *arg, const char *path)
{
	probe_file(arg, path, 0);
}

static void scan_default_paths(struct cuda *c)
{
	static const char *const pats[] = {
		"/usr/lib/x86_64-linux-gnu/libcuda.so.1",
		"/usr/lib64/libcuda.so.1",
		"/usr/lib/aarch64-linux-gnu/libcuda.so.1",
		"/usr/local/nvidia/lib64/libcuda.so.1",
		"/usr/lib/wsl/lib/libcuda.so.1",
		"/usr/local/cuda/lib64/libcudart.so.*[0-9]",
		"/usr/local/cuda/targets/*/lib/libcudart.so.*[0-9]",
	};

	nt_cuda_glob_each(pats, NT_ARRAY_LEN(pats), probe_path_cb, c);
	nt_cuda_glob_each(c->cfg->libraries.v, c->cfg->libraries.n,
			  probe_path_cb, c);
}

static int scan_pid_cb(void *arg, uint32_t pid)
{
	scan_pid(arg, pid);
	return 0;
}

static void scan_all_pids(struct cuda *c)
{
	nt_cuda_for_each_pid(scan_pid_cb, c);
}

/* ------------------------------------------------------------------ */
/* Ring buffer                                                         */
/* ------------------------------------------------------------------ */

static void sync_launches(struct cuda *c, uint32_t only_pid,
			  struct nt_cuda_kcount **top, size_t *ntop);
static void forget_launch_keys(struct cuda *c, uint32_t pid);

/* Give (tgid, func) a fast-path slot if its slot is free (see cuda_raw.h). */
static void slot_install(struct cuda *c, uint32_t tgid, uint16_t api,
			 uint64_t func)
{
	struct nt_cuda_launch_key key = { .tgid = tgid, .api = api, .func = func };
	struct nt_cuda_lslot *ls;
	struct lcount *lc;
	uint32_t idx;

	if (!c->lslots || !tgid)
		return;
	lc = lc_get(c, &key);
	if (!lc || lc->slot >= 0)
		return;
	idx = nt_cuda_lslot_idx(tgid, func);
	ls = &c->lslots[idx];
	if (__atomic_load_n(&ls->tgid, __ATOMIC_ACQUIRE))
		return; /* taken: this kernel stays on the hash path */
	__atomic_store_n(&ls->count, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ls->func, func, __ATOMIC_RELAXED);
	__atomic_store_n(&ls->tgid, tgid, __ATOMIC_RELEASE);
	lc->slot = (int32_t)idx;
}

static uint64_t slot_count(struct cuda *c, const struct lcount *lc)
{
	if (!c->lslots || lc->slot < 0)
		return 0;
	return __atomic_load_n(&c->lslots[lc->slot].count, __ATOMIC_ACQUIRE);
}

static void mark_exe_known(struct cuda *c, const struct nt_cuda_raw_path *p)
{
	struct { uint64_t ino; uint32_t dev, pad; } key = { p->ino, p->dev, 0 };
	uint8_t one = 1;

	bpf_map_update_elem(bpf_map__fd(c->skel->maps.exe_known), &key, &one,
			    BPF_ANY);
}

static void on_path(struct cuda *c, const struct nt_cuda_raw_path *p)
{
	char path[NT_CUDA_PATH_MAX + 1], full[NT_CUDA_PATH_MAX + 64];
	uint32_t pid = p->hdr.pid;

	memcpy(path, p->path, NT_CUDA_PATH_MAX);
	path[NT_CUDA_PATH_MAX] = '\0';
	bool cuda_exe = false;

	if (p->hdr.type == NT_CUDA_RAW_EXEC) {
		/* A new image: what we knew of the old one (blocks, kernel
		 * names, launch counters) no longer applies. */
		if (nt_cuda_proc_find(&c->st, pid)) {
			sync_launches(c, pid, NULL, NULL);
			forget_launch_keys(c, pid);
			nt_cuda_proc_drop(&c->st, pid);
		}
		snprintf(full, sizeof(full), "/proc/%u/exe", pid);
		if (probe_file(c, full, pid) < 0) {
			nt_cuda_proc_path(pid, path, full, sizeof(full));
			probe_file(c, full, pid);
		}
		mark_exe_known(c, p);
		cuda_exe = exe_has_runtime(c, full);
	} else {
		nt_cuda_proc_path(pid, path, full, sizeof(full));
		c->opener_tid = p->hdr.tid; /* for a launch-layer hand-over */
		probe_file(c, full, pid);
		c->opener_tid = 0;
	}
	/* While the target is held: have the core read its memory map now, so
	 * its kernels and stacks can be named even if it exits before its
	 * records are read (the symbolizer keeps the map it read). */
	if (p->stopped && (p->hdr.type == NT_CUDA_RAW_OPEN || cuda_exe)) {
		struct nt_symbol sym;

		c->host->symbolize(c->inst, pid, 1, &sym);
	}
	if (p->stopped && kill((pid_t)pid, SIGCONT) != 0)
		c->host->log(c->inst, NT_LOG_WARN, "cannot continue pid %u: %s",
			     pid, strerror(errno));
}

static void on_fn(struct cuda *c, const struct nt_cuda_raw_fn *r, size_t size)
{
	struct nt_cuda_rec *out = &c->rec[0];
	struct nt_cuda_call *e;
	const struct fn_entry *fe;
	char stack[8192];
	size_t n;

	if (size < NT_CUDA_RAW_FN_FIXED || r->fn >= c->nfns ||
	    r->nframes > NT_CUDA_STACK_MAX ||
	    size < NT_CUDA_RAW_FN_FIXED + r->nframes * 8ull)
		return;
	fe = &c->fns[r->fn];
	memset(out->u.bytes, 0, sizeof(*e));
	e = (void *)out->u.bytes;
	e->hdr = r->hdr;
	e->hdr.type = (uint32_t)c->types[NT_CUDA_EVT_CALL];
	e->hdr.size = sizeof(*e);
	e->cgroup_id = r->cgroup_id;
	e->duration_ns = r->duration_ns;
	e->layer = NT_CUDA_LAYER_USER;
	e->flags = NT_CUDA_F_RET;
	e->ret = (int32_t)r->ret;
	e->ret64 = r->ret;
	e->device = -1;
	e->threshold_ns = fe->threshold_ns;
	e->stack_id = nt_cuda_stack_id(r->ips, r->nframes);
	nt_cuda_rec_str(out, &e->library, fe->library, strlen(fe->library));
	nt_cuda_rec_str(out, &e->symbol, fe->symbol, strlen(fe->symbol));
	n = nt_cuda_format_stack(&c->st, r->hdr.pid, r->ips, r->nframes, stack,
				 sizeof(stack), fe->symbol);
	nt_cuda_rec_str(out, &e->stack, stack, n);
	c->host->publish(c->inst, &out->u.hdr);
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct cuda *c = ctx;
	const struct nt_event_hdr *h = data;
	int n;

	if (size < sizeof(*h))
		return 0;
	switch (h->type) {
	case NT_CUDA_RAW_CALL:
		n = nt_cuda_decode_call(&c->st, data, size, c->rec);
		for (int i = 0; i < n; i++)
			publish(c, &c->rec[i]);
		break;
	case NT_CUDA_RAW_ENTER:
		if (nt_cuda_decode_enter(&c->st, data, size, &c->rec[0]) == 1)
			publish(c, &c->rec[0]);
		break;
	case NT_CUDA_RAW_LAUNCH: {
		const struct nt_cuda_raw_launch *rl = data;

		if (size < NT_CUDA_RAW_LAUNCH_FIXED)
			break;
		if (!c->cfg->launch_events) {
			/* first launch: name it while the process lives, and
			 * give it a fast-path slot */
			nt_cuda_kernel_name(&c->st, h->pid, rl->layer, rl->func);
			if (rl->first)
				slot_install(c, h->pid, rl->api, rl->func);
			break;
		}
		if (nt_cuda_decode_launch(&c->st, rl, size, &c->rec[0]) == 1)
			publish(c, &c->rec[0]);
		break;
	}
	case NT_CUDA_RAW_KNAME:
		nt_cuda_learn_kname(&c->st, data, size);
		break;
	case NT_CUDA_RAW_OPEN:
	case NT_CUDA_RAW_EXEC:
		if (size >= sizeof(struct nt_cuda_raw_path))
			on_path(c, data);
		break;
	case NT_CUDA_RAW_FN:
		on_fn(c, data, size);
		break;
	default:
		break;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Periodic: launch counts and function-table statistics               */
/* ------------------------------------------------------------------ */

/* Copy launch counts into the metrics; only_pid != 0 limits to one process.
 * With `top`, collects that process's counts for the report. */
static void sync_launches(struct cuda *c, uint32_t only_pid,
			  struct nt_cuda_kcount **top, size_t *ntop)
{
	int fd = bpf_map__fd(c->skel->maps.launches);
	struct nt_cuda_launch_key key, next;
	void *prev = NULL;
	size_t cap = 0;

	if (top) {
		*top = NULL;
		*ntop = 0;
	}
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		uint64_t cnt = 0;
		struct lcount *lc;

		key = next;
		prev = &key;
		if (only_pid && key.tgid != only_pid)
			continue;
		if (bpf_map_lookup_elem(fd, &key, &cnt) != 0)
			continue;
		lc = lc_get(c, &key);
		if (!lc)
			continue;
		cnt += slot_count(c, lc);
		{
			int layer = nt_cuda_api_layer(key.api);
			const char *name = nt_cuda_kernel_name(&c->st, key.tgid,
							       layer, key.func);
			char unk[40];
			struct nt_cuda_proc *p;

			if (!name[0]) {
				snprintf(unk, sizeof(unk), "0x%" PRIx64, key.func);
				name = unk;
			}
			if (cnt > lc->count) {
				const char *lv[] = { pid_s(c, key.tgid), name };

				c->host->metric_add(c->m[M_LAUNCH], lv,
						    (double)(cnt - lc->count));
				p = nt_cuda_proc_get(&c->st, key.tgid);
				if (p)
					p->tot.launches += cnt - lc->count;
				lc->count = cnt;
			}
			if (top) {
				size_t i;

				/* merge equal names (runtime and driver handles) */
				for (i = 0; i < *ntop; i++)
					if (!strcmp((*top)[i].name, name))
						break;
				if (i == *ntop) {
					if (*ntop == cap) {
						size_t ncap = cap ? cap * 2 : 32;
						struct nt_cuda_kcount *t =
							realloc(*top, ncap * sizeof(**top));

						if (!t)
							continue;
						*top = t;
						cap = ncap;
					}
					(*top)[i].name = strdup(name);
					(*top)[i].count = 0;
					if (!(*top)[i].name)
						continue;
					(*ntop)++;
				}
				(*top)[i].count += cnt;
			}
		}
	}
}

static void sync_fns(struct cuda *c, uint32_t only_pid)
{
	int fd = bpf_map__fd(c->skel->maps.fnstats);
	struct nt_cuda_fn_key key, next;
	void *prev = NULL;

	if (!c->nfns)
		return;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct nt_cuda_fn_stats s;
		struct fcount *fc;
		const struct fn_entry *fe;

		key = next;
		prev = &key;
		if ((only_pid && key.tgid != only_pid) || key.fn >= c->nfns)
			continue;
		if (bpf_map_lookup_elem(fd, &key, &s) != 0)
			continue;
		fc = fc_get(c, &key);
		if (!fc || s.count == fc->st.count)
			continue;
		fe = &c->fns[key.fn];
		const char *lv[] = { pid_s(c, key.tgid), fe->library, fe->symbol };
		c->host->metric_add(c->m[M_CALLS], lv, (double)(s.count - fc->st.count));
		if (s.slow > fc->st.slow)
			c->host->metric_add(c->m[M_SLOW], lv, (double)(s.slow - fc->st.slow));
		c->host->metric_hist_set(c->m[M_CALL_SEC], lv, s.buckets,
					 (double)s.sum_ns / 1e9);
		fc->st = s;
	}
}

static int cmp_kcount(const void *a, const void *b)
{
	const struct nt_cuda_kcount *x = a, *y = b;

	return x->count < y->count ? 1 : x->count > y->count ? -1 : 0;
}

/* Delete a process's launch counters from the BPF map (and our copy). */
static void forget_launch_keys(struct cuda *c, uint32_t pid)
{
	int fd = bpf_map__fd(c->skel->maps.launches);
	struct nt_cuda_launch_key key, next;
	void *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		if (key.tgid == pid) {
			struct lcount *lc = lc_get(c, &key);

			bpf_map_delete_elem(fd, &key);
			if (lc) {
				if (lc->slot >= 0 && c->lslots) {
					struct nt_cuda_lslot *ls = &c->lslots[lc->slot];

					__atomic_store_n(&ls->tgid, 0, __ATOMIC_RELEASE);
					__atomic_store_n(&ls->func, 0, __ATOMIC_RELAXED);
					__atomic_store_n(&ls->count, 0, __ATOMIC_RELAXED);
					lc->slot = -1;
				}
				lc->count = 0;
			}
			continue; /* restart from the same prev */
		}
		prev = &key;
	}
}

/* A traced process exited: final counts, report, forget it. */
static void proc_gone(struct cuda *c, uint32_t pid)
{
	struct nt_cuda_kcount *top = NULL;
	size_t ntop = 0;
	struct nt_cuda_proc *p;

	if (c->rb)
		ring_buffer__consume(c->rb);
	sync_launches(c, pid, &top, &ntop);
	sync_fns(c, pid);
	p = nt_cuda_proc_find(&c->st, pid);
	if (p && c->cfg->report) {
		char *text;

		if (ntop > 1) /* qsort's array must not be NULL (UBSan) */
			qsort(top, ntop, sizeof(*top), cmp_kcount);
		text = nt_cuda_report_text(p, top, ntop);
		if (text) {
			struct nt_cuda_rec *r = &c->rec[0];
			struct nt_cuda_report *e;
			struct timespec ts;

			memset(r->u.bytes, 0, sizeof(*e));
			e = (void *)r->u.bytes;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			e->hdr.type = (uint32_t)c->types[NT_CUDA_EVT_REPORT];
			e->hdr.size = sizeof(*e);
			e->hdr.ts_ns = (uint64_t)ts.tv_sec * 1000000000ull +
				       (uint64_t)ts.tv_nsec;
			e->hdr.pid = pid;
			e->hdr.tid = pid;
			memcpy(e->hdr.comm, p->comm, NT_COMM_LEN);
			e->cgroup_id = p->cgroup_id;
			e->subject_pid = pid;
			nt_cuda_rec_str(r, &e->text, text, strlen(text));
			c->host->publish(c->inst, &r->u.hdr);
			free(text);
		}
	}
	for (size_t i = 0; i < ntop; i++)
		free((char *)top[i].name);
	free(top);
	/* Its gauges go DEAD_TICKS ticks later (so every export sees their
	 * final value once), its counters stay. */
	if (p) {
		p->dead = true;
		p->dead_tick = c->tick;
	}
	forget_launch_keys(c, pid);
}

/* Forget processes that exited DEAD_TICKS ticks ago. */
static void reap_dead(struct cuda *c, bool all)
{
	for (size_t i = 0; i < c->st.capprocs; i++) {
		struct nt_cuda_proc *p = c->st.procs[i];
		uint32_t pid;

		if (!p || !p->dead || (!all && c->tick - p->dead_tick < DEAD_TICKS))
			continue;
		pid = p->pid;
		for (size_t k = 0; k < p->noutst; k++) {
			char dev[12];

			snprintf(dev, sizeof(dev), "%d", p->outst[k].device);
			const char *lv[] = { pid_s(c, pid), dev,
					     mem_kind_label(p->outst[k].kind) };
			c->host->metric_remove(c->m[M_DEVBYTES], lv);
		}
		nt_cuda_proc_drop(&c->st, pid);
		i = (size_t)-1; /* the table moved: start over */
	}
}

/* ------------------------------------------------------------------ */
/* Ops                                                                 */
/* ------------------------------------------------------------------ */

static int cuda_init(struct nt_instance *inst, const struct nt_host *host,
		     const void *config, void **state)
{
	const struct cuda_cfg *cfg = config;
	struct cuda *c;

	if ((cfg->ringbuf_kb & (cfg->ringbuf_kb - 1)) ||
	    (cfg->ringbuf_kb && cfg->ringbuf_kb < 64))
		return host->config_error(inst, "ringbuf_kb",
					  "must be 0 or a power of two from 64, not %" PRId64,
					  cfg->ringbuf_kb);
	if (cfg->functions.n > NT_CUDA_FN_MAX)
		return host->config_error(inst, "functions",
					  "at most %d entries", NT_CUDA_FN_MAX);
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->inst = inst;
	c->host = host;
	c->cfg = cfg;
	nt_cuda_state_init(&c->st, sym_cb, c);
	c->st.stack_depth = (uint32_t)cfg->stack_depth;

	/* function table: one entry per (library, symbol) */
	for (uint32_t i = 0; i < cfg->functions.n; i++) {
		const struct fn_cfg *f = (const struct fn_cfg *)cfg->functions.items + i;

		if (!f->symbols.n) {
			free(c->fns);
			free(c);
			return host->config_error(inst, "functions",
						  "entry %u (%s) lists no symbols",
						  i + 1, f->library);
		}
		for (uint32_t k = 0; k < f->symbols.n; k++) {
			struct fn_entry *n;

			if (c->nfns >= NT_CUDA_FN_MAX) {
				free(c->fns);
				free(c);
				return host->config_error(
					inst, "functions",
					"more than %d symbols in all", NT_CUDA_FN_MAX);
			}
			n = realloc(c->fns, (c->nfns + 1) * sizeof(*n));
			if (!n) {
				free(c->fns);
				free(c);
				return -ENOMEM;
			}
			c->fns = n;
			c->fns[c->nfns].library = (char *)f->library;
			c->fns[c->nfns].symbol = (char *)f->symbols.v[k];
			c->fns[c->nfns].threshold_ns =
				(uint64_t)(f->threshold_ms * 1e6);
			c->nfns++;
		}
	}

	for (int i = 0; i < NT_CUDA_EVT_N; i++) {
		c->types[i] = host->register_schema(inst, &schemas[i]);
		if (c->types[i] < 0) {
			int err = c->types[i];

			host->log(inst, NT_LOG_ERROR, "cannot register %s: %d",
				  schemas[i].name, err);
			free(c->fns);
			free(c);
			return err;
		}
		c->st.type_ids[i] = (uint32_t)c->types[i];
	}
	for (int i = 0; i < M_N; i++) {
		c->mdesc[i] = metric_tmpl[i];
		c->mdesc[i].max_series = (uint32_t)cfg->max_series;
		c->m[i] = host->metric_register(inst, &c->mdesc[i]);
		if (!c->m[i]) {
			host->log(inst, NT_LOG_ERROR, "cannot register metric %s",
				  metric_tmpl[i].name);
			free(c->fns);
			free(c);
			return -EINVAL;
		}
	}
	host->subscribe(inst, "proc.exit");

	if (!strcmp(cfg->launch_layer, "runtime"))
		c->layer_launch = 1 << NT_CUDA_LAYER_RUNTIME;
	else if (!strcmp(cfg->launch_layer, "driver"))
		c->layer_launch = 1 << NT_CUDA_LAYER_DRIVER;
	else if (!strcmp(cfg->launch_layer, "both"))
		c->layer_launch = (1 << NT_CUDA_LAYER_RUNTIME) |
				  (1 << NT_CUDA_LAYER_DRIVER);
	else { /* auto: the driver layer, see docs/cuda.md ("Launches") */
		c->layer_launch = 1 << NT_CUDA_LAYER_DRIVER;
		c->auto_layer = true;
	}
	*state = c;
	return 0;
}

static void set_lib_prefixes(struct cuda *c)
{
	struct cuda_bpf *s = c->skel;
	uint32_t n = 0;

	snprintf((char *)s->rodata->lib_pfx[n++], NT_CUDA_LIB_PFX_LEN, "libcudart.so");
	snprintf((char *)s->rodata->lib_pfx[n++], NT_CUDA_LIB_PFX_LEN, "libcuda.so");
	for (size_t i = 0; i < c->nfns && n < NT_CUDA_LIB_PFX_MAX; i++) {
		const char *lib = c->fns[i].library;
		char pfx[NT_CUDA_LIB_PFX_LEN];
		bool dup = false;

		if (lib[0] == '/')
			lib = strrchr(lib, '/') + 1;
		if (!strncmp(lib, "lib", 3))
			snprintf(pfx, sizeof(pfx), "%s", lib);
		else
			snprintf(pfx, sizeof(pfx), "lib%s.so", lib);
		for (uint32_t k = 0; k < n; k++)
			dup |= !strcmp((const char *)s->rodata->lib_pfx[k], pfx);
		if (!dup)
			memcpy((char *)s->rodata->lib_pfx[n++], pfx, sizeof(pfx));
	}
	s->rodata->n_lib_pfx = n;
}

static void cuda_set_multi(struct cuda_bpf *s, bool on)
{
	struct bpf_program *progs[] = {
		s->progs.call_enter, s->progs.call_return, s->progs.launch_rt,
		s->progs.launch_rt_ex, s->progs.launch_drv, s->progs.launch_drv_ex,
		s->progs.fn_enter, s->progs.fn_return,
	};

	if (!on)
		return;
	for (size_t i = 0; i < NT_ARRAY_LEN(progs); i++)
		bpf_program__set_expected_attach_type(
			progs[i], (enum bpf_attach_type)NT_BPF_TRACE_UPROBE_MULTI);
}

/* Open the BPF object and set everything that must be set before load. */
static int reopen(struct cuda *c, struct cuda_bpf **out)
{
	const struct cuda_cfg *cfg = c->cfg;
	struct cuda_bpf *s;
	int err;

	*out = NULL;
	s = cuda_bpf__open();
	if (!s) {
		err = -errno;
		c->host->log(c->inst, NT_LOG_ERROR, "cannot open the BPF object: %s",
			     strerror(-err));
		return err;
	}
	c->skel = s;
	s->rodata->stacks_on = cfg->stacks;
	s->rodata->launch_events = cfg->launch_events;
	s->rodata->enter_events = cfg->enter_events;
	s->rodata->stop_on_load = cfg->stop_on_load;
	s->rodata->watch_so = cfg->watch_libraries;
	s->rodata->auto_layer = c->auto_layer;
	for (size_t i = 0; i < c->nfns; i++)
		s->rodata->fn_threshold_ns[i] = c->fns[i].threshold_ns;
	set_lib_prefixes(c);
	/* a launch event per launch needs room for bursts; without them the
	 * ring carries calls and first launches only */
	bpf_map__set_max_entries(s->maps.events,
				 (uint32_t)(cfg->ringbuf_kb ? cfg->ringbuf_kb
							    : cfg->launch_events ? 8192 : 2048) * 1024);
	/* a 32nd of the ring: a wake-up per few hundred launch records */
	s->rodata->launch_wake_bytes = (uint64_t)bpf_map__max_entries(s->maps.events) / 32;
	err = nt_bpf_use_targets(c->host, c->inst, s->maps.nt_targets,
				 &s->rodata->nt_filter_on);
	if (err)
		return err;
	/* watch_so only makes sense (and costs little) with a target set */
	if (!s->rodata->nt_filter_on)
		s->rodata->watch_so = false;
	*out = s;
	return 0;
}

static int cuda_attach(void *state)
{
	struct cuda *c = state;
	const struct cuda_cfg *cfg = c->cfg;
	struct cuda_bpf *s;
	uint32_t pids[1024];
	size_t npids;
	int err;

	err = reopen(c, &s);
	if (err)
		goto fail;
	/* uprobe_multi links (one per program and file) attach and, above
	 * all, detach far faster than one perf event per probe; kernels
	 * before 6.6 refuse the attach type, and then perf events are used. */
	/* Load attempts, best first: uprobe_multi links (6.6+; one link per
	 * program and file, attach and detach in milliseconds), then one perf
	 * event per probe, then without the discovery tracepoints (no vmlinux
	 * BTF or bpf_loop, before 5.17: libraries are then found at start). */
	for (int attempt = 0; attempt < 3; attempt++) {
		if (attempt) {
			cuda_bpf__destroy(s);
			c->skel = s = NULL;
			err = reopen(c, &s);
			if (err)
				goto fail;
		}
		c->multi = attempt == 0;
		cuda_set_multi(s, c->multi);
		if (attempt == 2) {
			bpf_program__set_autoload(s->progs.on_exec, false);
			bpf_program__set_autoload(s->progs.on_openat_enter, false);
			bpf_program__set_autoload(s->progs.on_openat_exit, false);
		}
		err = cuda_bpf__load(s);
		if (!err)
			break;
		c->host->log(c->inst, NT_LOG_INFO, "BPF load attempt %d (%s) failed: %s",
			     attempt + 1,
			     attempt == 0   ? "uprobe_multi"
			     : attempt == 1 ? "perf-event uprobes"
					    : "without the exec tracepoint",
			     strerror(-err));
	}
	if (err) {
		c->host->log(c->inst, NT_LOG_ERROR,
			     "cannot load the BPF programs: %s (run as root, or with CAP_BPF and CAP_PERFMON)",
			     strerror(-err));
		goto fail;
	}
	{
		size_t len = sizeof(struct nt_cuda_lslot) * NT_CUDA_LSLOTS;
		long pg = sysconf(_SC_PAGESIZE);
		void *m;

		len = (len + (size_t)pg - 1) & ~((size_t)pg - 1);
		m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
			 bpf_map__fd(s->maps.lslots), 0);
		if (m == MAP_FAILED) {
			c->host->log(c->inst, NT_LOG_WARN,
				     "cannot map the launch slots (%s): every launch takes the hash path",
				     strerror(errno));
		} else {
			c->lslots = m;
			c->lslots_len = len;
		}
	}
	for (unsigned api = 1; api < NT_CUDA_API_COUNT; api++) {
		struct nt_cuda_spec sp;
		uint32_t k = api;

		if (nt_cuda_spec_for(api, &sp))
			bpf_map_update_elem(bpf_map__fd(s->maps.specs), &k, &sp,
					    BPF_ANY);
	}
	if (bpf_program__autoload(s->progs.on_openat_enter)) {
		c->tp_links[0] = bpf_program__attach(s->progs.on_openat_enter);
		c->tp_links[1] = bpf_program__attach(s->progs.on_openat_exit);
	}
	if (bpf_program__autoload(s->progs.on_exec))
		c->tp_links[2] = bpf_program__attach(s->progs.on_exec);
	for (int i = 0; i < 3; i++)
		if (!c->tp_links[i])
			c->host->log(c->inst, NT_LOG_WARN,
				     "library discovery tracepoint %d not attached: %s; libraries loaded later may be missed",
				     i, strerror(errno));
	err = nt_bpf_ring_open(c->host, c->inst, s->maps.events, on_record, c,
			       TOK_RING, &c->rb);
	if (err)
		goto fail;

	/* Discovery: well-known files, then what the targets (or every
	 * process, host-wide) have mapped now. */
	npids = c->host->target_pids(c->inst, pids, NT_ARRAY_LEN(pids));
	if (npids > NT_ARRAY_LEN(pids))
		npids = NT_ARRAY_LEN(pids);
	scan_default_paths(c);
	if (!s->rodata->nt_filter_on) {
		scan_all_pids(c);
	} else {
		for (size_t i = 0; i < npids && i < NT_ARRAY_LEN(pids); i++) {
			char exe[64];

			snprintf(exe, sizeof(exe), "/proc/%u/exe", pids[i]);
			probe_file(c, exe, pids[i]);
			scan_pid(c, pids[i]);
		}
	}
	err = c->host->add_timer(c->inst, (uint64_t)cfg->interval_ms, TOK_TICK);
	/* launch records wake the loop in batches: read them at least every
	 * 100 ms when few come */
	if (!err && cfg->launch_events)
		err = c->host->add_timer(c->inst, 100, TOK_RING);
	if (err)
		goto fail;
	c->attached = true;
	c->host->log(c->inst, NT_LOG_INFO,
		     "%" PRIu64 " probes in %zu files; launches probed at the %s layer",
		     c->probes, c->nlibs,
		     c->fallback_on ? "runtime (no driver library yet)"
		     : c->auto_layer && !c->n_driver_libs
			     ? "driver (or the runtime's while no driver library is found)"
		     : c->layer_launch == (1 << NT_CUDA_LAYER_RUNTIME) ? "runtime"
		     : c->layer_launch == (1 << NT_CUDA_LAYER_DRIVER) ? "driver"
								       : "runtime and driver");
	return 0;
fail:
	return err;
}

static int cuda_poll(void *state, uint32_t token, uint32_t budget)
{
	struct cuda *c = state;
	int n = 0;

	(void)budget;
	if (!c->rb)
		return 0;
	if (token == TOK_RING) {
		n = ring_buffer__consume(c->rb);
		if (n < 0)
			return n;
	} else if (token == TOK_TICK) {
		c->tick++;
		if (c->skel->bss->handover && c->tick >= c->handover_until)
			c->skel->bss->handover = false;
		reap_dead(c, false);
		ring_buffer__consume(c->rb);
		sync_launches(c, 0, NULL, NULL);
		sync_fns(c, 0);
		nt_bpf_report_drops(c->host, c->inst,
				    bpf_map__fd(c->skel->maps.nt_drops),
				    &c->drops_reported);
	}
	return n;
}

static void cuda_consume(void *state, const struct nt_event_hdr *ev,
			 const struct nt_schema *schema)
{
	struct cuda *c = state;

	if (!c->skel || !schema || strcmp(schema->name, "proc.exit"))
		return;
	proc_gone(c, ev->pid);
}

static void cuda_flush(void *state)
{
	struct cuda *c = state;

	if (!c->rb)
		return;
	ring_buffer__consume(c->rb);
	sync_launches(c, 0, NULL, NULL);
	sync_fns(c, 0);
	nt_bpf_report_drops(c->host, c->inst, bpf_map__fd(c->skel->maps.nt_drops),
			    &c->drops_reported);
}

static void cuda_detach(void *state)
{
	struct cuda *c = state;

	if (c->rb) {
		ring_buffer__consume(c->rb);
		if (c->skel) {
			sync_launches(c, 0, NULL, NULL);
			sync_fns(c, 0);
		}
	}
	struct nt_linkset links = {0};
	for (size_t i = 0; i < c->nlibs; i++) {
		nt_uprobes_move(&c->libs[i].fallback, &links);
		nt_uprobes_move(&c->libs[i].up, &links);
		free(c->libs[i].path);
	}
	for (int i = 0; i < 3; i++) {
		nt_linkset_add(&links, c->tp_links[i]);
		c->tp_links[i] = NULL;
	}
	/* one grace period for all of them, not one each (kit/links.h) */
	nt_linkset_release(&links);
	c->fallback_on = false;
	c->n_driver_libs = 0;
	free(c->libs);
	c->libs = NULL;
	c->nlibs = c->caplibs = 0;
	ring_buffer__free(c->rb);
	c->rb = NULL;
	if (c->lslots)
		munmap(c->lslots, c->lslots_len);
	c->lslots = NULL;
	/* the slots go with the map: none of ours is valid any more */
	for (size_t i = 0; i < c->caplc; i++)
		c->lc[i].slot = -1;
	cuda_bpf__destroy(c->skel);
	c->skel = NULL;
	c->attached = false;
}

/* Stop producing (ABI 1.6): every uprobe and the library-discovery
 * tracepoints go, all at once; the ring and maps stay for the core's last
 * read. A target held at a library's load (stop_on_load) is let go. */
static void cuda_quiesce(void *state)
{
	struct cuda *c = state;
	struct nt_linkset links = {0};

	for (size_t i = 0; i < c->nlibs; i++) {
		nt_uprobes_move(&c->libs[i].fallback, &links);
		nt_uprobes_move(&c->libs[i].up, &links);
	}
	for (int i = 0; i < 3; i++) {
		nt_linkset_add(&links, c->tp_links[i]);
		c->tp_links[i] = NULL;
	}
	nt_linkset_release(&links);
}

static void cuda_fini(void *state)
{
	struct cuda *c = state;

	if (!c)
		return;
	if (c->skel)
		cuda_detach(c);
	nt_cuda_state_fini(&c->st);
	free(c->lc);
	free(c->fc);
	free(c->fns);
	free(c);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "cuda",
	.kind = NT_KIND_PROBE,
	.n_config = NT_ARRAY_LEN(cuda_config),
	.description = "CUDA runtime and driver calls through uprobes: allocations, copies, launches per kernel, syncs, errors",
	.version = "0.1.0",
	.config = cuda_config,
	.config_size = sizeof(struct cuda_cfg),
	.init = cuda_init,
	.attach = cuda_attach,
	.poll = cuda_poll,
	.detach = cuda_detach,
	.quiesce = cuda_quiesce,
	.fini = cuda_fini,
	.consume = cuda_consume,
	.flush = cuda_flush,
};
