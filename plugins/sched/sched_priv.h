/* SPDX-License-Identifier: MIT */
/*
 * sched probe, user side: what its files share: the config, the state, the
 * metric indexes, and the functions one file calls in another. Private to
 * plugins/sched (sched.h is shared with the BPF side; this folder is not on
 * the include path, so files include it by quoted name).
 *
 * Files: sched.c (descriptor, config keys, ops), sched_schema.c (schemas
 * and metrics), sched_attach.c (flavour, load, attach, seeding),
 * sched_ring.c (ring handler), sched_threads.c (thread and process tables,
 * series, events), sched_read.c (map reading, retirement),
 * sched_report.c (snapshot, costs, report), sched_logic.c (pure helpers,
 * unit-tested).
 *
 * Ownership: struct sched_state is allocated by sched_init and freed by
 * sched_fini, with the threads and processes its tables hold.
 */
#ifndef NTCORE_SCHED_PRIV_H
#define NTCORE_SCHED_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/types.h>

#include "ntcore/kit/ring.h"
#include "ntcore/plugin.h"

#include "sched.h"
#include "sched_logic.h"

struct bpf_link;
struct bpf_program;
struct nt_ring;
struct sched_bpf;

/* Label names of the metric families (sched_schema.c) and of their
 * updates (sched_threads.c, sched_read.c, sched_report.c). */
static const char *const l_thread[] = { "pid", "tid", "comm" };
static const char *const l_kind[] = { "pid", "kind" };
static const char *const l_pid[] = { "pid" };
static const char *const l_prog[] = { "program" };
static const char *const no_labels[1] = { NULL };

enum { TOK_RING = 1, TOK_TICK = 2, TOK_REPORT = 3 };

#define NPROG 6 /* programs of one flavour */

/* Every this many ticks, thread-map entries are checked against /proc (a
 * thread whose exit record was lost would otherwise stay forever). */
#define STALE_EVERY 10
#define BATCH 1024

struct sched_cfg {
	int64_t interval_ms;
	int64_t report_interval_s;
	bool thread_events;
	bool switch_events;
	int64_t top_n;
	int64_t max_threads;
	int64_t max_processes;
	int64_t max_series;
	int64_t ringbuf_kb;
	int64_t exited_keep_ms;
	const char *attach;
	const char *runq_hist;
};

enum { M_ON, M_OFF, M_RUNQ, M_CSW, M_MIGR, M_HIST, M_THREADS, M_BPF_RUNS,
       M_BPF_SECS, M_FOLDED, M_N };

struct thr {
	uint32_t tid, pid;
	char tid_s[12];
	char comm[NT_COMM_LEN + 1];       /* now */
	char label_comm[NT_COMM_LEN + 1]; /* of the metric series */
	bool has_series;
	bool exited;
	uint32_t seen_tick, missing;
	uint64_t dead_ns; /* when it exited (CLOCK_MONOTONIC) */
	uint64_t last_ts;
	struct sched_totals pub;
};

struct proc {
	uint32_t pid;
	char pid_s[12];
	bool dead;
	bool has_series;
	bool has_hist;
	uint64_t dead_ns;
};

struct sched_state {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct sched_cfg *cfg;
	int t_thread, t_switch, t_report;
	struct nt_metric_desc mdesc[M_N];
	struct nt_metric *m[M_N];
	double bounds[SCHED_HIST_BOUNDS];

	struct sched_bpf *skel;
	struct bpf_link *links[NPROG];
	__u64 prog_runs[NPROG], prog_ns[NPROG]; /* kernel stats already counted */
	struct nt_ring *rb;
	bool btf;
	bool batch_ok;

	struct sched_map threads; /* tid -> struct thr */
	struct sched_map procs;   /* pid -> struct proc */
	struct sched_row *exited_top;
	size_t n_exited_top;
	uint64_t threads_seen;
	uint32_t tick;
	uint32_t ring_budget, ring_n;
	uint64_t start_ns;
	uint64_t drops_reported, full_reported, folded_reported;
	struct sched_hist hist_all; /* at the last read */

	__u32 *keys;
	struct sched_tstat *vals;
	struct thr **scratch;
	size_t scratch_cap;
};

/* ---- functions one file calls in another ---- */

/* sched_threads.c */
struct proc *sched_proc_get(struct sched_state *st, uint32_t pid);
void sched_thr_exit(struct sched_state *st, struct thr *t, uint64_t now);
void sched_thr_retire(struct sched_state *st, struct thr *t);
void sched_thread_update(struct sched_state *st, const struct sched_tstat *s,
			  uint64_t now, uint64_t se_now, bool exited);

/* sched_ring.c */
int sched_on_ring(void *ctx, void *data, size_t len);
int sched_ring_drain(struct sched_state *st, uint32_t budget);

/* sched_read.c */
uint64_t sched_proc_runtime(uint32_t tgid, uint32_t tid);
void sched_read_threads(struct sched_state *st, uint64_t now);
void sched_read_hists(struct sched_state *st);

/* sched_report.c */
size_t sched_thr_list(struct sched_state *st);

/* sched_read.c */
void sched_retire(struct sched_state *st, uint64_t now);
void sched_retire_procs(struct sched_state *st, uint64_t now);

/* sched_report.c */
void sched_snapshot(struct sched_state *st, bool final);
void sched_publish_report(struct sched_state *st);

/* sched_attach.c */
struct bpf_program *const *sched_progs_of(struct sched_bpf *s, bool btf,
					   struct bpf_program *out[NPROG]);
int sched_attach(void *state);

/* sched_attach.c */
void sched_detach(void *state);

/* sched_schema.c: registers the schemas and metrics; 0 or -errno. */
int sched_register(struct sched_state *st);

#endif /* NTCORE_SCHED_PRIV_H */
