/* SPDX-License-Identifier: MIT */
/* Generalized Pareto fits (Grimshaw, moments) and tail quantiles; see gpd.h. */
#include "gpd.h"

#include <float.h>
#include <math.h>

/* Points scanned for a sign change of w on each side of 0. */
#define SCAN_POINTS 32
#define BISECT_STEPS 48
#define NEWTON_STEPS 8

struct peaks {
	const float *y;
	size_t n;
	double mean, min, max;
};

/* u(x) and v(x); returns -1 when 1 + x y <= 0 for some y. */
static int eval_uv(const struct peaks *p, double x, double *u, double *v)
{
	double su = 0.0, sv = 0.0;

	for (size_t i = 0; i < p->n; i++) {
		double a = 1.0 + x * p->y[i];

		if (a <= 0.0)
			return -1;
		su += 1.0 / a;
		sv += log(a);
	}
	*u = su / (double)p->n;
	*v = 1.0 + sv / (double)p->n;
	return 0;
}

/* w(x) = u v - 1 and its derivative; -1 outside the domain. */
static int eval_w(const struct peaks *p, double x, double *w, double *dw)
{
	double su = 0.0, sv = 0.0, sdu = 0.0, sdv = 0.0, n = (double)p->n;

	for (size_t i = 0; i < p->n; i++) {
		double y = p->y[i], a = 1.0 + x * y;

		if (a <= 0.0)
			return -1;
		su += 1.0 / a;
		sv += log(a);
		sdv += y / a;
		sdu -= y / (a * a);
	}
	*w = (su / n) * (1.0 + sv / n) - 1.0;
	if (dw)
		*dw = (sdu / n) * (1.0 + sv / n) + (su / n) * (sdv / n);
	return 0;
}

/* The fit a root x gives, and its score log(sigma) + gamma (lower is a
 * higher likelihood); returns -1 when the root gives no valid fit. */
static int root_fit(const struct peaks *p, double x, struct gpd *g,
		    double *score)
{
	double u, v;

	if (x == 0.0 || eval_uv(p, x, &u, &v) < 0)
		return -1;
	g->gamma = v - 1.0;
	g->sigma = g->gamma / x;
	if (!(g->sigma > 0.0) || !isfinite(g->sigma))
		return -1;
	*score = log(g->sigma) + g->gamma;
	return 0;
}

/* Bisection of w on [a, b] where w(a) and w(b) differ in sign. */
static double bisect(const struct peaks *p, double a, double wa, double b,
		     unsigned *evals)
{
	for (int i = 0; i < BISECT_STEPS; i++) {
		double m = 0.5 * (a + b), wm;

		if (eval_w(p, m, &wm, NULL) < 0)
			return NAN;
		(*evals)++;
		if ((wm < 0.0) == (wa < 0.0)) {
			a = m;
			wa = wm;
		} else {
			b = m;
		}
	}
	return 0.5 * (a + b);
}

struct best {
	struct gpd g;
	double score, root;
};

static void consider(const struct peaks *p, double x, struct best *b)
{
	struct gpd g;
	double s;

	if (isfinite(x) && root_fit(p, x, &g, &s) == 0 && s < b->score) {
		b->g = g;
		b->score = s;
		b->root = x;
	}
}

/*
 * Scans one side of 0: points at distances from 0 spaced geometrically
 * from `lo` to `span` (sign `dir`), bisecting each sign change.
 */
static unsigned scan_side(const struct peaks *p, double lo, double span,
			  int dir, struct best *b)
{
	double prev_x = NAN, prev_w = NAN, ratio = lo / span;
	unsigned evals = 0;

	for (int k = 0; k <= SCAN_POINTS; k++) {
		double frac = pow(ratio, 1.0 - (double)k / SCAN_POINTS);
		double x = dir * span * frac * (1.0 - 1e-9), w;

		if (eval_w(p, x, &w, NULL) < 0)
			break;
		evals++;
		if (!isnan(prev_w) && (w < 0.0) != (prev_w < 0.0))
			consider(p, bisect(p, prev_x, prev_w, x, &evals), b);
		prev_x = x;
		prev_w = w;
	}
	return evals;
}

/* Newton's method from a previous root; NAN when it does not converge
 * inside the domain. */
static double newton(const struct peaks *p, double x, unsigned *evals)
{
	for (int i = 0; i < NEWTON_STEPS; i++) {
		double w, dw, nx;

		if (eval_w(p, x, &w, &dw) < 0 || dw == 0.0)
			return NAN;
		(*evals)++;
		nx = x - w / dw;
		if (!isfinite(nx) || nx * x <= 0.0 || 1.0 + nx * p->max <= 0.0)
			return NAN;
		if (fabs(nx - x) <= 1e-7 * fabs(x))
			return nx;
		x = nx;
	}
	return NAN;
}

unsigned gpd_fit_grimshaw(const float *y, size_t n, struct gpd *out,
			  double *root)
{
	struct peaks p = { .y = y, .n = n, .min = DBL_MAX, .max = 0.0 };
	struct best b = { .score = INFINITY, .root = 0.0 };
	unsigned evals = 0;
	double sum = 0.0, hint = root ? *root : 0.0;

	for (size_t i = 0; i < n; i++) {
		sum += y[i];
		p.min = fmin(p.min, y[i]);
		p.max = fmax(p.max, y[i]);
	}
	p.mean = n ? sum / (double)n : 0.0;
	gpd_fit_exponential(p.mean, &b.g);
	if (n < GPD_MIN_FIT || !(p.min > 0.0)) {
		*out = b.g;
		if (root)
			*root = 0.0;
		return 0;
	}
	b.score = log(b.g.sigma) + 0.0;
	if (hint != 0.0) {
		double x = newton(&p, hint, &evals);

		/* a root found: it or the exponential case is the answer
		 * (a sample has few roots; scanning for another one tripled
		 * the detector's cost on the benchmark for no change in
		 * its alarms) */
		if (!isnan(x)) {
			consider(&p, x, &b);
			goto done;
		}
	}
	{
		double pos = 2.0 * (p.mean - p.min) / (p.min * p.min);

		/* roots x = gamma / sigma: from gamma 1e-4 of the mean's
		 * scale up to the bound (capped where 1 + x y is all x y) */
		evals += scan_side(&p, 1e-6 / p.max, 1.0 / p.max, -1, &b);
		pos = isfinite(pos) ? fmin(pos, 1e6 / p.mean) : 1e6 / p.mean;
		if (pos > 1e-4 / p.mean)
			evals += scan_side(&p, 1e-4 / p.mean, pos, 1, &b);
	}
done:
	*out = b.g;
	if (root)
		*root = b.root;
	return evals;
}

void gpd_fit_moments(double mean, double var, struct gpd *out)
{
	double r;

	if (!(mean > 0.0) || !(var > 0.0)) {
		gpd_fit_exponential(mean, out);
		return;
	}
	r = mean * mean / var;
	out->gamma = 0.5 * (1.0 - r);
	out->sigma = 0.5 * mean * (r + 1.0);
}

void gpd_fit_exponential(double mean, struct gpd *out)
{
	out->gamma = 0.0;
	out->sigma = mean > 0.0 ? mean : DBL_MIN;
}

double gpd_quantile(const struct gpd *g, double t, double q, double n,
		    double nt)
{
	double r, z;

	if (!(nt > 0.0) || !(n > 0.0))
		return t;
	r = q * n / nt;
	if (fabs(g->gamma) < 1e-9)
		z = t - g->sigma * log(r);
	else
		z = t + g->sigma / g->gamma * (pow(r, -g->gamma) - 1.0);
	return z > t && isfinite(z) ? z : t;
}
