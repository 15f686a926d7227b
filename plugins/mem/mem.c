/* SPDX-License-Identifier: MIT */
/*
 * mem probe, user side: the descriptor, the config keys and the ops
 * (init, poll, consume, flush, quiesce, detach, fini). Per-process RSS and
 * peak, page faults, OOM kills, and heap tracking through uprobes on the C
 * library's allocator with outstanding allocations grouped by symbolized
 * stack (docs/mem.md). The other files of this folder hold one idea each
 * (mem_priv.h lists them).
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
#include "ntcore/kit/cfg.h"
#include "ntcore/kit/links.h"
#include "mem.bpf.skel.h"

static const char *const heap_choices[] = {"targets", "always", "off", NULL};
static const char *const scope_choices[] = {"auto", "process", "global", NULL};

#define MEM_CFG struct mem_config

static const struct nt_cfg_key mem_keys[] = {
	NT_KEY_STRLIST(MEM_CFG, functions,
		       "[\"malloc\", \"calloc\", \"realloc\", \"free\", \"posix_memalign\", "
		       "\"aligned_alloc\", \"memalign\", \"valloc\", \"pvalloc\"]",
		       "allocator functions to probe ([] turns heap tracking off)"),
	NT_KEY_CHOICE(MEM_CFG, heap, "targets", heap_choices,
		      "heap tracking: targets (only with -p/-- CMD), always (host-wide too), off"),
	NT_KEY_CHOICE(MEM_CFG, heap_scope, "auto", scope_choices,
		      "uprobes bound to each target (process) or on every process filtered in BPF (global); auto: global for -- CMD, process for -p"),
	NT_KEY_STR(MEM_CFG, library, "",
		   "allocator library to probe; empty: the C library of each target"),
	NT_KEY_INT(MEM_CFG, sample_min_bytes, 0, 0, 1099511627776,
		   "allocations smaller than this are sampled 1 in sample_every (bytes)"),
	NT_KEY_INT(MEM_CFG, sample_every, 1, 1, 1000000,
		   "sampling rate of small allocations; 1 tracks every allocation"),
	NT_KEY_BOOL(MEM_CFG, stacks, true, "record the user stack of each allocation"),
	NT_KEY_INT(MEM_CFG, stack_depth, 32, 1, MEM_MAX_DEPTH,
		   "frames kept per allocation stack"),
	NT_KEY_INT(MEM_CFG, interval_ms, 5000, 100, 3600000,
		   "reporting interval (ms): mem.rss, mem.heap, mem.leak, mem.report"),
	NT_KEY_INT(MEM_CFG, top_n, 10, 1, 1000,
		   "stacks per process in mem.leak / mem.report, most bytes first"),
	NT_KEY_INT(MEM_CFG, min_age_ms, 0, 0, 86400000,
		   "interval reports skip allocations younger than this (ms); exit reports keep all"),
	NT_KEY_BOOL(MEM_CFG, track_mmap, true,
		    "track anonymous mmap/munmap made by the program (not by malloc itself)"),
	NT_KEY_BOOL(MEM_CFG, attach_skip, true,
		    "probe past leading flag-only instructions when that avoids single-stepping"),
	NT_KEY_BOOL(MEM_CFG, rss, true, "trace RSS through kmem/rss_stat"),
	NT_KEY_BOOL(MEM_CFG, faults, true,
		    "count user page faults (exceptions/page_fault_user)"),
	NT_KEY_BOOL(MEM_CFG, oom, true, "publish mem.oom_kill (oom/mark_victim)"),
	NT_KEY_INT(MEM_CFG, max_allocs, 262144, 1024, 16777216,
		   "outstanding allocations tracked at once (all processes)"),
	NT_KEY_INT(MEM_CFG, max_stacks, 16384, 256, 1048576,
		   "distinct allocation stacks kept"),
};

/* Stop producing (ABI 1.6): every uprobe and tracepoint link goes, all at
 * once; the ring and maps stay for the core's last read. */
static void mem_quiesce(void *state)
{
	struct mem_state *st = state;
	struct nt_linkset ls = {0};

	for (size_t i = 0; i < st->n_procs; i++) {
		mem_links_take(&ls, &st->procs[i]->links, &st->procs[i]->n_links);
		st->procs[i]->heap_attached = false;
	}
	mem_links_take(&ls, &st->glinks, &st->n_glinks);
	mem_links_take(&ls, &st->tlinks, &st->n_tlinks);
	nt_linkset_release(&ls);
}

static void mem_fini(void *state);

static int mem_init(struct nt_instance *inst, const struct nt_host *host,
		    const void *config, void **state)
{
	const struct mem_config *c = config;
	struct mem_state *st;
	bool have_alloc = false;
	int err;

	for (uint32_t i = 0; i < c->functions.n; i++) {
		const char *name = c->functions.v[i];
		int fn = mem_fn_from_name(name);

		if (fn < 0)
			return host->config_error(inst, "functions",
						  "unknown allocator function '%s' (known: malloc, calloc, realloc, free, posix_memalign, aligned_alloc, memalign, valloc, pvalloc)",
						  name);
		if (fn != MEM_FN_FREE)
			have_alloc = true;
	}
	if (have_alloc && strcmp(c->heap, "off") != 0) {
		bool have_free = false;

		for (uint32_t i = 0; i < c->functions.n; i++)
			have_free |= strcmp(c->functions.v[i], "free") == 0;
		if (!have_free)
			return host->config_error(inst, "functions",
						  "lists allocating functions but not 'free': every block would look leaked");
	}
	if (c->library && c->library[0] && access(c->library, R_OK) != 0)
		return host->config_error(inst, "library", "cannot read '%s': %s",
					  c->library, strerror(errno));
	if (c->sample_every > 1 && c->sample_min_bytes == 0)
		nt_kit_log(host, inst, NT_LOG_WARN,
			   "sample_every = %" PRId64 " has no effect while sample_min_bytes = 0",
			   c->sample_every);

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->inst = inst;
	st->host = host;
	st->cfg = c;
	for (uint32_t i = 0; i < c->functions.n; i++)
		st->fn_mask |= 1u << mem_fn_from_name(c->functions.v[i]);
	st->heap_on = strcmp(c->heap, "off") != 0 && have_alloc;
	st->page_shift = (uint32_t)__builtin_ctzl((unsigned long)sysconf(_SC_PAGESIZE));
	mem_symcache_init(&st->syms);
	mem_groups_init(&st->groups);
	pthread_mutex_init(&st->reaper.mu, NULL);
	pthread_cond_init(&st->reaper.cv, NULL);
	if (nt_proc_exe((uint32_t)getpid(), st->self_exe, sizeof(st->self_exe)) < 0)
		st->self_exe[0] = '\0';

	if ((err = mem_register(st)) < 0) {
		mem_fini(st);
		return err;
	}
	host->subscribe(inst, "proc.exit");
	*state = st;
	return 0;
}

static int mem_poll(void *state, uint32_t token, uint32_t budget)
{
	struct mem_state *st = state;
	int n = 0;

	(void)budget; /* libbpf 1.1 has no ring_buffer__consume_n */
	if (!st->rb)
		return 0;
	st->sym_budget = SYM_BUDGET;
	if (token == TOKEN_RING) {
		uint64_t now;

		n = nt_ring_consume(st->rb);
		if (n < 0)
			return n;
		/* Exits are batched: each batch scans the allocs map once. */
		now = nt_clock_mono_ns();
		if (st->n_exits >= 256 || now - st->last_finalize_ns >= FINALIZE_EVERY_NS) {
			mem_finalize_pending(st);
			st->last_finalize_ns = now;
		}
	} else if (token == TOKEN_RETRY) {
		if (st->n_retry)
			mem_retry_stacks(st);
	} else if (token == TOKEN_TICK) {
		nt_ring_consume(st->rb);
		mem_tick(st);
	}
	return n;
}

static void mem_consume(void *state, const struct nt_event_hdr *ev,
			const struct nt_schema *schema)
{
	struct mem_state *st = state;

	if (schema && schema->name && strcmp(schema->name, "proc.exit") == 0)
		mem_queue_exit(st, ev->pid, NULL); /* its comm is the last thread's */
}

static void mem_flush(void *state)
{
	struct mem_state *st = state;

	if (!st->skel || !st->rb)
		return;
	st->sym_budget = SYM_BUDGET;
	nt_ring_consume(st->rb);
	if (st->n_retry)
		mem_retry_stacks(st);
	mem_finalize_pending(st);
	mem_tick(st);
}

static void mem_detach(void *state)
{
	struct mem_state *st = state;
	uint64_t t0 = nt_clock_mono_ns();

	if (st->skel && st->rb) {
		nt_ring_consume(st->rb);
		mem_finalize_pending(st);
	}
	for (size_t i = 0; i < st->n_procs; i++)
		mem_proc_links_destroy(st, st->procs[i]);
	mem_reaper_push(&st->reaper, st->glinks, st->n_glinks);
	free(st->glinks);
	st->glinks = NULL;
	st->n_glinks = 0;
	mem_reaper_push(&st->reaper, st->tlinks, st->n_tlinks);
	mem_reaper_stop(&st->reaper); /* every link gone before the object */
	free(st->tlinks);
	st->tlinks = NULL;
	st->n_tlinks = 0;
	nt_ring_free(st->rb);
	st->rb = NULL;
	mem_bpf__destroy(st->skel);
	st->skel = NULL;
	nt_log_dbg(st, "detach took %.1f ms",
		      (double)(nt_clock_mono_ns() - t0) / 1e6);
}

static void mem_fini(void *state)
{
	struct mem_state *st = state;

	if (!st)
		return;
	if (st->skel || st->rb)
		mem_detach(st);
	for (size_t i = 0; i < st->n_procs; i++)
		free(st->procs[i]);
	free(st->procs);
	free(st->libs);
	free(st->exits);
	free(st->retry);
	free(st->buf);
	mem_symcache_free(&st->syms);
	mem_groups_free(&st->groups);
	pthread_mutex_destroy(&st->reaper.mu);
	pthread_cond_destroy(&st->reaper.cv);
	free(st);
}

NT_PLUGIN_EXPORT = {
	NT_PLUGIN_HEADER,
	.name = "mem",
	.kind = NT_KIND_PROBE,
	.n_config = NT_ARRAY_LEN(mem_keys),
	.description = "RSS and peak, page faults, OOM kills, heap tracking with leak stacks (uprobes on the C allocator)",
	.version = "0.1.0",
	.config = mem_keys,
	.config_size = sizeof(struct mem_config),
	.init = mem_init,
	.attach = mem_attach,
	.poll = mem_poll,
	.detach = mem_detach,
	.quiesce = mem_quiesce,
	.fini = mem_fini,
	.consume = mem_consume,
	.flush = mem_flush,
};
