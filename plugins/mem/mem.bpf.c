// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * mem probe, kernel side.
 *
 * - RSS: kmem/rss_stat (tp_btf, raw_tp fallback) reads the four mm counters
 *   of the process whose mm changed and keeps them, with the peak of
 *   file + anon + shmem, in `procs`; user-space faults from
 *   exceptions/page_fault_user are counted there too.
 * - OOM kills: oom/mark_victim publishes mem.oom_kill.
 * - Heap: uprobes on the C library's allocator. Entry probes save the
 *   arguments per thread; one uretprobe program records the returned block in
 *   `allocs` with its user stack id; free/munmap/realloc entries remove
 *   blocks. Per-process counters live in `heap`. Nested allocator calls
 *   (posix_memalign calling malloc, malloc calling mmap) are recognised by
 *   the stack pointer and counted once, at the outermost call.
 * - A stack seen for the first time in a process and a process leaving are
 *   sent to user space as internal records (type 0), so stacks are
 *   symbolized while the process still has its mappings.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "common.bpf.h"
#include "mem.h"

#define MAP_ANONYMOUS_FLAG 0x20

/* Set by user space before load. */
const volatile __u32 oom_type = 0;
const volatile __u32 page_shift = 12;
const volatile __u64 sample_min_bytes = 0;
const volatile __u32 sample_every = 1;
const volatile bool want_stacks = true;
const volatile bool want_fork = false;
/* False when every heap uprobe is bound to a target pid: the kernel filters. */
const volatile bool heap_filter = true;
/* The daemon itself: never heap-tracked (host-wide its own symbolizing
 * would feed back into what it tracks). */
const volatile __u32 self_tgid = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 256 * 1024);
} events SEC(".maps");

/* Outstanding allocations; max_entries set from config before load. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct mem_alloc_key);
	__type(value, struct mem_alloc_val);
} allocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	NT_MAP_LAZY;
	__uint(max_entries, NT_TARGETS_MAX);
	__type(key, __u32);
	__type(value, struct mem_heap_stats);
} heap SEC(".maps");

/* The call in flight of each thread: task storage, no hashing. */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct mem_pending);
} pending SEC(".maps");

/* value_size and max_entries set from config before load. */
struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, MEM_MAX_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct mem_stack_key {
	__u32 tgid;
	__s32 stack_id;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct mem_stack_key);
	__type(value, __u8);
} seen_stacks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, NT_TARGETS_MAX);
	__type(key, __u32);
	__type(value, struct mem_proc);
} procs SEC(".maps");

/* ------------------------------------------------------------------ */
/* RSS, faults, OOM, exit                                              */
/* ------------------------------------------------------------------ */

/* Before 6.2 the counters were atomics in struct mm_rss_stat. */
struct mm_rss_stat___old {
	atomic_long_t count[MEM_NR_MEMBERS];
};

struct mm_struct___old {
	struct mm_rss_stat___old rss_stat;
} __attribute__((preserve_access_index));

/* From 6.2 on, one percpu_counter per member. Spelled here rather than
 * taken from vmlinux.h so the program compiles against either header (the
 * arm64 one is Debian 12's 6.1). */
struct mm_struct___new {
	struct percpu_counter rss_stat[MEM_NR_MEMBERS];
} __attribute__((preserve_access_index));

static __always_inline __u64 mm_counter(struct mm_struct *mm, int member)
{
	long v = 0;

	if (bpf_core_field_exists(((struct mm_struct___old *)0)->rss_stat.count)) {
		struct mm_struct___old *old = (void *)mm;

		switch (member) {
		case 0: bpf_core_read(&v, sizeof(v), &old->rss_stat.count[0].counter); break;
		case 1: bpf_core_read(&v, sizeof(v), &old->rss_stat.count[1].counter); break;
		case 2: bpf_core_read(&v, sizeof(v), &old->rss_stat.count[2].counter); break;
		default: bpf_core_read(&v, sizeof(v), &old->rss_stat.count[3].counter); break;
		}
	} else {
		/* percpu_counter: `count` is the folded value the kernel's own
		 * get_mm_counter() reads; per-CPU deltas below the batch are
		 * not in it yet. */
		struct mm_struct___new *cur = (void *)mm;

		switch (member) {
		case 0: bpf_core_read(&v, sizeof(v), &cur->rss_stat[0].count); break;
		case 1: bpf_core_read(&v, sizeof(v), &cur->rss_stat[1].count); break;
		case 2: bpf_core_read(&v, sizeof(v), &cur->rss_stat[2].count); break;
		default: bpf_core_read(&v, sizeof(v), &cur->rss_stat[3].count); break;
		}
	}
	return v > 0 ? (__u64)v : 0;
}

/*
 * The target decision for the last process seen on each CPU (a hash
 * lookup otherwise): a page fault brings two events (page_fault_user,
 * rss_stat), a job faulting in its activation memory ~1400 of each per
 * 4 ms step, at 124 and 297 ns a run before (13% of the step,
 * bench/overhead.sh); with this and plain loads of the counters (tp_btf),
 * 94 and about 100.
 */
struct cpu_cache {
	__u32 tgid;
	__u32 ok;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_cache);
} cpu_cache SEC(".maps");

static __always_inline struct cpu_cache *cache_get(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&cpu_cache, &zero);
}

static __always_inline bool target_ok_cached(struct cpu_cache *c, __u32 tgid)
{
	bool ok;

	if (!nt_filter_on)
		return true;
	if (c && c->tgid == tgid && tgid)
		return c->ok;
	ok = nt_target_ok(tgid);
	if (c) {
		c->tgid = tgid;
		c->ok = ok;
	}
	return ok;
}

/* mm_counter for a trusted BTF pointer (tp_btf): plain loads, where
 * mm_counter's probe reads cost ~25 ns each on every RSS change. */
static __always_inline __u64 mm_counter_btf(struct mm_struct *mm, int member)
{
	long v;

	if (bpf_core_field_exists(((struct mm_struct___old *)0)->rss_stat.count)) {
		struct mm_struct___old *old = (void *)mm;

		switch (member) {
		case 0: v = old->rss_stat.count[0].counter; break;
		case 1: v = old->rss_stat.count[1].counter; break;
		case 2: v = old->rss_stat.count[2].counter; break;
		default: v = old->rss_stat.count[3].counter; break;
		}
	} else {
		struct mm_struct___new *cur = (void *)mm;

		switch (member) {
		case 0: v = cur->rss_stat[0].count; break;
		case 1: v = cur->rss_stat[1].count; break;
		case 2: v = cur->rss_stat[2].count; break;
		default: v = cur->rss_stat[3].count; break;
		}
	}
	return v > 0 ? (__u64)v : 0;
}

static __always_inline struct mem_proc *proc_get(__u32 tgid)
{
	struct mem_proc *pr = bpf_map_lookup_elem(&procs, &tgid);
	struct mem_proc zero = {};

	if (pr)
		return pr;
	bpf_map_update_elem(&procs, &tgid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&procs, &tgid);
}

static __always_inline void proc_read_mm(struct mem_proc *pr,
					 struct mm_struct *mm, bool btf)
{
	__u64 rss;

	for (int i = 0; i < MEM_NR_MEMBERS; i++)
		pr->pages[i] = btf ? mm_counter_btf(mm, i) : mm_counter(mm, i);
	rss = pr->pages[MEM_FILEPAGES] + pr->pages[MEM_ANONPAGES] +
	      pr->pages[MEM_SHMEMPAGES];
	if (rss > pr->peak_rss_pages)
		pr->peak_rss_pages = rss;
	/* the kernel's own peak, which it updates before RSS goes down */
	rss = btf ? mm->hiwater_rss : BPF_CORE_READ(mm, hiwater_rss);
	if (rss > pr->peak_rss_pages)
		pr->peak_rss_pages = rss;
	pr->updated_ns = bpf_ktime_get_ns();
}

static __always_inline int on_rss_stat(struct mm_struct *mm, bool btf)
{
	struct mem_proc *pr;
	__u32 tgid;

	if (!mm)
		return 0;
	if (btf) { /* trusted pointers: plain loads */
		struct task_struct *task = bpf_get_current_task_btf();

		if (task->mm == mm) {
			tgid = task->tgid;
		} else if (bpf_core_field_exists(mm->owner)) {
			struct task_struct *owner = mm->owner;

			if (!owner)
				return 0;
			tgid = BPF_CORE_READ(owner, tgid);
		} else {
			return 0;
		}
	} else {
		struct task_struct *task = (void *)bpf_get_current_task();

		if (BPF_CORE_READ(task, mm) == mm) {
			tgid = BPF_CORE_READ(task, tgid);
		} else if (bpf_core_field_exists(mm->owner)) {
			struct task_struct *owner = BPF_CORE_READ(mm, owner);

			if (!owner)
				return 0;
			tgid = BPF_CORE_READ(owner, tgid);
		} else {
			return 0;
		}
	}
	if (!target_ok_cached(cache_get(), tgid))
		return 0;
	pr = proc_get(tgid);
	if (pr)
		proc_read_mm(pr, mm, btf);
	return 0;
}

SEC("tp_btf/rss_stat")
int BPF_PROG(rss_stat_btf, struct mm_struct *mm, int member)
{
	return on_rss_stat(mm, true);
}

SEC("raw_tp/rss_stat")
int BPF_PROG(rss_stat_raw, struct mm_struct *mm, int member)
{
	return on_rss_stat(mm, false);
}

static __always_inline int on_fault(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct mem_proc *pr;

	if (!target_ok_cached(cache_get(), tgid))
		return 0;
	pr = bpf_map_lookup_elem(&procs, &tgid);
	if (!pr) {
		struct task_struct *task = (void *)bpf_get_current_task();
		struct mm_struct *mm = BPF_CORE_READ(task, mm);

		pr = proc_get(tgid);
		if (!pr)
			return 0;
		if (mm)
			proc_read_mm(pr, mm, false);
	}
	__sync_fetch_and_add(&pr->faults, 1);
	return 0;
}

SEC("tp_btf/page_fault_user")
int BPF_PROG(page_fault_btf, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	return on_fault();
}

SEC("raw_tp/page_fault_user")
int BPF_PROG(page_fault_raw, unsigned long address, struct pt_regs *regs,
	     unsigned long error_code)
{
	return on_fault();
}

static __always_inline int on_victim(struct task_struct *task, __u32 uid)
{
	__u32 tgid = BPF_CORE_READ(task, tgid);
	struct mem_oom_event *e;
	struct mm_struct *mm;

	if (!nt_target_ok(tgid))
		return 0;
	e = nt_reserve(&events, sizeof(*e));
	if (!e)
		return 0;
	nt_hdr_current(&e->hdr, oom_type, sizeof(*e));
	e->killer_pid = e->hdr.pid;
	e->hdr.pid = tgid;
	e->hdr.tid = BPF_CORE_READ(task, pid);
	BPF_CORE_READ_STR_INTO(&e->hdr.comm, task, comm);
	e->uid = uid;
	e->oom_score_adj = BPF_CORE_READ(task, signal, oom_score_adj);
	e->pad = 0;
	e->total_vm_bytes = 0;
	e->anon_rss_bytes = 0;
	e->file_rss_bytes = 0;
	e->shmem_rss_bytes = 0;
	e->swap_bytes = 0;
	e->pgtables_bytes = 0;
	mm = BPF_CORE_READ(task, mm);
	if (mm) {
		e->total_vm_bytes = BPF_CORE_READ(mm, total_vm) << page_shift;
		e->file_rss_bytes = mm_counter(mm, MEM_FILEPAGES) << page_shift;
		e->anon_rss_bytes = mm_counter(mm, MEM_ANONPAGES) << page_shift;
		e->swap_bytes = mm_counter(mm, MEM_SWAPENTS) << page_shift;
		e->shmem_rss_bytes = mm_counter(mm, MEM_SHMEMPAGES) << page_shift;
		e->pgtables_bytes = BPF_CORE_READ(mm, pgtables_bytes.counter);
	}
	bpf_ringbuf_submit(e, 0);
	return 0;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(mark_victim_btf, struct task_struct *task, __u32 uid)
{
	return on_victim(task, uid);
}

SEC("raw_tp/mark_victim")
int BPF_PROG(mark_victim_raw, struct task_struct *task, __u32 uid)
{
	return on_victim(task, uid);
}

static __always_inline void emit_internal(__u32 kind, __u32 tgid, __u32 child,
					  __s32 stack_id)
{
	struct mem_internal *r = nt_reserve(&events, sizeof(*r));

	if (!r)
		return;
	nt_hdr_current(&r->hdr, 0, sizeof(*r));
	r->kind = kind;
	r->tgid = tgid;
	r->child = child;
	r->stack_id = stack_id;
	bpf_ringbuf_submit(r, 0);
}

static __always_inline int on_exit(struct task_struct *task)
{
	__u32 tgid;

	/* signal->live reaches 0 when the last thread of the group exits. */
	if (BPF_CORE_READ(task, signal, live.counter) != 0)
		return 0;
	tgid = BPF_CORE_READ(task, tgid);
	/* Not nt_target_ok(): the core's own exit program may already have
	 * taken the process out of the target map. */
	if (!bpf_map_lookup_elem(&heap, &tgid) &&
	    !bpf_map_lookup_elem(&procs, &tgid))
		return 0;
	{
		struct mem_internal *r = nt_reserve(&events, sizeof(*r));

		if (!r)
			return 0;
		nt_hdr_current(&r->hdr, 0, sizeof(*r));
		/* the process's name, not that of its last thread */
		BPF_CORE_READ_STR_INTO(&r->hdr.comm, task, group_leader, comm);
		r->kind = MEM_REC_EXIT;
		r->tgid = tgid;
		r->child = 0;
		r->stack_id = -1;
		bpf_ringbuf_submit(r, 0);
	}
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(exit_btf, struct task_struct *task)
{
	return on_exit(task);
}

SEC("raw_tp/sched_process_exit")
int BPF_PROG(exit_raw, struct task_struct *task)
{
	return on_exit(task);
}

static __always_inline int on_fork(struct task_struct *parent,
				   struct task_struct *child)
{
	__u32 ptgid, ctgid;

	if (!want_fork)
		return 0;
	ptgid = BPF_CORE_READ(parent, tgid);
	ctgid = BPF_CORE_READ(child, tgid);
	if (ptgid == ctgid || !nt_target_ok(ptgid))
		return 0;
	emit_internal(MEM_REC_FORK, ptgid, ctgid, -1);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork_btf, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

SEC("raw_tp/sched_process_fork")
int BPF_PROG(fork_raw, struct task_struct *parent, struct task_struct *child)
{
	return on_fork(parent, child);
}

/* exec replaces the address space: every block of the old image is gone. */
static __always_inline int on_exec(struct task_struct *p)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct mem_heap_stats *st = bpf_map_lookup_elem(&heap, &tgid);

	if (!st)
		return 0;
	/* de_thread() is done: no other thread of tgid updates st now. */
	st->gen++;
	st->live_bytes = 0;
	st->live_allocs = 0;
	st->peak_bytes = 0;
	st->mmap_live_bytes = 0;
	st->mmap_peak_bytes = 0;
	emit_internal(MEM_REC_EXEC, tgid, 0, -1);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(exec_btf, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	return on_exec(p);
}

SEC("raw_tp/sched_process_exec")
int BPF_PROG(exec_raw, struct task_struct *p, pid_t old_pid,
	     struct linux_binprm *bprm)
{
	return on_exec(p);
}

/* ------------------------------------------------------------------ */
/* Heap                                                                */
/* ------------------------------------------------------------------ */

static __always_inline struct mem_heap_stats *heap_get(__u32 tgid)
{
	struct mem_heap_stats *st = bpf_map_lookup_elem(&heap, &tgid);
	struct mem_heap_stats zero = {};

	if (st)
		return st;
	bpf_map_update_elem(&heap, &tgid, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&heap, &tgid);
}

static __always_inline void live_add(struct mem_heap_stats *st, __u32 kind,
				     __s64 bytes, __s64 n)
{
	if (kind == MEM_KIND_MMAP) {
		__sync_fetch_and_add(&st->mmap_live_bytes, bytes);
		if (st->mmap_live_bytes > st->mmap_peak_bytes)
			st->mmap_peak_bytes = st->mmap_live_bytes;
		return;
	}
	__sync_fetch_and_add(&st->live_bytes, bytes);
	__sync_fetch_and_add(&st->live_allocs, n);
	if (st->live_bytes > st->peak_bytes)
		st->peak_bytes = st->live_bytes;
}

static __always_inline void note_stack(__u32 tgid, __s32 id)
{
	struct mem_stack_key k = {.tgid = tgid, .stack_id = id};
	__u8 one = 1;

	if (bpf_map_lookup_elem(&seen_stacks, &k))
		return;
	if (bpf_map_update_elem(&seen_stacks, &k, &one, BPF_NOEXIST))
		return; /* another CPU got there first */
	emit_internal(MEM_REC_STACK, tgid, 0, id);
}

/* A block came back from the allocator: count it and remember it. */
static __always_inline void track(void *ctx, __u32 tgid, __u32 tid, __u64 addr,
				  __u64 size, __u32 kind)
{
	struct mem_alloc_key key = {.tgid = tgid, .addr = addr};
	struct mem_alloc_val val = {};
	struct mem_alloc_val *stale;
	struct mem_heap_stats *st = heap_get(tgid);
	__u32 weight = 1;

	if (!st)
		return;
	if (kind == MEM_KIND_MMAP) {
		__sync_fetch_and_add(&st->mmaps, 1);
	} else {
		__sync_fetch_and_add(&st->allocs, 1);
		__sync_fetch_and_add(&st->alloc_bytes, size);
		if (size < sample_min_bytes && sample_every > 1) {
			if (bpf_get_prandom_u32() % sample_every) {
				__sync_fetch_and_add(&st->sampled_out, 1);
				return;
			}
			weight = sample_every;
		}
	}
	val.size = size;
	val.ts_ns = bpf_ktime_get_ns();
	val.tid = tid;
	val.weight = weight;
	val.kind = kind;
	val.gen = st->gen;
	val.stack_id = -1;
	if (want_stacks) {
		long id = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);

		if (id >= 0) {
			val.stack_id = (__s32)id;
			note_stack(tgid, (__s32)id);
		} else {
			__sync_fetch_and_add(&st->stack_lost, 1);
		}
	}
	/* A record already at this address was released behind our back
	 * (e.g. before a probe existed): drop its share of the live bytes. */
	stale = bpf_map_lookup_elem(&allocs, &key);
	if (stale && stale->gen == st->gen)
		live_add(st, stale->kind, -(__s64)(stale->size * stale->weight),
			 -(__s64)stale->weight);
	if (bpf_map_update_elem(&allocs, &key, &val, BPF_ANY)) {
		__sync_fetch_and_add(&st->untracked, 1);
		return;
	}
	live_add(st, kind, (__s64)(size * weight), weight);
}

/* A block was handed back; returns its record in *out when tracked. */
static __always_inline bool release(__u32 tgid, __u64 addr, __u32 want_kind,
				    struct mem_alloc_val *out)
{
	struct mem_alloc_key key = {.tgid = tgid, .addr = addr};
	struct mem_alloc_val *v = bpf_map_lookup_elem(&allocs, &key);
	struct mem_heap_stats *st;

	if (!v || v->kind != want_kind)
		return false;
	*out = *v;
	if (bpf_map_delete_elem(&allocs, &key))
		return false; /* another thread released it first */
	st = bpf_map_lookup_elem(&heap, &tgid);
	if (!st || out->gen != st->gen)
		return false; /* a block of the image before an exec */
	if (want_kind == MEM_KIND_MMAP) {
		__sync_fetch_and_add(&st->munmaps, 1);
	} else {
		__sync_fetch_and_add(&st->frees, out->weight);
		__sync_fetch_and_add(&st->freed_bytes, out->size * out->weight);
	}
	live_add(st, want_kind, -(__s64)(out->size * out->weight),
		 -(__s64)out->weight);
	return true;
}

/*
 * Entry of a function with a uretprobe: remember its arguments for the
 * return. False when the call is nested in another allocator call of the
 * same thread (only the outer one is counted).
 */
static __always_inline struct mem_pending *enter(struct pt_regs *ctx, __u32 fn,
						 __u64 size, __u64 arg)
{
	__u64 sp = PT_REGS_SP(ctx);
	struct mem_pending *p;

	p = bpf_task_storage_get(&pending, bpf_get_current_task_btf(), 0,
				 BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!p)
		return NULL;
	if (p->active && sp < p->sp) {
		p->depth++;
		return NULL;
	}
	/* Idle, or a stale call that never returned. */
	p->fn = fn;
	p->size = size;
	p->arg = arg;
	p->sp = sp;
	p->depth = 0;
	p->old_found = 0;
	p->active = 1;
	return p;
}

#define ENTRY_PROLOGUE()                                                       \
	__u64 id = bpf_get_current_pid_tgid();                                 \
	__u32 tgid = id >> 32, tid = (__u32)id;                                \
	if (heap_filter && (tgid == self_tgid || !nt_target_ok(tgid)))         \
		return 0

/* realloc releases its block at entry: a racing malloc in another thread
 * may get the same address back before realloc returns. */
static __always_inline void realloc_enter(struct pt_regs *ctx, __u32 tgid,
					  __u32 tid, __u64 ptr, __u64 size)
{
	struct mem_alloc_val old = {};
	struct mem_pending *p;
	bool found = false;

	if (ptr)
		found = release(tgid, ptr, MEM_KIND_HEAP, &old);
	p = enter(ctx, MEM_FN_REALLOC, size, 0);
	if (p && found) {
		p->old_addr = ptr;
		p->old = old;
		p->old_found = 1;
	}
}

static __always_inline void munmap_enter(__u32 tgid, __u64 addr, __u64 len)
{
	struct mem_alloc_val old;
	struct mem_heap_stats *st;
	__u64 page = 1ull << page_shift;
	__u64 cut;

	if (!release(tgid, addr, MEM_KIND_MMAP, &old))
		return;
	/* Unmapping the head of a region: keep its tail outstanding. */
	cut = (len + page - 1) & ~(page - 1);
	if (cut < old.size) {
		struct mem_alloc_key key = {.tgid = tgid, .addr = addr + cut};

		old.size -= cut;
		if (bpf_map_update_elem(&allocs, &key, &old, BPF_NOEXIST) == 0) {
			st = bpf_map_lookup_elem(&heap, &tgid);
			if (st)
				live_add(st, MEM_KIND_MMAP, (__s64)old.size, 1);
		}
	}
}

/*
 * Entry of every allocator function; the attach cookie says which (enum
 * mem_fn). One program so that one uprobe_multi link carries them all.
 */
SEC("uprobe")
int heap_enter(struct pt_regs *ctx)
{
	__u64 fn = bpf_get_attach_cookie(ctx);
	__u64 a1 = PT_REGS_PARM1(ctx), a2 = PT_REGS_PARM2(ctx);
	struct mem_alloc_val old;

	ENTRY_PROLOGUE();
	switch (fn) {
	case MEM_FN_MALLOC:
	case MEM_FN_VALLOC:
	case MEM_FN_PVALLOC: /* (size) */
		enter(ctx, (__u32)fn, a1, 0);
		break;
	case MEM_FN_CALLOC: /* (n, size) */
		enter(ctx, MEM_FN_CALLOC, a1 * a2, 0);
		break;
	case MEM_FN_ALIGNED_ALLOC:
	case MEM_FN_MEMALIGN: /* (align, size) */
		enter(ctx, (__u32)fn, a2, 0);
		break;
	case MEM_FN_POSIX_MEMALIGN: /* (memptr, align, size) */
		enter(ctx, MEM_FN_POSIX_MEMALIGN, PT_REGS_PARM3(ctx), a1);
		break;
	case MEM_FN_REALLOC: /* (ptr, size) */
		realloc_enter(ctx, tgid, tid, a1, a2);
		break;
	case MEM_FN_FREE: /* (ptr) */
		if (a1)
			release(tgid, a1, MEM_KIND_HEAP, &old);
		break;
	case MEM_FN_MMAP: /* (addr, len, prot, flags, fd, off) */
		enter(ctx,
		      (PT_REGS_PARM4(ctx) & MAP_ANONYMOUS_FLAG) ? MEM_FN_MMAP : MEM_FN_IGNORE,
		      a2, 0);
		break;
	case MEM_FN_MUNMAP: /* (addr, len) */
		munmap_enter(tgid, a1, a2);
		break;
	default:
		break;
	}
	return 0;
}

SEC("uretprobe")
int BPF_KRETPROBE(alloc_return, __u64 ret)
{
	struct mem_pending *pp;
	struct mem_pending p;
	__u64 addr = ret;

	ENTRY_PROLOGUE();
	pp = bpf_task_storage_get(&pending, bpf_get_current_task_btf(), 0, 0);
	if (!pp || !pp->active)
		return 0;
	if (pp->depth) {
		pp->depth--;
		return 0;
	}
	p = *pp;
	pp->active = 0;

	switch (p.fn) {
	case MEM_FN_IGNORE:
		return 0;
	case MEM_FN_MMAP:
		if (addr == (__u64)-1 || !addr)
			return 0;
		track(ctx, tgid, tid, addr, p.size, MEM_KIND_MMAP);
		return 0;
	case MEM_FN_POSIX_MEMALIGN:
		if ((int)ret != 0 || !p.arg)
			return 0;
		if (bpf_probe_read_user(&addr, sizeof(addr), (void *)p.arg))
			return 0;
		break;
	case MEM_FN_REALLOC:
		if (!addr && p.size && p.old_found) {
			/* realloc failed: the old block is still the caller's. */
			struct mem_alloc_key key = {.tgid = tgid, .addr = p.old_addr};
			struct mem_heap_stats *st = heap_get(tgid);

			if (st && !bpf_map_update_elem(&allocs, &key, &p.old,
						       BPF_NOEXIST)) {
				__sync_fetch_and_add(&st->frees, -(__s64)p.old.weight);
				__sync_fetch_and_add(&st->freed_bytes,
						     -(__s64)(p.old.size * p.old.weight));
				live_add(st, MEM_KIND_HEAP,
					 (__s64)(p.old.size * p.old.weight),
					 p.old.weight);
			}
			return 0;
		}
		break;
	default:
		break;
	}
	if (!addr)
		return 0;
	track(ctx, tgid, tid, addr, p.size, MEM_KIND_HEAP);
	return 0;
}

char LICENSE[] SEC("license") = "Dual MIT/GPL";
