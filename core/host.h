/* SPDX-License-Identifier: MIT */
#ifndef NTCORE_CORE_HOST_H
#define NTCORE_CORE_HOST_H

#include "daemon.h"

extern const struct nt_host nt_host_vtable;

/* A watch of an instance: an fd or a timer whose poll runs on the loop
 * thread, or on a sink's own thread (sinks.h). */
struct nt_watch {
	struct nt_instance *inst;
	uint32_t token;
	bool is_timer;
	int rearm; /* atomic: a sink's thread polled this fd; start it again */
	ev_io io;
	ev_timer timer;
};

/* Defined in daemon.c: log, unwatch, detach and mark an instance failed
 * (a sink's queue is stopped first). */
void nt_instance_fail(struct nt_instance *inst, const char *op, int err);
/* True on the daemon's loop thread. */
bool nt_on_loop_thread(const struct nt_daemon *d);

/* Defined in daemon.c: run the instance's poll op for a ready watch. */
void nt_instance_poll(struct nt_instance *inst, uint32_t token);
/* Copy loop-thread counters into the self-metrics (loop thread only). */
void nt_daemon_sync_self_metrics(struct nt_daemon *d);
/* Stop and free every watch of an instance. */
void nt_instance_unwatch(struct nt_instance *inst);
/* Poll every watched fd until empty; returns records handled. */
int nt_instance_drain(struct nt_instance *inst);
/* Free what the host functions created for the whole run (the kernel BTF). */
void nt_host_release(struct nt_daemon *d);

#endif
