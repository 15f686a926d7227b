/* SPDX-License-Identifier: MIT */
/*
 * mem probe: publishing: event headers and assembly, the per-process
 * metrics, and the mem.rss, mem.heap, mem.leak / mem.report events.
 */
#include <linux/types.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/proc.h"
#include "ntcore/plugin.h"

#include "mem_priv.h"

static void hdr_fill(struct mem_state *st, struct nt_event_hdr *h, int type,
		     uint32_t size, uint32_t pid)
{
	struct mem_proc_info *p = mem_proc_find(st, pid, NULL);

	memset(h, 0, sizeof(*h));
	h->type = (uint32_t)type;
	h->size = size;
	h->ts_ns = nt_clock_mono_ns();
	h->pid = pid;
	h->tid = pid;
	if (p) {
		if (h->ts_ns - p->comm_ns > (uint64_t)st->cfg->interval_ms * 500000ull)
			mem_proc_read_comm(p);
		memcpy(h->comm, p->comm, sizeof(h->comm));
	}
}

static void *buf_get(struct mem_state *st, size_t len)
{
	if (len > st->buf_len) {
		char *b = realloc(st->buf, len);

		if (!b)
			return NULL;
		st->buf = b;
		st->buf_len = len;
	}
	memset(st->buf, 0, len);
	return st->buf;
}

static void put_vstr(void *rec, size_t *off, struct nt_vstr *v, const char *s)
{
	size_t len = s ? strlen(s) : 0;

	v->off = (uint32_t)*off;
	v->len = (uint32_t)len;
	if (len)
		memcpy((char *)rec + *off, s, len);
	*off += len;
}

static void metric_set(struct mem_state *st, int m, uint32_t pid, double v)
{
	char pidbuf[16];
	const char *lv[1] = {pidbuf};

	if (!st->m[m])
		return;
	snprintf(pidbuf, sizeof(pidbuf), "%u", pid);
	st->host->metric_set(st->m[m], lv, v);
}

static void metric_delta(struct mem_state *st, int m, uint32_t pid,
			 uint64_t now, uint64_t *last)
{
	char pidbuf[16];
	const char *lv[1] = {pidbuf};

	if (now <= *last)
		return;
	if (st->m[m]) {
		snprintf(pidbuf, sizeof(pidbuf), "%u", pid);
		st->host->metric_add(st->m[m], lv, (double)(now - *last));
	}
	*last = now;
}

void mem_report_rss(struct mem_state *st, uint32_t pid,
		       const struct mem_proc *pr, bool final)
{
	struct mem_proc_info *p = mem_proc_get(st, pid);
	struct mem_rss_event *e;
	unsigned sh = st->page_shift;
	uint64_t rss = pr->pages[MEM_FILEPAGES] + pr->pages[MEM_ANONPAGES] +
		       pr->pages[MEM_SHMEMPAGES];

	if (!p)
		return;
	metric_set(st, M_RSS, pid, (double)(rss << sh));
	metric_set(st, M_RSS_ANON, pid, (double)(pr->pages[MEM_ANONPAGES] << sh));
	metric_set(st, M_RSS_PEAK, pid, (double)(pr->peak_rss_pages << sh));
	metric_set(st, M_SWAP, pid, (double)(pr->pages[MEM_SWAPENTS] << sh));
	metric_delta(st, M_FAULTS, pid, pr->faults, &p->c_faults);
	if (!final && rss == p->pub_rss && pr->peak_rss_pages == p->pub_peak &&
	    pr->faults == p->pub_faults && pr->pages[MEM_SWAPENTS] == p->pub_swap)
		return;
	p->pub_rss = rss;
	p->pub_peak = pr->peak_rss_pages;
	p->pub_faults = pr->faults;
	p->pub_swap = pr->pages[MEM_SWAPENTS];
	e = buf_get(st, sizeof(*e));
	if (!e)
		return;
	hdr_fill(st, &e->hdr, st->t_rss, sizeof(*e), pid);
	e->rss_bytes = rss << sh;
	e->anon_bytes = pr->pages[MEM_ANONPAGES] << sh;
	e->file_bytes = pr->pages[MEM_FILEPAGES] << sh;
	e->shmem_bytes = pr->pages[MEM_SHMEMPAGES] << sh;
	e->swap_bytes = pr->pages[MEM_SWAPENTS] << sh;
	e->peak_rss_bytes = pr->peak_rss_pages << sh;
	e->faults = pr->faults;
	e->final = final;
	st->host->publish(st->inst, &e->hdr);
}

void mem_report_heap(struct mem_state *st, uint32_t pid,
			const struct mem_heap_stats *hs, bool final)
{
	struct mem_proc_info *p = mem_proc_get(st, pid);
	struct mem_heap_event *e;

	if (!p)
		return;
	metric_set(st, M_HEAP_LIVE, pid, (double)hs->live_bytes);
	metric_set(st, M_HEAP_LIVE_ALLOCS, pid, (double)hs->live_allocs);
	metric_set(st, M_HEAP_PEAK, pid, (double)hs->peak_bytes);
	metric_set(st, M_MMAP_LIVE, pid, (double)hs->mmap_live_bytes);
	metric_delta(st, M_HEAP_ALLOCS, pid, hs->allocs, &p->c_allocs);
	metric_delta(st, M_HEAP_FREES, pid, hs->frees, &p->c_frees);
	metric_delta(st, M_HEAP_ALLOC_BYTES, pid, hs->alloc_bytes, &p->c_alloc_bytes);
	metric_delta(st, M_HEAP_FREED_BYTES, pid, hs->freed_bytes, &p->c_freed_bytes);
	metric_delta(st, M_UNTRACKED, pid, hs->untracked, &p->c_untracked);
	if (!final && hs->allocs == p->pub_allocs && hs->frees == p->pub_frees &&
	    hs->mmaps == p->pub_mmaps && hs->munmaps == p->pub_munmaps)
		return;
	p->pub_allocs = hs->allocs;
	p->pub_frees = hs->frees;
	p->pub_mmaps = hs->mmaps;
	p->pub_munmaps = hs->munmaps;
	e = buf_get(st, sizeof(*e));
	if (!e)
		return;
	hdr_fill(st, &e->hdr, st->t_heap, sizeof(*e), pid);
	e->live_bytes = hs->live_bytes;
	e->live_allocs = hs->live_allocs;
	e->peak_bytes = hs->peak_bytes;
	e->allocs = hs->allocs;
	e->frees = hs->frees;
	e->alloc_bytes = hs->alloc_bytes;
	e->freed_bytes = hs->freed_bytes;
	e->mmap_live_bytes = hs->mmap_live_bytes;
	e->mmap_peak_bytes = hs->mmap_peak_bytes;
	e->mmaps = hs->mmaps;
	e->munmaps = hs->munmaps;
	e->untracked = hs->untracked;
	e->sampled_out = hs->sampled_out;
	e->stack_lost = hs->stack_lost;
	e->final = final;
	st->host->publish(st->inst, &e->hdr);
}

/* One mem.leak event: the group at rank i + 1, its stack symbolized. */
static void publish_leak(struct mem_state *st, uint32_t pid, bool final,
			 const struct mem_group *g, size_t i, uint64_t now,
			 struct mem_report_line *line)
{
	const struct mem_stack_text *t;
	struct mem_leak_event *e;
	size_t off = sizeof(*e), fl, sl;

	mem_symbolize_stack(st, pid, g->stack_id);
	t = g->stack_id >= 0 ? mem_symcache_get(&st->syms, pid, g->stack_id) : NULL;
	line->g = g;
	line->text = t ? t->text : NULL;
	line->function = t ? t->function : NULL;
	fl = t ? strlen(t->function) : 0;
	sl = t ? strlen(t->text) : 0;
	e = buf_get(st, off + fl + sl);
	if (!e)
		return;
	hdr_fill(st, &e->hdr, st->t_leak, (uint32_t)(off + fl + sl), pid);
	e->bytes = g->bytes;
	e->allocs = g->count;
	e->oldest_age_ns = now > g->oldest_ns ? now - g->oldest_ns : 0;
	e->rank = (uint32_t)(i + 1);
	e->stack_id = g->stack_id;
	e->final = final;
	e->kind = (uint8_t)g->kind;
	put_vstr(e, &off, &e->function, t ? t->function : NULL);
	put_vstr(e, &off, &e->stack, t ? t->text : NULL);
	st->host->publish(st->inst, &e->hdr);
}

/* The mem.report event: the process's table as text. */
static void publish_report(struct mem_state *st, const struct mem_report_proc *rp,
			   const struct mem_report_line *lines, size_t n, size_t total)
{
	char *text = malloc(REPORT_TEXT_MAX);
	struct mem_report_event *r;
	size_t tl;

	if (!text)
		return;
	tl = mem_format_report(text, REPORT_TEXT_MAX, rp, lines, n, total);
	if (tl >= REPORT_TEXT_MAX)
		tl = REPORT_TEXT_MAX - 1;
	r = buf_get(st, sizeof(*r) + tl);
	if (r) {
		size_t off = sizeof(*r);

		hdr_fill(st, &r->hdr, st->t_report, (uint32_t)(sizeof(*r) + tl), rp->pid);
		r->final = rp->final;
		text[tl] = '\0';
		put_vstr(r, &off, &r->text, text);
		st->host->publish(st->inst, &r->hdr);
	}
	free(text);
}

void mem_report_stacks(struct mem_state *st, uint32_t pid, bool final,
			  const struct mem_group *gs, size_t total,
			  const struct mem_heap_stats *hs, bool have_hs,
			  const struct mem_proc *pr, bool have_pr)
{
	size_t top = (size_t)st->cfg->top_n;
	size_t n = total < top ? total : top;
	struct mem_report_line *lines = calloc(top, sizeof(*lines));
	struct mem_proc_info *p = mem_proc_get(st, pid);
	uint64_t now = nt_clock_mono_ns();

	if (!lines || !p)
		goto out;
	for (size_t i = 0; i < n; i++)
		publish_leak(st, pid, final, &gs[i], i, now, &lines[i]);
	if (!n && !final)
		goto out;

	struct mem_report_proc rp = {
		.pid = pid,
		.comm = p->comm,
		.final = final,
		.heap = have_hs,
		.rss = have_pr,
	};
	if (have_hs) {
		rp.live_bytes = hs->live_bytes;
		rp.live_allocs = hs->live_allocs;
		rp.peak_bytes = hs->peak_bytes;
		rp.mmap_live_bytes = hs->mmap_live_bytes;
		rp.allocs = hs->allocs;
		rp.frees = hs->frees;
	}
	if (have_pr) {
		rp.rss_bytes = (pr->pages[MEM_FILEPAGES] + pr->pages[MEM_ANONPAGES] +
				pr->pages[MEM_SHMEMPAGES]) << st->page_shift;
		rp.peak_rss_bytes = pr->peak_rss_pages << st->page_shift;
	}
	publish_report(st, &rp, lines, n, total);
out:
	free(lines);
}
