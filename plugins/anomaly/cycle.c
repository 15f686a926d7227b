/* SPDX-License-Identifier: MIT */
/*
 * The snapshot cycle (read the metrics, judge the new values, the rules,
 * the steps' due alerts, the joint check) and the detector parameters a
 * watch gets from the instance's defaults; see anomaly.h.
 */
#include <string.h>

#include "ntcore/kit/log.h"

#include "an_util.h"
#include "anomaly.h"
#include "joint.h"
#include "rules.h"
#include "steps.h"
#include "view.h"

void an_det_par(const struct an *a, const struct an_watch_cfg *w,
		struct det_par *p)
{
	const struct an_cfg *c = a->cfg;

	det_par_default(p);
	p->fast.q = p->slow.q = w && w->q > 0.0 ? w->q : c->q;
	p->fast.level = p->slow.level = c->level;
	p->fast.method = p->slow.method =
		strcmp(c->fit, "moments") == 0 ? SPOT_MOMENTS : SPOT_GRIMSHAW;
	p->n_init = (uint32_t)(w && w->n_init > 0 ? w->n_init : c->n_init);
	p->depth = (uint16_t)c->depth;
	p->drift_len = (uint32_t)c->drift_len;
	if (!w)
		return;
	p->direction = strcmp(w->direction, "down") == 0 ? DET_DOWN :
		       strcmp(w->direction, "both") == 0 ? DET_BOTH : DET_UP;
	p->min_change = w->min_change;
	p->min_delta = w->min_delta;
}

void an_tick(struct an *a)
{
	uint64_t t0 = an_now_ns();
	uint64_t dropped = an_view_dropped(a->view);

	an_view_tick(a->view, a->host, a->inst, t0);
	an_rules_tick_end(a->rules, t0);
	an_steps_tick(a->steps, t0);
	an_joint_tick_end(a->joint, t0);
	a->ticks++;
	a->last_tick_ns = t0;
	a->host->metric_set(a->m_series, NULL, an_view_series(a->view));
	if (an_view_dropped(a->view) > dropped) {
		if (!dropped)
			nt_log_warn(a, "max_series (%lld) reached: further series are "
				     "not watched (ntcore_anomaly_series_dropped_total)",
				     (long long)a->cfg->max_series);
		a->host->metric_add(a->m_dropped, NULL,
				    (double)(an_view_dropped(a->view) - dropped));
	}
	a->host->metric_add(a->m_tick, NULL, (double)(an_now_ns() - t0) / 1e9);
}
