/* SPDX-License-Identifier: MIT */
/* The configurable fixed rules on metrics and events; see rules.h. */
#include "rules.h"

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alert.h"
#include "an_util.h"
#include "evfield.h"
#include "view.h"

/* The history mean weighs at most this many values, so a run of days
 * still follows its level. */
#define HISTORY_WINDOW 1000
#define MAX_EVENT_KEYS 10000

enum rtest { RT_ABOVE, RT_SHARE, RT_RATIO_MEAN, RT_RATIO_MAX };

struct rstate {
	double mean, max;
	uint64_t n;            /* values learned */
	uint64_t seen;         /* values judged (the warm-up counts them) */
	uint64_t first_ns;     /* the first of them */
	uint32_t streak, normal;
	uint64_t last_alert_ns;
	char key[96];          /* event rules: the key, for messages */
};

struct rule {
	struct an_rules *rs;
	const struct an_rule_cfg *c;
	enum rtest test;
	int view, over_view, when_view;
	struct an_series **due;
	uint32_t n_due, cap_due;
	struct an_map keys;    /* event rules */
	uint32_t n_keys;
	const struct nt_schema *last_schema;
	const struct nt_field *last_field;
};

struct an_rules {
	struct an *a;
	struct rule *r;
	uint32_t n;
	uint64_t tick_ns;
};

static bool set(const char *s)
{
	return s && *s;
}

static enum rtest test_of(const char *t)
{
	if (!t)
		return RT_ABOVE;
	if (strcmp(t, "share") == 0)
		return RT_SHARE;
	if (strcmp(t, "ratio_to_mean") == 0)
		return RT_RATIO_MEAN;
	if (strcmp(t, "ratio_to_max") == 0)
		return RT_RATIO_MAX;
	return RT_ABOVE;
}

/* Whether value v passes; *ref is what it was compared with. */
static bool passes(const struct rule *r, const struct rstate *st, double v,
		   double *ref)
{
	const struct an_rule_cfg *c = r->c;

	switch (r->test) {
	case RT_RATIO_MEAN:
		*ref = st->mean;
		return st->n >= (uint64_t)c->min_history && st->mean > 0.0 &&
		       v >= c->threshold * st->mean;
	case RT_RATIO_MAX:
		*ref = st->max;
		return st->n >= (uint64_t)c->min_history && st->max > 0.0 &&
		       v >= c->threshold * st->max;
	default:
		*ref = c->threshold;
		return v >= c->threshold;
	}
}

static void learn(struct rstate *st, double v)
{
	double w = (double)(st->n < HISTORY_WINDOW ? st->n + 1 : HISTORY_WINDOW);

	st->mean += (v - st->mean) / w;
	st->max = st->n ? fmax(st->max, v) : v;
	st->n++;
}

struct verdict {
	double value, ref;
	bool alert;
};

/* Feeds one value; says whether it raises an alert now. `counts`: false
 * when the value says nothing either way (a closed gate). */
static struct verdict judge(const struct rule *r, struct rstate *st, double v,
			    bool gated, uint64_t now, uint64_t born_ns)
{
	const struct an_rule_cfg *c = r->c;
	struct verdict out = { .value = v };
	bool pass = !gated && (r->test == RT_SHARE || v >= c->min_value) &&
		    passes(r, st, v, &out.ref);

	if (!st->seen++)
		st->first_ns = born_ns && born_ns < now ? born_ns : now;
	/* Warm-up: a key young in values or in time has no history to speak
	 * of (the GPU run's first reads of fresh files, 10 ms against the
	 * 646 us of the imports' reads 14 s before, were "x16 its average").
	 * Its values are learned, whatever they are, and count neither as
	 * passing nor as normal (a thread hot from its start stays so). */
	if (st->seen <= (uint64_t)c->warmup_values || now < st->first_ns ||
	    (double)(now - st->first_ns) < c->warmup_s * 1e9) {
		st->streak = 0;
		if (!gated)
			learn(st, v);
		return out;
	}
	if (!pass) {
		st->streak = 0;
		st->normal++;
		if (!gated)
			learn(st, v);
		return out;
	}
	if (++st->streak < (uint32_t)c->sustain ||
	    st->normal < (uint32_t)c->normal_before)
		return out;
	if (st->last_alert_ns &&
	    now - st->last_alert_ns <
		    (uint64_t)r->rs->a->cfg->cooldown_s * 1000000000ULL)
		return out;
	st->last_alert_ns = now;
	st->streak = 0;
	out.alert = true;
	return out;
}

static const char *test_words(enum rtest t)
{
	switch (t) {
	case RT_RATIO_MEAN: return "its average";
	case RT_RATIO_MAX: return "the largest before";
	case RT_SHARE: return "share limit";
	default: return "limit";
	}
}

static void publish(const struct rule *r, uint32_t pid, const char *comm,
		    const char *name, const char *val, const char *ref,
		    const struct verdict *vd, const char *key)
{
	const struct an_rule_cfg *c = r->c;
	struct an_sb msg, ev;
	char ratio[32];
	struct an_alert al = { .kind = "rule", .severity = an_severity(c->severity),
			       .pid = pid, .comm = comm, .value = vd->value,
			       .baseline = vd->ref };

	const char *what = set(c->what) ? c->what : c->name;

	an_sb_init(&msg);
	an_sb_init(&ev);
	if (r->test == RT_RATIO_MEAN || r->test == RT_RATIO_MAX)
		an_sb_printf(&msg, "%s: %s %s, %s %s (%s)", what, name, val,
			     an_fmt_ratio(vd->ref, vd->value, ratio, sizeof(ratio)),
			     test_words(r->test), ref);
	else if (r->test == RT_SHARE)
		an_sb_printf(&msg, "%s: %s %.0f %% (limit %.0f %%)", what, name,
			     100.0 * vd->value, 100.0 * vd->ref);
	else
		an_sb_printf(&msg, "%s: %s %s (limit %s)", what, name, val, ref);
	an_sb_puts(&ev, "{\"rule\":");
	an_sb_json_str(&ev, c->name);
	an_sb_puts(&ev, ",\"test\":");
	an_sb_json_str(&ev, c->test);
	an_sb_puts(&ev, ",\"key\":");
	an_sb_json_str(&ev, key);
	an_sb_puts(&ev, ",\"value\":");
	an_sb_json_num(&ev, vd->value);
	an_sb_puts(&ev, ",\"reference\":");
	an_sb_json_num(&ev, vd->ref);
	an_sb_puts(&ev, ",\"threshold\":");
	an_sb_json_num(&ev, c->threshold);
	an_sb_puts(&ev, ",\"sustain\":");
	an_sb_printf(&ev, "%lld}", (long long)c->sustain);
	an_alert_publish_sb(r->rs->a, &al, &msg, &ev);
}

/* ---- metric rules -------------------------------------------------- */

static void on_sample(void *ctx, struct an_series *s, double v, uint64_t now)
{
	struct rule *r = ctx;

	(void)v;
	(void)now;
	if (!s->user && !(s->user = calloc(1, sizeof(struct rstate))))
		return;
	if (r->n_due == r->cap_due) {
		uint32_t nc = r->cap_due ? r->cap_due * 2 : 32;
		struct an_series **d = realloc(r->due, nc * sizeof(*d));

		if (!d)
			return;
		r->due = d;
		r->cap_due = nc;
	}
	r->due[r->n_due++] = s;
}

static void on_drop(void *ctx, struct an_series *s)
{
	(void)ctx;
	free(s->user);
	s->user = NULL;
}

/* The partner series of s in another view of the rule, if recent. */
static const struct an_series *partner(const struct rule *r, int view,
				       const char *family,
				       const struct an_series *s, uint64_t now)
{
	const struct an_series *p;
	uint64_t fresh = 2 * (uint64_t)r->rs->a->cfg->interval_ms * 1000000ULL;

	if (view < 0)
		return NULL;
	p = an_view_find(r->rs->a->view, (uint32_t)view, family, s->vals,
			 s->n_vals);
	if (!p || !p->value_ns || now - p->value_ns > fresh + 5000000000ULL)
		return NULL;
	return p;
}

static void metric_judge(struct rule *r, struct an_series *s, uint64_t now)
{
	const struct an_rule_cfg *c = r->c;
	const struct an_series *den = NULL, *gate = NULL;
	double v = s->value;
	uint64_t born;
	bool gated = false;
	struct verdict vd;
	char name[256], val[48], ref[48], id[512];
	const char *pid;

	if (r->test == RT_SHARE) {
		den = partner(r, r->over_view, c->over, s, now);
		if (!den || den->value < c->min_value || den->value <= 0.0)
			gated = true;
		else /* the two rates may cover slightly different spans
		      * (view.h holds a change seen too soon): a share above
		      * 1 is that, not news */
			v = fmin(v / den->value, 1.0);
	}
	if (r->when_view >= 0) {
		gate = partner(r, r->when_view, c->when_metric, s, now);
		gated = gated || !gate || gate->value < c->when_above;
	}
	/* the key's history began when the first of the rule's series for it
	 * was seen: small requests come only when the anomaly does, the
	 * device's requests (the share's denominator) long before */
	born = s->first_ns;
	if (den && den->first_ns && den->first_ns < born)
		born = den->first_ns;
	if (gate && gate->first_ns && gate->first_ns < born)
		born = gate->first_ns;
	vd = judge(r, s->user, v, gated, now, born);
	if (!vd.alert)
		return;
	an_series_name(r->rs->a, s, name, sizeof(name));
	an_fmt_value(s->family, s->type, vd.value, val, sizeof(val));
	an_fmt_value(s->family, s->type, vd.ref, ref, sizeof(ref));
	pid = an_series_label_by(s, "pid");
	publish(r, pid ? (uint32_t)strtoul(pid, NULL, 10) : 0,
		an_series_label_by(s, "comm"), name, val, ref, &vd,
		an_series_id(s, id, sizeof(id)));
}

void an_rules_tick_end(struct an_rules *rs, uint64_t now_ns)
{
	for (uint32_t i = 0; rs && i < rs->n; i++) {
		struct rule *r = &rs->r[i];

		for (uint32_t k = 0; k < r->n_due; k++)
			metric_judge(r, r->due[k], now_ns);
		r->n_due = 0;
	}
}

/* ---- event rules --------------------------------------------------- */

static const char *fmt_field(const struct nt_field *f, double v, char *buf,
			     size_t len)
{
	if (f->unit && strcmp(f->unit, "bytes") == 0)
		return an_fmt_value("x_bytes", NT_METRIC_GAUGE, v, buf, len);
	if (f->unit && strcmp(f->unit, "ns") == 0)
		return an_fmt_value("x_seconds", NT_METRIC_GAUGE, v / 1e9, buf, len);
	snprintf(buf, len, "%.4g", v);
	return buf;
}

static struct rstate *event_state(struct rule *r, const struct nt_event_hdr *ev,
				  const struct nt_schema *schema)
{
	char key[96], part[64];
	struct an_sb sb;
	uint64_t h;
	struct rstate *st;

	an_sb_init(&sb);
	for (uint32_t i = 0; i < r->c->by.n; i++) {
		if (!evf_key(ev, schema, r->c->by.v[i], part, sizeof(part)))
			snprintf(part, sizeof(part), "?");
		an_sb_printf(&sb, "%s%s %s", i ? ", " : "", r->c->by.v[i], part);
	}
	snprintf(key, sizeof(key), "%s", an_sb_str(&sb));
	an_sb_free(&sb);
	h = an_hash_str(AN_HASH_SEED, key);
	if ((st = an_map_get(&r->keys, h)))
		return st;
	if (r->n_keys >= MAX_EVENT_KEYS || !(st = calloc(1, sizeof(*st)))) {
		r->rs->a->host->count_drop(r->rs->a->inst, "anomaly_keys", 1);
		return NULL;
	}
	memcpy(st->key, key, sizeof(key));
	if (an_map_put(&r->keys, h, st) < 0) {
		free(st);
		return NULL;
	}
	r->n_keys++;
	return st;
}

static void event_judge(struct rule *r, const struct nt_event_hdr *ev,
			const struct nt_schema *schema)
{
	struct rstate *st;
	struct verdict vd;
	double v;
	char name[192], val[48], ref[48], comm[NT_COMM_LEN + 1];

	if (r->last_schema != schema) {
		r->last_schema = schema;
		r->last_field = evf_find(schema, r->c->field);
	}
	if (!r->last_field || !evf_num(ev, r->last_field, &v) ||
	    !(st = event_state(r, ev, schema)))
		return;
	vd = judge(r, st, v, false, ev->ts_ns, 0);
	if (!vd.alert)
		return;
	snprintf(comm, sizeof(comm), "%.*s", (int)strnlen(ev->comm, NT_COMM_LEN),
		 ev->comm);
	snprintf(name, sizeof(name), "%s (%s) %s %s", st->key, comm,
		 schema->name, r->c->field);
	publish(r, ev->pid, comm, name, fmt_field(r->last_field, vd.value, val, sizeof(val)),
		fmt_field(r->last_field, vd.ref, ref, sizeof(ref)), &vd, st->key);
}

void an_rules_event(struct an_rules *rs, const struct nt_event_hdr *ev,
		    const struct nt_schema *schema)
{
	for (uint32_t i = 0; rs && i < rs->n; i++) {
		struct rule *r = &rs->r[i];

		if (set(r->c->event) && fnmatch(r->c->event, schema->name, 0) == 0)
			event_judge(r, ev, schema);
	}
}

/* ---- set-up -------------------------------------------------------- */

static int check_rule(struct an *a, const struct an_rule_cfg *c)
{
	const char *why = NULL;
	bool metric = set(c->metric), event = set(c->event);

	if (!set(c->name))
		why = "has no name";
	else if (metric == event)
		why = "needs exactly one of metric and event";
	else if (event && !set(c->field))
		why = "an event rule needs field";
	else if (event && test_of(c->test) == RT_SHARE)
		why = "share works on metrics only";
	else if (test_of(c->test) == RT_SHARE && !set(c->over))
		why = "share needs over (the denominator family)";
	else if (event && set(c->when_metric))
		why = "when_metric works on metric rules only";
	else if (c->by.n > AN_VIEW_MAX_LABELS)
		why = "by: at most 8 labels";
	if (why)
		return a->host->config_error(a->inst, "rules", "rule \"%s\" %s",
					     c->name ? c->name : "", why);
	return 0;
}

/* A view of the family (glob) at *glob keyed by the rule's labels; the
 * rule's own view (sample) gets the values, the others are looked up. */
static int add_view(struct an *a, struct rule *r, const char *const *glob,
		    bool sample)
{
	struct an_view_def d = {
		.globs = glob, .n_globs = 1,
		.labels = r->c->by.v, .n_labels = r->c->by.n,
		.on_sample = sample ? on_sample : NULL,
		.on_drop = on_drop, .ctx = r,
	};

	return an_view_add(a->view, &d);
}

static int rule_init(struct an_rules *rs, struct rule *r,
		     const struct an_rule_cfg *c)
{
	struct an *a = rs->a;
	int err = check_rule(a, c);

	if (err)
		return err;
	*r = (struct rule){ .rs = rs, .c = c, .test = test_of(c->test),
			    .view = -1, .over_view = -1, .when_view = -1 };
	an_map_init(&r->keys);
	if (set(c->event))
		return a->host->subscribe(a->inst, c->event) < 0 ? -EINVAL : 0;
	if ((r->view = add_view(a, r, &c->metric, true)) < 0)
		return -ENOMEM;
	if (r->test == RT_SHARE && (r->over_view = add_view(a, r, &c->over, false)) < 0)
		return -ENOMEM;
	if (set(c->when_metric) &&
	    (r->when_view = add_view(a, r, &c->when_metric, false)) < 0)
		return -ENOMEM;
	return 0;
}

struct an_rules *an_rules_new(struct an *a, int *err)
{
	struct an_rules *rs = calloc(1, sizeof(*rs));

	*err = -ENOMEM;
	if (!rs || !(rs->r = calloc(a->n_rules ? a->n_rules : 1, sizeof(*rs->r)))) {
		free(rs);
		return NULL;
	}
	rs->a = a;
	for (uint32_t i = 0; i < a->n_rules; i++) {
		*err = rule_init(rs, &rs->r[i], &a->rules_cfg[i]);
		rs->n = i + 1;
		if (*err) {
			an_rules_free(rs);
			return NULL;
		}
	}
	*err = 0;
	return rs;
}

static void free_val(void *val, void *ctx)
{
	(void)ctx;
	free(val);
}

static void free_key(struct an_map *m)
{
	an_map_each(m, free_val, NULL);
	an_map_fini(m);
}

void an_rules_free(struct an_rules *rs)
{
	if (!rs)
		return;
	for (uint32_t i = 0; i < rs->n; i++) {
		free(rs->r[i].due);
		free_key(&rs->r[i].keys);
	}
	free(rs->r);
	free(rs);
}
