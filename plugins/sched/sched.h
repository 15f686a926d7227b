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
 * by thread id. Totals count from the moment the thread was first seen.
 * Off-CPU time is everything between leaving a CPU and entering one again:
 * sleeping, blocking and waiting on a run queue (runq_ns is that last part).
 */
struct sched_tstat {
	__u32 tgid;
	__u32 tid;
	__u64 oncpu_ns;   /* completed on-CPU slices */
	__u64 offcpu_ns;  /* completed off-CPU periods */
	__u64 runq_ns;    /* completed run-queue waits */
	__u64 runq_count; /* how many run-queue waits were measured */
	__u64 vol;        /* voluntary switches (blocked / slept) */
	__u64 invol;      /* involuntary switches (preempted, still runnable) */
	__u64 migrations; /* moves to another CPU */
	__u64 wakeups;    /* sched_wakeup / sched_wakeup_new of this thread */
	__u64 on_ts;      /* CLOCK_MONOTONIC ns of the switch-in; 0 = not running */
	__u64 off_ts;     /* ns of the switch-out; 0 = running or unknown */
	__u64 wake_ts;    /* ns it became runnable and queued; 0 = not queued */
	__u64 first_ts;   /* ns it was first seen */
	__u32 cpu;        /* CPU it last ran on */
	__u32 pad;
	char comm[NT_COMM_LEN];
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

/* The thread leaves its CPU at `now`. `runnable`: it was preempted and stays
 * on a run queue (involuntary switch); otherwise it blocked (voluntary). */
static __always_inline void sched_acct_out(struct sched_tstat *s, __u64 now,
					   int runnable)
{
	if (s->on_ts && now > s->on_ts)
		s->oncpu_ns += now - s->on_ts;
	s->on_ts = 0;
	s->off_ts = now;
	if (runnable) {
		s->invol++;
		s->wake_ts = now;
	} else {
		s->vol++;
		s->wake_ts = 0;
	}
}

/* The thread enters a CPU at `now`. Returns 1 and sets *wait when a run-queue
 * wait was measured (it had been woken or preempted before). */
static __always_inline int sched_acct_in(struct sched_tstat *s, __u64 now,
					 __u32 cpu, __u64 *wait)
{
	int measured = 0;

	if (s->off_ts && now > s->off_ts)
		s->offcpu_ns += now - s->off_ts;
	if (s->wake_ts && now >= s->wake_ts) {
		*wait = now - s->wake_ts;
		s->runq_ns += *wait;
		s->runq_count++;
		measured = 1;
	}
	s->off_ts = 0;
	s->wake_ts = 0;
	s->on_ts = now;
	s->cpu = cpu;
	return measured;
}

/* The thread was made runnable (sched_wakeup, sched_wakeup_new). A thread
 * never seen on or off a CPU (a new one) starts its off-CPU time here. */
static __always_inline void sched_acct_wake(struct sched_tstat *s, __u64 now)
{
	s->wakeups++;
	if (!s->wake_ts)
		s->wake_ts = now;
	if (!s->on_ts && !s->off_ts)
		s->off_ts = now;
}

/* Totals as of `now`, counting the slice or the gap in progress. */
static __always_inline void sched_acct_now(const struct sched_tstat *s,
					   __u64 now, __u64 *on, __u64 *off)
{
	*on = s->oncpu_ns;
	*off = s->offcpu_ns;
	if (s->on_ts && now > s->on_ts)
		*on += now - s->on_ts;
	if (s->off_ts && now > s->off_ts)
		*off += now - s->off_ts;
}

#endif /* NTCORE_SCHED_H */
