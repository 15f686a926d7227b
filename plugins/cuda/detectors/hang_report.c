/* SPDX-License-Identifier: MIT */
/*
 * cuda_hang: the alert of a process whose GPU went quiet while it runs
 * (hangdet.h): what it did last, its last launch, its blocked threads and
 * the likely cause.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "det_alert.h"
#include "det_util.h"
#include "hangdet.h"

static const char *act_name(uint32_t k)
{
	switch (k) {
	case HANG_ACT_LAUNCH: return "launch";
	case HANG_ACT_MEMCPY: return "copy";
	case HANG_ACT_MEMSET: return "set";
	case HANG_ACT_SYNC: return "sync return";
	default: return "call";
	}
}

/* The evidence's last launch and the threads blocked in a sync. */
static void hg_json_launch_blocked(struct hg *g, const struct hang_proc *h,
				   uint64_t now, struct nt_sb *evb)
{
	char lfn[256];

	stack_caller(stacktab_get(&g->st, h->launch_stack), h->launch_name, lfn,
		     sizeof(lfn));
	if (h->launch_ns) {
		nt_sb_puts(evb, ",\"last_launch\":{\"kernel\":");
		sb_json_str(evb, h->launch_name);
		nt_sb_puts(evb, ",\"function\":");
		sb_json_str(evb, h->launch_func);
		nt_sb_printf(evb, ",\"tid\":%u,\"s_ago\":%.3f,\"caller\":", h->launch_tid,
			  (double)(now - h->launch_ns) / 1e9);
		sb_json_str(evb, lfn);
		nt_sb_puts(evb, ",\"stack\":");
		sb_json_stack(evb, stacktab_get(&g->st, h->launch_stack),
			      (unsigned)g->cfg->stack_frames);
		nt_sb_putc(evb, '}');
	}
	nt_sb_puts(evb, ",\"blocked\":[");
	for (uint32_t i = 0; i < h->nblocked; i++) {
		const struct hang_blocked *x = &h->blocked[i];
		char f[256];

		stack_user_frame(stacktab_get(&g->st, x->stack), f, sizeof(f));
		if (i)
			nt_sb_putc(evb, ',');
		nt_sb_printf(evb, "{\"tid\":%u,\"function\":", x->tid);
		sb_json_str(evb, x->func);
		nt_sb_printf(evb, ",\"blocked_s\":%.3f,\"caller\":",
			  (double)(now - x->since_ns) / 1e9);
		sb_json_str(evb, f);
		nt_sb_puts(evb, ",\"stack\":");
		sb_json_stack(evb, stacktab_get(&g->st, x->stack),
			      (unsigned)g->cfg->stack_frames);
		nt_sb_putc(evb, '}');
	}
	nt_sb_putc(evb, ']');
}

void hg_alert(struct hg *g, struct hg_proc *p, uint64_t now)
{
	const struct hang_proc *h = &p->h;
	const struct hang_blocked *b = hang_longest_blocked(h);
	double quiet = (double)(now - h->last_act_ns) / 1e9;
	struct nt_sb ev, msg;
	char fn[256], pyfn[256];
	const char *hint;
	struct det_subject subj = { .pid = h->pid, .comm = p->comm };

	if (!h->last_act_ns && b)
		quiet = (double)(now - b->since_ns) / 1e9;
	nt_sb_init(&ev, 0);
	nt_sb_init(&msg, 0);
	nt_sb_printf(&ev, "{\"pid\":%u,\"quiet_s\":%.3f,\"timeout_s\":%.3f,"
		       "\"cpu_percent\":%.1f,\"runnable_checks\":%u,\"quiet_checks\":%u,"
		       "\"launches\":%" PRIu64
		       ",\"last_activity\":{\"kind\":\"%s\",\"function\":",
		  h->pid, quiet, (double)g->cfg->timeout_ms / 1e3, p->cpu_percent,
		  p->runnable, p->checks, h->launches, act_name(h->last_act_kind));
	sb_json_str(&ev, h->last_act_func);
	nt_sb_printf(&ev, ",\"s_ago\":%.3f}", h->last_act_ns ?
		  (double)(now - h->last_act_ns) / 1e9 : -1.0);
	hg_json_launch_blocked(g, h, now, &ev);

	nt_sb_printf(&msg, "pid %u (%s): no GPU activity for %.1f s while the "
			"process still runs",
		  h->pid, p->comm, quiet);
	if (b) {
		stack_user_frame(stacktab_get(&g->st, b->stack), fn, sizeof(fn));
		stack_py_frame(stacktab_get(&g->st, b->stack), pyfn, sizeof(pyfn));
		nt_sb_printf(&msg, "; thread %u blocked in %s for %.1f s", b->tid,
			  b->func, (double)(now - b->since_ns) / 1e9);
		if (pyfn[0]) {
			nt_sb_printf(&msg, " (called from %s)", pyfn);
		} else if (fn[0]) {
			char sfn[256];

			nt_sb_printf(&msg, " (called from %s)", short_fn(fn, sfn, sizeof(sfn)));
		}
		hint = "a thread waits for GPU work that does not finish: a kernel "
		       "that never ends (an endless loop, a spin-wait on a flag), "
		       "a deadlock between streams, or a collective (NCCL) "
		       "waiting for a peer rank that is gone or stuck. Look at "
		       "the last kernel launched; py-spy dump and cuda-gdb "
		       "attach show where; for NCCL set NCCL_DEBUG=INFO and "
		       "check every rank";
	} else if (p->cpu_percent >= 25.0 ||
		   (p->checks >= 2 && 2 * p->runnable >= p->checks)) {
		nt_sb_printf(&msg, "; no thread inside a CUDA sync, CPU %.0f%% busy: "
				"the host side stopped feeding the GPU",
			  p->cpu_percent);
		hint = "the process computes on the CPU without giving the GPU "
		       "work: a slow data loader, a Python-level loop, a "
		       "checkpoint write; profile the host (py-spy top)";
	} else {
		nt_sb_printf(&msg, "; no thread inside a CUDA sync, CPU %.0f%%: it "
				"waits on something else",
			  p->cpu_percent);
		hint = "the process sleeps outside CUDA: a lock, I/O, a queue, "
		       "another process or rank; py-spy dump shows where each "
		       "thread waits";
	}
	if (h->launch_ns)
		nt_sb_printf(&msg, "; last launch %s %.1f s ago", h->launch_name[0] ?
			  h->launch_name : h->launch_func,
			  (double)(now - h->launch_ns) / 1e9);
	nt_sb_puts(&ev, ",\"hint\":");
	sb_json_str(&ev, hint);
	nt_sb_putc(&ev, '}');
	det_alert_publish(g->host, g->inst, (uint32_t)g->alert_type, &subj,
			  b ? NT_SEV_CRITICAL : NT_SEV_WARNING, nt_sb_str(&msg),
			  nt_sb_str(&ev));
	g->host->metric_add(g->m_alerts, NULL, 1);
	g->host->log(g->inst, NT_LOG_WARN, "%s", nt_sb_str(&msg));
	nt_sb_fini(&ev);
	nt_sb_fini(&msg);
}
