// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * sched probe, kernel side: per-thread on-CPU / off-CPU time, run-queue
 * latency, context switches and migrations, aggregated in maps and filtered
 * to the target set.
 *
 * Every program exists twice, as a BTF tracepoint (tp_btf, preferred) and as
 * a raw tracepoint (raw_tp, fallback); the user side picks one set at run time
 * with bpf_program__set_autoload(). Both bodies read task fields with CO-RE
 * (probe reads), so they are the same code.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#include "common.bpf.h"
#include "sched.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Set before load by the user side. */
const volatile __u32 switch_type = 0;   /* sched.switch type id */
const volatile bool switch_events = false;
const volatile bool hist_global = false; /* one histogram, key 0 */
/* Wake the reader once this much switch-event data waits; smaller batches
 * are read by the interval tick. A wake-up per record costs more than the
 * rest of the program. */
const volatile __u64 wake_bytes = 16384;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384); /* max_threads, set before load */
	__type(key, __u32);         /* tid */
	__type(value, struct sched_tstat);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);  /* max_processes, set before load */
	__type(key, __u32);         /* tgid, 0 = all / overflow */
	__type(value, struct sched_hist);
} hists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024); /* ringbuf_kb, set before load */
} events SEC(".maps");

/* The last switch-in seen on each CPU (sched_chain_ok, sched_acct_lost). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sched_cpu_last);
} cpu_last SEC(".maps");

/* Inserts refused because `threads` or `hists` was full, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} map_full SEC(".maps");

/* Run-queue samples of processes past max_processes, added to the "other"
 * histogram (key 0, inserted by user space at load): folded, not lost. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hist_folded SEC(".maps");

static const struct sched_hist zero_hist;

/* Kernels before 5.14 call it `state`. */
struct task_struct___o {
	volatile long state;
} __attribute__((preserve_access_index));

/*
 * A task field: a direct load where the program got a BTF pointer (tp_btf;
 * no helper call), a CO-RE probe read otherwise (raw_tp). `btf` is a
 * constant in each inlined copy, so the other branch is compiled out.
 */
#define TASK_READ(btf, t, field) ((btf) ? (t)->field : BPF_CORE_READ(t, field))

static __always_inline __u32 task_state(bool btf, struct task_struct *t)
{
	if (bpf_core_field_exists(t->__state))
		return TASK_READ(btf, t, __state);
	return (__u32)BPF_CORE_READ((struct task_struct___o *)t, state);
}

static __always_inline void count_full(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&map_full, &zero);

	if (n)
		__sync_fetch_and_add(n, 1);
}

static __always_inline __u64 task_runtime(bool btf, struct task_struct *t)
{
	return TASK_READ(btf, t, se.sum_exec_runtime);
}

/* The thread's entry; created when `create` and the thread is not exiting
 * (an exiting thread was flushed by sched_process_exit and must not come
 * back). `now` 0: not read yet. */
static __always_inline struct sched_tstat *
thread_get(bool btf, struct task_struct *t, __u32 tid, __u32 tgid, bool create,
	   __u64 now)
{
	struct sched_tstat *s = bpf_map_lookup_elem(&threads, &tid);
	struct sched_tstat init = {};
	long err;

	if (s && s->tgid == tgid)
		return s;
	if (!create || (TASK_READ(btf, t, flags) & SCHED_PF_EXITING))
		return NULL;
	/* New, or a stale entry of a reused tid: start over. Runtime before
	 * this moment is not counted. */
	init.tgid = tgid;
	init.tid = tid;
	init.first_ts = now ? now : bpf_ktime_get_ns();
	init.se_last = task_runtime(btf, t);
	bpf_core_read_str(init.comm, sizeof(init.comm), &t->comm);
	err = bpf_map_update_elem(&threads, &tid, &init, s ? BPF_ANY : BPF_NOEXIST);
	if (err && err != -17 /* EEXIST: raced with another CPU */) {
		count_full();
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

static __always_inline void hist_add(__u32 tgid, __u64 wait)
{
	__u32 key = hist_global ? 0 : tgid;
	struct sched_hist *h = bpf_map_lookup_elem(&hists, &key);
	__u32 slot;

	if (!h) {
		long err = bpf_map_update_elem(&hists, &key, &zero_hist, BPF_NOEXIST);

		if (err && err != -17 /* EEXIST: raced with another CPU */ && key) {
			/* Full: the sample goes to "other" (key 0), which
			 * always exists; folded, nothing lost. */
			__u32 zero = 0;
			__u64 *n = bpf_map_lookup_elem(&hist_folded, &zero);

			if (n)
				__sync_fetch_and_add(n, 1);
			key = 0;
		}
		h = bpf_map_lookup_elem(&hists, &key);
		if (!h) { /* "other" missing: this one is lost */
			count_full();
			return;
		}
	}
	slot = sched_hist_slot(wait);
	if (slot < SCHED_HIST_SLOTS)
		__sync_fetch_and_add(&h->slots[slot], 1);
	__sync_fetch_and_add(&h->sum_ns, wait);
}

/* The target decisions of the last two processes switched to on each CPU:
 * a context switch asked the target map twice (a hash lookup each), and a
 * training job switches between the same few processes. */
struct tcache {
	__u32 tgid[2];
	__u8 ok[2];
	__u8 next; /* the slot the next miss replaces */
	__u8 pad[5];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tcache);
} target_cache SEC(".maps");

static __always_inline bool target_ok_cached(struct tcache *tc, __u32 tgid)
{
	bool ok;

	if (!nt_filter_on)
		return true;
	if (tc && tgid) {
		if (tc->tgid[0] == tgid)
			return tc->ok[0];
		if (tc->tgid[1] == tgid)
			return tc->ok[1];
	}
	ok = nt_target_ok(tgid);
	if (tc && tgid) {
		__u8 slot = tc->next & 1;
		tc->tgid[slot] = tgid;
		tc->ok[slot] = ok;
		tc->next = slot ^ 1;
	}
	return ok;
}

static __always_inline int on_switch(bool btf, bool preempt,
				     struct task_struct *prev,
				     struct task_struct *next)
{
	__u32 ptgid = TASK_READ(btf, prev, tgid), ntgid = TASK_READ(btf, next, tgid);
	__u32 ptid = TASK_READ(btf, prev, pid), ntid = TASK_READ(btf, next, pid);
	__u32 zero = 0;
	struct sched_cpu_last *cl = bpf_map_lookup_elem(&cpu_last, &zero);
	struct tcache *tc = bpf_map_lookup_elem(&target_cache, &zero);
	/* the thread this CPU switched to last was tracked: no need to ask */
	bool pok = ptid && ((cl && cl->tid == ptid) || target_ok_cached(tc, ptgid));
	bool nok = ntid && target_ok_cached(tc, ntgid);
	__u64 now, slice = 0, wait = 0, prev_se = 0, next_se = 0;
	__u32 cpu, state = 0;
	struct sched_tstat *lost_s = NULL, *prev_s = NULL, *next_s = NULL;
	struct sched_switch_ev *ev;

	if (cl && cl->tid && cl->tid != ptid) {
		/* The tracked task switched in last on this CPU left it
		 * without a sched_switch we saw. */
		__u32 lost = cl->tid;

		lost_s = bpf_map_lookup_elem(&threads, &lost);
	}
	if (!pok && !nok) {
		if (cl && cl->tid) {
			if (lost_s)
				sched_acct_lost(lost_s, cl->ts);
			cl->tid = 0;
		}
		return 0;
	}
	now = bpf_ktime_get_ns();
	cpu = bpf_get_smp_processor_id();
	if (pok) {
		state = task_state(btf, prev);
		prev_s = thread_get(btf, prev, ptid, ptgid, true, now);
		if (prev_s)
			prev_se = task_runtime(btf, prev);
	}
	if (nok) {
		next_s = thread_get(btf, next, ntid, ntgid, true, now);
		if (next_s)
			next_se = task_runtime(btf, next);
	}
	/* Preempted, or its sleep was cancelled (state back to running): it
	 * stays queued, an involuntary switch. */
	if (sched_switch_acct(cl, lost_s, prev_s, prev_se, preempt || state == 0,
			      next_s, next_se, now, cpu, &slice, &wait))
		hist_add(ntgid, wait);
	if (!switch_events)
		return 0;
	ev = nt_reserve(&events, sizeof(*ev));
	if (!ev)
		return 0;
	nt_hdr_current(&ev->hdr, switch_type, sizeof(*ev));
	ev->hdr.ts_ns = now;
	ev->prev_oncpu_ns = slice;
	ev->next_runq_ns = wait;
	ev->next_pid = ntgid;
	ev->next_tid = ntid;
	bpf_core_read_str(ev->next_comm, sizeof(ev->next_comm), &next->comm);
	ev->cpu = cpu;
	ev->prev_state = pok ? state : task_state(btf, prev);
	ev->preempt = preempt;
	__builtin_memset(ev->pad, 0, sizeof(ev->pad));
	bpf_ringbuf_submit(ev, bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wake_bytes
				       ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline int on_wakeup(bool btf, struct task_struct *p)
{
	__u32 tgid = TASK_READ(btf, p, tgid), tid = TASK_READ(btf, p, pid);
	struct sched_tstat *s;

	if (!nt_target_ok(tgid) || !tid)
		return 0;
	s = thread_get(btf, p, tid, tgid, true, 0);
	if (s)
		sched_acct_wake(s, bpf_ktime_get_ns(), task_runtime(btf, p));
	return 0;
}

static __always_inline int on_migrate(bool btf, struct task_struct *p)
{
	__u32 tgid = TASK_READ(btf, p, tgid), tid = TASK_READ(btf, p, pid);
	struct sched_tstat *s;

	if (!nt_target_ok(tgid) || !tid)
		return 0;
	s = thread_get(btf, p, tid, tgid, true, 0);
	if (s)
		__sync_fetch_and_add(&s->migrations, 1);
	return 0;
}

/* exec or prctl(PR_SET_NAME) renames a thread: `comm` is the new name (the
 * tracepoint fires before the task's own copy changes). */
static __always_inline int on_rename(bool btf, struct task_struct *t,
				     const char *comm)
{
	__u32 tgid = TASK_READ(btf, t, tgid), tid = TASK_READ(btf, t, pid);
	struct sched_tstat *s;

	if (!nt_target_ok(tgid) || !tid)
		return 0;
	s = bpf_map_lookup_elem(&threads, &tid);
	if (s && s->tgid == tgid)
		bpf_probe_read_kernel_str(s->comm, sizeof(s->comm), comm);
	return 0;
}

/*
 * A thread exits: send its final totals and forget it. The thread map holds
 * only threads that passed the target filter, so its lookup is the filter
 * here (the core may already have dropped the process from nt_targets); the
 * target map is still asked for the process-gone notice of untracked
 * threads.
 */
static __always_inline int on_exit(bool btf, struct task_struct *p)
{
	__u32 tgid = TASK_READ(btf, p, tgid), tid = TASK_READ(btf, p, pid);
	struct sched_tstat *s = bpf_map_lookup_elem(&threads, &tid);
	/* do_exit() decrements signal->live before this tracepoint. */
	bool group_dead = BPF_CORE_READ(p, signal, live.counter) == 0;
	struct sched_exit_rec *rec;
	struct sched_cpu_last *cl;
	__u32 zero = 0;
	__u64 now;

	if (s && s->tgid != tgid)
		s = NULL;
	if (!s && !(group_dead && nt_target_ok(tgid)))
		return 0;
	now = bpf_ktime_get_ns();
	cl = bpf_map_lookup_elem(&cpu_last, &zero);
	rec = nt_reserve(&events, sizeof(*rec));
	if (rec) {
		rec->hdr.type = SCHED_REC_EXIT;
		rec->hdr.size = sizeof(*rec);
		rec->hdr.ts_ns = now;
		rec->hdr.pid = tgid;
		rec->hdr.tid = tid;
		bpf_core_read_str(rec->hdr.comm, sizeof(rec->hdr.comm), &p->comm);
		if (s) {
			__builtin_memcpy(&rec->st, s, sizeof(rec->st));
			rec->st.oncpu_ns = sched_acct_exit(s, now,
							   task_runtime(btf, p),
							   sched_chain_ok(s, cl));
			rec->st.on_ts = 0;
			rec->st.wake_ts = 0;
			rec->has_stats = 1;
		} else {
			__builtin_memset(&rec->st, 0, sizeof(rec->st));
			rec->has_stats = 0;
		}
		rec->group_dead = group_dead;
		__builtin_memset(rec->pad, 0, sizeof(rec->pad));
		bpf_ringbuf_submit(rec, 0);
	}
	if (s) {
		bpf_map_delete_elem(&threads, &tid);
		if (cl && cl->tid == tid)
			cl->tid = 0;
	}
	return 0;
}

/* ---- BTF tracepoints ---------------------------------------------- */

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch_btf, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	return on_switch(true, preempt, prev, next);
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup_btf, struct task_struct *p)
{
	return on_wakeup(true, p);
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new_btf, struct task_struct *p)
{
	return on_wakeup(true, p);
}

SEC("tp_btf/sched_migrate_task")
int BPF_PROG(sched_migrate_task_btf, struct task_struct *p)
{
	return on_migrate(true, p);
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit_btf, struct task_struct *p)
{
	return on_exit(true, p);
}

SEC("tp_btf/task_rename")
int BPF_PROG(task_rename_btf, struct task_struct *t, const char *comm)
{
	return on_rename(true, t, comm);
}

/* ---- raw tracepoints (fallback) ----------------------------------- */

SEC("raw_tp/sched_switch")
int BPF_PROG(sched_switch_raw, bool preempt, struct task_struct *prev,
	     struct task_struct *next)
{
	return on_switch(false, preempt, prev, next);
}

SEC("raw_tp/sched_wakeup")
int BPF_PROG(sched_wakeup_raw, struct task_struct *p)
{
	return on_wakeup(false, p);
}

SEC("raw_tp/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new_raw, struct task_struct *p)
{
	return on_wakeup(false, p);
}

SEC("raw_tp/sched_migrate_task")
int BPF_PROG(sched_migrate_task_raw, struct task_struct *p)
{
	return on_migrate(false, p);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(sched_process_exit_raw, struct task_struct *p)
{
	return on_exit(false, p);
}

SEC("raw_tp/task_rename")
int BPF_PROG(task_rename_raw, struct task_struct *t, const char *comm)
{
	return on_rename(false, t, comm);
}
