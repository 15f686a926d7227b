// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * nvlink probe, kernel side.
 *
 * - nccl_enter / nccl_return: one uprobe + uretprobe pair on every probed
 *   NCCL entry point; the attach cookie is the enum nvl_call. The entry keeps
 *   the raw arguments per thread in `inflight` (a nested probed call, such
 *   as ncclBcast calling ncclBroadcast, only deepens the outer one); the
 *   return writes one nvl_raw_call. Comm-init calls also carry the
 *   ncclUniqueId (read at entry: by value on the stack, or through the
 *   pointer of ncclCommInitRankScalable) and the communicator handle(s) the
 *   call wrote (read at return).
 * - on_fence_*: the dma_fence tracepoints: counts per kind in a per-CPU
 *   array, emit time per fence and wait start per thread in hashes, one
 *   record per signalled fence and per ended wait.
 * - on_xid: nvidia:nvidia_dev_xid (a module tracepoint, so its field
 *   offsets come from tracefs through rodata).
 * - library discovery (openat of libnccl*): core/bpf/libload.bpf.h.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"
#include "nvlink.h"
#include "uprobe_args.bpf.h" /* arguments 7.. per arch */

/* nvidia_dev_xid field offsets in the raw record (from tracefs). */
const volatile __u32 xid_off_dev = 8;
const volatile __u32 xid_off_code = 12;
const volatile __u32 xid_off_msg = 16;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct nvl_inflight);
} inflight SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct nvl_uid);
} init_uid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nvl_uid);
} uid_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nvl_inflight);
} entry_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nvl_raw_call);
} call_scratch SEC(".maps");

/* dma_fence events seen, per kind (enum nvl_fence_kind). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NVL_FENCE_N);
	__type(key, __u32);
	__type(value, __u64);
} fence_counts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct nvl_fence_key);
	__type(value, __u64);
} fence_emit SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u64);
} fence_wait SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct nvl_raw_fence);
} fence_scratch SEC(".maps");

/* A record user space needs now (a held target's library, an XID). */
static __always_inline void output(void *rec, __u64 size)
{
	if (bpf_ringbuf_output(&events, rec, size, BPF_RB_FORCE_WAKEUP))
		nt_count_drop();
}

/*
 * A record that may wait: the reader is woken only once `wakeup_bytes` are
 * pending (user space also reads on its interval timer and before it acts
 * on a process exit). A wake-up per record costs a self-IPI, which in a
 * VM is an exit: ~3 us a call where the probe pair itself costs ~1 us.
 */
const volatile __u64 wakeup_bytes = 0;

static __always_inline void output_lazy(void *rec, __u64 size)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		flags = BPF_RB_FORCE_WAKEUP;
	if (bpf_ringbuf_output(&events, rec, size, flags))
		nt_count_drop();
}

/* ------------------------------------------------------------------ */
/* NCCL                                                                */
/* ------------------------------------------------------------------ */

static __always_inline bool is_init(__u32 call)
{
	return call == NVL_C_INITRANK || call == NVL_C_INITRANKCONFIG ||
	       call == NVL_C_INITALL || call == NVL_C_INITSCALABLE;
}

/* The ncclUniqueId of a comm init, into init_uid[tid]: passed by value
 * (128 bytes), which x86-64 puts on the stack (1st stack slot) and AAPCS64
 * (arm64) copies to memory and passes by reference in the 3rd register;
 * or through ncclCommInitRankScalable's pointer. */
static __always_inline void save_uid(struct pt_regs *ctx,
				     const struct nvl_inflight *f, __u32 tid)
{
	struct nvl_uid *u;
	__u32 zero = 0;
	void *src = 0;

	if (f->call == NVL_C_INITRANK || f->call == NVL_C_INITRANKCONFIG) {
#if defined(__TARGET_ARCH_arm64)
		src = (void *)f->reg[2];
#else
		src = (void *)(PT_REGS_SP(ctx) + 8);
#endif
	}
	else if (f->call == NVL_C_INITSCALABLE)
		src = (void *)f->reg[4];
	u = bpf_map_lookup_elem(&uid_scratch, &zero);
	if (!u)
		return;
	if (!src || bpf_probe_read_user(u->b, sizeof(u->b), src))
		__builtin_memset(u->b, 0, sizeof(u->b));
	bpf_map_update_elem(&init_uid, &tid, u, BPF_ANY);
}

SEC("uprobe")
int nccl_enter(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, zero = 0;
	struct nvl_inflight *f;

	if (!nt_target_ok(id >> 32))
		return 0;
	f = bpf_map_lookup_elem(&inflight, &tid);
	if (f) {
		f->depth++;
		return 0;
	}
	f = bpf_map_lookup_elem(&entry_scratch, &zero);
	if (!f)
		return 0;
	f->ts_ns = bpf_ktime_get_ns();
	f->call = (__u32)bpf_get_attach_cookie(ctx);
	f->depth = 1;
	f->tgid = id >> 32;
	f->tid = tid;
	f->reg[0] = PT_REGS_PARM1(ctx);
	f->reg[1] = PT_REGS_PARM2(ctx);
	f->reg[2] = PT_REGS_PARM3(ctx);
	f->reg[3] = PT_REGS_PARM4(ctx);
	f->reg[4] = PT_REGS_PARM5(ctx);
	f->reg[5] = PT_REGS_PARM6(ctx);
	f->stk[0] = f->stk[1] = 0;
	nt_uprobe_args_from7(ctx, f->stk, 2);
	if (is_init(f->call))
		save_uid(ctx, f, tid);
	bpf_map_update_elem(&inflight, &tid, f, BPF_ANY);
	return 0;
}

/* The communicator handle(s) a comm-init call wrote through its first
 * argument (ncclComm_t *; an array of ndev for ncclCommInitAll). */
static __always_inline void read_handles(struct nvl_raw_call *r)
{
	__u64 n = 1, size;

	if (r->call == NVL_C_INITALL)
		n = r->reg[1] & 0xffffffff;
	if (n > NVL_HANDLES_MAX)
		n = NVL_HANDLES_MAX;
	if (!n || !r->reg[0])
		return;
	size = n * 8;
	/* keep the clamped value in the register the verifier checks */
	asm volatile("" : "+r"(size));
	if (size > sizeof(r->handles))
		return;
	if (bpf_probe_read_user(r->handles, size, (void *)r->reg[0]))
		return;
	r->nhandles = (__u32)n;
}

SEC("uretprobe")
int nccl_return(struct pt_regs *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, zero = 0;
	struct nvl_inflight *f;
	struct nvl_raw_call *r;
	struct nvl_uid *u;

	f = bpf_map_lookup_elem(&inflight, &tid);
	if (!f)
		return 0;
	if (f->depth > 1) {
		f->depth--;
		return 0;
	}
	r = bpf_map_lookup_elem(&call_scratch, &zero);
	if (!r) {
		bpf_map_delete_elem(&inflight, &tid);
		return 0;
	}
	nt_hdr_current(&r->hdr, NVL_RAW_CALL, sizeof(*r));
	r->hdr.ts_ns = f->ts_ns;
	r->duration_ns = bpf_ktime_get_ns() - f->ts_ns;
	__builtin_memcpy(r->reg, f->reg, sizeof(r->reg));
	__builtin_memcpy(r->stk, f->stk, sizeof(r->stk));
	r->ret = (__s32)PT_REGS_RC(ctx);
	r->call = f->call;
	r->nhandles = 0;
	r->pad = 0;
	if (!is_init(r->call)) {
		bpf_map_delete_elem(&inflight, &tid);
		output_lazy(r, NVL_RAW_CALL_SHORT);
		return 0;
	}
	u = bpf_map_lookup_elem(&init_uid, &tid);
	if (u)
		__builtin_memcpy(r->uid, u->b, sizeof(r->uid));
	else
		__builtin_memset(r->uid, 0, sizeof(r->uid));
	/* ncclSuccess, or ncclInProgress: a non-blocking communicator's
	 * handle is written at once, its init goes on in the background */
	if (r->ret == 0 || r->ret == 7)
		read_handles(r);
	bpf_map_delete_elem(&init_uid, &tid);
	bpf_map_delete_elem(&inflight, &tid);
	output(r, sizeof(*r));
	return 0;
}

/* ------------------------------------------------------------------ */
/* dma_fence                                                           */
/* ------------------------------------------------------------------ */

static __always_inline void fence_count(__u32 kind)
{
	__u64 *n = bpf_map_lookup_elem(&fence_counts, &kind);

	if (n)
		(*n)++;
}

/* The driver's get_driver_name and get_timeline_name functions: user
 * space names the driver by the module (or function) that holds them. The
 * typed tracepoint has no strings, and a raw tracepoint link goes without
 * the grace period a perf-event tracepoint's release waits for. */
static __always_inline int fence_record(struct dma_fence *fence, __u32 kind,
					__u64 latency)
{
	struct nvl_raw_fence *r;
	__u32 zero = 0;

	r = bpf_map_lookup_elem(&fence_scratch, &zero);
	if (!r)
		return 0;
	nt_hdr_current(&r->hdr, NVL_RAW_FENCE, sizeof(*r));
	r->latency_ns = latency;
	r->context = BPF_CORE_READ(fence, context);
	r->seqno = BPF_CORE_READ(fence, seqno);
	r->kind = kind;
	r->pad = 0;
	r->driver_fn = (__u64)BPF_CORE_READ(fence, ops, get_driver_name);
	r->timeline_fn = (__u64)BPF_CORE_READ(fence, ops, get_timeline_name);
	output_lazy(r, sizeof(*r));
	return 0;
}

static __always_inline struct nvl_fence_key fence_key(struct dma_fence *fence)
{
	struct nvl_fence_key k = {
		.context = BPF_CORE_READ(fence, context),
		.seqno = BPF_CORE_READ(fence, seqno),
	};

	return k;
}

SEC("tp_btf/dma_fence_emit")
int BPF_PROG(on_fence_emit, struct dma_fence *fence)
{
	struct nvl_fence_key k = fence_key(fence);
	__u64 now = bpf_ktime_get_ns();

	fence_count(NVL_FENCE_EMIT);
	bpf_map_update_elem(&fence_emit, &k, &now, BPF_ANY);
	return 0;
}

SEC("tp_btf/dma_fence_signaled")
int BPF_PROG(on_fence_signaled, struct dma_fence *fence)
{
	struct nvl_fence_key k = fence_key(fence);
	__u64 *t = bpf_map_lookup_elem(&fence_emit, &k);
	__u64 latency = 0;

	fence_count(NVL_FENCE_SIGNALED);
	if (t) {
		latency = bpf_ktime_get_ns() - *t;
		bpf_map_delete_elem(&fence_emit, &k);
	}
	return fence_record(fence, NVL_FENCE_SIGNALED, latency);
}

SEC("tp_btf/dma_fence_wait_start")
int BPF_PROG(on_fence_wait_start, struct dma_fence *fence)
{
	__u64 id = bpf_get_current_pid_tgid(), now = bpf_ktime_get_ns();
	__u32 tid = (__u32)id;

	fence_count(NVL_FENCE_WAIT_START);
	if (!nt_target_ok(id >> 32))
		return 0;
	bpf_map_update_elem(&fence_wait, &tid, &now, BPF_ANY);
	return 0;
}

SEC("tp_btf/dma_fence_wait_end")
int BPF_PROG(on_fence_wait_end, struct dma_fence *fence)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	__u64 *t, latency;

	fence_count(NVL_FENCE_WAIT_END);
	t = bpf_map_lookup_elem(&fence_wait, &tid);
	if (!t)
		return 0;
	latency = bpf_ktime_get_ns() - *t;
	bpf_map_delete_elem(&fence_wait, &tid);
	return fence_record(fence, NVL_FENCE_WAIT_END, latency);
}

/* ------------------------------------------------------------------ */
/* XID (nvidia module tracepoint)                                      */
/* ------------------------------------------------------------------ */

SEC("tracepoint/nvidia/nvidia_dev_xid")
int on_xid(void *ctx)
{
	struct nvl_raw_xid r = {};
	__u32 loc = 0;

	nt_hdr_current(&r.hdr, NVL_RAW_XID, sizeof(r));
	bpf_probe_read_kernel(&r.xid, sizeof(r.xid), ctx + (xid_off_code & 0xff));
	if (!bpf_probe_read_kernel(&loc, sizeof(loc), ctx + (xid_off_dev & 0xff)))
		bpf_probe_read_kernel_str(r.dev, sizeof(r.dev),
					  ctx + (loc & 0xffff));
	loc = 0;
	if (!bpf_probe_read_kernel(&loc, sizeof(loc), ctx + (xid_off_msg & 0xff)))
		bpf_probe_read_kernel_str(r.msg, sizeof(r.msg),
					  ctx + (loc & 0xffff));
	output(&r, sizeof(r));
	return 0;
}

/* ------------------------------------------------------------------ */
/* Library discovery                                                   */
/* ------------------------------------------------------------------ */

#define NT_LIBLOAD_REC struct nvl_raw_path
#define NT_LIBLOAD_OPEN NVL_RAW_OPEN
#define NT_LIBLOAD_EXEC NVL_RAW_EXEC
#define NT_LIBLOAD_PFX_MAX NVL_PFX_MAX
#define NT_LIBLOAD_PFX_LEN NVL_PFX_LEN
#define nt_libload_output output
#include "libload.bpf.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";
