/* SPDX-License-Identifier: MIT */
#include "daemon.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "bpf/follow.h"
#include "clock.h"
#include "host.h"
#include "instances.h"
#include "job.h"
#include "log.h"
#include "notify.h"
#include "privs.h"
#include "sinks.h"


static const struct nt_field proc_exit_fields[] = {
	NT_FIELD(struct nt_proc_exit, exit_code, NT_F_S32, "",
		 "exit code, or 128 + N when signal N killed it (as a shell's $?)"),
	NT_FIELD(struct nt_proc_exit, ppid, NT_F_U32, "", "parent process id"),
	NT_FIELD(struct nt_proc_exit, signal, NT_F_S32, "",
		 "the signal that killed it, 0 when it exited"),
	NT_FIELD(struct nt_proc_exit, core_dumped, NT_F_BOOL, "",
		 "it dumped core"),
};

static const struct nt_schema proc_exit_schema = {
	.name = "proc.exit",
	.desc = "a traced process exited (its last thread)",
	.fields = proc_exit_fields,
	.n_fields = NT_ARRAY_LEN(proc_exit_fields),
	.min_size = sizeof(struct nt_proc_exit),
};

static const struct nt_field proc_exec_fields[] = {
	NT_FIELD(struct nt_proc_exec, old_tid, NT_F_U32, "",
		 "thread id of the exec'ing thread before the exec"),
	NT_FIELD(struct nt_proc_exec, filename, NT_F_STR, "", "the program executed"),
};

static const struct nt_schema proc_exec_schema = {
	.name = "proc.exec",
	.desc = "a traced process replaced its program image",
	.fields = proc_exec_fields,
	.n_fields = NT_ARRAY_LEN(proc_exec_fields),
	.min_size = sizeof(struct nt_proc_exec),
};

static const char *const self_inst_labels[] = {"plugin"};
static const char *const self_drop_labels[] = {"stage", "plugin"};
static const char *const self_state_labels[] = {"plugin", "kind", "state"};
static const char *const self_build_labels[] = {"version", "abi"};
static const char *const self_ident_labels[] = {"what"};

static const struct nt_metric_desc self_metric_descs[] = {
	{.name = "ntcore_events_in_total",
	 .help = "Events published on the bus, by publishing plugin instance",
	 .type = NT_METRIC_COUNTER, .n_labels = 1, .label_names = self_inst_labels},
	{.name = "ntcore_events_out_total",
	 .help = "Events delivered to a consuming plugin instance",
	 .type = NT_METRIC_COUNTER, .n_labels = 1, .label_names = self_inst_labels},
	{.name = "ntcore_events_dropped_total",
	 .help = "Events lost, by stage (bpf, bus, queue, ...) and plugin instance",
	 .type = NT_METRIC_COUNTER, .n_labels = 2, .label_names = self_drop_labels},
	{.name = "ntcore_plugin_state",
	 .help = "1 for the current state of each plugin instance",
	 .type = NT_METRIC_GAUGE, .n_labels = 3, .label_names = self_state_labels},
	{.name = "ntcore_build_info",
	 .help = "ntcore version and plugin ABI; always 1",
	 .type = NT_METRIC_GAUGE, .n_labels = 2, .label_names = self_build_labels},
	{.name = "ntcore_identity_cache",
	 .help = "Process identity cache: entries held, and resolved, hits, evicted (forgotten at exit), failed (process gone) since start",
	 .type = NT_METRIC_GAUGE, .n_labels = 1, .label_names = self_ident_labels},
};


static int64_t wall_offset(void)
{
	struct timespec real, mono;

	clock_gettime(CLOCK_REALTIME, &real);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	return ((int64_t)real.tv_sec - (int64_t)mono.tv_sec) * 1000000000ll +
	       ((int64_t)real.tv_nsec - (int64_t)mono.tv_nsec);
}

/* ------------------------------------------------------------------ */
/* Self-metrics                                                        */
/* ------------------------------------------------------------------ */

static void register_self_metrics(struct nt_daemon *d)
{
	struct nt_metric **slots[] = {&d->m_in, &d->m_out, &d->m_dropped,
				      &d->m_state, &d->m_build, &d->m_ident};
	const char *why;

	for (size_t i = 0; i < NT_ARRAY_LEN(slots); i++)
		*slots[i] = nt_registry_register(&d->reg, &self_metric_descs[i], &why);
	const char *build[2] = {NTCORE_VERSION, NT_ABI_TEXT};
	nt_metric_set(d->m_build, build, 1);
}


/* How long an exited process's identity is kept for its late records. */
#define NT_IDENT_GRACE_NS 2000000000ull

static void sync_ident_metrics(struct nt_daemon *d)
{
	struct nt_ident_cache *c = &d->ident;
	const char *what[][1] = {{"entries"}, {"resolved"}, {"hits"}, {"evicted"}, {"failed"}};

	pthread_mutex_lock(&c->lock);
	double v[] = {(double)c->n_entries, (double)c->resolved, (double)c->hits,
		      (double)c->evicted, (double)c->failed};
	pthread_mutex_unlock(&c->lock);
	for (size_t i = 0; i < NT_ARRAY_LEN(v); i++)
		nt_metric_set(d->m_ident, what[i], v[i]);
}

void nt_daemon_sync_self_metrics(struct nt_daemon *d)
{
	for (size_t i = 0; i < d->n_insts; i++) {
		struct nt_instance *inst = d->insts[i];
		const char *label[1] = {inst->name};
		uint64_t out = nt_instance_events_out(inst);
		nt_sink_sync(inst);
		if (inst->events_in != inst->synced_in) {
			nt_metric_add(d->m_in, label,
				      (double)(inst->events_in - inst->synced_in));
			inst->synced_in = inst->events_in;
		}
		if (out != inst->synced_out) {
			nt_metric_add(d->m_out, label, (double)(out - inst->synced_out));
			inst->synced_out = out;
		}
	}
	if (d->ident.buckets) {
		nt_ident_sweep(&d->ident, NT_IDENT_GRACE_NS);
		sync_ident_metrics(d);
	}
	uint64_t bus_drops = d->bus.dropped_unknown + d->bus.dropped_short;
	if (bus_drops != d->bus_drops_synced) {
		const char *labels[2] = {"bus", "core"};
		nt_metric_add(d->m_dropped, labels,
			      (double)(bus_drops - d->bus_drops_synced));
		d->core.dropped += bus_drops - d->bus_drops_synced;
		d->bus_drops_synced = bus_drops;
	}
}

void nt_daemon_vlog(struct nt_daemon *d, int level, const char *prefix,
		    const char *fmt, va_list ap)
{
	va_list copy;

	va_copy(copy, ap);
	if (!nt_loghold_vadd(&d->hold, level, prefix, fmt, copy))
		nt_vlog(level, prefix, fmt, ap);
	va_end(copy);
}

void nt_daemon_log(struct nt_daemon *d, int level, const char *prefix,
		   const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	nt_daemon_vlog(d, level, prefix, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* Summary                                                             */
/* ------------------------------------------------------------------ */

/* VmHWM: this image's peak. ru_maxrss also holds the peak of the image
 * before exec (a Python harness that forked ntcore: 175 MB reported for a
 * run whose own peak was 37 MB); it is the fallback without /proc. */
static long peak_rss_kb(long ru_maxrss_kb)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[128];
	long kb = -1;

	while (f && kb < 0 && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6))
			kb = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return kb >= 0 ? kb : ru_maxrss_kb;
}

static void print_summary(struct nt_daemon *d)
{
	double secs = (double)(nt_mono_ns() - d->start_mono_ns) / 1e9;

	fprintf(stderr, "\nntcore: summary after %.1f s\n", secs);
	fprintf(stderr, "  %-22s %-9s %-11s %12s %12s %10s\n", "instance", "kind",
		"state", "events in", "events out", "dropped");
	for (size_t i = 0; i < d->n_insts; i++) {
		struct nt_instance *inst = d->insts[i];
		fprintf(stderr, "  %-22s %-9s %-11s %12llu %12llu %10llu\n",
			inst->name, nt_kind_name(inst->lib.desc.kind),
			nt_inst_state_name(inst->st), (unsigned long long)inst->events_in,
			(unsigned long long)nt_instance_events_out(inst),
			(unsigned long long)__atomic_load_n(&inst->dropped,
							    __ATOMIC_RELAXED));
	}
	fprintf(stderr, "  %-22s %-9s %-11s %12llu %12s %10llu\n", "core", "bus",
		"-", (unsigned long long)d->core.events_in, "-",
		(unsigned long long)d->core.dropped);
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0) /* every thread of ntcore, no child */
		fprintf(stderr, "  ntcore's own CPU time: %.3f s user, %.3f s system; peak RSS %ld MB\n",
			(double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
			(double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
			peak_rss_kb(ru.ru_maxrss) / 1024);
	if (d->child > 0 && d->child_exited) {
		if (WIFEXITED(d->child_status))
			fprintf(stderr, "  target pid %d exited with status %d\n",
				(int)d->child, WEXITSTATUS(d->child_status));
		else if (WIFSIGNALED(d->child_status))
			fprintf(stderr, "  target pid %d killed by signal %d (%s): status %d\n",
				(int)d->child, WTERMSIG(d->child_status),
				strsignal(WTERMSIG(d->child_status)),
				nt_job_exit_status(d->child_status));
	}
}

/* ------------------------------------------------------------------ */
/* Loop callbacks                                                      */
/* ------------------------------------------------------------------ */

static void stop_loop(struct nt_daemon *d)
{
	ev_break(d->loop, EVBREAK_ALL);
}

#define CHILD_GRACE_S 10.0

static void on_grace_over(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct nt_daemon *d = w->data;

	(void)loop;
	(void)revents;
	nt_log(NT_LOG_WARN, NULL, "target pid %d still runs %.0f s after signal %d; stopping",
	       (int)d->child, CHILD_GRACE_S, d->stop_signal);
	stop_loop(d);
}

/* SIGINT/SIGTERM. Without a running child: drain and stop. With one, as a
 * wrapper should: pass the signal on (unless the terminal already sent it
 * to the whole process group), keep tracing while the job shuts down, and
 * stop when it exits, so that ntcore exits with its status; a second
 * signal, or CHILD_GRACE_S seconds, stops at once. */
static void stop_on_signal(struct nt_daemon *d, int signum)
{
	bool child_runs = d->child > 0 && !d->child_exited;

	if (!child_runs || d->stop_signal) {
		nt_log(NT_LOG_INFO, NULL, "signal %d: draining and stopping", signum);
		d->stop_signal = signum;
		stop_loop(d);
		return;
	}
	d->stop_signal = signum;
	if (!nt_job_tty_delivered(signum))
		kill(d->child, signum);
	nt_log(NT_LOG_INFO, NULL, "signal %d: waiting up to %.0f s for target pid %d to exit",
	       signum, CHILD_GRACE_S, (int)d->child);
	ev_timer_init(&d->grace_timer, on_grace_over, CHILD_GRACE_S, 0);
	d->grace_timer.data = d;
	ev_timer_start(d->loop, &d->grace_timer);
}

static void on_stop_fd(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nt_daemon *d = w->data;
	struct signalfd_siginfo si;

	(void)loop;
	(void)revents;
	while (read(d->stop_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		stop_on_signal(d, (int)si.ssi_signo);
}

/* SIGINT/SIGTERM are blocked in every thread (the threads plugins start
 * inherit the mask: this runs before any plugin is initialised) and read
 * from a signalfd. While the loop runs, an ev_io watches it; during the
 * shutdown, when no loop runs, a signal waits there for stop_now() instead
 * of vanishing into a handler. The -- CMD child unblocks them. */
static int stop_signals_open(struct nt_daemon *d)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0 ||
	    (d->stop_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
		nt_log(NT_LOG_ERROR, NULL, "cannot watch SIGINT/SIGTERM: %s",
		       strerror(errno));
		return 1;
	}
	return 0;
}

bool nt_daemon_stop_now(struct nt_daemon *d)
{
	struct signalfd_siginfo si;

	/* A sink's thread (sinks.h) only reads the flag: the signalfd and
	 * the loop are the loop thread's. */
	if (!nt_on_loop_thread(d))
		return __atomic_load_n(&d->hurry, __ATOMIC_ACQUIRE);
	while (d->stop_fd >= 0 &&
	       read(d->stop_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (!d->hurry)
			nt_log(NT_LOG_WARN, NULL,
			       "signal %u while stopping: not waiting any longer",
			       si.ssi_signo);
		__atomic_store_n(&d->hurry, true, __ATOMIC_RELEASE);
		stop_loop(d); /* a signal during a reload stops the run after it */
	}
	return d->hurry;
}

static int reload(struct nt_daemon *d);

static int signal_one(struct nt_daemon *d, struct nt_instance *inst)
{
	int signo = d->pending_signal;

	if (inst->st == NT_ST_ATTACHED && NT_DESC_HAS(&inst->lib.desc, on_signal) &&
	    !nt_sink_post_signal(inst, signo))
		inst->lib.desc.on_signal(inst->state, signo);
	return 0;
}

/* SIGUSR1/SIGUSR2: handed to every plugin that asks for them, in the bus's
 * flow order (sinks last, so that a detector's reaction reaches them). */
static void on_user_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
	struct nt_daemon *d = w->data;

	(void)loop;
	(void)revents;
	nt_log(NT_LOG_INFO, NULL, "signal %d: passed to the plugins", w->signum);
	nt_daemon_sync_self_metrics(d);
	d->pending_signal = w->signum;
	nt_instances_in_flow(d, false, signal_one);
	d->pending_signal = 0;
}

static void on_hup(struct ev_loop *loop, ev_signal *w, int revents)
{
	(void)loop;
	(void)revents;
	reload(w->data);
}

static void on_child(struct ev_loop *loop, ev_child *w, int revents)
{
	struct nt_daemon *d = w->data;

	(void)revents;
	ev_child_stop(loop, w);
	d->child_exited = true;
	d->child_status = w->rstatus;
	if (d->opt.verbose)
		nt_log(NT_LOG_DEBUG, NULL, "target pid %d exited; stopping", w->rpid);
	stop_loop(d);
}

static void on_duration(struct ev_loop *loop, ev_timer *w, int revents)
{
	(void)loop;
	(void)revents;
	stop_loop(w->data);
}

#define TRIM_EVERY 10 /* selfsync ticks (s) between two malloc_trim */

static void on_selfsync(struct ev_loop *loop, ev_timer *w, int revents)
{
	struct nt_daemon *d = w->data;

	(void)loop;
	(void)revents;
	nt_daemon_sync_self_metrics(d);
	/* Freed heap goes back to the kernel: glibc keeps what fragments the
	 * heap (symbol tables of processes that left, a burst's buffers),
	 * 6 MB after a minute of training.conf. A trim walks the free lists:
	 * well under a millisecond for a heap this size. */
	if (++d->trim_ticks >= TRIM_EVERY) {
		d->trim_ticks = 0;
		malloc_trim(0);
	}
}

static void on_exits(struct ev_loop *loop, ev_io *w, int revents)
{
	struct nt_daemon *d = w->data;

	(void)loop;
	(void)revents;
	nt_targets_drain(&d->targets);
}

/* A -p target's exit is worth a line: the user named it. Probes keep its
 * counters and tracing goes on for the other targets until the run ends. */
static void log_pid_target_exit(struct nt_daemon *d, const struct nt_proc_exit *ex)
{
	for (size_t i = 0; i < d->opt.n_pids; i++) {
		if (d->opt.pids[i] != ex->hdr.pid)
			continue;
		if (ex->signal)
			nt_log(NT_LOG_INFO, NULL,
			       "target pid %u (%.16s) was killed by signal %d; tracing goes on",
			       ex->hdr.pid, ex->hdr.comm, ex->signal);
		else
			nt_log(NT_LOG_INFO, NULL,
			       "target pid %u (%.16s) exited with status %d; tracing goes on",
			       ex->hdr.pid, ex->hdr.comm, ex->exit_code);
	}
}

/* Records of the core's follow program: proc.exit and proc.exec. */
static int publish_follow(void *ctx, void *data, size_t size)
{
	struct nt_daemon *d = ctx;
	const struct nt_event_hdr *ev = data;

	if (size < sizeof(*ev) || ev->size > size)
		return 0;
	/* After an exec the process's cached symbols are stale, unless they
	 * were read after it. At an exit they stay until evicted: records of
	 * the process still in other plugins' rings need them. */
	if (ev->type == d->exec_type)
		nt_symbolizer_forget(&d->sym, ev->pid, ev->ts_ns);
	if (ev->type == d->exit_type && ev->size >= sizeof(struct nt_proc_exit))
		log_pid_target_exit(d, (const struct nt_proc_exit *)ev);
	if (ev->type == d->exit_type && d->ident.buckets)
		nt_ident_forget(&d->ident, ev->pid);
	if (ev->type == d->exit_type && ev->size >= sizeof(struct nt_proc_exit) &&
	    ((const struct nt_proc_exit *)ev)->pad[0] == NT_EXIT_IDENTITY_ONLY)
		return 0; /* not a target: nobody asked for its proc.exit */
	d->core.events_in++;
	nt_bus_publish(&d->bus, ev);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Start-up, reload, shutdown                                          */
/* ------------------------------------------------------------------ */

/* Everything a start-up checks before it touches anything, run on a
 * throwaway daemon: plugin lookup, descriptor and trust checks, schema
 * validation, and each plugin's init (which validates what a schema cannot
 * and loads no BPF, as --check relies on). The throwaway has its own bus
 * and registry, so the running instances, their event types and metrics
 * stay as they are. Returns 0, 1 (a required plugin's init failed) or 2
 * (a config error, printed). */
static int config_validate(const struct nt_daemon *d, const struct nt_config *cfg)
{
	struct nt_daemon *shadow = calloc(1, sizeof(*shadow));
	int status;

	if (!shadow)
		return 1;
	shadow->opt = d->opt;
	shadow->cfg = *cfg;         /* borrowed: freed by the caller */
	shadow->targets = d->targets; /* borrowed, read only */
	shadow->core.d = shadow;
	shadow->stop_fd = -1;
	/* no loop: sinks get no queue or thread here (sinks.h), and init
	 * runs on this thread, so every host function is allowed */
	pthread_mutex_init(&shadow->outputs_lock, NULL);
	nt_bus_init(&shadow->bus, nt_instance_deliver);
	nt_registry_init(&shadow->reg);
	register_self_metrics(shadow);
	status = nt_instances_load(shadow);
	for (size_t i = 0; status == 0 && i < shadow->n_insts; i++) {
		int one = nt_instance_init(shadow, shadow->insts[i]);
		if (one > status)
			status = one;
	}
	nt_instances_free(shadow);
	nt_bus_fini(&shadow->bus);
	nt_registry_fini(&shadow->reg);
	pthread_mutex_destroy(&shadow->outputs_lock);
	free(shadow);
	return status;
}

/* SIGHUP: the new config replaces the running one only once it passed
 * every check a start-up makes before touching anything; on any error the
 * running instances go on untouched. */
static int reload(struct nt_daemon *d)
{
	struct nt_config fresh;
	int status;

	nt_log(NT_LOG_INFO, NULL, "SIGHUP: reloading %s", d->opt.config_path);
	nt_notify_reloading();
	if (nt_config_load(&fresh, d->opt.config_path, d->opt.config_text, stderr) ||
	    (status = config_validate(d, &fresh))) {
		nt_config_free(&fresh);
		nt_log(NT_LOG_ERROR, NULL, "reload refused (see above); the running config stays");
		nt_notify_ready("reload refused; the previous configuration runs");
		return -1;
	}
	nt_instances_stop(d);
	nt_instances_free(d);
	nt_config_free(&d->cfg);
	d->cfg = fresh;
	status = nt_instances_load(d);
	if (!status)
		status = nt_instances_start(d);
	if (status)
		nt_log(NT_LOG_ERROR, NULL,
		       "reload: some plugins did not start (see above); the others run");
	nt_notify_ready(status ? "reloaded; some plugins did not start" : "reloaded");
	return status ? -1 : 0;
}

/* --cgroup and ntcore.cgroup: every process in those subtrees, now and
 * later (the follow program adds forks, execs and moves into them). */
static int add_cgroup_targets(struct nt_daemon *d)
{
	char why[512];

	for (size_t k = 0; k < d->opt.n_cgroups + d->cfg.n_cgroups; k++) {
		const char *path = k < d->opt.n_cgroups
					   ? d->opt.cgroups[k]
					   : d->cfg.cgroups[k - d->opt.n_cgroups];
		int n = nt_targets_add_cgroup(&d->targets, path, why, sizeof(why));
		if (n < 0) {
			nt_log(NT_LOG_ERROR, NULL, "%s", why);
			return 2;
		}
		nt_log(NT_LOG_INFO, NULL, "cgroup %s: %d process%s now, and those started there later",
		       path, n, n == 1 ? "" : "es");
	}
	return 0;
}

static int setup_targets(struct nt_daemon *d)
{
	bool by_cgroup = d->opt.n_cgroups + d->cfg.n_cgroups > 0;
	bool filtered = d->opt.n_pids > 0 || d->opt.argv || by_cgroup;
	char why[512];
	int rc;

	/* A command that cannot run fails now, as a shell's would, before
	 * any probe is loaded for it. */
	if (d->opt.argv && (rc = nt_job_resolve(d->opt.argv[0], why, sizeof(why)))) {
		nt_log(NT_LOG_ERROR, NULL, "cannot run '%s': %s", d->opt.argv[0], why);
		return rc;
	}
	if (filtered && !d->can_trace) {
		nt_log(NT_LOG_ERROR, NULL, "cannot trace %s: tracing needs %s",
		       d->opt.argv ? "the command" : by_cgroup ? "the cgroup" : "the -p processes",
		       d->privs_need);
		return 1;
	}

	for (size_t i = 0; i < d->opt.n_pids; i++)
		if (kill((pid_t)d->opt.pids[i], 0) != 0 && errno == ESRCH) {
			nt_log(NT_LOG_ERROR, NULL, "-p %u: no such process",
			       d->opt.pids[i]);
			return 2;
		}
	/* Host-wide, the follow program reports the exits of processes whose
	 * identity is cached; without privileges the cache is only bounded. */
	if (nt_targets_open(&d->targets, filtered, by_cgroup,
			    !filtered && d->can_trace, d->exit_type, d->exec_type,
			    publish_follow, d, why, sizeof(why))) {
		if (filtered) {
			nt_log(NT_LOG_ERROR, NULL, "%s", why);
			return 1;
		}
		/* host-wide it only served the identity cache: go on without */
		nt_log(NT_LOG_WARN, NULL,
		       "exits of processes are not reported (%s): the identity cache is only bounded",
		       why);
		nt_targets_close(&d->targets);
		nt_targets_open(&d->targets, false, false, false, d->exit_type,
				d->exec_type, publish_follow, d, why, sizeof(why));
	}
	for (size_t i = 0; i < d->opt.n_pids; i++)
		nt_targets_add(&d->targets, d->opt.pids[i]);
	if ((rc = add_cgroup_targets(d)))
		return rc;
	if (d->opt.argv) {
		d->child = nt_child_spawn(d->opt.argv, &d->child_gate);
		if (d->child < 0) {
			nt_log(NT_LOG_ERROR, NULL, "cannot start '%s': %s",
			       d->opt.argv[0], strerror(errno));
			return 1;
		}
		nt_targets_add(&d->targets, (uint32_t)d->child);
	}
	return 0;
}

static void start_watchers(struct nt_daemon *d)
{
	struct ev_loop *loop = d->loop;

	ev_io_init(&d->stop_io, on_stop_fd, d->stop_fd, EV_READ);
	ev_signal_init(&d->sig_hup, on_hup, SIGHUP);
	ev_signal_init(&d->sig_usr1, on_user_signal, SIGUSR1);
	ev_signal_init(&d->sig_usr2, on_user_signal, SIGUSR2);
	d->stop_io.data = d->sig_hup.data = d;
	d->sig_usr1.data = d->sig_usr2.data = d;
	ev_io_start(loop, &d->stop_io);
	ev_signal_start(loop, &d->sig_hup);
	ev_signal_start(loop, &d->sig_usr1);
	ev_signal_start(loop, &d->sig_usr2);
	nt_notify_watchdog_start(loop, &d->watchdog_timer);
	ev_timer_init(&d->selfsync_timer, on_selfsync, 1.0, 1.0);
	d->selfsync_timer.data = d;
	ev_timer_start(loop, &d->selfsync_timer);
	if (d->opt.duration_s > 0) {
		ev_timer_init(&d->duration_timer, on_duration, d->opt.duration_s, 0);
		d->duration_timer.data = d;
		ev_timer_start(loop, &d->duration_timer);
	}
	if (nt_targets_exit_fd(&d->targets) >= 0) {
		ev_io_init(&d->exits_io, on_exits, nt_targets_exit_fd(&d->targets),
			   EV_READ);
		d->exits_io.data = d;
		ev_io_start(loop, &d->exits_io);
	}
	if (d->child > 0) {
		ev_child_init(&d->child_watch, on_child, d->child, 0);
		d->child_watch.data = d;
		ev_child_start(loop, &d->child_watch);
	}
}

static int libbpf_to_log(enum libbpf_print_level level, const char *fmt,
			 va_list ap)
{
	/* libbpf's own chatter only with -v; its warnings always. */
	if (level == LIBBPF_DEBUG)
		return 0;
	fputs(nt_log_priority(level == LIBBPF_WARN ? NT_LOG_WARN : NT_LOG_INFO), stderr);
	return vfprintf(stderr, fmt, ap);
}

/* Without privileges every libbpf warning is a variant of EPERM: the one
 * line of instances_start says it better (-v shows them all). */
static int libbpf_silent(enum libbpf_print_level level, const char *fmt,
			 va_list ap)
{
	(void)level;
	(void)fmt;
	(void)ap;
	return 0;
}

static void daemon_init(struct nt_daemon *d, const struct nt_options *opt)
{
	memset(d, 0, sizeof(*d));
	d->opt = *opt;
	d->child = -1;
	d->child_gate = -1;
	d->stop_fd = -1;
	d->start_mono_ns = nt_mono_ns();
	d->wall_offset_ns = wall_offset();
	d->loop_thread = pthread_self();
	d->loop_thread_set = true;
	pthread_mutex_init(&d->outputs_lock, NULL);
	nt_bus_init(&d->bus, nt_instance_deliver);
	nt_registry_init(&d->reg);
	nt_symbolizer_init(&d->sym);
	d->targets.map_fd = -1;
	d->targets.known_fd = -1;
	d->core.d = d;
	snprintf(d->core.name, sizeof(d->core.name), "core");
	snprintf(d->core.prefix, sizeof(d->core.prefix), "core");
	register_self_metrics(d);
	d->exit_type = (uint32_t)nt_bus_register(&d->bus, &d->core,
						 &proc_exit_schema,
						 &(const char *){NULL});
	d->exec_type = (uint32_t)nt_bus_register(&d->bus, &d->core,
						 &proc_exec_schema,
						 &(const char *){NULL});
	/* A reader that goes away (`ntcore ... | head`) must not kill the
	 * daemon: writes to it fail with EPIPE instead, and the stdout sink
	 * stops printing while the other sinks go on. */
	signal(SIGPIPE, SIG_IGN);
	d->can_trace = nt_privs_can_trace(d->privs_need, sizeof(d->privs_need));
	if (!opt->verbose)
		libbpf_set_print(d->can_trace ? libbpf_to_log : libbpf_silent);
}

static void daemon_fini(struct nt_daemon *d)
{
	nt_loghold_release(&d->hold, true);
	nt_instances_free(d);
	for (size_t i = 0; i < d->n_child_env; i++)
		free(d->child_env[i]);
	free(d->child_env);
	nt_outputs_free(&d->outputs);
	nt_targets_close(&d->targets);
	nt_symbolizer_fini(&d->sym);
	nt_host_release(d);
	nt_bus_fini(&d->bus);
	nt_registry_fini(&d->reg);
	nt_label_policy_free(&d->labels);
	if (d->ident.buckets)
		nt_ident_cache_fini(&d->ident);
	nt_config_free(&d->cfg);
	nt_sinks_fini(d);
	pthread_mutex_destroy(&d->outputs_lock);
	if (d->stop_fd >= 0)
		close(d->stop_fd);
	if (d->loop)
		ev_loop_destroy(d->loop);
}

/* Stop a child that never got to run, or that outlives a failed start. */
static void abandon_child(struct nt_daemon *d)
{
	if (d->child_gate >= 0) {
		close(d->child_gate); /* EOF: the child exits without exec */
		d->child_gate = -1;
	}
	if (d->child > 0 && !d->child_exited)
		waitpid(d->child, NULL, 0);
}

static int ident_of(void *ctx, uint32_t pid, struct nt_identity *out)
{
	return nt_ident_get(ctx, pid, out);
}

/* A pid was resolved: ask the follow program for its exit. */
static void ident_resolved(void *ctx, uint32_t pid)
{
	struct nt_daemon *d = ctx;

	nt_targets_known(&d->targets, pid);
}

/* Identity (issue 21): the cache, and the label policy of metric
 * families, from ntcore.identity_labels / identity_families / kubelet_dir.
 * Unset, a host-wide run drops pid and tid (NT_IDL_HOSTWIDE) and a run
 * with targets keeps the labels as declared. */
static int identity_setup(struct nt_daemon *d)
{
	bool targeted = d->opt.n_pids || d->opt.argv || d->opt.n_cgroups ||
			d->cfg.n_cgroups;
	const char *bad;
	uint32_t mask;

	if (nt_ident_cache_init(&d->ident, 0, "/proc",
				d->cfg.kubelet_dir ? d->cfg.kubelet_dir : "/var/lib/kubelet"))
		return 1;
	if (d->cfg.downward_dir && nt_ident_cache_downward(&d->ident, d->cfg.downward_dir))
		nt_log(NT_LOG_WARN, NULL,
		       "downward_dir %s: no pod uid file there (a downward-API volume with uid, name, namespace); not used",
		       d->cfg.downward_dir);
	d->ident.on_resolved = ident_resolved;
	d->ident.ctx = d;
	d->labels.ident = ident_of;
	d->labels.ctx = &d->ident;
	d->labels.default_mask = targeted ? NT_IDL_DECLARED : NT_IDL_HOSTWIDE;
	if (d->cfg.id_labels) {
		if (nt_label_mask_parse(d->cfg.id_labels, d->cfg.n_id_labels, &mask, &bad)) {
			nt_log(NT_LOG_ERROR, NULL,
			       "%s:%d: identity_labels: unknown label '%s' (known: pid, tid, comm, cgroup, container, pod, or \"declared\" alone)",
			       d->cfg.path, d->cfg.id_labels_line, bad);
			return 2;
		}
		d->labels.default_mask = mask;
	}
	for (size_t i = 0; i < d->cfg.n_id_families; i++) {
		const struct nt_id_family *f = &d->cfg.id_families[i];
		if (nt_label_mask_parse(f->labels, f->n_labels, &mask, &bad)) {
			nt_log(NT_LOG_ERROR, NULL,
			       "%s: identity_families '%s': unknown label '%s'",
			       d->cfg.path, f->match, bad);
			return 2;
		}
		if (nt_label_policy_add_rule(&d->labels, f->match, mask))
			return 1;
	}
	d->reg.policy = &d->labels;
	return 0;
}

static int daemon_prepare(struct nt_daemon *d)
{
	int status;

	if (nt_config_load(&d->cfg, d->opt.config_path, d->opt.config_text, stderr))
		return 2;
	if ((status = identity_setup(d)))
		return status;
	if ((status = nt_instances_load(d)))
		return status;
	d->loop = ev_default_loop(EVFLAG_AUTO);
	if (!d->loop) {
		nt_log(NT_LOG_ERROR, NULL, "cannot create the event loop");
		return 1;
	}
	nt_sinks_init(d);
	if (d->opt.check_only) {
		/* init validates what a schema cannot (a listen address, a
		 * device name); it loads no BPF, so it is safe here. */
		for (size_t i = 0; i < d->n_insts; i++)
			if ((status = nt_instance_init(d, d->insts[i])) == 2)
				return 2;
		printf("%s: OK (%zu plugin instance%s)\n", d->opt.config_path,
		       d->n_insts, d->n_insts == 1 ? "" : "s");
		return -1;
	}
	if ((status = stop_signals_open(d)))
		return status;
	if (d->can_trace)
		nt_ensure_tracefs();
	if ((status = setup_targets(d)))
		return status;
	return nt_instances_start(d);
}

int nt_daemon_run(const struct nt_options *opt)
{
	struct nt_daemon *d = calloc(1, sizeof(*d));
	int status;

	if (!d)
		return 1;
	daemon_init(d, opt);
	status = daemon_prepare(d);
	if (status) {
		abandon_child(d);
		daemon_fini(d);
		free(d);
		return status < 0 ? 0 : status;
	}
	start_watchers(d);
	if (d->child_gate >= 0) {
		nt_child_release(d->child_gate, d->child_env, d->n_child_env);
		d->child_gate = -1;
	}
	nt_notify_ready("tracing");
	ev_run(d->loop, 0);
	nt_notify_stopping();
	nt_instances_stop(d);
	status = 0;
	if (d->child > 0 && d->child_exited)
		status = nt_job_exit_status(d->child_status);
	else if (d->child > 0)
		nt_log(NT_LOG_INFO, NULL, "target pid %d keeps running untraced",
		       (int)d->child);
	if (d->child > 0 && !d->child_exited && d->stop_signal)
		status = 128 + d->stop_signal; /* as a shell reports a job it stopped */
	print_summary(d);
	nt_outputs_print(&d->outputs);
	daemon_fini(d);
	free(d);
	return status;
}

/* ------------------------------------------------------------------ */
/* For tests and fuzzers (tests/fuzz/fuzz_exit.c)                      */
/* ------------------------------------------------------------------ */

void nt_daemon_setup(struct nt_daemon *d, const struct nt_options *opt)
{
	daemon_init(d, opt);
}

void nt_daemon_teardown(struct nt_daemon *d)
{
	daemon_fini(d);
}

int nt_daemon_follow_record(struct nt_daemon *d, void *data, size_t size)
{
	return publish_follow(d, data, size);
}
