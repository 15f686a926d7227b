/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: records between cuda.bpf.c and cuda.c only (not published).
 * The BPF side captures raw arguments and return values; the user side
 * (cuda_decode.c, pure and unit-tested) interprets them per API function and
 * builds the published records of cuda.h. Keeping the per-function knowledge
 * in user space keeps the BPF programs generic and small.
 */
#ifndef NTCORE_CUDA_RAW_H
#define NTCORE_CUDA_RAW_H

#include "cuda.h"

/* hdr.type of raw records */
enum nt_cuda_raw_type {
	NT_CUDA_RAW_CALL = 1,   /* struct nt_cuda_raw_call: a probed call returned */
	NT_CUDA_RAW_LAUNCH = 2, /* struct nt_cuda_raw_launch */
	NT_CUDA_RAW_ENTER = 3,  /* struct nt_cuda_raw_call without return values */
	NT_CUDA_RAW_KNAME = 4,  /* struct nt_cuda_raw_kname */
	NT_CUDA_RAW_OPEN = 5,   /* struct nt_cuda_raw_path: a target opened a library */
	NT_CUDA_RAW_EXEC = 6,   /* struct nt_cuda_raw_path: a target exec'd */
	NT_CUDA_RAW_FN = 7,     /* struct nt_cuda_raw_fn: slow function-table call */
};

#define NT_CUDA_BLOB 64       /* bytes of a struct read at entry (launch configs) */
#define NT_CUDA_KNAME_MAX 2048
#define NT_CUDA_PATH_MAX 256
#define NT_CUDA_FN_MAX 64     /* function-table entries */
#define NT_CUDA_SPEC_MAX 256  /* api ids + NT_CUDA_FN_BASE + fn index */
#define NT_CUDA_FN_BASE 128   /* cookie of function-table probes: BASE + index */
#define NT_CUDA_FN_BUCKETS 12 /* latency histogram upper bounds (ns below) */
#define NT_CUDA_LIB_PFX_MAX 8
#define NT_CUDA_LIB_PFX_LEN 24

/* Per-API capture spec, filled by user space into the `specs` array map. */
enum nt_cuda_spec_flags {
	NT_CUDA_SPEC_ENTER_EV = 1u << 0, /* may block: cuda.enter when enabled */
	NT_CUDA_SPEC_STACK = 1u << 1,    /* take a stack (when stacks are on) */
	NT_CUDA_SPEC_DEREF = 1u << 2,    /* read blob from arg[deref_arg] at entry */
	NT_CUDA_SPEC_KNAME = 1u << 3,    /* read a string from arg[deref_arg] at entry */
};

struct nt_cuda_spec {
	uint8_t family;   /* enum nt_cuda_family */
	uint8_t layer;    /* enum nt_cuda_layer */
	uint8_t flags;    /* enum nt_cuda_spec_flags */
	uint8_t nstack;   /* args past the 6th to copy (7..), at most 4: on the
			   * stack on x86-64, x6, x7 then stack on arm64 */
	uint8_t out_arg;  /* 1-based arg holding a pointer whose u64 pointee is read at return */
	uint8_t out2_arg; /* a second one (cudaMallocPitch's pitch), 0 none */
	uint8_t deref_arg;/* 1-based arg for NT_CUDA_SPEC_DEREF / _KNAME */
	uint8_t deref_size;
};

/* nt_cuda_raw_call.pad */
enum nt_cuda_rawf {
	/* ips were taken at the return (a failed call with no entry stack):
	 * frame 0 is the caller, not the probed function */
	NT_CUDA_RAWF_RET_STACK = 1,
};

/* nt_cuda_raw_launch.first */
enum nt_cuda_launch_first {
	NT_CUDA_LAUNCH_FIRST = 1,    /* first launch of func in the process */
	NT_CUDA_LAUNCH_CAPTURED = 2, /* made while its thread captures a graph:
				      * recorded into the graph, not run */
};

struct nt_cuda_raw_call {
	struct nt_event_hdr hdr; /* ts_ns: entry time */
	uint64_t cgroup_id;
	uint64_t duration_ns;
	uint16_t api;
	uint8_t layer;
	uint8_t flags;
	int32_t device;          /* thread's current device, -1 unknown */
	uint64_t ret;            /* return register */
	uint64_t arg[6];
	uint64_t sarg[4];        /* args 7..10 (uprobe_args.bpf.h) */
	uint64_t out[2];         /* pointees of out_arg / out2_arg after return */
	uint8_t blob[NT_CUDA_BLOB];
	uint32_t nframes;
	uint32_t pad;            /* enum nt_cuda_rawf */
	uint64_t ips[NT_CUDA_STACK_MAX];
};
#define NT_CUDA_RAW_CALL_FIXED __builtin_offsetof(struct nt_cuda_raw_call, ips)

struct nt_cuda_raw_launch {
	struct nt_event_hdr hdr;
	uint64_t cgroup_id;
	uint64_t func;
	uint64_t stream;
	uint16_t api;
	uint8_t layer;
	uint8_t first;           /* enum nt_cuda_launch_first, 0 neither */
	int32_t device;
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t shared_mem;
	uint32_t nframes;
	uint64_t ips[NT_CUDA_STACK_MAX];
};
#define NT_CUDA_RAW_LAUNCH_FIXED __builtin_offsetof(struct nt_cuda_raw_launch, ips)

/* A driver call that creates a kernel handle: cuModuleGetFunction(&f, mod,
 * name), cuLibraryGetKernel(&k, lib, name), cuKernelGetFunction(&f, k). */
struct nt_cuda_raw_kname {
	struct nt_event_hdr hdr;
	uint16_t api;
	uint16_t pad0;
	int32_t ret;
	uint64_t handle;         /* the handle created (pointee of arg 1) */
	uint64_t parent;         /* arg 2: module / library / kernel */
	uint32_t name_len;       /* bytes in name without NUL (0: none) */
	uint32_t pad1;
	char name[NT_CUDA_KNAME_MAX];
};
#define NT_CUDA_RAW_KNAME_FIXED __builtin_offsetof(struct nt_cuda_raw_kname, name)

struct nt_cuda_raw_path {
	struct nt_event_hdr hdr;
	uint64_t ino;            /* exec: inode of the new executable */
	uint32_t dev;            /* exec: its device (kernel dev_t) */
	uint32_t stopped;        /* 1: the BPF side sent SIGSTOP; cuda.c sends SIGCONT */
	char path[NT_CUDA_PATH_MAX];
};

struct nt_cuda_raw_fn {
	struct nt_event_hdr hdr;
	uint64_t cgroup_id;
	uint64_t duration_ns;
	uint64_t ret;
	uint32_t fn;             /* function-table index */
	uint32_t nframes;
	uint64_t ips[NT_CUDA_STACK_MAX];
};
#define NT_CUDA_RAW_FN_FIXED __builtin_offsetof(struct nt_cuda_raw_fn, ips)

/* Launch count map key (BPF hash `launches`): value u64 count. */
struct nt_cuda_launch_key {
	uint32_t tgid;
	uint16_t api;
	uint16_t pad;
	uint64_t func;
};

/*
 * Launch fast path (BPF array `lslots`, mmapped by user space): a slot
 * {tgid, func} that user space installs after the first launch of a
 * function in a process; later launches of it only increment the slot's
 * count (an inlined array access instead of a hash lookup). User space is
 * the only writer of tgid/func: it writes count = 0, func, then tgid
 * (release), and frees a slot by clearing tgid first. A launch counts in
 * the hash `launches` or in its slot, never both; the total is their sum.
 */
#define NT_CUDA_LSLOTS 4096

struct nt_cuda_lslot {
	uint64_t count;
	uint64_t func;
	uint32_t tgid;
	uint32_t pad;
};

static inline uint32_t nt_cuda_lslot_idx(uint32_t tgid, uint64_t func)
{
	uint64_t h = (func ^ ((uint64_t)tgid << 40)) * 0x9E3779B97F4A7C15ull;

	return (uint32_t)(h >> 52) & (NT_CUDA_LSLOTS - 1);
}

/* Function-table stats map (BPF hash `fnstats`), key {tgid, fn}. */
struct nt_cuda_fn_key {
	uint32_t tgid;
	uint32_t fn;
};

struct nt_cuda_fn_stats {
	uint64_t count;
	uint64_t sum_ns;
	uint64_t slow;
	uint64_t buckets[NT_CUDA_FN_BUCKETS + 1]; /* last: +Inf */
};

/* Histogram bounds of the function table, ns (shared with the metric). */
#define NT_CUDA_FN_BOUNDS_NS                                                   \
	{ 1000ull, 4000ull, 16000ull, 64000ull, 256000ull, 1000000ull,       \
	  4000000ull, 16000000ull, 64000000ull, 256000000ull, 1000000000ull, \
	  4000000000ull }

#endif /* NTCORE_CUDA_RAW_H */
