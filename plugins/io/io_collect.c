/* SPDX-License-Identifier: MIT */
/*
 * io probe: the BPF statistics into the metric registry, on the timer.
 * Per-CPU values are summed per key (device, process, op) into the device
 * series and, with per_process, the process series. A process gone for
 * IO_LINGER_MS is retired: its series and BPF key go, its totals move into
 * st->retired so that device totals never go down.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "ntcore/kit/clock.h"
#include "ntcore/kit/proc.h"

#include "io.bpf.skel.h"
#include "io_int.h"

/* One walk of the stats map: what it gathers. */
struct io_walk {
	struct nt_hmap devs;    /* struct io_devop -> struct io_stats */
	struct io_row *procs;   /* with rows: the report's process rows */
	size_t n_procs, cap_procs;
	struct io_key *gone;    /* keys to delete once the walk is over */
	size_t n_gone, cap_gone;
	uint64_t now_ms;
};

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	size_t nc;
	void *p;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 16;
	p = realloc(*arr, nc * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

static void devop_add(struct nt_hmap *m, uint32_t dev, uint32_t op,
		      const struct io_stats *s)
{
	struct io_devop k = { .dev = dev, .op = op };
	struct io_stats *d = nt_hmap_put(m, &k, NULL);

	if (d)
		io_stats_add(d, s);
}

/* Has the process been gone longer than the linger time? Several keys
 * share a process: it stays in st->dead until io_dead_prune. */
static bool proc_expired(struct io_state *st, uint32_t tgid, uint64_t now)
{
	uint64_t *since;
	bool created;

	if (nt_proc_alive(tgid)) {
		nt_hmap_del(&st->dead, &tgid);
		return false;
	}
	since = nt_hmap_put(&st->dead, &tgid, &created);
	if (!since)
		return false;
	if (created) {
		*since = now;
		return false;
	}
	return now - *since >= IO_LINGER_MS;
}

/* Forget dead processes whose keys were all retired. */
static void io_dead_prune(struct io_state *st, uint64_t now)
{
	struct nt_hmap_iter it;

	for (nt_hmap_iter_init(&it, &st->dead); nt_hmap_iter_next(&it);)
		if (now - *(const uint64_t *)it.val >= IO_LINGER_MS)
			nt_hmap_iter_del(&it);
}

static void hist_set(struct io_state *st, int m, const char *const *lv,
		     const __u64 *hist, size_t n, double sum)
{
	uint64_t counts[IO_LAT_SLOTS + 1];

	if (!st->m[m] || n > NT_ARRAY_LEN(counts))
		return;
	for (size_t i = 0; i < n; i++)
		counts[i] = hist[i];
	st->host->metric_hist_set(st->m[m], lv, counts, sum);
}

static void proc_series(struct io_state *st, const struct io_key *k,
			const struct io_stats *s, bool remove)
{
	char pid[16], comm[IO_COMM_LABEL_LEN], devs[24];
	const struct nt_host *h = st->host;

	if (!st->cfg->per_process)
		return;
	snprintf(pid, sizeof(pid), "%u", k->tgid);
	io_comm_label(comm, s->comm);
	const char *lv[] = { pid, comm, io_dev_majmin(k->dev, devs),
			     io_dev_cached_name(st, k->dev), io_op_str(k->op) };

	if (remove) {
		for (int i = IO_M_P_REQS; i <= IO_M_P_SERVICE; i++)
			h->metric_remove(st->m[i], lv);
		return;
	}
	h->metric_set(st->m[IO_M_P_REQS], lv, (double)s->ops);
	h->metric_set(st->m[IO_M_P_BYTES], lv, (double)s->bytes);
	hist_set(st, IO_M_P_QUEUE, lv, s->queue_hist, IO_LAT_SLOTS + 1,
		 (double)s->queue_ns_sum / 1e9);
	hist_set(st, IO_M_P_SERVICE, lv, s->service_hist, IO_LAT_SLOTS + 1,
		 (double)s->service_ns_sum / 1e9);
}

/* A process gone for long: its totals move into st->retired, its series
 * go, and its key is deleted after the walk. */
static void retire(struct io_state *st, struct io_walk *w,
		   const struct io_key *key, const struct io_stats *sum)
{
	struct io_devop k = { .dev = key->dev, .op = key->op };
	struct io_stats *r = nt_hmap_put(&st->retired, &k, NULL);

	if (!r || grow((void **)&w->gone, &w->cap_gone, w->n_gone,
		       sizeof(*w->gone)))
		return;
	io_stats_add(r, sum);
	proc_series(st, key, sum, true);
	w->gone[w->n_gone++] = *key;
}

static void proc_row(struct io_state *st, struct io_walk *w,
		     const struct io_key *key, const struct io_stats *sum)
{
	struct io_row *p;

	if (grow((void **)&w->procs, &w->cap_procs, w->n_procs,
		 sizeof(*w->procs)))
		return;
	p = &w->procs[w->n_procs++];
	memset(p, 0, sizeof(*p));
	p->dev = key->dev;
	p->op = key->op;
	p->pid = key->tgid;
	snprintf(p->name, sizeof(p->name), "%s",
		 io_dev_cached_name(st, key->dev));
	io_comm_label(p->comm, sum->comm);
	p->st = *sum;
}

/* One key of the stats map, its per-CPU values in `per`. */
static void visit_key(struct io_state *st, struct io_walk *w, bool expire,
		      bool want_rows, const struct io_key *key,
		      const struct io_stats *per)
{
	struct io_stats sum;

	memset(&sum, 0, sizeof(sum));
	for (int c = 0; c < st->ncpu; c++)
		io_stats_add(&sum, &per[c]);
	devop_add(&w->devs, key->dev, key->op, &sum);
	if (expire && proc_expired(st, key->tgid, w->now_ms)) {
		retire(st, w, key, &sum);
		return;
	}
	proc_series(st, key, &sum, false);
	if (want_rows)
		proc_row(st, w, key, &sum);
}

static void walk_stats(struct io_state *st, struct io_walk *w, bool expire,
		       bool want_rows)
{
	int fd = bpf_map__fd(st->skel->maps.stats);
	/* sizeof(struct io_stats) is a multiple of 8 already */
	struct io_stats *per = calloc((size_t)st->ncpu, sizeof(*per));
	struct io_key key, next, *prev = NULL;

	if (!per)
		return;
	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, per) == 0)
			visit_key(st, w, expire, want_rows, &key, per);
	}
	free(per);
	/* Deleting while walking would restart the walk: delete after it. */
	for (size_t i = 0; i < w->n_gone; i++)
		bpf_map_delete_elem(fd, &w->gone[i]);
}

static void dev_series(struct io_state *st, struct io_row *d)
{
	const struct nt_host *h = st->host;
	char devs[24];

	snprintf(d->name, sizeof(d->name), "%s", io_dev_cached_name(st, d->dev));
	const char *lv[] = { io_dev_majmin(d->dev, devs), d->name,
			     io_op_str(d->op) };

	h->metric_set(st->m[IO_M_REQS], lv, (double)d->st.ops);
	h->metric_set(st->m[IO_M_BYTES], lv, (double)d->st.bytes);
	h->metric_set(st->m[IO_M_SMALL], lv, (double)d->st.small_ops);
	hist_set(st, IO_M_QUEUE, lv, d->st.queue_hist, IO_LAT_SLOTS + 1,
		 (double)d->st.queue_ns_sum / 1e9);
	hist_set(st, IO_M_SERVICE, lv, d->st.service_hist, IO_LAT_SLOTS + 1,
		 (double)d->st.service_ns_sum / 1e9);
	hist_set(st, IO_M_SIZE, lv, d->st.size_hist, IO_SIZE_SLOTS + 1,
		 (double)d->st.bytes);
}

/* The device totals as rows, each one's series set. */
static struct io_row *dev_rows(struct io_state *st, struct nt_hmap *devs,
			       size_t *n)
{
	struct io_row *rows = calloc(nt_hmap_count(devs) + 1, sizeof(*rows));
	struct nt_hmap_iter it;

	*n = 0;
	if (!rows)
		return NULL;
	for (nt_hmap_iter_init(&it, devs); nt_hmap_iter_next(&it);) {
		const struct io_devop *k = it.key;
		struct io_row *d = &rows[(*n)++];

		d->dev = k->dev;
		d->op = k->op;
		d->st = *(const struct io_stats *)it.val;
		dev_series(st, d);
	}
	return rows;
}

void io_collect(struct io_state *st, bool expire, struct io_rows *rows)
{
	struct io_walk w = { .now_ms = nt_clock_mono_ns() / NT_NS_PER_MS };
	struct nt_hmap_iter it;
	struct io_row *devs;
	size_t n_devs;

	nt_hmap_init(&w.devs, sizeof(struct io_devop), sizeof(struct io_stats), 0);
	for (nt_hmap_iter_init(&it, &st->retired); nt_hmap_iter_next(&it);) {
		const struct io_devop *k = it.key;

		devop_add(&w.devs, k->dev, k->op, it.val);
	}
	walk_stats(st, &w, expire, rows != NULL);
	free(w.gone);
	if (expire)
		io_dead_prune(st, w.now_ms);
	devs = dev_rows(st, &w.devs, &n_devs);
	nt_hmap_fini(&w.devs);
	if (!rows) {
		free(devs);
		free(w.procs);
		return;
	}
	*rows = (struct io_rows){ .devs = devs, .n_devs = devs ? n_devs : 0,
				  .procs = w.procs, .n_procs = w.n_procs };
}

void io_rows_free(struct io_rows *rows)
{
	free(rows->devs);
	free(rows->procs);
	*rows = (struct io_rows){0};
}

void io_collect_slowest(struct io_state *st)
{
	int fd = bpf_map__fd(st->skel->maps.slowest);
	struct io_slowest_set *per = calloc((size_t)st->ncpu, sizeof(*per));
	uint32_t zero = 0;

	if (!per)
		return;
	if (bpf_map_lookup_elem(fd, &zero, per) == 0) {
		for (int c = 0; c < st->ncpu; c++)
			for (int i = 0; i < IO_SLOW_SLOTS; i++)
				io_slow_offer(&st->slow, &per[c].s[i]);
		memset(per, 0, (size_t)st->ncpu * sizeof(*per));
		bpf_map_update_elem(fd, &zero, per, BPF_ANY);
	}
	free(per);
}
