/* SPDX-License-Identifier: MIT */
/*
 * sched probe: the interval snapshot, the BPF programs' own cost, drops,
 * and the sched.report table.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/plugin.h"

#include "sched_priv.h"
#include "sched.bpf.skel.h"

struct collect {
	struct sched_state *st;
	size_t n;
};

static void collect_thr(void *val, void *arg)
{
	struct collect *c = arg;

	if (c->n < c->st->scratch_cap)
		c->st->scratch[c->n++] = val;
}

/* Snapshot of all thread records into st->scratch; returns the count. */
size_t sched_thr_list(struct sched_state *st)
{
	struct collect c = { st, 0 };

	if (nt_hmap_count(&st->threads.map) > st->scratch_cap) {
		size_t cap = nt_hmap_count(&st->threads.map) * 2;
		struct thr **s = realloc(st->scratch, cap * sizeof(*s));

		if (!s)
			return 0;
		st->scratch = s;
		st->scratch_cap = cap;
	}
	sched_map_each(&st->threads, collect_thr, &c);
	return c.n;
}

static void report_drops(struct sched_state *st)
{
	uint64_t full;

	nt_bpf_report_drops(st->host, st->inst,
			    bpf_map__fd(st->skel->maps.nt_drops),
			    &st->drops_reported);
	full = nt_bpf_percpu_sum(bpf_map__fd(st->skel->maps.map_full));
	if (full > st->full_reported) {
		st->host->count_drop(st->inst, "map_full",
				     full - st->full_reported);
		st->full_reported = full;
	}
	/* folded into "other": counted, but not as drops */
	full = nt_bpf_percpu_sum(bpf_map__fd(st->skel->maps.hist_folded));
	if (full > st->folded_reported) {
		st->host->metric_add(st->m[M_FOLDED], no_labels,
				     (double)(full - st->folded_reported));
		st->folded_reported = full;
	}
}

/* The programs' own cost from the kernel's BPF stats (counted only while
 * kernel.bpf_stats_enabled = 1). `say`: log it. */
static void prog_cost(struct sched_state *st, bool say)
{
	struct bpf_program *use[NPROG];

	sched_progs_of(st->skel, st->btf, use);
	for (int i = 0; i < NPROG; i++) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		const char *lp[1] = { bpf_program__name(use[i]) };

		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(bpf_program__fd(use[i]), &info, &len))
			continue;
		if (info.run_cnt > st->prog_runs[i]) {
			st->host->metric_add(st->m[M_BPF_RUNS], lp,
					     (double)(info.run_cnt - st->prog_runs[i]));
			st->host->metric_add(st->m[M_BPF_SECS], lp,
					     (double)(info.run_time_ns - st->prog_ns[i]) / 1e9);
			st->prog_runs[i] = info.run_cnt;
			st->prog_ns[i] = info.run_time_ns;
		}
		if (say && info.run_cnt)
			nt_log_info(st, "BPF cost: %s %llu runs, avg %.0f ns",
				      lp[0], (unsigned long long)info.run_cnt,
				      (double)info.run_time_ns / (double)info.run_cnt);
	}
}

/* Read everything: exits first, then the maps. `final`: keep all series. */
void sched_snapshot(struct sched_state *st, bool final)
{
	uint64_t now;
	size_t n;

	if (!st->skel)
		return;
	st->tick++;
	sched_ring_drain(st, final ? UINT32_MAX : 65536);
	now = nt_clock_mono_ns();
	sched_read_threads(st, now);
	/* Records not in the map twice in a row are gone (exit record lost
	 * or not yet read the first time). */
	n = sched_thr_list(st);
	for (size_t i = 0; i < n; i++) {
		struct thr *t = st->scratch[i];

		if (!t->exited && t->seen_tick != st->tick &&
		    ++t->missing >= 2)
			sched_thr_exit(st, t, now);
	}
	sched_read_hists(st);
	report_drops(st);
	prog_cost(st, final);
	if (!final) {
		sched_retire(st, now);
		sched_retire_procs(st, now);
	}
}

void sched_publish_report(struct sched_state *st)
{
	size_t cap = (size_t)st->cfg->top_n * 120 + 512, n, nrows = 0, len;
	struct sched_row *rows;
	struct sched_report_ev *ev;
	uint64_t now = nt_clock_mono_ns();

	n = sched_thr_list(st);
	rows = calloc(n + st->n_exited_top + 1, sizeof(*rows));
	ev = calloc(1, sizeof(*ev) + cap);
	if (!rows || !ev)
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct thr *t = st->scratch[i];
		struct sched_row *r = &rows[nrows++];

		r->pid = t->pid;
		r->tid = t->tid;
		memcpy(r->comm, t->comm, sizeof(r->comm));
		r->exited = t->exited;
		r->t = t->pub;
	}
	memcpy(rows + nrows, st->exited_top, st->n_exited_top * sizeof(*rows));
	nrows += st->n_exited_top;
	sched_rows_sort(rows, nrows);
	len = sched_report_format((char *)(ev + 1), cap, rows, nrows,
				  (size_t)st->cfg->top_n, &st->hist_all,
				  (double)(now - st->start_ns) / 1e9,
				  st->threads_seen);
	ev->hdr.type = (uint32_t)st->t_report;
	ev->hdr.size = (uint32_t)(sizeof(*ev) + len);
	ev->hdr.ts_ns = now;
	/* About the target set: its first process, or 0 host-wide. */
	if (st->host->target_pids(st->inst, &ev->hdr.pid, 1) == 0)
		ev->hdr.pid = 0;
	ev->hdr.tid = ev->hdr.pid;
	snprintf(ev->hdr.comm, sizeof(ev->hdr.comm), "ntcore");
	ev->text.off = sizeof(*ev);
	ev->text.len = (uint32_t)len;
	st->host->publish(st->inst, &ev->hdr);
out:
	free(rows);
	free(ev);
}
