/* SPDX-License-Identifier: MIT */
/*
 * The gRPC sink's exports, on the sink thread: one batch of queued events
 * as an OTLP logs request, retried with backoff while the status code is
 * retryable (halved on RESOURCE_EXHAUSTED), dropped and counted when it is
 * permanent, rejected in part, or retried past retry_max_elapsed_s; and one
 * OTLP metrics request made from the registry. An outage is logged once,
 * and once more when the collector is back.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <grpc/slice.h>

#include "grpc_state.h"
#include "otlp_logs_service.pb-c.h"

#define LOGS_METHOD "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
#define METRICS_METHOD "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"

/* Where one batch stands across its tries (and its halvings). */
struct retry {
	uint64_t first_try; /* mono ns */
	uint32_t attempt;
	bool resend;
};

enum try_next { TRY_DONE, TRY_AGAIN, TRY_HALVE };

static uint64_t call_deadline(struct gs *s)
{
	uint64_t d = nt_clock_mono_ns() + (uint64_t)s->cfg->timeout_ms * NT_NS_PER_MS;
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
		s->outage_since = nt_clock_mono_ns();
		s->outage_resent = 0;
		nt_log_warn(s, "cannot export %s to collector at %s: %s: %s; retrying with backoff "
			    "(%" PRId64 "..%" PRId64 " ms); while it is unreachable, events beyond "
			    "queue_size=%" PRId64 " are dropped (reason queue_full)",
			    what, s->target, gs_code_name(r->code), r->msg[0] ? r->msg : "(no details)",
			    s->cfg->retry_initial_ms, s->cfg->retry_max_ms, s->cfg->queue_size);
	} else {
		nt_log_dbg(s, "export of %s to %s failed again: %s: %s", what,
			   s->target, gs_code_name(r->code), r->msg);
	}
}

static void note_success(struct gs *s)
{
	if (s->outage) {
		nt_log_info(s, "collector at %s reachable again after %.1f s; %" PRIu64
			    " event sends were retried",
			    s->target, (double)(nt_clock_mono_ns() - s->outage_since) / 1e9,
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
	uint64_t until = nt_clock_mono_ns() + ms * NT_NS_PER_MS;
	uint64_t flush_req;

	pthread_mutex_lock(&s->lock);
	flush_req = s->flush_req;
	/* a flush that arrives meanwhile cuts the wait short: retry now */
	while (!s->stop && s->abandon_req == s->abandon_done && s->flush_req == flush_req &&
	       nt_clock_mono_ns() < until) {
		uint64_t t = until;

		if (s->flush_deadline && s->flush_deadline < t)
			t = s->flush_deadline;
		gs_cond_wait_until(&s->wake, &s->lock, t);
		if (s->flush_deadline && nt_clock_mono_ns() >= s->flush_deadline)
			break;
	}
	pthread_mutex_unlock(&s->lock);
}

static void free_slice_buf(void *p)
{
	free(p);
}

/* The collector answered OK: count what it took and what it rejected. */
static void on_delivered(struct gs *s, const struct rpc_result *r, uint32_t n)
{
	char why[256];
	int64_t rej = logs_rejected(r, why, sizeof(why));

	if (rej < 0)
		rej = 0;
	if (rej > n)
		rej = n;
	s->host->metric_add(s->m_sent, s->iname, (double)(n - (uint32_t)rej));
	if (rej) {
		gs_count_dropped(s, GS_DROP_REJECTED, (uint64_t)rej);
		if (!s->rejected_logged)
			nt_log_warn(s, "collector at %s rejected %" PRId64 " of %u events: %s "
				    "(counted in ntcore_grpc_events_dropped_total{reason=\"rejected\"}; "
				    "not logged again)",
				    s->target, rej, n, why);
		s->rejected_logged = true;
	}
	note_success(s);
	release(s, n);
}

/* A status that no retry can change: drop the batch, say so once. */
static void on_permanent(struct gs *s, const struct rpc_result *r, uint32_t n)
{
	gs_count_dropped(s, GS_DROP_PERMANENT, n);
	if (!s->permanent_logged)
		nt_log_err(s, "collector at %s refused the export with a permanent error: %s: %s; "
			   "dropped %u events, and will drop every batch refused this way "
			   "(counted in ntcore_grpc_events_dropped_total{reason=\"permanent_error\"}; "
			   "not logged again)",
			   s->target, gs_code_name(r->code), r->msg[0] ? r->msg : "(no details)", n);
	else
		nt_log_dbg(s, "permanent export error %s: %s; dropped %u events",
			   gs_code_name(r->code), r->msg, n);
	s->permanent_logged = true;
	release(s, n);
}

/* Retried past retry_max_elapsed_s: drop the batch (true), say so once. */
static bool retry_exhausted(struct gs *s, const struct retry *rt, uint32_t n)
{
	if (s->cfg->retry_max_elapsed_s <= 0 ||
	    nt_clock_mono_ns() - rt->first_try <=
		    (uint64_t)s->cfg->retry_max_elapsed_s * NT_NS_PER_SEC)
		return false;
	gs_count_dropped(s, GS_DROP_RETRY_EXHAUSTED, n);
	if (!s->exhausted_logged)
		nt_log_warn(s, "gave up on %u events after retrying for %" PRId64 " s "
			    "(retry_max_elapsed_s; counted as reason=\"retry_exhausted\")",
			    n, s->cfg->retry_max_elapsed_s);
	s->exhausted_logged = true;
	release(s, n);
	return true;
}

/* The sink stops, or the flush's grace is over: flush() is about to
 * abandon what is left, so stop trying. */
static bool stop_trying(struct gs *s)
{
	bool stop, flush_over;

	pthread_mutex_lock(&s->lock);
	stop = s->stop;
	flush_over = s->flush_deadline && nt_clock_mono_ns() >= s->flush_deadline;
	pthread_mutex_unlock(&s->lock);
	return stop || flush_over;
}

/* One try of the encoded batch, and what to do next. */
static enum try_next try_send(struct gs *s, grpc_slice payload, uint32_t n,
			      struct retry *rt)
{
	struct rpc_result r;
	uint64_t t0 = nt_clock_mono_ns();

	if (rt->resend) {
		s->host->metric_add(s->m_retried, s->iname, n);
		s->outage_resent += n;
	}
	/* The first try fails fast when the collector is unreachable, so
	 * that the outage is reported at once; retries wait for the
	 * channel to connect (until the deadline), so delivery resumes as
	 * soon as gRPC's reconnect, paced by retry_initial_ms ..
	 * retry_max_ms, gets through. */
	gs_rpc_unary(s, LOGS_METHOD, payload, call_deadline(s), rt->resend, &r);
	gs_count_export(s, "logs", r.code, nt_clock_mono_ns() - t0);
	if (r.code == GRPC_STATUS_OK)
		on_delivered(s, &r, n);
	free(r.resp);
	if (r.code == GRPC_STATUS_OK || abandoned(s))
		return TRY_DONE;
	if (!gs_code_retryable(r.code)) {
		on_permanent(s, &r, n);
		return TRY_DONE;
	}
	note_failure(s, "events", &r);
	if (retry_exhausted(s, rt, n))
		return TRY_DONE;
	backoff_wait(s, gs_backoff_ms(rt->attempt++, (uint64_t)s->cfg->retry_initial_ms,
				      (uint64_t)s->cfg->retry_max_ms,
				      s->rng = s->rng * 1103515245u + 12345u));
	if (abandoned(s) || stop_trying(s))
		return TRY_DONE;
	rt->resend = true;
	/* maybe too large for the collector: send halves */
	return r.code == GRPC_STATUS_RESOURCE_EXHAUSTED && n > 1 ? TRY_HALVE : TRY_AGAIN;
}

/*
 * Send the n oldest entries (already peeked into s->batch). Returns after the
 * batch was delivered, dropped, or abandoned by flush (then the entries are
 * left for the abandon handler to drop).
 */
void gs_send_batch(struct gs *s, uint32_t n)
{
	struct retry rt = { .first_try = nt_clock_mono_ns() };
	enum try_next next;

	do {
		size_t len = 0;
		uint8_t *buf = otlp_encode_logs(s->enc, s->batch, n, &len);

		if (!buf) {
			nt_log_err(s, "out of memory encoding %u events; dropping them", n);
			gs_count_dropped(s, GS_DROP_PERMANENT, n);
			release(s, n);
			return;
		}
		grpc_slice payload = grpc_slice_new(buf, len, free_slice_buf);

		do
			next = try_send(s, payload, n, &rt);
		while (next == TRY_AGAIN);
		grpc_slice_unref(payload);
		if (next == TRY_HALVE)
			n /= 2;
	} while (next == TRY_HALVE);
}

void gs_export_metrics(struct gs *s)
{
	struct rpc_result r;
	uint32_t points;
	size_t len = 0;
	uint8_t *buf;
	uint64_t t0;

	otlp_metrics_begin(s->enc, nt_clock_wall_ns());
	s->host->metrics_visit(s->inst, otlp_metrics_visit, s->enc);
	buf = otlp_encode_metrics(s->enc, &len, &points);
	if (!buf)
		return;
	if (points == 0) {
		free(buf);
		return;
	}
	grpc_slice payload = grpc_slice_new(buf, len, free_slice_buf);

	t0 = nt_clock_mono_ns();
	gs_rpc_unary(s, METRICS_METHOD, payload, call_deadline(s), false, &r);
	grpc_slice_unref(payload);
	gs_count_export(s, "metrics", r.code, nt_clock_mono_ns() - t0);
	free(r.resp);
	if (r.code == GRPC_STATUS_OK) {
		s->host->metric_add(s->m_points, s->iname, points);
		note_success(s);
	} else if (gs_code_retryable(r.code)) {
		note_failure(s, "metrics", &r); /* cumulative: the next export catches up */
	} else {
		nt_kit_log(s->host, s->inst, s->permanent_logged ? NT_LOG_DEBUG : NT_LOG_ERROR,
			   "collector at %s refused metrics: %s: %s", s->target,
			   gs_code_name(r.code), r.msg);
		s->permanent_logged = true;
	}
}
