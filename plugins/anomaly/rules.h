/* SPDX-License-Identifier: MIT */
/*
 * The fixed rules, configured as data (`rules` groups; defaults.c holds the
 * seeds' seven). A rule reads a metric family through a view (keyed by its
 * `by` labels) or an event field (keyed by `by` header or event fields),
 * and tests each new value:
 *   above          value >= threshold
 *   share          value / the `over` family's value (same labels) >=
 *                  threshold, when the latter is >= min_value
 *   ratio_to_mean  value >= threshold x the mean of the key's earlier
 *                  values (the values that did not pass), after
 *                  min_history of them
 *   ratio_to_max   value >= threshold x the largest earlier value
 * Values under min_value never pass (share: the denominator). A
 * `when_metric` gate (same labels) must be >= when_above. An alert needs
 * `sustain` passing values in a row and, before the first pass,
 * `normal_before` values that did not pass (a thread hot from its start is
 * how it works, one that became hot is news); then one per key per
 * cooldown.
 */
#ifndef AN_RULES_H
#define AN_RULES_H

#include <stdint.h>

#include "ntcore/plugin.h"

#include "anomaly.h"

struct an_rules;

/* Validates the rules (a config error names the rule and key), adds their
 * views, subscribes to their events. NULL with *err set on failure. */
struct an_rules *an_rules_new(struct an *a, int *err);
void an_rules_free(struct an_rules *r);
/* After a snapshot: tests the metric rules' new values. */
void an_rules_tick_end(struct an_rules *r, uint64_t now_ns);
/* An event: the event rules whose event matches. */
void an_rules_event(struct an_rules *r, const struct nt_event_hdr *ev,
		    const struct nt_schema *schema);

#endif
