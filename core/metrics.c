/* SPDX-License-Identifier: MIT */
#include "metrics.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct series {
	char **labels; /* n_labels strings, one allocation each */
	uint64_t hash;
	double value;
	uint64_t *buckets; /* histograms: n_buckets + 1 counts */
	uint64_t count;
	double sum;
};

struct nt_metric {
	struct nt_registry *reg;
	/* Guards this family's series: an update or a scrape of one family
	 * never waits on another. Families live until the registry's fini. */
	pthread_mutex_t lock;
	struct nt_metric_desc desc; /* strings below are owned copies */
	char *name, *help;
	char **label_names;
	double *buckets;
	struct series *series;
	size_t n_series, cap_series;
	uint32_t *index; /* open addressing: series position + 1, 0 empty */
	size_t index_cap;
	uint64_t overflow;
	/* Identity labels: the declared labels map to the exposed ones
	 * (labels.h); NULL when the family is exposed as declared. */
	struct nt_label_map *lmap;
	char **decl_names; /* the declared label names, n_decl of them */
	uint32_t n_decl;
	/* Without pid, one exposed series sums several processes. A plugin
	 * that sets a per-process value (a total read from a BPF map, an RSS)
	 * must add to the sum, not replace it: the shadow keeps the last
	 * value of each declared series, and a set adds the difference.
	 * Only for additive families (additive()). */
	struct nt_metric *shadow;
};

#define NT_SHADOW_MAX_SERIES 65536

/* Room for the labels of a family: declared, plus identity ones. */
#define NT_LABELS_ROOM 48

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

void nt_registry_init(struct nt_registry *reg)
{
	memset(reg, 0, sizeof(*reg));
	pthread_mutex_init(&reg->lock, NULL);
}

static void series_free(struct nt_metric *m, struct series *s)
{
	for (uint32_t i = 0; i < m->desc.n_labels; i++)
		free(s->labels[i]);
	free(s->labels);
	free(s->buckets);
}

static void family_free(struct nt_metric *m);
static struct nt_metric *family_new(struct nt_registry *reg,
				    const struct nt_metric_desc *d, bool plain);

static void family_free(struct nt_metric *m)
{
	for (size_t i = 0; i < m->n_series; i++)
		series_free(m, &m->series[i]);
	for (uint32_t i = 0; i < m->desc.n_labels; i++)
		free(m->label_names[i]);
	free(m->label_names);
	for (uint32_t i = 0; m->decl_names && i < m->n_decl; i++)
		free(m->decl_names[i]);
	free(m->decl_names);
	free(m->lmap);
	if (m->shadow)
		family_free(m->shadow);
	free(m->series);
	free(m->index);
	free(m->buckets);
	free(m->name);
	free(m->help);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

void nt_registry_fini(struct nt_registry *reg)
{
	for (size_t i = 0; i < reg->n_families; i++)
		family_free(reg->families[i]);
	free(reg->families);
	pthread_mutex_destroy(&reg->lock);
}

static bool same_shape(const struct nt_metric *m, const struct nt_metric_desc *d)
{
	if (m->desc.type != d->type || m->n_decl != d->n_labels)
		return false;
	for (uint32_t i = 0; i < d->n_labels; i++)
		if (strcmp(m->decl_names[i], d->label_names[i]) != 0)
			return false;
	return true;
}

/* Whether a family's values of several processes add up: counters and
 * histograms do, and gauges of bytes (memory held by a pod's processes).
 * Other gauges (a step's duration, a utilization ratio) do not: without
 * pid their series holds the value last set by any of its processes. */
static bool additive(const struct nt_metric_desc *d)
{
	size_t n = strlen(d->name);

	return d->type != NT_METRIC_GAUGE ||
	       (n > 6 && strcmp(d->name + n - 6, "_bytes") == 0);
}

/* The declared labels, and the exposed ones the policy makes of them. */
static int family_labels(struct nt_metric *m, const struct nt_metric_desc *d,
			 bool plain)
{
	const struct nt_label_policy *p = m->reg->policy;
	const char *const *names = d->label_names;

	m->n_decl = d->n_labels;
	m->decl_names = calloc(d->n_labels + 1, sizeof(char *));
	if (!m->decl_names)
		return -1;
	for (uint32_t i = 0; i < d->n_labels; i++)
		if (!(m->decl_names[i] = dup_or_empty(d->label_names[i])))
			return -1;
	if (p && !plain)
		m->lmap = nt_label_map_build(nt_label_policy_mask(p, d->name),
					     d->label_names, d->n_labels);
	if (m->lmap && m->lmap->pid_dropped && additive(d)) {
		struct nt_metric_desc sd = *d;
		sd.max_series = NT_SHADOW_MAX_SERIES;
		if (!(m->shadow = family_new(m->reg, &sd, true)))
			return -1;
	}
	if (m->lmap) {
		m->desc.n_labels = m->lmap->n_eff;
		names = m->lmap->eff_names;
	}
	m->label_names = calloc(m->desc.n_labels + 1, sizeof(char *));
	if (!m->label_names)
		return -1;
	for (uint32_t i = 0; i < m->desc.n_labels; i++)
		if (!(m->label_names[i] = dup_or_empty(names[i])))
			return -1;
	return 0;
}

/* `plain`: labels as declared, whatever the policy (a shadow). */
static struct nt_metric *family_new(struct nt_registry *reg,
				    const struct nt_metric_desc *d, bool plain)
{
	struct nt_metric *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->reg = reg;
	pthread_mutex_init(&m->lock, NULL);
	m->desc = *d;
	m->name = dup_or_empty(d->name);
	m->help = dup_or_empty(d->help);
	m->buckets = calloc(d->n_buckets + 1, sizeof(double));
	if (!m->name || !m->help || !m->buckets || family_labels(m, d, plain)) {
		m->desc.n_labels = m->label_names ? m->desc.n_labels : 0;
		family_free(m);
		return NULL;
	}
	if (d->n_buckets)
		memcpy(m->buckets, d->buckets, d->n_buckets * sizeof(double));
	m->desc.name = m->name;
	m->desc.help = m->help;
	m->desc.label_names = (const char *const *)m->label_names;
	m->desc.buckets = m->buckets;
	if (!m->desc.max_series)
		m->desc.max_series = NT_METRICS_DEFAULT_MAX_SERIES;
	return m;
}

static bool valid_name(const char *name)
{
	if (!name || !*name || (name[0] >= '0' && name[0] <= '9'))
		return false;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '_' || *p == ':'))
			return false;
	return true;
}

static const char *check_desc(const struct nt_metric_desc *d)
{
	if (!valid_name(d->name))
		return "invalid metric name";
	if (d->type < NT_METRIC_COUNTER || d->type > NT_METRIC_HISTOGRAM)
		return "invalid metric type";
	if (d->n_labels && !d->label_names)
		return "labels declared without names";
	if (d->n_labels > NT_METRICS_MAX_LABELS)
		return "too many labels";
	for (uint32_t i = 0; i < d->n_labels; i++)
		if (!valid_name(d->label_names[i]) ||
		    strncmp(d->label_names[i], "__", 2) == 0 ||
		    strcmp(d->label_names[i], "le") == 0)
			return "invalid label name";
	if (d->type == NT_METRIC_HISTOGRAM) {
		if (!d->n_buckets || !d->buckets)
			return "histogram without buckets";
		for (uint32_t i = 1; i < d->n_buckets; i++)
			if (!(d->buckets[i] > d->buckets[i - 1]))
				return "histogram buckets not ascending";
	}
	return NULL;
}

struct nt_metric *nt_registry_register(struct nt_registry *reg,
				       const struct nt_metric_desc *desc,
				       const char **why)
{
	struct nt_metric *found = NULL;

	*why = check_desc(desc);
	if (*why)
		return NULL;
	pthread_mutex_lock(&reg->lock);
	for (size_t i = 0; i < reg->n_families; i++)
		if (strcmp(reg->families[i]->name, desc->name) == 0) {
			found = reg->families[i];
			break;
		}
	if (found) {
		if (!same_shape(found, desc)) {
			*why = "a metric of that name exists with another type or labels";
			found = NULL;
		}
		goto out;
	}
	if (reg->n_families == reg->cap_families) {
		size_t cap = reg->cap_families ? reg->cap_families * 2 : 32;
		struct nt_metric **grown =
			realloc(reg->families, cap * sizeof(*grown));
		if (!grown)
			goto oom;
		reg->families = grown;
		reg->cap_families = cap;
	}
	found = family_new(reg, desc, false);
	if (!found)
		goto oom;
	reg->families[reg->n_families++] = found;
	goto out;
oom:
	*why = "out of memory";
out:
	pthread_mutex_unlock(&reg->lock);
	return found;
}

static uint64_t labels_hash(const struct nt_metric *m, const char *const *labels)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */

	for (uint32_t i = 0; i < m->desc.n_labels; i++) {
		for (const char *p = labels[i] ? labels[i] : ""; *p; p++)
			h = (h ^ (uint8_t)*p) * 1099511628211ull;
		h = (h ^ 0xff) * 1099511628211ull;
	}
	return h;
}

static bool labels_equal(const struct nt_metric *m, const struct series *s,
			 const char *const *labels)
{
	for (uint32_t i = 0; i < m->desc.n_labels; i++)
		if (strcmp(s->labels[i], labels[i] ? labels[i] : "") != 0)
			return false;
	return true;
}

/* Slot in the index holding the series, or the empty slot where it goes. */
static size_t index_slot(const struct nt_metric *m, uint64_t hash,
			 const char *const *labels)
{
	size_t mask = m->index_cap - 1;

	for (size_t i = hash & mask;; i = (i + 1) & mask) {
		uint32_t pos = m->index[i];
		if (!pos)
			return i;
		const struct series *s = &m->series[pos - 1];
		if (s->hash == hash && labels_equal(m, s, labels))
			return i;
	}
}

static int index_rebuild(struct nt_metric *m, size_t cap)
{
	uint32_t *index = calloc(cap, sizeof(*index));

	if (!index)
		return -1;
	free(m->index);
	m->index = index;
	m->index_cap = cap;
	for (size_t p = 0; p < m->n_series; p++) {
		size_t mask = cap - 1, i = m->series[p].hash & mask;
		while (index[i])
			i = (i + 1) & mask;
		index[i] = (uint32_t)p + 1;
	}
	return 0;
}

static struct series *series_new(struct nt_metric *m, uint64_t hash,
				 const char *const *labels)
{
	if (m->n_series == m->cap_series) {
		size_t cap = m->cap_series ? m->cap_series * 2 : 16;
		struct series *grown = realloc(m->series, cap * sizeof(*grown));
		if (!grown)
			return NULL;
		m->series = grown;
		m->cap_series = cap;
	}
	struct series *s = &m->series[m->n_series];
	memset(s, 0, sizeof(*s));
	s->hash = hash;
	s->labels = calloc(m->desc.n_labels + 1, sizeof(char *));
	if (!s->labels)
		return NULL;
	for (uint32_t i = 0; i < m->desc.n_labels; i++)
		if (!(s->labels[i] = dup_or_empty(labels[i])))
			goto fail;
	if (m->desc.type == NT_METRIC_HISTOGRAM &&
	    !(s->buckets = calloc(m->desc.n_buckets + 1, sizeof(uint64_t))))
		goto fail;
	m->n_series++;
	return s;
fail:
	series_free(m, s);
	return NULL;
}

/* Find or create a series; NULL when the family is at its bound (counted). */
static struct series *series_get(struct nt_metric *m, const char *const *labels,
				 bool create)
{
	static const char *const no_labels[NT_LABELS_ROOM] = {0};
	uint64_t hash;

	if (!labels)
		labels = no_labels;
	hash = labels_hash(m, labels);
	if ((m->n_series + 1) * 2 > m->index_cap &&
	    index_rebuild(m, m->index_cap ? m->index_cap * 2 : 32) < 0)
		return NULL;
	size_t slot = index_slot(m, hash, labels);
	if (m->index[slot])
		return &m->series[m->index[slot] - 1];
	if (!create)
		return NULL;
	if (m->n_series >= m->desc.max_series) {
		m->overflow++;
		return NULL;
	}
	struct series *s = series_new(m, hash, labels);
	if (s)
		m->index[slot] = (uint32_t)m->n_series;
	return s;
}

/* The exposed labels of an update given in declared labels: the identity
 * is resolved here, before the family's lock is taken. */
#define MAP_LABELS(m, labels)                                                  \
	const char *eff_[NT_LABELS_ROOM];                                      \
	struct nt_label_scratch scratch_;                                      \
	if ((m)->lmap && (labels)) {                                           \
		nt_label_map_apply((m)->lmap, (m)->reg->policy, (labels), eff_, \
				   &scratch_);                                 \
		(labels) = eff_;                                               \
	}

void nt_metric_add(struct nt_metric *m, const char *const *labels, double delta)
{
	MAP_LABELS(m, labels);
	pthread_mutex_lock(&m->lock);
	struct series *s = series_get(m, labels, true);
	if (s)
		s->value += delta;
	pthread_mutex_unlock(&m->lock);
}

/* The declared series' last value becomes `value`; returns the change,
 * or false when the shadow is full (counted as the family's overflow). */
static bool shadow_swap(struct nt_metric *m, const char *const *decl,
			double value, double *delta)
{
	struct nt_metric *sh = m->shadow;

	pthread_mutex_lock(&sh->lock);
	struct series *s = series_get(sh, decl, true);
	if (s) {
		*delta = value - s->value;
		s->value = value;
	}
	pthread_mutex_unlock(&sh->lock);
	if (!s) {
		pthread_mutex_lock(&m->lock);
		m->overflow++;
		pthread_mutex_unlock(&m->lock);
	}
	return s != NULL;
}

void nt_metric_set(struct nt_metric *m, const char *const *labels, double value)
{
	double delta;

	if (m->shadow && labels) {
		if (shadow_swap(m, labels, value, &delta) && delta != 0)
			nt_metric_add(m, labels, delta);
		return;
	}
	MAP_LABELS(m, labels);
	pthread_mutex_lock(&m->lock);
	struct series *s = series_get(m, labels, true);
	if (s)
		s->value = value;
	pthread_mutex_unlock(&m->lock);
}

void nt_metric_observe(struct nt_metric *m, const char *const *labels,
		       double value)
{
	if (m->desc.type != NT_METRIC_HISTOGRAM)
		return;
	MAP_LABELS(m, labels);
	pthread_mutex_lock(&m->lock);
	struct series *s = series_get(m, labels, true);
	if (s) {
		uint32_t b = 0;
		while (b < m->desc.n_buckets && value > m->buckets[b])
			b++;
		s->buckets[b]++;
		s->count++;
		s->sum += value;
	}
	pthread_mutex_unlock(&m->lock);
}

/* hist_set without pid: the counts since the declared series' last set
 * (all of them after a reset) are added to the shared series. */
static void shadow_hist_set(struct nt_metric *m, const char *const *decl,
			    const uint64_t *counts, double sum)
{
	struct nt_metric *sh = m->shadow;
	uint32_t nb = m->desc.n_buckets + 1;
	uint64_t stack[64], *delta = nb <= 64 ? stack : malloc(nb * sizeof(*delta));
	double dsum = sum;
	bool reset = false;

	if (!delta)
		return;
	pthread_mutex_lock(&sh->lock);
	struct series *s = series_get(sh, decl, true);
	for (uint32_t b = 0; s && b < nb; b++)
		reset |= counts[b] < s->buckets[b];
	for (uint32_t b = 0; s && b < nb; b++) {
		delta[b] = reset ? counts[b] : counts[b] - s->buckets[b];
		s->buckets[b] = counts[b];
	}
	if (s) {
		dsum = reset ? sum : sum - s->sum;
		s->sum = sum;
	}
	pthread_mutex_unlock(&sh->lock);
	MAP_LABELS(m, decl);
	pthread_mutex_lock(&m->lock);
	struct series *t = s ? series_get(m, decl, true) : NULL;
	for (uint32_t b = 0; t && b < nb; b++) {
		t->buckets[b] += delta[b];
		t->count += delta[b];
	}
	if (t)
		t->sum += dsum;
	if (!s)
		m->overflow++;
	pthread_mutex_unlock(&m->lock);
	if (delta != stack)
		free(delta);
}

/* remove without pid: a gauge's sum loses the process's part; a counter
 * or histogram keeps what it counted (it must not go down). */
static void shadow_remove(struct nt_metric *m, const char *const *decl)
{
	struct nt_metric *sh = m->shadow;
	double last = 0;

	pthread_mutex_lock(&sh->lock);
	struct series *s = series_get(sh, decl, false);
	if (s) {
		size_t pos = (size_t)(s - sh->series);
		last = s->value;
		series_free(sh, s);
		sh->series[pos] = sh->series[--sh->n_series];
		index_rebuild(sh, sh->index_cap);
	}
	pthread_mutex_unlock(&sh->lock);
	if (m->desc.type == NT_METRIC_GAUGE && last != 0)
		nt_metric_add(m, decl, -last);
}

void nt_metric_hist_set(struct nt_metric *m, const char *const *labels,
			const uint64_t *counts, double sum)
{
	if (m->desc.type != NT_METRIC_HISTOGRAM)
		return;
	if (m->shadow && labels) {
		shadow_hist_set(m, labels, counts, sum);
		return;
	}
	MAP_LABELS(m, labels);
	pthread_mutex_lock(&m->lock);
	struct series *s = series_get(m, labels, true);
	if (s) {
		s->count = 0;
		for (uint32_t b = 0; b <= m->desc.n_buckets; b++) {
			s->buckets[b] = counts[b];
			s->count += counts[b];
		}
		s->sum = sum;
	}
	pthread_mutex_unlock(&m->lock);
}

void nt_metric_remove(struct nt_metric *m, const char *const *labels)
{
	/* Without pid, a series holds every process of its comm, container
	 * or pod: one process's exit does not end it. */
	if (m->shadow) {
		if (labels)
			shadow_remove(m, labels);
		return;
	}
	if (m->lmap && m->lmap->pid_dropped)
		return; /* the last value any of its processes set stays */
	MAP_LABELS(m, labels);
	pthread_mutex_lock(&m->lock);
	struct series *s = series_get(m, labels, false);
	if (s) {
		size_t pos = (size_t)(s - m->series);
		series_free(m, s);
		m->series[pos] = m->series[--m->n_series];
		index_rebuild(m, m->index_cap);
	}
	pthread_mutex_unlock(&m->lock);
}

double nt_metric_value(struct nt_metric *m, const char *const *labels)
{
	double v = 0;

	MAP_LABELS(m, labels);
	pthread_mutex_lock(&m->lock);
	struct series *s = series_get(m, labels, false);
	if (s)
		v = m->desc.type == NT_METRIC_HISTOGRAM ? (double)s->count
							: s->value;
	pthread_mutex_unlock(&m->lock);
	return v;
}

uint64_t nt_metric_overflow(struct nt_metric *m)
{
	pthread_mutex_lock(&m->lock);
	uint64_t n = m->overflow;
	pthread_mutex_unlock(&m->lock);
	return n;
}

size_t nt_metric_series_count(struct nt_metric *m)
{
	pthread_mutex_lock(&m->lock);
	size_t n = m->n_series;
	pthread_mutex_unlock(&m->lock);
	return n;
}

int nt_registry_visit(struct nt_registry *reg, nt_metric_visit_fn fn, void *arg)
{
	struct nt_metric_series *view = NULL;
	size_t view_cap = 0, n_families;
	int stop = 0;

	/* Families are only ever appended, and freed at fini: the count read
	 * under the registry lock bounds a safe walk. Each family is seen
	 * whole (no torn histogram) under its own lock. */
	pthread_mutex_lock(&reg->lock);
	n_families = reg->n_families;
	pthread_mutex_unlock(&reg->lock);
	for (size_t f = 0; f < n_families && !stop; f++) {
		pthread_mutex_lock(&reg->lock);
		struct nt_metric *m = reg->families[f];
		pthread_mutex_unlock(&reg->lock);
		pthread_mutex_lock(&m->lock);
		if (m->n_series > view_cap) {
			struct nt_metric_series *grown =
				realloc(view, m->n_series * sizeof(*grown));
			if (!grown) {
				pthread_mutex_unlock(&m->lock);
				stop = -1;
				break;
			}
			view = grown;
			view_cap = m->n_series;
		}
		for (size_t i = 0; i < m->n_series; i++) {
			const struct series *s = &m->series[i];
			view[i] = (struct nt_metric_series){
				.label_values = (const char *const *)s->labels,
				.value = s->value,
				.bucket_counts = s->buckets,
				.count = s->count,
				.sum = s->sum,
			};
		}
		stop = fn(arg, &m->desc, view, (uint32_t)m->n_series, m->overflow);
		pthread_mutex_unlock(&m->lock);
	}
	free(view);
	return stop < 0 ? -1 : 0;
}
