/* SPDX-License-Identifier: MIT */
/*
 * sched probe: the threads and processes seen, their metric series and
 * sched.thread events, and their retirement after exit.
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

static void copy_comm(char dst[NT_COMM_LEN + 1], const char *src)
{
	memcpy(dst, src, NT_COMM_LEN);
	dst[NT_COMM_LEN] = '\0';
}

struct proc *sched_proc_get(struct sched_state *st, uint32_t pid)
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
	struct proc *p = sched_proc_get(st, t->pid);
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
void sched_thr_exit(struct sched_state *st, struct thr *t, uint64_t now)
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
void sched_thr_retire(struct sched_state *st, struct thr *t)
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
		struct proc *p = sched_proc_get(st, t->pid);
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
void sched_thread_update(struct sched_state *st, const struct sched_tstat *s,
			  uint64_t now, uint64_t se_now, bool exited)
{
	struct thr *t = sched_map_get(&st->threads, s->tid);
	struct sched_totals cur, d;
	bool changed;

	if (t && t->exited && t->pid == s->tgid && exited)
		return; /* a second exit notice of a thread already gone */
	if (t && (t->pid != s->tgid || t->exited)) {
		/* The tid was reused: the old thread is gone. */
		sched_thr_exit(st, t, now);
		sched_thr_retire(st, t);
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
