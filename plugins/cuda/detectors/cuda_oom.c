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

#include "ntcore/plugin.h"

#include "../cuda.h"
#include "cudaev.h"
#include "det_alert.h"
#include "det_util.h"
#include "pyframes.h"
#include "frag.h"
#include "oomring.h"
#include "track.h"

struct oom_cfg {
	const char *model;
	int64_t repeat_ms;
	int64_t recent;
	int64_t stack_frames;
	bool all_failures;
	bool include_host;
};

static const char *const oom_models[] = { "paged", "contiguous", NULL };

static const struct nt_cfg_key oom_keys[] = {
	{ .key = "model", .type = NT_CFG_STRING,
	  .offset = offsetof(struct oom_cfg, model), .def = "\"paged\"",
	  .min = DET_NOMIN, .max = DET_NOMAX, .choices = oom_models,
	  .desc = "paged (real GPUs: holes hold no memory) or contiguous (an "
		  "arena: a failure that fits the holes' total reads as fragmentation)" },
	DET_KEY("repeat_ms", NT_CFG_INT, struct oom_cfg, repeat_ms, "2000", 0,
		600000,
		"the same request failing again this soon (an allocator's retry "
		"after releasing its cache) is reported as info"),
	DET_KEY("recent", NT_CFG_INT, struct oom_cfg, recent, "8", 1, OOM_RING_MAX,
		"last successful allocations listed in the alert"),
	DET_KEY("stack_frames", NT_CFG_INT, struct oom_cfg, stack_frames, "24", 1,
		128, "frames of the failing call's stack in the evidence"),
	DET_KEY("all_failures", NT_CFG_BOOL, struct oom_cfg, all_failures, "false",
		DET_NOMIN, DET_NOMAX,
		"report every failed allocation, not only out-of-memory ones"),
	DET_KEY("include_host", NT_CFG_BOOL, struct oom_cfg, include_host, "false",
		DET_NOMIN, DET_NOMAX, "also watch pinned host allocations"),
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

struct oom_proc {
	uint32_t pid;
	struct oom_ring ring;
	uint64_t fail_size, fail_ns; /* the last failure, for retries */
	uint32_t retries;
};

/* address ranges ever allocated per (pid, device), so that only memory the
 * process once held counts as a free hole (frag.h) */
struct oom_used {
	uint32_t pid;
	int32_t dev;
	struct frag_used u;
};

struct oom {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct oom_cfg *cfg;
	int alert_type;
	struct track tr;
	struct cuev_cache cc;
	struct pyframes py; /* lent Python stacks (pyframes.h) */
	struct oom_proc *procs;
	size_t np, cp;
	struct oom_used *used;
	size_t nu, cu;
	struct nt_metric *m_fail, *m_lat;
};

static struct frag_used *oom_used_get(struct oom *o, uint32_t pid, int32_t dev,
				      bool create)
{
	for (size_t i = 0; i < o->nu; i++)
		if (o->used[i].pid == pid && o->used[i].dev == dev)
			return &o->used[i].u;
	if (!create)
		return NULL;
	if (o->nu == o->cu) {
		size_t nc = o->cu ? o->cu * 2 : 8;
		struct oom_used *n = realloc(o->used, nc * sizeof(*n));

		if (!n)
			return NULL;
		o->used = n;
		o->cu = nc;
	}
	o->used[o->nu].pid = pid;
	o->used[o->nu].dev = dev;
	frag_used_init(&o->used[o->nu].u);
	return &o->used[o->nu++].u;
}

static struct oom_proc *oom_proc_get(struct oom *o, uint32_t pid)
{
	for (size_t i = 0; i < o->np; i++)
		if (o->procs[i].pid == pid)
			return &o->procs[i];
	if (o->np == o->cp) {
		size_t nc = o->cp ? o->cp * 2 : 8;
		struct oom_proc *n = realloc(o->procs, nc * sizeof(*n));

		if (!n)
			return NULL;
		o->procs = n;
		o->cp = nc;
	}
	memset(&o->procs[o->np], 0, sizeof(o->procs[0]));
	o->procs[o->np].pid = pid;
	oom_ring_init(&o->procs[o->np].ring, (uint32_t)o->cfg->recent);
	return &o->procs[o->np++];
}

static bool contiguous(const struct oom *o)
{
	return o->cfg->model && strcmp(o->cfg->model, "contiguous") == 0;
}

static void oom_report(struct oom *o, const struct cuev *e)
{
	struct oom_proc *p = oom_proc_get(o, e->pid);
	struct amap_proc *ap = amap_proc(&o->tr.map, e->pid, e->device);
	struct amap_entry *v = NULL;
	long n = amap_collect(&o->tr.map, e->pid, e->device, &v);
	struct frag_stats fs;
	struct sbuf ev, msg;
	char api[64], errbuf[64], fn[256], sfn[256], stack[4096], b1[32], b2[32], b3[32];
	char pyfn[256];
	const char *errname;
	struct det_subject subj = { .pid = e->pid, .tid = e->tid, .comm = e->comm };
	uint64_t live = ap ? ap->live_bytes : 0, now;
	bool frag_fail, retry;
	double gap_ms;

	frag_compute_used(v, n > 0 ? (size_t)n : 0,
			  oom_used_get(o, e->pid, e->device, false), &fs);
	if (live == 0 && e->outstanding)
		live = e->outstanding; /* the probe's count: we started late */
	cuev_api_name(e, api, sizeof(api));
	if (e->error_name.len)
		errname = cuev_str_copy(e->error_name, errbuf, sizeof(errbuf));
	else
		errname = nt_cuda_error_format((int)e->layer, e->ret, errbuf,
					       sizeof(errbuf));
	cuev_str_copy(e->stack, stack, sizeof(stack));
	stack_user_frame(stack, fn, sizeof(fn));
	stack_py_frame(stack, pyfn, sizeof(pyfn));
	frag_fail = contiguous(o) && fs.free_bytes >= e->size &&
		    fs.largest_hole < e->size;
	retry = p && p->fail_size == e->size && p->fail_ns &&
		e->ts >= p->fail_ns &&
		e->ts - p->fail_ns <= (uint64_t)o->cfg->repeat_ms * 1000000ULL;
	gap_ms = retry ? (double)(e->ts - p->fail_ns) / 1e6 : 0;
	if (p) {
		p->retries = retry ? p->retries + 1 : 0;
		p->fail_size = e->size;
		p->fail_ns = e->ts;
	}

	sb_init(&ev);
	sb_init(&msg);
	sb_printf(&ev, "{\"pid\":%u,\"tid\":%u,\"device\":%d,\"function\":",
		  e->pid, e->tid, e->device);
	sb_json_str(&ev, api);
	sb_puts(&ev, ",\"error\":");
	sb_json_str(&ev, errname);
	sb_printf(&ev, ",\"requested_bytes\":%" PRIu64 ",\"live_bytes\":%" PRIu64
		       ",\"live_count\":%" PRIu64 ",\"peak_bytes\":%" PRIu64
		       ",\"probe_outstanding_bytes\":%" PRIu64
		       ",\"largest_free_hole_bytes\":%" PRIu64
		       ",\"free_in_span_bytes\":%" PRIu64 ",\"holes\":%" PRIu64
		       ",\"span_bytes\":%" PRIu64 ",\"fragmentation_score\":%.1f"
		       ",\"call_duration_ns\":%" PRIu64 ",\"caller\":",
		  e->size, live, ap ? ap->live_count : 0, ap ? ap->peak_bytes : 0,
		  e->outstanding, fs.largest_hole, fs.free_bytes, fs.holes,
		  fs.span, fs.score, e->duration_ns);
	sb_json_str(&ev, fn);
	sb_puts(&ev, ",\"python_caller\":");
	sb_json_str(&ev, pyfn);
	sb_puts(&ev, ",\"stack\":");
	sb_json_stack(&ev, stack, (unsigned)o->cfg->stack_frames);
	sb_puts(&ev, ",\"recent_allocations\":[");
	for (uint32_t i = 0; p && i < p->ring.n; i++) {
		const struct oom_rec *r = oom_ring_get(&p->ring, i);
		char f[256];

		stack_user_frame(stacktab_get(&o->tr.st, r->stack), f, sizeof(f));
		if (i)
			sb_putc(&ev, ',');
		sb_printf(&ev, "{\"bytes\":%" PRIu64 ",\"ptr\":\"0x%" PRIx64
			       "\",\"device\":%d,\"ago_ms\":%.3f,\"function\":",
			  r->size, r->ptr, r->dev,
			  e->ts >= r->ts_ns ? (double)(e->ts - r->ts_ns) / 1e6 : 0.0);
		sb_json_str(&ev, f);
		sb_putc(&ev, '}');
	}
	sb_puts(&ev, "],\"hint\":");
	if (frag_fail) {
		char h[512];

		snprintf(h, sizeof(h),
			 "%s are free inside this process's allocated span but no "
			 "hole holds %s (largest %s): fragmentation. Allocate the "
			 "large buffers first and reuse them; in PyTorch try "
			 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
			 fmt_bytes(fs.free_bytes, b1, sizeof(b1)),
			 fmt_bytes(e->size, b2, sizeof(b2)),
			 fmt_bytes(fs.largest_hole, b3, sizeof(b3)));
		sb_json_str(&ev, h);
	} else {
		sb_json_str(&ev,
			    "the device has no room for this request: lower the "
			    "batch size or sequence length, free tensors no longer "
			    "needed, use mixed precision or activation "
			    "checkpointing; if live memory grew over time, see the "
			    "cuda_memleak alerts. In PyTorch, when its error says "
			    "much memory is 'reserved but unallocated', that is "
			    "fragmentation inside its cache (not visible here): try "
			    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True. "
			    "PyTorch retries once after emptying its cache: an "
			    "allocation that then succeeds means it recovered");
	}
	sb_printf(&ev, ",\"retry\":%s,\"retries\":%u", retry ? "true" : "false",
		  p ? p->retries : 0);
	sb_putc(&ev, '}');
	if (retry)
		sb_printf(&msg, "retry %u, %.1f ms after the previous failure: ",
			  p->retries, gap_ms);
	sb_printf(&msg, "%s of %" PRIu64 " bytes (%s) failed on device %d in pid "
			"%u (%s): %s; %s live in %" PRIu64
			" allocations, largest known free hole %s; called from %s",
		  api, e->size, fmt_bytes(e->size, b1, sizeof(b1)), e->device,
		  e->pid, e->comm, errname, fmt_bytes(live, b2, sizeof(b2)),
		  ap ? ap->live_count : 0, fmt_bytes(fs.largest_hole, b3, sizeof(b3)),
		  pyfn[0] ? pyfn : fn[0] ? short_fn(fn, sfn, sizeof(sfn)) : "(no stack)");
	det_alert_publish(o->host, o->inst, (uint32_t)o->alert_type, &subj,
			  retry ? NT_SEV_INFO : NT_SEV_CRITICAL, sb_str(&msg),
			  sb_str(&ev));
	now = mono_now_ns();
	if (now >= e->ts)
		o->host->metric_set(o->m_lat, NULL, (double)(now - e->ts) / 1e9);
	o->host->log(o->inst, NT_LOG_WARN, "%s", sb_str(&msg));
	if (ap)
		ap->n_failed++;
	sb_free(&ev);
	sb_free(&msg);
	free(v);
}

static void oom_consume(void *state, const struct nt_event_hdr *ev,
			const struct nt_schema *schema)
{
	struct oom *o = state;
	struct cuev e;
	struct amap_entry a;

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
		switch (track_alloc(&o->tr, &e, &a)) {
		case TRACK_NEW:
		case TRACK_REPLACED: {
			struct oom_proc *p = oom_proc_get(o, e.pid);
			struct oom_rec r = { .ts_ns = e.ts, .ptr = e.ptr,
					     .size = e.size, .tid = e.tid,
					     .stack = a.stack, .api = e.api,
					     .dev = e.device };

			struct frag_used *u = oom_used_get(o, e.pid, e.device, true);

			if (p)
				oom_ring_push(&p->ring, &r);
			if (u)
				frag_used_add(u, e.ptr, e.ptr + e.size);
			break;
		}
		case TRACK_DUP: {
			/* the runtime's twin of a driver event: its stack is better */
			struct oom_proc *p = oom_proc_get(o, e.pid);

			for (uint32_t i = 0; p && i < p->ring.n && i < 4; i++) {
				struct oom_rec *r =
					(struct oom_rec *)oom_ring_get(&p->ring, i);

				if (r->ptr == e.ptr) {
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
