/* SPDX-License-Identifier: MIT */
/*
 * ntcore gRPC (OTLP) sink: the parts that need no network and no gRPC, so
 * that tests/unit/test_grpc.c can drive them directly:
 *
 *   gq_*     the bounded record queue between the loop thread (producer,
 *            consume()) and the sink thread (consumer), one preallocated byte
 *            ring: its memory never grows past queue_bytes (grpc_queue.c);
 *   otlp_*   turning queued event records and the metrics registry into
 *            serialized OTLP ExportLogsServiceRequest /
 *            ExportMetricsServiceRequest messages (protobuf-c; otlp_*.c,
 *            otlp_pb.h says which file holds what);
 *   gs_*     endpoint parsing (grpc_endpoint.c), status classification and
 *            retry backoff (grpc_status.c).
 *
 * None of these functions locks: the caller (grpc.c) serializes access.
 */
#ifndef NTCORE_GRPC_SINK_H
#define NTCORE_GRPC_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ntcore/plugin.h>

/* ------------------------------------------------------------------ */
/* Bounded queue                                                       */
/* ------------------------------------------------------------------ */

/*
 * One queued record: this header, then a copy of the event record
 * (`rec_size` bytes), padded to 8 bytes. `len` is the whole entry's size;
 * a `len` of 0 at some position marks a wrap to the ring's start.
 */
struct gq_entry {
	uint32_t len;
	uint32_t rec_size;
	const struct nt_schema *schema; /* static data of the publishing plugin */
	uint64_t wall_ns;               /* event time, ns since the epoch */
	uint64_t observed_ns;           /* when the sink saw it, ns since the epoch */
	uint64_t enq_mono_ns;           /* CLOCK_MONOTONIC at enqueue (batch timer) */
};

static inline const struct nt_event_hdr *gq_record(const struct gq_entry *e)
{
	return (const struct nt_event_hdr *)(const void *)(e + 1);
}

struct gq {
	uint8_t *buf;
	size_t cap;       /* bytes, a multiple of 8 */
	size_t head;      /* oldest entry */
	size_t tail;      /* where the next entry goes */
	size_t used;      /* bytes in use, wrap padding included */
	uint32_t count;   /* entries queued */
	uint32_t max_events;
	uint64_t bytes_hwm; /* high-water mark of `used` (tests, debug) */
};

enum gq_push_result {
	GQ_OK = 0,
	GQ_FULL = -1,     /* queue_size or queue_bytes reached */
	GQ_TOO_LARGE = -2, /* the record alone exceeds the ring's limit */
};

int gq_init(struct gq *q, size_t cap_bytes, uint32_t max_events);
void gq_free(struct gq *q);
/* Copy one record in; never allocates. */
int gq_push(struct gq *q, const struct nt_event_hdr *ev,
	    const struct nt_schema *schema, uint64_t wall_ns,
	    uint64_t observed_ns, uint64_t enq_mono_ns);
/*
 * Point out[] at up to `max` of the oldest entries, stopping before the sum
 * of their estimated encoded sizes (otlp_estimate) would exceed `max_bytes`
 * (at least one entry is returned when the queue is not empty). Entries stay
 * queued, and valid, until gq_release.
 */
uint32_t gq_peek(const struct gq *q, const struct gq_entry **out, uint32_t max,
		 size_t max_bytes);
/* Drop the `n` oldest entries (n <= count). */
void gq_release(struct gq *q, uint32_t n);
/* The oldest entry, or NULL. */
const struct gq_entry *gq_oldest(const struct gq *q);

/* ------------------------------------------------------------------ */
/* OTLP encoding                                                       */
/* ------------------------------------------------------------------ */

/* Bump allocator for one request's protobuf-c message tree; reused. */
struct otlp_chunk;
struct otlp_arena {
	struct otlp_chunk *first, *cur;
	size_t chunk_size;
};
void *otlp_alloc(struct otlp_arena *a, size_t n);
char *otlp_strdup(struct otlp_arena *a, const char *s, size_t len);
void otlp_arena_reset(struct otlp_arena *a);
void otlp_arena_free(struct otlp_arena *a);

struct otlp_resource_info {
	const char *service_name;
	const char *service_version;
	const char *service_instance_id;
	const char *host_name;
	/* extra "key=value" attributes (config resource_attributes) */
	const char *const *extra;
	uint32_t n_extra;
};

struct otlp_encoder;

/* Returns NULL on allocation failure. */
struct otlp_encoder *otlp_encoder_new(const struct otlp_resource_info *res,
				      uint64_t start_wall_ns);
void otlp_encoder_free(struct otlp_encoder *enc);
/* Log records get the identity attributes of their pid (issue 21). */
typedef int (*otlp_ident_fn)(void *ctx, uint32_t pid, struct nt_identity *out);
void otlp_encoder_set_ident(struct otlp_encoder *enc, otlp_ident_fn fn, void *ctx);

/*
 * Serialize an ExportLogsServiceRequest holding one LogRecord per entry.
 * Returns a malloc'ed buffer (the caller frees it) and its length in *len,
 * or NULL on allocation failure.
 */
uint8_t *otlp_encode_logs(struct otlp_encoder *enc,
			  const struct gq_entry *const *entries, uint32_t n,
			  size_t *len);

/*
 * Metrics: otlp_metrics_begin, then host->metrics_visit(inst,
 * otlp_metrics_visit, enc) (which copies what it is shown), then
 * otlp_encode_metrics. `n_points` receives the number of data points.
 */
void otlp_metrics_begin(struct otlp_encoder *enc, uint64_t now_wall_ns);
int otlp_metrics_visit(void *enc, const struct nt_metric_desc *desc,
		       const struct nt_metric_series *series,
		       uint32_t n_series, uint64_t overflow);
uint8_t *otlp_encode_metrics(struct otlp_encoder *enc, size_t *len,
			     uint32_t *n_points);

/* Upper bound of one entry's encoded size, used to keep requests small. */
size_t otlp_estimate(const struct gq_entry *e);

/*
 * Copy `len` bytes of `in` (stopping at a NUL) to `out` as valid UTF-8,
 * each invalid byte replaced by U+FFFD; `out` must hold 3 * len + 1 bytes.
 * Returns the output length (NUL-terminated).
 */
size_t otlp_utf8_sanitize(const char *in, size_t len, char *out);

/* The OTLP unit for a metric name ("_seconds" -> "s", "_bytes" -> "By"). */
const char *otlp_unit_of(const char *metric_name);

/* ------------------------------------------------------------------ */
/* Endpoint, status codes, backoff                                     */
/* ------------------------------------------------------------------ */

/*
 * Parse a configured endpoint: "host:port", "[v6addr]:port",
 * "http://host:port", "https://host:port" (TLS), "unix:/path" or
 * "unix:///path". Writes the gRPC target to `target` and sets *scheme_tls
 * to 1 for https, 0 for http, -1 when no scheme was given. Returns 0, or -1
 * with a one-line reason in `err`.
 */
int gs_parse_endpoint(const char *in, char *target, size_t tlen,
		      int *scheme_tls, char *err, size_t elen);

/* Name of a gRPC status code ("UNAVAILABLE"), "CODE_<n>" when unknown. */
const char *gs_code_name(int code);

/* Whether an export that failed with `code` may succeed if sent again
 * (OTLP/gRPC spec: retryable codes); everything else is permanent. */
bool gs_code_retryable(int code);

/* Delay before retry number `attempt` (0-based): initial * 2^attempt capped
 * at max, with +-20% jitter drawn from `rnd`. */
uint64_t gs_backoff_ms(uint32_t attempt, uint64_t initial_ms, uint64_t max_ms,
		       uint32_t rnd);

/* Why events were lost; label values of ntcore_grpc_events_dropped_total. */
enum gs_drop_reason {
	GS_DROP_QUEUE_FULL,
	GS_DROP_TOO_LARGE,
	GS_DROP_PERMANENT,
	GS_DROP_REJECTED,
	GS_DROP_RETRY_EXHAUSTED,
	GS_DROP_SHUTDOWN,
	GS_DROP__N,
};
extern const char *const gs_drop_reason_names[GS_DROP__N];

#endif /* NTCORE_GRPC_SINK_H */
