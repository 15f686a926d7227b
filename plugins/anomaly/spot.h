/* SPDX-License-Identifier: MIT */
/*
 * SPOT: streaming peaks-over-threshold (Siffer et al., KDD 2017) on one
 * stream of values where large is bad. Calibrated once on an initial batch:
 * the threshold t is its `level` quantile, the excesses over t are fitted
 * by a Generalized Pareto distribution, and the alarm threshold z_q is the
 * value exceeded with probability q per value. Then, per value: above z_q
 * is an alarm; else the value is learned.
 *
 * Two changes to the paper's algorithm, each for a failure measured on the
 * synthetic streams (docs/anomaly.md has the numbers):
 *
 *  - Declustering. SPOT learns every excess as a peak. The residuals it
 *    watches are not independent (a moving mean, a long mean, a season):
 *    they cross t in runs, and a residual that grows slowly (a ramp, a
 *    swelling season) was learned value by value, lifting z_q ahead of
 *    itself, so it was never caught (10 % of the ramps). Here one run
 *    above t is one cluster whose maximum excess is the peak (runs
 *    declustering, the usual way to fit extremes of dependent data), and
 *    it is learned only when the run ends: z_q holds still during a run.
 *    nt counts clusters, so z_q is the level a cluster exceeds with
 *    probability q per value. A run with an alarm in it is not learned.
 *  - Bounded memory. SPOT fits every peak seen; here `cap` floats (owned by
 *    the caller) hold a uniform sample of them (reservoir sampling with a
 *    deterministic generator): the fit sees what a fit on all would, up to
 *    sampling noise, while n / nt counts all. A ring of the newest peaks
 *    instead let one long anomaly fill it with its own excesses.
 *
 * Counts are halved together before they overflow, which keeps n / nt.
 */
#ifndef AN_SPOT_H
#define AN_SPOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum spot_method { SPOT_GRIMSHAW = 0, SPOT_MOMENTS = 1 };

struct spot_par {
	double q;     /* risk: probability per value of a value above z_q */
	double level; /* quantile of the initial batch that sets t */
	uint16_t cap; /* peaks kept */
	uint8_t method; /* enum spot_method */
};

struct spot {
	float t, zq;
	float gamma, sigma;
	float root;    /* Grimshaw's x of the last fit: the next fit starts there */
	float run_max; /* largest excess of the run above t in progress; 0: none */
	uint32_t n;    /* values since calibration */
	uint32_t nt;   /* clusters (runs above t) among them */
	uint16_t np;   /* peaks in the sample */
	uint8_t tainted; /* the run in progress had an alarm */
	uint8_t pad;
};

/*
 * Calibrates on r[0..n), in the order the values came. `peaks` has room
 * for p->cap floats.
 */
void spot_calibrate(struct spot *s, float *peaks, const struct spot_par *p,
		    const float *r, size_t n);
static inline bool spot_alarm(const struct spot *s, double r)
{
	return r > s->zq;
}
/* An alarm was raised on r (the caller does not learn it): the run it
 * belongs to is not learned either. */
void spot_taint(struct spot *s);
/* Learns r as a normal value; a run that ends is learned as one peak. */
void spot_add(struct spot *s, float *peaks, const struct spot_par *p, double r);
/* Refits from the sample and recomputes z_q. */
void spot_refit(struct spot *s, const float *peaks, const struct spot_par *p);

#endif
