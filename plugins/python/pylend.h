/* SPDX-License-Identifier: MIT */
/*
 * ntcore python probe: lending the CUDA join's Python stack of each host
 * call (cuda.launch, cuda.graph_launch, cuda.memcpy, cuda.memset) to other
 * plugins, as one python.launch_stack event with the call's header (same
 * ts, pid, tid): the cuda_gpu plugin puts GPU time under it. Published only
 * while someone subscribes (the first publish says).
 */
#ifndef NTCORE_PYLEND_H
#define NTCORE_PYLEND_H

#include <stdbool.h>
#include <stdint.h>

#include <ntcore/plugin.h>

#include "pyagg.h"

struct py_lend {
	int type;      /* python.launch_stack's type id (< 0: not registered) */
	int listeners; /* -1 unknown, 0 none, 1 some */
	char *buf;     /* the record being built */
	size_t cap;
};

int py_lend_init(struct py_lend *l, const struct nt_host *host,
		 struct nt_instance *inst);
/* Is lending worth a join (someone listens, or not known yet)? */
bool py_lend_wanted(const struct py_lend *l);
/* Publish the frames (root first) joined to the host call `call` (how:
 * pyjoin.h enum pyj_how). */
void py_lend_publish(struct py_lend *l, const struct nt_host *host,
		     struct nt_instance *inst, const struct nt_event_hdr *call,
		     const struct py_agg *agg, const uint32_t *frames, uint32_t n,
		     bool lines, unsigned how);
void py_lend_fini(struct py_lend *l);

#endif
