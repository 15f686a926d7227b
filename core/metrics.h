/* SPDX-License-Identifier: MIT */
/*
 * The metric registry: families of counters, gauges and histograms with
 * bounded label sets. Thread-safe: the registry's mutex guards the list of
 * families, each family's own mutex its series, so plugins update from the
 * loop while a sink reads from its own thread through nt_registry_visit,
 * which sees each family whole (a consistent snapshot per family) and holds
 * one family at a time. The registry owns copies of every string it keeps, so
 * a family outlives the plugin that registered it (SIGHUP reload).
 */
#ifndef NTCORE_CORE_METRICS_H
#define NTCORE_CORE_METRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "labels.h"
#include "ntcore/plugin.h"

#define NT_METRICS_DEFAULT_MAX_SERIES 10000
#define NT_METRICS_MAX_LABELS 16

struct nt_registry {
	pthread_mutex_t lock;
	/* Identity labels (labels.h): NULL keeps every family as declared.
	 * Borrowed: set before any family registers, outlives the registry. */
	const struct nt_label_policy *policy;
	struct nt_metric **families;
	size_t n_families, cap_families;
};

void nt_registry_init(struct nt_registry *reg);
void nt_registry_fini(struct nt_registry *reg);

/* Returns the family (an existing one when the name, type and labels match),
 * or NULL with *why set to a static message. */
struct nt_metric *nt_registry_register(struct nt_registry *reg,
				       const struct nt_metric_desc *desc,
				       const char **why);

void nt_metric_add(struct nt_metric *m, const char *const *labels, double delta);
void nt_metric_set(struct nt_metric *m, const char *const *labels, double value);
void nt_metric_observe(struct nt_metric *m, const char *const *labels,
		       double value);
void nt_metric_hist_set(struct nt_metric *m, const char *const *labels,
			const uint64_t *counts, double sum);
void nt_metric_remove(struct nt_metric *m, const char *const *labels);

/* Current value of one series (tests, summaries); 0 when absent. For a
 * histogram, the count. */
double nt_metric_value(struct nt_metric *m, const char *const *labels);
uint64_t nt_metric_overflow(struct nt_metric *m);
size_t nt_metric_series_count(struct nt_metric *m);

int nt_registry_visit(struct nt_registry *reg, nt_metric_visit_fn fn, void *arg);

#endif
