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

/* Checkpoints of a series' normal level, one per CK_SPACING_NS at most,
 * the newest CK_N kept (4 s): a slow step asks for the level before it
 * began. The level at the latest value was no answer: a 1 s step over ten
 * snapshots, and a young series' warm-up mean (or a rebase) had taken the
 * slow values in (the GPU run's loader requests x250 read as x8). */
#define CK_N 8
#define CK_SPACING_NS 500000000ULL

enum slower { SLOWER_UP, SLOWER_DOWN, SLOWER_BOTH, SLOWER_NEVER };

/* The state hung on each watched series. */
struct wser {
	struct det *det;
	uint64_t last_alert_ns;
	double baseline;            /* its normal level before the latest value */
	enum det_verdict verdict;   /* on the latest value */
	uint64_t ck_ns[CK_N];       /* checkpoint times, ring */
	float ck_base[CK_N];        /* the normal level before each */
	uint8_t ck_n, ck_pos;       /* checkpoints held, the next slot */
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
	enum slower *slower;
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
	an_alert_publish_sb(a, &al, &msg, &ev);
}

static void checkpoint(struct wser *ws, double base, uint64_t now)
{
	uint8_t newest = (uint8_t)((ws->ck_pos + CK_N - 1) % CK_N);

	if (!isfinite(base) ||
	    (ws->ck_n && now - ws->ck_ns[newest] < CK_SPACING_NS))
		return;
	ws->ck_ns[ws->ck_pos] = now;
	ws->ck_base[ws->ck_pos] = (float)base;
	ws->ck_pos = (uint8_t)((ws->ck_pos + 1) % CK_N);
	if (ws->ck_n < CK_N)
		ws->ck_n++;
}

/* The normal level before since: the newest checkpoint at or before it,
 * else the oldest held, else the level now. */
static double level_before(const struct wser *ws, uint64_t since)
{
	double best = NAN, oldest = ws->baseline;

	for (uint8_t k = 0; k < ws->ck_n; k++) {
		uint8_t i = (uint8_t)((ws->ck_pos + CK_N - 1 - k) % CK_N);

		oldest = ws->ck_base[i];
		if (ws->ck_ns[i] <= since) {
			best = ws->ck_base[i];
			break;
		}
	}
	return isfinite(best) ? best : oldest;
}

static enum slower slower_of(const char *w)
{
	if (!w || strcmp(w, "up") == 0)
		return SLOWER_UP;
	if (strcmp(w, "down") == 0)
		return SLOWER_DOWN;
	return strcmp(w, "both") == 0 ? SLOWER_BOTH : SLOWER_NEVER;
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
	checkpoint(ws, o.baseline, now);
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
	w->slower = calloc(n ? n : 1, sizeof(*w->slower));
	if (!w->par || !w->view || !w->group || !w->ctx || !w->slower)
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
		w->slower[i] = slower_of(c->slower_when);
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
	free(w->slower);
	free(w);
}

size_t an_watch_bytes(const struct an_watch *w)
{
	return w->bytes;
}

struct moved_ctx {
	uint64_t since;
	double min_change;
	enum slower slower;    /* of the view being walked */
	struct an_moved *out;
	size_t max, n;
};

/*
 * How far a series moved since `since`, from its level before then to its
 * latest value; false when not far enough, or not in the direction that
 * can make a step slower (`slower_when`): a fall of a wait time is an
 * effect of a slow step, never its reason.
 */
static bool moved_score(const struct an_series *s, const struct wser *ws,
			const struct moved_ctx *c, struct an_moved *m)
{
	double b = level_before(ws, c->since), v = s->value, r;
	bool alarmed = ws->verdict == DET_SPIKE || ws->verdict == DET_DRIFT;
	bool up, down;

	if (!isfinite(b) || !isfinite(v) || c->slower == SLOWER_NEVER)
		return false;
	*m = (struct an_moved){ .s = s, .before = b, .after = v,
				.alarmed = alarmed };
	if (fabs(b) <= 1e-12) {
		/* from nothing: only when its own detector calls it so */
		m->score = 2.0 + 0.5;
		return alarmed && v > 0.0 && c->slower != SLOWER_DOWN;
	}
	r = v / b;
	if (!(r > 0.0))
		return false;
	m->score = fabs(log(r)) + (alarmed ? 0.5 : 0.0);
	up = r >= 1.0 + c->min_change;
	down = r <= 1.0 / (1.0 + c->min_change);
	switch (c->slower) {
	case SLOWER_UP: return up;
	case SLOWER_DOWN: return down;
	default: return up || down;
	}
}

static void moved_one(void *ctx, struct an_series *s)
{
	struct moved_ctx *c = ctx;
	const struct wser *ws = s->user;
	struct an_moved m;
	size_t i;

	if (!ws || s->value_ns < c->since || !moved_score(s, ws, c, &m))
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

	for (uint32_t i = 0; i < w->n && max; i++) {
		c.slower = w->slower[i];
		an_view_each(w->a->view, (uint32_t)w->view[i], moved_one, &c);
	}
	return c.n;
}
