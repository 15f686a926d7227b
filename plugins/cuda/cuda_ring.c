/* SPDX-License-Identifier: MIT */
/*
 * cuda probe, user side: the ring buffer's records: raw calls, launches (first launches get a
 * fast-path slot; captured ones go to their graph), kernel names, library
 * opens and execs, slow function-table calls.
 */
#include "cuda_plugin.h"

/* ------------------------------------------------------------------ */
/* Ring buffer                                                         */
/* ------------------------------------------------------------------ */


/* Give (tgid, func) a fast-path slot if its slot is free (see cuda_raw.h). */
void slot_install(struct cuda *c, uint32_t tgid, uint16_t api,
			 uint64_t func)
{
	struct nt_cuda_launch_key key = { .tgid = tgid, .api = api, .func = func };
	struct nt_cuda_lslot *ls;
	struct lcount *lc;
	uint32_t idx;

	if (!c->lslots || !tgid)
		return;
	lc = lc_get(c, &key);
	if (!lc || lc->slot >= 0)
		return;
	idx = nt_cuda_lslot_idx(tgid, func);
	ls = &c->lslots[idx];
	if (__atomic_load_n(&ls->tgid, __ATOMIC_ACQUIRE))
		return; /* taken: this kernel stays on the hash path */
	__atomic_store_n(&ls->count, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&ls->func, func, __ATOMIC_RELAXED);
	__atomic_store_n(&ls->tgid, tgid, __ATOMIC_RELEASE);
	lc->slot = (int32_t)idx;
}

uint64_t slot_count(struct cuda *c, const struct lcount *lc)
{
	if (!c->lslots || lc->slot < 0)
		return 0;
	return __atomic_load_n(&c->lslots[lc->slot].count, __ATOMIC_ACQUIRE);
}

void mark_exe_known(struct cuda *c, const struct nt_cuda_raw_path *p)
{
	struct { uint64_t ino; uint32_t dev, pad; } key = { p->ino, p->dev, 0 };
	uint8_t one = 1;

	bpf_map_update_elem(bpf_map__fd(c->skel->maps.exe_known), &key, &one,
			    BPF_ANY);
}

void on_path(struct cuda *c, const struct nt_cuda_raw_path *p)
{
	char path[NT_CUDA_PATH_MAX + 1], full[NT_CUDA_PATH_MAX + 64];
	uint32_t pid = p->hdr.pid;

	memcpy(path, p->path, NT_CUDA_PATH_MAX);
	path[NT_CUDA_PATH_MAX] = '\0';
	bool cuda_exe = false;

	if (p->hdr.type == NT_CUDA_RAW_EXEC) {
		/* A new image: what we knew of the old one (blocks, kernel
		 * names, launch counters) no longer applies. */
		if (nt_cuda_proc_find(&c->st, pid)) {
			sync_launches(c, pid, NULL, NULL);
			forget_launch_keys(c, pid);
			nt_cuda_proc_drop(&c->st, pid);
		}
		snprintf(full, sizeof(full), "/proc/%u/exe", pid);
		if (probe_file(c, full, pid) < 0) {
			nt_cuda_proc_path(pid, path, full, sizeof(full));
			probe_file(c, full, pid);
		}
		mark_exe_known(c, p);
		cuda_exe = exe_has_runtime(c, full);
	} else {
		nt_cuda_proc_path(pid, path, full, sizeof(full));
		c->opener_tid = p->hdr.tid; /* for a launch-layer hand-over */
		probe_file(c, full, pid);
		c->opener_tid = 0;
	}
	/* While the target is held: have the core read its memory map now, so
	 * its kernels and stacks can be named even if it exits before its
	 * records are read (the symbolizer keeps the map it read). */
	if (p->stopped && (p->hdr.type == NT_CUDA_RAW_OPEN || cuda_exe)) {
		struct nt_symbol sym;

		c->host->symbolize(c->inst, pid, 1, &sym);
	}
	if (p->stopped && kill((pid_t)pid, SIGCONT) != 0)
		nt_log_warn(c, "cannot continue pid %u: %s",
			     pid, strerror(errno));
}

void on_fn(struct cuda *c, const struct nt_cuda_raw_fn *r, size_t size)
{
	struct nt_cuda_rec *out = &c->rec[0];
	struct nt_cuda_call *e;
	const struct fn_entry *fe;
	char stack[8192];
	size_t n;

	if (size < NT_CUDA_RAW_FN_FIXED || r->fn >= c->nfns ||
	    r->nframes > NT_CUDA_STACK_MAX ||
	    size < NT_CUDA_RAW_FN_FIXED + r->nframes * 8ull)
		return;
	fe = &c->fns[r->fn];
	memset(out->u.bytes, 0, sizeof(*e));
	e = (void *)out->u.bytes;
	e->hdr = r->hdr;
	e->hdr.type = (uint32_t)c->types[NT_CUDA_EVT_CALL];
	e->hdr.size = sizeof(*e);
	e->cgroup_id = r->cgroup_id;
	e->duration_ns = r->duration_ns;
	e->layer = NT_CUDA_LAYER_USER;
	e->flags = NT_CUDA_F_RET;
	e->ret = (int32_t)r->ret;
	e->ret64 = r->ret;
	e->device = -1;
	e->threshold_ns = fe->threshold_ns;
	e->stack_id = nt_cuda_stack_id(r->ips, r->nframes);
	nt_cuda_rec_str(out, &e->library, fe->library, strlen(fe->library));
	nt_cuda_rec_str(out, &e->symbol, fe->symbol, strlen(fe->symbol));
	n = nt_cuda_format_stack(&c->st, r->hdr.pid, r->ips, r->nframes, stack,
				 sizeof(stack), fe->symbol);
	nt_cuda_rec_str(out, &e->stack, stack, n);
	c->host->publish(c->inst, &out->u.hdr);
}

int on_record(void *ctx, void *data, size_t size)
{
	struct cuda *c = ctx;
	const struct nt_event_hdr *h = data;
	int n;

	if (size < sizeof(*h))
		return 0;
	switch (h->type) {
	case NT_CUDA_RAW_CALL:
		n = nt_cuda_decode_call(&c->st, data, size, c->rec);
		for (int i = 0; i < n; i++)
			publish(c, &c->rec[i]);
		break;
	case NT_CUDA_RAW_ENTER:
		if (nt_cuda_decode_enter(&c->st, data, size, &c->rec[0]) == 1)
			publish(c, &c->rec[0]);
		break;
	case NT_CUDA_RAW_LAUNCH: {
		const struct nt_cuda_raw_launch *rl = data;

		if (size < NT_CUDA_RAW_LAUNCH_FIXED)
			break;
		if (rl->first == NT_CUDA_LAUNCH_CAPTURED) {
			if (nt_cuda_note_captured(&c->st, rl, size) < 0)
				c->host->count_drop(c->inst, "graph", 1);
			break;
		}
		if (!c->cfg->launch_events) {
			/* first launch: name it while the process lives, and
			 * give it a fast-path slot */
			nt_cuda_launch_name(&c->st, rl);
			if (rl->first)
				slot_install(c, h->pid, rl->api, rl->func);
			break;
		}
		if (nt_cuda_decode_launch(&c->st, rl, size, &c->rec[0]) == 1)
			publish(c, &c->rec[0]);
		break;
	}
	case NT_CUDA_RAW_KNAME:
		nt_cuda_learn_kname(&c->st, data, size);
		break;
	case NT_CUDA_RAW_OPEN:
	case NT_CUDA_RAW_EXEC:
		if (size >= sizeof(struct nt_cuda_raw_path))
			on_path(c, data);
		break;
	case NT_CUDA_RAW_FN:
		on_fn(c, data, size);
		break;
	default:
		break;
	}
	return 0;
}
