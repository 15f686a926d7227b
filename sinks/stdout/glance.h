/* SPDX-License-Identifier: MIT */
/*
 * "At a glance" lines of the stdout sink: metric families named in the
 * config ("ntcore_cuda_launches_total:kernel"), shown as a rate per second
 * (counters) or a sum (gauges), with the top values of one label. Data
 * driven: the sink knows no plugin, a family that does not exist is not
 * shown.
 */
#ifndef NTCORE_STDOUT_GLANCE_H
#define NTCORE_STDOUT_GLANCE_H

#include <stdbool.h>
#include <stdio.h>

#include "ntcore/plugin.h"

struct glance_val {
	char *name;   /* the label's value (owned) */
	double value; /* now: summed over the other labels */
	double delta; /* since the previous collection (counters) */
};

struct glance_item {
	char metric[128];
	char label[64]; /* "" when no breakdown */
	char title[128]; /* "cuda_launches" */
	bool found, counter, bytes;
	double total, delta;
	bool have_prev;
	struct glance_val *vals, *prev; /* sorted by name, owned */
	size_t n_vals, n_prev;
};

struct glance {
	struct glance_item *items; /* owned */
	size_t n;
};

/* Parses the "METRIC[:LABEL]" specs. 0, or -EINVAL with `bad` set to the
 * spec that does not parse, or -ENOMEM. */
int glance_init(struct glance *g, const struct nt_strlist *specs,
		const char **bad);
/* A metrics_visit callback (arg: struct glance *). Call glance_begin
 * before a visit: it turns the last values into the previous ones. */
void glance_begin(struct glance *g);
int glance_visit(void *arg, const struct nt_metric_desc *desc,
		 const struct nt_metric_series *series, uint32_t n,
		 uint64_t overflow);
/* One line per family found: rates over `secs` (the interval, or the whole
 * run when `final`, then with totals), the `top` largest label values. */
void glance_print(const struct glance *g, FILE *out, double secs,
		  unsigned top, bool final);
void glance_free(struct glance *g);

/* "3.2 GiB" */
void glance_fmt_bytes(double bytes, char *buf, size_t len);

#endif
