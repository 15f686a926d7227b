/* SPDX-License-Identifier: MIT */
/*
 * Online leak estimator for one (process, device).
 *
 * Time is cut into windows of `window_ns`. At the end of each window the live
 * bytes are read; a window "grows" when that value exceeds the high-water
 * mark of every earlier window end by more than `noise_bytes`. Over the last
 * n = `windows` windows, s of which grew, Laplace's rule of succession gives
 * the probability that the next window grows too: p = (s + 1) / (n + 2).
 * An alert is due when p >= threshold and the high-water mark rose by at
 * least `min_growth` bytes over those n windows.
 *
 * Why the high-water mark and not "above the previous window": a caching
 * allocator (PyTorch) rises and falls in a saw-tooth that returns to the
 * same peak every cycle; compared against the previous window every rise
 * would count as growth, compared against the peak only new memory does.
 */
#ifndef CUDA_DET_LEAK_H
#define CUDA_DET_LEAK_H

#include <stdbool.h>
#include <stdint.h>

#define LEAK_MAX_WINDOWS 256

struct leak_cfg {
	uint64_t window_ns;
	uint32_t windows;   /* n, 2..LEAK_MAX_WINDOWS */
	double threshold;   /* probability in (0, 1) */
	uint64_t min_growth; /* bytes over the n windows */
	uint64_t noise_bytes;
};

struct leak_est {
	struct leak_cfg cfg;
	bool started;
	uint64_t win_end_ns;      /* end of the current window */
	uint64_t hw;              /* high-water mark of window ends so far */
	/* ring of the last `windows` closed windows */
	uint8_t grew[LEAK_MAX_WINDOWS];
	uint64_t hw_after[LEAK_MAX_WINDOWS]; /* high-water after each window */
	uint32_t head, filled;
	uint64_t hw_before_ring;  /* high-water before the oldest window kept */
	uint64_t closed;          /* windows closed in all */
	uint64_t alerted_hw;      /* high-water when the last alert fired */
	uint64_t alerted_at;      /* `closed` when it fired */
	bool alerted;
};

struct leak_reading {
	uint32_t n, s;
	double p;
	uint64_t growth;   /* high-water rise over the n windows */
	uint64_t hw;
	double rate_bps;   /* growth / (n * window) in bytes per second */
};

void leak_init(struct leak_est *e, const struct leak_cfg *cfg);
/* Feeds the live bytes at time now_ns (monotonic); closes every window that
 * ended before now. Returns the number of windows closed. */
uint32_t leak_sample(struct leak_est *e, uint64_t now_ns, uint64_t live);
void leak_read(const struct leak_est *e, struct leak_reading *r);
/* True when an alert is due now; marks it as fired. After an alert the
 * next one needs the high-water mark to have doubled (and at least
 * min_growth more) and n more windows: one alert per leak, then one per
 * doubling, not one per window. */
bool leak_check(struct leak_est *e, struct leak_reading *r);

#endif
