/* SPDX-License-Identifier: MIT */
/*
 * cuda_memleak: live device allocations per process and device, with their
 * allocation stacks.
 *  - online: every window the live bytes of each (process, device) are read;
 *    Laplace's rule of succession over the last n windows (leak.h) says how
 *    likely the memory keeps growing; past `threshold` with at least
 *    `min_growth_bytes` of new high-water an alert.cuda_memleak names the
 *    top allocating stacks by live bytes; it re-alerts only once the
 *    high-water mark doubled (leak.c: leak_check).
 *  - at process exit (proc.exit): a report of everything never freed
 *    (cuda_memleak.report text, and an alert when memory outside a caching
 *    allocator was left).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/plugin.h"

#include "cudaev.h"
#include "det_alert.h"
#include "det_util.h"
#include "pyframes.h"
#include "leak.h"
#include "track.h"

struct ml_cfg {
	int64_t window_ms;
	int64_t windows;
	double threshold;
	int64_t min_growth_bytes;
	int64_t noise_bytes;
	bool exit_report;
	int64_t exit_min_bytes;
	int64_t exit_delay_ms;
	int64_t top;
	int64_t stack_frames;
	struct nt_strlist cache_frames;
	bool include_host;
};

static const struct nt_cfg_key ml_keys[] = {
	DET_KEY("window_ms", NT_CFG_INT, struct ml_cfg, window_ms, "500", 10,
		3600000, "length of one window of the growth estimator (ms)"),
	DET_KEY("windows", NT_CFG_INT, struct ml_cfg, windows, "8", 2,
		LEAK_MAX_WINDOWS,
		"n: windows the probability (s+1)/(n+2) looks back on"),
	DET_KEY("threshold", NT_CFG_FLOAT, struct ml_cfg, threshold, "0.8", 0.5,
		0.9999, "alert when the growth probability reaches this"),
	DET_KEY("min_growth_bytes", NT_CFG_INT, struct ml_cfg, min_growth_bytes,
		"33554432", 1, 1e15,
		"and the high-water mark rose by at least this over the n windows"),
	DET_KEY("noise_bytes", NT_CFG_INT, struct ml_cfg, noise_bytes, "0", 0,
		1e15, "a window grows only by more than this"),
	DET_KEY("exit_report", NT_CFG_BOOL, struct ml_cfg, exit_report, "true",
		DET_NOMIN, DET_NOMAX, "report never-freed memory at process exit"),
	DET_KEY("exit_min_bytes", NT_CFG_INT, struct ml_cfg, exit_min_bytes, "1",
		1, 1e15,
		"alert at exit when at least this many bytes outside a cache stay"),
	DET_KEY("exit_delay_ms", NT_CFG_INT, struct ml_cfg, exit_delay_ms, "200",
		0, 10000,
		"wait this long after proc.exit for the last frees in flight"),
	DET_KEY("top", NT_CFG_INT, struct ml_cfg, top, "5", 1, 100,
		"stacks named in an alert"),
	DET_KEY("stack_frames", NT_CFG_INT, struct ml_cfg, stack_frames, "16", 1,
		128, "frames per stack in the evidence"),
	DET_KEY("cache_frames", NT_CFG_STRING_LIST, struct ml_cfg, cache_frames,
		"[\"CUDACachingAllocator\", \"c10::cuda::\", \"cupy::cuda::memory\", "
		"\"libcublas\", \"libcudnn\", \"libnccl\", \"libcufft\", "
		"\"libcurand\", \"libcusparse\", \"libcusolver\", \"libnvshmem\", "
		"\"cublasCreate\", \"cudnnCreate\"]",
		DET_NOMIN, DET_NOMAX,
		"a stack holding one of these is memory a caching allocator or a CUDA "
		"library keeps for the process's life: not a leak at exit"),
	DET_KEY("include_host", NT_CFG_BOOL, struct ml_cfg, include_host, "false",
		DET_NOMIN, DET_NOMAX, "also track pinned host allocations"),
};

static const struct nt_schema ml_alert_schema = {
	.name = "alert.cuda_memleak",
	.desc = "CUDA device memory that keeps growing, or was never freed at exit",
	.fields = det_alert_fields,
	.n_fields = 4,
	.min_size = sizeof(struct nt_alert),
};

static const struct nt_schema ml_report_schema = {
	.name = "cuda_memleak.report",
	.desc = "allocations never freed when a process exited (text table)",
	.fields = det_report_fields,
	.n_fields = 2,
	.min_size = sizeof(struct det_report),
};

static const char *const lbl_pd[] = { "pid", "device" };
static const struct nt_metric_desc m_live_desc = {
	"ntcore_cuda_memleak_live_bytes", "live device bytes per process and device",
	NT_METRIC_GAUGE, 2, lbl_pd, NULL, 0, 0 };
static const struct nt_metric_desc m_prob_desc = {
	"ntcore_cuda_memleak_growth_probability",
	"Laplace estimate that live memory keeps growing (s+1)/(n+2)",
	NT_METRIC_GAUGE, 2, lbl_pd, NULL, 0, 0 };
static const struct nt_metric_desc m_alerts_desc = {
	"ntcore_cuda_memleak_alerts_total", "leak alerts published",
	NT_METRIC_COUNTER, 0, NULL, NULL, 0, 0 };

struct ml_proc {
	uint32_t pid;
	int32_t dev;
	struct leak_est est;
	char comm[NT_COMM_LEN + 1];
};

struct ml_exit {
	uint32_t pid;
	int32_t code;
	uint64_t due_ns;
	char comm[NT_COMM_LEN + 1];
};

struct ml {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct ml_cfg *cfg;
	struct leak_cfg lcfg;
	int alert_type, report_type;
	struct track tr;
	struct cuev_cache cc;
	struct pyframes py; /* lent Python stacks (pyframes.h) */
	struct ml_proc *procs;
	size_t np, cp;
	struct ml_exit *exits;
	size_t ne, ce;
	struct nt_metric *m_live, *m_prob, *m_alerts;
};

static struct ml_proc *ml_proc_get(struct ml *m, uint32_t pid, int32_t dev,
				   const char *comm)
{
	struct ml_proc *p;

	for (size_t i = 0; i < m->np; i++)
		if (m->procs[i].pid == pid && m->procs[i].dev == dev)
			return &m->procs[i];
	if (m->np == m->cp) {
		size_t nc = m->cp ? m->cp * 2 : 8;
		struct ml_proc *n = realloc(m->procs, nc * sizeof(*n));

		if (!n)
			return NULL;
		m->procs = n;
		m->cp = nc;
	}
	p = &m->procs[m->np++];
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->dev = dev;
	leak_init(&p->est, &m->lcfg);
	if (comm)
		snprintf(p->comm, sizeof(p->comm), "%s", comm);
	return p;
}

static bool is_cache_stack(const struct ml_cfg *cfg, const char *stack)
{
	for (uint32_t i = 0; i < cfg->cache_frames.n; i++)
		if (cfg->cache_frames.v[i][0] && strstr(stack, cfg->cache_frames.v[i]))
			return true;
	return false;
}

static void labels_pd(char *pid, char *dev, uint32_t p, int32_t d)
{
	snprintf(pid, 16, "%u", p);
	snprintf(dev, 16, "%d", d);
}

/* JSON array of the top stacks; returns the first one's function. */
static void json_top_stacks(struct ml *m, struct sbuf *b,
			    const struct stack_total *t, long nt, long top,
			    char *first_fn, size_t fnlen)
{
	sb_putc(b, '[');
	for (long i = 0; i < nt && i < top; i++) {
		const char *st = stacktab_get(&m->tr.st, t[i].stack);
		char fn[256], pyfn[256];

		stack_user_frame(st, fn, sizeof(fn));
		stack_py_frame(st, pyfn, sizeof(pyfn));
		if (i == 0 && first_fn)
			snprintf(first_fn, fnlen, "%s",
				 pyfn[0] ? pyfn : fn[0] ? fn : "(no stack)");
		if (i)
			sb_putc(b, ',');
		sb_printf(b, "{\"bytes\":%" PRIu64 ",\"count\":%" PRIu64
			     ",\"device\":%d,\"function\":",
			  t[i].bytes, t[i].count, t[i].dev);
		sb_json_str(b, fn);
		sb_puts(b, ",\"python_caller\":");
		sb_json_str(b, pyfn);
		sb_puts(b, ",\"stack\":");
		sb_json_stack(b, st, (unsigned)m->cfg->stack_frames);
		sb_putc(b, '}');
	}
	sb_putc(b, ']');
}

static void ml_online_alert(struct ml *m, struct ml_proc *p,
			    const struct amap_proc *ap,
			    const struct leak_reading *r)
{
	struct amap_entry *v = NULL;
	struct stack_total *t = NULL;
	long n = amap_collect(&m->tr.map, p->pid, p->dev, &v), nt;
	struct sbuf ev, msg;
	char fn[256] = "(no stack)", sfn[256], gb[32], lb[32], tb[32];
	double span_s = (double)r->n * (double)m->lcfg.window_ns / 1e9;
	struct det_subject subj = { .pid = p->pid, .comm = p->comm };

	if (n < 0)
		return;
	nt = stack_totals(v, (size_t)n, &t);
	sb_init(&ev);
	sb_init(&msg);
	sb_printf(&ev, "{\"kind\":\"growth\",\"pid\":%u,\"device\":%d,"
		       "\"live_bytes\":%" PRIu64 ",\"live_count\":%" PRIu64
		       ",\"peak_bytes\":%" PRIu64 ",\"growth_bytes\":%" PRIu64
		       ",\"window_s\":%.3f,\"windows\":%u,\"growing_windows\":%u,"
		       "\"probability\":%.4f,\"threshold\":%.4f,"
		       "\"rate_bytes_per_s\":%.0f,\"top_stacks\":",
		  p->pid, p->dev, ap->live_bytes, ap->live_count, ap->peak_bytes,
		  r->growth, (double)m->lcfg.window_ns / 1e9, r->n, r->s, r->p,
		  m->cfg->threshold, r->rate_bps);
	json_top_stacks(m, &ev, t, nt > 0 ? nt : 0, m->cfg->top, fn, sizeof(fn));
	sb_puts(&ev, ",\"hint\":");
	sb_json_str(&ev,
		    "memory allocated at the top stacks is not given back. In "
		    "PyTorch look for tensors kept alive across iterations "
		    "(appended to a list, a loss summed without .item(), a "
		    "growing cache); torch.cuda.memory_summary() shows the "
		    "allocator's view. A caching allocator that only warms up "
		    "stops growing: this alert needs growth in most windows.");
	sb_putc(&ev, '}');
	fmt_bytes(r->growth, gb, sizeof(gb));
	fmt_bytes(ap->live_bytes, lb, sizeof(lb));
	fmt_bytes(nt > 0 ? t[0].bytes : 0, tb, sizeof(tb));
	sb_printf(&msg, "CUDA memory of pid %u (%s) on device %d keeps growing: "
			"+%s in %.1f s, %s live (p=%.2f, %u of %u windows grew); "
			"top: %s live from %s",
		  p->pid, p->comm, p->dev, gb, span_s, lb, r->p, r->s, r->n, tb,
		  stack_py_frame(fn, sfn, sizeof(sfn))[0] ? fn
							  : short_fn(fn, sfn, sizeof(sfn)));
	det_alert_publish(m->host, m->inst, (uint32_t)m->alert_type, &subj,
			  NT_SEV_WARNING, sb_str(&msg), sb_str(&ev));
	m->host->metric_add(m->m_alerts, NULL, 1);
	m->host->log(m->inst, NT_LOG_INFO, "%s", sb_str(&msg));
	sb_free(&ev);
	sb_free(&msg);
	free(t);
	free(v);
}

static void ml_exit_report(struct ml *m, const struct ml_exit *x)
{
	struct amap_entry *v = NULL;
	struct stack_total *t = NULL;
	long n = amap_collect(&m->tr.map, x->pid, -1, &v), nt;
	uint64_t leak_b = 0, leak_n = 0, cache_b = 0, cache_n = 0;
	struct sbuf ev, msg, txt, arr;
	char fn[256] = "", sfn[256], b1[32];
	struct det_subject subj = { .pid = x->pid, .comm = x->comm };
	bool first = true;

	if (n < 0)
		return;
	nt = stack_totals(v, (size_t)n, &t);
	if (nt < 0)
		nt = 0;
	sb_init(&ev);
	sb_init(&msg);
	sb_init(&txt);
	sb_init(&arr);
	sb_printf(&txt, "cuda_memleak: pid %u (%s) exited (code %d): ", x->pid,
		  x->comm, x->code);
	sb_putc(&arr, '[');
	for (long i = 0; i < nt; i++) {
		const char *st = stacktab_get(&m->tr.st, t[i].stack);
		bool cache = is_cache_stack(m->cfg, st);
		char f[256];

		stack_user_frame(st, f, sizeof(f));
		if (cache) {
			cache_b += t[i].bytes;
			cache_n += t[i].count;
		} else {
			leak_b += t[i].bytes;
			leak_n += t[i].count;
			if (!fn[0])
				snprintf(fn, sizeof(fn), "%s", f[0] ? f : "(no stack)");
		}
		if (i < m->cfg->top * 4) {
			if (!first)
				sb_putc(&arr, ',');
			first = false;
			sb_printf(&arr, "{\"bytes\":%" PRIu64 ",\"count\":%" PRIu64
				       ",\"device\":%d,\"cache\":%s,\"function\":",
				  t[i].bytes, t[i].count, t[i].dev,
				  cache ? "true" : "false");
			sb_json_str(&arr, f);
			sb_puts(&arr, ",\"stack\":");
			sb_json_stack(&arr, st, (unsigned)m->cfg->stack_frames);
			sb_putc(&arr, '}');
		}
	}
	sb_putc(&arr, ']');
	if (n == 0) {
		sb_puts(&txt, "every device allocation was freed\n");
	} else {
		sb_printf(&txt, "%ld allocations never freed, %s in all\n", n,
			  fmt_bytes(leak_b + cache_b, b1, sizeof(b1)));
		sb_printf(&txt, "  %14s %8s %6s  %s\n", "bytes", "count", "device",
			  "where (caller of the CUDA call)");
		for (long i = 0; i < nt && i < 20; i++) {
			const char *st = stacktab_get(&m->tr.st, t[i].stack);
			char f[256];

			stack_user_frame(st, f, sizeof(f));
			char sf[256];

			sb_printf(&txt, "  %14" PRIu64 " %8" PRIu64 " %6d  %s%s\n",
				  t[i].bytes, t[i].count, t[i].dev,
				  f[0] ? short_fn(f, sf, sizeof(sf)) : "(no stack)",
				  is_cache_stack(m->cfg, st) ? "  [held: cache or CUDA library]" : "");
		}
		if (nt > 20)
			sb_printf(&txt, "  ... %ld more stacks\n", nt - 20);
		if (cache_b)
			sb_printf(&txt, "  %s in %" PRIu64 " blocks held by a caching "
					"allocator or a CUDA library (cuBLAS/cuDNN "
					"workspaces, handles) for the process's life "
					"(not a leak)\n",
				  fmt_bytes(cache_b, b1, sizeof(b1)), cache_n);
	}
	det_report_publish(m->host, m->inst, (uint32_t)m->report_type, &subj,
			   sb_str(&txt));
	if (leak_b >= (uint64_t)m->cfg->exit_min_bytes) {
		sb_printf(&ev, "{\"kind\":\"exit\",\"pid\":%u,\"exit_code\":%d,"
			       "\"unfreed_bytes\":%" PRIu64 ",\"unfreed_count\":%" PRIu64
			       ",\"cache_bytes\":%" PRIu64 ",\"cache_count\":%" PRIu64
			       ",\"stacks\":",
			  x->pid, x->code, leak_b, leak_n, cache_b, cache_n);
		sb_puts(&ev, sb_str(&arr));
		sb_puts(&ev, ",\"hint\":");
		sb_json_str(&ev, "free these allocations (cudaFree) when done, or "
				 "let their owner object be destroyed; the driver "
				 "reclaims them at exit, but a long-running process "
				 "that repeats this path runs out of memory");
		sb_putc(&ev, '}');
		sb_printf(&msg, "pid %u (%s) exited with %" PRIu64 " bytes (%s) of "
				"device memory never freed in %" PRIu64
				" allocations; largest from %s",
			  x->pid, x->comm, leak_b, fmt_bytes(leak_b, b1, sizeof(b1)),
			  leak_n, short_fn(fn, sfn, sizeof(sfn)));
		det_alert_publish(m->host, m->inst, (uint32_t)m->alert_type, &subj,
				  NT_SEV_WARNING, sb_str(&msg), sb_str(&ev));
		m->host->metric_add(m->m_alerts, NULL, 1);
		m->host->log(m->inst, NT_LOG_INFO, "%s", sb_str(&msg));
	}
	sb_free(&ev);
	sb_free(&msg);
	sb_free(&txt);
	sb_free(&arr);
	free(t);
	free(v);
}

static void ml_forget(struct ml *m, uint32_t pid)
{
	char ps[16], ds[16];

	for (size_t i = 0; i < m->np;) {
		if (m->procs[i].pid == pid) {
			const char *lv[2] = { ps, ds };

			labels_pd(ps, ds, pid, m->procs[i].dev);
			m->host->metric_remove(m->m_live, lv);
			m->host->metric_remove(m->m_prob, lv);
			m->procs[i] = m->procs[--m->np];
		} else {
			i++;
		}
	}
	amap_drop_pid(&m->tr.map, pid);
}

/* Exit reports that are due (all when `all`). */
static void ml_run_exits(struct ml *m, uint64_t now, bool all)
{
	for (size_t i = 0; i < m->ne;) {
		if (all || now >= m->exits[i].due_ns) {
			struct ml_exit x = m->exits[i];

			m->exits[i] = m->exits[--m->ne];
			if (m->cfg->exit_report)
				ml_exit_report(m, &x);
			ml_forget(m, x.pid);
		} else {
			i++;
		}
	}
}

static void ml_tick(struct ml *m)
{
	uint64_t now = mono_now_ns();

	ml_run_exits(m, now, false);
	for (size_t i = 0; i < m->np; i++) {
		struct ml_proc *p = &m->procs[i];
		struct amap_proc *ap = amap_proc_find(&m->tr.map, p->pid, p->dev);
		struct leak_reading r;
		char ps[16], ds[16];
		const char *lv[2] = { ps, ds };

		if (!ap)
			continue;
		if (leak_sample(&p->est, now, ap->live_bytes) == 0)
			continue;
		labels_pd(ps, ds, p->pid, p->dev);
		m->host->metric_set(m->m_live, lv, (double)ap->live_bytes);
		if (leak_check(&p->est, &r))
			ml_online_alert(m, p, ap, &r);
		m->host->metric_set(m->m_prob, lv, r.p);
	}
}

static bool ml_proc_known(const struct ml *m, uint32_t pid)
{
	for (size_t i = 0; i < m->np; i++)
		if (m->procs[i].pid == pid)
			return true;
	return false;
}

static void ml_consume(void *state, const struct nt_event_hdr *ev,
		       const struct nt_schema *schema)
{
	struct ml *m = state;
	struct cuev e;

	if (pyf_is(schema)) {
		pyf_note(&m->py, ev, schema);
		return;
	}
	if (!cuev_decode(&m->cc, ev, schema, &e))
		return;
	switch (e.type) {
	case CUEV_ALLOC: {
		enum track_res r;

		pyf_merge(&m->py, &e);
		r = track_alloc(&m->tr, &e, NULL);

		if (r == TRACK_NEW || r == TRACK_REPLACED)
			ml_proc_get(m, e.pid, e.device, e.comm);
		break;
	}
	case CUEV_FREE:
		track_free(&m->tr, &e, NULL);
		break;
	case CUEV_PROC_EXIT:
		/* A process that never allocated device memory (a shell
		 * shim of the job) has nothing to report. */
		if (!ml_proc_known(m, e.pid))
			break;
		if (m->ne == m->ce) {
			size_t nc = m->ce ? m->ce * 2 : 8;
			struct ml_exit *n = realloc(m->exits, nc * sizeof(*n));

			if (!n)
				return;
			m->exits = n;
			m->ce = nc;
		}
		m->exits[m->ne].pid = e.pid;
		m->exits[m->ne].code = e.exit_code;
		m->exits[m->ne].due_ns = mono_now_ns() +
					 (uint64_t)m->cfg->exit_delay_ms * 1000000ULL;
		/* the name its allocations carried: the exit is seen from
		 * whichever thread ended last ("cuda-EvtHandlr") */
		snprintf(m->exits[m->ne].comm, sizeof(m->exits[0].comm), "%s", e.comm);
		for (size_t i = 0; i < m->np; i++)
			if (m->procs[i].pid == e.pid && m->procs[i].comm[0]) {
				snprintf(m->exits[m->ne].comm, sizeof(m->exits[0].comm),
					 "%s", m->procs[i].comm);
				break;
			}
		m->ne++;
		break;
	default:
		break;
	}
}

static int ml_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	const struct ml_cfg *cfg = config;
	struct ml *m;
	int err;

	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->inst = inst;
	m->host = host;
	m->cfg = cfg;
	m->lcfg.window_ns = (uint64_t)cfg->window_ms * 1000000ULL;
	m->lcfg.windows = (uint32_t)cfg->windows;
	m->lcfg.threshold = cfg->threshold;
	m->lcfg.min_growth = (uint64_t)cfg->min_growth_bytes;
	m->lcfg.noise_bytes = (uint64_t)cfg->noise_bytes;
	pyf_init(&m->py);
	err = track_init(&m->tr, cfg->include_host, 0);
	if (err)
		goto fail;
	m->alert_type = host->register_schema(inst, &ml_alert_schema);
	m->report_type = host->register_schema(inst, &ml_report_schema);
	if (m->alert_type < 0 || m->report_type < 0) {
		err = m->alert_type < 0 ? m->alert_type : m->report_type;
		host->log(inst, NT_LOG_ERROR, "cannot register schemas: %d", err);
		goto fail;
	}
	if ((err = host->subscribe(inst, "cuda.alloc")) < 0 ||
	    (err = host->subscribe(inst, "cuda.free")) < 0 ||
	    (err = host->subscribe(inst, "proc.exit")) < 0 ||
	    (err = host->subscribe(inst, PYF_SCHEMA)) < 0)
		goto fail;
	m->m_live = host->metric_register(inst, &m_live_desc);
	m->m_prob = host->metric_register(inst, &m_prob_desc);
	m->m_alerts = host->metric_register(inst, &m_alerts_desc);
	if (!m->m_live || !m->m_prob || !m->m_alerts) {
		err = -ENOMEM;
		goto fail;
	}
	*state = m;
	return 0;
fail:
	track_fini(&m->tr);
	pyf_fini(&m->py);
	free(m);
	return err ? err : -EINVAL;
}

static int ml_attach(void *state)
{
	struct ml *m = state;
	uint64_t iv = (uint64_t)m->cfg->window_ms / 4;

	return m->host->add_timer(m->inst, iv < 10 ? 10 : iv, 1);
}

static int ml_poll(void *state, uint32_t token, uint32_t budget)
{
	(void)token;
	(void)budget;
	ml_tick(state);
	return 0;
}

static void ml_flush(void *state)
{
	/* shutdown or reload: every pending exit report now */
	ml_run_exits(state, 0, true);
}

static void ml_detach(void *state)
{
	ml_run_exits(state, 0, true);
}

static void ml_fini(void *state)
{
	struct ml *m = state;

	if (!m)
		return;
	track_fini(&m->tr);
	free(m->procs);
	free(m->exits);
	pyf_fini(&m->py);
	free(m);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "cuda_memleak",
	.kind = NT_KIND_DETECTOR,
	.n_config = NT_ARRAY_LEN(ml_keys),
	.description = "CUDA device memory leaks: growth probability online, never-freed report at exit",
	.version = "0.1.0",
	.config = ml_keys,
	.config_size = sizeof(struct ml_cfg),
	.init = ml_init,
	.attach = ml_attach,
	.poll = ml_poll,
	.detach = ml_detach,
	.fini = ml_fini,
	.consume = ml_consume,
	.flush = ml_flush,
};
