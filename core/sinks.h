/* SPDX-License-Identifier: MIT */
/*
 * The daemon's side of the sinks' queues (sinkq.h): each attached sink
 * gets its queue and thread; events for it are pushed there, its timers'
 * and fds' polls and its user signals are posted there; its counters come
 * back to the loop thread once a second. Loop thread only, except where
 * said.
 */
#ifndef NTCORE_CORE_SINKS_H
#define NTCORE_CORE_SINKS_H

#include <stdbool.h>
#include <stdint.h>

#include "ntcore/event.h"

struct nt_daemon;
struct nt_instance;
struct nt_watch;

/* The loop's watchers for the queues: commits before the loop blocks, and
 * the wake-up by which sink threads ask the loop to re-arm an fd watch or
 * to fail an instance. Call once the loop exists. */
void nt_sinks_init(struct nt_daemon *d);
void nt_sinks_fini(struct nt_daemon *d);

/* A sink just attached: give it its queue and thread. Where that fails
 * the sink is served on the loop thread as before (logged). */
void nt_sink_start(struct nt_instance *inst);
/* Deliver everything queued, end the thread and sync the counters; the
 * sink's ops run on the loop thread again (flush, detach). */
void nt_sink_stop(struct nt_instance *inst);
void nt_sink_free(struct nt_instance *inst);

/* True when `inst` has a running queue and the event went to it (queued,
 * or dropped and counted). */
bool nt_sink_push(struct nt_instance *inst, const struct nt_event_hdr *ev,
		  const struct nt_schema *schema);
/* True when the poll of this watch was posted to the sink's thread (an fd
 * watch is stopped until the thread has polled). */
bool nt_sink_post_poll(struct nt_instance *inst, struct nt_watch *w);
bool nt_sink_post_signal(struct nt_instance *inst, int signo);
/* Publish what was pushed to every queue (also done before the loop
 * blocks). */
void nt_sinks_commit(struct nt_daemon *d);
/* Copy a sink's delivered and dropped counts into the instance and the
 * self-metrics. */
void nt_sink_sync(struct nt_instance *inst);
/* Events delivered to the instance, on the loop thread or its own. */
uint64_t nt_instance_events_out(const struct nt_instance *inst);

#endif
