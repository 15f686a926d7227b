/* SPDX-License-Identifier: MIT */
/* Metric families -> series of derived values; see view.h. */
#include "view.h"

#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "an_util.h"

/* Changes of its family a series may miss before it is forgotten. */
#define FORGET_AFTER 30
#define MAX_WHERE 8

struct where {
	char *label;
	const char *glob;
};

struct view_rec {
	struct an_view_def def;
	struct where where[MAX_WHERE];
	uint32_t n_where;
};

/* A view that takes a family, with the family's index of each label. */
struct fam_view {
	uint32_t view;
	int8_t label_idx[AN_VIEW_MAX_LABELS];
	int8_t where_idx[MAX_WHERE];
	uint64_t key0; /* hash of the view and the family */
};

struct family {
	char *name;
	uint32_t type;
	uint64_t changed_ns; /* when a change was last seen */
	double gap_ns;       /* typical time between changes (EWMA) */
	double fp;
	uint32_t fp_n;
	bool fp_set, changed;
	struct fam_view *fv;
	uint32_t n_fv;
};

struct an_view {
	struct view_rec *views;
	uint32_t n_views;
	struct an_map fam_map; /* name hash -> family */
	struct family **fams;
	uint32_t n_fams;
	struct an_map series;  /* key -> series */
	struct an_series **list;
	uint32_t n_list, cap_list;
	uint32_t max_series;
	uint64_t dropped;
	uint64_t tick, now;
	size_t emitted;
};

struct an_view *an_view_new(uint32_t max_series)
{
	struct an_view *v = calloc(1, sizeof(*v));

	if (!v)
		return NULL;
	v->max_series = max_series;
	an_map_init(&v->fam_map);
	an_map_init(&v->series);
	return v;
}

static void series_free(struct an_view *v, struct an_series *s)
{
	const struct an_view_def *d = &v->views[s->view].def;

	if (d->on_drop)
		d->on_drop(d->ctx, s);
	free(s->vals);
	free(s);
}

void an_view_free(struct an_view *v)
{
	if (!v)
		return;
	for (uint32_t i = 0; i < v->n_list; i++)
		series_free(v, v->list[i]);
	free(v->list);
	for (uint32_t i = 0; i < v->n_fams; i++) {
		free(v->fams[i]->name);
		free(v->fams[i]->fv);
		free(v->fams[i]);
	}
	free(v->fams);
	for (uint32_t i = 0; i < v->n_views; i++)
		for (uint32_t j = 0; j < v->views[i].n_where; j++)
			free(v->views[i].where[j].label);
	free(v->views);
	an_map_fini(&v->fam_map);
	an_map_fini(&v->series);
	free(v);
}

int an_view_add(struct an_view *v, const struct an_view_def *def)
{
	struct view_rec *n = realloc(v->views, (v->n_views + 1) * sizeof(*n));
	struct view_rec *r;

	if (!n)
		return -1;
	v->views = n;
	r = &v->views[v->n_views];
	memset(r, 0, sizeof(*r));
	r->def = *def;
	if (r->def.n_labels > AN_VIEW_MAX_LABELS)
		r->def.n_labels = AN_VIEW_MAX_LABELS;
	for (uint32_t i = 0; i < def->n_where && r->n_where < MAX_WHERE; i++) {
		const char *eq = strchr(def->where[i], '=');

		if (!eq)
			continue;
		r->where[r->n_where].label = strndup(def->where[i],
						     (size_t)(eq - def->where[i]));
		if (!r->where[r->n_where].label)
			return -1;
		r->where[r->n_where++].glob = eq + 1;
	}
	return (int)v->n_views++;
}

static int label_index(const struct nt_metric_desc *d, const char *name)
{
	for (uint32_t i = 0; i < d->n_labels; i++)
		if (strcmp(d->label_names[i], name) == 0)
			return (int)i;
	return -1;
}

static bool glob_any(const struct an_view_def *d, const char *name)
{
	for (uint32_t i = 0; i < d->n_globs; i++)
		if (fnmatch(d->globs[i], name, 0) == 0)
			return true;
	return false;
}

/* Whether view `id` takes family `d`; fills fv. */
static bool view_takes(const struct an_view *v, uint32_t id,
		       const struct nt_metric_desc *d, struct fam_view *fv)
{
	const struct view_rec *r = &v->views[id];

	if (!glob_any(&r->def, d->name))
		return false;
	for (uint32_t i = 0; i < r->def.n_labels; i++) {
		int k = label_index(d, r->def.labels[i]);

		if (k < 0)
			return false;
		fv->label_idx[i] = (int8_t)k;
	}
	for (uint32_t i = 0; i < r->n_where; i++) {
		int k = label_index(d, r->where[i].label);

		if (k < 0)
			return false;
		fv->where_idx[i] = (int8_t)k;
	}
	fv->view = id;
	fv->key0 = an_hash_str(an_hash(AN_HASH_SEED, &id, sizeof(id)), d->name);
	return true;
}

static struct family *family_new(struct an_view *v,
				 const struct nt_metric_desc *d, uint64_t h)
{
	struct family *f = calloc(1, sizeof(*f));
	struct family **grown;

	if (!f || !(f->name = strdup(d->name)))
		goto fail;
	f->type = d->type;
	/* the detector's own families are never watched */
	if (strncmp(d->name, "ntcore_anomaly_", 15) != 0) {
		f->fv = calloc(v->n_views ? v->n_views : 1, sizeof(*f->fv));
		if (!f->fv)
			goto fail;
		for (uint32_t i = 0; i < v->n_views; i++)
			if (view_takes(v, i, d, &f->fv[f->n_fv]))
				f->n_fv++;
	}
	grown = realloc(v->fams, (v->n_fams + 1) * sizeof(*grown));
	if (!grown)
		goto fail;
	v->fams = grown;
	if (an_map_put(&v->fam_map, h, f) < 0)
		goto fail;
	v->fams[v->n_fams++] = f;
	return f;
fail:
	if (f) {
		free(f->name);
		free(f->fv);
	}
	free(f);
	return NULL;
}

static bool where_ok(const struct view_rec *r, const struct fam_view *fv,
		     const struct nt_metric_series *s)
{
	for (uint32_t i = 0; i < r->n_where; i++)
		if (fnmatch(r->where[i].glob, s->label_values[fv->where_idx[i]],
			    0) != 0)
			return false;
	return true;
}

static struct an_series *series_new(struct an_view *v, struct family *f,
				    const struct fam_view *fv, uint64_t key,
				    const struct nt_metric_series *ms)
{
	const struct view_rec *r = &v->views[fv->view];
	size_t len = 0;
	struct an_series *s;
	char *p;

	if (v->n_list >= v->max_series) {
		v->dropped++;
		return NULL;
	}
	for (uint32_t i = 0; i < r->def.n_labels; i++)
		len += strlen(ms->label_values[fv->label_idx[i]]) + 1;
	s = calloc(1, sizeof(*s));
	if (!s || !(s->vals = malloc(len ? len : 1)))
		goto fail;
	p = s->vals;
	for (uint32_t i = 0; i < r->def.n_labels; i++) {
		size_t l = strlen(ms->label_values[fv->label_idx[i]]) + 1;

		memcpy(p, ms->label_values[fv->label_idx[i]], l);
		p += l;
	}
	if (v->n_list == v->cap_list) {
		uint32_t nc = v->cap_list ? v->cap_list * 2 : 256;
		struct an_series **g = realloc(v->list, nc * sizeof(*g));

		if (!g)
			goto fail;
		v->list = g;
		v->cap_list = nc;
	}
	if (an_map_put(&v->series, key, s) < 0)
		goto fail;
	s->key = key;
	s->first_ns = v->now;
	s->view = fv->view;
	s->type = f->type;
	s->family = f->name;
	s->fam = f;
	s->n_vals = r->def.n_labels;
	s->label_names = r->def.labels;
	s->slot = v->n_list;
	v->list[v->n_list++] = s;
	return s;
fail:
	if (s)
		free(s->vals);
	free(s);
	v->dropped++;
	return NULL;
}

static void accumulate(struct an_view *v, struct family *f,
		       const struct fam_view *fv,
		       const struct nt_metric_series *ms)
{
	const struct view_rec *r = &v->views[fv->view];
	uint64_t key = fv->key0;
	struct an_series *s;

	for (uint32_t i = 0; i < r->def.n_labels; i++) {
		const char *lv = ms->label_values[fv->label_idx[i]];

		key = an_hash(key, lv, strlen(lv) + 1);
	}
	s = an_map_get(&v->series, key);
	if (!s && !(s = series_new(v, f, fv, key, ms)))
		return;
	if (s->acc_tick != v->tick) {
		s->acc_tick = v->tick;
		s->acc_v = s->acc_c = 0.0;
	}
	if (f->type == NT_METRIC_HISTOGRAM) {
		s->acc_v += ms->sum;
		s->acc_c += (double)ms->count;
	} else {
		s->acc_v += ms->value;
	}
}

static int visit_family(void *arg, const struct nt_metric_desc *d,
			const struct nt_metric_series *ss, uint32_t n,
			uint64_t overflow)
{
	struct an_view *v = arg;
	uint64_t h = an_hash_str(AN_HASH_SEED, d->name);
	struct family *f = an_map_get(&v->fam_map, h);
	double fp = 0.0;

	(void)overflow;
	if (!f && !(f = family_new(v, d, h)))
		return 0;
	if (!f->n_fv)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		fp += d->type == NT_METRIC_HISTOGRAM ?
			      ss[i].sum + (double)ss[i].count : ss[i].value;
	f->changed = !f->fp_set || fp != f->fp || n != f->fp_n;
	f->fp = fp;
	f->fp_n = n;
	f->fp_set = true;
	if (!f->changed)
		return 0;
	if (f->changed_ns && v->now > f->changed_ns) {
		double gap = (double)(v->now - f->changed_ns);

		f->gap_ns = f->gap_ns > 0.0 ? 0.8 * f->gap_ns + 0.2 * gap : gap;
	}
	f->changed_ns = v->now;
	for (uint32_t k = 0; k < f->n_fv; k++)
		for (uint32_t i = 0; i < n; i++)
			if (where_ok(&v->views[f->fv[k].view], &f->fv[k], &ss[i]))
				accumulate(v, f, &f->fv[k], &ss[i]);
	return 0;
}

/* The value a series' new snapshot gives; false when it gives none. */
static bool derive(struct an_series *s, uint64_t now, double *out)
{
	const struct family *f = s->fam;
	bool ok = false;

	/* A change seen soon after the previous one (a snapshot forced by a
	 * slow step right after a timed one, or a late timer) carries a whole
	 * producer interval of counts over a sliver of time: a rate made of
	 * it was a burst x300 that never happened. Such a change is held and
	 * joined to the next one. */
	if (s->type == NT_METRIC_COUNTER && s->have_cum && f->gap_ns > 0.0 &&
	    (double)(now - s->cum_ns) < 0.5 * f->gap_ns)
		return false;
	if (s->type == NT_METRIC_GAUGE) {
		*out = s->acc_v;
		ok = true;
	} else if (s->have_cum && s->type == NT_METRIC_COUNTER) {
		double d = s->acc_v - s->cum_v;

		ok = d >= 0.0 && now > s->cum_ns;
		if (ok)
			*out = d / ((double)(now - s->cum_ns) / 1e9);
	} else if (s->have_cum) {
		double dc = s->acc_c - s->cum_c;

		ok = dc > 0.0;
		if (ok)
			*out = (s->acc_v - s->cum_v) / dc;
	}
	s->cum_v = s->acc_v;
	s->cum_c = s->acc_c;
	s->cum_ns = now;
	s->have_cum = true;
	return ok;
}

static void forget(struct an_view *v, struct an_series *s)
{
	uint32_t slot = s->slot;

	an_map_del(&v->series, s->key);
	v->list[slot] = v->list[--v->n_list];
	v->list[slot]->slot = slot;
	series_free(v, s);
}

size_t an_view_tick(struct an_view *v, const struct nt_host *host,
		    struct nt_instance *inst, uint64_t now_ns)
{
	v->tick++;
	v->now = now_ns;
	v->emitted = 0;
	host->metrics_visit(inst, visit_family, v);
	for (uint32_t i = 0; i < v->n_list;) {
		struct an_series *s = v->list[i];
		const struct an_view_def *d = &v->views[s->view].def;
		double val;

		if (!((struct family *)s->fam)->changed) {
			i++;
			continue;
		}
		if (s->acc_tick != v->tick) {
			if (++s->missing > FORGET_AFTER) {
				forget(v, s);
				continue;
			}
			i++;
			continue;
		}
		s->missing = 0;
		if (derive(s, now_ns, &val)) {
			s->value = val;
			s->value_ns = now_ns;
			v->emitted++;
			if (d->on_sample)
				d->on_sample(d->ctx, s, val, now_ns);
		}
		i++;
	}
	for (uint32_t i = 0; i < v->n_fams; i++)
		v->fams[i]->changed = false;
	return v->emitted;
}

struct an_series *an_view_find(const struct an_view *v, uint32_t id,
			       const char *family, const char *vals,
			       uint32_t n)
{
	uint64_t key = an_hash_str(an_hash(AN_HASH_SEED, &id, sizeof(id)),
				   family);

	for (uint32_t i = 0; i < n; i++) {
		size_t l = strlen(vals) + 1;

		key = an_hash(key, vals, l);
		vals += l;
	}
	return an_map_get(&v->series, key);
}

const char *an_series_label(const struct an_series *s, uint32_t i)
{
	const char *p = s->vals;

	if (i >= s->n_vals)
		return NULL;
	while (i--)
		p += strlen(p) + 1;
	return p;
}

const char *an_series_label_by(const struct an_series *s, const char *name)
{
	for (uint32_t i = 0; i < s->n_vals; i++)
		if (strcmp(s->label_names[i], name) == 0)
			return an_series_label(s, i);
	return NULL;
}

void an_view_each(struct an_view *v, uint32_t id,
		  void (*fn)(void *ctx, struct an_series *s), void *ctx)
{
	for (uint32_t i = 0; i < v->n_list; i++)
		if (v->list[i]->view == id)
			fn(ctx, v->list[i]);
}

uint32_t an_view_series(const struct an_view *v)
{
	return v->n_list;
}

uint64_t an_view_dropped(const struct an_view *v)
{
	return v->dropped;
}
