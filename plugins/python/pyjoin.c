// SPDX-License-Identifier: MIT
/* ntcore python probe: the CUDA join's decision (see pyjoin.h). */
#include "pyjoin.h"

void pyj_note(struct pyj_hist *h, uint64_t ts, uint32_t stack, unsigned kind)
{
	struct pyj_point *p = &h->p[h->n % PYJ_POINTS];

	p->ts = ts;
	p->stack = stack;
	p->kind = kind;
	h->n++;
}

static uint32_t kept(const struct pyj_hist *h)
{
	return h->n < PYJ_POINTS ? h->n : PYJ_POINTS;
}

const struct pyj_point *pyj_before(const struct pyj_hist *h, uint64_t t,
				   unsigned kinds)
{
	const struct pyj_point *best = NULL;

	if (!h)
		return NULL;
	/* not in ts order when records of several CPUs interleave: scan all */
	for (uint32_t i = 0; i < kept(h); i++) {
		const struct pyj_point *p = &h->p[i];

		if ((p->kind & kinds) && p->ts <= t && (!best || p->ts > best->ts))
			best = p;
	}
	return best;
}

const struct pyj_point *pyj_after(const struct pyj_hist *h, uint64_t t,
				  unsigned kinds)
{
	const struct pyj_point *best = NULL;

	if (!h)
		return NULL;
	for (uint32_t i = 0; i < kept(h); i++) {
		const struct pyj_point *p = &h->p[i];

		if ((p->kind & kinds) && p->ts > t && (!best || p->ts < best->ts))
			best = p;
	}
	return best;
}

int pyj_off_at(const struct py_offhist *h, uint64_t cur_out,
	       bool cur_preempted, uint64_t read_ns, uint64_t t, uint64_t *start)
{
	uint64_t oldest = UINT64_MAX;
	uint32_t n;

	if (t > read_ns)
		return -1;
	if (cur_out && cur_out <= t) {
		*start = cur_out;
		return cur_preempted ? 0 : 1;
	}
	n = h ? (h->pos < PY_OFFHIST ? h->pos : PY_OFFHIST) : 0;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = (h->pos - 1 - k) % PY_OFFHIST;

		if (h->out[i] <= t && t < h->in[i]) {
			*start = h->out[i];
			return (h->preempted[i / 64] >> (i % 64)) & 1 ? 0 : 1;
		}
		if (h->out[i] < oldest)
			oldest = h->out[i];
	}
	if (cur_out && cur_out < oldest)
		oldest = cur_out;
	/* between the oldest period kept and the read, not in any: running */
	return oldest != UINT64_MAX && t >= oldest ? 0 : -1;
}

void pyj_join(uint32_t pid, uint32_t tid, uint64_t t,
	      const struct pyj_hist *own, bool own_python,
	      const struct pyj_thread *thr, size_t n, pyj_off_fn off, void *arg,
	      const struct pyj_limits *lim, struct pyj_result *r)
{
	const struct pyj_point *p, *best = NULL;

	r->how = PYJ_NONE;
	r->why = PYJ_WHY_OK;
	r->stack = UINT32_MAX;
	r->donor = 0;
	p = pyj_before(own, t, PYJ_CPU);
	if (p && t - p->ts < lim->own_max_ns) {
		r->how = PYJ_OWN;
		r->stack = p->stack;
		return;
	}
	p = pyj_after(own, t, PYJ_CPU);
	if (p && p->ts - t < lim->period_ns) {
		r->how = PYJ_OWN_AFTER;
		r->stack = p->stack;
		return;
	}
	r->why = PYJ_WHY_PYTHON;
	if (own_python || (own && own->n) || !off)
		return;
	r->why = PYJ_WHY_NODONOR;
	for (size_t i = 0; i < n; i++) {
		uint64_t start = 0;
		int o;

		if (thr[i].pid != pid || thr[i].tid == tid || !thr[i].h)
			continue;
		p = pyj_before(thr[i].h, t, PYJ_IDLE);
		if (!p || (best && p->ts <= best->ts))
			continue;
		o = off(arg, thr[i].tid, t, &start);
		if (o != 1) {
			if (!best && r->why < PYJ_WHY_RUNNING)
				r->why = o < 0 ? PYJ_WHY_UNKNOWN : PYJ_WHY_RUNNING;
			continue;
		}
		/* the walk of this off-CPU period, or one it skipped as less
		 * than a period after the previous walk; an older walk means
		 * this period's own walk found no Python frame */
		if (p->ts + lim->period_ns <= start) {
			if (!best)
				r->why = PYJ_WHY_NOWALK;
			continue;
		}
		r->why = PYJ_WHY_OK;
		best = p;
		r->how = PYJ_CROSS;
		r->stack = p->stack;
		r->donor = thr[i].tid;
	}
}
