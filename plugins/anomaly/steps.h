/* SPDX-License-Identifier: MIT */
/*
 * Training steps and slow-step alerts. Per process, a step is either
 *  - a call of a configured Python function (`step_function`, matched on
 *    the python probe's python.calls events: their calls and inclusive time
 *    give the mean step time of each report interval; needs calls = true
 *    there and an interpreter with USDT markers), or
 *  - one turn of the repeating kernel sequence in the cuda probe's
 *    cuda.launch events (launch_events = true there; period.h), timed from
 *    one anchor launch to the next.
 * Each step time goes through a detector (DSPOT, up, gated by
 * step_min_slowdown); `step_sustain` slow times in a row make a slow step. For a slow step, the next metrics snapshot is asked
 * which watched series moved since the step began; the alert names the one
 * that moved most with its before and after:
 *   "step 12,400: 31 % slower (0.131 s, normal 0.100 s); data-loader read
 *    latency x6 at the same time (0.41 ms -> 2.5 ms)"
 * When nothing moved yet (a producer's next update is due), the alert
 * waits for later snapshots: at most until `reason_wait_steps` more steps
 * ended and two interval_ms passed (or 5 s), then goes out saying so. With
 * a reason it comes at the first snapshot that shows it. Step time, steps per second and items per second (with
 * items_per_step) are published as metrics.
 */
#ifndef AN_STEPS_H
#define AN_STEPS_H

#include <stdint.h>

#include "ntcore/plugin.h"

#include "anomaly.h"

struct an_steps;

/* Subscribes to the events the configured step source needs. */
struct an_steps *an_steps_new(struct an *a, int *err);
void an_steps_free(struct an_steps *s);
/* cuda.launch, python.calls, proc.exit. */
void an_steps_event(struct an_steps *s, const struct nt_event_hdr *ev,
		    const struct nt_schema *schema);
/* On each snapshot: the step time's joint member, due pending alerts. */
void an_steps_tick(struct an_steps *s, uint64_t now_ns);
/* "12,400" */
const char *an_fmt_count(uint64_t n, char *buf, size_t len);

#endif
