/* SPDX-License-Identifier: MIT */
/*
 * ntcore gRPC sink: an OTLP/gRPC exporter.
 *
 * Events become OTLP log records and the metrics registry becomes OTLP
 * metrics, exported with unary calls of the gRPC core C API
 * (LogsService/Export, MetricsService/Export), serialized with protobuf-c.
 *
 * Threads. consume() runs on the loop thread and only copies the record into
 * a bounded byte ring (grpc_queue.c) under a mutex held for a memcpy; when
 * the ring is full the record is dropped and counted (reason queue_full):
 * drop-newest, so what is queued is sent in order. Everything gRPC happens
 * in the sink's own thread, which batches by size (batch_size) and time
 * (batch_timeout_ms), retries retryable status codes with exponential
 * backoff, gives up on permanent ones with one log line, and exports the
 * registry every metrics_interval_ms. The host's log function belongs to the
 * loop thread, so the sink thread hands its log lines to the loop through an
 * eventfd and a small ring (at most GS_LOGQ lines in flight; excess lines
 * are counted and reported).
 *
 * Shutdown. flush() (loop thread) asks the sink thread to send everything
 * and the final metrics, and waits at most shutdown_grace_ms; what is still
 * queued then is counted as dropped (reason shutdown) and any call in flight
 * is cancelled; a second SIGINT/SIGTERM (host->stop_now) ends the wait at
 * once. detach() flushes the same way if events arrived since the
 * last flush, then joins the thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/log.h>
#include <grpc/support/time.h>

#include <ntcore/plugin.h>

#include "grpc_sink.h"
#include "otlp_logs_service.pb-c.h"
#include "otlp_metrics_service.pb-c.h"

#ifndef NTCORE_GRPC_VERSION
#define NTCORE_GRPC_VERSION "0.0.0"
#endif

#define LOGS_METHOD "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
#define METRICS_METHOD "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
#define SYSTEM_ROOTS "/etc/ssl/certs/ca-certificates.crt"

enum { TOKEN_LOG = 1, TOKEN_TIMER = 2 };
#define GS_LOGQ 32
#define HURRY_CHECK_NS 100000000ull /* how often flush asks host->stop_now */
#define GS_MAXCHAT 480

/* ------------------------------------------------------------------ */
/* Config                                                              */
/* ------------------------------------------------------------------ */

struct grpc_cfg {
	const char *endpoint;
	bool tls;
	const char *ca_file;
	const char *compression;
	int64_t timeout_ms;
	int64_t batch_size;
	int64_t batch_timeout_ms;
	int64_t queue_size;
	int64_t queue_bytes;
	int64_t max_request_bytes;
	int64_t retry_initial_ms;
	int64_t retry_max_ms;
	int64_t retry_max_elapsed_s;
	int64_t shutdown_grace_ms;
	bool metrics;
	int64_t metrics_interval_ms;
	const char *service_name;
	const char *instance_id;
	struct nt_strlist resource_attributes;
	bool identity;
};

static const char *const compression_choices[] = { "none", "gzip", "deflate", NULL };

#define K(name_, t_, def_, lo_, hi_, desc_)                                     \
	{ .key = #name_, .type = (t_), .offset = offsetof(struct grpc_cfg, name_), \
	  .def = (def_), .min = (lo_), .max = (hi_), .desc = (desc_) }

static const struct nt_cfg_key grpc_config[] = {
	K(endpoint, NT_CFG_STRING, "\"127.0.0.1:4317\"", 1, 0,
	  "collector address: host:port, [v6]:port, http://host:port, https://host:port (TLS) or unix:/path"),
	K(tls, NT_CFG_BOOL, "false", 1, 0,
	  "use TLS (implied by https://); server verified against ca_file or the system roots"),
	K(ca_file, NT_CFG_STRING, "\"\"", 1, 0,
	  "PEM file of CA certificates to verify the collector with (default: system roots)"),
	{ .key = "compression", .type = NT_CFG_STRING,
	  .offset = offsetof(struct grpc_cfg, compression), .def = "\"none\"",
	  .min = 1, .max = 0, .desc = "request compression: none, gzip or deflate",
	  .choices = compression_choices },
	K(timeout_ms, NT_CFG_INT, "10000", 100, 600000,
	  "deadline of one export call, in milliseconds"),
	K(batch_size, NT_CFG_INT, "512", 1, 100000,
	  "most log records per export call"),
	K(batch_timeout_ms, NT_CFG_INT, "1000", 1, 600000,
	  "send a partial batch once its oldest record waited this long (ms)"),
	K(queue_size, NT_CFG_INT, "16384", 1, 10000000,
	  "most records held while waiting to be sent; newer ones are dropped (queue_full)"),
	K(queue_bytes, NT_CFG_INT, "16777216", 65536, 4294967296.0,
	  "memory bound of the queue in bytes, allocated lazily, never exceeded"),
	K(max_request_bytes, NT_CFG_INT, "3670016", 4096, 67108864,
	  "estimated size cap of one export request (collectors accept 4 MiB by default)"),
	K(retry_initial_ms, NT_CFG_INT, "250", 1, 600000,
	  "first retry delay after a retryable failure (ms), doubled each retry"),
	K(retry_max_ms, NT_CFG_INT, "5000", 1, 3600000,
	  "longest retry delay (ms)"),
	K(retry_max_elapsed_s, NT_CFG_INT, "300", 0, 86400,
	  "drop a batch (retry_exhausted) after retrying it this long; 0: retry until shutdown"),
	K(shutdown_grace_ms, NT_CFG_INT, "5000", 0, 600000,
	  "on shutdown, time allowed to send what is queued before it is dropped (ms)"),
	K(metrics, NT_CFG_BOOL, "true", 1, 0,
	  "also export the metrics registry (OTLP metrics)"),
	K(metrics_interval_ms, NT_CFG_INT, "10000", 100, 3600000,
	  "metrics export period (ms); a final export is made on shutdown"),
	K(service_name, NT_CFG_STRING, "\"ntcore\"", 1, 0,
	  "resource attribute service.name"),
	K(instance_id, NT_CFG_STRING, "\"\"", 1, 0,
	  "resource attribute service.instance.id (default: <hostname>:<pid>)"),
	K(resource_attributes, NT_CFG_STRING_LIST, "[]", 1, 0,
	  "extra resource attributes, each \"key=value\""),
	K(identity, NT_CFG_BOOL, "false", 1, 0,
	  "log records carry their process's container.id, k8s.pod.uid, k8s.pod.name, k8s.namespace.name ... (docs/kubernetes.md)"),
};

/* host->identity for the encoder (issue 21; safe on the sender thread). */
static int gs_ident(void *ctx, uint32_t pid, struct nt_identity *out);

/* ------------------------------------------------------------------ */
/* Self-metrics                                                        */
/* ------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------ */
/* State                                                               */
/* ------------------------------------------------------------------ */

struct gs_logmsg {
	int level;
	char text[GS_MAXCHAT];
};

struct gs {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct grpc_cfg *cfg;
	char target[512];
	bool tls;
	char *pem_roots; /* NULL: gRPC's default roots */
	int compression;
	const char *iname[1]; /* label values {instance} */
	char hostname[256];
	char instance_id[320];
	uint64_t start_wall_ns;

	struct nt_metric *m_sent, *m_retried, *m_dropped, *m_queue, *m_queue_bytes,
		*m_exports, *m_duration, *m_points;

	/* loop thread only */
	uint64_t pending_drops[GS_DROP__N];
	bool consumed_since_flush;
	int efd;
	bool attached;

	/* shared, under lock */
	pthread_mutex_t lock;
	pthread_cond_t wake; /* to the sink thread */
	pthread_cond_t done; /* from the sink thread */
	struct gq q;
	bool stop;
	uint64_t flush_req, flush_done;
	uint64_t abandon_req, abandon_done;
	uint64_t flush_deadline; /* mono ns, 0 when not flushing */
	bool hurried;            /* the user cut the grace short (stop_now) */
	grpc_call *inflight;
	bool thread_running;

	/* log relay, under log_lock */
	pthread_mutex_t log_lock;
	struct gs_logmsg logq[GS_LOGQ];
	uint32_t log_head, log_count;
	uint64_t log_lost;

	/* sink thread only */
	pthread_t thread;
	grpc_channel *ch;
	grpc_completion_queue *cq;
	struct otlp_encoder *enc;
	const struct gq_entry **batch;
	bool outage;
	uint64_t outage_since;
	uint64_t outage_resent;
	bool permanent_logged, rejected_logged, exhausted_logged;
	uint64_t next_metrics;
	uint32_t rng;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct timespec abs_realtime_after_mono(uint64_t mono_deadline)
{
	/* pthread_cond_timedwait uses CLOCK_MONOTONIC (condattr set below) */
	struct timespec ts = {
		.tv_sec = (time_t)(mono_deadline / 1000000000ull),
		.tv_nsec = (long)(mono_deadline % 1000000000ull),
	};
	return ts;
}

static void cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m,
			    uint64_t mono_deadline)
{
	struct timespec ts = abs_realtime_after_mono(mono_deadline);

	pthread_cond_timedwait(c, m, &ts);
}

/* ------------------------------------------------------------------ */
/* Log relay (sink thread -> loop thread)                              */
/* ------------------------------------------------------------------ */

static void tlog(struct gs *s, int level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void tlog(struct gs *s, int level, const char *fmt, ...)
{
	va_list ap;
	uint64_t one = 1;

	pthread_mutex_lock(&s->log_lock);
	if (s->log_count == GS_LOGQ) {
		s->log_lost++;
	} else {
		struct gs_logmsg *m = &s->logq[(s->log_head + s->log_count) % GS_LOGQ];

		m->level = level;
		va_start(ap, fmt);
		vsnprintf(m->text, sizeof(m->text), fmt, ap);
		va_end(ap);
		s->log_count++;
	}
	pthread_mutex_unlock(&s->log_lock);
	if (s->efd >= 0 && write(s->efd, &one, sizeof(one)) < 0) {
		/* counter saturated or closed: the timer drains the ring */
	}
}

/* Loop thread: print what the sink thread queued. */
static void drain_logs(struct gs *s)
{
	uint64_t v;

	if (s->efd >= 0 && read(s->efd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing signalled */
	}
	for (;;) {
		struct gs_logmsg m;
		uint64_t lost;

		pthread_mutex_lock(&s->log_lock);
		if (s->log_count == 0) {
			lost = s->log_lost;
			s->log_lost = 0;
			pthread_mutex_unlock(&s->log_lock);
			if (lost)
				s->host->log(s->inst, NT_LOG_WARN,
					     "%" PRIu64 " log lines of the sink thread were suppressed", lost);
			return;
		}
		m = s->logq[s->log_head];
		s->log_head = (s->log_head + 1) % GS_LOGQ;
		s->log_count--;
		pthread_mutex_unlock(&s->log_lock);
		s->host->log(s->inst, m.level, "%s", m.text);
	}
}

/* ------------------------------------------------------------------ */
/* Counting                                                            */
/* ------------------------------------------------------------------ */

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
static void count_dropped(struct gs *s, enum gs_drop_reason r, uint64_t n)
{
	const char *lv[2] = { s->iname[0], gs_drop_reason_names[r] };

	if (!n)
		return;
	s->host->metric_add(s->m_dropped, lv, (double)n);
	s->host->count_drop(s->inst, drop_stage(r), n);
}

/* Loop thread: move drops counted in consume() into the registry. */
static void push_pending_drops(struct gs *s)
{
	for (int r = 0; r < GS_DROP__N; r++) {
		count_dropped(s, (enum gs_drop_reason)r, s->pending_drops[r]);
		s->pending_drops[r] = 0;
	}
}

static void count_export(struct gs *s, const char *signal, int code,
			 uint64_t dur_ns)
{
	const char *lv[3] = { s->iname[0], signal, gs_code_name(code) };

	s->host->metric_add(s->m_exports, lv, 1);
	s->host->metric_observe(s->m_duration, s->iname, (double)dur_ns / 1e9);
}

/* ------------------------------------------------------------------ */
/* gRPC (sink thread only)                                             */
/* ------------------------------------------------------------------ */

struct rpc_result {
	int code;
	char msg[320];
	uint8_t *resp;
	size_t resp_len;
};

static void set_msg(struct rpc_result *r, grpc_slice details, const char *err)
{
	size_t n = GRPC_SLICE_LENGTH(details);

	if (n) {
		if (n >= sizeof(r->msg))
			n = sizeof(r->msg) - 1;
		memcpy(r->msg, GRPC_SLICE_START_PTR(details), n);
		r->msg[n] = '\0';
	} else if (err) {
		snprintf(r->msg, sizeof(r->msg), "%s", err);
	} else {
		r->msg[0] = '\0';
	}
	for (char *c = r->msg; *c; c++)
		if (*c == '\n' || *c == '\r')
			*c = ' ';
}

/* One unary call; `payload` stays owned by the caller. */
static void rpc_unary(struct gs *s, const char *method, grpc_slice payload,
		      uint64_t deadline_mono, bool wait_ready, struct rpc_result *r)
{
	grpc_metadata_array md_init, md_trail;
	grpc_byte_buffer *send_bb, *recv_bb = NULL;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	const char *err_str = NULL;
	grpc_op ops[6];
	grpc_call *call;
	grpc_event ev;
	uint64_t now = mono_ns();
	gpr_timespec deadline;
	int64_t left_ms;

	memset(r, 0, sizeof(*r));
	left_ms = deadline_mono > now ? (int64_t)((deadline_mono - now) / 1000000) : 1;
	if (left_ms < 1)
		left_ms = 1;
	deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
				gpr_time_from_millis(left_ms, GPR_TIMESPAN));
	grpc_slice method_slice = grpc_slice_from_static_string(method);

	call = grpc_channel_create_call(s->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
					method_slice, NULL, deadline, NULL);
	if (!call) {
		r->code = GRPC_STATUS_INTERNAL;
		snprintf(r->msg, sizeof(r->msg), "cannot create a call");
		return;
	}
	grpc_metadata_array_init(&md_init);
	grpc_metadata_array_init(&md_trail);
	send_bb = grpc_raw_byte_buffer_create(&payload, 1);

	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (wait_ready)
		ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send_bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md_init;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv_bb;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &md_trail;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	ops[5].data.recv_status_on_client.error_string = &err_str;

	pthread_mutex_lock(&s->lock);
	s->inflight = call;
	if (s->abandon_req > s->abandon_done)
		grpc_call_cancel(call, NULL); /* flush gave up already */
	pthread_mutex_unlock(&s->lock);

	grpc_call_error ce = grpc_call_start_batch(call, ops, 6, call, NULL);

	if (ce != GRPC_CALL_OK) {
		r->code = GRPC_STATUS_INTERNAL;
		snprintf(r->msg, sizeof(r->msg), "grpc_call_start_batch: %s",
			 grpc_call_error_to_string(ce));
	} else {
		ev = grpc_completion_queue_pluck(s->cq, call,
						 gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		if (ev.type != GRPC_OP_COMPLETE) {
			r->code = GRPC_STATUS_INTERNAL;
			snprintf(r->msg, sizeof(r->msg), "completion queue event %d", ev.type);
		} else {
			r->code = (int)status;
			set_msg(r, details, err_str);
		}
	}
	pthread_mutex_lock(&s->lock);
	s->inflight = NULL;
	pthread_mutex_unlock(&s->lock);

	if (r->code == GRPC_STATUS_OK && recv_bb) {
		grpc_byte_buffer_reader rd;

		if (grpc_byte_buffer_reader_init(&rd, recv_bb)) {
			grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
			size_t n = GRPC_SLICE_LENGTH(all);

			r->resp = malloc(n ? n : 1);
			if (r->resp) {
				memcpy(r->resp, GRPC_SLICE_START_PTR(all), n);
				r->resp_len = n;
			}
			grpc_slice_unref(all);
			grpc_byte_buffer_reader_destroy(&rd);
		}
	}
	if (recv_bb)
		grpc_byte_buffer_destroy(recv_bb);
	grpc_byte_buffer_destroy(send_bb);
	if (err_str)
		gpr_free((void *)err_str);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md_init);
	grpc_metadata_array_destroy(&md_trail);
	grpc_call_unref(call);
}

static int open_channel(struct gs *s)
{
	grpc_arg args[8];
	int n = 0;
	char ua[64];

#define IARG(k, v)                                                             \
	do {                                                                   \
		args[n].type = GRPC_ARG_INTEGER;                               \
		args[n].key = (char *)(k);                                     \
		args[n].value.integer = (int)(v);                              \
		n++;                                                           \
	} while (0)
	IARG(GRPC_ARG_ENABLE_RETRIES, 0); /* the sink retries, see send_batch */
	/* Reconnect pacing follows the sink's backoff. Not
	 * GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the
	 * connection attempt's timeout (default 20 s), and a busy host can
	 * need more than retry_initial_ms for a TCP + HTTP/2 handshake. */
	IARG(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, s->cfg->retry_initial_ms);
	IARG(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, s->cfg->retry_max_ms);
	if (s->compression != GRPC_COMPRESS_NONE)
		IARG(GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM, s->compression);
#undef IARG
	snprintf(ua, sizeof(ua), "ntcore-grpc/%s", NTCORE_GRPC_VERSION);
	args[n].type = GRPC_ARG_STRING;
	args[n].key = (char *)GRPC_ARG_PRIMARY_USER_AGENT_STRING;
	args[n].value.string = ua;
	n++;

	grpc_channel_args cargs = { .num_args = (size_t)n, .args = args };
	grpc_channel_credentials *creds =
		s->tls ? grpc_ssl_credentials_create(s->pem_roots, NULL, NULL, NULL)
		       : grpc_insecure_credentials_create();

	if (!creds)
		return -EINVAL;
	s->ch = grpc_channel_create(s->target, creds, &cargs);
	grpc_channel_credentials_release(creds);
	if (!s->ch)
		return -EINVAL;
	/* start connecting now, so a bad endpoint shows up early */
	grpc_channel_check_connectivity_state(s->ch, 1);
	s->cq = grpc_completion_queue_create_for_pluck(NULL);
	return s->cq ? 0 : -ENOMEM;
}

static void close_channel(struct gs *s)
{
	if (s->ch)
		grpc_channel_destroy(s->ch);
	s->ch = NULL;
	if (s->cq) {
		grpc_completion_queue_shutdown(s->cq);
		while (grpc_completion_queue_pluck(s->cq, NULL,
						   gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
			       .type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(s->cq);
	}
	s->cq = NULL;
}

/* ------------------------------------------------------------------ */
/* Export logic (sink thread)                                          */
/* ------------------------------------------------------------------ */

static uint64_t call_deadline(struct gs *s)
{
	uint64_t d = mono_ns() + (uint64_t)s->cfg->timeout_ms * 1000000ull;
	uint64_t fd;

	pthread_mutex_lock(&s->lock);
	fd = s->flush_deadline;
	pthread_mutex_unlock(&s->lock);
	if (fd && fd < d)
		d = fd;
	return d;
}

static bool abandoned(struct gs *s)
{
	bool a;

	pthread_mutex_lock(&s->lock);
	a = s->abandon_req > s->abandon_done;
	pthread_mutex_unlock(&s->lock);
	return a;
}

/* A failed call: note the outage once, then quietly. */
static void note_failure(struct gs *s, const char *what, const struct rpc_result *r)
{
	if (!s->outage) {
		s->outage = true;
		s->outage_since = mono_ns();
		s->outage_resent = 0;
		tlog(s, NT_LOG_WARN,
		     "cannot export %s to collector at %s: %s: %s; retrying with backoff "
		     "(%" PRId64 "..%" PRId64 " ms); while it is unreachable, events beyond "
		     "queue_size=%" PRId64 " are dropped (reason queue_full)",
		     what, s->target, gs_code_name(r->code), r->msg[0] ? r->msg : "(no details)",
		     s->cfg->retry_initial_ms, s->cfg->retry_max_ms, s->cfg->queue_size);
	} else {
		tlog(s, NT_LOG_DEBUG, "export of %s to %s failed again: %s: %s", what,
		     s->target, gs_code_name(r->code), r->msg);
	}
}

static void note_success(struct gs *s)
{
	if (s->outage) {
		tlog(s, NT_LOG_INFO,
		     "collector at %s reachable again after %.1f s; %" PRIu64
		     " event sends were retried",
		     s->target, (double)(mono_ns() - s->outage_since) / 1e9,
		     s->outage_resent);
		s->outage = false;
	}
}

static int64_t logs_rejected(const struct rpc_result *r, char *msg, size_t mlen)
{
	Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceResponse *resp;
	int64_t n = 0;

	msg[0] = '\0';
	if (!r->resp || !r->resp_len)
		return 0;
	resp = opentelemetry__proto__collector__logs__v1__export_logs_service_response__unpack(
		NULL, r->resp_len, r->resp);
	if (!resp)
		return 0;
	if (resp->partial_success) {
		n = resp->partial_success->rejected_log_records;
		snprintf(msg, mlen, "%s",
			 resp->partial_success->error_message ? resp->partial_success->error_message : "");
	}
	opentelemetry__proto__collector__logs__v1__export_logs_service_response__free_unpacked(resp, NULL);
	return n;
}

static void release(struct gs *s, uint32_t n)
{
	pthread_mutex_lock(&s->lock);
	gq_release(&s->q, n);
	pthread_mutex_unlock(&s->lock);
}

/* Wait `ms` unless a flush gives up or the sink stops. */
static void backoff_wait(struct gs *s, uint64_t ms)
{
	uint64_t until = mono_ns() + ms * 1000000ull;
	uint64_t flush_req;

	pthread_mutex_lock(&s->lock);
	flush_req = s->flush_req;
	/* a flush that arrives meanwhile cuts the wait short: retry now */
	while (!s->stop && s->abandon_req == s->abandon_done && s->flush_req == flush_req &&
	       mono_ns() < until) {
		uint64_t t = until;

		if (s->flush_deadline && s->flush_deadline < t)
			t = s->flush_deadline;
		cond_wait_until(&s->wake, &s->lock, t);
		if (s->flush_deadline && mono_ns() >= s->flush_deadline)
			break;
	}
	pthread_mutex_unlock(&s->lock);
}

static void free_slice_buf(void *p)
{
	free(p);
}

/*
 * Send the n oldest entries (already peeked into s->batch). Returns after the
 * batch was delivered, dropped, or abandoned by flush (then the entries are
 * left for the abandon handler to drop).
 */
static void send_batch(struct gs *s, uint32_t n)
{
	uint64_t first_try = mono_ns();
	uint32_t attempt = 0;
	bool resend = false;
	uint8_t *buf;
	size_t len = 0;
	grpc_slice payload;

encode:
	buf = otlp_encode_logs(s->enc, s->batch, n, &len);
	if (!buf) {
		tlog(s, NT_LOG_ERROR, "out of memory encoding %u events; dropping them", n);
		count_dropped(s, GS_DROP_PERMANENT, n);
		release(s, n);
		return;
	}
	payload = grpc_slice_new(buf, len, free_slice_buf);

	for (;;) {
		struct rpc_result r;
		uint64_t t0 = mono_ns();

		if (resend) {
			s->host->metric_add(s->m_retried, s->iname, n);
			s->outage_resent += n;
		}
		/* The first try fails fast when the collector is unreachable, so
		 * that the outage is reported at once; retries wait for the
		 * channel to connect (until the deadline), so delivery resumes as
		 * soon as gRPC's reconnect, paced by retry_initial_ms ..
		 * retry_max_ms, gets through. */
		rpc_unary(s, LOGS_METHOD, payload, call_deadline(s), resend, &r);
		count_export(s, "logs", r.code, mono_ns() - t0);

		if (r.code == GRPC_STATUS_OK) {
			char why[256];
			int64_t rej = logs_rejected(&r, why, sizeof(why));

			if (rej < 0)
				rej = 0;
			if (rej > n)
				rej = n;
			s->host->metric_add(s->m_sent, s->iname, (double)(n - (uint32_t)rej));
			if (rej) {
				count_dropped(s, GS_DROP_REJECTED, (uint64_t)rej);
				if (!s->rejected_logged)
					tlog(s, NT_LOG_WARN,
					     "collector at %s rejected %" PRId64 " of %u events: %s "
					     "(counted in ntcore_grpc_events_dropped_total{reason=\"rejected\"}; "
					     "not logged again)",
					     s->target, rej, n, why);
				s->rejected_logged = true;
			}
			note_success(s);
			free(r.resp);
			release(s, n);
			break;
		}
		free(r.resp);
		if (abandoned(s))
			break;
		if (!gs_code_retryable(r.code)) {
			count_dropped(s, GS_DROP_PERMANENT, n);
			if (!s->permanent_logged)
				tlog(s, NT_LOG_ERROR,
				     "collector at %s refused the export with a permanent error: %s: %s; "
				     "dropped %u events, and will drop every batch refused this way "
				     "(counted in ntcore_grpc_events_dropped_total{reason=\"permanent_error\"}; "
				     "not logged again)",
				     s->target, gs_code_name(r.code), r.msg[0] ? r.msg : "(no details)", n);
			else
				tlog(s, NT_LOG_DEBUG, "permanent export error %s: %s; dropped %u events",
				     gs_code_name(r.code), r.msg, n);
			s->permanent_logged = true;
			release(s, n);
			break;
		}
		note_failure(s, "events", &r);
		if (s->cfg->retry_max_elapsed_s > 0 &&
		    mono_ns() - first_try > (uint64_t)s->cfg->retry_max_elapsed_s * 1000000000ull) {
			count_dropped(s, GS_DROP_RETRY_EXHAUSTED, n);
			if (!s->exhausted_logged)
				tlog(s, NT_LOG_WARN,
				     "gave up on %u events after retrying for %" PRId64 " s "
				     "(retry_max_elapsed_s; counted as reason=\"retry_exhausted\")",
				     n, s->cfg->retry_max_elapsed_s);
			s->exhausted_logged = true;
			release(s, n);
			break;
		}
		backoff_wait(s, gs_backoff_ms(attempt++, (uint64_t)s->cfg->retry_initial_ms,
					      (uint64_t)s->cfg->retry_max_ms,
					      s->rng = s->rng * 1103515245u + 12345u));
		if (abandoned(s))
			break;
		pthread_mutex_lock(&s->lock);
		bool stop = s->stop;
		bool flush_over = s->flush_deadline && mono_ns() >= s->flush_deadline;
		pthread_mutex_unlock(&s->lock);
		if (stop || flush_over) {
			/* flush() is about to abandon what is left; stop trying */
			break;
		}
		resend = true;
		if (r.code == GRPC_STATUS_RESOURCE_EXHAUSTED && n > 1) {
			/* maybe too large for the collector: send halves */
			n /= 2;
			grpc_slice_unref(payload);
			goto encode;
		}
	}
	grpc_slice_unref(payload);
}

static void export_metrics(struct gs *s)
{
	struct rpc_result r;
	uint32_t points;
	size_t len = 0;
	uint8_t *buf;
	uint64_t t0;

	otlp_metrics_begin(s->enc, real_ns());
	s->host->metrics_visit(s->inst, otlp_metrics_visit, s->enc);
	buf = otlp_encode_metrics(s->enc, &len, &points);
	if (!buf)
		return;
	if (points == 0) {
		free(buf);
		return;
	}
	grpc_slice payload = grpc_slice_new(buf, len, free_slice_buf);

	t0 = mono_ns();
	rpc_unary(s, METRICS_METHOD, payload, call_deadline(s), false, &r);
	grpc_slice_unref(payload);
	count_export(s, "metrics", r.code, mono_ns() - t0);
	free(r.resp);
	if (r.code == GRPC_STATUS_OK) {
		s->host->metric_add(s->m_points, s->iname, points);
		note_success(s);
	} else if (gs_code_retryable(r.code)) {
		note_failure(s, "metrics", &r); /* cumulative: the next export catches up */
	} else {
		tlog(s, s->permanent_logged ? NT_LOG_DEBUG : NT_LOG_ERROR,
		     "collector at %s refused metrics: %s: %s", s->target,
		     gs_code_name(r.code), r.msg);
		s->permanent_logged = true;
	}
}

/* Under lock: drop everything queued (flush gave up). The drops are
 * counted before the flush is told it is done: the sinks that flush after
 * this one write the final metrics, and must see them. */
static void abandon_locked(struct gs *s)
{
	uint32_t n = s->q.count;
	uint64_t req = s->abandon_req, flush_req = s->flush_req;
	bool hurried = s->hurried;

	gq_release(&s->q, n);
	pthread_mutex_unlock(&s->lock);
	if (n && hurried) {
		count_dropped(s, GS_DROP_SHUTDOWN, n);
		tlog(s, NT_LOG_WARN,
		     "stopping at once (signal again): %u events not delivered to %s "
		     "(counted as reason=\"shutdown\")", n, s->target);
	} else if (n) {
		count_dropped(s, GS_DROP_SHUTDOWN, n);
		tlog(s, NT_LOG_WARN,
		     "shutdown grace (%" PRId64 " ms) over: %u events not delivered to %s "
		     "(counted as reason=\"shutdown\")",
		     s->cfg->shutdown_grace_ms, n, s->target);
	}
	pthread_mutex_lock(&s->lock);
	s->abandon_done = req;
	s->flush_done = flush_req;
	pthread_cond_broadcast(&s->done);
}

static void grpc_quiet_log(gpr_log_func_args *args)
{
	(void)args;
}

static void *sink_thread(void *arg)
{
	struct gs *s = arg;
	uint64_t batch_ns = (uint64_t)s->cfg->batch_timeout_ms * 1000000ull;
	uint64_t metrics_ns = (uint64_t)s->cfg->metrics_interval_ms * 1000000ull;

	/* gRPC's own logger writes to stderr around ntcore's log; the sink
	 * reports every failure with gRPC's status details itself. Keep it
	 * only when the user asked gRPC for it. */
	if (!getenv("GRPC_VERBOSITY") && !getenv("GRPC_TRACE"))
		gpr_set_log_function(grpc_quiet_log);
	grpc_init();
	if (open_channel(s) < 0)
		tlog(s, NT_LOG_ERROR, "cannot create a gRPC channel to %s; events will be dropped",
		     s->target);
	s->next_metrics = mono_ns() + metrics_ns;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		uint32_t n = 0;
		bool do_metrics = false, final_flush = false;
		uint64_t flush_id = 0;

		if (s->abandon_req > s->abandon_done) {
			abandon_locked(s);
			continue;
		}
		bool flushing = s->flush_req > s->flush_done;
		uint64_t now = mono_ns();
		const struct gq_entry *old = gq_oldest(&s->q);

		if (!s->ch && s->q.count) {
			/* no channel: nothing can be sent */
			uint32_t k = s->q.count;

			gq_release(&s->q, k);
			pthread_mutex_unlock(&s->lock);
			count_dropped(s, GS_DROP_PERMANENT, k);
			pthread_mutex_lock(&s->lock);
			continue;
		}
		if (flushing && s->flush_deadline && now >= s->flush_deadline) {
			/* grace over: flush() is about to abandon the rest */
			cond_wait_until(&s->wake, &s->lock, now + 20000000ull);
			continue;
		}
		if (s->q.count >= (uint64_t)s->cfg->batch_size ||
		    (old && (flushing || s->stop || now - old->enq_mono_ns >= batch_ns))) {
			n = gq_peek(&s->q, s->batch, (uint32_t)s->cfg->batch_size,
				    (size_t)s->cfg->max_request_bytes);
		} else if (flushing) {
			final_flush = true;
			flush_id = s->flush_req;
		} else if (s->stop) {
			break;
		} else if (s->cfg->metrics && s->ch && now >= s->next_metrics) {
			do_metrics = true;
		} else {
			uint64_t until = s->cfg->metrics && s->ch ? s->next_metrics : now + 3600000000000ull;

			if (old && old->enq_mono_ns + batch_ns < until)
				until = old->enq_mono_ns + batch_ns;
			cond_wait_until(&s->wake, &s->lock, until);
			continue;
		}
		uint32_t qcount = s->q.count;
		size_t qused = s->q.used;

		pthread_mutex_unlock(&s->lock);
		s->host->metric_set(s->m_queue, s->iname, qcount);
		s->host->metric_set(s->m_queue_bytes, s->iname, (double)qused);
		if (n) {
			send_batch(s, n);
			pthread_mutex_lock(&s->lock);
			qcount = s->q.count;
			qused = s->q.used;
			pthread_mutex_unlock(&s->lock);
			s->host->metric_set(s->m_queue, s->iname, qcount);
			s->host->metric_set(s->m_queue_bytes, s->iname, (double)qused);
		} else if (do_metrics) {
			export_metrics(s);
			s->next_metrics = mono_ns() + metrics_ns;
		} else if (final_flush) {
			if (s->cfg->metrics && s->ch)
				export_metrics(s);
			s->next_metrics = mono_ns() + metrics_ns;
			pthread_mutex_lock(&s->lock);
			if (s->flush_done < flush_id)
				s->flush_done = flush_id;
			pthread_cond_broadcast(&s->done);
			pthread_mutex_unlock(&s->lock);
		}
		pthread_mutex_lock(&s->lock);
	}
	/* stop: whatever is left (only when detach came without a flush) */
	uint32_t left = s->q.count;

	gq_release(&s->q, left);
	pthread_mutex_unlock(&s->lock);
	count_dropped(s, GS_DROP_SHUTDOWN, left);
	close_channel(s);
	grpc_shutdown_blocking();
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Ops                                                                 */
/* ------------------------------------------------------------------ */

static char *read_file(const char *path, size_t max, int *err)
{
	FILE *f = fopen(path, "re");
	char *buf;
	size_t n;

	if (!f) {
		*err = errno;
		return NULL;
	}
	buf = malloc(max + 1);
	if (!buf) {
		fclose(f);
		*err = ENOMEM;
		return NULL;
	}
	n = fread(buf, 1, max, f);
	if (ferror(f)) {
		*err = errno ? errno : EIO;
		fclose(f);
		free(buf);
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static void gs_free(struct gs *s)
{
	if (!s)
		return;
	otlp_encoder_free(s->enc);
	gq_free(&s->q);
	free(s->batch);
	free(s->pem_roots);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->log_lock);
	pthread_cond_destroy(&s->wake);
	pthread_cond_destroy(&s->done);
	free(s);
}

static int gs_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	const struct grpc_cfg *cfg = config;
	struct gs *s;
	char err[256];
	int scheme_tls, rc;
	pthread_condattr_t ca;

	if (gs_parse_endpoint(cfg->endpoint, (char[512]){ 0 }, 512, &scheme_tls, err,
			      sizeof(err)) < 0)
		return host->config_error(inst, "endpoint", "\"%s\": %s", cfg->endpoint, err);
	if (scheme_tls == 0 && cfg->tls)
		return host->config_error(inst, "tls",
					  "tls = true contradicts the http:// endpoint (use https://)");
	bool tls = cfg->tls || scheme_tls == 1;

	if (cfg->ca_file && *cfg->ca_file && !tls)
		return host->config_error(inst, "ca_file",
					  "ca_file is set but TLS is off (set tls = true or use an https:// endpoint)");
	if (cfg->retry_initial_ms > cfg->retry_max_ms)
		return host->config_error(inst, "retry_initial_ms",
					  "retry_initial_ms (%" PRId64 ") exceeds retry_max_ms (%" PRId64 ")",
					  cfg->retry_initial_ms, cfg->retry_max_ms);
	if (cfg->batch_size > cfg->queue_size)
		return host->config_error(inst, "batch_size",
					  "batch_size (%" PRId64 ") exceeds queue_size (%" PRId64 ")",
					  cfg->batch_size, cfg->queue_size);
	for (uint32_t i = 0; i < cfg->resource_attributes.n; i++) {
		const char *kv = cfg->resource_attributes.v[i];
		const char *eq = strchr(kv, '=');

		if (!eq || eq == kv)
			return host->config_error(inst, "resource_attributes",
						  "\"%s\" is not \"key=value\"", kv);
	}
	if (!cfg->service_name || !*cfg->service_name)
		return host->config_error(inst, "service_name", "must not be empty");

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->inst = inst;
	s->host = host;
	s->cfg = cfg;
	s->iname[0] = host->instance_name(inst);
	s->efd = -1;
	s->tls = tls;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->log_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_cond_init(&s->done, &ca);
	pthread_condattr_destroy(&ca);
	gs_parse_endpoint(cfg->endpoint, s->target, sizeof(s->target), &scheme_tls, err,
			  sizeof(err));

	if (tls) {
		const char *path = cfg->ca_file && *cfg->ca_file ? cfg->ca_file : NULL;
		int e = 0;

		if (path) {
			s->pem_roots = read_file(path, 4 << 20, &e);
			if (!s->pem_roots) {
				gs_free(s);
				return host->config_error(inst, "ca_file", "cannot read \"%s\": %s",
							  path, strerror(e));
			}
			if (!strstr(s->pem_roots, "-----BEGIN CERTIFICATE-----")) {
				gs_free(s);
				return host->config_error(inst, "ca_file",
							  "\"%s\" holds no PEM certificate", path);
			}
		} else {
			/* the system roots, as Debian's ca-certificates lays them
			 * out; else gRPC's own default roots */
			s->pem_roots = read_file(SYSTEM_ROOTS, 16 << 20, &e);
		}
	}
	if (strcmp(cfg->compression, "gzip") == 0)
		s->compression = GRPC_COMPRESS_GZIP;
	else if (strcmp(cfg->compression, "deflate") == 0)
		s->compression = GRPC_COMPRESS_DEFLATE;
	else
		s->compression = GRPC_COMPRESS_NONE;

	if (gethostname(s->hostname, sizeof(s->hostname) - 1) < 0)
		snprintf(s->hostname, sizeof(s->hostname), "unknown");
	if (cfg->instance_id && *cfg->instance_id)
		snprintf(s->instance_id, sizeof(s->instance_id), "%s", cfg->instance_id);
	else
		snprintf(s->instance_id, sizeof(s->instance_id), "%s:%d", s->hostname,
			 (int)getpid());
	s->start_wall_ns = real_ns();

	struct otlp_resource_info res = {
		.service_name = cfg->service_name,
		.service_version = NTCORE_GRPC_VERSION,
		.service_instance_id = s->instance_id,
		.host_name = s->hostname,
		.extra = cfg->resource_attributes.v,
		.n_extra = cfg->resource_attributes.n,
	};
	s->enc = otlp_encoder_new(&res, s->start_wall_ns);
	if (s->enc && cfg->identity && NT_HOST_HAS(host, identity))
		otlp_encoder_set_ident(s->enc, gs_ident, s);
	s->batch = calloc((size_t)cfg->batch_size, sizeof(*s->batch));
	rc = gq_init(&s->q, (size_t)cfg->queue_bytes, (uint32_t)cfg->queue_size);
	if (!s->enc || !s->batch || rc < 0) {
		gs_free(s);
		host->log(inst, NT_LOG_ERROR, "out of memory");
		return -ENOMEM;
	}
	s->rng = (uint32_t)s->start_wall_ns ^ (uint32_t)getpid();

	s->m_sent = host->metric_register(inst, &md_sent);
	s->m_retried = host->metric_register(inst, &md_retried);
	s->m_dropped = host->metric_register(inst, &md_dropped);
	s->m_queue = host->metric_register(inst, &md_queue);
	s->m_queue_bytes = host->metric_register(inst, &md_queue_bytes);
	s->m_exports = host->metric_register(inst, &md_exports);
	s->m_duration = host->metric_register(inst, &md_duration);
	s->m_points = host->metric_register(inst, &md_points);
	if (!s->m_sent || !s->m_retried || !s->m_dropped || !s->m_queue ||
	    !s->m_queue_bytes || !s->m_exports || !s->m_duration || !s->m_points) {
		host->log(inst, NT_LOG_ERROR, "cannot register the sink's metrics");
		gs_free(s);
		return -ENOMEM;
	}
	/* make the reasons visible at 0 before anything is lost */
	for (int r = 0; r < GS_DROP__N; r++) {
		const char *lv[2] = { s->iname[0], gs_drop_reason_names[r] };

		host->metric_add(s->m_dropped, lv, 0);
	}
	host->metric_add(s->m_sent, s->iname, 0);
	host->metric_add(s->m_retried, s->iname, 0);

	host->log(inst, NT_LOG_INFO, "exporting OTLP/gRPC to %s%s%s, batch %" PRId64
		  ", queue %" PRId64 " events / %" PRId64 " bytes%s",
		  s->target, tls ? " over TLS" : "",
		  tls ? (cfg->ca_file && *cfg->ca_file ? " (ca_file)" : " (system roots)") : "",
		  cfg->batch_size, cfg->queue_size, cfg->queue_bytes,
		  cfg->metrics ? ", with metrics" : "");
	*state = s;
	return 0;
}

static int gs_attach(void *state)
{
	struct gs *s = state;
	sigset_t all, old;
	int rc;

	s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->efd >= 0 && s->host->watch_fd(s->inst, s->efd, TOKEN_LOG) < 0) {
		close(s->efd);
		s->efd = -1;
	}
	s->host->add_timer(s->inst, 1000, TOKEN_TIMER);

	/* the sink thread, and gRPC's threads it starts, take no signals */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&s->thread, NULL, sink_thread, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		s->host->log(s->inst, NT_LOG_ERROR, "cannot start the sink thread: %s",
			     strerror(rc));
		if (s->efd >= 0)
			close(s->efd);
		s->efd = -1;
		return -rc;
	}
	pthread_mutex_lock(&s->lock);
	s->thread_running = true;
	pthread_mutex_unlock(&s->lock);
	s->attached = true;
	return 0;
}

static int gs_poll(void *state, uint32_t token, uint32_t budget)
{
	struct gs *s = state;

	(void)token;
	(void)budget;
	push_pending_drops(s);
	drain_logs(s);
	return 0;
}

static int gs_ident(void *ctx, uint32_t pid, struct nt_identity *out)
{
	struct gs *s = ctx;

	return s->host->identity(s->inst, pid, out);
}

static void gs_consume(void *state, const struct nt_event_hdr *ev,
		       const struct nt_schema *schema)
{
	struct gs *s = state;
	struct nt_identity id;

	/* resolved now, while the process surely lives; the encoder reads
	 * the cache when the batch goes out */
	if (ev->pid && s->cfg->identity && NT_HOST_HAS(s->host, identity))
		s->host->identity(s->inst, ev->pid, &id);
	uint64_t mono = mono_ns();
	uint64_t wall = s->host->wall_ns(s->inst, ev->ts_ns);
	uint64_t observed = s->host->wall_ns(s->inst, mono);
	uint32_t pending = 0;
	int rc;

	pthread_mutex_lock(&s->lock);
	if (!s->thread_running)
		rc = 1; /* not attached, or detached */
	else
		rc = gq_push(&s->q, ev, schema, wall, observed, mono);
	if (rc == GQ_OK)
		pending = s->q.count;
	pthread_mutex_unlock(&s->lock);

	if (rc == 1)
		s->pending_drops[GS_DROP_SHUTDOWN]++;
	else if (rc == GQ_FULL)
		s->pending_drops[GS_DROP_QUEUE_FULL]++;
	else if (rc == GQ_TOO_LARGE)
		s->pending_drops[GS_DROP_TOO_LARGE]++;
	else if (pending == 1 || pending == (uint32_t)s->cfg->batch_size)
		pthread_cond_signal(&s->wake);
	s->consumed_since_flush = true;
}

static bool stop_now(struct gs *s);

static void do_flush(struct gs *s)
{
	uint64_t deadline, req;
	bool gave_up = false;

	push_pending_drops(s);
	pthread_mutex_lock(&s->lock);
	if (!s->thread_running) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	deadline = mono_ns() + (uint64_t)s->cfg->shutdown_grace_ms * 1000000ull;
	s->flush_deadline = deadline ? deadline : 1;
	req = ++s->flush_req;
	pthread_cond_broadcast(&s->wake);
	while (s->flush_done < req && mono_ns() < deadline) {
		/* in slices, so that a second SIGINT/SIGTERM ends the grace */
		uint64_t slice = mono_ns() + HURRY_CHECK_NS;
		cond_wait_until(&s->done, &s->lock, slice < deadline ? slice : deadline);
		if (s->flush_done < req && stop_now(s)) {
			s->hurried = true;
			deadline = s->flush_deadline = mono_ns();
		}
	}
	if (s->flush_done < req) {
		/* grace over: drop what is left, cancel what is in flight */
		uint64_t hard = mono_ns() + 2000000000ull;

		gave_up = true;
		s->abandon_req++;
		if (s->inflight)
			grpc_call_cancel(s->inflight, NULL);
		pthread_cond_broadcast(&s->wake);
		while (s->abandon_done < s->abandon_req && mono_ns() < hard)
			cond_wait_until(&s->done, &s->lock, hard);
		if (s->abandon_done < s->abandon_req)
			s->host->log(s->inst, NT_LOG_ERROR,
				     "the sink thread did not stop its export in time");
	}
	s->flush_deadline = 0;
	pthread_mutex_unlock(&s->lock);
	(void)gave_up;
	s->consumed_since_flush = false;
	drain_logs(s);
}

/* The user asked again to stop (host 1.1 cores cannot say so). */
static bool stop_now(struct gs *s)
{
	return NT_HOST_HAS(s->host, stop_now) && s->host->stop_now(s->inst);
}

static void gs_flush(void *state)
{
	do_flush(state);
}

static void gs_detach(void *state)
{
	struct gs *s = state;

	if (!s->attached)
		return;
	if (s->consumed_since_flush)
		do_flush(s);
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->wake);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	pthread_mutex_lock(&s->lock);
	s->thread_running = false;
	pthread_mutex_unlock(&s->lock);
	s->attached = false;
	push_pending_drops(s);
	drain_logs(s);
	if (s->efd >= 0)
		close(s->efd);
	s->efd = -1;
}

static void gs_fini(void *state)
{
	gs_free(state);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "grpc",
	.kind = NT_KIND_SINK,
	.n_config = NT_ARRAY_LEN(grpc_config),
	.description = "OTLP/gRPC exporter: events as log records, metrics as OTLP metrics",
	.version = NTCORE_GRPC_VERSION,
	.config = grpc_config,
	.config_size = sizeof(struct grpc_cfg),
	.init = gs_init,
	.attach = gs_attach,
	.poll = gs_poll,
	.detach = gs_detach,
	.fini = gs_fini,
	.consume = gs_consume,
	.flush = gs_flush,
};
