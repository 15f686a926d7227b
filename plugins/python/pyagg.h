/* SPDX-License-Identifier: MIT */
/*
 * ntcore python probe: aggregation of resolved samples (pure, no kernel,
 * no process access). Strings are interned once; a frame is an id for
 * (function, file, line); a stack is (pid, tid, state, frame ids) with a
 * sample count. From these it renders folded stacks (flamegraph.pl /
 * speedscope "collapsed" format, root first), per-function tables and the
 * top functions for metrics.
 */
#ifndef NTCORE_PYAGG_H
#define NTCORE_PYAGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum py_state {
	PY_ST_CPU = 0,  /* on-CPU sample */
	PY_ST_IDLE = 1, /* off the CPU (sleeping, waiting, preempted) */
	PY_ST_CUDA = 2, /* a CUDA launch joined with the thread's Python stack */
	PY_ST_N
};

const char *py_state_name(unsigned state);

struct py_agg;

/* max_stacks bounds the distinct stacks kept (further ones are counted
 * in one "[other stacks]" stack per process and state). */
struct py_agg *py_agg_new(uint32_t max_stacks);
void py_agg_free(struct py_agg *a);

/* Interned copy of s (valid until py_agg_free). NULL on ENOMEM. */
const char *py_agg_intern(struct py_agg *a, const char *s);

/* Frame id of (func, file, line); func/file are copied (interned). A
 * native frame has file NULL and line 0. Returns UINT32_MAX on ENOMEM. */
uint32_t py_agg_frame(struct py_agg *a, const char *func, const char *file,
		      int line);

/* Stack id of (pid, tid, state, frames root first); created with 0
 * samples. `comm` (thread name, may be NULL) is remembered per stack.
 * Returns UINT32_MAX on ENOMEM. */
uint32_t py_agg_stack(struct py_agg *a, uint32_t pid, uint32_t tid,
		      unsigned state, const uint32_t *frames, uint32_t n,
		      const char *comm);

void py_agg_add(struct py_agg *a, uint32_t stack, uint64_t samples);

/* Folded text of frame ids (root first), as py_agg_folded; unknown ids are
 * skipped. */
size_t py_agg_folded_frames(const struct py_agg *a, const uint32_t *frames,
			    uint32_t n, bool lines, char *buf, size_t len);

uint64_t py_agg_samples(const struct py_agg *a, uint32_t stack);

/*
 * Folded text of a stack: "f1 (file:line);f2 (file:line)" (root first);
 * with lines = false "f1 (file);f2 (file)". Native frames are "name".
 * Returns the length written (truncated to len - 1).
 */
size_t py_agg_folded(const struct py_agg *a, uint32_t stack, bool lines,
		     char *buf, size_t len);

/*
 * Visit the stacks of `pid` (0: every pid) whose count grew since the last
 * py_agg_emit, with the growth, and mark them published.
 */
typedef void (*py_stack_fn)(void *arg, uint32_t stack, uint32_t pid,
			    uint32_t tid, unsigned state, const char *comm,
			    uint64_t delta);
void py_agg_emit(struct py_agg *a, uint32_t pid, py_stack_fn fn, void *arg);

/* One row of the per-function table. Percentages are of all samples of
 * the process (every state but cuda). */
struct py_func_row {
	const char *func;
	const char *file; /* NULL for native frames */
	uint64_t self, total, self_cpu;
	double self_pct, total_pct;
};

/*
 * The `top` functions of `pid` by self samples (ties: total, then name);
 * fills rows (at most top) and returns how many. *all gets the process's
 * sample total.
 */
size_t py_agg_top(const struct py_agg *a, uint32_t pid, size_t top,
		  struct py_func_row *rows, uint64_t *all);

/* Distinct frames interned so far (a bound on the functions of a pid). */
uint32_t py_agg_n_frames(const struct py_agg *a);

/* The per-function table as text (for the python.report event). */
size_t py_agg_report(const struct py_agg *a, uint32_t pid, size_t top,
		     char *buf, size_t len);

/* Forget every stack of pid (after its final report). */
void py_agg_forget(struct py_agg *a, uint32_t pid);

/* Stacks currently kept. */
uint32_t py_agg_n_stacks(const struct py_agg *a);

/* Function name of a frame id; *file (NULL for native) and *line too. */
const char *py_agg_frame_func(const struct py_agg *a, uint32_t frame,
			      const char **file, int *line);

/* Frames (root first) of a stack; NULL for an unknown or forgotten id. */
const uint32_t *py_agg_stack_frames(const struct py_agg *a, uint32_t stack,
				    uint32_t *n);

#endif
