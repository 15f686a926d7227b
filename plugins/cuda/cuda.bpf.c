// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * ntcore cuda probe, kernel side.
 *
 * - call_enter / call_return: one generic uprobe + uretprobe pair for every
 *   CUDA call whose result matters (alloc, free, copy, set, sync, graph
 *   launch, kernel-handle creation, device selection). The attach cookie is
 *   the API id; the `specs` map says what to capture. Raw arguments go to
 *   user space, which interprets them per function (cuda_decode.c).
 *   A driver call made while a probed runtime call of the same thread is in
 *   flight is skipped: cudaMalloc -> cuMemAlloc_v2 counts once.
 * - launch_*: the hot path, one uprobe per launch and no return probe. Counts
 *   go to the `launches` hash (per process, API, function); a record is
 *   written only on the first launch of a function in a process (so user
 *   space can name it while the process lives) or for every launch with
 *   `launch_events`.
 * - fn_enter / fn_return: the config's function table: counts and latency
 *   histograms in `fnstats`, a record only for calls over the threshold.
 * - on_openat_* / on_exec: library discovery. A target that opens a CUDA
 *   library (or execs a binary not yet checked) is stopped with SIGSTOP
 *   when stop_on_load is set; user space attaches and sends SIGCONT, so no
 *   call is missed between the library's load and the probe's attach.
 *   These programs live in core/bpf/libload.bpf.h (shared with nvlink).
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"
#include "cuda_raw.h"
#include "uprobe_args.bpf.h" /* arguments 7.. per arch */

const volatile bool stacks_on = false;
const volatile bool launch_events = false;
const volatile bool enter_events = false;
/* Launch records wake the reader only once this much waits (set from the
 * ring's size): one wake-up per record cost a context switch each, and at
 * 400k launches/s the reader fell behind. Every other record (a call, an
 * error, an OOM) wakes it at once, so alerts do not wait. */
const volatile __u64 launch_wake_bytes = 65536;
const volatile __u64 fn_threshold_ns[NT_CUDA_FN_MAX] = {};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NT_CUDA_SPEC_MAX);
	__type(key, __u32);
	__type(value, struct nt_cuda_spec);
} specs SEC(".maps");

/* In-flight calls, key (tid << 2 | layer). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct nt_cuda_raw_call);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nt_cuda_raw_call);
} call_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nt_cuda_raw_kname);
} kname_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nt_cuda_raw_launch);
} launch_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nt_cuda_raw_fn);
} fn_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct nt_cuda_launch_key);
	__type(value, __u64);
} launches SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, NT_CUDA_LSLOTS);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct nt_cuda_lslot);
} lslots SEC(".maps");

/* Current device per thread (cudaSetDevice / cuCtxSetCurrent). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	NT_MAP_LAZY;
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __s32);
} cur_dev SEC(".maps");

/* Device of each primary context (cuDevicePrimaryCtxRetain). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, __s32);
} ctx_dev SEC(".maps");

/*
 * Threads capturing a CUDA graph (cudaStreamBeginCapture .. EndCapture):
 * thread id -> the stream captured. A launch of such a thread is recorded
 * into the graph, not run: it is not counted, and its record goes to user
 * space (first = NT_CUDA_LAUNCH_CAPTURED), which adds it to the graph's
 * kernels and counts them at each launch of the graph. `capturing_n` keeps
 * the hot path at one load of a global while nothing is captured.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} capturing SEC(".maps");

__s64 capturing_n = 0;

/* Function table: entry time per (tid << 8 | fn). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, __u64);
} fn_inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	NT_MAP_LAZY;
	__uint(max_entries, 16384);
	__type(key, struct nt_cuda_fn_key);
	__type(value, struct nt_cuda_fn_stats);
} fnstats SEC(".maps");


/* Uprobe hits per attach cookie (API id, or NT_CUDA_FN_BASE + function
 * table index), in every process: what the probe costs, by function. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NT_CUDA_SPEC_MAX);
	__type(key, __u32);
	__type(value, __u64);
} probe_hits SEC(".maps");

static __always_inline void count_hit(__u32 cookie)
{
	__u64 *n = bpf_map_lookup_elem(&probe_hits, &cookie);

	if (n)
		(*n)++;
}

/*
 * The last target decision per CPU: a launch-bound loop runs on one thread,
 * so the target-map lookup is made once, not per launch (a per-CPU array
 * lookup is inlined by the verifier; a hash lookup costs ~20 ns).
 */
struct tcache {
	__u32 tgid;
	__u32 ok;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tcache);
} target_cache SEC(".maps");

static __always_inline bool target_ok_cached(__u32 tgid)
{
	struct tcache *tc;
	__u32 zero = 0;
	bool ok;

	if (!nt_filter_on)
		return true;
	tc = bpf_map_lookup_elem(&target_cache, &zero);
	if (tc && tc->tgid == tgid && tgid)
		return tc->ok;
	ok = nt_target_ok(tgid);
	if (tc) {
		tc->tgid = tgid;
		tc->ok = ok;
	}
	return ok;
}

static __always_inline __u64 slot_key(__u32 tid, __u32 layer)
{
	return ((__u64)tid << 2) | (layer & 3);
}

static __always_inline void fill_hdr(struct nt_event_hdr *h, __u32 type,
				     __u64 id)
{
	h->type = type;
	h->size = 0;
	h->ts_ns = bpf_ktime_get_ns();
	h->pid = id >> 32;
	h->tid = (__u32)id;
	bpf_get_current_comm(h->comm, sizeof(h->comm));
}

/* A record user space needs now: a failed call (the OOM and error
 * detectors' latency), a kernel's first launch (its name, read from the
 * process before it may exit), a library a held target loaded. */
static __always_inline void output(void *rec, __u64 size)
{
	if (bpf_ringbuf_output(&events, rec, size, BPF_RB_FORCE_WAKEUP))
		nt_count_drop();
}

/*
 * A record that may wait (a successful call, an enter event, a launch):
 * the reader is woken only once `launch_wake_bytes` are pending; user space
 * also reads on a short timer and before it acts on a process exit. A
 * wake-up per record is a self-IPI, a VM exit in a guest: 1.5-2.5 us per
 * call on the GPU machine, 3.5-4 us on the 2-CPU VM, several times the
 * probe's own cost (docs/cuda.md, Cost).
 */
static __always_inline void output_lazy(void *rec, __u64 size)
{
	__u64 flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= launch_wake_bytes
			      ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;

	if (bpf_ringbuf_output(&events, rec, size, flags))
		nt_count_drop();
}

static __always_inline __s32 device_of(__u32 tid, __u32 layer)
{
	__s32 *d = bpf_map_lookup_elem(&cur_dev, &tid);

	(void)layer;
	if (d)
		return *d;
	/* The runtime's device is 0 until cudaSetDevice says otherwise; a
	 * driver call of a thread whose context the probe did not see made
	 * current runs in the one the runtime made current: device 0's
	 * primary context (cuBLAS's workspace, calls after an attach). */
	return 0;
}

static __always_inline __u64 arg_n(struct nt_cuda_raw_call *rc, __u32 n)
{
	/* n is 1-based */
	if (n >= 1 && n <= 6)
		return rc->arg[(n - 1) & 7];
	if (n >= 7 && n <= 10)
		return rc->sarg[(n - 7) & 3];
	return 0;
}

/* ------------------------------------------------------------------ */
/* Generic calls                                                       */
/* ------------------------------------------------------------------ */

/* The raw arguments of a call at its entry: registers, the stack's from the
 * 7th on, and the struct an argument points at when the spec says so. */
static __always_inline void capture_args(struct pt_regs *ctx,
					 const struct nt_cuda_spec *sp,
					 struct nt_cuda_raw_call *rc)
{
	rc->arg[0] = PT_REGS_PARM1(ctx);
	rc->arg[1] = PT_REGS_PARM2(ctx);
	rc->arg[2] = PT_REGS_PARM3(ctx);
	rc->arg[3] = PT_REGS_PARM4(ctx);
	rc->arg[4] = PT_REGS_PARM5(ctx);
	rc->arg[5] = PT_REGS_PARM6(ctx);
	rc->sarg[0] = rc->sarg[1] = rc->sarg[2] = rc->sarg[3] = 0;
	if (sp->nstack) {
		__u32 n = sp->nstack;

		if (n > 4)
			n = 4;
		nt_uprobe_args_from7(ctx, rc->sarg, n);
	}
	rc->out[0] = rc->out[1] = 0;
	if ((sp->flags & NT_CUDA_SPEC_DEREF) && sp->deref_arg) {
		__u64 p = arg_n(rc, sp->deref_arg);
		__u32 sz = sp->deref_size;

		if (sz > NT_CUDA_BLOB)
			sz = NT_CUDA_BLOB;
		if (p && sz)
			bpf_probe_read_user(rc->blob, sz, (void *)p);
	}
}

SEC("uprobe")
int call_enter(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id, zero = 0;
	__u32 api = (__u32)bpf_get_attach_cookie(ctx);
	struct nt_cuda_raw_call *rc, *cur;
	struct nt_cuda_spec *sp;
	__u64 key;

	count_hit(api);
	if (!nt_target_ok(tgid))
		return 0;
	sp = bpf_map_lookup_elem(&specs, &api);
	if (!sp || !sp->layer)
		return 0;
	if (sp->layer == NT_CUDA_LAYER_DRIVER) {
		__u64 rk = slot_key(tid, NT_CUDA_LAYER_RUNTIME);

		if (bpf_map_lookup_elem(&inflight, &rk))
			return 0; /* inside a probed runtime call */
	}
	key = slot_key(tid, sp->layer);
	cur = bpf_map_lookup_elem(&inflight, &key);
	if (cur && cur->api != api)
		return 0; /* nested call of the same layer: the outer one counts */

	rc = bpf_map_lookup_elem(&call_scratch, &zero);
	if (!rc)
		return 0;
	fill_hdr(&rc->hdr, NT_CUDA_RAW_CALL, id);
	rc->cgroup_id = 0;
	rc->duration_ns = 0;
	rc->api = api;
	rc->layer = sp->layer;
	rc->flags = 0;
	rc->device = -1;
	rc->ret = 0;
	capture_args(ctx, sp, rc);
	rc->nframes = 0;
	rc->pad = 0;
	if (stacks_on && (sp->flags & NT_CUDA_SPEC_STACK)) {
		long n = bpf_get_stack(ctx, rc->ips, sizeof(rc->ips),
				       BPF_F_USER_STACK);

		if (n > 0)
			rc->nframes = n / 8;
	}
	bpf_map_update_elem(&inflight, &key, rc, BPF_ANY);

	if (enter_events && (sp->flags & NT_CUDA_SPEC_ENTER_EV)) {
		rc->hdr.type = NT_CUDA_RAW_ENTER;
		rc->hdr.size = NT_CUDA_RAW_CALL_FIXED;
		rc->cgroup_id = bpf_get_current_cgroup_id();
		rc->device = device_of(tid, sp->layer);
		output_lazy(rc, NT_CUDA_RAW_CALL_FIXED);
	}
	return 0;
}

static __always_inline void emit_kname(struct nt_cuda_raw_call *rc, __u64 id)
{
	struct nt_cuda_raw_kname *k;
	__u32 zero = 0;
	long n = 0;

	k = bpf_map_lookup_elem(&kname_scratch, &zero);
	if (!k)
		return;
	fill_hdr(&k->hdr, NT_CUDA_RAW_KNAME, id);
	k->api = rc->api;
	k->ret = (__s32)rc->ret;
	k->handle = rc->out[0];
	k->parent = rc->arg[1];
	k->name_len = 0;
	if (rc->api != NT_CUDA_API_cuKernelGetFunction && rc->arg[2]) {
		n = bpf_probe_read_user_str(k->name, sizeof(k->name),
					    (void *)rc->arg[2]);
		if (n > 0)
			k->name_len = n - 1;
	}
	n = k->name_len;
	if (n > NT_CUDA_KNAME_MAX)
		n = NT_CUDA_KNAME_MAX;
	k->hdr.size = NT_CUDA_RAW_KNAME_FIXED + n;
	output_lazy(k, (NT_CUDA_RAW_KNAME_FIXED + n) & 0xfff);
}

/* The pointees of the call's output arguments, read at its return. */
static __always_inline void read_outs(const struct nt_cuda_spec *sp,
				      struct nt_cuda_raw_call *rc)
{
	if (sp->out_arg) {
		__u64 p = arg_n(rc, sp->out_arg);

		if (p)
			bpf_probe_read_user(&rc->out[0], 8, (void *)p);
	}
	if (sp->out2_arg) {
		__u64 p = arg_n(rc, sp->out2_arg);

		if (p)
			bpf_probe_read_user(&rc->out[1], 8, (void *)p);
	}
}

/* The thread's device, changed in place: cur_dev allocates at insert
 * (NT_MAP_LAZY), and an update of an existing key would allocate again. */
static __always_inline void set_cur_dev(__u32 tid, __s32 d)
{
	__s32 *cur = bpf_map_lookup_elem(&cur_dev, &tid);

	if (cur)
		*cur = d;
	else
		bpf_map_update_elem(&cur_dev, &tid, &d, BPF_NOEXIST);
}

/* A successful device or context call: the thread's current device. */
static __always_inline void note_device(__u32 api, __u32 tid,
					const struct nt_cuda_raw_call *rc)
{
	if (api == NT_CUDA_API_cudaSetDevice) {
		set_cur_dev(tid, (__s32)rc->arg[0]);
	} else if (api == NT_CUDA_API_cuDevicePrimaryCtxRetain) {
		__u64 c = rc->out[0];
		__s32 d = (__s32)rc->arg[1];

		bpf_map_update_elem(&ctx_dev, &c, &d, BPF_ANY);
	} else if (api == NT_CUDA_API_cuCtxSetCurrent ||
		   api == NT_CUDA_API_cuCtxPushCurrent_v2) {
		__u64 c = rc->arg[0];
		__s32 *d = bpf_map_lookup_elem(&ctx_dev, &c);

		if (d)
			set_cur_dev(tid, *d);
	}
}

/* A capture begins or ends on this thread (graph-building calls). */
static __always_inline void note_capture(__u32 api, __u32 tid,
					 const struct nt_cuda_raw_call *rc)
{
	bool begin = api == NT_CUDA_API_cudaStreamBeginCapture ||
		     api == NT_CUDA_API_cudaStreamBeginCapture_ptsz ||
		     api == NT_CUDA_API_cudaStreamBeginCaptureToGraph ||
		     api == NT_CUDA_API_cuStreamBeginCapture_v2 ||
		     api == NT_CUDA_API_cuStreamBeginCapture_v2_ptsz ||
		     api == NT_CUDA_API_cuStreamBeginCaptureToGraph;
	bool end = api == NT_CUDA_API_cudaStreamEndCapture ||
		   api == NT_CUDA_API_cudaStreamEndCapture_ptsz ||
		   api == NT_CUDA_API_cuStreamEndCapture ||
		   api == NT_CUDA_API_cuStreamEndCapture_ptsz;
	__u64 stream = rc->arg[0];

	if (begin && (__u32)rc->ret == 0 &&
	    bpf_map_update_elem(&capturing, &tid, &stream, BPF_NOEXIST) == 0)
		__sync_fetch_and_add(&capturing_n, 1);
	/* a capture ends with its EndCapture, failed or not */
	if (end && bpf_map_delete_elem(&capturing, &tid) == 0)
		__sync_fetch_and_add(&capturing_n, -1);
}

SEC("uretprobe")
int call_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u32 api = (__u32)bpf_get_attach_cookie(ctx);
	struct nt_cuda_raw_call *rc;
	struct nt_cuda_spec *sp;
	__u64 key, size;
	__u32 fam;

	if (!nt_target_ok(tgid))
		return 0;
	sp = bpf_map_lookup_elem(&specs, &api);
	if (!sp || !sp->layer)
		return 0;
	key = slot_key(tid, sp->layer);
	rc = bpf_map_lookup_elem(&inflight, &key);
	if (!rc || rc->api != api)
		return 0;
	rc->duration_ns = bpf_ktime_get_ns() - rc->hdr.ts_ns;
	rc->ret = PT_REGS_RC(ctx);
	rc->flags |= NT_CUDA_F_RET;
	rc->cgroup_id = bpf_get_current_cgroup_id();
	read_outs(sp, rc);
	fam = sp->family;
	if (fam == NT_CUDA_FAM_GRAPHDEF)
		note_capture(api, tid, rc);
	if (stacks_on && rc->nframes == 0 && (__u32)rc->ret != 0) {
		/* a failed call without an entry stack: the caller's stack at
		 * the return (user space appends the function's name) */
		long n = bpf_get_stack(ctx, rc->ips, sizeof(rc->ips),
				       BPF_F_USER_STACK);

		if (n > 0) {
			rc->nframes = n / 8;
			rc->pad = NT_CUDA_RAWF_RET_STACK;
		}
	}
	if (fam == NT_CUDA_FAM_DEVICE && (__u32)rc->ret == 0) {
		note_device(api, tid, rc);
		bpf_map_delete_elem(&inflight, &key);
		return 0;
	}
	rc->device = device_of(tid, sp->layer);
	if (fam == NT_CUDA_FAM_KNAME) {
		emit_kname(rc, id);
		if ((__u32)rc->ret == 0) {
			bpf_map_delete_elem(&inflight, &key);
			return 0;
		}
	}
	rc->hdr.type = NT_CUDA_RAW_CALL;
	size = NT_CUDA_RAW_CALL_FIXED + (__u64)(rc->nframes & 63) * 8;
	if (size > sizeof(*rc))
		size = sizeof(*rc);
	rc->hdr.size = size;
	if ((__u32)rc->ret != 0)
		output(rc, size);
	else
		output_lazy(rc, size);
	bpf_map_delete_elem(&inflight, &key);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Launches: one uprobe hit, no return probe                           */
/* ------------------------------------------------------------------ */

enum { L_RT = 0, L_RT_EX = 1, L_DRV = 2, L_DRV_EX = 3 };

/*
 * launch_layer = "auto" counts launches at the driver layer, and at the
 * runtime layer while no driver library is known (a runtime-only process,
 * or until the runtime loads its driver). Where the runtime loads its
 * driver inside a launch, that launch reaches both layers: the runtime
 * probe marks it for its thread, and while user space says a hand-over is
 * under way, a driver launch with its thread's mark counts for nothing.
 */
const volatile bool auto_layer = false;
bool handover = false; /* written by user space */

/* thread id -> when its last runtime-layer launch began (a thread that
 * is stopped while the driver's probes attach may resume on another CPU:
 * a per-CPU slot would not do) */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} rt_marks SEC(".maps");

#define RT_MARK_NS 2000000000ull /* a mark older than this is stale */

/* true: this driver launch is the runtime launch just counted */
static __always_inline bool auto_layer_dup(int kind, __u32 tid)
{
	__u64 now = bpf_ktime_get_ns(), *ts;

	if (kind == L_RT || kind == L_RT_EX) {
		bpf_map_update_elem(&rt_marks, &tid, &now, BPF_ANY);
		return false;
	}
	ts = bpf_map_lookup_elem(&rt_marks, &tid);
	if (!ts || now - *ts > RT_MARK_NS)
		return false;
	bpf_map_delete_elem(&rt_marks, &tid);
	handover = false; /* the one launch in flight is counted: done */
	return true;
}

/*
 * Count a launch of func by tgid: in the slot user space installed for the
 * kernel (the fast path: -1, nothing more to do), else in the hash
 * `launches` under *k (filled here): 1 when this created the key (the
 * kernel's first launch in the process), 0 otherwise.
 */
static __always_inline int count_launch(struct pt_regs *ctx, __u32 tgid,
					__u64 func,
					struct nt_cuda_launch_key *k)
{
	__u64 *cnt, one = 1;

	if (!launch_events) {
		__u32 idx = nt_cuda_lslot_idx(tgid, func);
		struct nt_cuda_lslot *ls = bpf_map_lookup_elem(&lslots, &idx);

		if (ls && ls->tgid == tgid && ls->func == func) {
			__sync_fetch_and_add(&ls->count, 1);
			return -1;
		}
	}
	k->tgid = tgid;
	k->api = (__u16)bpf_get_attach_cookie(ctx);
	k->func = func;
	cnt = bpf_map_lookup_elem(&launches, k);
	if (cnt) {
		__sync_fetch_and_add(cnt, 1);
		return 0;
	}
	if (bpf_map_update_elem(&launches, k, &one, BPF_NOEXIST) == 0)
		return 1;
	cnt = bpf_map_lookup_elem(&launches, k);
	if (cnt)
		__sync_fetch_and_add(cnt, 1);
	return 0;
}

/* Grid, block, shared memory and stream of a launch, by its form. */
static __always_inline void launch_config(struct pt_regs *ctx, int kind,
					  __u64 cfg,
					  struct nt_cuda_raw_launch *rl)
{
	if (kind == L_RT) {
		/* cudaLaunchKernel(func, dim3 grid, dim3 block, args, shmem,
		 * stream): each dim3 travels in two registers. */
		__u64 g01 = PT_REGS_PARM2(ctx), g2 = PT_REGS_PARM3(ctx);
		__u64 b01 = PT_REGS_PARM4(ctx), b2 = PT_REGS_PARM5(ctx);
		__u64 st[2] = {};

		rl->grid[0] = (__u32)g01;
		rl->grid[1] = g01 >> 32;
		rl->grid[2] = (__u32)g2;
		rl->block[0] = (__u32)b01;
		rl->block[1] = b01 >> 32;
		rl->block[2] = (__u32)b2;
		nt_uprobe_args_from7(ctx, st, 2);
		rl->shared_mem = (__u32)st[0];
		rl->stream = st[1];
	} else if (kind == L_DRV) {
		/* cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, stream, ...) */
		__u64 st[3] = {};

		rl->grid[0] = (__u32)PT_REGS_PARM2(ctx);
		rl->grid[1] = (__u32)PT_REGS_PARM3(ctx);
		rl->grid[2] = (__u32)PT_REGS_PARM4(ctx);
		rl->block[0] = (__u32)PT_REGS_PARM5(ctx);
		rl->block[1] = (__u32)PT_REGS_PARM6(ctx);
		nt_uprobe_args_from7(ctx, st, 3);
		rl->block[2] = (__u32)st[0];
		rl->shared_mem = (__u32)st[1];
		rl->stream = st[2];
	} else {
		/* cudaLaunchConfig_t and CUlaunchConfig share this layout:
		 * grid[3] @0, block[3] @12, shmem @24, stream @32. */
		__u32 dims[7] = {};

		bpf_probe_read_user(dims, sizeof(dims), (void *)cfg);
		bpf_probe_read_user(&rl->stream, 8, (void *)(cfg + 32));
		rl->grid[0] = dims[0];
		rl->grid[1] = dims[1];
		rl->grid[2] = dims[2];
		rl->block[0] = dims[3];
		rl->block[1] = dims[4];
		rl->block[2] = dims[5];
		rl->shared_mem = dims[6];
	}
}

static __always_inline int do_launch(struct pt_regs *ctx, int kind)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, zero = 0;
	struct nt_cuda_launch_key k = {};
	struct nt_cuda_raw_launch *rl;
	__u64 func, cfg = 0;
	__u8 first = 0;

	count_hit((__u32)bpf_get_attach_cookie(ctx));
	if (!target_ok_cached(tgid))
		return 0;
	/* in auto mode: runtime launches are probed only while no driver
	 * is known; a driver launch looks only during a hand-over */
	if (auto_layer && (kind == L_RT || kind == L_RT_EX || handover) &&
	    auto_layer_dup(kind, (__u32)id))
		return 0;
	if (kind == L_RT_EX || kind == L_DRV_EX) {
		cfg = PT_REGS_PARM1(ctx);
		func = PT_REGS_PARM2(ctx);
	} else {
		func = PT_REGS_PARM1(ctx);
	}
	if (capturing_n > 0) {
		__u32 tid = (__u32)id;

		/* into a graph: recorded for user space, not counted */
		if (bpf_map_lookup_elem(&capturing, &tid))
			first = NT_CUDA_LAUNCH_CAPTURED;
	}
	if (!first) {
		int r = count_launch(ctx, tgid, func, &k);

		if (r < 0)
			return 0; /* counted in its slot */
		first = (__u8)r;
	} else {
		k.api = (__u16)bpf_get_attach_cookie(ctx);
	}
	if (!first && !launch_events)
		return 0;

	rl = bpf_map_lookup_elem(&launch_scratch, &zero);
	if (!rl)
		return 0;
	fill_hdr(&rl->hdr, NT_CUDA_RAW_LAUNCH, id);
	rl->cgroup_id = bpf_get_current_cgroup_id();
	rl->func = func;
	rl->api = k.api;
	rl->layer = (kind == L_RT || kind == L_RT_EX) ? NT_CUDA_LAYER_RUNTIME
						       : NT_CUDA_LAYER_DRIVER;
	rl->first = first;
	rl->device = device_of((__u32)id, rl->layer);
	rl->stream = 0;
	rl->shared_mem = 0;
	launch_config(ctx, kind, cfg, rl);
	rl->nframes = 0;
	if (stacks_on || first) {
		long n = bpf_get_stack(ctx, rl->ips, sizeof(rl->ips),
				       BPF_F_USER_STACK);

		if (n > 0)
			rl->nframes = n / 8;
	}
	{
		__u64 size = NT_CUDA_RAW_LAUNCH_FIXED +
			     (__u64)(rl->nframes & 63) * 8;

		if (size > sizeof(*rl))
			size = sizeof(*rl);
		rl->hdr.size = size;
		/* the first launch of a kernel names it: at once */
		if (first)
			output(rl, size);
		else
			output_lazy(rl, size);
	}
	return 0;
}

SEC("uprobe")
int launch_rt(struct pt_regs *ctx)
{
	return do_launch(ctx, L_RT);
}

SEC("uprobe")
int launch_rt_ex(struct pt_regs *ctx)
{
	return do_launch(ctx, L_RT_EX);
}

SEC("uprobe")
int launch_drv(struct pt_regs *ctx)
{
	return do_launch(ctx, L_DRV);
}

SEC("uprobe")
int launch_drv_ex(struct pt_regs *ctx)
{
	return do_launch(ctx, L_DRV_EX);
}

/* ------------------------------------------------------------------ */
/* Function table                                                      */
/* ------------------------------------------------------------------ */

SEC("uprobe")
int fn_enter(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 fn = (__u32)bpf_get_attach_cookie(ctx) - NT_CUDA_FN_BASE;
	__u64 key, now;

	count_hit(fn + NT_CUDA_FN_BASE);
	if (!nt_target_ok(id >> 32) || fn >= NT_CUDA_FN_MAX)
		return 0;
	key = ((__u64)(__u32)id << 8) | fn;
	now = bpf_ktime_get_ns();
	bpf_map_update_elem(&fn_inflight, &key, &now, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int fn_return(struct pt_regs *ctx)
{
	static const __u64 bounds[NT_CUDA_FN_BUCKETS] = NT_CUDA_FN_BOUNDS_NS;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 fn = (__u32)bpf_get_attach_cookie(ctx) - NT_CUDA_FN_BASE;
	struct nt_cuda_fn_key sk = {};
	struct nt_cuda_fn_stats *st, zst = {};
	__u64 key, *t0, d, thr;
	__u32 b = NT_CUDA_FN_BUCKETS, zero = 0;

	if (!nt_target_ok(id >> 32) || fn >= NT_CUDA_FN_MAX)
		return 0;
	key = ((__u64)(__u32)id << 8) | fn;
	t0 = bpf_map_lookup_elem(&fn_inflight, &key);
	if (!t0)
		return 0;
	d = bpf_ktime_get_ns() - *t0;
	bpf_map_delete_elem(&fn_inflight, &key);

	sk.tgid = id >> 32;
	sk.fn = fn;
	st = bpf_map_lookup_elem(&fnstats, &sk);
	if (!st) {
		bpf_map_update_elem(&fnstats, &sk, &zst, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&fnstats, &sk);
		if (!st)
			return 0;
	}
	for (__u32 i = 0; i < NT_CUDA_FN_BUCKETS; i++) {
		if (d <= bounds[i]) {
			b = i;
			break;
		}
	}
	__sync_fetch_and_add(&st->count, 1);
	__sync_fetch_and_add(&st->sum_ns, d);
	if (b <= NT_CUDA_FN_BUCKETS)
		__sync_fetch_and_add(&st->buckets[b], 1);

	thr = fn_threshold_ns[fn & (NT_CUDA_FN_MAX - 1)];
	if (thr && d >= thr) {
		struct nt_cuda_raw_fn *r;
		__u64 size;

		__sync_fetch_and_add(&st->slow, 1);
		r = bpf_map_lookup_elem(&fn_scratch, &zero);
		if (!r)
			return 0;
		fill_hdr(&r->hdr, NT_CUDA_RAW_FN, id);
		r->hdr.ts_ns -= d;
		r->cgroup_id = bpf_get_current_cgroup_id();
		r->duration_ns = d;
		r->ret = PT_REGS_RC(ctx);
		r->fn = fn;
		r->nframes = 0;
		if (stacks_on) {
			long n = bpf_get_stack(ctx, r->ips, sizeof(r->ips),
					       BPF_F_USER_STACK);

			if (n > 0)
				r->nframes = n / 8;
		}
		size = NT_CUDA_RAW_FN_FIXED + (__u64)(r->nframes & 63) * 8;
		if (size > sizeof(*r))
			size = sizeof(*r);
		r->hdr.size = size;
		output_lazy(r, size);
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Library discovery (shared with the nvlink probe: core/bpf/libload.bpf.h) */
/* ------------------------------------------------------------------ */

#define NT_LIBLOAD_REC struct nt_cuda_raw_path
#define NT_LIBLOAD_OPEN NT_CUDA_RAW_OPEN
#define NT_LIBLOAD_EXEC NT_CUDA_RAW_EXEC
#define NT_LIBLOAD_PFX_MAX NT_CUDA_LIB_PFX_MAX
#define NT_LIBLOAD_PFX_LEN NT_CUDA_LIB_PFX_LEN
#define nt_libload_output output
#include "libload.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";
