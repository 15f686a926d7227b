/* SPDX-License-Identifier: MIT */
/*
 * mem probe: the ring-buffer handler: records from mem.bpf.c turned into
 * published events (published records, OOM kills) and internal work
 * (stacks to symbolize, exec, exit, fork).
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

int mem_on_record(void *ctx, void *data, size_t size)
{
	struct mem_state *st = ctx;
	const struct nt_event_hdr *h = data;

	if (size < sizeof(*h))
		return 0;
	if (h->type != 0 && h->size > size) {
		/* it would be read past its end downstream */
		st->host->count_drop(st->inst, "bpf", 1);
		return 0;
	}
	if (h->type != 0) {
		st->host->publish(st->inst, h);
		if (h->type == (uint32_t)st->t_oom) {
			char pidbuf[16];
			const char *lv[1] = {pidbuf};

			snprintf(pidbuf, sizeof(pidbuf), "%u", h->pid);
			if (st->m[M_OOM])
				st->host->metric_add(st->m[M_OOM], lv, 1);
			nt_log_warn(st, "OOM killer chose pid %u (%.16s)", h->pid, h->comm);
		}
		return 0;
	}
	if (size < sizeof(struct mem_internal))
		return 0;
	const struct mem_internal *r = data;

	switch (r->kind) {
	case MEM_REC_STACK:
		/* Symbolize while the process lives, within a budget per
		 * poll; the rest wait for the report that needs them. */
		if (st->sym_budget) {
			st->sym_budget--;
			mem_symbolize_stack(st, r->tgid, r->stack_id);
		}
		break;
	case MEM_REC_EXEC:
		/* New image: stacks of the old one name other code. */
		mem_symcache_forget(&st->syms, r->tgid);
		break;
	case MEM_REC_EXIT:
		mem_queue_exit(st, r->tgid, r->hdr.comm);
		break;
	case MEM_REC_FORK:
		if (st->per_pid) {
			struct mem_proc_info *parent = mem_proc_find(st, r->tgid, NULL);

			if (parent && parent->heap_attached) {
				int rc = mem_heap_attach_pid(st, r->child);

				if (rc) /* a child that is already gone is no news */
					nt_kit_log(st->host, st->inst,
						      rc == -ESRCH || rc == -ENOENT ? NT_LOG_DEBUG : NT_LOG_WARN,
						      "pid %u (child of %u): no heap probes: %s",
						      r->child, r->tgid, strerror(-rc));
			}
		}
		break;
	default:
		break;
	}
	return 0;
}
