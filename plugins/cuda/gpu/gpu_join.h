/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda_gpu: the join of GPU activity records with the host side.
 *
 * A GPU record (kernel, copy, set) carries CUPTI's correlation id; the API
 * record of the same id says which thread made the call and when
 * ([start, end] on CLOCK_MONOTONIC); the cuda probe's event of that thread
 * whose entry time falls in that window (cuda.launch, cuda.graph_launch,
 * cuda.memcpy, cuda.memset: "host calls") gives the CPU stack, and the
 * python probe lends the Python stack of the same launch
 * (python.launch_stack, same thread and time). Records of a graph share the
 * graph launch's correlation and so its host call.
 *
 * Pure: no BPF, no sockets, no host vtable, so the unit test drives it with
 * synthetic sequences. Strings (stacks, names) are interned in one table.
 */
#ifndef NTCORE_GPU_JOIN_H
#define NTCORE_GPU_JOIN_H

#include <stdbool.h>
#include <stdint.h>

#include "gpu_util.h"
#include "gpu_wire.h"

/*
 * Which host call is an API call's: the newest of its kind and thread not
 * taken by another correlation with its entry in (the end of the thread's
 * previous API call, this one's end]. The cuda probe's uprobe fires at the
 * function's first instruction, before CUPTI's own entry stamp, and the
 * trap in between can be preempted for milliseconds on a loaded machine,
 * so the API call's own start is no bound; the previous call's end is.
 * Without that (the thread's first call; thread ids that are not tids) the
 * bound is the start less GPU_JOIN_SLACK_NS.
 */
#define GPU_JOIN_SLACK_NS 1000000ull

struct gpu_call {
	uint64_t ts;       /* the event's hdr.ts_ns (entry) */
	uint32_t stack;    /* CPU stack, root first (string id, 0 none) */
	uint32_t py_stack; /* lent Python stack (string id, 0 none) */
	uint32_t corr;     /* correlation that took it (0: free) */
	uint8_t kind;      /* enum nt_gpu_call */
	uint8_t pad[3];
};

struct gpu_thread {
	uint32_t tid;
	char comm[16];
	bool comm_known;
	struct gpu_call *ring; /* sorted by ts, oldest at head */
	uint32_t cap, head, n, max;
	uint64_t newest_ts;
	uint64_t last_api_end; /* end of its newest API record */
};

struct gpu_api_ent {
	uint64_t start, end;
	uint64_t lo; /* its host call's entry is after this (see above) */
	uint32_t tid, corr;
	uint16_t cbid;
	uint8_t call, driver;
};

struct gpu_proc {
	uint32_t pid;
	bool system_tid;          /* API records carry gettid() */
	bool api_off;             /* the job sends no API records: no waiting */
	bool any_call[5];         /* a host call of this kind was ever seen */
	struct gpu_map threads;   /* tid -> struct gpu_thread * */
	struct gpu_map api_at;    /* correlation -> slot in api */
	struct gpu_api_ent *api;  /* ring of API records */
	uint32_t api_cap, api_next;
	struct gpu_map names;     /* wire name id -> string id (demangled) */
	struct gpu_map ctx_dev;   /* CUPTI context id -> device */
	uint32_t max_calls;
};

enum gpu_join_how {
	GPU_JOIN_NONE = 0, /* no API record: pid only */
	GPU_JOIN_THREAD,   /* API record: thread and API time, no host call */
	GPU_JOIN_CALL,     /* and the host call: its time and stacks */
	GPU_JOIN_N
};

struct gpu_joined {
	int how;           /* enum gpu_join_how */
	uint32_t tid;      /* 0 unknown */
	const struct gpu_thread *thr; /* NULL unknown */
	uint64_t api_start;           /* 0 unknown */
	uint64_t call_ts;             /* 0: no host call */
	uint32_t stack, py_stack;     /* string ids, 0 none */
	uint8_t call;                 /* enum nt_gpu_call of the API */
	uint16_t cbid;
	uint8_t driver;
};

struct gpu_proc *gpu_proc_new(uint32_t pid, uint32_t max_calls, uint32_t max_apis);
void gpu_proc_free(struct gpu_proc *p);
struct gpu_thread *gpu_thread_get(struct gpu_proc *p, uint32_t tid, bool create);

/*
 * A host call seen by the cuda probe (kind: enum nt_gpu_call), or the
 * python probe's lent stack for one (py_stack). Both arrive for the same
 * (tid, ts), in either order; each fills its part of one entry.
 */
int gpu_join_call(struct gpu_proc *p, uint32_t tid, const char *comm,
		  uint64_t ts, unsigned kind, uint32_t stack);
int gpu_join_lend(struct gpu_proc *p, uint32_t tid, const char *comm,
		  uint64_t ts, uint32_t py_stack);

/* An API record from the job. */
void gpu_join_api(struct gpu_proc *p, const struct nt_gpu_api *a);

/*
 * Join a GPU record by its correlation (alt: a second id, the runtime
 * call's for copies; 0 none). `final` false: return 1 ("wait") when what
 * is missing may still come (no API record yet, unless the job sends none
 * (api_off), or the thread's host
 * calls have not reached the API call's end yet while the probe reports
 * calls of that kind for this process). Otherwise fill *j (how may be NONE)
 * and return 0.
 */
int gpu_join_find(struct gpu_proc *p, uint32_t corr, uint32_t alt, bool final,
		  struct gpu_joined *j);

/* The device of a CUPTI context (-1 unknown); learn it from records. */
int32_t gpu_proc_device(const struct gpu_proc *p, uint32_t context);
void gpu_proc_learn_device(struct gpu_proc *p, uint32_t context, uint32_t device);

/*
 * A stack from the cuda probe ("a;b;c", innermost or root first) made root
 * first into out: innermost-first text is recognised by its first frame
 * being the probed function itself (api_name, e.g. "cuLaunchKernel").
 */
void gpu_stack_root_first(const char *s, size_t len, const char *api_name,
			  struct nt_sb *out);

#endif
