/* SPDX-License-Identifier: MIT */
/* Scoring alerts against synthetic labels; see score.h. */
#include "score.h"

#include <math.h>

static int true_alert(const struct syn_stream *s, uint32_t a, uint32_t tol)
{
	for (uint32_t i = 0; i < s->nev; i++)
		if (a >= s->ev[i].start && a <= s->ev[i].end + tol)
			return 1;
	return 0;
}

void score_add(struct score *sc, const struct syn_stream *s,
	       const uint32_t *alerts, size_t na, uint32_t tol)
{
	for (uint32_t i = 0; i < s->nev; i++) {
		sc->events++;
		for (size_t j = 0; j < na; j++)
			if (alerts[j] >= s->ev[i].start &&
			    alerts[j] <= s->ev[i].end + tol) {
				sc->detected++;
				break;
			}
	}
	for (size_t j = 0; j < na; j++) {
		sc->alerts++;
		sc->true_alerts += (uint64_t)true_alert(s, alerts[j], tol);
	}
}

void score_merge(struct score *into, const struct score *from)
{
	into->events += from->events;
	into->detected += from->detected;
	into->alerts += from->alerts;
	into->true_alerts += from->true_alerts;
}

double score_precision(const struct score *sc)
{
	return sc->alerts ? (double)sc->true_alerts / (double)sc->alerts : 1.0;
}

double score_recall(const struct score *sc)
{
	return sc->events ? (double)sc->detected / (double)sc->events : 1.0;
}

double score_f1(const struct score *sc)
{
	double p = score_precision(sc), r = score_recall(sc);

	return p + r > 0.0 ? 2.0 * p * r / (p + r) : 0.0;
}

/* Appends alarm i as an alert unless the last alert is within cooldown. */
static void maybe_alert(uint32_t i, uint32_t cooldown, uint32_t *alerts,
			size_t max, long *na, int64_t *last)
{
	if (*last >= 0 && (int64_t)i - *last <= (int64_t)cooldown)
		return;
	if ((size_t)*na < max)
		alerts[*na] = i;
	(*na)++;
	*last = i;
}

long score_run_det(const struct det_par *p, const struct syn_stream *s,
		   uint32_t cooldown, uint32_t *alerts, size_t max)
{
	struct det *d = det_new(p);
	int64_t last = -1;
	long na = 0;

	if (!d)
		return -1;
	for (size_t i = 0; i < s->n; i++) {
		enum det_verdict v = det_update(d, p, s->x[i], NULL);

		if (v == DET_SPIKE || v == DET_DRIFT)
			maybe_alert((uint32_t)i, cooldown, alerts, max, &na, &last);
	}
	det_free(d);
	return na;
}

int naive_update(struct naive *nv, double x, double k, uint32_t horizon,
		 uint32_t warmup)
{
	double a = 1.0 / horizon, dx = x - nv->mean;
	int alarm = nv->seen >= warmup && dx > k * sqrt(nv->var);

	if (nv->seen++ == 0) {
		nv->mean = x;
		return 0;
	}
	nv->mean += a * dx;
	nv->var = (1.0 - a) * (nv->var + a * dx * dx);
	return alarm;
}

long score_run_naive(const struct syn_stream *s, double k, uint32_t horizon,
		     uint32_t warmup, uint32_t cooldown, uint32_t *alerts,
		     size_t max)
{
	struct naive nv = { 0 };
	int64_t last = -1;
	long na = 0;

	for (size_t i = 0; i < s->n; i++)
		if (naive_update(&nv, s->x[i], k, horizon, warmup))
			maybe_alert((uint32_t)i, cooldown, alerts, max, &na, &last);
	return na;
}
