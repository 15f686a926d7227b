/* SPDX-License-Identifier: MIT */
/* The instance set of a run: each instance loaded, initialised and
 * attached, polled, and the set stopped and freed in the bus's flow
 * (instances.h). */
#include "instances.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "btfshare.h"
#include "clock.h"
#include "host.h"
#include "log.h"
#include "search.h"
#include "sinks.h"

#define POLL_BUDGET 4096
#define POLL_ERRORS_MAX 3

const char *nt_inst_state_name(enum nt_inst_state st)
{
	static const char *const names[] = {"loaded", "initialized", "attached",
					    "failed", "detached"};
	return names[st];
}

/* The state, and the ntcore_plugin_state series that shows it. */
static void set_state(struct nt_instance *inst, enum nt_inst_state st)
{
	const char *kind = nt_kind_name(inst->lib.desc.kind);
	const char *old[3] = {inst->name, kind, nt_inst_state_name(inst->st)};
	const char *now[3] = {inst->name, kind, nt_inst_state_name(st)};

	nt_metric_remove(inst->d->m_state, old);
	inst->st = st;
	nt_metric_set(inst->d->m_state, now, 1);
}

/* ------------------------------------------------------------------ */
/* Instances                                                           */
/* ------------------------------------------------------------------ */

void nt_instance_deliver(void *subscriber, const struct nt_event_hdr *ev,
			 const struct nt_schema *schema)
{
	struct nt_instance *inst = subscriber;

	if (inst->st != NT_ST_ATTACHED)
		return;
	/* a sink's own queue and thread, when it has them */
	if (nt_sink_push(inst, ev, schema))
		return;
	inst->events_out++;
	inst->lib.desc.consume(inst->state, ev, schema);
}

void nt_instance_fail(struct nt_instance *inst, const char *op, int err)
{
	bool fatal = inst->cfg && inst->cfg->required;

	nt_daemon_log(inst->d, NT_LOG_ERROR, inst->prefix, "%s failed: %s; %s", op,
		      strerror(err < 0 ? -err : err),
		      fatal ? "it is required: stopping" : "the other plugins go on");
	nt_sink_stop(inst);
	nt_instance_unwatch(inst);
	if (inst->st == NT_ST_ATTACHED)
		inst->lib.desc.detach(inst->state);
	set_state(inst, NT_ST_FAILED);
}

void nt_instance_poll(struct nt_instance *inst, uint32_t token)
{
	if (inst->st != NT_ST_ATTACHED)
		return;
	int n = inst->lib.desc.poll(inst->state, token, POLL_BUDGET);
	if (n >= 0) {
		inst->poll_errors = 0;
		return;
	}
	if (++inst->poll_errors >= POLL_ERRORS_MAX)
		nt_instance_fail(inst, "poll", n);
}

static struct nt_instance *instance_new(struct nt_daemon *d,
					const struct nt_inst_cfg *ic)
{
	struct nt_instance *inst = calloc(1, sizeof(*inst));

	if (!inst)
		return NULL;
	inst->d = d;
	inst->cfg = ic;
	snprintf(inst->name, sizeof(inst->name), "%s", ic->name);
	inst->log_level = ic->log_level >= 0 ? ic->log_level : d->cfg.log_level;
	if (d->opt.verbose && inst->log_level < NT_LOG_DEBUG)
		inst->log_level = NT_LOG_DEBUG;
	return inst;
}

/* Find, open and configure one instance. Returns 0 or 2 (config error). */
static int instance_load(struct nt_daemon *d, struct nt_instance *inst,
			 const struct nt_search *search)
{
	const struct nt_inst_cfg *ic = inst->cfg;
	char path[4096], why[1024];

	if (nt_loader_find(search->dirs, search->n, ic->plugin, path, sizeof(path))) {
		char dirs[2048];
		nt_search_text(search, dirs, sizeof(dirs));
		nt_config_error(&d->cfg, ic->line, NULL,
				"plugin '%s' not found (searched: %s)", ic->plugin, dirs);
		return 2;
	}
	if (nt_loader_open(path, &inst->lib, why, sizeof(why))) {
		nt_config_error(&d->cfg, ic->line, NULL, "%s", why);
		return 2;
	}
	if (strcmp(inst->lib.desc.name, ic->plugin) != 0) {
		nt_config_error(&d->cfg, ic->line, NULL,
				"%s: the file holds plugin '%s', not '%s'", path,
				inst->lib.desc.name, ic->plugin);
		return 2;
	}
	snprintf(inst->prefix, sizeof(inst->prefix), "%s:%s",
		 nt_kind_name(inst->lib.desc.kind), inst->name);
	if (ic->events_set && inst->lib.desc.kind == NT_KIND_PROBE) {
		nt_config_error(&d->cfg, nt_config_key_line(ic->group, "events"),
				inst->name, "events: a probe publishes events, it does not receive them");
		return 2;
	}
	if (nt_config_fill(&d->cfg, ic->group, inst->name, inst->lib.desc.config,
			   inst->lib.desc.n_config, inst->lib.desc.config_size,
			   &inst->arena, &inst->config))
		return 2;
	return 0;
}

int nt_instance_init(struct nt_daemon *d, struct nt_instance *inst)
{
	const struct nt_inst_cfg *ic = inst->cfg;
	int err = inst->lib.desc.init(inst, &nt_host_vtable, inst->config,
				      &inst->state);

	if (err) {
		if (inst->config_failed)
			return 2;
		nt_instance_fail(inst, "init", err);
		return ic->required ? 1 : 0;
	}
	inst->inited = true;
	set_state(inst, NT_ST_INITED);
	if (inst->lib.desc.kind == NT_KIND_SINK && !ic->events_set)
		nt_bus_subscribe(&d->bus, inst, "*");
	for (size_t i = 0; i < ic->n_events; i++)
		nt_bus_subscribe(&d->bus, inst, ic->events[i]);
	return 0;
}

static int instance_attach(struct nt_instance *inst)
{
	if (inst->st != NT_ST_INITED)
		return 0;
	uint64_t t0 = nt_mono_ns();
	int err = inst->lib.desc.attach(inst->state);
	if (err) {
		nt_instance_unwatch(inst);
		nt_instance_fail(inst, "attach", err);
		return inst->cfg->required ? 1 : 0;
	}
	set_state(inst, NT_ST_ATTACHED);
	nt_sink_start(inst);
	if (inst->log_level >= NT_LOG_DEBUG)
		nt_log(NT_LOG_DEBUG, inst->prefix, "attached in %.1f ms (%s)",
		       (double)(nt_mono_ns() - t0) / 1e6, inst->lib.path);
	return 0;
}

static void instance_free(struct nt_instance *inst)
{
	nt_sink_free(inst);
	nt_instance_unwatch(inst);
	if (inst->inited)
		inst->lib.desc.fini(inst->state);
	nt_arena_free(&inst->arena);
	nt_loader_close(&inst->lib);
	free(inst);
}

/* ------------------------------------------------------------------ */
/* Building and tearing down the instance set                          */
/* ------------------------------------------------------------------ */

int nt_instances_load(struct nt_daemon *d)
{
	struct nt_search search;
	int status = 0;

	nt_search_build(&search, d->cfg.plugin_dirs, d->cfg.n_plugin_dirs);
	d->insts = calloc(d->cfg.n_insts ? d->cfg.n_insts : 1, sizeof(*d->insts));
	for (size_t i = 0; d->insts && i < d->cfg.n_insts; i++) {
		const struct nt_inst_cfg *ic = &d->cfg.insts[i];
		if (!ic->enabled)
			continue;
		struct nt_instance *inst = instance_new(d, ic);
		if (!inst)
			return 1;
		d->insts[d->n_insts++] = inst;
		if (instance_load(d, inst, &search))
			status = 2;
	}
	nt_search_free(&search);
	return d->insts ? status : 1;
}

/* The bus's flow: probes publish, detectors read and publish alerts, sinks
 * write out. Start-up walks it backwards (a sink is ready before the first
 * event reaches it), shutdown forwards (nothing flushes before what feeds
 * it has). */
static const uint32_t flow_order[] = {NT_KIND_PROBE, NT_KIND_DETECTOR,
				      NT_KIND_SINK};

int nt_instances_in_flow(struct nt_daemon *d, bool backwards,
			 nt_instance_fn fn)
{
	size_t n_kinds = NT_ARRAY_LEN(flow_order);

	for (size_t k = 0; k < n_kinds; k++) {
		uint32_t kind = flow_order[backwards ? n_kinds - 1 - k : k];
		for (size_t i = 0; i < d->n_insts; i++) {
			int status;
			if (d->insts[i]->lib.desc.kind == kind &&
			    (status = fn(d, d->insts[i])))
				return status;
		}
	}
	return 0;
}

static int attach_one(struct nt_daemon *d, struct nt_instance *inst)
{
	(void)d;
	return instance_attach(inst);
}

static int flush_one(struct nt_daemon *d, struct nt_instance *inst)
{
	/* A sink's queue is emptied and its thread ended first: flush and
	 * detach run on the loop thread. Sinks that print the self-metrics
	 * at flush see final numbers. */
	if (inst->lib.desc.kind == NT_KIND_SINK) {
		nt_sink_stop(inst);
		nt_daemon_sync_self_metrics(d);
	}
	if (inst->st == NT_ST_ATTACHED && NT_DESC_HAS(&inst->lib.desc, flush))
		inst->lib.desc.flush(inst->state);
	return 0;
}

static int detach_one(struct nt_daemon *d, struct nt_instance *inst)
{
	(void)d;
	nt_instance_unwatch(inst);
	if (inst->st == NT_ST_ATTACHED) {
		uint64_t t0 = nt_mono_ns();
		inst->lib.desc.detach(inst->state);
		set_state(inst, NT_ST_DETACHED);
		if (inst->log_level >= NT_LOG_DEBUG)
			nt_log(NT_LOG_DEBUG, inst->prefix, "detached in %.1f ms",
			       (double)(nt_mono_ns() - t0) / 1e6);
	}
	return 0;
}

static int init_and_attach(struct nt_daemon *d)
{
	int status;

	for (size_t i = 0; i < d->n_insts; i++)
		if ((status = nt_instance_init(d, d->insts[i])))
			return status;
	return nt_instances_in_flow(d, true, attach_one);
}

static size_t count_probes(const struct nt_daemon *d, bool attached_only)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_insts; i++)
		n += d->insts[i]->lib.desc.kind == NT_KIND_PROBE &&
		     (!attached_only || d->insts[i]->st == NT_ST_ATTACHED);
	return n;
}

/* What start-up needed and the run does not: the kernel BTF (unless a
 * plugin holds it), and the heap glibc keeps after freeing it and libbpf's
 * other load-time allocations (5 MB of freed heap stayed resident). */
static void release_startup_memory(struct nt_daemon *d)
{
	struct nt_btfshare_stats bs = nt_btfshare_stats();
	bool freed = nt_btfshare_release_unpinned();

	malloc_trim(0);
	if (d->opt.verbose && bs.parses)
		nt_log(NT_LOG_DEBUG, NULL,
		       "kernel BTF parsed %llu time(s) (%.1f ms), shared by %llu loads; %s",
		       (unsigned long long)bs.parses, (double)bs.parse_ns / 1e6,
		       (unsigned long long)bs.calls,
		       freed ? "freed now" : "kept for a plugin");
}

int nt_instances_start(struct nt_daemon *d)
{
	if (!d->can_trace)
		nt_loghold_start(&d->hold);
	int status = init_and_attach(d);
	size_t probes = count_probes(d, false), live_probes = count_probes(d, true);
	if (!d->can_trace && probes && !live_probes && status != 2) {
		nt_loghold_release(&d->hold, false);
		nt_log(NT_LOG_ERROR, NULL, "no probe could attach: tracing needs %s",
		       d->privs_need);
		return 1;
	}
	nt_loghold_release(&d->hold, true);
	if (status)
		return status;
	if (!d->can_trace && live_probes < probes)
		nt_log(NT_LOG_WARN, NULL, "%zu of %zu probes could not attach: tracing needs %s",
		       probes - live_probes, probes, d->privs_need);
	release_startup_memory(d);
	size_t live = 0;
	for (size_t i = 0; i < d->n_insts; i++)
		live += d->insts[i]->st == NT_ST_ATTACHED;
	if (d->n_insts && !live) {
		nt_log(NT_LOG_ERROR, NULL, "no plugin could be attached");
		return 1;
	}
	return 0;
}

/* Read what the probes hold (and the core's exit ring) until nothing is
 * left or `rounds` rounds were made. */
static void drain_rings(struct nt_daemon *d, int rounds)
{
	for (int round = 0; round < rounds; round++) {
		int handled = 0;
		for (size_t i = 0; i < d->n_insts; i++)
			if (d->insts[i]->lib.desc.kind == NT_KIND_PROBE)
				handled += nt_instance_drain(d->insts[i]);
		handled += nt_targets_drain(&d->targets);
		if (handled <= 0)
			break;
	}
}

static void *quiesce_main(void *arg)
{
	struct nt_instance *inst = arg;
	uint64_t t0 = nt_mono_ns();

	inst->lib.desc.quiesce(inst->state);
	if (inst->log_level >= NT_LOG_DEBUG) /* log is safe from any thread */
		nt_daemon_log(inst->d, NT_LOG_DEBUG, inst->prefix,
			      "stopped producing in %.1f ms",
			      (double)(nt_mono_ns() - t0) / 1e6);
	return NULL;
}

/* Every probe that has the op stops producing, all at once: each releases
 * its BPF links on a thread of its own, so that the kernel's grace-period
 * waits overlap (one after the other they took half a second). */
static void probes_quiesce(struct nt_daemon *d)
{
	pthread_t *tids = calloc(d->n_insts ? d->n_insts : 1, sizeof(*tids));
	bool *started = calloc(d->n_insts ? d->n_insts : 1, sizeof(*started));
	uint64_t t0 = nt_mono_ns();
	size_t n = 0;

	for (size_t i = 0; i < d->n_insts; i++) {
		struct nt_instance *inst = d->insts[i];
		if (inst->lib.desc.kind != NT_KIND_PROBE || inst->st != NT_ST_ATTACHED ||
		    !NT_DESC_HAS(&inst->lib.desc, quiesce))
			continue;
		n++;
		if (!tids || !started ||
		    pthread_create(&tids[i], NULL, quiesce_main, inst) != 0)
			quiesce_main(inst); /* no thread: here, one at a time */
		else
			started[i] = true;
	}
	for (size_t i = 0; tids && started && i < d->n_insts; i++)
		if (started[i])
			pthread_join(tids[i], NULL);
	free(tids);
	free(started);
	if (n && d->opt.verbose)
		nt_log(NT_LOG_DEBUG, NULL, "%zu probes stopped producing in %.1f ms", n,
		       (double)(nt_mono_ns() - t0) / 1e6);
}

void nt_instances_stop(struct nt_daemon *d)
{
	drain_rings(d, 4);
	probes_quiesce(d);
	drain_rings(d, 64);
	nt_instances_in_flow(d, false, flush_one);
	nt_instances_in_flow(d, false, detach_one);
}

void nt_instances_free(struct nt_daemon *d)
{
	for (size_t i = 0; i < d->n_insts; i++) {
		struct nt_instance *inst = d->insts[i];
		const char *state[3] = {inst->name, nt_kind_name(inst->lib.desc.kind),
					nt_inst_state_name(inst->st)};
		nt_metric_remove(d->m_state, state);
		nt_bus_forget(&d->bus, d->insts[i]);
		instance_free(d->insts[i]);
	}
	free(d->insts);
	d->insts = NULL;
	d->n_insts = 0;
}

