/* SPDX-License-Identifier: MIT */
/*
 * cuda_frag: a process's fragmentation score, its SVG timeline, the alert
 * and the metrics (fragdet.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "det_alert.h"
#include "fragdet.h"

void fr_compute(struct fr *f, struct fr_proc *p)
{
	struct amap_entry *v = NULL;
	long n = amap_collect(&f->tr.map, p->pid, p->dev, &v);

	if (n < 0)
		return;
	frag_compute_used(v, (size_t)n, &p->used, &p->last);
	p->last.paged = f->paged;
	p->stats_ns = nt_clock_mono_ns();
	if (p->last.score > p->worst.score || !p->worst_ns) {
		p->worst = p->last;
		p->worst_ns = p->stats_ns;
	}
	p->have_stats = true;
	p->dirty = false;
	free(v);
}

/* Expands svg_path for one map into buf; false when pictures are off. */
static bool fr_svg_path(const struct fr *f, const struct fr_proc *p, char *buf,
			size_t len)
{
	const char *s = f->cfg->svg_path;
	size_t o = 0;

	if (!s || !s[0])
		return false;
	for (; *s && o + 24 < len; s++) {
		if (s[0] == '%' && s[1] == 'p') {
			o += (size_t)snprintf(buf + o, len - o, "%u", p->pid);
			s++;
		} else if (s[0] == '%' && s[1] == 'd') {
			o += (size_t)snprintf(buf + o, len - o, "%d", p->dev);
			s++;
		} else if (s[0] == '%' && s[1] == '%') {
			buf[o++] = '%';
			s++;
		} else {
			buf[o++] = *s;
		}
	}
	buf[o] = '\0';
	return true;
}

const char *fr_write_svg(struct fr *f, struct fr_proc *p, char *path,
				size_t len)
{
	char title[160];
	int err;

	if (!fr_svg_path(f, p, path, len))
		return NULL;
	if (p->dirty || !p->have_stats)
		fr_compute(f, p);
	snprintf(title, sizeof(title),
		 "CUDA memory timeline: pid %u (%s), device %d", p->pid, p->comm,
		 p->dev);
	err = tl_write_svg_file(&p->tl, path, title, nt_clock_mono_ns(), &f->tr.st,
				p->worst.score > 0 ? &p->worst : &p->last,
				p->worst.score > 0 ? p->worst_ns : 0);
	if (err) {
		f->host->log(f->inst, NT_LOG_WARN, "cannot write %s: %s", path,
			     strerror(-err));
		return NULL;
	}
	/* the user learns of it once, at the end of the run */
	if (NT_HOST_HAS(f->host, output_written)) {
		char what[96];
		snprintf(what, sizeof(what), "CUDA memory timeline of pid %u (%s), device %d",
			 p->pid, p->comm, p->dev);
		f->host->output_written(f->inst, path, what);
	}
	f->host->log(f->inst, NT_LOG_DEBUG, "memory timeline of pid %u device %d: %s",
		     p->pid, p->dev, path);
	return path;
}

static void json_stats(struct nt_sb *b, const struct frag_stats *s)
{
	nt_sb_printf(b, "\"score\":%.1f,\"level\":\"%s\",\"external\":%.4f,"
		     "\"holes\":%" PRIu64 ",\"free_in_span_bytes\":%" PRIu64
		     ",\"largest_hole_bytes\":%" PRIu64 ",\"span_bytes\":%" PRIu64
		     ",\"live_bytes\":%" PRIu64 ",\"live_count\":%" PRIu64
		     ",\"free_ratio\":%.4f,\"hole_sizes\":{",
		  s->score, frag_level_name(frag_level_of(s->score)), s->external,
		  s->holes, s->free_bytes, s->largest_hole, s->span, s->live_bytes,
		  s->nlive, s->free_ratio);
	for (int i = 0; i < FRAG_NBUCKETS; i++)
		nt_sb_printf(b, "%s\"%s\":%" PRIu64, i ? "," : "", frag_bucket_name[i],
			  s->hist[i]);
	nt_sb_puts(b, "},\"hole_bytes\":{");
	for (int i = 0; i < FRAG_NBUCKETS; i++)
		nt_sb_printf(b, "%s\"%s\":%" PRIu64, i ? "," : "", frag_bucket_name[i],
			  s->hist_bytes[i]);
	nt_sb_putc(b, '}');
}

static const char fr_hint[] =
	"allocate long-lived large buffers first and reuse them; do not "
	"interleave short-lived small allocations with long-lived ones; in "
	"PyTorch PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or "
	"max_split_size_mb) limits fragmentation";

void fr_alert(struct fr *f, struct fr_proc *p, uint32_t sev,
		     const struct cuev *failed)
{
	struct frag_forecast fc;
	struct nt_sb ev, msg;
	char reading[512], path[1024], b1[32], b2[32], b3[32];
	const char *svg;
	struct det_subject subj = { .pid = p->pid, .comm = p->comm };

	svg = fr_write_svg(f, p, path, sizeof(path));
	frag_trend_forecast(&p->trend, f->cfg->horizon_s, &fc);
	frag_reading(&p->last, reading, sizeof(reading));
	nt_sb_init(&ev, 0);
	nt_sb_init(&msg, 0);
	nt_sb_printf(&ev, "{\"kind\":\"%s\",\"pid\":%u,\"device\":%d,",
		  failed ? "failed_allocation" : "score", p->pid, p->dev);
	json_stats(&ev, &p->last);
	nt_sb_printf(&ev, ",\"address_reuse\":{\"into_holes\":%" PRIu64
		       ",\"past_fitting_holes\":%" PRIu64 "}", p->fills, p->skips);
	nt_sb_printf(&ev, ",\"trend\":{\"slope_per_s\":%.3f,\"forecast\":%.1f,"
		       "\"horizon_s\":%.0f,\"direction\":\"%s\",\"samples\":%u}",
		  fc.slope_per_s, fc.forecast, fc.horizon_s, fc.direction,
		  fc.samples);
	if (failed) {
		char stack[4096], fn[256], api[64];

		cuev_str_copy(failed->stack, stack, sizeof(stack));
		stack_user_frame(stack, fn, sizeof(fn));
		nt_sb_printf(&ev, ",\"failed_request_bytes\":%" PRIu64 ",\"function\":",
			  failed->size);
		sb_json_str(&ev, cuev_api_name(failed, api, sizeof(api)));
		nt_sb_puts(&ev, ",\"caller\":");
		sb_json_str(&ev, fn);
		nt_sb_puts(&ev, ",\"stack\":");
		sb_json_stack(&ev, stack, 24);
		nt_sb_printf(&msg, "allocation of %s failed in pid %u (%s) on device %d "
				"although %s is free in %" PRIu64 " holes inside its "
				"span (largest %s): fragmentation (score %.0f/100)",
			  fmt_bytes(failed->size, b1, sizeof(b1)), p->pid, p->comm,
			  p->dev, fmt_bytes(p->last.free_bytes, b2, sizeof(b2)),
			  p->last.holes,
			  fmt_bytes(p->last.largest_hole, b3, sizeof(b3)),
			  p->last.score);
	} else {
		nt_sb_printf(&msg, "CUDA memory of pid %u (%s) on device %d is "
				"fragmented: score %.0f/100, %s",
			  p->pid, p->comm, p->dev, p->last.score, reading);
	}
	if (svg)
		nt_sb_printf(&msg, "; picture: %s", svg);
	nt_sb_puts(&ev, ",\"reading\":");
	sb_json_str(&ev, reading);
	nt_sb_puts(&ev, ",\"svg\":");
	sb_json_str(&ev, svg ? svg : "");
	nt_sb_puts(&ev, ",\"hint\":");
	sb_json_str(&ev, fr_hint);
	nt_sb_putc(&ev, '}');
	det_alert_publish(f->host, f->inst, (uint32_t)f->alert_type, &subj, sev,
			  nt_sb_str(&msg), nt_sb_str(&ev));
	f->host->log(f->inst, NT_LOG_INFO, "%s", nt_sb_str(&msg));
	p->alerted = true;
	p->last_alert_ns = nt_clock_mono_ns();
	nt_sb_fini(&ev);
	nt_sb_fini(&msg);
}

void fr_metrics(struct fr *f, const struct fr_proc *p, bool remove)
{
	char ps[16], ds[16];
	const char *lv[2] = { ps, ds };
	struct nt_metric *ms[5] = { f->m_score, f->m_ext, f->m_holes, f->m_free,
				    f->m_largest };
	double vals[5] = { p->last.score, p->last.external, (double)p->last.holes,
			   (double)p->last.free_bytes, (double)p->last.largest_hole };

	snprintf(ps, sizeof(ps), "%u", p->pid);
	snprintf(ds, sizeof(ds), "%d", p->dev);
	for (int i = 0; i < 5; i++) {
		if (remove)
			f->host->metric_remove(ms[i], lv);
		else
			f->host->metric_set(ms[i], lv, vals[i]);
	}
}

/* An allocator that leaves fitting holes unused and takes fresh addresses
 * instead (a virtual-memory allocator: cudaMalloc mapping pages, the
 * fixture's bump allocator) loses no memory to its holes: no score alert. */
