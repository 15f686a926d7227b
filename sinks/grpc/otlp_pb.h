/* SPDX-License-Identifier: MIT */
/*
 * What the OTLP encoder's files share (otlp_*.c): short names for the
 * protobuf-c message types, the encoder's state, and the helpers that put
 * strings and values into a request's arena.
 *
 *   otlp_arena.c     the bump arena a request's message tree lives in
 *   otlp_encoder.c   the encoder: resource and scope, made once
 *   otlp_value.c     one schema field of an event record -> AnyValue
 *   otlp_logs.c      event records -> ExportLogsServiceRequest
 *   otlp_metrics.c   a registry snapshot -> ExportMetricsServiceRequest
 */
#ifndef NTCORE_OTLP_PB_H
#define NTCORE_OTLP_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc_sink.h"
#include "otlp_logs_service.pb-c.h"
#include "otlp_metrics_service.pb-c.h"

typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope Scope;
typedef Opentelemetry__Proto__Resource__V1__Resource Resource;
typedef Opentelemetry__Proto__Logs__V1__LogRecord LogRecord;
typedef Opentelemetry__Proto__Logs__V1__ScopeLogs ScopeLogs;
typedef Opentelemetry__Proto__Logs__V1__ResourceLogs ResourceLogs;
typedef Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest LogsReq;
typedef Opentelemetry__Proto__Metrics__V1__Metric Metric;
typedef Opentelemetry__Proto__Metrics__V1__Sum Sum;
typedef Opentelemetry__Proto__Metrics__V1__Gauge Gauge;
typedef Opentelemetry__Proto__Metrics__V1__Histogram Histogram;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint NumberDP;
typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint HistDP;
typedef Opentelemetry__Proto__Metrics__V1__ScopeMetrics ScopeMetrics;
typedef Opentelemetry__Proto__Metrics__V1__ResourceMetrics ResourceMetrics;
typedef Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest MetricsReq;

static const AnyValue any_init = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
static const KeyValue kv_init = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;

struct otlp_encoder {
	struct otlp_arena arena;     /* per request, reset each time */
	struct otlp_arena res_arena; /* resource and scope, kept */
	KeyValue **res_attrs;
	size_t n_res_attrs;
	Scope scope;
	uint64_t start_wall_ns;
	/* metrics being collected */
	Metric **metrics;
	size_t n_metrics, cap_metrics;
	uint64_t now_ns;
	uint32_t n_points;
	bool oom;
	otlp_ident_fn ident; /* identity of a pid, or NULL */
	void *ident_ctx;
	/* serialized resource and scope fields, made on first use */
	uint8_t *envelope;
	size_t res_len, scope_len;
};

/* otlp_arena.c: a copy of len bytes of s made valid UTF-8 (stopping at a
 * NUL), in the arena; NULL when it is out of memory. */
char *otlp_arena_utf8(struct otlp_arena *a, const char *s, size_t len);

/* otlp_value.c */
/* A string value: s made valid UTF-8 (unset when out of memory). */
void otlp_set_string(struct otlp_arena *a, AnyValue *v, const char *s,
		     size_t len);
/* One schema field of ev; false when the field is unreadable. */
bool otlp_field_value(struct otlp_arena *a, const struct nt_event_hdr *ev,
		      const struct nt_field *f, AnyValue *v);
/* A VSTR field's bytes, or NULL when it points outside the record. */
const char *otlp_vstr_get(const struct nt_event_hdr *ev,
			  const struct nt_field *f, size_t *len);

/* otlp_encoder.c: the Resource message of every request, in enc->arena. */
Resource *otlp_make_resource(struct otlp_encoder *enc);

static inline void otlp_set_int(AnyValue *v, int64_t x)
{
	v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
	v->int_value = x;
}

static inline bool otlp_has_suffix(const char *s, const char *suf)
{
	size_t n = __builtin_strlen(s), m = __builtin_strlen(suf);

	return n >= m && __builtin_memcmp(s + n - m, suf, m) == 0;
}

#endif /* NTCORE_OTLP_PB_H */
