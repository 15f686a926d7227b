/* SPDX-License-Identifier: MIT */
/*
 * cuda_hang: a target whose GPU activity (kernel and graph launches, copies,
 * sets, sync returns) stopped `timeout_ms` ago while the process still runs
 * (/proc/PID exists, not a zombie) is reported once per quiet period with
 * what it last launched and, for each thread blocked inside a
 * synchronisation call (cuda.enter without its return), how long it has
 * been blocked there and its stack. Checked every `interval_ms`, so a report
 * comes at most timeout + interval after the last activity.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntcore/kit/cfg.h"
#include "ntcore/plugin.h"

#include "../cuda.h"
#include "allocmap.h"
#include "cudaev.h"
#include "det_alert.h"
#include "det_util.h"
#include "pyframes.h"
#include "hang.h"
#include "hangdet.h"


static const struct nt_cfg_key hg_keys[] = {
	NT_KEY_INT(struct hg_cfg, timeout_ms, 10000, 10, 86400000,
		"GPU silence that counts as a hang (ms)"),
	NT_KEY_INT(struct hg_cfg, interval_ms, 1000, 10, 600000,
		"how often targets are checked (ms)"),
	NT_KEY_INT(struct hg_cfg, stack_frames, 24, 1, 128,
		"frames per stack in the evidence"),
	NT_KEY_STR(struct hg_cfg, proc_root, "/proc",
		"where process states are read (a container's host /proc)"),
};

static const struct nt_schema hg_alert_schema = {
	.name = "alert.cuda_hang",
	.desc = "a process stopped using its GPU while it still runs",
	.fields = det_alert_fields,
	.n_fields = 4,
	.min_size = sizeof(struct nt_alert),
};

static const char *const lbl_p[] = { "pid" };
static const struct nt_metric_desc m_quiet_desc = {
	"ntcore_cuda_hang_quiet_seconds", "time since the last GPU activity",
	NT_METRIC_GAUGE, 1, lbl_p, NULL, 0, 0 };
static const struct nt_metric_desc m_alerts_desc = {
	"ntcore_cuda_hang_alerts_total", "hang alerts published",
	NT_METRIC_COUNTER, 0, NULL, NULL, 0, 0 };


static struct hg_proc *hg_proc_get(struct hg *g, uint32_t pid, const char *comm)
{
	struct hg_proc *p;

	for (size_t i = 0; i < g->np; i++)
		if (g->procs[i]->h.pid == pid)
			return g->procs[i];
	if (g->np == g->cp) {
		size_t nc = g->cp ? g->cp * 2 : 8;
		struct hg_proc **n = realloc(g->procs, nc * sizeof(*n));

		if (!n)
			return NULL;
		g->procs = n;
		g->cp = nc;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	hang_proc_init(&p->h, pid);
	p->cpu_quiet = -1;
	snprintf(p->comm, sizeof(p->comm), "%s", comm ? comm : "");
	g->procs[g->np++] = p;
	return p;
}

static void hg_forget(struct hg *g, size_t i)
{
	char ps[16];
	const char *lv[1] = { ps };

	snprintf(ps, sizeof(ps), "%u", g->procs[i]->h.pid);
	g->host->metric_remove(g->m_quiet, lv);
	free(g->procs[i]);
	g->procs[i] = g->procs[--g->np];
}

static void hg_tick(struct hg *g)
{
	uint64_t now = nt_clock_mono_ns();
	uint64_t timeout = (uint64_t)g->cfg->timeout_ms * 1000000ULL;

	for (size_t i = 0; i < g->np;) {
		struct hg_proc *p = g->procs[i];
		int alive = proc_alive(g->cfg->proc_root, p->h.pid);
		uint64_t iv = (uint64_t)g->cfg->interval_ms * 1000000ULL;
		char ps[16];
		const char *lv[1] = { ps };

		/* quiet for an interval: sample the process's CPU use and
		 * state until activity resumes */
		if (alive && p->h.seen && now - p->h.last_act_ns >= iv) {
			if (p->cpu_quiet < 0 || p->quiet_seen_act != p->h.last_act_ns) {
				p->quiet_seen_act = p->h.last_act_ns;
				p->cpu_quiet = proc_cpu_ticks(g->cfg->proc_root, p->h.pid);
				p->cpu_quiet_ns = now;
				p->checks = p->runnable = 0;
				p->cpu_percent = 0;
			} else {
				int64_t cpu = proc_cpu_ticks(g->cfg->proc_root, p->h.pid);

				if (cpu >= 0 && g->clk_tck > 0 && now > p->cpu_quiet_ns)
					p->cpu_percent = 100.0 * (double)(cpu - p->cpu_quiet) /
							 (double)g->clk_tck /
							 ((double)(now - p->cpu_quiet_ns) / 1e9);
			}
			p->checks++;
			if (proc_state(g->cfg->proc_root, p->h.pid) == 'R')
				p->runnable++;
		}
		switch (hang_check(&p->h, now, timeout, alive)) {
		case HANG_GONE:
			hg_forget(g, i);
			continue;
		case HANG_DUE:
			hg_alert(g, p, now);
			break;
		default:
			break;
		}
		snprintf(ps, sizeof(ps), "%u", p->h.pid);
		if (p->h.last_act_ns && now > p->h.last_act_ns)
			g->host->metric_set(g->m_quiet, lv,
					    (double)(now - p->h.last_act_ns) / 1e9);
		i++;
	}
}

static void hg_consume(void *state, const struct nt_event_hdr *ev,
		       const struct nt_schema *schema)
{
	struct hg *g = state;
	struct cuev e;
	struct hg_proc *p;
	char api[64], kname[HANG_NAME_LEN];

	if (pyf_is(schema)) {
		pyf_note(&g->py, ev, schema);
		return;
	}
	if (!cuev_decode(&g->cc, ev, schema, &e))
		return;
	if (e.type == CUEV_PROC_EXIT) {
		for (size_t i = 0; i < g->np; i++)
			if (g->procs[i]->h.pid == e.pid) {
				hg_forget(g, i);
				break;
			}
		return;
	}
	p = hg_proc_get(g, e.pid, e.comm);
	if (!p)
		return;
	cuev_api_name(&e, api, sizeof(api));
	switch (e.type) {
	/* activity is when a call completed: its return */
	case CUEV_LAUNCH:
		hang_launch(&p->h, e.end_ts, e.tid, api,
			    cuev_str_copy(e.kernel, kname, sizeof(kname)),
			    stacktab_intern(&g->st, e.stack.p, e.stack.len));
		break;
	case CUEV_GRAPH:
		hang_launch(&p->h, e.end_ts, e.tid, api, "(CUDA graph)", 0);
		break;
	case CUEV_MEMCPY:
	case CUEV_MEMSET:
	case CUEV_SYNC:
	case CUEV_ERROR:
		if (e.flags & NT_CUDA_F_RET)
			hang_sync_exit(&p->h, e.end_ts, e.tid, api);
		if (e.type != CUEV_SYNC)
			hang_activity(&p->h, e.end_ts,
				      e.type == CUEV_MEMCPY ? HANG_ACT_MEMCPY :
				      e.type == CUEV_MEMSET ? HANG_ACT_MEMSET :
				      HANG_ACT_OTHER, api);
		break;
	case CUEV_ENTER:
		pyf_merge(&g->py, &e);
		hang_sync_enter(&p->h, e.ts, e.tid, e.api, api,
				stacktab_intern(&g->st, e.stack.p, e.stack.len));
		break;
	default:
		break;
	}
}

static int hg_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	struct hg *g = calloc(1, sizeof(*g));
	static const char *const pats[] = {
		"cuda.launch", "cuda.graph_launch", "cuda.memcpy", "cuda.memset",
		"cuda.sync", "cuda.enter", "cuda.error", "proc.exit",
		PYF_SCHEMA,
	};
	int err = 0;

	if (!g)
		return -ENOMEM;
	g->inst = inst;
	g->host = host;
	g->cfg = config;
	g->clk_tck = sysconf(_SC_CLK_TCK);
	stacktab_init(&g->st, 0);
	pyf_init(&g->py);
	if (g->cfg->timeout_ms < g->cfg->interval_ms) {
		stacktab_fini(&g->st);
		free(g);
		return host->config_error(inst, "timeout_ms",
					  "must be at least interval_ms");
	}
	g->alert_type = host->register_schema(inst, &hg_alert_schema);
	if (g->alert_type < 0) {
		err = g->alert_type;
		host->log(inst, NT_LOG_ERROR, "cannot register alert.cuda_hang: %d", err);
		goto fail;
	}
	for (size_t i = 0; i < NT_ARRAY_LEN(pats); i++)
		if ((err = host->subscribe(inst, pats[i])) < 0)
			goto fail;
	g->m_quiet = host->metric_register(inst, &m_quiet_desc);
	g->m_alerts = host->metric_register(inst, &m_alerts_desc);
	if (!g->m_quiet || !g->m_alerts) {
		err = -ENOMEM;
		goto fail;
	}
	*state = g;
	return 0;
fail:
	stacktab_fini(&g->st);
	pyf_fini(&g->py);
	free(g);
	return err ? err : -EINVAL;
}

static int hg_attach(void *state)
{
	struct hg *g = state;

	return g->host->add_timer(g->inst, (uint64_t)g->cfg->interval_ms, 1);
}

static int hg_poll(void *state, uint32_t token, uint32_t budget)
{
	(void)token;
	(void)budget;
	hg_tick(state);
	return 0;
}

static void hg_detach(void *state)
{
	(void)state;
}

static void hg_fini(void *state)
{
	struct hg *g = state;

	if (!g)
		return;
	for (size_t i = 0; i < g->np; i++)
		free(g->procs[i]);
	free(g->procs);
	stacktab_fini(&g->st);
	pyf_fini(&g->py);
	free(g);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "cuda_hang",
	.kind = NT_KIND_DETECTOR,
	.n_config = NT_ARRAY_LEN(hg_keys),
	.description = "CUDA hangs: GPU activity stopped while the process runs; last launch, threads blocked in a sync",
	.version = "0.1.0",
	.config = hg_keys,
	.config_size = sizeof(struct hg_cfg),
	.init = hg_init,
	.attach = hg_attach,
	.poll = hg_poll,
	.detach = hg_detach,
	.fini = hg_fini,
	.consume = hg_consume,
};
