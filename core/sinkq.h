/* SPDX-License-Identifier: MIT */
/*
 * A sink's own bounded queue and thread (Fluent Bit's and collectd's
 * per-output queues, in spirit): the loop thread copies each event for the
 * sink into the sink's ring of bytes and goes on; the sink's thread takes
 * them out and calls its consume op. A sink that falls behind fills its own
 * ring and loses its own events, counted (stage "sink_queue"); probes,
 * detectors and the other sinks never wait for it.
 *
 * The sink's other ops that run while the loop runs (a timer's or an fd's
 * poll, on_signal) are posted to the same thread, after the events queued
 * before them, so a sink's ops are never called concurrently and keep
 * their order. init, attach, flush, detach and fini stay on the loop
 * thread while the sink's thread is not running (before nt_sinkq_start,
 * after nt_sinkq_stop).
 *
 * Single producer (the loop thread), single consumer (the sink's thread):
 * the ring's tail is published with a release store at each commit, its
 * head once per batch; the thread sleeps on a condition variable only
 * when the ring is empty and nothing is posted. Independent of the daemon
 * (the ops are callbacks), so tests drive it alone.
 */
#ifndef NTCORE_CORE_SINKQ_H
#define NTCORE_CORE_SINKQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/event.h"

/* Called on the sink's thread; `arg` is nt_sinkq_new's. Everything passed
 * is borrowed for the call. */
struct nt_sinkq_ops {
	void (*consume)(void *arg, const struct nt_event_hdr *ev,
			const struct nt_schema *schema);
	/* A posted poll: `token` as posted, `cookie` as posted (the watch). */
	void (*poll)(void *arg, uint32_t token, void *cookie);
	void (*signal)(void *arg, int signo);
};

/* 64 MiB of address space, touched only as deep as the backlog ever got:
 * CUPTI hands over its buffers in bursts (13,620 GPU records at once in a
 * 1.4 s PyTorch run) that a 4 MiB queue in front of the trace sink could not
 * hold (4,619 and 9,476 of 36,000 events dropped by the Perfetto and JSON
 * sinks on the GPU machine). */
#define NT_SINKQ_DEFAULT_BYTES (64u << 20)
#define NT_SINKQ_MAX_POSTED 16 /* distinct poll tokens pending at once */

struct nt_sinkq;

/* A queue of `bytes` (rounded up to a power of two, at least 64 KiB) for
 * one sink; nothing runs until nt_sinkq_start. NULL when out of memory. */
struct nt_sinkq *nt_sinkq_new(const struct nt_sinkq_ops *ops, void *arg,
			      size_t bytes);
/* Start the sink's thread; 0 or -errno. `name` names the thread (15
 * chars are kept). */
int nt_sinkq_start(struct nt_sinkq *q, const char *name);

/* Loop thread. Copy one event for the sink (no wait). False when the ring
 * is full or the record is larger than a quarter of the ring: the event is
 * counted as dropped, not queued. The copy is visible to the sink's thread
 * after the next commit (made here too once a sixteenth of the ring
 * waits). */
bool nt_sinkq_push(struct nt_sinkq *q, const struct nt_event_hdr *ev,
		   const struct nt_schema *schema);
/* Loop thread. Publish what was pushed and wake the sink's thread. */
void nt_sinkq_commit(struct nt_sinkq *q);
/* Any thread. Ask for one poll(token, cookie) on the sink's thread after
 * the events pushed so far (the same token twice before it ran: once).
 * -ENOSPC when NT_SINKQ_MAX_POSTED distinct tokens wait already. */
int nt_sinkq_post_poll(struct nt_sinkq *q, uint32_t token, void *cookie);
/* Any thread. Ask for one signal(signo) after the events pushed so far. */
void nt_sinkq_post_signal(struct nt_sinkq *q, int signo);

/* Loop thread. Commit, let the sink's thread consume everything queued
 * (posted polls are dropped: the flush that follows does their work), and
 * end it. The queue can be started again. */
void nt_sinkq_stop(struct nt_sinkq *q);
/* Loop thread. nt_sinkq_stop, but while the sink's thread still drains,
 * `hurry(arg)` is asked every NT_SINKQ_HURRY_SLICE_MS; once it says true
 * the events still queued are not consumed but counted as dropped (the
 * user asked a second time to stop: host->stop_now). An event being
 * consumed is not interrupted. */
void nt_sinkq_stop_unless(struct nt_sinkq *q, bool (*hurry)(void *), void *arg);
#define NT_SINKQ_HURRY_SLICE_MS 50
void nt_sinkq_free(struct nt_sinkq *q);

/* Events handed to consume so far (any thread). */
uint64_t nt_sinkq_delivered(const struct nt_sinkq *q);
/* Events dropped because the ring was full, or abandoned by a hurried
 * stop (loop thread). */
uint64_t nt_sinkq_dropped(const struct nt_sinkq *q);
/* Bytes of the ring in use now and at most so far (any thread). */
size_t nt_sinkq_used(const struct nt_sinkq *q);
size_t nt_sinkq_high_water(const struct nt_sinkq *q);
/* Bytes from the ring's start that were ever written: the part of the
 * ring that is resident (loop thread). */
size_t nt_sinkq_touched(const struct nt_sinkq *q);
bool nt_sinkq_running(const struct nt_sinkq *q);
/* CLOCK_MONOTONIC ns at the end of the thread's first and last batch of
 * events (0 before any); read once the thread ended. */
void nt_sinkq_window(const struct nt_sinkq *q, uint64_t *first_ns,
		     uint64_t *last_ns);
/* Touch every page of the ring now (a benchmark's queue: no page faults
 * while it is timed). */
void nt_sinkq_prefault(struct nt_sinkq *q);

#endif
