/* SPDX-License-Identifier: MIT */
/*
 * sched probe: the ring-buffer handler: thread exit records turned into
 * final updates, published records (sched.switch) passed on, within the
 * poll's budget.
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

static void on_exit_rec(struct sched_state *st, const struct sched_exit_rec *r)
{
	uint64_t now = r->hdr.ts_ns;

	if (r->has_stats) {
		struct sched_tstat s = r->st;

		/* The record's name is the one at exit. */
		memcpy(s.comm, r->hdr.comm, NT_COMM_LEN);
		sched_thread_update(st, &s, now, 0, true);
	}
	if (r->group_dead) {
		struct proc *p = sched_proc_get(st, r->hdr.pid);

		if (p && !p->dead) {
			p->dead = true;
			p->dead_ns = r->hdr.ts_ns;
		}
	}
}

int sched_on_ring(void *ctx, void *data, size_t len)
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

int sched_ring_drain(struct sched_state *st, uint32_t budget)
{
	int err;

	if (!st->rb)
		return 0;
	st->ring_budget = budget ? budget : 1;
	st->ring_n = 0;
	err = nt_ring_consume(st->rb);
	if (err < 0 && err != -EAGAIN)
		nt_log_warn(st, "ring buffer: %s",
			      strerror(-err));
	return (int)st->ring_n;
}
