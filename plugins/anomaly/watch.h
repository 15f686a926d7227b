/* SPDX-License-Identifier: MIT */
/*
 * Watched series: one view per `watch` group, one detector (det.h) per
 * series it yields, alerts (`series` for a sudden change, `drift` for a
 * slow one) when the watch says `alert = true`, one per series per
 * cooldown. And the question a slow step asks: which watched series moved
 * most just now, and from what to what.
 */
#ifndef AN_WATCH_H
#define AN_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "anomaly.h"
#include "view.h"

struct an_watch;

struct an_moved {
	const struct an_series *s;
	double before, after; /* its normal level, its latest value */
	double score;         /* |log(after / before)|, + 0.5 when alarmed */
	bool alarmed;         /* its own detector alarmed on that value */
};

/* Adds one view per watch of a->watches to a->view. */
struct an_watch *an_watch_new(struct an *a);
void an_watch_free(struct an_watch *w);
/*
 * The watched series whose latest value came at or after since_ns and
 * differs from their normal level before since_ns by a factor of at least
 * 1 + min_change (or appeared from 0 with an alarm) in the direction their
 * watch's `slower_when` names, most moved first; at most max. Returns how
 * many.
 */
size_t an_watch_moved(struct an_watch *w, uint64_t since_ns,
		      double min_change, struct an_moved *out, size_t max);
/* Bytes held by the detectors (the benchmark's and the docs' figure). */
size_t an_watch_bytes(const struct an_watch *w);

#endif
