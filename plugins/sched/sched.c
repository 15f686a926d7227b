/* SPDX-License-Identifier: MIT */
/*
 * sched probe, user side: loads sched.bpf.c (tp_btf, or raw_tp where BTF
 * tracepoints do not work), reads the per-thread and run-queue maps on a
 * timer, and publishes
 *   - metrics: on/off-CPU and run-queue wait seconds per thread, context
 *     switches and migrations per process, a run-queue latency histogram;
 *   - sched.thread events: per-thread deltas on each interval and at exit;
 *   - sched.report: the top-threads table for the stdout summary;
 *   - sched.switch (switch_events = true, debugging): one per switch.
 * See docs/sched.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/cfg.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/links.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/proc.h"
#include "ntcore/kit/tp.h"
#include "ntcore/plugin.h"

#include "sched.bpf.skel.h"
#include "sched_logic.h"

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

static const char *const attach_choices[] = { "auto", "tp_btf", "raw_tp", NULL };
static const char *const hist_choices[] = { "process", "global", NULL };

#define CFG struct sched_cfg

static const struct nt_cfg_key sched_config[] = {
	NT_KEY_INT(CFG, interval_ms, 1000, 100, 3600000,
		   "how often the maps are read: metrics and sched.thread events (ms)"),
	NT_KEY_INT(CFG, report_interval_s, 10, 0, 86400,
		   "how often sched.report is published (s); 0 = only at the end"),
	NT_KEY_BOOL(CFG, thread_events, true,
		    "publish sched.thread events (per interval and at thread exit)"),
	NT_KEY_BOOL(CFG, switch_events, false,
		    "publish one sched.switch event per context switch (debugging; costly)"),
	NT_KEY_INT(CFG, top_n, 10, 1, 1000, "threads listed in sched.report"),
	NT_KEY_INT(CFG, max_threads, 16384, 64, 4194304,
		   "threads tracked at once in BPF (further ones are counted as drops)"),
	NT_KEY_INT(CFG, max_processes, 1024, 1, 65536,
		   "per-process run-queue histograms in BPF (further ones go to pid=\"other\")"),
	NT_KEY_INT(CFG, max_series, 4096, 16, 1000000,
		   "label sets kept per metric family (cardinality bound)"),
	NT_KEY_INT(CFG, ringbuf_kb, 256, 4, 1048576,
		   "BPF ring buffer size in KiB (a power of two)"),
	NT_KEY_INT(CFG, exited_keep_ms, 60000, 0, 86400000,
		   "keep the metric series of an exited thread or process this long (ms; at least 2 intervals) so every exporter sees its last value"),
	NT_KEY_CHOICE(CFG, attach, "auto", attach_choices,
		      "tracepoint flavour: auto (tp_btf when it works), tp_btf, raw_tp"),
	NT_KEY_CHOICE(CFG, runq_hist, "process", hist_choices,
		      "run-queue latency histogram per process (pid label) or one global (pid=\"all\")"),
};

/* ---- event schemas ------------------------------------------------- */

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

/* ---- metrics ------------------------------------------------------- */

static const char *const l_thread[] = { "pid", "tid", "comm" };
static const char *const l_kind[] = { "pid", "kind" };
static const char *const l_pid[] = { "pid" };
static const char *const l_prog[] = { "program" };
static const char *const no_labels[1] = { NULL };

enum { M_ON, M_OFF, M_RUNQ, M_CSW, M_MIGR, M_HIST, M_THREADS, M_BPF_RUNS,
       M_BPF_SECS, M_FOLDED, M_N };

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

/* ---- state --------------------------------------------------------- */

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
	struct ring_buffer *rb;
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

static void copy_comm(char dst[NT_COMM_LEN + 1], const char *src)
{
	memcpy(dst, src, NT_COMM_LEN);
	dst[NT_COMM_LEN] = '\0';
}

/* ---- publishing ---------------------------------------------------- */

static struct proc *proc_get(struct sched_state *st, uint32_t pid)
{
	struct proc *p = sched_map_get(&st->procs, pid);

	if (p)
		return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	if (pid)
		snprintf(p->pid_s, sizeof(p->pid_s), "%u", pid);
	else
		snprintf(p->pid_s, sizeof(p->pid_s), "%s",
			 strcmp(st->cfg->runq_hist, "global") ? "other" : "all");
	if (sched_map_put(&st->procs, pid, p)) {
		free(p);
		return NULL;
	}
	return p;
}

static void thread_series(struct sched_state *st, struct thr *t,
			  const struct sched_totals *d)
{
	const struct nt_host *h = st->host;
	struct proc *p = proc_get(st, t->pid);
	const char *pid_s = p ? p->pid_s : "0";
	const char *lt[3] = { pid_s, t->tid_s, t->label_comm };

	if (t->has_series && strcmp(t->label_comm, t->comm)) {
		/* Renamed (exec, prctl): move the totals to the new name. */
		h->metric_remove(st->m[M_ON], lt);
		h->metric_remove(st->m[M_OFF], lt);
		h->metric_remove(st->m[M_RUNQ], lt);
		t->has_series = false;
	}
	if (!t->has_series) {
		memcpy(t->label_comm, t->comm, sizeof(t->label_comm));
		h->metric_add(st->m[M_ON], lt, (double)t->pub.on_ns / 1e9);
		h->metric_add(st->m[M_OFF], lt, (double)t->pub.off_ns / 1e9);
		h->metric_add(st->m[M_RUNQ], lt, (double)t->pub.runq_ns / 1e9);
		t->has_series = true;
	} else {
		h->metric_add(st->m[M_ON], lt, (double)d->on_ns / 1e9);
		h->metric_add(st->m[M_OFF], lt, (double)d->off_ns / 1e9);
		h->metric_add(st->m[M_RUNQ], lt, (double)d->runq_ns / 1e9);
	}
	if (p) {
		const char *lv[2] = { p->pid_s, "voluntary" };
		const char *li[2] = { p->pid_s, "involuntary" };
		const char *lp[1] = { p->pid_s };

		h->metric_add(st->m[M_CSW], lv, (double)d->vol);
		h->metric_add(st->m[M_CSW], li, (double)d->invol);
		h->metric_add(st->m[M_MIGR], lp, (double)d->migr);
		p->has_series = true;
	}
}

static void thread_event(struct sched_state *st, struct thr *t,
			 const struct sched_totals *d, uint64_t now,
			 bool exited)
{
	struct sched_thread_ev ev;

	if (!st->cfg->thread_events)
		return;
	memset(&ev, 0, sizeof(ev));
	ev.hdr.type = (uint32_t)st->t_thread;
	ev.hdr.size = sizeof(ev);
	ev.hdr.ts_ns = now;
	ev.hdr.pid = t->pid;
	ev.hdr.tid = t->tid;
	memcpy(ev.hdr.comm, t->comm, NT_COMM_LEN);
	ev.oncpu_ns = d->on_ns;
	ev.offcpu_ns = d->off_ns;
	ev.runq_wait_ns = d->runq_ns;
	ev.runq_waits = d->runq_n;
	ev.vol_switches = d->vol;
	ev.invol_switches = d->invol;
	ev.migrations = d->migr;
	ev.wakeups = d->wake;
	ev.total_oncpu_ns = t->pub.on_ns;
	ev.total_offcpu_ns = t->pub.off_ns;
	ev.total_runq_wait_ns = t->pub.runq_ns;
	ev.interval_ns = now > t->last_ts ? now - t->last_ts : 0;
	ev.exited = exited;
	t->last_ts = now;
	st->host->publish(st->inst, &ev.hdr);
}

static struct thr *thr_new(struct sched_state *st, uint32_t tid, uint32_t pid,
			   uint64_t now)
{
	struct thr *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->tid = tid;
	t->pid = pid;
	snprintf(t->tid_s, sizeof(t->tid_s), "%u", tid);
	t->last_ts = now;
	if (sched_map_put(&st->threads, tid, t)) {
		free(t);
		return NULL;
	}
	st->threads_seen++;
	return t;
}

/* The thread is gone: its final event; its series stay exited_keep_ms. */
static void thr_exit(struct sched_state *st, struct thr *t, uint64_t now)
{
	struct sched_totals zero = { 0 };

	if (t->exited)
		return;
	t->exited = true;
	t->dead_ns = now;
	thread_event(st, t, &zero, now, true);
}

/* Forget a thread record now: keep it for the report if it ranks, drop its
 * series. */
static void thr_retire(struct sched_state *st, struct thr *t)
{
	struct sched_row r = { 0 };

	r.pid = t->pid;
	r.tid = t->tid;
	memcpy(r.comm, t->comm, sizeof(r.comm));
	r.exited = true;
	r.t = t->pub;
	sched_top_keep(st->exited_top, &st->n_exited_top,
		       (size_t)st->cfg->top_n, &r);
	if (t->has_series) {
		struct proc *p = proc_get(st, t->pid);
		const char *lt[3] = { p ? p->pid_s : "0", t->tid_s,
				      t->label_comm };

		st->host->metric_remove(st->m[M_ON], lt);
		st->host->metric_remove(st->m[M_OFF], lt);
		st->host->metric_remove(st->m[M_RUNQ], lt);
	}
	free(sched_map_del(&st->threads, t->tid));
}

/* New totals of one thread (from the map, or from its exit record);
 * `se_now`: its kernel runtime read now, 0 when unknown. */
static void thread_update(struct sched_state *st, const struct sched_tstat *s,
			  uint64_t now, uint64_t se_now, bool exited)
{
	struct thr *t = sched_map_get(&st->threads, s->tid);
	struct sched_totals cur, d;
	bool changed;

	if (t && t->exited && t->pid == s->tgid && exited)
		return; /* a second exit notice of a thread already gone */
	if (t && (t->pid != s->tgid || t->exited)) {
		/* The tid was reused: the old thread is gone. */
		thr_exit(st, t, now);
		thr_retire(st, t);
		t = NULL;
	}
	if (!t) {
		t = thr_new(st, s->tid, s->tgid,
			    s->first_ts && s->first_ts < now ? s->first_ts : now);
		if (!t)
			return;
	}
	t->seen_tick = st->tick;
	t->missing = 0;
	copy_comm(t->comm, s->comm);
	sched_totals_from(s, now, se_now, &cur);
	changed = sched_totals_advance(&t->pub, &cur, &d);
	if (changed || !t->has_series || strcmp(t->label_comm, t->comm))
		thread_series(st, t, &d);
	if (exited) {
		t->exited = true;
		t->dead_ns = now;
		thread_event(st, t, &d, now, true);
	} else if (changed) {
		thread_event(st, t, &d, now, false);
	}
}

static void on_exit_rec(struct sched_state *st, const struct sched_exit_rec *r)
{
	uint64_t now = r->hdr.ts_ns;

	if (r->has_stats) {
		struct sched_tstat s = r->st;

		/* The record's name is the one at exit. */
		memcpy(s.comm, r->hdr.comm, NT_COMM_LEN);
		thread_update(st, &s, now, 0, true);
	}
	if (r->group_dead) {
		struct proc *p = proc_get(st, r->hdr.pid);

		if (p && !p->dead) {
			p->dead = true;
			p->dead_ns = r->hdr.ts_ns;
		}
	}
}

static int on_ring(void *ctx, void *data, size_t len)
{
	struct sched_state *st = ctx;
	const struct nt_event_hdr *h = data;

	if (len < sizeof(*h))
		return 0;
	if (h->size > len) { /* it would be read past its end downstream */
		st->host->count_drop(st->inst, "bpf", 1);
		return 0;
	}
	if (h->type == SCHED_REC_EXIT) {
		if (len >= sizeof(struct sched_exit_rec))
			on_exit_rec(st, data);
	} else {
		st->host->publish(st->inst, h);
	}
	if (++st->ring_n >= st->ring_budget)
		return -EAGAIN; /* this record is consumed; stop here */
	return 0;
}

static int ring_drain(struct sched_state *st, uint32_t budget)
{
	int err;

	if (!st->rb)
		return 0;
	st->ring_budget = budget ? budget : 1;
	st->ring_n = 0;
	err = ring_buffer__consume(st->rb);
	if (err < 0 && err != -EAGAIN)
		nt_log_warn(st, "ring buffer: %s",
			      strerror(-err));
	return (int)st->ring_n;
}

static struct bpf_program *const *progs_of(struct sched_bpf *s, bool btf,
					   struct bpf_program *out[NPROG]);

/* ---- reading the maps ---------------------------------------------- */

/* The kernel's runtime of a thread (first field of schedstat), 0 when it
 * cannot be read (gone, or another pid namespace). */
static uint64_t proc_runtime(uint32_t tgid, uint32_t tid)
{
	char path[64], buf[96];

	snprintf(path, sizeof(path), "/proc/%u/task/%u/schedstat", tgid, tid);
	if (nt_file_read(path, buf, sizeof(buf)) <= 0)
		return 0;
	return strtoull(buf, NULL, 10);
}

static void entry_seen(struct sched_state *st, __u32 tid,
		       const struct sched_tstat *s, uint64_t now, bool stale_check)
{
	if (stale_check && !s->on_ts) {
		if (nt_proc_state(NULL, s->tgid, tid) == 0) { /* no such thread */
			bpf_map_delete_elem(bpf_map__fd(st->skel->maps.threads),
					    &tid);
			thread_update(st, s, now, 0, true);
			return;
		}
	}
	/* Believed running: the slice in progress, from the kernel's count
	 * (at most one such thread per CPU). */
	thread_update(st, s, now, s->on_ts ? proc_runtime(s->tgid, tid) : 0,
		      false);
}

static void read_threads(struct sched_state *st, uint64_t now)
{
	int fd = bpf_map__fd(st->skel->maps.threads);
	bool stale = st->tick % STALE_EVERY == 0;

	if (st->batch_ok) {
		LIBBPF_OPTS(bpf_map_batch_opts, opts);
		__u32 in = 0, out = 0;
		bool first = true;

		for (;;) {
			__u32 cnt = BATCH;
			int err = bpf_map_lookup_batch(fd, first ? NULL : &in,
						       &out, st->keys, st->vals,
						       &cnt, &opts);

			if (err < 0)
				err = -errno;
			for (__u32 i = 0; i < cnt; i++)
				entry_seen(st, st->keys[i], &st->vals[i], now,
					   stale);
			if (err == -ENOENT)
				return;
			if (err) {
				nt_log_dbg(st, "batch lookup: %s; per key from now on",
					      strerror(-err));
				st->batch_ok = false;
				break;
			}
			in = out;
			first = false;
		}
	}
	/* Per key (also after a failed batch: updates are idempotent). */
	__u32 key, next, *prev = NULL;
	struct sched_tstat v;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		if (bpf_map_lookup_elem(fd, &next, &v) == 0)
			entry_seen(st, next, &v, now, stale);
		key = next;
		prev = &key;
	}
}

static void read_hists(struct sched_state *st)
{
	int fd = bpf_map__fd(st->skel->maps.hists);
	__u32 key, next, *prev = NULL;
	struct sched_hist h;

	memset(&st->hist_all, 0, sizeof(st->hist_all));
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		uint64_t n = 0;
		bool got = bpf_map_lookup_elem(fd, &next, &h) == 0;
		for (int i = 0; got && i < SCHED_HIST_SLOTS; i++)
			n += h.slots[i];
		/* "other" exists from the load on: a series once it has samples */
		if (got && (n || next)) {
			struct proc *p = proc_get(st, next);

			sched_hist_merge(&st->hist_all, &h);
			if (p) {
				const char *lp[1] = { p->pid_s };
				uint64_t counts[SCHED_HIST_SLOTS];

				for (int i = 0; i < SCHED_HIST_SLOTS; i++)
					counts[i] = h.slots[i];
				st->host->metric_hist_set(st->m[M_HIST], lp,
							  counts,
							  (double)h.sum_ns / 1e9);
				p->has_hist = true;
			}
		}
		key = next;
		prev = &key;
	}
}

struct collect {
	struct sched_state *st;
	size_t n;
};

static void collect_thr(void *val, void *arg)
{
	struct collect *c = arg;

	if (c->n < c->st->scratch_cap)
		c->st->scratch[c->n++] = val;
}

/* Snapshot of all thread records into st->scratch; returns the count. */
static size_t thr_list(struct sched_state *st)
{
	struct collect c = { st, 0 };

	if (st->threads.n > st->scratch_cap) {
		size_t cap = st->threads.n * 2;
		struct thr **s = realloc(st->scratch, cap * sizeof(*s));

		if (!s)
			return 0;
		st->scratch = s;
		st->scratch_cap = cap;
	}
	sched_map_each(&st->threads, collect_thr, &c);
	return c.n;
}

/* How long exited series stay. */
static uint64_t keep_ns(const struct sched_state *st)
{
	int64_t ms = st->cfg->exited_keep_ms;

	if (ms < 2 * st->cfg->interval_ms)
		ms = 2 * st->cfg->interval_ms;
	return (uint64_t)ms * 1000000ull;
}

static void retire(struct sched_state *st, uint64_t now)
{
	size_t n = thr_list(st);
	uint32_t live = 0;

	for (size_t i = 0; i < n; i++) {
		struct thr *t = st->scratch[i];

		if (!t->exited) {
			live++;
			continue;
		}
		if (now >= t->dead_ns + keep_ns(st))
			thr_retire(st, t);
	}
	st->host->metric_set(st->m[M_THREADS], no_labels, live);
}

static void retire_procs(struct sched_state *st, uint64_t now)
{
	struct sched_map *m = &st->procs;
	uint32_t *dead = NULL;
	size_t nd = 0;

	for (size_t i = 0; i < m->nb; i++)
		for (struct sched_map_ent *e = m->b[i]; e; e = e->next) {
			struct proc *p = e->val;

			if (p->dead && now >= p->dead_ns + keep_ns(st)) {
				uint32_t *nd_ = realloc(dead, (nd + 1) * sizeof(*dead));

				if (!nd_)
					break;
				dead = nd_;
				dead[nd++] = p->pid;
			}
		}
	for (size_t i = 0; i < nd; i++) {
		struct proc *p = sched_map_del(m, dead[i]);
		const char *lv[2] = { p->pid_s, "voluntary" };
		const char *li[2] = { p->pid_s, "involuntary" };
		const char *lp[1] = { p->pid_s };
		__u32 key = p->pid;

		if (p->has_series) {
			st->host->metric_remove(st->m[M_CSW], lv);
			st->host->metric_remove(st->m[M_CSW], li);
			st->host->metric_remove(st->m[M_MIGR], lp);
		}
		if (p->has_hist)
			st->host->metric_remove(st->m[M_HIST], lp);
		if (key)
			bpf_map_delete_elem(bpf_map__fd(st->skel->maps.hists),
					    &key);
		free(p);
	}
	free(dead);
}

static void report_drops(struct sched_state *st)
{
	uint64_t full;

	nt_bpf_report_drops(st->host, st->inst,
			    bpf_map__fd(st->skel->maps.nt_drops),
			    &st->drops_reported);
	full = nt_bpf_percpu_sum(bpf_map__fd(st->skel->maps.map_full));
	if (full > st->full_reported) {
		st->host->count_drop(st->inst, "map_full",
				     full - st->full_reported);
		st->full_reported = full;
	}
	/* folded into "other": counted, but not as drops */
	full = nt_bpf_percpu_sum(bpf_map__fd(st->skel->maps.hist_folded));
	if (full > st->folded_reported) {
		st->host->metric_add(st->m[M_FOLDED], no_labels,
				     (double)(full - st->folded_reported));
		st->folded_reported = full;
	}
}

/* The programs' own cost from the kernel's BPF stats (counted only while
 * kernel.bpf_stats_enabled = 1). `say`: log it. */
static void prog_cost(struct sched_state *st, bool say)
{
	struct bpf_program *use[NPROG];

	progs_of(st->skel, st->btf, use);
	for (int i = 0; i < NPROG; i++) {
		struct bpf_prog_info info;
		__u32 len = sizeof(info);
		const char *lp[1] = { bpf_program__name(use[i]) };

		memset(&info, 0, sizeof(info));
		if (bpf_obj_get_info_by_fd(bpf_program__fd(use[i]), &info, &len))
			continue;
		if (info.run_cnt > st->prog_runs[i]) {
			st->host->metric_add(st->m[M_BPF_RUNS], lp,
					     (double)(info.run_cnt - st->prog_runs[i]));
			st->host->metric_add(st->m[M_BPF_SECS], lp,
					     (double)(info.run_time_ns - st->prog_ns[i]) / 1e9);
			st->prog_runs[i] = info.run_cnt;
			st->prog_ns[i] = info.run_time_ns;
		}
		if (say && info.run_cnt)
			nt_log_info(st, "BPF cost: %s %llu runs, avg %.0f ns",
				      lp[0], (unsigned long long)info.run_cnt,
				      (double)info.run_time_ns / (double)info.run_cnt);
	}
}

/* Read everything: exits first, then the maps. `final`: keep all series. */
static void snapshot(struct sched_state *st, bool final)
{
	uint64_t now;
	size_t n;

	if (!st->skel)
		return;
	st->tick++;
	ring_drain(st, final ? UINT32_MAX : 65536);
	now = nt_clock_mono_ns();
	read_threads(st, now);
	/* Records not in the map twice in a row are gone (exit record lost
	 * or not yet read the first time). */
	n = thr_list(st);
	for (size_t i = 0; i < n; i++) {
		struct thr *t = st->scratch[i];

		if (!t->exited && t->seen_tick != st->tick &&
		    ++t->missing >= 2)
			thr_exit(st, t, now);
	}
	read_hists(st);
	report_drops(st);
	prog_cost(st, final);
	if (!final) {
		retire(st, now);
		retire_procs(st, now);
	}
}

static void publish_report(struct sched_state *st)
{
	size_t cap = (size_t)st->cfg->top_n * 120 + 512, n, nrows = 0, len;
	struct sched_row *rows;
	struct sched_report_ev *ev;
	uint64_t now = nt_clock_mono_ns();

	n = thr_list(st);
	rows = calloc(n + st->n_exited_top + 1, sizeof(*rows));
	ev = calloc(1, sizeof(*ev) + cap);
	if (!rows || !ev)
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct thr *t = st->scratch[i];
		struct sched_row *r = &rows[nrows++];

		r->pid = t->pid;
		r->tid = t->tid;
		memcpy(r->comm, t->comm, sizeof(r->comm));
		r->exited = t->exited;
		r->t = t->pub;
	}
	memcpy(rows + nrows, st->exited_top, st->n_exited_top * sizeof(*rows));
	nrows += st->n_exited_top;
	sched_rows_sort(rows, nrows);
	len = sched_report_format((char *)(ev + 1), cap, rows, nrows,
				  (size_t)st->cfg->top_n, &st->hist_all,
				  (double)(now - st->start_ns) / 1e9,
				  st->threads_seen);
	ev->hdr.type = (uint32_t)st->t_report;
	ev->hdr.size = (uint32_t)(sizeof(*ev) + len);
	ev->hdr.ts_ns = now;
	/* About the target set: its first process, or 0 host-wide. */
	if (st->host->target_pids(st->inst, &ev->hdr.pid, 1) == 0)
		ev->hdr.pid = 0;
	ev->hdr.tid = ev->hdr.pid;
	snprintf(ev->hdr.comm, sizeof(ev->hdr.comm), "ntcore");
	ev->text.off = sizeof(*ev);
	ev->text.len = (uint32_t)len;
	st->host->publish(st->inst, &ev->hdr);
out:
	free(rows);
	free(ev);
}

/* ---- existing threads of the targets -------------------------------- */

/* A thread that blocks for the whole run never passes a tracepoint; enter
 * the threads the targets already have (-p PID) so that they are counted
 * from the start: off-CPU time accrues from now, runtime from its current
 * value. Host-wide, threads are entered as they are seen. */
static void seed_targets(struct sched_state *st, uint64_t now)
{
	int fd = bpf_map__fd(st->skel->maps.threads);
	uint32_t pids[256];
	size_t n = st->host->target_pids(st->inst, pids, NT_ARRAY_LEN(pids));
	unsigned seeded = 0;

	if (n > NT_ARRAY_LEN(pids))
		n = NT_ARRAY_LEN(pids);
	for (size_t i = 0; i < n; i++) {
		char path[64];
		struct dirent *de;
		DIR *d;

		snprintf(path, sizeof(path), "/proc/%u/task", pids[i]);
		d = opendir(path);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			struct sched_tstat s;
			__u32 tid;

			if (de->d_name[0] < '0' || de->d_name[0] > '9')
				continue;
			tid = (__u32)strtoul(de->d_name, NULL, 10);
			memset(&s, 0, sizeof(s));
			s.tgid = pids[i];
			s.tid = tid;
			s.first_ts = now;
			s.se_last = proc_runtime(pids[i], tid);
			if (nt_proc_comm(pids[i], tid, s.comm, sizeof(s.comm)) < 0)
				s.comm[0] = '\0';
			/* Already seen by a program: keep that. */
			if (bpf_map_update_elem(fd, &tid, &s, BPF_NOEXIST) == 0)
				seeded++;
		}
		closedir(d);
	}
	if (seeded)
		nt_log_dbg(st, "%u existing threads of %zu target processes entered",
			      seeded, n);
}

static struct bpf_program *const *progs_of(struct sched_bpf *s, bool btf,
					   struct bpf_program *out[NPROG])
{
	if (btf) {
		out[0] = s->progs.sched_switch_btf;
		out[1] = s->progs.sched_wakeup_btf;
		out[2] = s->progs.sched_wakeup_new_btf;
		out[3] = s->progs.sched_migrate_task_btf;
		out[4] = s->progs.sched_process_exit_btf;
		out[5] = s->progs.task_rename_btf;
	} else {
		out[0] = s->progs.sched_switch_raw;
		out[1] = s->progs.sched_wakeup_raw;
		out[2] = s->progs.sched_wakeup_new_raw;
		out[3] = s->progs.sched_migrate_task_raw;
		out[4] = s->progs.sched_process_exit_raw;
		out[5] = s->progs.task_rename_raw;
	}
	return out;
}

/* The six tracepoints, each with its two programs, for the kit's chooser. */
static void tp_table(struct sched_bpf *s, struct nt_tp_prog tps[NPROG])
{
	static const char *const names[NPROG] = {
		"sched_switch", "sched_wakeup", "sched_wakeup_new",
		"sched_migrate_task", "sched_process_exit", "task_rename",
	};
	struct bpf_program *btf[NPROG], *raw[NPROG];

	progs_of(s, true, btf);
	progs_of(s, false, raw);
	for (int i = 0; i < NPROG; i++)
		tps[i] = (struct nt_tp_prog){ .tp = names[i],
					      .group = i == 5 ? "task" : "sched",
					      .btf = btf[i], .raw = raw[i] };
}

/* Open and load the object: the flavour chosen for `mode` (tp_btf where a
 * BTF tracing program loads, the libbpf-tools way), or raw_tp when
 * raw_only. *flavour gets the one tried. */
static int load(struct sched_state *st, const struct btf *vmlinux, int mode,
		bool raw_only, int *flavour)
{
	const struct sched_cfg *c = st->cfg;
	struct nt_tp_prog tps[NPROG];
	struct sched_bpf *s;
	int err;

	s = sched_bpf__open();
	if (!s)
		return -errno ? -errno : -ENOMEM;
	tp_table(s, tps);
	*flavour = raw_only ? NT_TP_RAW : nt_tp_flavour(vmlinux, mode, tps, NPROG);
	err = *flavour < 0 ? *flavour
			   : nt_tp_apply(st->host, st->inst, vmlinux, *flavour, tps, NPROG);
	if (err) {
		sched_bpf__destroy(s);
		return err;
	}
	s->rodata->switch_type = (__u32)st->t_switch;
	s->rodata->switch_events = c->switch_events;
	s->rodata->hist_global = !strcmp(c->runq_hist, "global");
	s->rodata->wake_bytes = (__u64)c->ringbuf_kb * 1024 / 16;
	bpf_map__set_max_entries(s->maps.threads, (__u32)c->max_threads);
	bpf_map__set_max_entries(s->maps.hists, (__u32)c->max_processes + 1);
	bpf_map__set_max_entries(s->maps.events, (__u32)c->ringbuf_kb * 1024);
	err = nt_bpf_use_targets(st->host, st->inst, s->maps.nt_targets,
				 &s->rodata->nt_filter_on);
	if (!err)
		err = sched_bpf__load(s);
	if (err) {
		sched_bpf__destroy(s);
		return err;
	}
	/* "other" exists from the start: when the table is full, samples
	 * fold into it instead of being lost */
	__u32 other = 0;
	static const struct sched_hist empty;
	bpf_map_update_elem(bpf_map__fd(s->maps.hists), &other, &empty, BPF_NOEXIST);
	st->skel = s;
	st->btf = *flavour == NT_TP_BTF;
	return 0;
}

/* Load with the configured flavour; in auto mode a tp_btf object that
 * fails to load is reopened as raw_tp. The BTF is libbpf's parse, which
 * the daemon shares between loads and frees once all are loaded
 * (core/btfshare.c); host->vmlinux_btf would pin it (13 MB) for the run. */
static int load_any(struct sched_state *st)
{
	int mode = nt_tp_mode_parse(st->cfg->attach), flavour = NT_TP_RAW, err;
	struct btf *vmlinux = btf__load_vmlinux_btf();

	err = load(st, vmlinux, mode, false, &flavour);
	if (err && flavour == NT_TP_BTF && mode == NT_TP_AUTO) {
		nt_log_warn(st, "tp_btf programs failed to load (%s); using raw_tp",
			    strerror(-err));
		err = load(st, vmlinux, mode, true, &flavour);
	}
	btf__free(vmlinux);
	if (err)
		nt_log_err(st, "cannot load BPF (%s): %s",
			   nt_tp_flavour_name(flavour), strerror(-err));
	return err;
}

/* ---- ops ----------------------------------------------------------- */

static int sched_init(struct nt_instance *inst, const struct nt_host *host,
		      const void *config, void **state)
{
	const struct sched_cfg *c = config;
	struct sched_state *st;
	int64_t kb = c->ringbuf_kb;

	if (kb & (kb - 1))
		return host->config_error(inst, "ringbuf_kb",
					  "%" PRId64 " is not a power of two", kb);
	if (c->report_interval_s && c->report_interval_s * 1000 < c->interval_ms)
		return host->config_error(inst, "report_interval_s",
					  "must be 0 or at least interval_ms (%" PRId64 ")",
					  c->interval_ms);
	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->inst = inst;
	st->host = host;
	st->cfg = c;
	st->batch_ok = true;
	st->keys = calloc(BATCH, sizeof(*st->keys));
	st->vals = calloc(BATCH, sizeof(*st->vals));
	st->exited_top = calloc((size_t)c->top_n, sizeof(*st->exited_top));
	if (!st->keys || !st->vals || !st->exited_top ||
	    sched_map_init(&st->threads, 256) || sched_map_init(&st->procs, 64))
		goto nomem;

	st->t_thread = host->register_schema(inst, &thread_schema);
	st->t_switch = host->register_schema(inst, &switch_schema);
	st->t_report = host->register_schema(inst, &report_schema);
	if (st->t_thread <= 0 || st->t_switch <= 0 || st->t_report <= 0) {
		nt_kit_log(host, inst, NT_LOG_ERROR, "cannot register event schemas");
		sched_map_fini(&st->threads, NULL);
		sched_map_fini(&st->procs, NULL);
		free(st->keys);
		free(st->vals);
		free(st->exited_top);
		free(st);
		return -EEXIST;
	}
	sched_hist_bounds(st->bounds);
	for (int i = 0; i < M_N; i++) {
		st->mdesc[i] = metric_tmpl[i];
		if (!st->mdesc[i].max_series)
			st->mdesc[i].max_series = (uint32_t)c->max_series;
		if (i == M_HIST)
			st->mdesc[i].buckets = st->bounds;
		st->m[i] = host->metric_register(inst, &st->mdesc[i]);
		if (!st->m[i]) {
			nt_kit_log(host, inst, NT_LOG_ERROR, "cannot register %s",
				  st->mdesc[i].name);
			sched_map_fini(&st->threads, NULL);
			sched_map_fini(&st->procs, NULL);
			free(st->keys);
			free(st->vals);
			free(st->exited_top);
			free(st);
			return -EINVAL;
		}
	}
	*state = st;
	return 0;
nomem:
	sched_map_fini(&st->threads, NULL);
	sched_map_fini(&st->procs, NULL);
	free(st->keys);
	free(st->vals);
	free(st->exited_top);
	free(st);
	return -ENOMEM;
}

static void sched_detach(void *state);

static int sched_attach(void *state)
{
	struct sched_state *st = state;
	const struct sched_cfg *c = st->cfg;
	const struct nt_host *h = st->host;
	struct bpf_program *use[NPROG];
	int err;

	err = load_any(st);
	if (err)
		return err;
	progs_of(st->skel, st->btf, use);
	for (int i = 0; i < NPROG; i++) {
		st->links[i] = bpf_program__attach(use[i]);
		if (!st->links[i]) {
			err = -errno ? -errno : -EINVAL;
			nt_log_err(st, "cannot attach %s: %s",
			       bpf_program__name(use[i]), strerror(-err));
			goto fail;
		}
	}
	err = nt_bpf_ring_open(h, st->inst, st->skel->maps.events, on_ring, st,
			       TOK_RING, &st->rb);
	if (err)
		goto fail;
	err = h->add_timer(st->inst, (uint64_t)c->interval_ms, TOK_TICK);
	if (!err && c->report_interval_s)
		err = h->add_timer(st->inst, (uint64_t)c->report_interval_s * 1000,
				   TOK_REPORT);
	if (err) {
		nt_log_err(st, "cannot add timers: %s",
		       strerror(-err));
		goto fail;
	}
	st->start_ns = nt_clock_mono_ns();
	seed_targets(st, st->start_ns);
	nt_log_info(st, "attached (%s) to sched_switch, sched_wakeup, sched_wakeup_new, sched_migrate_task, sched_process_exit, task_rename",
	       st->btf ? "tp_btf" : "raw_tp");
	return 0;
fail:
	sched_detach(st);
	return err;
}

static int sched_poll(void *state, uint32_t token, uint32_t budget)
{
	struct sched_state *st = state;

	switch (token) {
	case TOK_RING:
		return ring_drain(st, budget);
	case TOK_TICK:
		snapshot(st, false);
		return 0;
	case TOK_REPORT:
		publish_report(st);
		return 0;
	default:
		return 0;
	}
}

static void sched_flush(void *state)
{
	struct sched_state *st = state;

	if (!st->skel)
		return;
	snapshot(st, true);
	publish_report(st);
}

static void sched_detach(void *state)
{
	struct sched_state *st = state;

	ring_buffer__free(st->rb);
	st->rb = NULL;
	for (int i = 0; i < NPROG; i++) {
		bpf_link__destroy(st->links[i]);
		st->links[i] = NULL;
	}
	sched_bpf__destroy(st->skel);
	st->skel = NULL;
}

/* Stop producing (ABI 1.6): the links go, all at once (kit/links.h); the
 * ring stays for the core's last read. */
static void sched_quiesce(void *state)
{
	struct sched_state *st = state;

	nt_links_release_parallel(st->links, NPROG, NULL, 0);
	memset(st->links, 0, sizeof(st->links));
}

static void sched_fini(void *state)
{
	struct sched_state *st = state;

	if (!st)
		return;
	sched_map_fini(&st->threads, free);
	sched_map_fini(&st->procs, free);
	free(st->keys);
	free(st->vals);
	free(st->exited_top);
	free(st->scratch);
	free(st);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "sched",
	.kind = NT_KIND_PROBE,
	.description = "scheduler: per-thread on/off-CPU time, run-queue latency, context switches, migrations (tracepoints)",
	.version = "0.1.0",
	.config = sched_config,
	.n_config = NT_ARRAY_LEN(sched_config),
	.config_size = sizeof(struct sched_cfg),
	.init = sched_init,
	.attach = sched_attach,
	.poll = sched_poll,
	.detach = sched_detach,
	.quiesce = sched_quiesce,
	.fini = sched_fini,
	.flush = sched_flush,
};
