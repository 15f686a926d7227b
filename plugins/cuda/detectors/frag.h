/* SPDX-License-Identifier: MIT */
/*
 * Fragmentation of one (process, device) address map.
 *
 * Given the live allocations sorted by address, the allocated span runs from
 * the lowest start to the highest end. Every stretch inside the span that no
 * live allocation covers is a hole. Then
 *   free     = sum of hole sizes
 *   largest  = the biggest hole
 *   external = 1 - largest / free          (0 when there is no hole)
 *   score    = 100 * external * min(1, (free / span) / FRAG_FREE_SATURATION)
 * The score is high only when the free memory inside the span is both large
 * (a fair share of the span) and split up (no hole holds most of it).
 * A trend over the last samples (least squares, per second) gives a forecast
 * at a short horizon.
 */
#ifndef CUDA_DET_FRAG_H
#define CUDA_DET_FRAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "allocmap.h"

/* free/span at which the score stops growing with the share of free memory */
#define FRAG_FREE_SATURATION 0.25

/* hole size classes, upper bounds in bytes (last one open) */
#define FRAG_NBUCKETS 6
extern const uint64_t frag_bucket_le[FRAG_NBUCKETS - 1];
extern const char *const frag_bucket_name[FRAG_NBUCKETS];

struct frag_stats {
	uint64_t span_lo, span_hi; /* [lo, hi) */
	uint64_t span;
	uint64_t live_bytes;       /* bytes covered by live allocations */
	uint64_t nlive;
	uint64_t free_bytes;       /* holes inside the span */
	uint64_t largest_hole;
	uint64_t largest_hole_at;  /* its start address */
	uint64_t holes;
	uint64_t hist[FRAG_NBUCKETS]; /* number of holes per size class */
	uint64_t hist_bytes[FRAG_NBUCKETS];
	double external;           /* 0..1 */
	double free_ratio;         /* free / span */
	double score;              /* 0..100 */
	/* set by the caller: the allocator maps pages behind virtual
	 * addresses (cudaMalloc on a real driver), so the holes hold no
	 * memory; changes the reading only */
	bool paged;
};

/* v sorted by ptr (overlaps are tolerated: they count once). */
void frag_compute(const struct amap_entry *v, size_t n, struct frag_stats *s);

/*
 * The address ranges ever allocated in a map (merged, sorted). With it, a
 * hole is only the part of a gap between live allocations that some
 * allocation once covered: address space the allocator never handed out
 * (alignment padding, gaps between the driver's reservations) is not free
 * memory of the process and does not count.
 */
struct frag_used {
	uint64_t *lo, *hi;
	size_t n, cap;
};
void frag_used_init(struct frag_used *u);
void frag_used_fini(struct frag_used *u);
int frag_used_add(struct frag_used *u, uint64_t lo, uint64_t hi);
/* Does [lo, hi) overlap an ever-used range (an allocation reusing freed
 * address space)? */
bool frag_used_overlaps(const struct frag_used *u, uint64_t lo, uint64_t hi);
/* frag_compute restricted to ever-used ranges (u may be NULL). */
void frag_compute_used(const struct amap_entry *v, size_t n,
		       const struct frag_used *u, struct frag_stats *s);

enum frag_level { FRAG_NONE = 0, FRAG_LOW, FRAG_MODERATE, FRAG_HIGH };
enum frag_level frag_level_of(double score);
const char *frag_level_name(enum frag_level l);
/* One sentence saying what the numbers mean for the user. */
const char *frag_reading(const struct frag_stats *s, char *buf, size_t len);

/* Trend over the last FRAG_TREND_N samples. */
#define FRAG_TREND_N 16
struct frag_trend {
	uint64_t ts[FRAG_TREND_N];
	double score[FRAG_TREND_N];
	double external[FRAG_TREND_N];
	uint32_t head, n;
};

struct frag_forecast {
	double slope_per_s;   /* score points per second */
	double forecast;      /* score at now + horizon, clamped 0..100 */
	double horizon_s;
	uint32_t samples;
	const char *direction; /* "rising", "falling", "stable", "unknown" */
};

void frag_trend_add(struct frag_trend *t, uint64_t ts_ns, double score,
		    double external);
void frag_trend_forecast(const struct frag_trend *t, double horizon_s,
			 struct frag_forecast *f);

#endif
