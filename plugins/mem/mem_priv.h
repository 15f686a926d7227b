/* SPDX-License-Identifier: MIT */
/*
 * mem probe, user side: what its files share: the config, the state, the
 * metric indexes, and the functions one file calls in another. Private to
 * plugins/mem (mem.h is shared with the BPF side).
 *
 * Files: mem.c (descriptor, config keys, ops), mem_schema.c (schemas and
 * metrics), mem_attach.c (BPF object, tracepoints, attach), mem_ring.c (ring
 * handler), mem_procs.c (process table, links, reaper), mem_libc.c (which C
 * library), mem_uprobes.c (allocator uprobes), mem_stacks.c (symbolizing),
 * mem_report.c (events and metrics), mem_tick.c (interval work), mem_exit.c
 * (exited processes), mem_logic.c (pure helpers, unit-tested).
 *
 * Ownership: struct mem_state is allocated by mem_init and freed by
 * mem_fini; everything it points to is its own unless said.
 */
#ifndef NTCORE_MEM_PRIV_H
#define NTCORE_MEM_PRIV_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/kit/ring.h"
#include "ntcore/plugin.h"

#include "mem.h"
#include "mem_logic.h"

struct bpf_link;
struct nt_ring;
struct nt_linkset;
struct mem_bpf;

#define TOKEN_RING 1
#define TOKEN_TICK 2
#define TOKEN_RETRY 3

#define STACK_TEXT_MAX 4096
#define SYM_BUDGET 256 /* new stacks symbolized per poll */
#define FINALIZE_EVERY_NS 200000000ull /* exit reports batched over 200 ms */
#define REPORT_TEXT_MAX 16384

/*
 * BPF_LINK_CREATE for a uprobe_multi link (Linux 6.6), laid out by hand:
 * the installed UAPI header and libbpf 1.1 predate it. The first 16 bytes
 * are link_create's prog_fd, target_fd, attach_type and flags.
 */
#define MEM_BPF_TRACE_UPROBE_MULTI 48
#define MEM_BPF_F_UPROBE_MULTI_RETURN 1

struct mem_config {
	struct nt_strlist functions;
	const char *heap;
	const char *heap_scope;
	const char *library;
	int64_t sample_min_bytes;
	int64_t sample_every;
	bool stacks;
	int64_t stack_depth;
	int64_t interval_ms;
	int64_t top_n;
	int64_t min_age_ms;
	bool track_mmap;
	bool attach_skip;
	bool rss;
	bool faults;
	bool oom;
	int64_t max_allocs;
	int64_t max_stacks;
};

enum {
	M_RSS,
	M_RSS_ANON,
	M_RSS_PEAK,
	M_SWAP,
	M_FAULTS,
	M_OOM,
	M_HEAP_LIVE,
	M_HEAP_LIVE_ALLOCS,
	M_HEAP_PEAK,
	M_HEAP_ALLOCS,
	M_HEAP_FREES,
	M_HEAP_ALLOC_BYTES,
	M_HEAP_FREED_BYTES,
	M_MMAP_LIVE,
	M_UNTRACKED,
	M_COUNT,
};

/* One process the plugin has seen (target, or any process host-wide). */
struct mem_proc_info {
	uint32_t pid;
	char comm[NT_COMM_LEN];
	bool finalized;
	bool heap_attached;
	uint64_t gone_ns; /* when finalized: series removed one interval later */
	uint64_t comm_ns; /* when comm was read (a -- CMD child execs later) */
	/* last values pushed to counters / published */
	uint64_t c_faults, c_allocs, c_frees, c_alloc_bytes, c_freed_bytes, c_untracked;
	uint64_t pub_rss, pub_peak, pub_faults, pub_swap;
	uint64_t pub_allocs, pub_frees, pub_mmaps, pub_munmaps;
	struct mem_link *links; /* per-pid uprobes */
	size_t n_links;
	char lib[PATH_MAX];
};

struct mem_sym_retry {
	uint32_t tgid;
	int32_t stack_id;
	uint64_t first_ns;
};

/* An attach point resolved once per library file. */
struct mem_fn_point {
	unsigned fn;
	uint64_t off; /* file offset + skip */
	bool ok;
};

struct mem_lib {
	char path[PATH_MAX];
	struct mem_fn_point pts[MEM_FN_COUNT];
	size_t n_pts;
};

/* A BPF link: from libbpf, or a raw fd (uprobe_multi, unknown to libbpf 1.1). */
struct mem_link {
	struct bpf_link *link;
	int fd;
};

/*
 * Unregistering a uprobe waits for a kernel grace period (~0.1 s a link on
 * the project's VMs), so links of processes that left are destroyed by a
 * worker thread and the loop never waits for them.
 */
struct mem_reaper {
	pthread_t th;
	bool started, stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct mem_link *q;
	size_t n, cap;
};

struct mem_state {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct mem_config *cfg;
	struct mem_bpf *skel;
	struct nt_ring *rb;
	uint32_t fn_mask;
	bool heap_on;      /* heap probes wanted */
	bool per_pid;      /* uprobes bound to target pids (else pid -1) */
	int t_rss, t_heap, t_leak, t_report, t_oom;
	struct nt_metric *m[M_COUNT];
	uint64_t drops_reported;
	uint32_t page_shift;

	struct mem_proc_info **procs; /* sorted by pid */
	size_t n_procs, cap_procs;

	struct mem_lib *libs;
	size_t n_libs;

	struct mem_link *glinks; /* pid -1 uprobes */
	size_t n_glinks;
	struct mem_link *tlinks; /* tracepoints */
	size_t n_tlinks;

	uint32_t *exits; /* processes to finalize */
	size_t n_exits, cap_exits;

	struct mem_reaper reaper;
	uint32_t sym_budget; /* stacks symbolized eagerly in this poll */
	struct mem_sym_retry *retry; /* incomplete stacks to symbolize again */
	size_t n_retry;
	uint64_t last_finalize_ns;
	bool multi_ok; /* uprobe_multi links work (Linux 6.6+) */
	struct mem_symcache syms;
	struct mem_groups groups;
	char *buf; /* event assembly */
	size_t buf_len;
	char self_exe[PATH_MAX];
	char self_libc[PATH_MAX];
};

struct pid_gen {
	uint32_t tgid, gen;
};

struct scan_ctx {
	const uint32_t *only; /* NULL: every process; else this sorted set */
	size_t n_only;
	uint64_t min_ts;      /* skip allocations newer than this */
	struct pid_gen *gens; /* current image of each process, sorted */
	size_t n_gens;
	/* keys to delete: of finalized processes, or of an image before exec */
	struct mem_alloc_key *doomed;
	size_t n_doomed, cap_doomed;
};

/* ---- functions one file calls in another ---- */

/* mem_procs.c */
struct mem_proc_info *mem_proc_find(struct mem_state *st, uint32_t pid,
				       size_t *pos);
void mem_proc_read_comm(struct mem_proc_info *p);
struct mem_proc_info *mem_proc_get(struct mem_state *st, uint32_t pid);
void mem_reaper_push(struct mem_reaper *r, struct mem_link *links, size_t n);
void mem_reaper_stop(struct mem_reaper *r);
void mem_proc_links_destroy(struct mem_state *st, struct mem_proc_info *p);
void mem_proc_remove(struct mem_state *st, uint32_t pid);

/* mem_libc.c */
int mem_resolve_self_libc(struct mem_state *st, char *out, size_t len);
bool mem_proc_is_unexeced_child(struct mem_state *st, uint32_t pid);
int mem_resolve_libc(struct mem_state *st, uint32_t pid, char *out, size_t len);

/* mem_procs.c */
int mem_links_push(struct mem_link **v, size_t *n, struct bpf_link *l, int fd);

/* mem_uprobes.c */
int mem_heap_attach(struct mem_state *st, int pid, const char *path,
		       struct mem_link **links, size_t *n_links);
int mem_heap_attach_pid(struct mem_state *st, uint32_t pid);

/* mem_stacks.c */
void mem_symbolize_stack(struct mem_state *st, uint32_t tgid, int32_t stack_id);
void mem_retry_stacks(struct mem_state *st);

/* mem_report.c */
void mem_report_rss(struct mem_state *st, uint32_t pid,
		       const struct mem_proc *pr, bool final);
void mem_report_heap(struct mem_state *st, uint32_t pid,
			const struct mem_heap_stats *hs, bool final);
void mem_report_stacks(struct mem_state *st, uint32_t pid, bool final,
			  const struct mem_group *gs, size_t total,
			  const struct mem_heap_stats *hs, bool have_hs,
			  const struct mem_proc *pr, bool have_pr);

/* mem_exit.c */
void mem_scan_allocs(struct mem_state *st, struct scan_ctx *sc);

/* mem_tick.c */
void mem_tick(struct mem_state *st);

/* mem_exit.c */
void mem_queue_exit(struct mem_state *st, uint32_t pid, const char *comm);
void mem_finalize_pending(struct mem_state *st);

/* mem_ring.c */
int mem_on_record(void *ctx, void *data, size_t size);

/* mem_procs.c */
void mem_links_take(struct nt_linkset *ls, struct mem_link **links,
		       size_t *n);

/* mem_attach.c */
int mem_attach(void *state);

/* mem_schema.c: registers the schemas and metrics; 0 or -errno. */
int mem_register(struct mem_state *st);

#endif /* NTCORE_MEM_PRIV_H */
