/* SPDX-License-Identifier: MIT */
/*
 * Views: metric families read with host->metrics_visit and turned into
 * series of derived values, one value per series each time its family
 * changes:
 *   counter    the rate per second since the previous value
 *   gauge      the value
 *   histogram  the mean of the observations since the previous value
 *              (none when there were none)
 * A view names families by glob, keeps some labels and sums its series over
 * the others (so `labels = ["pid"]` turns per-thread counters into
 * per-process ones), and may filter on label values. A family is sampled
 * only in snapshots where it changed (its fingerprint, the sum of every
 * value, moved): producers update their families every interval of their
 * own, and a rate over a snapshot that saw no update (0) next to one that
 * saw two (2x) would be noise made here. The rate's time is the time since
 * the series' previous value; a change seen less than half the family's
 * typical interval after the previous one is held and joined to the next
 * (its time would be a sliver, its rate a false burst).
 *
 * Series are kept in one table for all views, at most `max_series` (the
 * rest counted as dropped), and forgotten after 120 snapshots unseen.
 * Consumers (watched series, rules) register a callback per view and get
 * each new value; they may hang their own state on the series (`user`,
 * freed with the `drop` callback they registered).
 */
#ifndef AN_VIEW_H
#define AN_VIEW_H

#include <stdbool.h>
#include <stdint.h>

#include "ntcore/plugin.h"

#define AN_VIEW_MAX_LABELS 8

struct an_series;

typedef void (*an_sample_fn)(void *ctx, struct an_series *s, double value,
			     uint64_t now_ns);
typedef void (*an_drop_fn)(void *ctx, struct an_series *s);

struct an_view_def {
	const char *const *globs;
	uint32_t n_globs;
	const char *const *labels; /* kept, in this order */
	uint32_t n_labels;
	const char *const *where;  /* "label=glob" */
	uint32_t n_where;
	an_sample_fn on_sample;
	an_drop_fn on_drop;
	void *ctx;
};

struct an_series {
	uint64_t key;
	uint32_t view;
	uint32_t type;      /* enum nt_metric_type */
	const char *family; /* the family's name (owned by the view table) */
	char *vals;         /* kept label values, NUL-separated */
	uint32_t n_vals;
	const char *const *label_names; /* the view's kept labels */
	double value;       /* latest derived value */
	uint64_t value_ns;  /* when it came, 0 never */
	uint64_t first_ns;  /* the snapshot that first saw the series */
	void *user;         /* the consumer's state */
	/* sampling state (view.c's) */
	void *fam;
	double acc_v, acc_c, cum_v, cum_c;
	uint64_t acc_tick, cum_ns;
	uint32_t slot, missing;
	bool have_cum;
};

struct an_view;

/* `max_series` bounds the series of all views together. */
struct an_view *an_view_new(uint32_t max_series);
void an_view_free(struct an_view *v);
/* Adds a view; the definition's arrays are borrowed until free. Returns
 * its id or -1 (ENOMEM). */
int an_view_add(struct an_view *v, const struct an_view_def *def);
/*
 * One snapshot: visits every family, derives the values of the families
 * that changed and hands them to the consumers. Returns the number of
 * new values.
 */
size_t an_view_tick(struct an_view *v, const struct nt_host *host,
		    struct nt_instance *inst, uint64_t now_ns);
/* The series of view `id` in `family` whose kept label values are `vals`
 * (NUL-separated, n of them), or NULL. */
struct an_series *an_view_find(const struct an_view *v, uint32_t id,
			       const char *family, const char *vals,
			       uint32_t n);
/* Label value `i` of a series. */
const char *an_series_label(const struct an_series *s, uint32_t i);
/* The value of a kept label by name, or NULL. */
const char *an_series_label_by(const struct an_series *s, const char *name);
/* Calls fn(ctx, series) for every series of view `id`. */
void an_view_each(struct an_view *v, uint32_t id,
		  void (*fn)(void *ctx, struct an_series *s), void *ctx);
/* Series kept now, and series refused because the table was full. */
uint32_t an_view_series(const struct an_view *v);
uint64_t an_view_dropped(const struct an_view *v);

#endif
