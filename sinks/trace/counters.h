/* SPDX-License-Identifier: MIT */
/*
 * Counter tracks from the metric registry: on each tick the sampler visits
 * the families named by the `counters` config (fnmatch patterns) and hands
 * every gauge or counter series whose value changed since the last tick to
 * a callback, with the series' descriptor (struct ctr_series, render.h).
 * At most `max_series` series are kept; samples of further ones are
 * counted in `overflow`. Histograms are not counter tracks (skipped).
 */
#ifndef NTCORE_TRACE_COUNTERS_H
#define NTCORE_TRACE_COUNTERS_H

#include "ntcore/plugin.h"
#include "render.h"
#include "tmap.h"

typedef void (*ctr_emit_fn)(void *arg, uint64_t ts, const struct ctr_series *s,
			    double value);

struct ctr_entry {
	struct ctr_series s;
	double last;
	bool seen;
	uint64_t emitted_ns; /* when last handed out */
};

struct ctr_sampler {
	const struct nt_strlist *patterns;
	struct tmap by_key;          /* family\0label values -> ctr_entry */
	struct ctr_entry **series;   /* by id - 1 */
	uint32_t n, max;
	uint64_t overflow;
	uint64_t refresh_ns; /* hand out unchanged values this often (0: never) */
	/* set for the duration of one ctr_sample call */
	uint64_t now;
	ctr_emit_fn emit;
	void *arg;
};

/* refresh_ns: also hand out an unchanged value after this long, so that a
 * window of the flight recorder holds every series' value (0: never). */
void ctr_init(struct ctr_sampler *cs, const struct nt_strlist *patterns,
	      uint32_t max_series, uint64_t refresh_ns);
void ctr_sample(struct ctr_sampler *cs, const struct nt_host *host,
		struct nt_instance *inst, uint64_t now_ns, ctr_emit_fn emit,
		void *arg);
/* The series of an id handed out earlier, NULL when unknown. */
const struct ctr_series *ctr_series_of(const struct ctr_sampler *cs, uint32_t id);
void ctr_fini(struct ctr_sampler *cs);

/* For tests: take one family's series as metrics_visit would give them. */
int ctr_visit(void *arg, const struct nt_metric_desc *desc,
	      const struct nt_metric_series *series, uint32_t n_series,
	      uint64_t overflow);

#endif
