/* SPDX-License-Identifier: MIT */
/*
 * mem probe: attach: the BPF object configured and loaded, tracepoint
 * flavours chosen, RSS of running targets seeded, heap probes placed, the
 * ring and timers opened.
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

#include <bpf/btf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/proc.h"
#include "ntcore/kit/tp.h"
#include "ntcore/plugin.h"

#include "mem_priv.h"
#include "mem.bpf.skel.h"

/* Which tracepoints load, and as tp_btf or raw_tp (the kit's choice:
 * tp_btf where a BTF tracing program loads here). A kernel without one of
 * them loses that part only. The BTF is libbpf's parse, which the daemon
 * shares between every load and frees once all are loaded
 * (core/btfshare.c); host->vmlinux_btf would pin it (13 MB) for the run. */
static int choose_tracepoints(struct mem_state *st, bool heap)
{
	const struct mem_config *c = st->cfg;
	struct mem_bpf *s = st->skel;
	struct nt_tp_prog tps[] = {
		{ .tp = "rss_stat", .group = "kmem", .btf = s->progs.rss_stat_btf,
		  .raw = s->progs.rss_stat_raw, .optional = true, .skip = !c->rss },
		{ .tp = "page_fault_user", .group = "exceptions",
		  .btf = s->progs.page_fault_btf, .raw = s->progs.page_fault_raw,
		  .optional = true, .skip = !c->faults },
		{ .tp = "mark_victim", .group = "oom", .btf = s->progs.mark_victim_btf,
		  .raw = s->progs.mark_victim_raw, .optional = true, .skip = !c->oom },
		{ .tp = "sched_process_exit", .group = "sched", .btf = s->progs.exit_btf,
		  .raw = s->progs.exit_raw, .optional = true },
		{ .tp = "sched_process_fork", .group = "sched", .btf = s->progs.fork_btf,
		  .raw = s->progs.fork_raw, .optional = true, .skip = !st->per_pid },
		{ .tp = "sched_process_exec", .group = "sched", .btf = s->progs.exec_btf,
		  .raw = s->progs.exec_raw, .optional = true, .skip = !heap },
	};
	struct btf *vmlinux = btf__load_vmlinux_btf();
	int flavour = nt_tp_choose(st->host, st->inst, vmlinux, NT_TP_AUTO, tps,
				   NT_ARRAY_LEN(tps));

	btf__free(vmlinux);
	return flavour < 0 ? flavour : 0;
}

static int attach_tp(struct mem_state *st, struct bpf_program *prog)
{
	struct bpf_link *l;

	if (!bpf_program__autoload(prog))
		return 0;
	l = bpf_program__attach(prog);
	if (!l) {
		int err = -errno;

		nt_log_err(st, "cannot attach %s: %s",
			   bpf_program__name(prog), strerror(-err));
		return err;
	}
	return mem_links_push(&st->tlinks, &st->n_tlinks, l, -1);
}

static int attach_tracepoints(struct mem_state *st)
{
	struct mem_bpf *s = st->skel;
	struct bpf_program *tps[] = {
		s->progs.rss_stat_btf, s->progs.rss_stat_raw, s->progs.page_fault_btf,
		s->progs.page_fault_raw, s->progs.mark_victim_btf, s->progs.mark_victim_raw,
		s->progs.exit_btf, s->progs.exit_raw, s->progs.fork_btf, s->progs.fork_raw,
		s->progs.exec_btf, s->progs.exec_raw,
	};
	int err;

	for (size_t i = 0; i < NT_ARRAY_LEN(tps); i++)
		if ((err = attach_tp(st, tps[i])))
			return err;
	return 0;
}

/* Uprobes bound to the target pids, or on every process with the target
 * map as filter. A bound probe reaches a child only once the fork is seen
 * in user space, after its first allocations; so the -- CMD child (a copy
 * of this daemon until it execs: a launcher whose children matter) gets
 * global probes unless told otherwise. */
static bool want_per_pid(struct mem_state *st, bool heap, int map_fd,
			 const uint32_t *pids, size_t n_pids)
{
	bool spawned = false;

	if (!heap || map_fd < 0 || n_pids == 0)
		return false;
	for (size_t i = 0; i < n_pids; i++)
		spawned |= mem_proc_is_unexeced_child(st, pids[i]);
	return strcmp(st->cfg->heap_scope, "process") == 0 ||
	       (strcmp(st->cfg->heap_scope, "auto") == 0 && !spawned);
}

/* The object's constants and map sizes, before the load. */
static int configure_object(struct mem_state *st, bool heap)
{
	const struct mem_config *c = st->cfg;
	struct mem_bpf *s = st->skel;
	int err;

	s->rodata->oom_type = (uint32_t)st->t_oom;
	s->rodata->page_shift = st->page_shift;
	s->rodata->sample_min_bytes = (uint64_t)c->sample_min_bytes;
	s->rodata->sample_every = (uint32_t)c->sample_every;
	s->rodata->want_stacks = c->stacks;
	s->rodata->want_fork = st->per_pid;
	s->rodata->heap_filter = !st->per_pid;
	s->rodata->self_tgid = (uint32_t)getpid();
	if ((err = nt_bpf_use_targets(st->host, st->inst, s->maps.nt_targets,
				      &s->rodata->nt_filter_on)))
		return err;
	bpf_map__set_max_entries(s->maps.allocs, heap ? (uint32_t)c->max_allocs : 1);
	bpf_map__set_max_entries(s->maps.stacks,
				 heap && c->stacks ? (uint32_t)c->max_stacks : 1);
	bpf_map__set_value_size(s->maps.stacks, (uint32_t)c->stack_depth * sizeof(__u64));
	/* Programs loaded for uprobe_multi links; kernels before 6.6 ignore
	 * the attach type of a kprobe program and take per-function links. */
	st->multi_ok = heap;
	if (heap) {
		bpf_program__set_expected_attach_type(s->progs.heap_enter,
						      MEM_BPF_TRACE_UPROBE_MULTI);
		bpf_program__set_expected_attach_type(s->progs.alloc_return,
						      MEM_BPF_TRACE_UPROBE_MULTI);
	}
	if (!heap)
		bpf_map__set_max_entries(s->maps.seen_stacks, 1);
	return choose_tracepoints(st, heap);
}

/* Seed RSS of running targets: the tracepoint fires only on change. */
static void seed_rss(struct mem_state *st, const uint32_t *pids, size_t n_pids)
{
	for (size_t i = 0; i < n_pids; i++) {
		char path[64], text[256];
		uint64_t size, res, shared;
		struct mem_proc pr = {0};

		if (mem_proc_is_unexeced_child(st, pids[i]))
			continue; /* its RSS is a copy of ours */
		snprintf(path, sizeof(path), "/proc/%u/statm", pids[i]);
		if (nt_file_read(path, text, sizeof(text)) <= 0 ||
		    mem_parse_statm(text, &size, &res, &shared))
			continue;
		pr.pages[MEM_FILEPAGES] = shared;
		pr.pages[MEM_ANONPAGES] = res > shared ? res - shared : 0;
		pr.peak_rss_pages = res;
		bpf_map_update_elem(bpf_map__fd(st->skel->maps.procs), &pids[i], &pr,
				    BPF_NOEXIST);
	}
}

static void heap_attach_targets(struct mem_state *st, const uint32_t *pids,
				size_t n_pids)
{
	size_t ok = 0;

	for (size_t i = 0; i < n_pids; i++) {
		int rc = mem_heap_attach_pid(st, pids[i]);

		if (rc)
			nt_log_err(st, "pid %u: no heap tracking: %s", pids[i],
				   strerror(-rc));
		else
			ok++;
	}
	if (!ok)
		nt_log_warn(st, "no target got heap probes; RSS and faults go on");
}

/* Each distinct library of the targets once (this daemon's for the
 * -- CMD child or host-wide), probed for every process. */
static void heap_attach_global(struct mem_state *st, const uint32_t *pids,
			       size_t n_pids, bool filtered)
{
	char libs[8][PATH_MAX];
	size_t n_libs = 0, ok = 0;

	for (size_t i = 0; i < (n_pids ? n_pids : 1) && n_libs < 8; i++) {
		char lib[PATH_MAX];
		bool dup = false;

		if (mem_resolve_libc(st, n_pids ? pids[i] : 0, lib, sizeof(lib)))
			continue;
		for (size_t j = 0; j < n_libs; j++)
			dup |= strcmp(libs[j], lib) == 0;
		if (!dup)
			memcpy(libs[n_libs++], lib, sizeof(lib));
	}
	for (size_t j = 0; j < n_libs; j++) {
		int err = mem_heap_attach(st, -1, libs[j], &st->glinks, &st->n_glinks);

		if (err) {
			nt_log_err(st, "no heap probes on %s: %s", libs[j], strerror(-err));
			continue;
		}
		ok++;
		nt_log_info(st, "heap probes on %s for every process%s", libs[j],
			    filtered ? " (filtered to the targets in BPF)" : "");
	}
	if (!ok)
		nt_log_err(st, "no heap tracking; RSS and faults go on");
}

static int open_ring_and_timers(struct mem_state *st, bool heap)
{
	const struct mem_config *c = st->cfg;
	int err;

	if ((err = nt_ring_open(st->host, st->inst, st->skel->maps.events,
				mem_on_record, st, TOKEN_RING, &st->rb)) ||
	    (err = st->host->add_timer(st->inst, (uint64_t)c->interval_ms, TOKEN_TICK)))
		return err;
	if (heap && c->stacks &&
	    (err = st->host->add_timer(st->inst, 100, TOKEN_RETRY)))
		return err;
	return 0;
}

int mem_attach(void *state)
{
	struct mem_state *st = state;
	const struct mem_config *c = st->cfg;
	int map_fd = st->host->target_map_fd(st->inst);
	uint32_t pids[256];
	size_t n_pids = st->host->target_pids(st->inst, pids, NT_ARRAY_LEN(pids));
	bool heap = st->heap_on;
	int err;

	if (heap && map_fd < 0 && strcmp(c->heap, "always") != 0) {
		nt_log_info(st, "host-wide run: heap tracking is off (it would put a uprobe on every process's malloc); use -p PID or -- CMD, or heap = \"always\"");
		heap = false;
	}
	st->heap_on = heap;
	if (n_pids > NT_ARRAY_LEN(pids))
		n_pids = NT_ARRAY_LEN(pids);
	mem_resolve_self_libc(st, st->self_libc, sizeof(st->self_libc));
	st->per_pid = want_per_pid(st, heap, map_fd, pids, n_pids);
	st->skel = mem_bpf__open();
	if (!st->skel) {
		err = -errno;
		nt_log_err(st, "cannot open the BPF object: %s", strerror(-err));
		return err;
	}
	if ((err = configure_object(st, heap)))
		return err;
	err = mem_bpf__load(st->skel);
	if (err) {
		nt_log_err(st, "cannot load the BPF object: %s (run as root, or with CAP_BPF and CAP_PERFMON)",
			   strerror(-err));
		return err;
	}
	if ((err = attach_tracepoints(st)))
		return err;
	if (c->rss)
		seed_rss(st, pids, n_pids);
	if (heap && st->per_pid)
		heap_attach_targets(st, pids, n_pids);
	else if (heap)
		heap_attach_global(st, pids, n_pids, map_fd >= 0);
	return open_ring_and_timers(st, heap);
}
