/* SPDX-License-Identifier: MIT */
/*
 * The built-in watch and rule sets, used when the config gives none (and
 * default_watch / default_rules are true). Data only; docs/anomaly.md lists
 * them with the reasons for their numbers.
 */
#ifndef AN_DEFAULTS_H
#define AN_DEFAULTS_H

#include <stdint.h>

#include "anomaly.h"

extern const struct an_watch_cfg an_default_watches[];
extern const uint32_t an_n_default_watches;
extern const struct an_rule_cfg an_default_rules[];
extern const uint32_t an_n_default_rules;

#endif
