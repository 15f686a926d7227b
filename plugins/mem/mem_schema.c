/* SPDX-License-Identifier: MIT */
/*
 * mem probe: the event schemas (mem.rss, mem.heap, mem.leak, mem.report,
 * mem.oom_kill) and metric descriptors, and their registration at init.
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

static const struct nt_field rss_fields[] = {
	NT_FIELD(struct mem_rss_event, rss_bytes, NT_F_U64, "bytes", "resident: file + anon + shmem"),
	NT_FIELD(struct mem_rss_event, anon_bytes, NT_F_U64, "bytes", "resident anonymous memory"),
	NT_FIELD(struct mem_rss_event, file_bytes, NT_F_U64, "bytes", "resident file-backed memory"),
	NT_FIELD(struct mem_rss_event, shmem_bytes, NT_F_U64, "bytes", "resident shared memory"),
	NT_FIELD(struct mem_rss_event, swap_bytes, NT_F_U64, "bytes", "swapped out"),
	NT_FIELD(struct mem_rss_event, peak_rss_bytes, NT_F_U64, "bytes", "highest rss_bytes seen"),
	NT_FIELD(struct mem_rss_event, faults, NT_F_U64, "count", "user page faults since tracing began"),
	NT_FIELD(struct mem_rss_event, final, NT_F_BOOL, "", "the process has exited"),
};

static const struct nt_schema rss_schema = {
	.name = "mem.rss",
	.desc = "resident memory of a process, each interval it changed and at exit",
	.fields = rss_fields,
	.n_fields = NT_ARRAY_LEN(rss_fields),
	.min_size = sizeof(struct mem_rss_event),
};

static const struct nt_field heap_fields[] = {
	NT_FIELD(struct mem_heap_event, live_bytes, NT_F_S64, "bytes", "outstanding heap bytes"),
	NT_FIELD(struct mem_heap_event, live_allocs, NT_F_S64, "count", "outstanding heap allocations"),
	NT_FIELD(struct mem_heap_event, peak_bytes, NT_F_S64, "bytes", "highest live_bytes seen"),
	NT_FIELD(struct mem_heap_event, allocs, NT_F_U64, "count", "allocation calls that succeeded"),
	NT_FIELD(struct mem_heap_event, frees, NT_F_U64, "count", "tracked allocations released"),
	NT_FIELD(struct mem_heap_event, alloc_bytes, NT_F_U64, "bytes", "bytes requested (turnover)"),
	NT_FIELD(struct mem_heap_event, freed_bytes, NT_F_U64, "bytes", "bytes released"),
	NT_FIELD(struct mem_heap_event, mmap_live_bytes, NT_F_S64, "bytes", "outstanding anonymous mmap bytes"),
	NT_FIELD(struct mem_heap_event, mmap_peak_bytes, NT_F_S64, "bytes", "highest mmap_live_bytes seen"),
	NT_FIELD(struct mem_heap_event, mmaps, NT_F_U64, "count", "anonymous mmap calls that succeeded"),
	NT_FIELD(struct mem_heap_event, munmaps, NT_F_U64, "count", "tracked regions unmapped"),
	NT_FIELD(struct mem_heap_event, untracked, NT_F_U64, "count", "allocations not tracked: allocs map full"),
	NT_FIELD(struct mem_heap_event, sampled_out, NT_F_U64, "count", "small allocations skipped by sampling"),
	NT_FIELD(struct mem_heap_event, stack_lost, NT_F_U64, "count", "allocations whose stack was not recorded"),
	NT_FIELD(struct mem_heap_event, final, NT_F_BOOL, "", "the process has exited"),
};

static const struct nt_schema heap_schema = {
	.name = "mem.heap",
	.desc = "allocator counters of a process, each interval they changed and at exit",
	.fields = heap_fields,
	.n_fields = NT_ARRAY_LEN(heap_fields),
	.min_size = sizeof(struct mem_heap_event),
};

static const struct nt_field leak_fields[] = {
	NT_FIELD(struct mem_leak_event, bytes, NT_F_U64, "bytes", "outstanding bytes from this stack"),
	NT_FIELD(struct mem_leak_event, allocs, NT_F_U64, "count", "outstanding allocations from this stack"),
	NT_FIELD(struct mem_leak_event, oldest_age_ns, NT_F_U64, "ns", "age of the oldest of them"),
	NT_FIELD(struct mem_leak_event, rank, NT_F_U32, "", "1 = most bytes"),
	NT_FIELD(struct mem_leak_event, stack_id, NT_F_S32, "", "stack map id, -1 when not recorded"),
	NT_FIELD(struct mem_leak_event, final, NT_F_BOOL, "", "reported at process exit"),
	NT_FIELD(struct mem_leak_event, kind, NT_F_U8, "", "0 heap, 1 anonymous mmap"),
	NT_FIELD(struct mem_leak_event, function, NT_F_VSTR, "", "allocating function (first frame outside the allocator)"),
	NT_FIELD(struct mem_leak_event, stack, NT_F_VSTR, "", "frames, root first, ';'-separated (folded)"),
};

static const struct nt_schema leak_schema = {
	.name = "mem.leak",
	.desc = "outstanding allocations of a process grouped by allocation stack (top_n)",
	.fields = leak_fields,
	.n_fields = NT_ARRAY_LEN(leak_fields),
	.min_size = sizeof(struct mem_leak_event),
};

static const struct nt_field report_fields[] = {
	NT_FIELD(struct mem_report_event, final, NT_F_BOOL, "", "reported at process exit"),
	NT_FIELD(struct mem_report_event, text, NT_F_VSTR, "", "human-readable table"),
};

static const struct nt_schema report_schema = {
	.name = "mem.report",
	.desc = "per-process memory table: heap, RSS, top stacks by outstanding bytes",
	.fields = report_fields,
	.n_fields = NT_ARRAY_LEN(report_fields),
	.min_size = sizeof(struct mem_report_event),
};

static const struct nt_field oom_fields[] = {
	NT_FIELD(struct mem_oom_event, killer_pid, NT_F_U32, "", "process that ran the OOM killer"),
	NT_FIELD(struct mem_oom_event, uid, NT_F_U32, "", "victim's uid"),
	NT_FIELD(struct mem_oom_event, oom_score_adj, NT_F_S32, "", "victim's oom_score_adj"),
	NT_FIELD(struct mem_oom_event, total_vm_bytes, NT_F_U64, "bytes", "victim's virtual size"),
	NT_FIELD(struct mem_oom_event, anon_rss_bytes, NT_F_U64, "bytes", "victim's resident anonymous memory"),
	NT_FIELD(struct mem_oom_event, file_rss_bytes, NT_F_U64, "bytes", "victim's resident file memory"),
	NT_FIELD(struct mem_oom_event, shmem_rss_bytes, NT_F_U64, "bytes", "victim's resident shared memory"),
	NT_FIELD(struct mem_oom_event, swap_bytes, NT_F_U64, "bytes", "victim's swapped-out memory"),
	NT_FIELD(struct mem_oom_event, pgtables_bytes, NT_F_U64, "bytes", "victim's page tables"),
};

static const struct nt_schema oom_schema = {
	.name = "mem.oom_kill",
	.desc = "the OOM killer chose a victim (pid/comm of the header)",
	.fields = oom_fields,
	.n_fields = NT_ARRAY_LEN(oom_fields),
	.min_size = sizeof(struct mem_oom_event),
};

static const char *const pid_label[] = {"pid"};

#define GAUGE(n, h) { .name = n, .help = h, .type = NT_METRIC_GAUGE, .n_labels = 1, .label_names = pid_label }
#define COUNTER(n, h) { .name = n, .help = h, .type = NT_METRIC_COUNTER, .n_labels = 1, .label_names = pid_label }

static const struct nt_metric_desc metric_descs[M_COUNT] = {
	[M_RSS] = GAUGE("ntcore_mem_rss_bytes", "resident memory (file + anon + shmem)"),
	[M_RSS_ANON] = GAUGE("ntcore_mem_rss_anon_bytes", "resident anonymous memory"),
	[M_RSS_PEAK] = GAUGE("ntcore_mem_rss_peak_bytes", "highest resident memory seen"),
	[M_SWAP] = GAUGE("ntcore_mem_swap_bytes", "swapped-out memory"),
	[M_FAULTS] = COUNTER("ntcore_mem_page_faults_total", "user page faults"),
	[M_OOM] = COUNTER("ntcore_mem_oom_kills_total", "processes chosen by the OOM killer"),
	[M_HEAP_LIVE] = GAUGE("ntcore_mem_heap_live_bytes", "outstanding heap bytes"),
	[M_HEAP_LIVE_ALLOCS] = GAUGE("ntcore_mem_heap_live_allocations", "outstanding heap allocations"),
	[M_HEAP_PEAK] = GAUGE("ntcore_mem_heap_peak_bytes", "highest outstanding heap bytes"),
	[M_HEAP_ALLOCS] = COUNTER("ntcore_mem_heap_allocations_total", "allocation calls that succeeded"),
	[M_HEAP_FREES] = COUNTER("ntcore_mem_heap_frees_total", "tracked allocations released"),
	[M_HEAP_ALLOC_BYTES] = COUNTER("ntcore_mem_heap_allocated_bytes_total", "bytes requested"),
	[M_HEAP_FREED_BYTES] = COUNTER("ntcore_mem_heap_freed_bytes_total", "bytes released"),
	[M_MMAP_LIVE] = GAUGE("ntcore_mem_mmap_live_bytes", "outstanding anonymous mmap bytes"),
	[M_UNTRACKED] = COUNTER("ntcore_mem_heap_untracked_total", "allocations not tracked (allocs map full)"),
};

int mem_register(struct mem_state *st)
{
	if ((st->t_rss = st->host->register_schema(st->inst, &rss_schema)) < 0 ||
	    (st->t_heap = st->host->register_schema(st->inst, &heap_schema)) < 0 ||
	    (st->t_leak = st->host->register_schema(st->inst, &leak_schema)) < 0 ||
	    (st->t_report = st->host->register_schema(st->inst, &report_schema)) < 0 ||
	    (st->t_oom = st->host->register_schema(st->inst, &oom_schema)) < 0) {
		return st->t_rss < 0 ? st->t_rss : st->t_heap < 0 ? st->t_heap :
			  st->t_leak < 0 ? st->t_leak : st->t_report < 0 ? st->t_report : st->t_oom;
	}
	for (int i = 0; i < M_COUNT; i++)
		st->m[i] = st->host->metric_register(st->inst, &metric_descs[i]);
	return 0;
}
