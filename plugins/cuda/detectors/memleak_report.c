/* SPDX-License-Identifier: MIT */
/*
 * cuda_memleak: what it publishes: the growth alert (the top stacks of the
 * live memory) and, at a process's exit, the report of what it left
 * allocated and the exit alert (memleak.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "det_alert.h"
#include "memleak.h"

static bool is_cache_stack(const struct ml_cfg *cfg, const char *stack)
{
	for (uint32_t i = 0; i < cfg->cache_frames.n; i++)
		if (cfg->cache_frames.v[i][0] && strstr(stack, cfg->cache_frames.v[i]))
			return true;
	return false;
}

void labels_pd(char *pid, char *dev, uint32_t p, int32_t d)
{
	snprintf(pid, 16, "%u", p);
	snprintf(dev, 16, "%d", d);
}

/* JSON array of the top stacks; returns the first one's function. */
static void json_top_stacks(struct ml *m, struct nt_sb *b,
			    const struct stack_total *t, long nt, long top,
			    char *first_fn, size_t fnlen)
{
	nt_sb_putc(b, '[');
	for (long i = 0; i < nt && i < top; i++) {
		const char *st = stacktab_get(&m->tr.st, t[i].stack);
		char fn[256], pyfn[256];

		stack_user_frame(st, fn, sizeof(fn));
		stack_py_frame(st, pyfn, sizeof(pyfn));
		if (i == 0 && first_fn)
			snprintf(first_fn, fnlen, "%s",
				 pyfn[0] ? pyfn : fn[0] ? fn : "(no stack)");
		if (i)
			nt_sb_putc(b, ',');
		nt_sb_printf(b, "{\"bytes\":%" PRIu64 ",\"count\":%" PRIu64
			     ",\"device\":%d,\"function\":",
			  t[i].bytes, t[i].count, t[i].dev);
		sb_json_str(b, fn);
		nt_sb_puts(b, ",\"python_caller\":");
		sb_json_str(b, pyfn);
		nt_sb_puts(b, ",\"stack\":");
		sb_json_stack(b, st, (unsigned)m->cfg->stack_frames);
		nt_sb_putc(b, '}');
	}
	nt_sb_putc(b, ']');
}

void ml_online_alert(struct ml *m, struct ml_proc *p,
			    const struct amap_proc *ap,
			    const struct leak_reading *r)
{
	struct amap_entry *v = NULL;
	struct stack_total *t = NULL;
	long n = amap_collect(&m->tr.map, p->pid, p->dev, &v), nt;
	struct nt_sb ev, msg;
	char fn[256] = "(no stack)", sfn[256], gb[32], lb[32], tb[32];
	double span_s = (double)r->n * (double)m->lcfg.window_ns / 1e9;
	struct det_subject subj = { .pid = p->pid, .comm = p->comm };

	if (n < 0)
		return;
	nt = stack_totals(v, (size_t)n, &t);
	nt_sb_init(&ev, 0);
	nt_sb_init(&msg, 0);
	nt_sb_printf(&ev, "{\"kind\":\"growth\",\"pid\":%u,\"device\":%d,"
		       "\"live_bytes\":%" PRIu64 ",\"live_count\":%" PRIu64
		       ",\"peak_bytes\":%" PRIu64 ",\"growth_bytes\":%" PRIu64
		       ",\"window_s\":%.3f,\"windows\":%u,\"growing_windows\":%u,"
		       "\"probability\":%.4f,\"threshold\":%.4f,"
		       "\"rate_bytes_per_s\":%.0f,\"top_stacks\":",
		  p->pid, p->dev, ap->live_bytes, ap->live_count, ap->peak_bytes,
		  r->growth, (double)m->lcfg.window_ns / 1e9, r->n, r->s, r->p,
		  m->cfg->threshold, r->rate_bps);
	json_top_stacks(m, &ev, t, nt > 0 ? nt : 0, m->cfg->top, fn, sizeof(fn));
	nt_sb_puts(&ev, ",\"hint\":");
	sb_json_str(&ev,
		    "memory allocated at the top stacks is not given back. In "
		    "PyTorch look for tensors kept alive across iterations "
		    "(appended to a list, a loss summed without .item(), a "
		    "growing cache); torch.cuda.memory_summary() shows the "
		    "allocator's view. A caching allocator that only warms up "
		    "stops growing: this alert needs growth in most windows.");
	nt_sb_putc(&ev, '}');
	fmt_bytes(r->growth, gb, sizeof(gb));
	fmt_bytes(ap->live_bytes, lb, sizeof(lb));
	fmt_bytes(nt > 0 ? t[0].bytes : 0, tb, sizeof(tb));
	nt_sb_printf(&msg, "CUDA memory of pid %u (%s) on device %d keeps growing: "
			"+%s in %.1f s, %s live (p=%.2f, %u of %u windows grew); "
			"top: %s live from %s",
		  p->pid, p->comm, p->dev, gb, span_s, lb, r->p, r->s, r->n, tb,
		  stack_py_frame(fn, sfn, sizeof(sfn))[0] ? fn
							  : short_fn(fn, sfn, sizeof(sfn)));
	det_alert_publish(m->host, m->inst, (uint32_t)m->alert_type, &subj,
			  NT_SEV_WARNING, nt_sb_str(&msg), nt_sb_str(&ev));
	m->host->metric_add(m->m_alerts, NULL, 1);
	m->host->log(m->inst, NT_LOG_INFO, "%s", nt_sb_str(&msg));
	nt_sb_fini(&ev);
	nt_sb_fini(&msg);
	free(t);
	free(v);
}

/* What a process left allocated, by kind. */
struct exit_sums {
	uint64_t leak_b, leak_n, cache_b, cache_n;
};

/* The stacks of what a process left allocated, as a JSON array (the top
 * cfg->top * 4); sums them by kind and names the largest leak's caller. */
static void exit_stacks(struct ml *m, const struct stack_total *t, long nt,
			struct exit_sums *s, char *fn, size_t fnlen,
			struct nt_sb *arr)
{
	nt_sb_putc(arr, '[');
	for (long i = 0; i < nt; i++) {
		const char *st = stacktab_get(&m->tr.st, t[i].stack);
		bool cache = is_cache_stack(m->cfg, st);
		char f[256];

		stack_user_frame(st, f, sizeof(f));
		if (cache) {
			s->cache_b += t[i].bytes;
			s->cache_n += t[i].count;
		} else {
			s->leak_b += t[i].bytes;
			s->leak_n += t[i].count;
			if (!fn[0])
				snprintf(fn, fnlen, "%s", f[0] ? f : "(no stack)");
		}
		if (i >= m->cfg->top * 4)
			continue;
		if (i)
			nt_sb_putc(arr, ',');
		nt_sb_printf(arr, "{\"bytes\":%" PRIu64 ",\"count\":%" PRIu64
			       ",\"device\":%d,\"cache\":%s,\"function\":",
			  t[i].bytes, t[i].count, t[i].dev,
			  cache ? "true" : "false");
		sb_json_str(arr, f);
		nt_sb_puts(arr, ",\"stack\":");
		sb_json_stack(arr, st, (unsigned)m->cfg->stack_frames);
		nt_sb_putc(arr, '}');
	}
	nt_sb_putc(arr, ']');
}

/* The report's text: what a process left, the top 20 stacks. */
static void exit_text(struct ml *m, const struct ml_exit *x,
		      const struct stack_total *t, long nt, long n,
		      const struct exit_sums *s, struct nt_sb *txt)
{
	char b1[32];

	nt_sb_printf(txt, "cuda_memleak: pid %u (%s) exited (code %d): ", x->pid,
		  x->comm, x->code);
	if (n == 0) {
		nt_sb_puts(txt, "every device allocation was freed\n");
		return;
	}
	nt_sb_printf(txt, "%ld allocations never freed, %s in all\n", n,
		  fmt_bytes(s->leak_b + s->cache_b, b1, sizeof(b1)));
	nt_sb_printf(txt, "  %14s %8s %6s  %s\n", "bytes", "count", "device",
		  "where (caller of the CUDA call)");
	for (long i = 0; i < nt && i < 20; i++) {
		const char *st = stacktab_get(&m->tr.st, t[i].stack);
		char f[256], sf[256];

		stack_user_frame(st, f, sizeof(f));
		nt_sb_printf(txt, "  %14" PRIu64 " %8" PRIu64 " %6d  %s%s\n",
			  t[i].bytes, t[i].count, t[i].dev,
			  f[0] ? short_fn(f, sf, sizeof(sf)) : "(no stack)",
			  is_cache_stack(m->cfg, st) ? "  [held: cache or CUDA library]" : "");
	}
	if (nt > 20)
		nt_sb_printf(txt, "  ... %ld more stacks\n", nt - 20);
	if (s->cache_b)
		nt_sb_printf(txt, "  %s in %" PRIu64 " blocks held by a caching "
				"allocator or a CUDA library (cuBLAS/cuDNN "
				"workspaces, handles) for the process's life "
				"(not a leak)\n",
			  fmt_bytes(s->cache_b, b1, sizeof(b1)), s->cache_n);
}

/* The exit alert, when what leaked reaches exit_min_bytes. */
static void exit_alert(struct ml *m, const struct ml_exit *x,
		       const struct exit_sums *s, const char *fn,
		       const struct nt_sb *arr)
{
	struct det_subject subj = { .pid = x->pid, .comm = x->comm };
	struct nt_sb ev, msg;
	char sfn[256], b1[32];

	if (s->leak_b < (uint64_t)m->cfg->exit_min_bytes)
		return;
	nt_sb_init(&ev, 0);
	nt_sb_init(&msg, 0);
	nt_sb_printf(&ev, "{\"kind\":\"exit\",\"pid\":%u,\"exit_code\":%d,"
		       "\"unfreed_bytes\":%" PRIu64 ",\"unfreed_count\":%" PRIu64
		       ",\"cache_bytes\":%" PRIu64 ",\"cache_count\":%" PRIu64
		       ",\"stacks\":",
		  x->pid, x->code, s->leak_b, s->leak_n, s->cache_b, s->cache_n);
	nt_sb_puts(&ev, nt_sb_str(arr));
	nt_sb_puts(&ev, ",\"hint\":");
	sb_json_str(&ev, "free these allocations (cudaFree) when done, or "
			 "let their owner object be destroyed; the driver "
			 "reclaims them at exit, but a long-running process "
			 "that repeats this path runs out of memory");
	nt_sb_putc(&ev, '}');
	nt_sb_printf(&msg, "pid %u (%s) exited with %" PRIu64 " bytes (%s) of "
			"device memory never freed in %" PRIu64
			" allocations; largest from %s",
		  x->pid, x->comm, s->leak_b, fmt_bytes(s->leak_b, b1, sizeof(b1)),
		  s->leak_n, short_fn(fn, sfn, sizeof(sfn)));
	det_alert_publish(m->host, m->inst, (uint32_t)m->alert_type, &subj,
			  NT_SEV_WARNING, nt_sb_str(&msg), nt_sb_str(&ev));
	m->host->metric_add(m->m_alerts, NULL, 1);
	m->host->log(m->inst, NT_LOG_INFO, "%s", nt_sb_str(&msg));
	nt_sb_fini(&ev);
	nt_sb_fini(&msg);
}

void ml_exit_report(struct ml *m, const struct ml_exit *x)
{
	struct amap_entry *v = NULL;
	struct stack_total *t = NULL;
	long n = amap_collect(&m->tr.map, x->pid, -1, &v), nt;
	struct exit_sums sums = { 0 };
	struct det_subject subj = { .pid = x->pid, .comm = x->comm };
	struct nt_sb txt, arr;
	char fn[256] = "";

	if (n < 0)
		return;
	nt = stack_totals(v, (size_t)n, &t);
	if (nt < 0)
		nt = 0;
	nt_sb_init(&txt, 0);
	nt_sb_init(&arr, 0);
	exit_stacks(m, t, nt, &sums, fn, sizeof(fn), &arr);
	exit_text(m, x, t, nt, n, &sums, &txt);
	det_report_publish(m->host, m->inst, (uint32_t)m->report_type, &subj,
			   nt_sb_str(&txt));
	exit_alert(m, x, &sums, fn, &arr);
	nt_sb_fini(&txt);
	nt_sb_fini(&arr);
	free(t);
	free(v);
}
