/* SPDX-License-Identifier: MIT */
/* Aggregation of events for the report page (agg.h). */
#include "agg.h"

#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void agg_init(struct agg *a, uint32_t flame_nodes,
	      const struct nt_strlist *mem_families)
{
	memset(a, 0, sizeof(*a));
	a->flame_nodes = flame_nodes;
	flame_init(&a->calls, flame_nodes, "calls");
	flame_init(&a->gpu, flame_nodes, "ns");
	a->mem_families = mem_families;
}

static struct agg_stat *stat_of(struct tmap *m, const char *name, uint32_t len)
{
	struct agg_stat *st = tmap_get(m, name, len);

	if (st)
		return st;
	if (tmap_count(m) >= AGG_MAX_NAMES) {
		name = "[other]";
		len = 7;
		if ((st = tmap_get(m, name, len)))
			return st;
	}
	st = calloc(1, sizeof(*st));
	if (st && tmap_put(m, name, len, st)) {
		free(st);
		st = NULL;
	}
	return st;
}

static void stat_add(struct tmap *m, const char *name, uint32_t len, uint64_t ns)
{
	struct agg_stat *st = stat_of(m, name, len);

	if (!st)
		return;
	st->count++;
	st->total_ns += ns;
	if (ns > st->max_ns)
		st->max_ns = ns;
}

static char *copy_str(const struct nt_event_hdr *ev, const struct nt_field *f)
{
	uint32_t len = 0;
	const char *s = tr_field_str(ev, f, &len);

	return s ? strndup(s, len) : NULL;
}

static void add_alert(struct agg *a, const struct nt_event_hdr *ev,
		      const struct tr_class *c)
{
	if (a->n_alerts >= AGG_MAX_ALERTS) {
		a->alerts_over++;
		return;
	}
	struct agg_alert *al = &a->alerts[a->n_alerts++];
	al->ts = ev->ts_ns;
	al->severity = (uint32_t)tr_field_uint(ev, c->severity);
	al->pid = ev->pid;
	al->tid = ev->tid;
	memcpy(al->comm, ev->comm, NT_COMM_LEN);
	al->comm[NT_COMM_LEN] = '\0';
	al->schema = strdup(c->schema->name);
	al->message = copy_str(ev, c->message);
	al->evidence = copy_str(ev, c->evidence);
	al->stack = copy_str(ev, c->stack);
}

static void add_report(struct agg *a, const struct nt_event_hdr *ev,
		       const struct tr_class *c)
{
	const char *name = c->schema->name;
	char *text = copy_str(ev, c->text);
	char *old = tmap_get(&a->reports, name, strlen(name));

	if (!text)
		return;
	if (tmap_put(&a->reports, name, strlen(name), text)) {
		free(text);
		return;
	}
	free(old);
}

static void add_device(struct agg *a, const struct nt_event_hdr *ev,
		       const struct tr_class *c)
{
	uint64_t start = tr_field_uint(ev, c->start), end = tr_field_uint(ev, c->end);
	uint64_t dur = end > start ? end - start : 0;
	uint32_t len = 0, slen = 0;
	const char *name = tr_event_name(c, ev, &len);
	const char *stack = tr_field_str(ev, c->py_stack, &slen);
	bool leaf_first = false;

	if (!c->launch_ts)
		return; /* not work launched onto the GPU (a wait): no GPU time */
	stat_add(&a->kernels, name, len, dur);
	char leaf[256];

	if (!stack || !slen) {
		stack = tr_field_str(ev, c->stack, &slen);
		leaf_first = c->stack_leaf_first;
	}
	/* the device activity itself, told apart from a host frame of the
	 * same name (a kernel's host stub) */
	int n = snprintf(leaf, sizeof(leaf), "[gpu] %.*s", (int)len, name);
	flame_add(&a->gpu, NULL, stack, stack ? slen : 0, leaf_first, leaf,
		  n < 0 ? 0 : (size_t)n < sizeof(leaf) ? (size_t)n : sizeof(leaf) - 1, dur);
}

static struct flame *samples_of(struct agg *a, const struct tr_class *c)
{
	const char *name = c->schema->name;
	const char *unit = c->count->unit && *c->count->unit ? c->count->unit : "count";

	for (uint32_t i = 0; i < a->n_samples; i++)
		if (strcmp(a->samples[i].schema, name) == 0)
			return &a->samples[i].f;
	if (a->n_samples == AGG_MAX_SAMPLE_FLAMES)
		return NULL;
	struct agg_samples *s = &a->samples[a->n_samples++];
	snprintf(s->schema, sizeof(s->schema), "%s", name);
	snprintf(s->unit, sizeof(s->unit), "%s",
		 strcmp(unit, "count") == 0 ? "samples" : unit);
	flame_init(&s->f, a->flame_nodes, s->unit);
	return &s->f;
}

static void add_sample(struct agg *a, const struct nt_event_hdr *ev,
		       const struct tr_class *c)
{
	uint32_t slen = 0, tlen = 0;
	const char *stack = tr_field_str(ev, c->stack, &slen);
	const char *state = tr_field_str(ev, c->state, &tlen);
	struct flame *f = samples_of(a, c);
	char root[40];

	if (!f) {
		a->samples_over++;
		return;
	}
	if (!stack)
		return;
	if (state && tlen)
		snprintf(root, sizeof(root), "[%.*s]", (int)tlen, state);
	flame_add(f, state && tlen ? root : NULL, stack, slen, c->stack_leaf_first,
		  NULL, 0, tr_field_uint(ev, c->count));
}

static void add_count(struct tmap *m, const char *name)
{
	size_t len = strlen(name);
	uintptr_t n = (uintptr_t)tmap_get(m, name, len);

	tmap_put(m, name, len, (void *)(n + 1));
}

void agg_event(struct agg *a, const struct nt_event_hdr *ev,
	       const struct tr_class *c)
{
	uint32_t len = 0, slen = 0;

	a->events++;
	if (!a->first_ts || ev->ts_ns < a->first_ts)
		a->first_ts = ev->ts_ns;
	if (ev->ts_ns > a->last_ts)
		a->last_ts = ev->ts_ns;
	add_count(&a->schemas, c->schema->name);
	if (c->report)
		add_report(a, ev, c);
	switch (c->kind) {
	case TR_ALERT: add_alert(a, ev, c); break;
	case TR_DEVICE_SLICE: add_device(a, ev, c); break;
	case TR_SAMPLE: add_sample(a, ev, c); break;
	case TR_HOST_SLICE: {
		const char *name = tr_event_name(c, ev, &len);
		const char *stack = tr_field_str(ev, c->stack, &slen);
		if (c->enter || (!c->api_name && !c->name))
			break; /* its return is counted; not a named call */
		stat_add(&a->apis, name, len, tr_field_uint(ev, c->duration));
		if (stack && slen)
			flame_add(&a->calls, NULL, stack, slen, c->stack_leaf_first,
				  NULL, 0, 1);
		break;
	}
	default:
		break;
	}
}

static bool mem_family(const struct agg *a, const char *family)
{
	for (uint32_t i = 0; a->mem_families && i < a->mem_families->n; i++)
		if (fnmatch(a->mem_families->v[i], family, 0) == 0)
			return true;
	return false;
}

static struct agg_series *mem_series(struct agg *a, const struct ctr_series *s)
{
	for (uint32_t i = 0; i < a->n_mem; i++)
		if (a->mem[i].s->id == s->id)
			return &a->mem[i];
	if (a->n_mem >= AGG_MAX_MEM_SERIES || !mem_family(a, s->family))
		return NULL;
	struct agg_series *m = &a->mem[a->n_mem];
	m->ts = malloc(AGG_MEM_POINTS * sizeof(*m->ts));
	m->v = malloc(AGG_MEM_POINTS * sizeof(*m->v));
	if (!m->ts || !m->v) {
		free(m->ts);
		free(m->v);
		m->ts = NULL;
		m->v = NULL;
		return NULL;
	}
	m->s = s;
	m->stride = 1;
	a->n_mem++;
	return m;
}

void agg_counter(struct agg *a, uint64_t ts, const struct ctr_series *s,
		 double value)
{
	struct agg_series *m = mem_series(a, s);

	if (!m)
		return;
	m->last_ts = ts;
	m->last_v = value;
	if ((m->skipped++ % m->stride) != 0)
		return;
	if (m->n == AGG_MEM_POINTS) {
		/* full: keep every other point and sample half as often */
		for (uint32_t i = 0; i < m->n / 2; i++) {
			m->ts[i] = m->ts[2 * i];
			m->v[i] = m->v[2 * i];
		}
		m->n /= 2;
		m->stride *= 2;
	}
	m->ts[m->n] = ts;
	m->v[m->n++] = value;
}

void agg_fini(struct agg *a)
{
	for (uint32_t i = 0; i < a->n_samples; i++)
		flame_fini(&a->samples[i].f);
	flame_fini(&a->calls);
	flame_fini(&a->gpu);
	tmap_free(&a->kernels, free);
	tmap_free(&a->apis, free);
	tmap_free(&a->schemas, NULL);
	tmap_free(&a->reports, free);
	for (uint32_t i = 0; i < a->n_alerts; i++) {
		free(a->alerts[i].schema);
		free(a->alerts[i].message);
		free(a->alerts[i].evidence);
		free(a->alerts[i].stack);
	}
	for (uint32_t i = 0; i < a->n_mem; i++) {
		free(a->mem[i].ts);
		free(a->mem[i].v);
	}
	memset(a, 0, sizeof(*a));
}
