/* SPDX-License-Identifier: MIT */
/*
 * mem probe: the interval work: RSS and heap of every live process,
 * leak reports, and forgetting processes that are gone.
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
#include "mem.bpf.skel.h"

/* Every interval: RSS, heap counters, top stacks, drops. */
/* RSS of every process the procs map holds; entries of processes
 * finalized or gone without an exit record are deleted. */
static void tick_rss(struct mem_state *st, int pfd)
{
	uint32_t key, next, stale[64];
	size_t n_stale = 0;
	int rc;

	for (rc = bpf_map_get_next_key(pfd, NULL, &key); rc == 0;
	     rc = bpf_map_get_next_key(pfd, &key, &next), key = next) {
		struct mem_proc_info *p = mem_proc_find(st, key, NULL);
		struct mem_proc pr;

		/* Updated after its final report (the exit's unmapping
		 * host-wide), or gone without an exit record. */
		if ((p && p->finalized) || (!p && !nt_proc_alive(key))) {
			if (n_stale < NT_ARRAY_LEN(stale))
				stale[n_stale++] = key;
			continue;
		}
		if (bpf_map_lookup_elem(pfd, &key, &pr) == 0)
			mem_report_rss(st, key, &pr, false);
	}
	for (size_t i = 0; i < n_stale; i++)
		bpf_map_delete_elem(pfd, &stale[i]);
}

/* A process that left without an exit record (lost ring-buffer space):
 * queued to be finalized now. */
static void queue_vanished(struct mem_state *st, uint32_t pid)
{
	struct mem_proc_info *p = mem_proc_get(st, pid);
	uint32_t *grown = st->exits;

	if (!p || p->finalized)
		return;
	if (st->n_exits == st->cap_exits) {
		size_t cap = st->cap_exits ? st->cap_exits * 2 : 16;

		grown = realloc(st->exits, cap * sizeof(*grown));
		if (grown) {
			st->exits = grown;
			st->cap_exits = cap;
		}
	}
	if (st->n_exits < st->cap_exits)
		st->exits[st->n_exits++] = pid;
}

/* mem.heap and mem.leak of every live process in the heap map. */
static void tick_heap(struct mem_state *st, int pfd, uint64_t now)
{
	int hfd = bpf_map__fd(st->skel->maps.heap);
	struct scan_ctx sc = {
		.min_ts = now - (uint64_t)st->cfg->min_age_ms * 1000000ull,
	};
	size_t n_sorted = 0;
	struct mem_group *sorted;
	uint32_t key, next;
	int rc;

	mem_scan_allocs(st, &sc);
	sorted = mem_groups_sorted(&st->groups, &n_sorted);
	for (rc = bpf_map_get_next_key(hfd, NULL, &key); rc == 0;
	     rc = bpf_map_get_next_key(hfd, &key, &next), key = next) {
		struct mem_heap_stats hs;
		struct mem_proc pr;
		const struct mem_group *gs;
		size_t n_gs;
		bool have_pr;

		if (bpf_map_lookup_elem(hfd, &key, &hs))
			continue;
		if (!nt_proc_alive(key)) {
			queue_vanished(st, key);
			continue;
		}
		mem_report_heap(st, key, &hs, false);
		have_pr = bpf_map_lookup_elem(pfd, &key, &pr) == 0;
		gs = mem_groups_find(sorted, n_sorted, key, &n_gs);
		if (n_gs)
			mem_report_stacks(st, key, false, gs, n_gs, &hs, true, &pr, have_pr);
	}
	free(sorted);
	mem_finalize_pending(st);
}

/* Forget processes finalized at least one interval ago. */
static void forget_finalized(struct mem_state *st, uint64_t now)
{
	for (size_t i = 0; i < st->n_procs;) {
		struct mem_proc_info *p = st->procs[i];

		if (p->finalized && now - p->gone_ns >= (uint64_t)st->cfg->interval_ms * 1000000ull) {
			mem_proc_remove(st, p->pid);
			continue;
		}
		i++;
	}
}

void mem_tick(struct mem_state *st)
{
	uint64_t t0 = nt_clock_mono_ns();
	int pfd = bpf_map__fd(st->skel->maps.procs);

	mem_finalize_pending(st);
	if (st->cfg->rss || st->cfg->faults)
		tick_rss(st, pfd);
	if (st->heap_on)
		tick_heap(st, pfd, t0);
	forget_finalized(st, t0);
	nt_bpf_report_drops(st->host, st->inst, bpf_map__fd(st->skel->maps.nt_drops),
			    &st->drops_reported);
	nt_log_dbg(st, "interval work took %.1f ms",
		   (double)(nt_clock_mono_ns() - t0) / 1e6);
}
