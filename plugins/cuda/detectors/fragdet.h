/* SPDX-License-Identifier: MIT */
/*
 * cuda_frag: the detector's state and config, shared by cuda_frag.c
 * (descriptor, config, ops, event intake, timer) and frag_report.c (the
 * score, the SVG timeline, the alert and the metrics).
 */
#ifndef CUDA_DET_FRAGDET_H
#define CUDA_DET_FRAGDET_H

#include <stdbool.h>
#include <stdint.h>

#include "ntcore/plugin.h"

#include "cudaev.h"
#include "det_util.h"
#include "frag.h"
#include "timeline.h"
#include "track.h"

struct fr_cfg {
	const char *model;
	int64_t interval_ms;
	double threshold;
	int64_t min_free_bytes;
	int64_t min_holes;
	double horizon_s;
	int64_t realert_ms;
	const char *svg_path;
	int64_t timeline_max;
	bool include_host;
};

struct fr_proc {
	uint32_t pid;
	int32_t dev;
	char comm[NT_COMM_LEN + 1];
	struct timeline tl;
	struct frag_used used;
	struct frag_trend trend;
	struct frag_stats last;
	struct frag_stats worst; /* highest score seen, for the picture */
	uint64_t worst_ns;
	bool dirty, alerted, have_stats;
	/* does the allocator put new blocks into freed address space? */
	uint64_t fills;  /* allocations that reused freed addresses */
	uint64_t skips;  /* allocations that fit the largest hole but went elsewhere */
	uint64_t last_alert_ns;
	uint64_t stats_ns; /* when `last` was computed */
	uint64_t failed;
};

struct fr {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct fr_cfg *cfg;
	int alert_type;
	struct track tr;
	struct cuev_cache cc;
	bool paged;
	struct fr_proc **procs;
	size_t np, cp;
	struct nt_metric *m_score, *m_ext, *m_holes, *m_free, *m_largest;
};

void fr_compute(struct fr *f, struct fr_proc *p);
const char *fr_write_svg(struct fr *f, struct fr_proc *p, char *path,
				size_t len);
void fr_alert(struct fr *f, struct fr_proc *p, uint32_t sev,
		     const struct cuev *failed);
void fr_metrics(struct fr *f, const struct fr_proc *p, bool remove);

#endif
