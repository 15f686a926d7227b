/* SPDX-License-Identifier: MIT */
/*
 * sched probe: the event schemas (sched.thread, sched.switch,
 * sched.report) and the metric templates, registered at init.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/plugin.h"

#include "sched_priv.h"

#define TF(m, t, u, d) NT_FIELD(struct sched_thread_ev, m, t, u, d)
static const struct nt_field thread_fields[] = {
	TF(oncpu_ns, NT_F_U64, "ns", "on-CPU time since the previous event"),
	TF(offcpu_ns, NT_F_U64, "ns", "off-CPU time (blocked, sleeping, queued) since the previous event"),
	TF(runq_wait_ns, NT_F_U64, "ns", "run-queue wait since the previous event"),
	TF(runq_waits, NT_F_U64, "count", "run-queue waits measured since the previous event"),
	TF(vol_switches, NT_F_U64, "count", "voluntary context switches (blocked)"),
	TF(invol_switches, NT_F_U64, "count", "involuntary context switches (preempted)"),
	TF(migrations, NT_F_U64, "count", "migrations to another CPU"),
	TF(wakeups, NT_F_U64, "count", "wakeups"),
	TF(total_oncpu_ns, NT_F_U64, "ns", "on-CPU time since the thread was first seen"),
	TF(total_offcpu_ns, NT_F_U64, "ns", "off-CPU time since the thread was first seen"),
	TF(total_runq_wait_ns, NT_F_U64, "ns", "run-queue wait since the thread was first seen"),
	TF(interval_ns, NT_F_U64, "ns", "time covered by this event"),
	TF(exited, NT_F_BOOL, "", "the thread exited (final event)"),
};
static const struct nt_schema thread_schema = {
	.name = "sched.thread",
	.desc = "per-thread scheduler time and counts, per interval and at exit",
	.fields = thread_fields,
	.n_fields = NT_ARRAY_LEN(thread_fields),
	.min_size = sizeof(struct sched_thread_ev),
};

#define SF(m, t, u, d) NT_FIELD(struct sched_switch_ev, m, t, u, d)
static const struct nt_field switch_fields[] = {
	SF(prev_oncpu_ns, NT_F_U64, "ns", "length of the slice that just ended (0 unknown)"),
	SF(next_runq_ns, NT_F_U64, "ns", "run-queue wait of the next task (0 unknown)"),
	SF(next_pid, NT_F_U32, "", "process id of the next task"),
	SF(next_tid, NT_F_U32, "", "thread id of the next task"),
	SF(next_comm, NT_F_STR, "", "command name of the next task"),
	SF(cpu, NT_F_U32, "", "CPU"),
	SF(prev_state, NT_F_U32, "", "state bits of the task leaving (0 = runnable)"),
	SF(preempt, NT_F_BOOL, "", "the task leaving was preempted"),
};
static const struct nt_schema switch_schema = {
	.name = "sched.switch",
	.desc = "one context switch (switch_events = true only)",
	.fields = switch_fields,
	.n_fields = NT_ARRAY_LEN(switch_fields),
	.min_size = sizeof(struct sched_switch_ev),
};

static const struct nt_field report_fields[] = {
	NT_FIELD(struct sched_report_ev, text, NT_F_VSTR, "",
		 "top threads by on-CPU time, as a table"),
};
static const struct nt_schema report_schema = {
	.name = "sched.report",
	.desc = "top threads table for the summary",
	.fields = report_fields,
	.n_fields = NT_ARRAY_LEN(report_fields),
	.min_size = sizeof(struct sched_report_ev),
};


static const struct nt_metric_desc metric_tmpl[M_N] = {
	[M_ON] = { "ntcore_sched_oncpu_seconds_total",
		   "On-CPU time of a thread", NT_METRIC_COUNTER, 3, l_thread,
		   NULL, 0, 0 },
	[M_OFF] = { "ntcore_sched_offcpu_seconds_total",
		    "Off-CPU time (blocked, sleeping or queued) of a thread",
		    NT_METRIC_COUNTER, 3, l_thread, NULL, 0, 0 },
	[M_RUNQ] = { "ntcore_sched_runqueue_wait_seconds_total",
		     "Time a thread waited on a run queue", NT_METRIC_COUNTER,
		     3, l_thread, NULL, 0, 0 },
	[M_CSW] = { "ntcore_sched_context_switches_total",
		    "Context switches of a process by kind (voluntary, involuntary)",
		    NT_METRIC_COUNTER, 2, l_kind, NULL, 0, 0 },
	[M_MIGR] = { "ntcore_sched_migrations_total",
		     "CPU migrations of a process's threads", NT_METRIC_COUNTER,
		     1, l_pid, NULL, 0, 0 },
	[M_HIST] = { "ntcore_sched_runqueue_latency_seconds",
		     "Run-queue latency (wakeup or preemption to running)",
		     NT_METRIC_HISTOGRAM, 1, l_pid, NULL, SCHED_HIST_BOUNDS, 0 },
	[M_THREADS] = { "ntcore_sched_tracked_threads",
			"Threads tracked by the sched probe now",
			NT_METRIC_GAUGE, 0, NULL, NULL, 0, 1 },
	[M_BPF_RUNS] = { "ntcore_sched_bpf_runs_total",
			 "Runs of each sched BPF program (kernel.bpf_stats_enabled = 1 only)",
			 NT_METRIC_COUNTER, 1, l_prog, NULL, 0, 8 },
	[M_BPF_SECS] = { "ntcore_sched_bpf_run_seconds_total",
			 "Time spent in each sched BPF program (kernel.bpf_stats_enabled = 1 only)",
			 NT_METRIC_COUNTER, 1, l_prog, NULL, 0, 8 },
	[M_FOLDED] = { "ntcore_sched_runqueue_folded_total",
		       "Run-queue samples of processes past max_processes, counted in the pid=\"other\" histogram (not lost)",
		       NT_METRIC_COUNTER, 0, NULL, NULL, 0, 1 },
};

int sched_register(struct sched_state *st)
{
	const struct nt_host *host = st->host;
	struct nt_instance *inst = st->inst;

	st->t_thread = host->register_schema(inst, &thread_schema);
	st->t_switch = host->register_schema(inst, &switch_schema);
	st->t_report = host->register_schema(inst, &report_schema);
	if (st->t_thread <= 0 || st->t_switch <= 0 || st->t_report <= 0) {
		nt_log_err(st, "cannot register event schemas");
		return -EEXIST;
	}
	sched_hist_bounds(st->bounds);
	for (int i = 0; i < M_N; i++) {
		st->mdesc[i] = metric_tmpl[i];
		if (!st->mdesc[i].max_series)
			st->mdesc[i].max_series = (uint32_t)st->cfg->max_series;
		if (i == M_HIST)
			st->mdesc[i].buckets = st->bounds;
		st->m[i] = host->metric_register(inst, &st->mdesc[i]);
		if (!st->m[i]) {
			nt_log_err(st, "cannot register %s", st->mdesc[i].name);
			return -EINVAL;
		}
	}
	return 0;
}
