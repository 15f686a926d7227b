/* SPDX-License-Identifier: MIT */
/*
 * python probe: per-thread bookkeeping. Each sampled thread's last
 * on-CPU and idle stacks (struct thr); off-CPU time counted as samples of
 * the idle stack; threads blocked since before they were seen walked
 * once from user space (seed_idle), since a blocked thread's Python stack
 * cannot change.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/kit/proc.h"
#include "pyplugin.h"

struct thr *thr_get(struct py_plugin *st, uint32_t tid, uint32_t pid)
{
	struct thr *t = py_map_get(&st->threads, tid);

	if (t && t->pid != pid) {
		free(py_map_del(&st->threads, tid));
		t = NULL;
	}
	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->pid = pid;
	t->idle_stack = t->cpu_stack = UINT32_MAX;
	if (py_map_put(&st->threads, tid, t)) {
		free(t);
		return NULL;
	}
	return t;
}

/* One thread of p: walk it from user space if its current off-CPU
 * period has no stack of its own (see seed_idle). */
static void seed_thread(struct py_plugin *st, struct pyp *p, int ofd,
			uint32_t tid, uint64_t tstate, uint64_t now)
{
	struct thr *t = py_map_get(&st->threads, tid);
	struct py_offcpu oc, again;
	char comm[NT_COMM_LEN + 1] = "", state;
	bool have = bpf_map_lookup_elem(ofd, &tid, &oc) == 0;
	uint32_t stack;

	if (have && (!oc.out_ns || oc.walk_ns >= oc.out_ns))
		return; /* running, or BPF walked it as it left */
	if (!have && t && t->pid == p->pid && t->idle_stack != UINT32_MAX)
		return;
	if (have && now - oc.out_ns < st->period_ns)
		return; /* just left: a WEIGHT may come first anyway */
	state = nt_proc_state(NULL, p->pid, tid);
	if (!state || state == 'R')
		return; /* gone, or running: the sampler sees it */
	if (nt_proc_comm(p->pid, tid, comm, sizeof(comm)) <= 0)
		return;
	stack = user_walk(st, p, tid, tstate, comm, now);
	t = stack != UINT32_MAX ? thr_get(st, tid, p->pid) : NULL;
	if (!t)
		return;
	if (have) {
		/* not if it ran meanwhile: BPF owns the entry again */
		if (bpf_map_lookup_elem(ofd, &tid, &again) ||
		    again.out_ns != oc.out_ns)
			return;
		t->idle_stack = stack;
		pyj_note(&t->hist, again.out_ns, stack, PYJ_IDLE);
		again.walk_ns = again.vwalk_ns = again.out_ns;
		bpf_map_update_elem(ofd, &tid, &again, BPF_EXIST);
	} else {
		t->idle_stack = stack;
		pyj_note(&t->hist, now, stack, PYJ_IDLE);
		/* off the CPU from now on, as if BPF had seen it leave */
		memset(&oc, 0, sizeof(oc));
		oc.out_ns = now;
		oc.walk_ns = oc.vwalk_ns = now;
		bpf_map_update_elem(ofd, &tid, &oc, BPF_NOEXIST);
	}
}

/* The threads of pid with their thread pointer (the py_tasks iterator). */
static int task_thread_ptrs(struct py_plugin *st, uint32_t pid,
			struct py_task_rec *out, int max)
{
	union bpf_iter_link_info li;
	LIBBPF_OPTS(bpf_iter_attach_opts, o);
	struct bpf_link *l;
	int fd, n = 0, err;
	ssize_t r;

	memset(&li, 0, sizeof(li));
	li.task.pid = pid;
	o.link_info = &li;
	o.link_info_len = sizeof(li);
	l = bpf_program__attach_iter(st->skel->progs.py_tasks, &o);
	if (!l)
		return -errno;
	fd = bpf_iter_create(bpf_link__fd(l));
	if (fd < 0) {
		err = -errno;
		bpf_link__destroy(l);
		return err;
	}
	while (n < max &&
	       (r = read(fd, out + n, (size_t)(max - n) * sizeof(*out))) > 0)
		n += (int)(r / (ssize_t)sizeof(*out));
	close(fd);
	bpf_link__destroy(l);
	return n;
}

/*
 * (native tid, thread state) of the threads of p's first interpreter.
 * 3.10 stores pthread_self() as a thread state's id: the thread pointer
 * the task iterator reads for each tid, less tp_to_pthread. Until
 * a new thread runs, its state holds its creator's id; the list is newest
 * first, so the older (the creator's own) state wins a duplicate.
 */
static int threads_of(struct py_plugin *st, struct pyp *p, uint32_t *tids,
		      uint64_t *tss, int max)
{
	uint64_t ids[256], live[256];
	struct py_task_rec tr[256];
	int nl, nt, n = 0;

	if (!p->layout.tid_is_pthread)
		return py_threads((pid_t)p->pid, &p->layout, p->found.runtime,
				  tids, tss, (size_t)max);
	nl = py_tstates((pid_t)p->pid, &p->layout, p->found.runtime, ids, live, 256);
	if (nl <= 0)
		return nl;
	nt = task_thread_ptrs(st, p->pid, tr, 256);
	for (int i = nl; i-- > 0 && n < max;) {
		for (int j = 0; j < nt; j++) {
			bool dup = false;

			if (tr[j].tgid != p->pid || !ids[i] ||
			    tr[j].tp - st->skel->rodata->tp_to_pthread != ids[i])
				continue;
			for (int k = 0; k < n && !dup; k++)
				dup = tids[k] == tr[j].tid;
			if (!dup) {
				tids[n] = tr[j].tid;
				tss[n++] = live[i];
			}
			break;
		}
	}
	return n;
}

/*
 * Blocked threads whose current off-CPU period has no stack of its own:
 * those blocked since before we saw them (asleep when the process was
 * registered, or attached with -p: they never leave the CPU again), and
 * those whose switch-out walk was skipped by the once-per-period limit.
 * A blocked thread's Python stack cannot change, so a walk from user
 * space now is the stack of the whole period.
 */
void seed_idle(struct py_plugin *st, struct pyp *p)
{
	uint32_t tids[256];
	uint64_t tss[256];
	int n, ofd;
	uint64_t now = nt_clock_mono_ns();

	if (!st->cfg->idle || p->status != PS_ATTACHED)
		return;
	ofd = bpf_map__fd(st->skel->maps.py_offcpu);
	n = threads_of(st, p, tids, tss, 256);
	for (int i = 0; i < n; i++)
		seed_thread(st, p, ofd, tids[i], tss[i], now);
}

/* Off-CPU time of a thread, counted as samples of its last idle stack. */
void add_offcpu(struct py_plugin *st, struct thr *t, uint64_t start,
		       uint64_t end)
{
	uint64_t n;

	if (t->flushed_to > start)
		start = t->flushed_to;
	if (end <= start || t->idle_stack == UINT32_MAX)
		return;
	t->acc_ns += end - start;
	n = t->acc_ns / st->period_ns;
	t->acc_ns -= n * st->period_ns;
	if (n)
		py_agg_add(st->agg, t->idle_stack, n);
}

/* Count the off-CPU time of threads still off the CPU up to now. */
void flush_offcpu(struct py_plugin *st, uint32_t pid)
{
	int fd = bpf_map__fd(st->skel->maps.py_offcpu);
	uint32_t key, next, *prev = NULL;
	struct py_offcpu oc;
	uint64_t now = nt_clock_mono_ns();

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct thr *t;

		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &oc) || (!oc.out_ns && !oc.acc_ns))
			continue;
		t = py_map_get(&st->threads, key);
		if (!t || (pid && t->pid != pid))
			continue;
		/* time sent yet neither at a switch-in (acc) nor ended (out) */
		if (oc.acc_ns)
			add_offcpu(st, t, oc.acc_start, oc.acc_start + oc.acc_ns);
		if (oc.out_ns)
			add_offcpu(st, t, oc.out_ns, now);
		t->flushed_to = now;
	}
}
