/* SPDX-License-Identifier: MIT */
#include "frag.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "det_util.h"

const uint64_t frag_bucket_le[FRAG_NBUCKETS - 1] = {
	64ULL << 10, 1ULL << 20, 16ULL << 20, 256ULL << 20, 1ULL << 30,
};
const char *const frag_bucket_name[FRAG_NBUCKETS] = {
	"<=64KiB", "<=1MiB", "<=16MiB", "<=256MiB", "<=1GiB", ">1GiB",
};

static unsigned bucket_of(uint64_t sz)
{
	unsigned b = 0;

	while (b < FRAG_NBUCKETS - 1 && sz > frag_bucket_le[b])
		b++;
	return b;
}

void frag_used_init(struct frag_used *u)
{
	memset(u, 0, sizeof(*u));
}

void frag_used_fini(struct frag_used *u)
{
	free(u->lo);
	free(u->hi);
	memset(u, 0, sizeof(*u));
}

/* first index whose hi >= lo (ranges sorted, disjoint, not touching) */
static size_t used_find(const struct frag_used *u, uint64_t lo)
{
	size_t a = 0, b = u->n;

	while (a < b) {
		size_t m = (a + b) / 2;

		if (u->hi[m] < lo)
			a = m + 1;
		else
			b = m;
	}
	return a;
}

int frag_used_add(struct frag_used *u, uint64_t lo, uint64_t hi)
{
	size_t i, j;

	if (hi <= lo)
		return 0;
	i = used_find(u, lo);
	/* ranges i..j-1 touch or overlap [lo, hi) */
	j = i;
	while (j < u->n && u->lo[j] <= hi)
		j++;
	if (j > i) {
		if (u->lo[i] < lo)
			lo = u->lo[i];
		if (u->hi[j - 1] > hi)
			hi = u->hi[j - 1];
		u->lo[i] = lo;
		u->hi[i] = hi;
		memmove(&u->lo[i + 1], &u->lo[j], (u->n - j) * sizeof(*u->lo));
		memmove(&u->hi[i + 1], &u->hi[j], (u->n - j) * sizeof(*u->hi));
		u->n -= j - i - 1;
		return 0;
	}
	if (u->n == u->cap) {
		size_t nc = u->cap ? u->cap * 2 : 64;
		uint64_t *nl = realloc(u->lo, nc * sizeof(*nl)), *nh;

		if (!nl)
			return -ENOMEM;
		u->lo = nl;
		nh = realloc(u->hi, nc * sizeof(*nh));
		if (!nh)
			return -ENOMEM;
		u->hi = nh;
		u->cap = nc;
	}
	memmove(&u->lo[i + 1], &u->lo[i], (u->n - i) * sizeof(*u->lo));
	memmove(&u->hi[i + 1], &u->hi[i], (u->n - i) * sizeof(*u->hi));
	u->lo[i] = lo;
	u->hi[i] = hi;
	u->n++;
	return 0;
}

bool frag_used_overlaps(const struct frag_used *u, uint64_t lo, uint64_t hi)
{
	size_t i = used_find(u, lo + 1); /* first range with hi > lo */

	return hi > lo && i < u->n && u->lo[i] < hi;
}

static void add_hole(struct frag_stats *s, uint64_t at, uint64_t h)
{
	unsigned k = bucket_of(h);

	s->holes++;
	s->free_bytes += h;
	s->hist[k]++;
	s->hist_bytes[k] += h;
	if (h > s->largest_hole) {
		s->largest_hole = h;
		s->largest_hole_at = at;
	}
}

/* the gap [a, b): whole, or its pieces inside ever-used ranges */
static void add_gap(struct frag_stats *s, const struct frag_used *u, uint64_t a,
		    uint64_t b)
{
	if (!u) {
		add_hole(s, a, b - a);
		return;
	}
	for (size_t i = used_find(u, a + 1); i < u->n && u->lo[i] < b; i++) {
		uint64_t lo = u->lo[i] > a ? u->lo[i] : a;
		uint64_t hi = u->hi[i] < b ? u->hi[i] : b;

		if (hi > lo)
			add_hole(s, lo, hi - lo);
	}
}

void frag_compute_used(const struct amap_entry *v, size_t n,
		       const struct frag_used *u, struct frag_stats *s)
{
	uint64_t end, gaps = 0;

	memset(s, 0, sizeof(*s));
	s->nlive = n;
	if (!n)
		return;
	s->span_lo = v[0].ptr;
	end = v[0].ptr + v[0].size;
	s->live_bytes = v[0].size;
	for (size_t i = 1; i < n; i++) {
		uint64_t a = v[i].ptr, b = v[i].ptr + v[i].size;

		if (a > end) {
			add_gap(s, u, end, a);
			gaps += a - end;
			s->live_bytes += b - a;
			end = b;
		} else if (b > end) { /* overlap: count the new part only */
			s->live_bytes += b - end;
			end = b;
		}
	}
	s->span_hi = end;
	/* never-used address space is not part of the span either */
	s->span = end - s->span_lo - (gaps - s->free_bytes);
	if (s->free_bytes) {
		double sat;

		s->external = 1.0 - (double)s->largest_hole / (double)s->free_bytes;
		s->free_ratio = (double)s->free_bytes / (double)s->span;
		sat = s->free_ratio / FRAG_FREE_SATURATION;
		if (sat > 1.0)
			sat = 1.0;
		s->score = 100.0 * s->external * sat;
	}
}

void frag_compute(const struct amap_entry *v, size_t n, struct frag_stats *s)
{
	frag_compute_used(v, n, NULL, s);
}

enum frag_level frag_level_of(double score)
{
	if (score >= 70.0)
		return FRAG_HIGH;
	if (score >= 30.0)
		return FRAG_MODERATE;
	if (score > 0.0)
		return FRAG_LOW;
	return FRAG_NONE;
}

const char *frag_level_name(enum frag_level l)
{
	switch (l) {
	case FRAG_HIGH: return "high";
	case FRAG_MODERATE: return "moderate";
	case FRAG_LOW: return "low";
	default: return "none";
	}
}

const char *frag_reading(const struct frag_stats *s, char *buf, size_t len)
{
	char fb[32], lb[32];

	fmt_bytes(s->free_bytes, fb, sizeof(fb));
	fmt_bytes(s->largest_hole, lb, sizeof(lb));
	if (s->paged && s->holes) {
		snprintf(buf, len,
			 "%s (address space only): %s of freed addresses in %llu "
			 "holes, largest %s; the driver maps pages behind "
			 "addresses, so these holes hold no memory and do not "
			 "make large allocations fail",
			 frag_level_name(frag_level_of(s->score)), fb,
			 (unsigned long long)s->holes, lb);
		return buf;
	}
	switch (frag_level_of(s->score)) {
	case FRAG_HIGH:
		snprintf(buf, len,
			 "high: %s free in %llu holes but the largest is %s: "
			 "large allocations will fail although enough memory is free",
			 fb, (unsigned long long)s->holes, lb);
		break;
	case FRAG_MODERATE:
		snprintf(buf, len,
			 "moderate: %s free in %llu holes, largest %s; requests "
			 "above %s need fresh memory",
			 fb, (unsigned long long)s->holes, lb, lb);
		break;
	case FRAG_LOW:
		snprintf(buf, len,
			 "low: free space inside the span is mostly contiguous "
			 "(largest hole %s of %s free)", lb, fb);
		break;
	default:
		snprintf(buf, len, "none: no free holes inside the allocated span");
	}
	return buf;
}

void frag_trend_add(struct frag_trend *t, uint64_t ts_ns, double score,
		    double external)
{
	t->ts[t->head] = ts_ns;
	t->score[t->head] = score;
	t->external[t->head] = external;
	t->head = (t->head + 1) % FRAG_TREND_N;
	if (t->n < FRAG_TREND_N)
		t->n++;
}

void frag_trend_forecast(const struct frag_trend *t, double horizon_s,
			 struct frag_forecast *f)
{
	double sx = 0, sy = 0, sxx = 0, sxy = 0, x0, last = 0, den;
	uint32_t first = (t->head + FRAG_TREND_N - t->n) % FRAG_TREND_N;

	memset(f, 0, sizeof(*f));
	f->horizon_s = horizon_s;
	f->samples = t->n;
	f->direction = "unknown";
	if (t->n == 0)
		return;
	x0 = (double)t->ts[first];
	for (uint32_t k = 0; k < t->n; k++) {
		uint32_t i = (first + k) % FRAG_TREND_N;
		double x = ((double)t->ts[i] - x0) / 1e9, y = t->score[i];

		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
		last = y;
	}
	f->forecast = last;
	if (t->n < 3)
		return;
	den = (double)t->n * sxx - sx * sx;
	if (den <= 0)
		return;
	f->slope_per_s = ((double)t->n * sxy - sx * sy) / den;
	f->forecast = last + f->slope_per_s * horizon_s;
	if (f->forecast < 0)
		f->forecast = 0;
	if (f->forecast > 100)
		f->forecast = 100;
	if (f->slope_per_s * horizon_s > 5.0)
		f->direction = "rising";
	else if (f->slope_per_s * horizon_s < -5.0)
		f->direction = "falling";
	else
		f->direction = "stable";
}
