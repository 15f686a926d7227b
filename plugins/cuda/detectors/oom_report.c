/* SPDX-License-Identifier: MIT */
/*
 * cuda_oom: the per-process tables (recent allocations, ranges ever held)
 * and the alert of a failed allocation (oom.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cuda.h"
#include "det_alert.h"
#include "det_util.h"
#include "oom.h"

struct frag_used *oom_used_get(struct oom *o, uint32_t pid, int32_t dev,
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

struct oom_proc *oom_proc_get(struct oom *o, uint32_t pid)
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

bool contiguous(const struct oom *o)
{
	return o->cfg->model && strcmp(o->cfg->model, "contiguous") == 0;
}

/* What an OOM alert says, gathered once. */
struct oom_facts {
	struct oom_proc *p;
	struct amap_proc *ap;
	struct frag_stats fs;
	uint64_t live;
	bool frag_fail, retry;
	double gap_ms;
	char api[64], errbuf[64], fn[256], pyfn[256], stack[4096];
	const char *errname;
};

static void oom_gather(struct oom *o, const struct cuev *e, struct oom_facts *f)
{
	struct amap_entry *v = NULL;
	long n = amap_collect(&o->tr.map, e->pid, e->device, &v);
	struct oom_proc *p = oom_proc_get(o, e->pid);

	f->p = p;
	f->ap = amap_proc(&o->tr.map, e->pid, e->device);
	frag_compute_used(v, n > 0 ? (size_t)n : 0,
			  oom_used_get(o, e->pid, e->device, false), &f->fs);
	free(v);
	f->live = f->ap ? f->ap->live_bytes : 0;
	if (f->live == 0 && e->outstanding)
		f->live = e->outstanding; /* the probe's count: we started late */
	cuev_api_name(e, f->api, sizeof(f->api));
	if (e->error_name.len)
		f->errname = cuev_str_copy(e->error_name, f->errbuf, sizeof(f->errbuf));
	else
		f->errname = nt_cuda_error_format((int)e->layer, e->ret, f->errbuf,
						  sizeof(f->errbuf));
	cuev_str_copy(e->stack, f->stack, sizeof(f->stack));
	stack_user_frame(f->stack, f->fn, sizeof(f->fn));
	stack_py_frame(f->stack, f->pyfn, sizeof(f->pyfn));
	f->frag_fail = contiguous(o) && f->fs.free_bytes >= e->size &&
		       f->fs.largest_hole < e->size;
	f->retry = p && p->fail_size == e->size && p->fail_ns &&
		   e->ts >= p->fail_ns &&
		   e->ts - p->fail_ns <= (uint64_t)o->cfg->repeat_ms * 1000000ULL;
	f->gap_ms = f->retry ? (double)(e->ts - p->fail_ns) / 1e6 : 0;
	if (p) {
		p->retries = f->retry ? p->retries + 1 : 0;
		p->fail_size = e->size;
		p->fail_ns = e->ts;
	}
}

/* The recent allocations of the process, newest first, as JSON. */
static void oom_recent_json(struct oom *o, const struct cuev *e,
			    const struct oom_proc *p, struct nt_sb *ev)
{
	nt_sb_puts(ev, ",\"recent_allocations\":[");
	for (uint32_t i = 0; p && i < p->ring.n; i++) {
		const struct oom_rec *r = oom_ring_get(&p->ring, i);
		char f[256];

		stack_user_frame(stacktab_get(&o->tr.st, r->stack), f, sizeof(f));
		if (i)
			nt_sb_putc(ev, ',');
		nt_sb_printf(ev, "{\"bytes\":%" PRIu64 ",\"ptr\":\"0x%" PRIx64
			      "\",\"device\":%d,\"ago_ms\":%.3f,\"function\":",
			  r->size, r->ptr, r->dev,
			  e->ts >= r->ts_ns ? (double)(e->ts - r->ts_ns) / 1e6 : 0.0);
		sb_json_str(ev, f);
		nt_sb_putc(ev, '}');
	}
	nt_sb_putc(ev, ']');
}

static void oom_hint_json(const struct cuev *e, const struct oom_facts *f,
			  struct nt_sb *ev)
{
	char b1[32], b2[32], b3[32], h[512];

	nt_sb_puts(ev, ",\"hint\":");
	if (!f->frag_fail) {
		sb_json_str(ev,
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
		return;
	}
	snprintf(h, sizeof(h),
		 "%s are free inside this process's allocated span but no "
		 "hole holds %s (largest %s): fragmentation. Allocate the "
		 "large buffers first and reuse them; in PyTorch try "
		 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
		 fmt_bytes(f->fs.free_bytes, b1, sizeof(b1)),
		 fmt_bytes(e->size, b2, sizeof(b2)),
		 fmt_bytes(f->fs.largest_hole, b3, sizeof(b3)));
	sb_json_str(ev, h);
}

static void oom_evidence(struct oom *o, const struct cuev *e,
			 const struct oom_facts *f, struct nt_sb *ev)
{
	const struct amap_proc *ap = f->ap;

	nt_sb_printf(ev, "{\"pid\":%u,\"tid\":%u,\"device\":%d,\"function\":",
		  e->pid, e->tid, e->device);
	sb_json_str(ev, f->api);
	nt_sb_puts(ev, ",\"error\":");
	sb_json_str(ev, f->errname);
	nt_sb_printf(ev, ",\"requested_bytes\":%" PRIu64 ",\"live_bytes\":%" PRIu64
		      ",\"live_count\":%" PRIu64 ",\"peak_bytes\":%" PRIu64
		      ",\"probe_outstanding_bytes\":%" PRIu64
		      ",\"largest_free_hole_bytes\":%" PRIu64
		      ",\"free_in_span_bytes\":%" PRIu64 ",\"holes\":%" PRIu64
		      ",\"span_bytes\":%" PRIu64 ",\"fragmentation_score\":%.1f"
		      ",\"call_duration_ns\":%" PRIu64 ",\"caller\":",
		  e->size, f->live, ap ? ap->live_count : 0, ap ? ap->peak_bytes : 0,
		  e->outstanding, f->fs.largest_hole, f->fs.free_bytes, f->fs.holes,
		  f->fs.span, f->fs.score, e->duration_ns);
	sb_json_str(ev, f->fn);
	nt_sb_puts(ev, ",\"python_caller\":");
	sb_json_str(ev, f->pyfn);
	nt_sb_puts(ev, ",\"stack\":");
	sb_json_stack(ev, f->stack, (unsigned)o->cfg->stack_frames);
	oom_recent_json(o, e, f->p, ev);
	oom_hint_json(e, f, ev);
	nt_sb_printf(ev, ",\"retry\":%s,\"retries\":%u}", f->retry ? "true" : "false",
		  f->p ? f->p->retries : 0);
}

void oom_report(struct oom *o, const struct cuev *e)
{
	struct oom_facts f = { 0 };
	struct nt_sb ev, msg;
	struct det_subject subj = { .pid = e->pid, .tid = e->tid, .comm = e->comm };
	char sfn[256], b1[32], b2[32], b3[32];
	uint64_t now;

	oom_gather(o, e, &f);
	nt_sb_init(&ev, 0);
	nt_sb_init(&msg, 0);
	oom_evidence(o, e, &f, &ev);
	if (f.retry)
		nt_sb_printf(&msg, "retry %u, %.1f ms after the previous failure: ",
			  f.p->retries, f.gap_ms);
	nt_sb_printf(&msg, "%s of %" PRIu64 " bytes (%s) failed on device %d in pid "
			"%u (%s): %s; %s live in %" PRIu64
			" allocations, largest known free hole %s; called from %s",
		  f.api, e->size, fmt_bytes(e->size, b1, sizeof(b1)), e->device,
		  e->pid, e->comm, f.errname, fmt_bytes(f.live, b2, sizeof(b2)),
		  f.ap ? f.ap->live_count : 0,
		  fmt_bytes(f.fs.largest_hole, b3, sizeof(b3)),
		  f.pyfn[0] ? f.pyfn : f.fn[0] ? short_fn(f.fn, sfn, sizeof(sfn)) : "(no stack)");
	det_alert_publish(o->host, o->inst, (uint32_t)o->alert_type, &subj,
			  f.retry ? NT_SEV_INFO : NT_SEV_CRITICAL, nt_sb_str(&msg),
			  nt_sb_str(&ev));
	now = nt_clock_mono_ns();
	if (now >= e->ts)
		o->host->metric_set(o->m_lat, NULL, (double)(now - e->ts) / 1e9);
	o->host->log(o->inst, NT_LOG_WARN, "%s", nt_sb_str(&msg));
	if (f.ap)
		f.ap->n_failed++;
	nt_sb_fini(&ev);
	nt_sb_fini(&msg);
}
