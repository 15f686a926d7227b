/* SPDX-License-Identifier: MIT */
/*
 * Scoring alerts against the labels of synthetic streams (tests and
 * benchmark, not linked into the plugin).
 *
 * Event-based, as an operator reads alerts: a labelled anomaly [start, end]
 * is detected when at least one alert falls in [start, end + tol]; an alert
 * is true when it falls in such a span of some anomaly, false otherwise.
 * recall = detected / anomalies, precision = true alerts / alerts,
 * F1 = 2 P R / (P + R). Alerts are detector alarms after a cooldown: an
 * alarm within `cooldown` points of the previous alert raises none, as in
 * the plugin.
 */
#ifndef AN_SCORE_H
#define AN_SCORE_H

#include <stddef.h>
#include <stdint.h>

#include "det.h"
#include "synth.h"

struct score {
	uint64_t events, detected;
	uint64_t alerts, true_alerts;
};

void score_add(struct score *sc, const struct syn_stream *s,
	       const uint32_t *alerts, size_t na, uint32_t tol);
void score_merge(struct score *into, const struct score *from);
double score_precision(const struct score *sc); /* 1 when no alert */
double score_recall(const struct score *sc);    /* 1 when no anomaly */
double score_f1(const struct score *sc);

/* Runs a fresh detector over the stream; writes the alert indices (at most
 * max) and returns how many alerts there were, or -1 on ENOMEM. */
long score_run_det(const struct det_par *p, const struct syn_stream *s,
		   uint32_t cooldown, uint32_t *alerts, size_t max);

/*
 * The naive baseline the benchmark sets DSPOT against: an alarm when a value
 * is above mean + k sd, mean and variance exponentially weighted over
 * `horizon` values and learning every value; same warm-up and cooldown.
 */
struct naive {
	double mean, var;
	uint32_t seen;
};
int naive_update(struct naive *nv, double x, double k, uint32_t horizon,
		 uint32_t warmup);
long score_run_naive(const struct syn_stream *s, double k, uint32_t horizon,
		     uint32_t warmup, uint32_t cooldown, uint32_t *alerts,
		     size_t max);

#endif
