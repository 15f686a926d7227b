/* SPDX-License-Identifier: MIT */
/*
 * mem probe: symbolizing allocation stacks while their process lives,
 * and retrying those that came back incomplete.
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
#include "mem.bpf.skel.h"

static void retry_push(struct mem_state *st, uint32_t tgid, int32_t stack_id)
{
	struct mem_sym_retry *grown;

	for (size_t i = 0; i < st->n_retry; i++)
		if (st->retry[i].tgid == tgid && st->retry[i].stack_id == stack_id)
			return;
	if (st->n_retry >= 4096)
		return;
	grown = realloc(st->retry, (st->n_retry + 1) * sizeof(*grown));
	if (!grown)
		return;
	st->retry = grown;
	st->retry[st->n_retry].tgid = tgid;
	st->retry[st->n_retry].stack_id = stack_id;
	st->retry[st->n_retry++].first_ns = nt_clock_mono_ns();
}

/*
 * Symbolize a stack of a process into the cache. A frame whose module the
 * symbolizer does not know yet (it re-reads a process's maps at most every
 * 100 ms, and a process that just exec'd still shows its old maps there)
 * leaves the entry incomplete and queued for a retry while the process
 * lives.
 */
void mem_symbolize_stack(struct mem_state *st, uint32_t tgid, int32_t stack_id)
{
	uint64_t ips[MEM_MAX_DEPTH];
	char text[STACK_TEXT_MAX], frame[512], function[512] = "", first[512] = "";
	int depth = (int)st->cfg->stack_depth;
	struct mem_proc_info *p = mem_proc_find(st, tgid, NULL);
	const char *alloc_lib = p && p->lib[0] ? p->lib : st->self_libc;
	const struct mem_stack_text *have;
	bool unknown = false;

	if (stack_id < 0)
		return;
	have = mem_symcache_get(&st->syms, tgid, stack_id);
	if (have && !have->incomplete)
		return;
	memset(ips, 0, sizeof(ips));
	if (bpf_map_lookup_elem(bpf_map__fd(st->skel->maps.stacks), &stack_id, ips))
		return;
	/* Root first, ';'-separated (folded): frames come innermost first,
	 * so they are laid from the end of text backwards; a full buffer
	 * leaves out the root side. */
	size_t end = sizeof(text) - 1, pos = end;
	text[end] = '\0';
	for (int i = 0; i < depth && i < MEM_MAX_DEPTH && ips[i]; i++) {
		struct nt_symbol sym;
		int rc = st->host->symbolize(st->inst, tgid, ips[i], &sym);

		if (rc && !sym.module) {
			/* a library the symbolizer does not know yet, or the
			 * walk gone astray: retry while the process lives */
			unknown = true;
		}
		if (i && mem_frame_implausible(ips[i], ips[i - 1], rc, &sym))
			break;
		mem_format_frame(frame, sizeof(frame), ips[i], rc, &sym);
		if (!first[0])
			snprintf(first, sizeof(first), "%s", rc == 0 && sym.name ? sym.name : frame);
		if (!function[0] && rc == 0 && sym.name &&
		    !mem_frame_is_allocator(sym.name, sym.module, alloc_lib) &&
		    !mem_is_libc_path(sym.module))
			snprintf(function, sizeof(function), "%s", sym.name);
		size_t w = strlen(frame), need = w + (pos < end ? 1 : 0);
		if (need > pos)
			break;
		if (pos < end)
			text[--pos] = ';';
		pos -= w;
		memcpy(text + pos, frame, w);
	}
	memmove(text, text + pos, end - pos + 1);
	unknown = unknown && nt_proc_alive(tgid);
	mem_symcache_put(&st->syms, tgid, stack_id, text,
			 function[0] ? function : first, unknown);
	if (unknown)
		retry_push(st, tgid, stack_id);
}

/* The 100 ms timer: stacks whose symbolization was incomplete. */
void mem_retry_stacks(struct mem_state *st)
{
	uint64_t now = nt_clock_mono_ns();
	size_t k = 0;

	for (size_t i = 0; i < st->n_retry; i++) {
		struct mem_sym_retry r = st->retry[i];
		const struct mem_stack_text *t;

		if (now - r.first_ns < 3000000000ull && nt_proc_alive(r.tgid)) {
			mem_symbolize_stack(st, r.tgid, r.stack_id);
			t = mem_symcache_get(&st->syms, r.tgid, r.stack_id);
			if (t && t->incomplete) {
				st->retry[k++] = r;
				continue;
			}
		}
	}
	st->n_retry = k;
}
