/* SPDX-License-Identifier: MIT */
/*
 * Seeded generator of labelled synthetic series, for the unit tests and the
 * benchmark (not linked into the plugin). Every value comes from one
 * splitmix64 stream seeded by the caller, so a (kind, length, seed) triple
 * gives the same series, anomalies and labels on every run and machine
 * with IEEE doubles and the same libm.
 *
 * Background: level 100, noise a contaminated normal (sd 1, and with
 * probability 2 % sd 2.5: real metrics have heavier tails than a Gaussian).
 * Anomaly kinds, each on its own stream, none before SYN_QUIET:
 *   SYN_SPIKE     6 single-point spikes, +10..16 sd
 *   SYN_SHIFT     3 level shifts of +10..16 sd lasting 60..150 points
 *   SYN_DRIFT     2 slow ramps that rise 12..20 sd over 150..300 points
 *                 and then stay (a leak), each labelled over its ramp
 *   SYN_SEASONAL  a seasonal background (amplitude 5 sd, period 60..150)
 *                 whose amplitude is multiplied by 3..4 for one period, 3x
 * Anomaly-free streams: SYN_CLEAN_FLAT (the noise alone) and
 * SYN_CLEAN_SEASONAL (the seasonal background alone).
 */
#ifndef AN_SYNTH_H
#define AN_SYNTH_H

#include <stddef.h>
#include <stdint.h>

enum syn_kind {
	SYN_SPIKE = 0,
	SYN_SHIFT,
	SYN_DRIFT,
	SYN_SEASONAL,
	SYN_N_ANOMALY, /* kinds below carry no anomaly */
	SYN_CLEAN_FLAT = SYN_N_ANOMALY,
	SYN_CLEAN_SEASONAL,
	SYN_N_KINDS,
};

/* No anomaly starts before this index (the detectors' warm-up). */
#define SYN_QUIET 400
#define SYN_MAX_EVENTS 8

struct syn_event {
	uint32_t start, end; /* labelled anomalous: [start, end] */
};

struct syn_stream {
	enum syn_kind kind;
	size_t n;
	double *x; /* n values, owned */
	struct syn_event ev[SYN_MAX_EVENTS];
	uint32_t nev;
};

/* Generates a stream (n >= 2 * SYN_QUIET); returns -1 on ENOMEM. */
int syn_make(struct syn_stream *s, enum syn_kind kind, size_t n,
	     uint64_t seed);
void syn_free(struct syn_stream *s);
const char *syn_kind_name(enum syn_kind k);

/* The generator itself, for other seeded uses (benchmarks). */
struct syn_rng {
	uint64_t state;
};
uint64_t syn_next(struct syn_rng *r);
double syn_uniform(struct syn_rng *r);               /* [0, 1) */
double syn_normal(struct syn_rng *r);                /* N(0, 1) */
double syn_noise(struct syn_rng *r);                 /* the background noise */

#endif
