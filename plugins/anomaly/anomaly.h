/* SPDX-License-Identifier: MIT */
/*
 * The anomaly detector's shared declarations: its configuration as the core
 * lays it out (the schema is in anomaly.c, the built-in watch and rule sets
 * in defaults.c), the instance state every part works on, and the entry
 * points of the parts:
 *   view.c    metric families -> derived series values (rates, gauges,
 *             histogram means) on a timer
 *   watch.c   one DSPOT detector per watched series; ranking what moved
 *   joint.c   the multivariate check over a group of related series
 *   rules.c   the configurable fixed rules, on metrics and on events
 *   steps.c   training steps (Python function or kernel-launch pattern),
 *             slow-step alerts with the reason
 *   period.c  finding the repeating kernel sequence of a step
 *   alert.c   alert.anomaly records, human names of series
 *   evfield.c reading event fields by name through their schema
 * Everything runs on the loop thread.
 */
#ifndef AN_ANOMALY_H
#define AN_ANOMALY_H

#include <stdbool.h>
#include <stdint.h>

#include "ntcore/plugin.h"

#include "det.h"

/* One `watch` group: which series get a detector. */
struct an_watch_cfg {
	struct nt_strlist metrics; /* family name globs */
	struct nt_strlist labels;  /* labels kept; series are summed over the rest */
	struct nt_strlist where;   /* "label=glob" filters, all must match */
	const char *direction;     /* up, down, both */
	const char *group;         /* multivariate group, "" none */
	double q;                  /* 0: the instance's q */
	double min_change;         /* relative change an alarm needs */
	double min_delta;          /* absolute change an alarm needs */
	int64_t n_init;            /* 0: the instance's n_init */
	bool alert;                /* publish this watch's anomalies */
	const char *slower_when;   /* the move that can make a step slower:
				    * up, down, both, never (a slow step's
				    * reasons count only such moves) */
};

/* One `rules` group: a fixed rule. */
struct an_rule_cfg {
	const char *name;
	const char *test;        /* above, ratio_to_mean, share, ratio_to_max */
	const char *metric;      /* family (glob) of a metric rule */
	const char *event;       /* event type (glob) of an event rule */
	const char *field;       /* the event's numeric field */
	const char *over;        /* share: the denominator family */
	const char *when_metric; /* gate: a family with the same labels ... */
	double when_above;       /* ... whose value must be above this */
	struct nt_strlist by;    /* labels (or event fields) that key it */
	double threshold;        /* above/share: the limit; ratio_*: the factor */
	double min_value;        /* values below are never alerted */
	int64_t sustain;         /* samples in a row that must pass */
	int64_t min_history;     /* samples of history before ratio tests */
	int64_t normal_before;   /* samples that must have passed normal first */
	int64_t warmup_values;   /* values of a key before it may fire (any test) */
	double warmup_s;         /* and seconds since its first value */
	const char *severity;    /* info, warning, critical */
	const char *what;        /* what the message says it is */
};

struct an_cfg {
	int64_t interval_ms;
	int64_t cooldown_s;
	int64_t max_series;
	bool default_watch, default_rules;
	struct nt_cfg_array watch; /* struct an_watch_cfg */
	struct nt_cfg_array rules; /* struct an_rule_cfg */
	/* detector defaults */
	double q, level;
	int64_t n_init, depth, drift_len;
	const char *fit;
	/* training steps */
	const char *steps;         /* auto, launches, python, off */
	const char *step_function; /* fnmatch pattern of a Python function */
	const char *step_group;    /* joint group the step time joins */
	double step_q, step_min_slowdown;
	int64_t step_window;         /* steps whose mean must be slower too */
	double step_window_slowdown; /* by this much */
	int64_t step_n_init, step_learn_launches, step_sustain;
	double items_per_step;
	double reason_min_change;
	int64_t reason_wait_steps;
	/* joint check */
	double joint_q;
	/* names */
	struct nt_strlist comm_names; /* "comm=name" */
};

struct an_view;
struct an_watch;
struct an_rules;
struct an_steps;
struct an_joint;

struct an {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct an_cfg *cfg;
	/* the watch and rule sets in force (the config's or the built-ins) */
	const struct an_watch_cfg *watches;
	uint32_t n_watches;
	const struct an_rule_cfg *rules_cfg;
	uint32_t n_rules;
	int alert_type;
	struct an_view *view;
	struct an_watch *watch;
	struct an_rules *rules;
	struct an_steps *steps;
	struct an_joint *joint;
	struct nt_metric *m_alerts, *m_series, *m_dropped, *m_tick;
	struct nt_metric *m_step_s, *m_steps, *m_step_rate, *m_items;
	uint64_t ticks;
	uint64_t last_tick_ns;
};

/* Fills a det_par from the instance's defaults and one watch. */
void an_det_par(const struct an *a, const struct an_watch_cfg *w,
		struct det_par *p);
/* Runs one metrics snapshot and everything that follows it (watched
 * series, metric rules, slow steps waiting for their reason, the joint
 * check); on the timer. */
void an_tick(struct an *a);

#endif
