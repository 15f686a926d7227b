/* SPDX-License-Identifier: MIT */
/*
 * cuda_oom: the detector's state and config, shared by cuda_oom.c
 * (descriptor, config, ops, event intake) and oom_report.c (the alert of a
 * failed allocation: live bytes, holes, stack, recent allocations).
 */
#ifndef CUDA_DET_OOM_H
#define CUDA_DET_OOM_H

#include <stdbool.h>
#include <stdint.h>

#include "ntcore/plugin.h"

#include "cudaev.h"
#include "frag.h"
#include "oomring.h"
#include "pyframes.h"
#include "track.h"

struct oom_cfg {
	const char *model;
	int64_t repeat_ms;
	int64_t recent;
	int64_t stack_frames;
	bool all_failures;
	bool include_host;
};

struct oom_proc {
	uint32_t pid;
	struct oom_ring ring;
	uint64_t fail_size, fail_ns; /* the last failure, for retries */
	uint32_t retries;
};

/* address ranges ever allocated per (pid, device), so that only memory the
 * process once held counts as a free hole (frag.h) */
struct oom_used {
	uint32_t pid;
	int32_t dev;
	struct frag_used u;
};

struct oom {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct oom_cfg *cfg;
	int alert_type;
	struct track tr;
	struct cuev_cache cc;
	struct pyframes py; /* lent Python stacks (pyframes.h) */
	struct oom_proc *procs;
	size_t np, cp;
	struct oom_used *used;
	size_t nu, cu;
	struct nt_metric *m_fail, *m_lat;
};

struct frag_used *oom_used_get(struct oom *o, uint32_t pid, int32_t dev,
			       bool create);
struct oom_proc *oom_proc_get(struct oom *o, uint32_t pid);
bool contiguous(const struct oom *o);
void oom_report(struct oom *o, const struct cuev *e);

#endif
