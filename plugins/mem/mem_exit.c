/* SPDX-License-Identifier: MIT */
/*
 * mem probe: processes that exited: their outstanding allocations read
 * from the allocs map in one scan per batch, their final reports, and the
 * keys of finalized processes deleted.
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

#include "ntcore/kit/sb.h"
#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/proc.h"
#include "ntcore/plugin.h"

#include "mem_priv.h"
#include "mem.bpf.skel.h"

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static void doom(struct scan_ctx *sc, const struct mem_alloc_key *k)
{
	if (sc->n_doomed == sc->cap_doomed) {
		size_t cap = sc->cap_doomed ? sc->cap_doomed * 2 : 256;
		struct mem_alloc_key *g = realloc(sc->doomed, cap * sizeof(*g));

		if (!g)
			return;
		sc->doomed = g;
		sc->cap_doomed = cap;
	}
	sc->doomed[sc->n_doomed++] = *k;
}

static void scan_one(struct mem_state *st, struct scan_ctx *sc,
		     const struct mem_alloc_key *k, const struct mem_alloc_val *v)
{
	const struct pid_gen *g = bsearch(&k->tgid, sc->gens, sc->n_gens,
					  sizeof(*sc->gens), cmp_u32);

	if (sc->only) {
		if (!bsearch(&k->tgid, sc->only, sc->n_only, sizeof(uint32_t), cmp_u32))
			return;
		doom(sc, k);
	} else if (!g || g->gen != v->gen) {
		if (g)
			doom(sc, k); /* left behind by an exec */
		return;
	} else if (v->ts_ns > sc->min_ts) {
		return;
	}
	if (g && g->gen == v->gen)
		mem_groups_add(&st->groups, k->tgid, v->stack_id, v->kind,
			       v->size * v->weight, v->weight, v->ts_ns);
}

static void read_gens(struct mem_state *st, struct scan_ctx *sc)
{
	int fd = bpf_map__fd(st->skel->maps.heap);
	uint32_t key, next;
	size_t cap = 0;

	for (int rc = bpf_map_get_next_key(fd, NULL, &key); rc == 0;
	     rc = bpf_map_get_next_key(fd, &key, &next), key = next) {
		struct mem_heap_stats hs;

		if (bpf_map_lookup_elem(fd, &key, &hs))
			continue;
		if (sc->n_gens == cap) {
			struct pid_gen *g;

			cap = cap ? cap * 2 : 64;
			g = realloc(sc->gens, cap * sizeof(*g));
			if (!g)
				break;
			sc->gens = g;
		}
		sc->gens[sc->n_gens].tgid = key;
		sc->gens[sc->n_gens++].gen = hs.gen;
	}
	if (sc->n_gens)
		qsort(sc->gens, sc->n_gens, sizeof(*sc->gens), cmp_u32);
}

/* Group the outstanding allocations (of sc->only, or of everyone). */
void mem_scan_allocs(struct mem_state *st, struct scan_ctx *sc)
{
	int fd = bpf_map__fd(st->skel->maps.allocs);
	enum { CHUNK = 4096 };
	struct mem_alloc_key *keys = malloc(CHUNK * sizeof(*keys));
	struct mem_alloc_val *vals = malloc(CHUNK * sizeof(*vals));
	struct mem_alloc_key cur, next;
	__u64 in = 0, out = 0;
	bool first = true, batch_ok = true;

	mem_groups_reset(&st->groups);
	read_gens(st, sc);
	if (!keys || !vals)
		goto done;
	/* Batched lookup (one syscall per CHUNK records) ... */
	for (;;) {
		LIBBPF_OPTS(bpf_map_batch_opts, opts);
		__u32 count = CHUNK;
		int rc;

		/* Tools like valgrind do not know what the batch writes. */
		memset(keys, 0, CHUNK * sizeof(*keys));
		memset(vals, 0, CHUNK * sizeof(*vals));
		rc = bpf_map_lookup_batch(fd, first ? NULL : &in, &out, keys, vals,
					  &count, &opts);
		int err = rc ? -errno : 0;

		for (__u32 i = 0; i < count; i++)
			scan_one(st, sc, &keys[i], &vals[i]);
		if (err == -ENOENT)
			goto done;
		if (err) {
			if (first && (err == -EINVAL || err == -ENOTSUP || err == -EOPNOTSUPP))
				batch_ok = false;
			break;
		}
		first = false;
		in = out;
	}
	if (batch_ok)
		goto done;
	/* ... else one key at a time. */
	for (int rc = bpf_map_get_next_key(fd, NULL, &cur); rc == 0;
	     rc = bpf_map_get_next_key(fd, &cur, &next), cur = next) {
		struct mem_alloc_val v;

		if (bpf_map_lookup_elem(fd, &cur, &v) == 0)
			scan_one(st, sc, &cur, &v);
	}
done:
	free(keys);
	free(vals);
	free(sc->gens);
	sc->gens = NULL;
	sc->n_gens = 0;
	/* Interval scans drop the blocks of images replaced by exec. */
	if (!sc->only) {
		for (size_t i = 0; i < sc->n_doomed; i++)
			bpf_map_delete_elem(fd, &sc->doomed[i]);
		free(sc->doomed);
		sc->doomed = NULL;
		sc->n_doomed = sc->cap_doomed = 0;
	}
}

void mem_queue_exit(struct mem_state *st, uint32_t pid, const char *comm)
{
	struct mem_proc_info *p = mem_proc_find(st, pid, NULL);

	if (p && p->finalized)
		return;
	if (!p && comm && comm[0])
		p = mem_proc_get(st, pid);
	/* The name it died with (its group leader's): /proc may be gone,
	 * and a short-lived -- CMD child may not have been seen since exec. */
	if (p && comm && comm[0]) {
		memcpy(p->comm, comm, sizeof(p->comm) - 1);
		p->comm[sizeof(p->comm) - 1] = '\0';
	}
	for (size_t i = 0; i < st->n_exits; i++)
		if (st->exits[i] == pid)
			return;
	if (st->n_exits == st->cap_exits) {
		size_t cap = st->cap_exits ? st->cap_exits * 2 : 16;
		uint32_t *grown = realloc(st->exits, cap * sizeof(*grown));

		if (!grown)
			return;
		st->exits = grown;
		st->cap_exits = cap;
	}
	st->exits[st->n_exits++] = pid;
}

/* A pid given with -p, or the -- CMD child itself (not its descendants). */
static bool named_target(const struct mem_state *st, uint32_t pid)
{
	uint32_t pids[64];
	size_t n = st->host->target_pids(st->inst, pids, NT_ARRAY_LEN(pids));

	for (size_t i = 0; i < n && i < NT_ARRAY_LEN(pids); i++)
		if (pids[i] == pid)
			return true;
	return false;
}

/* One exited process: its final reports, a log line for a target, and
 * its links, map entries and symbols let go. */
static void finalize_one(struct mem_state *st, uint32_t pid,
			 const struct mem_group *sorted, size_t n_sorted)
{
	int pfd = bpf_map__fd(st->skel->maps.procs);
	int hfd = bpf_map__fd(st->skel->maps.heap);
	struct mem_heap_stats hs;
	struct mem_proc pr;
	bool have_hs = bpf_map_lookup_elem(hfd, &pid, &hs) == 0;
	bool have_pr = bpf_map_lookup_elem(pfd, &pid, &pr) == 0;
	bool targets = st->host->target_map_fd(st->inst) >= 0;
	struct mem_proc_info *p = mem_proc_get(st, pid);
	char live[32];

	if (!p || p->finalized)
		return;
	if (have_pr)
		mem_report_rss(st, pid, &pr, true);
	if (have_hs) {
		mem_report_heap(st, pid, &hs, true);
		nt_fmt_bytes(hs.live_bytes > 0 ? (uint64_t)hs.live_bytes : 0,
			     live, sizeof(live));
	}
	/* Host-wide, a process without heap data gets only its final
	 * mem.rss; a target always gets its table. */
	if (have_hs || (have_pr && targets)) {
		size_t n_gs;
		const struct mem_group *gs = mem_groups_find(sorted, n_sorted, pid, &n_gs);

		mem_report_stacks(st, pid, true, gs, n_gs, &hs, have_hs, &pr, have_pr);
	}
	/* A line for a process the user named; a helper the job ran (a shell
	 * shim) gets its report, not a line of its own. */
	if (p->heap_attached || (targets && (have_hs || have_pr)))
		nt_kit_log(st->host, st->inst, named_target(st, pid) ? NT_LOG_INFO : NT_LOG_DEBUG,
			   "target pid %u (%s) exited%s%s%s; final report published, the other targets go on",
			   pid, p->comm, have_hs ? ": " : "",
			   have_hs ? live : "", have_hs ? " of heap outstanding" : "");
	mem_proc_links_destroy(st, p);
	p->finalized = true;
	p->gone_ns = nt_clock_mono_ns();
	bpf_map_delete_elem(hfd, &pid);
	bpf_map_delete_elem(pfd, &pid);
	mem_symcache_forget(&st->syms, pid);
}

/* The queued exits, in one scan of the allocs map for all of them. */
void mem_finalize_pending(struct mem_state *st)
{
	int hfd = bpf_map__fd(st->skel->maps.heap);
	int afd = bpf_map__fd(st->skel->maps.allocs);
	struct scan_ctx sc = {0};
	uint32_t *pids;
	size_t n, n_sorted = 0;
	bool any_heap = false;
	struct mem_group *sorted;
	uint64_t t0;

	if (!st->n_exits)
		return;
	t0 = nt_clock_mono_ns();
	pids = st->exits;
	n = st->n_exits;
	st->exits = NULL;
	st->n_exits = st->cap_exits = 0;
	qsort(pids, n, sizeof(*pids), cmp_u32);

	for (size_t i = 0; i < n; i++) {
		struct mem_heap_stats hs;

		if (bpf_map_lookup_elem(hfd, &pids[i], &hs) == 0 && hs.allocs + hs.mmaps)
			any_heap = true;
	}
	if (any_heap) {
		sc.only = pids;
		sc.n_only = n;
		mem_scan_allocs(st, &sc);
	} else {
		mem_groups_reset(&st->groups);
	}
	sorted = mem_groups_sorted(&st->groups, &n_sorted);
	for (size_t i = 0; i < n; i++)
		finalize_one(st, pids[i], sorted, n_sorted);
	for (size_t i = 0; i < sc.n_doomed; i++)
		bpf_map_delete_elem(afd, &sc.doomed[i]);
	nt_log_dbg(st, "final reports of %zu processes (%zu blocks dropped) took %.1f ms",
		   n, sc.n_doomed, (double)(nt_clock_mono_ns() - t0) / 1e6);
	free(sc.doomed);
	free(sorted);
	free(pids);
}
