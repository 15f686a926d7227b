/* SPDX-License-Identifier: MIT */
/* Watched series: a detector each, series/drift alerts, what moved; see
 * watch.h. */
#include "watch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alert.h"
#include "an_util.h"
#include "det.h"
#include "joint.h"

/* The state hung on each watched series. */
struct wser {
	struct det *det;
	uint64_t last_alert_ns;
	double baseline;            /* its normal level before the latest value */
	enum det_verdict verdict;   /* on the latest value */
};

struct wctx {
	struct an_watch *w;
	uint32_t idx;
};

struct an_watch {
	struct an *a;
	uint32_t n;
	struct det_par *par;
	int *view;
	int *group;
	struct wctx *ctx;
	size_t bytes;
};

static uint32_t subject_pid(const struct an_series *s)
{
	const char *p = an_series_label_by(s, "pid");

	return p ? (uint32_t)strtoul(p, NULL, 10) : 0;
}

static void series_alert(struct an_watch *w, const struct an_series *s,
			 double v, const struct det_out *o)
{
	struct an *a = w->a;
	char name[256], id[512], val[48], base[48], ratio[32];
	struct an_sb msg, ev;
	bool drift = o->verdict == DET_DRIFT;
	struct an_alert al = {
		.kind = drift ? "drift" : "series", .severity = NT_SEV_WARNING,
		.pid = subject_pid(s), .comm = an_series_label_by(s, "comm"),
		.value = v, .baseline = o->baseline,
	};

	an_series_name(a, s, name, sizeof(name));
	an_fmt_value(s->family, s->type, v, val, sizeof(val));
	an_fmt_value(s->family, s->type, o->baseline, base, sizeof(base));
	an_fmt_ratio(o->baseline, v, ratio, sizeof(ratio));
	an_sb_init(&msg);
	an_sb_init(&ev);
	if (drift)
		an_sb_printf(&msg, "%s drifted to %s from %s (%s)", name, val,
			     base, ratio);
	else
		an_sb_printf(&msg, "%s %s, normal %s (%s)", name, val, base, ratio);
	an_sb_puts(&ev, "{\"series\":");
	an_sb_json_str(&ev, an_series_id(s, id, sizeof(id)));
	an_sb_puts(&ev, ",\"name\":");
	an_sb_json_str(&ev, name);
	an_sb_printf(&ev, ",\"verdict\":\"%s\",\"value\":", drift ? "drift" : "spike");
	an_sb_json_num(&ev, v);
	an_sb_puts(&ev, ",\"baseline\":");
	an_sb_json_num(&ev, o->baseline);
	an_sb_puts(&ev, ",\"threshold\":");
	an_sb_json_num(&ev, o->threshold);
	an_sb_puts(&ev, "}");
	al.message = an_sb_str(&msg);
	al.evidence = an_sb_str(&ev);
	an_alert_publish(a, &al);
	an_sb_free(&msg);
	an_sb_free(&ev);
}

static void on_sample(void *ctx, struct an_series *s, double v, uint64_t now)
{
	struct wctx *c = ctx;
	struct an_watch *w = c->w;
	const struct an_watch_cfg *cfg = &w->a->watches[c->idx];
	const struct det_par *p = &w->par[c->idx];
	struct wser *ws = s->user;
	struct det_out o;

	if (!ws) {
		if (!(ws = calloc(1, sizeof(*ws))) || !(ws->det = det_new(p))) {
			free(ws);
			w->a->host->count_drop(w->a->inst, "anomaly_oom", 1);
			return;
		}
		s->user = ws;
		w->bytes += sizeof(*ws) + det_size(p);
	}
	det_update(ws->det, p, v, &o);
	ws->baseline = o.baseline;
	ws->verdict = o.verdict;
	if (w->group[c->idx] >= 0)
		an_joint_member(w->a->joint, w->group[c->idx], s, o.z, o.verdict);
	if ((o.verdict != DET_SPIKE && o.verdict != DET_DRIFT) || !cfg->alert)
		return;
	if (ws->last_alert_ns &&
	    now - ws->last_alert_ns < (uint64_t)w->a->cfg->cooldown_s * 1000000000ULL)
		return;
	ws->last_alert_ns = now;
	series_alert(w, s, v, &o);
}

static void on_drop(void *ctx, struct an_series *s)
{
	struct wctx *c = ctx;
	struct wser *ws = s->user;

	if (!ws)
		return;
	c->w->bytes -= sizeof(*ws) + det_size(&c->w->par[c->idx]);
	det_free(ws->det);
	free(ws);
	s->user = NULL;
}

struct an_watch *an_watch_new(struct an *a)
{
	struct an_watch *w = calloc(1, sizeof(*w));
	uint32_t n = a->n_watches;

	if (!w)
		return NULL;
	w->a = a;
	w->par = calloc(n ? n : 1, sizeof(*w->par));
	w->view = calloc(n ? n : 1, sizeof(*w->view));
	w->group = calloc(n ? n : 1, sizeof(*w->group));
	w->ctx = calloc(n ? n : 1, sizeof(*w->ctx));
	if (!w->par || !w->view || !w->group || !w->ctx)
		goto fail;
	for (uint32_t i = 0; i < n; i++) {
		const struct an_watch_cfg *c = &a->watches[i];
		struct an_view_def d = {
			.globs = c->metrics.v, .n_globs = c->metrics.n,
			.labels = c->labels.v, .n_labels = c->labels.n,
			.where = c->where.v, .n_where = c->where.n,
			.on_sample = on_sample, .on_drop = on_drop,
			.ctx = &w->ctx[i],
		};

		an_det_par(a, c, &w->par[i]);
		w->ctx[i] = (struct wctx){ w, i };
		w->group[i] = an_joint_group(a->joint, c->group);
		if ((w->view[i] = an_view_add(a->view, &d)) < 0)
			goto fail;
	}
	w->n = n;
	return w;
fail:
	an_watch_free(w);
	return NULL;
}

void an_watch_free(struct an_watch *w)
{
	if (!w)
		return;
	free(w->par);
	free(w->view);
	free(w->group);
	free(w->ctx);
	free(w);
}

size_t an_watch_bytes(const struct an_watch *w)
{
	return w->bytes;
}

struct moved_ctx {
	uint64_t since;
	double min_change;
	struct an_moved *out;
	size_t max, n;
};

/* How far a series moved; false when not far enough to be a reason. */
static bool moved_score(const struct an_series *s, const struct wser *ws,
			double min_change, struct an_moved *m)
{
	double b = ws->baseline, v = s->value, r;
	bool alarmed = ws->verdict == DET_SPIKE || ws->verdict == DET_DRIFT;

	if (!isfinite(b) || !isfinite(v))
		return false;
	*m = (struct an_moved){ .s = s, .before = b, .after = v,
				.alarmed = alarmed };
	if (fabs(b) <= 1e-12) {
		/* from nothing: only when its own detector calls it so */
		m->score = 2.0 + 0.5;
		return alarmed && fabs(v) > 0.0;
	}
	r = v / b;
	if (!(r > 0.0))
		return false;
	m->score = fabs(log(r)) + (alarmed ? 0.5 : 0.0);
	return r >= 1.0 + min_change || r <= 1.0 / (1.0 + min_change);
}

static void moved_one(void *ctx, struct an_series *s)
{
	struct moved_ctx *c = ctx;
	const struct wser *ws = s->user;
	struct an_moved m;
	size_t i;

	if (!ws || s->value_ns < c->since || !moved_score(s, ws, c->min_change, &m))
		return;
	for (i = c->n; i > 0 && c->out[i - 1].score < m.score; i--)
		if (i < c->max)
			c->out[i] = c->out[i - 1];
	if (i < c->max) {
		c->out[i] = m;
		if (c->n < c->max)
			c->n++;
	}
}

size_t an_watch_moved(struct an_watch *w, uint64_t since_ns,
		      double min_change, struct an_moved *out, size_t max)
{
	struct moved_ctx c = { .since = since_ns, .min_change = min_change,
			       .out = out, .max = max };

	for (uint32_t i = 0; i < w->n && max; i++)
		an_view_each(w->a->view, (uint32_t)w->view[i], moved_one, &c);
	return c.n;
}
