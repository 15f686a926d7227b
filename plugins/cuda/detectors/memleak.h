/* SPDX-License-Identifier: MIT */
/*
 * cuda_memleak: the detector's state and config, shared by cuda_memleak.c
 * (descriptor, config, ops, event intake, timer) and memleak_report.c (the
 * growth alert, the exit report and its alert).
 */
#ifndef CUDA_DET_MEMLEAK_H
#define CUDA_DET_MEMLEAK_H

#include <stdbool.h>
#include <stdint.h>

#include "ntcore/plugin.h"

#include "cudaev.h"
#include "det_util.h"
#include "leak.h"
#include "pyframes.h"
#include "track.h"

struct ml_cfg {
	int64_t window_ms;
	int64_t windows;
	double threshold;
	int64_t min_growth_bytes;
	int64_t noise_bytes;
	bool exit_report;
	int64_t exit_min_bytes;
	int64_t exit_delay_ms;
	int64_t top;
	int64_t stack_frames;
	struct nt_strlist cache_frames;
	bool include_host;
};

struct ml_proc {
	uint32_t pid;
	int32_t dev;
	struct leak_est est;
	char comm[NT_COMM_LEN + 1];
};

struct ml_exit {
	uint32_t pid;
	int32_t code;
	uint64_t due_ns;
	char comm[NT_COMM_LEN + 1];
};

struct ml {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct ml_cfg *cfg;
	struct leak_cfg lcfg;
	int alert_type, report_type;
	struct track tr;
	struct cuev_cache cc;
	struct pyframes py; /* lent Python stacks (pyframes.h) */
	struct ml_proc *procs;
	size_t np, cp;
	struct ml_exit *exits;
	size_t ne, ce;
	struct nt_metric *m_live, *m_prob, *m_alerts;
};

void labels_pd(char *pid, char *dev, uint32_t p, int32_t d);
void ml_online_alert(struct ml *m, struct ml_proc *p,
			    const struct amap_proc *ap,
			    const struct leak_reading *r);
void ml_exit_report(struct ml *m, const struct ml_exit *x);

#endif
