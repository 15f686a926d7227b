/* SPDX-License-Identifier: MIT */
/* Seeded labelled synthetic series (tests and benchmark); see synth.h. */
#include "synth.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define LEVEL 100.0
#define SEASON_AMP 5.0

uint64_t syn_next(struct syn_rng *r)
{
	uint64_t z = (r->state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

double syn_uniform(struct syn_rng *r)
{
	return (double)(syn_next(r) >> 11) * 0x1.0p-53;
}

double syn_normal(struct syn_rng *r)
{
	double u = syn_uniform(r), v = syn_uniform(r);

	return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

double syn_noise(struct syn_rng *r)
{
	double sd = syn_uniform(r) < 0.02 ? 2.5 : 1.0;

	return sd * syn_normal(r);
}

static double between(struct syn_rng *r, double lo, double hi)
{
	return lo + (hi - lo) * syn_uniform(r);
}

/* Places `k` events of lengths len_lo..len_hi in [SYN_QUIET, n - tail),
 * separated by at least `gap` points: the stream is cut in k equal slots
 * and each event starts at a random place of its slot. */
static void place(struct syn_stream *s, struct syn_rng *r, uint32_t k,
		  uint32_t len_lo, uint32_t len_hi, uint32_t gap)
{
	size_t tail = len_hi + gap, slot = (s->n - SYN_QUIET - tail) / k;

	for (uint32_t i = 0; i < k; i++) {
		uint32_t len = (uint32_t)between(r, len_lo, len_hi + 1);
		size_t room = slot > len + gap ? slot - len - gap : 1;
		size_t st = SYN_QUIET + i * slot + (size_t)(syn_uniform(r) * room);

		s->ev[i].start = (uint32_t)st;
		s->ev[i].end = (uint32_t)(st + len - 1);
	}
	s->nev = k;
}

static void add_spikes(struct syn_stream *s, struct syn_rng *r)
{
	place(s, r, 6, 1, 1, 100);
	for (uint32_t i = 0; i < s->nev; i++)
		s->x[s->ev[i].start] += between(r, 10.0, 16.0);
}

static void add_shifts(struct syn_stream *s, struct syn_rng *r)
{
	place(s, r, 3, 60, 150, 100);
	for (uint32_t i = 0; i < s->nev; i++) {
		double m = between(r, 10.0, 16.0);

		for (uint32_t j = s->ev[i].start; j <= s->ev[i].end; j++)
			s->x[j] += m;
	}
}

static void add_drifts(struct syn_stream *s, struct syn_rng *r)
{
	double level = 0.0;

	place(s, r, 2, 150, 300, 200);
	for (uint32_t i = 0; i < s->nev; i++) {
		double rise = between(r, 12.0, 20.0);
		uint32_t st = s->ev[i].start, len = s->ev[i].end - st + 1;
		uint32_t stop = i + 1 < s->nev ? s->ev[i + 1].start : (uint32_t)s->n;

		for (uint32_t j = st; j < stop; j++)
			s->x[j] += level + rise * fmin(1.0, (double)(j - st + 1) / len);
		level += rise;
	}
}

static void add_season(struct syn_stream *s, struct syn_rng *r, bool breaks)
{
	double period = between(r, 60.0, 150.0), phase = between(r, 0.0, 6.28);

	if (breaks) {
		place(s, r, 3, (uint32_t)period, (uint32_t)period, 150);
		for (uint32_t i = 0; i < s->nev; i++)
			s->ev[i].end = s->ev[i].start + (uint32_t)period - 1;
	}
	for (size_t j = 0; j < s->n; j++) {
		double amp = SEASON_AMP;

		for (uint32_t i = 0; i < s->nev; i++)
			if (j >= s->ev[i].start && j <= s->ev[i].end)
				amp *= 3.0 + (double)(i % 2);
		s->x[j] += amp * sin(2.0 * M_PI * (double)j / period + phase);
	}
}

int syn_make(struct syn_stream *s, enum syn_kind kind, size_t n, uint64_t seed)
{
	struct syn_rng r = { .state = seed * 0x2545f4914f6cdd1dULL + kind };

	memset(s, 0, sizeof(*s));
	s->kind = kind;
	s->n = n;
	s->x = malloc(n * sizeof(*s->x));
	if (!s->x)
		return -1;
	for (size_t j = 0; j < n; j++)
		s->x[j] = LEVEL + syn_noise(&r);
	switch (kind) {
	case SYN_SPIKE: add_spikes(s, &r); break;
	case SYN_SHIFT: add_shifts(s, &r); break;
	case SYN_DRIFT: add_drifts(s, &r); break;
	case SYN_SEASONAL: add_season(s, &r, true); break;
	case SYN_CLEAN_SEASONAL: add_season(s, &r, false); break;
	default: break;
	}
	return 0;
}

void syn_free(struct syn_stream *s)
{
	free(s->x);
	s->x = NULL;
}

const char *syn_kind_name(enum syn_kind k)
{
	static const char *const names[SYN_N_KINDS] = {
		"spike", "level_shift", "drift", "seasonal", "clean_flat",
		"clean_seasonal",
	};

	return k < SYN_N_KINDS ? names[k] : "?";
}
