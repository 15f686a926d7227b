/* SPDX-License-Identifier: MIT */
/*
 * cuda_oom: a failed device allocation is reported at once (from the
 * consume() call that delivers its cuda.alloc event) with the requested
 * size, the process's live bytes on that device, the largest free hole known
 * inside its allocated span, the failing call's stack and the last
 * successful allocations.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/cfg.h"
#include "ntcore/plugin.h"

#include "../cuda.h"
#include "cudaev.h"
#include "det_alert.h"
#include "det_util.h"
#include "pyframes.h"
#include "frag.h"
#include "oomring.h"
#include "track.h"
#include "oom.h"


static const char *const oom_models[] = { "paged", "contiguous", NULL };

static const struct nt_cfg_key oom_keys[] = {
	NT_KEY_CHOICE(struct oom_cfg, model, "paged", oom_models,
		"paged (real GPUs: holes hold no memory) or contiguous (an "
		"arena: a failure that fits the holes' total reads as fragmentation)"),
	NT_KEY_INT(struct oom_cfg, repeat_ms, 2000, 0, 600000,
		"the same request failing again this soon (an allocator's retry "
		"after releasing its cache) is reported as info"),
	NT_KEY_INT(struct oom_cfg, recent, 8, 1, OOM_RING_MAX,
		"last successful allocations listed in the alert"),
	NT_KEY_INT(struct oom_cfg, stack_frames, 24, 1, 128,
		"frames of the failing call's stack in the evidence"),
	NT_KEY_BOOL(struct oom_cfg, all_failures, false,
		"report every failed allocation, not only out-of-memory ones"),
	NT_KEY_BOOL(struct oom_cfg, include_host, false,
		"also watch pinned host allocations"),
};

static const struct nt_schema oom_alert_schema = {
	.name = "alert.cuda_oom",
	.desc = "a CUDA allocation failed (out of memory)",
	.fields = det_alert_fields,
	.n_fields = 4,
	.min_size = sizeof(struct nt_alert),
};

static const char *const lbl_pd[] = { "pid", "device" };
static const struct nt_metric_desc m_fail_desc = {
	"ntcore_cuda_oom_failures_total", "failed device allocations",
	NT_METRIC_COUNTER, 2, lbl_pd, NULL, 0, 0 };
static const struct nt_metric_desc m_lat_desc = {
	"ntcore_cuda_oom_report_latency_seconds",
	"from the failed call's return to its alert being published",
	NT_METRIC_GAUGE, 0, NULL, NULL, 0, 0 };


/* A successful allocation: the recent ring and the ranges ever held; a
 * runtime event twin of a driver one (TRACK_DUP) lends its better stack. */
static void oom_note_alloc(struct oom *o, const struct cuev *e0)
{
	struct cuev ec = *e0, *e = &ec;
	struct amap_entry a;

	switch (track_alloc(&o->tr, e, &a)) {
	case TRACK_NEW:
	case TRACK_REPLACED: {
		struct oom_proc *p = oom_proc_get(o, e->pid);
		struct oom_rec r = { .ts_ns = e->ts, .ptr = e->ptr,
				     .size = e->size, .tid = e->tid,
				     .stack = a.stack, .api = e->api,
				     .dev = e->device };

		struct frag_used *u = oom_used_get(o, e->pid, e->device, true);

		if (p)
			oom_ring_push(&p->ring, &r);
		if (u)
			frag_used_add(u, e->ptr, e->ptr + e->size);
		break;
	}
	case TRACK_DUP: {
		/* the runtime's twin of a driver event: its stack is better */
		struct oom_proc *p = oom_proc_get(o, e->pid);

		for (uint32_t i = 0; p && i < p->ring.n && i < 4; i++) {
			struct oom_rec *r =
				(struct oom_rec *)oom_ring_get(&p->ring, i);

			if (r->ptr == e->ptr) {
				r->stack = a.stack;
				r->api = a.api;
				break;
			}
		}
		break;
	}
	default:
		break;
	}
}

static void oom_consume(void *state, const struct nt_event_hdr *ev,
			const struct nt_schema *schema)
{
	struct oom *o = state;
	struct cuev e;

	if (pyf_is(schema)) {
		pyf_note(&o->py, ev, schema);
		return;
	}
	if (!cuev_decode(&o->cc, ev, schema, &e))
		return;
	switch (e.type) {
	case CUEV_ALLOC:
		pyf_merge(&o->py, &e);
		if (cuev_failed(&e)) {
			char ps[16], ds[16];
			const char *lv[2] = { ps, ds };

			if (!track_kind_ok(&o->tr, e.kind))
				return;
			if (!o->cfg->all_failures && e.ret != 2)
				return; /* cudaErrorMemoryAllocation / CUDA_ERROR_OUT_OF_MEMORY */
			snprintf(ps, sizeof(ps), "%u", e.pid);
			snprintf(ds, sizeof(ds), "%d", e.device);
			o->host->metric_add(o->m_fail, lv, 1);
			oom_report(o, &e);
			return;
		}
		oom_note_alloc(o, &e);
		break;
	case CUEV_FREE:
		track_free(&o->tr, &e, NULL);
		break;
	case CUEV_PROC_EXIT:
		for (size_t i = 0; i < o->np; i++)
			if (o->procs[i].pid == e.pid) {
				o->procs[i] = o->procs[--o->np];
				break;
			}
		for (size_t i = 0; i < o->nu;) {
			if (o->used[i].pid == e.pid) {
				frag_used_fini(&o->used[i].u);
				o->used[i] = o->used[--o->nu];
			} else {
				i++;
			}
		}
		amap_drop_pid(&o->tr.map, e.pid);
		break;
	default:
		break;
	}
}

static int oom_init(struct nt_instance *inst, const struct nt_host *host,
		    const void *config, void **state)
{
	const struct oom_cfg *cfg = config;
	struct oom *o = calloc(1, sizeof(*o));
	int err;

	if (!o)
		return -ENOMEM;
	o->inst = inst;
	o->host = host;
	o->cfg = cfg;
	pyf_init(&o->py);
	err = track_init(&o->tr, cfg->include_host, 0);
	if (err)
		goto fail;
	o->alert_type = host->register_schema(inst, &oom_alert_schema);
	if (o->alert_type < 0) {
		err = o->alert_type;
		host->log(inst, NT_LOG_ERROR, "cannot register alert.cuda_oom: %d", err);
		goto fail;
	}
	if ((err = host->subscribe(inst, "cuda.alloc")) < 0 ||
	    (err = host->subscribe(inst, "cuda.free")) < 0 ||
	    (err = host->subscribe(inst, "proc.exit")) < 0 ||
	    (err = host->subscribe(inst, PYF_SCHEMA)) < 0)
		goto fail;
	o->m_fail = host->metric_register(inst, &m_fail_desc);
	o->m_lat = host->metric_register(inst, &m_lat_desc);
	if (!o->m_fail || !o->m_lat) {
		err = -ENOMEM;
		goto fail;
	}
	*state = o;
	return 0;
fail:
	track_fini(&o->tr);
	pyf_fini(&o->py);
	free(o);
	return err ? err : -EINVAL;
}

static int oom_attach(void *state)
{
	(void)state;
	return 0;
}

static int oom_poll(void *state, uint32_t token, uint32_t budget)
{
	(void)state;
	(void)token;
	(void)budget;
	return 0;
}

static void oom_detach(void *state)
{
	(void)state;
}

static void oom_fini(void *state)
{
	struct oom *o = state;

	if (!o)
		return;
	track_fini(&o->tr);
	for (size_t i = 0; i < o->nu; i++)
		frag_used_fini(&o->used[i].u);
	free(o->used);
	free(o->procs);
	pyf_fini(&o->py);
	free(o);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "cuda_oom",
	.kind = NT_KIND_DETECTOR,
	.n_config = NT_ARRAY_LEN(oom_keys),
	.description = "CUDA out-of-memory: a failed allocation at once, with live bytes, largest hole, stack and recent allocations",
	.version = "0.1.0",
	.config = oom_keys,
	.config_size = sizeof(struct oom_cfg),
	.init = oom_init,
	.attach = oom_attach,
	.poll = oom_poll,
	.detach = oom_detach,
	.fini = oom_fini,
	.consume = oom_consume,
};
