/* SPDX-License-Identifier: MIT */
/*
 * cuda probe, user side: the plugin's state (struct cuda) and what its
 * files share. cuda.c holds the descriptor, config and ops; cuda_load.c
 * opens and loads the BPF object; cuda_attach.c finds libraries and
 * attaches uprobes; cuda_ring.c handles the ring's records; cuda_publish.c
 * publishes decoded records and their metrics; cuda_periodic.c copies
 * counts from the BPF maps and reports processes that exit; cuda_schema.c
 * holds the schemas and metric families. Pure decoding lives in
 * cuda_decode.c and cuda_graph.c (unit-tested).
 */
#ifndef NTCORE_CUDA_PLUGIN_H
#define NTCORE_CUDA_PLUGIN_H

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/hmap.h"
#include "ntcore/kit/links.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/ring.h"
#include "ntcore/plugin.h"

#include "cuda.bpf.skel.h"
#include "cuda_decode.h"
#include "cuda_lib.h"
#include "uprobes.h"

enum { TOK_RING = 1, TOK_TICK = 2 };
/* the longest a record that does not wake the reader waits in the ring */
#define RING_READ_MS 50

/* Gauges of an exited process are removed this many ticks later. */
#define DEAD_TICKS 2

struct fn_cfg {
	const char *library;
	struct nt_strlist symbols;
	double threshold_ms;
};

struct cuda_cfg {
	const char *launch_layer;
	bool stacks;
	int64_t stack_depth;
	bool launch_events;
	bool enter_events;
	bool stop_on_load;
	bool watch_libraries;
	struct nt_strlist libraries;
	int64_t interval_ms;
	int64_t ringbuf_kb;
	bool report;
	int64_t max_series;
	struct nt_cfg_array functions;
};

enum {
	M_LAUNCH, M_GRAPH, M_DEVBYTES, M_ALLOC_BYTES, M_ALLOCS, M_FREE_BYTES,
	M_FREES, M_COPY_BYTES, M_COPIES, M_COPY_SEC, M_COPY_BW, M_SYNC_SEC,
	M_SYNCS, M_ERRORS, M_CALLS, M_CALL_SEC, M_SLOW, M_NAMED, M_HITS, M_N
};

struct lib {
	uint64_t dev, ino;
	char *path;
	int kind; /* enum nt_cuda_libkind, or -1: checked, nothing to probe */
	bool is_static;
	struct nt_uprobes up;     /* its links (uprobes.h) */
	/* auto layer, no driver known: this runtime's launch probes, apart,
	 * to be detached when a driver shows up (launch_fallback_end) */
	struct nt_uprobes fallback;
};

struct fn_entry {
	char *library;
	char *symbol;
	uint64_t threshold_ns;
};

/* Last launch count seen per BPF key (for metric deltas): the value of
 * struct cuda's lc map. */
struct lcount {
	uint64_t count;
	int32_t slot; /* fast-path slot in lslots, -1 none */
};

/* Last function-table stats seen per (pid, fn). */
struct fcount {
	struct nt_cuda_fn_key key;
	struct nt_cuda_fn_stats st;
	bool used;
};

struct cuda {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct cuda_cfg *cfg;
	int types[NT_CUDA_EVT_N];
	struct nt_metric_desc mdesc[M_N];
	struct nt_metric *m[M_N];
	uint64_t hits_seen[NT_CUDA_SPEC_MAX]; /* probe_hits already published */
	struct nt_cuda_state st;
	struct cuda_bpf *skel;
	struct bpf_link *tp_links[2]; /* library discovery: openat, exec */
	struct nt_ring *rb;
	struct lib *libs;
	size_t nlibs, caplibs;
	struct fn_entry *fns;
	size_t nfns;
	struct nt_hmap lc; /* struct nt_cuda_launch_key -> struct lcount */
	struct nt_cuda_lslot *lslots; /* mmapped BPF array (fast launch path) */
	size_t lslots_len;
	struct fcount *fc;
	size_t nfc, capfc;
	int layer_launch; /* bit 1: runtime, bit 2: driver */
	bool auto_layer;  /* launch_layer = "auto" (see launch_fallback_*) */
	size_t n_driver_libs;
	bool fallback_on; /* launches probed at the runtime layer for now */
	uint32_t handover_until; /* tick at which the hand-over is over */
	uint32_t opener_tid; /* the thread whose open is being handled, or 0 */
	bool multi;       /* kernel has uprobe_multi links (6.6+) */
	bool attached;
	uint64_t drops_reported;
	uint64_t probes;
	uint32_t tick;
	struct nt_cuda_rec rec[2];
	char pidbuf[16];
};

/* Probes of one program in one file, attached together. */
struct batch {
	struct bpf_program *prog;
	bool ret;
	size_t n;
	uint64_t offs[NT_CUDA_API_COUNT + NT_CUDA_FN_MAX];
	uint64_t cookies[NT_CUDA_API_COUNT + NT_CUDA_FN_MAX];
	const char *names[NT_CUDA_API_COUNT + NT_CUDA_FN_MAX];
};

extern const struct nt_schema cuda_schemas[NT_CUDA_EVT_N];
extern const struct nt_metric_desc cuda_metric_tmpl[M_N];

/* cuda_load.c */
int cuda_load(struct cuda *c);
void cuda_attach_discovery(struct cuda *c);

/* cuda_publish.c */
int sym_cb(void *arg, uint32_t pid, uint64_t addr, struct nt_symbol *out);
const char *pid_s(struct cuda *c, uint32_t pid);
/* n launches of func counted: add them to the launches named by its naming
 * method (ntcore_cuda_launches_named_total, cuda_kname.h). */
void count_named(struct cuda *c, uint32_t pid, uint64_t func, uint64_t n);
/* Logs the learned name offset once; final: and how often it served. */
void log_kname_offset(struct cuda *c, bool final);
struct lcount *lc_get(struct cuda *c, const struct nt_cuda_launch_key *k);
void lc_forget_slots(struct cuda *c);
struct fcount *fc_get(struct cuda *c, const struct nt_cuda_fn_key *k);
const char *mem_kind_label(uint32_t k);
void count_graph_kernels(struct cuda *c, uint32_t pid, uint64_t exec);
void account(struct cuda *c, const struct nt_event_hdr *ev);
void publish(struct cuda *c, struct nt_cuda_rec *r);

/* cuda_attach.c */
void batch_add(struct batch *b, uint64_t off, uint64_t cookie,
		      const char *name);
void attach_warn(void *arg, const char *path, const char *name,
			bool ret, int err);
int batch_attach(struct cuda *c, struct lib *l, struct batch *b);
bool launch_layer_on(struct cuda *c, int layer);
bool launch_fallback_wanted(const struct cuda *c, int layer);
void launch_fallback_attach(struct cuda *c, struct lib *l,
				   struct batch *rt, struct batch *rt_ex);
void forget_rt_marks(struct cuda *c, uint32_t keep);
void launch_fallback_end(struct cuda *c, const struct lib *drv);
bool fn_lib_matches(const struct fn_entry *fe, const char *path,
			   const struct stat *st);
struct lib *lib_find(struct cuda *c, uint64_t dev, uint64_t ino);
bool exe_has_runtime(struct cuda *c, const char *path);
void proc_comm(uint32_t pid, char comm[NT_COMM_LEN]);
void publish_library(struct cuda *c, const struct lib *l, uint32_t pid,
			    int err, size_t nprobes);
int probe_file(struct cuda *c, const char *path, uint32_t pid);
void probe_file_cb(void *arg, const char *path, uint32_t pid);
void scan_pid(struct cuda *c, uint32_t pid);
void probe_path_cb(void *arg, const char *path);
void scan_default_paths(struct cuda *c);
int scan_pid_cb(void *arg, uint32_t pid);
void scan_all_pids(struct cuda *c);

/* cuda_ring.c */
void slot_install(struct cuda *c, uint32_t tgid, uint16_t api,
			 uint64_t func);
uint64_t slot_count(struct cuda *c, const struct lcount *lc);
void mark_exe_known(struct cuda *c, const struct nt_cuda_raw_path *p);
void on_path(struct cuda *c, const struct nt_cuda_raw_path *p);
void on_fn(struct cuda *c, const struct nt_cuda_raw_fn *r, size_t size);
int on_record(void *ctx, void *data, size_t size);

/* cuda_periodic.c */
void sync_launches(struct cuda *c, uint32_t only_pid,
			  struct nt_cuda_kcount **top, size_t *ntop);
void sync_fns(struct cuda *c, uint32_t only_pid);
/* Publish the uprobe hits per function since the last call; at_end: also
 * log the most hit ones (what the probe cost). */
void sync_hits(struct cuda *c, bool at_end);
void forget_launch_keys(struct cuda *c, uint32_t pid);
void proc_gone(struct cuda *c, uint32_t pid);
void reap_dead(struct cuda *c, bool all);

#endif /* NTCORE_CUDA_PLUGIN_H */
