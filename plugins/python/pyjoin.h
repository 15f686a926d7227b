/* SPDX-License-Identifier: MIT */
/*
 * ntcore python probe: the CUDA join's decision, kept free of BPF and of
 * the plugin's state so that it can be unit-tested with synthetic
 * sequences. python.c feeds it the recent samples of each thread and a
 * callback that says whether a thread was off the CPU at a given time
 * (from the py_offcpu and py_offhist maps).
 */
#ifndef NTCORE_PYJOIN_H
#define NTCORE_PYJOIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "python.h"

/* Recent stacks kept per thread (on-CPU samples and idle walks), in
 * time order: 512 reach about 5 s back at 99 Hz on the CPU (8 KiB a
 * thread). A launch is joined when the daemon reads its event, which can
 * be seconds after it: on the GPU machine a transformer's first steps
 * waited while the cuda probe symbolized its first stacks in libraries
 * of hundreds of MB, and with 32 points their threads' histories no
 * longer reached back to the launches (3,119 of 18,219 not joined). */
#define PYJ_POINTS 512

/* PYJ_IDLE: walked as it blocked; PYJ_PREEMPT: as it was preempted */
enum pyj_kind { PYJ_CPU = 1, PYJ_IDLE = 2, PYJ_PREEMPT = 4 };

struct pyj_point {
	uint64_t ts;    /* CLOCK_MONOTONIC ns, as in the ring records */
	uint32_t stack; /* py_agg stack id */
	uint32_t kind;  /* enum pyj_kind */
};

struct pyj_hist {
	struct pyj_point p[PYJ_POINTS]; /* a ring, sorted by ts from the oldest */
	uint32_t n; /* points noted so far; the oldest kept is number n - kept */
};

/* Note a point in time order (records of several CPUs come a little out
 * of order); when full, the oldest goes. */
void pyj_note(struct pyj_hist *h, uint64_t ts, uint32_t stack, unsigned kind);
/* Does what is kept reach back to t (nothing forgotten after t)? */
bool pyj_reaches(const struct pyj_hist *h, uint64_t t);
/* The newest point of one of `kinds` with ts <= t (NULL: none kept). */
const struct pyj_point *pyj_before(const struct pyj_hist *h, uint64_t t,
				   unsigned kinds);
/* The oldest point of one of `kinds` with ts > t (NULL: none kept). */
const struct pyj_point *pyj_after(const struct pyj_hist *h, uint64_t t,
				  unsigned kinds);

/*
 * Was a thread blocked at t? From its BPF bookkeeping read at read_ns:
 * cur_out is the start of the off-CPU period in progress then (0: it was
 * running), cur_preempted whether that period began by a preemption, h
 * its completed periods (NULL: none). 1: blocked, *start = start of that
 * period; 0: on the CPU or preempted (runnable); -1: unknown (t after the
 * read, or before the oldest period kept).
 */
int pyj_off_at(const struct py_offhist *h, uint64_t cur_out,
	       bool cur_preempted, uint64_t read_ns, uint64_t t, uint64_t *start);

/* A Python thread that may have caused another thread's launch. */
struct pyj_thread {
	uint32_t pid, tid;
	const struct pyj_hist *h;
};

/*
 * Did a thread block (leave the CPU waiting, not preempted) at a time in
 * (a, b]? From the same bookkeeping as pyj_off_at. 1 yes, 0 no, -1
 * unknown (b after the read, or periods before the oldest kept may be
 * forgotten).
 */
int pyj_blocked_in(const struct py_offhist *h, uint64_t cur_out,
		   bool cur_preempted, uint64_t read_ns, uint64_t a, uint64_t b);

/* off: pyj_off_at for thread tid of the caller's data; blocked: its
 * pyj_blocked_in. */
typedef int (*pyj_off_fn)(void *arg, uint32_t tid, uint64_t t, uint64_t *start);
typedef int (*pyj_blocked_fn)(void *arg, uint32_t tid, uint64_t a, uint64_t b);

struct pyj_limits {
	uint64_t own_max_ns; /* age of the launching thread's own sample */
	uint64_t period_ns;  /* sample period (idle walks: at most one per) */
};

enum pyj_how { PYJ_NONE = 0, PYJ_OWN, PYJ_OWN_AFTER, PYJ_CROSS };

/* Why a launch found no stack (PYJ_NONE), for the counts of the log. */
enum pyj_why {
	PYJ_WHY_OK = 0,
	PYJ_WHY_PYTHON,   /* a Python thread without a recent sample of its own */
	PYJ_WHY_NODONOR,  /* no other Python thread of the process with a walk */
	PYJ_WHY_UNKNOWN,  /* the donor's off-CPU history doesn't reach back to t */
	PYJ_WHY_RUNNING,  /* the donor was on the CPU or preempted at t */
	PYJ_WHY_NOWALK,   /* blocked, but its period's walk has no Python frame */
	PYJ_WHY_LATE,     /* joined so late that the histories no longer reach
			   * back to t (PYTHON or NODONOR otherwise) */
	PYJ_WHY_MOVED,    /* its own samples around t are each separated from
			   * t by a block of the thread */
	PYJ_WHY_N
};

struct pyj_result {
	int how;        /* enum pyj_how */
	int why;        /* enum pyj_why (PYJ_NONE: the reason of the last
			 * candidate that came furthest) */
	uint32_t stack; /* py_agg stack id (PYJ_NONE: UINT32_MAX) */
	uint32_t donor; /* PYJ_CROSS: the blocked thread's tid */
};

/*
 * Join a launch at t by (pid, tid) with a Python stack:
 *  - own: the launching thread's newest on-CPU sample or preemption walk
 *    at or before t, not older than own_max_ns, unless the thread blocked
 *    between it and t (blocked() == 1: it may have left that code since,
 *    as a thread returning from backward() to the next forward()); else
 *    its first one within a period after t (a thread launching before its
 *    first sample), unless it blocked between t and that one.
 *  - cross: only when the launching thread is not a Python thread (no
 *    sample of its own, own_python false): the thread of the same pid
 *    that was blocked at t (off() == 1; not merely preempted) and whose
 *    latest walk as it blocked is the one of that period (walked at or
 *    less than a period before it began: the BPF side's walk budget for
 *    blocking, so a later block would have had its own walk), the newest
 *    such walk first.
 */
void pyj_join(uint32_t pid, uint32_t tid, uint64_t t,
	      const struct pyj_hist *own, bool own_python,
	      const struct pyj_thread *thr, size_t n, pyj_off_fn off,
	      pyj_blocked_fn blocked, void *arg, const struct pyj_limits *lim,
	      struct pyj_result *r);

#endif /* NTCORE_PYJOIN_H */
