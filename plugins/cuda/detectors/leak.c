/* SPDX-License-Identifier: MIT */
#include "leak.h"

#include <string.h>

void leak_init(struct leak_est *e, const struct leak_cfg *cfg)
{
	memset(e, 0, sizeof(*e));
	e->cfg = *cfg;
	if (e->cfg.windows < 2)
		e->cfg.windows = 2;
	if (e->cfg.windows > LEAK_MAX_WINDOWS)
		e->cfg.windows = LEAK_MAX_WINDOWS;
	if (!e->cfg.window_ns)
		e->cfg.window_ns = 1000000000ULL;
}

static void close_window(struct leak_est *e, uint64_t live)
{
	uint32_t n = e->cfg.windows;
	uint8_t grew = 0;

	if (e->closed == 0) {
		/* the first window has no earlier level to compare with: its
		 * end is the baseline */
		e->hw = live;
		e->hw_before_ring = live;
		e->closed = 1;
		return;
	}
	if (live > e->hw + e->cfg.noise_bytes)
		grew = 1;
	if (live > e->hw)
		e->hw = live;
	if (e->filled == n) {
		/* the oldest window leaves the ring */
		e->hw_before_ring = e->hw_after[e->head];
	} else {
		e->filled++;
	}
	e->grew[e->head] = grew;
	e->hw_after[e->head] = e->hw;
	e->head = (e->head + 1) % n;
	e->closed++;
}

uint32_t leak_sample(struct leak_est *e, uint64_t now_ns, uint64_t live)
{
	uint32_t k = 0;

	if (!e->started) {
		e->started = true;
		e->win_end_ns = now_ns + e->cfg.window_ns;
		return 0;
	}
	while (now_ns >= e->win_end_ns) {
		close_window(e, live);
		e->win_end_ns += e->cfg.window_ns;
		k++;
		/* after a long gap (stopped process) close at most a full ring */
		if (k > e->cfg.windows + 1) {
			while (now_ns >= e->win_end_ns)
				e->win_end_ns += e->cfg.window_ns;
			break;
		}
	}
	return k;
}

void leak_read(const struct leak_est *e, struct leak_reading *r)
{
	memset(r, 0, sizeof(*r));
	r->n = e->filled;
	for (uint32_t i = 0; i < e->filled; i++)
		r->s += e->grew[i];
	r->p = (double)(r->s + 1) / (double)(r->n + 2);
	r->hw = e->hw;
	r->growth = e->hw - e->hw_before_ring;
	if (r->n)
		r->rate_bps = (double)r->growth /
			      ((double)r->n * (double)e->cfg.window_ns / 1e9);
}

bool leak_check(struct leak_est *e, struct leak_reading *r)
{
	leak_read(e, r);
	if (r->n < e->cfg.windows || r->p < e->cfg.threshold ||
	    r->growth < e->cfg.min_growth)
		return false;
	if (e->alerted && (r->hw < 2 * e->alerted_hw ||
			   r->hw < e->alerted_hw + e->cfg.min_growth ||
			   e->closed - e->alerted_at < e->cfg.windows))
		return false;
	e->alerted = true;
	e->alerted_hw = r->hw;
	e->alerted_at = e->closed;
	return true;
}
