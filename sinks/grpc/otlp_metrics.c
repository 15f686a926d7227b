/* SPDX-License-Identifier: MIT */
/*
 * A snapshot of the metrics registry -> a serialized
 * ExportMetricsServiceRequest: counter -> Sum (monotonic, cumulative),
 * gauge -> Gauge, histogram -> Histogram (cumulative, explicit bounds).
 * metrics_visit shows each family under its lock, so everything is copied
 * into the arena while it is shown.
 */
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/ident.h"
#include "otlp_pb.h"

const char *otlp_unit_of(const char *name)
{
	/* UCUM units as OTLP expects them */
	static const struct {
		const char *suffix, *unit;
	} map[] = {
		{ "_seconds_total", "s" }, { "_seconds", "s" },
		{ "_bytes_total", "By" },  { "_bytes", "By" },
		{ "_ratio", "1" },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (otlp_has_suffix(name, map[i].suffix))
			return map[i].unit;
	return "";
}

void otlp_metrics_begin(struct otlp_encoder *enc, uint64_t now_wall_ns)
{
	otlp_arena_reset(&enc->arena);
	enc->n_metrics = 0;
	enc->n_points = 0;
	enc->now_ns = now_wall_ns;
	enc->oom = false;
}

static KeyValue **labels_attrs(struct otlp_arena *a,
			       const struct nt_metric_desc *d,
			       const char *const *values)
{
	KeyValue **ptrs;
	KeyValue *kvs;
	AnyValue *vals;

	if (d->n_labels == 0)
		return NULL;
	ptrs = otlp_alloc(a, d->n_labels * sizeof(*ptrs));
	kvs = otlp_alloc(a, d->n_labels * sizeof(*kvs));
	vals = otlp_alloc(a, d->n_labels * sizeof(*vals));
	if (!ptrs || !kvs || !vals)
		return NULL;
	for (uint32_t i = 0; i < d->n_labels; i++) {
		const char *val = values && values[i] ? values[i] : "";
		const char *semconv = nt_otel_label_key(d->label_names[i]);
		const char *key = semconv ? semconv : d->label_names[i];
		const char *scheme = strstr(val, "://");

		/* the label's "containerd://ID" (kube-state-metrics' form) is
		 * container.id ID in OpenTelemetry's */
		if (semconv && strcmp(semconv, "container.id") == 0 && scheme)
			val = scheme + 3;
		kvs[i] = kv_init;
		vals[i] = any_init;
		kvs[i].key = otlp_arena_utf8(a, key, strlen(key));
		otlp_set_string(a, &vals[i], val, strlen(val));
		if (!kvs[i].key)
			return NULL;
		kvs[i].value = &vals[i];
		ptrs[i] = &kvs[i];
	}
	return ptrs;
}

/* One histogram point per series (cumulative, explicit bounds); -1 when
 * out of memory. */
static int hist_data(struct otlp_encoder *enc, const struct nt_metric_desc *d,
		     const struct nt_metric_series *series, uint32_t n_series,
		     Metric *m)
{
	static const HistDP hdp_init = OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT__INIT;
	static const Histogram hist_init = OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM__INIT;
	struct otlp_arena *a = &enc->arena;
	size_t nb = d->n_buckets + 1;
	Histogram *h = otlp_alloc(a, sizeof(*h));
	HistDP **pts = otlp_alloc(a, n_series * sizeof(*pts));
	HistDP *dps = otlp_alloc(a, n_series * sizeof(*dps));
	double *bounds = otlp_alloc(a, (d->n_buckets ? d->n_buckets : 1) * sizeof(double));

	if (!h || !pts || !dps || !bounds)
		return -1;
	if (d->n_buckets)
		memcpy(bounds, d->buckets, d->n_buckets * sizeof(double));
	*h = hist_init;
	h->aggregation_temporality =
		OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE;
	for (uint32_t i = 0; i < n_series; i++) {
		uint64_t *bc = otlp_alloc(a, nb * sizeof(uint64_t));

		if (!bc)
			return -1;
		dps[i] = hdp_init;
		dps[i].start_time_unix_nano = enc->start_wall_ns;
		dps[i].time_unix_nano = enc->now_ns;
		dps[i].count = series[i].count;
		dps[i].sum = series[i].sum;
		if (series[i].bucket_counts)
			memcpy(bc, series[i].bucket_counts, nb * sizeof(uint64_t));
		else
			memset(bc, 0, nb * sizeof(uint64_t));
		dps[i].n_bucket_counts = nb;
		dps[i].bucket_counts = bc;
		dps[i].n_explicit_bounds = d->n_buckets;
		dps[i].explicit_bounds = bounds;
		dps[i].attributes = labels_attrs(a, d, series[i].label_values);
		if (d->n_labels && !dps[i].attributes)
			return -1;
		dps[i].n_attributes = d->n_labels;
		pts[i] = &dps[i];
	}
	h->n_data_points = n_series;
	h->data_points = pts;
	m->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM;
	m->histogram = h;
	return 0;
}

/* A counter as a monotonic cumulative Sum, a gauge as a Gauge, of the
 * number points pts[n]; -1 when out of memory. */
static int number_metric(struct otlp_arena *a, const struct nt_metric_desc *d,
			 NumberDP **pts, uint32_t n, Metric *m)
{
	static const Sum sum_init = OPENTELEMETRY__PROTO__METRICS__V1__SUM__INIT;
	static const Gauge gauge_init = OPENTELEMETRY__PROTO__METRICS__V1__GAUGE__INIT;

	if (d->type == NT_METRIC_COUNTER) {
		Sum *sum = otlp_alloc(a, sizeof(*sum));

		if (!sum)
			return -1;
		*sum = sum_init;
		sum->aggregation_temporality =
			OPENTELEMETRY__PROTO__METRICS__V1__AGGREGATION_TEMPORALITY__AGGREGATION_TEMPORALITY_CUMULATIVE;
		sum->is_monotonic = 1;
		sum->n_data_points = n;
		sum->data_points = pts;
		m->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM;
		m->sum = sum;
		return 0;
	}
	Gauge *g = otlp_alloc(a, sizeof(*g));

	if (!g)
		return -1;
	*g = gauge_init;
	g->n_data_points = n;
	g->data_points = pts;
	m->data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE;
	m->gauge = g;
	return 0;
}

/* One number point per series (counters and gauges); -1 when out of
 * memory. */
static int number_data(struct otlp_encoder *enc, const struct nt_metric_desc *d,
		       const struct nt_metric_series *series, uint32_t n_series,
		       Metric *m)
{
	static const NumberDP ndp_init = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__INIT;
	struct otlp_arena *a = &enc->arena;
	NumberDP **pts = otlp_alloc(a, n_series * sizeof(*pts));
	NumberDP *dps = otlp_alloc(a, n_series * sizeof(*dps));

	if (!pts || !dps)
		return -1;
	for (uint32_t i = 0; i < n_series; i++) {
		dps[i] = ndp_init;
		dps[i].start_time_unix_nano = enc->start_wall_ns;
		dps[i].time_unix_nano = enc->now_ns;
		dps[i].value_case =
			OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_DOUBLE;
		dps[i].as_double = series[i].value;
		dps[i].attributes = labels_attrs(a, d, series[i].label_values);
		if (d->n_labels && !dps[i].attributes)
			return -1;
		dps[i].n_attributes = d->n_labels;
		pts[i] = &dps[i];
	}
	return number_metric(a, d, pts, n_series, m);
}

/* Room for one more metric in enc->metrics; false when out of memory. */
static bool metrics_room(struct otlp_encoder *enc)
{
	if (enc->n_metrics < enc->cap_metrics)
		return true;
	size_t cap = enc->cap_metrics ? 2 * enc->cap_metrics : 64;
	Metric **p = realloc(enc->metrics, cap * sizeof(*p));

	if (!p)
		return false;
	enc->metrics = p;
	enc->cap_metrics = cap;
	return true;
}

int otlp_metrics_visit(void *arg, const struct nt_metric_desc *d,
		       const struct nt_metric_series *series,
		       uint32_t n_series, uint64_t overflow)
{
	static const Metric m_init = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__INIT;
	struct otlp_encoder *enc = arg;
	struct otlp_arena *a = &enc->arena;
	Metric *m;

	(void)overflow; /* series beyond max_series have no label set to send */
	if (n_series == 0 || !d->name)
		return 0;
	if (!metrics_room(enc) || !(m = otlp_alloc(a, sizeof(*m))))
		goto oom;
	*m = m_init;
	m->name = otlp_arena_utf8(a, d->name, strlen(d->name));
	m->description = d->help ? otlp_arena_utf8(a, d->help, strlen(d->help)) : (char *)"";
	m->unit = (char *)otlp_unit_of(d->name);
	if (!m->name || !m->description)
		goto oom;
	if ((d->type == NT_METRIC_HISTOGRAM ? hist_data(enc, d, series, n_series, m)
					    : number_data(enc, d, series, n_series, m)) < 0)
		goto oom;
	enc->metrics[enc->n_metrics++] = m;
	enc->n_points += n_series;
	return 0;
oom:
	enc->oom = true;
	return 1;
}

uint8_t *otlp_encode_metrics(struct otlp_encoder *enc, size_t *len,
			     uint32_t *n_points)
{
	static const MetricsReq req_init =
		OPENTELEMETRY__PROTO__COLLECTOR__METRICS__V1__EXPORT_METRICS_SERVICE_REQUEST__INIT;
	static const ResourceMetrics rm_init = OPENTELEMETRY__PROTO__METRICS__V1__RESOURCE_METRICS__INIT;
	static const ScopeMetrics sm_init = OPENTELEMETRY__PROTO__METRICS__V1__SCOPE_METRICS__INIT;
	MetricsReq req = req_init;
	ResourceMetrics rm = rm_init, *rmp = &rm;
	ScopeMetrics sm = sm_init, *smp = &sm;
	uint8_t *buf = NULL;
	size_t size;

	*n_points = 0;
	if (enc->oom)
		goto out;
	rm.resource = otlp_make_resource(enc);
	if (!rm.resource)
		goto out;
	sm.scope = &enc->scope;
	sm.n_metrics = enc->n_metrics;
	sm.metrics = enc->metrics;
	rm.n_scope_metrics = 1;
	rm.scope_metrics = &smp;
	req.n_resource_metrics = 1;
	req.resource_metrics = &rmp;
	size = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__get_packed_size(&req);
	buf = malloc(size ? size : 1);
	if (!buf)
		goto out;
	*len = opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__pack(&req, buf);
	*n_points = enc->n_points;
out:
	otlp_arena_reset(&enc->arena);
	enc->n_metrics = 0;
	return buf;
}
