/* SPDX-License-Identifier: MIT */
/*
 * Python frames for the CUDA detectors' alerts: the python probe lends the
 * Python stack it joined to each host call of the cuda probe
 * (python.call_stack: the call's pid, tid and ts, a folded stack with
 * Python frames "function (file:line)"). A detector subscribed to it keeps
 * each thread's latest one here and, for the call it is consuming, puts
 * the Python frames in front of the call's native stack (root first, as
 * every stack), so allocations, errors and blocked syncs carry the user's
 * Python function into stack totals, evidence and messages.
 *
 * The lend for a call is published while the python probe consumes that
 * call, so it reaches a detector before the call itself only when the
 * python probe comes before the detector in the config (bus order is
 * subscription order): docs/cuda-detectors.md says so.
 *
 * Ownership: struct pyframes owns its copies of the lent texts.
 */
#ifndef CUDA_DET_PYFRAMES_H
#define CUDA_DET_PYFRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/event.h"
#include "ntcore/kit/hmap.h"

#include "cudaev.h"

#define PYF_SCHEMA "python.call_stack"
#define PYF_THREADS_MAX 8192

struct pyframes {
	struct nt_hmap last; /* (pid << 32 | tid) -> struct pyf_lend */
	char *merged;        /* the last merged stack (pyf_merge) */
	size_t merged_cap;
};

void pyf_init(struct pyframes *f);
void pyf_fini(struct pyframes *f);
/* Is this the python probe's lend (a schema named PYF_SCHEMA)? */
bool pyf_is(const struct nt_schema *schema);
/* Keep a lend (its Python frames only) as its thread's latest. */
void pyf_note(struct pyframes *f, const struct nt_event_hdr *ev,
	      const struct nt_schema *schema);
/* The Python frames lent for the call (pid, tid, ts), NULL if none. */
const char *pyf_find(const struct pyframes *f, uint32_t pid, uint32_t tid,
		     uint64_t ts);
/* When a lend matches e: e->stack becomes "python frames;native stack"
 * (a buffer of f, valid until the next call). Returns whether it did. */
bool pyf_merge(struct pyframes *f, struct cuev *e);
/* The innermost Python frame ("function (file:line)") of a stack, "" when
 * it has none. */
const char *stack_py_frame(const char *stack, char *out, size_t len);

#endif
