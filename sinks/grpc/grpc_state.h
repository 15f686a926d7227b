/* SPDX-License-Identifier: MIT */
/*
 * The gRPC sink's instance: its config, its state shared between the loop
 * thread and the sink thread, and the functions its files call across.
 *
 *   grpc.c          descriptor, config schema and ops (loop thread)
 *   grpc_config.c   config checks and what init derives from the config
 *   grpc_metrics.c  self-metrics and drop counting (any thread)
 *   grpc_thread.c   the sink thread: what to do next, shutdown's abandon
 *   grpc_export.c   one batch of logs or one metrics export, with retries
 *   grpc_rpc.c      the gRPC channel and one unary call
 *
 * Locking: fields under "shared" are read and written under `lock`; the
 * others belong to the thread their heading names. grpc_sink.h holds the
 * parts that need neither gRPC nor threads (queue, OTLP encoding).
 */
#ifndef NTCORE_GRPC_STATE_H
#define NTCORE_GRPC_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <grpc/grpc.h>

#include <ntcore/kit.h>
#include <ntcore/plugin.h>

#include "grpc_sink.h"

#ifndef NTCORE_GRPC_VERSION
#define NTCORE_GRPC_VERSION "0.0.0"
#endif

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

/* grpc_config.c (init): checks beyond the schema (*tls: whether TLS is
 * on), then the target, roots, compression and identity in s. Both return
 * host->config_error's -EINVAL. */
int gs_config_check(struct nt_instance *inst, const struct nt_host *host,
		    const struct grpc_cfg *cfg, bool *tls);
int gs_config_apply(struct gs *s);

/* grpc_thread.c */
/* Wait on c (a CLOCK_MONOTONIC condition) until mono_deadline at most. */
void gs_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m,
			uint64_t mono_deadline);
/* The sink thread's body; arg is the struct gs. */
void *gs_sink_thread(void *arg);

/* grpc_metrics.c: register in init; count from any thread (metric_add and
 * count_drop are thread-safe) but push_pending_drops (loop thread). */
int gs_metrics_register(struct gs *s);
void gs_count_dropped(struct gs *s, enum gs_drop_reason r, uint64_t n);
void gs_push_pending_drops(struct gs *s);
void gs_count_export(struct gs *s, const char *signal, int code,
		     uint64_t dur_ns);
void gs_set_queue_gauges(struct gs *s, uint32_t count, size_t used);

/* grpc_rpc.c (sink thread) */
struct rpc_result {
	int code;
	char msg[320];
	uint8_t *resp; /* the response message, malloc'ed; the caller frees */
	size_t resp_len;
};
int gs_open_channel(struct gs *s);
void gs_close_channel(struct gs *s);
/* One unary call; `payload` stays owned by the caller. */
void gs_rpc_unary(struct gs *s, const char *method, grpc_slice payload,
		  uint64_t deadline_mono, bool wait_ready, struct rpc_result *r);

/* grpc_export.c (sink thread) */
/* Send the n oldest queued entries (peeked into s->batch). */
void gs_send_batch(struct gs *s, uint32_t n);
void gs_export_metrics(struct gs *s);

#endif /* NTCORE_GRPC_STATE_H */
