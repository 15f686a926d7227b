/* SPDX-License-Identifier: MIT */
/*
 * mem probe: the table of processes seen (sorted by pid), their BPF links,
 * and the reaper thread that destroys uprobe links off the loop.
 */
#include <linux/types.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ntcore/bpf.h"
#include "ntcore/kit/clock.h"
#include "ntcore/kit/log.h"
#include "ntcore/kit/proc.h"
#include "ntcore/plugin.h"

#include "mem_priv.h"
#include "ntcore/kit/links.h"

static void mem_link_destroy(struct mem_link *l)
{
	if (l->link)
		bpf_link__destroy(l->link);
	else if (l->fd >= 0)
		close(l->fd);
	l->link = NULL;
	l->fd = -1;
}

struct mem_proc_info *mem_proc_find(struct mem_state *st, uint32_t pid,
				       size_t *pos)
{
	size_t lo = 0, hi = st->n_procs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (st->procs[mid]->pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pos)
		*pos = lo;
	return lo < st->n_procs && st->procs[lo]->pid == pid ? st->procs[lo] : NULL;
}

void mem_proc_read_comm(struct mem_proc_info *p)
{
	char comm[64];

	if (p->finalized)
		return;
	if (nt_proc_comm(p->pid, 0, comm, sizeof(comm)) > 0)
		snprintf(p->comm, sizeof(p->comm), "%.15s", comm);
	p->comm_ns = nt_clock_mono_ns();
}

struct mem_proc_info *mem_proc_get(struct mem_state *st, uint32_t pid)
{
	size_t pos;
	struct mem_proc_info *p = mem_proc_find(st, pid, &pos);

	if (p)
		return p;
	if (st->n_procs == st->cap_procs) {
		size_t cap = st->cap_procs ? st->cap_procs * 2 : 16;
		struct mem_proc_info **grown = realloc(st->procs, cap * sizeof(*grown));

		if (!grown)
			return NULL;
		st->procs = grown;
		st->cap_procs = cap;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	snprintf(p->comm, sizeof(p->comm), "?");
	mem_proc_read_comm(p);
	memmove(st->procs + pos + 1, st->procs + pos,
		(st->n_procs - pos) * sizeof(*st->procs));
	st->procs[pos] = p;
	st->n_procs++;
	return p;
}

static void *reaper_main(void *arg)
{
	struct mem_reaper *r = arg;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		while (!r->n && !r->stop)
			pthread_cond_wait(&r->cv, &r->mu);
		if (!r->n && r->stop)
			break;
		struct mem_link *batch = r->q;
		size_t n = r->n;

		r->q = NULL;
		r->n = r->cap = 0;
		pthread_mutex_unlock(&r->mu);
		struct nt_linkset ls = {0};
		mem_links_take(&ls, &batch, &n); /* together: one grace period */
		nt_linkset_release(&ls);
		pthread_mutex_lock(&r->mu);
	}
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Hand links over (the array itself stays the caller's). */
void mem_reaper_push(struct mem_reaper *r, struct mem_link *links, size_t n)
{
	if (!n)
		return;
	pthread_mutex_lock(&r->mu);
	if (!r->started && !r->stop &&
	    pthread_create(&r->th, NULL, reaper_main, r) == 0)
		r->started = true;
	if (r->started && r->n + n > r->cap) {
		size_t cap = (r->n + n) * 2;
		struct mem_link *q = realloc(r->q, cap * sizeof(*q));

		if (q) {
			r->q = q;
			r->cap = cap;
		}
	}
	if (r->started && r->n + n <= r->cap) {
		memcpy(r->q + r->n, links, n * sizeof(*links));
		r->n += n;
		pthread_cond_signal(&r->cv);
		pthread_mutex_unlock(&r->mu);
		return;
	}
	pthread_mutex_unlock(&r->mu);
	for (size_t i = 0; i < n; i++) /* no thread: do it here */
		mem_link_destroy(&links[i]);
}

/* Wait until every handed-over link is gone. */
void mem_reaper_stop(struct mem_reaper *r)
{
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	if (r->started)
		pthread_join(r->th, NULL);
	r->started = false;
	free(r->q);
	r->q = NULL;
	r->n = r->cap = 0;
}

void mem_proc_links_destroy(struct mem_state *st, struct mem_proc_info *p)
{
	mem_reaper_push(&st->reaper, p->links, p->n_links);
	free(p->links);
	p->links = NULL;
	p->n_links = 0;
	p->heap_attached = false;
}

void mem_proc_remove(struct mem_state *st, uint32_t pid)
{
	size_t pos;
	struct mem_proc_info *p = mem_proc_find(st, pid, &pos);

	if (!p)
		return;
	mem_proc_links_destroy(st, p);
	for (int i = 0; i < M_COUNT; i++)
		if (st->m[i]) {
			char pidbuf[16];
			const char *lv[1] = {pidbuf};

			snprintf(pidbuf, sizeof(pidbuf), "%u", pid);
			st->host->metric_remove(st->m[i], lv);
		}
	free(p);
	memmove(st->procs + pos, st->procs + pos + 1,
		(st->n_procs - pos - 1) * sizeof(*st->procs));
	st->n_procs--;
}

int mem_links_push(struct mem_link **v, size_t *n, struct bpf_link *l, int fd)
{
	struct mem_link *grown = realloc(*v, (*n + 1) * sizeof(*grown));

	if (!grown) {
		struct mem_link ml = {l, fd};

		mem_link_destroy(&ml);
		return -ENOMEM;
	}
	*v = grown;
	(*v)[*n].link = l;
	(*v)[*n].fd = fd;
	(*n)++;
	return 0;
}

void mem_links_take(struct nt_linkset *ls, struct mem_link **links,
		       size_t *n)
{
	for (size_t i = 0; i < *n; i++) {
		if ((*links)[i].link)
			nt_linkset_add(ls, (*links)[i].link);
		else
			nt_linkset_add_fd(ls, (*links)[i].fd);
	}
	free(*links);
	*links = NULL;
	*n = 0;
}
