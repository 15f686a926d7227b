/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: the event records the cuda probe publishes, shared by
 * cuda.bpf.c (which fills the fixed part), cuda.c (which appends the
 * strings: kernel names, symbolized stacks, function and error names) and
 * the CUDA detectors in plugins/cuda/detectors/ (which consume them).
 *
 * Layout rules (event.h): every record starts with struct nt_event_hdr;
 * hdr.pid is the process id (tgid) and hdr.tid the thread id; every cuda
 * record then carries the same common block (NT_CUDA_COMMON) so any
 * consumer can read the cgroup, the API function, its layer, its return
 * code, the device and the time spent in the call without knowing the type.
 * VSTR fields point inside the same record; an absent string has len 0.
 *
 * Stacks (VSTR `stack`): symbolized user frames, root (outermost) first,
 * separated by ';', like a folded stack: the last frame is the probed API
 * function itself (e.g. "cudaMalloc"), the one before it its caller. A
 * frame is "function" (demangled), or "module+0xOFF" when the module has no
 * symbol there (OFF as addr2line takes it). The frame-pointer walk is cut
 * at the first implausible frame (no module, a repeat, the loader).
 * `stack_id` is a 64-bit hash of the raw return addresses (0: no stack);
 * equal ids within one process mean equal stacks (group by it cheaply).
 * Stacks are recorded only where the config says `stacks = true`.
 *
 * Units: bytes, nanoseconds. Pointers/handles are process addresses (HEX64).
 */
#ifndef NTCORE_CUDA_H
#define NTCORE_CUDA_H

#include "ntcore/event.h"
#include "cuda_api.h"

/* Schema names (one registration each, by the probe instance). */
#define NT_CUDA_EV_ALLOC "cuda.alloc"
#define NT_CUDA_EV_FREE "cuda.free"
#define NT_CUDA_EV_MEMCPY "cuda.memcpy"
#define NT_CUDA_EV_MEMSET "cuda.memset"
#define NT_CUDA_EV_LAUNCH "cuda.launch"
#define NT_CUDA_EV_GRAPH "cuda.graph_launch"
#define NT_CUDA_EV_SYNC "cuda.sync"
#define NT_CUDA_EV_ENTER "cuda.enter"
#define NT_CUDA_EV_ERROR "cuda.error"
#define NT_CUDA_EV_CALL "cuda.call"
#define NT_CUDA_EV_LIBRARY "cuda.library"
#define NT_CUDA_EV_REPORT "cuda.report"

/* Most frames a stack holds (BPF bpf_get_stack buffer). */
#define NT_CUDA_STACK_MAX 32

/* cuda.alloc / cuda.free `kind` */
enum nt_cuda_mem_kind {
	NT_CUDA_MEM_UNKNOWN = 0,
	NT_CUDA_MEM_DEVICE = 1,  /* cudaMalloc, cudaMallocPitch, cuMemAlloc[Pitch]_v2 */
	NT_CUDA_MEM_MANAGED = 2, /* cudaMallocManaged, cuMemAllocManaged */
	NT_CUDA_MEM_HOST = 3,    /* pinned host: cudaMallocHost, cudaHostAlloc, cuMemAllocHost_v2, cuMemHostAlloc */
	NT_CUDA_MEM_ASYNC = 4,   /* stream-ordered device: cudaMallocAsync, cudaMallocFromPoolAsync, cuMemAlloc*Async */
};

/* cuda.memcpy `direction` */
enum nt_cuda_dir {
	NT_CUDA_DIR_UNKNOWN = 0, /* cudaMemcpyDefault / cuMemcpy where the probe could not tell */
	NT_CUDA_DIR_H2D = 1,
	NT_CUDA_DIR_D2H = 2,
	NT_CUDA_DIR_D2D = 3,
	NT_CUDA_DIR_H2H = 4,
	NT_CUDA_DIR_P2P = 5,     /* peer copies between two devices */
};

/* cuda.sync `sync_kind` */
enum nt_cuda_sync_kind {
	NT_CUDA_SYNC_DEVICE = 1,  /* cudaDeviceSynchronize, cuCtxSynchronize */
	NT_CUDA_SYNC_STREAM = 2,  /* cudaStreamSynchronize, cuStreamSynchronize */
	NT_CUDA_SYNC_EVENT = 3,   /* cudaEventSynchronize, cuEventSynchronize */
};

/* Common block `flags` */
enum nt_cuda_flags {
	NT_CUDA_F_RET = 1u << 0,   /* `ret` and `duration_ns` were measured (return probe ran) */
	NT_CUDA_F_ASYNC = 1u << 1, /* a stream-ordered call (…Async) */
	NT_CUDA_F_PTSZ = 1u << 2,  /* per-thread default stream variant (_ptsz/_ptds) */
	NT_CUDA_F_STATIC = 1u << 3,/* the runtime is linked statically into the caller's object */
};

/*
 * The common block after the header, 32 bytes:
 *   cgroup_id    cgroup v2 id of the calling thread (tells containers apart)
 *   duration_ns  time spent inside the call (0 unless NT_CUDA_F_RET);
 *                for synchronous copies and syncs: the time the CPU blocked
 *   api          enum nt_cuda_api: which function (cuda_api.h)
 *   layer        enum nt_cuda_layer: runtime or driver
 *   flags        enum nt_cuda_flags
 *   ret          the return code: cudaError_t for the runtime, CUresult for
 *                the driver; 0 = success (valid only with NT_CUDA_F_RET)
 *   device       CUDA device ordinal the call acted on (the thread's
 *                current device: cudaSetDevice / context), -1 when unknown
 */
#define NT_CUDA_COMMON                                                         \
	uint64_t cgroup_id;                                                    \
	uint64_t duration_ns;                                                  \
	uint16_t api;                                                          \
	uint8_t layer;                                                         \
	uint8_t flags;                                                         \
	int32_t ret;                                                           \
	int32_t device;                                                        \
	uint32_t common_pad_

/* cuda.alloc: one allocation call (successful or not). */
struct nt_cuda_alloc {
	struct nt_event_hdr hdr;
	NT_CUDA_COMMON;
	uint64_t ptr;      /* returned pointer, 0 when the call failed */
	uint64_t size;     /* requested bytes (pitch: pitch * height once known) */
	uint64_t stream;   /* stream of async allocations, 0 otherwise */
	uint64_t outstanding_bytes; /* this process's live bytes of this kind on
				     * this device after the call (probe's view) */
	uint64_t stack_id;
	uint32_t kind;     /* enum nt_cuda_mem_kind */
	uint32_t alloc_flags; /* cudaHostAlloc / cudaMallocManaged flags */
	struct nt_vstr api_name; /* "cudaMalloc" */
	struct nt_vstr stack;
};

/* cuda.free: one free call. */
struct nt_cuda_free {
	struct nt_event_hdr hdr;
	NT_CUDA_COMMON;
	uint64_t ptr;
	uint64_t size;     /* bytes of the block as allocated (0: unknown to the probe) */
	uint64_t stream;   /* async frees */
	uint64_t outstanding_bytes; /* after the call, as in cuda.alloc */
	uint64_t stack_id;
	uint64_t alloc_ts_ns; /* CLOCK_MONOTONIC ts of the matching allocation, 0 unknown */
	uint32_t kind;     /* kind of the block freed (from its allocation), or of the call */
	uint32_t free_pad_;
	struct nt_vstr api_name;
	struct nt_vstr stack;
};

/* cuda.memcpy: one copy. duration_ns of a synchronous copy is the copy
 * (bandwidth = bytes / duration); of an async one the enqueue time only. */
struct nt_cuda_memcpy {
	struct nt_event_hdr hdr;
	NT_CUDA_COMMON;
	uint64_t dst;
	uint64_t src;
	uint64_t bytes;    /* 2D copies: width * height */
	uint64_t stream;
	uint32_t direction; /* enum nt_cuda_dir */
	int32_t src_device; /* peer copies: source device, else -1 */
	struct nt_vstr api_name;
};

/* cuda.memset */
struct nt_cuda_memset {
	struct nt_event_hdr hdr;
	NT_CUDA_COMMON;
	uint64_t ptr;
	uint64_t bytes;    /* D32: count * 4 */
	uint64_t stream;
	uint32_t value;
	uint32_t memset_pad_;
	struct nt_vstr api_name;
};

/* cuda.launch: one kernel launch (published per launch only with
 * `launch_events = true`; counts per kernel are always kept as metrics). */
struct nt_cuda_launch {
	struct nt_event_hdr hdr;
	NT_CUDA_COMMON;
	uint64_t func;     /* runtime: host stub address; driver: CUfunction/CUkernel */
	uint64_t stream;
	uint64_t stack_id;
	uint32_t grid_x, grid_y, grid_z;
	uint32_t block_x, block_y, block_z;
	uint32_t shared_mem; /* dynamic shared memory bytes */
	struct nt_vstr kernel; /* demangled kernel name ("" unknown: see func) */
	struct nt_vstr api_name;
	struct nt_vstr stack;
};

/* cuda.graph_launch: one CUDA graph launch (its kernels are not seen). */
struct nt_cuda_graph_launch {
	struct nt_event_hdr hdr;
	NT_CUDA_COMMON;
	uint64_t graph_exec; /* cudaGraphExec_t / CUgraphExec */
	uint64_t stream;
	struct nt_vstr api_name;
};

/* cuda.sync: time a thread blocked waiting for the GPU. */
struct nt_cuda_sync {
	struct nt_event_hdr hdr;
	NT_CUDA_COMMON;
	uint64_t handle;   /* stream or event; 0 for device */
	uint32_t sync_kind; /* enum nt_cuda_sync_kind */
	uint32_t sync_pad_;
	struct nt_vstr api_name;
};

/*
 * cuda.enter: a thread entered a call that may block (synchronisation,
 * synchronous copy or set); published at entry with `enter_events = true`
 * so a hang detector sees a call that never returns. The matching return is
 * the next cuda.sync / cuda.memcpy / cuda.memset / cuda.error of the same
 * (pid, tid, api) with NT_CUDA_F_RET. duration_ns and ret are 0.
 */
struct nt_cuda_enter {
	struct nt_event_hdr hdr;
	NT_CUDA_COMMON;
	uint64_t handle;   /* stream/event, 0 */
	uint64_t bytes;    /* copies and sets: bytes, else 0 */
	uint32_t family;   /* enum nt_cuda_family of `api` */
	uint32_t enter_pad_;
	struct nt_vstr api_name;
};

/*
 * cuda.error: any probed call that returned non-zero (published in
 * addition to its typed event). size: requested bytes for allocations,
 * copy/set bytes, else 0. error_name: "cudaErrorMemoryAllocation",
 * "CUDA_ERROR_OUT_OF_MEMORY", or "cudaError(123)" when unknown.
 */
struct nt_cuda_error {
	struct nt_event_hdr hdr;
	NT_CUDA_COMMON;
	uint64_t size;
	uint64_t handle;   /* stream / func / ptr the call was given, 0 none */
	uint64_t stack_id;
	struct nt_vstr api_name;
	struct nt_vstr error_name;
	struct nt_vstr stack;
};

/*
 * cuda.call: a call to a function of the config's function table slower
 * than its threshold (counts and latency histograms of all calls are
 * metrics). api = 0, layer = NT_CUDA_LAYER_USER; ret is the low 32 bits of
 * the integer return value.
 */
struct nt_cuda_call {
	struct nt_event_hdr hdr;
	NT_CUDA_COMMON;
	uint64_t threshold_ns;
	uint64_t ret64;    /* full integer return register */
	uint64_t stack_id;
	struct nt_vstr library;  /* table entry's library name ("cublas") */
	struct nt_vstr symbol;   /* "cublasGemmEx" */
	struct nt_vstr stack;
};

/* cuda.library: a CUDA library found in a target and probed (or not). */
struct nt_cuda_library {
	struct nt_event_hdr hdr;
	NT_CUDA_COMMON;      /* api 0; layer = the library's layer; ret = 0 or -errno of the attach */
	uint64_t base;       /* load address in the process, 0 if not known */
	uint32_t n_probes;   /* probes attached in it */
	uint32_t is_static;  /* 1: runtime linked into an executable/object */
	struct nt_vstr path;
	struct nt_vstr version; /* "13.0" style when known, else "" */
};

/* cuda.report: per-process text summary at exit (stdout sink prints it). */
struct nt_cuda_report {
	struct nt_event_hdr hdr;
	uint64_t cgroup_id;
	uint32_t subject_pid;
	uint32_t report_pad_;
	struct nt_vstr text;
};

#ifndef __VMLINUX_H__
/* ---- user-space helpers (not for BPF) ---- */

/* Symbol name of an api id, "" for an unknown id. */
static inline const char *nt_cuda_api_name(unsigned api)
{
	static const char *const names[] = {
		[NT_CUDA_API_NONE] = "",
#define NT_CUDA_API_NAME_(id, sym, layer, fam) [NT_CUDA_API_##id] = sym,
		NT_CUDA_APIS(NT_CUDA_API_NAME_)
#undef NT_CUDA_API_NAME_
	};
	return api < NT_CUDA_API_COUNT ? names[api] : "";
}

static inline int nt_cuda_api_family(unsigned api)
{
	static const unsigned char fams[] = {
		[NT_CUDA_API_NONE] = NT_CUDA_FAM_OTHER,
#define NT_CUDA_API_FAM_(id, sym, layer, fam) [NT_CUDA_API_##id] = fam,
		NT_CUDA_APIS(NT_CUDA_API_FAM_)
#undef NT_CUDA_API_FAM_
	};
	return api < NT_CUDA_API_COUNT ? fams[api] : NT_CUDA_FAM_OTHER;
}

static inline int nt_cuda_api_layer(unsigned api)
{
	static const unsigned char layers[] = {
		[NT_CUDA_API_NONE] = NT_CUDA_LAYER_NONE,
#define NT_CUDA_API_LAYER_(id, sym, layer, fam) [NT_CUDA_API_##id] = layer,
		NT_CUDA_APIS(NT_CUDA_API_LAYER_)
#undef NT_CUDA_API_LAYER_
	};
	return api < NT_CUDA_API_COUNT ? layers[api] : NT_CUDA_LAYER_NONE;
}

static inline const char *nt_cuda_dir_name(unsigned dir)
{
	switch (dir) {
	case NT_CUDA_DIR_H2D: return "h2d";
	case NT_CUDA_DIR_D2H: return "d2h";
	case NT_CUDA_DIR_D2D: return "d2d";
	case NT_CUDA_DIR_H2H: return "h2h";
	case NT_CUDA_DIR_P2P: return "p2p";
	default: return "unknown";
	}
}

static inline const char *nt_cuda_mem_kind_name(unsigned kind)
{
	switch (kind) {
	case NT_CUDA_MEM_DEVICE: return "device";
	case NT_CUDA_MEM_MANAGED: return "managed";
	case NT_CUDA_MEM_HOST: return "host";
	case NT_CUDA_MEM_ASYNC: return "async";
	default: return "unknown";
	}
}

/* Memory that occupies device memory (counted as outstanding device bytes). */
static inline int nt_cuda_mem_on_device(unsigned kind)
{
	return kind == NT_CUDA_MEM_DEVICE || kind == NT_CUDA_MEM_ASYNC ||
	       kind == NT_CUDA_MEM_MANAGED;
}

/* Read a VSTR of a cuda record into a NUL-terminated buffer (truncating). */
static inline const char *nt_cuda_vstr(const struct nt_event_hdr *ev,
				       struct nt_vstr s, char *buf,
				       unsigned long bufsz)
{
	unsigned long n = s.len;

	if (!bufsz)
		return buf;
	if (s.off + (unsigned long)s.len > ev->size)
		n = 0;
	if (n >= bufsz)
		n = bufsz - 1;
	for (unsigned long i = 0; i < n; i++)
		buf[i] = ((const char *)ev)[s.off + i];
	buf[n] = '\0';
	return buf;
}

#include "cuda_errors.h" /* nt_cuda_error_name(layer, code) */
#endif /* !__VMLINUX_H__ */

#endif /* NTCORE_CUDA_H */
