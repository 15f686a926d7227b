/* SPDX-License-Identifier: MIT */
/*
 * ntcore SDK: the plugin ABI.
 *
 * A plugin is a shared object that exports exactly one data symbol,
 * NT_PLUGIN_SYMBOL, a `const struct nt_plugin_desc`. The daemon dlopens it,
 * checks the descriptor, validates the plugin's libconfig group against the
 * config schema the descriptor declares, and then drives the ops. Plugins
 * never link against the daemon: everything they may ask of it is in the
 * `struct nt_host` vtable passed to init.
 *
 * Compatibility rules (ABI NT_ABI_MAJOR.NT_ABI_MINOR):
 *  - The loader refuses a descriptor whose abi_major differs from its own,
 *    naming both versions.
 *  - Within a major, structs only grow at their end. Each versioned struct
 *    starts with its own `size`; the reader never reads a field at or beyond
 *    that size. A plugin built against an older minor therefore loads in a
 *    newer core (the missing trailing ops are treated as absent), and a
 *    plugin that wants a host function added in a later minor checks
 *    NT_HOST_HAS(host, fn) before calling it.
 *  - Enum values and field meanings never change within a major.
 *
 * History (each addition is marked in its struct, as sqlite3ext.h does):
 *  1.0 first release;
 *  1.1 added nt_plugin_desc.flush;
 *  1.2 added nt_host.vlog (a log safe from any thread) and
 *      nt_host.vmlinux_btf (the kernel's BTF, parsed once per daemon run);
 *  1.3 added nt_host.child_setenv (the environment of the -- CMD child);
 *  1.4 added nt_plugin_desc.on_signal (SIGUSR1 and SIGUSR2 to plugins)
 *      and nt_host.output_written (files to name at the end of the run);
 *  1.5 added nt_host.stop_now (a second SIGINT/SIGTERM ends a sink's wait);
 *  1.6 added nt_plugin_desc.quiesce (stop producing before the last read
 *      of the rings at shutdown); sinks' consume, poll and on_signal run
 *      on the sink's own thread (see Threads);
 *  1.7 added nt_host.identity (a process's cgroup, container and pod,
 *      identity.h; safe from any thread).
 *
 * Threads: every op and every host function is called on the daemon's single
 * loop thread, except the metric_* functions, metrics_visit, count_drop and
 * vlog, which are safe from any thread (a sink may serve metrics or log from
 * its own thread), and except:
 *  - a sink's consume, and its poll and on_signal while the loop runs, are
 *    called on the sink's own thread, behind its own bounded queue (a sink
 *    that falls behind loses its own events, counted as
 *    ntcore_events_dropped_total{stage="sink_queue"}, and nobody waits for
 *    it). They are never called concurrently with each other or with the
 *    sink's other ops, which stay on the loop thread (init, attach, flush,
 *    detach, fini). From the sink's thread the host's loop-thread
 *    functions (publish, subscribe, register_schema, watch_fd, add_timer,
 *    symbolize, child_setenv) are refused with -EPERM; log, instance_name,
 *    wall_ns, schema_of, target_pids, config_file, output_written and
 *    stop_now (which there only reports a stop already asked for) may be
 *    called there;
 *  - quiesce (1.6) runs on a thread of its own, at the same time as the
 *    other probes' quiesce.
 */
#ifndef NTCORE_PLUGIN_H
#define NTCORE_PLUGIN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event.h"
#include "identity.h"

#define NT_ABI_MAJOR 1
#define NT_ABI_MINOR 7

/* The one exported data symbol of every plugin .so. */
#define NT_PLUGIN_SYMBOL "ntcore_plugin"
#define NT_PLUGIN_EXPORT                                                       \
	__attribute__((visibility("default"))) extern const struct nt_plugin_desc \
		ntcore_plugin;                                                 \
	__attribute__((visibility("default"))) const struct nt_plugin_desc     \
		ntcore_plugin

/* Opaque handle of one configured instance of a plugin ("cuda.0"). */
struct nt_instance;
/* Opaque handle of one registered metric family. */
struct nt_metric;
/* libbpf's parsed BTF (<bpf/btf.h>); only pointers to it cross the ABI. */
struct btf;

enum nt_plugin_kind {
	NT_KIND_PROBE = 1,    /* collects: BPF programs, pollers */
	NT_KIND_DETECTOR = 2, /* consumes events, publishes alerts */
	NT_KIND_SINK = 3,     /* delivers events and metrics elsewhere */
};

enum nt_log_level {
	NT_LOG_ERROR = 0,
	NT_LOG_WARN = 1,
	NT_LOG_INFO = 2,
	NT_LOG_DEBUG = 3,
};

/* ------------------------------------------------------------------ */
/* Config declared as data                                             */
/* ------------------------------------------------------------------ */

/*
 * Value types of config keys and the C type the core stores at `offset`
 * inside the plugin's config struct (of `config_size` bytes):
 *   NT_CFG_BOOL        bool
 *   NT_CFG_INT         int64_t      (bounds min..max when min <= max)
 *   NT_CFG_FLOAT       double       (bounds likewise; an int literal is accepted)
 *   NT_CFG_STRING      const char * (one of `choices` when set)
 *   NT_CFG_STRING_LIST struct nt_strlist
 *   NT_CFG_GROUP_LIST  struct nt_cfg_array: a list of groups, each validated
 *                      against `sub` and stored as a `sub_size`-byte struct
 * All strings and arrays are owned by the core and stay valid until fini.
 */
enum nt_cfg_type {
	NT_CFG_BOOL = 1,
	NT_CFG_INT,
	NT_CFG_FLOAT,
	NT_CFG_STRING,
	NT_CFG_STRING_LIST,
	NT_CFG_GROUP_LIST,
};

struct nt_strlist {
	const char *const *v;
	uint32_t n;
};

struct nt_cfg_array {
	const void *items; /* n structs of the key's sub_size bytes each */
	uint32_t n;
};

/*
 * One config key. `def` is the default as libconfig text ("true", "100",
 * "0.5", "\"/var/log\"", "[\"a\", \"b\"]"), or NULL for "required"; a
 * GROUP_LIST defaults to empty. The core rejects unknown keys and values of
 * the wrong type or out of bounds with FILE:LINE before init runs, and prints
 * `ntcore --help-plugin NAME` from these entries.
 */
struct nt_cfg_key {
	const char *key;
	uint32_t type;    /* enum nt_cfg_type */
	uint32_t offset;  /* offsetof(plugin config struct, member) */
	const char *def;
	double min, max;  /* numeric bounds, ignored when min > max */
	const char *desc; /* one line, shown in --help-plugin */
	const char *const *choices; /* NULL-terminated, STRING only, or NULL */
	const struct nt_cfg_key *sub; /* GROUP_LIST: schema of each group */
	uint32_t n_sub;
	uint32_t sub_size;
};

#define NT_CFG_NOBOUND 1.0, 0.0

/* ------------------------------------------------------------------ */
/* Metrics                                                             */
/* ------------------------------------------------------------------ */

enum nt_metric_type {
	NT_METRIC_COUNTER = 1,   /* monotonically increasing; name ends _total */
	NT_METRIC_GAUGE = 2,
	NT_METRIC_HISTOGRAM = 3,
};

/*
 * A metric family. `name` is the full exposition name following
 * ntcore_<plugin>_<what>_<unit>[_total]. `buckets` are ascending upper bounds
 * (the +Inf bucket is implicit). At most `max_series` label sets are kept
 * (0 means the core default, 10000); updates to further label sets are
 * counted in the family's overflow counter instead. The descriptor and the
 * strings it points to must outlive the instance (static data is usual).
 */
struct nt_metric_desc {
	const char *name;
	const char *help;
	uint32_t type; /* enum nt_metric_type */
	uint32_t n_labels;
	const char *const *label_names;
	const double *buckets;
	uint32_t n_buckets;
	uint32_t max_series;
};

/*
 * One series as seen by metrics_visit. For a histogram, bucket_counts has
 * n_buckets + 1 entries, NOT cumulative, the last one for +Inf; `count` is
 * their sum and `sum` the sum of observed values. For counters and gauges
 * `value` holds the value.
 */
struct nt_metric_series {
	const char *const *label_values;
	double value;
	const uint64_t *bucket_counts;
	uint64_t count;
	double sum;
};

/*
 * Called once per family, under that family's lock: each family is seen
 * whole (no torn histogram, no series half updated), while updates to other
 * families go on. Everything passed is borrowed for the duration of the
 * call. Return non-zero to stop the visit.
 */
typedef int (*nt_metric_visit_fn)(void *arg, const struct nt_metric_desc *desc,
				  const struct nt_metric_series *series,
				  uint32_t n_series, uint64_t overflow);

/* ------------------------------------------------------------------ */
/* Symbols                                                             */
/* ------------------------------------------------------------------ */

/*
 * A symbolized address. Strings are owned by the core's symbol cache and are
 * valid until the calling op returns. name is demangled; file/line are NULL/0
 * without debug info; module is the mapped object's path.
 */
struct nt_symbol {
	const char *name;
	uint64_t offset; /* addr - symbol start; with no name, the address in
			  * the module as addr2line takes it */
	const char *module;
	const char *file;
	uint32_t line;
};

/* ------------------------------------------------------------------ */
/* The host vtable                                                     */
/* ------------------------------------------------------------------ */

/*
 * Functions the core offers plugins. Append-only within a major: check
 * NT_HOST_HAS(host, member) before calling a member added after 1.0.
 * Every function returning int returns 0 (or a non-negative value) on
 * success and a negative errno on failure.
 */
struct nt_host {
	uint16_t abi_major;
	uint16_t abi_minor;
	uint32_t size; /* sizeof(struct nt_host) in the running core */

	/* Log prefixed with "[kind:instance] "; dropped below the instance's
	 * configured log level. */
	void (*log)(struct nt_instance *inst, int level, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	/* The instance name ("cuda.0"); owned by the core. */
	const char *(*instance_name)(const struct nt_instance *inst);
	/* Report a semantic config error found in init as
	 * "FILE:LINE: [instance] key: message". `key` may be NULL (the line of
	 * the instance's group is used). Always returns -EINVAL, so init can
	 * `return host->config_error(...)`; the daemon then exits with 2. */
	int (*config_error)(struct nt_instance *inst, const char *key,
			    const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));

	/* Register an event type; returns its type id (> 0) or -EEXIST when
	 * another instance registered a different schema under that name
	 * (the same schema pointer is shared). Valid in init only. */
	int (*register_schema)(struct nt_instance *inst,
			       const struct nt_schema *schema);
	/* Publish one record. `ev` is borrowed for the call: the bus fans it
	 * out synchronously to every matching subscriber. Records with an
	 * unknown type or a size below the schema's min_size are dropped and
	 * counted. Returns the number of subscribers that took it. */
	int (*publish)(struct nt_instance *inst, const struct nt_event_hdr *ev);
	/* Ask for consume() calls for event types matching a glob ("cuda.*",
	 * "alert.*", "*"); may be called several times, in init. Sinks are
	 * subscribed to the instance's `events` config key by the core. */
	int (*subscribe)(struct nt_instance *inst, const char *pattern);
	/* Schema of a type id, NULL if unknown. */
	const struct nt_schema *(*schema_of)(const struct nt_instance *inst,
					     uint32_t type);

	/* Metrics: register a family (in init), then update it from anywhere.
	 * label_values has desc->n_labels strings, copied by the core. */
	struct nt_metric *(*metric_register)(struct nt_instance *inst,
					     const struct nt_metric_desc *desc);
	void (*metric_add)(struct nt_metric *m, const char *const *label_values,
			   double delta);
	void (*metric_set)(struct nt_metric *m, const char *const *label_values,
			   double value);
	void (*metric_observe)(struct nt_metric *m,
			       const char *const *label_values, double value);
	/* Replace a histogram series with counts aggregated elsewhere (a BPF
	 * map): n_buckets + 1 non-cumulative counts and their sum. */
	void (*metric_hist_set)(struct nt_metric *m,
				const char *const *label_values,
				const uint64_t *bucket_counts, double sum);
	/* Forget one series (a process that exited). */
	void (*metric_remove)(struct nt_metric *m,
			      const char *const *label_values);
	/* Visit every family of every instance (see nt_metric_visit_fn). */
	int (*metrics_visit)(struct nt_instance *inst, nt_metric_visit_fn fn,
			     void *arg);

	/* Loop: poll(state, token, budget) runs when `fd` is readable or the
	 * timer fires. The fd stays owned by the plugin; it is unwatched
	 * before detach. */
	int (*watch_fd)(struct nt_instance *inst, int fd, uint32_t token);
	int (*add_timer)(struct nt_instance *inst, uint64_t interval_ms,
			 uint32_t token);

	/* Targets. target_map_fd is the fd of the core's BPF hash map
	 * (key u32 tgid, value u8) that holds every traced process and follows
	 * forks, or -1 when tracing host-wide. Reuse it in your BPF object
	 * (bpf_map__reuse_fd before load) and filter on it first. */
	int (*target_map_fd)(const struct nt_instance *inst);
	/* Copy up to `max` target pids; returns how many there are in all
	 * (0 when host-wide). */
	size_t (*target_pids)(const struct nt_instance *inst, uint32_t *out,
			      size_t max);

	/* Symbolize a user-space address of a process (elfutils; cached). */
	int (*symbolize)(struct nt_instance *inst, uint32_t pid, uint64_t addr,
			 struct nt_symbol *out);
	/* Convert an event's CLOCK_MONOTONIC ts_ns to ns since the epoch. */
	uint64_t (*wall_ns)(const struct nt_instance *inst, uint64_t mono_ns);
	/* Count events a plugin lost at its own stage ("bpf", "queue", ...)
	 * into ntcore_events_dropped_total{stage,plugin}; thread-safe. */
	void (*count_drop)(struct nt_instance *inst, const char *stage,
			   uint64_t n);
	/* Config file path and line of this instance's group (for messages). */
	const char *(*config_file)(const struct nt_instance *inst, int *line);

	/* --- ABI 1.2: check NT_HOST_HAS(host, member) before use --- */

	/* `log` with a va_list, and safe from any thread (a sink's writer, a
	 * plugin's worker) while the instance lives, i.e. until its fini
	 * returns: one whole line per call. */
	void (*vlog)(struct nt_instance *inst, int level, const char *fmt,
		     va_list ap);
	/* The running kernel's BTF (/sys/kernel/btf/vmlinux), parsed on the
	 * first call and then shared by every instance, so that a daemon
	 * parses it once per run, not once per plugin or BPF object. NULL when
	 * the kernel has no BTF. Owned by the core and valid until the daemon
	 * exits: never free it; lookups (btf__find_by_name_kind) only. Loop
	 * thread only. */
	const struct btf *(*vmlinux_btf)(struct nt_instance *inst);

	/* --- ABI 1.3 (issue 13): check NT_HOST_HAS(host, child_setenv) --- */

	/* Set NAME=VALUE in the environment of the command started as
	 * `ntcore -- CMD`, which waits at the gate until every plugin is
	 * attached (so call it in init or attach). The core copies both
	 * strings. Returns 0; -EEXIST when the child's environment (the
	 * user's) already has NAME and `overwrite` is false (nothing
	 * changed); -ESRCH when there is no child waiting at the gate
	 * (attached with -p, host-wide, or a reload after the child started);
	 * -EINVAL for a NAME that is empty or holds '='; -ENOMEM. */
	int (*child_setenv)(struct nt_instance *inst, const char *name,
			    const char *value, bool overwrite);
	/* (1.4, check NT_HOST_HAS) This instance wrote a file the user will
	 * look for. At the end of the run the core prints one line per path,
	 * "ntcore: wrote PATH (WHAT)", after the summary; a later call for
	 * the same path replaces the earlier one. `what` says what the file
	 * holds ("429 stacks", "12034 events"), or NULL. Both are copied.
	 * Loop thread only. */
	void (*output_written)(struct nt_instance *inst, const char *path,
			       const char *what);

	/* --- ABI 1.5 (issue 18): check NT_HOST_HAS(host, stop_now) --- */

	/* True once the user asked again to stop (a second SIGINT/SIGTERM, or
	 * one that arrives during the shutdown): whatever a plugin still waits
	 * for in flush or detach (a sink's shutdown grace), it stops waiting
	 * and counts what it gives up as dropped. Cheap (one non-blocking
	 * read); call it every 100 ms or so while waiting. From a sink's own
	 * thread (1.6) it only reports a stop asked for already. A second
	 * signal also ends the core's wait for a sink's queue: what is still
	 * queued is counted as dropped (stage sink_queue). */
	bool (*stop_now)(struct nt_instance *inst);

	/* --- ABI 1.7 (issue 21): check NT_HOST_HAS(host, identity) --- */

	/* The identity of process `pid` (cgroup path, container id and
	 * runtime, pod UID, QoS class, pod name and namespace: identity.h),
	 * resolved by the core on first use from /proc and the kubelet's pod
	 * directory, and cached until the process exits. Safe from any thread
	 * (a sink renders it on its own), never a call into the loop; a hit
	 * costs a mutex and a hash lookup. Returns 0; -ESRCH when the process
	 * was gone before it could be read, -ENOSYS when the core keeps no
	 * identity (*out zeroed in both). */
	int (*identity)(struct nt_instance *inst, uint32_t pid,
			struct nt_identity *out);
};

#define NT_HOST_HAS(host, member)                                              \
	((host)->size >= offsetof(struct nt_host, member) +                    \
				 sizeof((host)->member) &&                     \
	 (host)->member != NULL)

/* ------------------------------------------------------------------ */
/* The descriptor                                                      */
/* ------------------------------------------------------------------ */

/*
 * Ops. `state` is what init stored in *state; the plugin owns it and frees it
 * in fini. Each op but fini may fail with a negative errno after logging why.
 *
 * init     parse the already validated config (a struct laid out by the
 *          config schema, borrowed until fini), register schemas, metrics,
 *          subscriptions; allocate state. No BPF loading here. fini is
 *          called only after an init that succeeded: a failing init frees
 *          what it allocated itself.
 * attach   load and attach BPF, open sockets, watch fds, add timers.
 * poll     the loop calls it when a watched fd is readable or a timer fires;
 *          `token` says which; handle at most `budget` records and return
 *          how many were handled (>= 0), or a negative errno.
 * detach   undo attach (the core has already unwatched the fds).
 * fini     free everything.
 * consume  detectors and sinks: one event matching a subscription; `ev` and
 *          `schema` are borrowed for the call.
 * flush    (1.1, optional) called on shutdown and SIGHUP after the last
 *          events were drained: write out everything queued.
 * on_signal (1.4, optional) the daemon received SIGUSR1 or SIGUSR2
 *          (`signo`): a user asks for something now (the trace sink writes
 *          its flight recorder out). Called on the loop thread, for every
 *          attached instance that has the op, sinks last.
 * quiesce  (1.6, optional, probes) stop producing: detach the BPF programs
 *          (nothing more is written to the rings) but keep the rings, maps
 *          and watched fds readable. At shutdown and reload the core reads
 *          the rings, calls quiesce of every attached probe at once, each on
 *          a thread of its own (releasing a uprobe or tracepoint waits for a
 *          kernel grace period: together they share one), then reads the
 *          rings again until they are empty (poll), flushes and detaches: an
 *          event produced before quiesce returned is delivered or counted.
 *          Touch only the plugin's own state; of the host functions only
 *          the thread-safe ones (see Threads). Without the op, a probe is
 *          detached after the last read as before.
 *
 * Required: init, attach, poll, detach, fini; consume for detectors and
 * sinks. The loader refuses a descriptor that lacks one, naming it.
 */
struct nt_plugin_desc {
	uint16_t abi_major;
	uint16_t abi_minor;
	uint32_t size; /* sizeof(struct nt_plugin_desc) the plugin was built with */

	const char *name;        /* "sched"; instances are "sched.0", ... */
	uint32_t kind;           /* enum nt_plugin_kind */
	uint32_t n_config;
	const char *description; /* one line, shown by --list-plugins */
	const char *version;     /* the plugin's own version string */
	const struct nt_cfg_key *config;
	uint32_t config_size;    /* sizeof the plugin's config struct */
	uint32_t reserved;

	int (*init)(struct nt_instance *inst, const struct nt_host *host,
		    const void *config, void **state);
	int (*attach)(void *state);
	int (*poll)(void *state, uint32_t token, uint32_t budget);
	void (*detach)(void *state);
	void (*fini)(void *state);
	void (*consume)(void *state, const struct nt_event_hdr *ev,
			const struct nt_schema *schema);
	/* --- ABI 1.1 --- */
	void (*flush)(void *state);
	/* --- ABI 1.4 (SIGUSR1/SIGUSR2 to plugins) --- */
	void (*on_signal)(void *state, int signo);
	/* --- ABI 1.6 (stop producing before the last read) --- */
	void (*quiesce)(void *state);
};

#define NT_DESC_HAS(desc, member)                                              \
	((desc)->size >= offsetof(struct nt_plugin_desc, member) +             \
				 sizeof((desc)->member) &&                     \
	 (desc)->member != NULL)

/* Fills the ABI header fields of a descriptor. */
#define NT_PLUGIN_HEADER                                                       \
	.abi_major = NT_ABI_MAJOR, .abi_minor = NT_ABI_MINOR,                  \
	.size = sizeof(struct nt_plugin_desc)

/* Small helper for plugins that copy a record's vstr payload. */
static inline const char *nt_vstr_ptr(const struct nt_event_hdr *ev,
				      struct nt_vstr s)
{
	return (const char *)ev + s.off;
}

#endif /* NTCORE_PLUGIN_H */
