/* SPDX-License-Identifier: MIT */
/* Sampling metric families into counter tracks (counters.h). */
#include "counters.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonl.h"

void ctr_init(struct ctr_sampler *cs, const struct nt_strlist *patterns,
	      uint32_t max_series, uint64_t refresh_ns)
{
	memset(cs, 0, sizeof(*cs));
	cs->patterns = patterns;
	cs->max = max_series;
	cs->refresh_ns = refresh_ns;
}

static bool wanted(const struct ctr_sampler *cs, const char *family)
{
	for (uint32_t i = 0; i < cs->patterns->n; i++)
		if (fnmatch(cs->patterns->v[i], family, 0) == 0)
			return true;
	return false;
}

static const char *unit_of(const char *family)
{
	static const char *const units[] = {"bytes", "seconds", "ratio", "ns", "total"};
	size_t n = strlen(family);

	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		size_t m = strlen(units[i]);
		if (n > m && family[n - m - 1] == '_' &&
		    strcmp(family + n - m, units[i]) == 0)
			return strcmp(units[i], "total") == 0 ? "count" : units[i];
	}
	return "";
}

/* "family{a=x,b=y}" without the pid label, which names the process. */
static char *display_name(const struct nt_metric_desc *d, const char *const *lv,
			  uint32_t *pid)
{
	struct nt_buf b = {0};
	bool any = false;

	nt_buf_put(&b, d->name, strlen(d->name));
	for (uint32_t i = 0; i < d->n_labels; i++) {
		if (strcmp(d->label_names[i], "pid") == 0) {
			*pid = (uint32_t)strtoul(lv[i], NULL, 10);
			continue;
		}
		nt_buf_printf(&b, "%s%s=%s", any ? "," : "{", d->label_names[i], lv[i]);
		any = true;
	}
	if (any)
		nt_buf_put(&b, "}", 1);
	if (b.oom) {
		nt_buf_free(&b);
		return NULL;
	}
	return b.p;
}

static struct ctr_entry *entry_new(struct ctr_sampler *cs,
				   const struct nt_metric_desc *d,
				   const char *const *lv)
{
	struct ctr_entry *e = calloc(1, sizeof(*e));
	struct ctr_entry **grown = realloc(cs->series, (cs->n + 1) * sizeof(*grown));

	if (grown)
		cs->series = grown;
	if (!e || !grown || !(e->s.name = display_name(d, lv, &e->s.pid)) ||
	    !(e->s.family = strdup(d->name))) {
		if (e)
			free((char *)e->s.name);
		free(e);
		return NULL;
	}
	e->s.unit = unit_of(d->name);
	e->s.id = cs->n + 1;
	cs->series[cs->n++] = e;
	return e;
}

static struct ctr_entry *entry_of(struct ctr_sampler *cs,
				  const struct nt_metric_desc *d,
				  const char *const *lv)
{
	struct nt_buf key = {0};

	nt_buf_put(&key, d->name, strlen(d->name) + 1);
	for (uint32_t i = 0; i < d->n_labels; i++)
		nt_buf_put(&key, lv[i], strlen(lv[i]) + 1);
	struct ctr_entry *e = key.oom ? NULL : tmap_get(&cs->by_key, key.p, key.len);
	if (!e && !key.oom && cs->n < cs->max) {
		e = entry_new(cs, d, lv);
		if (e && tmap_put(&cs->by_key, key.p, key.len, e))
			e = NULL; /* stays in cs->series, freed at fini */
	}
	nt_buf_free(&key);
	return e;
}

int ctr_visit(void *arg, const struct nt_metric_desc *desc,
	      const struct nt_metric_series *series, uint32_t n_series,
	      uint64_t overflow)
{
	struct ctr_sampler *cs = arg;

	(void)overflow;
	if (desc->type == NT_METRIC_HISTOGRAM || !wanted(cs, desc->name))
		return 0;
	for (uint32_t i = 0; i < n_series; i++) {
		struct ctr_entry *e = entry_of(cs, desc, series[i].label_values);
		if (!e) {
			cs->overflow++;
			continue;
		}
		if (e->seen && e->last == series[i].value &&
		    (!cs->refresh_ns || cs->now < e->emitted_ns + cs->refresh_ns))
			continue;
		e->seen = true;
		e->last = series[i].value;
		e->emitted_ns = cs->now;
		if (cs->emit)
			cs->emit(cs->arg, cs->now, &e->s, e->last);
	}
	return 0;
}

void ctr_sample(struct ctr_sampler *cs, const struct nt_host *host,
		struct nt_instance *inst, uint64_t now_ns, ctr_emit_fn emit,
		void *arg)
{
	if (!cs->patterns || !cs->patterns->n)
		return;
	cs->now = now_ns;
	cs->emit = emit;
	cs->arg = arg;
	host->metrics_visit(inst, ctr_visit, cs);
	cs->emit = NULL;
}

const struct ctr_series *ctr_series_of(const struct ctr_sampler *cs, uint32_t id)
{
	return id && id <= cs->n ? &cs->series[id - 1]->s : NULL;
}

void ctr_fini(struct ctr_sampler *cs)
{
	for (uint32_t i = 0; i < cs->n; i++) {
		free((char *)cs->series[i]->s.name);
		free((char *)cs->series[i]->s.family);
		free(cs->series[i]);
	}
	free(cs->series);
	tmap_free(&cs->by_key, NULL);
	memset(cs, 0, sizeof(*cs));
}
