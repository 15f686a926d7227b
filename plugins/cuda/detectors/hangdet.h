/* SPDX-License-Identifier: MIT */
/*
 * cuda_hang: the detector's state and config, shared by cuda_hang.c
 * (descriptor, config, ops, event intake, the timer's checks) and
 * hang_report.c (the alert: last activity, last launch, blocked threads).
 */
#ifndef CUDA_DET_HANGDET_H
#define CUDA_DET_HANGDET_H

#include <stdbool.h>
#include <stdint.h>

#include "ntcore/plugin.h"

#include "allocmap.h"
#include "cudaev.h"
#include "hang.h"
#include "pyframes.h"

struct hg_cfg {
	int64_t timeout_ms;
	int64_t interval_ms;
	int64_t stack_frames;
	const char *proc_root;
};

struct hg_proc {
	struct hang_proc h;
	char comm[NT_COMM_LEN + 1];
	/* what the process does while quiet, from the checks since the first
	 * one that found it without GPU activity for an interval */
	uint64_t quiet_seen_act; /* last_act_ns when the quiet sampling began */
	int64_t cpu_quiet;       /* CPU ticks then, -1 none */
	uint64_t cpu_quiet_ns;
	uint32_t checks, runnable; /* checks in the quiet period, state R seen */
	double cpu_percent;      /* over the quiet period */
};

struct hg {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct hg_cfg *cfg;
	int alert_type;
	struct cuev_cache cc;
	struct pyframes py; /* lent Python stacks (pyframes.h) */
	struct stacktab st;
	struct hg_proc **procs;
	size_t np, cp;
	long clk_tck;
	struct nt_metric *m_quiet, *m_alerts;
};

void hg_alert(struct hg *g, struct hg_proc *p, uint64_t now);

#endif
