/* SPDX-License-Identifier: MIT */
/*
 * ntcore cuda_gpu: GPU time from CUPTI activity records, gathered by the
 * injection library (inject*.c) in jobs started as `ntcore -- CMD` and
 * joined with the cuda probe's host calls and the python probe's stacks.
 *
 * Files: gpu.c (descriptor, config, ops, consume), gpu_server.c (the socket
 * the jobs connect to, message parsing), gpu_records.c (records -> join ->
 * events, the wait for late host calls), gpu_events.c (schemas and
 * publishing), gpu_metrics.c (per-kernel time, busy ratios, queueing delay,
 * copies), gpu_folded.c (GPU-weighted folded stacks), gpu_join.c (the join,
 * pure), gpu_util.c (plumbing). The contract with the trace sink is
 * docs/cuda-gpu.md ("Events").
 */
#ifndef NTCORE_GPU_H
#define NTCORE_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include <ntcore/plugin.h>

#include "gpu_join.h"
#include "gpu_util.h"
#include "gpu_wire.h"

struct gpu_cfg {
	bool inject;
	const char *library;    /* "" : libntcore-cupti.so.1 next to this plugin */
	const char *cupti_path; /* "" : the job's own search */
	int64_t flush_ms;
	int64_t buffers, buffer_kb;
	struct nt_strlist kinds;
	bool api_records;       /* CUPTI API records: thread, launch event, stacks */
	int64_t join_wait_ms;
	int64_t max_calls, max_apis, max_pending;
	int64_t interval_ms, report_interval_s;
	int64_t max_series, max_stacks, max_connections;
	bool stream_busy;
	bool folded;
};

/* A record waiting for its API record or host call. */
struct gpu_pending {
	uint32_t pid;
	uint64_t arrival_ns, seq;
	union {
		struct nt_gpu_rec h;
		struct nt_gpu_kernel k;
		struct nt_gpu_memcpy c;
		struct nt_gpu_memset s;
	} r;
};

/* One traced process: its connection and its join state. */
struct gpu_pstate {
	uint32_t pid;
	int fd;                /* -1 once closed */
	uint64_t seq;          /* messages received */
	uint64_t closed_ns;    /* when its connection ended (0: open) */
	uint32_t status;       /* hello status; UINT32_MAX before the hello */
	bool tracing;          /* hello said OK */
	struct gpu_proc *join;
	uint64_t cupti_dropped, send_dropped; /* last counts reported */
	uint64_t n_records, n_joined[GPU_JOIN_N]; /* n_joined: since the last tick */
	uint64_t tot_joined[GPU_JOIN_N];
	uint64_t host_calls;   /* host calls of the cuda probe seen */
	char comm[16];
};

struct gpu_metrics;
struct gpu_folded;

#define GPU_PARKED_MAX 16
#define GPU_EXITS_KEPT 64
#define GPU_PARKED_NS 2000000000ull /* how long a parked connection waits */

struct gpu_plugin {
	struct nt_instance *inst;
	const struct nt_host *host;
	const struct gpu_cfg *cfg;
	struct gpu_strtab strs; /* stacks and kernel names */
	struct gpu_map procs;   /* pid -> struct gpu_pstate * */
	/* the socket */
	char dir[256], sock_path[300];
	int listen_fd, epoll_fd;
	uint32_t n_conns;
	bool injecting;
	/* connections of pids not (or no longer) in the target map, waiting
	 * for that pid's proc.exit to show it was traced (a short job can
	 * connect, run and exit before the loop accepts it) */
	struct { int fd; uint32_t pid; uint64_t since; } parked[GPU_PARKED_MAX];
	uint32_t n_parked;
	struct { uint32_t pid; uint64_t ts; } exits[GPU_EXITS_KEPT]; /* recent proc.exit */
	uint32_t exits_next;
	/* records waiting for their host side (FIFO) */
	struct gpu_pending *pend;
	uint32_t pend_head, pend_n, pend_cap;
	/* event types */
	int t_kernel, t_memcpy, t_memset, t_sync, t_stack, t_process;
	struct nt_sb ev;      /* the event being built */
	struct nt_sb text;    /* scratch */
	struct gpu_metrics *m;
	struct gpu_folded *fold;
	uint64_t last_report_ns;
	uint64_t malformed;
	uint32_t fixed_names[24]; /* gpu_records.c: names of copies, sets, syncs */
	/* schema field offsets of the events consumed (cached per schema) */
	const struct nt_schema *seen_schema[8];
	int seen_stack[8], seen_api[8], seen_py[8];
	uint32_t n_seen;
};

/* gpu_server.c */
int gpu_server_open(struct gpu_plugin *g, char *why, size_t why_len);
int gpu_server_poll(struct gpu_plugin *g, uint32_t budget);
/* Accept connections waiting now (a host call of an unknown pid). */
void gpu_server_accept_now(struct gpu_plugin *g);
/* A traced process exited (proc.exit): its parked connection is taken. */
void gpu_server_exited(struct gpu_plugin *g, uint32_t pid, const char *comm);
/* Parked connections whose pid never proved traced are refused. */
void gpu_server_expire(struct gpu_plugin *g, uint64_t now);
void gpu_server_close(struct gpu_plugin *g);
struct gpu_pstate *gpu_pstate_of(struct gpu_plugin *g, uint32_t pid);
void gpu_pstate_free(struct gpu_plugin *g, struct gpu_pstate *ps);

/* gpu_records.c */
void gpu_records_message(struct gpu_plugin *g, struct gpu_pstate *ps,
			 const uint8_t *msg, size_t len);
/* Retry waiting records; `all` gives up waiting (shutdown). */
void gpu_records_retry(struct gpu_plugin *g, bool all);
/* A process is finished: its waiting records are joined as they are. */
void gpu_records_forget(struct gpu_plugin *g, uint32_t pid);

/* gpu_events.c */
int gpu_events_register(struct gpu_plugin *g);
struct gpu_exec {
	struct gpu_pstate *ps;
	const struct gpu_joined *j;
	uint64_t start, end;
	int32_t device;
	uint64_t stream;
	uint32_t correlation;
	const char *name; /* the slice's name */
};
void gpu_publish_kernel(struct gpu_plugin *g, const struct gpu_exec *x,
			const struct nt_gpu_kernel *k);
void gpu_publish_memcpy(struct gpu_plugin *g, const struct gpu_exec *x,
			const struct nt_gpu_memcpy *c);
void gpu_publish_memset(struct gpu_plugin *g, const struct gpu_exec *x,
			const struct nt_gpu_memset *s);
void gpu_publish_sync(struct gpu_plugin *g, const struct gpu_exec *x,
		      const struct nt_gpu_sync *s);
void gpu_publish_process(struct gpu_plugin *g, const struct gpu_pstate *ps,
			 const struct nt_gpu_hello *h, int err);
void gpu_publish_stack(struct gpu_plugin *g, uint32_t pid, uint32_t tid,
		       const char *comm, const char *stack, size_t len,
		       uint64_t us, uint64_t ns, uint64_t launches);
/* The thread name of (pid, tid), from the join or /proc. */
const char *gpu_comm_of(struct gpu_plugin *g, struct gpu_pstate *ps,
			const struct gpu_joined *j);

/* gpu_metrics.c */
struct gpu_metrics *gpu_metrics_new(struct gpu_plugin *g);
void gpu_metrics_free(struct gpu_metrics *m);
void gpu_metrics_exec(struct gpu_metrics *m, uint32_t pid, unsigned what,
		      uint32_t name_id, int32_t device, uint64_t stream,
		      uint64_t start, uint64_t end, uint64_t bytes, unsigned kind);
/* Launch API call entry -> kernel start, once the kernel is joined. */
void gpu_metrics_queue(struct gpu_metrics *m, uint32_t pid, uint64_t ns);
void gpu_metrics_tick(struct gpu_metrics *m, uint64_t now);
void gpu_metrics_forget(struct gpu_metrics *m, uint32_t pid);
void gpu_metrics_process(struct gpu_metrics *m, int delta);

/* gpu_folded.c */
struct gpu_folded *gpu_folded_new(uint32_t max_stacks);
void gpu_folded_free(struct gpu_folded *f);
/* Add GPU time under (pid, tid, base stack, leaf name). */
void gpu_folded_add(struct gpu_folded *f, uint32_t pid, uint32_t tid,
		    const char *comm, uint32_t base, uint32_t name, uint64_t ns);
typedef void (*gpu_folded_fn)(void *arg, uint32_t pid, uint32_t tid,
			      const char *comm, uint32_t base, uint32_t name,
			      uint64_t us, uint64_t ns, uint64_t launches);
/* Visit the entries of pid (0: all) that grew since the last emit. */
void gpu_folded_emit(struct gpu_folded *f, uint32_t pid, gpu_folded_fn fn, void *arg);
void gpu_folded_forget(struct gpu_folded *f, uint32_t pid);
/* Publish cuda.gpu_stack events (pid 0: all). */
void gpu_stacks_publish(struct gpu_plugin *g, uint32_t pid);

/* what for gpu_metrics_exec */
enum { GPU_X_KERNEL = 1, GPU_X_MEMCPY, GPU_X_MEMSET, GPU_X_SYNC };

/* Names of CUPTI's copy kinds ("HtoD") and sync types. */
const char *gpu_copy_kind_name(unsigned kind);
const char *gpu_copy_kind_label(unsigned kind); /* "h2d" */
const char *gpu_sync_type_name(unsigned type);

/* gpu_env.c: the injection library's path (next to this plugin's file)
 * and the job's environment; gpu_set_env returns 0 when the library goes
 * in, 1 when not (no job: said once), or -errno. */
int gpu_library_path(struct gpu_plugin *g, char *out, size_t len);
int gpu_set_env(struct gpu_plugin *g, const char *lib);

#endif
