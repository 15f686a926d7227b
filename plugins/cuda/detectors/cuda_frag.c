/* SPDX-License-Identifier: MIT */
/*
 * cuda_frag: fragmentation of each (process, device) address map over time
 * (frag.h: external fragmentation, holes and their sizes, a trend with a
 * short-horizon forecast, a score with a reading), an alert when the score
 * passes `threshold` or when an allocation fails although enough memory is
 * free inside the span, and a memory timeline picture (SVG) per process and
 * device, written at process exit, at each alert and at shutdown.
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
#include "frag.h"
#include "timeline.h"
#include "track.h"
#include "fragdet.h"


static const char *const fr_models[] = { "paged", "contiguous", NULL };

static const struct nt_cfg_key fr_keys[] = {
	NT_KEY_CHOICE(struct fr_cfg, model, "paged", fr_models,
		"paged: the CUDA driver maps pages behind virtual addresses "
		"(real GPUs): holes are measured and drawn, never alerted; "
		"contiguous: an arena or sub-allocator where a hole holds "
		"memory back (score and failure alerts)"),
	NT_KEY_INT(struct fr_cfg, interval_ms, 1000, 10, 3600000,
		"how often the fragmentation of each map is computed"),
	NT_KEY_FLOAT(struct fr_cfg, threshold, 70, 1, 100,
		"alert when the score (0..100) reaches this"),
	NT_KEY_INT(struct fr_cfg, min_free_bytes, 1048576, 0, 1000000000000000,
		"and at least this much is free in holes inside the span"),
	NT_KEY_INT(struct fr_cfg, min_holes, 4, 2, 1000000,
		"and there are at least this many holes"),
	NT_KEY_FLOAT(struct fr_cfg, horizon_s, 30, 1, 86400,
		"forecast horizon of the score trend (s)"),
	NT_KEY_INT(struct fr_cfg, realert_ms, 60000, 0, 86400000,
		"least time between two score alerts of one map"),
	NT_KEY_STR(struct fr_cfg, svg_path, "ntcore-cuda-frag-%p-dev%d.svg",
		"timeline picture per process and device (%p pid, %d device); "
		"\"\" writes none"),
	NT_KEY_INT(struct fr_cfg, timeline_max, 50000, 100, 10000000,
		"allocations drawn per picture (later ones counted)"),
	NT_KEY_BOOL(struct fr_cfg, include_host, false,
		"also map pinned host allocations"),
};

static const struct nt_schema fr_alert_schema = {
	.name = "alert.cuda_frag",
	.desc = "CUDA device memory fragmentation",
	.fields = det_alert_fields,
	.n_fields = 4,
	.min_size = sizeof(struct nt_alert),
};

static const char *const lbl_pd[] = { "pid", "device" };
#define FR_GAUGE(var, nm, hp)                                                  \
	static const struct nt_metric_desc var = { nm, hp, NT_METRIC_GAUGE,    \
						   2, lbl_pd, NULL, 0, 0 }
FR_GAUGE(m_score_desc, "ntcore_cuda_frag_score", "fragmentation score 0..100");
FR_GAUGE(m_ext_desc, "ntcore_cuda_frag_external_ratio",
	 "1 - largest hole / free bytes inside the allocated span");
FR_GAUGE(m_holes_desc, "ntcore_cuda_frag_holes", "free holes inside the span");
FR_GAUGE(m_free_desc, "ntcore_cuda_frag_free_bytes",
	 "bytes free in holes inside the span");
FR_GAUGE(m_largest_desc, "ntcore_cuda_frag_largest_hole_bytes",
	 "largest hole inside the span");


static struct fr_proc *fr_proc_get(struct fr *f, uint32_t pid, int32_t dev,
				   const char *comm)
{
	struct fr_proc *p;

	for (size_t i = 0; i < f->np; i++)
		if (f->procs[i]->pid == pid && f->procs[i]->dev == dev)
			return f->procs[i];
	if (f->np == f->cp) {
		size_t nc = f->cp ? f->cp * 2 : 8;
		struct fr_proc **n = realloc(f->procs, nc * sizeof(*n));

		if (!n)
			return NULL;
		f->procs = n;
		f->cp = nc;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->dev = dev;
	snprintf(p->comm, sizeof(p->comm), "%s", comm ? comm : "");
	tl_init(&p->tl, pid, dev, (uint32_t)f->cfg->timeline_max);
	frag_used_init(&p->used);
	f->procs[f->np++] = p;
	return p;
}

static bool fr_holes_unused(const struct fr_proc *p)
{
	return p->skips >= 3 && p->skips > p->fills;
}

static void fr_tick(struct fr *f)
{
	uint64_t now = nt_clock_mono_ns();
	uint64_t realert = (uint64_t)f->cfg->realert_ms * 1000000ULL;

	for (size_t i = 0; i < f->np; i++) {
		struct fr_proc *p = f->procs[i];
		const struct frag_stats *s = &p->last;

		if (p->dirty)
			fr_compute(f, p);
		if (!p->have_stats)
			continue;
		frag_trend_add(&p->trend, now, s->score, s->external);
		fr_metrics(f, p, false);
		if (p->alerted && s->score < f->cfg->threshold - 10)
			p->alerted = false; /* hysteresis: a new episode */
		if (s->score >= f->cfg->threshold &&
		    s->free_bytes >= (uint64_t)f->cfg->min_free_bytes &&
		    s->holes >= (uint64_t)f->cfg->min_holes && !fr_holes_unused(p) &&
		    !f->paged &&
		    (!p->alerted || now - p->last_alert_ns >= realert) &&
		    !(p->alerted && realert == 0))
			fr_alert(f, p, NT_SEV_WARNING, NULL);
	}
}

static void fr_forget(struct fr *f, uint32_t pid, bool write)
{
	char path[1024];

	for (size_t i = 0; i < f->np;) {
		struct fr_proc *p = f->procs[i];

		if (p->pid != pid) {
			i++;
			continue;
		}
		if (write && p->tl.n)
			fr_write_svg(f, p, path, sizeof(path));
		fr_metrics(f, p, true);
		tl_fini(&p->tl);
		frag_used_fini(&p->used);
		free(p);
		f->procs[i] = f->procs[--f->np];
	}
	amap_drop_pid(&f->tr.map, pid);
}

static void fr_consume(void *state, const struct nt_event_hdr *ev,
		       const struct nt_schema *schema)
{
	struct fr *f = state;
	struct cuev e;
	struct amap_entry a;
	struct fr_proc *p;

	if (!cuev_decode(&f->cc, ev, schema, &e))
		return;
	switch (e.type) {
	case CUEV_ALLOC:
		if (cuev_failed(&e)) {
			if (!track_kind_ok(&f->tr, e.kind) || !e.size)
				return;
			p = fr_proc_get(f, e.pid, e.device, e.comm);
			if (!p)
				return;
			tl_failed(&p->tl, e.size, e.ts, track_stack(&f->tr, &e));
			p->failed++;
			fr_compute(f, p);
			if (!f->paged && p->last.free_bytes >= e.size &&
			    p->last.largest_hole < e.size)
				fr_alert(f, p, NT_SEV_CRITICAL, &e);
			return;
		}
		switch (track_alloc(&f->tr, &e, &a)) {
		case TRACK_NEW:
		case TRACK_REPLACED: {
			uint32_t idx;

			p = fr_proc_get(f, e.pid, e.device, e.comm);
			if (!p)
				return;
			idx = tl_alloc(&p->tl, e.ptr, e.size, e.ts, a.stack);
			if (frag_used_overlaps(&p->used, e.ptr, e.ptr + e.size)) {
				p->fills++;
			} else {
				/* fresh addresses: was there a hole it fit? (stats
				 * refreshed at most every 20 ms) */
				uint64_t now = nt_clock_mono_ns();

				if (p->dirty && now - p->stats_ns >= 20000000ULL)
					fr_compute(f, p);
				if (p->have_stats && p->last.holes &&
				    e.size <= p->last.largest_hole)
					p->skips++;
			}
			frag_used_add(&p->used, e.ptr, e.ptr + e.size);
			amap_set_aux(&f->tr.map, e.pid, e.ptr, idx);
			p->dirty = true;
			break;
		}
		case TRACK_DUP:
			p = fr_proc_get(f, e.pid, a.dev, e.comm);
			if (p && a.aux < p->tl.n)
				p->tl.r[a.aux].stack = a.stack;
			break;
		default:
			break;
		}
		break;
	case CUEV_FREE:
		if (track_free(&f->tr, &e, &a) == TRACK_FREED) {
			p = fr_proc_get(f, e.pid, a.dev, e.comm);
			if (p) {
				tl_free(&p->tl, a.aux, e.ts);
				p->dirty = true;
			}
		}
		break;
	case CUEV_PROC_EXIT:
		fr_forget(f, e.pid, true);
		break;
	default:
		break;
	}
}

static int fr_init(struct nt_instance *inst, const struct nt_host *host,
		   const void *config, void **state)
{
	const struct fr_cfg *cfg = config;
	struct fr *f = calloc(1, sizeof(*f));
	int err;

	if (!f)
		return -ENOMEM;
	f->inst = inst;
	f->host = host;
	f->cfg = cfg;
	f->paged = !cfg->model || strcmp(cfg->model, "contiguous") != 0;
	if (cfg->svg_path && strchr(cfg->svg_path, '%')) {
		for (const char *s = strchr(cfg->svg_path, '%'); s; s = strchr(s + 2, '%'))
			if (s[1] != 'p' && s[1] != 'd' && s[1] != '%') {
				free(f);
				return host->config_error(inst, "svg_path",
					"only %%p (pid), %%d (device) and %%%% may follow %%");
			}
	}
	err = track_init(&f->tr, cfg->include_host, 0);
	if (err)
		goto fail;
	f->alert_type = host->register_schema(inst, &fr_alert_schema);
	if (f->alert_type < 0) {
		err = f->alert_type;
		host->log(inst, NT_LOG_ERROR, "cannot register alert.cuda_frag: %d", err);
		goto fail;
	}
	if ((err = host->subscribe(inst, "cuda.alloc")) < 0 ||
	    (err = host->subscribe(inst, "cuda.free")) < 0 ||
	    (err = host->subscribe(inst, "proc.exit")) < 0)
		goto fail;
	f->m_score = host->metric_register(inst, &m_score_desc);
	f->m_ext = host->metric_register(inst, &m_ext_desc);
	f->m_holes = host->metric_register(inst, &m_holes_desc);
	f->m_free = host->metric_register(inst, &m_free_desc);
	f->m_largest = host->metric_register(inst, &m_largest_desc);
	if (!f->m_score || !f->m_ext || !f->m_holes || !f->m_free || !f->m_largest) {
		err = -ENOMEM;
		goto fail;
	}
	*state = f;
	return 0;
fail:
	track_fini(&f->tr);
	free(f);
	return err ? err : -EINVAL;
}

static int fr_attach(void *state)
{
	struct fr *f = state;

	return f->host->add_timer(f->inst, (uint64_t)f->cfg->interval_ms, 1);
}

static int fr_poll(void *state, uint32_t token, uint32_t budget)
{
	(void)token;
	(void)budget;
	fr_tick(state);
	return 0;
}

static void fr_flush(void *state)
{
	struct fr *f = state;
	char path[1024];

	/* pictures of the maps still alive (shutdown, reload) */
	for (size_t i = 0; i < f->np; i++)
		if (f->procs[i]->tl.n)
			fr_write_svg(f, f->procs[i], path, sizeof(path));
}

static void fr_detach(void *state)
{
	(void)state;
}

static void fr_fini(void *state)
{
	struct fr *f = state;

	if (!f)
		return;
	for (size_t i = 0; i < f->np; i++) {
		tl_fini(&f->procs[i]->tl);
		frag_used_fini(&f->procs[i]->used);
		free(f->procs[i]);
	}
	free(f->procs);
	track_fini(&f->tr);
	free(f);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "cuda_frag",
	.kind = NT_KIND_DETECTOR,
	.n_config = NT_ARRAY_LEN(fr_keys),
	.description = "CUDA memory fragmentation: score, holes, trend and forecast, SVG memory timeline",
	.version = "0.1.0",
	.config = fr_keys,
	.config_size = sizeof(struct fr_cfg),
	.init = fr_init,
	.attach = fr_attach,
	.poll = fr_poll,
	.detach = fr_detach,
	.fini = fr_fini,
	.consume = fr_consume,
	.flush = fr_flush,
};
