/* SPDX-License-Identifier: MIT */
/*
 * anomaly: online anomaly detection over the metrics and events of the
 * other plugins, with reasons. The descriptor, the configuration schema
 * (as data) and the ops; the parts are listed in anomaly.h.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/cfg.h"
#include "ntcore/kit/log.h"
#include "ntcore/plugin.h"

#include "alert.h"
#include "an_util.h"
#include "anomaly.h"
#include "defaults.h"
#include "joint.h"
#include "rules.h"
#include "steps.h"
#include "view.h"
#include "watch.h"

static const char *const dir_choices[] = { "up", "down", "both", NULL };
static const char *const slower_choices[] = { "up", "down", "both", "never", NULL };
static const char *const fit_choices[] = { "grimshaw", "moments", NULL };
static const char *const steps_choices[] = { "auto", "launches", "python", "off", NULL };
static const char *const test_choices[] = { "above", "share", "ratio_to_mean",
					    "ratio_to_max", NULL };
static const char *const sev_choices[] = { "info", "warning", "critical", NULL };

#define W struct an_watch_cfg
static const struct nt_cfg_key watch_keys[] = {
	NT_KEY_STRLIST_REQUIRED(W, metrics, "metric families to watch (globs)"),
	NT_KEY_STRLIST(W, labels, "[]", "labels kept; series are summed over the others"),
	NT_KEY_STRLIST(W, where, "[]", "filters \"label=glob\", all must match"),
	NT_KEY_CHOICE(W, direction, "up", dir_choices, "which way is bad: up, down or both"),
	NT_KEY_STR(W, group, "", "multivariate group these series join (\"\": none)"),
	NT_KEY_FLOAT(W, q, 0.0, 0.0, 0.1, "risk per value (0: the instance's q)"),
	NT_KEY_FLOAT(W, min_change, 0.0, 0.0, 1e6, "an alarm needs |x - normal| >= this x |normal|"),
	NT_KEY_FLOAT(W, min_delta, 0.0, 0.0, 1e300, "an alarm needs |x - normal| >= this"),
	NT_KEY_INT(W, n_init, 0, 0, 1000000, "warm-up values (0: the instance's n_init)"),
	NT_KEY_BOOL(W, alert, true, "publish alerts for these series (else: reasons and joint check only)"),
	NT_KEY_CHOICE(W, slower_when, "up", slower_choices, "which move of these series can make a training step slower, and so be named as its reason: up (times, latencies, counts), down (throughput, GPU busy), both, never"),
};
#undef W

#define R struct an_rule_cfg
static const struct nt_cfg_key rule_keys[] = {
	NT_KEY_STR_REQUIRED(R, name, "the rule's name"),
	NT_KEY_CHOICE(R, test, "above", test_choices, "above, share, ratio_to_mean, ratio_to_max"),
	NT_KEY_STR(R, metric, "", "metric family (glob) of a metric rule"),
	NT_KEY_STR(R, event, "", "event type (glob) of an event rule"),
	NT_KEY_STR(R, field, "", "numeric field of the event"),
	NT_KEY_STR(R, over, "", "share: the denominator family (same labels)"),
	NT_KEY_STR(R, when_metric, "", "gate: a family (same labels) that must be >= when_above"),
	NT_KEY_FLOAT(R, when_above, 0.0, 1, 0, "the gate's limit"),
	NT_KEY_STRLIST(R, by, "[]", "labels (or event fields) that key the rule"),
	/* required: no NT_KEY_* macro makes a float without a default */
	{ .key = "threshold", .type = NT_CFG_FLOAT,
	  .offset = NT_KIT_OFFSET(R, threshold, double), .def = NULL,
	  .min = 1, .max = 0, .desc = "above/share: the limit; ratio_*: the factor" },
	NT_KEY_FLOAT(R, min_value, 0.0, 1, 0, "values below never pass (share: the denominator)"),
	NT_KEY_INT(R, sustain, 1, 1, 1000000, "passing values in a row before an alert"),
	NT_KEY_INT(R, min_history, 10, 0, 1000000000, "ratio tests: earlier values needed"),
	NT_KEY_INT(R, warmup_values, 10, 0, 1000000000, "warm-up: values of a key before the rule may fire (any test)"),
	NT_KEY_FLOAT(R, warmup_s, 10.0, 0.0, 1e9, "warm-up: seconds since a key was first seen (in any of the rule's families) before the rule may fire"),
	NT_KEY_INT(R, normal_before, 0, 0, 1000000000, "values that must not pass before the first that does"),
	NT_KEY_CHOICE(R, severity, "warning", sev_choices, "info, warning or critical"),
	NT_KEY_STR(R, what, "", "what the message calls it (\"\": the name)"),
};
#undef R

#define C struct an_cfg
static const struct nt_cfg_key an_keys[] = {
	NT_KEY_INT(C, interval_ms, 500, 50, 3600000, "how often the metrics are read (ms)"),
	NT_KEY_INT(C, cooldown_s, 300, 0, 86400, "at most one alert per series, rule key or process per this many seconds"),
	NT_KEY_INT(C, max_series, 10000, 16, 10000000, "series watched at most (all watches and rules)"),
	NT_KEY_BOOL(C, default_watch, true, "watch the built-in set when `watch` is empty"),
	NT_KEY_BOOL(C, default_rules, true, "apply the built-in rules when `rules` is empty"),
	NT_KEY_GROUPS(C, watch, struct an_watch_cfg, watch_keys,
		      "watched families: ( { metrics = [\"ntcore_io_*_seconds\"]; labels = [\"device\"]; } , ... )"),
	NT_KEY_GROUPS(C, rules, struct an_rule_cfg, rule_keys,
		      "fixed rules: ( { name = \"x\"; test = \"above\"; metric = \"...\"; threshold = 1.0; } , ... )"),
	NT_KEY_FLOAT(C, q, 3e-6, 1e-12, 0.1, "risk: probability per value of a false alarm"),
	NT_KEY_FLOAT(C, level, 0.9, 0.5, 0.999, "quantile of the warm-up that sets the peaks threshold"),
	NT_KEY_INT(C, n_init, 200, 20, 1000000, "warm-up values of a series before it can alarm"),
	NT_KEY_INT(C, depth, 10, 1, 1000, "values in the moving mean (DSPOT's d)"),
	NT_KEY_INT(C, drift_len, 100, 0, 1000000, "horizon of the long mean of the drift test (0: no drift test)"),
	NT_KEY_CHOICE(C, fit, "grimshaw", fit_choices, "GPD fit: grimshaw (maximum likelihood) or moments"),
	NT_KEY_CHOICE(C, steps, "auto", steps_choices, "training steps from: auto, launches, python, off"),
	NT_KEY_STR(C, step_function, "", "Python function that is one step (fnmatch on name or file:name)"),
	NT_KEY_STR(C, step_group, "training", "multivariate group the step time joins"),
	NT_KEY_FLOAT(C, step_q, 1e-4, 1e-12, 0.1, "risk per step"),
	NT_KEY_FLOAT(C, step_min_slowdown, 0.5, 0.0, 1000.0, "a slow step is at least this much slower (0.5: 50 %)"),
	NT_KEY_INT(C, step_window, 8, 1, 64, "the last this many steps (the slow one among them) must be slower on average too (1: the step alone)"),
	NT_KEY_FLOAT(C, step_window_slowdown, 0.5, 0.0, 1000.0, "by at least this much (0.5: the loop lost a third of its throughput over them)"),
	NT_KEY_INT(C, step_n_init, 100, 20, 1000000, "steps before a slow step can be flagged"),
	NT_KEY_INT(C, step_sustain, 1, 1, 1000, "slow step times in a row before an alert (Python steps come in batches whose time a late report stretches: 2)"),
	NT_KEY_INT(C, step_learn_launches, 32768, 256, 4194304, "launches kept to find the repeating kernel sequence"),
	NT_KEY_FLOAT(C, items_per_step, 0.0, 0.0, 1e15, "items (samples, tokens) per step, for items per second (0: not published)"),
	NT_KEY_FLOAT(C, reason_min_change, 0.5, 0.0, 1e6, "a series is a reason when it moved by this factor (0.5: x1.5 or /1.5)"),
	NT_KEY_INT(C, reason_wait_steps, 2, 0, 1000, "steps a slow-step alert waits for a reason"),
	NT_KEY_FLOAT(C, joint_q, 1e-6, 1e-12, 0.1, "risk of the multivariate check"),
	NT_KEY_STRLIST(C, comm_names,
	    "[\"pt_data_worker=data-loader\", \"pt_data_pin=data-loader pin\", \"pt_autograd_*=autograd\"]",
	    "names for process names in messages: \"comm-glob=name\""),
};
#undef C

static const char *const lbl_kind[] = { "kind" };
static const char *const lbl_pid[] = { "pid" };
static const struct nt_metric_desc m_alerts = {
	"ntcore_anomaly_alerts_total", "alert.anomaly published",
	NT_METRIC_COUNTER, 1, lbl_kind, NULL, 0, 16 };
static const struct nt_metric_desc m_series = {
	"ntcore_anomaly_series", "series watched now (watches and rules)",
	NT_METRIC_GAUGE, 0, NULL, NULL, 0, 0 };
static const struct nt_metric_desc m_dropped = {
	"ntcore_anomaly_series_dropped_total", "series not watched: max_series reached",
	NT_METRIC_COUNTER, 0, NULL, NULL, 0, 0 };
static const struct nt_metric_desc m_tick = {
	"ntcore_anomaly_snapshot_seconds_total", "time spent reading and judging the metrics",
	NT_METRIC_COUNTER, 0, NULL, NULL, 0, 0 };
static const struct nt_metric_desc m_step_s = {
	"ntcore_anomaly_step_seconds", "duration of the last training step",
	NT_METRIC_GAUGE, 1, lbl_pid, NULL, 0, 256 };
static const struct nt_metric_desc m_steps = {
	"ntcore_anomaly_steps_total", "training steps seen",
	NT_METRIC_COUNTER, 1, lbl_pid, NULL, 0, 256 };
static const struct nt_metric_desc m_step_rate = {
	"ntcore_anomaly_steps_per_second", "throughput: steps per second of the last step",
	NT_METRIC_GAUGE, 1, lbl_pid, NULL, 0, 256 };
static const struct nt_metric_desc m_items = {
	"ntcore_anomaly_items_per_second", "throughput: items_per_step / step time",
	NT_METRIC_GAUGE, 1, lbl_pid, NULL, 0, 256 };

/* Semantic checks the schema's bounds cannot express. */
static int check_config(struct an *a)
{
	const struct an_cfg *c = a->cfg;
	const struct nt_host *h = a->host;

	if (c->n_init < c->depth + 10)
		return h->config_error(a->inst, "n_init", "must be at least depth + 10 (%lld)",
				       (long long)(c->depth + 10));
	if (c->step_n_init < c->depth + 10)
		return h->config_error(a->inst, "step_n_init", "must be at least depth + 10 (%lld)",
				       (long long)(c->depth + 10));
	for (uint32_t i = 0; i < a->n_watches; i++) {
		const struct an_watch_cfg *w = &a->watches[i];

		if (w->n_init && w->n_init < c->depth + 10)
			return h->config_error(a->inst, "watch", "group %u: n_init must be "
					       "0 or at least depth + 10", i + 1);
		if (!w->metrics.n)
			return h->config_error(a->inst, "watch", "group %u: metrics is empty", i + 1);
		if (w->labels.n > AN_VIEW_MAX_LABELS)
			return h->config_error(a->inst, "watch", "group %u: at most %d labels",
					       i + 1, AN_VIEW_MAX_LABELS);
		for (uint32_t k = 0; k < w->where.n; k++)
			if (!strchr(w->where.v[k], '='))
				return h->config_error(a->inst, "watch", "group %u: where \"%s\" "
						       "is not label=glob", i + 1, w->where.v[k]);
	}
	for (uint32_t k = 0; k < c->comm_names.n; k++)
		if (!strchr(c->comm_names.v[k], '='))
			return h->config_error(a->inst, "comm_names", "\"%s\" is not "
					       "comm-glob=name", c->comm_names.v[k]);
	return 0;
}

static int register_metrics(struct an *a)
{
	const struct nt_host *h = a->host;

	a->m_alerts = h->metric_register(a->inst, &m_alerts);
	a->m_series = h->metric_register(a->inst, &m_series);
	a->m_dropped = h->metric_register(a->inst, &m_dropped);
	a->m_tick = h->metric_register(a->inst, &m_tick);
	a->m_step_s = h->metric_register(a->inst, &m_step_s);
	a->m_steps = h->metric_register(a->inst, &m_steps);
	a->m_step_rate = h->metric_register(a->inst, &m_step_rate);
	a->m_items = a->cfg->items_per_step > 0.0 ?
			     h->metric_register(a->inst, &m_items) : NULL;
	if (!a->m_alerts || !a->m_series || !a->m_dropped || !a->m_tick ||
	    !a->m_step_s || !a->m_steps || !a->m_step_rate ||
	    (a->cfg->items_per_step > 0.0 && !a->m_items))
		return -ENOMEM;
	return 0;
}

static void an_fini(void *state);

/* Builds the parts in the order they depend on each other. */
static int build(struct an *a)
{
	int err = 0;

	if ((a->alert_type = a->host->register_schema(a->inst, &an_alert_schema)) < 0)
		return a->alert_type;
	if ((err = register_metrics(a)) < 0)
		return err;
	if (!(a->view = an_view_new((uint32_t)a->cfg->max_series)) ||
	    !(a->joint = an_joint_new(a)) || !(a->watch = an_watch_new(a)))
		return -ENOMEM;
	if (!(a->rules = an_rules_new(a, &err)) && err)
		return err;
	a->steps = an_steps_new(a, &err);
	return err;
}

static int an_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	struct an *a = calloc(1, sizeof(*a));
	const struct an_cfg *c = config;
	int err;

	if (!a)
		return -ENOMEM;
	a->inst = inst;
	a->host = host;
	a->cfg = c;
	a->watches = c->watch.items;
	a->n_watches = c->watch.n;
	if (!c->watch.n && c->default_watch) {
		a->watches = an_default_watches;
		a->n_watches = an_n_default_watches;
	}
	a->rules_cfg = c->rules.items;
	a->n_rules = c->rules.n;
	if (!c->rules.n && c->default_rules) {
		a->rules_cfg = an_default_rules;
		a->n_rules = an_n_default_rules;
	}
	if (!(err = check_config(a)))
		err = build(a);
	if (err) {
		an_fini(a);
		return err;
	}
	*state = a;
	return 0;
}

static int an_attach(void *state)
{
	struct an *a = state;

	nt_log_info(a, "watching %u metric sets, %u rules, steps from %s",
		     a->n_watches, a->n_rules,
		     !a->steps ? "nothing" :
		     a->cfg->step_function[0] ? "Python calls" : "kernel launches");
	return a->host->add_timer(a->inst, (uint64_t)a->cfg->interval_ms, 1);
}

static int an_poll(void *state, uint32_t token, uint32_t budget)
{
	(void)token;
	(void)budget;
	an_tick(state);
	return 0;
}

static void an_detach(void *state)
{
	(void)state;
}

static void an_fini(void *state)
{
	struct an *a = state;

	if (!a)
		return;
	an_steps_free(a->steps);
	an_rules_free(a->rules);
	an_view_free(a->view); /* drops the watched series' detectors */
	an_watch_free(a->watch);
	an_joint_free(a->joint);
	free(a);
}

static void an_consume(void *state, const struct nt_event_hdr *ev,
		       const struct nt_schema *schema)
{
	struct an *a = state;

	an_steps_event(a->steps, ev, schema);
	an_rules_event(a->rules, ev, schema);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "anomaly",
	.kind = NT_KIND_DETECTOR,
	.n_config = NT_ARRAY_LEN(an_keys),
	.description = "online anomaly detection over the metrics (DSPOT, multivariate), fixed rules, slow training steps with what moved",
	.version = "0.1.0",
	.config = an_keys,
	.config_size = sizeof(struct an_cfg),
	.init = an_init,
	.attach = an_attach,
	.poll = an_poll,
	.detach = an_detach,
	.fini = an_fini,
	.consume = an_consume,
};
