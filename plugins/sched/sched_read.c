/* SPDX-License-Identifier: MIT */
/*
 * sched probe: reading the BPF maps on each tick (per-thread totals,
 * run-queue histograms) and retiring what exited long enough ago.
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
#include "ntcore/kit/proc.h"
#include "sched.bpf.skel.h"

/* The kernel's runtime of a thread (first field of schedstat), 0 when it
 * cannot be read (gone, or another pid namespace). */
uint64_t sched_proc_runtime(uint32_t tgid, uint32_t tid)
{
	char path[64], buf[96];

	snprintf(path, sizeof(path), "/proc/%u/task/%u/schedstat", tgid, tid);
	if (nt_file_read(path, buf, sizeof(buf)) <= 0)
		return 0;
	return strtoull(buf, NULL, 10);
}

static void entry_seen(struct sched_state *st, __u32 tid,
		       const struct sched_tstat *s, uint64_t now, bool stale_check)
{
	if (stale_check && !s->on_ts) {
		if (nt_proc_state(NULL, s->tgid, tid) == 0) { /* no such thread */
			bpf_map_delete_elem(bpf_map__fd(st->skel->maps.threads),
					    &tid);
			sched_thread_update(st, s, now, 0, true);
			return;
		}
	}
	/* Believed running: the slice in progress, from the kernel's count
	 * (at most one such thread per CPU). */
	sched_thread_update(st, s, now, s->on_ts ? sched_proc_runtime(s->tgid, tid) : 0,
		      false);
}

void sched_read_threads(struct sched_state *st, uint64_t now)
{
	int fd = bpf_map__fd(st->skel->maps.threads);
	bool stale = st->tick % STALE_EVERY == 0;

	if (st->batch_ok) {
		LIBBPF_OPTS(bpf_map_batch_opts, opts);
		__u32 in = 0, out = 0;
		bool first = true;

		for (;;) {
			__u32 cnt = BATCH;
			int err = bpf_map_lookup_batch(fd, first ? NULL : &in,
						       &out, st->keys, st->vals,
						       &cnt, &opts);

			if (err < 0)
				err = -errno;
			for (__u32 i = 0; i < cnt; i++)
				entry_seen(st, st->keys[i], &st->vals[i], now,
					   stale);
			if (err == -ENOENT)
				return;
			if (err) {
				nt_log_dbg(st, "batch lookup: %s; per key from now on",
					      strerror(-err));
				st->batch_ok = false;
				break;
			}
			in = out;
			first = false;
		}
	}
	/* Per key (also after a failed batch: updates are idempotent). */
	__u32 key, next, *prev = NULL;
	struct sched_tstat v;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		if (bpf_map_lookup_elem(fd, &next, &v) == 0)
			entry_seen(st, next, &v, now, stale);
		key = next;
		prev = &key;
	}
}

void sched_read_hists(struct sched_state *st)
{
	int fd = bpf_map__fd(st->skel->maps.hists);
	__u32 key, next, *prev = NULL;
	struct sched_hist h;

	memset(&st->hist_all, 0, sizeof(st->hist_all));
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		uint64_t n = 0;
		bool got = bpf_map_lookup_elem(fd, &next, &h) == 0;
		for (int i = 0; got && i < SCHED_HIST_SLOTS; i++)
			n += h.slots[i];
		/* "other" exists from the load on: a series once it has samples */
		if (got && (n || next)) {
			struct proc *p = sched_proc_get(st, next);

			sched_hist_merge(&st->hist_all, &h);
			if (p) {
				const char *lp[1] = { p->pid_s };
				uint64_t counts[SCHED_HIST_SLOTS];

				for (int i = 0; i < SCHED_HIST_SLOTS; i++)
					counts[i] = h.slots[i];
				st->host->metric_hist_set(st->m[M_HIST], lp,
							  counts,
							  (double)h.sum_ns / 1e9);
				p->has_hist = true;
			}
		}
		key = next;
		prev = &key;
	}
}

/* How long exited series stay. */
static uint64_t keep_ns(const struct sched_state *st)
{
	int64_t ms = st->cfg->exited_keep_ms;

	if (ms < 2 * st->cfg->interval_ms)
		ms = 2 * st->cfg->interval_ms;
	return (uint64_t)ms * 1000000ull;
}

void sched_retire(struct sched_state *st, uint64_t now)
{
	size_t n = sched_thr_list(st);
	uint32_t live = 0;

	for (size_t i = 0; i < n; i++) {
		struct thr *t = st->scratch[i];

		if (!t->exited) {
			live++;
			continue;
		}
		if (now >= t->dead_ns + keep_ns(st))
			sched_thr_retire(st, t);
	}
	st->host->metric_set(st->m[M_THREADS], no_labels, live);
}

/* A process gone long enough: its series and its run-queue histogram. */
static void proc_forget(struct sched_state *st, struct proc *p)
{
	const char *lv[2] = { p->pid_s, "voluntary" };
	const char *li[2] = { p->pid_s, "involuntary" };
	const char *lp[1] = { p->pid_s };
	__u32 key = p->pid;

	if (p->has_series) {
		st->host->metric_remove(st->m[M_CSW], lv);
		st->host->metric_remove(st->m[M_CSW], li);
		st->host->metric_remove(st->m[M_MIGR], lp);
	}
	if (p->has_hist)
		st->host->metric_remove(st->m[M_HIST], lp);
	if (key)
		bpf_map_delete_elem(bpf_map__fd(st->skel->maps.hists), &key);
	free(p);
}

void sched_retire_procs(struct sched_state *st, uint64_t now)
{
	struct nt_hmap_iter it;

	nt_hmap_iter_init(&it, &st->procs.map);
	while (nt_hmap_iter_next(&it)) {
		struct proc *p = *(struct proc **)it.val;

		if (p->dead && now >= p->dead_ns + keep_ns(st)) {
			nt_hmap_iter_del(&it);
			proc_forget(st, p);
		}
	}
}
