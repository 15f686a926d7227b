/* SPDX-License-Identifier: MIT */
/*
 * The gRPC sink's own metrics (events sent, retried, dropped by reason,
 * queue fill, export calls and their duration, metric points sent) and the
 * drop counting behind them: each drop goes both to
 * ntcore_grpc_events_dropped_total{reason} and to the core's
 * ntcore_events_dropped_total{stage}.
 */
#include <errno.h>
#include <stddef.h>

#include "grpc_state.h"

static const char *const lbl_inst[] = { "instance" };
static const char *const lbl_reason[] = { "instance", "reason" };
static const char *const lbl_signal_code[] = { "instance", "signal", "code" };
static const double duration_buckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025,
					   0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10 };

static const struct nt_metric_desc md_sent = {
	.name = "ntcore_grpc_events_sent_total",
	.help = "Events the collector accepted",
	.type = NT_METRIC_COUNTER,
	.n_labels = 1,
	.label_names = lbl_inst,
};
static const struct nt_metric_desc md_retried = {
	.name = "ntcore_grpc_events_retried_total",
	.help = "Events sent again after a retryable export failure (each resend counts)",
	.type = NT_METRIC_COUNTER,
	.n_labels = 1,
	.label_names = lbl_inst,
};
static const struct nt_metric_desc md_dropped = {
	.name = "ntcore_grpc_events_dropped_total",
	.help = "Events the sink lost, by reason (queue_full, too_large, permanent_error, rejected, retry_exhausted, shutdown)",
	.type = NT_METRIC_COUNTER,
	.n_labels = 2,
	.label_names = lbl_reason,
};
static const struct nt_metric_desc md_queue = {
	.name = "ntcore_grpc_queue_events",
	.help = "Events waiting in the sink's queue",
	.type = NT_METRIC_GAUGE,
	.n_labels = 1,
	.label_names = lbl_inst,
};
static const struct nt_metric_desc md_queue_bytes = {
	.name = "ntcore_grpc_queue_bytes",
	.help = "Bytes of the sink's queue in use",
	.type = NT_METRIC_GAUGE,
	.n_labels = 1,
	.label_names = lbl_inst,
};
static const struct nt_metric_desc md_exports = {
	.name = "ntcore_grpc_exports_total",
	.help = "Export calls by signal (logs, metrics) and gRPC status code",
	.type = NT_METRIC_COUNTER,
	.n_labels = 3,
	.label_names = lbl_signal_code,
	.max_series = 64,
};
static const struct nt_metric_desc md_duration = {
	.name = "ntcore_grpc_export_duration_seconds",
	.help = "Duration of export calls",
	.type = NT_METRIC_HISTOGRAM,
	.buckets = duration_buckets,
	.n_buckets = NT_ARRAY_LEN(duration_buckets),
	.n_labels = 1,
	.label_names = lbl_inst,
};
static const struct nt_metric_desc md_points = {
	.name = "ntcore_grpc_metric_points_sent_total",
	.help = "Metric data points the collector accepted",
	.type = NT_METRIC_COUNTER,
	.n_labels = 1,
	.label_names = lbl_inst,
};

/* Init: every family, and the counters users alert on made visible at 0
 * before anything is lost. -ENOMEM (logged) when one is refused. */
int gs_metrics_register(struct gs *s)
{
	const struct nt_host *host = s->host;

	s->m_sent = host->metric_register(s->inst, &md_sent);
	s->m_retried = host->metric_register(s->inst, &md_retried);
	s->m_dropped = host->metric_register(s->inst, &md_dropped);
	s->m_queue = host->metric_register(s->inst, &md_queue);
	s->m_queue_bytes = host->metric_register(s->inst, &md_queue_bytes);
	s->m_exports = host->metric_register(s->inst, &md_exports);
	s->m_duration = host->metric_register(s->inst, &md_duration);
	s->m_points = host->metric_register(s->inst, &md_points);
	if (!s->m_sent || !s->m_retried || !s->m_dropped || !s->m_queue ||
	    !s->m_queue_bytes || !s->m_exports || !s->m_duration || !s->m_points) {
		nt_log_err(s, "cannot register the sink's metrics");
		return -ENOMEM;
	}
	for (int r = 0; r < GS_DROP__N; r++) {
		const char *lv[2] = { s->iname[0], gs_drop_reason_names[r] };

		host->metric_add(s->m_dropped, lv, 0);
	}
	host->metric_add(s->m_sent, s->iname, 0);
	host->metric_add(s->m_retried, s->iname, 0);
	return 0;
}

static const char *drop_stage(enum gs_drop_reason r)
{
	switch (r) {
	case GS_DROP_QUEUE_FULL:
	case GS_DROP_TOO_LARGE:
		return "grpc_queue";
	case GS_DROP_SHUTDOWN:
		return "grpc_shutdown";
	default:
		return "grpc_export";
	}
}

/* Any thread (metric_add and count_drop are thread-safe). */
void gs_count_dropped(struct gs *s, enum gs_drop_reason r, uint64_t n)
{
	const char *lv[2] = { s->iname[0], gs_drop_reason_names[r] };

	if (!n)
		return;
	s->host->metric_add(s->m_dropped, lv, (double)n);
	s->host->count_drop(s->inst, drop_stage(r), n);
}

/* Loop thread: move drops counted in consume() into the registry. */
void gs_push_pending_drops(struct gs *s)
{
	for (int r = 0; r < GS_DROP__N; r++) {
		gs_count_dropped(s, (enum gs_drop_reason)r, s->pending_drops[r]);
		s->pending_drops[r] = 0;
	}
}

void gs_count_export(struct gs *s, const char *signal, int code,
		     uint64_t dur_ns)
{
	const char *lv[3] = { s->iname[0], signal, gs_code_name(code) };

	s->host->metric_add(s->m_exports, lv, 1);
	s->host->metric_observe(s->m_duration, s->iname, (double)dur_ns / 1e9);
}

void gs_set_queue_gauges(struct gs *s, uint32_t count, size_t used)
{
	s->host->metric_set(s->m_queue, s->iname, count);
	s->host->metric_set(s->m_queue_bytes, s->iname, (double)used);
}
