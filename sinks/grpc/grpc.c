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
 * registry every metrics_interval_ms. The sink thread logs through the
 * kit's log macros, which use the host's thread-safe vlog (ABI 1.2; init
 * refuses an older host).
 *
 * Shutdown. flush() (loop thread) asks the sink thread to send everything
 * and the final metrics, and waits at most shutdown_grace_ms; what is still
 * queued then is counted as dropped (reason shutdown) and any call in flight
 * is cancelled; a second SIGINT/SIGTERM (host->stop_now) ends the wait at
 * once. detach() flushes the same way if events arrived since the
 * last flush, then joins the thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "grpc_state.h"

enum { TOKEN_TIMER = 2 };
#define HURRY_CHECK_NS 100000000ull /* how often flush asks host->stop_now */

static const char *const compression_choices[] = { "none", "gzip", "deflate", NULL };

#define C struct grpc_cfg
static const struct nt_cfg_key grpc_config[] = {
	NT_KEY_STR(C, endpoint, "127.0.0.1:4317",
		   "collector address: host:port, [v6]:port, http://host:port, https://host:port (TLS) or unix:/path"),
	NT_KEY_BOOL(C, tls, false,
		    "use TLS (implied by https://); server verified against ca_file or the system roots"),
	NT_KEY_STR(C, ca_file, "",
		   "PEM file of CA certificates to verify the collector with (default: system roots)"),
	NT_KEY_CHOICE(C, compression, "none", compression_choices,
		      "request compression: none, gzip or deflate"),
	NT_KEY_INT(C, timeout_ms, 10000, 100, 600000,
		   "deadline of one export call, in milliseconds"),
	NT_KEY_INT(C, batch_size, 512, 1, 100000,
		   "most log records per export call"),
	NT_KEY_INT(C, batch_timeout_ms, 1000, 1, 600000,
		   "send a partial batch once its oldest record waited this long (ms)"),
	NT_KEY_INT(C, queue_size, 16384, 1, 10000000,
		   "most records held while waiting to be sent; newer ones are dropped (queue_full)"),
	NT_KEY_INT(C, queue_bytes, 16777216, 65536, 4294967296,
		   "memory bound of the queue in bytes, allocated lazily, never exceeded"),
	NT_KEY_INT(C, max_request_bytes, 3670016, 4096, 67108864,
		   "estimated size cap of one export request (collectors accept 4 MiB by default)"),
	NT_KEY_INT(C, retry_initial_ms, 250, 1, 600000,
		   "first retry delay after a retryable failure (ms), doubled each retry"),
	NT_KEY_INT(C, retry_max_ms, 5000, 1, 3600000,
		   "longest retry delay (ms)"),
	NT_KEY_INT(C, retry_max_elapsed_s, 300, 0, 86400,
		   "drop a batch (retry_exhausted) after retrying it this long; 0: retry until shutdown"),
	NT_KEY_INT(C, shutdown_grace_ms, 5000, 0, 600000,
		   "on shutdown, time allowed to send what is queued before it is dropped (ms)"),
	NT_KEY_BOOL(C, metrics, true,
		    "also export the metrics registry (OTLP metrics)"),
	NT_KEY_INT(C, metrics_interval_ms, 10000, 100, 3600000,
		   "metrics export period (ms); a final export is made on shutdown"),
	NT_KEY_STR(C, service_name, "ntcore",
		   "resource attribute service.name"),
	NT_KEY_STR(C, instance_id, "",
		   "resource attribute service.instance.id (default: <hostname>:<pid>)"),
	NT_KEY_STRLIST(C, resource_attributes, "[]",
		       "extra resource attributes, each \"key=value\""),
	NT_KEY_BOOL(C, identity, false,
		    "log records carry their process's container.id, k8s.pod.uid, k8s.pod.name, k8s.namespace.name ... (docs/kubernetes.md)"),
};
#undef C

static void gs_free(struct gs *s)
{
	if (!s)
		return;
	otlp_encoder_free(s->enc);
	gq_free(&s->q);
	free(s->batch);
	free(s->pem_roots);
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->wake);
	pthread_cond_destroy(&s->done);
	free(s);
}

static struct gs *gs_new(struct nt_instance *inst, const struct nt_host *host,
			 const struct grpc_cfg *cfg, bool tls)
{
	struct gs *s = calloc(1, sizeof(*s));
	pthread_condattr_t ca;

	if (!s)
		return NULL;
	s->inst = inst;
	s->host = host;
	s->cfg = cfg;
	s->iname[0] = host->instance_name(inst);
	s->tls = tls;
	pthread_mutex_init(&s->lock, NULL);
	/* the sink thread's timed waits are on the monotonic clock */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->wake, &ca);
	pthread_cond_init(&s->done, &ca);
	pthread_condattr_destroy(&ca);
	return s;
}

/* host->identity for the encoder (issue 21; safe on the sender thread). */
static int gs_ident(void *ctx, uint32_t pid, struct nt_identity *out)
{
	struct gs *s = ctx;

	return s->host->identity(s->inst, pid, out);
}

/* The encoder (with the resource), the batch array and the queue. */
static int gs_alloc_pipeline(struct gs *s)
{
	const struct grpc_cfg *cfg = s->cfg;
	struct otlp_resource_info res = {
		.service_name = cfg->service_name,
		.service_version = NTCORE_GRPC_VERSION,
		.service_instance_id = s->instance_id,
		.host_name = s->hostname,
		.extra = cfg->resource_attributes.v,
		.n_extra = cfg->resource_attributes.n,
	};
	int rc;

	s->enc = otlp_encoder_new(&res, s->start_wall_ns);
	if (s->enc && cfg->identity && NT_HOST_HAS(s->host, identity))
		otlp_encoder_set_ident(s->enc, gs_ident, s);
	s->batch = calloc((size_t)cfg->batch_size, sizeof(*s->batch));
	rc = gq_init(&s->q, (size_t)cfg->queue_bytes, (uint32_t)cfg->queue_size);
	if (!s->enc || !s->batch || rc < 0) {
		nt_log_err(s, "out of memory");
		return -ENOMEM;
	}
	s->rng = (uint32_t)s->start_wall_ns ^ (uint32_t)getpid();
	return 0;
}

static int gs_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	const struct grpc_cfg *cfg = config;
	struct gs *s;
	bool tls;
	int rc;

	if (!NT_HOST_HAS(host, vlog)) {
		nt_kit_log(host, inst, NT_LOG_ERROR,
			   "needs an ntcore of ABI 1.2 or later (its sink thread logs through vlog)");
		return -ENOTSUP;
	}
	rc = gs_config_check(inst, host, cfg, &tls);
	if (rc < 0)
		return rc;
	s = gs_new(inst, host, cfg, tls);
	if (!s)
		return -ENOMEM;
	if ((rc = gs_config_apply(s)) < 0 || (rc = gs_alloc_pipeline(s)) < 0 ||
	    (rc = gs_metrics_register(s)) < 0) {
		gs_free(s);
		return rc;
	}
	nt_log_info(s, "exporting OTLP/gRPC to %s%s%s, batch %" PRId64
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

	s->host->add_timer(s->inst, 1000, TOKEN_TIMER);

	/* the sink thread, and gRPC's threads it starts, take no signals */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	rc = pthread_create(&s->thread, NULL, gs_sink_thread, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		nt_log_err(s, "cannot start the sink thread: %s", strerror(rc));
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
	gs_push_pending_drops(s);
	return 0;
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
	uint64_t mono = nt_clock_mono_ns();
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

	gs_push_pending_drops(s);
	pthread_mutex_lock(&s->lock);
	if (!s->thread_running) {
		pthread_mutex_unlock(&s->lock);
		return;
	}
	deadline = nt_clock_mono_ns() + (uint64_t)s->cfg->shutdown_grace_ms * NT_NS_PER_MS;
	s->flush_deadline = deadline ? deadline : 1;
	req = ++s->flush_req;
	pthread_cond_broadcast(&s->wake);
	while (s->flush_done < req && nt_clock_mono_ns() < deadline) {
		/* in slices, so that a second SIGINT/SIGTERM ends the grace */
		uint64_t slice = nt_clock_mono_ns() + HURRY_CHECK_NS;
		gs_cond_wait_until(&s->done, &s->lock, slice < deadline ? slice : deadline);
		if (s->flush_done < req && stop_now(s)) {
			s->hurried = true;
			deadline = s->flush_deadline = nt_clock_mono_ns();
		}
	}
	if (s->flush_done < req) {
		/* grace over: drop what is left, cancel what is in flight */
		uint64_t hard = nt_clock_mono_ns() + 2 * NT_NS_PER_SEC;

		gave_up = true;
		s->abandon_req++;
		if (s->inflight)
			grpc_call_cancel(s->inflight, NULL);
		pthread_cond_broadcast(&s->wake);
		while (s->abandon_done < s->abandon_req && nt_clock_mono_ns() < hard)
			gs_cond_wait_until(&s->done, &s->lock, hard);
		if (s->abandon_done < s->abandon_req)
			nt_log_err(s, "the sink thread did not stop its export in time");
	}
	s->flush_deadline = 0;
	pthread_mutex_unlock(&s->lock);
	(void)gave_up;
	s->consumed_since_flush = false;
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
	gs_push_pending_drops(s);
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
