/* SPDX-License-Identifier: MIT */
/* sched probe: pure user-side logic (see sched_logic.h). */
#include "sched_logic.h"

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

static size_t slot_of(const struct sched_map *m, uint32_t key)
{
	return (size_t)((key * 2654435761u) & (m->nb - 1));
}

int sched_map_init(struct sched_map *m, size_t hint)
{
	size_t nb = 16;

	while (nb < hint)
		nb <<= 1;
	m->b = calloc(nb, sizeof(*m->b));
	if (!m->b)
		return -ENOMEM;
	m->nb = nb;
	m->n = 0;
	return 0;
}

void *sched_map_get(const struct sched_map *m, uint32_t key)
{
	for (struct sched_map_ent *e = m->b[slot_of(m, key)]; e; e = e->next)
		if (e->key == key)
			return e->val;
	return NULL;
}

static void grow(struct sched_map *m)
{
	struct sched_map old = *m;
	struct sched_map_ent **nb = calloc(old.nb * 2, sizeof(*nb));

	if (!nb)
		return; /* keep the longer chains */
	m->b = nb;
	m->nb = old.nb * 2;
	for (size_t i = 0; i < old.nb; i++) {
		struct sched_map_ent *e = old.b[i], *next;

		for (; e; e = next) {
			size_t s = slot_of(m, e->key);

			next = e->next;
			e->next = m->b[s];
			m->b[s] = e;
		}
	}
	free(old.b);
}

int sched_map_put(struct sched_map *m, uint32_t key, void *val)
{
	size_t s = slot_of(m, key);
	struct sched_map_ent *e;

	for (e = m->b[s]; e; e = e->next)
		if (e->key == key) {
			e->val = val;
			return 0;
		}
	e = malloc(sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->key = key;
	e->val = val;
	e->next = m->b[s];
	m->b[s] = e;
	if (++m->n > m->nb * 2)
		grow(m);
	return 0;
}

void *sched_map_del(struct sched_map *m, uint32_t key)
{
	struct sched_map_ent **pp = &m->b[slot_of(m, key)];

	for (; *pp; pp = &(*pp)->next)
		if ((*pp)->key == key) {
			struct sched_map_ent *e = *pp;
			void *val = e->val;

			*pp = e->next;
			free(e);
			m->n--;
			return val;
		}
	return NULL;
}

void sched_map_each(const struct sched_map *m, void (*fn)(void *val, void *arg),
		    void *arg)
{
	for (size_t i = 0; i < m->nb; i++)
		for (struct sched_map_ent *e = m->b[i]; e; e = e->next)
			fn(e->val, arg);
}

void sched_map_fini(struct sched_map *m, void (*free_val)(void *val))
{
	if (!m->b)
		return;
	for (size_t i = 0; i < m->nb; i++) {
		struct sched_map_ent *e = m->b[i], *next;

		for (; e; e = next) {
			next = e->next;
			if (free_val)
				free_val(e->val);
			free(e);
		}
	}
	free(m->b);
	m->b = NULL;
	m->nb = m->n = 0;
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

struct out {
	char *buf;
	size_t cap, len;
};

__attribute__((format(printf, 2, 3))) static void put(struct out *o,
						      const char *fmt, ...)
{
	va_list ap;
	int k;

	if (o->len + 1 >= o->cap)
		return;
	va_start(ap, fmt);
	k = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (k < 0)
		return;
	o->len += (size_t)k;
	if (o->len >= o->cap)
		o->len = o->cap - 1;
}

size_t sched_report_format(char *buf, size_t cap, const struct sched_row *rows,
			   size_t n, size_t top_n, const struct sched_hist *all,
			   double elapsed_s, uint64_t threads_seen)
{
	struct out o = { buf, cap, 0 };
	uint64_t waits = all ? sched_hist_count(all) : 0;

	if (!cap)
		return 0;
	buf[0] = '\0';
	put(&o, "sched: %llu threads seen in %.1f s",
	    (unsigned long long)threads_seen, elapsed_s);
	if (waits)
		put(&o, "; run-queue wait: %llu waits, avg %.1f us, p50 <= %.0f us, p99 <= %.0f us",
		    (unsigned long long)waits,
		    (double)all->sum_ns / (double)waits / 1e3,
		    sched_hist_quantile(all, 0.50) * 1e6,
		    sched_hist_quantile(all, 0.99) * 1e6);
	put(&o, "\n%7s %7s %-16s %10s %10s %9s %9s %9s %7s\n", "PID", "TID",
	    "COMM", "ONCPU_s", "OFFCPU_s", "RUNQ_us", "VCSW", "ICSW", "MIGR");
	for (size_t i = 0; i < n && i < top_n; i++) {
		const struct sched_row *r = &rows[i];
		double runq_avg = r->t.runq_n ? (double)r->t.runq_ns /
							(double)r->t.runq_n / 1e3
					      : 0;

		put(&o, "%7u %7u %-16.16s %10.3f %10.3f %9.1f %9llu %9llu %7llu%s\n",
		    r->pid, r->tid, r->comm, (double)r->t.on_ns / 1e9,
		    (double)r->t.off_ns / 1e9, runq_avg,
		    (unsigned long long)r->t.vol,
		    (unsigned long long)r->t.invol,
		    (unsigned long long)r->t.migr, r->exited ? " (exited)" : "");
	}
	return o.len;
}
