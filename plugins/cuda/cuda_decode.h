/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda: the pure part of the probe's user side. It turns the raw
 * records of cuda.bpf.c into the published records of cuda.h and keeps the
 * per-process state they need: the live allocations (address map per
 * device, outstanding bytes), the names of kernels (runtime host stubs and
 * driver handles). No kernel, no libbpf, no host: unit-tested in
 * tests/unit/test_cuda.c. Symbolization is a callback with the signature of
 * host->symbolize.
 */
#ifndef NTCORE_CUDA_DECODE_H
#define NTCORE_CUDA_DECODE_H

#include "stackcache.h"
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/plugin.h"
#include "cuda.h"
#include "cuda_raw.h"
#include "cuda_graph.h"
#include "ntcore/kit/hmap.h"

/* Published event types, index into nt_cuda_state.type_ids. */
enum nt_cuda_evt {
	NT_CUDA_EVT_ALLOC = 0,
	NT_CUDA_EVT_FREE,
	NT_CUDA_EVT_MEMCPY,
	NT_CUDA_EVT_MEMSET,
	NT_CUDA_EVT_LAUNCH,
	NT_CUDA_EVT_GRAPH,
	NT_CUDA_EVT_SYNC,
	NT_CUDA_EVT_ENTER,
	NT_CUDA_EVT_ERROR,
	NT_CUDA_EVT_CALL,
	NT_CUDA_EVT_LIBRARY,
	NT_CUDA_EVT_REPORT,
	NT_CUDA_EVT_N
};

/* Largest published record (fixed part + strings). */
#define NT_CUDA_REC_MAX 16384

struct nt_cuda_rec {
	union {
		struct nt_event_hdr hdr;
		uint64_t align_;
		uint8_t bytes[NT_CUDA_REC_MAX];
	} u;
};

typedef int (*nt_cuda_sym_fn)(void *arg, uint32_t pid, uint64_t addr,
			      struct nt_symbol *out);

/* One live allocation. */
struct nt_cuda_block {
	uint64_t ptr, size, ts_ns, stack_id;
	int32_t device;
	uint32_t kind;
};

/* A physical allocation of the virtual-memory API (cuMemCreate): what a
 * mapping of it books (cuMemMap -> cuda.alloc, cuMemUnmap -> cuda.free). */
struct nt_cuda_vmm {
	uint64_t size;
	int32_t device; /* the prop's location when a device, else the thread's */
	uint32_t pad;
};

/* Outstanding bytes of one (device, kind). */
struct nt_cuda_outst {
	int32_t device;
	uint32_t kind;
	uint64_t bytes;
};

/* Per-process totals for the end-of-process report. */
struct nt_cuda_totals {
	uint64_t launches, graph_launches;
	uint64_t allocs, frees, alloc_bytes, free_bytes, alloc_failed;
	uint64_t copies[6], copy_bytes[6]; /* by enum nt_cuda_dir */
	uint64_t sync_copy_bytes[6], sync_copy_ns[6]; /* synchronous copies only */
	uint64_t sync_ns, syncs, errors;
	uint64_t peak_device_bytes;
};

struct nt_cuda_proc {
	uint32_t pid;
	uint64_t cgroup_id;
	char comm[NT_COMM_LEN + 1];
	struct nt_cuda_block *blocks; /* sorted by ptr */
	size_t nblocks, capblocks;
	struct nt_cuda_outst *outst;
	size_t noutst;
	struct nt_hmap knames;  /* runtime func / driver handle -> owned char * */
	struct nt_hmap kparent; /* driver: CUfunction -> CUkernel (owned char *) */
	struct nt_cuda_totals tot;
	struct nt_cuda_graphs graphs; /* kernels of its CUDA graphs */
	struct nt_hmap vmm;           /* cuMemCreate handle -> struct nt_cuda_vmm */
	uint64_t device_bytes_now;    /* all devices, on-device kinds */
	bool dead;                    /* exited: kept a few ticks for exports */
	uint32_t dead_tick;
};

struct nt_cuda_state {
	uint32_t type_ids[NT_CUDA_EVT_N];
	nt_cuda_sym_fn sym;
	void *sym_arg;
	uint32_t stack_depth;         /* frames kept in a formatted stack */
	struct nt_hmap procs;         /* pid -> struct nt_cuda_proc * (owned) */
	struct nt_cuda_stack_cache stacks; /* formatted stacks (stackcache.h) */
};

void nt_cuda_state_init(struct nt_cuda_state *st, nt_cuda_sym_fn sym,
			void *sym_arg);
void nt_cuda_state_fini(struct nt_cuda_state *st);
/* The process entry, created on first use (NULL on ENOMEM). */
struct nt_cuda_proc *nt_cuda_proc_get(struct nt_cuda_state *st, uint32_t pid);
struct nt_cuda_proc *nt_cuda_proc_find(const struct nt_cuda_state *st,
				       uint32_t pid);
void nt_cuda_proc_drop(struct nt_cuda_state *st, uint32_t pid);

/* What cuda.bpf.c must capture for `api` (false: not a probed API). */
bool nt_cuda_spec_for(unsigned api, struct nt_cuda_spec *out);

/* cudaMemcpyKind (0..4) -> enum nt_cuda_dir, 0 for Default. */
int nt_cuda_dir_from_kind(uint64_t kind);
/* Direction of a copy from the process's allocation map. */
int nt_cuda_classify_copy(const struct nt_cuda_proc *p, uint64_t dst,
			  uint64_t src);
/* The live block containing addr, or NULL. */
const struct nt_cuda_block *nt_cuda_block_at(const struct nt_cuda_proc *p,
					     uint64_t addr);
uint64_t nt_cuda_outstanding(const struct nt_cuda_proc *p, int32_t device,
			     uint32_t kind);

/* Stack: hash of raw ips (0 when n == 0) and the ';'-joined symbolized
 * frames, root (outermost) first like a folded stack, the probed function
 * last, written to buf; returns the length. Unnamed frames read
 * "module+0xOFFSET". The walk is cut at the first implausible frame.
 * `top` (or NULL) names frame 0, the probed function, when symbolization
 * cannot (its library mapped after the process's maps were last read). */
uint64_t nt_cuda_stack_id(const uint64_t *ips, uint32_t n);
size_t nt_cuda_format_stack(struct nt_cuda_state *st, uint32_t pid,
			    const uint64_t *ips, uint32_t n, char *buf,
			    size_t cap, const char *top);
/* Has a frame-pointer walk gone past the real stack at `ip` (symbolized as
 * sym, sym_rc)? An address in no mapped file, the previous frame again, an
 * unnamed address inside the dynamic loader. */
bool nt_cuda_frame_implausible(uint64_t ip, uint64_t prev_ip, int sym_rc,
			       const struct nt_symbol *sym);

/*
 * Decode one NT_CUDA_RAW_CALL record: updates the process state and writes
 * up to two published records to out[0], out[1] (the typed event, then a
 * cuda.error when the call failed). Returns how many were written (0: the
 * call yields no event, e.g. cudaFree(NULL)), or -EINVAL for a malformed
 * record.
 */
int nt_cuda_decode_call(struct nt_cuda_state *st,
			const struct nt_cuda_raw_call *rc, size_t size,
			struct nt_cuda_rec out[2]);
/* NT_CUDA_RAW_ENTER -> cuda.enter. Returns 1, or -EINVAL. */
int nt_cuda_decode_enter(struct nt_cuda_state *st,
			 const struct nt_cuda_raw_call *rc, size_t size,
			 struct nt_cuda_rec *out);
/* NT_CUDA_RAW_KNAME: learn a handle's name. Returns 0 or -errno. */
int nt_cuda_learn_kname(struct nt_cuda_state *st,
			const struct nt_cuda_raw_kname *k, size_t size);
/*
 * The name of a launched function: runtime (layer 1) by symbolizing the
 * host stub, driver by the handle map; cached per process. Never NULL:
 * "" when unknown.
 */
const char *nt_cuda_kernel_name(struct nt_cuda_state *st, uint32_t pid,
				int layer, uint64_t func);
/* A launch made while its thread captured a graph (first ==
 * NT_CUDA_LAUNCH_CAPTURED): named, and added to the capture's kernels.
 * Returns 0 or -errno. */
int nt_cuda_note_captured(struct nt_cuda_state *st,
			  const struct nt_cuda_raw_launch *rl, size_t size);
/* The kernels a successful graph launch (cuda.graph_launch of pid) ran,
 * NULL when the graph's making was not seen. */
const struct nt_cuda_glist *nt_cuda_graph_launched(struct nt_cuda_state *st,
						   uint32_t pid, uint64_t exec);
/* NT_CUDA_RAW_LAUNCH -> cuda.launch. Returns 1, or -EINVAL. */
int nt_cuda_decode_launch(struct nt_cuda_state *st,
			  const struct nt_cuda_raw_launch *rl, size_t size,
			  struct nt_cuda_rec *out);

/* Demangle a C++ symbol (itanium); returns a malloc'ed string or NULL. */
char *nt_cuda_demangle(const char *mangled);

/* Record builder: append a string to rec and point *field at it. */
void nt_cuda_rec_str(struct nt_cuda_rec *rec, struct nt_vstr *field,
		     const char *s, size_t n);

/* One kernel's launch count, for the report. */
struct nt_cuda_kcount {
	const char *name;
	uint64_t count;
};

/* Text of the end-of-process report (malloc'ed), NULL on ENOMEM. `top`
 * holds the process's kernels in any order; the report names the 10 most
 * launched. */
char *nt_cuda_report_text(const struct nt_cuda_proc *p,
			  const struct nt_cuda_kcount *top, size_t ntop);

#endif /* NTCORE_CUDA_DECODE_H */
