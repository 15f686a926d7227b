/* SPDX-License-Identifier: MIT */
/*
 * cuda probe, user side: the plugin's helpers (symbolizing, pid labels, the launch and function-table
 * count tables) and the publishing of decoded records with their metrics
 * (account: allocations, copies, syncs, graph launches with the kernels
 * they run, errors).
 */
#include "cuda_plugin.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

int sym_cb(void *arg, uint32_t pid, uint64_t addr, struct nt_symbol *out)
{
	struct cuda *c = arg;

	return c->host->symbolize(c->inst, pid, addr, out);
}

const char *pid_s(struct cuda *c, uint32_t pid)
{
	snprintf(c->pidbuf, sizeof(c->pidbuf), "%u", pid);
	return c->pidbuf;
}

/* The last count seen for a launch key, inserted (count 0, no slot) on
 * first sight; NULL when memory runs out. Valid until the next lc_get. */
struct lcount *lc_get(struct cuda *c, const struct nt_cuda_launch_key *k)
{
	bool created;
	struct lcount *lc = nt_hmap_put(&c->lc, k, &created);

	if (lc && created)
		lc->slot = -1;
	return lc;
}

/* The fast-path slots went with the BPF map: no launch key holds one. */
void lc_forget_slots(struct cuda *c)
{
	struct nt_hmap_iter it;

	for (nt_hmap_iter_init(&it, &c->lc); nt_hmap_iter_next(&it);)
		((struct lcount *)it.val)->slot = -1;
}

struct fcount *fc_get(struct cuda *c, const struct nt_cuda_fn_key *k)
{
	for (size_t i = 0; i < c->nfc; i++)
		if (c->fc[i].key.tgid == k->tgid && c->fc[i].key.fn == k->fn)
			return &c->fc[i];
	if (c->nfc == c->capfc) {
		size_t ncap = c->capfc ? c->capfc * 2 : 64;
		struct fcount *n = realloc(c->fc, ncap * sizeof(*n));

		if (!n)
			return NULL;
		c->fc = n;
		c->capfc = ncap;
	}
	memset(&c->fc[c->nfc], 0, sizeof(c->fc[0]));
	c->fc[c->nfc].key = *k;
	c->fc[c->nfc].used = true;
	return &c->fc[c->nfc++];
}

const char *mem_kind_label(uint32_t k)
{
	return nt_cuda_mem_kind_name(k);
}

/* ------------------------------------------------------------------ */
/* Publishing and metrics                                              */
/* ------------------------------------------------------------------ */

/* A graph launch runs the kernels captured or added into its graph: each
 * counts as a launch of its kernel (the probe saw none of them run). */
void count_graph_kernels(struct cuda *c, uint32_t pid, uint64_t exec)
{
	const struct nt_cuda_glist *k = nt_cuda_graph_launched(&c->st, pid, exec);
	char unk[40], pidb[16];

	snprintf(pidb, sizeof(pidb), "%u", pid);
	for (uint32_t i = 0; k && i < k->n; i++) {
		const char *name = nt_cuda_kernel_name(&c->st, pid, k->k[i].layer,
						       k->k[i].func);

		if (!name[0]) {
			snprintf(unk, sizeof(unk), "0x%" PRIx64, k->k[i].func);
			name = unk;
		}
		const char *lv[] = { pidb, name };
		c->host->metric_add(c->m[M_LAUNCH], lv, 1);
	}
}

void account(struct cuda *c, const struct nt_event_hdr *ev)
{
	const struct nt_host *h = c->host;
	char dev[12];
	const char *pid;

	if ((int)ev->type == c->types[NT_CUDA_EVT_ALLOC]) {
		const struct nt_cuda_alloc *a = (const void *)ev;

		if (a->ret || !a->ptr)
			return;
		pid = pid_s(c, ev->pid);
		snprintf(dev, sizeof(dev), "%d", a->device);
		const char *lv[] = { pid, dev, mem_kind_label(a->kind) };
		h->metric_add(c->m[M_ALLOCS], lv, 1);
		h->metric_add(c->m[M_ALLOC_BYTES], lv, (double)a->size);
		h->metric_set(c->m[M_DEVBYTES], lv, (double)a->outstanding_bytes);
	} else if ((int)ev->type == c->types[NT_CUDA_EVT_FREE]) {
		const struct nt_cuda_free *f = (const void *)ev;

		if (f->ret)
			return;
		pid = pid_s(c, ev->pid);
		snprintf(dev, sizeof(dev), "%d", f->device);
		const char *lv[] = { pid, dev, mem_kind_label(f->kind) };
		h->metric_add(c->m[M_FREES], lv, 1);
		h->metric_add(c->m[M_FREE_BYTES], lv, (double)f->size);
		h->metric_set(c->m[M_DEVBYTES], lv, (double)f->outstanding_bytes);
	} else if ((int)ev->type == c->types[NT_CUDA_EVT_MEMCPY]) {
		const struct nt_cuda_memcpy *m = (const void *)ev;
		struct nt_cuda_proc *p;

		if (m->ret)
			return;
		pid = pid_s(c, ev->pid);
		const char *lv[] = { pid, nt_cuda_dir_name(m->direction) };
		h->metric_add(c->m[M_COPIES], lv, 1);
		h->metric_add(c->m[M_COPY_BYTES], lv, (double)m->bytes);
		if (!(m->flags & NT_CUDA_F_ASYNC)) {
			h->metric_add(c->m[M_COPY_SEC], lv, (double)m->duration_ns / 1e9);
			p = nt_cuda_proc_find(&c->st, ev->pid);
			if (p && m->direction < 6 && p->tot.sync_copy_ns[m->direction])
				h->metric_set(c->m[M_COPY_BW], lv,
					      (double)p->tot.sync_copy_bytes[m->direction] * 1e9 /
						      (double)p->tot.sync_copy_ns[m->direction]);
		}
	} else if ((int)ev->type == c->types[NT_CUDA_EVT_SYNC]) {
		const struct nt_cuda_sync *s = (const void *)ev;
		static const char *const kinds[] = { "unknown", "device", "stream", "event" };

		pid = pid_s(c, ev->pid);
		const char *lv[] = { pid, kinds[s->sync_kind < 4 ? s->sync_kind : 0] };
		h->metric_add(c->m[M_SYNCS], lv, 1);
		h->metric_add(c->m[M_SYNC_SEC], lv, (double)s->duration_ns / 1e9);
	} else if ((int)ev->type == c->types[NT_CUDA_EVT_GRAPH]) {
		const struct nt_cuda_graph_launch *g = (const void *)ev;

		if (g->ret)
			return;
		const char *lv[] = { pid_s(c, ev->pid) };
		h->metric_add(c->m[M_GRAPH], lv, 1);
		count_graph_kernels(c, ev->pid, g->graph_exec);
	} else if ((int)ev->type == c->types[NT_CUDA_EVT_ERROR]) {
		const struct nt_cuda_error *e = (const void *)ev;
		char fn[64], en[64];

		nt_cuda_vstr(ev, e->api_name, fn, sizeof(fn));
		nt_cuda_vstr(ev, e->error_name, en, sizeof(en));
		const char *lv[] = { pid_s(c, ev->pid), fn, en };
		h->metric_add(c->m[M_ERRORS], lv, 1);
	}
}

void publish(struct cuda *c, struct nt_cuda_rec *r)
{
	account(c, &r->u.hdr);
	c->host->publish(c->inst, &r->u.hdr);
}
