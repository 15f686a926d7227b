/* SPDX-License-Identifier: MIT */
/*
 * python probe, user side: the plugin's state shared by its files. One
 * struct py_plugin per instance (made by py_init, freed by py_fini) owns
 * every struct pyp (process), struct thr (thread), call name and
 * exception entry below, and the BPF skeleton. Everything runs on the
 * loop thread. What each file does:
 *   python.c    descriptor, config keys, init/poll/consume/flush/fini
 *   pyattach.c  BPF object, perf events, tracepoints; detach and quiesce
 *   pytarget.c  which processes are CPython, their registration and exit
 *   pyring.c    ring-buffer records -> aggregated stacks, calls, exceptions
 *   pyresolve.c code objects -> (function, file, line) frame ids
 *   pythread.c  per-thread bookkeeping: idle stacks, off-CPU time
 *   pypublish.c python.stack/report/calls/exception events and metrics
 *   pycuda.c    cuda.* events joined with Python stacks (pyjoin.c decides)
 *   pyevents.c  event schemas, metric descriptions, event building
 */
#ifndef NTCORE_PYPLUGIN_H
#define NTCORE_PYPLUGIN_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/ring.h"
#include "ntcore/plugin.h"

#include "python.bpf.skel.h"
#include "python.h"
#include "pyagg.h"
#include "pyevents.h"
#include "pyjoin.h"
#include "pyline.h"
#include "pylend.h"
#include "pymap.h"
#include "pyoffsets.h"
#include "pyproc.h"

enum { TOK_RING = 1, TOK_TICK = 2, TOK_REPORT = 3, TOK_DRAIN = 4 };

#define TICK_MS 100
/* The BPF side batches ring wake-ups (64 KiB) so that a sampled thread is
 * not preempted by this reader at every record; pending records are also
 * drained this often, so names are read while short-lived code objects and
 * processes still exist. */
#define DRAIN_MS 20
#define STATS_EVERY 10          /* ticks: BPF counters -> metrics */
#define FIND_TRIES 10           /* ticks an exec'd process may stay unfound (libs loading) */
#define INIT_TRIES 100          /* ticks waiting for an interpreter to initialise */
/* A cached code object is re-checked (its name pointers, one small read)
 * when used again after this long: a freed code object's address is soon
 * reused by another (module and class bodies are freed after they ran). */
#define CODE_RECHECK_NS 1000000ull
#define MAX_PROCS 4096
#define TEXT_MAX (64 * 1024)

struct py_cfg {
	int64_t frequency;
	int64_t max_frames;
	bool idle;
	bool native;
	bool lines;
	bool calls;
	const char *call_pattern;
	bool exceptions;
	int64_t top_n;
	int64_t report_interval_s;
	int64_t ringbuf_kb;
	int64_t max_stacks;
	int64_t native_stacks;
	bool cuda_join;
	bool other_users;
};

enum { PS_PENDING = 0, PS_ATTACHED = 1, PS_REFUSED = 2, PS_NOTPY = 3,
       PS_OTHER_USER = 4 /* host-wide, not ntcore's user's (other_users) */ };

struct code_ent {
	struct py_code c;
	uint64_t checked_ns;
	bool bad; /* not a code object / unreadable */
	/* the frame id of the instruction offset seen last: a sampled loop
	 * hits the same one again and again, and then needs no line table
	 * decoding and no name interning (frame ids live as long as the
	 * aggregate, this entry less long) */
	int last_addr;
	uint32_t last_frame; /* UINT32_MAX: none yet */
};

struct fn_pub { /* published totals of a top function's metrics */
	uint64_t self, total;
};

struct exc_ent {
	uint32_t pid, tid;
	const char *type;
	uint32_t top_frame; /* frame id of the raising frame */
	uint32_t stack;     /* stack id (state cpu, 0 samples) for the text */
	uint64_t count, published;
	char comm[NT_COMM_LEN];
};

struct call_name {
	char *func, *file;
	int line;
	bool match;
	struct py_call_stats pub;
};

struct pyp {
	uint32_t pid;
	char comm[NT_COMM_LEN]; /* for its events' headers (read from /proc) */
	int status;
	bool from_exec;     /* found by exec: keep looking while libs load */
	char pid_s[12];
	int tries, init_tries;
	struct py_found found;
	struct py_layout layout;
	uint64_t code_type;
	struct py_map codes;   /* code addr -> struct code_ent */
	struct py_map types;   /* type addr -> char * name */
	struct py_map fnpub;   /* interned function label -> struct fn_pub */
	struct bpf_link *l_entry, *l_return, *l_exc;
	bool in_bpf;
	uint64_t unresolved; /* frames whose code object could not be read */
	uint64_t inspected_ns; /* when it was last found (mono) */
	uint64_t join_how[4];  /* CUDA launches by enum pyj_how */
	uint64_t join_why[PYJ_WHY_N]; /* ... PYJ_NONE ones by enum pyj_why */
	uint64_t join_lag_max_ns; /* largest launch -> join delay (the event's age) */
};

struct thr {
	uint32_t pid;
	uint32_t idle_stack; /* UINT32_MAX: none */
	uint32_t cpu_stack;
	uint64_t cpu_ts;
	uint64_t acc_ns;
	uint64_t flushed_to; /* off-CPU time up to here already counted */
	/* CUDA join */
	struct pyj_hist hist;     /* recent on-CPU samples and idle walks */
	struct py_offhist oh;     /* py_offhist as read at oh_read (mono ns) */
	uint64_t oh_read, oh_cur_out;
	bool oh_cur_preempted;
	uint64_t ts_checked;      /* py_tstates looked up (launching threads) */
	bool ts_python;           /* it has a Python thread state with a
				   * Python frame */
};

struct py_plugin {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct py_cfg *cfg;
	int t_stack, t_report, t_calls, t_exc, t_proc;
	struct py_lend lend; /* python.launch_stack (pylend.h) */
	struct nt_metric *m[M_N];

	struct python_bpf *skel;
	struct nt_ring *rb;
	struct bpf_link **perf_links;
	int *perf_fds;
	int n_cpus;
	struct bpf_link *l_switch, *l_exec;
	bool attached;

	struct py_agg *agg;
	struct py_map procs;   /* pid -> struct pyp */
	struct py_map threads; /* tid -> struct thr */
	struct py_map names;   /* call key hash -> struct call_name (by key) */
	struct py_map siblings; /* (pid, func, file) hash -> resolved call_name */
	struct exc_ent *excs;
	size_t n_excs, cap_excs;
	uint64_t period_ns;
	uint32_t tick;
	uint64_t drops_reported;
	uint64_t stats_pub[8];
	uint64_t unresolved, unresolved_pub;
	int cuda_stack_field, cuda_kernel_field; /* cached per schema */
	const struct nt_schema *cuda_schema;
	char *text;      /* TEXT_MAX scratch for reports */
	uint8_t *evbuf;  /* event scratch */
	size_t evbuf_cap;
};

/* pytarget.c */
void read_comm(struct pyp *p);
struct pyp *proc_get(struct py_plugin *st, uint32_t pid, bool create);
void proc_unlink(struct py_plugin *st, struct pyp *p);
void proc_free(struct py_plugin *st, struct pyp *p);
void proc_inspect(struct py_plugin *st, struct pyp *p);
void proc_seen(struct py_plugin *st, uint32_t pid, bool exec, uint64_t ts);
void proc_gone(struct py_plugin *st, uint32_t pid);
void poll_targets(struct py_plugin *st);
void scan_host(struct py_plugin *st);

/* pyresolve.c */
struct code_ent *code_get(struct py_plugin *st, struct pyp *p,
				 uint64_t addr, uint64_t now);
uint32_t frame_of(struct py_plugin *st, struct pyp *p,
			 const struct py_frame *f, uint64_t now);
uint32_t native_frames(struct py_plugin *st, uint32_t pid, int32_t id,
			      uint32_t *out, uint32_t max);
uint32_t user_walk(struct py_plugin *st, struct pyp *p, uint32_t tid,
			  uint64_t tstate, const char *comm, uint64_t now);

/* pythread.c */
struct thr *thr_get(struct py_plugin *st, uint32_t tid, uint32_t pid);
void seed_idle(struct py_plugin *st, struct pyp *p);
void add_offcpu(struct py_plugin *st, struct thr *t, uint64_t start,
		       uint64_t end);
void flush_offcpu(struct py_plugin *st, uint32_t pid);

/* pyring.c */
uint64_t call_key_hash(const struct py_call_key *key);
int on_ring(void *ctx, void *data, size_t size);

/* pypublish.c */
void publish_all(struct py_plugin *st, uint32_t pid);
void read_stats(struct py_plugin *st);

/* pycuda.c */
void on_cuda_launch(struct py_plugin *st, const struct nt_event_hdr *ev,
			   const struct nt_schema *schema, bool launch);

/* pyattach.c */
void py_detach(void *state);
void py_quiesce(void *state);
int py_attach(void *state);

#endif /* NTCORE_PYPLUGIN_H */
