/* SPDX-License-Identifier: MIT */
/* SPOT: streaming peaks-over-threshold with a GPD tail, runs declustered,
 * peaks sampled; see spot.h. */
#include "spot.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpd.h"

/* Below this moments estimate of gamma the tail is taken as exponential. */
#define NEAR_EXPONENTIAL 0.05

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

/* Reservoir sampling (algorithm R) of the nt-th peak, nt already counted:
 * returns whether the sample changed. */
static bool sample_peak(struct spot *s, float *peaks, uint16_t cap, float e)
{
	uint64_t z = (uint64_t)s->nt * 0x9e3779b97f4a7c15ULL;
	uint64_t j;

	if (s->np < cap) {
		peaks[s->np++] = e;
		return true;
	}
	z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ULL;
	j = (z ^ (z >> 29)) % s->nt;
	if (j >= cap)
		return false;
	peaks[j] = e;
	return true;
}

static void requantile(struct spot *s, const struct spot_par *p)
{
	struct gpd g = { .gamma = s->gamma, .sigma = s->sigma };

	s->zq = (float)gpd_quantile(&g, s->t, p->q, s->n, s->nt);
}

static double median(const float *v, uint16_t n)
{
	float tmp[GPD_MIN_FIT];

	if (!n)
		return 0.0;
	memcpy(tmp, v, n * sizeof(*v));
	qsort(tmp, n, sizeof(*tmp), cmp_float);
	return n % 2 ? tmp[n / 2] : 0.5 * ((double)tmp[n / 2 - 1] + tmp[n / 2]);
}

void spot_refit(struct spot *s, const float *peaks, const struct spot_par *p)
{
	struct gpd g;
	double sum = 0.0, sq = 0.0, mean, var;

	for (uint16_t i = 0; i < s->np; i++) {
		sum += peaks[i];
		sq += (double)peaks[i] * peaks[i];
	}
	mean = s->np ? sum / s->np : 0.0;
	var = s->np > 1 ? (sq - sum * mean) / (s->np - 1) : 0.0;
	gpd_fit_moments(mean, var, &g);
	if (s->np < GPD_MIN_FIT) {
		/* a handful of peaks: the exponential scale from their mean,
		 * or from their median (= sigma ln 2) when that is smaller,
		 * so that one outlier of a short warm-up (a first, cold
		 * step) does not set z_q */
		gpd_fit_exponential(fmin(mean, median(peaks, s->np) / M_LN2), &g);
	} else if (g.gamma < NEAR_EXPONENTIAL) {
		/* peaks no heavier than exponential (the moments estimate of
		 * gamma <= 0) end on the exponential floor below anyway, and
		 * barely heavier ones are as good as exponential at q: no
		 * search (near 0 Grimshaw's root is ill-conditioned, and
		 * those searches were most of the detector's cost) */
		gpd_fit_exponential(mean, &g);
	} else if (p->method == SPOT_MOMENTS) {
		gpd_fit_moments(mean, var, &g);
	} else {
		/* Newton starts at the last fit's root, or else at the
		 * moments estimate's x = gamma / sigma (> 0 here): most
		 * refits then take a few evaluations, not a scan */
		double root = s->root;

		if (root == 0.0)
			root = g.gamma / g.sigma;
		gpd_fit_grimshaw(peaks, s->np, &g, &root);
		s->root = (float)root;
	}
	/* A bounded tail (gamma < 0) fitted on a few dozen peaks puts z_q at
	 * its estimated end point, which the next noisy excursion passes:
	 * on the synthetic streams that was most of the false alarms. The
	 * tails of latencies and rates are exponential or heavier, so the
	 * fit is floored at the exponential tail. */
	if (g.gamma < 0.0)
		gpd_fit_exponential(mean, &g);
	s->gamma = (float)g.gamma;
	s->sigma = (float)g.sigma;
	requantile(s, p);
}

/* Ends the run in progress: its maximum becomes a peak unless tainted.
 * Returns whether the sample changed. */
static bool end_run(struct spot *s, float *peaks, const struct spot_par *p)
{
	bool changed = false;

	if (s->run_max > 0.0f && !s->tainted) {
		if (s->nt == UINT32_MAX)
			return false;
		s->nt++;
		changed = sample_peak(s, peaks, p->cap, s->run_max);
		if (!changed)
			requantile(s, p);
	}
	s->run_max = 0.0f;
	s->tainted = 0;
	return changed;
}

void spot_calibrate(struct spot *s, float *peaks, const struct spot_par *p,
		    const float *r, size_t n)
{
	float *sorted = malloc(n * sizeof(*sorted));

	*s = (struct spot){ 0 };
	if (n == 0 || !sorted) {
		free(sorted);
		return;
	}
	memcpy(sorted, r, n * sizeof(*r));
	qsort(sorted, n, sizeof(*sorted), cmp_float);
	s->t = sorted[(size_t)floor(p->level * (double)(n - 1))];
	free(sorted);
	for (size_t i = 0; i < n; i++) {
		if (r[i] > s->t)
			s->run_max = fmaxf(s->run_max, r[i] - s->t);
		else
			end_run(s, peaks, p);
	}
	end_run(s, peaks, p);
	s->n = (uint32_t)n;
	spot_refit(s, peaks, p);
}

void spot_taint(struct spot *s)
{
	s->tainted = 1;
	if (s->run_max <= 0.0f)
		s->run_max = FLT_MIN;
}

void spot_add(struct spot *s, float *peaks, const struct spot_par *p, double r)
{
	if (s->n >= 0x80000000u) {
		s->n /= 2;
		s->nt = s->nt / 2 ? s->nt / 2 : 1;
	}
	s->n++;
	if (r > s->t) {
		s->run_max = fmaxf(s->run_max, (float)(r - s->t));
		return;
	}
	if (end_run(s, peaks, p))
		spot_refit(s, peaks, p);
}
