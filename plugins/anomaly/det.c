/* SPDX-License-Identifier: MIT */
/* The per-series detector: DSPOT for sudden changes, SPOT on the drift of
 * the moving mean for slow ones; see det.h. */
#include "det.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct det {
	uint32_t seen;
	uint16_t wpos, run;
	uint16_t quiet; /* values left in the quarantine */
	uint16_t pad;
	double wsum;  /* sum of the window */
	double ewma;  /* E, the long mean */
	struct spot fast, slow;
	float *warm;  /* n_init values during warm-up, then NULL */
	float buf[];  /* window[depth] | fast peaks | slow peaks */
};

static float *window_of(struct det *d)
{
	return d->buf;
}

static float *fast_peaks(struct det *d, const struct det_par *p)
{
	return d->buf + p->depth;
}

static float *slow_peaks(struct det *d, const struct det_par *p)
{
	return d->buf + p->depth + p->fast.cap;
}

void det_par_default(struct det_par *p)
{
	*p = (struct det_par){
		.fast = { .q = 3e-6, .level = 0.9, .cap = 64,
			  .method = SPOT_GRIMSHAW },
		.slow = { .q = 3e-6, .level = 0.9, .cap = 64,
			  .method = SPOT_GRIMSHAW },
		.n_init = 200,
		.depth = 10,
		.rebase_after = 8,
		.quarantine = 50,
		.drift_len = 100,
		.direction = DET_UP,
		.min_change = 0.0,
		.min_delta = 0.0,
	};
}

size_t det_size(const struct det_par *p)
{
	size_t floats = (size_t)p->depth + p->fast.cap +
			(p->drift_len ? p->slow.cap : 0);

	return sizeof(struct det) + floats * sizeof(float);
}

struct det *det_new(const struct det_par *p)
{
	struct det *d = calloc(1, det_size(p));

	if (!d)
		return NULL;
	d->warm = malloc((size_t)p->n_init * sizeof(float));
	if (!d->warm) {
		free(d);
		return NULL;
	}
	return d;
}

void det_free(struct det *d)
{
	if (d)
		free(d->warm);
	free(d);
}

uint32_t det_seen(const struct det *d)
{
	return d->seen;
}

bool det_warm(const struct det *d)
{
	return d->warm == NULL;
}

/* The residual in the direction where large is bad. */
static double resid(const struct det_par *p, double delta)
{
	switch (p->direction) {
	case DET_DOWN: return -delta;
	case DET_BOTH: return fabs(delta);
	default: return delta;
	}
}

static double level_at(const struct det_par *p, double base, double z)
{
	return p->direction == DET_DOWN ? base - z : base + z;
}

static bool gate(const struct det_par *p, double x, double base)
{
	double ch = fabs(x - base);

	return ch >= p->min_delta && ch >= p->min_change * fabs(base);
}

double det_baseline(const struct det *d, const struct det_par *p)
{
	double s = 0.0;

	if (!d->warm)
		return d->wsum / p->depth;
	if (!d->seen)
		return NAN;
	for (uint32_t i = 0; i < d->seen; i++)
		s += d->warm[i];
	return s / d->seen;
}

static void window_fill(struct det *d, const struct det_par *p, double x)
{
	float *w = window_of(d);

	for (uint16_t i = 0; i < p->depth; i++)
		w[i] = (float)x;
	d->wsum = (double)(float)x * p->depth;
	d->wpos = 0;
}

static void window_push(struct det *d, const struct det_par *p, double x)
{
	float *w = window_of(d);

	d->wsum += (float)x - w[d->wpos];
	w[d->wpos] = (float)x;
	if (++d->wpos == p->depth) {
		/* re-add once per turn, so rounding never accumulates */
		d->wpos = 0;
		d->wsum = 0.0;
		for (uint16_t i = 0; i < p->depth; i++)
			d->wsum += w[i];
	}
}

/* Turns the warm-up batch into both residual streams, calibrates both
 * SPOTs and leaves the window and E where the batch ended. */
static int calibrate(struct det *d, const struct det_par *p)
{
	size_t n = p->n_init, dp = p->depth, m = n - dp;
	float *x = d->warm, *r = malloc(2 * m * sizeof(float)), *s;
	double before = 0.0, e;

	if (!r)
		return -1;
	s = r + m;
	for (size_t i = 0; i < dp; i++)
		before += x[i];
	e = before / (double)dp;
	for (size_t i = dp; i < n; i++) {
		double after = before + x[i] - x[i - dp];

		r[i - dp] = (float)resid(p, x[i] - before / (double)dp);
		s[i - dp] = (float)resid(p, after / (double)dp - e);
		if (p->drift_len)
			e += (x[i] - e) / p->drift_len;
		before = after;
	}
	spot_calibrate(&d->fast, fast_peaks(d, p), &p->fast, r, m);
	if (p->drift_len)
		spot_calibrate(&d->slow, slow_peaks(d, p), &p->slow, s, m);
	free(r);
	memcpy(window_of(d), x + n - dp, dp * sizeof(float));
	d->wsum = 0.0;
	for (size_t i = 0; i < dp; i++)
		d->wsum += window_of(d)[i];
	d->wpos = 0;
	d->ewma = e;
	free(d->warm);
	d->warm = NULL;
	return 0;
}

static enum det_verdict drift_step(struct det *d, const struct det_par *p,
				   double x, struct det_out *o)
{
	double m = d->wsum / p->depth, s = resid(p, m - d->ewma);

	if (spot_alarm(&d->slow, s) && gate(p, m, d->ewma)) {
		/* a series flat through warm-up has no tail yet: its first
		 * excursion is raised and learned; later ones are not */
		if (d->slow.nt)
			spot_taint(&d->slow);
		else
			spot_add(&d->slow, slow_peaks(d, p), &p->slow, s);
		o->baseline = d->ewma;
		o->threshold = level_at(p, d->ewma, d->slow.zq);
		d->ewma = m;
		d->quiet = p->quarantine;
		return o->verdict = DET_DRIFT;
	}
	if (!d->quiet)
		spot_add(&d->slow, slow_peaks(d, p), &p->slow, s);
	d->ewma += (x - d->ewma) / p->drift_len;
	return o->verdict = DET_NORMAL;
}

static enum det_verdict warmup_step(struct det *d, const struct det_par *p,
				    double x, struct det_out *o)
{
	o->baseline = det_baseline(d, p); /* the values before this one */
	o->threshold = NAN;
	d->warm[d->seen++] = (float)x;
	if (d->seen == p->n_init && calibrate(d, p) < 0)
		d->seen--; /* out of memory: try again with the next value */
	return o->verdict = DET_WARMUP;
}

enum det_verdict det_update(struct det *d, const struct det_par *p, double x,
			    struct det_out *out)
{
	struct det_out o_local;
	struct det_out *o = out ? out : &o_local;
	double m, r;

	o->z = 0.0;
	if (!isfinite(x)) {
		o->verdict = DET_NORMAL;
		o->baseline = o->threshold = NAN;
		return DET_NORMAL;
	}
	if (d->warm)
		return warmup_step(d, p, x, o);
	if (d->seen < UINT32_MAX)
		d->seen++;
	m = d->wsum / p->depth;
	r = resid(p, x - m);
	o->baseline = m;
	o->threshold = level_at(p, m, d->fast.zq);
	o->z = d->fast.zq > 0.0f ? r / d->fast.zq : 0.0;
	if (spot_alarm(&d->fast, r) && gate(p, x, m)) {
		if (d->fast.nt)
			spot_taint(&d->fast);
		else
			spot_add(&d->fast, fast_peaks(d, p), &p->fast, r);
		if (++d->run >= p->rebase_after) {
			window_fill(d, p, x);
			d->ewma = x;
			d->run = 0;
		}
		d->quiet = p->quarantine;
		return o->verdict = DET_SPIKE;
	}
	d->run = 0;
	if (d->quiet)
		d->quiet--;
	else
		spot_add(&d->fast, fast_peaks(d, p), &p->fast, r);
	window_push(d, p, x);
	if (p->drift_len)
		return drift_step(d, p, x, o);
	return o->verdict = DET_NORMAL;
}
