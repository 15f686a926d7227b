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

#include "ntcore/kit/cfg.h"
#include "ntcore/plugin.h"

#include "cudaev.h"
#include "det_alert.h"
#include "det_util.h"
#include "pyframes.h"
#include "leak.h"
#include "track.h"
#include "memleak.h"


static const struct nt_cfg_key ml_keys[] = {
	NT_KEY_INT(struct ml_cfg, window_ms, 500, 10, 3600000,
		"length of one window of the growth estimator (ms)"),
	NT_KEY_INT(struct ml_cfg, windows, 8, 2, LEAK_MAX_WINDOWS,
		"n: windows the probability (s+1)/(n+2) looks back on"),
	NT_KEY_FLOAT(struct ml_cfg, threshold, 0.8, 0.5, 0.9999,
		"alert when the growth probability reaches this"),
	NT_KEY_INT(struct ml_cfg, min_growth_bytes, 33554432, 1, 1000000000000000,
		"and the high-water mark rose by at least this over the n windows"),
	NT_KEY_INT(struct ml_cfg, noise_bytes, 0, 0, 1000000000000000,
		"a window grows only by more than this"),
	NT_KEY_BOOL(struct ml_cfg, exit_report, true,
		"report never-freed memory at process exit"),
	NT_KEY_INT(struct ml_cfg, exit_min_bytes, 1, 1, 1000000000000000,
		"alert at exit when at least this many bytes outside a cache stay"),
	NT_KEY_INT(struct ml_cfg, exit_delay_ms, 200, 0, 10000,
		"wait this long after proc.exit for the last frees in flight"),
	NT_KEY_INT(struct ml_cfg, top, 5, 1, 100,
		"stacks named in an alert"),
	NT_KEY_INT(struct ml_cfg, stack_frames, 16, 1, 128,
		"frames per stack in the evidence"),
	NT_KEY_STRLIST(struct ml_cfg, cache_frames,
		"[\"CUDACachingAllocator\", \"c10::cuda::\", \"cupy::cuda::memory\", "
		"\"libcublas\", \"libcudnn\", \"libnccl\", \"libcufft\", "
		"\"libcurand\", \"libcusparse\", \"libcusolver\", \"libnvshmem\", "
		"\"cublasCreate\", \"cudnnCreate\"]",
		"a stack holding one of these is memory a caching allocator or a CUDA "
		"library keeps for the process's life: not a leak at exit"),
	NT_KEY_BOOL(struct ml_cfg, include_host, false,
		"also track pinned host allocations"),
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
	uint64_t now = nt_clock_mono_ns();

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
		m->exits[m->ne].due_ns = nt_clock_mono_ns() +
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
