/* SPDX-License-Identifier: MIT */
/*
 * The Generalized Pareto distribution of the excesses over a high threshold
 * (extreme value theory, Pickands-Balkema-de Haan): fitting its shape gamma
 * and scale sigma to observed excesses, and the threshold that a value
 * exceeds with probability q.
 *
 * Two estimators:
 *  - Grimshaw's maximum likelihood (Grimshaw 1993, as SPOT uses it): with
 *    x = gamma / sigma the likelihood equations reduce to one equation in x,
 *    u(x) v(x) = 1, where u(x) = mean 1/(1 + x y) and v(x) = 1 + mean
 *    log(1 + x y); a root gives gamma = v(x) - 1, sigma = gamma / x. Its
 *    roots lie in (-1/y_max, 0) and (0, 2 (mean - y_min) / y_min^2); at a
 *    root the log-likelihood is -n (log sigma + gamma + 1), so candidates
 *    (every root and the exponential case gamma = 0, sigma = mean) are
 *    compared in O(1) each.
 *  - The method of moments: gamma = (1 - mean^2 / var) / 2,
 *    sigma = mean (mean^2 / var + 1) / 2; O(1), less exact in heavy tails.
 * No Debian library fits a GPD from C (R and scipy do), hence this file.
 */
#ifndef AN_GPD_H
#define AN_GPD_H

#include <stddef.h>

struct gpd {
	double gamma; /* shape: 0 exponential tail, > 0 heavy, < 0 bounded */
	double sigma; /* scale, > 0 */
};

/* Below this many excesses the fit is the exponential one (gamma 0,
 * sigma = mean): two parameters from a handful of points swing wildly. */
#define GPD_MIN_FIT 8

/*
 * Maximum likelihood fit of y[0..n) (every y > 0). `root` is in/out: the
 * previous fit's x (0 for none) is tried first with a few Newton steps, the
 * full bracketing search runs when that fails; on return it holds this
 * fit's x (0 for the exponential case). Returns the number of evaluations
 * of u and v (a cost figure for the benchmark).
 */
unsigned gpd_fit_grimshaw(const float *y, size_t n, struct gpd *out,
			  double *root);
/* Method-of-moments fit from the mean and variance of the excesses. */
void gpd_fit_moments(double mean, double var, struct gpd *out);
/* Exponential fit: gamma 0, sigma = mean. */
void gpd_fit_exponential(double mean, struct gpd *out);

/*
 * The value exceeded with probability q, given the threshold t, the number
 * of observations n and of excesses nt among them:
 *   t + sigma / gamma * ((q n / nt)^-gamma - 1), or t - sigma log(q n / nt)
 * for gamma = 0. Never below t.
 */
double gpd_quantile(const struct gpd *g, double t, double q, double n,
		    double nt);

#endif
