/* SPDX-License-Identifier: MIT */
/*
 * prometheus_metricgen: a synthetic probe for the Prometheus sink's tests and
 * benchmark (not installed). It registers `families` metric families holding
 * `series` label sets in all, with known values, and optionally moves them on
 * a timer so scrapes race with updates. Found by the loader at
 * <dir>/prometheus/prometheus_metricgen.so with NTCORE_PLUGIN_PATH=$B/sinks.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ntcore/kit/cfg.h>
#include <ntcore/kit/clock.h>
#include <ntcore/kit/log.h>

struct mg_config {
	int64_t series;
	int64_t families;
	const char *kind;
	int64_t labels;
	double value;
	double increment;
	int64_t interval_ms;
	int64_t max_series;
	const char *label_prefix;
	const char *help;
	int64_t publish;
};

static const char *const kinds[] = { "counter", "gauge", "histogram", "mixed",
				     NULL };

#define C struct mg_config
static const struct nt_cfg_key mg_keys[] = {
	NT_KEY_INT(C, series, 1000, 0, 2000000, "label sets in all"),
	NT_KEY_INT(C, families, 10, 1, 10000, "metric families"),
	NT_KEY_CHOICE(C, kind, "counter", kinds,
		      "family type; mixed cycles counter, gauge, histogram"),
	NT_KEY_INT(C, labels, 2, 1, 8, "labels per series (l0 is unique)"),
	NT_KEY_FLOAT(C, value, 1, 1, 0,
		     "initial value of every series"),
	NT_KEY_FLOAT(C, increment, 0, 1, 0,
		     "added to every series (observed, for histograms) per "
		     "tick"),
	NT_KEY_INT(C, interval_ms, 1000, 1, 3600000, "tick period"),
	NT_KEY_INT(C, max_series, 0, 0, 10000000,
		   "per-family label-set limit (0: the core's default)"),
	NT_KEY_STR(C, label_prefix, "s", "prefix of the l0 label values"),
	NT_KEY_STR(C, help, "Synthetic series from the metric generator.",
		   "HELP text of every family"),
	NT_KEY_INT(C, publish, 0, 0, 100000000,
		   "metricgen.tick events to publish once, 100 ms after attach "
		   "(so the core's ntcore_events_in_total has a known value)"),
};
#undef C

struct mg_tick {
	struct nt_event_hdr hdr;
	uint64_t seq;
};

static const struct nt_field tick_fields[] = {
	NT_FIELD(struct mg_tick, seq, NT_F_U64, "count", "0, 1, 2, ..."),
};

static const struct nt_schema tick_schema = {
	.name = "metricgen.tick",
	.desc = "synthetic event (Prometheus sink tests)",
	.fields = tick_fields,
	.n_fields = NT_ARRAY_LEN(tick_fields),
	.min_size = sizeof(struct mg_tick),
};

enum { TOK_UPDATE = 1, TOK_PUBLISH = 2 };

static const char *const label_names[] = { "l0", "l1", "l2", "l3",
					   "l4", "l5", "l6", "l7" };
static const double buckets[] = { 0.001, 0.01, 0.1, 1, 10 };
#define MG_NB NT_ARRAY_LEN(buckets)

struct mg {
	struct nt_instance *inst;
	const struct nt_host *host;
	struct mg_config cfg;
	uint32_t n_fam;
	struct nt_metric_desc *desc;
	char (*names)[64];
	struct nt_metric **m;
	int tick_type;
	bool published;
};

static void labels_of(const struct mg *g, uint64_t i, char (*buf)[48],
		      const char **lv)
{
	snprintf(buf[0], sizeof(buf[0]), "%s%llu", g->cfg.label_prefix,
		 (unsigned long long)i);
	lv[0] = buf[0];
	for (int j = 1; j < g->cfg.labels; j++) {
		snprintf(buf[j], sizeof(buf[j]), "v%llu",
			 (unsigned long long)(i % (uint64_t)(j + 2)));
		lv[j] = buf[j];
	}
}

/* Apply fn to every series: family = i % families. */
static void each(struct mg *g, int initial)
{
	char buf[8][48];
	const char *lv[8];

	for (int64_t i = 0; i < g->cfg.series; i++) {
		uint32_t f = (uint32_t)(i % (int64_t)g->n_fam);
		struct nt_metric *m = g->m[f];

		labels_of(g, (uint64_t)i, buf, lv);
		switch (g->desc[f].type) {
		case NT_METRIC_COUNTER:
			g->host->metric_add(m, lv, initial ? g->cfg.value :
							     g->cfg.increment);
			break;
		case NT_METRIC_GAUGE:
			if (initial)
				g->host->metric_set(m, lv, g->cfg.value);
			else
				g->host->metric_add(m, lv, g->cfg.increment);
			break;
		default:
			if (initial) {
				/* 1,2,..,6 per bucket: count 21 */
				static const uint64_t c[MG_NB + 1] = {
					1, 2, 3, 4, 5, 6 };
				g->host->metric_hist_set(m, lv, c,
							 g->cfg.value);
			} else {
				g->host->metric_observe(m, lv,
							g->cfg.increment);
			}
		}
	}
}

static int mg_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	const struct mg_config *cfg = config;
	struct mg *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	g->inst = inst;
	g->host = host;
	g->cfg = *cfg;
	g->n_fam = (uint32_t)cfg->families;
	if (cfg->publish) {
		g->tick_type = host->register_schema(inst, &tick_schema);
		if (g->tick_type < 0) {
			int err = g->tick_type;

			free(g);
			return err;
		}
	}
	g->desc = calloc(g->n_fam, sizeof(*g->desc));
	g->names = calloc(g->n_fam, sizeof(*g->names));
	g->m = calloc(g->n_fam, sizeof(*g->m));
	if (!g->desc || !g->names || !g->m)
		goto nomem;
	for (uint32_t f = 0; f < g->n_fam; f++) {
		struct nt_metric_desc *d = &g->desc[f];
		uint32_t t = strcmp(cfg->kind, "gauge") == 0 ? NT_METRIC_GAUGE :
			     strcmp(cfg->kind, "histogram") == 0 ?
							       NT_METRIC_HISTOGRAM :
			     strcmp(cfg->kind, "mixed") == 0 ? 1 + f % 3 :
							       NT_METRIC_COUNTER;

		snprintf(g->names[f], sizeof(g->names[f]),
			 t == NT_METRIC_COUNTER ? "ntcore_metricgen_c%u_total" :
			 t == NT_METRIC_GAUGE   ? "ntcore_metricgen_g%u" :
						  "ntcore_metricgen_h%u_seconds",
			 f);
		d->name = g->names[f];
		d->help = cfg->help;
		d->type = t;
		d->n_labels = (uint32_t)cfg->labels;
		d->label_names = label_names;
		d->max_series = (uint32_t)cfg->max_series;
		if (t == NT_METRIC_HISTOGRAM) {
			d->buckets = buckets;
			d->n_buckets = MG_NB;
		}
		g->m[f] = host->metric_register(inst, d);
		if (!g->m[f]) {
			nt_log_err(g, "cannot register %s", d->name);
			free(g->m);
			free(g->names);
			free(g->desc);
			free(g);
			return -EINVAL;
		}
	}
	*state = g;
	return 0;
nomem:
	free(g->m);
	free(g->names);
	free(g->desc);
	free(g);
	return -ENOMEM;
}

static int mg_attach(void *state)
{
	struct mg *g = state;

	int rc;

	each(g, 1);
	/* tests wait for this line before they scrape: the sink serves
	 * (it attached first) while these series are still being set */
	nt_log_info(g, "set %lld series", (long long)g->cfg.series);
	if (g->cfg.publish) {
		rc = g->host->add_timer(g->inst, 100, TOK_PUBLISH);
		if (rc < 0)
			return rc;
	}
	if (g->cfg.increment != 0)
		return g->host->add_timer(g->inst, (uint64_t)g->cfg.interval_ms,
					  TOK_UPDATE);
	return 0;
}

static int mg_poll(void *state, uint32_t token, uint32_t budget)
{
	struct mg *g = state;

	(void)budget;
	if (token == TOK_UPDATE) {
		each(g, 0);
		return 0;
	}
	if (token == TOK_PUBLISH && !g->published) {
		struct mg_tick ev = { .hdr = { .type = (uint32_t)g->tick_type,
					       .size = sizeof(ev),
					       .pid = (uint32_t)getpid(),
					       .tid = (uint32_t)getpid(),
					       .comm = "metricgen" } };

		ev.hdr.ts_ns = nt_clock_mono_ns();
		g->published = true;
		for (int64_t i = 0; i < g->cfg.publish; i++) {
			ev.seq = (uint64_t)i;
			g->host->publish(g->inst, &ev.hdr);
		}
	}
	return 0;
}

static void mg_detach(void *state)
{
	(void)state;
}

static void mg_fini(void *state)
{
	struct mg *g = state;

	if (!g)
		return;
	free(g->m);
	free(g->names);
	free(g->desc);
	free(g);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "prometheus_metricgen",
	.kind = NT_KIND_PROBE,
	.description = "synthetic metric series for the Prometheus sink's tests "
		       "and benchmark",
	.version = "1.0.0",
	.config = mg_keys,
	.n_config = NT_ARRAY_LEN(mg_keys),
	.config_size = sizeof(struct mg_config),
	.init = mg_init,
	.attach = mg_attach,
	.poll = mg_poll,
	.detach = mg_detach,
	.fini = mg_fini,
};
