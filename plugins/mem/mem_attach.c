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

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/proc.h"
#include "ntcore/plugin.h"

#include "mem_priv.h"
#include "mem.bpf.skel.h"

static bool tp_exists(struct mem_state *st, const char *group, const char *name)
{
	char path[256];

	if (st->btf)
		return libbpf_find_vmlinux_btf_id(name, BPF_TRACE_RAW_TP) > 0;
	snprintf(path, sizeof(path), "/sys/kernel/tracing/events/%s/%s", group, name);
	if (access(path, F_OK) == 0)
		return true;
	snprintf(path, sizeof(path), "/sys/kernel/debug/tracing/events/%s/%s", group, name);
	return access(path, F_OK) == 0;
}

static void want_tp(struct mem_state *st, bool on, struct bpf_program *btf,
		    struct bpf_program *raw, const char *group, const char *name)
{
	bool exists = on && tp_exists(st, group, name);

	if (on && !exists)
		nt_log_warn(st, "this kernel has no %s/%s tracepoint; that part is off", group, name);
	bpf_program__set_autoload(btf, exists && st->btf);
	bpf_program__set_autoload(raw, exists && !st->btf);
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

int mem_attach(void *state)
{
	struct mem_state *st = state;
	const struct mem_config *c = st->cfg;
	struct mem_bpf *s;
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
	/* Uprobes bound to the target pids, or on every process with the
	 * target map as filter. A bound probe reaches a child only once the
	 * fork is seen in user space, after its first allocations; so the
	 * -- CMD child (a copy of this daemon until it execs: a launcher
	 * whose children matter) gets global probes unless told otherwise. */
	st->per_pid = false;
	if (heap && map_fd >= 0 && n_pids > 0) {
		bool spawned = false;

		for (size_t i = 0; i < n_pids; i++)
			spawned |= mem_proc_is_unexeced_child(st, pids[i]);
		st->per_pid = strcmp(c->heap_scope, "process") == 0 ||
			      (strcmp(c->heap_scope, "auto") == 0 && !spawned);
	}

	st->skel = s = mem_bpf__open();
	if (!s) {
		err = -errno;
		nt_log_err(st, "cannot open the BPF object: %s",
			      strerror(-err));
		return err;
	}
	st->btf = access("/sys/kernel/btf/vmlinux", R_OK) == 0;
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
	want_tp(st, c->rss, s->progs.rss_stat_btf, s->progs.rss_stat_raw, "kmem", "rss_stat");
	want_tp(st, c->faults, s->progs.page_fault_btf, s->progs.page_fault_raw,
		"exceptions", "page_fault_user");
	want_tp(st, c->oom, s->progs.mark_victim_btf, s->progs.mark_victim_raw, "oom", "mark_victim");
	want_tp(st, true, s->progs.exit_btf, s->progs.exit_raw, "sched", "sched_process_exit");
	want_tp(st, st->per_pid, s->progs.fork_btf, s->progs.fork_raw, "sched", "sched_process_fork");
	want_tp(st, heap, s->progs.exec_btf, s->progs.exec_raw, "sched", "sched_process_exec");

	err = mem_bpf__load(s);
	if (err) {
		nt_log_err(st, "cannot load the BPF object: %s (run as root, or with CAP_BPF and CAP_PERFMON)",
			      strerror(-err));
		return err;
	}
	struct bpf_program *tps[] = {
		s->progs.rss_stat_btf, s->progs.rss_stat_raw, s->progs.page_fault_btf,
		s->progs.page_fault_raw, s->progs.mark_victim_btf, s->progs.mark_victim_raw,
		s->progs.exit_btf, s->progs.exit_raw, s->progs.fork_btf, s->progs.fork_raw,
		s->progs.exec_btf, s->progs.exec_raw,
	};
	for (size_t i = 0; i < NT_ARRAY_LEN(tps); i++)
		if ((err = attach_tp(st, tps[i])))
			return err;

	/* Seed RSS of running targets: the tracepoint fires only on change. */
	if (c->rss)
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
			bpf_map_update_elem(bpf_map__fd(s->maps.procs), &pids[i], &pr, BPF_NOEXIST);
		}

	if (heap) {
		if (st->per_pid) {
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
		} else {
			/* Each distinct library of the targets once (this
			 * daemon's for the -- CMD child or host-wide). */
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
				err = mem_heap_attach(st, -1, libs[j], &st->glinks, &st->n_glinks);
				if (err) {
					nt_log_err(st, "no heap probes on %s: %s", libs[j],
						      strerror(-err));
					continue;
				}
				ok++;
				nt_log_info(st, "heap probes on %s for every process%s", libs[j],
					      map_fd >= 0 ? " (filtered to the targets in BPF)" : "");
			}
			if (!ok)
				nt_log_err(st, "no heap tracking; RSS and faults go on");
		}
	}

	if ((err = nt_bpf_ring_open(st->host, st->inst, s->maps.events, mem_on_record,
				    st, TOKEN_RING, &st->rb)) ||
	    (err = st->host->add_timer(st->inst, (uint64_t)c->interval_ms, TOKEN_TICK)))
		return err;
	if (heap && c->stacks &&
	    (err = st->host->add_timer(st->inst, 100, TOKEN_RETRY)))
		return err;
	return 0;
}
