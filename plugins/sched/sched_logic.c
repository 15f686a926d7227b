/* SPDX-License-Identifier: MIT */
/* sched probe: pure user-side logic (see sched_logic.h). */
#include "sched_logic.h"

#include "ntcore/kit/sb.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sched_totals_from(const struct sched_tstat *s, uint64_t now,
		       uint64_t se_now, struct sched_totals *out)
{
	__u64 on, off;

	sched_acct_now(s, now, se_now, &on, &off);
	out->on_ns = on;
	out->off_ns = off;
	out->runq_ns = s->runq_ns;
	out->runq_n = s->runq_count;
	out->vol = s->vol;
	out->invol = s->invol;
	out->migr = s->migrations;
	out->wake = s->wakeups;
}

static uint64_t adv(uint64_t *last, uint64_t cur)
{
	uint64_t d;

	if (cur <= *last)
		return 0;
	d = cur - *last;
	*last = cur;
	return d;
}

bool sched_totals_advance(struct sched_totals *last,
			  const struct sched_totals *cur,
			  struct sched_totals *d)
{
	d->on_ns = adv(&last->on_ns, cur->on_ns);
	d->off_ns = adv(&last->off_ns, cur->off_ns);
	d->runq_ns = adv(&last->runq_ns, cur->runq_ns);
	d->runq_n = adv(&last->runq_n, cur->runq_n);
	d->vol = adv(&last->vol, cur->vol);
	d->invol = adv(&last->invol, cur->invol);
	d->migr = adv(&last->migr, cur->migr);
	d->wake = adv(&last->wake, cur->wake);
	return d->on_ns || d->off_ns || d->runq_ns || d->runq_n || d->vol ||
	       d->invol || d->migr || d->wake;
}

/* ---- table --------------------------------------------------------- */

/* The kit's map with 4-byte keys and pointer values: the threads and
 * processes themselves are allocated apart, so pointers to them stay
 * valid while the table grows. */
int sched_map_init(struct sched_map *m, size_t hint)
{
	(void)hint; /* the kit's map sizes itself on the first put */
	return nt_hmap_init(&m->map, sizeof(uint32_t), sizeof(void *), 0);
}

void *sched_map_get(const struct sched_map *m, uint32_t key)
{
	void **v = nt_hmap_get(&m->map, &key);

	return v ? *v : NULL;
}

int sched_map_put(struct sched_map *m, uint32_t key, void *val)
{
	void **v = nt_hmap_put(&m->map, &key, NULL);

	if (!v)
		return -ENOMEM;
	*v = val;
	return 0;
}

void *sched_map_del(struct sched_map *m, uint32_t key)
{
	void **v = nt_hmap_get(&m->map, &key);
	void *val;

	if (!v)
		return NULL;
	val = *v;
	nt_hmap_del(&m->map, &key);
	return val;
}

void sched_map_each(const struct sched_map *m, void (*fn)(void *val, void *arg),
		    void *arg)
{
	struct nt_hmap_iter it;

	nt_hmap_iter_init(&it, (struct nt_hmap *)&m->map);
	while (nt_hmap_iter_next(&it))
		fn(*(void **)it.val, arg);
}

void sched_map_fini(struct sched_map *m, void (*free_val)(void *val))
{
	struct nt_hmap_iter it;

	nt_hmap_iter_init(&it, &m->map);
	while (free_val && nt_hmap_iter_next(&it))
		free_val(*(void **)it.val);
	nt_hmap_fini(&m->map);
}

/* ---- histogram ----------------------------------------------------- */

void sched_hist_bounds(double out[SCHED_HIST_BOUNDS])
{
	double us = 2.0;

	for (int i = 0; i < SCHED_HIST_BOUNDS; i++, us *= 2.0)
		out[i] = us * 1e-6;
}

void sched_hist_merge(struct sched_hist *a, const struct sched_hist *b)
{
	for (int i = 0; i < SCHED_HIST_SLOTS; i++)
		a->slots[i] += b->slots[i];
	a->sum_ns += b->sum_ns;
}

uint64_t sched_hist_count(const struct sched_hist *h)
{
	uint64_t n = 0;

	for (int i = 0; i < SCHED_HIST_SLOTS; i++)
		n += h->slots[i];
	return n;
}

double sched_hist_quantile(const struct sched_hist *h, double q)
{
	uint64_t n = sched_hist_count(h), acc = 0, rank;
	double bounds[SCHED_HIST_BOUNDS];

	if (!n)
		return 0;
	if (q < 0)
		q = 0;
	if (q > 1)
		q = 1;
	rank = (uint64_t)(q * (double)n + 0.5);
	if (rank < 1)
		rank = 1;
	sched_hist_bounds(bounds);
	for (int i = 0; i < SCHED_HIST_SLOTS; i++) {
		acc += h->slots[i];
		if (acc >= rank)
			return i < SCHED_HIST_BOUNDS
				       ? bounds[i]
				       : bounds[SCHED_HIST_BOUNDS - 1] * 2;
	}
	return bounds[SCHED_HIST_BOUNDS - 1] * 2;
}

/* ---- top threads --------------------------------------------------- */

static bool row_before(const struct sched_row *a, const struct sched_row *b)
{
	if (a->t.on_ns != b->t.on_ns)
		return a->t.on_ns > b->t.on_ns;
	return a->tid < b->tid;
}

bool sched_top_keep(struct sched_row *rows, size_t *n, size_t cap,
		    const struct sched_row *r)
{
	size_t worst = 0;

	if (!cap)
		return false;
	if (*n < cap) {
		rows[(*n)++] = *r;
		return true;
	}
	for (size_t i = 1; i < *n; i++)
		if (row_before(&rows[worst], &rows[i]))
			worst = i;
	if (!row_before(r, &rows[worst]))
		return false;
	rows[worst] = *r;
	return true;
}

static int row_cmp(const void *a, const void *b)
{
	const struct sched_row *x = a, *y = b;

	if (row_before(x, y))
		return -1;
	if (row_before(y, x))
		return 1;
	return 0;
}

void sched_rows_sort(struct sched_row *rows, size_t n)
{
	if (n > 1)
		qsort(rows, n, sizeof(*rows), row_cmp);
}

/* The report is built whole in a builder of the kit's and copied into
 * buf, cut to cap - 1 bytes when longer (the summary prints what fits). */
size_t sched_report_format(char *buf, size_t cap, const struct sched_row *rows,
			   size_t n, size_t top_n, const struct sched_hist *all,
			   double elapsed_s, uint64_t threads_seen)
{
	uint64_t waits = all ? sched_hist_count(all) : 0;
	struct nt_sb o;
	size_t len;

	if (!cap)
		return 0;
	nt_sb_init(&o, 1u << 24);
	nt_sb_printf(&o, "sched: %llu threads seen in %.1f s",
		     (unsigned long long)threads_seen, elapsed_s);
	if (waits)
		nt_sb_printf(&o, "; run-queue wait: %llu waits, avg %.1f us, p50 <= %.0f us, p99 <= %.0f us",
			     (unsigned long long)waits,
			     (double)all->sum_ns / (double)waits / 1e3,
			     sched_hist_quantile(all, 0.50) * 1e6,
			     sched_hist_quantile(all, 0.99) * 1e6);
	nt_sb_printf(&o, "\n%7s %7s %-16s %10s %10s %9s %9s %9s %7s\n", "PID", "TID",
		     "COMM", "ONCPU_s", "OFFCPU_s", "RUNQ_us", "VCSW", "ICSW", "MIGR");
	for (size_t i = 0; i < n && i < top_n; i++) {
		const struct sched_row *r = &rows[i];
		double runq_avg = r->t.runq_n ? (double)r->t.runq_ns /
							(double)r->t.runq_n / 1e3
					      : 0;

		nt_sb_printf(&o, "%7u %7u %-16.16s %10.3f %10.3f %9.1f %9llu %9llu %7llu%s\n",
			     r->pid, r->tid, r->comm, (double)r->t.on_ns / 1e9,
			     (double)r->t.off_ns / 1e9, runq_avg,
			     (unsigned long long)r->t.vol,
			     (unsigned long long)r->t.invol,
			     (unsigned long long)r->t.migr, r->exited ? " (exited)" : "");
	}
	len = o.len < cap ? o.len : cap - 1;
	memcpy(buf, nt_sb_str(&o), len);
	buf[len] = '\0';
	nt_sb_fini(&o);
	return len;
}
