/* SPDX-License-Identifier: MIT */
/*
 * The detector of one watched series: DSPOT (SPOT with drift, Siffer et al.
 * 2017) for sudden changes, and a second SPOT for slow drifts.
 *
 *  - fast: the residual x - M, M the mean of the last `depth` normal values,
 *    goes through SPOT: a spike or a level shift is an alarm. Alarms are
 *    not learned (neither into M nor into the tail); after `rebase_after`
 *    alarms in a row the new level is taken as normal (the window is filled
 *    with it), so a lasting shift alarms once, not forever.
 *  - slow: the residual M - E, E an exponentially weighted mean of horizon
 *    `drift_len` values, goes through its own SPOT: a trend that carries the
 *    short mean away from the long one (a leak, a slowly filling queue) is
 *    an alarm that the fast test, which follows drifts by design, misses.
 *    After one, E is set to M: the next alarm needs a new excursion.
 *  - quarantine: for `quarantine` values after an alarm neither SPOT learns
 *    (the level M still follows). An anomaly is rarely one value: the
 *    rest of a season that swelled, or the decay of a burst, sits just
 *    under z_q, and learning it fattened the tail until later anomalies
 *    of the same size passed unseen (synthetic seasonal streams: recall
 *    0.13 without, see docs/anomaly.md).
 *  - `direction`: up (x above normal is bad), down, or both (|residual|).
 *  - gates: an alarm needs |x - M| >= min_change * |M| and >= min_delta, so
 *    a change that is rare but too small to matter is learned, not raised.
 *
 * Memory: one block of det_size() bytes: the struct, the window and both
 * peak rings as floats; during warm-up, a separate buffer of n_init floats
 * freed at calibration.
 */
#ifndef AN_DET_H
#define AN_DET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "spot.h"

enum det_dir { DET_UP = 0, DET_DOWN = 1, DET_BOTH = 2 };

struct det_par {
	struct spot_par fast, slow;
	uint32_t n_init;       /* values before the first alarm is possible */
	uint16_t depth;        /* window of the moving mean M */
	uint16_t rebase_after; /* consecutive alarms that make a new normal */
	uint16_t quarantine;   /* values after an alarm not learned as peaks */
	uint32_t drift_len;    /* horizon of the long mean E; 0: no drift test */
	uint8_t direction;     /* enum det_dir */
	double min_change;     /* relative to |M| */
	double min_delta;      /* absolute */
};

enum det_verdict {
	DET_WARMUP = 0, /* still collecting the initial batch */
	DET_NORMAL,
	DET_SPIKE,      /* fast alarm: spike or level shift */
	DET_DRIFT,      /* slow alarm */
};

struct det_out {
	enum det_verdict verdict;
	double baseline;  /* M before this value (the warm-up mean meanwhile) */
	double threshold; /* the value at which the alarm fires, in x's units */
	double z;         /* fast residual / its alarm level: 1 = at the alarm
			   * line (0 in warm-up); what the joint check combines */
};

struct det;

/* Bytes of one detector with these parameters (warm-up buffer excluded). */
size_t det_size(const struct det_par *p);
/* Allocates a detector (NULL on ENOMEM); free it with det_free. */
struct det *det_new(const struct det_par *p);
void det_free(struct det *d);
enum det_verdict det_update(struct det *d, const struct det_par *p, double x,
			    struct det_out *out);
/* The current normal level M (warm-up: the mean so far; NAN before any). */
double det_baseline(const struct det *d, const struct det_par *p);
/* Values seen. */
uint32_t det_seen(const struct det *d);
bool det_warm(const struct det *d);

/* Fills `p` with the defaults documented in docs/anomaly.md. */
void det_par_default(struct det_par *p);

#endif
