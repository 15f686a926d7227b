/* SPDX-License-Identifier: MIT */
/*
 * The instance set of a run (core/instances.c): loading each configured
 * instance, init and attach in the bus's flow, polling, stopping and
 * freeing. The daemon (daemon.c) drives it from start-up, reload and
 * shutdown. All on the loop thread, but for the probes' quiesce, which
 * runs one thread per probe and joins them. Ownership: d->insts and each
 * instance belong to the daemon; nt_instances_free releases them.
 */
#ifndef NTCORE_INSTANCES_H
#define NTCORE_INSTANCES_H

#include <stdbool.h>

#include "daemon.h"

const char *nt_inst_state_name(enum nt_inst_state st);

/* The bus's subscriber callback: an attached instance gets the event, on
 * its sink queue when it has one. */
void nt_instance_deliver(void *subscriber, const struct nt_event_hdr *ev,
			 const struct nt_schema *schema);
/* init of one loaded instance, then its subscriptions: 0; 2 when its
 * config failed; otherwise its failure is recorded, and 1 if required. */
int nt_instance_init(struct nt_daemon *d, struct nt_instance *inst);

/* Load every enabled instance of the current config. 0, 1 (no memory) or
 * 2 (a config error, said with its file:line). */
int nt_instances_load(struct nt_daemon *d);

typedef int (*nt_instance_fn)(struct nt_daemon *d, struct nt_instance *inst);
/* The bus's flow: probes publish, detectors read and publish alerts, sinks
 * write out. fn on every instance, kind by kind in flow order (reversed
 * when `backwards`: start-up readies a sink before the first event reaches
 * it), config order within a kind; stops at the first non-zero. */
int nt_instances_in_flow(struct nt_daemon *d, bool backwards,
			 nt_instance_fn fn);

/* Init every instance, then attach sinks, detectors, probes; returns 0, 1
 * (a required plugin failed, nothing could attach) or 2 (config error).
 * Without the privileges to trace, every plugin's errors are held: if no
 * probe attached, one line says what is missing and the rest is dropped. */
int nt_instances_start(struct nt_daemon *d);
/* Shutdown and reload: read the rings, stop the producers, read what they
 * wrote meanwhile until the rings are empty (an event produced before the
 * stop is delivered, or counted where it was dropped), then flush probes
 * (their final reports go on the bus), detectors, sinks (each sink's queue
 * emptied first), and detach in the same order. */
void nt_instances_stop(struct nt_daemon *d);
void nt_instances_free(struct nt_daemon *d);

#endif /* NTCORE_INSTANCES_H */
