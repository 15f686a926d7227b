// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * ntcore python probe, kernel side.
 *
 *  - py_sample (perf_event, CPU clock at `frequency` on every CPU): when the
 *    interrupted task is a registered Python process, find its thread's
 *    PyThreadState and walk the interpreter's own frame list, recording
 *    (code object, instruction) per frame. Names and lines are resolved in
 *    user space, once per code object, so a sample is 48 + 16 * frames bytes.
 *  - py_switch (tp_btf/sched_switch, `idle = true`): a Python thread leaving
 *    the CPU gets its stack walked (at most once per sample period as it
 *    blocks, once per period as it is preempted) and the
 *    time it then spends off the CPU is sent when it comes back, so sleeping
 *    and waiting threads are attributed like a wall-clock sampler would.
 *    The last PY_OFFHIST off-CPU periods of each thread are kept in
 *    py_offhist for the CUDA join (was a thread blocked at a launch?).
 *  - py_exec (tp_btf/sched_process_exec): tells user space to inspect a
 *    target that exec'd (a new Python process).
 *  - py_func_entry / py_func_return (USDT python:function__entry/return,
 *    `calls = true`): exact call counts and inclusive/self time per function.
 *  - py_exc (uprobe PyTraceBack_Here, `exceptions = true`): an exception
 *    reaching a Python frame for the first time; the raising location is the
 *    top of the walked stack.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>

#include "common.bpf.h"
#include "python.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile __u32 max_frames = 64;
const volatile bool want_native = false;
const volatile bool want_idle = false;
/* Minimum time between two idle walks of one thread, and off-CPU time
 * accumulated before a weight record is sent: one sample period. */
const volatile __u64 period_ns = 10101010;
/* Negative thread-state lookups are retried after this long. */
const volatile __u64 neg_ttl_ns = 500000000;
/* The user side's own pid: never sampled. */
const volatile __u32 self_pid = 0;
/* pthread_self() is the thread pointer minus this: 0 on x86-64 (the FS
 * base points at glibc's struct pthread); on arm64 struct pthread sits
 * just below TPIDR_EL0 (TLS variant I). Measured by user space. */
const volatile __u64 tp_to_pthread = 0;
/* Ring wake-ups are batched: the reader is woken when this much is
 * pending (or for control records) and drains on its own tick otherwise,
 * so a sampled thread is not preempted by the reader at every record. */
const volatile __u64 wake_bytes = 65536;


struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20); /* resized by the user side */
} py_events SEC(".maps");

static __always_inline __u64 wake_flag(void)
{
	return bpf_ringbuf_query(&py_events, BPF_RB_AVAIL_DATA) >= wake_bytes
		? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct py_proc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct py_tstate_ent);
} py_tstates SEC(".maps");

/* Pids that were sampled without being registered: notified once a second. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} py_unknown SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, struct py_offcpu);
} py_offcpu SEC(".maps");

/* Completed off-CPU periods of Python threads (for the CUDA join). An LRU
 * map is allocated whole at load (4 KiB a thread): 4096 threads, the least
 * recently blocked going first, not 16384 (69 MB of kernel memory zeroed
 * at every attach). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct py_offhist);
} py_offhist SEC(".maps");

/* Zeroed value a new py_offhist entry starts from (too big for the stack). */
static const struct py_offhist offhist_zero;

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 1); /* set to stack_entries by the user side */
	__uint(key_size, sizeof(__u32));
	__uint(value_size, PY_NATIVE_MAX * sizeof(__u64));
} py_native SEC(".maps");

struct py_scratch {
	struct py_sample_rec s;
	__u8 fbuf[PY_FRAME_BUF + 8];
};

/* One scratch record per context that can nest on a CPU: the perf-timer
 * sampler interrupts uprobes and task context, so each has its own. */
enum { SCR_PERF = 0, SCR_SWITCH = 1, SCR_TASK = 2, SCR_N };

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCR_N);
	__type(key, __u32);
	__type(value, struct py_scratch);
} py_scratch SEC(".maps");

/* Counters the user side turns into metrics (see PY_STAT_*). */
enum {
	PY_STAT_CPU = 0,     /* on-CPU samples sent */
	PY_STAT_IDLE,        /* idle walks sent */
	PY_STAT_NOTSTATE,    /* sampled thread had no Python thread state */
	PY_STAT_READERR,     /* interpreter memory could not be read */
	PY_STAT_TRUNC,       /* stacks cut at max_frames */
	PY_STAT_EXC,         /* exceptions sent */
	PY_STAT_CALLS,       /* function entries seen */
	PY_STAT_DEEP,        /* calls deeper than the timed call stack */
	PY_STAT_N,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, PY_STAT_N);
	__type(key, __u32);
	__type(value, __u64);
} py_stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct py_call_key);
	__type(value, struct py_call_stats);
} py_calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct py_call_stack);
} py_callstk SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct py_call_stack);
} py_callstk_init SEC(".maps");

/* An index into a fixed array, masked where the verifier sees it (the
 * compiler would otherwise drop a mask it can prove redundant). */
static __always_inline __u32 slot(__u32 i, __u32 mask)
{
	barrier_var(i);
	return i & mask;
}

static __always_inline void stat_inc(__u32 which)
{
	__u64 *v = bpf_map_lookup_elem(&py_stats, &which);

	if (v)
		*v += 1;
}

static __always_inline int rd64(__u64 addr, __u64 *out)
{
	*out = 0;
	if (!addr)
		return -1;
	return bpf_probe_read_user(out, sizeof(*out), (const void *)addr);
}

/* A thread's user thread pointer, as the kernel saved it: the FS base on
 * x86-64, TPIDR_EL0 on arm64 (saved at each switch-out, so a thread that
 * set it itself, as glibc's main thread does, reads 0 until it first
 * leaves a CPU). */
static __always_inline __u64 thread_pointer_of(struct task_struct *t)
{
#if defined(__TARGET_ARCH_x86)
	return BPF_CORE_READ(t, thread.fsbase);
#elif defined(__TARGET_ARCH_arm64)
	return BPF_CORE_READ(t, thread.uw.tp_value);
#else
	return 0;
#endif
}

/* The current thread's pthread_self(), what 3.10 stores as thread_id. */
static __always_inline __u64 current_pthread_self(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();

	return thread_pointer_of(t) - tp_to_pthread;
}

/* When the current thread started (CLOCK_MONOTONIC, like bpf_ktime_get_ns). */
static __always_inline __u64 current_start_ns(void)
{
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();

	return BPF_CORE_READ(t, start_time);
}

struct ts_walk {
	struct py_bpf_offsets o;
	__u64 want;
	__u64 interp;
	__u64 ts;
	__u64 found;
};

static long ts_walk_cb(__u32 i, void *vctx)
{
	struct ts_walk *w = vctx;
	__u64 id = 0;

	if (!w->ts) {
		if (rd64(w->interp + w->o.interp_next, &w->interp) || !w->interp)
			return 1;
		rd64(w->interp + w->o.interp_threads_head, &w->ts);
		return 0;
	}
	if (rd64(w->ts + w->o.ts_thread_id, &id))
		return 1;
	if (id == w->want) {
		w->found = w->ts;
		return 1;
	}
	if (rd64(w->ts + w->o.ts_next, &w->ts))
		return 1;
	return 0;
}

/* The PyThreadState of the current thread, 0 if it has none. */
static __always_inline __u64 find_tstate(const struct py_proc *pp, __u32 tid,
					 __u64 now)
{
	struct py_tstate_ent *e = bpf_map_lookup_elem(&py_tstates, &tid);
	struct py_tstate_ent ne = {};
	struct ts_walk w = {};
	__u64 id = 0;

	w.o = pp->off;
	w.want = w.o.tid_is_pthread ? current_pthread_self() : tid;
	if (e) {
		if (e->tstate) {
			if (rd64(e->tstate + w.o.ts_thread_id, &id) == 0 &&
			    id == w.want)
				return e->tstate;
		} else if (now - e->ts_ns < neg_ttl_ns) {
			return 0;
		}
	}
	if (rd64(pp->runtime + w.o.runtime_interp_head, &w.interp) || !w.interp)
		return 0;
	rd64(w.interp + w.o.interp_threads_head, &w.ts);
	bpf_loop(PY_MAX_TSTATES, ts_walk_cb, &w, 0);
	ne.tstate = w.found;
	ne.ts_ns = now;
	/* A new thread's state is in the list before the thread claims it
	 * (3.10: t_bootstrap writes thread_id, until then the creator's;
	 * 3.11+: native_thread_id), so a young thread may miss it. It is
	 * not cached as "not Python": its switch-outs for neg_ttl_ns would
	 * go unwalked, and a thread that starts and then sleeps would have
	 * no stack at all. */
	if (!ne.tstate && now - current_start_ns() < neg_ttl_ns) {
		if (e)
			bpf_map_delete_elem(&py_tstates, &tid);
		return 0;
	}
	bpf_map_update_elem(&py_tstates, &tid, &ne, BPF_ANY);
	return ne.tstate;
}

/* Field extraction from the frame buffer, offsets bounded for the verifier. */
static __always_inline __u64 fb_u64(const __u8 *fb, __u32 off)
{
	if (off > PY_FRAME_BUF - 8)
		return 0;
	return *(const __u64 *)(fb + off);
}

static __always_inline __u32 fb_u32(const __u8 *fb, __u32 off)
{
	if (off > PY_FRAME_BUF - 4)
		return 0;
	return *(const __u32 *)(fb + off);
}

static __always_inline __u8 fb_u8(const __u8 *fb, __u32 off)
{
	if (off > PY_FRAME_BUF - 1)
		return 0xff;
	return fb[off];
}

struct fr_walk {
	struct py_bpf_offsets o;
	__u64 frame;
	__u32 n, limit, rsz, flags;
	__u32 scr;
};

static long fr_walk_cb(__u32 i, void *vctx)
{
	struct fr_walk *w = vctx;
	__u32 scr = w->scr;
	struct py_scratch *sc = bpf_map_lookup_elem(&py_scratch, &scr);
	__u64 code, prev, instr;

	if (!sc || !w->frame)
		return 1;
	if (w->n >= w->limit) {
		w->flags |= PY_F_TRUNCATED;
		return 1;
	}
	if (bpf_probe_read_user(sc->fbuf, w->rsz & (PY_FRAME_BUF - 1),
				(const void *)w->frame)) {
		w->flags |= PY_F_READERR;
		return 1;
	}
	code = fb_u64(sc->fbuf, w->o.frame_code);
	prev = fb_u64(sc->fbuf, w->o.frame_previous);
	instr = w->o.instr_is_int ? fb_u32(sc->fbuf, w->o.frame_instr)
				  : fb_u64(sc->fbuf, w->o.frame_instr);
	w->frame = prev;
	if (w->o.frame_owner != PY_NO_OFF && w->o.owner_cstack != 0xff &&
	    fb_u8(sc->fbuf, w->o.frame_owner) == w->o.owner_cstack)
		return 0; /* C-stack shim frame */
	if (!code)
		return 0;
	sc->s.frames[slot(w->n, PY_MAX_FRAMES - 1)].code = code;
	sc->s.frames[slot(w->n, PY_MAX_FRAMES - 1)].instr = instr;
	w->n++;
	return 0;
}

/*
 * Walk the Python stack of the current thread into the scratch record.
 * Returns the number of frames; sets flags.
 */
static __always_inline int walk_stack(const struct py_proc *pp, __u64 tstate,
				      __u32 *flags, __u32 scr)
{
	struct fr_walk w = {};

	w.scr = scr;
	w.o = pp->off;
	w.limit = max_frames < PY_MAX_FRAMES ? max_frames : PY_MAX_FRAMES;
	w.rsz = w.o.frame_read;
	if (w.rsz > PY_FRAME_BUF - 8 || w.rsz < 8)
		w.rsz = PY_FRAME_BUF - 8;
	if (rd64(tstate + w.o.ts_frame, &w.frame)) {
		*flags |= PY_F_READERR;
		return 0;
	}
	if (w.o.cframe_current != PY_NO_OFF && w.frame &&
	    rd64(w.frame + w.o.cframe_current, &w.frame)) {
		*flags |= PY_F_READERR;
		return 0;
	}
	/* up to twice max_frames iterations: shim frames are skipped */
	bpf_loop(2 * PY_MAX_FRAMES, fr_walk_cb, &w, 0);
	*flags |= w.flags;
	return w.n;
}

/* Walk the current thread and send a record of `kind`. */
static __always_inline int sample_current(void *ctx, const struct py_proc *pp,
					  __u32 kind, __u64 aux, __u64 tstate,
					  __u32 scr)
{
	struct py_scratch *sc = bpf_map_lookup_elem(&py_scratch, &scr);
	__u64 size;
	int n;

	__u32 flags = 0;

	if (!sc)
		return 0;
	n = walk_stack(pp, tstate, &flags, scr);
	sc->s.flags = flags;
	if (flags & PY_F_READERR)
		stat_inc(PY_STAT_READERR);
	if (flags & PY_F_TRUNCATED)
		stat_inc(PY_STAT_TRUNC);
	if (n <= 0 && !(flags & PY_F_READERR))
		return 0; /* a Python thread outside any Python frame */
	nt_hdr_current(&sc->s.hdr, kind, 0);
	sc->s.aux = aux;
	sc->s.n_frames = n;
	sc->s.cpu = bpf_get_smp_processor_id();
	sc->s.native_id = want_native
		? bpf_get_stackid(ctx, &py_native, BPF_F_USER_STACK) : -1;
	size = PY_SAMPLE_HDR_SIZE + (__u64)(n & (PY_MAX_FRAMES * 2 - 1)) *
					    sizeof(struct py_frame);
	if (size > sizeof(struct py_sample_rec))
		size = sizeof(struct py_sample_rec);
	sc->s.hdr.size = size;
	if (bpf_ringbuf_output(&py_events, &sc->s, size, wake_flag()))
		nt_count_drop();
	return n;
}

/* Tell the user side about a process it should inspect (rate-limited). */
static __always_inline void notify_unknown(__u32 pid, __u64 now, __u32 kind)
{
	__u64 *last = bpf_map_lookup_elem(&py_unknown, &pid);
	struct nt_event_hdr *h;

	if (kind != PY_REC_EXEC && last && now - *last < 1000000000ULL)
		return;
	bpf_map_update_elem(&py_unknown, &pid, &now, BPF_ANY);
	h = nt_reserve(&py_events, sizeof(*h));
	if (!h)
		return;
	nt_hdr_current(h, kind, sizeof(*h));
	bpf_ringbuf_submit(h, BPF_RB_FORCE_WAKEUP); /* attach without delay */
}

SEC("perf_event")
int py_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct py_proc *pp;
	__u64 now, ts;

	if (!pid || pid == self_pid || !nt_target_ok(pid))
		return 0;
	now = bpf_ktime_get_ns();
	pp = bpf_map_lookup_elem(&py_procs, &pid);
	if (!pp) {
		notify_unknown(pid, now, PY_REC_UNKNOWN);
		return 0;
	}
	ts = find_tstate(pp, tid, now);
	if (!ts) {
		stat_inc(PY_STAT_NOTSTATE);
		return 0;
	}
	if (sample_current(ctx, pp, PY_REC_CPU, 0, ts, SCR_PERF) > 0)
		stat_inc(PY_STAT_CPU);
	return 0;
}

/* Where a thread blocks: its top Python frame, that frame's code object
 * and instruction, mixed (0: unreadable). Same key, same stack, as far as
 * the CUDA join is concerned. */
static __always_inline __u64 block_key(const struct py_proc *pp, __u64 tstate)
{
	__u64 f = 0, code = 0, instr = 0;

	if (rd64(tstate + pp->off.ts_frame, &f) || !f)
		return 0;
	if (pp->off.cframe_current != PY_NO_OFF &&
	    (rd64(f + pp->off.cframe_current, &f) || !f))
		return 0;
	if (rd64(f + pp->off.frame_code, &code))
		return 0;
	rd64(f + pp->off.frame_instr, &instr);
	if (pp->off.instr_is_int)
		instr &= 0xffffffffull;
	return (f ^ (code * 0x9e3779b97f4a7c15ull) ^ (instr << 17)) | 1;
}

/* A Python thread leaving the CPU (we run in its context): walk it when
 * its budget allows, else note when it left. Returns the time read. */
static __always_inline __u64 switch_out(void *ctx, struct py_proc *pp,
					struct task_struct *prev, bool preempt)
{
	__u32 tid = prev->pid;
	struct py_offcpu *oc;
	__u64 now, ts, key;

	/* preempted: still runnable (a user-mode thread whose slice
	 * ran out switches with preempt false but TASK_RUNNING) */
	preempt = preempt || prev->__state == 0;
	now = bpf_ktime_get_ns();
	oc = bpf_map_lookup_elem(&py_offcpu, &tid);
	/* Blocking and preemption have a walk budget each (one per
	 * period): a preempted walk must not make the next block go
	 * unwalked, or the block would keep the preempted stack. A
	 * block somewhere else than the last walked one (block_key) is
	 * walked whatever the budget: the CUDA join lends a blocked
	 * thread's latest walk, which must be of the same place. */
	key = 0;
	ts = 0;
	if (oc && !preempt && now - oc->vwalk_ns < period_ns) {
		ts = find_tstate(pp, tid, now);
		key = ts ? block_key(pp, ts) : 0;
	}
	if (!oc || now - (preempt ? oc->walk_ns : oc->vwalk_ns) >= period_ns ||
	    (key && key != oc->vkey)) {
		if (!ts)
			ts = find_tstate(pp, tid, now);
		if (!preempt && !key && ts)
			key = block_key(pp, ts);
		if (ts && sample_current(ctx, pp, PY_REC_IDLE, preempt ? 1 : 0,
					 ts, SCR_SWITCH) > 0) {
			struct py_offcpu v = { .out_ns = now, .walk_ns = now,
					       .vwalk_ns = preempt ? 0 : now,
					       .preempted = preempt,
					       .vkey = preempt ? 0 : key };

			stat_inc(PY_STAT_IDLE);
			if (oc) {
				oc->walk_ns = now;
				if (!preempt) {
					oc->vwalk_ns = now;
					oc->vkey = key;
				}
				oc->out_ns = now;
				oc->preempted = preempt;
			} else {
				bpf_map_update_elem(&py_offcpu, &tid, &v, BPF_ANY);
			}
		}
	} else {
		oc->out_ns = now;
		oc->preempted = preempt;
	}
	return now;
}

/* A Python thread coming back: add up its off-CPU time, note the period
 * in its history, and send the time once it reaches a sample period (at
 * most one record per period). */
static __always_inline void switch_in(struct task_struct *next, __u32 npid,
				      __u64 now)
{
	__u32 tid = next->pid;
	struct py_offcpu *oc = bpf_map_lookup_elem(&py_offcpu, &tid);

	if (oc && oc->out_ns) {
		struct py_offhist *h;

		if (!now)
			now = bpf_ktime_get_ns();
		h = bpf_map_lookup_elem(&py_offhist, &tid);
		if (!h) {
			bpf_map_update_elem(&py_offhist, &tid, &offhist_zero,
					    BPF_NOEXIST);
			h = bpf_map_lookup_elem(&py_offhist, &tid);
		}
		if (h) {
			__u32 i = h->pos & (PY_OFFHIST - 1);

			h->out[i] = oc->out_ns;
			h->in[i] = now;
			if (oc->preempted)
				h->preempted[i / 64] |= 1ULL << (i % 64);
			else
				h->preempted[i / 64] &= ~(1ULL << (i % 64));
			h->pos++;
		}
		if (!oc->acc_ns)
			oc->acc_start = oc->out_ns;
		oc->acc_ns += now > oc->out_ns ? now - oc->out_ns : 0;
		oc->out_ns = 0;
		if (oc->acc_ns >= period_ns) {
			struct py_weight_rec *w = nt_reserve(&py_events, sizeof(*w));

			if (w) {
				w->hdr.type = PY_REC_WEIGHT;
				w->hdr.size = sizeof(*w);
				w->hdr.ts_ns = now;
				w->hdr.pid = npid;
				w->hdr.tid = tid;
				BPF_CORE_READ_STR_INTO(&w->hdr.comm, next, comm);
				w->off_ns = oc->acc_ns;
				w->start_ns = oc->acc_start;
				bpf_ringbuf_submit(w, wake_flag());
			}
			oc->acc_ns = 0;
		}
	}
}

SEC("tp_btf/sched_switch")
int BPF_PROG(py_switch, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	__u32 ppid = prev->tgid, npid = next->tgid;
	__u64 now = 0;
	struct py_proc *pp;

	if (!want_idle)
		return 0;
	if (ppid && (pp = bpf_map_lookup_elem(&py_procs, &ppid)) &&
	    nt_target_ok(ppid))
		now = switch_out(ctx, pp, prev, preempt);
	if (npid && bpf_map_lookup_elem(&py_procs, &npid))
		switch_in(next, npid, now);
	return 0;
}

/* The threads of one process (the link's task.pid) with their thread
 * pointer, for user space to find which thread a 3.10 thread state
 * belongs to. */
SEC("iter/task")
int py_tasks(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct py_task_rec r = {};

	if (!t)
		return 0;
	r.tid = t->pid;
	r.tgid = t->tgid;
	r.tp = thread_pointer_of(t);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(py_exec, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	__u32 pid = bpf_get_current_pid_tgid() >> 32;

	if (!nt_target_ok(pid) || pid == self_pid)
		return 0;
	bpf_map_delete_elem(&py_procs, &pid);
	notify_unknown(pid, bpf_ktime_get_ns(), PY_REC_EXEC);
	return 0;
}

/* ---- exceptions ---- */

SEC("uprobe")
int BPF_KPROBE(py_exc)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct py_proc *pp;
	__u64 now, ts, exc = 0, tb = 0, type = 0;

	if (!nt_target_ok(pid))
		return 0;
	pp = bpf_map_lookup_elem(&py_procs, &pid);
	if (!pp)
		return 0;
	now = bpf_ktime_get_ns();
	ts = find_tstate(pp, tid, now);
	if (!ts)
		return 0;
	if (rd64(ts + pp->off.ts_exc, &exc) || !exc)
		return 0;
	if (pp->off.exc_is_type) {
		/* <= 3.11: curexc_traceback is NULL in the first frame only. */
		rd64(ts + pp->off.ts_exc_tb, &tb);
		type = exc;
	} else {
		rd64(exc + pp->off.exc_traceback, &tb);
		rd64(exc + pp->off.ob_type, &type);
	}
	if (tb)
		return 0; /* propagating through an outer frame */
	if (sample_current(ctx, pp, PY_REC_EXC, type, ts, SCR_TASK) > 0)
		stat_inc(PY_STAT_EXC);
	return 0;
}

/* ---- call tracing (USDT) ---- */

/* Code object of the current thread's innermost frame, 0 if unknown. */
static __always_inline __u64 current_code(__u32 pid, __u32 tid)
{
	struct py_proc *pp = bpf_map_lookup_elem(&py_procs, &pid);
	__u64 ts, frame = 0, code = 0;

	if (!pp)
		return 0;
	ts = find_tstate(pp, tid, bpf_ktime_get_ns());
	if (!ts || rd64(ts + pp->off.ts_frame, &frame) || !frame)
		return 0;
	if (pp->off.cframe_current != PY_NO_OFF &&
	    (rd64(frame + pp->off.cframe_current, &frame) || !frame))
		return 0;
	rd64(frame + pp->off.frame_code, &code);
	return code;
}

SEC("usdt")
int BPF_USDT(py_func_entry, void *file, void *func, int line)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id, zero = 0;
	struct py_call_stack *cs;

	if (!nt_target_ok(pid))
		return 0;
	cs = bpf_map_lookup_elem(&py_callstk, &tid);
	if (!cs) {
		struct py_call_stack *init = bpf_map_lookup_elem(&py_callstk_init, &zero);

		if (!init)
			return 0;
		init->depth = 0;
		bpf_map_update_elem(&py_callstk, &tid, init, BPF_ANY);
		cs = bpf_map_lookup_elem(&py_callstk, &tid);
		if (!cs)
			return 0;
	}
	if (cs->depth < PY_CALL_DEPTH) {
		struct py_call_frame *f = &cs->f[slot(cs->depth, PY_CALL_DEPTH - 1)];

		f->func = (__u64)func;
		f->file = (__u64)file;
		f->start_ns = bpf_ktime_get_ns();
		f->child_ns = 0;
	} else {
		stat_inc(PY_STAT_DEEP);
	}
	if (cs->depth < 1u << 30)
		cs->depth++;
	return 0;
}

/* Count a return of key's function; a new key tells user space its
 * names (PY_REC_FUNC). */
static __always_inline void count_return(const struct py_call_key *key,
					 void *file, void *func, int line)
{
	struct py_call_stats *st, nst = { .calls = 1 };

	st = bpf_map_lookup_elem(&py_calls, key);
	if (st) {
		__sync_fetch_and_add(&st->calls, 1);
	} else if (bpf_map_update_elem(&py_calls, key, &nst, BPF_NOEXIST) == 0) {
		struct py_func_rec *r = nt_reserve(&py_events, sizeof(*r));

		if (r) {
			nt_hdr_current(&r->hdr, PY_REC_FUNC, sizeof(*r));
			r->key = *key;
			r->line = line;
			bpf_probe_read_user_str(r->func, sizeof(r->func), func);
			bpf_probe_read_user_str(r->file, sizeof(r->file), file);
			bpf_ringbuf_submit(r, wake_flag());
		}
	} else if ((st = bpf_map_lookup_elem(&py_calls, key))) {
		__sync_fetch_and_add(&st->calls, 1);
	}
}

/* How many timed frames this return ends: the returning function among
 * the top 8; frames above it were left by an exception (no return
 * marker) and end here too. 0: no matching entry, nothing is timed. */
static __always_inline __u32 frames_ended(const struct py_call_stack *cs,
					  void *file, void *func)
{
	for (int i = 0; i < 8; i++) {
		const struct py_call_frame *f;
		__u32 d;

		if ((__u32)i >= cs->depth)
			break;
		d = cs->depth - 1 - i;
		if (d >= PY_CALL_DEPTH)
			return i + 1; /* untimed deep frame: trust the order */
		f = &cs->f[slot(d, PY_CALL_DEPTH - 1)];
		if (f->func == (__u64)func && f->file == (__u64)file)
			return i + 1;
	}
	return 0;
}

/* Pop `pops` frames; only the returning (last) one is the key's, the
 * exception-left frames above it are popped untimed. */
static __always_inline void pop_frames(struct py_call_stack *cs, __u32 pops,
				       const struct py_call_key *key, void *file,
				       void *func, __u64 now)
{
	struct py_call_stats *st;

	for (int i = 0; i < 8; i++) {
		struct py_call_frame *f;
		__u64 dur, self;
		__u32 d;

		if ((__u32)i >= pops || cs->depth == 0)
			break;
		cs->depth--;
		d = cs->depth;
		if (d >= PY_CALL_DEPTH)
			continue;
		f = &cs->f[slot(d, PY_CALL_DEPTH - 1)];
		dur = now - f->start_ns;
		self = dur > f->child_ns ? dur - f->child_ns : 0;
		if (d > 0 && d - 1 < PY_CALL_DEPTH)
			cs->f[slot(d - 1, PY_CALL_DEPTH - 1)].child_ns += dur;
		if ((__u32)i + 1 == pops && f->func == (__u64)func &&
		    f->file == (__u64)file &&
		    (st = bpf_map_lookup_elem(&py_calls, key))) {
			__sync_fetch_and_add(&st->timed, 1);
			__sync_fetch_and_add(&st->incl_ns, dur);
			__sync_fetch_and_add(&st->self_ns, self);
		}
	}
}

SEC("usdt")
int BPF_USDT(py_func_return, void *file, void *func, int line)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 pid = id >> 32, tid = (__u32)id;
	struct py_call_key key = {};
	struct py_call_stack *cs;

	if (!nt_target_ok(pid))
		return 0;
	stat_inc(PY_STAT_CALLS);
	key.pid = pid;
	key.code = current_code(pid, tid);
	key.func = (__u64)func;
	key.file = (__u64)file;
	count_return(&key, file, func, line);
	cs = bpf_map_lookup_elem(&py_callstk, &tid);
	if (!cs || cs->depth == 0)
		return 0; /* no entry seen (gh-98894) or entered before attach */
	pop_frames(cs, frames_ended(cs, file, func), &key, file, func,
		   bpf_ktime_get_ns());
	return 0;
}
