/* SPDX-License-Identifier: MIT */
/*
 * ntcore python probe: lending the CUDA join's Python stack of each host
 * call (cuda.launch, cuda.graph_launch, cuda.memcpy, cuda.memset, and for
 * the CUDA detectors' alerts cuda.alloc, cuda.error, cuda.sync and
 * cuda.enter) to other plugins, as one python.launch_stack event with the
 * call's header (same ts, pid, tid): the cuda_gpu plugin puts GPU time
 * under it, the detectors name the Python function in their alerts.
 * Published only while someone subscribes (the first publish says).
 */
#ifndef NTCORE_PYLEND_H
#define NTCORE_PYLEND_H

#include <stdbool.h>
#include <stdint.h>

#include <ntcore/plugin.h>

#include "pyagg.h"

/* One lent schema: python.launch_stack (launches, graph launches, copies,
 * sets: what cuda_gpu joins with GPU records) or python.call_stack
 * (allocations, errors, syncs and entries of blocking calls: for the CUDA
 * detectors' alerts, kept apart so that cuda_gpu's join of host calls
 * does not see them). */
struct py_lend_chan {
	int type;      /* type id (< 0: not registered) */
	int listeners; /* -1 unknown, 0 none, 1 some */
};

struct py_lend {
	struct py_lend_chan launch, call;
	char *buf;     /* the record being built */
	size_t cap;
};

int py_lend_init(struct py_lend *l, const struct nt_host *host,
		 struct nt_instance *inst);
/* Subscribe to the host calls whose stacks are lent (besides cuda.launch,
 * which python.c joins for its own stacks). Returns 0 or the first error. */
int py_lend_subscribe(const struct nt_host *host, struct nt_instance *inst);
/* Is lending the stack of a call of schema `call_schema` ("cuda.alloc")
 * worth a join (someone listens, or not known yet)? */
bool py_lend_wanted(const struct py_lend *l, const char *call_schema);
/* Publish the frames (root first) joined to the host call `call` of
 * schema `call_schema` (how: pyjoin.h enum pyj_how). */
void py_lend_publish(struct py_lend *l, const struct nt_host *host,
		     struct nt_instance *inst, const struct nt_event_hdr *call,
		     const char *call_schema, const struct py_agg *agg,
		     const uint32_t *frames, uint32_t n, bool lines, unsigned how);
void py_lend_fini(struct py_lend *l);

#endif
