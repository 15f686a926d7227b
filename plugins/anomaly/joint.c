/* SPDX-License-Identifier: MIT */
/* The multivariate check over a group of related series; see joint.h. */
#include "joint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alert.h"
#include "an_util.h"

#define TOP 3

struct member {
	const struct an_series *s; /* or NULL and: */
	const char *name;
	double value, z;
};

struct group {
	const char *name;
	struct det *det;
	struct member *m;
	uint32_t n, cap;
	bool any_alarm;  /* a member alarmed by itself this snapshot */
	uint64_t last_alert_ns;
};

struct an_joint {
	struct an *a;
	struct det_par par;
	struct group *g;
	uint32_t n;
};

double joint_score(const double *z, size_t n)
{
	double s = 0.0;

	if (!n)
		return 0.0;
	for (size_t i = 0; i < n; i++)
		s += z[i];
	return s / (double)n;
}

int an_joint_group(const struct an_joint *j, const char *name)
{
	for (uint32_t i = 0; j && name && *name && i < j->n; i++)
		if (strcmp(j->g[i].name, name) == 0)
			return (int)i;
	return -1;
}

struct an_joint *an_joint_new(struct an *a)
{
	struct an_joint *j = calloc(1, sizeof(*j));

	if (!j || !(j->g = calloc(a->n_watches ? a->n_watches : 1, sizeof(*j->g))))
		goto fail;
	j->a = a;
	an_det_par(a, NULL, &j->par);
	j->par.fast.q = a->cfg->joint_q;
	j->par.drift_len = 0;
	j->par.direction = DET_UP;
	/* the members moved by a quarter of their alarm lines on average
	 * at least: a rare but tiny wobble of series that never move (a
	 * constant latency) is no news */
	j->par.min_delta = 0.25;
	for (uint32_t i = 0; i < a->n_watches; i++) {
		const char *name = a->watches[i].group;

		if (!name || !*name || an_joint_group(j, name) >= 0)
			continue;
		j->g[j->n].name = name;
		if (!(j->g[j->n].det = det_new(&j->par)))
			goto fail;
		j->n++;
	}
	return j;
fail:
	an_joint_free(j);
	return NULL;
}

void an_joint_free(struct an_joint *j)
{
	if (!j)
		return;
	for (uint32_t i = 0; j->g && i < j->n; i++) {
		det_free(j->g[i].det);
		free(j->g[i].m);
	}
	free(j->g);
	free(j);
}

static void add_member(struct an_joint *j, int group, struct member m,
		       enum det_verdict v)
{
	struct group *g;

	if (!j || group < 0 || (uint32_t)group >= j->n)
		return;
	g = &j->g[group];
	if (v == DET_SPIKE || v == DET_DRIFT)
		g->any_alarm = true;
	if (v == DET_WARMUP)
		return;
	if (g->n == g->cap) {
		uint32_t nc = g->cap ? g->cap * 2 : 16;
		struct member *m = realloc(g->m, nc * sizeof(*m));

		if (!m)
			return;
		g->m = m;
		g->cap = nc;
	}
	g->m[g->n++] = m;
}

void an_joint_member(struct an_joint *j, int group, struct an_series *s,
		     double z, enum det_verdict v)
{
	add_member(j, group, (struct member){ .s = s, .value = s->value, .z = z },
		   v);
}

void an_joint_member_named(struct an_joint *j, int group, const char *name,
			   double value, double z, enum det_verdict v)
{
	add_member(j, group, (struct member){ .name = name, .value = value,
					      .z = z }, v);
}

static int by_z(const void *x, const void *y)
{
	double a = ((const struct member *)x)->z, b = ((const struct member *)y)->z;

	return (a < b) - (a > b);
}

static void joint_alert(struct an_joint *j, struct group *g, double score,
			const struct det_out *o)
{
	struct an_sb msg, ev;
	char name[256], val[48], id[512];
	struct an_alert al = { .kind = "joint", .severity = NT_SEV_WARNING,
			       .value = score, .baseline = o->baseline };

	qsort(g->m, g->n, sizeof(*g->m), by_z);
	an_sb_init(&msg);
	an_sb_init(&ev);
	an_sb_printf(&msg, "%s: %u related series moved together (score %.2f, "
			   "normal %.2f):", g->name, g->n, score, o->baseline);
	an_sb_printf(&ev, "{\"group\":\"%s\",\"score\":", g->name);
	an_sb_json_num(&ev, score);
	an_sb_puts(&ev, ",\"members\":[");
	for (uint32_t i = 0; i < g->n && i < TOP; i++) {
		const struct member *m = &g->m[i];

		if (m->s) {
			an_series_name(j->a, m->s, name, sizeof(name));
			an_fmt_value(m->s->family, m->s->type, m->value, val,
				     sizeof(val));
			an_series_id(m->s, id, sizeof(id));
		} else {
			snprintf(name, sizeof(name), "%s", m->name);
			snprintf(val, sizeof(val), "%.3g", m->value);
			snprintf(id, sizeof(id), "%s", m->name);
		}
		an_sb_printf(&msg, "%s %s %s", i ? "," : "", name, val);
		an_sb_printf(&ev, "%s{\"series\":", i ? "," : "");
		an_sb_json_str(&ev, id);
		an_sb_puts(&ev, ",\"z\":");
		an_sb_json_num(&ev, g->m[i].z);
		an_sb_puts(&ev, ",\"value\":");
		an_sb_json_num(&ev, m->value);
		an_sb_puts(&ev, "}");
	}
	an_sb_puts(&ev, "]}");
	an_alert_publish_sb(j->a, &al, &msg, &ev);
}

void an_joint_tick_end(struct an_joint *j, uint64_t now_ns)
{
	for (uint32_t i = 0; j && i < j->n; i++) {
		struct group *g = &j->g[i];
		double score = 0.0;
		struct det_out o;

		if (g->n >= 2) {
			for (uint32_t k = 0; k < g->n; k++)
				score += g->m[k].z;
			score /= g->n;
			if (det_update(g->det, &j->par, score, &o) == DET_SPIKE &&
			    !g->any_alarm &&
			    (!g->last_alert_ns ||
			     now_ns - g->last_alert_ns >=
				     (uint64_t)j->a->cfg->cooldown_s * 1000000000ULL)) {
				g->last_alert_ns = now_ns;
				joint_alert(j, g, score, &o);
			}
		}
		g->n = 0;
		g->any_alarm = false;
	}
}
