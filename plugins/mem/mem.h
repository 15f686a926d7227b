/* SPDX-License-Identifier: MIT */
/*
 * mem probe: structs shared between mem.bpf.c (kernel side) and mem.c (user
 * side). Plain fixed-width C, included after vmlinux.h on the BPF side and
 * after <linux/types.h> on the user side.
 */
#ifndef NTCORE_MEM_H
#define NTCORE_MEM_H

#include "ntcore/event.h"

/* Most frames a user stack keeps (BPF_MAP_TYPE_STACK_TRACE value). */
#define MEM_MAX_DEPTH 127

/* The kernel's mm counters (enum in include/linux/mm_types_task.h). */
enum mem_member {
	MEM_FILEPAGES = 0,
	MEM_ANONPAGES = 1,
	MEM_SWAPENTS = 2,
	MEM_SHMEMPAGES = 3,
	MEM_NR_MEMBERS = 4,
};

/* Allocator entry points the probe knows (config key `functions`). */
enum mem_fn {
	MEM_FN_MALLOC = 0,
	MEM_FN_CALLOC,
	MEM_FN_REALLOC,
	MEM_FN_FREE,
	MEM_FN_POSIX_MEMALIGN,
	MEM_FN_ALIGNED_ALLOC,
	MEM_FN_MEMALIGN,
	MEM_FN_VALLOC,
	MEM_FN_PVALLOC,
	MEM_FN_MMAP,
	MEM_FN_MUNMAP,
	MEM_FN_COUNT,
	MEM_FN_IGNORE = 255, /* an entry whose return is of no interest */
};

/* What an outstanding record stands for. */
enum mem_kind {
	MEM_KIND_HEAP = 0, /* malloc & co. */
	MEM_KIND_MMAP = 1, /* anonymous mmap made by the program itself */
};

/* allocs map: one outstanding allocation of one process. */
struct mem_alloc_key {
	__u32 tgid;
	__u32 pad;
	__u64 addr;
};

struct mem_alloc_val {
	__u64 size;   /* bytes requested */
	__u64 ts_ns;  /* CLOCK_MONOTONIC of the allocation */
	__s32 stack_id; /* stacks map id, or < 0 (none / lost) */
	__u32 tid;
	__u32 weight; /* 1, or sample_every for a sampled small allocation */
	__u32 kind;   /* enum mem_kind */
	__u32 gen;    /* the process image it belongs to (see mem_heap_stats) */
	__u32 pad;
};

/* One call in flight per thread (entry seen, return not yet). */
struct mem_pending {
	__u64 size;
	__u64 arg;      /* posix_memalign: the out pointer */
	__u64 sp;       /* stack pointer at entry: detects nesting */
	__u64 old_addr; /* realloc: the block it was given */
	struct mem_alloc_val old; /* realloc: its record, restored on failure */
	__u32 fn;       /* enum mem_fn or MEM_FN_IGNORE */
	__u32 depth;    /* nested allocator calls of the same thread */
	__u32 old_found;
	__u32 active;   /* a call is in flight */
};

/* heap map: per-process counters, all cumulative except live/peak. */
struct mem_heap_stats {
	__s64 live_bytes;   /* outstanding heap bytes (weighted) */
	__s64 live_allocs;  /* outstanding heap allocations (weighted) */
	__s64 peak_bytes;   /* highest live_bytes seen */
	__u64 allocs;       /* successful allocation calls */
	__u64 alloc_bytes;  /* bytes they requested */
	__u64 frees;        /* releases of tracked allocations (weighted) */
	__u64 freed_bytes;  /* bytes released (weighted) */
	__s64 mmap_live_bytes;
	__s64 mmap_peak_bytes;
	__u64 mmaps;
	__u64 munmaps;
	__u64 untracked;    /* allocations the allocs map had no room for */
	__u64 sampled_out;  /* small allocations skipped by sampling */
	__u64 stack_lost;   /* allocations whose stack was not recorded */
	__u32 gen;          /* bumped at each exec: older records are void */
	__u32 pad;
};

/* procs map: RSS and page faults of one process. */
struct mem_proc {
	__u64 pages[MEM_NR_MEMBERS]; /* last value of each mm counter */
	__u64 peak_rss_pages;        /* file + anon + shmem, highest seen */
	__u64 faults;                /* user page faults */
	__u64 updated_ns;
};

/* mem.oom_kill, written by BPF into the ring buffer. */
struct mem_oom_event {
	struct nt_event_hdr hdr; /* pid/tid/comm: the victim */
	__u32 killer_pid;        /* process that ran the OOM killer */
	__u32 uid;
	__s32 oom_score_adj;
	__u32 pad;
	__u64 total_vm_bytes;
	__u64 anon_rss_bytes;
	__u64 file_rss_bytes;
	__u64 shmem_rss_bytes;
	__u64 swap_bytes;
	__u64 pgtables_bytes;
};

/*
 * Records for the plugin itself (hdr.type == 0), never published: a stack
 * seen for the first time in a process (symbolize it while the process
 * lives), a process leaving, a target forking.
 */
enum mem_internal_kind {
	MEM_REC_STACK = 1,
	MEM_REC_EXIT = 2,
	MEM_REC_FORK = 3,
	MEM_REC_EXEC = 4,
};

struct mem_internal {
	struct nt_event_hdr hdr;
	__u32 kind;
	__u32 tgid;
	__u32 child;
	__s32 stack_id;
};


/* ------------------------------------------------------------------ */
/* Records built by the user side (schemas in mem.c, docs/mem.md)       */
/* ------------------------------------------------------------------ */

/* mem.rss: one process's resident memory, each interval it changed. */
struct mem_rss_event {
	struct nt_event_hdr hdr;
	__u64 rss_bytes;   /* file + anon + shmem */
	__u64 anon_bytes;
	__u64 file_bytes;
	__u64 shmem_bytes;
	__u64 swap_bytes;
	__u64 peak_rss_bytes;
	__u64 faults;      /* user page faults since tracing began */
	__u8 final;
	__u8 pad[7];
};

/* mem.heap: one process's allocator counters. */
struct mem_heap_event {
	struct nt_event_hdr hdr;
	__s64 live_bytes;
	__s64 live_allocs;
	__s64 peak_bytes;
	__u64 allocs;
	__u64 frees;
	__u64 alloc_bytes;
	__u64 freed_bytes;
	__s64 mmap_live_bytes;
	__s64 mmap_peak_bytes;
	__u64 mmaps;
	__u64 munmaps;
	__u64 untracked;
	__u64 sampled_out;
	__u64 stack_lost;
	__u8 final;
	__u8 pad[7];
};

/* mem.leak: outstanding allocations of one process from one stack. */
struct mem_leak_event {
	struct nt_event_hdr hdr;
	__u64 bytes;
	__u64 allocs;
	__u64 oldest_age_ns;
	__u32 rank;      /* 1 = most bytes */
	__s32 stack_id;
	__u8 final;
	__u8 kind;       /* enum mem_kind */
	__u8 pad[6];
	struct nt_vstr function;
	struct nt_vstr stack;
	/* strings follow */
};

/* mem.report: the per-process table as text. */
struct mem_report_event {
	struct nt_event_hdr hdr;
	__u8 final;
	__u8 pad[7];
	struct nt_vstr text;
	/* text follows */
};

#endif /* NTCORE_MEM_H */
