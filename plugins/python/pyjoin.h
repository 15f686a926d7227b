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

/* Recent stacks kept per thread (on-CPU samples and idle walks). */
#define PYJ_POINTS 32

/* PYJ_IDLE: walked as it blocked; PYJ_PREEMPT: as it was preempted */
enum pyj_kind { PYJ_CPU = 1, PYJ_IDLE = 2, PYJ_PREEMPT = 4 };

struct pyj_point {
	uint64_t ts;    /* CLOCK_MONOTONIC ns, as in the ring records */
	uint32_t stack; /* py_agg stack id */
	uint32_t kind;  /* enum pyj_kind */
};

struct pyj_hist {
	struct pyj_point p[PYJ_POINTS];
	uint32_t n; /* points noted so far; slot i % PYJ_POINTS */
};

void pyj_note(struct pyj_hist *h, uint64_t ts, uint32_t stack, unsigned kind);
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

/* off: pyj_off_at for thread tid of the caller's data. */
typedef int (*pyj_off_fn)(void *arg, uint32_t tid, uint64_t t, uint64_t *start);

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
 *  - own: the launching thread's newest on-CPU sample at or before t, not
 *    older than own_max_ns; else its first one within a period after t
 *    (a thread launching before its first sample).
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
	      const struct pyj_thread *thr, size_t n, pyj_off_fn off, void *arg,
	      const struct pyj_limits *lim, struct pyj_result *r);

#endif /* NTCORE_PYJOIN_H */
