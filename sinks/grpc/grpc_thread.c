/* SPDX-License-Identifier: MIT */
/*
 * The gRPC sink's thread: it owns gRPC (init, channel, calls, shutdown)
 * and decides, under the lock, what is due next: a batch (batch_size
 * reached, batch_timeout_ms passed, or a flush or stop asks for it), the
 * metrics export (every metrics_interval_ms), the end of a flush (the final
 * metrics, then flush_done), or sleeping until one of these is due. When a
 * flush gives up (shutdown_grace_ms over), it drops what is queued.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include <grpc/support/log.h>

#include "grpc_state.h"

/* What the thread does next (next_work). */
enum work {
	W_AGAIN,       /* state changed (or a wait ended): decide again */
	W_BATCH,       /* send the n oldest entries */
	W_METRICS,     /* export the registry */
	W_FINAL_FLUSH, /* nothing queued is left for the flush: end it */
	W_STOP,        /* detach: leave */
};

void gs_cond_wait_until(pthread_cond_t *c, pthread_mutex_t *m,
			uint64_t mono_deadline)
{
	/* the conditions use CLOCK_MONOTONIC (condattr set in init) */
	struct timespec ts = {
		.tv_sec = (time_t)(mono_deadline / NT_NS_PER_SEC),
		.tv_nsec = (long)(mono_deadline % NT_NS_PER_SEC),
	};

	pthread_cond_timedwait(c, m, &ts);
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
		gs_count_dropped(s, GS_DROP_SHUTDOWN, n);
		nt_log_warn(s, "stopping at once (signal again): %u events not delivered to %s "
			    "(counted as reason=\"shutdown\")", n, s->target);
	} else if (n) {
		gs_count_dropped(s, GS_DROP_SHUTDOWN, n);
		nt_log_warn(s, "shutdown grace (%" PRId64 " ms) over: %u events not delivered to %s "
			    "(counted as reason=\"shutdown\")",
			    s->cfg->shutdown_grace_ms, n, s->target);
	}
	pthread_mutex_lock(&s->lock);
	s->abandon_done = req;
	s->flush_done = flush_req;
	pthread_cond_broadcast(&s->done);
}

/* Under lock, with no channel: nothing can be sent, drop what is queued. */
static void drop_unsendable_locked(struct gs *s)
{
	uint32_t k = s->q.count;

	gq_release(&s->q, k);
	pthread_mutex_unlock(&s->lock);
	gs_count_dropped(s, GS_DROP_PERMANENT, k);
	pthread_mutex_lock(&s->lock);
}

/* Under lock: what is due now, or wait until something is (W_AGAIN). */
static enum work next_work(struct gs *s, uint32_t *n, uint64_t *flush_id)
{
	uint64_t batch_ns = (uint64_t)s->cfg->batch_timeout_ms * NT_NS_PER_MS;

	if (s->abandon_req > s->abandon_done) {
		abandon_locked(s);
		return W_AGAIN;
	}
	bool flushing = s->flush_req > s->flush_done;
	bool metrics_on = s->cfg->metrics && s->ch;
	uint64_t now = nt_clock_mono_ns();
	const struct gq_entry *old = gq_oldest(&s->q);

	if (!s->ch && s->q.count) {
		drop_unsendable_locked(s);
		return W_AGAIN;
	}
	if (flushing && s->flush_deadline && now >= s->flush_deadline) {
		/* grace over: flush() is about to abandon the rest */
		gs_cond_wait_until(&s->wake, &s->lock, now + 20 * NT_NS_PER_MS);
		return W_AGAIN;
	}
	if (s->q.count >= (uint64_t)s->cfg->batch_size ||
	    (old && (flushing || s->stop || now - old->enq_mono_ns >= batch_ns))) {
		*n = gq_peek(&s->q, s->batch, (uint32_t)s->cfg->batch_size,
			     (size_t)s->cfg->max_request_bytes);
		return W_BATCH;
	}
	if (flushing) {
		*flush_id = s->flush_req;
		return W_FINAL_FLUSH;
	}
	if (s->stop)
		return W_STOP;
	if (metrics_on && now >= s->next_metrics)
		return W_METRICS;

	uint64_t until = metrics_on ? s->next_metrics : now + 3600 * NT_NS_PER_SEC;

	if (old && old->enq_mono_ns + batch_ns < until)
		until = old->enq_mono_ns + batch_ns;
	gs_cond_wait_until(&s->wake, &s->lock, until);
	return W_AGAIN;
}

/* The queue gauges as they are now. */
static void update_gauges(struct gs *s)
{
	uint32_t qcount;
	size_t qused;

	pthread_mutex_lock(&s->lock);
	qcount = s->q.count;
	qused = s->q.used;
	pthread_mutex_unlock(&s->lock);
	gs_set_queue_gauges(s, qcount, qused);
}

/* Unlocked: do what next_work chose. */
static void do_work(struct gs *s, enum work w, uint32_t n, uint64_t flush_id)
{
	uint64_t metrics_ns = (uint64_t)s->cfg->metrics_interval_ms * NT_NS_PER_MS;

	if (w == W_BATCH && n) {
		gs_send_batch(s, n);
		update_gauges(s);
	} else if (w == W_METRICS) {
		gs_export_metrics(s);
		s->next_metrics = nt_clock_mono_ns() + metrics_ns;
	} else if (w == W_FINAL_FLUSH) {
		if (s->cfg->metrics && s->ch)
			gs_export_metrics(s);
		s->next_metrics = nt_clock_mono_ns() + metrics_ns;
		pthread_mutex_lock(&s->lock);
		if (s->flush_done < flush_id)
			s->flush_done = flush_id;
		pthread_cond_broadcast(&s->done);
		pthread_mutex_unlock(&s->lock);
	}
}

static void grpc_quiet_log(gpr_log_func_args *args)
{
	(void)args;
}

void *gs_sink_thread(void *arg)
{
	struct gs *s = arg;

	/* gRPC's own logger writes to stderr around ntcore's log; the sink
	 * reports every failure with gRPC's status details itself. Keep it
	 * only when the user asked gRPC for it. */
	if (!getenv("GRPC_VERBOSITY") && !getenv("GRPC_TRACE"))
		gpr_set_log_function(grpc_quiet_log);
	grpc_init();
	if (gs_open_channel(s) < 0)
		nt_log_err(s, "cannot create a gRPC channel to %s; events will be dropped",
			   s->target);
	s->next_metrics = nt_clock_mono_ns() +
			  (uint64_t)s->cfg->metrics_interval_ms * NT_NS_PER_MS;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		uint32_t n = 0;
		uint64_t flush_id = 0;
		enum work w = next_work(s, &n, &flush_id);

		if (w == W_STOP)
			break;
		if (w == W_AGAIN)
			continue;
		uint32_t qcount = s->q.count;
		size_t qused = s->q.used;

		pthread_mutex_unlock(&s->lock);
		gs_set_queue_gauges(s, qcount, qused);
		do_work(s, w, n, flush_id);
		pthread_mutex_lock(&s->lock);
	}
	/* stop: whatever is left (only when detach came without a flush) */
	uint32_t left = s->q.count;

	gq_release(&s->q, left);
	pthread_mutex_unlock(&s->lock);
	gs_count_dropped(s, GS_DROP_SHUTDOWN, left);
	gs_close_channel(s);
	grpc_shutdown_blocking();
	return NULL;
}
