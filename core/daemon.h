/* SPDX-License-Identifier: MIT */
/*
 * The daemon: plugin instances and their lifecycle (load, init, attach, poll,
 * detach, fini), the host vtable, the libev loop with its signals, the
 * target child, reload and the end-of-run summary.
 */
#ifndef NTCORE_CORE_DAEMON_H
#define NTCORE_CORE_DAEMON_H

#include <ev.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "bus.h"
#include "config.h"
#include "loader.h"
#include "ident.h"
#include "labels.h"
#include "loghold.h"
#include "metrics.h"
#include "outputs.h"
#include "symbolize.h"
#include "target.h"

#define NT_STR2(x) #x
#define NT_STR(x) NT_STR2(x)
#define NT_ABI_TEXT NT_STR(NT_ABI_MAJOR) "." NT_STR(NT_ABI_MINOR)

enum nt_inst_state {
	NT_ST_LOADED,
	NT_ST_INITED,
	NT_ST_ATTACHED,
	NT_ST_FAILED,
	NT_ST_DETACHED,
};

struct nt_watch;
struct nt_sinkq;

struct nt_instance {
	struct nt_daemon *d;
	struct nt_loaded lib;
	const struct nt_inst_cfg *cfg; /* NULL for the core's own instance */
	char name[64];
	char prefix[80]; /* "probe:sched.0" */
	int log_level;
	struct nt_arena arena;
	void *config;
	void *state;
	enum nt_inst_state st;
	struct nt_watch **watches;
	size_t n_watches;
	uint64_t events_in, events_out, synced_in, synced_out;
	uint64_t dropped; /* written from any thread: atomics */
	uint32_t poll_errors;
	/* sinks: their own queue and thread (sinks.h), NULL for the others */
	struct nt_sinkq *q;
	uint64_t q_drops_synced;
	uint32_t sink_poll_errors; /* the sink's thread's own */
	int sink_failed;           /* atomic: -errno of a poll that kept failing */
	bool warned_thread;        /* atomic: a loop-only host call was refused */
	bool config_failed; /* init reported a config error: exit 2 */
	bool inited;        /* init succeeded: fini is owed */
};

struct nt_options {
	const char *config_path;
	const char *config_text; /* the embedded default when non-NULL */
	uint32_t *pids;
	size_t n_pids;
	const char **cgroups; /* --cgroup PATH, repeatable */
	size_t n_cgroups;
	double duration_s;
	bool verbose;
	bool check_only;
	char **argv; /* -- CMD ARGS, NULL-terminated, or NULL */
};

struct nt_daemon {
	struct ev_loop *loop;
	struct nt_options opt;
	struct nt_config cfg;
	struct nt_bus bus;
	struct nt_registry reg;
	struct nt_targets targets;
	struct nt_symbolizer sym;
	struct nt_ident_cache ident;   /* process identity (issue 21) */
	struct nt_label_policy labels; /* identity labels of metric families */
	struct nt_instance **insts;
	size_t n_insts;
	struct nt_instance core; /* publishes proc.exit, owns self-metrics */
	int64_t wall_offset_ns;
	uint64_t start_mono_ns;
	struct btf *vmlinux_btf; /* host->vmlinux_btf: parsed on first use */
	bool vmlinux_btf_tried;  /* parsed, or found missing, once per run */
	uint32_t exit_type, exec_type;
	uint64_t bus_drops_synced;
	uint32_t trim_ticks; /* selfsync ticks since the last malloc_trim */
	struct nt_metric *m_in, *m_out, *m_dropped, *m_state, *m_build, *m_ident;
	pid_t child;
	int child_gate;
	char **child_env;  /* "NAME=VALUE" given to the child at the gate */
	size_t n_child_env;
	int child_status;
	bool child_exited;
	int pending_signal; /* the user signal being handed out */
	int stop_signal;     /* the SIGINT/SIGTERM that is stopping the run */
	bool can_trace;      /* privileges to load BPF (privs.h) */
	char privs_need[192]; /* what is missing when !can_trace */
	struct nt_loghold hold; /* start-up errors held while unprivileged */
	struct nt_outputs outputs; /* files written, printed at the end */
	int stop_fd;   /* signalfd of SIGINT/SIGTERM, blocked in every thread */
	bool hurry;    /* a stop signal came during the shutdown: no more waiting */
	ev_io stop_io;
	ev_signal sig_hup, sig_usr1, sig_usr2;
	pthread_mutex_t outputs_lock; /* output_written may come from a sink's thread */
	pthread_t loop_thread;
	bool loop_thread_set;
	ev_async sink_async;     /* sink threads ask the loop for something */
	ev_prepare sink_prepare; /* commit the sinks' queues before blocking */
	size_t sink_queue_bytes; /* each sink's queue (NTCORE_SINK_QUEUE_KB) */
	ev_child child_watch;
	ev_timer duration_timer, selfsync_timer, grace_timer;
	ev_timer watchdog_timer; /* systemd WATCHDOG=1 (notify.h) */
	ev_io exits_io;
	ev_idle stop_idle;
};

/* Returns the process exit status: the wrapped command's (its exit code,
 * 128 + N when signal N killed it, 127 not found, 126 not executable) when
 * there is one and it ended; else 0, 1 runtime failure, 2 usage/config. */
int nt_daemon_run(const struct nt_options *opt);

/* Log through the start-up hold (loghold.h): printed now, or held. */
void nt_daemon_vlog(struct nt_daemon *d, int level, const char *prefix,
		    const char *fmt, va_list ap);
void nt_daemon_log(struct nt_daemon *d, int level, const char *prefix,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* host->stop_now: reads a pending SIGINT/SIGTERM; true once one came
 * while stopping (the loop is asked to stop if it still runs). */
bool nt_daemon_stop_now(struct nt_daemon *d);

/* A daemon set up as for a run (bus, registry, the core's event types),
 * and torn down, without running it: tests and fuzzers. */
void nt_daemon_setup(struct nt_daemon *d, const struct nt_options *opt);
void nt_daemon_teardown(struct nt_daemon *d);
/* The core's exit-ring callback (proc.exit, proc.exec records), for a
 * fuzzer to feed without a kernel. */
int nt_daemon_follow_record(struct nt_daemon *d, void *data, size_t size);

/* Print every plugin found in the search path (for --list-plugins). */
int nt_list_plugins(const struct nt_options *opt);
/* Print a plugin's config keys (for --help-plugin NAME). */
int nt_help_plugin(const struct nt_options *opt, const char *name);

#endif
