/* SPDX-License-Identifier: MIT */
#include "hang.h"

#include <stdio.h>
#include <string.h>

static void copy_name(char *dst, size_t len, const char *src)
{
	snprintf(dst, len, "%s", src ? src : "");
}

void hang_proc_init(struct hang_proc *p, uint32_t pid)
{
	memset(p, 0, sizeof(*p));
	p->pid = pid;
	p->cpu_ticks_quiet = -1;
}

void hang_activity(struct hang_proc *p, uint64_t ts_ns, enum hang_act kind,
		   const char *func)
{
	p->seen = true;
	if (ts_ns >= p->last_act_ns) {
		p->last_act_ns = ts_ns;
		p->last_act_kind = kind;
		copy_name(p->last_act_func, sizeof(p->last_act_func), func);
	}
	/* activity ends a quiet period: the next one may be reported again */
	if (p->reported && ts_ns > p->reported_at_ns)
		p->reported = false;
	if (!p->reported)
		p->cpu_ticks_quiet = -1;
}

void hang_launch(struct hang_proc *p, uint64_t ts_ns, uint32_t tid,
		 const char *func, const char *kernel, uint32_t stack)
{
	hang_activity(p, ts_ns, HANG_ACT_LAUNCH, func);
	if (ts_ns >= p->launch_ns) {
		p->launch_ns = ts_ns;
		p->launch_tid = tid;
		p->launch_stack = stack;
		copy_name(p->launch_name, sizeof(p->launch_name), kernel);
		copy_name(p->launch_func, sizeof(p->launch_func), func);
	}
	p->launches++;
}

static struct hang_blocked *find_blocked(struct hang_proc *p, uint32_t tid)
{
	for (uint32_t i = 0; i < p->nblocked; i++)
		if (p->blocked[i].tid == tid)
			return &p->blocked[i];
	return NULL;
}

void hang_sync_enter(struct hang_proc *p, uint64_t ts_ns, uint32_t tid,
		     uint32_t api, const char *func, uint32_t stack)
{
	struct hang_blocked *b = find_blocked(p, tid);

	p->seen = true;
	if (!b) {
		if (p->nblocked == HANG_MAX_BLOCKED)
			return;
		b = &p->blocked[p->nblocked++];
	}
	b->tid = tid;
	b->api = api;
	b->since_ns = ts_ns;
	b->stack = stack;
	copy_name(b->func, sizeof(b->func), func);
}

void hang_sync_exit(struct hang_proc *p, uint64_t ts_ns, uint32_t tid,
		    const char *func)
{
	struct hang_blocked *b = find_blocked(p, tid);

	if (b)
		*b = p->blocked[--p->nblocked];
	hang_activity(p, ts_ns, HANG_ACT_SYNC, func);
}

enum hang_verdict hang_check(struct hang_proc *p, uint64_t now_ns,
			     uint64_t timeout_ns, bool alive)
{
	uint64_t quiet_since;
	const struct hang_blocked *b;

	if (!alive)
		return HANG_GONE;
	if (!p->seen)
		return HANG_OK;
	/* a thread that entered a sync and has not returned is quiet since it
	 * entered, even when that came after the last completed activity */
	quiet_since = p->last_act_ns;
	b = hang_longest_blocked(p);
	if (b && b->since_ns > quiet_since && p->last_act_ns == 0)
		quiet_since = b->since_ns;
	if (now_ns < quiet_since || now_ns - quiet_since < timeout_ns)
		return HANG_OK;
	if (p->reported)
		return HANG_REPORTED;
	p->reported = true;
	p->reported_at_ns = now_ns;
	p->reports++;
	return HANG_DUE;
}

const struct hang_blocked *hang_longest_blocked(const struct hang_proc *p)
{
	const struct hang_blocked *best = NULL;

	for (uint32_t i = 0; i < p->nblocked; i++)
		if (!best || p->blocked[i].since_ns < best->since_ns)
			best = &p->blocked[i];
	return best;
}
