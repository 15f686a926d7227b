/* SPDX-License-Identifier: MIT */
/* The daemon's side of the sinks' queues (sinks.h). */
#include "sinks.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "log.h"
#include "sinkq.h"

#define POLL_ERRORS_MAX 3

/* On the sink's thread: the ops, serialized by the queue. */
static void on_sink_consume(void *arg, const struct nt_event_hdr *ev,
			    const struct nt_schema *schema)
{
	struct nt_instance *inst = arg;

	inst->lib.desc.consume(inst->state, ev, schema);
}

static void on_sink_poll(void *arg, uint32_t token, void *cookie)
{
	struct nt_instance *inst = arg;
	struct nt_watch *w = cookie;
	struct nt_daemon *d = inst->d;
	int n = inst->lib.desc.poll(inst->state, token, 4096);

	if (n >= 0) {
		inst->sink_poll_errors = 0;
	} else if (++inst->sink_poll_errors >= POLL_ERRORS_MAX) {
		/* failing an instance is the loop thread's business */
		__atomic_store_n(&inst->sink_failed, n, __ATOMIC_RELEASE);
		ev_async_send(d->loop, &d->sink_async);
		return;
	}
	if (!w->is_timer) {
		__atomic_store_n(&w->rearm, 1, __ATOMIC_RELEASE);
		ev_async_send(d->loop, &d->sink_async);
	}
}

static void on_sink_signal(void *arg, int signo)
{
	struct nt_instance *inst = arg;

	inst->lib.desc.on_signal(inst->state, signo);
}

static const struct nt_sinkq_ops sink_ops = {
	.consume = on_sink_consume,
	.poll = on_sink_poll,
	.signal = on_sink_signal,
};

/* On the loop thread, woken by a sink's thread: re-arm the fd watches it
 * polled, fail the sinks whose polls kept failing. */
static void on_sink_async(struct ev_loop *loop, ev_async *a, int revents)
{
	struct nt_daemon *d = a->data;

	(void)revents;
	for (size_t i = 0; i < d->n_insts; i++) {
		struct nt_instance *inst = d->insts[i];
		int err = __atomic_exchange_n(&inst->sink_failed, 0, __ATOMIC_ACQ_REL);

		if (err) {
			nt_instance_fail(inst, "poll", err);
			continue;
		}
		for (size_t k = 0; k < inst->n_watches; k++) {
			struct nt_watch *w = inst->watches[k];
			if (__atomic_exchange_n(&w->rearm, 0, __ATOMIC_ACQ_REL) &&
			    inst->st == NT_ST_ATTACHED)
				ev_io_start(loop, &w->io);
		}
	}
}

static void on_loop_prepare(struct ev_loop *loop, ev_prepare *p, int revents)
{
	(void)loop;
	(void)revents;
	nt_sinks_commit(p->data);
}

/* NTCORE_SINK_QUEUE_KB: every sink's queue size (64 KiB .. 4 GiB) where
 * the instance sets no queue_kb, its pages touched up front (benchmarks). */
static size_t queue_bytes(void)
{
	const char *env = getenv("NTCORE_SINK_QUEUE_KB");
	char *end;
	unsigned long long kb;

	if (!env || !*env)
		return NT_SINKQ_DEFAULT_BYTES;
	kb = strtoull(env, &end, 10);
	if (*end || kb < 64 || kb > (4ull << 20)) {
		nt_log(NT_LOG_WARN, NULL,
		       "NTCORE_SINK_QUEUE_KB=%s: not a size in KiB from 64 to 4194304; using %u",
		       env, NT_SINKQ_DEFAULT_BYTES >> 10);
		return NT_SINKQ_DEFAULT_BYTES;
	}
	return (size_t)kb << 10;
}

void nt_sinks_init(struct nt_daemon *d)
{
	d->sink_queue_bytes = queue_bytes();
	ev_async_init(&d->sink_async, on_sink_async);
	d->sink_async.data = d;
	ev_async_start(d->loop, &d->sink_async);
	ev_prepare_init(&d->sink_prepare, on_loop_prepare);
	d->sink_prepare.data = d;
	ev_prepare_start(d->loop, &d->sink_prepare);
}

void nt_sinks_fini(struct nt_daemon *d)
{
	if (!d->loop)
		return;
	ev_async_stop(d->loop, &d->sink_async);
	ev_prepare_stop(d->loop, &d->sink_prepare);
}

void nt_sink_start(struct nt_instance *inst)
{
	int err;

	if (inst->lib.desc.kind != NT_KIND_SINK || !inst->d->loop)
		return;
	if (!inst->q) {
		uint32_t kb = inst->cfg ? inst->cfg->queue_kb : 0;
		size_t bytes = kb ? (size_t)kb << 10 : inst->d->sink_queue_bytes;

		inst->q = nt_sinkq_new(&sink_ops, inst, bytes);
		if (inst->q && !kb && bytes != NT_SINKQ_DEFAULT_BYTES)
			nt_sinkq_prefault(inst->q); /* a size set for a benchmark */
	}
	if (!inst->q) {
		nt_daemon_log(inst->d, NT_LOG_WARN, inst->prefix,
			      "no memory for its queue: served on the loop thread");
		return;
	}
	err = nt_sinkq_start(inst->q, inst->name);
	if (err)
		nt_daemon_log(inst->d, NT_LOG_WARN, inst->prefix,
			      "cannot start its thread (%s): served on the loop thread",
			      strerror(-err));
}

/* A second SIGINT/SIGTERM during the shutdown (host->stop_now) ends the
 * wait for a slow sink's queue: what it holds is counted, not delivered. */
static bool sink_hurry(void *arg)
{
	return nt_daemon_stop_now(arg);
}

void nt_sink_stop(struct nt_instance *inst)
{
	if (!inst->q || !nt_sinkq_running(inst->q))
		return;
	nt_sinkq_stop_unless(inst->q, sink_hurry, inst->d);
	nt_sink_sync(inst);
	if (inst->log_level >= NT_LOG_DEBUG) {
		uint64_t first, last;
		nt_sinkq_window(inst->q, &first, &last);
		nt_log(NT_LOG_DEBUG, inst->prefix,
		       "its thread consumed %llu events from %llu to %llu ns (CLOCK_MONOTONIC); at most %zu KiB queued, %zu KiB of its ring touched",
		       (unsigned long long)nt_sinkq_delivered(inst->q),
		       (unsigned long long)first, (unsigned long long)last,
		       nt_sinkq_high_water(inst->q) >> 10, nt_sinkq_touched(inst->q) >> 10);
	}
}

void nt_sink_free(struct nt_instance *inst)
{
	if (!inst->q)
		return;
	nt_sink_stop(inst);
	inst->events_out += nt_sinkq_delivered(inst->q);
	nt_sinkq_free(inst->q);
	inst->q = NULL;
}

bool nt_sink_push(struct nt_instance *inst, const struct nt_event_hdr *ev,
		  const struct nt_schema *schema)
{
	if (!inst->q || !nt_sinkq_running(inst->q))
		return false;
	nt_sinkq_push(inst->q, ev, schema);
	return true;
}

bool nt_sink_post_poll(struct nt_instance *inst, struct nt_watch *w)
{
	if (!inst->q || !nt_sinkq_running(inst->q))
		return false;
	if (!w->is_timer)
		ev_io_stop(inst->d->loop, &w->io); /* until its thread polled */
	if (nt_sinkq_post_poll(inst->q, w->token, w) < 0 && !w->is_timer)
		ev_io_start(inst->d->loop, &w->io);
	return true;
}

bool nt_sink_post_signal(struct nt_instance *inst, int signo)
{
	if (!inst->q || !nt_sinkq_running(inst->q))
		return false;
	nt_sinkq_post_signal(inst->q, signo);
	return true;
}

void nt_sinks_commit(struct nt_daemon *d)
{
	for (size_t i = 0; i < d->n_insts; i++)
		if (d->insts[i]->q && nt_sinkq_running(d->insts[i]->q))
			nt_sinkq_commit(d->insts[i]->q);
}

void nt_sink_sync(struct nt_instance *inst)
{
	if (!inst->q)
		return;
	uint64_t dropped = nt_sinkq_dropped(inst->q);
	if (dropped != inst->q_drops_synced) {
		nt_host_vtable.count_drop(inst, "sink_queue",
					  dropped - inst->q_drops_synced);
		inst->q_drops_synced = dropped;
	}
}

uint64_t nt_instance_events_out(const struct nt_instance *inst)
{
	return inst->events_out + (inst->q ? nt_sinkq_delivered(inst->q) : 0);
}
