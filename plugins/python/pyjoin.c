// SPDX-License-Identifier: MIT
/* ntcore python probe: the CUDA join's decision (see pyjoin.h). */
#include "pyjoin.h"

static uint32_t kept(const struct pyj_hist *h)
{
	return h->n < PYJ_POINTS ? h->n : PYJ_POINTS;
}

/* The i-th kept point, 0 the oldest (PYJ_POINTS divides 2^32: n wraps). */
static struct pyj_point *at(const struct pyj_hist *h, uint32_t i)
{
	return (struct pyj_point *)&h->p[(h->n - kept(h) + i) % PYJ_POINTS];
}

void pyj_note(struct pyj_hist *h, uint64_t ts, uint32_t stack, unsigned kind)
{
	uint32_t k;

	h->n++; /* the newest place; when full, it was the oldest's */
	k = kept(h) - 1;
	/* a record of another CPU may be older than the newest kept */
	while (k > 0 && at(h, k - 1)->ts > ts) {
		*at(h, k) = *at(h, k - 1);
		k--;
	}
	at(h, k)->ts = ts;
	at(h, k)->stack = stack;
	at(h, k)->kind = kind;
}

bool pyj_reaches(const struct pyj_hist *h, uint64_t t)
{
	return !h || h->n <= PYJ_POINTS || at(h, 0)->ts <= t;
}

/* The number of kept points with ts <= t. */
static uint32_t count_upto(const struct pyj_hist *h, uint64_t t)
{
	uint32_t lo = 0, hi = kept(h);

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (at(h, mid)->ts <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

const struct pyj_point *pyj_before(const struct pyj_hist *h, uint64_t t,
				   unsigned kinds)
{
	if (!h)
		return NULL;
	for (uint32_t i = count_upto(h, t); i-- > 0;)
		if (at(h, i)->kind & kinds)
			return at(h, i);
	return NULL;
}

const struct pyj_point *pyj_after(const struct pyj_hist *h, uint64_t t,
				  unsigned kinds)
{
	if (!h)
		return NULL;
	for (uint32_t i = count_upto(h, t); i < kept(h); i++)
		if (at(h, i)->kind & kinds)
			return at(h, i);
	return NULL;
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

int pyj_blocked_in(const struct py_offhist *h, uint64_t cur_out,
		   bool cur_preempted, uint64_t read_ns, uint64_t a, uint64_t b)
{
	uint32_t n = h ? (h->pos < PY_OFFHIST ? h->pos : PY_OFFHIST) : 0;

	if (b > read_ns)
		return -1;
	if (cur_out && !cur_preempted && a < cur_out && cur_out <= b)
		return 1;
	/* newest first: periods are recorded in time order */
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = (h->pos - 1 - k) % PY_OFFHIST;

		if (h->out[i] <= a)
			return 0;
		if (!((h->preempted[i / 64] >> (i % 64)) & 1) && h->out[i] <= b)
			return 1;
	}
	/* periods older than the oldest kept are forgotten once it wrapped */
	return h && h->pos > PY_OFFHIST ? -1 : 0;
}

/* The thread's own point at p, unless it blocked between p and t. */
static bool still_there(uint32_t tid, const struct pyj_point *p, uint64_t t,
			pyj_blocked_fn blocked, void *arg)
{
	uint64_t a = p->ts < t ? p->ts : t, b = p->ts < t ? t : p->ts;

	return !blocked || blocked(arg, tid, a, b) != 1;
}

void pyj_join(uint32_t pid, uint32_t tid, uint64_t t,
	      const struct pyj_hist *own, bool own_python,
	      const struct pyj_thread *thr, size_t n, pyj_off_fn off,
	      pyj_blocked_fn blocked, void *arg, const struct pyj_limits *lim,
	      struct pyj_result *r)
{
	const struct pyj_point *p, *best = NULL;
	bool moved = false;

	r->how = PYJ_NONE;
	r->why = PYJ_WHY_OK;
	r->stack = UINT32_MAX;
	r->donor = 0;
	/* where it ran: on-CPU samples, and walks as it was preempted (its
	 * stack at that moment, where it resumes; under load a thread is
	 * runnable more than running and gets fewer samples than preemptions) */
	p = pyj_before(own, t, PYJ_CPU | PYJ_PREEMPT);
	if (p && t - p->ts < lim->own_max_ns) {
		if (still_there(tid, p, t, blocked, arg)) {
			r->how = PYJ_OWN;
			r->stack = p->stack;
			return;
		}
		moved = true;
	}
	p = pyj_after(own, t, PYJ_CPU | PYJ_PREEMPT);
	if (p && p->ts - t < lim->period_ns) {
		if (still_there(tid, p, t, blocked, arg)) {
			r->how = PYJ_OWN_AFTER;
			r->stack = p->stack;
			return;
		}
		moved = true;
	}
	r->why = moved ? PYJ_WHY_MOVED
		 : own && !pyj_reaches(own, t) ? PYJ_WHY_LATE : PYJ_WHY_PYTHON;
	if (own_python || (own && own->n) || !off)
		return;
	r->why = PYJ_WHY_NODONOR;
	for (size_t i = 0; i < n; i++) {
		uint64_t start = 0;
		int o;

		if (thr[i].pid != pid || thr[i].tid == tid || !thr[i].h)
			continue;
		p = pyj_before(thr[i].h, t, PYJ_IDLE);
		if (!p && !best && r->why == PYJ_WHY_NODONOR && !pyj_reaches(thr[i].h, t))
			r->why = PYJ_WHY_LATE; /* its walk at t may have been forgotten */
		if (!p || (best && p->ts <= best->ts))
			continue;
		o = off(arg, thr[i].tid, t, &start);
		if (o != 1) {
			/* came further than a forgotten or missing walk */
			if (!best && (r->why < PYJ_WHY_RUNNING || r->why == PYJ_WHY_LATE))
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
