/* SPDX-License-Identifier: MIT */
/*
 * The stand-in host for unit tests of a probe's ring handler (tests/unit/
 * test_io.c, test_net.c, test_mem_ring.c, test_sched_ring.c): no daemon, no
 * kernel. Synthetic ring records are fed to the plugin's callback; this
 * host keeps what the callback did: the events it published (copies), the
 * drops it counted per stage, the warnings it logged, and the metric
 * updates it made (family, label values, value; also as one series
 * string). A family comes from the plugin's descriptor (metric_register)
 * or, for a test that builds the state by hand, from ph_metric(name, n).
 * Static functions: each test program compiles its own copy. Not
 * thread-safe.
 */
#ifndef NTCORE_TEST_PROBE_HOST_H
#define NTCORE_TEST_PROBE_HOST_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/plugin.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"

#define PH_MAX 64
#define PH_LABELS 4

struct nt_instance {
	int unused;
};

struct nt_metric {
	const struct nt_metric_desc *desc;
	struct nt_metric_desc own; /* ph_metric's */
};

/* One metric update: "family{v1,v2,...}" and its value. */
struct ph_update {
	char op[8]; /* "add", "set", "observe", "remove", "hist" */
	char series[256];
	const char *family;
	char labels[PH_LABELS][32]; /* the first values ("" past the family's) */
	double value;
};

static struct {
	struct nt_instance inst;
	void *events[PH_MAX];
	size_t n_events;
	uint64_t drops_bpf, drops_other;
	int warns;
	char warn[256]; /* the last warning */
	struct nt_metric metrics[PH_MAX];
	size_t n_metrics;
	struct ph_update updates[PH_MAX];
	size_t n_updates;
	int n_types;
} PH;

static void ph_reset(void)
{
	for (size_t i = 0; i < PH.n_events; i++)
		free(PH.events[i]);
	PH.n_events = 0;
	PH.n_updates = 0;
	PH.drops_bpf = PH.drops_other = 0;
	PH.warns = 0;
	PH.warn[0] = '\0';
}

/* Forget the families too (a test that makes its own with ph_metric). */
static void ph_reset_all(void)
{
	ph_reset();
	PH.n_metrics = 0;
}

/* The last event published, or NULL. */
static const struct nt_event_hdr *ph_last(void)
{
	return PH.n_events ? PH.events[PH.n_events - 1] : NULL;
}

static void ph_log(struct nt_instance *inst, int level, const char *fmt, ...)
{
	(void)inst;
	(void)level;
	(void)fmt;
}

static void ph_vlog(struct nt_instance *inst, int level, const char *fmt,
		    va_list ap)
{
	(void)inst;
	if (level != NT_LOG_WARN)
		return;
	PH.warns++;
	vsnprintf(PH.warn, sizeof(PH.warn), fmt, ap);
}

static int ph_register_schema(struct nt_instance *inst,
			      const struct nt_schema *schema)
{
	(void)inst;
	(void)schema;
	return ++PH.n_types;
}

static int ph_publish(struct nt_instance *inst, const struct nt_event_hdr *ev)
{
	void *copy;

	(void)inst;
	if (PH.n_events == PH_MAX)
		return 0;
	copy = malloc(ev->size);
	if (!copy)
		return 0;
	memcpy(copy, ev, ev->size);
	PH.events[PH.n_events++] = copy;
	return 1;
}

static struct nt_metric *ph_metric_register(struct nt_instance *inst,
					    const struct nt_metric_desc *d)
{
	(void)inst;
	if (PH.n_metrics == PH_MAX)
		return NULL;
	PH.metrics[PH.n_metrics].desc = d;
	return &PH.metrics[PH.n_metrics++];
}

/* A family of `n_labels` labels named `name` (a string that outlives the
 * test), for state a test builds by hand. */
static struct nt_metric *ph_metric(const char *name, uint32_t n_labels)
{
	struct nt_metric *m;

	if (PH.n_metrics == PH_MAX)
		return NULL;
	m = &PH.metrics[PH.n_metrics++];
	m->own = (struct nt_metric_desc){.name = name, .n_labels = n_labels};
	m->desc = &m->own;
	return m;
}

static void ph_update(const char *op, struct nt_metric *m,
		      const char *const *lv, double value)
{
	struct ph_update *u;
	size_t pos;

	if (!m || PH.n_updates == PH_MAX)
		return;
	u = &PH.updates[PH.n_updates++];
	memset(u, 0, sizeof(*u));
	snprintf(u->op, sizeof(u->op), "%s", op);
	u->family = m->desc->name;
	for (uint32_t i = 0; i < m->desc->n_labels && i < PH_LABELS; i++)
		snprintf(u->labels[i], sizeof(u->labels[i]), "%s", lv[i]);
	pos = (size_t)snprintf(u->series, sizeof(u->series), "%s{",
			       m->desc->name);
	for (uint32_t i = 0; i < m->desc->n_labels && pos < sizeof(u->series); i++)
		pos += (size_t)snprintf(u->series + pos, sizeof(u->series) - pos,
					"%s%s", i ? "," : "", lv[i]);
	if (pos < sizeof(u->series))
		snprintf(u->series + pos, sizeof(u->series) - pos, "}");
	u->value = value;
}

static void ph_metric_add(struct nt_metric *m, const char *const *lv, double d)
{
	ph_update("add", m, lv, d);
}

static void ph_metric_set(struct nt_metric *m, const char *const *lv, double v)
{
	ph_update("set", m, lv, v);
}

static void ph_metric_observe(struct nt_metric *m, const char *const *lv,
			      double v)
{
	ph_update("observe", m, lv, v);
}

static void ph_metric_remove(struct nt_metric *m, const char *const *lv)
{
	ph_update("remove", m, lv, 0);
}

static void ph_count_drop(struct nt_instance *inst, const char *stage,
			  uint64_t n)
{
	(void)inst;
	if (!strcmp(stage, "bpf"))
		PH.drops_bpf += n;
	else
		PH.drops_other += n;
}

static int ph_config_error(struct nt_instance *inst, const char *key,
			   const char *fmt, ...)
{
	(void)inst;
	(void)key;
	(void)fmt;
	return -22; /* -EINVAL, as the core's */
}

static const char *ph_config_file(const struct nt_instance *inst, int *line)
{
	(void)inst;
	*line = 1;
	return "test.conf";
}

static const struct nt_host probe_host = {
	.abi_major = NT_ABI_MAJOR,
	.abi_minor = NT_ABI_MINOR,
	.size = sizeof(struct nt_host),
	.log = ph_log,
	.vlog = ph_vlog,
	.config_error = ph_config_error,
	.config_file = ph_config_file,
	.register_schema = ph_register_schema,
	.publish = ph_publish,
	.metric_register = ph_metric_register,
	.metric_add = ph_metric_add,
	.metric_set = ph_metric_set,
	.metric_observe = ph_metric_observe,
	.metric_remove = ph_metric_remove,
	.count_drop = ph_count_drop,
};

/* The index of the first update of `series` with `op`, or -1. */
static int ph_find(const char *op, const char *series)
{
	for (size_t i = 0; i < PH.n_updates; i++)
		if (!strcmp(PH.updates[i].op, op) &&
		    !strcmp(PH.updates[i].series, series))
			return (int)i;
	return -1;
}

/* The sum of the values of every `op` update to `family` whose label k is
 * `value` (any labels when value is NULL). */
static double ph_sum(const char *op, const char *family, unsigned k,
		     const char *value)
{
	double sum = 0;

	for (size_t i = 0; i < PH.n_updates; i++) {
		const struct ph_update *u = &PH.updates[i];

		if (!strcmp(u->op, op) && !strcmp(u->family, family) &&
		    (!value || (k < PH_LABELS && !strcmp(u->labels[k], value))))
			sum += u->value;
	}
	return sum;
}

#pragma GCC diagnostic pop

#endif /* NTCORE_TEST_PROBE_HOST_H */
