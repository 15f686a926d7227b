/* SPDX-License-Identifier: MIT */
/*
 * python probe: the ring-buffer handler. Turns the BPF side's records
 * (python.h: CPU, idle and exception samples, off-CPU weights, call-tracing
 * names, exec and unknown-process notices) into aggregated stacks
 * (pyagg.c), call names and exception counts. Unit-tested with synthetic
 * records (tests/unit/test_python_ring.c) and fuzzed (tests/fuzz).
 */
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ntcore/kit/hmap.h"
#include "pyplugin.h"

static void exc_add(struct py_plugin *st, struct pyp *p,
		    const struct py_sample_rec *r, uint32_t stack,
		    uint32_t top_frame)
{
	char name[256];
	const char *type = py_map_get(&p->types, r->aux);

	if (!type) {
		if (py_read_tp_name((pid_t)p->pid, &p->layout, r->aux, name, sizeof(name)))
			snprintf(name, sizeof(name), "<type 0x%" PRIx64 ">", (uint64_t)r->aux);
		type = py_agg_intern(st->agg, name);
		char *copy = type ? strdup(type) : NULL;

		if (copy && py_map_put(&p->types, r->aux, copy))
			free(copy);
	} else {
		type = py_agg_intern(st->agg, type);
	}
	if (!type)
		return;
	for (size_t i = 0; i < st->n_excs; i++) {
		struct exc_ent *e = &st->excs[i];

		if (e->pid == p->pid && e->type == type && e->top_frame == top_frame) {
			e->count++;
			e->stack = stack;
			return;
		}
	}
	if (st->n_excs == st->cap_excs) {
		size_t nc = st->cap_excs ? st->cap_excs * 2 : 64;
		struct exc_ent *n;

		if (nc > 65536)
			return;
		n = realloc(st->excs, nc * sizeof(*n));
		if (!n)
			return;
		st->excs = n;
		st->cap_excs = nc;
	}
	st->excs[st->n_excs++] = (struct exc_ent){
		.pid = p->pid, .tid = r->hdr.tid, .type = type,
		.top_frame = top_frame, .stack = stack, .count = 1,
	};
	memcpy(st->excs[st->n_excs - 1].comm, r->hdr.comm, NT_COMM_LEN);
}

static void on_sample(struct py_plugin *st, const struct py_sample_rec *r,
		      size_t size)
{
	uint32_t ids[PY_MAX_FRAMES + PY_NATIVE_MAX + 2];
	uint32_t n = 0, nf = r->n_frames, stack, top = UINT32_MAX;
	struct pyp *p = proc_get(st, r->hdr.pid, false);
	uint64_t now = nt_clock_mono_ns();
	unsigned state;
	struct thr *t;

	if (!p || p->status != PS_ATTACHED)
		return;
	if (nf > PY_MAX_FRAMES ||
	    size < PY_SAMPLE_HDR_SIZE + (size_t)nf * sizeof(struct py_frame))
		return;
	if (r->flags & PY_F_TRUNCATED)
		ids[n++] = py_agg_frame(st->agg, "[truncated]", NULL, 0);
	/* frames[0] is the innermost: walk backwards for root first */
	for (uint32_t i = nf; i-- > 0;) {
		ids[n] = frame_of(st, p, &r->frames[i], now);
		if (ids[n] != UINT32_MAX)
			n++;
	}
	if (n)
		top = ids[n - 1];
	if ((r->flags & PY_F_READERR) && !nf)
		ids[n++] = py_agg_frame(st->agg, "[unreadable]", NULL, 0);
	if (st->cfg->native && r->hdr.type != PY_REC_EXC)
		n += native_frames(st, r->hdr.pid, r->native_id, ids + n,
				   PY_NATIVE_MAX);
	for (uint32_t i = 0; i < n; i++)
		if (ids[i] == UINT32_MAX)
			return;
	state = r->hdr.type == PY_REC_IDLE ? PY_ST_IDLE : PY_ST_CPU;
	{
		char comm[NT_COMM_LEN + 1];

		memcpy(comm, r->hdr.comm, NT_COMM_LEN);
		comm[NT_COMM_LEN] = '\0';
		stack = py_agg_stack(st->agg, r->hdr.pid, r->hdr.tid, state, ids, n, comm);
	}
	if (stack == UINT32_MAX)
		return;
	t = thr_get(st, r->hdr.tid, r->hdr.pid);
	switch (r->hdr.type) {
	case PY_REC_CPU:
		py_agg_add(st->agg, stack, 1);
		if (t) {
			t->cpu_stack = stack;
			t->cpu_ts = r->hdr.ts_ns;
			pyj_note(&t->hist, r->hdr.ts_ns, stack, PYJ_CPU);
		}
		break;
	case PY_REC_IDLE:
		if (t) {
			t->idle_stack = stack;
			pyj_note(&t->hist, r->hdr.ts_ns, stack,
				 r->aux & 1 ? PYJ_PREEMPT : PYJ_IDLE);
		}
		break;
	case PY_REC_EXC:
		if (top != UINT32_MAX)
			exc_add(st, p, r, stack, top);
		break;
	}
}

uint64_t call_key_hash(const struct py_call_key *key)
{
	return nt_hash_bytes(key, sizeof(*key));
}

static void on_func(struct py_plugin *st, const struct py_func_rec *r)
{
	struct call_name *cn;
	char both[2 * PY_NAME_MAX + 2];
	uint64_t h = call_key_hash(&r->key);
	struct pyp *p = proc_get(st, r->key.pid, false);
	struct code_ent *ce = NULL;

	if (py_map_get(&st->names, h))
		return;
	cn = calloc(1, sizeof(*cn));
	if (!cn)
		return;
	if (p && p->status == PS_ATTACHED && r->key.code)
		ce = code_get(st, p, r->key.code, nt_clock_mono_ns());
	if (ce) {
		/* trust the frame's code object only when it is the function the
		 * marker names (same co_name, same file) */
		const char *q = ce->c.qualname, *dot = strrchr(q, '.');
		char fn[PY_NAME_MAX + 1], fl[PY_NAME_MAX + 1];

		snprintf(fn, sizeof(fn), "%.*s", PY_NAME_MAX, r->func);
		snprintf(fl, sizeof(fl), "%.*s", PY_NAME_MAX, r->file);
		if (strcmp(dot ? dot + 1 : q, fn) || strcmp(ce->c.file, fl))
			ce = NULL;
	}
	if (ce) {
		cn->func = strdup(ce->c.qualname);
		cn->file = strdup(ce->c.file);
		cn->line = ce->c.firstlineno;
	} else {
		cn->func = strndup(r->func, PY_NAME_MAX);
		cn->file = strndup(r->file, PY_NAME_MAX);
		cn->line = r->line;
	}
	if (!cn->func || !cn->file) {
		free(cn->func);
		free(cn->file);
		free(cn);
		return;
	}
	snprintf(both, sizeof(both), "%s:%s", cn->file, cn->func);
	cn->match = fnmatch(st->cfg->call_pattern, cn->func, 0) == 0 ||
		    fnmatch(st->cfg->call_pattern, r->func, 0) == 0 ||
		    fnmatch(st->cfg->call_pattern, both, 0) == 0;
	if (py_map_put(&st->names, h, cn)) {
		free(cn->func);
		free(cn->file);
		free(cn);
		return;
	}
	if (r->key.code) {
		struct py_call_key sk = r->key;

		sk.code = 0;
		py_map_put(&st->siblings, call_key_hash(&sk), cn);
	}
}

int on_ring(void *ctx, void *data, size_t size)
{
	struct py_plugin *st = ctx;
	const struct nt_event_hdr *h = data;

	if (size < sizeof(*h))
		return 0;
	switch (h->type) {
	case PY_REC_CPU:
	case PY_REC_IDLE:
	case PY_REC_EXC:
		if (size >= PY_SAMPLE_HDR_SIZE)
			on_sample(st, data, size);
		break;
	case PY_REC_WEIGHT:
		if (size >= sizeof(struct py_weight_rec)) {
			const struct py_weight_rec *w = data;
			struct thr *t = py_map_get(&st->threads, h->tid);

			if (t && t->pid == h->pid)
				add_offcpu(st, t, w->start_ns, w->start_ns + w->off_ns);
		}
		break;
	case PY_REC_FUNC:
		if (size >= sizeof(struct py_func_rec))
			on_func(st, data);
		break;
	case PY_REC_EXEC:
	case PY_REC_UNKNOWN:
		proc_seen(st, h->pid, h->type == PY_REC_EXEC, h->ts_ns);
		break;
	}
	return 0;
}
