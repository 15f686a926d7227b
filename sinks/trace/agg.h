/* SPDX-License-Identifier: MIT */
/*
 * What the report page shows, aggregated from events as they pass (the
 * whole run) or from the flight recorder's window (one dump): flame graphs
 * (stack samples weighted by count, one per sample schema; host calls with
 * a stack by call; device slices by GPU time), per-name tables of device slices (kernels, copies)
 * and host calls (API calls), the alerts, the memory timeline (counter
 * series of the configured families), events per schema and the latest
 * text of each "*.report" schema. Every table is bounded.
 */
#ifndef NTCORE_TRACE_AGG_H
#define NTCORE_TRACE_AGG_H

#include <stdint.h>

#include "conv.h"
#include "flame.h"
#include "render.h"
#include "tmap.h"

#define AGG_MAX_NAMES 4096   /* per table; further names: "[other]" */
#define AGG_MAX_ALERTS 200
#define AGG_MAX_MEM_SERIES 32
#define AGG_MEM_POINTS 4000
#define AGG_MAX_SAMPLE_FLAMES 8 /* sample schemas with a flame graph each */

struct agg_stat {
	uint64_t count, total_ns, max_ns;
};

struct agg_alert {
	uint64_t ts;
	uint32_t severity, pid, tid;
	char comm[NT_COMM_LEN + 1];
	char *schema, *message, *evidence, *stack;
};

struct agg_series {
	const struct ctr_series *s;
	uint64_t *ts;
	double *v;
	uint32_t n;
	uint32_t stride, skipped; /* keep one sample in `stride` once full */
	uint64_t last_ts;         /* the newest sample, always kept */
	double last_v;
};

/* The flame graph of one sample schema (python.stack: samples;
 * cuda.gpu_stack: GPU microseconds): weights of different schemas are of
 * different units, so each schema has its own. */
struct agg_samples {
	char schema[64];
	char unit[24];   /* of its `count` field; "samples" for "count" */
	struct flame f;
};

struct agg {
	struct agg_samples samples[AGG_MAX_SAMPLE_FLAMES];
	uint32_t n_samples;
	uint64_t samples_over;         /* events of further sample schemas */
	uint32_t flame_nodes;
	struct flame calls, gpu;
	struct tmap kernels, apis;     /* name -> struct agg_stat */
	struct tmap schemas;           /* schema name -> count */
	struct tmap reports;           /* schema name -> latest text */
	struct agg_alert alerts[AGG_MAX_ALERTS];
	uint32_t n_alerts;
	uint64_t alerts_over;          /* alerts past AGG_MAX_ALERTS */
	struct agg_series mem[AGG_MAX_MEM_SERIES];
	uint32_t n_mem;
	const struct nt_strlist *mem_families;
	uint64_t first_ts, last_ts, events;
};

void agg_init(struct agg *a, uint32_t flame_nodes,
	      const struct nt_strlist *mem_families);
void agg_event(struct agg *a, const struct nt_event_hdr *ev,
	       const struct tr_class *c);
void agg_counter(struct agg *a, uint64_t ts, const struct ctr_series *s,
		 double value);
void agg_fini(struct agg *a);

#endif
