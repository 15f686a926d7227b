/* SPDX-License-Identifier: MIT */
/*
 * cuda probe, user side: what runs on the timer and at a process's exit: launch counts and
 * function-table statistics copied from the BPF maps into the metrics,
 * the per-process report, forgetting processes that are gone.
 */
#include "cuda_plugin.h"

#include "ntcore/kit/sb.h"
#include "ntcore/kit/topn.h"

/* ------------------------------------------------------------------ */
/* Periodic: launch counts and function-table statistics               */
/* ------------------------------------------------------------------ */

/* Copy launch counts into the metrics; only_pid != 0 limits to one process.
 * With `top`, collects that process's counts for the report. */
void sync_launches(struct cuda *c, uint32_t only_pid,
			  struct nt_cuda_kcount **top, size_t *ntop)
{
	int fd = bpf_map__fd(c->skel->maps.launches);
	struct nt_cuda_launch_key key, next;
	void *prev = NULL;
	size_t cap = 0;

	if (top) {
		*top = NULL;
		*ntop = 0;
	}
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		uint64_t cnt = 0;
		struct lcount *lc;

		key = next;
		prev = &key;
		if (only_pid && key.tgid != only_pid)
			continue;
		if (bpf_map_lookup_elem(fd, &key, &cnt) != 0)
			continue;
		lc = lc_get(c, &key);
		if (!lc)
			continue;
		cnt += slot_count(c, lc);
		{
			int layer = nt_cuda_api_layer(key.api);
			const char *name = nt_cuda_kernel_name(&c->st, key.tgid,
							       layer, key.func);
			char unk[40];
			struct nt_cuda_proc *p;

			if (!name[0]) {
				snprintf(unk, sizeof(unk), "0x%" PRIx64, key.func);
				name = unk;
			}
			if (cnt > lc->count) {
				const char *lv[] = { pid_s(c, key.tgid), name };

				c->host->metric_add(c->m[M_LAUNCH], lv,
						    (double)(cnt - lc->count));
				count_named(c, key.tgid, key.func,
					    cnt - lc->count);
				p = nt_cuda_proc_get(&c->st, key.tgid);
				if (p)
					p->tot.launches += cnt - lc->count;
				lc->count = cnt;
			}
			if (top) {
				size_t i;

				/* merge equal names (runtime and driver handles) */
				for (i = 0; i < *ntop; i++)
					if (!strcmp((*top)[i].name, name))
						break;
				if (i == *ntop) {
					if (*ntop == cap) {
						size_t ncap = cap ? cap * 2 : 32;
						struct nt_cuda_kcount *t =
							realloc(*top, ncap * sizeof(**top));

						if (!t)
							continue;
						*top = t;
						cap = ncap;
					}
					(*top)[i].name = strdup(name);
					(*top)[i].count = 0;
					if (!(*top)[i].name)
						continue;
					(*ntop)++;
				}
				(*top)[i].count += cnt;
			}
		}
	}
}

void sync_fns(struct cuda *c, uint32_t only_pid)
{
	int fd = bpf_map__fd(c->skel->maps.fnstats);
	struct nt_cuda_fn_key key, next;
	void *prev = NULL;

	if (!c->nfns)
		return;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		struct nt_cuda_fn_stats s;
		struct fcount *fc;
		const struct fn_entry *fe;

		key = next;
		prev = &key;
		if ((only_pid && key.tgid != only_pid) || key.fn >= c->nfns)
			continue;
		if (bpf_map_lookup_elem(fd, &key, &s) != 0)
			continue;
		fc = fc_get(c, &key);
		if (!fc || s.count == fc->st.count)
			continue;
		fe = &c->fns[key.fn];
		const char *lv[] = { pid_s(c, key.tgid), fe->library, fe->symbol };
		c->host->metric_add(c->m[M_CALLS], lv, (double)(s.count - fc->st.count));
		if (s.slow > fc->st.slow)
			c->host->metric_add(c->m[M_SLOW], lv, (double)(s.slow - fc->st.slow));
		c->host->metric_hist_set(c->m[M_CALL_SEC], lv, s.buckets,
					 (double)s.sum_ns / 1e9);
		fc->st = s;
	}
}

/* Delete a process's launch counters from the BPF map (and our copy). */
void forget_launch_keys(struct cuda *c, uint32_t pid)
{
	int fd = bpf_map__fd(c->skel->maps.launches);
	struct nt_cuda_launch_key key, next;
	void *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		if (key.tgid == pid) {
			struct lcount *lc = lc_get(c, &key);

			bpf_map_delete_elem(fd, &key);
			if (lc) {
				if (lc->slot >= 0 && c->lslots) {
					struct nt_cuda_lslot *ls = &c->lslots[lc->slot];

					__atomic_store_n(&ls->tgid, 0, __ATOMIC_RELEASE);
					__atomic_store_n(&ls->func, 0, __ATOMIC_RELAXED);
					__atomic_store_n(&ls->count, 0, __ATOMIC_RELAXED);
					lc->slot = -1;
				}
				lc->count = 0;
			}
			continue; /* restart from the same prev */
		}
		prev = &key;
	}
}

/* A traced process exited: final counts, report, forget it. */
void proc_gone(struct cuda *c, uint32_t pid)
{
	struct nt_cuda_kcount *top = NULL;
	size_t ntop = 0;
	struct nt_cuda_proc *p;

	if (c->rb)
		nt_ring_consume(c->rb);
	sync_launches(c, pid, &top, &ntop);
	sync_fns(c, pid);
	p = nt_cuda_proc_find(&c->st, pid);
	if (p && c->cfg->report) {
		char *text;

		text = nt_cuda_report_text(p, top, ntop);
		if (text) {
			struct nt_cuda_rec *r = &c->rec[0];
			struct nt_cuda_report *e;

			memset(r->u.bytes, 0, sizeof(*e));
			e = (void *)r->u.bytes;
			e->hdr.type = (uint32_t)c->types[NT_CUDA_EVT_REPORT];
			e->hdr.size = sizeof(*e);
			e->hdr.ts_ns = nt_clock_mono_ns();
			e->hdr.pid = pid;
			e->hdr.tid = pid;
			memcpy(e->hdr.comm, p->comm, NT_COMM_LEN);
			e->cgroup_id = p->cgroup_id;
			e->subject_pid = pid;
			nt_cuda_rec_str(r, &e->text, text, strlen(text));
			c->host->publish(c->inst, &r->u.hdr);
			free(text);
		}
	}
	for (size_t i = 0; i < ntop; i++)
		free((char *)top[i].name);
	free(top);
	/* Its gauges go DEAD_TICKS ticks later (so every export sees their
	 * final value once), its counters stay. */
	if (p) {
		p->dead = true;
		p->dead_tick = c->tick;
	}
	forget_launch_keys(c, pid);
}

/* Forget processes that exited DEAD_TICKS ticks ago. */
void reap_dead(struct cuda *c, bool all)
{
	struct nt_hmap_iter it;

	nt_hmap_iter_init(&it, &c->st.procs);
	while (nt_hmap_iter_next(&it)) {
		struct nt_cuda_proc *p = *(struct nt_cuda_proc **)it.val;
		uint32_t pid;

		if (!p->dead || (!all && c->tick - p->dead_tick < DEAD_TICKS))
			continue;
		pid = p->pid;
		for (size_t k = 0; k < p->noutst; k++) {
			char dev[12];

			snprintf(dev, sizeof(dev), "%d", p->outst[k].device);
			const char *lv[] = { pid_s(c, pid), dev,
					     mem_kind_label(p->outst[k].kind) };
			c->host->metric_remove(c->m[M_DEVBYTES], lv);
		}
		nt_cuda_proc_drop(&c->st, pid);
		/* the table changed under the iteration: start over */
		nt_hmap_iter_init(&it, &c->st.procs);
	}
}

/* Attach-time names (cuda_kname.h): say once which offset of the driver's
 * function struct was learned, and at detach how often it served. */
void log_kname_offset(struct cuda *c, bool final)
{
	const struct nt_cuda_koff *k = &c->st.koff;

	if (k->offset >= 0 && !c->st.koff.announced) {
		c->st.koff.announced = true;
		if (k->guessed)
			nt_log_info(c, "attach-time names: a driver function's "
				     "name is at offset %d of its struct, "
				     "guessed from %u unknown handles (no known "
				     "name to confirm it)", k->offset, k->nobs);
		else
			nt_log_info(c, "attach-time names: a driver function's "
				     "name is at offset %d of its struct (%u "
				     "known handles agreed)", k->offset,
				     k->agree[k->offset / 8]);
	}
	if (!final || (!k->taught && !k->nobs))
		return;
	if (k->offset < 0)
		nt_log_info(c, "attach-time names: no name offset learned from "
			     "%u known and %u unknown handles", k->taught,
			     k->nobs);
	else
		nt_log_info(c, "attach-time names: offset %d (%s) named %" PRIu64
			     " handles from memory (%" PRIu64 " refused); "
			     "known handles checked after: %" PRIu64
			     " confirmed, %" PRIu64 " contradicted",
			     k->offset, k->guessed ? "guessed" : "learned",
			     k->named, k->refused, k->confirmed,
			     k->contradicted);
}

/* The name of a probe_hits slot: an API function or a function-table entry. */
static const char *hit_name(const struct cuda *c, uint32_t cookie)
{
	if (cookie < NT_CUDA_API_COUNT)
		return nt_cuda_api_name(cookie);
	if (cookie >= NT_CUDA_FN_BASE && cookie - NT_CUDA_FN_BASE < c->nfns)
		return c->fns[cookie - NT_CUDA_FN_BASE].symbol;
	return NULL;
}

/* The hits of one slot, summed over CPUs (0 when unreadable). */
static uint64_t hits_of(int fd, uint32_t cookie, uint64_t *percpu, int ncpu)
{
	uint64_t sum = 0;

	if (bpf_map_lookup_elem(fd, &cookie, percpu) != 0)
		return 0;
	for (int i = 0; i < ncpu; i++)
		sum += percpu[i];
	return sum;
}

static void log_top_hits(struct cuda *c)
{
	struct nt_topn top;
	struct nt_sb sb;
	uint64_t total = 0, hits;

	if (nt_topn_init(&top, 8, sizeof(uint32_t)))
		return;
	for (uint32_t k = 0; k < NT_CUDA_SPEC_MAX; k++) {
		total += c->hits_seen[k];
		if (c->hits_seen[k])
			nt_topn_offer(&top, c->hits_seen[k], &k);
	}
	nt_sb_init(&sb, 0);
	for (size_t i = 0; i < nt_topn_count(&top); i++) {
		const uint32_t *k = nt_topn_at(&top, i, &hits);
		const char *name = hit_name(c, *k);

		nt_sb_printf(&sb, "%s%s %" PRIu64, i ? ", " : "", name ? name : "?", hits);
	}
	if (total)
		nt_log_info(c, "%" PRIu64 " uprobe hits, most: %s", total, nt_sb_str(&sb));
	nt_sb_fini(&sb);
	nt_topn_fini(&top);
}

void sync_hits(struct cuda *c, bool at_end)
{
	int fd = bpf_map__fd(c->skel->maps.probe_hits);
	int ncpu = libbpf_num_possible_cpus();
	uint64_t *percpu;

	if (ncpu <= 0 || !(percpu = calloc((size_t)ncpu, sizeof(*percpu))))
		return;
	for (uint32_t k = 0; k < NT_CUDA_SPEC_MAX; k++) {
		const char *name = hit_name(c, k);
		uint64_t n = name ? hits_of(fd, k, percpu, ncpu) : 0;

		if (n > c->hits_seen[k]) {
			const char *lv[] = { name };

			c->host->metric_add(c->m[M_HITS], lv, (double)(n - c->hits_seen[k]));
			c->hits_seen[k] = n;
		}
	}
	free(percpu);
	if (at_end)
		log_top_hits(c);
}
