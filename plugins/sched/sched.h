/* SPDX-License-Identifier: MIT */
/*
 * sched probe: layouts shared by the BPF side (sched.bpf.c) and the user side
 * (sched.c, sched_logic.c), and the per-thread accounting rules themselves.
 *
 * The accounting functions below (sched_acct_*) are plain C without BPF
 * helpers: the BPF programs call them on the map value of a thread, and the
 * unit test drives them with synthetic switch sequences, so what is tested is
 * what runs in the kernel.
 */
#ifndef NTCORE_SCHED_H
#define NTCORE_SCHED_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#include "ntcore/event.h"

#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

/* Run-queue latency histogram: slot i holds waits of floor(log2(us)) == i,
 * i.e. [2^i, 2^(i+1)) microseconds; slot 0 also holds waits under 1 us and
 * the last slot everything from 2^(SLOTS-1) us (8.4 s) up. */
#define SCHED_HIST_SLOTS 24

/* Ring-buffer record kinds that are not published as they are. Registered
 * type ids are > 0, so 0 can never clash with sched.switch. */
#define SCHED_REC_EXIT 0u

/* task_struct::flags bit set once a task entered do_exit(). */
#define SCHED_PF_EXITING 0x00000004u

/*
 * Per-thread state and totals; the value of the BPF `threads` hash map keyed
 * by thread id. Totals count from the moment the thread was first seen
 * (first_ts). Off-CPU time is not kept: it is the rest of that lifetime
 * (sleeping, blocking, waiting on a run queue; runq_ns is that last part).
 *
 * On-CPU slices are timed from switch-in to switch-out when both were seen
 * on the same CPU in a row (the "chain"). When the kernel did not report a
 * switch (some do not, for some tasks), the kernel's own per-task runtime
 * (se.sum_exec_runtime, sampled into se_last at every switch) fills the gap.
 */
struct sched_tstat {
	__u32 tgid;
	__u32 tid;
	__u64 oncpu_ns;   /* completed on-CPU time */
	__u64 runq_ns;    /* completed run-queue waits */
	__u64 runq_count; /* how many run-queue waits were measured */
	__u64 vol;        /* voluntary switches (blocked / slept) */
	__u64 invol;      /* involuntary switches (preempted, still runnable) */
	__u64 migrations; /* moves to another CPU */
	__u64 wakeups;    /* sched_wakeup / sched_wakeup_new of this thread */
	__u64 on_ts;      /* CLOCK_MONOTONIC ns of the switch-in; 0 = not running */
	__u64 wake_ts;    /* ns it became runnable and queued; 0 = not queued */
	__u64 first_ts;   /* ns it was first seen */
	__u64 se_last;    /* kernel runtime (sum_exec_runtime) at the last switch */
	__u64 se_wake;    /* kernel runtime when it was queued (wake_ts) */
	__u32 cpu;        /* CPU of the last switch-in */
	__u32 pad;
	char comm[NT_COMM_LEN];
};

/* The last switch-in seen on one CPU (per-CPU map `cpu_last`): who should be
 * the next task to leave it. tid 0: an untracked task. */
struct sched_cpu_last {
	__u32 tid;
	__u32 pad;
	__u64 ts;
};

/* Run-queue latency of one process (key tgid), or of all (key 0). */
struct sched_hist {
	__u64 slots[SCHED_HIST_SLOTS];
	__u64 sum_ns;
};

/*
 * Ring record sent when a tracked thread exits (sched_process_exit): its
 * final totals (on-CPU counted up to the exit). The BPF side deletes the map
 * entry right after, so the user side must account for it from this record.
 */
struct sched_exit_rec {
	struct nt_event_hdr hdr; /* type SCHED_REC_EXIT; pid/tid/comm of it */
	struct sched_tstat st;
	__u8 group_dead;         /* last thread of its process */
	__u8 has_stats;          /* st is valid (the thread was tracked) */
	__u8 pad[6];
};

/* Published event sched.switch (switch_events = true only; debugging). The
 * header describes the task leaving the CPU (the current task). */
struct sched_switch_ev {
	struct nt_event_hdr hdr;
	__u64 prev_oncpu_ns; /* the slice that just ended; 0 when unknown */
	__u64 next_runq_ns;  /* how long next waited on a run queue; 0 unknown */
	__u32 next_pid;
	__u32 next_tid;
	char next_comm[NT_COMM_LEN];
	__u32 cpu;
	__u32 prev_state; /* task state bits; 0 = still runnable */
	__u8 preempt;
	__u8 pad[7];
};

/* Published event sched.thread (built by the user side): what one thread did
 * since its previous sched.thread event (or since it was first seen), on
 * every interval where it did anything and once when it exits. */
struct sched_thread_ev {
	struct nt_event_hdr hdr;
	__u64 oncpu_ns;
	__u64 offcpu_ns;
	__u64 runq_wait_ns;
	__u64 runq_waits;
	__u64 vol_switches;
	__u64 invol_switches;
	__u64 migrations;
	__u64 wakeups;
	__u64 total_oncpu_ns;
	__u64 total_offcpu_ns;
	__u64 total_runq_wait_ns;
	__u64 interval_ns;
	__u8 exited;
	__u8 pad[7];
};

/* Published event sched.report: the top-threads table as text, which the
 * stdout sink prints in its summary. The text follows the fixed part. */
struct sched_report_ev {
	struct nt_event_hdr hdr;
	struct nt_vstr text;
};

/* ------------------------------------------------------------------ */
/* Accounting rules (shared by BPF and the unit test)                  */
/* ------------------------------------------------------------------ */

static __always_inline __u32 sched_log2_u32(__u32 v)
{
	__u32 r, shift;

	r = (v > 0xFFFF) << 4; v >>= r;
	shift = (v > 0xFF) << 3; v >>= shift; r |= shift;
	shift = (v > 0xF) << 2; v >>= shift; r |= shift;
	shift = (v > 0x3) << 1; v >>= shift; r |= shift;
	r |= (v >> 1);
	return r;
}

/* floor(log2(v)); 0 for v <= 1. */
static __always_inline __u32 sched_log2(__u64 v)
{
	__u32 hi = v >> 32;

	if (hi)
		return sched_log2_u32(hi) + 32;
	return sched_log2_u32((__u32)v);
}

static __always_inline __u32 sched_hist_slot(__u64 ns)
{
	__u32 slot = sched_log2(ns / 1000);

	return slot < SCHED_HIST_SLOTS ? slot : SCHED_HIST_SLOTS - 1;
}

/* Whether the thread now leaving (or exiting on) this CPU is the one whose
 * switch-in this CPU saw last: then its slice is exactly now - on_ts. */
static __always_inline int sched_chain_ok(const struct sched_tstat *s,
					  const struct sched_cpu_last *cl)
{
	return s->on_ts && cl && cl->tid == s->tid && cl->ts == s->on_ts;
}

/* The thread leaves its CPU at `now` with kernel runtime `se_now`.
 * `runnable`: it was preempted and stays on a run queue (involuntary
 * switch); otherwise it blocked (voluntary). Returns the slice counted. */
static __always_inline __u64 sched_acct_out(struct sched_tstat *s, __u64 now,
					    __u64 se_now, int chain_ok,
					    int runnable)
{
	__u64 slice = 0;

	if (chain_ok && now > s->on_ts)
		slice = now - s->on_ts;
	else if (se_now > s->se_last)
		slice = se_now - s->se_last; /* the switch-in was not seen */
	s->oncpu_ns += slice;
	s->se_last = se_now;
	s->on_ts = 0;
	if (runnable) {
		s->invol++;
		s->wake_ts = now;
		s->se_wake = se_now;
	} else {
		s->vol++;
		s->wake_ts = 0;
	}
	return slice;
}

/* The thread enters a CPU at `now` with kernel runtime `se_now`. Runtime it
 * gathered since its last switch (an unseen switch-out) is counted. Returns 1
 * and sets *wait when a run-queue wait was measured: it had been woken or
 * preempted and has not run since (its runtime did not move). */
static __always_inline int sched_acct_in(struct sched_tstat *s, __u64 now,
					 __u64 se_now, __u32 cpu, __u64 *wait)
{
	int measured = 0;

	if (se_now > s->se_last)
		s->oncpu_ns += se_now - s->se_last;
	if (s->wake_ts && se_now == s->se_wake && now >= s->wake_ts) {
		*wait = now - s->wake_ts;
		s->runq_ns += *wait;
		s->runq_count++;
		measured = 1;
	}
	s->se_last = se_now;
	s->wake_ts = 0;
	s->on_ts = now;
	s->cpu = cpu;
	return measured;
}

/* The thread was made runnable (sched_wakeup, sched_wakeup_new) at `now`
 * with kernel runtime `se_now`. */
static __always_inline void sched_acct_wake(struct sched_tstat *s, __u64 now,
					    __u64 se_now)
{
	s->wakeups++;
	if (!s->wake_ts) {
		s->wake_ts = now;
		s->se_wake = se_now;
	}
}

/* This CPU's last switch-in (at `ts`) was this thread's, and another task is
 * leaving the CPU now: its switch-out went unseen. Its slice is no longer in
 * progress; the runtime is counted from se at its next switch. */
static __always_inline void sched_acct_lost(struct sched_tstat *s, __u64 ts)
{
	if (s->on_ts == ts)
		s->on_ts = 0;
}

/*
 * One sched_switch on a CPU whose last seen switch-in is *cl: `lost` is the
 * tracked thread that switch-in was for when it is not `prev` (its
 * switch-out went unseen), `prev` and `next` the tracked sides (any may be
 * NULL), `prev_se`/`next_se` their kernel runtimes. Sets *slice (prev's
 * slice) and, when it returns 1, *wait (next's run-queue wait).
 */
static __always_inline int
sched_switch_acct(struct sched_cpu_last *cl, struct sched_tstat *lost,
		  struct sched_tstat *prev, __u64 prev_se, int runnable,
		  struct sched_tstat *next, __u64 next_se, __u64 now, __u32 cpu,
		  __u64 *slice, __u64 *wait)
{
	int measured = 0;

	if (lost && cl)
		sched_acct_lost(lost, cl->ts);
	if (prev)
		*slice = sched_acct_out(prev, now, prev_se,
					sched_chain_ok(prev, cl), runnable);
	if (cl)
		cl->tid = 0;
	if (next) {
		measured = sched_acct_in(next, now, next_se, cpu, wait);
		if (cl) {
			cl->tid = next->tid;
			cl->ts = now;
		}
	}
	return measured;
}

/* On-CPU total at the thread's exit (it is running: this is its CPU). */
static __always_inline __u64 sched_acct_exit(const struct sched_tstat *s,
					     __u64 now, __u64 se_now,
					     int chain_ok)
{
	if (chain_ok && now > s->on_ts)
		return s->oncpu_ns + (now - s->on_ts);
	if (se_now > s->se_last)
		return s->oncpu_ns + (se_now - s->se_last);
	return s->oncpu_ns;
}

/*
 * Totals as of `now` (user side). `se_now` is the thread's kernel runtime
 * read now (/proc/PID/task/TID/schedstat), or 0 when unknown: it counts the
 * slice in progress of a thread believed running. Off-CPU is the rest of the
 * time since it was first seen.
 */
static __always_inline void sched_acct_now(const struct sched_tstat *s,
					   __u64 now, __u64 se_now, __u64 *on,
					   __u64 *off)
{
	__u64 life = now > s->first_ts ? now - s->first_ts : 0;

	*on = s->oncpu_ns;
	if (s->on_ts && se_now > s->se_last)
		*on += se_now - s->se_last;
	*off = life > *on ? life - *on : 0;
}

#endif /* NTCORE_SCHED_H */
